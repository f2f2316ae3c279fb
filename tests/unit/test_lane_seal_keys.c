/* SPDX-License-Identifier: MIT */
/*
 * Lane keys of sealed transfers (lane_seal_export) over a real TLS 1.3
 * session, on a socketpair with real certificates from certs_init: both ends
 * derive the same secret; with PROTO_CAP_TRANSFER_KEYS every transfer (token)
 * and every kind (push, pull, bench) of one connection gets its own, never
 * the v1 one; without it the v1 secret goes to the connection's first sealed
 * transfer only, and a second is refused before any key exists.
 */
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "certs.h"
#include "lane_seal.h"
#include "proto/msg.h"
#include "tls.h"

#define IO_TIMEOUT_MS 5000
#define TOKEN_LEN     PROTO_TOKEN_LEN

static char *certdir;

/* Both ends of one control connection: client and daemon. */
struct pair {
	struct tls_ctx *cctx, *sctx;
	struct tls_conn *client, *daemon;
};

struct accept_arg {
	struct tls_ctx *ctx;
	int fd;
	int rc;
	struct tls_conn *conn;
};

static struct tls_ctx *make_ctx(bool server, const char *name)
{
	struct tls_ctx *ctx = tu_tls_ctx(certdir, server, name);

	if (!ctx) {
		fail_msg("tls_ctx_new: %s", tls_last_error());
	}
	return ctx;
}

static void *accept_main(void *arg)
{
	struct accept_arg *a = arg;

	a->rc = tls_accept(a->ctx, a->fd, IO_TIMEOUT_MS, &a->conn);
	return NULL;
}

static void pair_open(struct pair *p)
{
	struct accept_arg a = { 0 };
	pthread_t t;
	int sv[2];

	memset(p, 0, sizeof(*p));
	p->cctx = make_ctx(false, "client");
	p->sctx = make_ctx(true, "server");
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	a.ctx = p->sctx;
	a.fd = sv[1];
	assert_int_equal(pthread_create(&t, NULL, accept_main, &a), 0);
	assert_int_equal(tls_connect(p->cctx, sv[0], "localhost", IO_TIMEOUT_MS, &p->client), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(a.rc, 0);
	p->daemon = a.conn;
}

static void pair_close(struct pair *p)
{
	tls_conn_free(p->client);
	tls_conn_free(p->daemon);
	tls_ctx_free(p->cctx);
	tls_ctx_free(p->sctx);
}

static void token_fill(uint8_t t[TOKEN_LEN], uint8_t seed)
{
	for (size_t i = 0; i < TOKEN_LEN; i++) {
		t[i] = (uint8_t)(seed * 29 + i * 7);
	}
}

static const uint64_t new_caps = PROTO_CAP_TCP | PROTO_CAP_ENCRYPT | PROTO_CAP_TRANSFER_KEYS;
static const uint64_t old_caps = PROTO_CAP_TCP | PROTO_CAP_ENCRYPT;

/*
 * Several sealed transfers on one connection, as both ends would key them:
 * two tokens, each with all three kinds. Each transfer's secret is the same
 * at both ends and no other transfer's, nor the v1 one; so are its keys.
 */
static void test_each_transfer_its_keys(void **state)
{
	static const enum lane_seal_purpose kinds[] = { LANE_SEAL_PUSH, LANE_SEAL_PULL,
							LANE_SEAL_BENCH };
	uint8_t tokens[2][TOKEN_LEN], v1[LANE_SEAL_SECRET_LEN];
	uint8_t sec[6][LANE_SEAL_SECRET_LEN], dsec[LANE_SEAL_SECRET_LEN];
	uint8_t key[6][LANE_SEAL_KEY_LEN];
	unsigned nclient = 0, ndaemon = 0;
	struct pair p;
	int n = 0;

	token_fill(tokens[0], 1);
	token_fill(tokens[1], 2);
	pair_open(&p);
	assert_int_equal(tls_export_secret(p.client, LANE_SEAL_EXPORT_LABEL, v1, sizeof(v1)), 0);
	for (int t = 0; t < 2; t++) {
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++, n++) {
			assert_int_equal(lane_seal_export(p.client, new_caps, kinds[k], tokens[t],
							  TOKEN_LEN, &nclient, sec[n]),
					 0);
			assert_int_equal(lane_seal_export(p.daemon, new_caps, kinds[k], tokens[t],
							  TOKEN_LEN, &ndaemon, dsec),
					 0);
			assert_memory_equal(sec[n], dsec, LANE_SEAL_SECRET_LEN);
			assert_memory_not_equal(sec[n], v1, LANE_SEAL_SECRET_LEN);
			assert_int_equal(lane_seal_derive(sec[n], 0, true, key[n]), 0);
		}
	}
	assert_int_equal(nclient, 6);
	assert_int_equal(ndaemon, 6);
	for (int i = 0; i < n; i++) {
		for (int j = i + 1; j < n; j++) {
			assert_memory_not_equal(sec[i], sec[j], LANE_SEAL_SECRET_LEN);
			assert_memory_not_equal(key[i], key[j], LANE_SEAL_KEY_LEN);
		}
	}
	/* The same transfer asked again (both ends agree on it): the same secret. */
	assert_int_equal(lane_seal_export(p.client, new_caps, LANE_SEAL_PUSH, tokens[0], TOKEN_LEN,
					  &nclient, dsec),
			 0);
	assert_memory_equal(dsec, sec[0], LANE_SEAL_SECRET_LEN);
	pair_close(&p);
}

/* Another connection, the same token and kind: another secret (another TLS session). */
static void test_other_connection(void **state)
{
	uint8_t token[TOKEN_LEN], a[LANE_SEAL_SECRET_LEN], b[LANE_SEAL_SECRET_LEN];
	unsigned na = 0, nb = 0;
	struct pair p1, p2;

	token_fill(token, 3);
	pair_open(&p1);
	pair_open(&p2);
	assert_int_equal(
	    lane_seal_export(p1.client, new_caps, LANE_SEAL_PULL, token, TOKEN_LEN, &na, a), 0);
	assert_int_equal(
	    lane_seal_export(p2.client, new_caps, LANE_SEAL_PULL, token, TOKEN_LEN, &nb, b), 0);
	assert_memory_not_equal(a, b, LANE_SEAL_SECRET_LEN);
	pair_close(&p1);
	pair_close(&p2);
}

/*
 * A peer without PROTO_CAP_TRANSFER_KEYS: the v1 secret, the same at both
 * ends, for the first sealed transfer; a second, whatever its token or kind,
 * would get it again and is refused at both ends, its output untouched.
 */
static void test_v1_first_transfer_only(void **state)
{
	uint8_t t1[TOKEN_LEN], t2[TOKEN_LEN], v1[LANE_SEAL_SECRET_LEN];
	uint8_t c[LANE_SEAL_SECRET_LEN], d[LANE_SEAL_SECRET_LEN], again[LANE_SEAL_SECRET_LEN];
	unsigned nclient = 0, ndaemon = 0;
	struct pair p;

	token_fill(t1, 4);
	token_fill(t2, 5);
	pair_open(&p);
	assert_int_equal(tls_export_secret(p.daemon, LANE_SEAL_EXPORT_LABEL, v1, sizeof(v1)), 0);
	assert_int_equal(
	    lane_seal_export(p.client, old_caps, LANE_SEAL_PULL, t1, TOKEN_LEN, &nclient, c), 0);
	assert_int_equal(
	    lane_seal_export(p.daemon, old_caps, LANE_SEAL_PULL, t1, TOKEN_LEN, &ndaemon, d), 0);
	assert_memory_equal(c, d, LANE_SEAL_SECRET_LEN);
	assert_memory_equal(c, v1, LANE_SEAL_SECRET_LEN); /* what an older peer derives */
	assert_int_equal(nclient, 1);

	memset(again, 0xa5, sizeof(again));
	assert_int_equal(
	    lane_seal_export(p.client, old_caps, LANE_SEAL_PULL, t2, TOKEN_LEN, &nclient, again),
	    -EKEYREJECTED);
	assert_int_equal(
	    lane_seal_export(p.daemon, old_caps, LANE_SEAL_BENCH, t2, TOKEN_LEN, &ndaemon, again),
	    -EKEYREJECTED);
	for (size_t i = 0; i < sizeof(again); i++) {
		assert_int_equal(again[i], 0xa5);
	}
	assert_int_equal(nclient, 1);
	assert_int_equal(ndaemon, 1);
	pair_close(&p);
}

/* Where only one end has the capability, both_caps lacks it: v1, once. */
static void test_one_end_without_cap(void **state)
{
	uint8_t token[TOKEN_LEN], c[LANE_SEAL_SECRET_LEN], v1[LANE_SEAL_SECRET_LEN];
	unsigned n = 0;
	struct pair p;

	token_fill(token, 6);
	pair_open(&p);
	assert_int_equal(tls_export_secret(p.client, LANE_SEAL_EXPORT_LABEL, v1, sizeof(v1)), 0);
	assert_int_equal(lane_seal_export(p.client, new_caps & old_caps, LANE_SEAL_PUSH, token,
					  TOKEN_LEN, &n, c),
			 0);
	assert_memory_equal(c, v1, LANE_SEAL_SECRET_LEN);
	assert_int_equal(lane_seal_export(p.client, new_caps & old_caps, LANE_SEAL_PUSH, token,
					  TOKEN_LEN, &n, c),
			 -EKEYREJECTED);
	pair_close(&p);
}

static void test_bad_arguments(void **state)
{
	uint8_t token[TOKEN_LEN], out[LANE_SEAL_SECRET_LEN], big[65] = { 0 };
	unsigned n = 0, full = ~0u;
	struct pair p;

	token_fill(token, 7);
	pair_open(&p);
	assert_int_equal(lane_seal_export(p.client, new_caps, 0, token, TOKEN_LEN, &n, out),
			 -EINVAL);
	assert_int_equal(
	    lane_seal_export(p.client, new_caps, LANE_SEAL_BENCH + 1, token, TOKEN_LEN, &n, out),
	    -EINVAL);
	assert_int_equal(
	    lane_seal_export(p.client, new_caps, LANE_SEAL_PUSH, NULL, TOKEN_LEN, &n, out),
	    -EINVAL);
	assert_int_equal(lane_seal_export(p.client, new_caps, LANE_SEAL_PUSH, token, 0, &n, out),
			 -EINVAL);
	assert_int_equal(
	    lane_seal_export(p.client, new_caps, LANE_SEAL_PUSH, big, sizeof(big), &n, out),
	    -EINVAL);
	assert_int_equal(
	    lane_seal_export(p.client, new_caps, LANE_SEAL_PUSH, token, TOKEN_LEN, &full, out),
	    -EINVAL);
	assert_int_equal(
	    lane_seal_export(NULL, new_caps, LANE_SEAL_PUSH, token, TOKEN_LEN, &n, out), -EINVAL);
	assert_int_equal(n, 0);
	assert_int_equal(tls_export_secret_ctx(NULL, "x", token, 1, out, sizeof(out)), -EINVAL);
	assert_int_equal(tls_export_secret_ctx(p.client, "x", NULL, 1, out, sizeof(out)), -EINVAL);
	pair_close(&p);
}

static int group_setup(void **state)
{
	signal(SIGPIPE, SIG_IGN);
	certdir = tu_mkdtemp();
	return certs_init(certdir, NULL, 0) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	tu_rmtree(certdir);
	free(certdir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_transfer_its_keys),
		cmocka_unit_test(test_other_connection),
		cmocka_unit_test(test_v1_first_transfer_only),
		cmocka_unit_test(test_one_end_without_cap),
		cmocka_unit_test(test_bad_arguments),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
