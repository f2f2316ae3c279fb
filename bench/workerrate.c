/* SPDX-License-Identifier: MIT */
/*
 * bench/workerrate.c (built and run by bench/workerrate.sh): what one worker
 * thread (engine_workers.c) does per byte, on one core of this CPU, in GB/s:
 *   copy        memcpy of a slot into its private copy (the floor)
 *   copy+hash   the copy in 64 KiB blocks, each block into an XXH3-128 stream
 *               while in cache (a receiver's chunk next in file order)
 *   copy+hash2  the same plus the chunk's own digest (--partial, a tree)
 *   hash        the stream alone (a sender's chunk; a held copy hashed later)
 *   copy+open   slot_open_copy: a sealed slot's descriptor and payload copied
 *               and AES-256-GCM-opened block by block (the receiver, sealed)
 *   seal        the sender's seal of a slot in place (descriptor, payload, tag)
 *   hash,seal   a sender's chunk hashed, then sealed: two passes (the loop's
 *               before the seal moved to workers)
 *   hash+seal   slot_seal_at: hashed and sealed block by block in one pass
 *               (the sender's seal job on a worker, engine_seal.c; a tree
 *               chunk's own digest costs what the stream does)
 *   open,dig    copy+open, then the chunk's own digest over the copy: two
 *               passes (a tree chunk's open job before they were fused)
 *   open+dig    slot_open_desc, slot_open_payload: each block copied, opened
 *               and fed to the chunk's digest while in cache (the open job)
 * The slots are distinct buffers over more memory than the caches hold, as a
 * ring written by a NIC is: each pass reads DRAM. usage: workerrate [CHUNK_KIB]
 * [TOTAL_MIB] [SECONDS_PER_CASE].
 */
#include "engine-internal.h"

#include "lane_seal.h"

struct rate_ctx {
	uint8_t *ring, *copy;
	uint32_t chunk, nslots;
	struct lane_seal seal, open;
	uint8_t (*desc)[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN];
	uint64_t *count;
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void copy_hash(struct rate_ctx *c, uint32_t i, bool hash, bool digest)
{
	static struct file_hash h;
	const uint8_t *src = c->ring + (size_t)i * c->chunk;
	uint8_t *dst = c->copy + (size_t)(i % 4) * c->chunk;
	XXH3_state_t *cs = digest ? XXH3_createState() : NULL;

	if (hash && !h.state && file_hash_init(&h) < 0) {
		abort();
	}
	if (cs) {
		XXH3_128bits_reset(cs);
	}
	for (uint32_t at = 0; at < c->chunk; at += ENGINE_BLOCK) {
		uint32_t n = MIN(ENGINE_BLOCK, c->chunk - at);

		memcpy(dst + at, src + at, n);
		if (hash) {
			file_hash_update(&h, dst + at, n);
		}
		if (cs) {
			XXH3_128bits_update(cs, dst + at, n);
		}
	}
	if (cs) {
		(void)XXH3_128bits_digest(cs);
		XXH3_freeState(cs);
	}
}

static void hash_only(struct rate_ctx *c, uint32_t i)
{
	static struct file_hash h;

	if (!h.state && file_hash_init(&h) < 0) {
		abort();
	}
	file_hash_update(&h, c->ring + (size_t)i * c->chunk, c->chunk);
}

/* Slot i sealed as a sender seals it: the descriptor, then the payload, the tag behind. */
static void seal_slot(struct rate_ctx *c, uint32_t i)
{
	uint8_t aad[4];
	uint32_t be = htobe32(i);
	struct proto_desc d = { .file_id = 1, .len = c->chunk, .offset = (uint64_t)i * c->chunk };
	uint8_t *buf = c->ring + (size_t)i * c->chunk;

	memcpy(aad, &be, sizeof(be));
	proto_desc_encode(&d, c->desc[i]);
	c->count[i] = c->seal.count;
	if (lane_seal_begin(&c->seal, aad, sizeof(aad)) < 0 ||
	    lane_seal_update(&c->seal, c->desc[i], c->desc[i], PROTO_DESC_LEN) < 0 ||
	    lane_seal_update(&c->seal, buf, buf, c->chunk) < 0 ||
	    lane_seal_end(&c->seal, c->desc[i] + PROTO_DESC_LEN) < 0) {
		abort();
	}
}

/* A sender's chunk hashed and sealed: one pass (slot_seal_at), or a hash pass first. */
static void hash_seal(struct rate_ctx *c, uint32_t i, bool fused)
{
	static struct file_hash h;
	struct proto_desc d = { .file_id = 1, .len = c->chunk, .offset = (uint64_t)i * c->chunk };
	uint8_t *buf = c->ring + (size_t)i * c->chunk;

	if (!h.state && file_hash_init(&h) < 0) {
		abort();
	}
	if (!fused) {
		file_hash_update(&h, buf, c->chunk);
	}
	proto_desc_encode(&d, c->desc[i]);
	c->count[i] = c->seal.count;
	if (slot_seal_at(&c->seal, i, c->seal.count, c->desc[i], buf, c->chunk, fused ? &h : NULL) <
	    0) {
		abort();
	}
}

static void open_slot(struct rate_ctx *c, uint32_t i)
{
	struct proto_desc d;
	uint8_t sealed[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN];

	memcpy(sealed, c->desc[i], sizeof(sealed));
	if (slot_open_copy(&c->open, i, c->count[i], sealed, c->ring + (size_t)i * c->chunk,
			   c->copy + (size_t)(i % 4) * c->chunk, c->chunk, &d) < 0) {
		abort();
	}
}

/* A receiver's sealed tree chunk: opened, then digested; or digested as each block opens. */
static void open_digest(struct rate_ctx *c, uint32_t i, bool fused)
{
	struct proto_desc d;
	struct file_hash h = { 0 };
	uint8_t sealed[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN], out[HASH_LEN];
	uint8_t *dst = c->copy + (size_t)(i % 4) * c->chunk;

	memcpy(sealed, c->desc[i], sizeof(sealed));
	if ((fused && file_hash_init(&h) < 0) ||
	    slot_open_desc(&c->open, i, c->count[i], sealed, c->chunk, &d) < 0 ||
	    slot_open_payload(&c->open, c->ring + (size_t)i * c->chunk, dst, d.len,
			      sealed + PROTO_DESC_LEN, fused ? &h : NULL) < 0) {
		abort();
	}
	if (fused) {
		file_hash_final(&h, out);
	} else {
		hash_digest(dst, d.len, out);
	}
	file_hash_free(&h);
}

enum rate_case {
	R_COPY,
	R_COPY_HASH,
	R_COPY_HASH2,
	R_HASH,
	R_OPEN,
	R_SEAL,
	R_HASH_SEAL,
	R_FUSED,
	R_OPEN_DIG,
	R_OPEN_FUSED
};

static void one(struct rate_ctx *c, enum rate_case k, uint32_t i)
{
	switch (k) {
	case R_COPY:
		copy_hash(c, i, false, false);
		break;
	case R_COPY_HASH:
		copy_hash(c, i, true, false);
		break;
	case R_COPY_HASH2:
		copy_hash(c, i, true, true);
		break;
	case R_HASH:
		hash_only(c, i);
		break;
	case R_OPEN:
		open_slot(c, i);
		break;
	case R_SEAL:
		seal_slot(c, i);
		break;
	case R_HASH_SEAL:
	case R_FUSED:
		hash_seal(c, i, k == R_FUSED);
		break;
	case R_OPEN_DIG:
	case R_OPEN_FUSED:
		open_digest(c, i, k == R_OPEN_FUSED);
		break;
	}
}

/* GB/s of case k on this thread's CPU time, slots in turn for at least secs. */
static double rate(struct rate_ctx *c, enum rate_case k, double secs)
{
	double t0 = now_s(), t;
	uint64_t bytes = 0;
	uint32_t i = 0;

	do {
		if ((k == R_OPEN || k == R_OPEN_DIG || k == R_OPEN_FUSED) && i == 0) {
			/* Every slot sealed again under fresh counts (not timed). */
			double p = now_s();

			for (uint32_t s = 0; s < c->nslots; s++) {
				seal_slot(c, s);
			}
			t0 += now_s() - p;
		}
		one(c, k, i);
		bytes += c->chunk;
		i = (i + 1) % c->nslots;
		t = now_s();
	} while (t - t0 < secs || i != 0);
	return (double)bytes / (t - t0) / 1e9;
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "copy",	  "copy+hash", "copy+hash2", "hash",
					     "copy+open", "seal",      "hash,seal",  "hash+seal",
					     "open,dig",  "open+dig" };
	uint32_t chunk_kib = argc > 1 ? (uint32_t)atoi(argv[1]) : 1024;
	uint64_t total_mib = argc > 2 ? (uint64_t)atoi(argv[2]) : 512;
	double secs = argc > 3 ? atof(argv[3]) : 2.0;
	struct rate_ctx c = { .chunk = chunk_kib << 10 };
	uint8_t secret[LANE_SEAL_SECRET_LEN];

	c.nslots = (uint32_t)((total_mib << 20) / c.chunk);
	c.ring = malloc((size_t)c.nslots * c.chunk);
	c.copy = malloc((size_t)4 * c.chunk);
	c.desc = calloc(c.nslots, sizeof(*c.desc));
	c.count = calloc(c.nslots, sizeof(*c.count));
	memset(secret, 0x5a, sizeof(secret));
	if (!c.ring || !c.copy || !c.desc || !c.count || c.nslots < 8 ||
	    slot_seal_init(&c.seal, secret, 0, true) < 0 ||
	    slot_seal_init(&c.open, secret, 0, false) < 0) {
		fprintf(stderr, "workerrate: cannot set up\n");
		return 1;
	}
	for (size_t i = 0; i < (size_t)c.nslots * c.chunk; i++) {
		c.ring[i] = (uint8_t)(i * 131 + (i >> 12));
	}
	memset(c.copy, 0, (size_t)4 * c.chunk);
	printf("one thread, slots of %u KiB over %llu MiB, %.1f s of CPU a case\n", chunk_kib,
	       (unsigned long long)total_mib, secs);
	for (enum rate_case k = R_COPY; k <= R_OPEN_FUSED; k++) {
		printf("%-11s %6.2f GB/s per core\n", names[k], rate(&c, k, secs));
	}
	lane_seal_fini(&c.seal);
	lane_seal_fini(&c.open);
	return 0;
}
