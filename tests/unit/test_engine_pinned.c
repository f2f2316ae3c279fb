/* SPDX-License-Identifier: MIT */
/*
 * engine_pinned_bytes: what a session pins, for the daemon's memory budget.
 * The sender's pool and the receiver's ring, their descriptor chunks, whole
 * 2 MiB pages from 2 MiB on; the engine asserts that the pool it creates has
 * exactly this size, and t_memory_budget checks VmPin of real sessions.
 */
#include <stdint.h>

#include "testutil.h"

#include "engine.h"
#include "xport.h"

/* A transport that fences slots (tcp) and one that cannot (verbs): only .fence matters. */
static int fake_fence(struct xport *x, struct xport_mr *mr, uint64_t off, uint64_t len, bool on)
{
	(void)x, (void)mr, (void)off, (void)len, (void)on;
	return 0;
}
static const struct xport_ops fencing = { .fence = fake_fence };
static const struct xport_ops no_fence = { 0 };

#define KiB (UINT64_C(1024))
#define MiB (UINT64_C(1024) * KiB)

static uint64_t pinned_on(const struct xport_ops *ops, enum engine_role role, uint32_t chunk,
			  uint32_t slots, uint32_t pool_chunks)
{
	struct engine_params p = {
		.role = role, .chunk_size = chunk, .slots = slots, .pool_chunks = pool_chunks
	};

	return engine_pinned_bytes(&p, ops);
}

static uint64_t pinned(enum engine_role role, uint32_t chunk, uint32_t slots, uint32_t pool_chunks)
{
	return pinned_on(&fencing, role, chunk, slots, pool_chunks);
}

static void test_receiver(void **state)
{
	/* 32 slots of 1 MiB and one chunk of descriptors: 33 MiB, 34 in whole pages. */
	assert_int_equal(pinned(ENGINE_RECEIVER, 1 * MiB, 32, 999), 34 * MiB);
	/* 32 slots of 64 KiB + one descriptor chunk: 2.06 MiB, 4 MiB in pages. */
	assert_int_equal(pinned(ENGINE_RECEIVER, 64 * KiB, 32, 0), 4 * MiB);
	/* 3 + 1 chunks of 1 MiB: exactly two pages. */
	assert_int_equal(pinned(ENGINE_RECEIVER, 1 * MiB, 3, 0), 4 * MiB);
	/* Under 2 MiB: no rounding (no huge page for it). */
	assert_int_equal(pinned(ENGINE_RECEIVER, 64 * KiB, 4, 0), 5 * 64 * KiB);
	/* 4096 slots of 64 KiB: 128 KiB of descriptors are two more chunks. */
	assert_int_equal(pinned(ENGINE_RECEIVER, 64 * KiB, 4096, 0), 256 * MiB + 2 * MiB);
	/* 16 MiB chunks are whole pages already. */
	assert_int_equal(pinned(ENGINE_RECEIVER, 16 * MiB, 2, 0), 48 * MiB);
}

static void test_sender(void **state)
{
	/* The pool, not the peer's ring, is what the sender pins. */
	assert_int_equal(pinned(ENGINE_SENDER, 64 * KiB, 2, 64), 6 * MiB);
	assert_int_equal(pinned(ENGINE_SENDER, 64 * KiB, 32, 64), 6 * MiB);
	assert_int_equal(pinned(ENGINE_SENDER, 1 * MiB, 32, 32), 34 * MiB);
	assert_int_equal(pinned(ENGINE_SENDER, 1 * MiB, 2, 2), 4 * MiB);
}

static void test_slot_copies(void **state)
{
	/* A receiver that cannot fence its slots keeps a private copy of each: 32 more. */
	assert_int_equal(pinned_on(&no_fence, ENGINE_RECEIVER, 1 * MiB, 32, 0), 66 * MiB);
	assert_int_equal(pinned_on(&no_fence, ENGINE_RECEIVER, 64 * KiB, 4, 0), 9 * 64 * KiB);
	/* A sender never copies. */
	assert_int_equal(pinned_on(&no_fence, ENGINE_SENDER, 1 * MiB, 32, 32), 34 * MiB);
	assert_true(engine_rx_copies_slots(&no_fence));
	assert_false(engine_rx_copies_slots(&fencing));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_receiver),
		cmocka_unit_test(test_sender),
		cmocka_unit_test(test_slot_copies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
