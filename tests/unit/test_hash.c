/* SPDX-License-Identifier: MIT */
/*
 * Per-file XXH3-128: known answers, streaming equals one-shot and whole, hex
 * form; the chunk tree's known answers, by bytes in any pieces and by chunk
 * digests, and a copy to go back to.
 */
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

/* The tests' bytes for the tree's vectors: byte i is (31 i + i / 256) mod 256. */
static void tree_pattern(uint8_t *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		buf[i] = (uint8_t)(i * 31 + (i >> 8));
	}
}

static void tree_digest_of(const uint8_t *buf, size_t len, size_t piece, uint8_t out[HASH_LEN])
{
	struct file_hash h = { 0 };

	assert_int_equal(file_hash_init_tree(&h, 4096), 0);
	assert_int_equal(file_hash_tree(&h), 4096);
	for (size_t off = 0; off < len; off += piece) {
		file_hash_update(&h, buf + off, piece < len - off ? piece : len - off);
	}
	file_hash_final(&h, out);
	file_hash_free(&h);
	assert_null(h.state);
	assert_null(h.leaf);
}

/*
 * Known answers of the chunk tree at 4096 bytes a chunk, made apart from
 * this code with xxhsum (the XXH3-128 of each 4096-byte piece, its 16 bytes
 * in the order xxhsum prints them, all of them in order, hashed again):
 *   python3 -c 'import sys; sys.stdout.buffer.write(bytes((i*31+(i>>8))&255
 *     for i in range(N)))' | split -b 4096 - c. && for f in c.*; do
 *     xxhsum -H2 $f | cut -c1-32 | xxd -r -p; done | xxhsum -H2
 */
static void test_tree_known_answers(void **state)
{
	static uint8_t buf[13288];
	const size_t pieces[] = { 1, 7, 1000, 4096, 5000, 13288 };
	uint8_t d[HASH_LEN];
	char hex[2 * HASH_LEN + 1];

	(void)state;
	tree_pattern(buf, sizeof(buf));
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		/* Three whole chunks and a short one. */
		tree_digest_of(buf, sizeof(buf), pieces[i], d);
		hash_to_hex(d, hex);
		assert_string_equal(hex, "399b8ed28433f12bfc020901dab8e8ea");
		/* Two whole chunks: no short one. */
		tree_digest_of(buf, 8192, pieces[i], d);
		hash_to_hex(d, hex);
		assert_string_equal(hex, "a0b2f2ab0f2065073d9d6bac146b5cbd");
	}
	/* Nothing: the digest of empty input, a stream's. */
	tree_digest_of(buf, 0, 1, d);
	hash_to_hex(d, hex);
	assert_string_equal(hex, "99aa06d3014798d86001c324468d497f");
	/* Not the stream's digest of the same bytes. */
	tree_digest_of(buf, sizeof(buf), 4096, d);
	hash_to_hex(d, hex);
	assert_string_not_equal(hex, "e493474ae19b9aa95cc82b16dd7ec4b5");
}

/* Whole chunks by their digests (made elsewhere) and bytes mix in order; a copy goes back. */
static void test_tree_by_chunk_digests(void **state)
{
	static uint8_t buf[13288];
	struct file_hash h = { 0 }, saved = { 0 };
	XXH128_canonical_t c;
	uint8_t d[HASH_LEN], again[HASH_LEN];
	char hex[2 * HASH_LEN + 1];

	(void)state;
	tree_pattern(buf, sizeof(buf));
	assert_int_equal(file_hash_init_tree(&h, 4096), 0);
	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, 4096));
	file_hash_chunk(&h, c.digest);
	file_hash_update(&h, buf + 4096, 100);
	/* A copy part-way through a chunk: fed past it, then taken back. */
	assert_int_equal(file_hash_copy(&saved, &h), 0);
	file_hash_update(&h, "garbage", 7);
	file_hash_free(&h);
	h = saved;
	file_hash_update(&h, buf + 4196, 3996);
	XXH128_canonicalFromHash(&c, XXH3_128bits(buf + 8192, 4096));
	file_hash_chunk(&h, c.digest);
	file_hash_update(&h, buf + 12288, sizeof(buf) - 12288);
	file_hash_final(&h, d);
	/* A second final, nothing fed between: the same digest. */
	file_hash_final(&h, again);
	file_hash_free(&h);
	hash_to_hex(d, hex);
	assert_string_equal(hex, "399b8ed28433f12bfc020901dab8e8ea");
	assert_memory_equal(d, again, HASH_LEN);
	/* A chunk's digest in one call, or block by block into a state: libxxhash's. */
	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, 4096));
	hash_digest(buf, 4096, d);
	assert_memory_equal(d, c.digest, HASH_LEN);
	XXH3_state_t *st = XXH3_createState();
	assert_non_null(st);
	XXH3_128bits_reset(st);
	hash_state_update(st, buf, 1000);
	hash_state_update(st, buf + 1000, 3096);
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
	XXH3_freeState(st);
	assert_memory_equal(d, c.digest, HASH_LEN);
	/* A stream is not a tree. */
	assert_int_equal(file_hash_init_tree(&h, 0), 0);
	assert_int_equal(file_hash_tree(&h), 0);
	file_hash_free(&h);
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
		cmocka_unit_test(test_tree_known_answers),
		cmocka_unit_test(test_tree_by_chunk_digests),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
