/* SPDX-License-Identifier: MIT */
/* The value grammars of src/parse.h: what both programs accept, and what they refuse. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "testutil.h"

#include "parse.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)

static uint64_t size(const char *s)
{
	uint64_t v = 0;

	assert_int_equal(parse_size(s, &v), 0);
	return v;
}

/* Refused with err, and the output left alone. */
static void size_bad(const char *s, int err)
{
	uint64_t v = 42;

	assert_int_equal(parse_size(s, &v), err);
	assert_int_equal(v, 42);
}

static void test_size_plain(void **state)
{
	assert_int_equal(size("0"), 0);
	assert_int_equal(size("4096"), 4096);
	assert_int_equal(size("007"), 7);
	assert_int_equal(size("18446744073709551615"), UINT64_MAX);
}

static void test_size_suffixes(void **state)
{
	assert_int_equal(size("4K"), 4 * KiB);
	assert_int_equal(size("64M"), 64 * MiB);
	assert_int_equal(size("4G"), 4 * GiB);
	assert_int_equal(size("2T"), 2 * TiB);
	/* Either case, and B or iB after the multiple (either case). */
	assert_int_equal(size("4k"), 4 * KiB);
	assert_int_equal(size("64m"), 64 * MiB);
	assert_int_equal(size("4g"), 4 * GiB);
	assert_int_equal(size("2t"), 2 * TiB);
	assert_int_equal(size("4KiB"), 4 * KiB);
	assert_int_equal(size("4kib"), 4 * KiB);
	assert_int_equal(size("4KIB"), 4 * KiB);
	assert_int_equal(size("4KB"), 4 * KiB);
	assert_int_equal(size("4kb"), 4 * KiB);
	assert_int_equal(size("1TiB"), TiB);
	assert_int_equal(size("0G"), 0);
}

static void test_size_malformed(void **state)
{
	size_bad("", -EINVAL);
	size_bad(NULL, -EINVAL);
	size_bad("K", -EINVAL);
	size_bad("iB", -EINVAL);
	size_bad("+5", -EINVAL);
	size_bad("-5", -EINVAL);
	size_bad("-0", -EINVAL);
	size_bad(" 5", -EINVAL);
	size_bad("\t5", -EINVAL);
	size_bad("5 ", -EINVAL);
	size_bad("5 K", -EINVAL);
	size_bad("5K ", -EINVAL);
	size_bad("5B", -EINVAL); /* B only after a multiple */
	size_bad("5X", -EINVAL);
	size_bad("5P", -EINVAL); /* no peta */
	size_bad("5KK", -EINVAL);
	size_bad("5Ki", -EINVAL);
	size_bad("5KiBs", -EINVAL);
	size_bad("0x10", -EINVAL);
	size_bad("1.5G", -EINVAL);
	size_bad("1e3", -EINVAL);
}

static void test_size_overflow(void **state)
{
	size_bad("18446744073709551616", -ERANGE);
	/* Malformed wins over too big. */
	size_bad("99999999999999999999999X", -EINVAL);
	size_bad("99999999999999999999999 ", -EINVAL);
	size_bad("99999999999999999999999", -ERANGE);
	size_bad("16777216T", -ERANGE);	   /* 2^24 TiB = 2^64 */
	size_bad("17179869184G", -ERANGE); /* 2^34 GiB = 2^64 */
	assert_int_equal(size("16777215T"), UINT64_C(16777215) << 40);
}

static void test_size_unit(void **state)
{
	uint64_t v = 42;

	/* A bare number counts units; a suffix says bytes as parse_size. */
	assert_int_equal(parse_size_unit("500", KiB, &v), 0);
	assert_int_equal(v, 500 * KiB);
	assert_int_equal(parse_size_unit("500K", KiB, &v), 0);
	assert_int_equal(v, 500 * KiB);
	assert_int_equal(parse_size_unit("2M", KiB, &v), 0);
	assert_int_equal(v, 2 * MiB);
	v = 42;
	assert_int_equal(parse_size_unit("18014398509481984", KiB, &v), -ERANGE); /* 2^54 KiB */
	assert_int_equal(parse_size_unit("+1", KiB, &v), -EINVAL);
	assert_int_equal(v, 42);
}

static void test_uint(void **state)
{
	uint64_t v = 42;

	assert_int_equal(parse_uint("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_uint("10", 0, 10, &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(parse_uint("18446744073709551615", 0, UINT64_MAX, &v), 0);
	assert_int_equal(v, UINT64_MAX);
	v = 42;
	/* Out of range, or of uint64_t. */
	assert_int_equal(parse_uint("11", 0, 10, &v), -ERANGE);
	assert_int_equal(parse_uint("0", 1, 10, &v), -ERANGE);
	assert_int_equal(parse_uint("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
	assert_int_equal(parse_uint("18446744073709551616x", 0, UINT64_MAX, &v), -EINVAL);
	/* Malformed: no sign, no blanks, no suffix, not empty. */
	assert_int_equal(parse_uint("", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint(NULL, 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("+1", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("-1", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint(" 1", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("1 ", 0, 10, &v), -EINVAL);
	assert_int_equal(parse_uint("1K", 0, 10000, &v), -EINVAL);
	assert_int_equal(parse_uint("0x1", 0, 10, &v), -EINVAL);
	assert_int_equal(v, 42);
}

static void test_bool(void **state)
{
	static const char *const yes[] = { "yes", "YES", "Yes", "true", "TRUE", "1" };
	static const char *const no[] = { "no", "NO", "false", "False", "0" };
	static const char *const bad[] = { "", "y", "n", "on", "off", "2", " yes", "yes ", "01" };
	bool b;

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		b = false;
		assert_int_equal(parse_bool(yes[i], &b), 0);
		assert_true(b);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		b = true;
		assert_int_equal(parse_bool(no[i], &b), 0);
		assert_false(b);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = true;
		assert_int_equal(parse_bool(bad[i], &b), -EINVAL);
		assert_true(b);
	}
	assert_int_equal(parse_bool(NULL, &b), -EINVAL);
}

static void test_port(void **state)
{
	uint16_t p = 42;

	assert_int_equal(parse_port("1", &p), 0);
	assert_int_equal(p, 1);
	assert_int_equal(parse_port("65535", &p), 0);
	assert_int_equal(p, 65535);
	assert_int_equal(parse_port("7471", &p), 0);
	assert_int_equal(p, 7471);
	p = 42;
	assert_int_equal(parse_port("0", &p), -ERANGE);
	assert_int_equal(parse_port("65536", &p), -ERANGE);
	assert_int_equal(parse_port("4294967297", &p), -ERANGE); /* not wrapped to 1 */
	assert_int_equal(parse_port("-1", &p), -EINVAL);
	assert_int_equal(parse_port("+80", &p), -EINVAL);
	assert_int_equal(parse_port("http", &p), -EINVAL);
	assert_int_equal(parse_port("", &p), -EINVAL);
	assert_int_equal(p, 42);
}

#define DAY_MS (UINT64_C(24) * 3600 * 1000)

static uint64_t rate(const char *s)
{
	uint64_t v = 0;

	assert_int_equal(parse_rate(s, &v), 0);
	return v;
}

static void test_rate_bare_is_kib(void **state)
{
	assert_int_equal(rate("500"), 500 * KiB);
	assert_int_equal(rate("1024"), 1024 * KiB);
	assert_int_equal(rate("1"), KiB);
}

static void test_rate_suffixes(void **state)
{
	assert_int_equal(rate("500K"), 500 * KiB);
	assert_int_equal(rate("500k"), 500 * KiB);
	assert_int_equal(rate("500KiB"), 500 * KiB);
	assert_int_equal(rate("50M"), 50 * 1024 * KiB);
	assert_int_equal(rate("2G"), UINT64_C(2) << 30);
	/* T, as the daemon's sizes have it. */
	assert_int_equal(rate("1T"), UINT64_C(1) << 40);
	assert_int_equal(rate("1tib"), UINT64_C(1) << 40);
	/* The bare number and the K suffix agree. */
	assert_int_equal(rate("500"), rate("500K"));
}

static void test_rate_bad(void **state)
{
	uint64_t v = 42;

	assert_int_equal(parse_rate("", &v), -EINVAL);
	assert_int_equal(parse_rate("-5", &v), -EINVAL);
	assert_int_equal(parse_rate("5X", &v), -EINVAL);
	assert_int_equal(parse_rate("M", &v), -EINVAL);
	assert_int_equal(parse_rate("18446744073709551615", &v), -ERANGE);
	assert_int_equal(v, 42);
}

/* --wait-busy's: seconds by default, ms/s/m/h, at most max_ms (a day there), nothing else. */
static void test_duration(void **state)
{
	uint64_t v = 7;

	(void)state;
	assert_int_equal(parse_duration_ms("0", DAY_MS, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_duration_ms("90", DAY_MS, &v), 0);
	assert_int_equal(v, 90000);
	assert_int_equal(parse_duration_ms("90s", DAY_MS, &v), 0);
	assert_int_equal(v, 90000);
	assert_int_equal(parse_duration_ms("1500ms", DAY_MS, &v), 0);
	assert_int_equal(v, 1500);
	assert_int_equal(parse_duration_ms("2m", DAY_MS, &v), 0);
	assert_int_equal(v, 120000);
	assert_int_equal(parse_duration_ms("24h", DAY_MS, &v), 0);
	assert_int_equal(v, 86400000);
	v = 7;
	assert_int_equal(parse_duration_ms("25h", DAY_MS, &v), -ERANGE);
	assert_int_equal(parse_duration_ms("99999999999999999999", DAY_MS, &v), -ERANGE);
	assert_int_equal(parse_duration_ms("", DAY_MS, &v), -EINVAL);
	assert_int_equal(parse_duration_ms("-1", DAY_MS, &v), -EINVAL);
	assert_int_equal(parse_duration_ms("5x", DAY_MS, &v), -EINVAL);
	assert_int_equal(parse_duration_ms("1.5s", DAY_MS, &v), -EINVAL);
	assert_int_equal(parse_duration_ms("s", DAY_MS, &v), -EINVAL);
	assert_int_equal(parse_duration_ms("99999999999999999999x", DAY_MS, &v), -EINVAL);
	assert_int_equal(parse_duration_ms(" 5", DAY_MS, &v), -EINVAL);
	assert_int_equal(parse_duration_ms("+5", DAY_MS, &v), -EINVAL);
	assert_int_equal(parse_duration_ms("5S", DAY_MS, &v), -EINVAL);
	assert_int_equal(parse_duration_ms(NULL, DAY_MS, &v), -EINVAL);
	assert_int_equal(v, 7);
	/* The cap is the caller's, in every unit. */
	assert_int_equal(parse_duration_ms("60", 60000, &v), 0);
	assert_int_equal(v, 60000);
	assert_int_equal(parse_duration_ms("1m", 60000, &v), 0);
	assert_int_equal(parse_duration_ms("60001ms", 60000, &v), -ERANGE);
	assert_int_equal(parse_duration_ms("61", 60000, &v), -ERANGE);
	assert_int_equal(parse_duration_ms("2m", 60000, &v), -ERANGE);
	assert_int_equal(parse_duration_ms("1h", 60000, &v), -ERANGE);
	assert_int_equal(v, 60000);
}

/* Names from a set: exactly as written, or (the daemon's) in any case. */
static void test_enum(void **state)
{
	static const struct parse_enum_name names[] = {
		{ "tcp", 1 },
		{ "verbs", 2 },
		{ "auto", 0 },
	};
	int v = 42;

	assert_int_equal(parse_enum("verbs", names, 3, false, &v), 0);
	assert_int_equal(v, 2);
	assert_int_equal(parse_enum("auto", names, 3, false, &v), 0);
	assert_int_equal(v, 0);
	v = 42;
	assert_int_equal(parse_enum("TCP", names, 3, false, &v), -EINVAL);
	assert_int_equal(parse_enum("tcp ", names, 3, false, &v), -EINVAL);
	assert_int_equal(parse_enum("", names, 3, false, &v), -EINVAL);
	assert_int_equal(parse_enum("rdma", names, 3, true, &v), -EINVAL);
	assert_int_equal(parse_enum(NULL, names, 3, true, &v), -EINVAL);
	assert_int_equal(v, 42);
	assert_int_equal(parse_enum("TCP", names, 3, true, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(parse_enum("Verbs", names, 3, true, &v), 0);
	assert_int_equal(v, 2);
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
		cmocka_unit_test(test_size_plain),
		cmocka_unit_test(test_size_suffixes),
		cmocka_unit_test(test_size_malformed),
		cmocka_unit_test(test_size_overflow),
		cmocka_unit_test(test_size_unit),
		cmocka_unit_test(test_uint),
		cmocka_unit_test(test_bool),
		cmocka_unit_test(test_port),
		cmocka_unit_test(test_rate_bare_is_kib),
		cmocka_unit_test(test_rate_suffixes),
		cmocka_unit_test(test_rate_bad),
		cmocka_unit_test(test_duration),
		cmocka_unit_test(test_size_unchanged),
		cmocka_unit_test(test_enum),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
