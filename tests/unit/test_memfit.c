/* SPDX-License-Identifier: MIT */
/*
 * memfit: the client's buffer pool fitted to RLIMIT_MEMLOCK, from 64 KiB to
 * no limit, for a sender's pool and a receiver's ring (with and without the
 * slot copies of a transport that cannot fence). Every result is checked
 * against engine_pinned_bytes, the size the engine will pin.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/resource.h>

#include "testutil.h"

#include "engine.h"
#include "memfit.h"
#include "xport.h"

#define KiB (UINT64_C(1024))
#define MiB (UINT64_C(1024) * KiB)

static int fake_fence(struct xport *x, struct xport_mr *mr, uint64_t off, uint64_t len, bool on)
{
	(void)x, (void)mr, (void)off, (void)len, (void)on;
	return 0;
}
static const struct xport_ops fencing = { .fence = fake_fence };
static const struct xport_ops no_fence = { 0 };

/* The client's defaults: 1 MiB chunks, 32 slots, a 64-chunk pool. */
static struct engine_params defaults(enum engine_role role)
{
	return (struct engine_params){
		.role = role, .chunk_size = 1 * MiB, .slots = 32, .pool_chunks = 64
	};
}

static uint32_t count(const struct engine_params *p)
{
	return p->role == ENGINE_SENDER ? p->pool_chunks : p->slots;
}

static void test_budget(void **state)
{
	assert_true(memfit_budget(RLIM_INFINITY, false) == UINT64_MAX);
	assert_true(memfit_budget(64 * KiB, true) == UINT64_MAX); /* CAP_IPC_LOCK */
	assert_true(memfit_budget(8 * MiB, false) == 7 * MiB);	  /* an eighth kept back */
	assert_true(memfit_budget(1 * MiB, false) == 640 * KiB);  /* at least 384 KiB */
	assert_true(memfit_budget(64 * KiB, false) == 0);
	assert_true(memfit_budget(0, false) == 0);
	/* The advice's "needs": the smallest limit whose budget holds the pool. */
	for (uint64_t b = 64 * KiB; b <= 256 * MiB; b = b * 3 / 2) {
		uint64_t l = memfit_limit_for(b);

		assert_true(memfit_budget(l, false) >= b);
		assert_true(memfit_budget(l - 1, false) < b);
	}
}

/* Limits from 64 KiB to 1 GiB: what fits stays within budget, never grows, keeps >= 2 chunks. */
static void fit_all_limits(enum engine_role role, const struct xport_ops *ops)
{
	for (uint64_t limit = 64 * KiB; limit <= 1024 * MiB; limit *= 2) {
		for (uint64_t l = limit; l < limit * 2; l += limit / 4) {
			struct engine_params p = defaults(role), d = defaults(role);
			uint64_t budget = memfit_budget(l, false);
			int r = memfit_engine(&p, ops, budget);

			if (r < 0) {
				assert_int_equal(r, -ENOMEM);
				/* Only when two 64 KiB chunks and their descriptors don't fit. */
				struct engine_params m = defaults(role);
				m.chunk_size = MEMFIT_MIN_CHUNK;
				m.slots = m.pool_chunks = 2;
				assert_true(budget < engine_pinned_bytes(&m, ops));
				assert_memory_equal(&p, &d, sizeof(p)); /* untouched */
				continue;
			}
			assert_true(engine_pinned_bytes(&p, ops) <= budget);
			assert_true(engine_pinned_bytes(&p, ops) <= engine_pinned_bytes(&d, ops));
			assert_true(count(&p) >= 2);
			assert_true(p.chunk_size >= MEMFIT_MIN_CHUNK &&
				    p.chunk_size <= d.chunk_size);
			assert_true((p.chunk_size & (p.chunk_size - 1)) == 0);
			/* Never more bytes in flight than asked for. */
			assert_true((uint64_t)count(&p) * p.chunk_size <=
				    (uint64_t)count(&d) * d.chunk_size);
			assert_int_equal(r, engine_pinned_bytes(&d, ops) <= budget ? 0 : 1);
			/* Below the minimum depth only at the smallest chunk. */
			if (count(&p) < MEMFIT_MIN_DEPTH) {
				assert_int_equal(p.chunk_size, MEMFIT_MIN_CHUNK);
			}
		}
	}
}

static void test_all_limits(void **state)
{
	fit_all_limits(ENGINE_SENDER, &fencing);
	fit_all_limits(ENGINE_RECEIVER, &fencing);
	fit_all_limits(ENGINE_RECEIVER, &no_fence);
}

static void test_debian_default(void **state)
{
	struct engine_params p = defaults(ENGINE_SENDER);

	/* 8 MiB: 66 MiB asked; 6 MiB of 512 KiB chunks (11 + one of descriptors). */
	assert_int_equal(memfit_engine(&p, &fencing, memfit_budget(8 * MiB, false)), 1);
	assert_int_equal(p.chunk_size, 512 * KiB);
	assert_int_equal(p.pool_chunks, 11);
	assert_true(engine_pinned_bytes(&p, &fencing) == 6 * MiB);

	p = defaults(ENGINE_RECEIVER);
	assert_int_equal(memfit_engine(&p, &fencing, memfit_budget(8 * MiB, false)), 1);
	assert_int_equal(p.chunk_size, 512 * KiB);
	assert_int_equal(p.slots, 11);
}

static void test_no_limit_untouched(void **state)
{
	struct engine_params p = defaults(ENGINE_RECEIVER), d = p;

	assert_int_equal(memfit_engine(&p, &no_fence, memfit_budget(RLIM_INFINITY, false)), 0);
	assert_memory_equal(&p, &d, sizeof(p));
	/* A limit the defaults fit in changes nothing either. */
	assert_int_equal(memfit_engine(&p, &no_fence, memfit_budget(128 * MiB, false)), 0);
	assert_memory_equal(&p, &d, sizeof(p));
}

static void test_smallest(void **state)
{
	struct engine_params p = defaults(ENGINE_SENDER);

	/* 64 and 512 KiB: nothing fits; 640 KiB: three 64 KiB chunks and their descriptors. */
	assert_int_equal(memfit_engine(&p, &fencing, memfit_budget(64 * KiB, false)), -ENOMEM);
	assert_int_equal(memfit_engine(&p, &fencing, memfit_budget(512 * KiB, false)), -ENOMEM);
	assert_int_equal(memfit_engine(&p, &fencing, memfit_budget(640 * KiB, false)), 1);
	assert_int_equal(p.chunk_size, MEMFIT_MIN_CHUNK);
	assert_int_equal(p.pool_chunks, 3);
}

/* Verbs pins the pool once per device registration and once for io_uring. */
static void test_verbs_need(void **state)
{
	(void)state;
	assert_true(memfit_verbs_need(64u << 20, 0) == (uint64_t)128 << 20);
	assert_true(memfit_verbs_need(64u << 20, 1) == (uint64_t)128 << 20);
	assert_true(memfit_verbs_need(64u << 20, 2) == (uint64_t)192 << 20);
	assert_true(memfit_verbs_need(UINT64_MAX / 2, 4) == UINT64_MAX); /* saturates */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_budget),	       cmocka_unit_test(test_all_limits),
		cmocka_unit_test(test_debian_default), cmocka_unit_test(test_no_limit_untouched),
		cmocka_unit_test(test_smallest),       cmocka_unit_test(test_verbs_need),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
