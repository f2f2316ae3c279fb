/* SPDX-License-Identifier: MIT */
/*
 * The engine's transport side, both roles: work requests batched per lane
 * with their completions tracked, the --bwlimit rate, and the transport's
 * completions (write completions, receives: data for the receiver,
 * credits for the sender).
 */
#include "engine-internal.h"

static int batch_add(struct engine *e, const struct xport_wr *wr)
{
	if (e->nbatch == e->batch_cap) {
		size_t cap = e->batch_cap ? e->batch_cap * 2 : 64;
		struct xport_wr *b = realloc(e->batch, cap * sizeof(*b));
		if (!b) {
			return -ENOMEM;
		}
		e->batch = b;
		e->batch_cap = cap;
	}
	e->batch[e->nbatch++] = *wr;
	return 0;
}

/* Room for n more WRs on a lane's send queue? */
bool lane_room(struct engine *e, unsigned lane, unsigned n)
{
	return e->lanes[lane].len + n <= e->lanes[lane].cap;
}

/*
 * Queue a WR on its lane's FIFO and in the batch. Signal every quarter of
 * the send queue so it always drains; batch_flush signals each lane's last.
 */
int lane_push(struct engine *e, struct xport_wr *wr, int32_t chunk)
{
	struct lane *l = &e->lanes[wr->lane];
	unsigned every = MAX(1u, l->cap / 4);
	int r;

	if (l->len >= l->cap) {
		return -ENOSPC;
	}
	wr->wr_id = ++e->wr_seq;
	if (++l->unsignaled >= every) {
		wr->flags |= XPORT_SEND_SIGNALED;
	}
	if (wr->flags & XPORT_SEND_SIGNALED) {
		l->unsignaled = 0;
	}
	l->fifo[(l->head + l->len) % l->cap] = (struct lane_ent){ wr->wr_id, chunk };
	l->len++;
	r = batch_add(e, wr);
	if (r < 0) {
		return fail(e, PERR_INTERNAL, r, "out of memory");
	}
	l->batch_last = (unsigned)e->nbatch;
	return 0;
}

int batch_flush(struct engine *e)
{
	struct xport *x = e->p->x;
	int r;

	if (e->nbatch == 0) {
		return 0;
	}
	for (unsigned i = 0; i < x->nlanes; i++) {
		struct lane *l = &e->lanes[i];
		if (l->batch_last) {
			e->batch[l->batch_last - 1].flags |= XPORT_SEND_SIGNALED;
			l->batch_last = 0;
			l->unsignaled = 0;
		}
	}
	r = x->ops->post_writes(x, e->batch, e->nbatch);
	e->nbatch = 0;
	if (r < 0) {
		return fail(e, PERR_TRANSPORT, r, "post to transport: %s", strerror(-r));
	}
	return 0;
}

/* An immediate this role does not take: the session fails. */
int imm_unexpected(struct engine *e, const struct xport_wc *wc)
{
	return fail(e, PERR_PROTOCOL, -EBADMSG, "unexpected immediate 0x%08x (len %u)", wc->imm,
		    wc->len);
}

/* A signaled completion: everything up to wr_id on that lane is done. */
static void lane_complete(struct engine *e, unsigned lane, uint64_t wr_id)
{
	struct lane *l = &e->lanes[lane];

	while (l->len > 0 && l->fifo[l->head].wr_id <= wr_id) {
		int32_t c = l->fifo[l->head].chunk;
		if (c >= 0) {
			e->chunks[c].state = CH_FREE;
			pool_put(e->pool, (uint32_t)c);
		}
		l->head = (l->head + 1) % l->cap;
		l->len--;
	}
}

/*
 * --bwlimit: may another len bytes go (a sender's chunk, a receiver's credit)
 * now? Averaged since the first one, with no allowance ahead of the clock:
 * the first chunk waits its own time too, so no burst starts the transfer.
 */
bool bw_allows(struct engine *e, uint32_t len)
{
	double el;

	if (e->bw_t0.tv_sec == 0 && e->bw_t0.tv_nsec == 0) {
		ts_now(&e->bw_t0);
	}
	el = ts_since(&e->bw_t0);
	return (double)(e->bw_sent + len) <= (double)e->p->bwlimit * el;
}

/* Has the peer closed the control connection (EOF waiting on the socket)? */
static bool peer_closed(struct engine *e)
{
	char b;
	struct pollfd p = { .fd = tls_fd(e->p->chan->tls), .events = POLLIN };

	return poll(&p, 1, 0) == 1 &&
	       (p.revents & POLLHUP || recv(p.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0);
}

int on_xport(struct engine *e)
{
	struct xport *x = e->p->x;
	struct xport_wc wc[64];
	int n;

	while ((n = x->ops->poll_cq(x, wc, ARRAY_SIZE(wc))) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].status != XPORT_WC_SUCCESS && e->sent_end) {
				/*
				 * Everything is resolved and END is on its way: the
				 * receiver may already be tearing its lanes down.
				 * Its END (or its failure) comes over the control channel.
				 */
				continue;
			}
			if (wc[i].status != XPORT_WC_SUCCESS) {
				const char *why = x->ops->last_error ? x->ops->last_error(x) : NULL;
				/*
				 * A peer that died takes its memory registrations with
				 * it: say so rather than let this read like an attack.
				 */
				bool gone = peer_closed(e);
				return fail(e, PERR_TRANSPORT, -EIO, "data transport: %s%s%s%s",
					    xport_wc_status_str(wc[i].status), why ? ": " : "",
					    why ? why : "",
					    gone ? " (the peer closed its control connection: it "
						   "probably ended)"
						 : "");
			}
			if (wc[i].opcode == XPORT_WC_WRITE) {
				lane_complete(e, wc[i].lane, wc[i].wr_id);
				continue;
			}
			/* A receive was consumed: give it back right away. */
			uint64_t id = wc[i].lane;
			int r = x->ops->post_recvs(x, wc[i].lane, &id, 1);
			if (r < 0) {
				return fail(e, PERR_TRANSPORT, r, "post receive: %s", strerror(-r));
			}
			r = e->role->on_receive(e, &wc[i]);
			if (r < 0) {
				return r;
			}
		}
	}
	if (n < 0) {
		return fail(e, PERR_TRANSPORT, n, "poll transport: %s", strerror(-n));
	}
	return 0;
}
