/* SPDX-License-Identifier: MIT */
/* The client's value parsers: --bwlimit's units (rsync's: a bare number is KiB/s). */
#include <errno.h>
#include <stdint.h>

#include "testutil.h"

#include "client.h"

#define KiB (UINT64_C(1024))

static uint64_t bw(const char *s)
{
	uint64_t v = 0;

	assert_int_equal(parse_bwlimit(s, &v), 0);
	return v;
}

static void test_bwlimit_bare_is_kib(void **state)
{
	assert_int_equal(bw("500"), 500 * KiB);
	assert_int_equal(bw("1024"), 1024 * KiB);
	assert_int_equal(bw("1"), KiB);
}

static void test_bwlimit_suffixes(void **state)
{
	assert_int_equal(bw("500K"), 500 * KiB);
	assert_int_equal(bw("500k"), 500 * KiB);
	assert_int_equal(bw("500KiB"), 500 * KiB);
	assert_int_equal(bw("50M"), 50 * 1024 * KiB);
	assert_int_equal(bw("2G"), UINT64_C(2) << 30);
	/* The bare number and the K suffix agree. */
	assert_int_equal(bw("500"), bw("500K"));
}

static void test_bwlimit_bad(void **state)
{
	uint64_t v = 42;

	assert_int_equal(parse_bwlimit("", &v), -EINVAL);
	assert_int_equal(parse_bwlimit("-5", &v), -EINVAL);
	assert_int_equal(parse_bwlimit("5X", &v), -EINVAL);
	assert_int_equal(parse_bwlimit("M", &v), -EINVAL);
	assert_int_equal(parse_bwlimit("18446744073709551615", &v), -ERANGE);
	assert_int_equal(v, 42);
}

static void test_size_unchanged(void **state)
{
	uint64_t v = 0;

	/* --chunk-size and friends keep bytes for a bare number. */
	assert_int_equal(parse_size("4096", &v), 0);
	assert_int_equal(v, 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bwlimit_bare_is_kib),
		cmocka_unit_test(test_bwlimit_suffixes),
		cmocka_unit_test(test_bwlimit_bad),
		cmocka_unit_test(test_size_unchanged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
