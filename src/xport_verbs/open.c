/* SPDX-License-Identifier: MIT */
/*
 * Opening the lanes on the WRITE + SEND path. iWARP has no RNR retry and
 * MPA wants the active side to speak first: the active side sends one
 * opening message on each lane, for which the passive side posted a receive
 * before it accepted; accept returns once each lane's opening message is
 * in, connect once each was taken. On the WRITE_IMM path nothing is sent.
 */
#include <errno.h>
#include <time.h>

#include "clock.h"
#include "verbs-internal.h"
#include "verbs_wr.h"

int verbs_lane_post_open(struct verbs_xport *vx, unsigned lane)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct xport_wr w = { .opcode = XPORT_OP_WRITE_IMM,
			      .flags = XPORT_SEND_SIGNALED,
			      .imm = VERBS_OPEN_IMM,
			      .len = 0,
			      .lane = lane };
	uint8_t *msgs[XPORT_MAX_LANES] = { 0 };
	uint32_t lkeys[XPORT_MAX_LANES] = { 0 };
	struct ibv_send_wr wr, *heads[XPORT_MAX_LANES], *bad = NULL;
	size_t counts[XPORT_MAX_LANES], src;
	uint64_t base[XPORT_MAX_LANES] = { 0 };
	struct ibv_sge sge;
	int e;

	msgs[lane] = ln->msgs;
	lkeys[lane] = ln->msg_mr->lkey;
	base[lane] = ln->sq_tail;
	(void)verbs_wr_chain_send(&w, 1, vx->pub.nlanes, base, vx->pub.max_inline, msgs, lkeys,
				  vx->sq_cap, &wr, &sge, &src, heads, counts);
	/* The length field says "opening", not a length: no write ever has that many bytes. */
	verbs_send_msg_encode(VERBS_OPEN_IMM, VERBS_OPEN_LEN,
			      ln->msgs + (base[lane] % vx->sq_cap) * VERBS_SEND_MSG_LEN);
	e = ibv_post_send(ln->id->qp, &wr, &bad);
	if (e != 0) {
		verbs_set_error(vx, "lane %u: opening message: ibv_post_send: %s", lane,
				strerror(e));
		return -e;
	}
	ln->sq_tail++;
	return 0;
}

/* Has every lane its opening message out (active) or in (passive)? */
static bool lanes_open(const struct verbs_xport *vx)
{
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		const struct verbs_lane *ln = &vx->lanes[i];

		if (ln->sq_done != ln->sq_tail || ln->rq_done != ln->rq_tail) {
			return false;
		}
	}
	return true;
}

/* One completion while the lanes open: only the opening messages may come. */
static int open_complete(struct verbs_xport *vx, const struct ibv_wc *wc)
{
	struct xport_wc out;
	enum verbs_wrid_kind kind;
	struct verbs_lane *ln;
	uint64_t seq48, seq;
	uint32_t imm, len;

	if (verbs_wc_map(wc, vx->pub.nlanes, true, &out, &kind, &seq48) < 0) {
		verbs_set_error(vx, "opening the lanes: a completion that is no opening message "
				    "(is the peer on the WRITE + SEND path?)");
		return -EPROTO;
	}
	ln = &vx->lanes[out.lane];
	if (wc->status != IBV_WC_SUCCESS) {
		verbs_set_error(vx, "lane %u: opening message: %s (%s, vendor error 0x%x)",
				out.lane, verbs_wc_status_name(wc->status),
				ibv_wc_status_str(wc->status), wc->vendor_err);
		return -ECONNABORTED;
	}
	if (kind == VERBS_WRID_SEND) {
		ln->sq_done = verbs_seq_expand(ln->sq_done, seq48) + 1;
		return 0;
	}
	seq = verbs_seq_expand(ln->rq_done, seq48);
	verbs_send_msg_decode(verbs_lane_recv_msg(vx, ln, seq), &imm, &len);
	ln->rq_done = seq + 1;
	if (imm != VERBS_OPEN_IMM || len != VERBS_OPEN_LEN) {
		verbs_set_error(vx, "lane %u: the peer's first message is no opening message",
				out.lane);
		return -EPROTO;
	}
	return 0;
}

/*
 * Nothing else is in flight yet, so whatever the CQs hold is an opening
 * message. Their channel events stay for the first poll_cq, which re-arms.
 */
int verbs_wait_open(struct verbs_xport *vx, int64_t deadline)
{
	if (!vx->write_send) {
		return 0;
	}
	while (!lanes_open(vx)) {
		struct timespec ts = { .tv_nsec = 1000000 };
		int got = 0;

		for (unsigned d = 0; d < vx->ndevs; d++) {
			struct ibv_wc hw[XPORT_MAX_LANES];
			int n = ibv_poll_cq(vx->devs[d].cq, (int)ARRAY_SIZE(hw), hw);

			if (n < 0) {
				verbs_set_error(vx, "ibv_poll_cq failed");
				return -EIO;
			}
			for (int i = 0; i < n; i++) {
				int r = open_complete(vx, &hw[i]);

				if (r < 0) {
					return r;
				}
			}
			got += n;
		}
		if (got > 0) {
			continue;
		}
		if (remaining_ms(deadline) == 0) {
			verbs_set_error(vx, "the lanes' opening messages did not all come through");
			return -ETIMEDOUT;
		}
		nanosleep(&ts, NULL);
	}
	return 0;
}
