/* SPDX-License-Identifier: MIT */
/*
 * The skip level checksum: digests made off the engine's loop. Each side
 * hashes its own file (the receiver the one at the destination name, the
 * sender its source) on a queue of its own in the engine's worker pool
 * (engine_jobs.h: one thread, with its own io_uring, filehash.c), so a big
 * file never stalls the loop nor waits behind chunk hashes, and the two
 * sides hash at the same time. The loop queues a job with an fd it opened;
 * the worker hashes and closes the fd; back on the loop, each result goes
 * to the done function the job was queued with (the role's, or a
 * device's read back), once it has checked the file is still the one the
 * job was for. The same worker writes a device's zero
 * ranges (blk_zero_range: a write-zeroes of a large range can take long),
 * in the order they were queued; the file's commit waits for them.
 */
#include "engine_rx.h"

#include "filehash.h"

struct sum_job {
	struct engine_job job;
	uint32_t fidx, id;
	int fd;
	uint64_t size;
	int r;
	uint8_t hash[HASH_LEN];
	sum_done_fn done;      /* a digest's: who takes it */
	zero_done_fn zdone;    /* a zero range's */
	tree_verify_fn verify; /* a tree's read back: what reads it */
	/* A zero range [off, off + size) of a device, not a digest; slow: the test hook. */
	bool zeros, slow;
	uint64_t off;
	/* A tree's read back, a digest of a chunk tree: its chunk size; the former's rd, rdisk. */
	uint32_t cs;
	uint8_t (*rd)[HASH_LEN];
	uint8_t *rdisk;
};

/*
 * A receiver's file's block with the skip level checksum: wanted, it waits
 * for the digests (SUM_WANTED, sums_wanted); the two its answer waits for,
 * its own and the peer's, each once.
 */
struct sums_file {
	bool wanted;
	bool own_done, peer_done;
	uint32_t own_status, peer_status; /* PERR_OK: the digest is good */
	uint8_t own[HASH_LEN], peer[HASH_LEN];
};

extern const struct engine_feature engine_feature_sums;

/* The sums queue's thread's own: its file hasher (fr < 0: none, and why). */
struct sums_local {
	struct filehasher *fh;
	int fr;
};

static void sum_job_free(struct sum_job *j)
{
	free(j->rd);
	free(j->rdisk);
	free(j);
}

static int sum_job_hash(struct filehasher *fh, int fr, struct sum_job *j)
{
	if (j->slow) {
		sleep(4);
	}
	if (j->verify) {
		return j->verify(j->fd, j->size, j->cs, j->rd, j->rdisk, j->hash);
	}
	if (!j->zeros) {
		return fr < 0 ? fr : filehasher_fd_tree(fh, j->fd, j->size, j->cs, j->hash);
	}
	return sparse_zero_range(j->fd, j->off, j->size, SPARSE_KEEP_SIZE);
}

static void sum_job_run(struct engine_job *job, void *local)
{
	struct sum_job *j = container_of(job, struct sum_job, job);
	struct sums_local *l = local;

	j->r = sum_job_hash(l->fh, l->fr, j);
	close(j->fd);
	j->fd = -1;
}

/* A job's answer on the loop: for its file, if that is still the one it was for. */
static int sum_job_done(struct engine *e, struct engine_job *job)
{
	struct sum_job *j = container_of(job, struct sum_job, job);
	struct efile *f = file_at(e, j->fidx);
	int r = 0;

	e->sums_inflight--;
	/* A file failed or released meanwhile has no use for it. */
	if (f->used && f->id == j->id && j->zeros) {
		r = j->zdone(e, f, j->r, j->off, j->size);
	} else if (f->used && f->id == j->id) {
		r = j->done(e, f, j->r, j->hash);
	}
	sum_job_free(j);
	return r;
}

static void sum_job_drop(struct engine *e, struct engine_job *job)
{
	struct sum_job *j = container_of(job, struct sum_job, job);

	e->sums_inflight--;
	if (j->fd >= 0) {
		close(j->fd);
	}
	sum_job_free(j);
}

static const struct engine_job_ops sum_job_ops = {
	.run = sum_job_run,
	.done = sum_job_done,
	.drop = sum_job_drop,
};

/* What the answers queued goes out together (the sender's SUMS). */
static int sums_answered(struct engine *e)
{
	return e->sums_answered ? e->sums_answered(e) : 0;
}

static void sums_local_free(void *local)
{
	struct sums_local *l = local;

	if (l) {
		filehasher_free(l->fh);
		free(l);
	}
}

static const struct engine_jobq_ops sums_queue_ops = {
	.answered = sums_answered,
	.local_free = sums_local_free,
};

/* The sums' queue in the pool, made with the first job: one thread, its jobs in order. */
static int sums_start(struct engine *e)
{
	struct sums_local *l;
	int q;

	if (e->sum_q >= 0) {
		return 0;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	l->fr = filehasher_new(&l->fh);
	q = engine_jobs_queue(e, &sums_queue_ops, l);
	if (q < 0) {
		return engine_fail(e, PERR_INTERNAL, q, "cannot start the hashing thread");
	}
	e->sum_q = q;
	return 0;
}

static int sums_queue_job(struct engine *e, struct efile *f, int fd, const struct sum_job *tmpl)
{
	struct sum_job *j;
	int r = sums_start(e);

	if (r < 0) {
		close(fd);
		free(tmpl->rd);
		free(tmpl->rdisk);
		return r;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		close(fd);
		free(tmpl->rd);
		free(tmpl->rdisk);
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	*j = *tmpl;
	j->job.ops = &sum_job_ops;
	j->fidx = file_index(e, f);
	j->id = f->id;
	j->fd = fd;
	/* In order: the first file asked for is the first answered. */
	engine_jobs_submit(e, (unsigned)e->sum_q, &j->job);
	e->sums_inflight++;
	return 0;
}

int sums_queue(struct engine *e, struct efile *f, int fd, sum_done_fn done)
{
	return sums_queue_job(e, f, fd,
			      &(struct sum_job){ .size = f->size,
						 .cs = engine_digest_chunk(e, f->size),
						 .slow = e->p->faults & ENGINE_FAULT_SLOW_DISK,
						 .done = done });
}

/*
 * A tree file's read back (a device's, at its commit): the job gets its own
 * copies of rd and rdisk (delta's), so the file may go while it runs.
 */
int sums_queue_tree(struct engine *e, struct efile *f, int fd, const uint8_t (*rd)[HASH_LEN],
		    const uint8_t *rdisk, tree_verify_fn verify, sum_done_fn done)
{
	uint64_t n = f->size / e->p->chunk_size + (f->size % e->p->chunk_size != 0);
	struct sum_job t = { .done = done,
			     .verify = verify,
			     .size = f->size,
			     .slow = e->p->faults & ENGINE_FAULT_SLOW_DISK,
			     .cs = e->p->chunk_size,
			     .rd = malloc(n * HASH_LEN),
			     .rdisk = malloc(n / 8 + 1) };

	if (!t.rd || !t.rdisk) {
		close(fd);
		free(t.rd);
		free(t.rdisk);
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	memcpy(t.rd, rd, n * HASH_LEN);
	memcpy(t.rdisk, rdisk, n / 8 + 1);
	return sums_queue_job(e, f, fd, &t);
}

int sums_queue_zeros(struct engine *e, struct efile *f, uint64_t off, uint64_t len,
		     zero_done_fn done)
{
	int fd = fcntl(f->tfd, F_DUPFD_CLOEXEC, 3), r;

	if (fd < 0) {
		return negerrno();
	}
	r = sums_queue_job(e, f, fd,
			   &(struct sum_job){ .zeros = true,
					      .zdone = done,
					      .slow = e->p->faults & ENGINE_FAULT_SLOW_DISK,
					      .off = off,
					      .size = len });
	if (r == 0) {
		f->zeros_out++;
	}
	return r;
}

/* The receiver's block, with the answers (a sender has none: its flags are a map); NULL: none. */
static struct sums_file *sums_answers(const struct engine *e, const struct efile *f)
{
	return e->p->role == ENGINE_RECEIVER ? engine_file_state(e, &engine_feature_sums, f) : NULL;
}

int sums_own(struct engine *e, struct efile *f, int r, const uint8_t hash[HASH_LEN])
{
	struct sums_file *sf = sums_answers(e, f);

	if (!sf) {
		return -EINVAL; /* not a session that asks (sums_file_size) */
	}
	sf->own_done = true;
	sf->own_status = r < 0 ? PERR_IO : PERR_OK;
	memcpy(sf->own, hash, HASH_LEN);
	return sf->peer_done;
}

/* -EBADMSG: the peer's answer came twice, or in a session that never asks. */
int sums_peer(struct engine *e, struct efile *f, uint32_t status, const uint8_t hash[HASH_LEN])
{
	struct sums_file *sf = sums_answers(e, f);

	if (!sf || sf->peer_done) {
		return -EBADMSG;
	}
	sf->peer_done = true;
	sf->peer_status = status;
	memcpy(sf->peer, hash, HASH_LEN);
	return sf->own_done;
}

bool sums_match(const struct engine *e, const struct efile *f)
{
	const struct sums_file *sf = sums_answers(e, f);

	return sf && sf->own_status == PERR_OK && sf->peer_status == PERR_OK &&
	       memcmp(sf->own, sf->peer, HASH_LEN) == 0;
}

struct sums_state *sums_state(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_sums);
}

bool sums_wanted(const struct engine *e, const struct efile *f)
{
	const struct sums_state *ss;
	uint32_t i;

	if (e->p->role == ENGINE_RECEIVER) {
		const struct sums_file *sf = sums_answers(e, f);

		return sf && sf->wanted;
	}
	ss = sums_state(e);
	if (!ss || !ss->wanted) {
		return false;
	}
	i = file_index(e, f);
	return ss->wanted[i / 64] >> (i % 64) & 1;
}

int sums_want(struct engine *e, struct efile *f, bool on)
{
	struct sums_state *ss = sums_state(e);
	uint32_t i;

	if (e->p->role == ENGINE_RECEIVER) {
		struct sums_file *sf = sums_answers(e, f);

		if (!sf) {
			return -EBADMSG;
		}
		sf->wanted = on;
		return 0;
	}
	if (!ss) {
		return -EBADMSG;
	}
	if (!ss->wanted && !on) {
		return 0;
	}
	if (!ss->wanted) {
		ss->wanted = calloc(FILE_TABLE / 64, sizeof(*ss->wanted));
		if (!ss->wanted) {
			return -ENOMEM;
		}
	}
	i = file_index(e, f);
	ss->wanted[i / 64] =
	    (ss->wanted[i / 64] & ~(1ull << (i % 64))) | ((uint64_t)on << (i % 64));
	return 0;
}

int sums_ask(struct engine *e, struct efile *f, int fd)
{
	const struct sums_state *ss = sums_state(e);

	if (!ss || !ss->own_done || sums_want(e, f, true) < 0) {
		close(fd);
		return -EINVAL; /* the role set no taker: a session without the level */
	}
	return sums_queue(e, f, fd, ss->own_done);
}

/*
 * Only a receiver with the skip level checksum asks for digests
 * (SUM_WANTED), and only a sender to a peer that has the level answers.
 */
static bool sums_enable(struct engine *e)
{
	if (e->p->role == ENGINE_RECEIVER) {
		return (e->p->open_flags & PROTO_OPEN_SKIP_LEVELS) == PROTO_OPEN_SKIP_CHECKSUM;
	}
	return e->p->role == ENGINE_SENDER && (e->p->peer_caps & PROTO_CAP_CHECK);
}

/* A receiver's block: the flag and the two answers (a sender's flags are a map). */
static size_t sums_file_size(const struct engine *e)
{
	return e->p->role == ENGINE_RECEIVER ? sizeof(struct sums_file) : 0;
}

/* A sender's entry leaves the table: the next file there was not asked about. */
static void sums_file_release(struct engine *e, struct efile *f)
{
	if (e->p->role == ENGINE_SENDER) {
		(void)sums_want(e, f, false);
	}
}

/* Its jobs (and their file descriptors) went with the pool, before the files close. */
static void sums_feature_stop(struct engine *e)
{
	struct sums_state *ss = sums_state(e);

	free(ss->out);
	ss->out = NULL;
}

static void sums_feature_release(struct engine *e)
{
	struct sums_state *ss = sums_state(e);

	free(ss->wanted);
	ss->wanted = NULL;
}

const struct engine_feature engine_feature_sums = {
	.name = "sums",
	.enable = sums_enable,
	.state_size = sizeof(struct sums_state),
	.file_size = sums_file_size,
	.file_release = sums_file_release,
	.file_waits = sums_wanted,
	.stop = sums_feature_stop,
	.release = sums_feature_release,
};
