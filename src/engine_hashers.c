/* SPDX-License-Identifier: MIT */
/*
 * Hashing threads (engine_params.hash_threads): the end-to-end XXH3-128 of
 * the data chunks made off the engine's thread, so that one core is not
 * both the event loop (completions, io_uring, TLS) and the hash of every
 * byte: the receiver's of the slots it holds, the sender's of the chunks it
 * posts (not with sealed slots: those are sealed in place once hashed). A file's digest is one stream in file order, so all
 * of a file's chunks go to the same thread (by file id), in the order the
 * loop hands them over; different files hash side by side. While a job is
 * out, the thread owns the file's hash state and reads the slot or chunk;
 * the receiver's slot stays held (no credit), the sender's chunk out of the
 * pool, until the job comes back; the receiver does not finish a file, nor
 * the sender send its FILE_DONE, before all of its jobs have. The
 * loop learns of finished jobs on an eventfd, as of the hashing thread's
 * (engine_sums.c).
 */
#include "engine-internal.h"

struct hash_job {
	struct hash_job *next;
	struct file_hash *hash;
	const uint8_t *buf;
	uint32_t len, slot, fidx, id;
	bool slow;
};

struct hasher {
	pthread_t thread;
	struct hash_job *todo, **tail;
	bool started;
};

struct hashers {
	unsigned n;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	struct hash_job *done;
	int efd;
	hash_done_fn on_done; /* the role's: a slot or chunk of f is in its digest */
	struct hasher t[];
};

struct hasher_arg {
	struct hashers *hs;
	unsigned i;
};

static void *hasher_main(void *arg)
{
	struct hasher_arg a = *(struct hasher_arg *)arg;
	struct hashers *hs = a.hs;
	struct hasher *h = &hs->t[a.i];

	free(arg);
	for (;;) {
		struct hash_job *j;
		uint64_t one = 1;

		pthread_mutex_lock(&hs->lock);
		while (!h->todo && !hs->stop) {
			pthread_cond_wait(&hs->cond, &hs->lock);
		}
		if (hs->stop) {
			pthread_mutex_unlock(&hs->lock);
			break;
		}
		j = h->todo;
		h->todo = j->next;
		if (!h->todo) {
			h->tail = &h->todo;
		}
		pthread_mutex_unlock(&hs->lock);

		if (j->slow) {
			usleep(20000);
		}
		file_hash_update(j->hash, j->buf, j->len);

		pthread_mutex_lock(&hs->lock);
		j->next = hs->done;
		hs->done = j;
		pthread_mutex_unlock(&hs->lock);
		if (write(hs->efd, &one, sizeof(one)) < 0) {
			/* The counter can't overflow here: the loop reads it. */
		}
	}
	return NULL;
}

static void hashers_free(struct hashers *hs)
{
	pthread_mutex_lock(&hs->lock);
	hs->stop = true;
	pthread_cond_broadcast(&hs->cond);
	pthread_mutex_unlock(&hs->lock);
	for (unsigned i = 0; i < hs->n; i++) {
		if (hs->t[i].started) {
			pthread_join(hs->t[i].thread, NULL);
		}
		while (hs->t[i].todo) {
			struct hash_job *j = hs->t[i].todo;

			hs->t[i].todo = j->next;
			free(j);
		}
	}
	while (hs->done) {
		struct hash_job *j = hs->done;

		hs->done = j->next;
		free(j);
	}
	pthread_mutex_destroy(&hs->lock);
	pthread_cond_destroy(&hs->cond);
	if (hs->efd >= 0) {
		close(hs->efd);
	}
	free(hs);
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
	pthread_mutex_init(&hs->lock, NULL);
	pthread_cond_init(&hs->cond, NULL);
	hs->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (hs->efd < 0) {
		int r = negerrno();

		hashers_free(hs);
		return engine_fail(e, PERR_INTERNAL, r, "eventfd: %s", strerror(-r));
	}
	for (unsigned i = 0; i < n; i++) {
		struct hasher_arg *a = malloc(sizeof(*a));

		hs->t[i].tail = &hs->t[i].todo;
		if (!a) {
			hashers_free(hs);
			return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
		*a = (struct hasher_arg){ .hs = hs, .i = i };
		if (pthread_create(&hs->t[i].thread, NULL, hasher_main, a) != 0) {
			free(a);
			hashers_free(hs);
			return engine_fail(e, PERR_INTERNAL, -EAGAIN,
					   "cannot start a hashing thread");
		}
		hs->t[i].started = true;
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
	 * auto: on tcp the engine's thread waits on socket copies anyway; on
	 * verbs it does nothing else, so a core of 4 hashes beside it (at most 4).
	 */
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	return verbs && cpus >= 4 ? (unsigned)MIN(cpus / 4, 4) : 0;
}

/* Stopped and joined before the files they hash for go (teardown). */
void hashers_stop(struct engine *e)
{
	if (e->hashers) {
		engine_watch_del(e, e->hashers->efd);
		hashers_free(e->hashers);
		e->hashers = NULL;
	}
}

/* Its jobs hold files' hash states and slots: stopped before those go. */
const struct engine_feature engine_feature_hashers = {
	.name = "hashers",
	.stop = hashers_stop,
};

/* Slot or chunk `slot`, next in f's order, into f's hash on f's thread. */
int hashers_queue(struct engine *e, struct efile *f, uint32_t slot, const uint8_t *buf,
		  uint32_t len)
{
	struct hashers *hs = e->hashers;
	struct hasher *h = &hs->t[f->id % hs->n];
	struct hash_job *j = malloc(sizeof(*j));

	if (!j) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	*j = (struct hash_job){ .hash = &f->hash,
				.buf = buf,
				.len = len,
				.slot = slot,
				.fidx = file_index(e, f),
				.id = f->id,
				.slow = e->p->faults & ENGINE_FAULT_SLOW_HASH };
	pthread_mutex_lock(&hs->lock);
	*h->tail = j;
	h->tail = &j->next;
	pthread_cond_broadcast(&hs->cond);
	pthread_mutex_unlock(&hs->lock);
	f->hash_jobs++;
	return 0;
}

/* The eventfd: jobs that came back, in the order they finished. */
int on_hashers(struct engine *e)
{
	struct hashers *hs = e->hashers;
	struct hash_job *done, *rev = NULL;
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
		struct hash_job *n = done->next;

		done->next = rev;
		rev = done;
		done = n;
	}
	while (rev) {
		struct hash_job *j = rev;
		struct efile *f = &e->files[j->fidx];

		rev = j->next;
		assert(f->used && f->id == j->id && f->hash_jobs > 0);
		f->hash_jobs--;
		if (r >= 0) {
			r = hs->on_done(e, f, j->slot);
		}
		free(j);
	}
	return r;
}
