/* SPDX-License-Identifier: MIT */
/*
 * The skip level checksum: digests made off the engine's loop. Each side
 * hashes its own file (the receiver the one at the destination name, the
 * sender its source) on one worker thread with its own io_uring
 * (filehash.c), so a big file never stalls the loop, and the two sides hash
 * at the same time. The loop queues a job with an fd it opened; the worker
 * hashes, closes the fd and says so on an eventfd; the loop hands each
 * result to the done function the job was queued with (the role's, or a
 * device's read back), once it has checked the file is still the one the
 * job was for. The same worker writes a device's zero
 * ranges (blk_zero_range: a write-zeroes of a large range can take long),
 * in the order they were queued; the file's commit waits for them.
 */
#include "engine-internal.h"

#include "filehash.h"

struct sum_job {
	struct sum_job *next;
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
	/* A tree's read back: its chunk size, copies of rd and rdisk. */
	uint32_t cs;
	uint8_t (*rd)[HASH_LEN];
	uint8_t *rdisk;
};

static void sum_job_free(struct sum_job *j)
{
	free(j->rd);
	free(j->rdisk);
	free(j);
}

static int sum_job_run(struct filehasher *fh, int fr, struct sum_job *j)
{
	if (j->slow) {
		sleep(4);
	}
	if (j->verify) {
		return j->verify(j->fd, j->size, j->cs, j->rd, j->rdisk, j->hash);
	}
	if (!j->zeros) {
		return fr < 0 ? fr : filehasher_fd(fh, j->fd, j->size, j->hash);
	}
	return sparse_zero_range(j->fd, j->off, j->size, SPARSE_KEEP_SIZE);
}

static void *sum_thread_main(void *arg)
{
	struct engine *e = arg;
	struct filehasher *fh = NULL;
	int fr = filehasher_new(&fh);

	for (;;) {
		struct sum_job *j;
		uint64_t one = 1;

		pthread_mutex_lock(&e->sum_lock);
		while (!e->sum_todo && !e->sum_stop) {
			pthread_cond_wait(&e->sum_cond, &e->sum_lock);
		}
		if (e->sum_stop) {
			pthread_mutex_unlock(&e->sum_lock);
			break;
		}
		j = e->sum_todo;
		e->sum_todo = j->next;
		pthread_mutex_unlock(&e->sum_lock);

		j->r = sum_job_run(fh, fr, j);
		close(j->fd);
		j->fd = -1;

		pthread_mutex_lock(&e->sum_lock);
		j->next = e->sum_done;
		e->sum_done = j;
		pthread_mutex_unlock(&e->sum_lock);
		if (write(e->sum_efd, &one, sizeof(one)) < 0) {
			/* The counter can't overflow here: the loop reads it. */
		}
	}
	filehasher_free(fh);
	return NULL;
}

static int sums_start(struct engine *e)
{
	if (e->sum_running) {
		return 0;
	}
	e->sum_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->sum_efd < 0) {
		return engine_fail(e, PERR_INTERNAL, negerrno(), "eventfd: %s", strerror(errno));
	}
	pthread_mutex_init(&e->sum_lock, NULL);
	pthread_cond_init(&e->sum_cond, NULL);
	if (engine_watch_add(e, e->sum_efd, on_sums, 0) < 0 ||
	    pthread_create(&e->sum_thread, NULL, sum_thread_main, e) != 0) {
		engine_watch_del(e, e->sum_efd);
		pthread_mutex_destroy(&e->sum_lock);
		pthread_cond_destroy(&e->sum_cond);
		return engine_fail(e, PERR_INTERNAL, -EAGAIN, "cannot start the hashing thread");
	}
	e->sum_running = true;
	return 0;
}

static int sums_queue_job(struct engine *e, struct efile *f, int fd, const struct sum_job *tmpl)
{
	struct sum_job *j, **tail;
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
	j->fidx = file_index(e, f);
	j->id = f->id;
	j->fd = fd;
	pthread_mutex_lock(&e->sum_lock);
	/* In order: the first file asked for is the first answered. */
	for (tail = &e->sum_todo; *tail; tail = &(*tail)->next) {
	}
	*tail = j;
	pthread_cond_signal(&e->sum_cond);
	pthread_mutex_unlock(&e->sum_lock);
	e->sums_inflight++;
	return 0;
}

int sums_queue(struct engine *e, struct efile *f, int fd, sum_done_fn done)
{
	return sums_queue_job(e, f, fd,
			      &(struct sum_job){ .size = f->size,
						 .slow = e->p->faults & ENGINE_FAULT_SLOW_DISK,
						 .done = done });
}

/*
 * A tree file's read back (a device's, at its commit): the job gets its own
 * copies of rd and rdisk, so the file may go while it runs.
 */
int sums_queue_tree(struct engine *e, struct efile *f, int fd, tree_verify_fn verify,
		    sum_done_fn done)
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
	memcpy(t.rd, f->rd, n * HASH_LEN);
	memcpy(t.rdisk, f->rdisk, n / 8 + 1);
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

int on_sums(struct engine *e)
{
	struct sum_job *done, *rev = NULL;
	uint64_t v;
	int r = 0;

	if (read(e->sum_efd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
		return engine_fail(e, PERR_INTERNAL, negerrno(), "eventfd: %s", strerror(errno));
	}
	pthread_mutex_lock(&e->sum_lock);
	done = e->sum_done;
	e->sum_done = NULL;
	pthread_mutex_unlock(&e->sum_lock);
	/* Pushed newest first: answered in the order they finished. */
	while (done) {
		struct sum_job *n = done->next;

		done->next = rev;
		rev = done;
		done = n;
	}
	while (rev) {
		struct sum_job *j = rev;
		struct efile *f = file_at(e, j->fidx);

		rev = j->next;
		e->sums_inflight--;
		/* A file failed or released meanwhile has no use for it. */
		if (r >= 0 && f->used && f->id == j->id && j->zeros) {
			r = j->zdone(e, f, j->r, j->off, j->size);
		} else if (r >= 0 && f->used && f->id == j->id) {
			r = j->done(e, f, j->r, j->hash);
		}
		sum_job_free(j);
	}
	/* What the answers queued goes out together (the sender's SUMS). */
	if (r >= 0 && e->sums_answered) {
		r = e->sums_answered(e);
	}
	return r;
}

void sums_stop(struct engine *e)
{
	struct sum_job *lists[2];

	if (!e->sum_running) {
		if (e->sum_efd >= 0) {
			close(e->sum_efd);
		}
		return;
	}
	pthread_mutex_lock(&e->sum_lock);
	e->sum_stop = true;
	pthread_cond_signal(&e->sum_cond);
	pthread_mutex_unlock(&e->sum_lock);
	pthread_join(e->sum_thread, NULL);
	e->sum_running = false;
	lists[0] = e->sum_todo;
	lists[1] = e->sum_done;
	for (int i = 0; i < 2; i++) {
		while (lists[i]) {
			struct sum_job *j = lists[i];

			lists[i] = j->next;
			if (j->fd >= 0) {
				close(j->fd);
			}
			sum_job_free(j);
		}
	}
	e->sum_todo = e->sum_done = NULL;
	pthread_mutex_destroy(&e->sum_lock);
	pthread_cond_destroy(&e->sum_cond);
	engine_watch_del(e, e->sum_efd);
	close(e->sum_efd);
	e->sum_efd = -1;
}

/* Its jobs hold file descriptors of their own: stopped before the files close. */
static void sums_feature_stop(struct engine *e)
{
	sums_stop(e);
	free(e->sum_out);
	e->sum_out = NULL;
}

const struct engine_feature engine_feature_sums = {
	.name = "sums",
	.stop = sums_feature_stop,
};
