/* SPDX-License-Identifier: MIT */
/*
 * The engine's loop: one thread polls the control channel, the transport's
 * completion descriptor, io_uring's eventfd and the descriptors registered
 * with it (engine_watch_add); each turn runs the features' steps around the
 * role's, flushes what is queued, dispatches what came, and keeps the idle
 * timeout. The control messages every role takes are answered here; the
 * rest go to the features' rows, then to the role.
 */
#include "engine-internal.h"

static bool finished(struct engine *e);

/* The loop's own descriptors (control, transport, io_uring), before the sources. */
#define LOOP_FIXED_FDS 3

int engine_watch_add(struct engine *e, int fd, engine_ready_fn on_ready, unsigned flags)
{
	assert(fd >= 0 && on_ready);
	if (e->nwatches == ENGINE_WATCH_MAX) {
		return -ENOSPC;
	}
	e->watches[e->nwatches++] = (struct engine_watch){ fd, flags, on_ready };
	return 0;
}

void engine_watch_del(struct engine *e, int fd)
{
	for (unsigned i = 0; i < e->nwatches; i++) {
		if (e->watches[i].fd == fd) {
			memmove(&e->watches[i], &e->watches[i + 1],
				(e->nwatches - i - 1) * sizeof(e->watches[0]));
			e->nwatches--;
			return;
		}
	}
}

static const struct engine_watch *engine_watch_find(const struct engine *e, int fd)
{
	for (unsigned i = 0; i < e->nwatches; i++) {
		if (e->watches[i].fd == fd) {
			return &e->watches[i];
		}
	}
	return NULL;
}

/* A message this role does not take now: the session fails. */
int engine_msg_unexpected(struct engine *e, const struct msg *m)
{
	return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "unexpected %s during transfer",
			   proto_type_name(m->type));
}

/* The messages both roles take; the rest are the role's. */
static int on_message(struct engine *e, struct msg *m)
{
	switch (m->type) {
	case MSG_PING: {
		struct msg pong = { .type = MSG_PONG };
		int r;

		pong.u.ping.nonce = m->u.ping.nonce;
		r = chan_queue(e->p->chan, &pong);
		return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
	}
	case MSG_PONG:
		return 0; /* not progress: see progress_mark */
	case MSG_ERROR:
		return engine_fail(e, m->u.error.code ? m->u.error.code : PERR_PROTOCOL, -EREMOTEIO,
				   "peer: %s", m->u.error.text);
	default:
		break;
	}
	for (unsigned i = 0; i < e->nfeat; i++) {
		for (const struct engine_msg_row *row = e->feat[i]->msgs; row && row->type; row++) {
			if (row->type != m->type || !(row->roles & ENGINE_ROLE_BIT(e->p->role))) {
				continue;
			}
			if (!(row->flags & ENGINE_MSG_ANYTIME) && e->role->takes_messages &&
			    !e->role->takes_messages(e)) {
				return engine_msg_unexpected(e, m);
			}
			return row->handle(e, m);
		}
	}
	return e->role->on_message(e, m);
}

static int on_control(struct engine *e)
{
	do {
		struct msg m;
		int r = chan_recv(e->p->chan, &m, e->p->idle_timeout_ms);

		if (r < 0) {
			if (r == -EPIPE || r == -ECONNRESET) {
				return engine_fail(
				    e, PERR_TRANSPORT, r,
				    "the peer closed the control connection mid-transfer");
			}
			char why[160];

			/* engine_run tells the peer, with this reason. */
			return engine_fail(e, chan_err_code(r), r, "control channel: %s",
					   chan_recv_error(e->p->chan, r, why, sizeof(why)));
		}
		bool batch = m.type == MSG_FILES || m.type == MSG_FILES_ACK;

		r = on_message(e, &m);
		msg_clear(&m);
		if (r < 0) {
			return r;
		}
		/*
		 * A batch answered (or an answer taken) goes out (or is acted
		 * on) before the next batch is read: the peer works on it while
		 * we read on, instead of waiting for all we have buffered.
		 */
		if (batch) {
			break;
		}
		/*
		 * Not past the end: what follows the peer's last END (its BYE, the
		 * next OPEN) is the caller's, however soon it came.
		 */
	} while (!e->failed && !finished(e) && chan_readable_now(e->p->chan));
	return 0;
}

static bool finished(struct engine *e)
{
	return e->got_end && !engine_busy(e) && !engine_holds(e);
}

/*
 * What keeps a transfer alive: payload bytes moved, credits returned or
 * received, and entries committed. Control chatter (PING, PONG, FILES with
 * refused entries) is not progress: a peer that only answers PINGs is idle,
 * and the session ends after the idle timeout with its temp files removed.
 */
static uint64_t progress_mark(const struct engine *e)
{
	uint64_t mark = e->bytes_progress + e->credits + e->st.files_ok + e->st.files_skipped +
			e->st.files_updated + e->st.files_planned;

	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->progress) {
			mark += e->feat[i]->progress(e);
		}
	}
	return mark;
}

/* Our own disk work in flight (reads, writes, fsyncs): waiting on it is not idling. */
static bool local_io_busy(const struct engine *e)
{
	return e->uring_inflight > 0 || e->sync_running || e->sums_inflight > 0;
}

/* Before the wait: the role's work, then everything queued on its way. 1: finished. */
static int loop_work(struct engine *e)
{
	const struct engine_params *p = e->p;
	int r;

	if (p->stop && *p->stop) {
		chan_send_error(p->chan, PERR_SHUTDOWN, "interrupted");
		e->error_sent = true;
		return engine_fail(e, PERR_SHUTDOWN, -EINTR, "interrupted");
	}
	r = engine_features_step(e, false);
	if (r >= 0) {
		r = e->role->step(e);
	}
	if (r >= 0) {
		r = engine_features_step(e, true);
	}
	if (r >= 0) {
		r = lane_batch_flush(e);
	}
	if (r >= 0) {
		r = uring_flush(e);
	}
	if (r < 0) {
		return r;
	}
	r = chan_flush(p->chan);
	if (r < 0) {
		return engine_fail(e, PERR_IO, r, "control channel write failed: %s", strerror(-r));
	}
	return finished(e) ? 1 : 0;
}

/*
 * After the wait: what the sources have for us. A completion handler that
 * returns nothing (a write, an fsync) records its failure in e: that counts too.
 */
static int loop_dispatch(struct engine *e, const struct pollfd *pfd, unsigned nfds)
{
	int r = 0;

	/* Completions the kernel held past a full queue come with no signal. */
	if ((pfd[2].revents & POLLIN) || uring_ready(e)) {
		r = uring_on_ready(e);
	}
	for (unsigned i = LOOP_FIXED_FDS; i < nfds && r >= 0; i++) {
		const struct engine_watch *s = engine_watch_find(e, pfd[i].fd);

		short ready =
		    s && (s->flags & ENGINE_WATCH_OUT) ? POLLOUT | POLLERR | POLLHUP : POLLIN;

		if (s && (pfd[i].revents & ready) &&
		    (!e->failed || (s->flags & ENGINE_WATCH_ALWAYS))) {
			r = s->on_ready(e);
		}
	}
	if (r >= 0 && !e->failed &&
	    ((pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) || chan_readable_now(e->p->chan))) {
		r = on_control(e);
	}
	/*
	 * A transport whose descriptor reports an error or a hang-up (a device
	 * detached, a channel closed) would wake poll() at once forever and
	 * never have a completion to give: that ends the session, now.
	 */
	if (r >= 0 && !e->failed && !finished(e) &&
	    (pfd[1].revents & (POLLERR | POLLHUP | POLLNVAL))) {
		const char *why =
		    e->p->x->ops->last_error ? e->p->x->ops->last_error(e->p->x) : NULL;

		r = engine_fail(e, PERR_TRANSPORT, -EIO,
				"transport: its event descriptor reports %s%s%s",
				(pfd[1].revents & POLLNVAL)  ? "an invalid descriptor"
				: (pfd[1].revents & POLLERR) ? "an error"
							     : "a hang-up",
				why ? ": " : "", why ? why : "");
	}
	/* --poll: the completion queue every turn, woken or not. */
	if (r >= 0 && !e->failed && !finished(e) &&
	    ((pfd[1].revents & POLLIN) || (e->p->busy_poll && e->p->x))) {
		r = lane_on_xport(e);
	}
	return r >= 0 && e->failed ? e->fail_r : r;
}

/*
 * Skip level checksum: a file waiting for a digest (ours sent, the peer's
 * answer to come, or the other way round) may keep the peer busy for as
 * long as reading it takes. That much more silence is allowed, at the
 * slowest disk we expect (50 MB/s, the size the peer declared or asked
 * about), so a big file is not cut by the idle timeout and a peer that
 * never answers still is. The same for a sender's file whose FILE_DONE is
 * sent: the receiver's commit reads or writes it whole before it answers
 * (the fsync of a big file, a device's read back, --delta's read back of
 * the unchanged chunks), with nothing to say meanwhile.
 */
#define SUM_WAIT_MIN_RATE 50000000.0

static double sum_wait_allowance_ms(const struct engine *e)
{
	uint64_t max = 0;

	for (size_t i = 0; i < e->files_hw; i++) {
		const struct efile *f = file_at(e, i);
		bool committing = e->role == &engine_sender_ops && f->done_sent;

		if (f->used && (committing || engine_file_waits(e, f)) && f->size > max) {
			max = f->size;
		}
	}
	return (double)max / SUM_WAIT_MIN_RATE * 1000;
}

/* Progress keeps the session alive; none for idle_ms ends it, a PING every third of that. */
static int loop_idle(struct engine *e, uint64_t mark, uint64_t before, int idle_ms)
{
	const struct engine_params *p = e->p;

	if (progress_mark(e) != mark || local_io_busy(e)) {
		ts_now(&e->last_activity);
		if (p->ev.progress && e->bytes_progress != before) {
			p->ev.progress(p->ev.ud, e->bytes_progress);
		}
	} else if (ts_since(&e->last_activity) * 1000 > idle_ms &&
		   ts_since(&e->last_activity) * 1000 > idle_ms + sum_wait_allowance_ms(e)) {
		chan_send_error(p->chan, PERR_TIMEOUT, "idle timeout: no data progress");
		e->error_sent = true;
		return engine_fail(e, PERR_TIMEOUT, -ETIMEDOUT, "no data progress for %d s",
				   idle_ms / 1000);
	} else if (ts_since(&e->last_activity) * 1000 > idle_ms / 3 &&
		   ts_since(&e->last_ping) * 1000 > idle_ms / 3) {
		/* Tells a peer we are alive; its PONG does not keep us waiting longer. */
		struct msg ping = { .type = MSG_PING };
		int r;

		ts_now(&e->last_ping);
		r = chan_queue(p->chan, &ping);
		if (r < 0) {
			return engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
	}
	return 0;
}

int engine_loop(struct engine *e)
{
	const struct engine_params *p = e->p;
	struct xport *x = p->x;
	int idle_ms = p->idle_timeout_ms > 0 ? p->idle_timeout_ms : 300000;

	ts_now(&e->last_activity);
	e->last_ping = e->last_activity;
	while (!e->failed) {
		struct pollfd pfd[LOOP_FIXED_FDS + ENGINE_WATCH_MAX] = {
			{ .fd = tls_fd(p->chan->tls), .events = POLLIN },
			{ .fd = x ? x->ops->event_fd(x) : -1,
			  .events = POLLIN }, /* none: a probe */
			{ .fd = e->uring_efd, .events = POLLIN },
		};
		uint64_t before = e->bytes_progress, mark = progress_mark(e);
		unsigned nfds;
		int r, wait_ms;

		r = loop_work(e);
		if (r != 0) {
			return r < 0 ? r : 0;
		}
		/* The sources as they are now: a worker may have started in the step. */
		for (nfds = LOOP_FIXED_FDS; nfds < LOOP_FIXED_FDS + e->nwatches; nfds++) {
			const struct engine_watch *w = &e->watches[nfds - LOOP_FIXED_FDS];

			pfd[nfds].fd = w->fd;
			pfd[nfds].events = (w->flags & ENGINE_WATCH_OUT) ? POLLOUT : POLLIN;
		}
		/* Work that is ours to do (a --delete pass) goes on without sleeping. */
		wait_ms = chan_readable_now(p->chan) || p->busy_poll || engine_busy(e) ||
				  e->again || uring_ready(e)
			      ? 0
			      : 1000;
		if (wait_ms && p->bwlimit) {
			wait_ms = 10;
		}
		if (poll(pfd, nfds, wait_ms) < 0 && errno != EINTR) {
			return engine_fail(e, PERR_INTERNAL, negerrno(), "poll: %s",
					   strerror(errno));
		}
		r = loop_dispatch(e, pfd, nfds);
		if (r >= 0) {
			r = loop_idle(e, mark, before, idle_ms);
		}
		if (r < 0) {
			return r;
		}
	}
	return e->fail_r;
}
