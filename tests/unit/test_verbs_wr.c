/* SPDX-License-Identifier: MIT */
/*
 * The pure verbs builders (src/verbs_wr.c), on the host without a device:
 * opcodes and immediates, signaling, inline, zero-length credits, per-lane
 * chains, wr_id encoding, completion mapping including error completions whose
 * opcode is undefined.
 */
#include "testutil.h"

#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "xport.h"

#ifdef HAVE_VERBS
#include "verbs_wr.h"

static uint8_t buf[4096];
static struct xport_mr mr = { .addr = buf,
			      .len = sizeof(buf),
			      .lkey = 0x1234,
			      .rkey = 0x5678,
			      .lane_lkey = { [0 ... XPORT_MAX_LANES - 1] = 0x1234 },
			      .lane_rkey = { [0 ... XPORT_MAX_LANES - 1] = 0x5678 } };

static struct xport_wr mkwr(uint32_t op, uint32_t flags, uint32_t off, uint32_t len, unsigned lane)
{
	return (struct xport_wr){
		.wr_id = 1000 + off,
		.opcode = op,
		.flags = flags,
		.mr = len ? &mr : NULL,
		.buf = len ? buf + off : NULL,
		.len = len,
		.imm = 0xa1b2c3d4,
		.remote_addr = 0x7f0000001000ull + off,
		.rkey = 0xcafe,
		.lane = lane,
	};
}

static void test_write_fill(void **state)
{
	struct xport_wr w = mkwr(XPORT_OP_WRITE, 0, 16, 100, 0);
	struct ibv_send_wr s;
	struct ibv_sge sge;

	verbs_wr_fill(&w, 42, 256, &s, &sge);
	assert_int_equal(s.wr_id, 42);
	assert_int_equal(s.opcode, IBV_WR_RDMA_WRITE);
	assert_int_equal(s.send_flags, 0);
	assert_int_equal(s.num_sge, 1);
	assert_ptr_equal(s.sg_list, &sge);
	assert_null(s.next);
	/* Keyed: an address in the registration's iova space (zero-based), not ours. */
	assert_int_equal(sge.addr, 16);
	assert_int_equal(sge.length, 100);
	assert_int_equal(sge.lkey, 0x1234);
	assert_int_equal(s.wr.rdma.remote_addr, 0x7f0000001010ull);
	assert_int_equal(s.wr.rdma.rkey, 0xcafe);
}

/* Rails: the same memory has another lkey in each lane's device. */
static void test_lane_lkey(void **state)
{
	struct xport_mr rails = mr;
	struct xport_wr w = mkwr(XPORT_OP_WRITE, 0, 0, 512, 1);
	struct ibv_send_wr s;
	struct ibv_sge sge;

	(void)state;
	rails.lane_lkey[1] = 0xabcd;
	w.mr = &rails;
	assert_int_equal(verbs_wr_check(&w, 2, 0), 0);
	rails.iova = 0x10000;
	verbs_wr_fill(&w, 1, 0, &s, &sge);
	assert_int_equal(sge.lkey, 0xabcd);
	assert_int_equal(sge.addr, 0x10000);
	w.lane = 0;
	verbs_wr_fill(&w, 1, 0, &s, &sge);
	assert_int_equal(sge.lkey, 0x1234);
	/* Not registered in lane 1's domain: refused before it reaches the device. */
	rails.lane_lkey[1] = 0;
	w.lane = 1;
	assert_int_equal(verbs_wr_check(&w, 2, 0), -EINVAL);
}

static void test_write_imm_fill(void **state)
{
	struct xport_wr w = mkwr(XPORT_OP_WRITE_IMM, XPORT_SEND_SIGNALED, 0, 8, 0);
	struct ibv_send_wr s;
	struct ibv_sge sge;

	verbs_wr_fill(&w, 7, 256, &s, &sge);
	assert_int_equal(s.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
	assert_int_equal(s.imm_data, htobe32(0xa1b2c3d4));
	assert_int_equal(s.send_flags, IBV_SEND_SIGNALED);
}

static void test_inline(void **state)
{
	struct xport_wr w = mkwr(XPORT_OP_WRITE_IMM, XPORT_SEND_INLINE, 0, 64, 0);
	struct ibv_send_wr s;
	struct ibv_sge sge;

	verbs_wr_fill(&w, 1, 64, &s, &sge);
	assert_true(s.send_flags & IBV_SEND_INLINE);
	/* Inline: the provider copies from our own address. */
	assert_int_equal(sge.addr, (uint64_t)(uintptr_t)buf);
	/* Too big for the device's inline: falls back to the registration. */
	verbs_wr_fill(&w, 1, 63, &s, &sge);
	assert_false(s.send_flags & IBV_SEND_INLINE);
	assert_int_equal(sge.lkey, 0x1234);
	assert_int_equal(sge.addr, 0);
	/* No inline support at all. */
	verbs_wr_fill(&w, 1, 0, &s, &sge);
	assert_false(s.send_flags & IBV_SEND_INLINE);
	/* Inline without a registration is fine when it fits, refused when not. */
	w.mr = NULL;
	assert_int_equal(verbs_wr_check(&w, 1, 64), 0);
	assert_int_equal(verbs_wr_check(&w, 1, 63), -EINVAL);
}

static void test_zero_length_credit(void **state)
{
	/* The engine's credit: WRITE_IMM, no MR, rkey 0, len 0. */
	struct xport_wr w = { .wr_id = 9, .opcode = XPORT_OP_WRITE_IMM, .imm = 5, .lane = 1 };
	struct ibv_send_wr s;
	struct ibv_sge sge;

	assert_int_equal(verbs_wr_check(&w, 2, 256), 0);
	w.flags = XPORT_SEND_INLINE | XPORT_SEND_SIGNALED;
	assert_int_equal(verbs_wr_check(&w, 2, 256), 0);
	verbs_wr_fill(&w, 3, 256, &s, &sge);
	assert_int_equal(s.num_sge, 0);
	assert_null(s.sg_list);
	assert_int_equal(s.wr.rdma.rkey, 0);
	assert_int_equal(s.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
	assert_int_equal(s.imm_data, htobe32(5));
	/* Inline is meaningless for 0 bytes; never set it. */
	assert_int_equal(s.send_flags, IBV_SEND_SIGNALED);
}

static void test_check_rejects(void **state)
{
	struct xport_wr w = mkwr(XPORT_OP_WRITE, 0, 0, 16, 0);

	assert_int_equal(verbs_wr_check(&w, 1, 256), 0);
	w.lane = 1;
	assert_int_equal(verbs_wr_check(&w, 1, 256), -EINVAL);
	w = mkwr(3, 0, 0, 16, 0);
	assert_int_equal(verbs_wr_check(&w, 1, 256), -EINVAL);
	w = mkwr(XPORT_OP_WRITE, 0x80, 0, 16, 0);
	assert_int_equal(verbs_wr_check(&w, 1, 256), -EINVAL);
	/* Buffer running past its MR. */
	w = mkwr(XPORT_OP_WRITE, 0, sizeof(buf) - 8, 16, 0);
	assert_int_equal(verbs_wr_check(&w, 1, 256), -EINVAL);
	w = mkwr(XPORT_OP_WRITE, 0, sizeof(buf) - 16, 16, 0);
	assert_int_equal(verbs_wr_check(&w, 1, 256), 0);
	/* No MR / no buffer. */
	w.mr = NULL;
	assert_int_equal(verbs_wr_check(&w, 1, 256), -EINVAL);
	w = mkwr(XPORT_OP_WRITE, 0, 0, 16, 0);
	w.buf = NULL;
	assert_int_equal(verbs_wr_check(&w, 1, 256), -EINVAL);
	assert_int_equal(verbs_wr_check(NULL, 1, 256), -EINVAL);
}

static void test_chain_per_lane(void **state)
{
	struct xport_wr wrs[5] = {
		mkwr(XPORT_OP_WRITE, 0, 0, 10, 0),
		mkwr(XPORT_OP_WRITE, 0, 10, 10, 2),
		mkwr(XPORT_OP_WRITE_IMM, XPORT_SEND_SIGNALED, 20, 10, 0),
		mkwr(XPORT_OP_WRITE_IMM, 0, 0, 0, 2),
		mkwr(XPORT_OP_WRITE, XPORT_SEND_SIGNALED, 30, 10, 0),
	};
	uint64_t base[3] = { 100, 5, 0 };
	struct ibv_send_wr out[5], *heads[3];
	struct ibv_sge sge[5];
	size_t counts[3];
	enum verbs_wrid_kind kind;
	unsigned lane;
	uint64_t seq;

	verbs_wr_chain(wrs, 5, 3, base, 256, out, sge, heads, counts);
	assert_int_equal(counts[0], 3);
	assert_int_equal(counts[1], 0);
	assert_int_equal(counts[2], 2);
	assert_null(heads[1]);
	assert_ptr_equal(heads[0], &out[0]);
	assert_ptr_equal(out[0].next, &out[2]);
	assert_ptr_equal(out[2].next, &out[4]);
	assert_null(out[4].next);
	assert_ptr_equal(heads[2], &out[1]);
	assert_ptr_equal(out[1].next, &out[3]);
	assert_null(out[3].next);
	/* Sequence numbers continue each lane's queue. */
	assert_int_equal(verbs_wrid_decode(out[4].wr_id, 3, &kind, &lane, &seq), 0);
	assert_int_equal(kind, VERBS_WRID_SEND);
	assert_int_equal(lane, 0);
	assert_int_equal(seq, 102);
	assert_int_equal(verbs_wrid_decode(out[3].wr_id, 3, &kind, &lane, &seq), 0);
	assert_int_equal(lane, 2);
	assert_int_equal(seq, 1);
	assert_int_equal(out[3].num_sge, 0);
	assert_ptr_equal(out[2].sg_list, &sge[2]);
}

static void test_wrid(void **state)
{
	enum verbs_wrid_kind kind;
	unsigned lane;
	uint64_t seq;
	uint64_t id = verbs_wrid_encode(VERBS_WRID_RECV, 15, VERBS_WRID_SEQ_MASK + 3);

	assert_int_equal(verbs_wrid_decode(id, 16, &kind, &lane, &seq), 0);
	assert_int_equal(kind, VERBS_WRID_RECV);
	assert_int_equal(lane, 15);
	assert_int_equal(seq, 2);
	assert_int_equal(verbs_wrid_decode(id, 15, &kind, &lane, &seq), -EINVAL);
	assert_int_equal(verbs_wrid_decode(12345, 16, &kind, &lane, &seq), -EINVAL);
	/* Expansion across the 48-bit wrap. */
	assert_int_equal(verbs_seq_expand(VERBS_WRID_SEQ_MASK, 1), VERBS_WRID_SEQ_MASK + 2);
	assert_int_equal(verbs_seq_expand(10, 10), 10);
	assert_int_equal(verbs_seq_expand(10, 17), 17);
}

static void test_wc_map(void **state)
{
	struct ibv_wc wc = { 0 };
	struct xport_wc x;
	enum verbs_wrid_kind kind;
	uint64_t seq;

	/* A successful RECV_RDMA_WITH_IMM. */
	wc.wr_id = verbs_wrid_encode(VERBS_WRID_RECV, 1, 77);
	wc.status = IBV_WC_SUCCESS;
	wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
	wc.wc_flags = IBV_WC_WITH_IMM;
	wc.imm_data = htobe32(0x01020304);
	wc.byte_len = 4096;
	assert_int_equal(verbs_wc_map(&wc, 2, false, &x, &kind, &seq), 0);
	assert_int_equal(x.status, XPORT_WC_SUCCESS);
	assert_int_equal(x.opcode, XPORT_WC_RECV_IMM);
	assert_int_equal(x.imm, 0x01020304);
	assert_int_equal(x.len, 4096);
	assert_int_equal(x.lane, 1);
	assert_int_equal(kind, VERBS_WRID_RECV);
	assert_int_equal(seq, 77);

	/* A write completion. */
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = verbs_wrid_encode(VERBS_WRID_SEND, 0, 3);
	wc.opcode = IBV_WC_RDMA_WRITE;
	assert_int_equal(verbs_wc_map(&wc, 2, false, &x, &kind, &seq), 0);
	assert_int_equal(x.opcode, XPORT_WC_WRITE);
	assert_int_equal(x.imm, 0);
	assert_int_equal(x.len, 0);

	/* Errors: opcode is garbage, the wr_id decides. */
	wc.status = IBV_WC_REM_ACCESS_ERR;
	wc.opcode = (enum ibv_wc_opcode)0x55;
	assert_int_equal(verbs_wc_map(&wc, 2, false, &x, &kind, &seq), 0);
	assert_int_equal(x.status, XPORT_WC_REM_ACCESS_ERR);
	assert_int_equal(x.opcode, XPORT_WC_WRITE);
	wc.wr_id = verbs_wrid_encode(VERBS_WRID_RECV, 1, 0);
	wc.status = IBV_WC_WR_FLUSH_ERR;
	assert_int_equal(verbs_wc_map(&wc, 2, false, &x, &kind, &seq), 0);
	assert_int_equal(x.status, XPORT_WC_WR_FLUSH_ERR);
	assert_int_equal(x.opcode, XPORT_WC_RECV_IMM);

	/* Completions that cannot be ours. */
	wc.status = IBV_WC_SUCCESS;
	wc.opcode = IBV_WC_RECV;
	assert_int_equal(verbs_wc_map(&wc, 2, false, &x, &kind, &seq), -EPROTO);
	wc.wr_id = 99;
	assert_int_equal(verbs_wc_map(&wc, 2, false, &x, &kind, &seq), -EPROTO);
	wc.wr_id = verbs_wrid_encode(VERBS_WRID_SEND, 0, 3);
	wc.opcode = IBV_WC_RDMA_READ;
	assert_int_equal(verbs_wc_map(&wc, 2, false, &x, &kind, &seq), -EPROTO);
}

/*
 * WRITE + SEND (iWARP): a WRITE_IMM with bytes is an unsignaled RDMA WRITE
 * then a SEND of imm and len carrying the caller's flags; a credit (len 0)
 * is the SEND alone; plain writes stay; lanes keep their order and counts.
 */
static void test_chain_send(void **state)
{
	static uint8_t msgs0[4 * VERBS_SEND_MSG_LEN], msgs1[4 * VERBS_SEND_MSG_LEN];
	uint8_t *msgs[2] = { msgs0, msgs1 };
	uint32_t lkeys[2] = { 0x11, 0x22 };
	struct xport_wr wrs[4] = {
		mkwr(XPORT_OP_WRITE, 0, 0, 64, 0),
		mkwr(XPORT_OP_WRITE_IMM, XPORT_SEND_SIGNALED | XPORT_SEND_INLINE, 64, 32, 0),
		mkwr(XPORT_OP_WRITE_IMM, XPORT_SEND_SIGNALED, 0, 0, 1),
		mkwr(XPORT_OP_WRITE, XPORT_SEND_SIGNALED, 128, 8, 1),
	};
	struct ibv_send_wr out[8], *heads[2];
	struct ibv_sge sge[8];
	size_t src[8], counts[2];
	uint64_t base[2] = { 3, 0 };
	uint32_t imm, len;

	assert_int_equal(verbs_wr_hw_count(&wrs[0], true), 1);
	assert_int_equal(verbs_wr_hw_count(&wrs[1], true), 2);
	assert_int_equal(verbs_wr_hw_count(&wrs[1], false), 1);
	assert_int_equal(verbs_wr_hw_count(&wrs[2], true), 1);
	assert_int_equal(
	    verbs_wr_chain_send(wrs, 4, 2, base, 64, msgs, lkeys, 4, out, sge, src, heads, counts),
	    5);
	assert_int_equal(counts[0], 3);
	assert_int_equal(counts[1], 2);
	/* Lane 0: write, write (the descriptor's bytes, unsignaled), send. */
	assert_ptr_equal(heads[0], &out[0]);
	assert_int_equal(out[0].opcode, IBV_WR_RDMA_WRITE);
	assert_ptr_equal(out[0].next, &out[1]);
	assert_int_equal(out[1].opcode, IBV_WR_RDMA_WRITE);
	assert_int_equal(out[1].send_flags & IBV_SEND_SIGNALED, 0);
	assert_true(out[1].send_flags & IBV_SEND_INLINE);
	assert_int_equal(out[1].wr.rdma.remote_addr, 0x7f0000001000ull + 64);
	assert_int_equal(sge[1].length, 32);
	assert_ptr_equal(out[1].next, &out[2]);
	assert_int_equal(out[2].opcode, IBV_WR_SEND);
	assert_true(out[2].send_flags & IBV_SEND_SIGNALED);
	assert_null(out[2].next);
	assert_int_equal(out[2].num_sge, 1);
	assert_int_equal(sge[2].length, VERBS_SEND_MSG_LEN);
	assert_int_equal(sge[2].lkey, 0x11);
	/* Sequence 3 + 2 = 5: entry 5 % 4 = 1 of lane 0's messages holds imm and len. */
	assert_int_equal(sge[2].addr, (uint64_t)(uintptr_t)(msgs0 + 1 * VERBS_SEND_MSG_LEN));
	verbs_send_msg_decode(msgs0 + VERBS_SEND_MSG_LEN, &imm, &len);
	assert_int_equal(imm, 0xa1b2c3d4);
	assert_int_equal(len, 32);
	assert_int_equal(msgs0[0], 0); /* big-endian on the wire: imm first */
	assert_int_equal(msgs0[VERBS_SEND_MSG_LEN], 0xa1);
	/* The wr_ids count the lane's hardware requests from its base. */
	for (int k = 0; k < 3; k++) {
		enum verbs_wrid_kind kind;
		unsigned lane;
		uint64_t seq;

		assert_int_equal(verbs_wrid_decode(out[k].wr_id, 2, &kind, &lane, &seq), 0);
		assert_int_equal(lane, 0);
		assert_int_equal(seq, 3 + (uint64_t)k);
	}
	assert_int_equal(src[0], 0);
	assert_int_equal(src[1], 1);
	assert_int_equal(src[2], 1);
	/* Lane 1: a credit is a SEND alone (no zero-length write), then a plain write. */
	assert_ptr_equal(heads[1], &out[3]);
	assert_int_equal(out[3].opcode, IBV_WR_SEND);
	assert_true(out[3].send_flags & IBV_SEND_SIGNALED);
	assert_int_equal(sge[3].lkey, 0x22);
	verbs_send_msg_decode(msgs1, &imm, &len);
	assert_int_equal(len, 0);
	assert_int_equal(out[4].opcode, IBV_WR_RDMA_WRITE);
	assert_true(out[4].send_flags & IBV_SEND_SIGNALED);
	assert_int_equal(src[3], 2);
	assert_int_equal(src[4], 3);
	/* No inline room: the message goes from its registration. */
	verbs_wr_chain_send(&wrs[2], 1, 2, base, 0, msgs, lkeys, 4, out, sge, src, heads, counts);
	assert_int_equal(out[0].send_flags & IBV_SEND_INLINE, 0);
}

static void test_wc_map_send(void **state)
{
	struct ibv_wc wc = { 0 };
	struct ibv_recv_wr r;
	struct ibv_sge sge;
	struct xport_wc x;
	enum verbs_wrid_kind kind;
	uint64_t seq;

	/* A receive of one message: imm and len are left to the caller (its buffer). */
	wc.wr_id = verbs_wrid_encode(VERBS_WRID_RECV, 1, 5);
	wc.opcode = IBV_WC_RECV;
	wc.byte_len = VERBS_SEND_MSG_LEN;
	assert_int_equal(verbs_wc_map(&wc, 2, true, &x, &kind, &seq), 0);
	assert_int_equal(x.opcode, XPORT_WC_RECV_IMM);
	assert_int_equal(kind, VERBS_WRID_RECV);
	assert_int_equal(seq, 5);
	/* Not a message: wrong size, an immediate, or not on this path. */
	wc.byte_len = VERBS_SEND_MSG_LEN - 1;
	assert_int_equal(verbs_wc_map(&wc, 2, true, &x, &kind, &seq), -EPROTO);
	wc.byte_len = VERBS_SEND_MSG_LEN;
	wc.wc_flags = IBV_WC_WITH_IMM;
	assert_int_equal(verbs_wc_map(&wc, 2, true, &x, &kind, &seq), -EPROTO);
	wc.wc_flags = 0;
	assert_int_equal(verbs_wc_map(&wc, 2, false, &x, &kind, &seq), -EPROTO);
	wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
	wc.wc_flags = IBV_WC_WITH_IMM;
	assert_int_equal(verbs_wc_map(&wc, 2, true, &x, &kind, &seq), -EPROTO);
	/* A SEND's completion is ours on this path only. */
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = verbs_wrid_encode(VERBS_WRID_SEND, 0, 2);
	wc.opcode = IBV_WC_SEND;
	assert_int_equal(verbs_wc_map(&wc, 2, true, &x, &kind, &seq), 0);
	assert_int_equal(x.opcode, XPORT_WC_WRITE);
	assert_int_equal(verbs_wc_map(&wc, 2, false, &x, &kind, &seq), -EPROTO);
	/* The receive for one message. */
	verbs_recv_fill_msg(77, buf, 0x33, &r, &sge);
	assert_int_equal(r.wr_id, 77);
	assert_int_equal(r.num_sge, 1);
	assert_ptr_equal(r.sg_list, &sge);
	assert_int_equal(sge.length, VERBS_SEND_MSG_LEN);
	assert_int_equal(sge.lkey, 0x33);
	assert_int_equal(sge.addr, (uint64_t)(uintptr_t)buf);
}

/* Which path a device's transport takes; the test switch only ever adds WRITE + SEND. */
static void test_transport_path(void **state)
{
	assert_int_equal(verbs_transport_path(IBV_TRANSPORT_IB, false), XPORT_PATH_WRITE_IMM);
	assert_int_equal(verbs_transport_path(IBV_TRANSPORT_IB, true), XPORT_PATH_WRITE_SEND);
	assert_int_equal(verbs_transport_path(IBV_TRANSPORT_IWARP, false), XPORT_PATH_WRITE_SEND);
	assert_int_equal(verbs_transport_path(IBV_TRANSPORT_USNIC, false), -EOPNOTSUPP);
	assert_int_equal(verbs_transport_path(IBV_TRANSPORT_UNKNOWN, true), -EOPNOTSUPP);
	assert_string_equal(verbs_transport_name(IBV_TRANSPORT_IWARP), "iWARP");
	assert_string_equal(xport_path_name(XPORT_PATH_WRITE_IMM), "write_imm");
	assert_string_equal(xport_path_name(XPORT_PATH_WRITE_SEND), "write_send");
	assert_string_equal(xport_path_name(0), "-");
}

static void test_status_names(void **state)
{
	assert_int_equal(verbs_wc_status_map(IBV_WC_SUCCESS), XPORT_WC_SUCCESS);
	assert_int_equal(verbs_wc_status_map(IBV_WC_LOC_PROT_ERR), XPORT_WC_LOC_PROT_ERR);
	assert_int_equal(verbs_wc_status_map(IBV_WC_REM_ACCESS_ERR), XPORT_WC_REM_ACCESS_ERR);
	assert_int_equal(verbs_wc_status_map(IBV_WC_RNR_RETRY_EXC_ERR), XPORT_WC_RNR_ERR);
	assert_int_equal(verbs_wc_status_map(IBV_WC_WR_FLUSH_ERR), XPORT_WC_WR_FLUSH_ERR);
	assert_int_equal(verbs_wc_status_map(IBV_WC_RETRY_EXC_ERR), XPORT_WC_RETRY_EXC_ERR);
	assert_int_equal(verbs_wc_status_map(IBV_WC_REM_INV_REQ_ERR), XPORT_WC_GENERAL_ERR);
	assert_int_equal(verbs_wc_status_map(IBV_WC_FATAL_ERR), XPORT_WC_GENERAL_ERR);
	assert_string_equal(verbs_wc_status_name(IBV_WC_REM_ACCESS_ERR), "IBV_WC_REM_ACCESS_ERR");
	assert_string_equal(verbs_wc_status_name(IBV_WC_REM_INV_REQ_ERR), "IBV_WC_REM_INV_REQ_ERR");
	assert_string_equal(verbs_wc_status_name((enum ibv_wc_status)999), "IBV_WC_UNKNOWN");
	/* The generic names agree with verbs' for every mapped status. */
	for (int s = IBV_WC_SUCCESS; s <= IBV_WC_GENERAL_ERR; s++) {
		int m = verbs_wc_status_map((enum ibv_wc_status)s);

		if (m != XPORT_WC_GENERAL_ERR) {
			assert_string_equal(xport_wc_status_str(m),
					    verbs_wc_status_name((enum ibv_wc_status)s));
		}
	}
}

static void test_recv_fill(void **state)
{
	struct ibv_recv_wr r;

	memset(&r, 0xff, sizeof(r));
	verbs_recv_fill(55, &r);
	assert_int_equal(r.wr_id, 55);
	assert_int_equal(r.num_sge, 0);
	assert_null(r.sg_list);
	assert_null(r.next);
}

static void test_backend_registered(void **state)
{
	assert_ptr_equal(xport_ops_by_kind(XPORT_KIND_VERBS), &xport_verbs_ops);
	assert_ptr_equal(xport_ops_by_name("verbs"), &xport_verbs_ops);
	assert_int_equal(xport_verbs_ops.kind, XPORT_KIND_VERBS);
	assert_string_equal(xport_verbs_ops.name, "verbs");
}

/* Bad arguments are refused before any device is touched (so also here, without one). */
static void test_backend_rejects_bad_params(void **state)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct xport_params p = { .nlanes = 1, .sq_depth = 8, .rq_depth = 8, .timeout_ms = 100 };
	struct xport *x = NULL;
	struct xport_listener *l = NULL;
	const struct xport_ops *o = &xport_verbs_ops;

	assert_int_equal(o->connect(NULL, 0, &p, &x), -EINVAL);
	p.nlanes = 0;
	assert_int_equal(o->connect((struct sockaddr *)&sin, sizeof(sin), &p, &x), -EINVAL);
	p.nlanes = XPORT_MAX_LANES + 1;
	assert_int_equal(o->connect((struct sockaddr *)&sin, sizeof(sin), &p, &x), -EINVAL);
	p.nlanes = 1;
	p.sq_depth = 1;
	assert_int_equal(o->connect((struct sockaddr *)&sin, sizeof(sin), &p, &x), -EINVAL);
	p.sq_depth = 8;
	p.timeout_ms = 0;
	assert_int_equal(o->connect((struct sockaddr *)&sin, sizeof(sin), &p, &x), -EINVAL);
	assert_null(x);
	sin.sin_family = AF_UNIX;
	assert_int_equal(o->listen((struct sockaddr *)&sin, sizeof(sin), -1, &l, NULL), -EINVAL);
	assert_null(l);
	o->listener_close(NULL);
	o->destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_fill),
		cmocka_unit_test(test_write_imm_fill),
		cmocka_unit_test(test_lane_lkey),
		cmocka_unit_test(test_inline),
		cmocka_unit_test(test_zero_length_credit),
		cmocka_unit_test(test_check_rejects),
		cmocka_unit_test(test_chain_per_lane),
		cmocka_unit_test(test_wrid),
		cmocka_unit_test(test_wc_map),
		cmocka_unit_test(test_chain_send),
		cmocka_unit_test(test_wc_map_send),
		cmocka_unit_test(test_transport_path),
		cmocka_unit_test(test_status_names),
		cmocka_unit_test(test_recv_fill),
		cmocka_unit_test(test_backend_registered),
		cmocka_unit_test(test_backend_rejects_bad_params),
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
