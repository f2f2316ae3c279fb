/* SPDX-License-Identifier: MIT */
/*
 * The tcp transport over real loopback sockets with real threads: data
 * placement and ordering, zero-based registrations, remote access errors
 * leaving target memory untouched (near UINT64_MAX included), RNR, dereg
 * revoking a key, send-queue bounds, the same data over sealed lanes,
 * and the ops table.
 */
#include "testutil.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "xport.h"
#include "xport_tcp_harness.h"

/* ---- 1. data placement, ordering, immediates ---- */

#define CHUNK  8192u
#define ROUNDS 16u
#define SMALL  100u

static void run_data(unsigned nlanes)
{
	struct pair pr = make_pair(nlanes, 2 * ROUNDS, ROUNDS);
	size_t per_lane = ROUNDS * (CHUNK + SMALL);
	size_t total = nlanes * per_lane;
	uint8_t *src = malloc(total), *dst = calloc(1, total);
	struct xport_mr *smr, *dmr;
	struct xport_wr *wrs = calloc(2 * nlanes * ROUNDS, sizeof(*wrs));
	struct xport_wc *wcs = calloc(2 * nlanes * ROUNDS, sizeof(*wcs));
	unsigned nwr = 0;
	unsigned seen[XPORT_MAX_LANES] = { 0 };

	fill(src, total, nlanes);
	assert_int_equal(ops->reg_mr(pr.cli, src, total, XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(
	    ops->reg_mr(pr.srv, dst, total, XPORT_ACCESS_LOCAL | XPORT_ACCESS_REMOTE_WRITE, &dmr),
	    0);
	assert_int_not_equal(dmr->rkey, 0);
	for (unsigned l = 0; l < nlanes; l++) {
		post_recvs(pr.srv, l, 1000u * (l + 1), ROUNDS);
	}
	for (unsigned r = 0; r < ROUNDS; r++) {
		for (unsigned l = 0; l < nlanes; l++) {
			size_t off = l * per_lane + r * (CHUNK + SMALL);
			uint64_t raddr = dmr->iova + off;
			uint32_t ilen = (r % 2) ? SMALL : 0;

			wrs[nwr++] = wr_write(smr, src + off, CHUNK, raddr, dmr->rkey, l, 0);
			wrs[nwr] =
			    wr_write(ilen ? smr : NULL, ilen ? src + off + CHUNK : NULL, ilen,
				     raddr + CHUNK, ilen ? dmr->rkey : 0, l, (l << 16) | r);
			wrs[nwr].opcode = XPORT_OP_WRITE_IMM;
			wrs[nwr].flags = XPORT_SEND_SIGNALED;
			wrs[nwr].imm = 0xabc00000u | (l << 8) | r;
			nwr++;
		}
	}
	assert_int_equal(ops->post_writes(pr.cli, wrs, nwr), 0);

	/* Receiver: each immediate arrives in lane order, after its data. */
	for (unsigned i = 0; i < nlanes * ROUNDS; i++) {
		struct xport_wc wc;
		unsigned l, r;
		size_t off;

		wait_wcs(pr.srv, &wc, 1, 5000);
		assert_int_equal(wc.status, XPORT_WC_SUCCESS);
		assert_int_equal(wc.opcode, XPORT_WC_RECV_IMM);
		l = (wc.imm >> 8) & 0xff;
		r = wc.imm & 0xff;
		assert_int_equal(wc.imm & 0xfff00000u, 0xabc00000u);
		assert_int_equal(wc.lane, l);
		assert_int_equal(r, seen[l]);
		assert_int_equal(wc.wr_id, 1000u * (l + 1) + r);
		assert_int_equal(wc.len, (r % 2) ? SMALL : 0);
		seen[l]++;
		off = l * per_lane + r * (CHUNK + SMALL);
		assert_memory_equal(dst + off, src + off, CHUNK + wc.len);
	}
	/* Requester: only the signaled WRITE_IMMs complete, in lane order. */
	wait_wcs(pr.cli, wcs, nlanes * ROUNDS, 5000);
	memset(seen, 0, sizeof(seen));
	for (unsigned i = 0; i < nlanes * ROUNDS; i++) {
		unsigned l = (unsigned)(wcs[i].wr_id >> 16);

		assert_int_equal(wcs[i].status, XPORT_WC_SUCCESS);
		assert_int_equal(wcs[i].opcode, XPORT_WC_WRITE);
		assert_int_equal(wcs[i].lane, l);
		assert_int_equal(wcs[i].wr_id & 0xffff, seen[l]);
		seen[l]++;
	}
	expect_no_wcs(pr.cli, 20);
	assert_null(ops->last_error(pr.cli));
	assert_null(ops->last_error(pr.srv));
	assert_int_equal(ops->dereg_mr(pr.cli, smr), 0);
	assert_int_equal(ops->dereg_mr(pr.srv, dmr), 0);
	free_pair(&pr);
	free(src);
	free(dst);
	free(wrs);
	free(wcs);
}

static void test_data_1lane(void **state)
{
	run_data(1);
}

static void test_data_4lanes(void **state)
{
	run_data(4);
}

/* A write far larger than socket buffers, and an inline one. */
static void test_big_and_inline(void **state)
{
	struct pair pr = make_pair(1, 4, 4);
	size_t big = 8u << 20;
	uint8_t *src = malloc(big), *dst = calloc(1, big);
	uint8_t tiny[64];
	struct xport_mr *smr, *dmr;
	struct xport_wr w[2];
	struct xport_wc wc[2];

	fill(src, big, 99);
	memset(tiny, 0x77, sizeof(tiny));
	assert_int_equal(ops->reg_mr(pr.cli, src, big, XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(ops->reg_mr(pr.srv, dst, big, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	post_recvs(pr.srv, 0, 7, 1);
	w[0] = wr_write(smr, src, (uint32_t)big - 64, dmr->iova, dmr->rkey, 0, 1);
	w[0].flags = XPORT_SEND_SIGNALED;
	w[1] = wr_write(NULL, tiny, sizeof(tiny), dmr->iova + big - 64, dmr->rkey, 0, 2);
	w[1].opcode = XPORT_OP_WRITE_IMM;
	w[1].flags = XPORT_SEND_SIGNALED | XPORT_SEND_INLINE;
	assert_int_equal(ops->post_writes(pr.cli, w, 2), 0);
	/* Inline data was copied at post time. */
	memset(tiny, 0, sizeof(tiny));
	wait_wcs(pr.srv, wc, 1, 10000);
	assert_int_equal(wc[0].status, XPORT_WC_SUCCESS);
	assert_int_equal(wc[0].len, 64);
	assert_memory_equal(dst, src, big - 64);
	for (size_t i = big - 64; i < big; i++) {
		assert_int_equal(dst[i], 0x77);
	}
	wait_wcs(pr.cli, wc, 2, 10000);
	assert_int_equal(wc[0].wr_id, 1);
	assert_int_equal(wc[1].wr_id, 2);
	assert_int_equal(wc[0].status, XPORT_WC_SUCCESS);
	assert_int_equal(wc[1].status, XPORT_WC_SUCCESS);
	/* Inline above max_inline is refused. */
	w[1].len = pr.cli->max_inline + 1;
	assert_int_equal(ops->post_writes(pr.cli, &w[1], 1), -EINVAL);
	free_pair(&pr);
	free(src);
	free(dst);
}

/* ---- 2. bidirectional with zero-length credits ---- */

static void test_bidirectional(void **state)
{
	struct pair pr = make_pair(2, 8, 8);
	struct xport *side[2] = { pr.cli, pr.srv };
	enum { SZ = 32768, ITERS = 20 };
	uint8_t *src[2], *dst[2];
	struct xport_mr *smr[2], *dmr[2];

	for (int s = 0; s < 2; s++) {
		src[s] = malloc(SZ);
		dst[s] = calloc(1, SZ);
		assert_int_equal(ops->reg_mr(side[s], src[s], SZ, XPORT_ACCESS_LOCAL, &smr[s]), 0);
		assert_int_equal(
		    ops->reg_mr(side[s], dst[s], SZ, XPORT_ACCESS_REMOTE_WRITE, &dmr[s]), 0);
	}
	for (unsigned it = 0; it < ITERS; it++) {
		unsigned lane = it % 2;
		struct xport_wc wc;

		for (int s = 0; s < 2; s++) {
			post_recvs(side[s], lane, 10 * it + (unsigned)s, 2);
		}
		/* Both directions at once: data plus immediate. */
		for (int s = 0; s < 2; s++) {
			struct xport_wr w[2];

			fill(src[s], SZ, it * 2 + (unsigned)s);
			w[0] =
			    wr_write(smr[s], src[s], SZ - 1, dmr[!s]->iova, dmr[!s]->rkey, lane, 0);
			w[1] = wr_write(smr[s], src[s] + SZ - 1, 1, dmr[!s]->iova + SZ - 1,
					dmr[!s]->rkey, lane, it);
			w[1].opcode = XPORT_OP_WRITE_IMM;
			w[1].imm = it;
			w[1].flags = XPORT_SEND_SIGNALED;
			assert_int_equal(ops->post_writes(side[s], w, 2), 0);
		}
		/* Each side: its own signaled write done, and the peer's immediate. */
		for (int s = 0; s < 2; s++) {
			struct xport_wc got[2];
			bool write_done = false, imm = false;

			wait_wcs(side[s], got, 2, 5000);
			for (int k = 0; k < 2; k++) {
				assert_int_equal(got[k].status, XPORT_WC_SUCCESS);
				assert_int_equal(got[k].lane, lane);
				if (got[k].opcode == XPORT_WC_WRITE) {
					assert_int_equal(got[k].wr_id, it);
					write_done = true;
				} else {
					assert_int_equal(got[k].opcode, XPORT_WC_RECV_IMM);
					assert_int_equal(got[k].imm, it);
					assert_int_equal(got[k].len, 1);
					/* The earlier WRITE's data is visible now. */
					assert_memory_equal(dst[s], src[!s], SZ);
					imm = true;
				}
			}
			assert_true(write_done && imm);
		}
		/* Credits back: zero-length WRITE_IMM, no MR, no rkey. */
		for (int s = 0; s < 2; s++) {
			struct xport_wr c = { .wr_id = 500 + it,
					      .opcode = XPORT_OP_WRITE_IMM,
					      .imm = 0xc0de0000u | it,
					      .lane = lane };

			assert_int_equal(ops->post_writes(side[s], &c, 1), 0);
		}
		for (int s = 0; s < 2; s++) {
			wait_wcs(side[s], &wc, 1, 5000);
			assert_int_equal(wc.status, XPORT_WC_SUCCESS);
			assert_int_equal(wc.opcode, XPORT_WC_RECV_IMM);
			assert_int_equal(wc.imm, 0xc0de0000u | it);
			assert_int_equal(wc.len, 0);
		}
	}
	for (int s = 0; s < 2; s++) {
		assert_null(ops->last_error(side[s]));
	}
	free_pair(&pr);
	for (int s = 0; s < 2; s++) {
		free(src[s]);
		free(dst[s]);
	}
}

/* ---- 3. remote access errors ---- */

enum bad_kind {
	BAD_RKEY,
	BAD_BEFORE,
	BAD_AFTER,
	BAD_CROSS_END,
	BAD_OVERFLOW,
	BAD_WRAP_INSIDE,
	BAD_HOST_ADDR,
};

static void run_bad_write(enum bad_kind kind)
{
	struct pair pr = make_pair(1, 4, 4);
	uint8_t *region = malloc(3 * PAGE), *expect = malloc(3 * PAGE);
	uint8_t *target = region + PAGE;
	uint8_t src[128];
	struct xport_mr *smr, *dmr;
	struct xport_wr w[2];
	struct xport_wc wc[4];
	uint64_t base, raddr;
	uint32_t rkey, len = 64;
	const char *err;

	memset(region, 0xa5, 3 * PAGE);
	memcpy(expect, region, 3 * PAGE);
	memset(src, 0x5a, sizeof(src));
	assert_int_equal(ops->reg_mr(pr.cli, src, sizeof(src), XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(ops->reg_mr(pr.srv, target, PAGE, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	rkey = dmr->rkey;
	raddr = base = dmr->iova;
	switch (kind) {
	case BAD_RKEY:
		rkey ^= 0x10000u;
		break;
	case BAD_BEFORE:
		raddr = base - 64;
		break;
	case BAD_AFTER:
		raddr = base + PAGE;
		break;
	case BAD_CROSS_END:
		raddr = base + PAGE - 32;
		break;
	case BAD_OVERFLOW:
		raddr = UINT64_MAX - 15;
		break;
	case BAD_WRAP_INSIDE:
		/* addr + len wraps to 32: inside [0, PAGE) for a check that overflows. */
		raddr = UINT64_MAX - 31;
		break;
	case BAD_HOST_ADDR:
		/* Zero-based: our own address means nothing to the peer. */
		raddr = (uint64_t)(uintptr_t)target;
		break;
	}
	post_recvs(pr.srv, 0, 40, 4);
	w[0] = wr_write(smr, src, len, raddr, rkey, 0, 1);
	w[0].opcode = XPORT_OP_WRITE_IMM;
	w[1] = wr_write(smr, src, len, base, dmr->rkey, 0, 2);
	assert_int_equal(ops->post_writes(pr.cli, w, 2), 0);

	/* Requester: the refused write, then the one behind it flushed (even unsignaled). */
	wait_wcs(pr.cli, wc, 2, 5000);
	assert_int_equal(wc[0].wr_id, 1);
	assert_int_equal(wc[0].status, XPORT_WC_REM_ACCESS_ERR);
	assert_int_equal(wc[1].wr_id, 2);
	assert_int_equal(wc[1].status, XPORT_WC_WR_FLUSH_ERR);
	assert_non_null(ops->last_error(pr.cli));
	/* Responder: every posted receive flushed. */
	wait_wcs(pr.srv, wc, 4, 5000);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(wc[i].status, XPORT_WC_WR_FLUSH_ERR);
		assert_int_equal(wc[i].opcode, XPORT_WC_RECV_IMM);
		assert_int_equal(wc[i].wr_id, 40 + i);
	}
	err = ops->last_error(pr.srv);
	assert_non_null(err);
	assert_non_null(strstr(err, kind == BAD_RKEY ? "rkey" : "outside registration"));
	/* Nothing placed, not even the valid write behind it. */
	assert_memory_equal(region, expect, 3 * PAGE);
	/* A failed lane flushes later posts at once. */
	w[1].flags = XPORT_SEND_SIGNALED;
	w[1].wr_id = 3;
	assert_int_equal(ops->post_writes(pr.cli, &w[1], 1), 0);
	wait_wcs(pr.cli, wc, 1, 5000);
	assert_int_equal(wc[0].wr_id, 3);
	assert_int_equal(wc[0].status, XPORT_WC_WR_FLUSH_ERR);
	assert_memory_equal(region, expect, 3 * PAGE);
	free_pair(&pr);
	free(region);
	free(expect);
}

static void test_bad_rkey(void **state)
{
	run_bad_write(BAD_RKEY);
}

static void test_bad_before(void **state)
{
	run_bad_write(BAD_BEFORE);
}

static void test_bad_after(void **state)
{
	run_bad_write(BAD_AFTER);
}

static void test_bad_cross_end(void **state)
{
	run_bad_write(BAD_CROSS_END);
}

static void test_bad_overflow(void **state)
{
	run_bad_write(BAD_OVERFLOW);
}

static void test_bad_wrap_inside(void **state)
{
	run_bad_write(BAD_WRAP_INSIDE);
}

static void test_bad_host_addr(void **state)
{
	run_bad_write(BAD_HOST_ADDR);
}

/* Registrations are zero-based: offsets from 0 land at addr + offset, up to the last byte. */
static void test_zero_based(void **state)
{
	struct pair pr = make_pair(1, 8, 8);
	uint8_t *target = calloc(1, 2 * PAGE), src[64];
	struct xport_mr *smr, *dmr;
	struct xport_wr w[3];
	struct xport_wc wc[3];

	memset(src, 0x77, sizeof(src));
	assert_int_equal(ops->reg_mr(pr.cli, src, sizeof(src), XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(ops->reg_mr(pr.srv, target, 2 * PAGE, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	assert_int_equal(dmr->iova, 0);
	w[0] = wr_write(smr, src, 16, 0, dmr->rkey, 0, 1);
	w[1] = wr_write(smr, src, 64, PAGE + 100, dmr->rkey, 0, 2);
	w[2] = wr_write(smr, src, 1, 2 * PAGE - 1, dmr->rkey, 0, 3);
	for (int i = 0; i < 3; i++) {
		w[i].flags = XPORT_SEND_SIGNALED;
	}
	assert_int_equal(ops->post_writes(pr.cli, w, 3), 0);
	wait_wcs(pr.cli, wc, 3, 5000);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(wc[i].status, XPORT_WC_SUCCESS);
	}
	assert_memory_equal(target, src, 16);
	assert_int_equal(target[16], 0);
	assert_memory_equal(target + PAGE + 100, src, 64);
	assert_int_equal(target[PAGE + 99], 0);
	assert_int_equal(target[2 * PAGE - 1], 0x77);
	assert_null(ops->last_error(pr.srv));
	free_pair(&pr);
	free(target);
}

/* Local buffer outside its MR, bad lane, bad opcode, a window's key: refused at post time. */
static void test_post_validation(void **state)
{
	struct pair pr = make_pair(2, 4, 4);
	uint8_t buf[256];
	struct xport_mr *mr;
	struct xport_wr w;

	assert_int_equal(ops->reg_mr(pr.cli, buf, 128, XPORT_ACCESS_LOCAL, &mr), 0);
	w = wr_write(mr, buf + 100, 64, 0x1000, 1, 0, 1);
	assert_int_equal(ops->post_writes(pr.cli, &w, 1), -EINVAL);
	w = wr_write(mr, buf, 64, 0x1000, 1, 2, 1);
	assert_int_equal(ops->post_writes(pr.cli, &w, 1), -EINVAL);
	w = wr_write(mr, buf, 64, 0x1000, 1, 0, 1);
	w.opcode = 9;
	assert_int_equal(ops->post_writes(pr.cli, &w, 1), -EINVAL);
	w = wr_write(NULL, buf, 64, 0x1000, 1, 0, 1);
	assert_int_equal(ops->post_writes(pr.cli, &w, 1), -EINVAL);
	/* No memory windows on tcp: no window to close, no key to hand over (a credit's). */
	w = (struct xport_wr){ .opcode = XPORT_OP_WRITE_IMM, .imm = 0x02000001, .key = 0x1f7 };
	assert_int_equal(ops->post_writes(pr.cli, &w, 1), -EINVAL);
	w = (struct xport_wr){ .opcode = XPORT_OP_WRITE_IMM, .imm = 0x02000001, .inv_rkey = 0x1f7 };
	assert_int_equal(ops->post_writes(pr.cli, &w, 1), -EINVAL);
	expect_no_wcs(pr.cli, 20);
	expect_no_wcs(pr.srv, 0);
	free_pair(&pr);
}

/* ---- 4. dereg revokes the rkey ---- */

static void test_dereg_revokes(void **state)
{
	struct pair pr = make_pair(1, 4, 4);
	uint8_t *target = malloc(PAGE), *expect = malloc(PAGE);
	uint8_t src[256];
	struct xport_mr *smr, *dmr;
	struct xport_wr w;
	struct xport_wc wc;
	uint32_t rkey;

	memset(target, 0, PAGE);
	memset(src, 0x42, sizeof(src));
	assert_int_equal(ops->reg_mr(pr.cli, src, sizeof(src), XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(ops->reg_mr(pr.srv, target, PAGE, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	rkey = dmr->rkey;
	w = wr_write(smr, src, sizeof(src), dmr->iova, rkey, 0, 1);
	w.flags = XPORT_SEND_SIGNALED;
	assert_int_equal(ops->post_writes(pr.cli, &w, 1), 0);
	wait_wcs(pr.cli, &wc, 1, 5000);
	assert_int_equal(wc.status, XPORT_WC_SUCCESS);
	assert_int_equal(target[0], 0x42);

	assert_int_equal(ops->dereg_mr(pr.srv, dmr), 0);
	memset(target, 0xee, PAGE);
	memcpy(expect, target, PAGE);
	w.wr_id = 2;
	assert_int_equal(ops->post_writes(pr.cli, &w, 1), 0);
	wait_wcs(pr.cli, &wc, 1, 5000);
	assert_int_equal(wc.wr_id, 2);
	assert_int_equal(wc.status, XPORT_WC_REM_ACCESS_ERR);
	assert_non_null(strstr(ops->last_error(pr.srv), "rkey"));
	assert_memory_equal(target, expect, PAGE);
	free_pair(&pr);
	free(target);
	free(expect);
}

/* ---- 5. RNR ---- */

static void test_rnr(void **state)
{
	struct pair pr = make_pair(1, 4, 4);
	uint8_t target[PAGE], src[64];
	struct xport_mr *smr, *dmr;
	struct xport_wr w;
	struct xport_wc wc;

	memset(target, 0x11, sizeof(target));
	memset(src, 0x99, sizeof(src));
	assert_int_equal(ops->reg_mr(pr.cli, src, sizeof(src), XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(ops->reg_mr(pr.srv, target, PAGE, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	w = wr_write(smr, src, sizeof(src), dmr->iova, dmr->rkey, 0, 5);
	w.opcode = XPORT_OP_WRITE_IMM;
	w.flags = XPORT_SEND_SIGNALED;
	assert_int_equal(ops->post_writes(pr.cli, &w, 1), 0);
	wait_wcs(pr.cli, &wc, 1, 5000);
	assert_int_equal(wc.wr_id, 5);
	assert_int_equal(wc.status, XPORT_WC_RNR_ERR);
	assert_non_null(strstr(ops->last_error(pr.srv), "RNR"));
	for (size_t i = 0; i < sizeof(target); i++) {
		assert_int_equal(target[i], 0x11);
	}
	free_pair(&pr);
}

/* ---- 9. send queue bound ---- */

static void test_sq_full(void **state)
{
	struct pair pr = make_pair(2, 4, 8);
	uint8_t src[64], target[PAGE];
	struct xport_mr *smr, *dmr;
	struct xport_wr w[7];
	struct xport_wc wc[8];

	memset(src, 0x3c, sizeof(src));
	memset(target, 0, sizeof(target));
	assert_int_equal(ops->reg_mr(pr.cli, src, sizeof(src), XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(ops->reg_mr(pr.srv, target, PAGE, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	post_recvs(pr.srv, 0, 0, 8);
	post_recvs(pr.srv, 1, 0, 8);
	/* Two for lane 0 (fits), five for lane 1 (does not): nothing at all is posted. */
	for (unsigned i = 0; i < 7; i++) {
		w[i] = wr_write(smr, src, sizeof(src), dmr->iova + 64 * i, dmr->rkey, i < 2 ? 0 : 1,
				i);
		w[i].opcode = XPORT_OP_WRITE_IMM;
		w[i].flags = XPORT_SEND_SIGNALED;
	}
	assert_int_equal(ops->post_writes(pr.cli, w, 7), -ENOSPC);
	expect_no_wcs(pr.srv, 100);
	expect_no_wcs(pr.cli, 0);
	for (size_t i = 0; i < sizeof(target); i++) {
		assert_int_equal(target[i], 0);
	}
	/* Exactly sq_depth fits. */
	assert_int_equal(ops->post_writes(pr.cli, w + 2, 4), 0);
	wait_wcs(pr.cli, wc, 4, 5000);
	wait_wcs(pr.srv, wc, 4, 5000);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(wc[i].status, XPORT_WC_SUCCESS);
		assert_int_equal(wc[i].lane, 1);
	}
	/* Too many receives are refused the same way. */
	{
		uint64_t ids[9] = { 0 };

		assert_int_equal(ops->post_recvs(pr.srv, 0, ids, 1), -ENOSPC);
		assert_int_equal(ops->post_recvs(pr.srv, 1, ids, 5), -ENOSPC);
		assert_int_equal(ops->post_recvs(pr.srv, 1, ids, 4), 0);
	}
	free_pair(&pr);
}

/* ---- the same data over sealed lanes ---- */

static void test_sealed_data(void **state)
{
	g_seal = true;
	run_data(4);
	test_big_and_inline(state);
	test_bidirectional(state);
	g_seal = false;
}

/* ---- xport.c ---- */

static void test_ops_lookup(void **state)
{
	assert_ptr_equal(xport_ops_by_name("tcp"), &xport_tcp_ops);
	assert_ptr_equal(xport_ops_by_kind(XPORT_KIND_TCP), &xport_tcp_ops);
	assert_null(xport_ops_by_name("nope"));
	assert_null(xport_ops_by_name(NULL));
	assert_string_equal(xport_wc_status_str(XPORT_WC_REM_ACCESS_ERR), "IBV_WC_REM_ACCESS_ERR");
	assert_string_equal(xport_wc_status_str(XPORT_WC_WR_FLUSH_ERR), "IBV_WC_WR_FLUSH_ERR");
	assert_string_equal(xport_wc_status_str(-1), "IBV_WC_UNKNOWN");
	assert_string_equal(xport_wc_status_str(1000), "IBV_WC_UNKNOWN");
}

static struct sockaddr_storage ss_of(const char *ip, uint16_t port)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

	if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
	} else {
		assert_int_equal(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
	}
	return ss;
}

/* The verbs lane source check: one host, whatever form and port its address has. */
static void test_same_ip(void **state)
{
	static const struct {
		const char *a, *b;
		bool same;
	} cases[] = {
		{ "10.0.0.1", "10.0.0.1", true },
		{ "10.0.0.1", "10.0.0.2", false },
		{ "::ffff:10.0.0.1", "10.0.0.1", true },
		{ "10.0.0.1", "::ffff:10.0.0.1", true },
		{ "::ffff:10.0.0.1", "::ffff:10.0.0.1", true },
		{ "::ffff:10.0.0.2", "10.0.0.1", false },
		{ "fd00::1", "fd00::1", true },
		{ "fd00::1", "fd00::2", false },
		/* Only ::ffff: maps IPv4; the old compatible form and NAT64 do not. */
		{ "::10.0.0.1", "10.0.0.1", false },
		{ "64:ff9b::a00:1", "10.0.0.1", false },
	};
	struct sockaddr_storage a, b;
	struct sockaddr_un u = { .sun_family = AF_UNIX };

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		a = ss_of(cases[i].a, 1000);
		b = ss_of(cases[i].b, (uint16_t)(2000 + i));
		if (xport_same_ip((struct sockaddr *)&a, (struct sockaddr *)&b) != cases[i].same) {
			fail_msg("%s vs %s: want %s", cases[i].a, cases[i].b,
				 cases[i].same ? "same" : "different");
		}
	}
	a = ss_of("10.0.0.1", 1);
	assert_false(xport_same_ip((struct sockaddr *)&a, (struct sockaddr *)&u));
	assert_false(xport_same_ip((struct sockaddr *)&u, (struct sockaddr *)&u));
	assert_false(xport_same_ip(NULL, (struct sockaddr *)&a));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ops_lookup),
		cmocka_unit_test(test_same_ip),
		cmocka_unit_test(test_data_1lane),
		cmocka_unit_test(test_data_4lanes),
		cmocka_unit_test(test_big_and_inline),
		cmocka_unit_test(test_bidirectional),
		cmocka_unit_test(test_bad_rkey),
		cmocka_unit_test(test_bad_before),
		cmocka_unit_test(test_bad_after),
		cmocka_unit_test(test_bad_cross_end),
		cmocka_unit_test(test_bad_overflow),
		cmocka_unit_test(test_bad_wrap_inside),
		cmocka_unit_test(test_bad_host_addr),
		cmocka_unit_test(test_zero_based),
		cmocka_unit_test(test_post_validation),
		cmocka_unit_test(test_dereg_revokes),
		cmocka_unit_test(test_rnr),
		cmocka_unit_test(test_sq_full),
		cmocka_unit_test(test_sealed_data),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
