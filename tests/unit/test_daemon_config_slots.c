/* SPDX-License-Identifier: MIT */
/*
 * rdmacpd.conf's "max slots" and the ring a session is sized with
 * (serve_lanes_size): the default, good and bad values with their line, the
 * check against "pool size", and what a client's ask becomes under "max
 * slots", "pool size" and the chunk size limits.
 */
#include "config.h"

#include <pwd.h>
#include <stdio.h>
#include <unistd.h>

#include "daemon_config_harness.h"
#include "engine.h"
#include "serve_internal.h"
#include "testutil.h"

static void test_default_and_values(void **state)
{
	struct daemon_config *c;

	(void)state;
	write_conf("");
	c = load_ok();
	assert_int_equal(c->max_slots, DAEMON_DEFAULT_MAX_SLOTS);
	daemon_config_free(c);
	write_conf("max slots = 8\n");
	c = load_ok();
	assert_int_equal(c->max_slots, 8);
	daemon_config_free(c);
	/* The most the default pool (64 MiB) holds of the smallest chunk (64 KiB). */
	write_conf("max slots = 1024\n");
	c = load_ok();
	assert_int_equal(c->max_slots, 1024);
	daemon_config_free(c);
	write_conf("pool size = 256M\nmax slots = 4096\n");
	c = load_ok();
	assert_int_equal(c->max_slots, 4096);
	daemon_config_free(c);
}

static void test_bad_values(void **state)
{
	static const char *const bad[] = { "0", "1", "4097", "-2", "abc", "", "8 slots", "1e3" };
	char body[128];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body), "max slots = %s\n", bad[i]);
		write_conf(body);
		expect_error(BASE_LINES + 1, "'max slots'");
		write_conf(body);
		expect_error(BASE_LINES + 1, "2..4096");
	}
	write_conf("max slots = 8\nmax slots = 16\n");
	expect_error(BASE_LINES + 2, "duplicate key 'max slots'");
}

/* A count "pool size" can never hold, even of the smallest chunk: said where it is written. */
static void test_against_pool(void **state)
{
	(void)state;
	write_conf("max slots = 1025\n");
	expect_error(BASE_LINES + 1, "more than 'pool size' (64 MiB) can ever hold: 1024");
	write_conf("max slots = 512\npool size = 16M\n");
	expect_error(BASE_LINES + 1, "raise 'pool size' or lower 'max slots'");
	/* Only the pool written: the default "max slots" follows it, no error. */
	write_conf("pool size = 16M\n");
	daemon_config_free(load_ok());
}

static void test_ring_size(void **state)
{
	static const struct {
		unsigned max_slots;
		uint64_t pool;
		uint32_t chunk, ask;
		uint32_t want_chunk, want_slots;
	} rows[] = {
		{ 1024, 64 << 20, 1 << 20, 32, 1 << 20, 32 },	    /* as asked */
		{ 8, 64 << 20, 1 << 20, 64, 1 << 20, 8 },	    /* "max slots" */
		{ 1024, 64 << 20, 4 << 20, 32, 4 << 20, 16 },	    /* "pool size" / 4 MiB */
		{ 1024, 64 << 20, 64 << 10, 4096, 64 << 10, 1024 }, /* both at once */
		{ 1024, 64 << 20, 1 << 20, 2, 1 << 20, 2 },	    /* --slots 2 */
		{ 2, 64 << 20, 1 << 20, 64, 1 << 20, 2 },	    /* the smallest cap */
		{ 1024, 1 << 20, 16 << 20, 64, 16 << 20, 2 },  /* two slots even past the pool */
		{ 1024, 64 << 20, 4 << 10, 64, 64 << 10, 64 }, /* chunk raised to 64 KiB */
		{ 1024, 256 << 20, 64 << 20, 8, 16 << 20, 8 }, /* chunk lowered to 16 MiB */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct daemon_config cfg = { .max_slots = rows[i].max_slots,
					     .pool_size = rows[i].pool };
		struct engine_params ep = { 0 };

		serve_lanes_size(&cfg, rows[i].chunk, rows[i].ask, &ep);
		if (ep.chunk_size != rows[i].want_chunk || ep.slots != rows[i].want_slots) {
			fail_msg("row %zu: chunk %u, %u slots; want %u, %u", i, ep.chunk_size,
				 ep.slots, rows[i].want_chunk, rows[i].want_slots);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_and_values),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_against_pool),
		cmocka_unit_test(test_ring_size),
	};

	if (geteuid() == 0 && !getpwnam(DAEMON_DEFAULT_USER)) {
		printf("SKIP: no system user '%s' (scripts/deps.sh creates it)\n",
		       DAEMON_DEFAULT_USER);
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
