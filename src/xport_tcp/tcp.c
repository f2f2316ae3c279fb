/* SPDX-License-Identifier: MIT */
/*
 * The tcp xport as a whole (the transport: src/xport_tcp/tcp-internal.h):
 * made from the lanes' connected sockets (conn.c) with its queues, keys and
 * threads; taken apart with the lanes stopped first; and the ops table
 * callers reach it by.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tcp-internal.h"

#define TCP_MAX_DEPTH 65536

int tcp_params_check(const struct xport_params *p)
{
	if (!p || p->nlanes < 1 || p->nlanes > XPORT_MAX_LANES || p->sq_depth < 2 ||
	    p->sq_depth > TCP_MAX_DEPTH || p->rq_depth < 1 || p->rq_depth > TCP_MAX_DEPTH ||
	    p->timeout_ms <= 0) {
		return -EINVAL;
	}
	return 0;
}

/* Keys for both directions of every lane; connector: we connected the lanes. */
static int seal_setup(struct tcp_xport *tx, const struct xport_params *p, bool connector)
{
	enum lane_seal_suite suite = p->seal_suite ? p->seal_suite : LANE_SEAL_AES256_GCM;

	for (unsigned i = 0; i < p->nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];
		int r;

		r = lane_seal_init_suite(&ln->seal_tx, suite, p->seal_secret, i, connector, true);
		if (r >= 0) {
			r = lane_seal_init_suite(&ln->seal_rx, suite, p->seal_secret, i, !connector,
						 false);
		}
		if (r < 0) {
			return r;
		}
		ln->seal_buf = malloc(TCP_SEAL_PIECE);
		if (!ln->seal_buf) {
			return -ENOMEM;
		}
	}
	tx->sealed = true;
	return 0;
}

/* ---- create ---- */

/* The xport around the lanes' fds, not started; NULL (every fd closed) when out of memory. */
static struct tcp_xport *xport_new(const struct xport_params *p, int *fds)
{
	struct tcp_xport *tx = calloc(1, sizeof(*tx));

	if (!tx) {
		for (unsigned i = 0; i < p->nlanes; i++) {
			close(TAKE_FD(fds[i]));
		}
		return NULL;
	}
	tx->pub.ops = &xport_tcp_ops;
	tx->pub.nlanes = p->nlanes;
	tx->pub.sq_depth = p->sq_depth;
	tx->pub.rq_depth = p->rq_depth;
	tx->pub.max_inline = TCP_MAX_INLINE;
	tx->timeout_ms = p->timeout_ms;
	pthread_mutex_init(&tx->mr_lock, NULL);
	pthread_cond_init(&tx->mr_cond, NULL);
	pthread_mutex_init(&tx->err_lock, NULL);
	pthread_mutex_init(&tx->tee_lock, NULL);
	tx->tee_fd = -1;
	tx->tamper = p->test_tamper;
	for (unsigned i = 0; i < p->nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];

		ln->tx = tx;
		ln->idx = i;
		ln->fd = TAKE_FD(fds[i]);
		pthread_mutex_init(&ln->lock, NULL);
		pthread_cond_init(&ln->cond, NULL);
	}
	return tx;
}

/* The test hook's copy of every byte the lanes send (xport_params.test_tee_path). */
static int tee_open(struct tcp_xport *tx, const char *path)
{
	tx->tee_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	return tx->tee_fd < 0 ? negerrno() : 0;
}

static int lanes_alloc_queues(struct tcp_xport *tx, const struct xport_params *p)
{
	for (unsigned i = 0; i < p->nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];

		ln->sq = calloc(p->sq_depth, sizeof(*ln->sq));
		ln->inline_buf = calloc(p->sq_depth, TCP_MAX_INLINE);
		ln->rq = calloc(p->rq_depth, sizeof(*ln->rq));
		if (!ln->sq || !ln->inline_buf || !ln->rq) {
			return -ENOMEM;
		}
	}
	return 0;
}

static int lanes_start_threads(struct tcp_xport *tx, const struct xport_params *p)
{
	for (unsigned i = 0; i < p->nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];
		int r;

		r = -pthread_create(&ln->rx_thread, NULL, tcp_lane_rx_main, ln);
		if (r < 0) {
			return r;
		}
		ln->rx_started = true;
		r = -pthread_create(&ln->tx_thread, NULL, tcp_lane_tx_main, ln);
		if (r < 0) {
			return r;
		}
		ln->tx_started = true;
	}
	return 0;
}

int tcp_xport_create(const struct xport_params *p, bool connector, int *fds, struct xport **ret)
{
	struct tcp_xport *tx = xport_new(p, fds);
	int r;

	if (!tx) {
		return -ENOMEM;
	}
	r = tcp_cq_init(&tx->cq, (size_t)p->nlanes * (p->sq_depth + p->rq_depth) + 64);
	if (r >= 0 && p->seal) {
		r = seal_setup(tx, p, connector);
	}
	if (r >= 0 && p->test_tee_path) {
		r = tee_open(tx, p->test_tee_path);
	}
	if (r >= 0) {
		r = lanes_alloc_queues(tx, p);
	}
	if (r >= 0) {
		r = lanes_start_threads(tx, p);
	}
	if (r < 0) {
		tcp_destroy(&tx->pub);
		return r;
	}
	*ret = &tx->pub;
	return 0;
}

/* ---- destroy ---- */

/* Every lane told to stop, its RX thread reading the end of its input. */
static void lanes_stop(struct tcp_xport *tx)
{
	for (unsigned i = 0; i < tx->pub.nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];

		pthread_mutex_lock(&ln->lock);
		ln->stopping = true;
		pthread_cond_broadcast(&ln->cond);
		pthread_mutex_unlock(&ln->lock);
		if (ln->fd >= 0) {
			shutdown(ln->fd, SHUT_RD);
		}
	}
}

/*
 * The sending thread may still owe its peer a NAK: give it a moment, then
 * cut the connection whatever it is doing.
 */
static void lane_join(struct tcp_lane *ln)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 200 * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	if (ln->tx_started && pthread_timedjoin_np(ln->tx_thread, NULL, &until) == 0) {
		ln->tx_started = false;
	}
	if (ln->fd >= 0) {
		shutdown(ln->fd, SHUT_RDWR);
	}
	if (ln->tx_started) {
		pthread_join(ln->tx_thread, NULL);
	}
	if (ln->rx_started) {
		pthread_join(ln->rx_thread, NULL);
	}
}

/* A lane whose threads are gone. */
static void lane_free(struct tcp_lane *ln)
{
	if (ln->fd >= 0) {
		close(ln->fd);
	}
	free(ln->sq);
	free(ln->inline_buf);
	free(ln->rq);
	free(ln->seal_buf);
	lane_seal_fini(&ln->seal_tx);
	lane_seal_fini(&ln->seal_rx);
	pthread_cond_destroy(&ln->cond);
	pthread_mutex_destroy(&ln->lock);
}

void tcp_destroy(struct xport *x)
{
	struct tcp_xport *tx;

	if (!x) {
		return;
	}
	tx = to_tcp(x);
	lanes_stop(tx);
	for (unsigned i = 0; i < x->nlanes; i++) {
		lane_join(&tx->lanes[i]);
		lane_free(&tx->lanes[i]);
	}
	while (tx->mrs) {
		struct tcp_mr *m = tx->mrs;

		tx->mrs = m->next;
		fence_set_fini(&m->fences);
		free(m);
	}
	tcp_cq_fini(&tx->cq);
	if (tx->tee_fd >= 0) {
		close(tx->tee_fd);
	}
	pthread_mutex_destroy(&tx->tee_lock);
	pthread_cond_destroy(&tx->mr_cond);
	pthread_mutex_destroy(&tx->mr_lock);
	pthread_mutex_destroy(&tx->err_lock);
	free(tx);
}

const struct xport_ops xport_tcp_ops = {
	.name = "tcp",
	.kind = XPORT_KIND_TCP,
	.listen = tcp_listen,
	.accept = tcp_accept,
	.listener_close = tcp_listener_close,
	.connect = tcp_connect,
	.reg_mr = tcp_reg_mr,
	.dereg_mr = tcp_dereg_mr,
	.fence = tcp_fence,
	.lane_down = tcp_lane_down,
	.post_writes = tcp_post_writes,
	.post_recvs = tcp_post_recvs,
	.poll_cq = tcp_poll_cq,
	.event_fd = tcp_event_fd,
	.last_error = tcp_last_error,
	.destroy = tcp_destroy,
};
