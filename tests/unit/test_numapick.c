/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's NUMA choices (src/numapick.c): completion vectors
 * walk round the device node's own (the first as many as the node has CPUs),
 * any vector when the node is unknown, vector 0 for a device without any;
 * the ring's node is that of most lanes, lane 0's on a tie.
 */
#include "testutil.h"

#include "macro.h"
#include "numapick.h"

static void test_comp_vector(void **state)
{
	(void)state;
	/* 64 vectors, 16 CPUs on the node: 0..15 in turn, never beyond. */
	for (unsigned seq = 0; seq < 100; seq++) {
		assert_int_equal(numapick_comp_vector(64, 16, seq), seq % 16);
	}
	/* Fewer vectors than the node's CPUs: all of them. */
	assert_int_equal(numapick_comp_vector(4, 16, 5), 1);
	/* Node unknown: every vector. */
	assert_int_equal(numapick_comp_vector(8, 0, 13), 5);
	/* Soft-RoCE has one; none reported: 0. */
	assert_int_equal(numapick_comp_vector(1, 16, 7), 0);
	assert_int_equal(numapick_comp_vector(0, 16, 7), 0);
	assert_int_equal(numapick_comp_vector(-1, 0, 7), 0);
	/* Sessions side by side (seq from each pid) take different vectors. */
	assert_int_not_equal(numapick_comp_vector(64, 16, 4242),
			     numapick_comp_vector(64, 16, 4243));
}

static void test_ring_node(void **state)
{
	static const struct {
		int lanes[8];
		unsigned n;
		int want;
	} rows[] = {
		{ { 0, 0 }, 2, 0 },		      /* one rail */
		{ { 1, 1, 1, 1 }, 4, 1 },	      /* one rail on node 1 */
		{ { 0, 1, 0, 1 }, 4, 0 },	      /* a tie: lane 0's */
		{ { 1, 0, 1, 0 }, 4, 1 },	      /* a tie: lane 0's */
		{ { 0, 1, 1, 1, 0, 1, 1, 1 }, 8, 1 }, /* most lanes */
		{ { 2, 0, 1, 1 }, 4, 1 },	      /* most lanes, not lane 0's */
		{ { -1, -1 }, 2, -1 },		      /* no node reported */
		{ { -1, 3, 3 }, 3, 3 },
		{ { 0 }, 0, -1 }, /* no lanes */
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		int got = numapick_ring_node(rows[i].lanes, rows[i].n);

		if (got != rows[i].want) {
			fail_msg("row %zu: node %d, want %d", i, got, rows[i].want);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_comp_vector),
		cmocka_unit_test(test_ring_node),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
