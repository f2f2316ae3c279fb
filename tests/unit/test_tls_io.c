/* SPDX-License-Identifier: MIT */
/*
 * The TLS control channel once connected, over real loopback TCP: EOF without
 * close_notify on either side, a bulk write, the message channel flushing at
 * both ends at once, the handshake deadline (tls_harness.c).
 */
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "clock.h"
#include "tls.h"
#include "tls_harness.h"

static void test_eof_without_close_notify(void **state)
{
	struct tls_ctx *sctx = make_ctx(true, dir_a, "server", dir_a, NULL);
	struct tls_ctx *cctx = make_ctx(false, dir_a, "client", dir_a, NULL);
	struct server srv;
	struct tls_conn *c = NULL;
	char buf[10];
	int port;

	/* Server drops TCP right after the handshake. */
	memset(&srv, 0, sizeof(srv));
	port = server_start(&srv, sctx, SRV_RAW_CLOSE);
	assert_int_equal(tls_connect(cctx, connect_tcp(port), "localhost", IO_TIMEOUT_MS, &c), 0);
	assert_int_equal(tls_read_full(c, buf, 1, IO_TIMEOUT_MS), -ECONNRESET);
	assert_contains(tls_conn_error(c), "close_notify");
	tls_conn_free(c);
	server_join(&srv);

	/* ... or in the middle of a message. */
	memset(&srv, 0, sizeof(srv));
	srv.partial = 3;
	port = server_start(&srv, sctx, SRV_RAW_CLOSE);
	assert_int_equal(tls_connect(cctx, connect_tcp(port), "localhost", IO_TIMEOUT_MS, &c), 0);
	assert_int_equal(tls_read_full(c, buf, sizeof(buf), IO_TIMEOUT_MS), -ECONNRESET);
	tls_conn_free(c);
	server_join(&srv);
	assert_int_equal(srv.io_rc, 3);

	/* A clean close_notify mid-message is still a truncated message. */
	memset(&srv, 0, sizeof(srv));
	srv.partial = 3;
	port = server_start(&srv, sctx, SRV_NOTIFY_CLOSE);
	assert_int_equal(tls_connect(cctx, connect_tcp(port), "localhost", IO_TIMEOUT_MS, &c), 0);
	assert_int_equal(tls_read_full(c, buf, sizeof(buf), IO_TIMEOUT_MS), -ECONNRESET);
	tls_conn_free(c);
	server_join(&srv);

	/* The server sees the same when the client drops TCP. */
	memset(&srv, 0, sizeof(srv));
	port = server_start(&srv, sctx, SRV_READ);
	assert_int_equal(tls_connect(cctx, connect_tcp(port), "localhost", IO_TIMEOUT_MS, &c), 0);
	shutdown(tls_fd(c), SHUT_RDWR);
	server_join(&srv);
	tls_conn_free(c);
	assert_int_equal(srv.accept_rc, 0);
	assert_int_equal(srv.io_rc, -ECONNRESET);

	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

static void test_bulk_transfer(void **state)
{
	struct tls_ctx *sctx = make_ctx(true, dir_a, "server", dir_a, NULL);
	struct tls_ctx *cctx = make_ctx(false, dir_a, "client", dir_a, NULL);
	uint8_t *data = malloc(BULK_LEN);
	struct server srv = { 0 };
	struct tls_conn *c = NULL;
	int port;

	fill_pattern(data, BULK_LEN);
	port = server_start(&srv, sctx, SRV_BULK);
	assert_int_equal(tls_connect(cctx, connect_tcp(port), "localhost", IO_TIMEOUT_MS, &c), 0);
	assert_int_equal(tls_write_full(c, data, BULK_LEN, IO_TIMEOUT_MS), BULK_LEN);
	server_join(&srv);
	assert_int_equal(srv.io_rc, BULK_LEN);
	tls_conn_free(c);
	free(data);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

/*
 * The message channel, both ends flushing at once: each queues more than
 * the sockets between them hold (buffers made small) before it reads
 * anything. A flush that only waited for room would wait for the other's
 * forever; each takes in what the other sends meanwhile, and both then read
 * every message, in order.
 */
#define CHAN_BURST 300000

struct chan_end {
	struct tls_ctx *ctx;
	int fd; /* server: the listening socket; client: its connected one */
	bool server;
	int rc;
	uint32_t got;
};

static void *chan_end_main(void *arg)
{
	struct chan_end *e = arg;
	struct tls_conn *c = NULL;
	struct chan ch;
	int fd = e->fd, small = 32 * 1024;

	if (e->server) {
		fd = accept4(e->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			e->rc = -errno;
			return NULL;
		}
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	e->rc = e->server ? tls_accept(e->ctx, fd, IO_TIMEOUT_MS, &c)
			  : tls_connect(e->ctx, fd, "localhost", IO_TIMEOUT_MS, &c);
	if (e->rc < 0) {
		return NULL;
	}
	e->rc = chan_init(&ch, c, IO_TIMEOUT_MS);
	for (uint32_t i = 0; i < CHAN_BURST && e->rc == 0; i++) {
		struct msg m = { .type = MSG_FILE_RESULT };

		m.u.file_result.id = i;
		e->rc = chan_queue(&ch, &m);
	}
	if (e->rc == 0) {
		e->rc = chan_flush(&ch);
	}
	for (e->got = 0; e->rc == 0 && e->got < CHAN_BURST; e->got++) {
		struct msg m;

		e->rc = chan_recv(&ch, &m, IO_TIMEOUT_MS);
		if (e->rc < 0) {
			break;
		}
		if (m.type != MSG_FILE_RESULT || m.u.file_result.id != e->got) {
			e->rc = -EBADMSG;
		}
		msg_clear(&m);
	}
	chan_done(&ch);
	tls_conn_free(c);
	return NULL;
}

static void test_chan_both_flush(void **state)
{
	struct chan_end srv = { .ctx = make_ctx(true, dir_a, "server", dir_a, NULL),
				.server = true };
	struct chan_end cli = { .ctx = make_ctx(false, dir_a, "client", dir_a, NULL) };
	pthread_t ts, tc;
	int port;

	srv.fd = listen_tcp(&port);
	cli.fd = connect_tcp(port);
	assert_int_equal(pthread_create(&ts, NULL, chan_end_main, &srv), 0);
	assert_int_equal(pthread_create(&tc, NULL, chan_end_main, &cli), 0);
	assert_int_equal(pthread_join(ts, NULL), 0);
	assert_int_equal(pthread_join(tc, NULL), 0);
	close(srv.fd);
	assert_int_equal(srv.rc, 0);
	assert_int_equal(cli.rc, 0);
	assert_int_equal(srv.got, CHAN_BURST);
	assert_int_equal(cli.got, CHAN_BURST);
	tls_ctx_free(srv.ctx);
	tls_ctx_free(cli.ctx);
}

static void test_handshake_deadline(void **state)
{
	struct tls_ctx *sctx = make_ctx(true, dir_a, "server", dir_a, NULL);
	struct tls_ctx *cctx = make_ctx(false, dir_a, "client", dir_a, NULL);
	struct tls_conn *c = NULL;
	int port, lfd, silent, fd;
	int64_t t0, elapsed;

	/* A TCP client that never speaks. */
	lfd = listen_tcp(&port);
	silent = connect_tcp(port);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(fd >= 0);
	t0 = now_ms();
	assert_int_equal(tls_accept(sctx, fd, 300, &c), -ETIMEDOUT);
	elapsed = now_ms() - t0;
	assert_null(c);
	assert_contains(tls_last_error(), "timed out");
	if (elapsed < 290 || elapsed > 2000) {
		fail_msg("accept deadline of 300 ms took %lld ms", (long long)elapsed);
	}
	close(silent);

	/* A server that accepts TCP but never answers the ClientHello. */
	t0 = now_ms();
	assert_int_equal(tls_connect(cctx, connect_tcp(port), "localhost", 300, &c), -ETIMEDOUT);
	elapsed = now_ms() - t0;
	assert_true(elapsed >= 290 && elapsed <= 2000);
	close(lfd);

	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_eof_without_close_notify),
		cmocka_unit_test(test_bulk_transfer),
		cmocka_unit_test(test_chan_both_flush),
		cmocka_unit_test(test_handshake_deadline),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
