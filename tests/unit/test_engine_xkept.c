/* SPDX-License-Identifier: MIT */
/*
 * A sender played by hand against a receiver that brings kept files'
 * attributes in line (-X with a skip level, the peer able to itemize): each
 * file the receiver keeps waits for its XATTRS, and a sender that never
 * sends them must not make the receiver hold names without end. Up to
 * 16,384 kept files may wait (twice the widest file window); one more is a
 * protocol error, said and counted as the session's failure.
 *
 * With PROTO_CAP_KEPT_ITEMS the receiver holds a kept file's answer (SKIPPED
 * with PROTO_ITEM_WAIT) until its XATTRS: the second answer says what
 * differed (PROTO_ITEM_XATTRS) and the attribute is set; a sender that
 * could not read them says ENTRY_FAILED, and the held file is let go. The
 * second answers of one turn share a FILES_ACK (at most PROTO_MAX_BATCH).
 */
#include "engine_harness.h"

#include <sys/xattr.h>

#define XKEPT_CAP (2u * PROTO_SPAN_WIDER)
#define BATCH	  8

/* Names k0 .. k(n-1) at the destination: empty, mtime 0, so skip quick keeps each. */
static void kept_files(struct fx *f, uint32_t n)
{
	char name[32];

	for (uint32_t i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "k%u", i);
		dest_file(f, name, 0, 1, (struct timespec){ 0 });
	}
}

/* FILES of ids first .. first+n-1 (named k<id-1>), each answered SKIPPED. */
static void offer_kept(struct raw *w, uint32_t first, uint32_t n)
{
	static const uint32_t skipped[BATCH] = { PERR_SKIPPED, PERR_SKIPPED, PERR_SKIPPED,
						 PERR_SKIPPED, PERR_SKIPPED, PERR_SKIPPED,
						 PERR_SKIPPED, PERR_SKIPPED };
	static const uint64_t sizes[BATCH];
	char buf[BATCH][32];
	const char *names[BATCH];
	uint32_t ids[BATCH];

	assert_true(n <= BATCH);
	for (uint32_t i = 0; i < n; i++) {
		ids[i] = first + i;
		snprintf(buf[i], sizeof(buf[i]), "k%u", first + i - 1);
		names[i] = buf[i];
	}
	raw_files(w, n, ids, names, sizes);
	raw_ack(w, n, ids, skipped);
}

/*
 * XKEPT_CAP kept files with no XATTRS are taken (each FILES answered); the
 * next kept file is answered, then ends the session with PERR_PROTOCOL,
 * saying why.
 */
static void test_kept_waiting_capped(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint32_t id = 1;

	kept_files(f, XKEPT_CAP + 1);
	f->rxr.p.open_flags = PROTO_OPEN_SKIP_QUICK | PROTO_OPEN_XATTRS;
	f->rxr.p.peer_caps = PROTO_CAP_SKIP | PROTO_CAP_XATTRS | PROTO_CAP_ITEMIZE;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	while (id <= XKEPT_CAP) {
		offer_kept(&w, id, BATCH);
		id += BATCH;
	}
	offer_kept(&w, id, 1); /* answered, then the session ends */
	raw_expect_error(&w, PERR_PROTOCOL, "kept files waiting for their attributes");
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL,
			  "kept files waiting for their attributes");
	raw_free(&w);
}

/* The receiver's FILES_ACK for id: its status and items. */
static void expect_answer(struct raw *w, uint32_t id, uint32_t status, uint32_t items)
{
	struct msg m;

	raw_expect(w, MSG_FILES_ACK, &m);
	assert_int_equal(m.u.files_ack.count, 1);
	assert_int_equal(m.u.files_ack.st[0].id, id);
	assert_int_equal(m.u.files_ack.st[0].status, status);
	assert_int_equal(m.u.files_ack.st[0].items, items);
	msg_clear(&m);
}

/* A receiver that waits (PROTO_CAP_KEPT_ITEMS) and two kept files, k0 with user.a = "old". */
static bool wait_setup(struct fx *f, struct raw *w)
{
	char *k0 = path_in(f->dst, "k0");
	bool ok;

	kept_files(f, 2);
	ok = setxattr(k0, "user.a", "old", 3, 0) == 0;
	free(k0);
	if (!ok) {
		return false;
	}
	f->rxr.p.open_flags = PROTO_OPEN_SKIP_QUICK | PROTO_OPEN_XATTRS;
	f->rxr.p.peer_caps = PROTO_CAP_SKIP | PROTO_CAP_XATTRS | PROTO_CAP_ITEMIZE |
			     PROTO_CAP_ENTRY_FAILED | PROTO_CAP_KEPT_ITEMS;
	raw_init(w, &f->tx);
	run_start(&f->rxr);
	raw_ring(w);
	return true;
}

/* k0's XATTRS (user.a = "new"): answered again, XATTRS differed, set; k1's as it has them. */
static void test_kept_wait_items(void **state)
{
	struct fx *f = *state;
	static const uint64_t sizes[2];
	static const char *const names[2] = { "k0", "k1" };
	static const uint32_t ids[2] = { 1, 2 };
	struct proto_xattr a = { .name = (char *)"user.a", .value = (uint8_t *)"new", .len = 3 };
	struct msg m = { .type = MSG_XATTRS };
	char *k0 = path_in(f->dst, "k0"), val[8] = "";
	struct raw w;

	if (!wait_setup(f, &w)) {
		free(k0);
		skip(); /* no user attributes on this file system */
	}
	raw_files(&w, 2, ids, names, sizes);
	{
		struct msg ack;

		raw_expect(&w, MSG_FILES_ACK, &ack);
		assert_int_equal(ack.u.files_ack.count, 2);
		for (int i = 0; i < 2; i++) {
			assert_int_equal(ack.u.files_ack.st[i].status, PERR_SKIPPED);
			assert_int_equal(ack.u.files_ack.st[i].items, PROTO_ITEM_WAIT);
		}
		msg_clear(&ack);
	}
	m.u.xattrs = (struct msg_xattrs){ .id = 1, .count = 1, .x = &a };
	raw_send(&w, &m);
	expect_answer(&w, 1, PERR_SKIPPED, PROTO_ITEM_XATTRS);
	m.u.xattrs = (struct msg_xattrs){ .id = 2, .count = 0, .x = NULL };
	raw_send(&w, &m);
	expect_answer(&w, 2, PERR_SKIPPED, 0);
	raw_end(&w, 2);
	run_join(&f->rxr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_updated, 1);
	assert_int_equal(f->rxr.st.files_skipped, 1);
	assert_int_equal(getxattr(k0, "user.a", val, sizeof(val)), 3);
	assert_memory_equal(val, "new", 3);
	free(k0);
	raw_free(&w);
}

/* The sender could not read k0's: ENTRY_FAILED lets the held file go; the session ends well. */
static void test_kept_wait_failed(void **state)
{
	struct fx *f = *state;
	static const uint64_t sizes[1];
	static const char *const names[1] = { "k0" };
	static const uint32_t ids[1] = { 1 };
	struct msg m = { .type = MSG_ENTRY_FAILED };
	struct raw w;

	if (!wait_setup(f, &w)) {
		skip();
	}
	raw_files(&w, 1, ids, names, sizes);
	expect_answer(&w, 1, PERR_SKIPPED, PROTO_ITEM_WAIT);
	m.u.entry_failed.status = PERR_PERMISSION;
	snprintf(m.u.entry_failed.name, sizeof(m.u.entry_failed.name), "k0");
	snprintf(m.u.entry_failed.text, sizeof(m.u.entry_failed.text), "open: denied");
	raw_send(&w, &m);
	raw_end(&w, 1);
	run_join(&f->rxr);
	assert_int_equal(f->rxr.st.files_failed, 1);
	assert_int_equal(f->rxr.st.files_skipped + f->rxr.st.files_updated, 0);
	raw_free(&w);
}

/* FILES of n kept files from id first (named k<id-1>), all answered SKIPPED with the wait. */
static void offer_waiting(struct raw *w, uint32_t first, uint32_t n)
{
	static const uint64_t sizes[BATCH];
	char buf[BATCH][32];
	const char *names[BATCH];
	uint32_t ids[BATCH];
	struct msg ack;

	assert_true(n <= BATCH);
	for (uint32_t i = 0; i < n; i++) {
		ids[i] = first + i;
		snprintf(buf[i], sizeof(buf[i]), "k%u", first + i - 1);
		names[i] = buf[i];
	}
	raw_files(w, n, ids, names, sizes);
	raw_expect(w, MSG_FILES_ACK, &ack);
	assert_int_equal(ack.u.files_ack.count, n);
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(ack.u.files_ack.st[i].items, PROTO_ITEM_WAIT);
	}
	msg_clear(&ack);
}

/*
 * 300 held files whose XATTRS (none) come in one burst: the second answers
 * share FILES_ACKs (a turn's in one, at most PROTO_MAX_BATCH each), every
 * id answered once, SKIPPED, k0's attribute removed (xattrs), the others
 * with no items.
 */
static void test_kept_wait_batched(void **state)
{
	struct fx *f = *state;
	struct msg m = { .type = MSG_XATTRS };
	static bool seen[301];
	uint32_t answered = 0, acks = 0;
	struct raw w;

	if (!wait_setup(f, &w)) {
		skip();
	}
	kept_files(f, 300);
	for (uint32_t id = 1; id <= 300; id += BATCH) {
		offer_waiting(&w, id, MIN(BATCH, 301 - id));
	}
	for (uint32_t id = 1; id <= 300; id++) {
		m.u.xattrs = (struct msg_xattrs){ .id = id, .count = 0, .x = NULL };
		assert_int_equal(chan_queue(&w.end->chan, &m), 0);
	}
	assert_int_equal(chan_flush(&w.end->chan), 0);
	while (answered < 300) {
		struct msg ack;

		raw_expect(&w, MSG_FILES_ACK, &ack);
		acks++;
		assert_true(ack.u.files_ack.count <= PROTO_MAX_BATCH);
		for (size_t i = 0; i < ack.u.files_ack.count; i++) {
			uint32_t id = ack.u.files_ack.st[i].id;

			assert_true(id >= 1 && id <= 300 && !seen[id]);
			seen[id] = true;
			assert_int_equal(ack.u.files_ack.st[i].status, PERR_SKIPPED);
			/* k0's user.a (wait_setup) is not the sender's: removed. */
			assert_int_equal(ack.u.files_ack.st[i].items,
					 id == 1 ? PROTO_ITEM_XATTRS : 0);
		}
		answered += ack.u.files_ack.count;
		msg_clear(&ack);
	}
	assert_true(acks < 30); /* not one FILES_ACK a file */
	raw_end(&w, 300);
	run_join(&f->rxr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_skipped, 299);
	assert_int_equal(f->rxr.st.files_updated, 1);
	raw_free(&w);
}

/* A played receiver's wait to a sender without PROTO_CAP_KEPT_ITEMS: a protocol error. */
static void test_sender_wait_unasked(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct proto_status st = { .status = PERR_SKIPPED, .items = PROTO_ITEM_WAIT };
	struct raw w;
	struct msg m;

	source_file(f, &s, "a", 100);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.open_flags = PROTO_OPEN_SKIP_QUICK | PROTO_OPEN_XATTRS;
	f->txr.p.peer_caps = PROTO_CAP_SKIP | PROTO_CAP_XATTRS | PROTO_CAP_ITEMIZE;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	st.id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
	raw_send(&w, &m);
	raw_expect_error(&w, PERR_PROTOCOL, "a wait for id");
	run_join(&f->txr);
	raw_free(&w);
	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, "a wait for id");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_kept_waiting_capped), T(test_kept_wait_items),	  T(test_kept_wait_failed),
		T(test_kept_wait_batched),   T(test_sender_wait_unasked),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
