/* SPDX-License-Identifier: MIT */
/* The rdmacpd.conf tests' temp directory and config files (daemon_config_harness.h). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <syslog.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "modcheck.h"
#include "testutil.h"
#include "daemon_config_harness.h"

char *tmpdir;
char conf_path[4200];
char err[2048];

void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

int setup(void **state)
{
	char p[4200];

	tmpdir = tu_mkdtemp();
	/* The parser only checks these are readable files; TLS loads them later. */
	snprintf(p, sizeof(p), "%s/cert.pem", tmpdir);
	write_file(p, "cert\n");
	snprintf(p, sizeof(p), "%s/key.pem", tmpdir);
	write_file(p, "key\n");
	snprintf(p, sizeof(p), "%s/ca.pem", tmpdir);
	write_file(p, "ca\n");
	snprintf(p, sizeof(p), "%s/data", tmpdir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/backup", tmpdir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/other", tmpdir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/data/inner", tmpdir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/data-link", tmpdir);
	assert_int_equal(symlink("data/inner", p), 0);
	snprintf(conf_path, sizeof(conf_path), "%s/rdmacpd.conf", tmpdir);
	return 0;
}

int teardown(void **state)
{
	tu_rmtree(tmpdir);
	free(tmpdir);
	return 0;
}

/* Write the config: "@" in fmt stands for the temp directory. */
void write_conf_raw(const char *body)
{
	char out[65536];
	size_t o = 0;

	for (const char *p = body; *p; p++) {
		if (*p == '@') {
			o += (size_t)snprintf(out + o, sizeof(out) - o, "%s", tmpdir);
		} else {
			out[o++] = *p;
		}
		assert_true(o < sizeof(out) - 1);
	}
	out[o] = '\0';
	write_file(conf_path, out);
}

void write_conf(const char *body)
{
	char buf[65536];

	snprintf(buf, sizeof(buf),
		 "[global]\n"
		 "cert = @/cert.pem\n"
		 "key = @/key.pem\n"
		 "ca = @/ca.pem\n"
		 "%s",
		 body);
	write_conf_raw(buf);
}

struct daemon_config *load_ok(void)
{
	struct daemon_config *c = NULL;
	int r = daemon_config_load(conf_path, &c, err, sizeof(err));

	if (r < 0) {
		fail_msg("unexpected error %d: %s", r, err);
	}
	assert_non_null(c);
	return c;
}

/* Loads the current file, expects failure at line with a message containing word. */
void expect_error(unsigned line, const char *word)
{
	struct daemon_config *c = NULL;
	char prefix[4300];
	int r = daemon_config_load(conf_path, &c, err, sizeof(err));

	if (r >= 0) {
		daemon_config_free(c);
		fail_msg("expected an error at line %u (%s), config loaded", line, word);
	}
	assert_null(c);
	snprintf(prefix, sizeof(prefix), "%s:%u: ", conf_path, line);
	if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, word)) {
		fail_msg("expected \"%s...%s...\", got \"%s\"", prefix, word, err);
	}
	/* One line: it goes into a log as is. */
	assert_null(strchr(err, '\n'));
}
