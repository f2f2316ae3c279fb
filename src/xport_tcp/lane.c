/* SPDX-License-Identifier: MIT */
/*
 * A tcp lane failing, as an RC QP fails: the xport's error names the first
 * cause; posted receives are flushed at once and the send queue completes
 * as the failure says (the requests the peer placed succeed, the one it
 * refused carries why, the rest are flushed); a lane taken down on purpose
 * fails as a lost connection.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>

#include "tcp-internal.h"

void tcp_set_error(struct tcp_xport *tx, const char *fmt, ...)
{
	va_list ap;

	/* The first failure is the cause; later ones are its consequences. */
	pthread_mutex_lock(&tx->err_lock);
	if (!tx->has_error) {
		va_start(ap, fmt);
		vsnprintf(tx->error, sizeof(tx->error), fmt, ap);
		va_end(ap);
		tx->has_error = true;
	}
	pthread_mutex_unlock(&tx->err_lock);
}

const char *tcp_last_error(struct xport *x)
{
	struct tcp_xport *tx = to_tcp(x);
	bool has;

	pthread_mutex_lock(&tx->err_lock);
	has = tx->has_error;
	pthread_mutex_unlock(&tx->err_lock);
	/* Written once, before has_error is set: stable from then on. */
	return has ? tx->error : NULL;
}

/* Call with lane->lock held. Flushes posted receives now; the TX thread flushes the SQ. */
static void lane_fail_locked(struct tcp_lane *ln, enum lane_fail_kind kind, uint64_t seq,
			     int status)
{
	struct tcp_xport *tx = ln->tx;

	if (ln->failed) {
		return;
	}
	ln->failed = true;
	switch (kind) {
	case FAIL_CONN_LOST:
		ln->fail_good_upto = ln->seq_acked;
		ln->fail_hit_seq = ln->seq_acked < ln->seq_issued ? ln->seq_acked : UINT64_MAX;
		ln->fail_hit_status = XPORT_WC_RETRY_EXC_ERR;
		break;
	case FAIL_NAK_RECEIVED:
		ln->fail_good_upto = seq;
		ln->fail_hit_seq = seq;
		ln->fail_hit_status = status;
		break;
	case FAIL_WE_NAK:
		ln->fail_good_upto = ln->seq_acked;
		ln->fail_hit_seq = UINT64_MAX;
		ln->fail_hit_status = XPORT_WC_WR_FLUSH_ERR;
		ln->nak_pending = true;
		ln->nak_code = (uint32_t)status;
		ln->nak_seq = seq;
		break;
	}
	while (ln->rq_count > 0) {
		tcp_push_wc(tx, ln->rq[ln->rq_head], XPORT_WC_WR_FLUSH_ERR, XPORT_WC_RECV_IMM, 0, 0,
			    ln->idx);
		ln->rq_head = (ln->rq_head + 1) % tx->pub.rq_depth;
		ln->rq_count--;
	}
	pthread_cond_broadcast(&ln->cond);
}

void tcp_lane_fail(struct tcp_lane *ln, enum lane_fail_kind kind, uint64_t seq, int status)
{
	pthread_mutex_lock(&ln->lock);
	lane_fail_locked(ln, kind, seq, status);
	pthread_mutex_unlock(&ln->lock);
	if (kind != FAIL_WE_NAK) {
		/* Unblocks a TX thread stuck writing to a peer that stopped reading. */
		shutdown(ln->fd, SHUT_RDWR);
	}
}

void tcp_lane_flush_sq_locked(struct tcp_lane *ln)
{
	struct tcp_xport *tx = ln->tx;

	for (uint64_t s = ln->seq_acked; s < ln->seq_tail; s++) {
		const struct tcp_swr *w = &ln->sq[s % tx->pub.sq_depth];

		if (s < ln->fail_good_upto) {
			if (w->signaled) {
				tcp_push_write_wc(ln, w->wr_id, XPORT_WC_SUCCESS);
			}
		} else if (s == ln->fail_hit_seq) {
			tcp_push_write_wc(ln, w->wr_id, ln->fail_hit_status);
		} else {
			tcp_push_write_wc(ln, w->wr_id, XPORT_WC_WR_FLUSH_ERR);
		}
	}
	ln->seq_acked = ln->seq_issued = ln->seq_tail;
	ln->sq_flushed = true;
}

/* The connection cut as if lost: the peer reads EOF, our queues complete in error. */
int tcp_lane_down(struct xport *x, unsigned lane)
{
	if (lane >= x->nlanes) {
		return -EINVAL;
	}
	struct tcp_lane *ln = &to_tcp(x)->lanes[lane];

	tcp_lane_fail(ln, FAIL_CONN_LOST, 0, 0);
	/* Its RX thread sees the shutdown at once; a write it is placing ends first. */
	pthread_mutex_lock(&ln->lock);
	while (ln->rx_started && !ln->rx_exited) {
		pthread_cond_wait(&ln->cond, &ln->lock);
	}
	pthread_mutex_unlock(&ln->lock);
	return 0;
}
