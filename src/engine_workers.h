/* SPDX-License-Identifier: MIT */
/*
 * The per-byte work beside the loop (engine_workers.c): a worker job (a
 * chunk hashed, a held slot copied or opened, a job of the caller's own) on
 * the pool's worker queues (engine_jobs.h), and what the roles call when a
 * file's job is in its digest. Included by engine-internal.h, after the
 * engine's own types.
 */
#pragma once

/* A job of f's is in its digest: slot is the one it was queued with. */
typedef int (*hash_done_fn)(struct engine *e, struct efile *f, uint32_t slot);
/*
 * A job for the worker threads (engine_workers.c): what it reads and writes
 * is the thread's until it comes back to its done function on the loop
 * (hash_done_fn where done is NULL); f: the file whose stream it fed, if any.
 */
enum { WJOB_HASH, WJOB_COPY, WJOB_OPEN, WJOB_RUN, WJOB_SEAL, WJOB_DIGEST };
struct wjob;
typedef int (*wjob_done_fn)(struct engine *e, struct wjob *j, struct efile *f);
struct wjob {
	struct engine_job job; /* the pool's (engine_jobs.h) */
	uint8_t kind;
	bool slow; /* tests: ENGINE_FAULT_SLOW_HASH */
	bool flip; /* tests: the copy's first byte changed (ENGINE_FAULT_FLIP_BYTE) */
	/*
	 * copy, digest: the chunk's own digest into chash too; open: the same
	 * when its descriptor may name a tree file's chunk (tree_chunk); seal:
	 * the same instead of hash (engine_digest_in_seal). Once back: chash
	 * was made (open: and the tag checked).
	 */
	bool digest;
	/* Back with digest: chash was fed block by block in the job's pass (copy, open, seal). */
	bool fused;
	bool counted;		/* a job of a file's: in its hash_jobs (workers_queue) */
	uint8_t queue;		/* the worker it went to (its index) */
	struct file_hash *hash; /* hash, copy: the stream the bytes feed (f's thread), or NULL */
	const uint8_t *src;
	uint8_t *dst;	     /* copy, open: the private copy */
	uint32_t len;	     /* open: at most this much (the slot size) */
	uint32_t idx;	     /* the caller's: a held copy, a sender's chunk */
	uint32_t ring, lane; /* copy, open, seal: the ring slot (seal: its AAD's) and its lane */
	uint32_t fidx, id;   /* the file of hash (checked when it comes back) */
	uint64_t count;	     /* open, seal: the slot's count on its lane (its nonce) */
	uint32_t tree_chunk; /* open: the session's tree chunk size (engine_digest_may_fold) */
	int r;		     /* open, seal: 0, or why it did not open (seal) */
	uint8_t sealed[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN];
	struct proto_desc d; /* open: the slot's descriptor, opened */
	uint8_t chash[HASH_LEN];
	/* run: the job (after a good open too); its result in rc (and at, arg its own). */
	int (*run)(struct wjob *j);
	int rc;
	uint32_t at;
	uint64_t arg;
	wjob_done_fn done;
};
/*
 * j to the workers: f's thread when it feeds f's stream (j->hash), else the
 * next one round; counted in f's hash_jobs when f is not NULL.
 */
int workers_queue(struct engine *e, struct wjob *j, struct efile *f);
int hashers_start(struct engine *e, unsigned n, hash_done_fn done);
void hashers_stop(struct engine *e);
int hashers_queue(struct engine *e, struct efile *f, uint32_t slot, const uint8_t *buf,
		  uint32_t len);
/* Chunk idx's own digest, of buf[0, len), made on the next worker; done takes chash. */
int workers_digest(struct engine *e, uint32_t idx, const uint8_t *buf, uint32_t len,
		   wjob_done_fn done);
int rx_hashed(struct engine *e, struct efile *f, uint32_t slot);
int tx_hashed(struct engine *e, struct efile *f, uint32_t ci);
/* Sender: chunk ci let go by its worker (freed if sent); f's FILE_DONE once its jobs are back. */
void tx_chunk_unhold(struct engine *e, uint32_t ci);
int tx_jobs_back(struct engine *e, struct efile *f);
/* Sender: chunk ci's own digest, made in its seal job, folded into f's tree in file order. */
void tx_seal_digested(struct engine *e, struct efile *f, uint32_t ci,
		      const uint8_t chash[HASH_LEN]);
void lane_chunk_sent(struct engine *e, uint32_t ci);
/*
 * Sender: a slot sealed with s at count (and fed to hash first, block by
 * block): thread-safe (engine_lane.c; the seal feature's jobs, WJOB_SEAL:
 * sealed holds the descriptor, dst the payload, len its bytes).
 */
int slot_seal_at(struct lane_seal *s, uint32_t aad_slot, uint64_t count,
		 uint8_t stage[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN], uint8_t *buf, uint32_t len,
		 struct file_hash *hash);
