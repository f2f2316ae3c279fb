/* SPDX-License-Identifier: MIT */
/*
 * The supervisor/session shared table (daemon/session_table.c): the memory
 * budget's reservations, and the log rate limit of its BUSY refusals (the
 * first said at once, the repeats counted, taken by whoever logs next once
 * the interval is over).
 */
#include "session_table.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <unistd.h>

#include <cmocka.h>

static void test_reserve_budget(void **state)
{
	struct session_table *s;

	(void)state;
	assert_int_equal(session_table_create(100, &s), 0);
	assert_int_equal(session_table_reserve(s, 60), 0);
	/* The same process again: its reservation replaced, not added. */
	assert_int_equal(session_table_reserve(s, 100), 0);
	assert_int_equal(session_table_reserve(s, 101), -EBUSY);
	session_table_release(s);
}

static void test_busy_log_rate(void **state)
{
	const uint64_t t0 = 1000000, iv = REFUSE_LOG_INTERVAL_MS;
	struct session_table *s;
	unsigned counted = 99;

	(void)state;
	assert_int_equal(session_table_create(100, &s), 0);
	/* Nothing counted: nothing to say, no timer. */
	assert_int_equal(session_table_take_busy(s, t0, true, &counted), -1);
	assert_int_equal(counted, 0);

	/* The first is said at once, the repeats within the interval counted. */
	assert_true(session_table_note_busy(s, t0, &counted));
	assert_int_equal(counted, 0);
	assert_false(session_table_note_busy(s, t0 + 100, &counted));
	assert_false(session_table_note_busy(s, t0 + 300, &counted));
	assert_false(session_table_note_busy(s, t0 + iv - 1, &counted));

	/* The supervisor: not due yet (the ms until it is), then due. */
	assert_int_equal(session_table_take_busy(s, t0 + iv - 10, false, &counted), 10);
	assert_int_equal(counted, 0);
	assert_int_equal(session_table_take_busy(s, t0 + iv, false, &counted), -1);
	assert_int_equal(counted, 3);

	/* Its line starts a new interval: the next one is counted too. */
	assert_false(session_table_note_busy(s, t0 + iv + 5, &counted));
	/* A refusal once that interval is over is said, with the one counted before it. */
	assert_true(session_table_note_busy(s, t0 + 2 * iv, &counted));
	assert_int_equal(counted, 1);

	/* At shutdown whatever is counted is taken, due or not. */
	assert_false(session_table_note_busy(s, t0 + 2 * iv + 1, &counted));
	assert_int_equal(session_table_take_busy(s, t0 + 2 * iv + 2, true, &counted), -1);
	assert_int_equal(counted, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reserve_budget),
		cmocka_unit_test(test_busy_log_rate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
