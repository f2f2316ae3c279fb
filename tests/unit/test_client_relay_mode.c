/* SPDX-License-Identifier: MIT */
/*
 * rdmacp --relay-feed (client/relay_mode.c), the real binary on a real feed
 * (a SOCK_SEQPACKET socketpair, as rdmacpd makes it): the chain from START,
 * every hop that cannot be reached cut out and the next tried, one RESULT
 * per destination back on the feed, the exit code of its own push; a feed
 * that ends or starts with anything but START is refused; the config file
 * under $HOME is never read, nor an identity taken from there. Relaying for real
 * (hops that answer) is tests/integration/t_relay.sh's.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "exitcodes.h"
#include "relay_feed.h"

static char *certdir, *home;
static char rdmacp[4096];

/* A port on 127.0.0.1 bound but not listening: a connection is refused at once. */
static int refusing_port(uint16_t *ret_port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*ret_port = ntohs(a.sin_port);
	return fd;
}

/* rdmacp --relay-feed=3 with feed as its descriptor 3 (closed here); returns its pid. */
static pid_t start_relay(int feed, bool identity)
{
	char cert[4200], key[4200], ca[4200];
	pid_t pid;

	snprintf(cert, sizeof(cert), "--cert=%s/client.crt", certdir);
	snprintf(key, sizeof(key), "--key=%s/client.key", certdir);
	snprintf(ca, sizeof(ca), "--ca=%s/ca.crt", certdir);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = { rdmacp,
				 (char *)"--config=/dev/null",
				 (char *)"--relay-feed=3",
				 cert,
				 key,
				 ca,
				 (char *)"--transport=tcp",
				 NULL };

		/* A config file there that any other run would refuse (exit 2). */
		setenv("HOME", home, 1);
		if (!identity) {
			/* No identity given: none is taken from $HOME either. */
			argv[3] = argv[6];
			argv[4] = NULL;
		}
		if (dup2(feed, 3) < 0) {
			_exit(127);
		}
		execv(rdmacp, argv);
		_exit(127);
	}
	close(feed);
	return pid;
}

static int wait_exit(pid_t pid)
{
	int status = 0;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* The next record, waiting up to 20 s; 0 at the end of the feed. */
static int recv_record(int sock, struct relay_feed_msg *m)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	int fd = -1, r;

	while ((r = relay_feed_recv(sock, m, &fd)) == -EAGAIN) {
		assert_int_equal(poll(&p, 1, 20000), 1);
	}
	assert_int_equal(fd, -1);
	return r;
}

static void test_every_hop_unreached(void **state)
{
	struct proto_relay_hop hops[3];
	struct relay_feed_msg start = { .type = RELAY_FEED_START };
	uint8_t ticket[3][8] = { "ticket1", "ticket2", "ticket3" };
	uint16_t port[3];
	int closed[3], sv[2];
	pid_t pid;

	(void)state;
	for (int i = 0; i < 3; i++) {
		closed[i] = refusing_port(&port[i]);
		hops[i] = (struct proto_relay_hop){ .host = (char *)"127.0.0.1",
						    .port = port[i],
						    .path = (char *)"data/x",
						    .ticket = ticket[i],
						    .ticket_len = sizeof(ticket[i]) };
	}
	start.u.start.count = 3;
	start.u.start.hops = hops;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(relay_feed_send(sv[0], &start, -1), 0);
	pid = start_relay(sv[1], true);
	/* One result per destination, in order, each unreached with why. */
	for (int i = 0; i < 3; i++) {
		struct relay_feed_msg m = { 0 };

		assert_int_equal(recv_record(sv[0], &m), 1);
		assert_int_equal(m.type, RELAY_FEED_RESULT);
		assert_int_equal(m.u.result.index, i + 1);
		assert_int_equal(m.u.result.status, PROTO_RELAY_UNREACHED);
		assert_int_equal(m.u.result.exit_code, EXIT_CONNECT);
		assert_string_equal(m.u.result.host, "127.0.0.1");
		assert_non_null(strstr(m.u.result.text, "cannot connect"));
		relay_feed_msg_free(&m);
	}
	assert_int_equal(wait_exit(pid), EXIT_CONNECT);
	close(sv[0]);
	for (int i = 0; i < 3; i++) {
		close(closed[i]);
	}
}

/* A feed whose first record is not START, or that ends before one: no chain, exit 4. */
static void test_no_start(void **state)
{
	struct relay_feed_msg end = { .type = RELAY_FEED_END };
	struct relay_feed_msg m = { 0 };
	int sv[2];
	pid_t pid;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(relay_feed_send(sv[0], &end, -1), 0);
	pid = start_relay(sv[1], true);
	assert_int_equal(wait_exit(pid), EXIT_PROTOCOL);
	assert_int_equal(recv_record(sv[0], &m), 0);
	close(sv[0]);

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	pid = start_relay(sv[1], true);
	close(sv[0]);
	assert_int_equal(wait_exit(pid), EXIT_PROTOCOL);
}

/* A relay child without --cert, --key and --ca: refused, nothing read from the feed. */
static void test_no_identity(void **state)
{
	struct relay_feed_msg end = { .type = RELAY_FEED_END };
	int sv[2];
	pid_t pid;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(relay_feed_send(sv[0], &end, -1), 0);
	pid = start_relay(sv[1], false);
	assert_int_equal(wait_exit(pid), EXIT_CONFIG);
	close(sv[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_hop_unreached),
		cmocka_unit_test(test_no_start),
		cmocka_unit_test(test_no_identity),
	};
	const char *build = getenv("RDMACP_BUILD_DIR");
	char cmd[8400], *root;
	int r;

	if (!build) {
		tu_skip("RDMACP_BUILD_DIR not set (run it through ctest)");
	}
	snprintf(rdmacp, sizeof(rdmacp), "%s/rdmacp", build);
	if (access(rdmacp, X_OK) != 0) {
		tu_skip("%s not built", rdmacp);
	}
	root = tu_mkdtemp();
	if (asprintf(&certdir, "%s/c", root) < 0) {
		tu_skip("out of memory");
	}
	snprintf(cmd, sizeof(cmd), "'%s' certs init '%s' >/dev/null", rdmacp, certdir);
	if (system(cmd) != 0) {
		tu_skip("rdmacp certs init failed");
	}
	/* $HOME with a config file that is refused: a relay child never reads it. */
	if (asprintf(&home, "%s/home", root) < 0) {
		tu_skip("out of memory");
	}
	snprintf(
	    cmd, sizeof(cmd),
	    "mkdir -p '%s/.config/rdmacp' && echo 'no such key = 1' >'%s/.config/rdmacp/config' && "
	    "! HOME='%s' '%s' --cert /dev/null ping 127.0.0.1 2>/dev/null",
	    home, home, home, rdmacp);
	if (system(cmd) != 0) {
		tu_skip("could not make a refused config file under a test $HOME");
	}
	r = cmocka_run_group_tests(tests, NULL, NULL);
	tu_rmtree(root);
	free(certdir);
	free(home);
	free(root);
	return r;
}
