/* SPDX-License-Identifier: MIT */
/* Fitting a transfer's pinned memory to RLIMIT_MEMLOCK (see memfit.h). */
#include "memfit.h"

#include <errno.h>
#include <liburing.h>
#include <sys/resource.h>

#include "macro.h"
#include "pool.h"

/* The engine's rings and a margin for the short-lived probe ring. */
#define MEMFIT_MIN_HEADROOM (MEMFIT_RING_BYTES + (64u << 10))

uint64_t memfit_budget(uint64_t limit, bool cap_ipc_lock)
{
	uint64_t headroom;

	if (cap_ipc_lock || limit == (uint64_t)RLIM_INFINITY) {
		return UINT64_MAX;
	}
	headroom = MAX(limit / 8, (uint64_t)MEMFIT_MIN_HEADROOM);
	return limit > headroom ? limit - headroom : 0;
}

uint64_t memfit_limit_for(uint64_t budget)
{
	uint64_t limit = MAX(budget + MEMFIT_MIN_HEADROOM, (budget * 8 + 6) / 7);

	/* limit / 8 rounds down: step to the exact smallest. */
	while (memfit_budget(limit, false) < budget) {
		limit++;
	}
	while (limit > 0 && memfit_budget(limit - 1, false) >= budget) {
		limit--;
	}
	return limit;
}

static uint32_t *memfit_count(struct engine_params *p)
{
	return p->role == ENGINE_SENDER ? &p->pool_chunks : &p->slots;
}

/* The most data chunks of p's chunk_size, at most max, that fit; 0 if not even two. */
static uint32_t memfit_most(struct engine_params *p, const struct xport_ops *ops, uint64_t budget,
			    uint32_t max)
{
	uint32_t *n = memfit_count(p);

	for (*n = max; *n >= 2; (*n)--) {
		if (engine_pinned_bytes(p, ops) <= budget) {
			return *n;
		}
	}
	return 0;
}

int memfit_engine(struct engine_params *p, const struct xport_ops *ops, uint64_t budget)
{
	struct engine_params t = *p;
	uint32_t want = MAX(*memfit_count(p), 2u);
	uint64_t in_flight = (uint64_t)want * p->chunk_size;
	uint32_t best = 0, best_chunk = 0;

	*memfit_count(&t) = want;
	if (engine_pinned_bytes(&t, ops) <= budget) {
		return 0;
	}
	/* The biggest chunk that still leaves MEMFIT_MIN_DEPTH chunks in flight. */
	for (uint32_t chunk = p->chunk_size; chunk >= MEMFIT_MIN_CHUNK; chunk /= 2) {
		uint32_t max =
		    (uint32_t)MIN(MAX(in_flight / chunk, 2u), (uint64_t)MEMFIT_MAX_COUNT);
		uint32_t n;

		t.chunk_size = chunk;
		n = memfit_most(&t, ops, budget, max);
		if (n > 0) {
			/* Short of the depth everywhere: the smallest chunks, the most of them. */
			best = n;
			best_chunk = chunk;
		}
		if (n >= MIN(MEMFIT_MIN_DEPTH, max)) {
			break;
		}
		if (chunk == MEMFIT_MIN_CHUNK) {
			break;
		}
	}
	if (best == 0) {
		return -ENOMEM;
	}
	p->chunk_size = best_chunk;
	*memfit_count(p) = best;
	return 1;
}

int memfit_probe(size_t bytes, size_t chunk_size)
{
	struct pool *pool = NULL;
	struct io_uring ring;
	int r;

	r = pool_create(bytes, chunk_size, &pool);
	if (r < 0) {
		return r;
	}
	r = io_uring_queue_init(1, &ring, 0);
	if (r < 0) {
		pool_destroy(pool);
		return r;
	}
	r = pool_register_uring(pool, &ring);
	/* Unregisters from the ring first, so the pages are unpinned before the ring goes. */
	pool_destroy(pool);
	io_uring_queue_exit(&ring);
	return r;
}

uint64_t memfit_probe_max(uint64_t max)
{
	uint64_t lo = 0, hi = max / MEMFIT_MIN_CHUNK + 1; /* in chunks: lo fits, hi does not */

	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (memfit_probe(mid * MEMFIT_MIN_CHUNK, MEMFIT_MIN_CHUNK) == 0) {
			lo = mid;
		} else {
			hi = mid;
		}
	}
	return lo * MEMFIT_MIN_CHUNK;
}

uint64_t memfit_verbs_need(uint64_t pool, unsigned ndevices)
{
	uint64_t n = (uint64_t)MAX(ndevices, 1u) + 1;

	return pool > UINT64_MAX / n ? UINT64_MAX : pool * n;
}
