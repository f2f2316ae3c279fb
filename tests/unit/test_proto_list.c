/* SPDX-License-Identifier: MIT */
/*
 * Listing messages (proto/msg_list.c): LIST, MODULES, SUMS and
 * LIST_ATTRS, each written by hand the way a hostile daemon might.
 * Shared samples and checks: proto_testlib.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_testlib.h"

/* LIST: only the defined flags; the path under its cap (issue 15). */
static void test_bad_list(void **state)
{
	struct msg m;
	size_t len;
	char *longest = repeat('p', PROTO_MAX_PATH);

	(void)state;
	sample(MSG_LIST, &m);
	len = encode_ok(&m);
	assert_int_equal(decode_rc(MSG_LIST, payload(), len), 0);
	for (unsigned bit = 5; bit < 32; bit++) {
		m.u.list.flags = 1u << bit;
		len = encode_ok(&m);
		assert_int_equal(decode_rc(MSG_LIST, payload(), len), -EBADMSG);
	}
	m.u.list.flags = 0;
	strcpy(m.u.list.path, longest);
	len = encode_ok(&m);
	assert_int_equal(decode_rc(MSG_LIST, payload(), len), 0);
	assert_int_equal(decode_last_string_grown(MSG_LIST, payload(), len, PROTO_MAX_PATH),
			 -EBADMSG);
	free(longest);
}

/* Encode n SUMS entries as a hostile daemon might (id, status, hash byte 15). */
static int decode_sums_raw(uint16_t count, size_t n, uint32_t id, uint32_t status, uint8_t last)
{
	struct wbuf w;
	uint8_t *buf = payload(), hash[PROTO_HASH_LEN] = { [15] = last };

	wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
	wbuf_put_u16(&w, count);
	for (size_t i = 0; i < n; i++) {
		wbuf_put_u32(&w, id);
		wbuf_put_u32(&w, status);
		wbuf_put_bytes(&w, hash, sizeof(hash));
	}
	assert_false(w.overflow);
	return decode_rc(MSG_SUMS, buf, w.len);
}

/* SUMS: a capped count that matches the payload exactly, ids, statuses, zero hashes on failure. */
static void test_bad_sums(void **state)
{
	struct proto_sum *sums = calloc(PROTO_MAX_BATCH + 1, sizeof(*sums));
	struct msg m;

	(void)state;
	assert_non_null(sums);
	assert_int_equal(decode_sums_raw(1, 1, 1, PERR_OK, 7), 0);
	assert_int_equal(decode_sums_raw(0, 0, 1, PERR_OK, 0), 0);
	assert_int_equal(decode_sums_raw(1, 1, 0, PERR_OK, 7), -EBADMSG);      /* id 0 */
	assert_int_equal(decode_sums_raw(1, 1, 1, PERR_MAX + 1, 0), -EBADMSG); /* status */
	assert_int_equal(decode_sums_raw(1, 1, 1, PERR_SKIPPED, 0), -EBADMSG);
	assert_int_equal(decode_sums_raw(1, 1, 1, PERR_SUM_WANTED, 0), -EBADMSG);
	assert_int_equal(decode_sums_raw(1, 1, 1, PERR_IO, 0), 0);
	assert_int_equal(decode_sums_raw(1, 1, 1, PERR_IO, 7), -EBADMSG); /* hash with a failure */
	assert_int_equal(decode_sums_raw(2, 1, 1, PERR_OK, 7), -EBADMSG); /* count over payload */
	assert_int_equal(decode_sums_raw(1, 2, 1, PERR_OK, 7), -EBADMSG); /* trailing entry */
	assert_int_equal(decode_sums_raw(0xffff, 0, 1, PERR_OK, 7), -EBADMSG);
	assert_int_equal(decode_sums_raw(PROTO_MAX_BATCH + 1, PROTO_MAX_BATCH + 1, 1, PERR_OK, 7),
			 -EBADMSG);
	for (size_t i = 0; i <= PROTO_MAX_BATCH; i++) {
		sums[i] = (struct proto_sum){ .id = (uint32_t)i + 1, .status = PERR_OK };
	}
	m = (struct msg){ .type = MSG_SUMS, .u.sums = { .count = PROTO_MAX_BATCH, .sums = sums } };
	round_trip(&m);
	m.u.sums.count = PROTO_MAX_BATCH + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m = (struct msg){ .type = MSG_SUMS };
	round_trip(&m);
	free(sums);
}

/* A LIST_ATTRS of n records of fields, each (id, status, digests ending in last, group). */
static int decode_lattrs_raw(uint8_t fields, uint8_t reserved, uint16_t count, size_t n,
			     uint32_t id, uint32_t status, uint8_t last)
{
	struct wbuf w;
	uint8_t *buf = payload(), hash[PROTO_HASH_LEN] = { [15] = last };

	wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
	wbuf_put_u8(&w, fields);
	wbuf_put_u8(&w, reserved);
	wbuf_put_u16(&w, count);
	for (size_t i = 0; i < n; i++) {
		wbuf_put_u32(&w, id);
		wbuf_put_u32(&w, status);
		for (unsigned k = 0; k < PROTO_LATTR_DIGESTS; k++) {
			if (fields & (1u << k)) {
				wbuf_put_bytes(&w, hash, sizeof(hash));
			}
		}
		if (fields & PROTO_LATTR_LINKS) {
			wbuf_put_u64(&w, 42);
		}
	}
	assert_false(w.overflow);
	return decode_rc(MSG_LIST_ATTRS, buf, w.len);
}

/* LIST_ATTRS: known fields, PRIVILEGED only with XATTRS, records as fields says, statuses. */
static void test_bad_list_attrs(void **state)
{
	const uint8_t x = PROTO_LATTR_XATTRS, l = PROTO_LATTR_LINKS;
	struct msg m;

	(void)state;
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 1, 1, PERR_OK, 7), 0);
	assert_int_equal(decode_lattrs_raw(l, 0, 2, 2, 1, PERR_OK, 0), 0);
	assert_int_equal(decode_lattrs_raw(PROTO_LATTR_KNOWN, 0, 0, 0, 1, PERR_OK, 0), 0);
	assert_int_equal(decode_lattrs_raw(0, 0, 0, 0, 1, PERR_OK, 0), -EBADMSG); /* no fields */
	assert_int_equal(decode_lattrs_raw(0x10 | x, 0, 1, 1, 1, PERR_OK, 0), -EBADMSG);
	assert_int_equal(decode_lattrs_raw(PROTO_LATTR_PRIVILEGED, 0, 1, 1, 1, PERR_OK, 0),
			 -EBADMSG);
	assert_int_equal(decode_lattrs_raw(x, 1, 1, 1, 1, PERR_OK, 0), -EBADMSG); /* reserved */
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 1, 0, PERR_OK, 0), -EBADMSG); /* id 0 */
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 1, 1, PERR_MAX + 1, 0), -EBADMSG);
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 1, 1, PERR_SKIPPED, 0), -EBADMSG);
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 1, 1, PERR_IO, 0), 0);
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 1, 1, PERR_IO, 7), -EBADMSG);
	assert_int_equal(decode_lattrs_raw(x | l, 0, 2, 1, 1, PERR_OK, 7), -EBADMSG); /* short */
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 2, 1, PERR_OK, 7), -EBADMSG);     /* trailing */
	assert_int_equal(
	    decode_lattrs_raw(l, 0, PROTO_MAX_BATCH + 1, PROTO_MAX_BATCH + 1, 1, PERR_OK, 0),
	    -EBADMSG);
	/* The encoder keeps the same rules. */
	m = (struct msg){ .type = MSG_LIST_ATTRS, .u.list_attrs = { .fields = 0 } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m.u.list_attrs.fields = PROTO_LATTR_PRIVILEGED;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m.u.list_attrs.fields = PROTO_LATTR_LINKS;
	round_trip(&m);
}

/* Encode one module the way a hostile daemon might, past what our encoder allows. */
static int decode_one_module_raw(uint8_t flags, const char *name, const char *comment)
{
	struct wbuf w;
	uint8_t *buf = payload();

	wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
	wbuf_put_u16(&w, 1);
	wbuf_put_u8(&w, flags);
	wbuf_put_str16(&w, name, 0xffff);
	wbuf_put_str16(&w, comment, 0xffff);
	assert_false(w.overflow);
	return decode_rc(MSG_MODULES, buf, w.len);
}

/* MODULES: every field checked, every count capped before allocation (issue 15). */
static void test_bad_modules(void **state)
{
	char *name = repeat('n', PROTO_MAX_MODNAME + 1);
	char *text = repeat('t', PROTO_MAX_TEXT + 1);
	struct proto_module *mods = calloc(PROTO_MAX_BATCH, sizeof(*mods));
	struct msg m;

	(void)state;
	assert_non_null(mods);
	assert_int_equal(decode_one_module_raw(PROTO_MOD_READ_ONLY, "ok", "fine"), 0);
	/* Unknown flags, read only and write only together. */
	assert_int_equal(decode_one_module_raw(PROTO_MOD_UNAVAILABLE, "ok", ""), 0);
	for (unsigned bit = 3; bit < 8; bit++) {
		assert_int_equal(decode_one_module_raw((uint8_t)(1u << bit), "ok", ""), -EBADMSG);
	}
	assert_int_equal(
	    decode_one_module_raw(PROTO_MOD_READ_ONLY | PROTO_MOD_WRITE_ONLY, "ok", ""), -EBADMSG);
	/* A name: not empty, no '/', at most PROTO_MAX_MODNAME bytes. */
	assert_int_equal(decode_one_module_raw(0, "", ""), -EBADMSG);
	assert_int_equal(decode_one_module_raw(0, "a/b", ""), -EBADMSG);
	assert_int_equal(decode_one_module_raw(0, name + 1, ""), 0);
	assert_int_equal(decode_one_module_raw(0, name, ""), -EBADMSG);
	/* A comment: at most PROTO_MAX_TEXT bytes. */
	assert_int_equal(decode_one_module_raw(0, "ok", text + 1), 0);
	assert_int_equal(decode_one_module_raw(0, "ok", text), -EBADMSG);
	/* A full batch round-trips; one more is refused both ways. */
	for (size_t i = 0; i < PROTO_MAX_BATCH; i++) {
		mods[i] = s_mods[i % 3];
	}
	m = (struct msg){ .type = MSG_MODULES,
			  .u.modules = { .count = PROTO_MAX_BATCH, .mods = mods } };
	round_trip(&m);
	m.u.modules.count = PROTO_MAX_BATCH + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	{
		struct wbuf w;
		uint8_t *buf = payload();

		wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
		wbuf_put_u16(&w, PROTO_MAX_BATCH + 1);
		for (size_t i = 0; i <= PROTO_MAX_BATCH; i++) {
			wbuf_put_u8(&w, 0);
			wbuf_put_str16(&w, "m", PROTO_MAX_MODNAME);
			wbuf_put_str16(&w, "", PROTO_MAX_TEXT);
		}
		assert_false(w.overflow);
		assert_int_equal(decode_rc(MSG_MODULES, buf, w.len), -EBADMSG);
	}
	/* A huge count in a short payload: refused before allocating. */
	{
		const uint8_t p[6] = { 0xff, 0xff, 0, 0, 0, 0 };
		const uint8_t q[6] = { 0, 2, 0, 0, 0, 0 };

		assert_int_equal(decode_rc(MSG_MODULES, p, sizeof(p)), -EBADMSG);
		assert_int_equal(decode_rc(MSG_MODULES, q, sizeof(q)), -EBADMSG);
	}
	free(mods);
	free(name);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_list),
		cmocka_unit_test(test_bad_modules),
		cmocka_unit_test(test_bad_sums),
		cmocka_unit_test(test_bad_list_attrs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
