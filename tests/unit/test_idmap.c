/* SPDX-License-Identifier: MIT */
/*
 * The 32-bit map (src/idmap.c): an empty map, value 0 refused, overwrite,
 * keys that share a home slot, and a million keys (the relay child's book
 * at scale: ids in any order, then every one looked up, and keys never set
 * not found), which a map that probed linearly through its keys would not
 * finish.
 */
#include "testutil.h"

#include <errno.h>
#include <stdlib.h>

#include "idmap.h"

static void test_basic(void **state)
{
	struct idmap m = { 0 };

	(void)state;
	assert_int_equal(idmap_get(&m, 7), 0);
	assert_int_equal(idmap_set(&m, 7, 0), -EINVAL);
	assert_int_equal(idmap_get(&m, 7), 0);
	assert_int_equal(idmap_set(&m, 7, 1), 0);
	assert_int_equal(idmap_set(&m, 0, 2), 0);
	assert_int_equal(idmap_set(&m, UINT32_MAX, 3), 0);
	assert_int_equal(idmap_get(&m, 7), 1);
	assert_int_equal(idmap_get(&m, 0), 2);
	assert_int_equal(idmap_get(&m, UINT32_MAX), 3);
	assert_int_equal(idmap_get(&m, 8), 0);
	/* Overwritten, not added: a descriptor the kernel gave again. */
	assert_int_equal(idmap_set(&m, 7, 9), 0);
	assert_int_equal(idmap_get(&m, 7), 9);
	assert_int_equal(m.n, 3);
	idmap_free(&m);
	assert_int_equal(idmap_get(&m, 7), 0);
	assert_int_equal(idmap_set(&m, 7, 4), 0); /* usable again */
	assert_int_equal(idmap_get(&m, 7), 4);
	idmap_free(&m);
}

/* Keys a multiple of the table apart: linear probing past each other, all found. */
static void test_collisions(void **state)
{
	struct idmap m = { 0 };

	(void)state;
	for (uint32_t i = 0; i < 1000; i++) {
		assert_int_equal(idmap_set(&m, i << 20, i + 1), 0);
	}
	for (uint32_t i = 0; i < 1000; i++) {
		assert_int_equal(idmap_get(&m, i << 20), i + 1);
		assert_int_equal(idmap_get(&m, (i << 20) + 1), 0);
	}
	assert_true(m.cap > 2 * m.n);
	idmap_free(&m);
}

/* A million keys in a scattered order, each found, none invented. */
static void test_scale(void **state)
{
	enum { N = 1000000 };
	struct idmap m = { 0 };

	(void)state;
	for (uint32_t i = 0; i < N; i++) {
		uint32_t k = (uint32_t)(((uint64_t)i * 2654435761u) % (2 * N)); /* distinct */

		assert_int_equal(idmap_set(&m, 2 * k, i + 1), 0);
	}
	assert_int_equal(m.n, N);
	for (uint32_t i = 0; i < N; i++) {
		uint32_t k = (uint32_t)(((uint64_t)i * 2654435761u) % (2 * N));

		assert_int_equal(idmap_get(&m, 2 * k), i + 1);
		assert_int_equal(idmap_get(&m, 2 * k + 1), 0);
	}
	idmap_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_collisions),
		cmocka_unit_test(test_scale),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
