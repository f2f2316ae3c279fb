/* SPDX-License-Identifier: MIT */
/*
 * The bounds-checked big-endian reader and writer under every message
 * (proto/wire.c): reads and writes that do not fit latch an error and
 * write nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "proto/wire.h"

static void test_rbuf_latches(void **state)
{
	const uint8_t in[] = { 0x12, 0x34, 0x56, 0x78, 0x9a };
	struct rbuf r;
	uint8_t bytes[4] = { 1, 2, 3, 4 };

	(void)state;
	rbuf_init(&r, in, sizeof(in));
	assert_int_equal(rbuf_get_u16(&r), 0x1234);
	assert_false(r.error);
	assert_int_equal(rbuf_get_u32(&r), 0); /* 3 bytes left: refused, not partial */
	assert_true(r.error);
	assert_int_equal(rbuf_left(&r), 3);
	assert_int_equal(rbuf_get_u8(&r), 0); /* latched: even a byte that exists is refused */
	assert_true(r.error);
	rbuf_get_bytes(&r, bytes, sizeof(bytes));
	assert_memory_equal(bytes, "\0\0\0\0", 4);

	rbuf_init(&r, in, sizeof(in));
	assert_true(rbuf_get_u64(&r) == 0);
	assert_true(r.error);

	rbuf_init(&r, in, 0);
	assert_int_equal(rbuf_get_u8(&r), 0);
	assert_true(r.error);

	rbuf_init(&r, in, sizeof(in));
	assert_int_equal(rbuf_get_u32(&r), 0x12345678);
	assert_int_equal(rbuf_get_u8(&r), 0x9a);
	assert_false(r.error);
	assert_int_equal(rbuf_left(&r), 0);
}

static void test_rbuf_str16(void **state)
{
	const uint8_t ok[] = { 0, 3, 'a', 'b', 'c' };
	const uint8_t nul[] = { 0, 3, 'a', 0, 'c' };
	const uint8_t longer[] = { 0, 6, 'a', 'b', 'c' };
	char out[8];
	struct rbuf r;

	(void)state;
	rbuf_init(&r, ok, sizeof(ok));
	rbuf_get_str16(&r, out, sizeof(out), 7);
	assert_false(r.error);
	assert_string_equal(out, "abc");

	rbuf_init(&r, ok, sizeof(ok));
	rbuf_get_str16(&r, out, sizeof(out), 2); /* over max */
	assert_true(r.error);
	assert_string_equal(out, "");

	rbuf_init(&r, ok, sizeof(ok));
	rbuf_get_str16(&r, out, 3, 100); /* no room for the NUL */
	assert_true(r.error);

	rbuf_init(&r, nul, sizeof(nul));
	rbuf_get_str16(&r, out, sizeof(out), 7);
	assert_true(r.error);

	rbuf_init(&r, longer, sizeof(longer));
	rbuf_get_str16(&r, out, sizeof(out), 7);
	assert_true(r.error);
}

static void test_wbuf_latches(void **state)
{
	uint8_t buf[8];
	struct wbuf w;

	(void)state;
	memset(buf, 0xee, sizeof(buf));
	wbuf_init(&w, buf, 5);
	wbuf_put_u32(&w, 0x01020304);
	assert_false(w.overflow);
	wbuf_put_u16(&w, 0xffff); /* 1 byte of room: refused whole */
	assert_true(w.overflow);
	assert_int_equal(w.len, 4);
	wbuf_put_u8(&w, 0xff); /* latched: even a byte that fits is refused */
	assert_int_equal(w.len, 4);
	assert_memory_equal(buf, "\x01\x02\x03\x04\xee\xee\xee\xee", 8);

	wbuf_init(&w, buf, sizeof(buf));
	wbuf_put_u64(&w, 1);
	assert_false(w.overflow);
	wbuf_put_bytes(&w, "", 0);
	assert_false(w.overflow);
	wbuf_put_u8(&w, 0);
	assert_true(w.overflow);

	/* str16 over its max latches without writing the length. */
	wbuf_init(&w, buf, sizeof(buf));
	wbuf_put_str16(&w, "abc", 2);
	assert_true(w.overflow);
	assert_int_equal(w.len, 0);
	wbuf_init(&w, buf, sizeof(buf));
	wbuf_put_str16(&w, "abc", 3);
	assert_false(w.overflow);
	assert_int_equal(w.len, 5);
	assert_memory_equal(buf, "\0\3abc", 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rbuf_latches),
		cmocka_unit_test(test_rbuf_str16),
		cmocka_unit_test(test_wbuf_latches),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
