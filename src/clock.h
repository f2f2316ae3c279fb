/* SPDX-License-Identifier: MIT */
/* Monotonic milliseconds and deadlines, for every wait with a time limit. */
#pragma once

#include <stdint.h>
#include <time.h>

static inline int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
