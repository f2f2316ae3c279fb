/* SPDX-License-Identifier: MIT */
/*
 * Taking a verbs xport's lanes down: quiesce puts every lane's QP in error
 * and waits (bounded) until everything outstanding came back flushed, so
 * the memory the lanes use may go (teardown); lane_down fails one lane as
 * if its connection were lost.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "verbs-internal.h"
#include "verbs_wr.h"

/*
 * Teardown waits this long for the lanes' flush (QP in error: every work
 * request outstanding completes with WR_FLUSH_ERR) before it goes on.
 */
#define VERBS_DRAIN_MS 300

/* Has every lane's flush come back: the marker's, and one per posted receive? */
static bool lanes_drained(const struct verbs_xport *vx)
{
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		const struct verbs_lane *ln = &vx->lanes[i];

		if (!ln->draining) {
			continue;
		}
		if ((ln->drain_sq && ln->sq_done <= ln->drain_seq) || ln->rq_done != ln->rq_tail) {
			return false;
		}
	}
	return true;
}

/* Takes what a device's CQ holds, for the bookkeeping only (nobody gets these). */
static int drain_device(struct verbs_xport *vx, struct verbs_dev *dv)
{
	struct ibv_wc hw[32];
	int got;

	if (!dv->cq || dv->lost) {
		return 0; /* a half-built xport (a device whose set-up failed), or a lost device */
	}
	got = ibv_poll_cq(dv->cq, (int)ARRAY_SIZE(hw), hw);
	for (int i = 0; i < got; i++) {
		enum verbs_wrid_kind kind;
		struct verbs_lane *ln;
		unsigned lane;
		uint64_t seq48;

		if (verbs_wrid_decode(hw[i].wr_id, vx->pub.nlanes, &kind, &lane, &seq48) < 0) {
			continue;
		}
		ln = &vx->lanes[lane];
		if (kind == VERBS_WRID_SEND) {
			ln->sq_done = verbs_seq_expand(ln->sq_done, seq48) + 1;
		} else {
			ln->rq_done = verbs_seq_expand(ln->rq_done, seq48) + 1;
		}
	}
	return got;
}

/* Lane i's QP to error, and a signaled marker after everything on its send queue. */
static void lane_drain_start(struct verbs_xport *vx, unsigned i)
{
	struct verbs_lane *ln = &vx->lanes[i];
	struct ibv_send_wr wr = { 0 }, *bad = NULL;
	int e;

	if (!ln->has_qp || !ln->id || !ln->id->qp || verbs_lane_lost(vx, i)) {
		return;
	}
	e = -verbs_qp_error(ln);
	if (e != 0) {
		log_debug("verbs: lane %u: QP to error: %s", i, strerror(e));
		return;
	}
	ln->draining = true;
	/* Zero bytes, no SGE: flushed at once, it touches no memory. */
	wr.wr_id = verbs_wrid_encode(VERBS_WRID_SEND, i, ln->sq_tail);
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	e = ibv_post_send(ln->id->qp, &wr, &bad);
	if (e != 0) {
		log_debug("verbs: lane %u: drain marker: %s", i, strerror(e));
		return;
	}
	ln->drain_sq = true;
	ln->drain_seq = ln->sq_tail++;
}

/* Every device's CQ polled once: how many completions came, or -EIO. */
static int drain_round(struct verbs_xport *vx)
{
	int got = 0;

	for (unsigned d = 0; d < vx->ndevs; d++) {
		int n = drain_device(vx, &vx->devs[d]);

		if (n < 0) {
			log_debug("verbs: drain: ibv_poll_cq failed");
			return -EIO;
		}
		got += n;
	}
	return got;
}

/* Said at debug level: the lanes whose flush did not all come back. */
static void log_undrained(const struct verbs_xport *vx)
{
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		const struct verbs_lane *ln = &vx->lanes[i];

		if (!ln->draining || ((!ln->drain_sq || ln->sq_done > ln->drain_seq) &&
				      ln->rq_done == ln->rq_tail)) {
			continue;
		}
		log_debug("verbs: lane %u not drained after %d ms: %llu sends, "
			  "%llu receives outstanding; going on",
			  i, VERBS_DRAIN_MS, (unsigned long long)(ln->sq_tail - ln->sq_done),
			  (unsigned long long)(ln->rq_tail - ln->rq_done));
	}
}

/*
 * As the kernel's ib_drain_qp: each QP to error, which flushes everything
 * outstanding on it; a signaled marker on its send queue (unsignaled
 * requests that finished leave no completion, the marker's flush comes
 * after all of them); then the CQs polled until every lane's marker and
 * posted receives are back, or VERBS_DRAIN_MS passed (said at debug
 * level; destroying the QPs still stops them before the MRs go).
 */
int verbs_quiesce(struct xport *x)
{
	struct verbs_xport *vx = to_verbs(x);
	int64_t t0 = now_ms(), deadline = t0 + VERBS_DRAIN_MS;

	if (vx->quiesced) {
		return 0;
	}
	vx->quiesced = true;
	for (unsigned i = 0; i < x->nlanes; i++) {
		lane_drain_start(vx, i);
	}
	while (!lanes_drained(vx)) {
		struct timespec ts = { .tv_nsec = 1000000 };
		int got = drain_round(vx);

		if (got < 0) {
			return got;
		}
		if (got > 0 || lanes_drained(vx)) {
			continue;
		}
		if (now_ms() >= deadline) {
			log_undrained(vx);
			return -ETIMEDOUT;
		}
		nanosleep(&ts, NULL);
	}
	log_debug("verbs: %u lanes quiesced in %lld ms", x->nlanes, (long long)(now_ms() - t0));
	return 0;
}

/*
 * One lane's QP to error: its posted work is flushed. The peer's QP learns
 * at its next request (retries exhausted); the engine tells the peer over
 * the control channel (rails) before that.
 */
int verbs_lane_down(struct xport *x, unsigned lane)
{
	struct verbs_xport *vx = to_verbs(x);
	struct verbs_lane *ln;
	int r;

	if (lane >= x->nlanes) {
		return -EINVAL;
	}
	ln = &vx->lanes[lane];
	if (verbs_lane_lost(vx, lane)) {
		ln->failed = true; /* its device is gone (or released): its work is flushed by us */
		return 0;
	}
	if (!ln->has_qp) {
		return -ENOTCONN;
	}
	r = verbs_qp_error(ln);
	if (r < 0) {
		return r;
	}
	ln->failed = true;
	return 0;
}
