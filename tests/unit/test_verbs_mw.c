/* SPDX-License-Identifier: MIT */
/*
 * The memory-window fence's pure parts, on the host without a device: which
 * devices can fence (device_cap_flags), the bind and local-invalidate
 * requests, a descriptor's SEND becoming SEND_WITH_INV naming the window,
 * a receive completion's invalidation reported (rxe's kernel-numbered flag
 * on rxe only; none when the hardware says none), and the one acceptance rule (xport_wc_closed_window):
 * a slot is taken only on a successful receive that closed exactly the
 * window opened for it; a wrong key, no invalidation, an error or a write
 * completion are refused. The hardware half runs in the Soft-RoCE VM
 * (test_verbs_mw_vm, tests/rxe-vm/mwfence.sh).
 */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "xport.h"

#ifdef HAVE_VERBS
#include "verbs_wr.h"

static void test_caps(void **state)
{
	(void)state;
	assert_false(verbs_mw_caps_ok(0));
	/* Windows, but only type 1 (no 2A/2B): no remote invalidation. */
	assert_false(verbs_mw_caps_ok(IBV_DEVICE_MEM_WINDOW));
	/* A type bit without the windows bit is not trusted either. */
	assert_false(verbs_mw_caps_ok(IBV_DEVICE_MEM_WINDOW_TYPE_2B));
	assert_true(verbs_mw_caps_ok(IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B));
	assert_true(verbs_mw_caps_ok(IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2A));
	/* What Soft-RoCE on Linux 6.1 reports (rxe0 in the VM). */
	assert_true(verbs_mw_caps_ok(0x1223c76));
}

static void test_bind_inv_fill(void **state)
{
	struct ibv_send_wr wr;
	struct ibv_mw *mw = (struct ibv_mw *)0x1000;
	struct ibv_mr *mr = (struct ibv_mr *)0x2000;

	(void)state;
	verbs_window_bind_fill(77, mw, mr, 0x40000, 0x10000, 0x80001f7, &wr);
	assert_int_equal(wr.wr_id, 77);
	assert_int_equal(wr.opcode, IBV_WR_BIND_MW);
	assert_ptr_equal(wr.bind_mw.mw, mw);
	assert_int_equal(wr.bind_mw.rkey, 0x80001f7);
	assert_ptr_equal(wr.bind_mw.bind_info.mr, mr);
	assert_int_equal(wr.bind_mw.bind_info.addr, 0x40000);
	assert_int_equal(wr.bind_mw.bind_info.length, 0x10000);
	/* Remote write only: never read or atomics through a window. */
	assert_int_equal(wr.bind_mw.bind_info.mw_access_flags, IBV_ACCESS_REMOTE_WRITE);
	assert_int_equal(wr.send_flags & IBV_SEND_SIGNALED, 0);
	assert_null(wr.next);
	verbs_window_inv_fill(78, 0x80001f7, &wr);
	assert_int_equal(wr.opcode, IBV_WR_LOCAL_INV);
	assert_int_equal(wr.invalidate_rkey, 0x80001f7);
	assert_int_equal(wr.send_flags & IBV_SEND_SIGNALED, 0);
	/* The next key keeps the window's index and moves its tag, wrapping. */
	assert_int_equal(ibv_inc_rkey(0x80001f6), 0x80001f7);
	assert_int_equal(ibv_inc_rkey(0x80001ff), 0x8000100);
}

/* A descriptor closing the peer's window: WRITE of its bytes, then SEND_WITH_INV. */
static void test_send_with_inv(void **state)
{
	static uint8_t buf[64], msgs0[4 * VERBS_SEND_MSG_LEN];
	uint8_t *msgs[1] = { msgs0 };
	uint32_t lkeys[1] = { 0x11 };
	struct xport_mr mr = { .addr = buf, .len = sizeof(buf), .lane_lkey = { 0x1234 } };
	struct xport_wr wrs[2] = {
		{ .opcode = XPORT_OP_WRITE_IMM,
		  .flags = XPORT_SEND_INLINE,
		  .mr = &mr,
		  .buf = buf,
		  .len = 32,
		  .imm = 0x01000005,
		  .rkey = 0x77,
		  .inv_rkey = 0x80001f7 },
		{ .opcode = XPORT_OP_WRITE_IMM, .imm = 0x02000005 },
	};
	struct ibv_send_wr out[4], *heads[1];
	struct ibv_sge sge[4];
	size_t src[4], counts[1];
	uint64_t base[1] = { 0 };

	(void)state;
	assert_int_equal(xport_wr_check_common(&wrs[0], 1), 0);
	assert_int_equal(
	    verbs_wr_chain_send(wrs, 2, 1, base, 64, msgs, lkeys, 4, out, sge, src, heads, counts),
	    3);
	assert_int_equal(out[0].opcode, IBV_WR_RDMA_WRITE);
	assert_int_equal(out[0].wr.rdma.rkey, 0x77);
	assert_int_equal(out[1].opcode, IBV_WR_SEND_WITH_INV);
	assert_int_equal(out[1].invalidate_rkey, 0x80001f7);
	/* A request that closes nothing stays a plain SEND. */
	assert_int_equal(out[2].opcode, IBV_WR_SEND);
	/* Only a WRITE_IMM may close a window: a plain WRITE with inv_rkey is refused. */
	wrs[0].opcode = XPORT_OP_WRITE;
	assert_int_equal(xport_wr_check_common(&wrs[0], 1), -EINVAL);
}

/* A credit handing the peer a window's key: a plain SEND whose length word is the key. */
static void test_credit_key(void **state)
{
	static uint8_t buf[64], msgs0[4 * VERBS_SEND_MSG_LEN];
	uint8_t *msgs[1] = { msgs0 };
	uint32_t lkeys[1] = { 0x11 }, imm, word;
	struct xport_mr mr = { .addr = buf, .len = sizeof(buf), .lane_lkey = { 0x1234 } };
	struct xport_wr wr = { .opcode = XPORT_OP_WRITE_IMM, .imm = 0x02000005, .key = 0x80001f7 };
	struct ibv_send_wr out[2], *heads[1];
	struct ibv_sge sge[2];
	size_t src[2], counts[1];
	uint64_t base[1] = { 0 };

	(void)state;
	assert_int_equal(xport_wr_check_common(&wr, 1), 1);
	assert_int_equal(
	    verbs_wr_chain_send(&wr, 1, 1, base, 64, msgs, lkeys, 4, out, sge, src, heads, counts),
	    1);
	assert_int_equal(out[0].opcode, IBV_WR_SEND);
	verbs_send_msg_decode(msgs0, &imm, &word);
	assert_int_equal(imm, 0x02000005);
	assert_int_equal(word, 0x80001f7);
	/* A credit without a key keeps its length word 0, as without windows. */
	wr.key = 0;
	verbs_wr_chain_send(&wr, 1, 1, base, 64, msgs, lkeys, 4, out, sge, src, heads, counts);
	verbs_send_msg_decode(msgs0, &imm, &word);
	assert_int_equal(word, 0);
	/* Only a WRITE_IMM of no bytes hands over a key: one with bytes, or a WRITE, is refused. */
	wr.key = 0x80001f7;
	wr.mr = &mr;
	wr.buf = buf;
	wr.len = 32;
	assert_int_equal(xport_wr_check_common(&wr, 1), -EINVAL);
	wr.len = 0;
	wr.opcode = XPORT_OP_WRITE;
	assert_int_equal(xport_wr_check_common(&wr, 1), -EINVAL);
}

static void test_wc_invalidated(void **state)
{
	unsigned std = verbs_wc_inv_flags(0x02c9), rxe = verbs_wc_inv_flags(0xffffff);
	struct ibv_wc wc = { 0 };
	enum verbs_wrid_kind kind;
	struct xport_wc x = { 0 };
	uint64_t seq;

	(void)state;
	wc.wr_id = verbs_wrid_encode(VERBS_WRID_RECV, 0, 3);
	wc.opcode = IBV_WC_RECV;
	wc.byte_len = VERBS_SEND_MSG_LEN;
	wc.wc_flags = IBV_WC_WITH_INV;
	wc.invalidated_rkey = 0x80001f7;
	assert_int_equal(verbs_wc_map(&wc, 1, true, &x, &kind, &seq), 0);
	verbs_wc_invalidation(&wc, std, &x);
	assert_true(x.invalidated);
	assert_int_equal(x.inv_rkey, 0x80001f7);
	verbs_wc_invalidation(&wc, rxe, &x);
	assert_true(x.invalidated);
	/* No flag: nothing closed, whatever the union holds. */
	wc.wc_flags = 0;
	verbs_wc_invalidation(&wc, rxe, &x);
	assert_false(x.invalidated);
	assert_int_equal(x.inv_rkey, 0);
	/*
	 * Bit 2: rxe's kernel-numbered IB_WC_WITH_INVALIDATE, but libibverbs'
	 * IP_CSUM_OK, which mlx5 sets on RoCE receives: an invalidation on
	 * rxe only.
	 */
	wc.wc_flags = IBV_WC_IP_CSUM_OK;
	verbs_wc_invalidation(&wc, rxe, &x);
	assert_true(x.invalidated);
	verbs_wc_invalidation(&wc, std, &x);
	assert_false(x.invalidated);
	/* Only a successful plain receive (SEND_WITH_INV) closes a window. */
	wc.wc_flags = IBV_WC_WITH_INV;
	wc.status = IBV_WC_WR_FLUSH_ERR;
	verbs_wc_invalidation(&wc, std, &x);
	assert_false(x.invalidated);
	wc.status = IBV_WC_SUCCESS;
	wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
	verbs_wc_invalidation(&wc, std, &x);
	assert_false(x.invalidated);
	/* A window's bind or invalidation completion is a send of ours. */
	wc.wr_id = verbs_wrid_encode(VERBS_WRID_SEND, 0, 4);
	wc.opcode = IBV_WC_BIND_MW;
	assert_int_equal(verbs_wc_map(&wc, 1, true, &x, &kind, &seq), 0);
	assert_int_equal(x.opcode, XPORT_WC_WRITE);
	/* ... but not on a WRITE_IMM xport, which never binds. */
	assert_int_equal(verbs_wc_map(&wc, 1, false, &x, &kind, &seq), -EPROTO);
}

/* The acceptance rule: exactly the window opened for the slot, closed by this request. */
static void test_closed_window(void **state)
{
	struct xport_wc ok = { .status = XPORT_WC_SUCCESS,
			       .opcode = XPORT_WC_RECV_IMM,
			       .invalidated = true,
			       .inv_rkey = 0x80001f7 };
	struct xport_wc wc;

	(void)state;
	assert_true(xport_wc_closed_window(&ok, 0x80001f7));
	/* Another window (another slot's, or this one's previous key). */
	assert_false(xport_wc_closed_window(&ok, 0x80001f8));
	assert_false(xport_wc_closed_window(&ok, 0x80001f6));
	/* No invalidation at all: a peer that left the window open. */
	wc = ok;
	wc.invalidated = false;
	assert_false(xport_wc_closed_window(&wc, 0x80001f7));
	/* An invalidated key of 0 is not "none". */
	wc = ok;
	wc.inv_rkey = 0;
	assert_false(xport_wc_closed_window(&wc, 0x80001f7));
	wc = ok;
	wc.status = XPORT_WC_WR_FLUSH_ERR;
	assert_false(xport_wc_closed_window(&wc, 0x80001f7));
	wc = ok;
	wc.opcode = XPORT_WC_WRITE;
	assert_false(xport_wc_closed_window(&wc, 0x80001f7));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_caps),	      cmocka_unit_test(test_bind_inv_fill),
		cmocka_unit_test(test_send_with_inv), cmocka_unit_test(test_wc_invalidated),
		cmocka_unit_test(test_closed_window), cmocka_unit_test(test_credit_key),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

#else
int main(void)
{
	printf("SKIP: built without the verbs transport (ENABLE_VERBS=OFF)\n");
	return T_EXIT_SKIP;
}
#endif
