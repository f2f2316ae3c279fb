/* SPDX-License-Identifier: MIT */
/*
 * rdmacp bench's pattern (engine_bench_fill/check): a chunk checks only at
 * its own offset and seed; any byte changed, a chunk from another offset
 * (misplaced) or another run (seed), and a short tail are all caught, with
 * the first differing byte named.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "engine.h"

#define LEN 4096

static void test_round_trip(void **state)
{
	static uint8_t buf[LEN];
	const uint32_t lens[] = { 1, 7, 8, 9, 15, 16, 4095, LEN };
	uint32_t at = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		engine_bench_fill(buf, lens[i], 1ull << 40, 42);
		assert_int_equal(engine_bench_check(buf, lens[i], 1ull << 40, 42, &at), 0);
	}
	/* A fill of any offset, stamped for another, is that other offset's fill. */
	static uint8_t a[2 * LEN], b[2 * LEN];
	engine_bench_fill(a, 2 * LEN, 0, 7);
	engine_bench_stamp(a, 2 * LEN, 3 * LEN, 7);
	engine_bench_fill(b, 2 * LEN, 3 * LEN, 7);
	assert_memory_equal(a, b, 2 * LEN);
	assert_int_equal(engine_bench_check(a, 2 * LEN, 3 * LEN, 7, &at), 0);
	/* Short ones too, down to a part of the first block head. */
	engine_bench_stamp(a, 5, LEN, 7);
	assert_int_equal(engine_bench_check(a, 5, LEN, 7, &at), 0);
}

static void test_every_byte_flipped(void **state)
{
	static uint8_t buf[LEN];
	const uint32_t lens[] = { LEN, 4093 };

	(void)state;
	for (size_t l = 0; l < 2; l++) {
		engine_bench_fill(buf, lens[l], 8192, 0xfeed);
		for (uint32_t i = 0; i < lens[l]; i++) {
			uint32_t at = UINT32_MAX;

			buf[i] ^= 0x10;
			assert_int_equal(engine_bench_check(buf, lens[l], 8192, 0xfeed, &at),
					 -EBADMSG);
			assert_int_equal(at, i);
			buf[i] ^= 0x10;
		}
		uint32_t at = 0;
		assert_int_equal(engine_bench_check(buf, lens[l], 8192, 0xfeed, &at), 0);
	}
}

static void test_misplaced_and_other_seed(void **state)
{
	static uint8_t buf[LEN];
	uint32_t at = UINT32_MAX;

	(void)state;
	/* Chunk 0's bytes where chunk 1 belongs, and the other way round. */
	engine_bench_fill(buf, LEN, 0, 1);
	assert_int_equal(engine_bench_check(buf, LEN, LEN, 1, &at), -EBADMSG);
	assert_true(at < 8); /* in the first word */
	engine_bench_fill(buf, LEN, LEN, 1);
	assert_int_equal(engine_bench_check(buf, LEN, 0, 1, &at), -EBADMSG);
	/* Offsets far apart: the words never repeat within 2^64 of them. */
	engine_bench_fill(buf, LEN, 0, 1);
	assert_int_equal(engine_bench_check(buf, LEN, 1ull << 49, 1, &at), -EBADMSG);
	/* Another run's stream. */
	engine_bench_fill(buf, LEN, 0, 1);
	assert_int_equal(engine_bench_check(buf, LEN, 0, 2, &at), -EBADMSG);
	/* All zeros (a slot nobody wrote) is not data. */
	memset(buf, 0, LEN);
	assert_int_equal(engine_bench_check(buf, LEN, LEN, 0x1234, &at), -EBADMSG);

	/* A block moved inside a chunk, head and all: caught past its head. */
	static uint8_t two[2 * LEN];
	engine_bench_fill(two, 2 * LEN, 0, 9);
	memcpy(two + LEN, two, LEN);
	assert_int_equal(engine_bench_check(two, 2 * LEN, 0, 9, &at), -EBADMSG);
	assert_true(at == LEN || at == LEN + 1); /* the head's low byte may agree */
	/* The right block heads over another chunk's words: still caught. */
	engine_bench_fill(two, 2 * LEN, 0, 9);
	memmove(two + 8, two + 16, LEN - 16);
	assert_int_equal(engine_bench_check(two, 2 * LEN, 0, 9, &at), -EBADMSG);
	assert_true(at >= 8 && at < 16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_every_byte_flipped),
		cmocka_unit_test(test_misplaced_and_other_seed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
