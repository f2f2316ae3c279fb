/* SPDX-License-Identifier: MIT */
/*
 * A tree's hop (fanout.h, relay_tee_run): the relay child whose list splits
 * into several next hops (src/relay_tree.h). One process per next hop,
 * forked here before any entry comes, each a relay child of its own for
 * that next hop's group (the chain function given: relay_mode_chain) on its
 * own socketpair; this one
 * only tees: every record of the hop's feed (with its descriptor) goes to
 * each of them, and their results come back here, renumbered into this
 * hop's list, to go up the feed when all are done.
 *
 * A next hop that is slow or dead stalls none of its siblings: the feed is
 * read whatever they do, each gets the records at its own pace, and one
 * that falls more than a bounded backlog behind (records, or descriptors
 * held for it) is cut off: its feed is closed under it as an upstream that
 * went away, its subtree fails with that cause and still reports.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exitcodes.h"
#include "fanout.h"
#include "fdutil.h"
#include "log.h"
#include "macro.h"
#include "relay_feed.h"
#include "relay_tree.h"
#include "transfer.h"

/* Records a next hop may lag behind the feed before it is cut off. */
#define TEE_MAX_BACKLOG 65536
/* Records read ahead of the fastest next hop (past that the feed waits, as for a chain). */
#define TEE_READ_AHEAD 64

struct tee_rec {
	struct relay_feed_msg m;
	int fd; /* its descriptor, -1: none */
};

struct tee_sub {
	pid_t pid;     /* 0: reaped */
	int sock;      /* this end, O_NONBLOCK; -1: closed */
	size_t next;   /* the next record it gets (an index of the tee's records) */
	bool cut;      /* gets no more records: its feed is closed under it */
	bool done;     /* its end closed: every result it had came */
	int exit_code; /* its exit code once reaped */
	uint8_t first; /* its group in the list */
	uint8_t count;
};

struct tee {
	struct fanout *f;
	int (*chain)(struct client_opts *o, struct fanout *f); /* a next hop's process */
	struct tee_sub sub[PROTO_MAX_RELAY_FANOUT];
	size_t nsub;
	struct tee_rec *recs; /* recs[i - base] is record i; those below base are gone */
	size_t base, n, cap;
	size_t held_fds, max_fds;
	bool up_eof; /* the feed closed */
	bool told;   /* SIGTERM passed on */
};

/* ---- the next hops' processes ---- */

/* In a next hop's process: its group as a relay child of its own. Never returns. */
static _noreturn_ void sub_main(struct client_opts *o, struct fanout *f, struct tee *t,
				size_t which, int sock, pid_t parent)
{
	const struct tee_sub *s = &t->sub[which];
	struct fanout sf = { .dests = f->dests + s->first,
			     .n = s->count,
			     .fanout = f->fanout,
			     .relay_mode = true,
			     .feed = sock };
	int rc;

	/* The tee's end is its processes' (the tee dies with its session). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent) {
		_exit(EXIT_LOCAL_IO);
	}
	close(f->feed);
	for (size_t i = 0; i < which; i++) {
		close(t->sub[i].sock);
	}
	o->relay_feed = sock;
	rc = t->chain(o, &sf);
	fflush(NULL);
	_exit(rc);
}

/* Each group's process started. Returns 0 or -errno. */
static int start_subs(struct client_opts *o, struct tee *t, const struct relay_tree_group *g)
{
	pid_t parent = getpid();

	for (size_t i = 0; i < t->nsub; i++) {
		struct tee_sub *s = &t->sub[i];
		int sv[2];

		s->first = g[i].first;
		s->count = g[i].count;
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
			return negerrno();
		}
		s->sock = sv[0];
		fflush(NULL);
		s->pid = fork();
		if (s->pid == 0) {
			close(sv[0]);
			sub_main(o, t->f, t, i, sv[1], parent);
		}
		close(sv[1]);
		if (s->pid < 0) {
			s->pid = 0;
			return negerrno();
		}
		if (fd_set_nonblock(s->sock, true) < 0) {
			return negerrno();
		}
	}
	return 0;
}

/* No more records for s: its feed closed under it (it still answers). */
static void cut_sub(struct tee_sub *s)
{
	if (!s->cut && s->sock >= 0) {
		shutdown(s->sock, SHUT_WR);
	}
	s->cut = true;
}

/* ---- the records ---- */

static void rec_free(struct tee *t, struct tee_rec *x)
{
	if (x->fd >= 0) {
		close(x->fd);
		t->held_fds--;
	}
	relay_feed_msg_free(&x->m);
}

/* Records every next hop has, let go. */
static void trim(struct tee *t)
{
	size_t low = t->n, drop;

	for (size_t i = 0; i < t->nsub; i++) {
		if (!t->sub[i].cut && t->sub[i].next < low) {
			low = t->sub[i].next;
		}
	}
	drop = low - t->base;
	if (drop == 0) {
		return;
	}
	for (size_t i = 0; i < drop; i++) {
		rec_free(t, &t->recs[i]);
	}
	memmove(t->recs, t->recs + drop, (t->n - low) * sizeof(*t->recs));
	t->base = low;
}

/* The record the fastest next hop still waiting for records gets next (all cut: none). */
static size_t lead(const struct tee *t)
{
	size_t most = 0;
	bool any = false;

	for (size_t i = 0; i < t->nsub; i++) {
		if (!t->sub[i].cut) {
			most = t->sub[i].next > most ? t->sub[i].next : most;
			any = true;
		}
	}
	return any ? most : t->n;
}

/*
 * A next hop too far behind the fastest is cut off (too many records, or
 * too many descriptors held for it), so that none waits for it.
 */
static void cut_laggards(struct tee *t)
{
	size_t ahead = lead(t);

	for (size_t i = 0; i < t->nsub; i++) {
		struct tee_sub *s = &t->sub[i];
		bool behind = t->n - s->next > TEE_MAX_BACKLOG ||
			      (t->held_fds > t->max_fds && s->next < ahead);

		if (!s->cut && s->next < t->n && behind) {
			log_warning("relay tree: %s fell too far behind its siblings "
				    "(%zu records): its subtree is cut off",
				    t->f->dests[s->first].rem.host, t->n - s->next);
			cut_sub(s);
		}
	}
	trim(t);
}

static int append(struct tee *t, struct relay_feed_msg *m, int fd)
{
	size_t used = t->n - t->base;

	if (used == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct tee_rec *p = realloc(t->recs, cap * sizeof(*p));

		if (!p) {
			return -ENOMEM;
		}
		t->recs = p;
		t->cap = cap;
	}
	t->recs[used] = (struct tee_rec){ .m = *m, .fd = fd };
	t->n++;
	t->held_fds += fd >= 0;
	cut_laggards(t);
	return 0;
}

/*
 * The feed's records, as many as are there while the fastest next hop is
 * not too far behind. Returns 0 or -errno (the feed is then over).
 */
static int read_feed(struct tee *t)
{
	while (t->n - lead(t) < TEE_READ_AHEAD) {
		struct relay_feed_msg m = { 0 };
		int fd = -1, r = relay_feed_recv(t->f->feed, &m, &fd);

		if (r == -EAGAIN) {
			return 0;
		}
		if (r <= 0) {
			t->up_eof = true;
			return r;
		}
		if (m.type == RELAY_FEED_START || m.type == RELAY_FEED_RESULT) {
			if (fd >= 0) {
				close(fd);
			}
			relay_feed_msg_free(&m);
			t->up_eof = true;
			return -EBADMSG;
		}
		r = append(t, &m, fd);
		if (r < 0) {
			if (fd >= 0) {
				close(fd);
			}
			relay_feed_msg_free(&m);
			return r;
		}
	}
	return 0;
}

/* s's records, as many as its socket takes. */
static void flush_sub(struct tee *t, struct tee_sub *s)
{
	while (!s->cut && s->next < t->n) {
		const struct tee_rec *x = &t->recs[s->next - t->base];
		int r = relay_feed_send(s->sock, &x->m, x->fd);

		if (r == -EAGAIN) {
			return;
		}
		if (r < 0) {
			/* Gone: its results (if any) and its exit say why. */
			s->cut = true;
			return;
		}
		s->next++;
	}
	if (!s->cut && t->up_eof) {
		cut_sub(s); /* the feed is over for it too */
	}
}

/* ---- the results ---- */

/* One of s's results into the hop's list (index 1: s's first destination). */
static void take_result(struct tee *t, const struct tee_sub *s, const struct relay_feed_result *r)
{
	struct fanout_dest *d;

	if (r->index < 1 || r->index > s->count || r->status < PROTO_RELAY_COPIED ||
	    r->status > PROTO_RELAY_STATUS_MAX) {
		log_notice("relay tree: a result for destination %u of %u ignored", r->index,
			   s->count);
		return;
	}
	d = &t->f->dests[s->first + r->index - 1];
	if (d->status != 0) {
		return;
	}
	d->status = r->status;
	d->exit_code = r->exit_code;
	d->files_ok = r->files_ok;
	d->files_failed = r->files_failed;
	d->bytes = r->bytes;
	snprintf(d->text, sizeof(d->text), "%s", r->text);
}

static void read_sub(struct tee *t, struct tee_sub *s)
{
	while (!s->done) {
		struct relay_feed_msg m = { 0 };
		int fd = -1, r = relay_feed_recv(s->sock, &m, &fd);

		if (r == -EAGAIN) {
			return;
		}
		if (r <= 0) {
			s->done = true;
			s->cut = true;
			return;
		}
		if (fd >= 0) {
			close(fd);
		}
		if (m.type == RELAY_FEED_RESULT) {
			take_result(t, s, &m.u.result);
		}
		relay_feed_msg_free(&m);
	}
}

/* ---- the loop ---- */

static bool all_done(const struct tee *t)
{
	for (size_t i = 0; i < t->nsub; i++) {
		if (!t->sub[i].done) {
			return false;
		}
	}
	return true;
}

/* Waits for the feed, for the next hops' answers, for room on their sockets. */
static void wait_io(struct tee *t)
{
	struct pollfd p[PROTO_MAX_RELAY_FANOUT + 1];
	size_t np = 0;

	if (!t->up_eof && t->n - lead(t) < TEE_READ_AHEAD) {
		p[np++] = (struct pollfd){ .fd = t->f->feed, .events = POLLIN };
	}
	for (size_t i = 0; i < t->nsub; i++) {
		const struct tee_sub *s = &t->sub[i];
		short ev = POLLIN;

		if (s->done) {
			continue;
		}
		if (!s->cut && s->next < t->n) {
			ev |= POLLOUT;
		}
		p[np++] = (struct pollfd){ .fd = s->sock, .events = ev };
	}
	poll(p, np, 200);
}

static void pass_signal(struct tee *t)
{
	if (!transfer_interrupted || t->told) {
		return;
	}
	t->told = true;
	for (size_t i = 0; i < t->nsub; i++) {
		if (t->sub[i].pid > 0) {
			kill(t->sub[i].pid, SIGTERM);
		}
	}
}

static void run_loop(struct tee *t)
{
	while (!all_done(t)) {
		if (!t->up_eof) {
			int r = read_feed(t);

			if (r < 0 && r != -ECONNRESET) {
				log_error_errno(r, "relay feed: %m");
			}
		}
		for (size_t i = 0; i < t->nsub; i++) {
			flush_sub(t, &t->sub[i]);
			read_sub(t, &t->sub[i]);
		}
		trim(t);
		pass_signal(t);
		if (!all_done(t)) {
			wait_io(t);
		}
	}
}

/* ---- the end ---- */

/* Each process waited for; a group that told nothing of a destination failed with its cause. */
static void reap_subs(struct tee *t)
{
	for (size_t i = 0; i < t->nsub; i++) {
		struct tee_sub *s = &t->sub[i];
		int status = 0;

		if (s->pid > 0) {
			while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
			}
			s->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_TRANSPORT;
			s->pid = 0;
		}
		for (size_t k = 0; k < s->count; k++) {
			struct fanout_dest *d = &t->f->dests[s->first + k];

			if (d->status != 0) {
				continue;
			}
			d->status = PROTO_RELAY_FAILED;
			d->exit_code = (uint8_t)(s->exit_code ? s->exit_code : EXIT_PROTOCOL);
			snprintf(d->text, sizeof(d->text),
				 "the relay tree's process for %s exited %d",
				 t->f->dests[s->first].rem.host, s->exit_code);
		}
	}
}

static void tee_free(struct tee *t)
{
	for (size_t i = t->base; i < t->n; i++) {
		rec_free(t, &t->recs[i - t->base]);
	}
	free(t->recs);
	for (size_t i = 0; i < t->nsub; i++) {
		if (t->sub[i].sock >= 0) {
			close(t->sub[i].sock);
		}
		if (t->sub[i].pid > 0) {
			kill(t->sub[i].pid, SIGKILL);
		}
	}
	reap_subs(t);
}

/* Descriptors the tee may hold for next hops behind the others: a quarter of its limit. */
static size_t max_held_fds(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur / 4 < 4 * TEE_READ_AHEAD) {
		return 4 * TEE_READ_AHEAD;
	}
	return (size_t)rl.rlim_cur / 4;
}

int relay_tee_run(struct client_opts *o, struct fanout *f,
		  int (*chain)(struct client_opts *o, struct fanout *f))
{
	struct relay_tree_group g[PROTO_MAX_RELAY_FANOUT];
	struct tee t = { .f = f, .chain = chain, .max_fds = max_held_fds() };
	int ng = relay_tree_split(f->n, f->fanout, g), r;

	if (ng < 1) {
		return EXIT_PROTOCOL;
	}
	t.nsub = (size_t)ng;
	for (size_t i = 0; i < t.nsub; i++) {
		t.sub[i].sock = -1;
	}
	log_debug("relay tree: %zu destinations below, %d next hops (fan-out %u)", f->n, ng,
		  f->fanout);
	r = fd_set_nonblock(f->feed, true);
	if (r >= 0) {
		r = start_subs(o, &t, g);
	}
	if (r < 0) {
		log_error_errno(r, "relay tree: starting the next hops' processes: %m");
		tee_free(&t);
		return EXIT_LOCAL_IO;
	}
	run_loop(&t);
	tee_free(&t);
	return fanout_exit_code(f);
}
