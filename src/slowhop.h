/* SPDX-License-Identifier: MIT */
/*
 * The slow-hop rule of a relay chain (issue 36 item 4): when the hop a
 * relay child sends to is too slow to keep the chain moving, so that it is
 * cut out as a hop that died is (fanout_hop_died). One rule, kept apart
 * from the engine (engine_slowhop.c samples a run into it) so that it can
 * be read and tested on its own.
 *
 * What is sampled, about every window/32 (at least 100 ms): the backlog,
 * bytes its upstream hop has on disk that this sender has not posted yet;
 * gave, the bytes that upstream hop received during this run (what it had
 * already, a kept file or a replay, is no pace); and taken, the bytes
 * posted to the hop so far. The hop is too slow when, over the last window
 * (the newest sample at least window old against now):
 *   - the backlog now is at least SLOWHOP_MIN_BACKLOG, and
 *   - its upstream received more than twice what it took (it took less
 *     than half the chain's pace).
 * A stall shorter than half the window never cuts a hop that keeps the
 * pace otherwise: the bytes it takes in the rest of the window are more
 * than the backlog grew while it stalled. A hop that keeps more than half
 * the pace is never cut; nor is one whose sender waits on the feed (no
 * backlog). window 0: never.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The daemon key's and the option's default (seconds), and their cap. */
#define SLOWHOP_DEFAULT_S 10u
#define SLOWHOP_MAX_S	  3600u
/* Less waiting than this is not a backlog (a few chunks in flight). */
#define SLOWHOP_MIN_BACKLOG ((uint64_t)16 << 20)
#define SLOWHOP_SAMPLES	    64u

struct slowhop_sample {
	int64_t ms;
	uint64_t backlog, gave, taken;
};

struct slowhop {
	uint32_t window_ms; /* 0: off */
	struct slowhop_sample s[SLOWHOP_SAMPLES];
	unsigned head, n; /* s[head] the oldest of n */
	bool cut;	  /* the verdict: too slow */
	/* At the verdict, over the window: bytes per second given and taken. */
	uint64_t gave_rate, took_rate;
};

/* h set to window_s seconds (0: off, at most SLOWHOP_MAX_S), no sample, no verdict. */
void slowhop_init(struct slowhop *h, unsigned window_s);
/* A new run to a hop: the samples and the verdict cleared, the window kept. */
void slowhop_restart(struct slowhop *h);
/*
 * A sample at now_ms (monotonic). Returns true when the hop is too slow
 * (h->cut set, and the rates); a sample sooner than the spacing after the
 * last is not kept but still judged.
 */
bool slowhop_note(struct slowhop *h, int64_t now_ms, uint64_t backlog, uint64_t gave,
		  uint64_t taken);
