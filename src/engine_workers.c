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
 *   - open: a sealed slot copied and AES-GCM-opened the same way, block by
 *     block, under a key of the worker's own (the lane's, at the count the
 *     loop gave the slot), its descriptor opened and decoded with it;
 *   - run: a function of the caller's on what the job names (rdmacp bench's
 *     check of a slot, after its open when sealed).
 * A file's stream is one digest in file order, so every job that feeds it
 * goes to the same thread (by file id), in the order the loop hands them
 * over; other jobs go round the threads. While a job is out the thread owns
 * what it names (the file's hash state, the slot, the copy); the receiver
 * does not finish a file, nor the sender send its FILE_DONE, before all of
 * its hash jobs have come back (efile.hash_jobs), and a held slot or copy is
 * not let go before its job has. The loop learns of finished jobs on an
 * eventfd, in the order they finished, and calls each job's done function.
 */
#include "engine-internal.h"

struct worker {
	pthread_t thread;
	pthread_cond_t cond; /* its todo has a job, or the workers stop */
	struct wjob *todo, **tail;
	bool started;
	/* Sealed slots: this thread's own keys, one per lane, made at its first open. */
	struct lane_seal seal[XPORT_MAX_LANES];
	bool seal_ok[XPORT_MAX_LANES];
};

struct hashers {
	unsigned n, next;
	pthread_mutex_t lock;
	bool stop;
	struct wjob *done;
	int efd;
	hash_done_fn on_done;  /* the role's: a hash job of f is in its digest */
	const uint8_t *secret; /* sealed slots: the session's secret */
	struct worker t[];
};

struct hasher_arg {
	struct hashers *hs;
	unsigned i;
};

/* The slot's sealed descriptor, then its payload: copied block by block, opened in place. */
static int job_open(struct worker *w, const struct hashers *hs, struct wjob *j)
{
	struct lane_seal *s = &w->seal[j->lane];
	int r;

	if (!w->seal_ok[j->lane]) {
		r = slot_seal_init(s, hs->secret, j->lane, false);
		if (r < 0) {
			return r;
		}
		w->seal_ok[j->lane] = true;
	}
	return slot_open_copy(s, j->ring, j->count, j->sealed, j->src, j->dst, j->len, &j->d);
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
			XXH3_128bits_update(cs, j->dst + at, n);
		}
	}
	if (j->digest) {
		/* No memory for the state: the chunk's digest in a second pass. */
		XXH128_hash_t d = cs ? XXH3_128bits_digest(cs) : XXH3_128bits(j->dst, j->len);
		XXH128_canonical_t c;

		XXH128_canonicalFromHash(&c, d);
		memcpy(j->chash, c.digest, HASH_LEN);
	}
	XXH3_freeState(cs);
}

static void job_run(struct worker *w, const struct hashers *hs, struct wjob *j)
{
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
		j->r = job_open(w, hs, j);
		if (j->r >= 0 && j->run) {
			j->rc = j->run(j);
		}
		break;
	case WJOB_RUN:
		j->rc = j->run(j);
		break;
	}
}

/* The next job of thread h, or NULL when the workers stop. */
static struct wjob *worker_take(struct hashers *hs, struct worker *h)
{
	struct wjob *j;

	pthread_mutex_lock(&hs->lock);
	while (!h->todo && !hs->stop) {
		pthread_cond_wait(&h->cond, &hs->lock);
	}
	j = hs->stop ? NULL : h->todo;
	if (j) {
		h->todo = j->next;
		if (!h->todo) {
			h->tail = &h->todo;
		}
	}
	pthread_mutex_unlock(&hs->lock);
	return j;
}

static void *hasher_main(void *arg)
{
	struct hasher_arg a = *(struct hasher_arg *)arg;
	struct hashers *hs = a.hs;
	struct worker *h = &hs->t[a.i];
	struct wjob *j;

	free(arg);
	while ((j = worker_take(hs, h))) {
		uint64_t one = 1;
		bool first;

		job_run(h, hs, j);
		pthread_mutex_lock(&hs->lock);
		/* The loop is woken once per batch: by the job that finds none done before it. */
		first = !hs->done;
		j->next = hs->done;
		hs->done = j;
		pthread_mutex_unlock(&hs->lock);
		if (first && write(hs->efd, &one, sizeof(one)) < 0) {
			/* The counter can't overflow here: the loop reads it. */
		}
	}
	return NULL;
}

static void jobs_free(struct wjob *j)
{
	while (j) {
		struct wjob *n = j->next;

		free(j);
		j = n;
	}
}

static void hashers_free(struct hashers *hs)
{
	pthread_mutex_lock(&hs->lock);
	hs->stop = true;
	for (unsigned i = 0; i < hs->n; i++) {
		pthread_cond_signal(&hs->t[i].cond);
	}
	pthread_mutex_unlock(&hs->lock);
	for (unsigned i = 0; i < hs->n; i++) {
		if (hs->t[i].started) {
			pthread_join(hs->t[i].thread, NULL);
		}
		jobs_free(hs->t[i].todo);
		for (unsigned l = 0; l < XPORT_MAX_LANES; l++) {
			if (hs->t[i].seal_ok[l]) {
				lane_seal_fini(&hs->t[i].seal[l]);
			}
		}
	}
	jobs_free(hs->done);
	pthread_mutex_destroy(&hs->lock);
	for (unsigned i = 0; i < hs->n; i++) {
		pthread_cond_destroy(&hs->t[i].cond);
	}
	if (hs->efd >= 0) {
		close(hs->efd);
	}
	free(hs);
}

static int hashers_spawn(struct engine *e, struct hashers *hs)
{
	for (unsigned i = 0; i < hs->n; i++) {
		struct hasher_arg *a = malloc(sizeof(*a));

		if (!a) {
			return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
		*a = (struct hasher_arg){ .hs = hs, .i = i };
		if (pthread_create(&hs->t[i].thread, NULL, hasher_main, a) != 0) {
			free(a);
			return engine_fail(e, PERR_INTERNAL, -EAGAIN,
					   "cannot start a worker thread");
		}
		hs->t[i].started = true;
		/* Named, so that their CPU time can be told from the loop's (bench/). */
		(void)pthread_setname_np(hs->t[i].thread, "rdmacp-worker");
	}
	return 0;
}

int hashers_start(struct engine *e, unsigned n, hash_done_fn done)
{
	struct hashers *hs;

	if (n == 0) {
		return 0;
	}
	hs = calloc(1, sizeof(*hs) + n * sizeof(hs->t[0]));
	if (!hs) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	hs->n = n;
	hs->on_done = done;
	hs->secret = e->p->seal_secret;
	pthread_mutex_init(&hs->lock, NULL);
	for (unsigned i = 0; i < n; i++) {
		pthread_cond_init(&hs->t[i].cond, NULL);
		hs->t[i].tail = &hs->t[i].todo;
	}
	hs->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (hs->efd < 0) {
		int r = negerrno();

		hashers_free(hs);
		return engine_fail(e, PERR_INTERNAL, r, "eventfd: %s", strerror(-r));
	}
	if (hashers_spawn(e, hs) < 0) {
		hashers_free(hs);
		return e->fail_r;
	}
	if (engine_watch_add(e, hs->efd, on_hashers, 0) < 0) {
		hashers_free(hs);
		return engine_fail(e, PERR_INTERNAL, -ENOSPC, "too many event sources");
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

/* Stopped and joined before the files they hash for go (teardown). */
void hashers_stop(struct engine *e)
{
	if (e->hashers) {
		struct hashers *hs = e->hashers;

		engine_watch_del(e, hs->efd);
		hashers_free(hs);
		e->hashers = NULL;
	}
}

/* Its jobs hold files' hash states and slots: stopped before those go. */
const struct engine_feature engine_feature_hashers = {
	.name = "hashers",
	.stop = hashers_stop,
};

/* A job for the workers: f's thread when it feeds f's stream, else the next one round. */
int workers_queue(struct engine *e, struct wjob *j, struct efile *f)
{
	struct hashers *hs = e->hashers;
	struct worker *h;

	j->slow = e->p->faults & ENGINE_FAULT_SLOW_HASH;
	pthread_mutex_lock(&hs->lock);
	if (f) {
		h = &hs->t[f->id % hs->n];
	} else {
		h = &hs->t[hs->next++ % hs->n];
	}
	j->next = NULL;
	*h->tail = j;
	h->tail = &j->next;
	pthread_cond_signal(&h->cond);
	pthread_mutex_unlock(&hs->lock);
	if (f) {
		j->fidx = file_index(e, f);
		j->id = f->id;
		f->hash_jobs++;
	}
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

/* One finished job to its owner: f's hash count first, then its done function. */
static int job_done(struct engine *e, struct wjob *j)
{
	struct efile *f = NULL;

	if (j->hash) {
		f = file_at(e, j->fidx);
		assert(f->used && f->id == j->id && f->hash_jobs > 0);
		f->hash_jobs--;
	}
	if (j->done) {
		return j->done(e, j, f);
	}
	return e->hashers->on_done(e, f, j->idx);
}

/* The eventfd: jobs that came back, in the order they finished. */
int on_hashers(struct engine *e)
{
	struct hashers *hs = e->hashers;
	struct wjob *done, *rev = NULL;
	uint64_t v;
	int r = 0;

	if (read(hs->efd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
		return engine_fail(e, PERR_INTERNAL, negerrno(), "eventfd: %s", strerror(errno));
	}
	pthread_mutex_lock(&hs->lock);
	done = hs->done;
	hs->done = NULL;
	pthread_mutex_unlock(&hs->lock);
	while (done) {
		struct wjob *n = done->next;

		done->next = rev;
		rev = done;
		done = n;
	}
	while (rev) {
		struct wjob *j = rev;

		rev = j->next;
		if (r >= 0) {
			r = job_done(e, j);
		} else if (j->hash) {
			file_at(e, j->fidx)->hash_jobs--;
		}
		free(j);
	}
	return r;
}
