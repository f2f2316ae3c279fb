/* SPDX-License-Identifier: MIT */
/* Per-file XXH3-128 (libxxhash), streamed in file order. */
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
	XXH3_state_t *state;
	bool whole;
	uint8_t digest[HASH_LEN];
};

int file_hash_init(struct file_hash *h);
void file_hash_update(struct file_hash *h, const void *buf, size_t len);
/* The digest of the whole input, in one call, on a zeroed h: no state to allocate. */
void file_hash_whole(struct file_hash *h, const void *buf, size_t len);
/* Canonical big-endian bytes (as XXH128_canonicalFromHash). */
void file_hash_final(struct file_hash *h, uint8_t out[HASH_LEN]);
void file_hash_free(struct file_hash *h);
void hash_to_hex(const uint8_t h[HASH_LEN], char out[2 * HASH_LEN + 1]);
