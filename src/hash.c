/* SPDX-License-Identifier: MIT */
/*
 * Per-file XXH3-128 over libxxhash's streaming API. The digest is exposed in
 * canonical (big-endian) byte order so that both ends compare the same bytes
 * whatever their endianness.
 */
#include "hash.h"

#include <assert.h>
#include <errno.h>
#ifdef HAVE_XXH_DISPATCH
#include <xxh_x86dispatch.h>
/* The same XXH3, with the widest vector unit this CPU has (chosen once, at run time). */
#define hash_update_impl XXH3_128bits_update_dispatch
#else
#define hash_update_impl XXH3_128bits_update
#endif

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
	return 0;
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
	XXH128_canonical_t canon;

	assert(h && h->state);
	static_assert(sizeof(canon.digest) == HASH_LEN, "XXH128 canonical size");
	XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(h->state));
	for (size_t i = 0; i < HASH_LEN; i++) {
		out[i] = canon.digest[i];
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
