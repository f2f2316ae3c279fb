/* SPDX-License-Identifier: MIT */
/*
 * Per-file XXH3-128 (libxxhash), streamed in file order: of the bytes, or
 * (a chunk tree) of the XXH3-128 of each chunk of the bytes, in order.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

#define HASH_LEN 16

/*
 * A streaming state (file_hash_init, then updates), or none: a file hashed
 * whole in one call (file_hash_whole) keeps just its digest, and a zeroed one
 * that was never fed gives the digest of empty input.
 */
struct file_hash {
	XXH3_state_t *state; /* the bytes', or a tree's: its chunks' digests' */
	bool whole;
	uint8_t digest[HASH_LEN];
	/*
	 * A chunk tree (chunk > 0): leaf holds the first fill bytes of the
	 * chunk being fed; each whole chunk's digest (canonical) goes into
	 * state, and a short last one's at file_hash_final.
	 */
	XXH3_state_t *leaf;
	uint32_t chunk, fill;
};

int file_hash_init(struct file_hash *h);
/*
 * A chunk tree of chunk bytes a chunk (0: the stream of the bytes, as
 * file_hash_init): the digest is the XXH3-128 of the canonical XXH3-128 of
 * each chunk of the bytes fed, in order, the last one short or none at all
 * (nothing fed: the digest of empty input, as a stream's).
 */
int file_hash_init_tree(struct file_hash *h, uint32_t chunk);
/* The bytes next in order (a tree: cut into its chunks here). */
void file_hash_update(struct file_hash *h, const void *buf, size_t len);
/*
 * A tree at a chunk's start: that whole chunk, by its digest d (made
 * elsewhere, the XXH3-128 of its bytes, canonical), next in order.
 */
void file_hash_chunk(struct file_hash *h, const uint8_t d[HASH_LEN]);
/*
 * One chunk's digest (canonical), in one call or block by block into a
 * state of the caller's: the same XXH3-128, with the CPU's widest vector
 * unit as file_hash_update's.
 */
void hash_digest(const void *buf, size_t len, uint8_t out[HASH_LEN]);
void hash_state_update(XXH3_state_t *st, const void *buf, size_t len);
/* A tree's chunk size, 0 for a stream (or a hash not started). */
static inline uint32_t file_hash_tree(const struct file_hash *h)
{
	return h->state ? h->chunk : 0;
}
/* dst (zeroed, or freed) a copy of started src, to go back to later: 0 or -ENOMEM. */
int file_hash_copy(struct file_hash *dst, const struct file_hash *src);
/* The digest of the whole input, in one call, on a zeroed h: no state to allocate. */
void file_hash_whole(struct file_hash *h, const void *buf, size_t len);
/* Canonical big-endian bytes (as XXH128_canonicalFromHash). */
void file_hash_final(struct file_hash *h, uint8_t out[HASH_LEN]);
void file_hash_free(struct file_hash *h);
void hash_to_hex(const uint8_t h[HASH_LEN], char out[2 * HASH_LEN + 1]);
