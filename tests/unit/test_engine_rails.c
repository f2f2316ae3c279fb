/* SPDX-License-Identifier: MIT */
/*
 * Rails (PROTO_CAP_RAILS): a lane lost mid-transfer, killed by the sender or
 * the receiver, sealed or clear, or all of them; a peer without rails; a
 * receiver that lies about the lanes it lost; the least loaded lane chosen;
 * a LANE_DOWN nobody expected.
 */
#include "engine_harness.h"

/*
 * A big file of many chunks, small packed files, a tail of whole chunks:
 * killer (the sender or the receiver) takes kill lanes down
 * (ENGINE_FAULT_KILL_LANE), sealed slots or clear.
 */
static void rails_transfer(struct fx *f, struct run *killer, unsigned kill, bool seal)
{
	struct source s = { 0 };
	static const char *const regs[] = { "big", "p1", "p2", "p3", "tail", NULL };
	uint64_t bytes = 0;

	bytes += source_file(f, &s, "big", 40 * CHUNK + 99);
	bytes += source_file(f, &s, "p1", 100);
	bytes += source_file(f, &s, "p2", 3000);
	bytes += source_file(f, &s, "p3", 7);
	bytes += source_file(f, &s, "tail", 3 * CHUNK);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK | PROTO_CAP_RAILS;
	if (seal) {
		seal_both(f, 0x5a);
	}
	killer->p.faults |= ENGINE_FAULT_KILL_LANE;
	killer->p.test_kill_lanes = kill;

	run_both(f, &s);

	if (kill >= NLANES) {
		/* The last lane lost: the session fails as before, nothing committed. */
		assert_int_not_equal(f->txr.r, 0);
		assert_int_not_equal(f->rxr.r, 0);
		assert_non_null(strstr(killer->err, "every data lane is down"));
		assert_dest(f->dst, "");
		return;
	}
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 5, 0, bytes, PERR_OK);
	assert_dest(f->dst, "big p1 p2 p3 tail");
	for (size_t i = 0; regs[i]; i++) {
		assert_same_file(f->src, f->dst, regs[i]);
	}
}

/* Sealed slots (verbs' encryption): a slot sealed for the lost lane is sealed again for another. */
static void test_rails_sealed_sender_kills(void **state)
{
	struct fx *f = *state;

	rails_transfer(f, &f->txr, 1, true);
}

/*
 * The sender sealing on its workers, each job slow (20 ms): a lane lost
 * with chunks still being sealed for it, and others sealed and waiting
 * for their turn on it, sends them on the other lane, sealed for that one.
 */
static void test_rails_sealed_sender_workers(void **state)
{
	struct fx *f = *state;

	f->txr.p.hash_threads = 2;
	f->txr.p.faults |= ENGINE_FAULT_SLOW_HASH;
	rails_transfer(f, &f->txr, 1, true);
}

static void test_rails_sealed_sender_workers_rx_kills(void **state)
{
	struct fx *f = *state;

	f->txr.p.hash_threads = 3;
	f->rxr.p.hash_threads = 2;
	rails_transfer(f, &f->rxr, 1, true);
}

/*
 * The same under the other suites: a sealed payload goes back to clear bytes
 * (its stream applied again, slot_unseal) under the session's suite, or the
 * slot sealed again for the other lane would not open.
 */
static void test_rails_sealed_chacha_sender_kills(void **state)
{
	struct fx *f = *state;

	f->txr.p.seal_suite = f->rxr.p.seal_suite = LANE_SEAL_CHACHA20_POLY1305;
	rails_transfer(f, &f->txr, 1, true);
}

static void test_rails_sealed_aes128_sender_kills(void **state)
{
	struct fx *f = *state;

	f->txr.p.seal_suite = f->rxr.p.seal_suite = LANE_SEAL_AES128_GCM;
	rails_transfer(f, &f->txr, 1, true);
}

static void test_rails_clear_sender_kills(void **state)
{
	struct fx *f = *state;

	rails_transfer(f, &f->txr, 1, false);
}

/* The receiver's credits in flight on the lost lane go again on the other. */
static void test_rails_sealed_receiver_kills(void **state)
{
	struct fx *f = *state;

	rails_transfer(f, &f->rxr, 1, true);
}

static void test_rails_all_lanes(void **state)
{
	struct fx *f = *state;

	rails_transfer(f, &f->txr, NLANES, true);
}

/*
 * Without rails (a peer that does not announce them; t_rails.sh runs real
 * programs without the capability): a lost lane fails the session as it
 * always did.
 */
static void test_rails_peer_without(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "big", 40 * CHUNK);
	f->txr.p.faults = ENGINE_FAULT_KILL_LANE;
	f->txr.p.test_kill_lanes = 1;

	run_both(f, &s);

	/* Whichever end saw it first says so; the other has it from its ERROR. */
	assert_int_equal(f->txr.code, PERR_TRANSPORT);
	assert_int_equal(f->rxr.code, PERR_TRANSPORT);
	assert_non_null(strstr(f->txr.err, "data transport"));
	assert_null(strstr(f->txr.err, "every data lane"));
	assert_dest(f->dst, "");
}

/*
 * A receiver that lies in its LANE_DOWN (it took more than went on the lane,
 * or fewer than the sender saw completed): the sender fails the session and
 * posts nothing again.
 */
static void rails_lying_receiver(struct fx *f, uint64_t count, const char *why)
{
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	struct proto_status st = { .status = PERR_OK, .text = (char *)"" };
	int64_t deadline;

	source_file(f, &s, "big", 6 * CHUNK);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.peer_caps = PROTO_CAP_RAILS;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	st.id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
	raw_send(&w, &m);
	deadline = now_ms() + IO_MS;
	while (w.data_imms < SLOTS) {
		struct pollfd pfd = { .fd = f->rx.x->ops->event_fd(f->rx.x), .events = POLLIN };

		if (now_ms() > deadline) {
			fail_msg("%u of %u slots written within %d ms", w.data_imms, SLOTS, IO_MS);
		}
		raw_drain(&w, 0, NULL);
		poll(&pfd, 1, 100);
	}
	/* The sender has its write completions by now. */
	usleep(200 * 1000);
	m = (struct msg){ .type = MSG_LANE_DOWN, .u.lane_down = { .lane = 0, .count = count } };
	raw_send(&w, &m);
	/* Its own LANE_DOWN (its count of credits: none), then its ERROR. */
	raw_expect(&w, MSG_LANE_DOWN, &m);
	assert_int_equal(m.u.lane_down.lane, 0);
	assert_true(m.u.lane_down.count == 0);
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->txr);
	raw_free(&w);

	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, why);
}

static void test_rails_receiver_claims_too_many(void **state)
{
	rails_lying_receiver(*state, 1000, "LANE_DOWN: the peer took 1000 slots on lane 0");
}

static void test_rails_receiver_claims_too_few(void **state)
{
	rails_lying_receiver(*state, 0, "LANE_DOWN: the peer took 0 slots on lane 0");
}

/* A played receiver: wait until want data immediates came. */
static void raw_wait_data(struct raw *w, unsigned want)
{
	int64_t deadline = now_ms() + IO_MS;

	while (w->data_imms < want) {
		struct pollfd pfd = { .fd = w->end->x->ops->event_fd(w->end->x), .events = POLLIN };

		if (now_ms() > deadline) {
			fail_msg("%u of %u slots written within %d ms", w->data_imms, want, IO_MS);
		}
		raw_drain(w, 0, NULL);
		poll(&pfd, 1, 100);
	}
}

/*
 * Lanes by load: a receiver that credits only the slots that came on lane 0
 * leaves lane 1 with two slots outstanding, so the sender's next slots all
 * go on lane 0 (round robin would put every other one on lane 1).
 */
static void test_rails_least_loaded(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	struct proto_status st = { .status = PERR_OK, .text = (char *)"" };
	struct xport *x = f->rx.x;
	unsigned on0 = 0;

	source_file(f, &s, "big", 12 * CHUNK);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	st.id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
	raw_send(&w, &m);
	raw_wait_data(&w, SLOTS);
	for (unsigned i = 0; i < SLOTS; i++) {
		if (w.data_lane[i] != 0) {
			continue;
		}
		struct xport_wr wr = { .wr_id = ++w.wr_id,
				       .opcode = XPORT_OP_WRITE_IMM,
				       .flags = XPORT_SEND_SIGNALED,
				       .imm = proto_imm(PROTO_IMM_CREDIT, w.data_slot[i]),
				       .lane = 0 };

		assert_int_equal(x->ops->post_writes(x, &wr, 1), 0);
		on0++;
	}
	/* Equal loads take turns: the first slots went half on each lane. */
	assert_int_equal(on0, SLOTS / NLANES);
	raw_wait_data(&w, SLOTS + on0);
	for (unsigned i = SLOTS; i < SLOTS + on0; i++) {
		assert_int_equal(w.data_lane[i], 0);
	}
	m = (struct msg){ .type = MSG_ERROR, .u.error = { .code = PERR_SHUTDOWN } };
	snprintf(m.u.error.text, sizeof(m.u.error.text), "enough");
	raw_send(&w, &m);
	run_join(&f->txr);
	raw_free(&w);

	assert_failed_run(&f->txr, -EREMOTEIO, PERR_SHUTDOWN, "enough");
}

/* LANE_DOWN from a peer that never said it has rails: refused. */
static void test_rails_unexpected_lane_down(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;

	source_file(f, &s, "big", 6 * CHUNK);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	msg_clear(&m);
	m = (struct msg){ .type = MSG_LANE_DOWN, .u.lane_down = { .lane = 1, .count = 0 } };
	raw_send(&w, &m);
	raw_expect_error(&w, PERR_PROTOCOL, "unexpected LANE_DOWN");
	run_join(&f->txr);
	raw_free(&w);

	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, "unexpected LANE_DOWN");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_rails_sealed_sender_kills),
		T(test_rails_sealed_chacha_sender_kills),
		T(test_rails_sealed_sender_workers),
		T(test_rails_sealed_sender_workers_rx_kills),
		T(test_rails_sealed_aes128_sender_kills),
		T(test_rails_clear_sender_kills),
		T(test_rails_sealed_receiver_kills),
		T(test_rails_all_lanes),
		T(test_rails_peer_without),
		T(test_rails_receiver_claims_too_many),
		T(test_rails_receiver_claims_too_few),
		T(test_rails_unexpected_lane_down),
		T(test_rails_least_loaded),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
