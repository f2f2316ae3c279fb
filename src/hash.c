/* SPDX-License-Identifier: MIT */
/*
 * Per-file XXH3-128 over libxxhash's streaming API (of the bytes, or of a
 * chunk tree's chunk digests), or in one call for a file hashed whole (a packed one: no 576-byte state per file). The digest is exposed in
 * canonical (big-endian) byte order so that both ends compare the same bytes
 * whatever their endianness.
 */
#include "hash.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "macro.h"
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
	return file_hash_init_tree(h, 0);
}

int file_hash_init_tree(struct file_hash *h, uint32_t chunk)
{
	XXH3_state_t *state, *leaf = NULL;

	assert(h);
	state = XXH3_createState();
	if (chunk > 0) {
		leaf = XXH3_createState();
	}
	if (!state || (chunk > 0 && !leaf)) {
		XXH3_freeState(state);
		XXH3_freeState(leaf);
		return -ENOMEM;
	}
	if (XXH3_128bits_reset(state) != XXH_OK) {
		XXH3_freeState(state);
		XXH3_freeState(leaf);
		return -EINVAL;
	}
	h->state = state;
	h->leaf = leaf;
	h->chunk = chunk;
	h->fill = 0;
	h->whole = false;
	return 0;
}

int file_hash_copy(struct file_hash *dst, const struct file_hash *src)
{
	assert(src->state);
	*dst = *src;
	dst->state = XXH3_createState();
	dst->leaf = src->leaf ? XXH3_createState() : NULL;
	if (!dst->state || (src->leaf && !dst->leaf)) {
		file_hash_free(dst);
		return -ENOMEM;
	}
	XXH3_copyState(dst->state, src->state);
	if (src->leaf) {
		XXH3_copyState(dst->leaf, src->leaf);
	}
	return 0;
}

void file_hash_whole(struct file_hash *h, const void *buf, size_t len)
{
	assert(h && !h->state && !h->whole);
	canonical(hash_once_impl(buf, len), h->digest);
	h->whole = true;
}

/* A tree: one chunk's digest (raw) into the digest of the chunks' digests. */
static void tree_fold(struct file_hash *h, XXH128_hash_t d)
{
	uint8_t c[HASH_LEN];
	XXH_errorcode r;

	canonical(d, c);
	r = hash_update_impl(h->state, c, HASH_LEN);
	assert(r == XXH_OK);
	(void)r;
}

/* A tree: bytes cut into its chunks, whole ones hashed in one call. */
static void tree_update(struct file_hash *h, const uint8_t *p, size_t len)
{
	while (len > 0) {
		size_t n;

		if (h->fill == 0 && len >= h->chunk) {
			tree_fold(h, hash_once_impl(p, h->chunk));
			p += h->chunk;
			len -= h->chunk;
			continue;
		}
		if (h->fill == 0) {
			XXH3_128bits_reset(h->leaf);
		}
		n = MIN(len, (size_t)(h->chunk - h->fill));
		hash_update_impl(h->leaf, p, n);
		h->fill += (uint32_t)n;
		p += n;
		len -= n;
		if (h->fill == h->chunk) {
			tree_fold(h, XXH3_128bits_digest(h->leaf));
			h->fill = 0;
		}
	}
}

void file_hash_update(struct file_hash *h, const void *buf, size_t len)
{
	assert(h && h->state);
	if (len == 0) {
		return;
	}
	if (h->chunk > 0) {
		tree_update(h, buf, len);
		return;
	}
	/* Only fails on a NULL state/buffer, which the asserts rule out. */
	XXH_errorcode r = hash_update_impl(h->state, buf, len);
	assert(r == XXH_OK);
	(void)r;
}

void hash_digest(const void *buf, size_t len, uint8_t out[HASH_LEN])
{
	canonical(hash_once_impl(buf, len), out);
}

void hash_state_update(XXH3_state_t *st, const void *buf, size_t len)
{
	XXH_errorcode r = hash_update_impl(st, buf, len);

	assert(r == XXH_OK);
	(void)r;
}

void file_hash_chunk(struct file_hash *h, const uint8_t d[HASH_LEN])
{
	XXH_errorcode r;

	assert(h && h->state && h->chunk > 0 && h->fill == 0);
	r = hash_update_impl(h->state, d, HASH_LEN);
	assert(r == XXH_OK);
	(void)r;
}

void file_hash_final(struct file_hash *h, uint8_t out[HASH_LEN])
{
	assert(h);
	if (h->whole) {
		memcpy(out, h->digest, HASH_LEN);
	} else if (h->state) {
		/* A tree's short last chunk: folded once (a second final gives the same). */
		if (h->chunk > 0 && h->fill > 0) {
			tree_fold(h, XXH3_128bits_digest(h->leaf));
			h->fill = 0;
		}
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
	if (h && h->leaf) {
		XXH3_freeState(h->leaf);
		h->leaf = NULL;
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
