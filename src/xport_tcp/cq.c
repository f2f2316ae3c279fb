/* SPDX-License-Identifier: MIT */
/*
 * The tcp xport's completion queue: one ring for every lane, filled by the
 * lanes' threads and by posting, drained by poll_cq; an eventfd readable
 * while completions may be waiting.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tcp-internal.h"

int tcp_cq_init(struct tcp_cq *cq, size_t cap)
{
	pthread_mutex_init(&cq->lock, NULL);
	cq->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (cq->efd < 0) {
		return negerrno();
	}
	cq->ring = calloc(cap, sizeof(*cq->ring));
	if (!cq->ring) {
		return -ENOMEM;
	}
	cq->cap = cap;
	return 0;
}

void tcp_cq_fini(struct tcp_cq *cq)
{
	if (cq->efd >= 0) {
		close(cq->efd);
	}
	free(cq->ring);
	pthread_mutex_destroy(&cq->lock);
}

/* Completions are never dropped: the ring grows when a slow consumer lets it fill. */
static void cq_push(struct tcp_cq *cq, const struct xport_wc *wc)
{
	static const uint64_t one = 1;

	pthread_mutex_lock(&cq->lock);
	if (cq->count == cq->cap) {
		size_t ncap = cq->cap * 2;
		struct xport_wc *n = calloc(ncap, sizeof(*n));

		/* Out of memory here leaves no sane way on; treat it as our bug. */
		assert(n);
		for (size_t i = 0; i < cq->count; i++) {
			n[i] = cq->ring[(cq->head + i) % cq->cap];
		}
		free(cq->ring);
		cq->ring = n;
		cq->cap = ncap;
		cq->head = 0;
	}
	cq->ring[(cq->head + cq->count) % cq->cap] = *wc;
	cq->count++;
	pthread_mutex_unlock(&cq->lock);
	/* EAGAIN only when the counter would overflow: it is readable then anyway. */
	(void)!write(cq->efd, &one, sizeof(one));
}

void tcp_push_wc(struct tcp_xport *tx, uint64_t wr_id, int status, uint32_t opcode, uint32_t imm,
		 uint32_t len, unsigned lane)
{
	struct xport_wc wc = {
		.wr_id = wr_id,
		.status = status,
		.opcode = opcode,
		.imm = imm,
		.len = len,
		.lane = lane,
	};

	cq_push(&tx->cq, &wc);
}

void tcp_push_write_wc(struct tcp_lane *ln, uint64_t wr_id, int status)
{
	tcp_push_wc(ln->tx, wr_id, status, XPORT_WC_WRITE, 0, 0, ln->idx);
}

int tcp_poll_cq(struct xport *x, struct xport_wc *wcs, size_t max)
{
	struct tcp_xport *tx = to_tcp(x);
	uint64_t v;
	size_t n = 0;

	if (max > 0 && !wcs) {
		return -EINVAL;
	}
	/* Clear first: a push after this read makes the fd readable again. */
	(void)!read(tx->cq.efd, &v, sizeof(v));
	pthread_mutex_lock(&tx->cq.lock);
	while (n < max && n < INT32_MAX && tx->cq.count > 0) {
		wcs[n++] = tx->cq.ring[tx->cq.head];
		tx->cq.head = (tx->cq.head + 1) % tx->cq.cap;
		tx->cq.count--;
	}
	if (tx->cq.count > 0) {
		/* Leftovers: keep the fd readable so an edge-style waiter is not stranded. */
		static const uint64_t one = 1;

		(void)!write(tx->cq.efd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&tx->cq.lock);
	return (int)n;
}

int tcp_event_fd(struct xport *x)
{
	return to_tcp(x)->cq.efd;
}
