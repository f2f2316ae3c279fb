/* SPDX-License-Identifier: MIT */
/*
 * A transfer's file messages (proto/msg_files.c): FILES, FILES_ACK and
 * GET at and past the batch cap, each FILES field, XATTRS names and caps,
 * statuses in FILES_ACK, FILE_DONE, FILE_RESULT and ENTRY_FAILED, DELETED.
 * Shared samples and checks: proto_testlib.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_testlib.h"

static void test_lists_at_batch_cap(void **state)
{
	struct proto_file *files = calloc(PROTO_MAX_BATCH, sizeof(*files));
	struct proto_status *st = calloc(PROTO_MAX_BATCH, sizeof(*st));
	char **paths = calloc(PROTO_MAX_BATCH, sizeof(*paths));
	char names[PROTO_MAX_BATCH][16];
	struct msg m;

	(void)state;
	assert_non_null(files);
	assert_non_null(st);
	assert_non_null(paths);
	for (size_t i = 0; i < PROTO_MAX_BATCH; i++) {
		snprintf(names[i], sizeof(names[i]), "m/f%03zu", i);
		files[i] = s_files[i % 3];
		files[i].id = (uint32_t)i;
		files[i].name = names[i];
		st[i] = (struct proto_status){ .id = (uint32_t)i,
					       .status = (uint32_t)(i % (PERR_MAX + 1)),
					       .text = names[i] };
		paths[i] = names[i];
	}
	m = (struct msg){ .type = MSG_FILES,
			  .u.files = { .count = PROTO_MAX_BATCH, .files = files } };
	round_trip(&m);
	m = (struct msg){ .type = MSG_FILES_ACK,
			  .u.files_ack = { .count = PROTO_MAX_BATCH, .st = st } };
	round_trip(&m);
	m = (struct msg){ .type = MSG_GET, .u.get = { .count = PROTO_MAX_BATCH, .paths = paths } };
	round_trip(&m);

	/* One more: the encoder refuses ... */
	m = (struct msg){ .type = MSG_FILES, .u.files = { .count = PROTO_MAX_BATCH + 1 } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = PROTO_MAX_BATCH + 1 } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m = (struct msg){ .type = MSG_GET, .u.get = { .count = PROTO_MAX_BATCH + 1 } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);

	/* ... and the decoder refuses 257 well-formed entries. */
	{
		struct wbuf w;
		uint8_t *buf = payload();

		wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
		wbuf_put_u16(&w, PROTO_MAX_BATCH + 1);
		for (size_t i = 0; i <= PROTO_MAX_BATCH; i++) {
			put_file_raw(&w, &files[i % PROTO_MAX_BATCH]);
		}
		assert_false(w.overflow);
		assert_int_equal(decode_rc(MSG_FILES, buf, w.len), -EBADMSG);

		wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
		wbuf_put_u16(&w, PROTO_MAX_BATCH + 1);
		for (size_t i = 0; i <= PROTO_MAX_BATCH; i++) {
			wbuf_put_u32(&w, (uint32_t)i);
			wbuf_put_u32(&w, PERR_OK);
			wbuf_put_str16(&w, "ok", PROTO_MAX_TEXT);
		}
		assert_false(w.overflow);
		assert_int_equal(decode_rc(MSG_FILES_ACK, buf, w.len), -EBADMSG);

		wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
		wbuf_put_u16(&w, PROTO_MAX_BATCH + 1);
		for (size_t i = 0; i <= PROTO_MAX_BATCH; i++) {
			wbuf_put_str16(&w, "m/p", PROTO_MAX_PATH);
		}
		assert_false(w.overflow);
		assert_int_equal(decode_rc(MSG_GET, buf, w.len), -EBADMSG);
	}
	free(files);
	free(st);
	free(paths);
}

/* A huge count with a tiny payload is refused before any allocation (A3). */
static void test_lists_huge_count(void **state)
{
	const uint16_t types[] = { MSG_FILES, MSG_FILES_ACK, MSG_GET };
	const uint16_t counts[] = { UINT16_MAX, PROTO_MAX_BATCH + 1, PROTO_MAX_BATCH, 2 };

	(void)state;
	for (size_t t = 0; t < 3; t++) {
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			uint8_t p[4] = { (uint8_t)(counts[c] >> 8), (uint8_t)counts[c], 0, 0 };

			assert_int_equal(decode_rc(types[t], p, sizeof(p)), -EBADMSG);
		}
	}
	/* GET must name something. */
	{
		const uint8_t p[2] = { 0, 0 };

		assert_int_equal(decode_rc(MSG_GET, p, sizeof(p)), -EBADMSG);
	}
}

/* XATTRS: names in the namespaces carried, caps on names, values and count. */
static void test_bad_xattrs(void **state)
{
	static const char *const good[] = { "user.a", "security.selinux", "trusted.x",
					    "system.posix_acl_access", "system.posix_acl_default" };
	static const char *const bad[] = {
		"",	   "user.",    "user",	   "system.x", "system.posix_acl_accessx",
		"other.a", "trusted.", "security."
	};
	char *longname = repeat('n', PROTO_MAX_XATTR_NAME + 1);
	uint8_t *big = calloc(1, PROTO_MAX_XATTR_VALUE + 1);
	struct proto_xattr x = { .value = s_xval0, .len = 5 };
	struct msg m = { .type = MSG_XATTRS, .u.xattrs = { .id = 1, .count = 1, .x = &x } };
	struct msg d;
	size_t len;

	(void)state;
	assert_non_null(big);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		x.name = (char *)good[i];
		assert_true(proto_xattr_name_ok(good[i]));
		assert_int_equal(encode_decode_rc(&m), 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		x.name = (char *)bad[i];
		assert_false(proto_xattr_name_ok(bad[i]));
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	}
	/* A name at its cap (user. + 250), one over: the encoder refuses it too. */
	memcpy(longname, "user.", 5);
	longname[PROTO_MAX_XATTR_NAME] = '\0';
	x.name = longname;
	assert_int_equal(encode_decode_rc(&m), 0);
	longname[PROTO_MAX_XATTR_NAME] = 'n';
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	/* A value at its cap, one over (encoder and decoder both refuse). */
	x.name = s_xname0;
	x.value = big;
	x.len = PROTO_MAX_XATTR_VALUE;
	assert_int_equal(encode_decode_rc(&m), 0);
	x.len = PROTO_MAX_XATTR_VALUE + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	{
		uint8_t p[64];
		struct wbuf w;

		wbuf_init(&w, p, sizeof(p));
		wbuf_put_u32(&w, 1);
		wbuf_put_u16(&w, 1);
		wbuf_put_str16(&w, "user.a", 255);
		wbuf_put_u32(&w, PROTO_MAX_XATTR_VALUE + 1);
		assert_int_equal(decode_rc(MSG_XATTRS, p, w.len), -EBADMSG);
		/* A value longer than what follows. */
		wbuf_init(&w, p, sizeof(p));
		wbuf_put_u32(&w, 1);
		wbuf_put_u16(&w, 1);
		wbuf_put_str16(&w, "user.a", 255);
		wbuf_put_u32(&w, 5);
		wbuf_put_bytes(&w, "abcd", 4);
		assert_int_equal(decode_rc(MSG_XATTRS, p, w.len), -EBADMSG);
		/* A count over the cap, and one over what the payload can hold. */
		wbuf_init(&w, p, sizeof(p));
		wbuf_put_u32(&w, 1);
		wbuf_put_u16(&w, PROTO_MAX_XATTRS + 1);
		assert_int_equal(decode_rc(MSG_XATTRS, p, w.len), -EBADMSG);
		wbuf_init(&w, p, sizeof(p));
		wbuf_put_u32(&w, 1);
		wbuf_put_u16(&w, 2);
		wbuf_put_str16(&w, "user.a", 255);
		wbuf_put_u32(&w, 0);
		assert_int_equal(decode_rc(MSG_XATTRS, p, w.len), -EBADMSG);
	}
	/* Too many for the encoder. */
	m.u.xattrs.count = PROTO_MAX_XATTRS + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	/* A good one after which a bad name comes: nothing stays allocated (LSan). */
	{
		struct proto_xattr two[2] = { { .name = s_xname0, .value = s_xval0, .len = 5 },
					      { .name = (char *)"user.", .value = s_xval0 } };

		m.u.xattrs.count = 2;
		m.u.xattrs.x = two;
		len = encode_ok(&m);
		assert_int_equal(decode_copy(MSG_XATTRS, payload(), len, &d), -EBADMSG);
	}
	free(longname);
	free(big);
}

/* Hard links (type 4): a valid relative first name, no size. */
static void bad_hardlinks(char *name, char *target)
{
	static const char *const good[] = { "y", "a/b", "a/b.c/.d", "...", "a/..b" };
	static const char *const bad[] = { "",	   "/y",   "y/",    "a//b",   ".",  "..",
					   "a/..", "../a", "a/./b", "a/../b", "./a" };
	const struct proto_file hl = {
		.id = 4, .ftype = PROTO_FT_HARDLINK, .mode = 0644, .name = name, .link = target
	};
	struct proto_file f;

	assert_int_equal(decode_one_file_raw(&hl), 0);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		f = hl;
		f.link = (char *)good[i];
		assert_int_equal(decode_one_file_raw(&f), 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		f = hl;
		f.link = (char *)bad[i];
		assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	}
	f = hl;
	f.link = NULL;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = hl;
	f.size = 1;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = hl;
	f.mode |= PROTO_FILE_LINKED; /* a link is never itself a target */
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
}

static void test_bad_files(void **state)
{
	char name[] = "x";
	char target[] = "y";
	const struct proto_file reg = {
		.id = 1, .ftype = PROTO_FT_REG, .mode = 0644, .size = 10, .name = name
	};
	const struct proto_file lnk = {
		.id = 2, .ftype = PROTO_FT_SYMLINK, .mode = 0777, .name = name, .link = target
	};
	const struct proto_file dir = {
		.id = 3, .ftype = PROTO_FT_DIR, .mode = 0755, .name = name
	};
	struct proto_file f;

	(void)state;
	assert_int_equal(decode_one_file_raw(&reg), 0);
	assert_int_equal(decode_one_file_raw(&lnk), 0);
	assert_int_equal(decode_one_file_raw(&dir), 0);

	f = reg;
	f.mode = 010000;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f.mode = 0100644; /* S_IFREG bits are not permission bits */
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	/* The linked mark (PROTO_FILE_LINKED) on a regular file only, no other bit above 07777. */
	f = reg;
	f.mode = 0644 | PROTO_FILE_LINKED;
	assert_int_equal(decode_one_file_raw(&f), 0);
	f.mode = 0644 | (PROTO_FILE_LINKED << 1);
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = dir;
	f.mode = 0755 | PROTO_FILE_LINKED;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = lnk;
	f.mode |= PROTO_FILE_LINKED;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = reg;
	f.mtime_nsec = 1000000000u;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f.mtime_nsec = UINT32_MAX;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = reg;
	f.size = (uint64_t)INT64_MAX + 1;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f.size = UINT64_MAX;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = reg;
	f.link = target; /* a regular file with a target */
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = dir;
	f.link = target;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = dir;
	f.size = 1;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = lnk;
	f.size = 9;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = lnk;
	f.link = NULL; /* a symlink without a target */
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	/* Unknown types, with nothing else wrong (no size, no target). */
	f = reg;
	f.size = 0;
	f.ftype = 0;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f.ftype = 5;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f.ftype = 0xff;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);

	bad_hardlinks(name, target);

	/* A bad entry after good ones: the good ones' strings are freed (LSan). */
	{
		uint8_t buf[256];
		struct wbuf w;

		f = reg;
		f.ftype = 5;
		wbuf_init(&w, buf, sizeof(buf));
		wbuf_put_u16(&w, 4);
		put_file_raw(&w, &reg);
		put_file_raw(&w, &lnk);
		put_file_raw(&w, &dir);
		put_file_raw(&w, &f);
		assert_false(w.overflow);
		assert_int_equal(decode_rc(MSG_FILES, buf, w.len), -EBADMSG);
	}
}

static void test_bad_status(void **state)
{
	struct msg m;

	(void)state;
	sample(MSG_FILES_ACK, &m);
	assert_int_equal(encode_decode_rc(&m), 0);
	{
		struct proto_status st[2] = { s_st[0], s_st[1] };

		st[1].status = PERR_MAX + 1;
		m.u.files_ack.st = st;
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
		st[1].status = UINT32_MAX;
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
		/* Items (PROTO_CAP_ITEMIZE) ride in the upper half: unknown ones are refused. */
		st[1].status = PERR_SKIPPED | (0x800u << 16);
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
		st[1].status = PERR_SKIPPED;
		st[1].items = PROTO_ITEMS_META;
		assert_int_equal(encode_decode_rc(&m), 0);
	}
	sample(MSG_FILE_DONE, &m);
	m.u.file_done.status = PERR_MAX + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample(MSG_FILE_RESULT, &m);
	m.u.file_result.status = PERR_MAX + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	/* ENTRY_FAILED says what failed: OK is no status for it. */
	sample(MSG_ENTRY_FAILED, &m);
	m.u.entry_failed.status = PERR_MAX + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.entry_failed.status = PERR_OK;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	/* Nor SKIPPED or SUM_WANTED: those are the receiver's answers, not failures. */
	m.u.entry_failed.status = PERR_SKIPPED;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.entry_failed.status = PERR_SUM_WANTED;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
}

static void test_bad_deleted(void **state)
{
	struct proto_deleted d;
	struct msg m;
	size_t len;

	(void)state;
#define BAD_DELETED(field, value)                                                                 \
	do {                                                                                      \
		d = (struct proto_deleted){ .what = PROTO_DEL_DELETED,                            \
					    .name = s_del0,                                       \
					    .text = s_empty };                                    \
		d.field = (value);                                                                \
		m = (struct msg){ .type = MSG_DELETED, .u.deleted = { .count = 1, .ents = &d } }; \
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);                                 \
	} while (0)
	BAD_DELETED(what, 0);
	BAD_DELETED(what, PROTO_DEL_FAILED + 1);
	BAD_DELETED(name, s_empty);
	BAD_DELETED(code, PERR_IO);	       /* a code on a deletion */
	BAD_DELETED(text, s_deltext);	       /* a text on a deletion */
	BAD_DELETED(what, PROTO_DEL_FAILED);   /* a failure without a code */
	BAD_DELETED(ftype, PROTO_FT_HARDLINK); /* a type no destination entry has */
#undef BAD_DELETED
	d = (struct proto_deleted){
		.what = PROTO_DEL_FAILED, .code = PERR_SKIPPED, .name = s_del0, .text = s_empty
	};
	m = (struct msg){ .type = MSG_DELETED, .u.deleted = { .count = 1, .ents = &d } };
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	d.code = PERR_MAX + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	d.code = PERR_IO;
	assert_int_equal(encode_decode_rc(&m), 0);
	/* SUPPRESSED says nothing was looked at: no entries with it. */
	m.u.deleted.flags = PROTO_DELETED_SUPPRESSED;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	/* Unknown flags. */
	m = (struct msg){ .type = MSG_DELETED, .u.deleted.flags = 0x2 };
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	/* A count over the batch cap, and one the payload cannot hold. */
	m = (struct msg){ .type = MSG_DELETED };
	len = encode_ok(&m);
	payload()[1] = (uint8_t)((PROTO_MAX_BATCH + 1) >> 8);
	payload()[2] = (uint8_t)(PROTO_MAX_BATCH + 1);
	assert_int_equal(decode_rc(MSG_DELETED, payload(), len), -EBADMSG);
	payload()[1] = 0;
	payload()[2] = 1;
	assert_int_equal(decode_rc(MSG_DELETED, payload(), len), -EBADMSG);
	m = (struct msg){ .type = MSG_DELETED, .u.deleted = { .count = PROTO_MAX_BATCH + 1 } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lists_at_batch_cap), cmocka_unit_test(test_lists_huge_count),
		cmocka_unit_test(test_bad_files),	   cmocka_unit_test(test_bad_xattrs),
		cmocka_unit_test(test_bad_status),	   cmocka_unit_test(test_bad_deleted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
