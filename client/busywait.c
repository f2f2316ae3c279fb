/* SPDX-License-Identifier: MIT */
/* --wait-busy (busywait.h). */
#include "busywait.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

#include <openssl/rand.h>

#include "clock.h"
#include "log.h"
#include "macro.h"
#include "output.h"

void busy_wait_init(struct busy_wait *w, const struct client_opts *o, const char *host,
		    const volatile sig_atomic_t *stop)
{
	*w = (struct busy_wait){
		.o = o, .host = host, .stop = stop, .delay_ms = BUSY_WAIT_FIRST_MS
	};
}

bool busy_wait_active(const struct busy_wait *w)
{
	if (w->o->wait_busy_ms == 0 || (w->stop && *w->stop)) {
		return false;
	}
	return w->deadline_ms == 0 || now_ms() < w->deadline_ms;
}

uint32_t busy_wait_jitter(uint32_t bound_ms, uint32_t random)
{
	uint32_t half = bound_ms / 2;

	return half + (bound_ms - half == 0 ? 0 : random % (bound_ms - half + 1));
}

unsigned busy_wait_seconds(const struct busy_wait *w)
{
	if (w->deadline_ms == 0) {
		return 0;
	}
	int64_t start = w->deadline_ms - (int64_t)w->o->wait_busy_ms;
	int64_t waited = now_ms() - start;

	return waited > 0 ? (unsigned)((waited + 500) / 1000) : 0;
}

static void say_waiting(struct busy_wait *w, const char *why)
{
	char esc[1024];
	uint64_t s = (w->o->wait_busy_ms + 999) / 1000;

	w->said = true;
	if (w->o->json) {
		printf("{\"event\":\"wait\",\"host\":");
		output_json_string(stdout, w->host);
		printf(",\"reason\":\"busy\",\"message\":");
		output_json_string(stdout, why);
		printf(",\"wait_busy_s\":%llu}\n", (unsigned long long)s);
		fflush(stdout);
	}
	if (w->o->verbose >= 0) {
		fprintf(stderr,
			"rdmacp: %s is busy (%s): waiting up to %llu s for it (--wait-busy)\n",
			w->host, log_escape(why, esc, sizeof(esc)), (unsigned long long)s);
	}
}

bool busy_wait_next(struct busy_wait *w, const char *why)
{
	uint32_t random = 0, sleep_ms;
	int64_t left;
	struct timespec ts;

	if (!busy_wait_active(w)) {
		return false;
	}
	if (w->deadline_ms == 0) {
		w->deadline_ms = now_ms() + (int64_t)w->o->wait_busy_ms;
	}
	if (!w->said) {
		say_waiting(w, why);
	}
	/* Many clients turned away at once must not come back at once: full jitter. */
	if (RAND_bytes((unsigned char *)&random, sizeof(random)) != 1) {
		random = (uint32_t)now_ms() * 2654435761u;
	}
	sleep_ms = busy_wait_jitter(w->delay_ms, random);
	left = w->deadline_ms - now_ms();
	if (left <= 0) {
		return false;
	}
	sleep_ms = (uint32_t)MIN((int64_t)sleep_ms, left);
	w->delay_ms = MIN(w->delay_ms * 2, (uint32_t)BUSY_WAIT_MAX_MS);
	w->tries++;
	log_debug("%s busy (%s): try %u in %u ms", w->host, why, w->tries + 1, sleep_ms);
	ts.tv_sec = sleep_ms / 1000;
	ts.tv_nsec = (long)(sleep_ms % 1000) * 1000000L;
	/* A signal (SIGINT) cuts the sleep short: the caller sees *stop. */
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
		if (w->stop && *w->stop) {
			return false;
		}
	}
	return !(w->stop && *w->stop);
}
