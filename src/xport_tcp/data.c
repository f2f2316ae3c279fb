/* SPDX-License-Identifier: MIT */
/*
 * Posting on a tcp xport: writes go into their lanes' send queues (checked,
 * all or nothing, inline payloads copied) for the TX threads; receives for
 * immediates into the lane's receive queue. A lane already failed
 * completes what is posted at once, flushed, as verbs does.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "tcp-internal.h"

static int wr_check(const struct tcp_xport *tx, const struct xport_wr *w)
{
	uint64_t base, b;
	int r = xport_wr_check_common(w, tx->pub.nlanes);

	if (r != 0 || w->key != 0 || w->inv_rkey != 0) {
		/* No windows on tcp: nothing to close, no key to hand over. */
		return r < 0 || w->key != 0 || w->inv_rkey != 0 ? -EINVAL : 0;
	}
	if (w->flags & XPORT_SEND_INLINE) {
		/* Inline data is copied at post time and needs no registration (as on verbs). */
		return w->len <= tx->pub.max_inline ? 0 : -EINVAL;
	}
	if (!w->mr || w->mr->lkey == 0) {
		return -EINVAL;
	}
	base = (uint64_t)(uintptr_t)w->mr->addr;
	b = (uint64_t)(uintptr_t)w->buf;
	return xport_range_inside(base, w->mr->len, b, w->len) ? 0 : -EINVAL;
}

/* Every request checked, and how many go to each lane. */
static int post_check(const struct tcp_xport *tx, const struct xport_wr *wrs, size_t n,
		      size_t need[XPORT_MAX_LANES])
{
	for (size_t i = 0; i < n; i++) {
		int r = wr_check(tx, &wrs[i]);

		if (r < 0) {
			return r;
		}
		need[wrs[i].lane]++;
	}
	return 0;
}

/* All-or-nothing across lanes: lock every lane involved, in index order. */
static void lanes_lock(struct tcp_xport *tx, const size_t need[XPORT_MAX_LANES])
{
	for (unsigned l = 0; l < tx->pub.nlanes; l++) {
		if (need[l]) {
			pthread_mutex_lock(&tx->lanes[l].lock);
		}
	}
}

/* Wakes the TX threads of the lanes involved, and unlocks them (in reverse order). */
static void lanes_wake_unlock(struct tcp_xport *tx, const size_t need[XPORT_MAX_LANES])
{
	for (unsigned l = tx->pub.nlanes; l-- > 0;) {
		if (need[l]) {
			pthread_cond_broadcast(&tx->lanes[l].cond);
			pthread_mutex_unlock(&tx->lanes[l].lock);
		}
	}
}

/* Lanes locked: -ENOSPC when a lane's send queue has no room for its part. */
static int lanes_room_locked(const struct tcp_xport *tx, const size_t need[XPORT_MAX_LANES])
{
	int r = 0;

	for (unsigned l = 0; l < tx->pub.nlanes; l++) {
		const struct tcp_lane *ln = &tx->lanes[l];

		if (need[l] && !ln->sq_flushed &&
		    ln->seq_tail - ln->seq_acked + need[l] > tx->pub.sq_depth) {
			r = -ENOSPC;
		}
	}
	return r;
}

/* Lane locked: w at the tail of its send queue. */
static void sq_append_locked(struct tcp_lane *ln, const struct xport_wr *w)
{
	unsigned depth = ln->tx->pub.sq_depth;
	size_t slot;
	struct tcp_swr *s;

	if (ln->sq_flushed) {
		/* Lane already failed and flushed: complete at once, as verbs does. */
		tcp_push_write_wc(ln, w->wr_id, XPORT_WC_WR_FLUSH_ERR);
		return;
	}
	slot = ln->seq_tail % depth;
	s = &ln->sq[slot];
	*s = (struct tcp_swr){
		.wr_id = w->wr_id,
		.op = w->opcode == XPORT_OP_WRITE_IMM ? TCP_OP_WRITE_IMM : TCP_OP_WRITE,
		.signaled = (w->flags & XPORT_SEND_SIGNALED) != 0,
		.rkey = w->rkey,
		.remote_addr = w->remote_addr,
		.len = w->len,
		.imm = w->opcode == XPORT_OP_WRITE_IMM ? w->imm : 0,
		.buf = w->buf,
		.mr = (w->flags & XPORT_SEND_INLINE) || w->len == 0 ? NULL : w->mr,
	};
	if ((w->flags & XPORT_SEND_INLINE) && w->len > 0) {
		uint8_t *copy = ln->inline_buf + slot * TCP_MAX_INLINE;

		memcpy(copy, w->buf, w->len);
		s->buf = copy;
	}
	ln->seq_tail++;
}

int tcp_post_writes(struct xport *x, const struct xport_wr *wrs, size_t n)
{
	struct tcp_xport *tx = to_tcp(x);
	size_t need[XPORT_MAX_LANES] = { 0 };
	int r;

	if (n > 0 && !wrs) {
		return -EINVAL;
	}
	r = post_check(tx, wrs, n, need);
	if (r < 0) {
		return r;
	}
	lanes_lock(tx, need);
	r = lanes_room_locked(tx, need);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		sq_append_locked(&tx->lanes[wrs[i].lane], &wrs[i]);
	}
	lanes_wake_unlock(tx, need);
	return r;
}

int tcp_post_recvs(struct xport *x, unsigned lane, const uint64_t *wr_ids, size_t n)
{
	struct tcp_xport *tx = to_tcp(x);
	struct tcp_lane *ln;
	int r = 0;

	if (lane >= x->nlanes || (n > 0 && !wr_ids)) {
		return -EINVAL;
	}
	ln = &tx->lanes[lane];
	pthread_mutex_lock(&ln->lock);
	if (ln->failed) {
		for (size_t i = 0; i < n; i++) {
			tcp_push_wc(tx, wr_ids[i], XPORT_WC_WR_FLUSH_ERR, XPORT_WC_RECV_IMM, 0, 0,
				    lane);
		}
	} else if (ln->rq_count + n > x->rq_depth) {
		r = -ENOSPC;
	} else {
		for (size_t i = 0; i < n; i++) {
			ln->rq[(ln->rq_head + ln->rq_count) % x->rq_depth] = wr_ids[i];
			ln->rq_count++;
		}
	}
	pthread_mutex_unlock(&ln->lock);
	return r;
}
