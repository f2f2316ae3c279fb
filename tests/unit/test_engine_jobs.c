/* SPDX-License-Identifier: MIT */
/*
 * The engine's worker pool (engine_jobs.c) on its own, with real threads and
 * its real eventfd, the loop played by the test: a queue's jobs run and come
 * back in the order submitted; a job that blocks holds up its own queue only
 * (a syncfs beside chunk hashes); a queue's answered hook runs once per turn;
 * once the session has failed only ENGINE_JOBQ_ALWAYS queues are answered;
 * the stop drops what has not run and waits for what runs.
 */
#include "testutil.h"

#include "engine-internal.h"

#define NJOBS 200

struct tjob {
	struct engine_job job;
	unsigned seq;
	unsigned *ran, *nran; /* the order they ran in (one queue: one thread) */
	int *gate;	      /* run waits until *gate is nonzero (*entered set first) */
	int *entered;
	pthread_mutex_t *gate_lock;
	pthread_cond_t *gate_cond;
};

struct tally {
	unsigned done[NJOBS + 8], ndone, ndropped, nanswered;
};

static struct tally tally;

static void tjob_run(struct engine_job *job, void *local)
{
	struct tjob *j = container_of(job, struct tjob, job);

	assert_ptr_equal(local, &tally);
	if (j->gate) {
		pthread_mutex_lock(j->gate_lock);
		if (j->entered) {
			*j->entered = 1;
			pthread_cond_broadcast(j->gate_cond);
		}
		while (!*j->gate) {
			pthread_cond_wait(j->gate_cond, j->gate_lock);
		}
		pthread_mutex_unlock(j->gate_lock);
	}
	if (j->ran) {
		j->ran[(*j->nran)++] = j->seq;
	}
}

static int tjob_done(struct engine *e, struct engine_job *job)
{
	struct tjob *j = container_of(job, struct tjob, job);

	(void)e;
	tally.done[tally.ndone++] = j->seq;
	free(j);
	return 0;
}

static void tjob_drop(struct engine *e, struct engine_job *job)
{
	(void)e;
	tally.ndropped++;
	free(container_of(job, struct tjob, job));
}

static const struct engine_job_ops tjob_ops = { .run = tjob_run,
						.done = tjob_done,
						.drop = tjob_drop };

static int answered(struct engine *e)
{
	(void)e;
	tally.nanswered++;
	return 0;
}

static const struct engine_jobq_ops plain_q = { .answered = answered };
static const struct engine_jobq_ops always_q = { .flags = ENGINE_JOBQ_ALWAYS };

static struct engine *new_engine(void)
{
	struct engine *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	memset(&tally, 0, sizeof(tally));
	return e;
}

static struct tjob *submit(struct engine *e, int q, unsigned seq)
{
	struct tjob *j = calloc(1, sizeof(*j));

	assert_non_null(j);
	j->job.ops = &tjob_ops;
	j->seq = seq;
	engine_jobs_submit(e, (unsigned)q, &j->job);
	return j;
}

/* The loop's part: wait for the pool's eventfd, then its source runs; until n answers. */
static void loop_until(struct engine *e, unsigned n)
{
	assert_int_equal(e->nwatches, 1);
	for (int turns = 0; tally.ndone < n; turns++) {
		struct pollfd p = { .fd = e->watches[0].fd, .events = POLLIN };

		assert_true(turns < 1000);
		assert_true(poll(&p, 1, 5000) == 1);
		assert_int_equal(e->watches[0].on_ready(e), 0);
	}
	assert_int_equal(tally.ndone, n);
}

/* One queue: run in the order submitted, answered in that order, the hook once per turn. */
static void test_jobs_order(void **state)
{
	struct engine *e = new_engine();
	unsigned ran[NJOBS], nran = 0;
	int q = engine_jobs_queue(e, &plain_q, &tally);

	(void)state;
	assert_int_equal(q, 0);
	for (unsigned i = 0; i < NJOBS; i++) {
		struct tjob *j = calloc(1, sizeof(*j));

		*j = (struct tjob){ .job.ops = &tjob_ops, .seq = i, .ran = ran, .nran = &nran };
		engine_jobs_submit(e, (unsigned)q, &j->job);
	}
	loop_until(e, NJOBS);
	for (unsigned i = 0; i < NJOBS; i++) {
		assert_int_equal(ran[i], i);
		assert_int_equal(tally.done[i], i);
	}
	assert_true(tally.nanswered >= 1 && tally.nanswered <= NJOBS);
	engine_jobs_stop(e);
	assert_null(e->jobs);
	assert_int_equal(e->nwatches, 0);
	assert_int_equal(tally.ndropped, 0);
	free(e);
}

/* A job that blocks (a syncfs) holds its own queue: the others' jobs run and come back. */
static void test_jobs_blocked_queue_alone(void **state)
{
	struct engine *e = new_engine();
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
	int gate = 0;
	int slow = engine_jobs_queue(e, &always_q, &tally);
	int fast = engine_jobs_queue(e, &plain_q, &tally);
	struct tjob *b = calloc(1, sizeof(*b));

	(void)state;
	assert_true(slow >= 0 && fast > slow);
	*b = (struct tjob){ .job.ops = &tjob_ops,
			    .seq = NJOBS,
			    .gate = &gate,
			    .gate_lock = &lock,
			    .gate_cond = &cond };
	engine_jobs_submit(e, (unsigned)slow, &b->job);
	for (unsigned i = 0; i < NJOBS; i++) {
		submit(e, fast, i);
	}
	loop_until(e, NJOBS);
	for (unsigned i = 0; i < NJOBS; i++) {
		assert_int_equal(tally.done[i], i);
	}
	pthread_mutex_lock(&lock);
	gate = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	loop_until(e, NJOBS + 1);
	assert_int_equal(tally.done[NJOBS], NJOBS);
	engine_jobs_stop(e);
	free(e);
}

/* The session failed: an ENGINE_JOBQ_ALWAYS queue's answer is taken, the others' dropped. */
static void test_jobs_failed_session(void **state)
{
	struct engine *e = new_engine();
	int plain = engine_jobs_queue(e, &plain_q, &tally);
	int always = engine_jobs_queue(e, &always_q, &tally);

	(void)state;
	submit(e, plain, 1);
	submit(e, always, 2);
	e->failed = true;
	for (int turns = 0; tally.ndone + tally.ndropped < 2; turns++) {
		struct pollfd p = { .fd = e->watches[0].fd, .events = POLLIN };

		assert_true(turns < 1000);
		assert_true(poll(&p, 1, 5000) == 1);
		assert_int_equal(e->watches[0].on_ready(e), 0);
	}
	assert_int_equal(tally.ndone, 1);
	assert_int_equal(tally.done[0], 2);
	assert_int_equal(tally.ndropped, 1);
	assert_int_equal(tally.nanswered, 0);
	engine_jobs_stop(e);
	free(e);
}

struct opener {
	pthread_mutex_t *lock;
	pthread_cond_t *cond;
	int *gate;
};

static void *open_later(void *arg)
{
	struct opener *o = arg;

	usleep(50000);
	pthread_mutex_lock(o->lock);
	*o->gate = 1;
	pthread_cond_broadcast(o->cond);
	pthread_mutex_unlock(o->lock);
	return NULL;
}

/* The stop: the running job finishes, the queued ones never run, all are dropped. */
static void test_jobs_stop_drops(void **state)
{
	struct engine *e = new_engine();
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
	int gate = 0, entered = 0;
	unsigned ran[NJOBS + 1], nran = 0;
	struct opener o;
	pthread_t t;
	int q = engine_jobs_queue(e, &plain_q, &tally);
	struct tjob *b = calloc(1, sizeof(*b));

	(void)state;
	*b = (struct tjob){ .job.ops = &tjob_ops,
			    .seq = 0,
			    .ran = ran,
			    .nran = &nran,
			    .gate = &gate,
			    .entered = &entered,
			    .gate_lock = &lock,
			    .gate_cond = &cond };
	engine_jobs_submit(e, (unsigned)q, &b->job);
	for (unsigned i = 1; i <= 10; i++) {
		struct tjob *j = calloc(1, sizeof(*j));

		*j = (struct tjob){ .job.ops = &tjob_ops, .seq = i, .ran = ran, .nran = &nran };
		engine_jobs_submit(e, (unsigned)q, &j->job);
	}
	/* The first job runs; the gate opens a moment after the stop began: it waits for it. */
	pthread_mutex_lock(&lock);
	while (!entered) {
		pthread_cond_wait(&cond, &lock);
	}
	pthread_mutex_unlock(&lock);
	o = (struct opener){ &lock, &cond, &gate };
	assert_int_equal(pthread_create(&t, NULL, open_later, &o), 0);
	engine_jobs_stop(e);
	pthread_join(t, NULL);
	assert_int_equal(nran, 1);
	assert_int_equal(ran[0], 0);
	assert_int_equal(tally.ndone, 0);
	assert_int_equal(tally.ndropped, 11);
	free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jobs_order),
		cmocka_unit_test(test_jobs_blocked_queue_alone),
		cmocka_unit_test(test_jobs_failed_session),
		cmocka_unit_test(test_jobs_stop_drops),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
