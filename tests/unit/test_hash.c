/* SPDX-License-Identifier: MIT */
/* Per-file XXH3-128: known answers, streaming equals one-shot and whole, hex form. */
#include <string.h>

#include "testutil.h"

#include "hash.h"

static void digest_of(const void *buf, size_t len, uint8_t out[HASH_LEN])
{
	struct file_hash h = { 0 };

	assert_int_equal(file_hash_init(&h), 0);
	file_hash_update(&h, buf, len);
	file_hash_final(&h, out);
	file_hash_free(&h);
	assert_null(h.state);
}

static void test_known_answers(void **state)
{
	uint8_t d[HASH_LEN];
	char hex[2 * HASH_LEN + 1];

	(void)state;
	/* Published XXH3-128 vectors, canonical (big-endian) order. */
	digest_of("", 0, d);
	hash_to_hex(d, hex);
	assert_string_equal(hex, "99aa06d3014798d86001c324468d497f");

	digest_of("abc", 3, d);
	hash_to_hex(d, hex);
	assert_string_equal(hex, "06b05ab6733a618578af5f94892f3950");
}

static void test_streamed_equals_oneshot(void **state)
{
	static uint8_t buf[100003];
	const size_t pieces[] = { 0, 1, 2, 3, 63, 64, 65, 239, 240, 241, 1024, 4096, 65536 };
	uint8_t streamed[HASH_LEN];
	XXH128_canonical_t canon;
	struct file_hash h = { 0 };
	uint32_t x = 12345;
	size_t off = 0, k = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	XXH128_canonicalFromHash(&canon, XXH3_128bits(buf, sizeof(buf)));

	assert_int_equal(file_hash_init(&h), 0);
	while (off < sizeof(buf)) {
		size_t n = pieces[k++ % (sizeof(pieces) / sizeof(pieces[0]))];

		if (n > sizeof(buf) - off) {
			n = sizeof(buf) - off;
		}
		file_hash_update(&h, buf + off, n);
		off += n;
	}
	file_hash_final(&h, streamed);
	file_hash_free(&h);
	file_hash_free(&h); /* idempotent */
	assert_memory_equal(streamed, canon.digest, HASH_LEN);

	/* And the canonical order is big-endian: the high 64 bits first. */
	XXH128_hash_t raw = XXH3_128bits(buf, sizeof(buf));
	for (int i = 0; i < 8; i++) {
		assert_int_equal(streamed[i], (uint8_t)(raw.high64 >> (56 - 8 * i)));
		assert_int_equal(streamed[8 + i], (uint8_t)(raw.low64 >> (56 - 8 * i)));
	}
}

/*
 * A file hashed whole in one call (a packed file) has the streamed digest,
 * with no state; and file_hash_init clears what a stack struct held.
 */
static void test_whole_equals_streamed(void **state)
{
	static uint8_t buf[8192];
	const size_t sizes[] = { 1, 3, 64, 240, 241, 4095, 4096, 8192 };

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++) {
		buf[i] = (uint8_t)(i * 131 + 7);
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct file_hash whole = { 0 }, h;
		uint8_t a[HASH_LEN], b[HASH_LEN];

		file_hash_whole(&whole, buf, sizes[i]);
		assert_null(whole.state);
		file_hash_final(&whole, a);
		file_hash_free(&whole);

		memset(&h, 0xa5, sizeof(h)); /* what an uninitialised stack struct may hold */
		assert_int_equal(file_hash_init(&h), 0);
		file_hash_update(&h, buf, sizes[i]);
		file_hash_final(&h, b);
		file_hash_free(&h);
		assert_memory_equal(a, b, HASH_LEN);
	}
}

/* A receiver's file that never streamed a byte (empty, or not yet fed) has no state. */
static void test_unfed_is_empty(void **state)
{
	struct file_hash none = { 0 }, whole = { 0 }, h;
	uint8_t a[HASH_LEN], b[HASH_LEN], c[HASH_LEN];

	(void)state;
	file_hash_final(&none, a);
	assert_null(none.state);
	file_hash_free(&none);
	file_hash_whole(&whole, "", 0);
	file_hash_final(&whole, b);
	assert_int_equal(file_hash_init(&h), 0);
	file_hash_final(&h, c);
	file_hash_free(&h);
	assert_memory_equal(a, b, HASH_LEN);
	assert_memory_equal(a, c, HASH_LEN);
}

static void test_hex_format(void **state)
{
	uint8_t d[HASH_LEN];
	char hex[2 * HASH_LEN + 2];

	(void)state;
	for (int i = 0; i < HASH_LEN; i++) {
		d[i] = (uint8_t)(i * 0x11);
	}
	d[0] = 0x00;
	d[1] = 0xff;
	d[2] = 0xab;
	memset(hex, 'X', sizeof(hex));
	hash_to_hex(d, hex);
	assert_int_equal(strlen(hex), 2 * HASH_LEN);
	assert_int_equal(hex[sizeof(hex) - 1], 'X'); /* nothing written past the NUL */
	assert_string_equal(hex, "00ffab33445566778899aabbccddeeff");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_answers),
		cmocka_unit_test(test_streamed_equals_oneshot),
		cmocka_unit_test(test_whole_equals_streamed),
		cmocka_unit_test(test_unfed_is_empty),
		cmocka_unit_test(test_hex_format),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
