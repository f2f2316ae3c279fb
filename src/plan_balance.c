/* SPDX-License-Identifier: MIT */
/*
 * The shard balancer (plan.h): each new entry to the shard with the least
 * weight so far, a min-heap of shards by (load, number).
 */
#include "plan.h"

#include <errno.h>
#include <stdlib.h>

static bool lighter(const struct plan_balancer *b, uint32_t x, uint32_t y)
{
	return b->load[x] < b->load[y] || (b->load[x] == b->load[y] && x < y);
}

static void sift_down(struct plan_balancer *b, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < b->n && lighter(b, b->heap[l], b->heap[m])) {
			m = l;
		}
		if (r < b->n && lighter(b, b->heap[r], b->heap[m])) {
			m = r;
		}
		if (m == i) {
			return;
		}
		uint32_t t = b->heap[i];
		b->heap[i] = b->heap[m];
		b->heap[m] = t;
		i = m;
	}
}

int plan_balancer_init(struct plan_balancer *b, uint32_t shards)
{
	b->n = shards;
	b->load = calloc(shards, sizeof(*b->load));
	b->heap = calloc(shards, sizeof(*b->heap));
	if (!b->load || !b->heap) {
		plan_balancer_free(b);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < shards; i++) {
		b->heap[i] = i;
	}
	return 0;
}

uint32_t plan_balancer_pick(struct plan_balancer *b, uint64_t bytes)
{
	uint32_t s = b->heap[0];

	b->load[s] += bytes + PLAN_ENTRY_COST;
	sift_down(b, 0);
	return s;
}

void plan_balancer_add(struct plan_balancer *b, uint32_t shard, uint64_t bytes)
{
	/* Heavier only: find it and sift it down. */
	b->load[shard] += bytes + PLAN_ENTRY_COST;
	for (uint32_t i = 0; i < b->n; i++) {
		if (b->heap[i] == shard) {
			sift_down(b, i);
			return;
		}
	}
}

void plan_balancer_free(struct plan_balancer *b)
{
	free(b->load);
	free(b->heap);
	b->load = NULL;
	b->heap = NULL;
}
