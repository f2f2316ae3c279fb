/* SPDX-License-Identifier: MIT */
/*
 * Worker threads (engine_params.hash_threads): the per-byte work of the data
 * path made off the engine's thread, so that the loop does per-chunk work
 * only. A job is one of:
 *   - hash: a chunk into its file's XXH3-128 stream (the sender's chunks it
 *     posts; the receiver's held copies not hashed while copied);
 *   - copy: a held ring slot into its private copy (engine_rx_slots.c), in
 *     cache-sized blocks, each block hashed into its file's stream (when the
 *     chunk is next in file order) and into the chunk's own digest (--partial,
 *     --delta's tree) while it is in cache: one read of the slot, one write
 *     of the copy;
 *   - open: a sealed slot copied and opened (the session's AEAD suite) the
 *     same way, block by block, under a key of the worker's own (the lane's,
 *     at the count the loop gave the slot), its descriptor opened and decoded
 *     first, each opened block fed to a tree file's chunk's own digest
 *     (engine_digest_may_fold) while in cache, kept once the tag checks;
 *   - seal: a sender's chunk sealed in place block by block, each block fed
 *     first to its file's stream or to a tree file's chunk's own digest
 *     (engine_digest_in_seal);
 *   - digest: a chunk's own digest (a tree file's: the sender's clear chunk
 *     as it is read, the receiver's held slot without a copy), on any worker,
 *     the loop folding them into the file's tree in order (engine_digest_folds);
 *   - run: a function of the caller's on what the job names (rdmacp bench's
 *     check of a slot, after its open when sealed).
 * A file's stream is one digest in file order, so every job that feeds it
 * goes to the same thread (by file id), in the order the loop hands them
 * over; other jobs go round the threads. While a job is out the thread owns
 * what it names (the file's hash state, the slot, the copy); the receiver
 * does not finish a file, nor the sender send its FILE_DONE, before all of
 * its hash jobs have come back (efile.hash_jobs), and a held slot or copy is
 * not let go before its job has. Each thread is a queue of the engine's
 * worker pool (engine_jobs.h), which hands finished jobs back to the loop
 * in the order they finished, each to its done function.
 */
#include "engine-internal.h"

/*
 * A worker queue's local: its thread's own keys for sealed slots, one per
 * lane, to open (a receiver's) or to seal (a sender's).
 */
struct worker_keys {
	const struct engine_params *p; /* the session's secret and suite */
	struct lane_seal seal[XPORT_MAX_LANES];
	bool seal_ok[XPORT_MAX_LANES];
};

/* The thread's key of lane, made at its first use: encrypt for a sender's seals. */
static struct lane_seal *worker_key(struct worker_keys *w, unsigned lane, bool encrypt, int *r)
{
	struct lane_seal *s = &w->seal[lane];

	*r = 0;
	if (!w->seal_ok[lane]) {
		*r = slot_key_init(w->p, s, lane, encrypt);
		w->seal_ok[lane] = *r >= 0;
	}
	return s;
}

/* The workers: n queues of the pool (q0 on), one thread each. */
struct hashers {
	unsigned n, next, q0;
	hash_done_fn on_done; /* the role's: a hash job of f is in its digest */
};

/*
 * A chunk's own digest fed block by block in a job's one pass over its
 * bytes (its open or seal): a stream of its own in h, or NULL where there is
 * no memory for one (the job then makes the digest apart).
 */
static struct file_hash *chunk_digest_start(struct file_hash *h)
{
	*h = (struct file_hash){ 0 };
	return file_hash_init(h) >= 0 ? h : NULL;
}

/*
 * The slot's sealed descriptor, then its payload: copied block by block,
 * opened in place, a tree file's chunk (engine_digest_may_fold) fed to its
 * own digest as each block is opened. The digest is kept only once the tag
 * checks; it is thrown away with the bytes when it does not.
 */
static int job_open(struct worker_keys *w, struct wjob *j)
{
	struct file_hash ch = { 0 }, *hash = NULL;
	int r;
	struct lane_seal *s = worker_key(w, j->lane, false, &r);

	if (r < 0) {
		return r;
	}
	r = slot_open_desc(s, j->ring, j->count, j->sealed, j->len, &j->d);
	j->digest = r >= 0 && j->digest && engine_digest_may_fold(&j->d, j->tree_chunk);
	if (j->digest) {
		hash = chunk_digest_start(&ch);
	}
	if (r >= 0) {
		r = slot_open_payload(s, j->src, j->dst, j->d.len, j->sealed + PROTO_DESC_LEN,
				      hash);
	}
	j->digest = r >= 0 && j->digest;
	j->fused = j->digest && hash;
	if (j->fused) {
		file_hash_final(hash, j->chash);
	} else if (j->digest) {
		hash_digest(j->dst, j->d.len, j->chash); /* no memory for a state: apart */
	}
	file_hash_free(&ch);
	return r;
}

/*
 * A sender's chunk sealed in place in one pass, its descriptor too: each
 * block fed first, while clear and in cache, to its file's stream
 * (j->hash) or to the chunk's own digest (j->digest, a tree file's chunk:
 * engine_digest_in_seal).
 */
static int job_seal(struct worker_keys *w, struct wjob *j)
{
	struct file_hash ch = { 0 }, *hash = j->hash;
	int r;
	struct lane_seal *s = worker_key(w, j->lane, true, &r);

	if (r < 0) {
		return r;
	}
	assert(!(j->digest && j->hash));
	if (j->digest) {
		hash = chunk_digest_start(&ch);
		if (!hash) {
			/* No memory for a state: the digest apart, before the bytes are sealed. */
			hash_digest(j->dst, j->len, j->chash);
		}
	}
	r = slot_seal_at(s, j->ring, j->count, j->sealed, j->dst, j->len, hash);
	j->fused = j->digest && hash;
	if (j->fused) {
		file_hash_final(hash, j->chash);
	}
	file_hash_free(&ch);
	return r;
}

/* A copy job: src to dst in blocks, each one hashed (stream, chunk digest) while in cache. */
static void job_copy(struct wjob *j)
{
	XXH3_state_t *cs = j->digest ? XXH3_createState() : NULL;

	if (cs) {
		XXH3_128bits_reset(cs);
	}
	for (uint32_t at = 0; at < j->len; at += ENGINE_BLOCK) {
		uint32_t n = MIN(ENGINE_BLOCK, j->len - at);

		memcpy(j->dst + at, j->src + at, n);
		if (j->flip && at == 0) {
			j->dst[0] ^= 0xff; /* tests: a byte changed on the way */
		}
		if (j->hash) {
			file_hash_update(j->hash, j->dst + at, n);
		}
		if (cs) {
			hash_state_update(cs, j->dst + at, n);
		}
	}
	if (j->digest && cs) {
		XXH128_canonical_t c;

		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(cs));
		memcpy(j->chash, c.digest, HASH_LEN);
		j->fused = true;
	} else if (j->digest) {
		/* No memory for the state: the chunk's digest in a second pass. */
		hash_digest(j->dst, j->len, j->chash);
	}
	XXH3_freeState(cs);
}

static void job_run(struct engine_job *job, void *local)
{
	struct wjob *j = container_of(job, struct wjob, job);

	if (j->slow) {
		usleep(20000);
	}
	switch (j->kind) {
	case WJOB_HASH:
		file_hash_update(j->hash, j->src, j->len);
		break;
	case WJOB_COPY:
		job_copy(j);
		break;
	case WJOB_OPEN:
		j->r = job_open(local, j);
		if (j->r >= 0 && j->run) {
			j->rc = j->run(j);
		}
		break;
	case WJOB_RUN:
		j->rc = j->run(j);
		break;
	case WJOB_SEAL:
		j->r = job_seal(local, j);
		break;
	case WJOB_DIGEST:
		hash_digest(j->src, j->len, j->chash);
		break;
	}
}

/* One finished job to its owner: f's hash count first, then its done function. */
static int job_done(struct engine *e, struct engine_job *job)
{
	struct wjob *j = container_of(job, struct wjob, job);
	struct efile *f = NULL;
	int r;

	if (j->counted) {
		f = file_at(e, j->fidx);
		assert(f->used && f->id == j->id && f->hash_jobs > 0);
		f->hash_jobs--;
	}
	if (j->digest) {
		e->st.worker_digests++;
		e->st.worker_digest_mask |= 1u << j->queue;
		e->st.fused_digests += j->fused;
	}
	r = j->done ? j->done(e, j, f) : e->hashers->on_done(e, f, j->idx);
	free(j);
	return r;
}

/* Not answered (the session failed, or teardown): f's count of jobs out still drops. */
static void job_drop(struct engine *e, struct engine_job *job)
{
	struct wjob *j = container_of(job, struct wjob, job);

	if (j->counted) {
		file_at(e, j->fidx)->hash_jobs--;
	}
	free(j);
}

static const struct engine_job_ops wjob_ops = {
	.run = job_run,
	.done = job_done,
	.drop = job_drop,
};

static void worker_keys_free(void *local)
{
	struct worker_keys *w = local;

	if (!w) {
		return;
	}
	for (unsigned l = 0; l < XPORT_MAX_LANES; l++) {
		if (w->seal_ok[l]) {
			lane_seal_fini(&w->seal[l]);
		}
	}
	free(w);
}

/* Named, so that their CPU time can be told from the loop's (bench/). */
static const struct engine_jobq_ops worker_queue_ops = {
	.name = "rdmacp-worker",
	.local_free = worker_keys_free,
};

int hashers_start(struct engine *e, unsigned n, hash_done_fn done)
{
	struct hashers *hs;

	if (n == 0) {
		return 0;
	}
	hs = calloc(1, sizeof(*hs));
	if (!hs) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	*hs = (struct hashers){ .n = n, .on_done = done };
	for (unsigned i = 0; i < n; i++) {
		struct worker_keys *w = calloc(1, sizeof(*w));
		int q;

		if (w) {
			w->p = e->p;
		}
		q = w ? engine_jobs_queue(e, &worker_queue_ops, w) : -ENOMEM;
		if (q < 0) {
			free(hs);
			return engine_fail(e, PERR_INTERNAL, q, "cannot start a worker thread");
		}
		/* The pool's queues are numbered in order: the workers' follow each other. */
		if (i == 0) {
			hs->q0 = (unsigned)q;
		}
		assert((unsigned)q == hs->q0 + i);
	}
	e->hashers = hs;
	return 0;
}

unsigned engine_hash_threads(int setting, bool verbs)
{
	long cpus;

	if (setting >= 0) {
		return MIN((unsigned)setting, ENGINE_HASH_THREADS_MAX);
	}
	/*
	 * auto: on tcp the lanes' own threads copy every byte and the engine's
	 * thread waits on them anyway. On verbs the NIC moves the bytes and the
	 * workers do all the per-byte work (copies, opens, hashes): half the
	 * cores, the other half left to the loop, the disk and the peer side of
	 * the machine (at most ENGINE_HASH_THREADS_MAX).
	 */
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (!verbs || cpus < 2) {
		return 0;
	}
	return (unsigned)MIN(cpus / 2, ENGINE_HASH_THREADS_MAX);
}

/* Their queues stopped with the pool (teardown's first step): what is left is theirs. */
void hashers_stop(struct engine *e)
{
	free(e->hashers);
	e->hashers = NULL;
}

const struct engine_feature engine_feature_hashers = {
	.name = "hashers",
	.stop = hashers_stop,
};

/*
 * A job for the workers: f's thread when it feeds f's stream, else the next
 * one round. A job of f's (f not NULL) is counted in f->hash_jobs until it
 * is back, and its done function is given f.
 */
int workers_queue(struct engine *e, struct wjob *j, struct efile *f)
{
	struct hashers *hs = e->hashers;
	unsigned t = f && j->hash ? f->id % hs->n : hs->next++ % hs->n;

	j->slow = e->p->faults & ENGINE_FAULT_SLOW_HASH;
	j->job.ops = &wjob_ops;
	j->queue = (uint8_t)t;
	if (f) {
		j->fidx = file_index(e, f);
		j->id = f->id;
		j->counted = true;
		f->hash_jobs++;
	}
	engine_jobs_submit(e, hs->q0 + t, &j->job);
	return 0;
}

/* Slot or chunk `slot`, next in f's order, into f's hash on f's thread. */
int hashers_queue(struct engine *e, struct efile *f, uint32_t slot, const uint8_t *buf,
		  uint32_t len)
{
	struct wjob *j = calloc(1, sizeof(*j));

	if (!j) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	j->kind = WJOB_HASH;
	j->hash = &f->hash;
	j->src = buf;
	j->len = len;
	j->idx = slot;
	return workers_queue(e, j, f);
}

int workers_digest(struct engine *e, uint32_t idx, const uint8_t *buf, uint32_t len,
		   wjob_done_fn done)
{
	struct wjob *j = calloc(1, sizeof(*j));

	if (!j) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	*j = (struct wjob){ .kind = WJOB_DIGEST,
			    .digest = true,
			    .src = buf,
			    .len = len,
			    .idx = idx,
			    .done = done };
	return workers_queue(e, j, NULL);
}
