/* SPDX-License-Identifier: MIT */
/*
 * The tcp transport's lane handshake (authentication by token, replays, a
 * silent peer), hostile frames from an authenticated raw peer, and a peer
 * destroyed mid-stream.
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

/* ---- 6/7. lane handshake ---- */

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

int main(void)
{
	const struct CMUnitTest tests[] = {
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
