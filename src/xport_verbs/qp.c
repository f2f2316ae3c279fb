/* SPDX-License-Identifier: MIT */
/*
 * A verbs lane's queue pair: an RC QP on its CM id, on the lane's device,
 * with inline data where the device has it; on the WRITE + SEND path its
 * message area (one entry per send queue entry and per posted receive) and
 * the receives for the peer's messages; the RNR timer once it is up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "verbs-internal.h"
#include "verbs_wr.h"

/*
 * The receiver-not-ready NAK timer we ask peers to wait: IB encoding 12 =
 * 0.64 ms. rdma_cm leaves 0, which means 655 ms per retry.
 */
#define VERBS_MIN_RNR_TIMER 12

/* WRITE + SEND: the lane's message entries, registered for local use only. */
static int lane_setup_msgs(struct verbs_xport *vx, struct verbs_lane *ln)
{
	size_t len = (size_t)(vx->sq_cap + vx->pub.rq_depth) * VERBS_SEND_MSG_LEN;

	if (!vx->write_send) {
		return 0;
	}
	ln->msgs = calloc(1, len);
	if (!ln->msgs) {
		return -ENOMEM;
	}
	ln->msg_mr = ibv_reg_mr(vx->devs[ln->dev].pd, ln->msgs, len, IBV_ACCESS_LOCAL_WRITE);
	return ln->msg_mr ? 0 : negerrno();
}

uint8_t *verbs_lane_recv_msg(const struct verbs_xport *vx, const struct verbs_lane *ln,
			     uint64_t seq)
{
	return ln->msgs + (size_t)(vx->sq_cap + seq % vx->pub.rq_depth) * VERBS_SEND_MSG_LEN;
}

int verbs_lane_post_msg_recv(struct verbs_xport *vx, unsigned lane)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct ibv_recv_wr wr, *bad = NULL;
	struct ibv_sge sge;

	verbs_recv_fill_msg(verbs_wrid_encode(VERBS_WRID_RECV, lane, ln->rq_tail),
			    verbs_lane_recv_msg(vx, ln, ln->rq_tail), ln->msg_mr->lkey, &wr, &sge);
	return ibv_post_recv(ln->id->qp, &wr, &bad);
}

/*
 * The send operations a lane posts, and no others: RDMA WRITE, and WRITE
 * WITH IMMEDIATE or (WRITE + SEND path) SEND. Listed, mlx5 sizes each send
 * queue entry for them alone; unlisted, it makes room for the largest of
 * every RC operation (atomics, memory window binds: up to 5 basic blocks an
 * entry), so the queue holds several times fewer than max_qp_wr promises.
 */
static uint64_t lane_send_ops(const struct verbs_xport *vx)
{
	uint64_t windows =
	    IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_LOCAL_INV;

	return IBV_QP_EX_WITH_RDMA_WRITE |
	       (vx->write_send ? IBV_QP_EX_WITH_SEND : IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) |
	       (vx->pub.windows ? windows : 0);
}

/*
 * One try at the lane's QP: with the operations listed (rdma_create_qp_ex),
 * or plainly for providers that take no list (siw, cxgb4: no create_qp_ex).
 * On success *ret_inline is what the device gave.
 */
static int lane_try_qp(struct verbs_xport *vx, struct verbs_lane *ln, struct verbs_dev *dv,
		       uint32_t inline_len, bool list_ops, uint32_t *ret_inline)
{
	struct ibv_qp_init_attr_ex attr = {
		.send_cq = dv->cq,
		.recv_cq = dv->cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
		.cap = { .max_send_wr = vx->sq_cap + 1, /* + the quiesce marker */
			 .max_recv_wr = vx->pub.rq_depth,
			 .max_send_sge = 1,
			 .max_recv_sge = 1,
			 .max_inline_data = inline_len },
		.comp_mask = IBV_QP_INIT_ATTR_PD | (list_ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0),
		.pd = dv->pd,
		.send_ops_flags = list_ops ? lane_send_ops(vx) : 0,
	};

	if (rdma_create_qp_ex(ln->id, &attr) != 0) {
		return negerrno();
	}
	*ret_inline = attr.cap.max_inline_data;
	return 0;
}

/*
 * With inline data if the device has it, the operations listed where the
 * provider takes the list: the first of the four that works. A QP without
 * inline data is said (debug here; the programs say it once per session).
 */
int verbs_lane_create_qp(struct verbs_xport *vx, unsigned lane, bool may_add)
{
	static const struct {
		uint32_t inline_len;
		bool list_ops;
	} tries[] = {
		{ VERBS_MAX_INLINE, true }, { VERBS_MAX_INLINE, false }, { 0, true }, { 0, false }
	};
	struct verbs_lane *ln = &vx->lanes[lane];
	struct verbs_dev *dv;
	uint32_t got = 0;
	int r = verbs_device_of(vx, ln->id->verbs, may_add), inline_err = 0;

	if (r < 0) {
		return r;
	}
	ln->dev = (unsigned)r;
	dv = &vx->devs[ln->dev];
	if (vx->pub.windows) {
		r = verbs_mw_device_check(vx, ln->dev);
		if (r < 0) {
			return r;
		}
	}
	for (size_t t = 0; t < ARRAY_SIZE(tries); t++) {
		r = lane_try_qp(vx, ln, dv, tries[t].inline_len, tries[t].list_ops, &got);
		if (r == 0) {
			if (tries[t].inline_len == 0) {
				log_debug(
				    "verbs: lane %u on %s: no inline data (with %u bytes: %s)",
				    lane, ibv_get_device_name(dv->verbs->device), VERBS_MAX_INLINE,
				    strerror(-inline_err));
				got = 0;
			}
			break;
		}
		inline_err = tries[t].inline_len ? r : inline_err;
	}
	if (r < 0) {
		return r;
	}
	ln->has_qp = true;
	r = lane_setup_msgs(vx, ln);
	if (r < 0) {
		return r;
	}
	/* The device may give more than asked; promise what all lanes have. */
	vx->pub.max_inline = MIN(vx->pub.max_inline, got);
	return 0;
}

/*
 * Once a lane is up (RTS): ask peers to wait 0.64 ms after our RNR NAK, not
 * the 655 ms rdma_cm leaves (RTS -> RTS may change it). Best effort: a
 * provider that refuses keeps the default, which is slow but correct.
 */
void verbs_lane_tune(struct verbs_lane *ln)
{
	struct ibv_qp_attr attr = { .min_rnr_timer = VERBS_MIN_RNR_TIMER };

	if (ln->id && ln->id->qp) {
		(void)ibv_modify_qp(ln->id->qp, &attr, IBV_QP_MIN_RNR_TIMER);
	}
}
