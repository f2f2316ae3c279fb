/* SPDX-License-Identifier: MIT */
/*
 * rdmacp --relay-feed FD: the relay child a daemon starts for a relayed
 * push (fanout.h). It reads the chain from the feed (RELAY_FEED_START),
 * pushes what the daemon's session receives (the feed's entries) to the
 * chain's first reachable hop with the rest as that hop's chain (a tree's
 * hop with several next hops: relay_tee.c, one such push per next hop), and writes
 * one RELAY_FEED_RESULT per destination back before it exits with its own
 * push's exit code. It holds the relay's key: not dumpable, and it reads no
 * config file (main.c); it logs to stderr, the daemon's journal.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine.h"
#include "exitcodes.h"
#include "fanout.h"
#include "hello.h"
#include "log.h"
#include "macro.h"
#include "relay_feed.h"
#include "relay_tree.h"

/* Waits until fd is ready for events, at most timeout_ms. 0, or -ETIMEDOUT / -errno. */
static int wait_fd(int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int r;

	do {
		r = poll(&p, 1, timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r < 0) {
		return negerrno();
	}
	return r == 0 ? -ETIMEDOUT : 0;
}

/* The feed's first record, START: the chain. Returns 0 or -errno. */
static int read_start(int feed, int timeout_ms, struct relay_feed_msg *ret)
{
	struct relay_feed_msg m = { 0 };
	int fd = -1, r;

	while ((r = relay_feed_recv(feed, &m, &fd)) == -EAGAIN) {
		r = wait_fd(feed, POLLIN, timeout_ms);
		if (r < 0) {
			return r;
		}
	}
	if (r == 0) {
		return -ECONNRESET;
	}
	if (r < 0) {
		return r;
	}
	if (fd >= 0) {
		close(fd);
	}
	if (m.type != RELAY_FEED_START || m.u.start.count == 0) {
		relay_feed_msg_free(&m);
		return -EBADMSG;
	}
	*ret = m;
	return 0;
}

/* The destinations from START's chain: hops[0] is this relay's own. 0 or -errno. */
static int dests_from_start(const struct relay_feed_start *st, struct fanout *f)
{
	f->dests = calloc(st->count, sizeof(*f->dests));
	if (!f->dests) {
		return -ENOMEM;
	}
	f->n = st->count;
	for (size_t i = 0; i < f->n; i++) {
		const struct proto_relay_hop *h = &st->hops[i];
		struct fanout_dest *d = &f->dests[i];

		if (strlen(h->host) >= sizeof(d->rem.host) || strlen(h->path) >= PROTO_MAX_PATH) {
			return -ENAMETOOLONG;
		}
		snprintf(d->rem.host, sizeof(d->rem.host), "%s", h->host);
		snprintf(d->rem.path, sizeof(d->rem.path), "%s", h->path);
		d->port = h->port;
		d->ticket = malloc(h->ticket_len);
		if (!d->ticket) {
			return -ENOMEM;
		}
		memcpy(d->ticket, h->ticket, h->ticket_len);
		d->ticket_len = h->ticket_len;
	}
	return 0;
}

/* One record to the feed, waiting while it is full. Returns 0 or -errno. */
static int send_waiting(int feed, const struct relay_feed_msg *m, int timeout_ms)
{
	int r;

	while ((r = relay_feed_send(feed, m, -1)) == -EAGAIN) {
		r = wait_fd(feed, POLLOUT, timeout_ms);
		if (r < 0) {
			return r;
		}
	}
	return r;
}

/* Every destination's outcome to the daemon, index 1 this relay's own. Returns 0 or -errno. */
static int send_results(const struct fanout *f, int timeout_ms)
{
	for (size_t i = 0; i < f->n; i++) {
		const struct fanout_dest *d = &f->dests[i];
		struct relay_feed_msg m = { .type = RELAY_FEED_RESULT };
		struct relay_feed_result *res = &m.u.result;
		int r;

		res->index = (uint8_t)(i + 1);
		res->status = d->status ? d->status : PROTO_RELAY_FAILED;
		res->exit_code = d->status == PROTO_RELAY_COPIED ? EXIT_OK
				 : d->exit_code			 ? d->exit_code
								 : EXIT_PROTOCOL;
		res->files_ok = d->files_ok;
		res->files_failed = d->files_failed;
		res->bytes = d->bytes;
		snprintf(res->host, sizeof(res->host), "%s", d->rem.host);
		snprintf(res->text, sizeof(res->text), "%s",
			 d->status == PROTO_RELAY_COPIED ? "" : d->text);
		r = send_waiting(f->feed, &m, timeout_ms);
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* The feed given is a SOCK_SEQPACKET socket (as the daemon makes it). 0 or EXIT_USAGE. */
static int check_feed(int feed)
{
	int type = 0;
	socklen_t len = sizeof(type);

	if (getsockopt(feed, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_SEQPACKET) {
		log_error(
		    "--relay-feed %d: not a relay feed (a SOCK_SEQPACKET socket from rdmacpd)",
		    feed);
		return EXIT_USAGE;
	}
	return 0;
}

int relay_mode_chain(struct client_opts *o, struct fanout *f)
{
	int r, rc;

	slowhop_init(&f->slow, o->relay_slow_s);
	r = follow_book_new(f->feed, &f->book);
	if (r < 0) {
		log_error_errno(r, "relay feed: %m");
		return EXIT_LOCAL_IO;
	}
	fanout_run(o, NULL, 0, f);
	r = send_results(f, o->idle_timeout_s * 1000);
	if (r < 0) {
		log_error_errno(r, "relay feed: the results could not be told: %m");
	}
	rc = f->dests[0].status == PROTO_RELAY_COPIED ? EXIT_OK : f->dests[0].exit_code;
	return rc;
}

/* Whether the list below this hop splits into several next hops (relay_tree.h). */
static bool is_tree(const struct fanout *f)
{
	struct relay_tree_group g[PROTO_MAX_RELAY_FANOUT];

	return relay_tree_split(f->n, f->fanout, g) > 1;
}

/* A tree's hop: each next hop's subtree in a process of its own, then every result. */
static int relay_mode_tree(struct client_opts *o, struct fanout *f)
{
	int rc = relay_tee_run(o, f, relay_mode_chain);
	int r = send_results(f, o->idle_timeout_s * 1000);

	if (r < 0) {
		log_error_errno(r, "relay feed: the results could not be told: %m");
	}
	return rc;
}

int relay_mode_run(struct client_opts *o, int nargs)
{
	struct fanout f = { .feed = o->relay_feed, .relay_mode = true };
	struct relay_feed_msg start = { 0 };
	int rc, r;

	if (nargs != 0) {
		log_error("--relay-feed takes no operands (rdmacpd starts it with the chain on the "
			  "feed)");
		return EXIT_USAGE;
	}
	if (!o->cert[0] || !o->key[0] || !o->ca[0]) {
		log_error("--relay-feed needs --cert, --key and --ca (the relay's identity, from "
			  "rdmacpd)");
		return EXIT_CONFIG;
	}
	rc = check_feed(f.feed);
	if (rc != 0) {
		return rc;
	}
	/*
	 * Our entries come from the hop's feed, which does not say which files
	 * have other names: we can't mark them (PROTO_FILE_LINKED), so the next
	 * hop must remember every file it takes as a target, as without -H's
	 * marks. The hard links themselves go as the hop made them.
	 */
	hello_withhold(PROTO_CAP_LINKED_FILES, true);
	r = read_start(f.feed, o->idle_timeout_s * 1000, &start);
	if (r == 0) {
		f.fanout = start.u.start.fanout;
		r = dests_from_start(&start.u.start, &f);
	}
	relay_feed_msg_free(&start);
	if (r < 0) {
		fanout_free(&f);
		log_error_errno(r, "relay feed: no chain to relay to: %m");
		return EXIT_PROTOCOL;
	}
	rc = is_tree(&f) ? relay_mode_tree(o, &f) : relay_mode_chain(o, &f);
	fanout_free(&f);
	return rc;
}
