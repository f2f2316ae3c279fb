/* SPDX-License-Identifier: MIT */
/*
 * Per-file XXH3-128 over libxxhash's streaming API, or in one call for a file
 * hashed whole (a packed one: no 576-byte state per file). The digest is exposed in
 * canonical (big-endian) byte order so that both ends compare the same bytes
 * whatever their endianness.
 */
#include "hash.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#ifdef HAVE_XXH_DISPATCH
#include <xxh_x86dispatch.h>
/* The same XXH3, with the widest vector unit this CPU has (chosen once, at run time). */
#define hash_update_impl XXH3_128bits_update_dispatch
#define hash_once_impl	 XXH3_128bits_dispatch
#else
#define hash_update_impl XXH3_128bits_update
#define hash_once_impl	 XXH3_128bits
#endif

static void canonical(XXH128_hash_t v, uint8_t out[HASH_LEN])
{
	XXH128_canonical_t canon;

	static_assert(sizeof(canon.digest) == HASH_LEN, "XXH128 canonical size");
	XXH128_canonicalFromHash(&canon, v);
	for (size_t i = 0; i < HASH_LEN; i++) {
		out[i] = canon.digest[i];
	}
}

int file_hash_init(struct file_hash *h)
{
	XXH3_state_t *state;

	assert(h);
	state = XXH3_createState();
	if (!state) {
		return -ENOMEM;
	}
	if (XXH3_128bits_reset(state) != XXH_OK) {
		XXH3_freeState(state);
		return -EINVAL;
	}
	h->state = state;
	h->whole = false;
	return 0;
}

void file_hash_whole(struct file_hash *h, const void *buf, size_t len)
{
	assert(h && !h->state && !h->whole);
	canonical(hash_once_impl(buf, len), h->digest);
	h->whole = true;
}

void file_hash_update(struct file_hash *h, const void *buf, size_t len)
{
	assert(h && h->state);
	if (len == 0) {
		return;
	}
	/* Only fails on a NULL state/buffer, which the asserts rule out. */
	XXH_errorcode r = hash_update_impl(h->state, buf, len);
	assert(r == XXH_OK);
	(void)r;
}

void file_hash_final(struct file_hash *h, uint8_t out[HASH_LEN])
{
	assert(h);
	if (h->whole) {
		memcpy(out, h->digest, HASH_LEN);
	} else if (h->state) {
		canonical(XXH3_128bits_digest(h->state), out);
	} else {
		canonical(hash_once_impl(NULL, 0), out); /* nothing hashed: an empty file's */
	}
}

void file_hash_free(struct file_hash *h)
{
	if (h && h->state) {
		XXH3_freeState(h->state);
		h->state = NULL;
	}
}

void hash_to_hex(const uint8_t h[HASH_LEN], char out[2 * HASH_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < HASH_LEN; i++) {
		out[2 * i] = digits[h[i] >> 4];
		out[2 * i + 1] = digits[h[i] & 0xf];
	}
	out[2 * HASH_LEN] = '\0';
}
