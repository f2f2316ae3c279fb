/* SPDX-License-Identifier: MIT */
/*
 * A sender played by hand against a receiver that itemizes kept
 * directories' attributes (-X, PROTO_CAP_KEPT_ITEMS and PROTO_CAP_DIR_ITEMS
 * on both ends): a directory there already is answered SKIPPED with
 * PROTO_ITEM_WAIT, and answered again once its XATTRS came: xattrs
 * (PROTO_ITEM_XATTRS) where they differed (and set), none where they did
 * not, none for an unread XATTRS (the sender could read none: the
 * directory is left as it is). A sender that does not send a held
 * directory's XATTRS before its next FILES ends the session (nothing is
 * held past one batch); an unread XATTRS from a peer without the
 * capability, or for a regular file, is a protocol error. The sender
 * sends a directory's XATTRS right after its batch and takes the wait.
 */
#include "engine_harness.h"

#include <sys/stat.h>
#include <sys/xattr.h>

#define ITEMS_X (PROTO_ITEM_XATTRS | PROTO_ITEM_ACLS)

/* Directories d0 .. d(n-1) at the destination, d0 with user.a = "old". False: no user.*. */
static bool kept_dirs(struct fx *f, uint32_t n)
{
	char name[32];
	bool ok = true;

	for (uint32_t i = 0; i < n; i++) {
		char *p;

		snprintf(name, sizeof(name), "d%u", i);
		p = path_in(f->dst, name);
		assert_int_equal(mkdir(p, 0755), 0);
		if (i == 0) {
			ok = setxattr(p, "user.a", "old", 3, 0) == 0;
		}
		free(p);
	}
	return ok;
}

/* The receiver, its peer's caps, and n kept directories. */
static bool dirs_setup(struct fx *f, struct raw *w, uint32_t n, uint64_t caps)
{
	if (!kept_dirs(f, n)) {
		return false;
	}
	f->rxr.p.open_flags = PROTO_OPEN_XATTRS;
	f->rxr.p.peer_caps = PROTO_CAP_XATTRS | PROTO_CAP_ITEMIZE | PROTO_CAP_ENTRY_FAILED | caps;
	raw_init(w, &f->tx);
	run_start(&f->rxr);
	raw_ring(w);
	return true;
}

/* FILES of directories d<first-1> .. as ids first .. first+n-1. */
static void offer_dirs(struct raw *w, uint32_t first, uint32_t n)
{
	struct proto_file pf[8];
	char names[8][32];
	struct msg m = { .type = MSG_FILES };

	assert_true(n <= 8);
	for (uint32_t i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "d%u", first + i - 1);
		pf[i] = (struct proto_file){
			.id = first + i, .ftype = PROTO_FT_DIR, .mode = 0755, .name = names[i]
		};
	}
	m.u.files.count = (uint16_t)n;
	m.u.files.files = pf;
	raw_send(w, &m);
}

/* The first FILES_ACK of n directories: each SKIPPED, with the wait item as wait says. */
static void expect_first(struct raw *w, uint32_t n, bool wait)
{
	struct msg ack;

	raw_expect(w, MSG_FILES_ACK, &ack);
	assert_int_equal(ack.u.files_ack.count, n);
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(ack.u.files_ack.st[i].status, PERR_SKIPPED);
		assert_int_equal(!!(ack.u.files_ack.st[i].items & PROTO_ITEM_WAIT), wait);
	}
	msg_clear(&ack);
}

/* The second answer for id: SKIPPED, its attribute items x. */
static void expect_second(struct raw *w, uint32_t id, uint32_t x)
{
	struct msg ack;

	raw_expect(w, MSG_FILES_ACK, &ack);
	assert_int_equal(ack.u.files_ack.count, 1);
	assert_int_equal(ack.u.files_ack.st[0].id, id);
	assert_int_equal(ack.u.files_ack.st[0].status, PERR_SKIPPED);
	assert_int_equal(ack.u.files_ack.st[0].items & (ITEMS_X | PROTO_ITEM_WAIT), x);
	msg_clear(&ack);
}

static void send_xattrs(struct raw *w, uint32_t id, struct proto_xattr *a, bool unread)
{
	struct msg m = { .type = MSG_XATTRS };

	m.u.xattrs = (struct msg_xattrs){ .id = id, .count = a ? 1 : 0, .x = a, .unread = unread };
	raw_send(w, &m);
}

/* d0 changed (xattrs, set), d1 unread (left), d2 the same (none): one updated. */
static void test_dir_wait_items(void **state)
{
	struct fx *f = *state;
	struct proto_xattr a = { .name = (char *)"user.a", .value = (uint8_t *)"new", .len = 3 };
	char *d0 = path_in(f->dst, "d0"), val[8] = "";
	struct raw w;

	if (!dirs_setup(f, &w, 3, PROTO_CAP_KEPT_ITEMS | PROTO_CAP_DIR_ITEMS)) {
		free(d0);
		skip(); /* no user attributes on this file system */
	}
	offer_dirs(&w, 1, 3);
	expect_first(&w, 3, true);
	send_xattrs(&w, 1, &a, false);
	expect_second(&w, 1, PROTO_ITEM_XATTRS);
	send_xattrs(&w, 2, NULL, true);
	expect_second(&w, 2, 0);
	send_xattrs(&w, 3, NULL, false);
	expect_second(&w, 3, 0);
	raw_end(&w, 3);
	run_join(&f->rxr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_updated, 1);
	assert_int_equal(f->rxr.st.files_skipped, 2);
	assert_int_equal(getxattr(d0, "user.a", val, sizeof(val)), 3);
	assert_memory_equal(val, "new", 3);
	free(d0);
	raw_free(&w);
}

/* A held directory's XATTRS never came before the next FILES: the session ends. */
static void test_dir_wait_unsent(void **state)
{
	struct fx *f = *state;
	struct raw w;

	if (!dirs_setup(f, &w, 2, PROTO_CAP_KEPT_ITEMS | PROTO_CAP_DIR_ITEMS)) {
		skip();
	}
	offer_dirs(&w, 1, 1);
	expect_first(&w, 1, true);
	offer_dirs(&w, 2, 1);
	raw_expect_error(&w, PERR_PROTOCOL, "no XATTRS for directory");
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, "no XATTRS for directory");
	raw_free(&w);
}

/* Without PROTO_CAP_DIR_ITEMS: no wait for a directory, and an unread XATTRS is refused. */
static void test_dir_unread_unasked(void **state)
{
	struct fx *f = *state;
	struct raw w;

	if (!dirs_setup(f, &w, 1, PROTO_CAP_KEPT_ITEMS)) {
		skip();
	}
	offer_dirs(&w, 1, 1);
	expect_first(&w, 1, false);
	send_xattrs(&w, 1, NULL, true);
	raw_expect_error(&w, PERR_PROTOCOL, "unread from a peer without");
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, "unread from a peer without");
	raw_free(&w);
}

/* The wire: an unread XATTRS is count 0xffff and nothing after; more after it is refused. */
static void test_unread_wire(void **state)
{
	struct msg m = { .type = MSG_XATTRS, .u.xattrs = { .id = 7, .unread = true } };
	uint8_t buf[64];
	struct msg d;
	int n;

	(void)state;
	n = msg_encode(&m, buf, sizeof(buf));
	assert_int_equal(n, PROTO_HDR_LEN + 6);
	assert_int_equal(buf[PROTO_HDR_LEN + 4], 0xff);
	assert_int_equal(buf[PROTO_HDR_LEN + 5], 0xff);
	assert_int_equal(msg_decode(MSG_XATTRS, buf + PROTO_HDR_LEN, 6, &d), 0);
	assert_true(d.u.xattrs.unread);
	assert_int_equal(d.u.xattrs.count, 0);
	assert_int_equal(d.u.xattrs.id, 7);
	msg_clear(&d);
	buf[PROTO_HDR_LEN + 6] = 0;
	assert_int_equal(msg_decode(MSG_XATTRS, buf + PROTO_HDR_LEN, 7, &d), -EBADMSG);
	/* A count with attributes and unread cannot be encoded. */
	m.u.xattrs.count = 1;
	assert_true(msg_encode(&m, buf, sizeof(buf)) < 0);
}

/* The played receiver's FILES_ACK of one entry. */
static void ack_one(struct raw *w, uint32_t id, uint32_t items)
{
	struct proto_status st = { .id = id, .status = PERR_SKIPPED, .items = items };
	struct msg m = { .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };

	raw_send(w, &m);
}

/*
 * The sender: a directory's XATTRS right after its FILES (with its
 * attribute); a wait for it taken, the second answer counts it updated.
 */
static void test_sender_dir_wait(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	char *dd = path_in(f->src, "dd");
	struct raw w;
	struct msg m;
	uint32_t id;

	source_dir(f, &s, "dd");
	if (setxattr(dd, "user.a", "v", 1, 0) < 0) {
		free(dd);
		skip();
	}
	free(dd);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.open_flags = PROTO_OPEN_XATTRS;
	f->txr.p.peer_caps =
	    PROTO_CAP_XATTRS | PROTO_CAP_ITEMIZE | PROTO_CAP_KEPT_ITEMS | PROTO_CAP_DIR_ITEMS;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	id = m.u.files.files[0].id;
	msg_clear(&m);
	raw_expect(&w, MSG_XATTRS, &m);
	assert_int_equal(m.u.xattrs.id, id);
	assert_false(m.u.xattrs.unread);
	assert_int_equal(m.u.xattrs.count, 1);
	msg_clear(&m);
	ack_one(&w, id, PROTO_ITEM_WAIT);
	ack_one(&w, id, PROTO_ITEM_XATTRS);
	raw_expect(&w, MSG_END, &m);
	msg_clear(&m);
	m = (struct msg){ .type = MSG_END, .u.end = { .files = 1 } };
	raw_send(&w, &m);
	run_join(&f->txr);
	raw_free(&w);
	assert_ok_run(&f->txr);
	assert_int_equal(f->txr.st.files_updated, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_dir_wait_items),
		T(test_dir_wait_unsent),
		T(test_dir_unread_unasked),
		T(test_sender_dir_wait),
		cmocka_unit_test(test_unread_wire),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
