/* SPDX-License-Identifier: MIT */
/*
 * The seal suite that seals fastest on this CPU, measured once per process
 * (see lane_seal.h lane_seal_suite_fastest).
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "lane_seal.h"
#include "macro.h"

#define MEASURE_BYTES  (64 * 1024) /* a frame's worth: the setup per frame counts too */
#define MEASURE_FRAMES 4
#define MEASURE_ROUNDS 6

static double thread_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One round of suite: MEASURE_FRAMES frames sealed through its lane API; seconds, or < 0. */
static double measure_round(struct lane_seal *s, uint8_t *buf)
{
	uint8_t aad[32] = { 0 }, tag[LANE_SEAL_TAG_LEN];
	double t0 = thread_seconds();

	for (unsigned i = 0; i < MEASURE_FRAMES; i++) {
		if (lane_seal_begin(s, aad, sizeof(aad)) < 0 ||
		    lane_seal_update(s, buf, buf, MEASURE_BYTES) < 0 || lane_seal_end(s, tag) < 0) {
			return -1;
		}
	}
	return thread_seconds() - t0;
}

static double rates[LANE_SEAL_NSUITES];
static enum lane_seal_suite fastest = LANE_SEAL_AES256_GCM;

/* Best of MEASURE_ROUNDS per suite, the suites taking turns; a suite that fails rates 0. */
static void measure(void)
{
	static uint8_t buf[MEASURE_BYTES];
	uint8_t secret[LANE_SEAL_SECRET_LEN] = { 0 };
	struct lane_seal s[LANE_SEAL_NSUITES];
	double best[LANE_SEAL_NSUITES];
	bool ok[LANE_SEAL_NSUITES];

	for (unsigned i = 0; i < LANE_SEAL_NSUITES; i++) {
		ok[i] = lane_seal_init_suite(&s[i], (enum lane_seal_suite)(i + 1), secret, 0, true,
					     true) == 0;
		best[i] = 1e9;
	}
	for (unsigned round = 0; round < MEASURE_ROUNDS; round++) {
		for (unsigned i = 0; i < LANE_SEAL_NSUITES; i++) {
			double t = ok[i] ? measure_round(&s[i], buf) : -1;

			ok[i] = ok[i] && t >= 0;
			best[i] = t > 0 ? MIN(best[i], t) : best[i];
		}
	}
	for (unsigned i = 0; i < LANE_SEAL_NSUITES; i++) {
		rates[i] = ok[i] && best[i] < 1e9
			       ? (double)MEASURE_FRAMES * MEASURE_BYTES / MAX(best[i], 1e-9)
			       : 0;
		lane_seal_fini(&s[i]);
	}
	for (unsigned i = 0; i < LANE_SEAL_NSUITES; i++) {
		if (rates[i] * 100 > rates[fastest - 1] * (100 + LANE_SEAL_SUITE_MARGIN)) {
			fastest = (enum lane_seal_suite)(i + 1);
		}
	}
}

static pthread_once_t measured = PTHREAD_ONCE_INIT;

enum lane_seal_suite lane_seal_suite_fastest(void)
{
	pthread_once(&measured, measure);
	return fastest;
}

void lane_seal_suite_rates(double ret_rates[LANE_SEAL_NSUITES])
{
	pthread_once(&measured, measure);
	memcpy(ret_rates, rates, sizeof(rates));
}
