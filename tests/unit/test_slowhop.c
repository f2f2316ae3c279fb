/* SPDX-License-Identifier: MIT */
/*
 * The slow-hop rule (src/slowhop.c), on simulated runs sampled every 100
 * ms: a hop that keeps the pace, or more than half of it, is never cut; one
 * that takes less than half is cut once a whole window shows it, not
 * before; a stall shorter than half the window is ridden out and a longer
 * one is not; no backlog (the sender waits on the feed), or one the hop
 * before had already (a kept file, a replay), never cuts; a
 * window of 0 never judges; a restart clears the verdict and the samples.
 */
#include "testutil.h"

#include "slowhop.h"

#define MiB	((uint64_t)1 << 20)
#define STEP_MS 100

/*
 * A run of secs seconds: the hop before gives `gave` MiB/s; the hop takes
 * took(t) MiB/s at second t (what is given and not taken is the backlog,
 * which starts at `start` MiB). Returns the millisecond of the cut, or -1.
 */
static int64_t run(struct slowhop *h, int secs, double gave, double (*took)(double t),
		   uint64_t start)
{
	double backlog = (double)(start * MiB), taken = 0, given = 0;

	for (int64_t ms = 0; ms <= (int64_t)secs * 1000; ms += STEP_MS) {
		double t = (double)ms / 1000, dt = STEP_MS / 1000.0;
		double in = gave * (double)MiB * dt, out = took(t) * (double)MiB * dt;

		/* The hop cannot take what is not there. */
		if (out > backlog + in) {
			out = backlog + in;
		}
		backlog += in - out;
		taken += out;
		given += in;
		if (slowhop_note(h, 1000000 + ms, (uint64_t)backlog, (uint64_t)given,
				 (uint64_t)taken)) {
			return ms;
		}
	}
	return -1;
}

static double pace(double t)
{
	(void)t;
	return 100;
}

static double sixty(double t)
{
	(void)t;
	return 60;
}

static double thirty(double t)
{
	(void)t;
	return 30;
}

static double stall_4s(double t)
{
	return t >= 20 && t < 24 ? 0 : 100;
}

static double stall_7s(double t)
{
	return t >= 20 && t < 27 ? 0 : 100;
}

static void test_keeps_pace(void **state)
{
	struct slowhop h;

	(void)state;
	slowhop_init(&h, 10);
	assert_int_equal(run(&h, 120, 100, pace, 64), -1);
	slowhop_init(&h, 10);
	assert_int_equal(run(&h, 120, 100, sixty, 64), -1);
	assert_false(h.cut);
}

static void test_slow_is_cut_after_a_window(void **state)
{
	struct slowhop h;
	int64_t at;

	(void)state;
	slowhop_init(&h, 10);
	at = run(&h, 120, 100, thirty, 0);
	/* Not before a whole window, and soon after it. */
	assert_true(at >= 10000);
	assert_true(at <= 11000);
	assert_true(h.cut);
	assert_in_range(h.took_rate, 29 * MiB, 31 * MiB);
	assert_in_range(h.gave_rate, 99 * MiB, 101 * MiB);
	/* The verdict stays until a restart. */
	assert_true(slowhop_note(&h, 0, 0, 0, 0));
	slowhop_restart(&h);
	assert_false(h.cut);
	assert_int_equal(h.n, 0);
	assert_int_equal(h.window_ms, 10000);
}

static void test_short_stall_ridden_out(void **state)
{
	struct slowhop h;
	int64_t at;

	(void)state;
	slowhop_init(&h, 10);
	assert_int_equal(run(&h, 120, 100, stall_4s, 0), -1);
	/* Longer than half the window: cut, within a window of the stall's start. */
	slowhop_init(&h, 10);
	at = run(&h, 120, 100, stall_7s, 0);
	assert_true(at > 20000 && at <= 30000);
}

static void test_no_backlog_no_cut(void **state)
{
	struct slowhop h;

	(void)state;
	/* The hop takes nothing, but nothing waits: the feed is what is slow. */
	slowhop_init(&h, 2);
	for (int64_t ms = 0; ms < 60000; ms += STEP_MS) {
		assert_false(slowhop_note(&h, ms, SLOWHOP_MIN_BACKLOG - 1, (uint64_t)ms << 20, 0));
	}
	/* What the hop before had already (a kept file, a replay) is no pace: never cut. */
	slowhop_init(&h, 2);
	for (int64_t ms = 0; ms < 60000; ms += STEP_MS) {
		assert_false(slowhop_note(&h, ms, (uint64_t)1 << 30, 0, (uint64_t)ms * 1024));
	}
	/* Growing, but below the floor all along. */
	slowhop_init(&h, 2);
	for (int64_t ms = 0; ms < 60000; ms += STEP_MS) {
		assert_false(slowhop_note(&h, ms, (uint64_t)ms * 256, (uint64_t)ms * 256, 0));
	}
}

static void test_off_and_caps(void **state)
{
	struct slowhop h;

	(void)state;
	slowhop_init(&h, 0);
	assert_int_equal(run(&h, 60, 100, thirty, 0), -1);
	assert_int_equal(h.n, 0);
	slowhop_init(&h, 100000);
	assert_int_equal(h.window_ms, SLOWHOP_MAX_S * 1000u);
	/* The ring keeps about two windows of samples, the oldest dropped. */
	slowhop_init(&h, 1);
	for (int64_t ms = 0; ms < 30000; ms += 10) {
		slowhop_note(&h, ms, 0, (uint64_t)ms, (uint64_t)ms);
	}
	assert_int_equal(h.n, SLOWHOP_SAMPLES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keeps_pace),
		cmocka_unit_test(test_slow_is_cut_after_a_window),
		cmocka_unit_test(test_short_stall_ridden_out),
		cmocka_unit_test(test_no_backlog_no_cut),
		cmocka_unit_test(test_off_and_caps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
