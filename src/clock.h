/* SPDX-License-Identifier: MIT */
/*
 * The monotonic clock: milliseconds and deadlines for every wait with a time
 * limit, seconds for rates and durations shown to the user.
 */
#pragma once

#include <stdint.h>
#include <time.h>

static inline int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Monotonic seconds, for durations and rates. */
static inline double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Milliseconds left until deadline (a now_ms() value), 0 when passed, for poll(). */
static inline int remaining_ms(int64_t deadline)
{
	int64_t left = deadline - now_ms();

	if (left <= 0) {
		return 0;
	}
	return left > INT32_MAX ? INT32_MAX : (int)left;
}
