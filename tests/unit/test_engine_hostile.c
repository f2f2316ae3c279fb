/* SPDX-License-Identifier: MIT */
/*
 * One engine against a peer played by hand. A sender by hand: duplicate
 * names, FILES ids out of order, SUMS unasked or twice, FILE_DONE with a
 * wrong hash or byte counts too high and too low, a sender that dies
 * mid-file, an idle sender. A receiver by hand: ERROR before its ring,
 * DELETED after the sender's END (heard) and before it (refused), a bad
 * RING, credits never returned.
 */
#include "engine_harness.h"

/* The same name twice, in one batch and in a later one: DUPLICATE each time; the first is kept. */
static void test_duplicate_names(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t data[100];
	static const uint32_t ids[] = { 1, 2 }, ok_dup[] = { PERR_OK, PERR_DUPLICATE };
	static const uint32_t id3[] = { 3 }, dup[] = { PERR_DUPLICATE };
	static const char *const names[] = { "a", "a" };
	static const uint64_t sizes[] = { sizeof(data), sizeof(data) };

	fill(data, sizeof(data), 7);
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 2, ids, names, sizes);
	raw_ack(&w, 2, ids, ok_dup);
	raw_files(&w, 1, id3, names, sizes);
	raw_ack(&w, 1, id3, dup);
	raw_chunk(&w, 0, 1, 0, data, sizeof(data));
	raw_done(&w, 1, sizeof(data), data, sizeof(data));
	raw_result(&w, 1, PERR_OK, "");
	raw_end(&w, 3);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 2, sizeof(data), PERR_DUPLICATE);
	assert_int_equal(f->rxr.ev.failed, 2);
	assert_dest(f->dst, "a");
	size_t len;
	uint8_t *got = read_file(f->dst, "a", &len);
	assert_non_null(got);
	assert_int_equal(len, sizeof(data));
	assert_memory_equal(got, data, sizeof(data));
	free(got);
	raw_free(&w);
}

/*
 * The same name again once its first entry is resolved: accepted, and it
 * replaces what the first one made. The duplicate check holds the entries in
 * flight only, so that its memory does not grow with the tree.
 */
static void test_duplicate_after_resolved(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t d1[100], d2[100];
	static const uint32_t id1[] = { 1 }, id2[] = { 2 }, ok[] = { PERR_OK };
	static const char *const names[] = { "a" };
	static const uint64_t sizes[] = { sizeof(d1) };
	uint8_t *got;
	size_t len;

	fill(d1, sizeof(d1), 7);
	fill(d2, sizeof(d2), 9);
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, id1, names, sizes);
	raw_ack(&w, 1, id1, ok);
	raw_chunk(&w, 0, 1, 0, d1, sizeof(d1));
	raw_done(&w, 1, sizeof(d1), d1, sizeof(d1));
	raw_result(&w, 1, PERR_OK, "");
	raw_files(&w, 1, id2, names, sizes);
	raw_ack(&w, 1, id2, ok);
	raw_chunk(&w, 1, 2, 0, d2, sizeof(d2));
	raw_done(&w, 2, sizeof(d2), d2, sizeof(d2));
	raw_result(&w, 2, PERR_OK, "");
	raw_end(&w, 2);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 2, 0, 2 * sizeof(d1), PERR_OK);
	assert_dest(f->dst, "a");
	got = read_file(f->dst, "a", &len);
	assert_non_null(got);
	assert_int_equal(len, sizeof(d2));
	assert_memory_equal(got, d2, sizeof(d2));
	free(got);
	raw_free(&w);
}

/* FILE_DONE whose hash is not that of the bytes sent (no test hook): INTEGRITY, nothing committed. */
static void test_file_done_wrong_hash(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t data[100], other[100];
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "h" };
	static const uint64_t sizes[] = { sizeof(data) };

	fill(data, sizeof(data), 8);
	memcpy(other, data, sizeof(other));
	other[99] ^= 1;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	raw_chunk(&w, 0, 1, 0, data, sizeof(data));
	raw_done(&w, 1, sizeof(data), other, sizeof(other));
	raw_result(&w, 1, PERR_INTEGRITY, "checksum mismatch");
	raw_end(&w, 1);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 0, 1, 0, PERR_INTEGRITY);
	assert_int_equal(f->rxr.ev.first_failed_code, PERR_INTEGRITY);
	assert_dest(f->dst, "");
	raw_free(&w);
}

/* FILES ids must strictly increase: a lower id ends the session; the open temp file goes. */
static void test_files_out_of_order(void **state)
{
	struct fx *f = *state;
	struct raw w;
	static const uint32_t id5[] = { 5 }, id4[] = { 4 }, ok[] = { PERR_OK };
	static const char *const name_x[] = { "x" }, *const name_y[] = { "y" };
	static const uint64_t sizes[] = { 2 * CHUNK };

	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, id5, name_x, sizes);
	raw_ack(&w, 1, id5, ok);
	raw_files(&w, 1, id4, name_y, sizes);
	raw_expect_error(&w, PERR_PROTOCOL, "out of order");
	run_join(&f->rxr);

	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, "id 4 out of order");
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_accepted, 2 * CHUNK);
	assert_dest(f->dst, "");
	raw_free(&w);
}

/*
 * Skip level checksum, a hostile sender: a file answered SUM_WANTED gets no
 * FILE_DONE before its answer (a protocol error), and a SUMS entry for a
 * file not asked about, once more after the answer, or twice before it (our
 * own digest held back on the slow disk: the second finds the peer's digest
 * kept already), is refused.
 */
static void sums_hostile(struct fx *f, int round)
{
	static const uint32_t id1[] = { 1 }, want[] = { PERR_SUM_WANTED };
	static const char *const names[] = { "a" };
	static const uint64_t sizes[] = { 100 };
	struct proto_sum ps = { .id = round == 0 ? 2 : 1 };
	struct msg m = { .type = MSG_SUMS, .u.sums = { .count = 1, .sums = &ps } };
	const char *why = round == 2 ? "FILE_DONE" : "SUMS";
	uint8_t data[100];
	struct raw w;

	dest_file(f, "a", 100, 1, (struct timespec){ 0 });
	f->rxr.p.open_flags = PROTO_OPEN_SKIP_CHECKSUM;
	if (round == 3) {
		f->rxr.p.faults |= ENGINE_FAULT_SLOW_DISK;
	}
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, id1, names, sizes);
	raw_ack(&w, 1, id1, want);
	if (round == 0) {
		raw_send(&w, &m); /* id 2: never offered */
	} else if (round == 1) {
		static const uint32_t ok[] = { PERR_OK };

		/* Another digest (all zero): copied, the second answer for id 1 says so. */
		raw_send(&w, &m);
		raw_ack(&w, 1, id1, ok);
		raw_send(&w, &m); /* the same id again */
	} else if (round == 3) {
		raw_send(&w, &m);
		raw_send(&w, &m);
	} else {
		fill(data, sizeof(data), 1);
		raw_done(&w, 1, sizeof(data), data, sizeof(data));
	}
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, why);
	raw_free(&w);
}

static void test_sums_unasked(void **state)
{
	sums_hostile(*state, 0);
}

static void test_sums_twice(void **state)
{
	sums_hostile(*state, 1);
}

static void test_done_before_sum_answer(void **state)
{
	sums_hostile(*state, 2);
}

static void test_sums_twice_before_answer(void **state)
{
	sums_hostile(*state, 3);
}

/* FILE_DONE claiming more bytes than the file has: a protocol error, nothing committed. */
static void test_file_done_too_many_bytes(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t data[100];
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "f" };
	static const uint64_t sizes[] = { sizeof(data) };

	fill(data, sizeof(data), 3);
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	raw_chunk(&w, 0, 1, 0, data, sizeof(data));
	raw_done(&w, 1, 2 * sizeof(data), data, sizeof(data));
	raw_expect_error(&w, PERR_PROTOCOL, "impossible byte count");
	run_join(&f->rxr);

	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, "FILE_DONE: impossible byte count");
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	assert_dest(f->dst, "");
	raw_free(&w);
}

/* FILE_DONE with fewer bytes than announced (all of them sent): that file fails, the session goes on. */
static void test_file_done_short(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t *data = malloc(2 * CHUNK);
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "f" };
	static const uint64_t sizes[] = { 2 * CHUNK };

	assert_non_null(data);
	fill(data, 2 * CHUNK, 4);
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	raw_chunk(&w, 0, 1, 0, data, CHUNK);
	/* The hash of what was sent: only the count is wrong. */
	raw_done(&w, 1, CHUNK, data, CHUNK);
	raw_result(&w, 1, PERR_PROTOCOL, "size mismatch");
	raw_end(&w, 1);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 0, 1, 0, PERR_PROTOCOL);
	assert_int_equal(f->rxr.ev.first_failed_code, PERR_PROTOCOL);
	assert_dest(f->dst, "");
	free(data);
	raw_free(&w);
}

/* The sender dies after the first of two chunks: the receiver fails cleanly, nothing is left. */
static void test_peer_stops_mid_file(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t *data = malloc(CHUNK);
	static const uint32_t ids[] = { 1, 2 }, ok[] = { PERR_OK, PERR_OK };
	static const char *const names[] = { "done", "half" };
	static const uint64_t sizes[] = { 10, 2 * CHUNK };

	assert_non_null(data);
	fill(data, CHUNK, 5);
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 2, ids, names, sizes);
	raw_ack(&w, 2, ids, ok);
	/* One file committed before the end: it stays. */
	raw_chunk(&w, 0, 1, 0, data, 10);
	raw_done(&w, 1, 10, data, 10);
	raw_result(&w, 1, PERR_OK, "");
	raw_chunk(&w, 1, 2, 0, data, CHUNK);
	/* The lanes may still be sending from w.buf: it is freed once they are torn down. */
	f->tx.x->ops->dereg_mr(f->tx.x, w.mr);
	w.mr = NULL;
	end_close(&f->tx); /* no close_notify, lanes torn down */
	raw_free(&w);
	run_join(&f->rxr);

	/* Which goes first, the control connection or the lanes, is the kernel's choice. */
	assert_true(f->rxr.r == -EPIPE || f->rxr.r == -ECONNRESET || f->rxr.r == -EIO);
	assert_failed_run(&f->rxr, f->rxr.r, PERR_TRANSPORT, "");
	assert_stats(&f->rxr.st, 1, 0, 10, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_accepted, 10 + 2 * CHUNK);
	assert_dest(f->dst, "done");
	free(data);
}

/*
 * A sender that goes silent mid-file: TIMEOUT once idle_timeout_ms pass without
 * progress, the peer told, no temp file. One second: FILES is not progress, so
 * the time from RING to the first chunk must stay under it, even on a loaded
 * machine.
 */
static void test_idle_timeout(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t *data = malloc(CHUNK);
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "stalled" };
	static const uint64_t sizes[] = { 2 * CHUNK };
	int64_t t0;

	assert_non_null(data);
	fill(data, CHUNK, 6);
	f->rxr.p.idle_timeout_ms = IDLE_MS;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	/* The receiver's last progress is this chunk: not before t0. */
	t0 = now_ms();
	raw_chunk(&w, 0, 1, 0, data, CHUNK);
	/* Silent from here on (PINGs unanswered); the receiver must end it. */
	raw_expect_error(&w, PERR_TIMEOUT, "idle timeout");
	assert_true(now_ms() - t0 >= IDLE_MS);
	run_join(&f->rxr);

	assert_failed_run(&f->rxr, -ETIMEDOUT, PERR_TIMEOUT, "no data progress");
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_accepted, 2 * CHUNK);
	assert_dest(f->dst, "");
	free(data);
	raw_free(&w);
}

/* The receiver refuses the session before its ring: the sender ends with the peer's code. */
static void test_sender_peer_error(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct msg m = { .type = MSG_ERROR };

	source_file(f, &s, "a", 10);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	run_start(&f->txr);
	m.u.error.code = PERR_NOSPACE;
	snprintf(m.u.error.text, sizeof(m.u.error.text), "disk full");
	assert_int_equal(chan_send(&f->rx.chan, &m), 0);
	run_join(&f->txr);

	assert_failed_run(&f->txr, -EREMOTEIO, PERR_NOSPACE, "peer: disk full");
	assert_stats(&f->txr.st, 0, 0, 0, PERR_OK);
	assert_no_fd_beneath(f->src);
}

/*
 * A receiver played by hand: DELETED between the sender's END and its own is
 * heard (each removal an event, a failure counted); the same message before
 * the sender's END is a protocol error.
 */
static void test_sender_deleted(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	struct proto_status st = { .status = PERR_OK, .text = (char *)"" };
	struct proto_deleted d[] = {
		{ .what = PROTO_DEL_DELETED, .name = (char *)"t/old", .text = (char *)"" },
		{ .what = PROTO_DEL_WITHHELD, .name = (char *)"t/older", .text = (char *)"" },
		{ .what = PROTO_DEL_FAILED,
		  .code = PERR_PERMISSION,
		  .name = (char *)"t/busy",
		  .text = (char *)"unlink: Operation not permitted" },
	};

	source_dir(f, &s, "t");
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.peer_caps = PROTO_CAP_DELETE;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	st.id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
	raw_send(&w, &m);
	raw_expect(&w, MSG_END, &m);
	msg_clear(&m);
	m = (struct msg){ .type = MSG_DELETED, .u.deleted = { .count = 3, .ents = d } };
	raw_send(&w, &m);
	m = (struct msg){ .type = MSG_DELETED }; /* a keepalive */
	raw_send(&w, &m);
	m = (struct msg){ .type = MSG_END };
	raw_send(&w, &m);
	run_join(&f->txr);
	raw_free(&w);

	assert_ok_run(&f->txr);
	assert_int_equal(f->txr.st.files_deleted, 1);
	assert_int_equal(f->txr.st.delete_withheld, 1);
	assert_int_equal(f->txr.st.files_failed, 1);
	assert_int_equal(f->txr.ev.failed, 1);
	assert_int_equal(f->txr.ev.first_failed_code, PERR_PERMISSION);
	assert_false(f->txr.ev.first_failed_local);
}

static void test_sender_deleted_early(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;

	source_dir(f, &s, "t");
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.peer_caps = PROTO_CAP_DELETE;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	msg_clear(&m);
	m = (struct msg){ .type = MSG_DELETED, .u.deleted.flags = PROTO_DELETED_SUPPRESSED };
	raw_send(&w, &m);
	raw_expect_error(&w, PERR_PROTOCOL, "unexpected DELETED");
	run_join(&f->txr);
	raw_free(&w);

	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, "unexpected DELETED");
	assert_false(f->txr.st.delete_suppressed);
}

/* A ring that is not the one agreed: the sender refuses it and says why. */
static void test_sender_bad_ring(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct msg m = { .type = MSG_RING }, got;
	struct raw w = { .end = &f->rx };

	source_file(f, &s, "a", 10);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	run_start(&f->txr);
	m.u.ring.slots = SLOTS + 1;
	m.u.ring.slot_size = CHUNK;
	m.u.ring.nkeys = NLANES;
	assert_int_equal(chan_send(&f->rx.chan, &m), 0);
	raw_next(&w, &got);
	assert_int_equal(got.type, MSG_ERROR);
	assert_int_equal(got.u.error.code, PERR_PROTOCOL);
	assert_non_null(strstr(got.u.error.text, "bad RING"));
	msg_clear(&got);
	run_join(&f->txr);

	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, "bad RING");
	assert_stats(&f->txr.st, 0, 0, 0, PERR_OK);
}

/*
 * A receiver that takes the first chunks and never gives a credit back: the
 * sender fills every slot with the right bytes, then stalls, and ends the
 * session with TIMEOUT after idle_timeout_ms.
 */
static void test_sender_no_credits(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	struct proto_status st = { .status = PERR_OK, .text = (char *)"" };
	size_t size = 6 * CHUNK, len;
	uint8_t *src;
	int64_t deadline;

	source_file(f, &s, "big", size);
	src = read_file(f->src, "big", &len);
	assert_non_null(src);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.idle_timeout_ms = IDLE_MS;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	assert_int_equal(m.u.files.count, 1);
	assert_string_equal(m.u.files.files[0].name, "big");
	assert_int_equal(m.u.files.files[0].size, size);
	st.id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_FILES_ACK };
	m.u.files_ack.count = 1;
	m.u.files_ack.st = &st;
	raw_send(&w, &m);
	/* Every slot written once, each holding the chunk its descriptor names. */
	deadline = now_ms() + IO_MS;
	while (w.data_imms < SLOTS) {
		struct pollfd pfd = { .fd = f->rx.x->ops->event_fd(f->rx.x), .events = POLLIN };

		if (now_ms() > deadline) {
			fail_msg("%u of %u slots written within %d ms", w.data_imms, SLOTS, IO_MS);
		}
		raw_drain(&w, 0, NULL);
		poll(&pfd, 1, 100);
	}
	for (unsigned i = 0; i < SLOTS; i++) {
		uint32_t slot = w.data_slot[i];
		struct proto_desc d;

		assert_true(slot < SLOTS);
		assert_int_equal(
		    proto_desc_decode(w.buf + (size_t)SLOTS * CHUNK + (size_t)slot * PROTO_DESC_LEN,
				      &d),
		    0);
		assert_int_equal(d.file_id, st.id);
		assert_int_equal(d.len, CHUNK);
		assert_int_equal(d.offset % CHUNK, 0);
		assert_true(d.offset < size);
		assert_memory_equal(w.buf + (size_t)slot * CHUNK, src + d.offset, CHUNK);
	}
	raw_expect_error(&w, PERR_TIMEOUT, "idle timeout");
	run_join(&f->txr);
	/* No slot was written twice: without credits there is nowhere else to go. */
	assert_int_equal(w.data_imms, SLOTS);

	assert_failed_run(&f->txr, -ETIMEDOUT, PERR_TIMEOUT, "no data progress");
	assert_stats(&f->txr.st, 0, 0, 0, PERR_OK);
	assert_no_fd_beneath(f->src);
	free(src);
	raw_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_sender_deleted),
		T(test_sender_deleted_early),
		T(test_sums_unasked),
		T(test_sums_twice),
		T(test_done_before_sum_answer),
		T(test_sums_twice_before_answer),
		T(test_duplicate_names),
		T(test_duplicate_after_resolved),
		T(test_file_done_wrong_hash),
		T(test_files_out_of_order),
		T(test_file_done_too_many_bytes),
		T(test_file_done_short),
		T(test_peer_stops_mid_file),
		T(test_idle_timeout),
		T(test_sender_peer_error),
		T(test_sender_bad_ring),
		T(test_sender_no_credits),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
