/* SPDX-License-Identifier: MIT */
/*
 * Lane sealing: keys differ per session secret, lane and direction; a frame
 * opens only with its own key, nonce count and header, and a changed
 * ciphertext, tag, header or count (replay, reordering, a dropped frame)
 * fails with -EBADMSG. Known-answer check against OpenSSL's AES-256-GCM.
 */
#include "testutil.h"

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

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

static void test_tampering_fails(void **state)
{
	enum { FLIP_DATA, FLIP_TAG, FLIP_HDR, REPLAY, SKIP, WRONG_DIR, WRONG_SECRET };

	for (int kind = FLIP_DATA; kind <= WRONG_SECRET; kind++) {
		struct ends e;
		struct frame f[2];

		ends_init(&e, 1, kind == WRONG_SECRET ? 2 : 1, kind != WRONG_DIR);
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

/* The first frame of lane 3 from the connector is plain AES-256-GCM with nonce 00000007 || 0. */
static void test_known_answer(void **state)
{
	uint8_t secret[LANE_SEAL_SECRET_LEN], key[LANE_SEAL_KEY_LEN];
	uint8_t nonce[LANE_SEAL_NONCE_LEN] = { 0, 0, 0, 7 };
	uint8_t hdr[32] = { 1, 2, 3 }, plain[64], got[64], want[64];
	uint8_t tag[LANE_SEAL_TAG_LEN], want_tag[LANE_SEAL_TAG_LEN];
	struct lane_seal s;
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int outl;

	secret_fill(secret, 9);
	memset(plain, 'p', sizeof(plain));
	assert_int_equal(lane_seal_derive(secret, 3, true, key), 0);
	assert_int_equal(EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, nonce), 1);
	assert_int_equal(EVP_EncryptUpdate(c, NULL, &outl, hdr, sizeof(hdr)), 1);
	assert_int_equal(EVP_EncryptUpdate(c, want, &outl, plain, sizeof(plain)), 1);
	assert_int_equal(EVP_EncryptFinal_ex(c, want + outl, &outl), 1);
	assert_int_equal(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, want_tag), 1);
	EVP_CIPHER_CTX_free(c);

	assert_int_equal(lane_seal_init(&s, secret, 3, true, true), 0);
	assert_int_equal(lane_seal_begin(&s, hdr, sizeof(hdr)), 0);
	assert_int_equal(lane_seal_update(&s, plain, got, sizeof(plain)), 0);
	assert_int_equal(lane_seal_end(&s, tag), 0);
	assert_memory_equal(got, want, sizeof(want));
	assert_memory_equal(tag, want_tag, sizeof(tag));
	lane_seal_fini(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys_differ),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_tampering_fails),
		cmocka_unit_test(test_known_answer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
