/* SPDX-License-Identifier: MIT */
/*
 * The supervisor/session shared table (daemon/session_table.c): the memory
 * budget's reservations, and the log rate limit of its BUSY refusals (the
 * first said at once, the repeats counted, taken by whoever logs next once
 * the interval is over), and the sessions counted per module.
 */
#include "session_table.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <sys/wait.h>
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
	assert_int_equal(session_table_take_busy(s, SESSION_BUSY_MEMORY, t0, true, &counted), -1);
	assert_int_equal(counted, 0);

	/* The first is said at once, the repeats within the interval counted. */
	assert_true(session_table_note_busy(s, SESSION_BUSY_MEMORY, t0, &counted));
	assert_int_equal(counted, 0);
	assert_false(session_table_note_busy(s, SESSION_BUSY_MEMORY, t0 + 100, &counted));
	assert_false(session_table_note_busy(s, SESSION_BUSY_MEMORY, t0 + 300, &counted));
	assert_false(session_table_note_busy(s, SESSION_BUSY_MEMORY, t0 + iv - 1, &counted));

	/* The supervisor: not due yet (the ms until it is), then due. */
	assert_int_equal(
	    session_table_take_busy(s, SESSION_BUSY_MEMORY, t0 + iv - 10, false, &counted), 10);
	assert_int_equal(counted, 0);
	assert_int_equal(session_table_take_busy(s, SESSION_BUSY_MEMORY, t0 + iv, false, &counted),
			 -1);
	assert_int_equal(counted, 3);

	/* Its line starts a new interval: the next one is counted too. */
	assert_false(session_table_note_busy(s, SESSION_BUSY_MEMORY, t0 + iv + 5, &counted));
	/* A refusal once that interval is over is said, with the one counted before it. */
	assert_true(session_table_note_busy(s, SESSION_BUSY_MEMORY, t0 + 2 * iv, &counted));
	assert_int_equal(counted, 1);

	/* At shutdown whatever is counted is taken, due or not. */
	assert_false(session_table_note_busy(s, SESSION_BUSY_MEMORY, t0 + 2 * iv + 1, &counted));
	assert_int_equal(
	    session_table_take_busy(s, SESSION_BUSY_MEMORY, t0 + 2 * iv + 2, true, &counted), -1);
	assert_int_equal(counted, 1);
}

/*
 * A module's "max connections": sessions are counted per module across
 * processes; a session at the limit is refused, entering the module it is
 * in already is not counted twice, and a reaped session frees its place.
 */
static void test_module_sessions(void **state)
{
	struct session_table *s;
	int ready[2], done[2];
	char c;
	pid_t pid;

	(void)state;
	assert_int_equal(session_table_create(100, &s), 0);
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(done), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int r = session_table_enter_module(s, "a", 1);

		(void)!write(ready[1], r == 0 ? "y" : "n", 1);
		(void)!read(done[0], &c, 1);
		_exit(0);
	}
	assert_int_equal(session_table_register(s, pid), session_table_register(s, pid));
	assert_int_equal(read(ready[0], &c, 1), 1);
	assert_int_equal(c, 'y');
	assert_int_equal(session_table_module_sessions(s, "a"), 1);
	/* The other session holds module a's one place; b has room. */
	assert_int_equal(session_table_enter_module(s, "a", 1), -EBUSY);
	assert_int_equal(session_table_enter_module(s, "a", 2), 0);
	assert_int_equal(session_table_enter_module(s, "a", 1), 0); /* in it already */
	assert_int_equal(session_table_enter_module(s, "b", 1), 0);
	assert_int_equal(session_table_module_sessions(s, "a"), 1);
	assert_int_equal(session_table_module_sessions(s, "b"), 1);
	(void)!write(done[1], "x", 1);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	session_table_reap(s, pid);
	assert_int_equal(session_table_module_sessions(s, "a"), 0);
	assert_int_equal(session_table_enter_module(s, "a", 1), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reserve_budget),
		cmocka_unit_test(test_busy_log_rate),
		cmocka_unit_test(test_module_sessions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
