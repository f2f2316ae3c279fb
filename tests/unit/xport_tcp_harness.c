/* SPDX-License-Identifier: MIT */
/* What the tcp transport's tests share (xport_tcp_harness.h). */
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

const struct xport_ops *ops = &xport_tcp_ops;

/* Sealed lanes for make_pair (tests set and reset these); the client side's test hooks. */
bool g_seal;
uint8_t g_cli_secret_xor;
unsigned g_cli_tamper;
const char *g_cli_tee;

struct xport_params mkparams(unsigned nlanes, unsigned sq, unsigned rq, int timeout_ms)
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

struct sockaddr_in loopback(uint16_t port)
{
	return (struct sockaddr_in){ .sin_family = AF_INET,
				     .sin_port = htons(port),
				     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
}

static void *accept_main(void *arg)
{
	struct server *s = arg;

	s->rc = ops->accept(s->l, &s->p, &s->x);
	return NULL;
}

void server_listen(struct server *s)
{
	struct sockaddr_in sin = loopback(0);

	memset(s, 0, sizeof(*s));
	assert_int_equal(ops->listen((struct sockaddr *)&sin, sizeof(sin), -1, &s->l, &s->port), 0);
	assert_true(s->port != 0);
}

void server_start_accept(struct server *s, const struct xport_params *p)
{
	s->p = *p;
	s->x = NULL;
	s->rc = 1;
	assert_int_equal(pthread_create(&s->thr, NULL, accept_main, s), 0);
}

int server_join(struct server *s)
{
	pthread_join(s->thr, NULL);
	return s->rc;
}

struct pair make_pair(unsigned nlanes, unsigned sq, unsigned rq)
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

void free_pair(struct pair *pr)
{
	ops->destroy(pr->cli);
	ops->destroy(pr->srv);
}

/* Collect exactly `want` completions (waiting on the event fd) or fail the test. */
void wait_wcs(struct xport *x, struct xport_wc *out, size_t want, int timeout_ms)
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

void expect_no_wcs(struct xport *x, int ms)
{
	struct xport_wc wc;

	usleep((useconds_t)ms * 1000);
	assert_int_equal(ops->poll_cq(x, &wc, 1), 0);
}

void post_recvs(struct xport *x, unsigned lane, uint64_t first, size_t n)
{
	uint64_t ids[64];

	assert_true(n <= 64);
	for (size_t i = 0; i < n; i++) {
		ids[i] = first + i;
	}
	assert_int_equal(ops->post_recvs(x, lane, ids, n), 0);
}

struct xport_wr wr_write(const struct xport_mr *mr, const void *buf, uint32_t len, uint64_t raddr,
			 uint32_t rkey, unsigned lane, uint64_t wr_id)
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

void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		p[i] = (uint8_t)((i * 131u + seed * 7u + (i >> 8)) ^ seed);
	}
}

/* ---- a raw peer on a lane ---- */

int raw_connect(uint16_t port)
{
	struct sockaddr_in sin = loopback(port);
	struct timeval tv = { .tv_sec = 3 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

void raw_hello(int fd, uint16_t lane, uint16_t nlanes, const uint8_t *token)
{
	uint8_t b[48] = { 'R', 'D', 'L', 'N', 0, 1 };

	b[6] = (uint8_t)(lane >> 8);
	b[7] = (uint8_t)lane;
	b[8] = (uint8_t)(nlanes >> 8);
	b[9] = (uint8_t)nlanes;
	memcpy(b + 12, token, XPORT_TOKEN_LEN);
	assert_int_equal(send(fd, b, sizeof(b), MSG_NOSIGNAL), sizeof(b));
}

void expect_ack(int fd)
{
	char ack[4];

	assert_int_equal(recv(fd, ack, 4, MSG_WAITALL), 4);
	assert_memory_equal(ack, "RDOK", 4);
}

/* Closed by the acceptor without an ack (EOF or reset), not merely silent. */
void expect_dropped(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, 0);

	assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
	close(fd);
}

void put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

void put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

void raw_frame(uint8_t h[32], uint8_t op, uint32_t rkey, uint64_t addr, uint32_t len)
{
	memset(h, 0, 32);
	h[0] = op;
	put32(h + 4, rkey);
	put64(h + 8, addr);
	put32(h + 16, len);
}
