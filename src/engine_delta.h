/* SPDX-License-Identifier: MIT */
/*
 * What the --delta files (src/engine_delta.c, src/engine_delta_tree.c)
 * share with the zero ranges of a device (engine_zeros.c): the chunk
 * digest, the chunk count and the bit maps of chunks.
 */
#pragma once

#include "engine-internal.h"

/* A chunk's digest: the XXH3-128 of its bytes, canonical (the wire's order). */
static inline void delta_digest(const void *buf, size_t len, uint8_t out[HASH_LEN])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, len));
	memcpy(out, c.digest, HASH_LEN);
}

/*
 * Sender, --delta: a file's state. dsum, the receiver's chunk digests
 * (DELTA SUMS, ndsum of them); a tree file's: tst, the running digest
 * of the chunks' digests; mine, the digests of chunks 0 .. prehashed - 1
 * made by the pre-pass (through pfd) while it waited for the FILES_ACK.
 */
struct delta_file {
	/*
	 * Sender: how many of the receiver's chunk digests it has (dsum);
	 * receiver: how many it sent. Both: skipped, the bytes not sent
	 * because they were unchanged (SAME).
	 */
	uint64_t ndsum;
	uint64_t skipped;
	uint8_t (*dsum)[HASH_LEN];
	XXH3_state_t *tst;
	uint8_t (*mine)[HASH_LEN];
	uint64_t prehashed;
	int pfd;
	/*
	 * Receiver: oldfd, the file under the destination name (a device
	 * target: the device), -1 none. A device target's dzero: bit i set,
	 * chunk i read as zeros (no write-zeroes needed). A tree file's rd:
	 * each chunk's digest as it will be (the digest pass's, then what
	 * arrived or was zeroed); rdisk bit i: chunk i is as the pass read it
	 * (nothing written there since).
	 */
	int oldfd;
	uint8_t *dzero;
	uint8_t (*rd)[HASH_LEN];
	uint8_t *rdisk;
};

extern const struct engine_feature engine_feature_delta;

/* f's: only a --delta session has it (NULL otherwise). */
static inline struct delta_file *delta_file(const struct engine *e, const struct efile *f)
{
	return engine_file_state(e, &engine_feature_delta, f);
}

/* A device target's map of chunks that read as zeros (NULL: none). */
static inline const uint8_t *delta_dzero(const struct engine *e, const struct efile *f)
{
	const struct delta_file *df = engine_file_state(e, &engine_feature_delta, f);

	return df ? df->dzero : NULL;
}

/* f's count of chunk digests (struct delta_file's ndsum): 0 outside --delta. */
static inline uint64_t delta_ndsum(const struct engine *e, const struct efile *f)
{
	const struct delta_file *df = delta_file(e, f);

	return df ? df->ndsum : 0;
}

/* How many chunks a file of size bytes has (the last one may be short). */
static inline uint64_t delta_chunks(const struct engine *e, uint64_t size)
{
	return size / e->p->chunk_size + (size % e->p->chunk_size != 0);
}

/* Maps of one bit a chunk: a device's chunks that read as zeros, a tree's read by the pass. */
static inline bool bit_get(const uint8_t *map, uint64_t i)
{
	return map[i / 8] >> (i % 8) & 1;
}

static inline void bit_set(uint8_t *map, uint64_t i, bool on)
{
	if (on) {
		map[i / 8] |= (uint8_t)(1u << (i % 8));
	} else {
		map[i / 8] &= (uint8_t) ~(1u << (i % 8));
	}
}
