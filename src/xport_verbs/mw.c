/* SPDX-License-Identifier: MIT */
/*
 * Memory windows: the zero-copy slot fence of a verbs xport
 * (xport_params.windows). A registration made XPORT_ACCESS_WINDOWS has
 * IBV_ACCESS_MW_BIND and no remote access of its own; window idx of it is a type-2 memory window per device,
 * allocated on first use. window_open binds it over a range for one lane's
 * QP (type-2 windows answer only the QP they were bound on) under the next
 * key (ibv_inc_rkey: the 8-bit tag advances, so a key of an earlier opening
 * is refused); the peer's SEND_WITH_INV naming that key closes it in
 * hardware before our receive completes (IBV_WC_WITH_INV, and the key in
 * invalidated_rkey), and from then its writes there are remote access
 * errors. window_close closes it from our side: LOCAL_INV on its lane while
 * that is up; a lost lane's window is deallocated (nothing can be posted
 * there), so that it can be opened on another lane of the device. Binds and invalidations are
 * posted unsignaled on the lane's send queue, in its bookkeeping like any
 * request, with wr_id XPORT_WR_ID_WINDOW: only an error comes back.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs-internal.h"
#include "verbs_wr.h"

int verbs_mw_device_check(struct verbs_xport *vx, unsigned dev)
{
	struct ibv_context *verbs = vx->devs[dev].verbs;
	struct ibv_device_attr attr;
	int e = ibv_query_device(verbs, &attr);

	if (e != 0) {
		verbs_set_error(vx, "%s: ibv_query_device: %s", ibv_get_device_name(verbs->device),
				strerror(e));
		return -e;
	}
	if (!verbs_mw_caps_ok(attr.device_cap_flags) || attr.max_mw == 0) {
		verbs_set_error(
		    vx, "%s: no type-2 memory windows (device_cap_flags 0x%x, max_mw %d)",
		    ibv_get_device_name(verbs->device), attr.device_cap_flags, attr.max_mw);
		return -EOPNOTSUPP;
	}
	vx->devs[dev].wc_inv_flags = verbs_wc_inv_flags(attr.vendor_id);
	return 0;
}

static struct verbs_mr *mr_of(struct verbs_xport *vx, const struct xport_mr *pub)
{
	for (struct verbs_mr *m = vx->mrs; m; m = m->next) {
		if (&m->pub == pub) {
			return m;
		}
	}
	return NULL;
}

/* Window idx of m on the lane's device, allocated on first use. */
static int window_get(struct verbs_xport *vx, struct verbs_mr *m, uint32_t idx, unsigned lane,
		      struct verbs_window **ret)
{
	unsigned dev = vx->lanes[lane].dev;
	struct verbs_window *w;

	if (!m->win[dev]) {
		m->win[dev] = calloc(XPORT_MAX_WINDOWS, sizeof(*m->win[dev]));
		if (!m->win[dev]) {
			return -ENOMEM;
		}
	}
	w = &m->win[dev][idx];
	if (!w->mw) {
		w->mw = ibv_alloc_mw(vx->devs[dev].pd, IBV_MW_TYPE_2);
		if (!w->mw) {
			int r = negerrno();

			verbs_set_error(vx, "ibv_alloc_mw: %s", strerror(-r));
			return r;
		}
	}
	*ret = w;
	return 0;
}

/* The checks both operations share: a registration made for windows, a live lane. */
static int window_args(struct verbs_xport *vx, const struct xport_mr *pub, uint32_t idx,
		       unsigned lane, struct verbs_mr **ret)
{
	struct verbs_mr *m;

	if (!vx->pub.windows) {
		return -EOPNOTSUPP;
	}
	if (!pub || idx >= XPORT_MAX_WINDOWS || lane >= vx->pub.nlanes) {
		return -EINVAL;
	}
	if (vx->quiesced) {
		return -ESHUTDOWN;
	}
	m = mr_of(vx, pub);
	if (!m || !(pub->access & XPORT_ACCESS_WINDOWS)) {
		return -EINVAL;
	}
	if (!vx->lanes[lane].has_qp || vx->lanes[lane].failed || verbs_lane_lost(vx, lane)) {
		return -ENOTCONN;
	}
	if (vx->lanes[lane].sq_tail - vx->lanes[lane].sq_done + 1 > vx->sq_cap) {
		return -ENOSPC;
	}
	*ret = m;
	return 0;
}

/* wr (its wr_id the lane's next send sequence) posted and kept in the lane's bookkeeping. */
static int window_post(struct verbs_xport *vx, unsigned lane, struct ibv_send_wr *wr)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct ibv_send_wr *bad = NULL;
	int e = ibv_post_send(ln->id->qp, wr, &bad);

	if (e != 0) {
		verbs_set_error(vx, "lane %u: ibv_post_send (%s): %s", lane,
				wr->opcode == IBV_WR_BIND_MW ? "bind window" : "invalidate window",
				strerror(e));
		return e == ENOMEM ? -ENOSPC : -e;
	}
	ln->sq_ids[ln->sq_tail % vx->sq_cap] = XPORT_WR_ID_WINDOW;
	ln->sq_tail++;
	return 0;
}

int verbs_window_open(struct xport *x, struct xport_mr *pub, uint32_t idx, unsigned lane,
		      uint64_t offset, uint64_t len, uint32_t *ret_rkey)
{
	struct verbs_xport *vx = to_verbs(x);
	struct verbs_window *w;
	struct ibv_send_wr wr;
	struct verbs_mr *m;
	uint32_t rkey;
	int r = window_args(vx, pub, idx, lane, &m);

	if (r < 0) {
		return r;
	}
	if (!ret_rkey || len == 0 || !xport_range_inside(0, pub->len, offset, len)) {
		return -EINVAL;
	}
	r = window_get(vx, m, idx, lane, &w);
	if (r < 0) {
		return r;
	}
	rkey = ibv_inc_rkey(w->mw->rkey);
	if (rkey == 0) {
		/* 0 means "no key" to the peer (a credit's, inv_rkey): the next tag. */
		rkey = ibv_inc_rkey(rkey);
	}
	verbs_window_bind_fill(verbs_wrid_encode(VERBS_WRID_SEND, lane, vx->lanes[lane].sq_tail),
			       w->mw, m->mr[vx->lanes[lane].dev], pub->iova + offset, len, rkey,
			       &wr);
	r = window_post(vx, lane, &wr);
	if (r < 0) {
		return r;
	}
	w->mw->rkey = rkey;
	*ret_rkey = rkey;
	return 0;
}

/*
 * Window idx of a lost lane: nothing can be posted there, so it goes with
 * its lane: deallocated, its key refused from then on every QP; the next
 * opening on that device allocates a fresh one.
 */
static int window_release(struct verbs_xport *vx, const struct xport_mr *pub, uint32_t idx,
			  unsigned lane)
{
	struct verbs_mr *m = mr_of(vx, pub);
	unsigned dev = vx->lanes[lane].dev;
	struct verbs_window *w;
	int e;

	if (!m || !m->win[dev] || !m->win[dev][idx].mw) {
		return m ? 0 : -EINVAL;
	}
	w = &m->win[dev][idx];
	e = ibv_dealloc_mw(w->mw);
	if (e != 0) {
		verbs_set_error(vx, "lane %u: ibv_dealloc_mw: %s", lane, strerror(e));
		return -e;
	}
	w->mw = NULL;
	return 0;
}

int verbs_window_close(struct xport *x, struct xport_mr *pub, uint32_t idx, unsigned lane)
{
	struct verbs_xport *vx = to_verbs(x);
	struct verbs_window *w;
	struct ibv_send_wr wr;
	struct verbs_mr *m;
	int r = window_args(vx, pub, idx, lane, &m);

	if (r == -ENOTCONN) {
		return window_release(vx, pub, idx, lane);
	}
	if (r < 0) {
		return r;
	}
	r = window_get(vx, m, idx, lane, &w);
	if (r < 0) {
		return r;
	}
	verbs_window_inv_fill(verbs_wrid_encode(VERBS_WRID_SEND, lane, vx->lanes[lane].sq_tail),
			      w->mw->rkey, &wr);
	return window_post(vx, lane, &wr);
}
