/* SPDX-License-Identifier: MIT */
/*
 * Posting on a verbs xport: the engine's writes checked, turned into chains
 * of hardware requests per lane (src/verbs_wr.c; two per WRITE_IMM with
 * bytes on the WRITE + SEND path), their wr_ids remembered by send
 * sequence, and posted; receives likewise, one of our message receives
 * each on the WRITE + SEND path.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs-internal.h"
#include "verbs_wr.h"

#define VERBS_POST_STACK 64

/* The hardware requests of one post_writes call: on the stack unless there are many. */
struct hw_batch {
	struct ibv_send_wr stack_wr[2 * VERBS_POST_STACK];
	struct ibv_sge stack_sge[2 * VERBS_POST_STACK];
	size_t stack_src[2 * VERBS_POST_STACK];
	struct ibv_send_wr *wr;
	struct ibv_sge *sge;
	size_t *src; /* the engine's request each hardware request comes from */
	size_t n;
	struct ibv_send_wr *heads[XPORT_MAX_LANES]; /* each lane's chain, or NULL */
	size_t counts[XPORT_MAX_LANES];
};

static int batch_init(struct hw_batch *b, size_t n)
{
	b->wr = b->stack_wr;
	b->sge = b->stack_sge;
	b->src = b->stack_src;
	if (n > VERBS_POST_STACK) {
		b->wr = calloc(2 * n, sizeof(*b->wr));
		b->sge = calloc(2 * n, sizeof(*b->sge));
		b->src = calloc(2 * n, sizeof(*b->src));
		if (!b->wr || !b->sge || !b->src) {
			return -ENOMEM;
		}
	}
	return 0;
}

static void batch_fini(struct hw_batch *b)
{
	if (b->wr != b->stack_wr) {
		free(b->wr);
		free(b->sge);
		free(b->src);
	}
}

/* Every request checked, and how many hardware requests each lane takes. */
static int post_count(const struct verbs_xport *vx, const struct xport_wr *wrs, size_t n,
		      size_t need[XPORT_MAX_LANES])
{
	for (size_t i = 0; i < n; i++) {
		int r = verbs_wr_check(&wrs[i], vx->pub.nlanes, vx->pub.max_inline);

		if (r < 0) {
			return r;
		}
		if ((wrs[i].inv_rkey != 0 || wrs[i].key != 0) && !vx->pub.windows) {
			return -EINVAL;
		}
		need[wrs[i].lane] += verbs_wr_hw_count(&wrs[i], vx->write_send);
	}
	return 0;
}

/*
 * Each lane involved with room; base: its next send sequence. Work for a
 * lane whose peer disconnected (its device lost, its process gone) fails
 * the lane: its QP in error flushes that work and all before it, and the
 * engine takes the lane as lost (rails) or the session as failed.
 */
static int lanes_ready(struct verbs_xport *vx, const size_t need[XPORT_MAX_LANES],
		       uint64_t base[XPORT_MAX_LANES])
{
	for (unsigned l = 0; l < vx->pub.nlanes; l++) {
		struct verbs_lane *ln = &vx->lanes[l];

		if (need[l] && ln->peer_gone && !ln->failed &&
		    verbs_lane_fatal(vx, l, ibv_get_device_name(ln->id->verbs->device),
				     "the peer disconnected") < 0) {
			return -ENOTCONN;
		}
		if (need[l] && ln->sq_tail - ln->sq_done + need[l] > vx->sq_cap) {
			return -ENOSPC;
		}
		base[l] = ln->sq_tail;
	}
	return 0;
}

/* The requests as one chain of hardware requests per lane, numbered from base. */
static void batch_chain(struct verbs_xport *vx, const struct xport_wr *wrs, size_t n,
			const uint64_t base[XPORT_MAX_LANES], struct hw_batch *b)
{
	struct xport *x = &vx->pub;

	if (vx->write_send) {
		uint8_t *msgs[XPORT_MAX_LANES];
		uint32_t lkeys[XPORT_MAX_LANES];

		for (unsigned l = 0; l < x->nlanes; l++) {
			msgs[l] = vx->lanes[l].msgs;
			/* None on a released device: nothing is posted there. */
			lkeys[l] = vx->lanes[l].msg_mr ? vx->lanes[l].msg_mr->lkey : 0;
		}
		b->n = verbs_wr_chain_send(wrs, n, x->nlanes, base, x->max_inline, msgs, lkeys,
					   vx->sq_cap, b->wr, b->sge, b->src, b->heads, b->counts);
	} else {
		verbs_wr_chain(wrs, n, x->nlanes, base, x->max_inline, b->wr, b->sge, b->heads,
			       b->counts);
		for (size_t i = 0; i < n; i++) {
			b->src[i] = i;
		}
		b->n = n;
	}
}

/* Each hardware request's engine wr_id, by its send sequence: completions map back. */
static void batch_record(struct verbs_xport *vx, const struct xport_wr *wrs,
			 const struct hw_batch *b)
{
	for (size_t k = 0; k < b->n; k++) {
		const struct xport_wr *w = &wrs[b->src[k]];
		struct verbs_lane *ln = &vx->lanes[w->lane];
		enum verbs_wrid_kind kind;
		unsigned lane;
		uint64_t seq;

		(void)verbs_wrid_decode(b->wr[k].wr_id, vx->pub.nlanes, &kind, &lane, &seq);
		ln->sq_ids[verbs_seq_expand(ln->sq_done, seq) % vx->sq_cap] = w->wr_id;
	}
}

/* Each lane's chain posted, until a lane refuses. */
static int batch_post(struct verbs_xport *vx, const struct hw_batch *b)
{
	int r = 0;

	for (unsigned l = 0; l < vx->pub.nlanes && r >= 0; l++) {
		struct verbs_lane *ln = &vx->lanes[l];
		struct ibv_send_wr *bad = NULL;
		int e;

		if (!b->heads[l]) {
			continue;
		}
		if (verbs_lane_lost(vx, l)) {
			/* Its device is gone: flushed from our bookkeeping (devloss.c). */
			ln->sq_tail += b->counts[l];
			continue;
		}
		e = ibv_post_send(ln->id->qp, b->heads[l], &bad);
		if (e == 0) {
			ln->sq_tail += b->counts[l];
			continue;
		}
		/* Those before bad went in and will complete. */
		for (struct ibv_send_wr *w = b->heads[l]; w && w != bad; w = w->next) {
			ln->sq_tail++;
		}
		verbs_set_error(vx, "lane %u: ibv_post_send: %s", l, strerror(e));
		r = e == ENOMEM ? -ENOSPC : -e;
	}
	return r;
}

int verbs_post_writes(struct xport *x, const struct xport_wr *wrs, size_t n)
{
	struct verbs_xport *vx = to_verbs(x);
	size_t need[XPORT_MAX_LANES] = { 0 };
	uint64_t base[XPORT_MAX_LANES];
	struct hw_batch b;
	int r;

	if (n == 0) {
		return 0;
	}
	if (!wrs) {
		return -EINVAL;
	}
	if (vx->quiesced) {
		return -ESHUTDOWN;
	}
	r = post_count(vx, wrs, n, need);
	if (r >= 0) {
		r = lanes_ready(vx, need, base);
	}
	if (r < 0) {
		return r;
	}
	r = batch_init(&b, n);
	if (r >= 0) {
		batch_chain(vx, wrs, n, base, &b);
		batch_record(vx, wrs, &b);
		r = batch_post(vx, &b);
	}
	batch_fini(&b);
	return r;
}

int verbs_post_recvs(struct xport *x, unsigned lane, const uint64_t *wr_ids, size_t n)
{
	struct verbs_xport *vx = to_verbs(x);
	struct verbs_lane *ln;

	if (lane >= x->nlanes || (n > 0 && !wr_ids)) {
		return -EINVAL;
	}
	if (vx->quiesced) {
		return -ESHUTDOWN;
	}
	ln = &vx->lanes[lane];
	if (ln->rq_tail - ln->rq_done + n > x->rq_depth) {
		return -ENOSPC;
	}
	for (size_t i = 0; i < n; i++) {
		struct ibv_recv_wr wr, *bad = NULL;
		int e;

		ln->rq_ids[ln->rq_tail % x->rq_depth] = wr_ids[i];
		if (verbs_lane_lost(vx, lane)) {
			e = 0; /* flushed from our bookkeeping (devloss.c) */
		} else if (vx->write_send) {
			e = verbs_lane_post_msg_recv(vx, lane);
		} else {
			verbs_recv_fill(verbs_wrid_encode(VERBS_WRID_RECV, lane, ln->rq_tail), &wr);
			e = ibv_post_recv(ln->id->qp, &wr, &bad);
		}
		if (e != 0) {
			verbs_set_error(vx, "lane %u: ibv_post_recv: %s", lane, strerror(e));
			return e == ENOMEM ? -ENOSPC : -e;
		}
		ln->rq_tail++;
	}
	return 0;
}
