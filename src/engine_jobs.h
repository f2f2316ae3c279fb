/* SPDX-License-Identifier: MIT */
/*
 * The engine's one worker pool (engine_jobs.c): work done off the loop on
 * threads, each job carrying its own run (on a thread) and done (back on
 * the loop). The pool is a set of queues, each a FIFO with a thread of its
 * own: a queue's jobs run one at a time in the order they were submitted,
 * and a slow job (a syncfs, a whole file's digest) holds up its own queue
 * only. Finished jobs come back to the loop on one eventfd, in the order
 * they finished.
 */
#pragma once

#include <stdbool.h>

struct engine;
struct engine_job;

struct engine_job_ops {
	/* On the queue's thread: local is the queue's own (engine_jobs_queue). */
	void (*run)(struct engine_job *j, void *local);
	/* On the loop, once run: takes j (frees it); < 0 fails the session. */
	int (*done)(struct engine *e, struct engine_job *j);
	/* Its answer is not wanted (teardown, or the session failed): frees j. */
	void (*drop)(struct engine *e, struct engine_job *j);
};

/* Embedded at the start of a job of its owner's (container_of gets the owner's back). */
struct engine_job {
	struct engine_job *next;
	const struct engine_job_ops *ops;
	unsigned queue;
};

/* Its jobs are answered even once the session has failed (a thread's answer teardown awaits). */
#define ENGINE_JOBQ_ALWAYS 1u

struct engine_jobq_ops {
	/* The thread's name (bench/ tells threads by it); NULL: the process's. */
	const char *name;
	unsigned flags;
	/* After a turn's answers of its jobs were taken (a batch goes out); NULL: none. */
	int (*answered)(struct engine *e);
	/* The queue's local, once its thread has ended (teardown); NULL: nothing to free. */
	void (*local_free)(void *local);
};

/*
 * A new queue and its thread (the pool started at the first). The thread
 * is started from the loop's thread, so it runs on the CPUs that thread is
 * bound to (the device's node). local (may be NULL) is handed to each run
 * and is the pool's from here on, freed with ops->local_free (also when
 * this fails). Returns the queue, or -errno; the session does not fail.
 */
int engine_jobs_queue(struct engine *e, const struct engine_jobq_ops *ops, void *local);
/* j to the end of queue q: run there after the jobs before it. */
void engine_jobs_submit(struct engine *e, unsigned q, struct engine_job *j);
/* Teardown, first: jobs not started are dropped, running ones finish, the threads end. */
void engine_jobs_stop(struct engine *e);
