/* SPDX-License-Identifier: MIT */
/*
 * The engine's worker pool (engine_jobs.h): queues, each a FIFO served by a
 * thread of its own, under one lock; finished jobs on one list, newest
 * first, and one eventfd the loop watches. The pool names no user: what a
 * job does and who takes its answer are the job's own (its ops), what a
 * queue's thread keeps between jobs is the queue's local.
 *
 * Why a thread per queue rather than threads that take any job: a queue's
 * order is its users' rule (a file's hash stream, the digests asked for, a
 * device's zero ranges, one syncfs batch at a time), and a job that blocks
 * (a syncfs, a whole file read) must not stall the chunk hashes of other
 * queues. Each user takes as many queues as it has threads today.
 */
#include "engine-internal.h"

/* The workers' threads, the sums' and the sync's. */
#define ENGINE_JOBQ_MAX (ENGINE_HASH_THREADS_MAX + 8)

struct jobq {
	struct engine_jobs *js;
	const struct engine_jobq_ops *ops;
	void *local;
	pthread_t thread;
	bool started;
	pthread_cond_t cond; /* todo has a job, or the pool stops */
	struct engine_job *todo, **tail;
};

struct engine_jobs {
	pthread_mutex_t lock;
	bool stop;
	struct engine_job *done; /* finished, newest first */
	int efd;		 /* a job finished: the loop takes the list */
	unsigned nq;
	struct jobq q[ENGINE_JOBQ_MAX];
};

/* The next job of queue q, or NULL when the pool stops. */
static struct engine_job *jobq_take(struct jobq *q)
{
	struct engine_jobs *js = q->js;
	struct engine_job *j;

	pthread_mutex_lock(&js->lock);
	while (!q->todo && !js->stop) {
		pthread_cond_wait(&q->cond, &js->lock);
	}
	j = js->stop ? NULL : q->todo;
	if (j) {
		q->todo = j->next;
		if (!q->todo) {
			q->tail = &q->todo;
		}
	}
	pthread_mutex_unlock(&js->lock);
	return j;
}

static void *jobq_main(void *arg)
{
	struct jobq *q = arg;
	struct engine_jobs *js = q->js;
	struct engine_job *j;

	while ((j = jobq_take(q))) {
		uint64_t one = 1;
		bool first;

		j->ops->run(j, q->local);
		pthread_mutex_lock(&js->lock);
		/* The loop is woken once per batch: by the job that finds none done before it. */
		first = !js->done;
		j->next = js->done;
		js->done = j;
		pthread_mutex_unlock(&js->lock);
		if (first && write(js->efd, &one, sizeof(one)) < 0) {
			/* The counter can't overflow here: the loop reads it. */
		}
	}
	return NULL;
}

/* What finished since the last call, in the order it finished. */
static struct engine_job *jobs_take_done(struct engine_jobs *js)
{
	struct engine_job *done, *rev = NULL;

	pthread_mutex_lock(&js->lock);
	done = js->done;
	js->done = NULL;
	pthread_mutex_unlock(&js->lock);
	while (done) {
		struct engine_job *n = done->next;

		done->next = rev;
		rev = done;
		done = n;
	}
	return rev;
}

/*
 * The eventfd: each finished job to its done function, unless an answer
 * before it failed, or the session has (but for ENGINE_JOBQ_ALWAYS queues):
 * then dropped. Then each queue that had answers is told, once.
 */
static int jobs_ready(struct engine *e)
{
	struct engine_jobs *js = e->jobs;
	struct engine_job *list;
	bool answered[ENGINE_JOBQ_MAX] = { false };
	uint64_t v;
	int r = 0;

	if (read(js->efd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
		return engine_fail(e, PERR_INTERNAL, negerrno(), "eventfd: %s", strerror(errno));
	}
	list = jobs_take_done(js);
	while (list) {
		struct engine_job *j = list;
		const struct jobq *q = &js->q[j->queue];

		list = j->next;
		if (r >= 0 && (!e->failed || (q->ops->flags & ENGINE_JOBQ_ALWAYS))) {
			answered[j->queue] = true;
			r = j->ops->done(e, j);
		} else {
			j->ops->drop(e, j);
		}
	}
	for (unsigned i = 0; i < js->nq && r >= 0; i++) {
		if (answered[i] && js->q[i].ops->answered) {
			r = js->q[i].ops->answered(e);
		}
	}
	return r;
}

static int jobs_start(struct engine *e)
{
	struct engine_jobs *js = calloc(1, sizeof(*js));
	int r;

	if (!js) {
		return -ENOMEM;
	}
	js->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (js->efd < 0) {
		r = negerrno();
		free(js);
		return r;
	}
	/* Always: some queues' answers are taken after a failure too (ENGINE_JOBQ_ALWAYS). */
	r = engine_watch_add(e, js->efd, jobs_ready, ENGINE_WATCH_ALWAYS);
	if (r < 0) {
		close(js->efd);
		free(js);
		return r;
	}
	pthread_mutex_init(&js->lock, NULL);
	e->jobs = js;
	return 0;
}

int engine_jobs_queue(struct engine *e, const struct engine_jobq_ops *ops, void *local)
{
	struct jobq *q;
	int r = e->jobs ? 0 : jobs_start(e);

	if (r >= 0 && e->jobs->nq == ENGINE_JOBQ_MAX) {
		r = -ENOSPC;
	}
	if (r < 0) {
		if (ops->local_free) {
			ops->local_free(local);
		}
		return r;
	}
	q = &e->jobs->q[e->jobs->nq];
	*q = (struct jobq){ .js = e->jobs, .ops = ops, .local = local };
	q->tail = &q->todo;
	pthread_cond_init(&q->cond, NULL);
	/* Counted now: its local and its cond are freed at the stop, thread or not. */
	e->jobs->nq++;
	if (pthread_create(&q->thread, NULL, jobq_main, q) != 0) {
		return -EAGAIN;
	}
	q->started = true;
	if (ops->name) {
		(void)pthread_setname_np(q->thread, ops->name);
	}
	return (int)(q - e->jobs->q);
}

void engine_jobs_submit(struct engine *e, unsigned qi, struct engine_job *j)
{
	struct engine_jobs *js = e->jobs;
	struct jobq *q = &js->q[qi];

	assert(qi < js->nq && q->started);
	j->queue = qi;
	j->next = NULL;
	pthread_mutex_lock(&js->lock);
	*q->tail = j;
	q->tail = &j->next;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&js->lock);
}

static void jobs_drop(struct engine *e, struct engine_job *j)
{
	while (j) {
		struct engine_job *n = j->next;

		j->ops->drop(e, j);
		j = n;
	}
}

void engine_jobs_stop(struct engine *e)
{
	struct engine_jobs *js = e->jobs;

	if (!js) {
		return;
	}
	pthread_mutex_lock(&js->lock);
	js->stop = true;
	for (unsigned i = 0; i < js->nq; i++) {
		pthread_cond_signal(&js->q[i].cond);
	}
	pthread_mutex_unlock(&js->lock);
	for (unsigned i = 0; i < js->nq; i++) {
		struct jobq *q = &js->q[i];

		if (q->started) {
			pthread_join(q->thread, NULL);
		}
		jobs_drop(e, q->todo);
		if (q->ops->local_free) {
			q->ops->local_free(q->local);
		}
		pthread_cond_destroy(&q->cond);
	}
	jobs_drop(e, js->done);
	pthread_mutex_destroy(&js->lock);
	engine_watch_del(e, js->efd);
	close(js->efd);
	free(js);
	e->jobs = NULL;
}
