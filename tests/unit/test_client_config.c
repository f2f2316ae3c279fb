/* SPDX-License-Identifier: MIT */
/*
 * The client's options: the one table behind the command line and the
 * [client] config file (the values' grammars are test_parse.c's).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "client.h"
#include "exitcodes.h"
#include "macro.h"
#include "options.h"
#include "parse.h"
#include "proto/msg.h"
#include "xport.h"

#define KiB (UINT64_C(1024))

/* argv from a string, as the shell would split it (no quoting). */
static int run_options(struct client_opts *o, const char *cmdline)
{
	char *copy = strdup(cmdline), *argv[32], *save = NULL;
	int argc = 0, r;

	assert_non_null(copy);
	argv[argc++] = (char *)"rdmacp";
	for (char *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		assert_true(argc < 31);
		argv[argc++] = t;
	}
	argv[argc] = NULL;
	client_opts_defaults(o);
	r = client_parse_options(argc, argv, o, false);
	free(copy);
	return r;
}

static void test_cli_table_walk(void **state)
{
	struct client_opts o;

	/* Options anywhere, short and long, the --qps alias, T in a size. */
	assert_int_equal(run_options(&o, "-r src1 --qps 4 -P 7000 host:m/ --bwlimit 1T -pv"), 0);
	assert_true(o.recursive);
	assert_true(o.preserve);
	assert_int_equal(o.lanes, 4);
	assert_int_equal(o.port, 7000);
	assert_int_equal(o.bwlimit, UINT64_C(1) << 40);
	assert_int_equal(o.verbose, 1);
	assert_int_equal(optind, 9); /* its two operands moved to the end */
	assert_int_equal(run_options(&o, "--chunk-size 64MiB --progress --poll -l -n --json"), 0);
	assert_int_equal(o.chunk_size, 64u << 20);
	assert_int_equal(o.progress, 1);
	assert_true(o.busy_poll && o.long_listing && o.dry_run && o.json);
	assert_int_equal(run_options(&o, "--tos 106 --ack-timeout 14"), 0);
	assert_int_equal(o.tos, 106);
	assert_int_equal(o.ack_timeout, 14);
	assert_int_equal(run_options(&o, "--tos 256"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--ack-timeout 32"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--progress --no-progress -q"), 0);
	assert_int_equal(o.progress, 0);
	assert_int_equal(o.verbose, -1);
	/* Bad values are usage errors: the grammar of src/parse.h. */
	assert_int_equal(run_options(&o, "--port 0"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--port +7471"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "-P 65536"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--lanes 17"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--chunk-size 3K"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--chunk-size 1T"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--bwlimit 0"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--transport rdma"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--no-such-option"), EXIT_USAGE);
	/* --devices implies verbs, and is refused with --transport tcp. */
	assert_int_equal(run_options(&o, "--devices rxe0,rxe1"), 0);
	assert_int_equal(o.ndevices, 2);
	assert_int_equal(o.transport, XPORT_KIND_VERBS);
	assert_int_equal(run_options(&o, "--devices rxe0 --transport tcp"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--devices rxe0,,rxe1"), EXIT_USAGE);
	/* NAME:PORT as NCCL_IB_HCA and UCX_NET_DEVICES write it; a bad port is a usage error. */
	assert_int_equal(run_options(&o, "--devices mlx5_0:1,mlx5_1:2"), 0);
	assert_int_equal(o.ndevices, 2);
	assert_string_equal(o.devices[1], "mlx5_1:2");
	assert_int_equal(run_options(&o, "--devices mlx5_0:0"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--devices mlx5_0:256"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--devices mlx5_0:"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--devices mlx5_0:1:1"), EXIT_USAGE);
	/* A GID index (with a device: it is one port's entry) and a RoCE version. */
	assert_int_equal(run_options(&o, "--devices mlx5_0:1 --gid-index 3 --roce-version 2"), 0);
	assert_int_equal(o.gid_index, 3);
	assert_int_equal(o.roce_version, 2);
	assert_int_equal(run_options(&o, "--gid-index auto --roce-version auto"), 0);
	assert_int_equal(o.gid_index, -1);
	assert_int_equal(o.roce_version, 0);
	assert_int_equal(run_options(&o, "--gid-index 3"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--devices rxe0 --gid-index 65536"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--devices rxe0 --gid-index -1"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--roce-version 3"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--roce-version v2"), EXIT_USAGE);
	/* Names from a set (parse_enum), exactly as written; durations (parse_duration_ms). */
	assert_int_equal(run_options(&o, "--skip exists --level checksum --compress zstd"), 0);
	assert_int_equal(o.skip, PROTO_OPEN_SKIP_EXISTS);
	assert_int_equal(o.check_level, CHECK_LEVEL_CHECKSUM);
	assert_int_equal(o.plan_compress, PLAN_COMPRESS_ZSTD);
	assert_int_equal(run_options(&o, "--skip none --transport auto"), 0);
	assert_int_equal(o.skip, 0);
	assert_int_equal(o.transport, 0);
	assert_int_equal(run_options(&o, "--skip Quick"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--level exists"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--compress gzip"), EXIT_USAGE);
	assert_int_equal(run_options(&o, "--wait-busy 90s"), 0);
	assert_int_equal(o.wait_busy_ms, 90000);
	assert_int_equal(run_options(&o, "--wait-busy 25h"), EXIT_USAGE);
}

static char *write_config(const char *text)
{
	char *path = strdup("/tmp/rdmacp-test-client-config-XXXXXX");
	int fd;
	FILE *f;

	assert_non_null(path);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static int load_host(struct client_opts *o, const char *text, const char *host, char *err,
		     size_t errlen)
{
	char *path = write_config(text);
	int r;

	client_opts_defaults(o);
	r = client_config_load(o, path, true, host, err, errlen);
	unlink(path);
	free(path);
	return r;
}

static int load(struct client_opts *o, const char *text, char *err, size_t errlen)
{
	return load_host(o, text, NULL, err, errlen);
}

static void test_config_keys_are_options(void **state)
{
	struct client_opts o;
	char err[4400] = "";

	assert_int_equal(load(&o,
			      "[client]\nport = 7000\nlanes = 3\nchunk size = 4M\n"
			      "bwlimit = 500\ndevices = rxe0,mlx5_1\npoll = yes\nprogress = no\n"
			      "connect timeout = 30\ntransport = tcp\n",
			      err, sizeof(err)),
			 0);
	assert_int_equal(o.port, 7000);
	assert_int_equal(o.lanes, 3);
	assert_int_equal(o.chunk_size, 4u << 20);
	assert_int_equal(o.bwlimit, 500 * KiB);
	assert_int_equal(o.ndevices, 2);
	assert_string_equal(o.devices[1], "mlx5_1");
	assert_true(o.busy_poll);
	assert_int_equal(o.progress, 0);
	assert_int_equal(o.connect_timeout_s, 30);
	assert_int_equal(o.transport, XPORT_KIND_TCP);

	/* The same grammar as the command line, and the line of the mistake. */
	assert_int_equal(load(&o, "[client]\nport = 7000\nlanes = 17\n", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, ":3: bad lanes '17': 1..16"));
	assert_int_equal(load(&o, "[client]\npoll = maybe\n", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":2: bad poll 'maybe'"));
	assert_int_equal(load(&o, "[client]\nport = -1\n", err, sizeof(err)), -EINVAL);
	/* Command-line only options are not keys. */
	assert_int_equal(load(&o, "[client]\nrecursive = yes\n", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown key 'recursive'"));
	assert_int_equal(load(&o, "[client]\nqps = 2\n", err, sizeof(err)), -EINVAL);
}

/* [host PATTERN...]: over [client] wherever it stands, the first matching section per key. */
static void test_config_host_sections(void **state)
{
	static const char text[] = "[host data*.example.org other]\nport = 7001\nskip = quick\n"
				   "[client]\nport = 7000\nlanes = 3\nskip = exists\n"
				   "[host *]\nport = 7002\nlanes = 5\ntransport = tcp\n";
	struct client_opts o;
	char err[4400] = "";

	assert_int_equal(load_host(&o, text, "DATA1.example.org", err, sizeof(err)), 0);
	assert_int_equal(o.port, 7001); /* the first match wins */
	assert_int_equal(o.lanes, 5);	/* a later match sets what the first did not */
	assert_int_equal(o.skip, PROTO_OPEN_SKIP_QUICK);
	assert_int_equal(o.transport, XPORT_KIND_TCP);
	assert_int_equal(load_host(&o, text, "other", err, sizeof(err)), 0);
	assert_int_equal(o.port, 7001);
	assert_int_equal(load_host(&o, text, "elsewhere", err, sizeof(err)), 0);
	assert_int_equal(o.port, 7002);
	/* No host (a local command): [client] alone. */
	assert_int_equal(load(&o, text, err, sizeof(err)), 0);
	assert_int_equal(o.port, 7000);
	assert_int_equal(o.lanes, 3);
	assert_int_equal(o.skip, PROTO_OPEN_SKIP_EXISTS);

	/* A bad value is refused in a section that does not match too, with its line. */
	assert_int_equal(
	    load_host(&o, "[host a]\nport = 7001\n[host b]\nlanes = 99\n", "a", err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, ":4: bad lanes '99' in [host b]: 1..16"));
	assert_int_equal(load_host(&o, "[host a]\nrecursive = yes\n", "a", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, ":2: unknown key 'recursive' in [host a]"));
	assert_int_equal(load_host(&o, "[host]\nport = 1\n", "a", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":2: [host] needs a host name"));
	assert_int_equal(load_host(&o, "[hostile]\nport = 1\n", "a", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown section [hostile]"));
}

/*
 * Loads path (must exist), expects r and an error that starts with "path" and
 * holds word. A regression reads /dev/urandom or waits on a FIFO for ever:
 * alarm() fails the test instead.
 */
static void expect_load_error(const char *path, int r, const char *word)
{
	struct client_opts o;
	char err[4400] = "";

	client_opts_defaults(&o);
	alarm(10);
	assert_int_equal(client_config_load(&o, path, true, NULL, err, sizeof(err)), r);
	alarm(0);
	if (strncmp(err, path, strlen(path)) != 0 || !strstr(err, word)) {
		fail_msg("expected \"%s...%s...\", got \"%s\"", path, word, err);
	}
	assert_null(strchr(err, '\n'));
}

/* Only a regular file is a config: a device or a FIFO is refused at once. */
static void test_config_not_regular_file(void **state)
{
	char *dir = tu_mkdtemp();
	char p[4200];

	snprintf(p, sizeof(p), "%s/fifo.conf", dir);
	assert_int_equal(mkfifo(p, 0600), 0);
	expect_load_error(p, -EINVAL, ": not a regular file (it is a FIFO)");
	expect_load_error(dir, -EISDIR, ": not a regular file (it is a directory)");
	if (access("/dev/urandom", R_OK) == 0) {
		expect_load_error("/dev/urandom", -EINVAL,
				  ": not a regular file (it is a character device)");
	}
	if (access("/dev/zero", R_OK) == 0) {
		expect_load_error("/dev/zero", -EINVAL,
				  ": not a regular file (it is a character device)");
	}
	tu_rmtree(dir);
	free(dir);
}

/* A file of text, written as is (it may hold NUL bytes). */
static char *write_config_bytes(const char *text, size_t len)
{
	char *path = strdup("/tmp/rdmacp-test-client-config-XXXXXX");
	int fd;

	assert_non_null(path);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	return path;
}

/* text of size bytes: "[client]\nport = 7000\n", then fill lines of line_len bytes and '\n'. */
static char *padded_config(size_t size, size_t line_len)
{
	static const char head[] = "[client]\nport = 7000\n";
	char *text = malloc(size + 1);
	size_t o = sizeof(head) - 1;

	assert_non_null(text);
	assert_true(o < size);
	memcpy(text, head, o);
	while (o < size) {
		size_t n = MIN(size - o, line_len + 1);

		memset(text + o, '#', n);
		text[o + n - 1] = '\n';
		o += n;
	}
	text[size] = '\0';
	return text;
}

/* At most 1 MiB, as the daemon's (src/conffile.h): 1 MiB loads, one byte more and 2 MiB don't. */
static void test_config_file_size(void **state)
{
	struct client_opts o;
	char err[4400] = "";
	const size_t sizes[] = { 1 << 20, (1 << 20) + 1, 2 << 20 };

	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		char *text = padded_config(sizes[i], 99);
		char *path = write_config_bytes(text, sizes[i]);

		free(text);
		if (i == 0) {
			client_opts_defaults(&o);
			assert_int_equal(client_config_load(&o, path, true, NULL, err, sizeof(err)),
					 0);
			assert_int_equal(o.port, 7000);
		} else {
			expect_load_error(path, -EFBIG, ": file too big (");
		}
		unlink(path);
		free(path);
	}
}

/* "[client]\n", a comment line of n bytes ended by end, "port = 7000\n"; its length in ret_len. */
static char *long_line_config(size_t n, const char *end, size_t *ret_len)
{
	static const char head[] = "[client]\n", tail[] = "port = 7000\n";
	size_t len = strlen(head) + n + strlen(end) + strlen(tail);
	char *text = malloc(len + 1);

	assert_non_null(text);
	strcpy(text, head);
	memset(text + strlen(head), '#', n);
	strcpy(text + strlen(head) + n, end);
	strcat(text, tail);
	*ret_len = len;
	return text;
}

/*
 * Lines of up to 4096 bytes are whole lines: a long value is not cut in two
 * (the old reader cut at 199 bytes), a longer line is refused with its number.
 */
static void test_config_line_length(void **state)
{
	static const char nul_line[] = "[client]\nport = 7000\0 lanes = 3\n";
	struct client_opts o;
	char err[4400] = "";
	char cert[4000], line[4200], *text, *path;
	size_t len;

	/* A certificate path of 3000 bytes. */
	memset(cert, 'c', sizeof(cert));
	cert[0] = '/';
	cert[3000] = '\0';
	snprintf(line, sizeof(line), "[client]\ncert = %s\n", cert);
	assert_int_equal(load(&o, line, err, sizeof(err)), 0);
	assert_string_equal(o.cert, cert);

	/* A comment of exactly 4096 bytes, ended by \r\n, loads, and so does the next line. */
	text = long_line_config(4096, "\r\n", &len);
	path = write_config_bytes(text, len);
	client_opts_defaults(&o);
	assert_int_equal(client_config_load(&o, path, true, NULL, err, sizeof(err)), 0);
	assert_int_equal(o.port, 7000);
	unlink(path);
	free(path);
	free(text);

	text = long_line_config(4097, "\n", &len);
	path = write_config_bytes(text, len);
	expect_load_error(path, -EINVAL, ":2: line too long (4097 bytes, at most 4096)");
	unlink(path);
	free(path);
	free(text);

	text = long_line_config(100 * 1024, "\n", &len);
	path = write_config_bytes(text, len);
	expect_load_error(path, -EINVAL, ":2: line too long (102400 bytes, at most 4096)");
	unlink(path);
	free(path);
	free(text);

	/* A NUL byte would hide the rest of its line. */
	path = write_config_bytes(nul_line, sizeof(nul_line) - 1);
	expect_load_error(path, -EINVAL, ":2: NUL byte in line");
	unlink(path);
	free(path);
}

/* --config /dev/null means no defaults (rdmacp(1)); a missing default config too. */
static void test_config_none(void **state)
{
	struct client_opts o;
	char err[4400] = "";

	client_opts_defaults(&o);
	assert_int_equal(client_config_load(&o, "/dev/null", true, NULL, err, sizeof(err)), 0);
	assert_int_equal(o.port, CLIENT_DEFAULT_PORT);
	assert_int_equal(
	    client_config_load(&o, "/nonexistent/rdmacp/config", false, NULL, err, sizeof(err)), 0);
	expect_load_error("/nonexistent/rdmacp/config", -ENOENT, ": cannot open: ");
}

/* Every key belongs to an option row whose handler takes a value or a boolean. */
static void test_table_shape(void **state)
{
	for (size_t i = 0; i < client_noptions; i++) {
		const struct client_option *opt = &client_options[i];

		assert_true(opt->name || opt->config_key);
		assert_non_null(opt->set);
		assert_true(opt->has_arg == no_argument || opt->has_arg == required_argument);
		if (opt->has_arg == required_argument || opt->config_key) {
			assert_non_null(opt->expect);
		}
		if (opt->config_key) {
			assert_ptr_equal(client_option_by_key(opt->config_key), opt);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cli_table_walk),
		cmocka_unit_test(test_config_keys_are_options),
		cmocka_unit_test(test_config_host_sections),
		cmocka_unit_test(test_config_not_regular_file),
		cmocka_unit_test(test_config_file_size),
		cmocka_unit_test(test_config_line_length),
		cmocka_unit_test(test_config_none),
		cmocka_unit_test(test_table_shape),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
