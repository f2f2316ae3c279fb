/* SPDX-License-Identifier: MIT */
/* AEAD sealing of lane frames and slots, one EVP context per direction (see lane_seal.h). */
#include "lane_seal.h"

#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include "macro.h"
#include "proto/msg.h"
#include "tls.h"

/* A v2 context: the purpose byte, then the token. */
#define LANE_SEAL_MAX_TOKEN 64

int lane_seal_export(struct tls_conn *tls, uint64_t both_caps, enum lane_seal_purpose purpose,
		     const uint8_t *token, size_t tokenlen, unsigned *nsealed,
		     uint8_t ret_secret[LANE_SEAL_SECRET_LEN])
{
	uint8_t context[1 + LANE_SEAL_MAX_TOKEN], secret[LANE_SEAL_SECRET_LEN];
	int r;

	if (purpose < LANE_SEAL_PUSH || purpose > LANE_SEAL_BENCH || !token || tokenlen == 0 ||
	    tokenlen > LANE_SEAL_MAX_TOKEN || *nsealed == UINT_MAX) {
		return -EINVAL;
	}
	if (both_caps & PROTO_CAP_TRANSFER_KEYS) {
		context[0] = (uint8_t)purpose;
		memcpy(context + 1, token, tokenlen);
		r = tls_export_secret_ctx(tls, LANE_SEAL_EXPORT_LABEL_V2, context, 1 + tokenlen,
					  secret, sizeof(secret));
		OPENSSL_cleanse(context, sizeof(context));
	} else if (*nsealed > 0) {
		/* v1 again would be the first transfer's keys and nonces again. */
		return -EKEYREJECTED;
	} else {
		r = tls_export_secret(tls, LANE_SEAL_EXPORT_LABEL, secret, sizeof(secret));
	}
	if (r < 0) {
		return r;
	}
	(*nsealed)++;
	memcpy(ret_secret, secret, sizeof(secret));
	OPENSSL_cleanse(secret, sizeof(secret));
	return 0;
}

/* HKDF-SHA256 of the secret; info = what, the lane (u16 BE) and a direction letter. */
static int derive(const uint8_t secret[LANE_SEAL_SECRET_LEN], const char *what, unsigned lane,
		  char dir, uint8_t ret_key[LANE_SEAL_KEY_LEN])
{
	size_t wlen = strlen(what);
	uint8_t info[64];
	uint16_t be_lane = htobe16((uint16_t)lane);
	EVP_KDF *kdf;
	EVP_KDF_CTX *kctx;
	OSSL_PARAM params[4];
	int ok;

	if (wlen + 3 > sizeof(info)) {
		return -EINVAL;
	}
	memcpy(info, what, wlen);
	memcpy(info + wlen, &be_lane, sizeof(be_lane));
	info[wlen + 2] = (uint8_t)dir;
	kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	if (!kdf) {
		return -EIO;
	}
	kctx = EVP_KDF_CTX_new(kdf);
	EVP_KDF_free(kdf);
	if (!kctx) {
		return -EIO;
	}
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)secret,
						      LANE_SEAL_SECRET_LEN);
	params[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, wlen + 3);
	params[3] = OSSL_PARAM_construct_end();
	ok = EVP_KDF_derive(kctx, ret_key, LANE_SEAL_KEY_LEN, params);
	EVP_KDF_CTX_free(kctx);
	return ok == 1 ? 0 : -EIO;
}

int lane_seal_derive(const uint8_t secret[LANE_SEAL_SECRET_LEN], unsigned lane, bool from_connector,
		     uint8_t ret_key[LANE_SEAL_KEY_LEN])
{
	return derive(secret, "rdmacp lane key v1", lane, from_connector ? 'c' : 'a', ret_key);
}

/* ---- suites: names, OPEN_OK lanes bytes ---- */

static const struct {
	const char *name;  /* config, --json */
	const char *title; /* logs, -v */
	uint8_t lanes;	   /* enum proto_lanes */
} suites[LANE_SEAL_NSUITES] = {
	[LANE_SEAL_AES256_GCM - 1] = { "aes-256-gcm", "AES-256-GCM", PROTO_LANES_SEALED },
	[LANE_SEAL_AES128_GCM - 1] = { "aes-128-gcm", "AES-128-GCM", PROTO_LANES_SEALED_AES128 },
	[LANE_SEAL_CHACHA20_POLY1305 - 1] = { "chacha20-poly1305", "ChaCha20-Poly1305",
					      PROTO_LANES_SEALED_CHACHA },
};

static bool suite_ok(enum lane_seal_suite suite)
{
	return suite >= 1 && suite <= LANE_SEAL_NSUITES;
}

const char *lane_seal_suite_name(enum lane_seal_suite suite)
{
	return suite_ok(suite) ? suites[suite - 1].name : NULL;
}

const char *lane_seal_suite_title(enum lane_seal_suite suite)
{
	return suite_ok(suite) ? suites[suite - 1].title : NULL;
}

int lane_seal_suite_parse(const char *name, enum lane_seal_suite *ret_suite)
{
	for (unsigned i = 0; i < LANE_SEAL_NSUITES; i++) {
		if (!strcmp(name, suites[i].name)) {
			*ret_suite = (enum lane_seal_suite)(i + 1);
			return 0;
		}
	}
	return -EINVAL;
}

uint8_t lane_seal_suite_lanes(enum lane_seal_suite suite)
{
	return suite_ok(suite) ? suites[suite - 1].lanes : PROTO_LANES_CLEAR;
}

enum lane_seal_suite lane_seal_lanes_suite(uint8_t lanes)
{
	for (unsigned i = 0; i < LANE_SEAL_NSUITES; i++) {
		if (suites[i].lanes == lanes) {
			return (enum lane_seal_suite)(i + 1);
		}
	}
	return 0;
}

/* ---- keys and cipher contexts ---- */

/* The EVP cipher of a suite and its key length; NULL for no suite. */
static const EVP_CIPHER *suite_cipher(enum lane_seal_suite suite, size_t *ret_keylen)
{
	switch (suite) {
	case LANE_SEAL_AES256_GCM:
		*ret_keylen = 32;
		return EVP_aes_256_gcm();
	case LANE_SEAL_AES128_GCM:
		*ret_keylen = 16;
		return EVP_aes_128_gcm();
	case LANE_SEAL_CHACHA20_POLY1305:
		*ret_keylen = 32;
		return EVP_chacha20_poly1305();
	}
	return NULL;
}

/* The cipher context for key, nonces from prefix; the key is wiped. */
static int seal_init(struct lane_seal *s, enum lane_seal_suite suite,
		     uint8_t key[LANE_SEAL_KEY_LEN], uint32_t prefix, bool encrypt)
{
	size_t keylen = 0;
	const EVP_CIPHER *cipher = suite_cipher(suite, &keylen);
	EVP_CIPHER_CTX *ctx;
	int ok;

	*s = (struct lane_seal){ .prefix = prefix, .encrypt = encrypt };
	ctx = cipher ? EVP_CIPHER_CTX_new() : NULL;
	if (!ctx) {
		OPENSSL_cleanse(key, LANE_SEAL_KEY_LEN);
		return cipher ? -ENOMEM : -EINVAL;
	}
	/* The key schedule once; each frame only sets its nonce. */
	ok = encrypt ? EVP_EncryptInit_ex(ctx, cipher, NULL, NULL, NULL)
		     : EVP_DecryptInit_ex(ctx, cipher, NULL, NULL, NULL);
	if (ok == 1 && EVP_CIPHER_CTX_get_key_length(ctx) != (int)keylen) {
		ok = 0;
	}
	if (ok == 1) {
		ok = encrypt ? EVP_EncryptInit_ex(ctx, NULL, NULL, key, NULL)
			     : EVP_DecryptInit_ex(ctx, NULL, NULL, key, NULL);
	}
	OPENSSL_cleanse(key, LANE_SEAL_KEY_LEN);
	if (ok != 1) {
		EVP_CIPHER_CTX_free(ctx);
		return -EIO;
	}
	s->ctx = ctx;
	return 0;
}

/*
 * A key of suite: AES-256-GCM's info is the one every peer has always used
 * (what), each other suite's names it too, so keys never cross suites.
 */
static int derive_suite(const uint8_t secret[LANE_SEAL_SECRET_LEN], const char *what,
			enum lane_seal_suite suite, unsigned lane, char dir,
			uint8_t ret_key[LANE_SEAL_KEY_LEN])
{
	const char *name = lane_seal_suite_name(suite);
	char info[48];

	if (!name) {
		return -EINVAL;
	}
	if (suite == LANE_SEAL_AES256_GCM) {
		return derive(secret, what, lane, dir, ret_key);
	}
	if ((size_t)snprintf(info, sizeof(info), "%s %s", what, name) >= sizeof(info)) {
		return -EINVAL;
	}
	return derive(secret, info, lane, dir, ret_key);
}

int lane_seal_init_suite(struct lane_seal *s, enum lane_seal_suite suite,
			 const uint8_t secret[LANE_SEAL_SECRET_LEN], unsigned lane,
			 bool from_connector, bool encrypt)
{
	uint8_t key[LANE_SEAL_KEY_LEN];
	int r = derive_suite(secret, "rdmacp lane key v1", suite, lane, from_connector ? 'c' : 'a',
			     key);

	if (r < 0) {
		*s = (struct lane_seal){ 0 };
		return r;
	}
	return seal_init(s, suite, key, (uint32_t)lane << 1 | (from_connector ? 1u : 0u), encrypt);
}

int lane_seal_init(struct lane_seal *s, const uint8_t secret[LANE_SEAL_SECRET_LEN], unsigned lane,
		   bool from_connector, bool encrypt)
{
	return lane_seal_init_suite(s, LANE_SEAL_AES256_GCM, secret, lane, from_connector, encrypt);
}

int slot_seal_init_suite(struct lane_seal *s, enum lane_seal_suite suite,
			 const uint8_t secret[LANE_SEAL_SECRET_LEN], unsigned lane, bool encrypt)
{
	uint8_t key[LANE_SEAL_KEY_LEN];
	int r = derive_suite(secret, "rdmacp slot key v1", suite, lane, 's', key);

	if (r < 0) {
		*s = (struct lane_seal){ 0 };
		return r;
	}
	return seal_init(s, suite, key, (uint32_t)lane << 1, encrypt);
}

int slot_seal_init(struct lane_seal *s, const uint8_t secret[LANE_SEAL_SECRET_LEN], unsigned lane,
		   bool encrypt)
{
	return slot_seal_init_suite(s, LANE_SEAL_AES256_GCM, secret, lane, encrypt);
}

void lane_seal_fini(struct lane_seal *s)
{
	EVP_CIPHER_CTX_free(s->ctx); /* cleanses the key schedule */
	s->ctx = NULL;
}

int lane_seal_begin(struct lane_seal *s, const uint8_t *aad, size_t aadlen)
{
	uint8_t nonce[LANE_SEAL_NONCE_LEN];
	uint32_t be_prefix = htobe32(s->prefix);
	uint64_t be_count;
	int outl, ok;

	/* 2^64 frames on one lane never happen; wrapping would reuse a nonce. */
	if (s->count == UINT64_MAX || aadlen > INT_MAX) {
		return -EOVERFLOW;
	}
	be_count = htobe64(s->count++);
	memcpy(nonce, &be_prefix, sizeof(be_prefix));
	memcpy(nonce + sizeof(be_prefix), &be_count, sizeof(be_count));
	ok = s->encrypt ? EVP_EncryptInit_ex(s->ctx, NULL, NULL, NULL, nonce)
			: EVP_DecryptInit_ex(s->ctx, NULL, NULL, NULL, nonce);
	if (ok == 1 && aadlen > 0) {
		ok = s->encrypt ? EVP_EncryptUpdate(s->ctx, NULL, &outl, aad, (int)aadlen)
				: EVP_DecryptUpdate(s->ctx, NULL, &outl, aad, (int)aadlen);
	}
	return ok == 1 ? 0 : -EIO;
}

int lane_seal_update(struct lane_seal *s, const uint8_t *in, uint8_t *out, size_t len)
{
	while (len > 0) {
		int n = (int)MIN(len, (size_t)1 << 30);
		int outl, ok;

		ok = s->encrypt ? EVP_EncryptUpdate(s->ctx, out, &outl, in, n)
				: EVP_DecryptUpdate(s->ctx, out, &outl, in, n);
		/* GCM is a stream mode: every byte in comes out at once. */
		if (ok != 1 || outl != n) {
			return -EIO;
		}
		in += n;
		out += n;
		len -= (size_t)n;
	}
	return 0;
}

int lane_seal_end(struct lane_seal *s, uint8_t tag[LANE_SEAL_TAG_LEN])
{
	uint8_t none[16];
	int outl;

	if (s->encrypt) {
		if (EVP_EncryptFinal_ex(s->ctx, none, &outl) != 1 ||
		    EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_GET_TAG, LANE_SEAL_TAG_LEN, tag) !=
			1) {
			return -EIO;
		}
		return 0;
	}
	if (EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_SET_TAG, LANE_SEAL_TAG_LEN, tag) != 1) {
		return -EIO;
	}
	/* OpenSSL compares the tag in constant time. */
	return EVP_DecryptFinal_ex(s->ctx, none, &outl) == 1 ? 0 : -EBADMSG;
}
