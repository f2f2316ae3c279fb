/* SPDX-License-Identifier: MIT */
/*
 * A tree's hop (client/relay_tee.c) on a real feed: relay_tee_run forks a
 * process per next hop, each running a stand-in for the chain relay given
 * here (it reads its own copy of the feed and answers one RESULT); a
 * writer process plays the daemon's session. Checked: every next hop gets
 * every record, with a descriptor of its own; a next hop that reads
 * nothing stalls none of its siblings: it is cut off once the descriptors
 * held for it pass the bound, its sibling completes, and both results come
 * back renumbered into the hop's list (exit 25 for the whole).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "exitcodes.h"
#include "fanout.h"
#include "relay_feed.h"

volatile sig_atomic_t transfer_interrupted;

/* Records the writer sends before END: more descriptors than a tee holds for a laggard. */
#define ENTRIES 600

/* One record to sock, waiting while it is full. */
static int send_wait(int sock, const struct relay_feed_msg *m, int fd)
{
	int r;

	while ((r = relay_feed_send(sock, m, fd)) == -EAGAIN) {
		struct pollfd p = { .fd = sock, .events = POLLOUT };

		poll(&p, 1, 1000);
	}
	return r;
}

/* The daemon's session: ENTRIES regular files' ENTRY records, then END. */
static void writer(int sock)
{
	char path[] = "/tmp/relay_tee_XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0) {
		_exit(1);
	}
	unlink(path);
	for (uint32_t i = 1; i <= ENTRIES; i++) {
		struct relay_feed_msg m = { .type = RELAY_FEED_ENTRY };
		char name[32];

		snprintf(name, sizeof(name), "f%u", i);
		m.u.entry = (struct relay_feed_entry){
			.id = i, .ftype = PROTO_FT_REG, .mode = 0644, .size = 0, .name = name
		};
		if (send_wait(sock, &m, fd) < 0) {
			_exit(1);
		}
	}
	struct relay_feed_msg end = { .type = RELAY_FEED_END };
	_exit(send_wait(sock, &end, -1) < 0 ? 1 : 0);
}

/* Reads its feed to END or to its end: the ENTRY records seen, each with a descriptor. */
static unsigned drain(int sock, bool *ret_end)
{
	unsigned n = 0;

	*ret_end = false;
	for (;;) {
		struct relay_feed_msg m = { 0 };
		int fd = -1, r = relay_feed_recv(sock, &m, &fd);

		if (r == -EAGAIN) {
			struct pollfd p = { .fd = sock, .events = POLLIN };

			poll(&p, 1, 1000);
			continue;
		}
		if (r <= 0) {
			return n;
		}
		if (m.type == RELAY_FEED_ENTRY && fd >= 0) {
			n++;
		}
		if (fd >= 0) {
			close(fd);
		}
		*ret_end = m.type == RELAY_FEED_END;
		relay_feed_msg_free(&m);
		if (*ret_end) {
			return n;
		}
	}
}

/*
 * The stand-in for relay_mode_chain, in a next hop's process: "fast" reads at
 * once; "slow" reads nothing until its feed is closed under it (cut off).
 */
static int fake_chain(struct client_opts *o, struct fanout *f)
{
	struct relay_feed_msg res = { .type = RELAY_FEED_RESULT };
	bool end;
	unsigned n;

	if (!strcmp(f->dests[0].rem.host, "slow")) {
		struct pollfd p = { .fd = o->relay_feed, .events = POLLRDHUP };

		if (poll(&p, 1, 60000) != 1 || !(p.revents & POLLRDHUP)) {
			return EXIT_PROTOCOL;
		}
	}
	n = drain(o->relay_feed, &end);
	res.u.result =
	    (struct relay_feed_result){ .index = 1,
					.status = end ? PROTO_RELAY_COPIED : PROTO_RELAY_FAILED,
					.exit_code = end ? EXIT_OK : EXIT_PROTOCOL,
					.files_ok = n };
	snprintf(res.u.result.host, sizeof(res.u.result.host), "%s", f->dests[0].rem.host);
	snprintf(res.u.result.text, sizeof(res.u.result.text), "%s", end ? "" : "cut off");
	return send_wait(o->relay_feed, &res, -1) < 0 ? EXIT_LOCAL_IO : EXIT_OK;
}

static void run_tee(const char *host0, const char *host1, struct fanout *f, int *ret_rc)
{
	struct client_opts o = { .relay_feed = -1 };
	int sv[2];
	pid_t w;

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	w = fork();
	assert_true(w >= 0);
	if (w == 0) {
		close(sv[0]);
		writer(sv[1]);
	}
	close(sv[1]);
	f->dests = calloc(2, sizeof(*f->dests));
	assert_non_null(f->dests);
	f->n = 2;
	f->fanout = 2;
	f->relay_mode = true;
	f->feed = sv[0];
	snprintf(f->dests[0].rem.host, sizeof(f->dests[0].rem.host), "%s", host0);
	snprintf(f->dests[1].rem.host, sizeof(f->dests[1].rem.host), "%s", host1);
	*ret_rc = relay_tee_run(&o, f, fake_chain);
	kill(w, SIGKILL); /* a writer still blocked on a feed no one reads */
	waitpid(w, NULL, 0);
	close(sv[0]);
}

/* Two next hops that read: each gets every record with its own descriptor. */
static void both_get_all(void **state)
{
	struct fanout f = { 0 };
	int rc;

	(void)state;
	run_tee("fast", "fast", &f, &rc);
	assert_int_equal(rc, EXIT_OK);
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(f.dests[i].status, PROTO_RELAY_COPIED);
		assert_int_equal(f.dests[i].files_ok, ENTRIES);
	}
	free(f.dests);
}

/* One reads nothing: cut off past the bound, its sibling completes all the same. */
static void laggard_cut_off(void **state)
{
	struct fanout f = { 0 };
	struct rlimit rl;
	int rc;

	(void)state;
	/* 1024 descriptors: the tee holds at most 256 for a laggard, fewer than ENTRIES. */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max < 1024) {
		printf("skip: RLIMIT_NOFILE's hard limit is under 1024\n");
		skip();
	}
	rl.rlim_cur = 1024;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	run_tee("slow", "fast", &f, &rc);
	assert_int_equal(f.dests[1].status, PROTO_RELAY_COPIED);
	assert_int_equal(f.dests[1].files_ok, ENTRIES);
	assert_int_equal(f.dests[0].status, PROTO_RELAY_FAILED);
	assert_string_equal(f.dests[0].text, "cut off");
	assert_true(f.dests[0].files_ok < ENTRIES);
	assert_int_equal(rc, EXIT_FANOUT_PARTIAL);
	free(f.dests);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(both_get_all),
		cmocka_unit_test(laggard_cut_off),
	};

	signal(SIGPIPE, SIG_IGN);
	alarm(60); /* a tee that waits for its laggard hangs: fail, not stall */
	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
