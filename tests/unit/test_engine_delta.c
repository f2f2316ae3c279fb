/* SPDX-License-Identifier: MIT */
/*
 * --delta (PROTO_CAP_DELTA): SAME ranges by hand and a delta transfer
 * between two engines; SAME, SUMS and a chunk inside a SAME range refused
 * where they do not fit.
 */
#include "engine_harness.h"

#define DELTA_SIZE (3 * (uint64_t)CHUNK + 10)

static void raw_same(struct raw *w, uint32_t id, uint64_t off, uint64_t len)
{
	struct msg m = { .type = MSG_DELTA };

	m.u.delta.id = id;
	m.u.delta.kind = PROTO_DELTA_SAME;
	m.u.delta.count = 1;
	m.u.delta.r[0] = (struct proto_range){ .offset = off, .len = len };
	raw_send(w, &m);
}

/*
 * A hand-played sender to a --delta receiver that has the file, one chunk
 * of it changed since: the receiver's SUMS are the old file's chunks; the
 * unchanged chunks go as SAME, the changed one as data; the file is
 * replaced by the new contents, verified, and the stats say what crossed.
 */
static void test_delta_by_hand(void **state)
{
	struct fx *f = *state;
	struct raw w;
	struct msg m;
	uint8_t *old = malloc(DELTA_SIZE), *now = malloc(DELTA_SIZE), h[HASH_LEN];
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "d" };
	static const uint64_t sizes[] = { DELTA_SIZE };
	size_t got;
	uint8_t *out;

	assert_non_null(old);
	assert_non_null(now);
	fill(old, DELTA_SIZE, 3);
	memcpy(now, old, DELTA_SIZE);
	fill(now + CHUNK, CHUNK, 4);
	write_file(f->dst, "d", old, DELTA_SIZE);
	f->rxr.p.peer_caps = PROTO_CAP_DELTA;
	f->rxr.p.open_flags = PROTO_OPEN_DELTA;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_expect(&w, MSG_DELTA, &m);
	assert_int_equal(m.u.delta.id, 1);
	assert_int_equal(m.u.delta.kind, PROTO_DELTA_SUMS);
	assert_true(m.u.delta.first == 0);
	assert_int_equal(m.u.delta.count, 4);
	for (uint64_t i = 0; i < 4; i++) {
		hash_of(old + i * CHUNK, MIN((uint64_t)CHUNK, DELTA_SIZE - i * CHUNK), h);
		assert_memory_equal(m.u.delta.sums[i], h, HASH_LEN);
	}
	raw_ack(&w, 1, ids, ok);
	raw_same(&w, 1, 0, CHUNK);
	raw_chunk(&w, 0, 1, CHUNK, now + CHUNK, CHUNK);
	raw_same(&w, 1, 2 * CHUNK, CHUNK + 10);
	raw_done(&w, 1, CHUNK, now, DELTA_SIZE);
	raw_result(&w, 1, PERR_OK, "");
	raw_end(&w, 1);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, CHUNK, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_unchanged, 2 * CHUNK + 10);
	out = read_file(f->dst, "d", &got);
	assert_int_equal(got, DELTA_SIZE);
	assert_memory_equal(out, now, DELTA_SIZE);
	free(out);
	free(old);
	free(now);
	raw_free(&w);
}

/* Both engines: 1 chunk of 4 changed crosses, the rest is taken from the old file. */
static void test_delta_transfer(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint8_t *old;
	size_t got;
	uint8_t *now, *out;

	source_file(f, &s, "d", DELTA_SIZE);
	now = read_file(f->src, "d", &got);
	assert_int_equal(got, DELTA_SIZE);
	old = malloc(DELTA_SIZE);
	assert_non_null(old);
	memcpy(old, now, DELTA_SIZE);
	fill(old + 2 * CHUNK, 100, 8);
	write_file(f->dst, "d", old, DELTA_SIZE);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_DELTA;
	f->txr.p.open_flags = f->rxr.p.open_flags = PROTO_OPEN_DELTA;
	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, CHUNK, PERR_OK);
	assert_stats(&f->txr.st, 1, 0, CHUNK, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_unchanged, 2 * CHUNK + 10);
	assert_int_equal(f->txr.st.bytes_unchanged, 2 * CHUNK + 10);
	out = read_file(f->dst, "d", &got);
	assert_int_equal(got, DELTA_SIZE);
	assert_memory_equal(out, now, DELTA_SIZE);
	free(out);
	free(now);
	free(old);
}

/* A SAME the receiver refuses: the session ends PROTOCOL, nothing committed. */
static void same_refused(void **state, bool have_old, uint64_t caps, uint64_t off, uint64_t len,
			 const char *why)
{
	struct fx *f = *state;
	struct raw w;
	struct msg m;
	uint8_t *old = malloc(DELTA_SIZE);
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "d" };
	static const uint64_t sizes[] = { DELTA_SIZE };

	assert_non_null(old);
	fill(old, DELTA_SIZE, 3);
	if (have_old) {
		write_file(f->dst, "d", old, DELTA_SIZE);
	}
	f->rxr.p.peer_caps = caps;
	f->rxr.p.open_flags = PROTO_OPEN_DELTA;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	if (have_old && caps) {
		raw_expect(&w, MSG_DELTA, &m);
		msg_clear(&m);
	}
	raw_ack(&w, 1, ids, ok);
	raw_same(&w, 1, off, len);
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, why);
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	free(old);
	raw_free(&w);
}

static void test_delta_same_refused(void **state)
{
	/* No old file (no SUMS were sent); a peer without DELTA. */
	same_refused(state, false, PROTO_CAP_DELTA, 0, CHUNK, "out of place");
	fx_teardown(state);
	fx_setup(state);
	same_refused(state, true, 0, 0, CHUNK, "out of place");
	fx_teardown(state);
	fx_setup(state);
	/* Not whole chunks, past the end. */
	same_refused(state, true, PROTO_CAP_DELTA, 0, CHUNK / 2, "not whole chunks");
	fx_teardown(state);
	fx_setup(state);
	same_refused(state, true, PROTO_CAP_DELTA, 3 * CHUNK, CHUNK, "not whole chunks");
	fx_teardown(state);
	fx_setup(state);
	same_refused(state, true, PROTO_CAP_DELTA, 100, CHUNK, "not whole chunks");
}

/*
 * A chunk inside a SAME range not yet taken into the digest (the range is
 * past hash_off, which stays at 0): refused (rx_range_holds), nothing
 * committed.
 */
static void test_delta_chunk_inside_same(void **state)
{
	struct fx *f = *state;
	struct raw w;
	struct msg m;
	uint8_t *old = malloc(DELTA_SIZE);
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "d" };
	static const uint64_t sizes[] = { DELTA_SIZE };
	const char *why = "inside its unchanged ranges";

	assert_non_null(old);
	fill(old, DELTA_SIZE, 3);
	write_file(f->dst, "d", old, DELTA_SIZE);
	f->rxr.p.peer_caps = PROTO_CAP_DELTA;
	f->rxr.p.open_flags = PROTO_OPEN_DELTA;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_expect(&w, MSG_DELTA, &m);
	msg_clear(&m);
	raw_ack(&w, 1, ids, ok);
	raw_same(&w, 1, 2 * CHUNK, CHUNK + 10);
	raw_chunk(&w, 0, 1, 2 * CHUNK, old + 2 * CHUNK, CHUNK);
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, why);
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	free(old);
	raw_free(&w);
}

/* SUMS the sender refuses: out of order, more than the file's chunks, from a peer without DELTA. */
static void sums_refused(void **state, uint64_t caps, uint64_t first, uint16_t count,
			 const char *why)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	uint32_t id;

	source_file(f, &s, "d", DELTA_SIZE);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.peer_caps = caps;
	f->txr.p.open_flags = PROTO_OPEN_DELTA;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_DELTA };
	m.u.delta.id = id;
	m.u.delta.kind = PROTO_DELTA_SUMS;
	m.u.delta.first = first;
	m.u.delta.count = count;
	raw_send(&w, &m);
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->txr);
	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, why);
	assert_stats(&f->txr.st, 0, 0, 0, PERR_OK);
	raw_free(&w);
}

static void test_delta_sums_refused(void **state)
{
	sums_refused(state, 0, 0, 1, "out of place");
	fx_teardown(state);
	fx_setup(state);
	sums_refused(state, PROTO_CAP_DELTA, 1, 1, "out of place");
	fx_teardown(state);
	fx_setup(state);
	sums_refused(state, PROTO_CAP_DELTA, 0, 5, "the file has 4");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_delta_by_hand),	    T(test_delta_transfer),
		T(test_delta_same_refused), T(test_delta_chunk_inside_same),
		T(test_delta_sums_refused),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
