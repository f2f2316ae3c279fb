/* SPDX-License-Identifier: MIT */
/*
 * The relay child's credentials and end (daemon/serve_relay_child.c): the
 * credential files in sealed memfds (mode 0400, the given owner, close on
 * exec, 'relay certificate' over the daemon's own, a file over the cap
 * refused); the relay client missing; a child
 * that exits or has to be killed, said in words with its exit code.
 */
#include "serve_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exitcodes.h"
#include "testutil.h"

struct fixture {
	char *dir;
	struct daemon_config cfg;
	struct serve_relay rl;
	struct msg_open open;
	struct proto_relay_hop hop;
	char host[8], path[8];
};

static void write_file(const char *path, const char *text, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char path[4200];

	f->dir = tu_mkdtemp();
	const char *names[] = { "server.crt", "server.key", "ca.crt", "relay.crt", "relay.key" };
	for (size_t i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "%s/%s", f->dir, names[i]);
		write_file(path, names[i], strlen(names[i]), 0600);
	}
	snprintf(f->cfg.cert, sizeof(f->cfg.cert), "%s/server.crt", f->dir);
	snprintf(f->cfg.key, sizeof(f->cfg.key), "%s/server.key", f->dir);
	snprintf(f->cfg.ca, sizeof(f->cfg.ca), "%s/ca.crt", f->dir);
	snprintf(f->cfg.relay_client, sizeof(f->cfg.relay_client), "%s/client.sh", f->dir);
	write_file(f->cfg.relay_client, "#!/bin/sh\nexec sleep 10\n", 24, 0755);
	for (size_t i = 0; i < RELAY_CRED_N; i++) {
		f->rl.cred[i] = -1;
	}
	f->rl.sock = -1;
	snprintf(f->host, sizeof(f->host), "h2");
	snprintf(f->path, sizeof(f->path), "m/f");
	f->hop = (struct proto_relay_hop){ .host = f->host, .port = 7471, .path = f->path };
	f->rl.chain.count = 1;
	f->rl.chain.hops = &f->hop;
	f->open = (struct msg_open){ .direction = PROTO_DIR_PUSH, .flags = PROTO_OPEN_RECURSIVE };
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	serve_relay_child_close_creds(&f->rl);
	if (f->rl.sock >= 0) {
		close(f->rl.sock);
	}
	tu_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

/* What a memfd holds, and that nothing can change it. */
static void check_memfd(int fd, const char *want)
{
	char buf[64] = "";
	struct stat st;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, sizeof(buf) - 1, 0), (ssize_t)strlen(want));
	assert_string_equal(buf, want);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0400);
	assert_int_equal(st.st_uid, geteuid());
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(fcntl(fd, F_GET_SEALS),
			 F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
	assert_true(pwrite(fd, "x", 1, 0) < 0);
}

static void test_creds_default(void **state)
{
	struct fixture *f = *state;
	char why[256] = "";

	assert_int_equal(
	    serve_relay_child_prepare(&f->cfg, &f->rl, geteuid(), getegid(), why, sizeof(why)), 0);
	check_memfd(f->rl.cred[RELAY_CRED_CERT], "server.crt");
	check_memfd(f->rl.cred[RELAY_CRED_KEY], "server.key");
	check_memfd(f->rl.cred[RELAY_CRED_CA], "ca.crt");
	assert_string_equal(f->rl.client, f->cfg.relay_client);
}

static void test_creds_relay_identity(void **state)
{
	struct fixture *f = *state;
	char why[256] = "";

	snprintf(f->cfg.relay_cert, sizeof(f->cfg.relay_cert), "%s/relay.crt", f->dir);
	snprintf(f->cfg.relay_key, sizeof(f->cfg.relay_key), "%s/relay.key", f->dir);
	assert_int_equal(
	    serve_relay_child_prepare(&f->cfg, &f->rl, geteuid(), getegid(), why, sizeof(why)), 0);
	check_memfd(f->rl.cred[RELAY_CRED_CERT], "relay.crt");
	check_memfd(f->rl.cred[RELAY_CRED_KEY], "relay.key");
}

static void test_creds_too_big(void **state)
{
	struct fixture *f = *state;
	size_t n = RELAY_CRED_MAX + 1;
	char *big = calloc(1, n), why[256] = "";

	write_file(f->cfg.key, big, n, 0600);
	free(big);
	assert_int_equal(
	    serve_relay_child_prepare(&f->cfg, &f->rl, geteuid(), getegid(), why, sizeof(why)),
	    -EFBIG);
	assert_non_null(strstr(why, "larger than 1 MiB"));
	for (size_t i = 0; i < RELAY_CRED_N; i++) {
		assert_int_equal(f->rl.cred[i], -1);
	}
}

static void test_client_missing(void **state)
{
	struct fixture *f = *state;
	char why[4400] = "";

	unlink(f->cfg.relay_client);
	assert_int_equal(
	    serve_relay_child_prepare(&f->cfg, &f->rl, geteuid(), getegid(), why, sizeof(why)),
	    -ENOENT);
	assert_non_null(strstr(why, "relay client"));
	assert_int_equal(f->rl.cred[RELAY_CRED_KEY], -1);
}

/* The child, started with client.sh as it is written, and its end. */
static void spawn_and_reap(struct fixture *f, const char *script, int wait_ms, char *how,
			   size_t howlen, int *ret_exit)
{
	char why[4400] = "";

	write_file(f->cfg.relay_client, script, strlen(script), 0755);
	assert_int_equal(
	    serve_relay_child_prepare(&f->cfg, &f->rl, geteuid(), getegid(), why, sizeof(why)), 0);
	assert_int_equal(serve_relay_child_spawn(&f->rl, &f->open, why, sizeof(why)), 0);
	assert_true(f->rl.pid > 0);
	assert_true(f->rl.sock >= 0);
	/* The memfds are the child's now. */
	for (size_t i = 0; i < RELAY_CRED_N; i++) {
		assert_int_equal(f->rl.cred[i], -1);
	}
	serve_relay_child_reap(&f->rl, wait_ms, how, howlen, ret_exit);
	assert_int_equal(f->rl.pid, 0);
}

static void test_child_exits(void **state)
{
	struct fixture *f = *state;
	char how[128];
	int code = -1;

	spawn_and_reap(f, "#!/bin/sh\nexit 7\n", 5000, how, sizeof(how), &code);
	assert_string_equal(how, "relay client exited 7");
	assert_int_equal(code, 7);
}

static void test_child_clean(void **state)
{
	struct fixture *f = *state;
	char how[128];
	int code = -1;

	spawn_and_reap(f, "#!/bin/sh\nexit 0\n", 5000, how, sizeof(how), &code);
	assert_string_equal(how, "");
	assert_int_equal(code, EXIT_OK);
}

static void test_child_killed(void **state)
{
	struct fixture *f = *state;
	char how[128];
	int code = -1;

	spawn_and_reap(f, "#!/bin/sh\nexec sleep 10\n", 100, how, sizeof(how), &code);
	assert_string_equal(how, "relay client killed by signal 9");
	assert_int_equal(code, EXIT_TRANSPORT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_creds_default, setup, teardown),
		cmocka_unit_test_setup_teardown(test_creds_relay_identity, setup, teardown),
		cmocka_unit_test_setup_teardown(test_creds_too_big, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_child_exits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_child_clean, setup, teardown),
		cmocka_unit_test_setup_teardown(test_child_killed, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
