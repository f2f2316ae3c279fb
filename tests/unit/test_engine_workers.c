/* SPDX-License-Identifier: MIT */
/*
 * Worker threads on the receiver's copy path (engine_workers.c,
 * engine_rx_slots.c): slots copied (and hashed as they are copied) or
 * sealed slots opened on workers, the ring credited once the copy is made;
 * every kind of slot (chunks in and out of order across two lanes, the last
 * short one, packs, --partial's chunk digests), a byte flipped on the way,
 * a tampered sealed slot, a lane lost, and files failing while jobs are out.
 */
#include "engine_harness.h"

/* The verbs way on tcp: no fences, private copies; n workers on the receiver. */
static void copy_path(struct fx *f, unsigned workers)
{
	f->rxr.p.faults |= ENGINE_FAULT_COPY_SLOTS;
	f->rxr.p.hash_threads = workers;
}

static uint64_t mixed_source(struct fx *f, struct source *s)
{
	uint64_t bytes = 0;

	bytes += source_file(f, s, "big", 37 * CHUNK + 99);
	bytes += source_file(f, s, "p1", 100);
	bytes += source_file(f, s, "p2", 3000);
	bytes += source_file(f, s, "exact", CHUNK);
	bytes += source_file(f, s, "empty", 0);
	bytes += source_file(f, s, "tail", 5 * CHUNK + 1);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK;
	return bytes;
}

static void assert_mixed(struct fx *f, uint64_t bytes)
{
	static const char *const regs[] = { "big", "p1", "p2", "exact", "empty", "tail", NULL };

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 6, 0, bytes, PERR_OK);
	assert_true(f->rxr.st.files_packed >= 2);
	assert_dest(f->dst, "big empty exact p1 p2 tail");
	for (size_t i = 0; regs[i]; i++) {
		assert_same_file(f->src, f->dst, regs[i]);
	}
}

/* Clear slots copied on workers, hashed in the same pass when next in order. */
static void test_workers_copy(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint64_t bytes = mixed_source(f, &s);

	copy_path(f, 2);
	run_both(f, &s);
	assert_mixed(f, bytes);
}

/* The same with one worker (every job on one thread) and with none (the loop copies). */
static void test_workers_one_and_none(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint64_t bytes = mixed_source(f, &s);

	copy_path(f, 1);
	f->txr.p.hash_threads = 1;
	run_both(f, &s);
	assert_mixed(f, bytes);
}

static void test_workers_none(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint64_t bytes = mixed_source(f, &s);

	copy_path(f, 0);
	run_both(f, &s);
	assert_mixed(f, bytes);
}

/* Sealed slots opened on workers, block by block into the copy. */
static void test_workers_sealed(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint64_t bytes = mixed_source(f, &s);

	seal_both(f, 0x5a);
	f->rxr.p.hash_threads = 3;
	run_both(f, &s);
	assert_mixed(f, bytes);
}

/* A sealed slot flipped on the way fails its tag on a worker: nothing committed. */
static void test_workers_sealed_flip(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "a", 3 * CHUNK + 5);
	source_file(f, &s, "b", 2 * CHUNK);
	seal_both(f, 0x5a);
	f->rxr.p.hash_threads = 2;
	f->txr.p.seal_tamper = XPORT_TEST_TAMPER_FLIP;

	run_both(f, &s);

	assert_failed_run(&f->rxr, -EBADMSG, PERR_TRANSPORT, "fails authentication");
	assert_int_not_equal(f->txr.r, 0);
	assert_dest(f->dst, "");
}

/* A byte changed in the copy (FLIP_BYTE): the digest made while copying sees it. */
static void test_workers_flip_byte(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "big", 2 * CHUNK + 5);
	source_file(f, &s, "small", 100);
	copy_path(f, 2);
	f->rxr.p.faults |= ENGINE_FAULT_FLIP_BYTE;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 0, 2, 0, PERR_INTEGRITY);
	assert_dest(f->dst, "");
}

/*
 * A lane lost with slots in flight, sealed: the slots sealed again for the
 * other lane arrive after later ones of the same file took copies. Those
 * hold their ring slots until their turn (rx_copy_credit), so the first
 * ones still find a copy: no stall.
 */
static void lost_lane(struct fx *f, struct run *killer, bool seal)
{
	struct source s = { 0 };
	uint64_t bytes = mixed_source(f, &s);

	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK | PROTO_CAP_RAILS;
	if (seal) {
		seal_both(f, 0x5a);
	}
	copy_path(f, 2);
	killer->p.faults |= ENGINE_FAULT_KILL_LANE;
	killer->p.test_kill_lanes = 1;
	run_both(f, &s);
	assert_mixed(f, bytes);
}

static void test_workers_lane_lost_sealed(void **state)
{
	struct fx *f = *state;

	lost_lane(f, &f->txr, true);
}

static void test_workers_lane_lost_clear(void **state)
{
	struct fx *f = *state;

	lost_lane(f, &f->rxr, false);
}

/* The same with the loop copying (no workers): the rule is the loop's too. */
static void test_workers_lane_lost_loop(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint64_t bytes = mixed_source(f, &s);

	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK | PROTO_CAP_RAILS;
	seal_both(f, 0x5a);
	f->txr.p.faults |= ENGINE_FAULT_KILL_LANE;
	f->txr.p.test_kill_lanes = 1;
	run_both(f, &s);
	assert_mixed(f, bytes);
}

/*
 * Every job waits 20 ms (SLOW_HASH) while bytes arrive: many copies out at
 * once, all let go in order; a session ended while they are out (the
 * receiver's idle timeout is not reached: a short run) tears down cleanly.
 */
static void test_workers_slow_jobs(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint64_t bytes = mixed_source(f, &s);

	copy_path(f, 2);
	f->rxr.p.faults |= ENGINE_FAULT_SLOW_HASH;
	run_both(f, &s);
	assert_mixed(f, bytes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_workers_copy),
		T(test_workers_one_and_none),
		T(test_workers_none),
		T(test_workers_sealed),
		T(test_workers_sealed_flip),
		T(test_workers_flip_byte),
		T(test_workers_lane_lost_sealed),
		T(test_workers_lane_lost_clear),
		T(test_workers_lane_lost_loop),
		T(test_workers_slow_jobs),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
