/* SPDX-License-Identifier: MIT */
/*
 * Packed slots (PROTO_CAP_PACK): sizes around a pack's bounds, a peer
 * without them, a flipped byte in a pack, a pack by hand with a wrong digest
 * and a sender's failure inside it, and packs refused (a file not in flight,
 * another length, a file twice, a file sent a chunk already, a table that
 * does not add up, no capability), and a packed file sent more after its
 * piece (a chunk, zeros).
 */
#include "engine_harness.h"

/*
 * Sizes around a pack's bounds with packing on (a quarter chunk is the most
 * a packed file may have; one byte more goes alone, as does a file filling a
 * chunk exactly or spanning several), an empty file, a directory between:
 * byte-exact, both sides count the packed files and slots.
 */
static void test_pack_transfer(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	static const char *const regs[] = { "empty", "one",  "small",  "quarter", "over",
					    "exact", "span", "d/tail", NULL };
	uint64_t bytes = 0;

	bytes += source_file(f, &s, "empty", 0);
	bytes += source_file(f, &s, "one", 1);
	bytes += source_file(f, &s, "small", 100);
	bytes += source_file(f, &s, "quarter", CHUNK / 4);
	bytes += source_file(f, &s, "over", CHUNK / 4 + 1);
	bytes += source_file(f, &s, "exact", CHUNK);
	bytes += source_file(f, &s, "span", 2 * CHUNK + 5);
	source_dir(f, &s, "d");
	bytes += source_file(f, &s, "d/tail", 3000);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 9, 0, bytes, PERR_OK);
	assert_stats(&f->txr.st, 9, 0, bytes, PERR_OK);
	/* one, small, quarter, d/tail: no other file may be packed */
	assert_int_equal(f->txr.st.files_packed, 4);
	assert_int_equal(f->rxr.st.files_packed, 4);
	assert_true(f->rxr.st.packed_slots >= 1 && f->rxr.st.packed_slots <= 4);
	assert_int_equal(f->rxr.st.packed_slots, f->txr.st.packed_slots);
	assert_dest(f->dst, "d d/tail empty exact one over quarter small span");
	for (size_t i = 0; regs[i]; i++) {
		assert_same_file(f->src, f->dst, regs[i]);
	}
	assert_no_fd_beneath(f->src);
}

/*
 * A pack filled to within one table entry of its chunk (three quarter-chunk
 * files and one that leaves less room than an entry needs): the next small
 * file goes into a new pack. It once joined the full one (the room left,
 * computed unsigned, wrapped), whose reads then ran past its chunk.
 */
static void test_pack_nearly_full(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	static const char *const regs[] = { "a", "b", "c", "d", "e", NULL };
	uint64_t bytes = 0;

	bytes += source_file(f, &s, "a", CHUNK / 4);
	bytes += source_file(f, &s, "b", CHUNK / 4);
	bytes += source_file(f, &s, "c", CHUNK / 4);
	/* 4 entries now; a fifth would need more room than the one byte left. */
	bytes += source_file(f, &s, "d", CHUNK / 4 - 4 * PROTO_PIECE_LEN - 1);
	bytes += source_file(f, &s, "e", 100);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 5, 0, bytes, PERR_OK);
	assert_int_equal(f->txr.st.files_packed, 5);
	assert_int_equal(f->rxr.st.packed_slots, 2);
	for (size_t i = 0; regs[i]; i++) {
		assert_same_file(f->src, f->dst, regs[i]);
	}
}

/* Packing only when both ends announced it: a peer without it gets a chunk per file. */
static void test_pack_without_cap(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "a", 10);
	source_file(f, &s, "b", 20);
	/* The receiver's HELLO lacked it (the sender's had it): one chunk per file. */
	f->rxr.p.peer_caps = PROTO_CAP_PACK;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 2, 0, 30, PERR_OK);
	assert_int_equal(f->txr.st.files_packed, 0);
	assert_int_equal(f->rxr.st.files_packed, 0);
	assert_same_file(f->src, f->dst, "a");
	assert_same_file(f->src, f->dst, "b");
}

/* The flipped byte (receiver's hook) lands in a pack's first file: that file alone fails. */
static void test_pack_checksum_mismatch(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "a", 100);
	source_file(f, &s, "b", 200);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK;
	f->rxr.p.faults = ENGINE_FAULT_FLIP_BYTE;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_packed, 2);
	assert_int_equal(f->rxr.st.packed_slots, 1);
	assert_stats(&f->rxr.st, 1, 1, 200, PERR_INTEGRITY);
	assert_stats(&f->txr.st, 1, 1, 200, PERR_INTEGRITY);
	assert_dest(f->dst, "b");
	assert_same_file(f->src, f->dst, "b");
}

/* n FILE_RESULTs, in any order: ids[i] gets status[i]. */
static void raw_results(struct raw *w, size_t n, const uint32_t *ids, const uint32_t *status)
{
	bool seen[8] = { false };

	assert_true(n <= 8);
	for (size_t k = 0; k < n; k++) {
		struct msg m;
		size_t i;

		raw_expect(w, MSG_FILE_RESULT, &m);
		for (i = 0; i < n && (ids[i] != m.u.file_result.id || seen[i]); i++) {
		}
		if (i == n) {
			fail_msg("FILE_RESULT for id %u unexpected", m.u.file_result.id);
		}
		if (m.u.file_result.status != status[i]) {
			fail_msg("FILE_RESULT %u: %s (%s), expected %s", ids[i],
				 proto_err_name(m.u.file_result.status), m.u.file_result.text,
				 proto_err_name(status[i]));
		}
		seen[i] = true;
		msg_clear(&m);
	}
}

/*
 * A pack made by hand: four files in one slot (the last one filling it to
 * the byte with the table), an empty file beside them; the second's
 * FILE_DONE carries a wrong digest, the third's the sender's own failure:
 * those two fail, the others are committed, nothing else is left.
 */
static void test_pack_by_hand(void **state)
{
	struct fx *f = *state;
	struct raw w;
	static const uint32_t ids[] = { 1, 2, 3, 4, 5 };
	static const uint32_t ok5[] = { PERR_OK, PERR_OK, PERR_OK, PERR_OK, PERR_OK };
	static const char *const names[] = { "a", "b", "c", "d", "e" };
	const uint32_t last = CHUNK - 1000 - 10 - 1 - 4 * PROTO_PIECE_LEN;
	const uint64_t sizes[] = { 1000, 10, 1, last, 0 };
	const uint32_t lens[] = { 1000, 10, 1, last };
	uint8_t *data[4];
	static const uint32_t want[] = { PERR_OK, PERR_INTEGRITY, PERR_IO, PERR_OK, PERR_OK };
	struct msg m = { .type = MSG_FILE_DONE };

	for (size_t i = 0; i < 4; i++) {
		data[i] = malloc(lens[i]);
		assert_non_null(data[i]);
		fill(data[i], lens[i], (unsigned)i + 20);
	}
	f->rxr.p.peer_caps = PROTO_CAP_PACK;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 5, ids, names, sizes);
	raw_ack(&w, 5, ids, ok5);
	raw_pack(&w, 0, 4, ids, (const uint8_t *const *)data, lens, 0);
	raw_done(&w, 1, 1000, data[0], 1000);
	raw_done(&w, 2, 10, data[0], 10); /* another file's bytes: the wrong digest */
	m.u.file_done.id = 3;
	m.u.file_done.status = PERR_IO;
	m.u.file_done.bytes = 1;
	snprintf(m.u.file_done.text, sizeof(m.u.file_done.text), "read: gone");
	raw_send(&w, &m);
	raw_done(&w, 4, last, data[3], last);
	raw_done(&w, 5, 0, data[0], 0);
	raw_results(&w, 5, ids, want);
	raw_end(&w, 5);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_packed, 4);
	assert_int_equal(f->rxr.st.packed_slots, 1);
	/* Which of the two failures resolves first depends on when the writes complete. */
	assert_stats(&f->rxr.st, 3, 2, 1000 + last,
		     f->rxr.st.first_error == PERR_IO ? PERR_IO : PERR_INTEGRITY);
	assert_dest(f->dst, "a d e");
	for (size_t i = 0; i < 4; i++) {
		size_t len;
		uint8_t *got;

		if (i == 1 || i == 2) {
			continue;
		}
		got = read_file(f->dst, names[i], &len);
		assert_non_null(got);
		assert_int_equal(len, lens[i]);
		assert_memory_equal(got, data[i], lens[i]);
		free(got);
	}
	for (size_t i = 0; i < 4; i++) {
		free(data[i]);
	}
	raw_free(&w);
}

enum pack_bad { PB_UNKNOWN, PB_SIZE, PB_TWICE, PB_SENT, PB_TABLE, PB_NO_CAP, PB_AFTER, PB_ZEROS };

/*
 * A hostile pack ends the session, nothing committed: a file not in flight,
 * a piece outside its file (another length), a file twice, a piece for a
 * file already sent a chunk, a table that does not account for the bytes
 * before it, a pack to a receiver whose peer never announced packing.
 */
static void pack_refused(struct fx *f, enum pack_bad bad, const char *why)
{
	struct raw w;
	static const uint32_t ids[] = { 1, 2 }, ok[] = { PERR_OK, PERR_OK };
	static const char *const names[] = { "a", "b" };
	static const uint64_t sizes[] = { 100, 200 };
	uint8_t a[200], b[200];
	const uint8_t *data[] = { a, b };
	uint32_t pids[] = { 1, 2 }, lens[] = { 100, 200 };
	uint32_t extra = 0;

	fill(a, sizeof(a), 1);
	fill(b, sizeof(b), 2);
	switch (bad) {
	case PB_UNKNOWN:
		pids[1] = 7;
		break;
	case PB_SIZE:
		lens[0] = 150;
		break;
	case PB_TWICE:
		pids[1] = 1, lens[1] = 100;
		break;
	case PB_TABLE:
		extra = 3;
		break;
	default:
		break;
	}
	f->rxr.p.peer_caps = bad == PB_NO_CAP ? 0 : PROTO_CAP_PACK;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 2, ids, names, sizes);
	raw_ack(&w, 2, ids, ok);
	if (bad == PB_SENT) {
		raw_chunk(&w, 1, 2, 0, b, 200);
	}
	raw_pack(&w, 0, 2, pids, data, lens, extra);
	if (bad == PB_AFTER) {
		raw_chunk(&w, 1, 1, 0, a, 100); /* the packed file's bytes again, streamed */
	} else if (bad == PB_ZEROS) {
		raw_zeros(&w, 2, 0, 200);
	}
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->rxr);

	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, why);
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	assert_dest(f->dst, "");
	raw_free(&w);
}

static void test_pack_refused(void **state)
{
	struct fx *f = *state;

	pack_refused(f, PB_UNKNOWN, "file id 7 (200 bytes) not one in flight");
}

static void test_pack_refused_size(void **state)
{
	pack_refused(*state, PB_SIZE, "file id 1 (150 bytes) not one in flight");
}

static void test_pack_refused_twice(void **state)
{
	pack_refused(*state, PB_TWICE, "file id 1 (100 bytes) not one in flight");
}

static void test_pack_refused_sent(void **state)
{
	pack_refused(*state, PB_SENT, "file id 2 (200 bytes) not one in flight");
}

static void test_pack_refused_table(void **state)
{
	pack_refused(*state, PB_TABLE, "bad table of 2 files");
}

static void test_pack_refused_no_cap(void **state)
{
	pack_refused(*state, PB_NO_CAP, "bad packed slot");
}

/* A file that came packed is whole: nothing more of it may stream after its piece. */
static void test_pack_refused_after(void **state)
{
	pack_refused(*state, PB_AFTER, "bad chunk for a: offset 0 len 100 (size 100)");
}

static void test_pack_refused_zeros(void **state)
{
	pack_refused(*state, PB_ZEROS, "ZEROS for id 2 out of place");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_pack_transfer),		T(test_pack_without_cap),
		T(test_pack_checksum_mismatch), T(test_pack_by_hand),
		T(test_pack_nearly_full),	T(test_pack_refused),
		T(test_pack_refused_size),	T(test_pack_refused_twice),
		T(test_pack_refused_sent),	T(test_pack_refused_table),
		T(test_pack_refused_no_cap),	T(test_pack_refused_after),
		T(test_pack_refused_zeros),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
