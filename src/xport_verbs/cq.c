/* SPDX-License-Identifier: MIT */
/*
 * Completions of a verbs xport: each device's CQ polled (its channel event
 * taken and re-armed first, unless the engine busy-polls), each hardware
 * completion mapped back to the engine's wr_id and lane by its sequence
 * (and, on the WRITE + SEND path, a received message turned back into a
 * RECV_IMM); a lane's first failed completion names why it failed.
 */
#include <errno.h>

#include "verbs-internal.h"
#include "verbs_wr.h"

static void complete_one(struct verbs_xport *vx, const struct verbs_dev *dv,
			 const struct ibv_wc *wc, struct xport_wc *out)
{
	enum verbs_wrid_kind kind;
	uint64_t seq48, seq;
	struct verbs_lane *ln;
	int r = verbs_wc_map(wc, vx->pub.nlanes, vx->write_send, out, &kind, &seq48);

	if (r < 0) {
		/* Not a completion we asked for: the device or our bookkeeping is broken. */
		verbs_set_error(vx, "unexpected completion (wr_id 0x%llx, opcode %d, %s)",
				(unsigned long long)wc->wr_id, (int)wc->opcode,
				verbs_wc_status_name(wc->status));
		*out = (struct xport_wc){ .wr_id = wc->wr_id,
					  .status = XPORT_WC_GENERAL_ERR,
					  .opcode = XPORT_WC_WRITE };
		return;
	}
	ln = &vx->lanes[out->lane];
	if (kind == VERBS_WRID_SEND) {
		/* In order per lane: this one and every unsignaled one before it are done. */
		seq = verbs_seq_expand(ln->sq_done, seq48);
		out->wr_id = ln->sq_ids[seq % vx->sq_cap];
		ln->sq_done = seq + 1;
	} else {
		seq = verbs_seq_expand(ln->rq_done, seq48);
		out->wr_id = ln->rq_ids[seq % vx->pub.rq_depth];
		ln->rq_done = seq + 1;
		/* WRITE + SEND: the immediate and length came in the message. */
		if (vx->write_send && wc->status == IBV_WC_SUCCESS) {
			verbs_send_msg_decode(verbs_lane_recv_msg(vx, ln, seq), &out->imm,
					      &out->len);
		}
		/* Windows: the window the peer's SEND closed, if any. */
		if (vx->pub.windows) {
			verbs_wc_invalidation(wc, dv->wc_inv_flags, out);
		}
	}
	/* The lane's first failure names it (a fatal QP event's flush says less). */
	if (wc->status != IBV_WC_SUCCESS && !ln->failed) {
		ln->failed = true;
		verbs_set_error(vx, "lane %u: %s (%s, vendor error 0x%x)", out->lane,
				verbs_wc_status_name(wc->status), ibv_wc_status_str(wc->status),
				wc->vendor_err);
	}
}

/* Up to max completions of one device's CQ into wcs; returns how many. */
static int poll_device(struct verbs_xport *vx, struct verbs_dev *dv, bool event,
		       struct xport_wc *wcs, size_t max)
{
	struct ibv_wc hw[32];
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	size_t n = 0;

	/* Take a pending event (non-blocking fd) and re-arm before polling: nothing is missed. */
	if (event && ibv_get_cq_event(dv->cch, &ev_cq, &ev_ctx) == 0) {
		ibv_ack_cq_events(ev_cq, 1);
		/* Busy polling takes every completion without being told: no more events. */
		if (!vx->busy_poll && ibv_req_notify_cq(dv->cq, 0) != 0) {
			return -EIO;
		}
	}
	while (n < max && n < INT32_MAX) {
		int want = (int)MIN(max - n, ARRAY_SIZE(hw));
		int got = ibv_poll_cq(dv->cq, want, hw);

		if (got < 0) {
			return -EIO; /* the device is taken as lost */
		}
		for (int i = 0; i < got; i++) {
			complete_one(vx, dv, &hw[i], &wcs[n++]);
		}
		if (got < want) {
			break;
		}
	}
	return (int)n;
}

/*
 * Test hook (xport_params.test_qp_fatal): once 64 completions were polled,
 * a lane's QP fails as on QP_FATAL (the event's own path from here).
 */
static int test_qp_fatal(struct verbs_xport *vx, size_t polled)
{
	unsigned lane;

	vx->test_polled += polled;
	if (!vx->test_qp_fatal || vx->test_polled < 64) {
		return 0;
	}
	lane = vx->test_qp_fatal - 1;
	vx->test_qp_fatal = 0;
	if (lane >= vx->pub.nlanes || !vx->lanes[lane].has_qp) {
		return 0;
	}
	return verbs_lane_fatal(vx, lane, verbs_dev_name(vx, vx->lanes[lane].dev),
				ibv_event_type_str(IBV_EVENT_QP_FATAL));
}

int verbs_poll_cq(struct xport *x, struct xport_wc *wcs, size_t max)
{
	struct verbs_xport *vx = to_verbs(x);
	bool comp[XPORT_MAX_LANES] = { false };
	size_t n = 0;
	int r;

	if (max > 0 && !wcs) {
		return -EINVAL;
	}
	if (vx->quiesced) {
		return 0;
	}
	r = verbs_take_events(vx, comp);
	if (r < 0) {
		return r;
	}
	/*
	 * Every device each call, also when wcs fills up: the caller drains
	 * until 0, and each device's channel event must be taken and re-armed.
	 */
	for (unsigned d = 0; d < vx->ndevs && n < INT32_MAX; d++) {
		struct verbs_dev *dv = &vx->devs[d];
		int got;

		if (dv->lost) {
			/*
			 * What the device completed before it went is taken before
			 * anything is flushed: a receive it placed and acknowledged
			 * is one the peer counts as taken (rails' counts). Its CQ
			 * is memory of ours (or, without disassociation, still
			 * mapped) until the device is closed; an error or an empty
			 * poll ends it.
			 */
			if (!dv->drained) {
				got = poll_device(vx, dv, false, wcs + n, max - n);
				dv->drained = got < 0 || (size_t)got < max - n;
				n += got > 0 ? (size_t)got : 0;
			}
			continue;
		}
		got = poll_device(vx, &vx->devs[d], comp[d], wcs + n, max - n);
		if (got < 0) {
			r = verbs_dev_lost(vx, d, "polling its completion queue failed");
			if (r < 0) {
				return r;
			}
			continue;
		}
		n += (size_t)got;
	}
	/* A lost device's lanes: their outstanding work, flushed from our bookkeeping. */
	n += verbs_dev_flush(vx, wcs + n, max - n);
	/* Then nothing of ours holds it: it may go, and come back for the next session. */
	verbs_dev_release_drained(vx);
	r = test_qp_fatal(vx, n);
	return r < 0 ? r : (int)n;
}
