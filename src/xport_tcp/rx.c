/* SPDX-License-Identifier: MIT */
/*
 * A tcp lane's RX thread. Each frame's header is checked before a byte of
 * its payload is read: a data frame against the MR table (key, range,
 * fences) and the posted receives, then its payload is read straight into
 * the registered target and, on sealed lanes, opened and its tag checked
 * before the frame counts as placed; an ACK or NAK completes or fails our
 * own requests. Anything wrong fails the lane (a NAK for the peer's frame).
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "tcp-internal.h"

/* ---- data frames ---- */

/*
 * The registration a write of f->len > 0 bytes goes to, taken busy (it is
 * ln->placing until tcp_mr_release), at offset *ret_off. Returns 0, or the
 * NAK code with why recorded.
 */
static int rx_claim_target(struct tcp_lane *ln, const struct tcp_frame *f, struct tcp_mr **ret_mr,
			   uint64_t *ret_off)
{
	struct tcp_xport *tx = ln->tx;
	struct tcp_mr *m;
	uint64_t off;

	pthread_mutex_lock(&tx->mr_lock);
	m = tcp_mr_find_rkey_locked(tx, f->rkey);
	if (!m) {
		pthread_mutex_unlock(&tx->mr_lock);
		tcp_set_error(tx, "lane %u: write with unknown or revoked rkey 0x%x", ln->idx,
			      f->rkey);
		return TCP_NAK_REM_ACCESS;
	}
	if (!xport_range_inside(m->pub.iova, m->pub.len, f->addr, f->len)) {
		pthread_mutex_unlock(&tx->mr_lock);
		tcp_set_error(tx,
			      "lane %u: write outside registration "
			      "(rkey 0x%x addr 0x%llx len %u)",
			      ln->idx, f->rkey, (unsigned long long)f->addr, f->len);
		return TCP_NAK_REM_ACCESS;
	}
	off = f->addr - m->pub.iova;
	if (fence_set_touches(&m->fences, off, f->len)) {
		pthread_mutex_unlock(&tx->mr_lock);
		tcp_set_error(tx,
			      "lane %u: write into memory the receiver holds "
			      "(rkey 0x%x addr 0x%llx len %u)",
			      ln->idx, f->rkey, (unsigned long long)f->addr, f->len);
		return TCP_NAK_REM_ACCESS;
	}
	m->busy++;
	ln->placing = m;
	ln->placing_off = off;
	ln->placing_len = f->len;
	pthread_mutex_unlock(&tx->mr_lock);
	*ret_mr = m;
	*ret_off = off;
	return 0;
}

static bool rx_have_recv(struct tcp_lane *ln)
{
	bool have_recv;

	pthread_mutex_lock(&ln->lock);
	have_recv = ln->rq_count > 0;
	pthread_mutex_unlock(&ln->lock);
	return have_recv;
}

/*
 * Validate a WRITE/WRITE_IMM header. On success *ret_mr holds a busy
 * reference (NULL for len 0: a zero-length write touches no memory and, as on
 * verbs, needs no rkey) and *ret_target is where the payload goes. On failure
 * returns the NAK code and records why.
 */
static int rx_validate(struct tcp_lane *ln, const struct tcp_frame *f, struct tcp_mr **ret_mr,
		       uint8_t **ret_target)
{
	struct tcp_xport *tx = ln->tx;
	struct tcp_mr *m = NULL;
	uint64_t off = 0;

	if (f->flags != 0 || f->reserved16 != 0 || f->reserved64 != 0) {
		tcp_set_error(tx, "lane %u: malformed frame (op %u, reserved bits set)", ln->idx,
			      f->op);
		return TCP_NAK_INVALID;
	}
	if (f->len > 0) {
		int code = rx_claim_target(ln, f, &m, &off);

		if (code != 0) {
			return code;
		}
	}
	if (f->op == TCP_OP_WRITE_IMM && !rx_have_recv(ln)) {
		if (m) {
			tcp_mr_release(tx, ln, m);
		}
		tcp_set_error(tx, "lane %u: WRITE_IMM with no receive posted (RNR)", ln->idx);
		return TCP_NAK_RNR;
	}
	*ret_mr = m;
	*ret_target = m ? (uint8_t *)m->pub.addr + off : NULL;
	return 0;
}

/* The payload, straight into the registered target: no bounce buffer. false: the lane is done. */
static bool rx_payload(struct tcp_lane *ln, const struct tcp_frame *f, struct tcp_mr *m,
		       uint8_t *target)
{
	struct tcp_xport *tx = ln->tx;
	int r =
	    tx->sealed ? tcp_recv_open(ln, target, f->len) : tcp_recv_all(ln->fd, target, f->len);

	tcp_mr_release(tx, ln, m);
	if (r < 0) {
		tcp_set_error(tx, "lane %u: connection lost inside a write: %s", ln->idx,
			      strerror(-r));
		tcp_lane_fail(ln, FAIL_CONN_LOST, 0, 0);
		return false;
	}
	return true;
}

/*
 * Sealed lanes: the data frame's tag, checked before the frame counts as
 * placed and before its immediate completes: the engine never sees a
 * descriptor after bytes that were not the peer's, and a forged frame's
 * target (not fenced, so nothing the engine holds) is never described.
 * false: the lane is done.
 */
static bool rx_data_tag(struct tcp_lane *ln, uint64_t rx_seq)
{
	struct tcp_xport *tx = ln->tx;
	int r = tx->sealed ? tcp_recv_tag(ln) : 0;

	if (r == -EBADMSG) {
		tcp_set_error(tx,
			      "lane %u: data frame #%llu failed authentication (changed, "
			      "replayed, reordered or cut short on the way): refused",
			      ln->idx, (unsigned long long)rx_seq);
		tcp_lane_fail(ln, FAIL_WE_NAK, rx_seq, TCP_NAK_AUTH);
		return false;
	}
	if (r < 0) {
		tcp_set_error(tx, "lane %u: connection lost inside a write: %s", ln->idx,
			      strerror(-r));
		tcp_lane_fail(ln, FAIL_CONN_LOST, 0, 0);
		return false;
	}
	return true;
}

static bool lane_has_failed(struct tcp_lane *ln)
{
	bool failed;

	pthread_mutex_lock(&ln->lock);
	failed = ln->failed;
	pthread_mutex_unlock(&ln->lock);
	return failed;
}

/* The peer's data frame number rx_seq, checked and placed. false: the lane is done. */
static bool rx_data(struct tcp_lane *ln, const struct tcp_frame *f, uint64_t rx_seq)
{
	struct tcp_mr *m = NULL;
	uint8_t *target = NULL;
	int code;

	/* A failed lane places nothing more, whatever is still queued on its socket. */
	if (lane_has_failed(ln)) {
		return false;
	}
	if (f->op != TCP_OP_WRITE && f->op != TCP_OP_WRITE_IMM) {
		tcp_set_error(ln->tx, "lane %u: unknown frame op %u", ln->idx, f->op);
		tcp_lane_fail(ln, FAIL_WE_NAK, rx_seq, TCP_NAK_INVALID);
		return false;
	}
	code = rx_validate(ln, f, &m, &target);
	if (code != 0) {
		tcp_lane_fail(ln, FAIL_WE_NAK, rx_seq, code);
		return false;
	}
	if (m && !rx_payload(ln, f, m, target)) {
		return false;
	}
	return rx_data_tag(ln, rx_seq);
}

/* A data frame is placed (placed in all): a WRITE_IMM's receive completes; the TX thread ACKs. */
static void rx_placed(struct tcp_lane *ln, const struct tcp_frame *f, uint64_t placed)
{
	struct tcp_xport *tx = ln->tx;

	pthread_mutex_lock(&ln->lock);
	if (f->op == TCP_OP_WRITE_IMM && !ln->failed) {
		assert(ln->rq_count > 0);
		tcp_push_wc(tx, ln->rq[ln->rq_head], XPORT_WC_SUCCESS, XPORT_WC_RECV_IMM, f->imm,
			    f->len, ln->idx);
		ln->rq_head = (ln->rq_head + 1) % tx->pub.rq_depth;
		ln->rq_count--;
	}
	ln->placed = placed;
	pthread_cond_broadcast(&ln->cond);
	pthread_mutex_unlock(&ln->lock);
}

/* ---- replies: ACK and NAK ---- */

static int nak_to_status(uint32_t code)
{
	switch (code) {
	case TCP_NAK_REM_ACCESS:
		return XPORT_WC_REM_ACCESS_ERR;
	case TCP_NAK_RNR:
		return XPORT_WC_RNR_ERR;
	default:
		return XPORT_WC_GENERAL_ERR;
	}
}

/* ACK or NAK from the peer about our requests. Returns false when the lane is done. */
static bool rx_handle_reply(struct tcp_lane *ln, const struct tcp_frame *f)
{
	struct tcp_xport *tx = ln->tx;
	bool ok, auth_nak = tx->sealed && f->op == TCP_OP_NAK && f->imm == TCP_NAK_AUTH;

	pthread_mutex_lock(&ln->lock);
	ok = f->flags == 0 && f->reserved16 == 0 && f->reserved64 == 0 && f->rkey == 0 &&
	     f->len == 0;
	if (ok && auth_nak) {
		/*
		 * The peer numbers the frames that reached it: after a replay or
		 * a drop on the way that is not what we sent, so its number names
		 * none of our requests reliably. (The NAK itself passed its tag.)
		 * The first unacknowledged request takes the blame.
		 */
		uint64_t blame = ln->seq_acked;

		pthread_mutex_unlock(&ln->lock);
		tcp_set_error(tx,
			      "lane %u: peer refused a frame: it failed authentication there "
			      "(changed, replayed, reordered or cut short on the way)",
			      ln->idx);
		tcp_lane_fail(ln, FAIL_NAK_RECEIVED, blame, XPORT_WC_GENERAL_ERR);
		return false;
	}
	ok = ok && f->addr >= ln->seq_acked && f->addr <= ln->seq_issued &&
	     (f->op == TCP_OP_ACK ? f->imm == 0 : f->addr < ln->seq_issued);
	if (!ok) {
		pthread_mutex_unlock(&ln->lock);
		tcp_set_error(tx, "lane %u: malformed %s from peer", ln->idx,
			      f->op == TCP_OP_ACK ? "ACK" : "NAK");
		tcp_lane_fail(ln, FAIL_CONN_LOST, 0, 0);
		return false;
	}
	if (f->op == TCP_OP_NAK) {
		int status = nak_to_status(f->imm);

		pthread_mutex_unlock(&ln->lock);
		tcp_set_error(tx, "lane %u: peer refused request #%llu: %s", ln->idx,
			      (unsigned long long)f->addr, xport_wc_status_str(status));
		tcp_lane_fail(ln, FAIL_NAK_RECEIVED, f->addr, status);
		return false;
	}
	if (!ln->failed) {
		for (; ln->seq_acked < f->addr; ln->seq_acked++) {
			const struct tcp_swr *w = &ln->sq[ln->seq_acked % tx->pub.sq_depth];

			if (w->signaled) {
				tcp_push_write_wc(ln, w->wr_id, XPORT_WC_SUCCESS);
			}
		}
	}
	pthread_mutex_unlock(&ln->lock);
	return true;
}

/* An ACK or NAK: on sealed lanes its tag first, then what it says. false: the lane is done. */
static bool rx_reply(struct tcp_lane *ln, const struct tcp_frame *f)
{
	/* Sealed replies carry no payload: the tag follows the header. */
	int r = ln->tx->sealed ? tcp_recv_tag(ln) : 0;

	if (r < 0) {
		tcp_set_error(ln->tx,
			      r == -EBADMSG ? "lane %u: a reply frame failed authentication "
					      "(changed, replayed or reordered on the way)"
					    : "lane %u: recv: %s",
			      ln->idx, strerror(-r));
		tcp_lane_fail(ln, FAIL_CONN_LOST, 0, 0);
		return false;
	}
	return rx_handle_reply(ln, f);
}

/* ---- the thread ---- */

/* The next frame's header, decoded; sealed lanes begin opening it. false: the lane is done. */
static bool rx_header(struct tcp_lane *ln, struct tcp_frame *f)
{
	struct tcp_xport *tx = ln->tx;
	uint8_t hdr[TCP_FRAME_HDR_LEN];
	int r = tcp_recv_all(ln->fd, hdr, sizeof(hdr));

	if (r < 0) {
		if (r == -EPIPE) {
			tcp_set_error(tx, "lane %u: connection closed by peer", ln->idx);
		} else {
			tcp_set_error(tx, "lane %u: recv: %s", ln->idx, strerror(-r));
		}
		tcp_lane_fail(ln, FAIL_CONN_LOST, 0, 0);
		return false;
	}
	tcp_frame_decode(hdr, f);
	/* The header as it came is what the tag covers: a changed byte fails it. */
	r = tx->sealed ? lane_seal_begin(&ln->seal_rx, hdr, sizeof(hdr)) : 0;
	if (r < 0) {
		tcp_set_error(tx, "lane %u: cannot open frames: %s", ln->idx, strerror(-r));
		tcp_lane_fail(ln, FAIL_CONN_LOST, 0, 0);
		return false;
	}
	return true;
}

void *tcp_lane_rx_main(void *arg)
{
	struct tcp_lane *ln = arg;
	uint64_t rx_seq = 0; /* index of the next data frame from the peer */

	for (;;) {
		struct tcp_frame f;

		if (!rx_header(ln, &f)) {
			break;
		}
		if (f.op == TCP_OP_ACK || f.op == TCP_OP_NAK) {
			if (!rx_reply(ln, &f)) {
				break;
			}
			continue;
		}
		if (!rx_data(ln, &f, rx_seq)) {
			break;
		}
		rx_seq++;
		rx_placed(ln, &f, rx_seq);
	}
	pthread_mutex_lock(&ln->lock);
	ln->rx_exited = true;
	pthread_cond_broadcast(&ln->cond);
	pthread_mutex_unlock(&ln->lock);
	return NULL;
}
