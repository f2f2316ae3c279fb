/* SPDX-License-Identifier: MIT */
/*
 * --wait-busy: a daemon at its limits (connections per host, memory budget)
 * is asked again after a jittered exponential backoff until the duration is
 * spent; the wait is said once on stderr and as a --json "wait" event.
 */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "client.h"

#define BUSY_WAIT_FIRST_MS 100
#define BUSY_WAIT_MAX_MS   5000

struct busy_wait {
	const struct client_opts *o;
	const char *host;
	const volatile sig_atomic_t *stop; /* NULL: none */
	int64_t deadline_ms;		   /* 0: not yet waiting */
	uint32_t delay_ms;		   /* the next backoff's upper bound */
	unsigned tries;
	bool said;
};

void busy_wait_init(struct busy_wait *w, const struct client_opts *o, const char *host,
		    const volatile sig_atomic_t *stop);
/* Whether a busy answer now would be waited out (the caller keeps it quiet then). */
bool busy_wait_active(const struct busy_wait *w);
/*
 * After a busy answer (why: the daemon's words or ours): says once that we
 * wait, sleeps one backoff. true: ask again; false: the time is spent or
 * *stop was set (the caller reports the failure).
 */
bool busy_wait_next(struct busy_wait *w, const char *why);
/* Seconds waited so far. */
unsigned busy_wait_seconds(const struct busy_wait *w);
/* The backoff's next sleep: at random in [bound/2, bound] (exported for the unit test). */
uint32_t busy_wait_jitter(uint32_t bound_ms, uint32_t random);
