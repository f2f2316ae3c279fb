/* SPDX-License-Identifier: MIT */
/*
 * Status codes (proto/status.c): names, the device codes as older peers
 * hear them, rsync -i's change strings.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "proto/msg.h"

/* The device codes: named, and downgraded for a peer without PROTO_CAP_DEVICES. */
static void test_device_codes(void **state)
{
	(void)state;
	assert_string_equal(proto_err_name(PERR_DEVICE_REFUSED), "DEVICE_REFUSED");
	assert_string_equal(proto_err_name(PERR_DEVICE_BUSY), "DEVICE_BUSY");
	assert_string_equal(proto_err_name(PERR_DEVICE_SMALL), "DEVICE_SMALL");
	assert_int_equal(proto_err_for_peer(PERR_DEVICE_REFUSED, 0), PERR_PERMISSION);
	assert_int_equal(proto_err_for_peer(PERR_DEVICE_BUSY, 0), PERR_BUSY);
	assert_int_equal(proto_err_for_peer(PERR_DEVICE_SMALL, PROTO_CAP_TCP), PERR_NOSPACE);
	for (uint32_t c = PERR_DEVICE_REFUSED; c <= PERR_DEVICE_SMALL; c++) {
		assert_int_equal(proto_err_for_peer(c, PROTO_CAP_DEVICES), c);
	}
	for (uint32_t c = 0; c < PERR_DEVICE_REFUSED; c++) {
		assert_int_equal(proto_err_for_peer(c, 0), c);
	}
	assert_true(PROTO_CAPS_KNOWN & PROTO_CAP_DEVICES);
}

/* rsync -i's strings for what differed. */
static void test_itemize(void **state)
{
	char s[12];

	(void)state;
	proto_itemize(s, '<', PROTO_FT_REG, PROTO_ITEM_NEW);
	assert_string_equal(s, "<f+++++++++");
	proto_itemize(s, '>', PROTO_FT_REG,
		      PROTO_ITEM_CONTENT | PROTO_ITEM_SIZE | PROTO_ITEM_TIME | PROTO_ITEM_CHECKSUM);
	assert_string_equal(s, ">fcst......");
	proto_itemize(s, '.', PROTO_FT_DIR, PROTO_ITEM_PERMS | PROTO_ITEM_OWNER);
	assert_string_equal(s, ".d...po....");
	proto_itemize(s, 'c', PROTO_FT_SYMLINK, PROTO_ITEM_CONTENT);
	assert_string_equal(s, "cLc........");
	proto_itemize(s, '.', PROTO_FT_SYMLINK, PROTO_ITEM_TIME | PROTO_ITEM_GROUP);
	assert_string_equal(s, ".L..t..g...");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_device_codes),
		cmocka_unit_test(test_itemize),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
