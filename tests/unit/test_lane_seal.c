/* SPDX-License-Identifier: MIT */
/*
 * Lane sealing: keys differ per session secret, lane and direction; a frame
 * opens only with its own key, nonce count and header, and a changed
 * ciphertext, tag, header or count (replay, reordering, a dropped frame)
 * fails with -EBADMSG; under every seal suite, and a frame sealed under one
 * suite never opens under another (the same secret, lane and direction).
 * Known-answer checks against OpenSSL's AES-256-GCM, AES-128-GCM and
 * ChaCha20-Poly1305 under the documented HKDF info; the suites' names and
 * lanes bytes; the speed test's choice.
 */
#include "testutil.h"

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include "proto/msg.h"

#include "lane_seal.h"

static void secret_fill(uint8_t s[LANE_SEAL_SECRET_LEN], uint8_t seed)
{
	for (size_t i = 0; i < LANE_SEAL_SECRET_LEN; i++) {
		s[i] = (uint8_t)(seed * 17 + i);
	}
}

static void test_keys_differ(void **state)
{
	uint8_t s1[LANE_SEAL_SECRET_LEN], s2[LANE_SEAL_SECRET_LEN];
	uint8_t k[4][LANE_SEAL_KEY_LEN], again[LANE_SEAL_KEY_LEN];

	secret_fill(s1, 1);
	secret_fill(s2, 2);
	assert_int_equal(lane_seal_derive(s1, 0, true, k[0]), 0);
	assert_int_equal(lane_seal_derive(s1, 0, false, k[1]), 0);
	assert_int_equal(lane_seal_derive(s1, 1, true, k[2]), 0);
	assert_int_equal(lane_seal_derive(s2, 0, true, k[3]), 0);
	for (int i = 0; i < 4; i++) {
		for (int j = i + 1; j < 4; j++) {
			assert_memory_not_equal(k[i], k[j], LANE_SEAL_KEY_LEN);
		}
		/* The key is not the secret itself. */
		assert_memory_not_equal(k[i], s1, LANE_SEAL_KEY_LEN);
	}
	/* Deterministic: both ends derive the same key from the same secret. */
	assert_int_equal(lane_seal_derive(s1, 0, true, again), 0);
	assert_memory_equal(again, k[0], LANE_SEAL_KEY_LEN);
}

struct frame {
	uint8_t hdr[32];
	uint8_t data[300];
	uint8_t tag[LANE_SEAL_TAG_LEN];
};

static void seal_one(struct lane_seal *s, struct frame *f, uint8_t seed)
{
	uint8_t plain[sizeof(f->data)];

	for (size_t i = 0; i < sizeof(f->hdr); i++) {
		f->hdr[i] = (uint8_t)(seed + i);
	}
	for (size_t i = 0; i < sizeof(plain); i++) {
		plain[i] = (uint8_t)(seed ^ i);
	}
	assert_int_equal(lane_seal_begin(s, f->hdr, sizeof(f->hdr)), 0);
	/* In two pieces, as the transport sends a large payload. */
	assert_int_equal(lane_seal_update(s, plain, f->data, 100), 0);
	assert_int_equal(lane_seal_update(s, plain + 100, f->data + 100, sizeof(plain) - 100), 0);
	assert_int_equal(lane_seal_end(s, f->tag), 0);
	assert_memory_not_equal(f->data, plain, sizeof(plain));
}

/* Opens a copy in place; returns lane_seal_end's verdict, checks the plaintext on success. */
static int open_one(struct lane_seal *s, const struct frame *f, uint8_t seed)
{
	struct frame c = *f;
	int r;

	assert_int_equal(lane_seal_begin(s, c.hdr, sizeof(c.hdr)), 0);
	assert_int_equal(lane_seal_update(s, c.data, c.data, sizeof(c.data)), 0);
	r = lane_seal_end(s, c.tag);
	if (r == 0) {
		for (size_t i = 0; i < sizeof(c.data); i++) {
			assert_int_equal(c.data[i], (uint8_t)(seed ^ i));
		}
	}
	return r;
}

struct ends {
	struct lane_seal tx, rx;
};

static void ends_init_suites(struct ends *e, enum lane_seal_suite tx_suite,
			     enum lane_seal_suite rx_suite, uint8_t seed_tx, uint8_t seed_rx,
			     bool rx_dir)
{
	uint8_t a[LANE_SEAL_SECRET_LEN], b[LANE_SEAL_SECRET_LEN];

	secret_fill(a, seed_tx);
	secret_fill(b, seed_rx);
	assert_int_equal(lane_seal_init_suite(&e->tx, tx_suite, a, 3, true, true), 0);
	assert_int_equal(lane_seal_init_suite(&e->rx, rx_suite, b, 3, rx_dir, false), 0);
}

static void ends_init(struct ends *e, uint8_t seed_tx, uint8_t seed_rx, bool rx_dir)
{
	uint8_t a[LANE_SEAL_SECRET_LEN], b[LANE_SEAL_SECRET_LEN];

	secret_fill(a, seed_tx);
	secret_fill(b, seed_rx);
	assert_int_equal(lane_seal_init(&e->tx, a, 3, true, true), 0);
	assert_int_equal(lane_seal_init(&e->rx, b, 3, rx_dir, false), 0);
}

static void ends_fini(struct ends *e)
{
	lane_seal_fini(&e->tx);
	lane_seal_fini(&e->rx);
}

static void test_roundtrip(void **state)
{
	struct ends e;
	struct frame f[3];

	ends_init(&e, 1, 1, true);
	for (uint8_t i = 0; i < 3; i++) {
		seal_one(&e.tx, &f[i], i);
	}
	for (uint8_t i = 0; i < 3; i++) {
		assert_int_equal(open_one(&e.rx, &f[i], i), 0);
	}
	ends_fini(&e);
}

static void tampering_fails(enum lane_seal_suite suite)
{
	enum { FLIP_DATA, FLIP_TAG, FLIP_HDR, REPLAY, SKIP, WRONG_DIR, WRONG_SECRET };

	for (int kind = FLIP_DATA; kind <= WRONG_SECRET; kind++) {
		struct ends e;
		struct frame f[2];

		ends_init_suites(&e, suite, suite, 1, kind == WRONG_SECRET ? 2 : 1,
				 kind != WRONG_DIR);
		seal_one(&e.tx, &f[0], 10);
		seal_one(&e.tx, &f[1], 11);
		switch (kind) {
		case FLIP_DATA:
			f[0].data[150] ^= 0x40;
			break;
		case FLIP_TAG:
			f[0].tag[0] ^= 0x01;
			break;
		case FLIP_HDR: /* the frame aimed at another slot */
			f[0].hdr[9] ^= 0x01;
			break;
		case REPLAY: /* frame 0 twice: the second copy is opened as frame 1 */
			assert_int_equal(open_one(&e.rx, &f[0], 10), 0);
			f[1] = f[0];
			break;
		case SKIP: /* frame 0 dropped (or 1 and 0 swapped) */
			f[0] = f[1];
			break;
		default:
			break;
		}
		if (kind == REPLAY) {
			assert_int_equal(open_one(&e.rx, &f[1], 10), -EBADMSG);
		} else {
			assert_int_equal(open_one(&e.rx, &f[0], kind == SKIP ? 11 : 10), -EBADMSG);
		}
		ends_fini(&e);
	}
}

static void test_tampering_fails(void **state)
{
	for (int suite = 1; suite <= LANE_SEAL_NSUITES; suite++) {
		tampering_fails((enum lane_seal_suite)suite);
	}
}

/* Every suite round-trips; a frame sealed under one opens under no other. */
static void test_suites(void **state)
{
	for (int a = 1; a <= LANE_SEAL_NSUITES; a++) {
		for (int b = 1; b <= LANE_SEAL_NSUITES; b++) {
			struct ends e;
			struct frame f[3];

			ends_init_suites(&e, (enum lane_seal_suite)a, (enum lane_seal_suite)b, 1, 1,
					 true);
			for (uint8_t i = 0; i < 3; i++) {
				seal_one(&e.tx, &f[i], i);
			}
			for (uint8_t i = 0; i < 3; i++) {
				assert_int_equal(open_one(&e.rx, &f[i], i), a == b ? 0 : -EBADMSG);
			}
			ends_fini(&e);
		}
	}
	/* lane_seal_init is AES-256-GCM's: its frames open there. */
	{
		struct ends e;
		struct frame f;
		uint8_t sec[LANE_SEAL_SECRET_LEN];

		secret_fill(sec, 1);
		assert_int_equal(lane_seal_init(&e.tx, sec, 3, true, true), 0);
		assert_int_equal(
		    lane_seal_init_suite(&e.rx, LANE_SEAL_AES256_GCM, sec, 3, true, false), 0);
		seal_one(&e.tx, &f, 5);
		assert_int_equal(open_one(&e.rx, &f, 5), 0);
		ends_fini(&e);
	}
	assert_int_equal(
	    lane_seal_init_suite(&(struct lane_seal){ 0 }, 0, (uint8_t[32]){ 0 }, 0, true, true),
	    -EINVAL);
}

/* HKDF-SHA256 of secret with info = what || lane (BE16) || dir, as docs/SECURITY.md says. */
static void hkdf(const uint8_t secret[LANE_SEAL_SECRET_LEN], const char *what, unsigned lane,
		 char dir, uint8_t key[32])
{
	uint8_t info[64];
	size_t n = strlen(what);
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *k = EVP_KDF_CTX_new(kdf);
	OSSL_PARAM p[4];

	memcpy(info, what, n);
	info[n] = (uint8_t)(lane >> 8);
	info[n + 1] = (uint8_t)lane;
	info[n + 2] = (uint8_t)dir;
	p[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
	p[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)secret,
						 LANE_SEAL_SECRET_LEN);
	p[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, n + 3);
	p[3] = OSSL_PARAM_construct_end();
	assert_int_equal(EVP_KDF_derive(k, key, 32, p), 1);
	EVP_KDF_CTX_free(k);
	EVP_KDF_free(kdf);
}

/* One frame sealed by OpenSSL directly: cipher, key, nonce 00000007 || be64(count). */
static void evp_seal(const EVP_CIPHER *cipher, const uint8_t *key, uint64_t count,
		     const uint8_t hdr[32], const uint8_t plain[64], uint8_t out[64],
		     uint8_t tag[LANE_SEAL_TAG_LEN])
{
	uint8_t nonce[LANE_SEAL_NONCE_LEN] = { 0, 0, 0, 7 };
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int outl;

	for (int i = 0; i < 8; i++) {
		nonce[4 + i] = (uint8_t)(count >> (56 - 8 * i));
	}
	assert_int_equal(EVP_EncryptInit_ex(c, cipher, NULL, key, nonce), 1);
	assert_int_equal(EVP_EncryptUpdate(c, NULL, &outl, hdr, 32), 1);
	assert_int_equal(EVP_EncryptUpdate(c, out, &outl, plain, 64), 1);
	assert_int_equal(EVP_EncryptFinal_ex(c, out + outl, &outl), 1);
	assert_int_equal(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, 16, tag), 1);
	EVP_CIPHER_CTX_free(c);
}

/*
 * The frames of lane 3 from the connector are plain AEAD under the key HKDF
 * gives for info, the nonce 00000007 || the frame's count: the first three,
 * so that each frame's nonce is set anew (a cipher that kept the first
 * frame's would repeat it).
 */
static void known_answer(enum lane_seal_suite suite, const EVP_CIPHER *cipher, const char *info)
{
	uint8_t secret[LANE_SEAL_SECRET_LEN], key[32];
	uint8_t hdr[32] = { 1, 2, 3 }, plain[64], got[64], want[64];
	uint8_t tag[LANE_SEAL_TAG_LEN], want_tag[LANE_SEAL_TAG_LEN];
	struct lane_seal s;

	secret_fill(secret, 9);
	memset(plain, 'p', sizeof(plain));
	hkdf(secret, info, 3, 'c', key);
	assert_int_equal(lane_seal_init_suite(&s, suite, secret, 3, true, true), 0);
	for (uint64_t count = 0; count < 3; count++) {
		evp_seal(cipher, key, count, hdr, plain, want, want_tag);
		assert_int_equal(lane_seal_begin(&s, hdr, sizeof(hdr)), 0);
		assert_int_equal(lane_seal_update(&s, plain, got, sizeof(plain)), 0);
		assert_int_equal(lane_seal_end(&s, tag), 0);
		assert_memory_equal(got, want, sizeof(want));
		assert_memory_equal(tag, want_tag, sizeof(tag));
	}
	lane_seal_fini(&s);
}

static void test_known_answer(void **state)
{
	uint8_t secret[LANE_SEAL_SECRET_LEN], key[LANE_SEAL_KEY_LEN], want[32];

	/* AES-256-GCM keeps the info every older peer derives with. */
	secret_fill(secret, 9);
	assert_int_equal(lane_seal_derive(secret, 3, true, key), 0);
	hkdf(secret, "rdmacp lane key v1", 3, 'c', want);
	assert_memory_equal(key, want, sizeof(want));
	known_answer(LANE_SEAL_AES256_GCM, EVP_aes_256_gcm(), "rdmacp lane key v1");
	known_answer(LANE_SEAL_AES128_GCM, EVP_aes_128_gcm(), "rdmacp lane key v1 aes-128-gcm");
	known_answer(LANE_SEAL_CHACHA20_POLY1305, EVP_chacha20_poly1305(),
		     "rdmacp lane key v1 chacha20-poly1305");
}

/* Slots: AES-256-GCM is slot_seal_init's key; another suite's key is its own. */
static void test_slot_suites(void **state)
{
	uint8_t sec[LANE_SEAL_SECRET_LEN];
	struct ends e;
	struct frame f;

	secret_fill(sec, 4);
	assert_int_equal(slot_seal_init(&e.tx, sec, 2, true), 0);
	assert_int_equal(slot_seal_init_suite(&e.rx, LANE_SEAL_AES256_GCM, sec, 2, false), 0);
	seal_one(&e.tx, &f, 1);
	assert_int_equal(open_one(&e.rx, &f, 1), 0);
	ends_fini(&e);
	for (int suite = 2; suite <= LANE_SEAL_NSUITES; suite++) {
		assert_int_equal(slot_seal_init_suite(&e.tx, suite, sec, 2, true), 0);
		assert_int_equal(slot_seal_init_suite(&e.rx, suite, sec, 2, false), 0);
		seal_one(&e.tx, &f, 1);
		assert_int_equal(open_one(&e.rx, &f, 1), 0);
		lane_seal_fini(&e.rx);
		/* Not the tcp lane key of the same lane, nor the AES-256-GCM slot key. */
		assert_int_equal(slot_seal_init(&e.rx, sec, 2, false), 0);
		assert_int_equal(open_one(&e.rx, &f, 1), -EBADMSG);
		lane_seal_fini(&e.rx);
		ends_fini(&e);
	}
}

/* Names, titles and lanes bytes map one to one; anything else is refused. */
static void test_suite_names(void **state)
{
	enum lane_seal_suite got;

	for (int suite = 1; suite <= LANE_SEAL_NSUITES; suite++) {
		const char *name = lane_seal_suite_name(suite);
		uint8_t lanes = lane_seal_suite_lanes(suite);

		assert_non_null(name);
		assert_non_null(lane_seal_suite_title(suite));
		assert_int_equal(lane_seal_suite_parse(name, &got), 0);
		assert_int_equal(got, suite);
		assert_true(proto_lanes_sealed(lanes));
		assert_int_equal(lane_seal_lanes_suite(lanes), suite);
	}
	assert_int_equal(lane_seal_suite_lanes(LANE_SEAL_AES256_GCM), PROTO_LANES_SEALED);
	assert_string_equal(lane_seal_suite_name(LANE_SEAL_AES256_GCM), "aes-256-gcm");
	assert_string_equal(lane_seal_suite_name(LANE_SEAL_AES128_GCM), "aes-128-gcm");
	assert_string_equal(lane_seal_suite_name(LANE_SEAL_CHACHA20_POLY1305), "chacha20-poly1305");
	assert_null(lane_seal_suite_name(0));
	assert_null(lane_seal_suite_name(LANE_SEAL_NSUITES + 1));
	assert_int_equal(lane_seal_lanes_suite(0), 0);
	assert_int_equal(lane_seal_lanes_suite(PROTO_LANES_CLEAR), 0);
	assert_int_equal(lane_seal_lanes_suite(PROTO_LANES_MAX + 1), 0);
	assert_int_equal(lane_seal_suite_parse("AES-256-GCM", &got), -EINVAL);
	assert_int_equal(lane_seal_suite_parse("aes-256", &got), -EINVAL);
	assert_int_equal(lane_seal_suite_parse("", &got), -EINVAL);
}

/* The speed test rates every suite and picks one of them, the same every time it is asked. */
static void test_fastest(void **state)
{
	double rates[LANE_SEAL_NSUITES];
	enum lane_seal_suite f = lane_seal_suite_fastest();

	assert_in_range(f, 1, LANE_SEAL_NSUITES);
	assert_int_equal(lane_seal_suite_fastest(), f);
	lane_seal_suite_rates(rates);
	for (int i = 0; i < LANE_SEAL_NSUITES; i++) {
		assert_true(rates[i] > 0);
	}
	/* Another than AES-256-GCM only when it beat it by the margin. */
	if (f != LANE_SEAL_AES256_GCM) {
		assert_true(rates[f - 1] * 100 > rates[0] * (100 + LANE_SEAL_SUITE_MARGIN));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys_differ),	cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_tampering_fails), cmocka_unit_test(test_known_answer),
		cmocka_unit_test(test_suites),		cmocka_unit_test(test_slot_suites),
		cmocka_unit_test(test_suite_names),	cmocka_unit_test(test_fastest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
