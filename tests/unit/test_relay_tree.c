/* SPDX-License-Identifier: MIT */
/*
 * The layout of a relay tree (src/relay_tree.c): every list of 1..16
 * destinations at every fan-out 0..16 splits into contiguous groups that
 * cover it, as many as the fan-out allows, of sizes one apart; a chain is
 * one group; how deep trees go; sizes and fan-outs past the caps refused.
 */
#include <errno.h>

#include "testutil.h"

#include "relay_tree.h"

static void split_covers(void **state)
{
	struct relay_tree_group g[PROTO_MAX_RELAY_FANOUT];

	(void)state;
	for (size_t n = 1; n <= PROTO_MAX_RELAY_HOPS; n++) {
		for (unsigned k = 0; k <= PROTO_MAX_RELAY_FANOUT; k++) {
			int ng = relay_tree_split(n, k, g);
			size_t want = k <= 1 ? 1 : k < n ? k : n, at = 0, lo = n, hi = 0;

			assert_int_equal(ng, (int)want);
			for (int i = 0; i < ng; i++) {
				assert_int_equal(g[i].first, at);
				assert_true(g[i].count >= 1);
				at += g[i].count;
				lo = g[i].count < lo ? g[i].count : lo;
				hi = g[i].count > hi ? g[i].count : hi;
				/* the longer groups first */
				assert_true(i == 0 || g[i].count <= g[i - 1].count);
			}
			assert_int_equal(at, n);
			assert_true(hi - lo <= 1);
		}
	}
}

static void split_refuses(void **state)
{
	struct relay_tree_group g[PROTO_MAX_RELAY_FANOUT];

	(void)state;
	assert_int_equal(relay_tree_split(0, 2, g), -EINVAL);
	assert_int_equal(relay_tree_split(PROTO_MAX_RELAY_HOPS + 1, 2, g), -EINVAL);
	assert_int_equal(relay_tree_split(4, PROTO_MAX_RELAY_FANOUT + 1, g), -EINVAL);
	assert_int_equal(relay_tree_split(4, 255, g), -EINVAL);
}

/* Seven destinations at fan-out 2: the first, two below it, two below each of those. */
static void seven_at_two(void **state)
{
	struct relay_tree_group g[PROTO_MAX_RELAY_FANOUT];

	(void)state;
	assert_int_equal(relay_tree_split(6, 2, g), 2);
	assert_int_equal(g[0].first, 0);
	assert_int_equal(g[0].count, 3);
	assert_int_equal(g[1].first, 3);
	assert_int_equal(g[1].count, 3);
	assert_int_equal(relay_tree_split(2, 2, g), 2);
	assert_int_equal(g[0].count, 1);
	assert_int_equal(g[1].count, 1);
}

static void depth(void **state)
{
	(void)state;
	for (size_t n = 1; n <= PROTO_MAX_RELAY_HOPS + 1; n++) {
		assert_int_equal(relay_tree_depth(n, 1), n); /* a chain */
		assert_int_equal(relay_tree_depth(n, 0), n);
		assert_true(relay_tree_depth(n, 2) <= relay_tree_depth(n, 1));
		assert_int_equal(relay_tree_depth(n, PROTO_MAX_RELAY_FANOUT), n == 1 ? 1 : 2);
	}
	assert_int_equal(relay_tree_depth(4, 2), 3);
	assert_int_equal(relay_tree_depth(7, 2), 3);
	assert_int_equal(relay_tree_depth(8, 2), 4);
	assert_int_equal(relay_tree_depth(8, 4), 3);
	assert_int_equal(relay_tree_depth(0, 2), 0);
	assert_int_equal(relay_tree_depth(PROTO_MAX_RELAY_HOPS + 2, 2), 0);
	assert_int_equal(relay_tree_depth(4, PROTO_MAX_RELAY_FANOUT + 1), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(split_covers),
		cmocka_unit_test(split_refuses),
		cmocka_unit_test(seven_at_two),
		cmocka_unit_test(depth),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
