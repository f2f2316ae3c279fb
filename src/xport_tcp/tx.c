/* SPDX-License-Identifier: MIT */
/*
 * A tcp lane's TX thread: it writes the lane's requests (frames straight
 * from the caller's registered buffers), the cumulative ACKs of what the RX
 * thread placed and, once the lane failed, the NAK that tells the peer why;
 * then it completes the failed lane's send queue.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "tcp-internal.h"

/*
 * TX thread: a send found the connection closed or reset by the peer. A
 * peer that fails a lane sends its NAK (why) and then closes, so the NAK
 * may be waiting in our receive queue, behind nothing the RX thread cannot
 * read: let the RX thread read it and fail the lane with that cause (a
 * remote access error, RNR) rather than fail it first as a lost
 * connection. Bounded: a second, then the caller fails it.
 */
static void tx_wait_rx_verdict(struct tcp_lane *ln)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1;
	pthread_mutex_lock(&ln->lock);
	while (!ln->failed && !ln->stopping) {
		if (pthread_cond_timedwait(&ln->cond, &ln->lock, &ts) == ETIMEDOUT) {
			break;
		}
	}
	pthread_mutex_unlock(&ln->lock);
}

/* Lock held: sleeps until there is something to send, or the lane stops or fails. */
static void tx_wait_work_locked(struct tcp_lane *ln)
{
	while (!ln->stopping && !ln->failed &&
	       (ln->stalled || (ln->placed == ln->ack_sent && ln->seq_issued == ln->seq_tail))) {
		pthread_cond_wait(&ln->cond, &ln->lock);
	}
}

/* Lock held, lane failed: the NAK it owes its peer (once), then its send queue completes. */
static void tx_fail_out_locked(struct tcp_lane *ln)
{
	if (ln->nak_pending) {
		struct tcp_frame f = {
			.op = TCP_OP_NAK,
			.addr = ln->nak_seq,
			.imm = ln->nak_code,
		};

		ln->nak_pending = false;
		pthread_mutex_unlock(&ln->lock);
		(void)tcp_send_frame(ln, &f, NULL);
		shutdown(ln->fd, SHUT_RDWR);
		pthread_mutex_lock(&ln->lock);
	}
	tcp_lane_flush_sq_locked(ln);
}

/* Lock held on entry, released on return: the ACK of every data frame placed so far. */
static int tx_send_ack(struct tcp_lane *ln)
{
	struct tcp_frame f = { .op = TCP_OP_ACK, .addr = ln->placed };

	ln->ack_sent = ln->placed;
	pthread_mutex_unlock(&ln->lock);
	return tcp_send_frame(ln, &f, NULL);
}

/* Lock held on entry, released on return: the next request of the send queue. */
static int tx_send_request(struct tcp_lane *ln)
{
	struct tcp_xport *tx = ln->tx;
	/* The slot stays ours until acked; post_writes only fills past seq_tail. */
	const struct tcp_swr *w = &ln->sq[ln->seq_issued % tx->pub.sq_depth];
	struct tcp_frame f = {
		.op = w->op,
		.rkey = w->rkey,
		.addr = w->remote_addr,
		.len = w->len,
		.imm = w->imm,
	};
	const void *payload = w->buf;
	bool gone;
	int r;

	if (tx->tamper == XPORT_TEST_TAMPER_STALL && ln->idx == 0 && w->len > 0 &&
	    !tx->tamper_done) {
		/* Test hook: the lane goes silent here, until it is failed or torn down. */
		tx->tamper_done = true;
		ln->stalled = true;
		pthread_mutex_unlock(&ln->lock);
		return 0;
	}
	ln->seq_issued++;
	/*
	 * Marked before the check: a dereg_mr that unlinks the
	 * registration after it waits for this send to end.
	 */
	ln->tx_reading = payload;
	ln->tx_reading_len = w->len;
	gone = w->mr && !tcp_mr_registered(tx, w->mr);
	pthread_mutex_unlock(&ln->lock);
	r = gone ? -EFAULT : tcp_send_frame(ln, &f, payload);
	pthread_mutex_lock(&ln->lock);
	ln->tx_reading = NULL;
	if (ln->tx_waiters > 0) {
		pthread_cond_broadcast(&ln->cond);
	}
	pthread_mutex_unlock(&ln->lock);
	return r;
}

/* A send failed: the lane fails, as a lost connection unless the RX thread learns why first. */
static void tx_send_failed(struct tcp_lane *ln, int r)
{
	if (r == -EPIPE || r == -ECONNRESET) {
		tx_wait_rx_verdict(ln);
	}
	tcp_set_error(ln->tx, "lane %u: send: %s", ln->idx, strerror(-r));
	tcp_lane_fail(ln, FAIL_CONN_LOST, 0, 0);
}

void *tcp_lane_tx_main(void *arg)
{
	struct tcp_lane *ln = arg;
	int r;

	pthread_mutex_lock(&ln->lock);
	for (;;) {
		tx_wait_work_locked(ln);
		/*
		 * A failed lane tells its peer why (the NAK) even when the session
		 * is being torn down at that moment: the peer must see a remote
		 * access error, not a lost connection.
		 */
		if (ln->stopping && !(ln->failed && ln->nak_pending)) {
			break;
		}
		if (ln->failed) {
			tx_fail_out_locked(ln);
			break;
		}
		r = ln->placed != ln->ack_sent ? tx_send_ack(ln) : tx_send_request(ln);
		/* -ECANCELED: the lane failed already, and may still owe its peer a NAK. */
		if (r < 0 && r != -ECANCELED) {
			tx_send_failed(ln, r);
		}
		pthread_mutex_lock(&ln->lock);
	}
	pthread_mutex_unlock(&ln->lock);
	return NULL;
}
