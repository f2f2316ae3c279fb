/* SPDX-License-Identifier: MIT */
/*
 * The zero-copy fence's agreement (src/mwfence.c), on the host: the bit is
 * announced only by an end whose lane devices all bind type-2 windows; a
 * session takes windows only with both ends' bit, on verbs, unsealed (a
 * mixed pair, tcp or sealed slots keep the private copy), and only where a
 * lost lane ends the session anyway (one lane, or no rails on one end); a credit's word
 * is the window's key with windows (never 0) and 0 without.
 */
#include "testutil.h"

#include <errno.h>

#include "proto/msg.h"
#include "mwfence.h"

static void test_offer(void **state)
{
	(void)state;
	assert_true(mwfence_offer(1) == PROTO_CAP_MW_FENCE);
	/* A device without type-2 windows (siw, cxgb4, an old kernel's rxe). */
	assert_true(mwfence_offer(0) == 0);
	/* No RDMA device holds the address, or the check failed. */
	assert_true(mwfence_offer(-ENODEV) == 0);
	assert_true(mwfence_offer(-EIO) == 0);
	/* The bit is one the decoder keeps, and no other capability's. */
	assert_true((PROTO_CAPS_KNOWN & PROTO_CAP_MW_FENCE) != 0);
	assert_true(PROTO_CAP_MW_FENCE == 1ull << 36);
}

static void test_agreed(void **state)
{
	const uint64_t mw = PROTO_CAP_MW_FENCE, other = PROTO_CAP_VERBS | PROTO_CAP_WRITE_SEND,
		       rails = PROTO_CAP_RAILS;

	(void)state;
	assert_true(mwfence_agreed(mw | other, mw | other, XPORT_KIND_VERBS, false));
	/* With rails on both ends too: a lost lane's windows are opened again on another. */
	assert_true(mwfence_agreed(mw | rails, mw | rails, XPORT_KIND_VERBS, false));
	assert_true(mwfence_agreed(mw | rails, mw, XPORT_KIND_VERBS, false));
	/* A mixed pair: either end without the bit keeps the copy. */
	assert_false(mwfence_agreed(mw | other, other, XPORT_KIND_VERBS, false));
	assert_false(mwfence_agreed(other, mw | other, XPORT_KIND_VERBS, false));
	assert_false(mwfence_agreed(mw | rails, rails, XPORT_KIND_VERBS, false));
	/* tcp fences by itself; sealed slots are opened into a private copy anyway. */
	assert_false(mwfence_agreed(mw, mw, XPORT_KIND_TCP, false));
	assert_false(mwfence_agreed(mw, mw, XPORT_KIND_VERBS, true));
	assert_false(mwfence_agreed(mw | rails, mw | rails, XPORT_KIND_VERBS, true));
}

static void test_credit_key(void **state)
{
	uint32_t key = 7;

	(void)state;
	/* Without windows: a credit carries nothing, as before. */
	assert_int_equal(mwfence_credit_key(false, 0, &key), 0);
	assert_int_equal(key, 0);
	key = 7;
	assert_int_equal(mwfence_credit_key(false, 0x80001f7, &key), -EBADMSG);
	assert_int_equal(key, 7);
	/* With windows: the window's key, and a credit without one is refused. */
	assert_int_equal(mwfence_credit_key(true, 0x80001f7, &key), 0);
	assert_int_equal(key, 0x80001f7);
	key = 7;
	assert_int_equal(mwfence_credit_key(true, 0, &key), -EBADMSG);
	assert_int_equal(key, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offer),
		cmocka_unit_test(test_agreed),
		cmocka_unit_test(test_credit_key),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
