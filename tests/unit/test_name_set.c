/* SPDX-License-Identifier: MIT */
/*
 * The engine's hash set of 64-bit keys (src/engine_names.c): adds, the
 * growth of the table, removal by backward shift (a removed key is gone,
 * every other key still found, however the runs of the table wrapped), and
 * thousands of random adds and removes checked against a plain array.
 */
/* Before cmocka, whose fail() macro would meet the engine's fail() declaration. */
#include "engine-internal.h"

#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static void test_add_del(void **state)
{
	struct name_set s = { 0 };

	(void)state;
	assert_false(hash_set_has(&s, 5));
	hash_set_del(&s, 5); /* empty: nothing to do */
	assert_int_equal(hash_set_add(&s, 5), 1);
	assert_int_equal(hash_set_add(&s, 5), 0);
	assert_true(hash_set_has(&s, 5));
	hash_set_del(&s, 7); /* not there */
	assert_int_equal(s.n, 1);
	hash_set_del(&s, 5);
	assert_int_equal(s.n, 0);
	assert_false(hash_set_has(&s, 5));
	assert_int_equal(hash_set_add(&s, 5), 1);
	free(s.h);
}

/*
 * Keys that all want the last slots of the table: their run wraps past the
 * end. Removing any one of them leaves the others found.
 */
static void test_wrapping_run(void **state)
{
	(void)state;
	for (uint64_t gone = 0; gone < 6; gone++) {
		struct name_set s = { 0 };
		uint64_t keys[6];

		assert_int_equal(hash_set_add(&s, 1), 1); /* the table exists: cap 1024 */
		for (uint64_t i = 0; i < 6; i++) {
			/* Homes 1021, 1022, 1023, 1021, 1022, 1023: the run reaches slots 0-2. */
			keys[i] = ((i + 1) << 10) | (1021 + i % 3);
			assert_int_equal(hash_set_add(&s, keys[i]), 1);
		}
		hash_set_del(&s, keys[gone]);
		for (uint64_t i = 0; i < 6; i++) {
			assert_int_equal(hash_set_has(&s, keys[i]), i != gone);
		}
		assert_true(hash_set_has(&s, 1));
		free(s.h);
	}
}

/* Random adds and removes, never more than a few thousand at once, against a plain array. */
static void test_random(void **state)
{
	enum { LIVE_MAX = 3000, ROUNDS = 200000 };
	struct name_set s = { 0 };
	uint64_t *live = calloc(LIVE_MAX, sizeof(*live));
	size_t nlive = 0;
	uint64_t x = 88172645463325252ull;

	(void)state;
	assert_non_null(live);
	for (int round = 0; round < ROUNDS; round++) {
		/* xorshift64; keys from a small range so that homes collide often */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t key = (x % 50000) + 1;
		bool add = nlive == 0 || (nlive < LIVE_MAX && (x >> 40) % 2 == 0);

		if (add) {
			bool there = false;

			for (size_t i = 0; i < nlive && !there; i++) {
				there = live[i] == key;
			}
			assert_int_equal(hash_set_add(&s, key), there ? 0 : 1);
			if (!there) {
				live[nlive++] = key;
			}
		} else {
			size_t i = (x >> 20) % nlive;

			hash_set_del(&s, live[i]);
			assert_false(hash_set_has(&s, live[i]));
			live[i] = live[--nlive];
		}
		assert_int_equal(s.n, nlive);
		if (round % 1000 == 0) {
			for (size_t i = 0; i < nlive; i++) {
				assert_true(hash_set_has(&s, live[i]));
			}
		}
	}
	/* The table grew to hold the most ever present at once, not every key ever added. */
	assert_true(s.cap <= 2 * 8192);
	free(live);
	free(s.h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_del),
		cmocka_unit_test(test_wrapping_run),
		cmocka_unit_test(test_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
