/* SPDX-License-Identifier: MIT */
/*
 * The tcp transport over real loopback sockets with real threads: data
 * placement and ordering, zero-based registrations, remote access errors
 * leaving target memory untouched (near UINT64_MAX included), fences (refused
 * writes, a placement cut off, fencing under a stream of writes), RNR, lane
 * handshake authentication, teardown mid-stream, and send-queue bounds.
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

static const struct xport_ops *ops = &xport_tcp_ops;

/* Sealed lanes for make_pair (tests set and reset these); the client side's test hooks. */
static bool g_seal;
static uint8_t g_cli_secret_xor;
static unsigned g_cli_tamper;
static const char *g_cli_tee;

static struct xport_params mkparams(unsigned nlanes, unsigned sq, unsigned rq, int timeout_ms)
{
	struct xport_params p = {
		.nlanes = nlanes,
		.sq_depth = sq,
		.rq_depth = rq,
		.timeout_ms = timeout_ms,
		.seal = g_seal,
	};

	for (size_t i = 0; i < XPORT_TOKEN_LEN; i++) {
		p.token[i] = (uint8_t)(0x30 + i);
	}
	for (size_t i = 0; i < XPORT_SEAL_SECRET_LEN; i++) {
		p.seal_secret[i] = (uint8_t)(0x90 + i);
	}
	return p;
}

/* ---- listener / accept helpers ---- */

static struct sockaddr_in loopback(uint16_t port)
{
	return (struct sockaddr_in){ .sin_family = AF_INET,
				     .sin_port = htons(port),
				     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
}

struct server {
	struct xport_listener *l;
	uint16_t port;
	struct xport_params p;
	pthread_t thr;
	struct xport *x;
	int rc;
};

static void *accept_main(void *arg)
{
	struct server *s = arg;

	s->rc = ops->accept(s->l, &s->p, &s->x);
	return NULL;
}

static void server_listen(struct server *s)
{
	struct sockaddr_in sin = loopback(0);

	memset(s, 0, sizeof(*s));
	assert_int_equal(ops->listen((struct sockaddr *)&sin, sizeof(sin), -1, &s->l, &s->port), 0);
	assert_true(s->port != 0);
}

static void server_start_accept(struct server *s, const struct xport_params *p)
{
	s->p = *p;
	s->x = NULL;
	s->rc = 1;
	assert_int_equal(pthread_create(&s->thr, NULL, accept_main, s), 0);
}

static int server_join(struct server *s)
{
	pthread_join(s->thr, NULL);
	return s->rc;
}

struct pair {
	struct xport *srv, *cli;
};

static struct pair make_pair(unsigned nlanes, unsigned sq, unsigned rq)
{
	struct xport_params p = mkparams(nlanes, sq, rq, 5000), pc = p;
	struct server s;
	struct sockaddr_in sin;
	struct pair pr = { 0 };

	pc.seal_secret[0] ^= g_cli_secret_xor;
	pc.test_tamper = g_cli_tamper;
	pc.test_tee_path = g_cli_tee;
	server_listen(&s);
	server_start_accept(&s, &p);
	sin = loopback(s.port);
	assert_int_equal(ops->connect((struct sockaddr *)&sin, sizeof(sin), &pc, &pr.cli), 0);
	assert_int_equal(server_join(&s), 0);
	pr.srv = s.x;
	ops->listener_close(s.l);
	assert_int_equal(pr.cli->nlanes, nlanes);
	assert_int_equal(pr.srv->nlanes, nlanes);
	return pr;
}

static void free_pair(struct pair *pr)
{
	ops->destroy(pr->cli);
	ops->destroy(pr->srv);
}

/* Collect exactly `want` completions (waiting on the event fd) or fail the test. */
static void wait_wcs(struct xport *x, struct xport_wc *out, size_t want, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	size_t got = 0;

	while (got < want) {
		struct pollfd pfd = { .fd = ops->event_fd(x), .events = POLLIN };
		int left = (int)(deadline - now_ms());
		int n;

		n = ops->poll_cq(x, out + got, want - got);
		assert_true(n >= 0);
		got += (size_t)n;
		if (got == want) {
			break;
		}
		if (left <= 0) {
			fail_msg("timed out: %zu of %zu completions", got, want);
		}
		poll(&pfd, 1, left);
	}
}

static void expect_no_wcs(struct xport *x, int ms)
{
	struct xport_wc wc;

	usleep((useconds_t)ms * 1000);
	assert_int_equal(ops->poll_cq(x, &wc, 1), 0);
}

static void post_recvs(struct xport *x, unsigned lane, uint64_t first, size_t n)
{
	uint64_t ids[64];

	assert_true(n <= 64);
	for (size_t i = 0; i < n; i++) {
		ids[i] = first + i;
	}
	assert_int_equal(ops->post_recvs(x, lane, ids, n), 0);
}

static struct xport_wr wr_write(const struct xport_mr *mr, const void *buf, uint32_t len,
				uint64_t raddr, uint32_t rkey, unsigned lane, uint64_t wr_id)
{
	return (struct xport_wr){ .wr_id = wr_id,
				  .opcode = XPORT_OP_WRITE,
				  .mr = mr,
				  .buf = buf,
				  .len = len,
				  .remote_addr = raddr,
				  .rkey = rkey,
				  .lane = lane };
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		p[i] = (uint8_t)((i * 131u + seed * 7u + (i >> 8)) ^ seed);
	}
}

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

#define PAGE 4096u

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

/* Local buffer outside its MR, bad lane, bad opcode: refused at post time. */
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

/* ---- 6/7. lane handshake ---- */

static int raw_connect(uint16_t port)
{
	struct sockaddr_in sin = loopback(port);
	struct timeval tv = { .tv_sec = 3 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void raw_hello(int fd, uint16_t lane, uint16_t nlanes, const uint8_t *token)
{
	uint8_t b[48] = { 'R', 'D', 'L', 'N', 0, 1 };

	b[6] = (uint8_t)(lane >> 8);
	b[7] = (uint8_t)lane;
	b[8] = (uint8_t)(nlanes >> 8);
	b[9] = (uint8_t)nlanes;
	memcpy(b + 12, token, XPORT_TOKEN_LEN);
	assert_int_equal(send(fd, b, sizeof(b), MSG_NOSIGNAL), sizeof(b));
}

static void expect_ack(int fd)
{
	char ack[4];

	assert_int_equal(recv(fd, ack, 4, MSG_WAITALL), 4);
	assert_memory_equal(ack, "RDOK", 4);
}

/* Closed by the acceptor without an ack (EOF or reset), not merely silent. */
static void expect_dropped(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, 0);

	assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
	close(fd);
}

static void test_wrong_token_then_good(void **state)
{
	struct xport_params p = mkparams(1, 4, 4, 5000);
	struct xport_params bad = p;
	struct sockaddr_in sin;
	struct server s;
	struct xport *cli;
	int fd;

	bad.token[XPORT_TOKEN_LEN - 1] ^= 1;
	server_listen(&s);
	server_start_accept(&s, &p);
	fd = raw_connect(s.port);
	raw_hello(fd, 0, 1, bad.token);
	expect_dropped(fd);
	/* The real client with the wrong token is refused too. */
	sin = loopback(s.port);
	assert_int_equal(ops->connect((struct sockaddr *)&sin, sizeof(sin), &bad, &cli),
			 -ECONNREFUSED);
	assert_int_equal(ops->connect((struct sockaddr *)&sin, sizeof(sin), &p, &cli), 0);
	assert_int_equal(server_join(&s), 0);
	ops->destroy(cli);
	ops->destroy(s.x);
	ops->listener_close(s.l);
}

static void test_replayed_lane_and_dead_token(void **state)
{
	struct xport_params p = mkparams(2, 4, 4, 5000);
	struct server s;
	int a, b, c, d;

	server_listen(&s);
	server_start_accept(&s, &p);
	a = raw_connect(s.port);
	raw_hello(a, 0, 2, p.token);
	expect_ack(a);
	/* Same lane index again: dropped. */
	b = raw_connect(s.port);
	raw_hello(b, 0, 2, p.token);
	expect_dropped(b);
	/* Wrong lane count and out-of-range index: dropped. */
	b = raw_connect(s.port);
	raw_hello(b, 1, 3, p.token);
	expect_dropped(b);
	b = raw_connect(s.port);
	raw_hello(b, 2, 2, p.token);
	expect_dropped(b);
	c = raw_connect(s.port);
	raw_hello(c, 1, 2, p.token);
	expect_ack(c);
	assert_int_equal(server_join(&s), 0);
	assert_int_equal(s.x->nlanes, 2);
	ops->destroy(s.x);
	close(a);
	close(c);

	/* The token is dead: the same listener never accepts it again. */
	p.timeout_ms = 300;
	server_start_accept(&s, &p);
	d = raw_connect(s.port);
	raw_hello(d, 0, 2, p.token);
	expect_dropped(d);
	assert_int_equal(server_join(&s), -ETIMEDOUT);
	assert_null(s.x);
	ops->listener_close(s.l);
}

static void test_bad_hello_timeout(void **state)
{
	struct xport_params p = mkparams(1, 4, 4, 200);
	static const char garbage[48] = "GET / HTTP/1.0\r\n\r\n";
	uint8_t wrong_ver[48] = { 'R', 'D', 'L', 'N', 0, 2, 0, 0, 0, 1 };
	uint8_t reserved[48] = { 'R', 'D', 'L', 'N', 0, 1, 0, 0, 0, 1, 0, 1 };
	struct server s;
	int g, v, rsv, sh, silent;
	int64_t t0;

	server_listen(&s);
	memcpy(wrong_ver + 12, p.token, XPORT_TOKEN_LEN);
	memcpy(reserved + 12, p.token, XPORT_TOKEN_LEN);
	t0 = now_ms();
	server_start_accept(&s, &p);
	silent = raw_connect(s.port);
	g = raw_connect(s.port);
	assert_int_equal(send(g, garbage, sizeof(garbage), 0), sizeof(garbage));
	v = raw_connect(s.port);
	assert_int_equal(send(v, wrong_ver, sizeof(wrong_ver), 0), sizeof(wrong_ver));
	rsv = raw_connect(s.port);
	assert_int_equal(send(rsv, reserved, sizeof(reserved), 0), sizeof(reserved));
	sh = raw_connect(s.port);
	assert_int_equal(send(sh, "RDLN", 4, 0), 4);
	expect_dropped(g);
	expect_dropped(v);
	expect_dropped(rsv);
	assert_int_equal(server_join(&s), -ETIMEDOUT);
	assert_true(now_ms() - t0 < 2000);
	/* Short and silent ones are closed when accept gives up. */
	expect_dropped(sh);
	expect_dropped(silent);
	ops->listener_close(s.l);
}

static void test_connect_refused_and_timeout(void **state)
{
	struct xport_params p = mkparams(1, 4, 4, 300);
	struct server s;
	struct sockaddr_in sin;
	struct xport *x = NULL;
	uint16_t port;

	/* A listener nobody accepts on: connect completes, the ack never comes. */
	server_listen(&s);
	sin = loopback(s.port);
	assert_int_equal(ops->connect((struct sockaddr *)&sin, sizeof(sin), &p, &x), -ETIMEDOUT);
	port = s.port;
	ops->listener_close(s.l);
	sin = loopback(port);
	assert_int_equal(ops->connect((struct sockaddr *)&sin, sizeof(sin), &p, &x), -ECONNREFUSED);
	assert_null(x);
}

/* ---- hostile frames from an authenticated raw peer ---- */

static void put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static void raw_frame(uint8_t h[32], uint8_t op, uint32_t rkey, uint64_t addr, uint32_t len)
{
	memset(h, 0, 32);
	h[0] = op;
	put32(h + 4, rkey);
	put64(h + 8, addr);
	put32(h + 16, len);
}

enum raw_bad { RAW_RESERVED64, RAW_FLAGS, RAW_OP };

static void run_raw_bad_frame(enum raw_bad kind)
{
	struct xport_params p = mkparams(1, 4, 4, 5000);
	uint8_t target[PAGE], expect[PAGE], pay[64], h[32];
	struct xport_mr *dmr;
	struct xport_wc wc[2];
	struct server s;
	uint64_t base;
	int fd;

	server_listen(&s);
	server_start_accept(&s, &p);
	fd = raw_connect(s.port);
	raw_hello(fd, 0, 1, p.token);
	expect_ack(fd);
	assert_int_equal(server_join(&s), 0);
	memset(target, 0, sizeof(target));
	assert_int_equal(ops->reg_mr(s.x, target, PAGE, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	base = dmr->iova;
	post_recvs(s.x, 0, 60, 2);

	/* A good write first: placed, and acknowledged as frame count 1. */
	memset(pay, 0x5a, sizeof(pay));
	raw_frame(h, 1, dmr->rkey, base, 16);
	assert_int_equal(send(fd, h, 32, MSG_NOSIGNAL), 32);
	assert_int_equal(send(fd, pay, 16, MSG_NOSIGNAL), 16);
	assert_int_equal(recv(fd, h, 32, MSG_WAITALL), 32);
	assert_int_equal(h[0], 4);
	assert_int_equal(be64toh(*(uint64_t *)(void *)(h + 8)), 1);
	assert_int_equal(target[0], 0x5a);
	memcpy(expect, target, PAGE);

	/* Then a bad one aimed at valid memory. */
	raw_frame(h, 1, dmr->rkey, base + 64, sizeof(pay));
	switch (kind) {
	case RAW_RESERVED64:
		h[31] = 1;
		break;
	case RAW_FLAGS:
		h[1] = 1;
		break;
	case RAW_OP:
		h[0] = 7;
		break;
	}
	assert_int_equal(send(fd, h, 32, MSG_NOSIGNAL), 32);
	assert_int_equal(send(fd, pay, sizeof(pay), MSG_NOSIGNAL), sizeof(pay));
	/* NAK "invalid request" naming frame 1, then the lane is closed. */
	assert_int_equal(recv(fd, h, 32, MSG_WAITALL), 32);
	assert_int_equal(h[0], 3);
	assert_int_equal(be64toh(*(uint64_t *)(void *)(h + 8)), 1);
	assert_int_equal(be32toh(*(uint32_t *)(void *)(h + 20)), 3);
	expect_dropped(fd);
	wait_wcs(s.x, wc, 2, 5000);
	assert_int_equal(wc[0].status, XPORT_WC_WR_FLUSH_ERR);
	assert_int_equal(wc[1].status, XPORT_WC_WR_FLUSH_ERR);
	assert_non_null(ops->last_error(s.x));
	assert_memory_equal(target, expect, PAGE);
	ops->destroy(s.x);
	ops->listener_close(s.l);
}

static void test_raw_reserved(void **state)
{
	run_raw_bad_frame(RAW_RESERVED64);
}

static void test_raw_flags(void **state)
{
	run_raw_bad_frame(RAW_FLAGS);
}

static void test_raw_unknown_op(void **state)
{
	run_raw_bad_frame(RAW_OP);
}

/* A peer stalling inside a write's payload cannot hold dereg_mr beyond timeout_ms. */
static void test_dereg_stalled_peer(void **state)
{
	struct xport_params p = mkparams(1, 4, 4, 300);
	uint8_t *target = calloc(1, PAGE), h[32], pay[10];
	struct xport_mr *dmr;
	struct server s;
	int64_t t0;
	int fd;

	server_listen(&s);
	server_start_accept(&s, &p);
	fd = raw_connect(s.port);
	raw_hello(fd, 0, 1, p.token);
	expect_ack(fd);
	assert_int_equal(server_join(&s), 0);
	assert_int_equal(ops->reg_mr(s.x, target, PAGE, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	raw_frame(h, 1, dmr->rkey, dmr->iova, PAGE);
	memset(pay, 0x5a, sizeof(pay));
	assert_int_equal(send(fd, h, 32, MSG_NOSIGNAL), 32);
	assert_int_equal(send(fd, pay, sizeof(pay), MSG_NOSIGNAL), sizeof(pay));
	/* Let the RX thread start placing, then revoke while it waits for the rest. */
	usleep(50 * 1000);
	t0 = now_ms();
	assert_int_equal(ops->dereg_mr(s.x, dmr), 0);
	assert_true(now_ms() - t0 >= 200);
	assert_true(now_ms() - t0 < 3000);
	assert_non_null(strstr(ops->last_error(s.x), "stalled"));
	/* The lane is gone: the peer's late payload lands nowhere. */
	send(fd, target, PAGE, MSG_NOSIGNAL);
	ops->destroy(s.x);
	ops->listener_close(s.l);
	close(fd);
	free(target);
}

/* A raw acceptor acknowledging writes never sent: the lane fails, nothing completes as done. */
struct connector {
	struct sockaddr_in sin;
	struct xport_params p;
	struct xport *x;
	int rc;
};

static void *connect_main(void *arg)
{
	struct connector *c = arg;

	c->rc = ops->connect((struct sockaddr *)&c->sin, sizeof(c->sin), &c->p, &c->x);
	return NULL;
}

static void test_raw_forged_ack(void **state)
{
	struct sockaddr_in sin = loopback(0);
	socklen_t sl = sizeof(sin);
	struct connector c = { .p = mkparams(1, 4, 4, 5000) };
	uint8_t hello[48], h[32], src[64];
	struct xport_mr *smr;
	struct xport_wr w;
	struct xport_wc wc[2];
	pthread_t thr;
	int lfd, fd;

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &sl), 0);
	c.sin = sin;
	assert_int_equal(pthread_create(&thr, NULL, connect_main, &c), 0);
	fd = accept(lfd, NULL, NULL);
	assert_true(fd >= 0);
	assert_int_equal(recv(fd, hello, 48, MSG_WAITALL), 48);
	assert_memory_equal(hello, "RDLN", 4);
	assert_memory_equal(hello + 12, c.p.token, XPORT_TOKEN_LEN);
	assert_int_equal(send(fd, "RDOK", 4, MSG_NOSIGNAL), 4);
	pthread_join(thr, NULL);
	assert_int_equal(c.rc, 0);

	post_recvs(c.x, 0, 70, 1);
	raw_frame(h, 4, 0, 5, 0);
	assert_int_equal(send(fd, h, 32, MSG_NOSIGNAL), 32);
	wait_wcs(c.x, wc, 1, 5000);
	assert_int_equal(wc[0].wr_id, 70);
	assert_int_equal(wc[0].status, XPORT_WC_WR_FLUSH_ERR);
	assert_non_null(strstr(ops->last_error(c.x), "ACK"));
	/* Later writes on the dead lane are flushed, never reported done. */
	memset(src, 1, sizeof(src));
	assert_int_equal(ops->reg_mr(c.x, src, sizeof(src), XPORT_ACCESS_LOCAL, &smr), 0);
	w = wr_write(smr, src, sizeof(src), 0x1000, 1, 0, 71);
	w.flags = XPORT_SEND_SIGNALED;
	assert_int_equal(ops->post_writes(c.x, &w, 1), 0);
	wait_wcs(c.x, wc, 1, 5000);
	assert_int_equal(wc[0].status, XPORT_WC_WR_FLUSH_ERR);
	ops->destroy(c.x);
	close(fd);
	close(lfd);
}

/* ---- 8. peer destroyed mid-stream ---- */

static void test_peer_destroy_midstream(void **state)
{
	enum { N = 64 };
	struct pair pr = make_pair(2, N, 4);
	size_t sz = 1u << 20;
	uint8_t *src = calloc(1, sz), *dst = calloc(1, sz);
	struct xport_mr *smr, *dmr;
	struct xport_wr w[2 * N];
	struct xport_wc wc[2 * N];
	int errors = 0;

	assert_int_equal(ops->reg_mr(pr.cli, src, sz, XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(ops->reg_mr(pr.srv, dst, sz, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	for (unsigned i = 0; i < 2 * N; i++) {
		w[i] = wr_write(smr, src, (uint32_t)sz, dmr->iova, dmr->rkey, i % 2, i);
		w[i].flags = (i % 3 == 0 || i >= 2 * N - 2) ? XPORT_SEND_SIGNALED : 0;
	}
	assert_int_equal(ops->post_writes(pr.cli, w, 2 * N), 0);
	ops->destroy(pr.srv);
	/*
	 * Every WR still in flight comes back, signaled or not; nothing hangs. The
	 * last WR of each lane is signaled, so it ends that lane's completions.
	 */
	for (int last_seen = 0; last_seen < 2;) {
		wait_wcs(pr.cli, wc, 1, 10000);
		if (wc[0].status != XPORT_WC_SUCCESS) {
			errors++;
			assert_true(wc[0].status == XPORT_WC_RETRY_EXC_ERR ||
				    wc[0].status == XPORT_WC_WR_FLUSH_ERR);
		}
		if (wc[0].wr_id >= 2 * N - 2) {
			last_seen++;
		}
	}
	assert_true(errors > 0);
	assert_non_null(ops->last_error(pr.cli));
	/* A dead lane flushes new posts at once. */
	assert_int_equal(ops->post_writes(pr.cli, w, 1), 0);
	wait_wcs(pr.cli, wc, 1, 5000);
	assert_int_equal(wc[0].status, XPORT_WC_WR_FLUSH_ERR);
	ops->destroy(pr.cli);
	free(src);
	free(dst);
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

/* ---- 9. fences: ranges the receiver holds ---- */

static void test_fence_api(void **state)
{
	struct pair pr = make_pair(1, 4, 4);
	uint8_t *target = calloc(1, 2 * PAGE);
	struct xport_mr *dmr;

	assert_non_null(ops->fence);
	assert_int_equal(ops->reg_mr(pr.srv, target, 2 * PAGE, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	assert_int_equal(ops->fence(pr.srv, dmr, 0, PAGE, true), 0);
	assert_int_equal(ops->fence(pr.srv, dmr, PAGE, PAGE, true), 0);
	/* Outside the registration, empty, or wrapping past UINT64_MAX: refused. */
	assert_int_equal(ops->fence(pr.srv, dmr, PAGE, PAGE + 1, true), -EINVAL);
	assert_int_equal(ops->fence(pr.srv, dmr, 0, 0, true), -EINVAL);
	assert_int_equal(ops->fence(pr.srv, dmr, UINT64_MAX - 15, 64, true), -EINVAL);
	assert_int_equal(ops->fence(pr.srv, dmr, 16, UINT64_MAX, true), -EINVAL);
	/* Unfencing takes exactly what was fenced, once. */
	assert_int_equal(ops->fence(pr.srv, dmr, 0, 16, false), -ENOENT);
	assert_int_equal(ops->fence(pr.srv, dmr, 0, PAGE, false), 0);
	assert_int_equal(ops->fence(pr.srv, dmr, 0, PAGE, false), -ENOENT);
	assert_int_equal(ops->fence(pr.srv, dmr, PAGE, PAGE, false), 0);
	assert_int_equal(ops->dereg_mr(pr.srv, dmr), 0);
	free_pair(&pr);
	free(target);
}

/*
 * A write touching a fenced range (by one byte) is a remote access error:
 * memory untouched, lane failed; writes beside the fence and after an
 * unfence land.
 */
static void test_fence_refuses(void **state)
{
	struct pair pr = make_pair(1, 8, 8);
	uint8_t *target = calloc(1, 2 * PAGE), *expect = malloc(2 * PAGE), src[64];
	struct xport_mr *smr, *dmr;
	struct xport_wr w[2];
	struct xport_wc wc[4];

	memset(src, 0x42, sizeof(src));
	assert_int_equal(ops->reg_mr(pr.cli, src, sizeof(src), XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(ops->reg_mr(pr.srv, target, 2 * PAGE, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	/* Fenced then unfenced: writable again. */
	assert_int_equal(ops->fence(pr.srv, dmr, 0, PAGE, true), 0);
	assert_int_equal(ops->fence(pr.srv, dmr, 0, PAGE, false), 0);
	w[0] = wr_write(smr, src, 64, 0, dmr->rkey, 0, 1);
	w[0].flags = XPORT_SEND_SIGNALED;
	assert_int_equal(ops->post_writes(pr.cli, w, 1), 0);
	wait_wcs(pr.cli, wc, 1, 5000);
	assert_int_equal(wc[0].status, XPORT_WC_SUCCESS);
	assert_int_equal(target[0], 0x42);

	/* Fence the second page: a write ending just before it lands. */
	assert_int_equal(ops->fence(pr.srv, dmr, PAGE, PAGE, true), 0);
	w[0] = wr_write(smr, src, 64, PAGE - 64, dmr->rkey, 0, 2);
	w[0].flags = XPORT_SEND_SIGNALED;
	assert_int_equal(ops->post_writes(pr.cli, w, 1), 0);
	wait_wcs(pr.cli, wc, 1, 5000);
	assert_int_equal(wc[0].status, XPORT_WC_SUCCESS);
	memcpy(expect, target, 2 * PAGE);

	/* One byte into the fence: refused, and the write behind it is flushed. */
	post_recvs(pr.srv, 0, 70, 2);
	w[0] = wr_write(smr, src, 64, PAGE - 63, dmr->rkey, 0, 3);
	w[0].opcode = XPORT_OP_WRITE_IMM;
	w[1] = wr_write(smr, src, 64, 0, dmr->rkey, 0, 4);
	assert_int_equal(ops->post_writes(pr.cli, w, 2), 0);
	wait_wcs(pr.cli, wc, 2, 5000);
	assert_int_equal(wc[0].wr_id, 3);
	assert_int_equal(wc[0].status, XPORT_WC_REM_ACCESS_ERR);
	assert_int_equal(wc[1].status, XPORT_WC_WR_FLUSH_ERR);
	wait_wcs(pr.srv, wc, 2, 5000);
	assert_int_equal(wc[0].status, XPORT_WC_WR_FLUSH_ERR);
	assert_int_equal(wc[1].status, XPORT_WC_WR_FLUSH_ERR);
	assert_non_null(strstr(ops->last_error(pr.srv), "receiver holds"));
	assert_memory_equal(target, expect, 2 * PAGE);
	free_pair(&pr);
	free(target);
	free(expect);
}

/*
 * A write already being placed into a range when the fence goes on: fence
 * cuts the lane off and waits for the placement to end (-EIO); from then on
 * the memory stays as it was when fence returned.
 */
static void test_fence_cuts_placement(void **state)
{
	struct xport_params p = mkparams(1, 4, 4, 5000);
	uint8_t *target = calloc(1, PAGE), *expect = malloc(PAGE), h[32], pay[PAGE];
	struct xport_mr *dmr;
	struct xport_wc wc;
	struct server s;
	int64_t t0;
	int fd;

	server_listen(&s);
	server_start_accept(&s, &p);
	fd = raw_connect(s.port);
	raw_hello(fd, 0, 1, p.token);
	expect_ack(fd);
	assert_int_equal(server_join(&s), 0);
	assert_int_equal(ops->reg_mr(s.x, target, PAGE, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	post_recvs(s.x, 0, 80, 1);
	raw_frame(h, 1, dmr->rkey, 0, PAGE);
	memset(pay, 0x5a, sizeof(pay));
	assert_int_equal(send(fd, h, 32, MSG_NOSIGNAL), 32);
	assert_int_equal(send(fd, pay, 10, MSG_NOSIGNAL), 10);
	/* Let the RX thread start placing, then fence part of what it writes. */
	usleep(50 * 1000);
	t0 = now_ms();
	assert_int_equal(ops->fence(s.x, dmr, 2048, 16, true), -EIO);
	assert_true(now_ms() - t0 < 3000);
	assert_non_null(strstr(ops->last_error(s.x), "receiver holds"));
	memcpy(expect, target, PAGE);
	/* The rest of the payload lands nowhere; the lane is gone. */
	(void)send(fd, pay, sizeof(pay), MSG_NOSIGNAL);
	wait_wcs(s.x, &wc, 1, 5000);
	assert_int_equal(wc.status, XPORT_WC_WR_FLUSH_ERR);
	usleep(50 * 1000);
	assert_memory_equal(target, expect, PAGE);
	ops->destroy(s.x);
	ops->listener_close(s.l);
	close(fd);
	free(target);
	free(expect);
}

/*
 * Fencing while a stream of writes (each with other bytes) pours into the
 * range, at varying moments: fence returns 0 or -EIO, and from its return on
 * the range never changes again, whatever was in flight.
 */
#define RACE_LEN    (128u * 1024u)
#define RACE_WRITES 24u

static void test_fence_race(void **state)
{
	uint8_t *src = malloc((size_t)RACE_WRITES * RACE_LEN);
	uint8_t *target = malloc(RACE_LEN), *snap = malloc(RACE_LEN);
	unsigned cut = 0, clean = 0;

	for (unsigned i = 0; i < RACE_WRITES; i++) {
		memset(src + (size_t)i * RACE_LEN, (int)(i + 1), RACE_LEN);
	}
	for (unsigned round = 0; round < 12; round++) {
		struct pair pr = make_pair(1, 2 * RACE_WRITES, 4);
		struct xport_mr *smr, *dmr;
		struct xport_wr w[RACE_WRITES];
		struct xport_wc wc[RACE_WRITES];
		int r;

		memset(target, 0, RACE_LEN);
		assert_int_equal(ops->reg_mr(pr.cli, src, (size_t)RACE_WRITES * RACE_LEN,
					     XPORT_ACCESS_LOCAL, &smr),
				 0);
		assert_int_equal(
		    ops->reg_mr(pr.srv, target, RACE_LEN, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
		for (unsigned i = 0; i < RACE_WRITES; i++) {
			w[i] = wr_write(smr, src + (size_t)i * RACE_LEN, RACE_LEN, dmr->iova,
					dmr->rkey, 0, i);
			w[i].flags = XPORT_SEND_SIGNALED;
		}
		assert_int_equal(ops->post_writes(pr.cli, w, RACE_WRITES), 0);
		usleep(round * 300u);
		r = ops->fence(pr.srv, dmr, 1000, RACE_LEN - 2000, true);
		assert_true(r == 0 || r == -EIO);
		memcpy(snap, target, RACE_LEN);
		wait_wcs(pr.cli, wc, RACE_WRITES, 10000);
		usleep(20 * 1000);
		assert_memory_equal(target + 1000, snap + 1000, RACE_LEN - 2000);
		if (r == -EIO) {
			cut++;
		} else {
			clean++;
		}
		free_pair(&pr);
	}
	/* Both paths ran at least once in these rounds (timing permitting). */
	print_message("fence race: %u cut placements, %u clean fences\n", cut, clean);
	free(src);
	free(target);
	free(snap);
}

/* ---- xport.c ---- */

/* ---- sealed lanes ---- */

static void test_sealed_data(void **state)
{
	g_seal = true;
	run_data(4);
	test_big_and_inline(state);
	test_bidirectional(state);
	g_seal = false;
}

static bool contains(const uint8_t *hay, size_t n, const uint8_t *needle, size_t m)
{
	for (size_t i = 0; i + m <= n; i++) {
		if (memcmp(hay + i, needle, m) == 0) {
			return true;
		}
	}
	return false;
}

/* What a lane sends (the test tee, as a capture would see it): ciphertext only when sealed. */
static bool tee_shows_plaintext(bool seal)
{
	char path[] = "/tmp/rdmacp-tee-XXXXXX";
	int fd = mkstemp(path);
	size_t len = 3 * 256 * 1024 + 100, got;
	uint8_t *src = malloc(len), *dst = calloc(1, len), *seen = malloc(2 * len);
	struct xport_mr *smr, *dmr;
	struct xport_wr w;
	struct xport_wc wc;
	struct pair pr;
	bool shows = false;

	assert_true(fd >= 0);
	g_seal = seal;
	g_cli_tee = path;
	pr = make_pair(1, 4, 4);
	fill(src, len, 5);
	assert_int_equal(ops->reg_mr(pr.cli, src, len, XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(ops->reg_mr(pr.srv, dst, len, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	post_recvs(pr.srv, 0, 1, 1);
	w = wr_write(smr, src, (uint32_t)len, dmr->iova, dmr->rkey, 0, 9);
	w.opcode = XPORT_OP_WRITE_IMM;
	w.flags = XPORT_SEND_SIGNALED;
	assert_int_equal(ops->post_writes(pr.cli, &w, 1), 0);
	wait_wcs(pr.srv, &wc, 1, 10000);
	assert_int_equal(wc.status, XPORT_WC_SUCCESS);
	assert_memory_equal(dst, src, len);
	wait_wcs(pr.cli, &wc, 1, 10000);
	assert_int_equal(wc.status, XPORT_WC_SUCCESS);
	free_pair(&pr);
	got = (size_t)pread(fd, seen, 2 * len, 0);
	assert_true(got >= len);
	/* Any 32 bytes of the payload, at its start, middle, or past a seal piece. */
	for (size_t off = 0; off + 32 <= len; off += len / 7) {
		shows |= contains(seen, got, src + off, 32);
	}
	close(fd);
	unlink(path);
	free(src);
	free(dst);
	free(seen);
	g_seal = false;
	g_cli_tee = NULL;
	return shows;
}

static void test_sealed_tee(void **state)
{
	assert_true(tee_shows_plaintext(false));
	assert_false(tee_shows_plaintext(true));
}

/*
 * A spoiled frame (the sender's test hook, or a key that differs) fails the
 * lane before the immediate behind it completes: the receiver never sees a
 * descriptor after bytes the peer did not seal, and both ends say why.
 */
static void run_sealed_spoiled(unsigned tamper, uint8_t secret_xor)
{
	struct pair pr;
	uint8_t *src = malloc(4 * CHUNK), *dst = calloc(1, 4 * CHUNK);
	struct xport_mr *smr, *dmr;
	struct xport_wr w[2];
	struct xport_wc wc;
	const char *why;

	g_seal = true;
	g_cli_tamper = tamper;
	g_cli_secret_xor = secret_xor;
	pr = make_pair(1, 8, 4);
	fill(src, 4 * CHUNK, 3);
	assert_int_equal(ops->reg_mr(pr.cli, src, 4 * CHUNK, XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(ops->reg_mr(pr.srv, dst, 4 * CHUNK, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	post_recvs(pr.srv, 0, 1, 2);
	w[0] = wr_write(smr, src, CHUNK, dmr->iova, dmr->rkey, 0, 1);
	w[1] = wr_write(NULL, NULL, 0, 0, 0, 0, 2);
	w[1].opcode = XPORT_OP_WRITE_IMM;
	w[1].flags = XPORT_SEND_SIGNALED;
	assert_int_equal(ops->post_writes(pr.cli, w, 2), 0);
	wait_wcs(pr.srv, &wc, 1, 10000);
	assert_int_equal(wc.opcode, XPORT_WC_RECV_IMM);
	assert_int_equal(wc.status, XPORT_WC_WR_FLUSH_ERR);
	why = ops->last_error(pr.srv);
	assert_non_null(why);
	if (!strstr(why, "failed authentication")) {
		fail_msg("receiver's reason: %s", why);
	}
	/* The refused frame's request fails (a replay: the WRITE went, its copy did not). */
	wait_wcs(pr.cli, &wc, 1, 10000);
	assert_int_not_equal(wc.status, XPORT_WC_SUCCESS);
	why = ops->last_error(pr.cli);
	assert_non_null(why);
	if (!strstr(why, "failed authentication")) {
		fail_msg("sender's reason: %s", why);
	}
	free_pair(&pr);
	free(src);
	free(dst);
	g_seal = false;
	g_cli_tamper = 0;
	g_cli_secret_xor = 0;
}

static void test_sealed_flip(void **state)
{
	run_sealed_spoiled(XPORT_TEST_TAMPER_FLIP, 0);
}

static void test_sealed_replay(void **state)
{
	run_sealed_spoiled(XPORT_TEST_TAMPER_REPLAY, 0);
}

static void test_sealed_move(void **state)
{
	run_sealed_spoiled(XPORT_TEST_TAMPER_MOVE, 0);
}

static void test_sealed_truncate(void **state)
{
	run_sealed_spoiled(XPORT_TEST_TAMPER_TRUNCATE, 0);
}

static void test_sealed_other_key(void **state)
{
	run_sealed_spoiled(XPORT_TEST_TAMPER_NONE, 0x01);
}

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
		cmocka_unit_test(test_fence_api),
		cmocka_unit_test(test_fence_refuses),
		cmocka_unit_test(test_fence_cuts_placement),
		cmocka_unit_test(test_fence_race),
		cmocka_unit_test(test_post_validation),
		cmocka_unit_test(test_dereg_revokes),
		cmocka_unit_test(test_rnr),
		cmocka_unit_test(test_wrong_token_then_good),
		cmocka_unit_test(test_replayed_lane_and_dead_token),
		cmocka_unit_test(test_bad_hello_timeout),
		cmocka_unit_test(test_connect_refused_and_timeout),
		cmocka_unit_test(test_raw_reserved),
		cmocka_unit_test(test_raw_flags),
		cmocka_unit_test(test_raw_unknown_op),
		cmocka_unit_test(test_raw_forged_ack),
		cmocka_unit_test(test_dereg_stalled_peer),
		cmocka_unit_test(test_peer_destroy_midstream),
		cmocka_unit_test(test_sq_full),
		cmocka_unit_test(test_sealed_data),
		cmocka_unit_test(test_sealed_tee),
		cmocka_unit_test(test_sealed_flip),
		cmocka_unit_test(test_sealed_replay),
		cmocka_unit_test(test_sealed_move),
		cmocka_unit_test(test_sealed_truncate),
		cmocka_unit_test(test_sealed_other_key),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
