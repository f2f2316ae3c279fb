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

/* With inline data if the device has it. */
int verbs_lane_create_qp(struct verbs_xport *vx, unsigned lane, bool may_add)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct ibv_qp_init_attr attr;
	struct verbs_dev *dv;
	int r = verbs_device_of(vx, ln->id->verbs, may_add);

	if (r < 0) {
		return r;
	}
	ln->dev = (unsigned)r;
	dv = &vx->devs[ln->dev];
	for (int attempt = 0; attempt < 2; attempt++) {
		memset(&attr, 0, sizeof(attr));
		attr.send_cq = dv->cq;
		attr.recv_cq = dv->cq;
		attr.qp_type = IBV_QPT_RC;
		attr.sq_sig_all = 0;
		attr.cap.max_send_wr = vx->sq_cap + 1; /* + the quiesce marker */
		attr.cap.max_recv_wr = vx->pub.rq_depth;
		attr.cap.max_send_sge = 1;
		attr.cap.max_recv_sge = 1;
		attr.cap.max_inline_data = attempt == 0 ? VERBS_MAX_INLINE : 0;
		if (rdma_create_qp(ln->id, dv->pd, &attr) == 0) {
			ln->has_qp = true;
			r = lane_setup_msgs(vx, ln);
			if (r < 0) {
				return r;
			}
			/* The device may give more than asked; promise what all lanes have. */
			if (attr.cap.max_inline_data < vx->pub.max_inline) {
				vx->pub.max_inline = attr.cap.max_inline_data;
			}
			if (attempt == 1) {
				vx->pub.max_inline = 0;
			}
			return 0;
		}
		r = negerrno();
	}
	return r;
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
