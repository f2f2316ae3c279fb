/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport against a real RDMA device: rdma_cm setup with the
 * session token, WRITE and WRITE_WITH_IMM (0 bytes included) landing byte-exact
 * with the right immediates, a wrong token turned away at connect time, and
 * remote access errors (wrong rkey, outside the MR, after dereg_mr) leaving the
 * target untouched, teardown with writes in flight (quiesce: lanes to error,
 * flush awaited, then dereg and destroy, in bounded time), 16 lanes up and
 * lanes the device's limits cannot hold refused at once, and a lane from
 * another host than the expected peer rejected while the right one gets in.
 * The same again on the WRITE + SEND path (xport_params.write_send, what
 * iWARP devices take), and a WRITE + SEND connector against a WRITE_IMM
 * acceptor failing at connect (never a hang, never a guess).
 *
 * Needs a device: on machines without one it exits 77 and says why. It runs
 * for real inside the Soft-RoCE VM (tests/rxe-vm/run, driven by
 * tests/integration/t_verbs_vm.sh): listener on 10.0.0.2 (rxe1), connector
 * from 10.0.0.1 (rxe0), or 127.0.0.1 when only one device exists.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "xport.h"

#ifdef HAVE_VERBS
#include <infiniband/verbs.h>

#define TIMEOUT_MS 20000
#define TARGET_LEN (1u << 20)
#define GUARD	   4096

static int failures;
static const char *listen_ip = "10.0.0.2";
static bool write_send; /* every xport of the tests below on the WRITE + SEND path */

#define CHECK(cond, ...)                                                                \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                   \
			fprintf(stderr, "\n");                                          \
			failures++;                                                     \
			return -1;                                                      \
		}                                                                       \
	} while (0)

static const struct xport_ops *ops = &xport_verbs_ops;

static struct xport_params mkparams(unsigned nlanes, uint8_t tok)
{
	struct xport_params p = {
		.nlanes = nlanes, .sq_depth = 32, .rq_depth = 16, .timeout_ms = TIMEOUT_MS
	};

	memset(p.token, tok, sizeof(p.token));
	p.write_send = write_send;
	return p;
}

static struct sockaddr_in addr_of(const char *ip, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

struct acceptor {
	pthread_t thr;
	struct xport_listener *l;
	struct xport_params p;
	struct xport *x;
	int r;
};

static void *accept_main(void *arg)
{
	struct acceptor *a = arg;

	a->r = ops->accept(a->l, &a->p, &a->x);
	return NULL;
}

/* Listener + accept thread with these parameters; returns the port. */
static int acceptor_start_p(struct acceptor *a, const struct xport_params *p, uint16_t *ret_port)
{
	struct sockaddr_in la = addr_of(listen_ip, 0);
	int r;

	memset(a, 0, sizeof(*a));
	a->p = *p;
	r = ops->listen((struct sockaddr *)&la, sizeof(la), -1, &a->l, ret_port);
	if (r < 0) {
		return r;
	}
	return -pthread_create(&a->thr, NULL, accept_main, a);
}

static int acceptor_start(struct acceptor *a, unsigned nlanes, uint8_t tok, uint16_t *ret_port)
{
	struct xport_params p = mkparams(nlanes, tok);

	return acceptor_start_p(a, &p, ret_port);
}

static int acceptor_join(struct acceptor *a)
{
	pthread_join(a->thr, NULL);
	ops->listener_close(a->l);
	return a->r;
}

struct pair {
	struct xport *srv, *cli;
	uint8_t *target; /* GUARD | TARGET_LEN registered | GUARD */
	uint8_t *source;
	struct xport_mr *tmr, *smr;
};

static void pair_close(struct pair *pr)
{
	if (pr->srv) {
		pr->srv->ops->destroy(pr->srv);
	}
	if (pr->cli) {
		pr->cli->ops->destroy(pr->cli);
	}
	free(pr->target);
	free(pr->source);
	memset(pr, 0, sizeof(*pr));
}

static int pair_open(struct pair *pr, unsigned nlanes)
{
	struct acceptor a;
	struct xport_params p = mkparams(nlanes, 0x5c);
	struct sockaddr_in ca;
	uint16_t port;
	int r, ra;

	memset(pr, 0, sizeof(*pr));
	r = acceptor_start(&a, nlanes, 0x5c, &port);
	CHECK(r >= 0, "listen/accept thread: %s", strerror(-r));
	ca = addr_of(listen_ip, port);
	r = ops->connect((struct sockaddr *)&ca, sizeof(ca), &p, &pr->cli);
	ra = acceptor_join(&a);
	pr->srv = a.x;
	CHECK(r >= 0, "connect: %s", strerror(-r));
	CHECK(ra >= 0, "accept: %s", strerror(-ra));
	pr->target = malloc(TARGET_LEN + 2 * GUARD);
	pr->source = malloc(TARGET_LEN);
	CHECK(pr->target && pr->source, "out of memory");
	memset(pr->target, 0xee, TARGET_LEN + 2 * GUARD);
	for (size_t i = 0; i < TARGET_LEN; i++) {
		pr->source[i] = (uint8_t)(i * 7 + 3);
	}
	r = pr->srv->ops->reg_mr(pr->srv, pr->target + GUARD, TARGET_LEN,
				 XPORT_ACCESS_LOCAL | XPORT_ACCESS_REMOTE_WRITE, &pr->tmr);
	CHECK(r >= 0, "reg target: %s", strerror(-r));
	CHECK(pr->tmr->rkey != 0, "target rkey 0");
	/* Zero-based: the peer never sees our address, only its offset in its page. */
	CHECK(pr->tmr->iova == ((uintptr_t)(pr->target + GUARD) & 4095), "target iova 0x%llx",
	      (unsigned long long)pr->tmr->iova);
	r = pr->cli->ops->reg_mr(pr->cli, pr->source, TARGET_LEN, XPORT_ACCESS_LOCAL, &pr->smr);
	CHECK(r >= 0, "reg source: %s", strerror(-r));
	CHECK(pr->smr->rkey == 0, "local-only MR got an rkey");
	fprintf(stderr, "  pair up: %u lanes, max_inline %u/%u\n", nlanes, pr->cli->max_inline,
		pr->srv->max_inline);
	return 0;
}

/* Gather `want` completions (or stop at the first error), waiting on event_fd. */
static int collect(struct xport *x, struct xport_wc *out, int want, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	int got = 0;

	while (got < want) {
		struct pollfd pfd = { .fd = x->ops->event_fd(x), .events = POLLIN };
		int n = x->ops->poll_cq(x, out + got, (size_t)(want - got));
		int64_t left;

		if (n < 0) {
			return n;
		}
		for (int i = got; i < got + n; i++) {
			if (out[i].status != XPORT_WC_SUCCESS) {
				return i + 1;
			}
		}
		got += n;
		if (n > 0) {
			continue;
		}
		left = deadline - now_ms();
		if (left <= 0) {
			break;
		}
		(void)poll(&pfd, 1, (int)left);
	}
	return got;
}

static struct xport_wr wr_write(struct pair *pr, uint32_t op, size_t src_off, size_t dst_off,
				uint32_t len, uint32_t imm, unsigned lane, uint32_t flags)
{
	return (struct xport_wr){
		.wr_id = 0x1000 + dst_off,
		.opcode = op,
		.flags = flags,
		.mr = len ? pr->smr : NULL,
		.buf = len ? pr->source + src_off : NULL,
		.len = len,
		.imm = imm,
		.remote_addr = pr->tmr->iova + dst_off,
		.rkey = pr->tmr->rkey,
		.lane = lane,
	};
}

static bool untouched(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (p[i] != 0xee) {
			return false;
		}
	}
	return true;
}

static int test_happy_path(void)
{
	struct pair pr;
	struct xport_wc wc[16];
	int64_t t0 = now_ms();
	int n, r;

	if (pair_open(&pr, 2) < 0) {
		pair_close(&pr);
		return -1;
	}
	for (unsigned l = 0; l < 2; l++) {
		uint64_t ids[4] = { 100 + l, 100 + l, 100 + l, 100 + l };

		r = pr.srv->ops->post_recvs(pr.srv, l, ids, 4);
		CHECK(r >= 0, "post_recvs: %s", strerror(-r));
	}
	{
		struct xport_wr wrs[] = {
			wr_write(&pr, XPORT_OP_WRITE, 0, 0, 4096, 0, 0, 0),
			wr_write(&pr, XPORT_OP_WRITE_IMM, 5000, 8192, 1000, 0x11, 1, 0),
			/* The engine's credit: 0 bytes, no MR, rkey 0. */
			{ .wr_id = 7, .opcode = XPORT_OP_WRITE_IMM, .imm = 0x22, .lane = 0 },
			wr_write(&pr, XPORT_OP_WRITE_IMM, 77, 20000, 1, 0x33, 0,
				 XPORT_SEND_INLINE | XPORT_SEND_SIGNALED),
			wr_write(&pr, XPORT_OP_WRITE_IMM, 100000, 65536, 300000, 0x44, 1,
				 XPORT_SEND_SIGNALED),
			/* Last byte of the MR exactly. */
			wr_write(&pr, XPORT_OP_WRITE, 12345, TARGET_LEN - 1, 1, 0, 1, 0),
			wr_write(&pr, XPORT_OP_WRITE_IMM, 0, TARGET_LEN - 200, 200, 0x55, 1,
				 XPORT_SEND_SIGNALED | XPORT_SEND_INLINE),
		};

		r = pr.cli->ops->post_writes(pr.cli, wrs, sizeof(wrs) / sizeof(wrs[0]));
		CHECK(r >= 0, "post_writes: %s", strerror(-r));
	}
	/* Requester: the signaled ones (3 on lane 0's inline one, 2 on lane 1). */
	n = collect(pr.cli, wc, 3, TIMEOUT_MS);
	CHECK(n == 3, "client completions %d (%s)", n,
	      n > 0 ? xport_wc_status_str(wc[n - 1].status) : "-");
	for (int i = 0; i < n; i++) {
		CHECK(wc[i].status == XPORT_WC_SUCCESS && wc[i].opcode == XPORT_WC_WRITE,
		      "client wc %d: %s op %u", i, xport_wc_status_str(wc[i].status), wc[i].opcode);
	}
	/* Responder: 5 immediates, in order per lane. */
	n = collect(pr.srv, wc, 5, TIMEOUT_MS);
	CHECK(n == 5, "server completions %d", n);
	{
		uint32_t want0[] = { 0x22, 0x33 }, len0[] = { 0, 1 };
		uint32_t want1[] = { 0x11, 0x44, 0x55 }, len1[] = { 1000, 300000, 200 };
		unsigned i0 = 0, i1 = 0;

		for (int i = 0; i < n; i++) {
			CHECK(wc[i].status == XPORT_WC_SUCCESS && wc[i].opcode == XPORT_WC_RECV_IMM,
			      "server wc %d: %s", i, xport_wc_status_str(wc[i].status));
			CHECK(wc[i].wr_id == 100 + wc[i].lane, "recv wr_id %llu lane %u",
			      (unsigned long long)wc[i].wr_id, wc[i].lane);
			if (wc[i].lane == 0) {
				CHECK(i0 < 2 && wc[i].imm == want0[i0] && wc[i].len == len0[i0],
				      "lane 0 #%u: imm 0x%x len %u", i0, wc[i].imm, wc[i].len);
				i0++;
			} else {
				CHECK(i1 < 3 && wc[i].imm == want1[i1] && wc[i].len == len1[i1],
				      "lane 1 #%u: imm 0x%x len %u", i1, wc[i].imm, wc[i].len);
				i1++;
			}
		}
	}
	{
		uint8_t *t = pr.target + GUARD;

		CHECK(memcmp(t, pr.source, 4096) == 0, "write 4096 bytes");
		CHECK(memcmp(t + 8192, pr.source + 5000, 1000) == 0, "write_imm 1000 bytes");
		CHECK(t[20000] == pr.source[77] && t[20001] == 0xee, "inline 1 byte");
		CHECK(memcmp(t + 65536, pr.source + 100000, 300000) == 0, "write_imm 300000 bytes");
		CHECK(memcmp(t + TARGET_LEN - 200, pr.source, 200) == 0, "inline 200 at the end");
		CHECK(untouched(pr.target, GUARD) && untouched(t + TARGET_LEN, GUARD),
		      "guards touched");
		CHECK(untouched(t + 4096, 8192 - 4096), "gap touched");
	}
	/* The other direction: a zero-length credit from the receiver. */
	{
		uint64_t id = 9;
		struct xport_wr credit = {
			.wr_id = 55,
			.opcode = XPORT_OP_WRITE_IMM,
			.flags = XPORT_SEND_SIGNALED,
			.imm = 0xc0ffee,
			.lane = 1,
		};

		r = pr.cli->ops->post_recvs(pr.cli, 1, &id, 1);
		CHECK(r >= 0, "client post_recvs: %s", strerror(-r));
		r = pr.srv->ops->post_writes(pr.srv, &credit, 1);
		CHECK(r >= 0, "server post credit: %s", strerror(-r));
		n = collect(pr.srv, wc, 1, TIMEOUT_MS);
		CHECK(n == 1 && wc[0].status == XPORT_WC_SUCCESS && wc[0].wr_id == 55,
		      "credit send completion");
		n = collect(pr.cli, wc, 1, TIMEOUT_MS);
		CHECK(n == 1 && wc[0].status == XPORT_WC_SUCCESS &&
			  wc[0].opcode == XPORT_WC_RECV_IMM && wc[0].imm == 0xc0ffee &&
			  wc[0].len == 0 && wc[0].lane == 1 && wc[0].wr_id == 9,
		      "credit arrival: n %d imm 0x%x", n, n > 0 ? wc[0].imm : 0);
	}
	/*
	 * Send queue bound: 33 on a 32-deep lane is refused whole. On WRITE +
	 * SEND the lane has room for 32 WRITE_IMMs of two requests each: 65
	 * plain writes are the first that can't fit.
	 */
	{
		struct xport_wr many[65];
		int nmany = write_send ? 65 : 33;

		for (int i = 0; i < nmany; i++) {
			many[i] = wr_write(&pr, XPORT_OP_WRITE, 0, 0, 8, 0, 0, 0);
		}
		r = pr.cli->ops->post_writes(pr.cli, many, (size_t)nmany);
		CHECK(r == -ENOSPC, "%d WRs on sq 32: %d", nmany, r);
	}
	CHECK(pr.cli->ops->last_error(pr.cli) == NULL, "client error: %s",
	      pr.cli->ops->last_error(pr.cli));
	pair_close(&pr);
	fprintf(stderr, "ok happy path (%lld ms)\n", (long long)(now_ms() - t0));
	return 0;
}

/* The two ends on different paths: the lanes' opening message can't go through. */
static int test_path_mismatch(void)
{
	struct acceptor a;
	struct xport_params cli = mkparams(1, 0x42);
	struct xport_params srv = mkparams(1, 0x42);
	struct sockaddr_in ca;
	struct xport *x = NULL;
	int64_t t0 = now_ms();
	uint16_t port;
	int r, ra;

	cli.write_send = true;
	srv.write_send = false;
	cli.timeout_ms = srv.timeout_ms = 5000;
	r = acceptor_start_p(&a, &srv, &port);
	CHECK(r >= 0, "listen: %s", strerror(-r));
	ca = addr_of(listen_ip, port);
	r = ops->connect((struct sockaddr *)&ca, sizeof(ca), &cli, &x);
	ra = acceptor_join(&a);
	if (a.x) {
		a.x->ops->destroy(a.x);
	}
	if (r >= 0) {
		x->ops->destroy(x);
	}
	CHECK(r < 0, "a WRITE + SEND lane connected to a WRITE_IMM one (accept %d)", ra);
	fprintf(stderr, "ok paths that differ fail at connect: %s (%lld ms)\n", strerror(-r),
		(long long)(now_ms() - t0));
	return 0;
}

static int test_wrong_token(void)
{
	struct acceptor a;
	struct xport_params bad = mkparams(1, 0x66), good = mkparams(1, 0x77);
	struct sockaddr_in ca;
	struct xport *x = NULL;
	int64_t t0 = now_ms();
	uint16_t port;
	int r, ra;

	r = acceptor_start(&a, 1, 0x77, &port);
	CHECK(r >= 0, "listen: %s", strerror(-r));
	ca = addr_of(listen_ip, port);
	bad.timeout_ms = 5000;
	r = ops->connect((struct sockaddr *)&ca, sizeof(ca), &bad, &x);
	if (r != -ECONNREFUSED) {
		fprintf(stderr, "FAIL: wrong token: connect returned %d (%s), want ECONNREFUSED\n",
			r, strerror(-r));
		failures++;
		if (x) {
			x->ops->destroy(x);
		}
	}
	/* Wrong lane count with the right token is refused too. */
	{
		struct xport_params two = mkparams(2, 0x77);

		r = ops->connect((struct sockaddr *)&ca, sizeof(ca), &two, &x);
		if (r != -ECONNREFUSED) {
			fprintf(stderr, "FAIL: nlanes mismatch: connect returned %d\n", r);
			failures++;
			if (r >= 0) {
				x->ops->destroy(x);
			}
		}
	}
	/* The rejections consumed nothing: the right token still gets in. */
	r = ops->connect((struct sockaddr *)&ca, sizeof(ca), &good, &x);
	ra = acceptor_join(&a);
	CHECK(r >= 0, "good connect after bad: %s", strerror(-r));
	CHECK(ra >= 0, "accept: %s", strerror(-ra));
	x->ops->destroy(x);
	a.x->ops->destroy(a.x);
	fprintf(stderr, "ok wrong token rejected at connect (%lld ms)\n",
		(long long)(now_ms() - t0));
	return 0;
}

enum bad_kind { BAD_RKEY, BAD_RANGE, BAD_WRAP, BAD_DEREG };

static int test_access_error(enum bad_kind kind, const char *name)
{
	struct xport_mr gone;
	struct pair pr;
	struct xport_wc wc[4];
	struct xport_wr w;
	int64_t t0 = now_ms();
	int n, r;

	if (pair_open(&pr, 1) < 0) {
		pair_close(&pr);
		return -1;
	}
	w = wr_write(&pr, XPORT_OP_WRITE, 0, 0, 512, 0, 0, XPORT_SEND_SIGNALED);
	switch (kind) {
	case BAD_RKEY:
		w.rkey ^= 0x00ff0000;
		break;
	case BAD_RANGE:
		/* Starts inside, runs 412 bytes past the end into the guard. */
		w.remote_addr = pr.tmr->iova + TARGET_LEN - 100;
		break;
	case BAD_WRAP:
		/* Wraps past UINT64_MAX to land inside [iova, iova + len): refused. */
		w.remote_addr = UINT64_MAX - 15;
		break;
	case BAD_DEREG:
		/* What the peer knew of it stays; the registration itself is freed. */
		gone = *pr.tmr;
		r = pr.srv->ops->dereg_mr(pr.srv, pr.tmr);
		CHECK(r >= 0, "dereg_mr: %s", strerror(-r));
		pr.tmr = &gone;
		break;
	}
	r = pr.cli->ops->post_writes(pr.cli, &w, 1);
	CHECK(r >= 0, "post_writes: %s", strerror(-r));
	n = collect(pr.cli, wc, 1, TIMEOUT_MS);
	CHECK(n == 1, "no completion");
	CHECK(wc[0].status == XPORT_WC_REM_ACCESS_ERR && wc[0].wr_id == w.wr_id &&
		  wc[0].opcode == XPORT_WC_WRITE,
	      "%s: got %s", name, xport_wc_status_str(wc[0].status));
	CHECK(pr.cli->ops->last_error(pr.cli) &&
		  strstr(pr.cli->ops->last_error(pr.cli), "IBV_WC_REM_ACCESS_ERR"),
	      "last_error: %s", pr.cli->ops->last_error(pr.cli));
	CHECK(untouched(pr.target, TARGET_LEN + 2 * GUARD), "%s: target changed", name);
	/* The lane is dead: a later write is flushed. */
	w = wr_write(&pr, XPORT_OP_WRITE, 0, 0, 16, 0, 0, XPORT_SEND_SIGNALED);
	w.wr_id = 4242;
	r = pr.cli->ops->post_writes(pr.cli, &w, 1);
	if (r >= 0) {
		n = collect(pr.cli, wc, 1, TIMEOUT_MS);
		CHECK(n == 1 && wc[0].status == XPORT_WC_WR_FLUSH_ERR && wc[0].wr_id == 4242,
		      "after failure: n %d %s", n, n ? xport_wc_status_str(wc[0].status) : "-");
	}
	CHECK(untouched(pr.target, TARGET_LEN + 2 * GUARD), "%s: target changed later", name);
	fprintf(stderr, "ok %s -> %s (%lld ms): %s\n", name,
		xport_wc_status_str(XPORT_WC_REM_ACCESS_ERR), (long long)(now_ms() - t0),
		pr.cli->ops->last_error(pr.cli));
	pair_close(&pr);
	return 0;
}

/* Queues full of writes, then teardown at once: quiesce drains, dereg and destroy follow. */
static int test_teardown_in_flight(bool explicit_quiesce)
{
	enum { PER_LANE = 32, LEN = 32768 };
	const char *name = explicit_quiesce ? "quiesce, dereg, destroy" : "destroy alone";
	struct xport_wr wrs[2 * PER_LANE], late;
	struct xport_wc wc[4];
	struct pair pr;
	int64_t t0, tq, t1;
	int r;

	if (pair_open(&pr, 2) < 0) {
		pair_close(&pr);
		return -1;
	}
	for (unsigned l = 0; l < 2; l++) {
		for (unsigned i = 0; i < PER_LANE; i++) {
			/* Every lane's last one signaled, the rest not: as the engine posts. */
			wrs[l * PER_LANE + i] =
			    wr_write(&pr, XPORT_OP_WRITE, (size_t)i * LEN, (size_t)i * LEN, LEN, 0,
				     l, i == PER_LANE - 1 ? XPORT_SEND_SIGNALED : 0);
		}
	}
	r = pr.cli->ops->post_writes(pr.cli, wrs, 2 * PER_LANE);
	CHECK(r >= 0, "post %d writes: %s", 2 * PER_LANE, strerror(-r));
	t0 = now_ms();
	if (explicit_quiesce) {
		r = pr.cli->ops->quiesce(pr.cli);
		tq = now_ms();
		/* The flush of all 64 came back: not the bounded wait running out. */
		CHECK(r == 0, "quiesce: %s after %lld ms", strerror(-r), (long long)(tq - t0));
		late = wr_write(&pr, XPORT_OP_WRITE, 0, 0, 8, 0, 0, XPORT_SEND_SIGNALED);
		r = pr.cli->ops->post_writes(pr.cli, &late, 1);
		CHECK(r == -ESHUTDOWN, "post after quiesce: %d", r);
		r = pr.cli->ops->poll_cq(pr.cli, wc, 4);
		CHECK(r == 0, "poll after quiesce: %d", r);
		r = pr.cli->ops->dereg_mr(pr.cli, pr.smr);
		CHECK(r >= 0, "dereg after quiesce: %s", strerror(-r));
		pr.smr = NULL;
		/* The source may go now: nothing of ours reads it any more. */
		memset(pr.source, 0, TARGET_LEN);
		free(pr.source);
		pr.source = NULL;
		CHECK(pr.cli->ops->last_error(pr.cli) == NULL, "client error: %s",
		      pr.cli->ops->last_error(pr.cli));
		r = pr.srv->ops->quiesce(pr.srv);
		CHECK(r == 0, "server quiesce: %s", strerror(-r));
	} else {
		tq = t0;
	}
	pr.cli->ops->destroy(pr.cli);
	pr.cli = NULL;
	pr.srv->ops->destroy(pr.srv);
	pr.srv = NULL;
	t1 = now_ms();
	CHECK(t1 - t0 < 3000, "%s took %lld ms", name, (long long)(t1 - t0));
	/* Nothing landed outside the MR. */
	CHECK(untouched(pr.target, GUARD) && untouched(pr.target + GUARD + TARGET_LEN, GUARD),
	      "guards touched");
	fprintf(stderr, "ok teardown with %d writes in flight, %s (quiesce %lld ms, all %lld ms)\n",
		2 * PER_LANE, name, (long long)(tq - t0), (long long)(t1 - t0));
	pair_close(&pr);
	return 0;
}

/*
 * The lane source check: the acceptor expects ::ffff:10.0.0.1 (the control
 * connection of a dual-stack daemon); a lane leaving from rxe1 (10.0.0.2),
 * with the right token, is rejected, and the one from rxe0 (10.0.0.1) gets in.
 */
static int test_wrong_source(void)
{
	struct acceptor a;
	struct xport_params want = mkparams(1, 0x31), from_b = mkparams(1, 0x31),
			    from_a = mkparams(1, 0x31);
	struct sockaddr_in6 *w6 = (struct sockaddr_in6 *)&want.peer;
	struct sockaddr_in ca;
	struct xport *x = NULL;
	int64_t t0 = now_ms();
	uint16_t port;
	int r, ra;

	want.peer_set = true;
	w6->sin6_family = AF_INET6;
	w6->sin6_port = htons(40000); /* the control connection's port: no matter */
	inet_pton(AF_INET6, "::ffff:10.0.0.1", &w6->sin6_addr);
	r = acceptor_start_p(&a, &want, &port);
	CHECK(r >= 0, "listen: %s", strerror(-r));
	ca = addr_of(listen_ip, port);
	from_b.devices[0] = "rxe1";
	from_b.ndevices = 1;
	from_b.timeout_ms = 5000;
	r = ops->connect((struct sockaddr *)&ca, sizeof(ca), &from_b, &x);
	if (r != -ECONNREFUSED) {
		fprintf(stderr,
			"FAIL: lane from 10.0.0.2 (rxe1): connect returned %d (%s), "
			"want ECONNREFUSED\n",
			r, strerror(-r));
		failures++;
		if (r >= 0) {
			x->ops->destroy(x);
		}
	}
	/* The right host, same token: the session was waiting for it. */
	from_a.devices[0] = "rxe0";
	from_a.ndevices = 1;
	r = ops->connect((struct sockaddr *)&ca, sizeof(ca), &from_a, &x);
	ra = acceptor_join(&a);
	CHECK(r >= 0, "lane from 10.0.0.1 (rxe0): %s", strerror(-r));
	CHECK(ra >= 0, "accept: %s", strerror(-ra));
	x->ops->destroy(x);
	a.x->ops->destroy(a.x);
	fprintf(stderr, "ok lane from another host rejected, the expected one accepted (%lld ms)\n",
		(long long)(now_ms() - t0));
	return 0;
}

/* The first device's limits (ibv_query_device), or -1. */
static int device_limits(int *ret_max_qp_wr, int *ret_max_cqe)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_device_attr da;
	struct ibv_context *ctx = devs && devs[0] ? ibv_open_device(devs[0]) : NULL;
	int r = ctx ? ibv_query_device(ctx, &da) : -1;

	if (r == 0) {
		*ret_max_qp_wr = da.max_qp_wr;
		*ret_max_cqe = da.max_cqe;
	}
	if (ctx) {
		ibv_close_device(ctx);
	}
	if (devs) {
		ibv_free_device_list(devs);
	}
	return r == 0 ? 0 : -1;
}

/*
 * The device's limits, taken before anything is sized: 16 lanes (the most
 * there are) connect; lanes whose receives the device cannot hold (per
 * queue or in their CQ) fail the connect at once with -EINVAL, before any
 * lane is up (the acceptor only times out).
 */
static int test_device_limits(void)
{
	struct pair pr;
	struct acceptor a;
	struct xport_params big = mkparams(16, 0x3e);
	struct sockaddr_in ca;
	struct xport *x = NULL;
	int max_qp_wr, max_cqe;
	int64_t t0 = now_ms();
	uint16_t port;
	int r, ra;

	CHECK(device_limits(&max_qp_wr, &max_cqe) == 0, "ibv_query_device failed");
	CHECK(pair_open(&pr, XPORT_MAX_LANES) == 0, "16 lanes did not connect");
	pair_close(&pr);

	/* Past the CQ (rxe: 1M work requests per queue, far fewer completions per CQ). */
	big.rq_depth = (unsigned)(max_qp_wr < max_cqe ? max_qp_wr : max_cqe);
	big.timeout_ms = 2000;
	r = acceptor_start_p(&a, &big, &port);
	CHECK(r >= 0, "listen: %s", strerror(-r));
	ca = addr_of(listen_ip, port);
	x = NULL;
	r = ops->connect((struct sockaddr *)&ca, sizeof(ca), &big, &x);
	ra = acceptor_join(&a);
	if (x) {
		x->ops->destroy(x);
	}
	if (a.x) {
		a.x->ops->destroy(a.x);
	}
	CHECK(r == -EINVAL,
	      "16 lanes of %u receives (device: %d per queue, %d per CQ): connect %d, want -EINVAL",
	      big.rq_depth, max_qp_wr, max_cqe, r);
	CHECK(ra < 0, "accept of lanes that cannot exist returned %d", ra);
	fprintf(stderr,
		"ok device limits: 16 lanes up; a receive queue past them refused (%lld ms)\n",
		(long long)(now_ms() - t0));
	return 0;
}

static bool have_device(const char *name)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	bool found = false;

	for (int i = 0; devs && devs[i]; i++) {
		found = found || strcmp(ibv_get_device_name(devs[i]), name) == 0;
	}
	if (devs) {
		ibv_free_device_list(devs);
	}
	return found;
}

int main(void)
{
	struct ibv_device **devs;
	int ndev = 0;
	int64_t t0 = now_ms();

	setvbuf(stdout, NULL, _IONBF, 0);
	errno = 0;
	devs = ibv_get_device_list(&ndev);
	if (!devs || ndev == 0) {
		printf("SKIP: no RDMA device (ibv_get_device_list: %s)\n",
		       devs ? "0 devices" : strerror(errno ? errno : ENODEV));
		if (devs) {
			ibv_free_device_list(devs);
		}
		return 77;
	}
	ibv_free_device_list(devs);
	if (getenv("VERBS_LOOP_IP")) {
		listen_ip = getenv("VERBS_LOOP_IP");
	} else if (ndev < 2) {
		listen_ip = "127.0.0.1";
	}
	fprintf(stderr, "%d RDMA device(s); listening on %s\n", ndev, listen_ip);
	test_happy_path();
	test_wrong_token();
	test_access_error(BAD_RKEY, "wrong rkey");
	test_access_error(BAD_RANGE, "write past the MR");
	test_access_error(BAD_WRAP, "write wrapping past UINT64_MAX");
	test_access_error(BAD_DEREG, "write after dereg_mr");
	test_teardown_in_flight(true);
	test_teardown_in_flight(false);
	test_device_limits();
	if (strcmp(listen_ip, "10.0.0.2") == 0 && have_device("rxe0") && have_device("rxe1")) {
		test_wrong_source();
	} else {
		fprintf(stderr, "note: lane source check not run (needs the VM's rxe0 10.0.0.1 and "
				"rxe1 10.0.0.2)\n");
	}
	/* The WRITE + SEND path (iWARP's), forced on this device. */
	fprintf(stderr, "-- WRITE + SEND path\n");
	write_send = true;
	test_happy_path();
	test_wrong_token();
	test_access_error(BAD_RKEY, "wrong rkey");
	test_access_error(BAD_DEREG, "write after dereg_mr");
	test_teardown_in_flight(true);
	test_path_mismatch();
	fprintf(stderr, "%s: %d failure(s), %lld ms\n", failures ? "FAILED" : "PASSED", failures,
		(long long)(now_ms() - t0));
	return failures ? 1 : 0;
}

#else
int main(void)
{
	printf("SKIP: built without the verbs transport (ENABLE_VERBS=OFF)\n");
	return 77;
}
#endif
