/* SPDX-License-Identifier: MIT */
/*
 * The TLS control channel's handshake over real loopback TCP with real
 * certificates from certs_init: mutual authentication, host names and
 * addresses, the exported lane secret, every refusal of SECURITY.md D.26 on
 * both sides (TLS 1.2, no client certificate, another CA, expired, revoked),
 * pinning. Raw OpenSSL plays peers our API refuses to be (tls_harness.c).
 */
#include "testutil.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "certs.h"
#include "tls.h"
#include "tls_harness.h"

static void file_fp(const char *dir, const char *name, uint8_t fp[TLS_FINGERPRINT_LEN])
{
	char *p = path_in(dir, name);

	assert_int_equal(tls_file_fingerprint(p, fp), 0);
	free(p);
}

/* ---- one client/server exchange ---- */

struct outcome {
	int connect_rc; /* tls_connect */
	int io_rc;	/* first failing client I/O, or 5 */
	int eof_rc;	/* read after the exchange: 0 on the server's close_notify */
	int shutdown_rc;
	char error[512]; /* client's reason */
	char cn[256];	 /* server CN seen by the client */
	uint8_t fp[TLS_FINGERPRINT_LEN];
	bool san_ok;
	int export_rc;
	uint8_t exported[32];
	uint8_t exported_other[32]; /* another label */
	struct server srv;
};

static bool san_is_expected(const char *san, void *ud)
{
	int *seen = ud;

	if (strcmp(san, "127.0.0.1") == 0) {
		seen[0] = 1;
	} else if (strcmp(san, "::1") == 0) {
		seen[1] = 1;
	} else if (strcmp(san, "server.test") == 0) {
		seen[2] = 1;
	}
	return false; /* visit them all */
}

/* Server in ECHO mode; the client says hello, reads world, then the close. */
static void exchange(struct tls_ctx *sctx, struct tls_ctx *cctx, const char *host,
		     struct outcome *o)
{
	struct tls_conn *c = NULL;
	uint8_t buf[8];
	int port, seen[3] = { 0 };

	memset(o, 0, sizeof(*o));
	port = server_start(&o->srv, sctx, SRV_ECHO);
	o->connect_rc = tls_connect(cctx, connect_tcp(port), host, IO_TIMEOUT_MS, &c);
	if (o->connect_rc < 0) {
		snprintf(o->error, sizeof(o->error), "%s", tls_last_error());
		server_join(&o->srv);
		return;
	}
	snprintf(o->cn, sizeof(o->cn), "%s", tls_peer_cn(c));
	tls_peer_fingerprint(c, o->fp);
	tls_peer_match_san(c, san_is_expected, seen);
	o->san_ok = seen[0] && seen[1] && seen[2];
	o->export_rc =
	    tls_export_secret(c, "EXPORTER-rdmacp-test", o->exported, sizeof(o->exported));
	if (o->export_rc == 0) {
		o->export_rc = tls_export_secret(c, "EXPORTER-rdmacp-other", o->exported_other,
						 sizeof(o->exported_other));
	}

	/* In TLS 1.3 a rejected client certificate shows up here, on the first read. */
	o->io_rc = tls_write_full(c, "hello", 5, IO_TIMEOUT_MS);
	if (o->io_rc == 5 || o->io_rc == -ECONNRESET) {
		o->io_rc = tls_read_full(c, buf, 5, IO_TIMEOUT_MS);
	}
	if (o->io_rc == 5) {
		if (memcmp(buf, "world", 5) != 0) {
			o->io_rc = -EBADMSG;
		}
		o->eof_rc = tls_read_full(c, buf, 1, IO_TIMEOUT_MS);
		o->shutdown_rc = tls_shutdown(c, IO_TIMEOUT_MS);
	}
	snprintf(o->error, sizeof(o->error), "%s", tls_conn_error(c));
	tls_conn_free(c);
	server_join(&o->srv);
}

/* Refused: the client fails at connect or at its first read with -EKEYREJECTED. */
static void assert_client_rejected(const struct outcome *o)
{
	if (o->connect_rc == 0) {
		assert_int_equal(o->io_rc, -EKEYREJECTED);
	} else {
		assert_int_equal(o->connect_rc, -EKEYREJECTED);
	}
}

/* ---- tests ---- */

static void test_mutual_auth_roundtrip(void **state)
{
	struct tls_ctx *sctx = make_ctx(true, dir_a, "server", dir_a, NULL);
	struct tls_ctx *cctx = make_ctx(false, dir_a, "client", dir_a, NULL);
	uint8_t want[TLS_FINGERPRINT_LEN];
	struct outcome o;

	exchange(sctx, cctx, "localhost", &o);
	assert_int_equal(o.connect_rc, 0);
	assert_int_equal(o.io_rc, 5);
	assert_int_equal(o.eof_rc, 0); /* close_notify at a message boundary */
	assert_int_equal(o.shutdown_rc, 0);
	assert_string_equal(o.cn, "server.test");
	assert_true(o.san_ok);
	file_fp(dir_a, "server.crt", want);
	assert_memory_equal(o.fp, want, TLS_FINGERPRINT_LEN);

	assert_int_equal(o.srv.accept_rc, 0);
	assert_int_equal(o.srv.io_rc, 5);
	assert_int_equal(o.srv.shutdown_rc, 0);
	assert_string_equal(o.srv.cn, "client");

	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

/* The lane secret: both ends of a session agree, another session or label differs. */
static void test_export_secret(void **state)
{
	struct tls_ctx *sctx = make_ctx(true, dir_a, "server", dir_a, NULL);
	struct tls_ctx *cctx = make_ctx(false, dir_a, "client", dir_a, NULL);
	static const uint8_t zero[32];
	struct outcome o1, o2;
	uint8_t buf[8];

	exchange(sctx, cctx, "localhost", &o1);
	exchange(sctx, cctx, "localhost", &o2);
	assert_int_equal(o1.io_rc, 5);
	assert_int_equal(o2.io_rc, 5);
	assert_int_equal(o1.export_rc, 0);
	assert_int_equal(o1.srv.export_rc, 0);
	assert_int_equal(o2.export_rc, 0);
	assert_memory_equal(o1.exported, o1.srv.exported, 32);
	assert_memory_equal(o2.exported, o2.srv.exported, 32);
	assert_memory_not_equal(o1.exported, o2.exported, 32);
	assert_memory_not_equal(o1.exported, o1.exported_other, 32);
	assert_memory_not_equal(o1.exported, zero, 32);
	assert_int_equal(tls_export_secret(NULL, "x", buf, sizeof(buf)), -EINVAL);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

static void test_host_names_and_ips(void **state)
{
	static const char *const good[] = { "server.test", "SERVER.test", "127.0.0.1", "::1",
					    "[::1]" };
	static const char *const bad[] = { "wrong.example", "10.9.8.7", "::2", "test",
					   "xserver.test" };
	struct tls_ctx *sctx = make_ctx(true, dir_a, "server", dir_a, NULL);
	struct tls_ctx *cctx = make_ctx(false, dir_a, "client", dir_a, NULL);
	struct outcome o;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		exchange(sctx, cctx, good[i], &o);
		if (o.connect_rc != 0 || o.io_rc != 5) {
			fail_msg("host %s: connect %d io %d (%s)", good[i], o.connect_rc, o.io_rc,
				 o.error);
		}
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		exchange(sctx, cctx, bad[i], &o);
		if (o.connect_rc != -EKEYREJECTED) {
			fail_msg("host %s: connect %d, want -EKEYREJECTED", bad[i], o.connect_rc);
		}
		assert_contains(o.error, "mismatch");
		/* The server learns why too: our bad_certificate alert. */
		assert_int_equal(o.srv.accept_rc, -EKEYREJECTED);
		assert_contains(o.srv.error, "peer rejected our certificate");
	}
	/* No host and no pin: nothing to check the server against. */
	{
		int port, lfd = listen_tcp(&port);
		struct tls_conn *c = NULL;

		assert_int_equal(tls_connect(cctx, connect_tcp(port), NULL, 100, &c), -EINVAL);
		assert_null(c);
		close(lfd);
	}
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

static SSL_CTX *raw_ctx(bool server, int max_version, bool with_cert)
{
	SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	char *crt = path_in(dir_a, server ? "server.crt" : "client.crt");
	char *key = path_in(dir_a, server ? "server.key" : "client.key");
	char *ca = path_in(dir_a, "ca.crt");

	assert_non_null(ctx);
	assert_true(SSL_CTX_set_max_proto_version(ctx, max_version));
	if (with_cert) {
		assert_int_equal(SSL_CTX_use_certificate_chain_file(ctx, crt), 1);
		assert_int_equal(SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM), 1);
	}
	assert_int_equal(SSL_CTX_load_verify_locations(ctx, ca, NULL), 1);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	free(crt);
	free(key);
	free(ca);
	return ctx;
}

static void test_tls12_refused(void **state)
{
	struct tls_ctx *sctx = make_ctx(true, dir_a, "server", dir_a, NULL);
	struct tls_ctx *cctx = make_ctx(false, dir_a, "client", dir_a, NULL);
	SSL_CTX *raw_client = raw_ctx(false, TLS1_2_VERSION, true);
	struct server srv = { 0 };
	struct tls_conn *c = NULL;
	SSL *ssl;
	int port, fd;

	/* A TLS 1.2 client against our server. */
	port = server_start(&srv, sctx, SRV_ECHO);
	fd = connect_tcp(port);
	ssl = SSL_new(raw_client);
	SSL_set_fd(ssl, fd);
	assert_int_not_equal(SSL_connect(ssl), 1);
	ERR_clear_error();
	SSL_free(ssl);
	close(fd);
	server_join(&srv);
	assert_int_equal(srv.accept_rc, -EPROTO);
	assert_contains(srv.error, "TLS 1.3");

	/* Our client against a TLS 1.2 server. */
	memset(&srv, 0, sizeof(srv));
	srv.raw_ctx = raw_ctx(true, TLS1_2_VERSION, true);
	port = server_start(&srv, NULL, SRV_RAW_TLS12);
	assert_int_equal(tls_connect(cctx, connect_tcp(port), "localhost", IO_TIMEOUT_MS, &c),
			 -EPROTO);
	assert_contains(tls_last_error(), "TLS 1.3");
	server_join(&srv);
	assert_int_not_equal(srv.accept_rc, 0);

	SSL_CTX_free(srv.raw_ctx);
	SSL_CTX_free(raw_client);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

static void test_client_without_certificate(void **state)
{
	struct tls_ctx *sctx = make_ctx(true, dir_a, "server", dir_a, NULL);
	SSL_CTX *raw_client = raw_ctx(false, TLS1_3_VERSION, false);
	struct server srv = { 0 };
	char buf[4];
	SSL *ssl;
	int port, fd, r;
	unsigned long e;

	port = server_start(&srv, sctx, SRV_ECHO);
	fd = connect_tcp(port);
	ssl = SSL_new(raw_client);
	SSL_set_fd(ssl, fd);
	/* TLS 1.3: the client finishes first, then learns of the refusal. */
	r = SSL_connect(ssl);
	if (r == 1) {
		r = SSL_read(ssl, buf, sizeof(buf));
	}
	assert_true(r <= 0);
	e = ERR_peek_error();
	assert_int_equal(ERR_GET_REASON(e), SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED);
	ERR_clear_error();
	SSL_free(ssl);
	close(fd);
	server_join(&srv);
	assert_int_equal(srv.accept_rc, -EKEYREJECTED);
	assert_contains(srv.error, "did not send a certificate");

	SSL_CTX_free(raw_client);
	tls_ctx_free(sctx);
}

static void test_client_from_other_ca(void **state)
{
	struct tls_ctx *sctx = make_ctx(true, dir_a, "server", dir_a, NULL);
	struct tls_ctx *cctx = make_ctx(false, dir_b, "client", dir_a, NULL);
	struct tls_ctx *cctx_b = make_ctx(false, dir_a, "client", dir_b, NULL);
	struct outcome o;

	/* Server refuses a client certificate from CA B. */
	exchange(sctx, cctx, "localhost", &o);
	assert_int_equal(o.srv.accept_rc, -EKEYREJECTED);
	assert_contains(o.srv.error, "unable to get local issuer certificate");
	assert_client_rejected(&o);
	assert_contains(o.error, "unknown ca");

	/* Client trusting only CA B refuses server A. */
	exchange(sctx, cctx_b, "localhost", &o);
	assert_int_equal(o.connect_rc, -EKEYREJECTED);
	/* The server sends its CA along; the client's store does not trust it. */
	assert_contains(o.error, "certificate verify failed: "
				 "self-signed certificate in certificate chain");
	assert_int_equal(o.srv.accept_rc, -EKEYREJECTED);

	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
	tls_ctx_free(cctx_b);
}

static void test_expired_client(void **state)
{
	struct tls_ctx *sctx = make_ctx(true, dir_a, "server", dir_a, NULL);
	struct tls_ctx *cctx = make_ctx(false, dir_a, "old", dir_a, NULL);
	struct outcome o;

	exchange(sctx, cctx, "localhost", &o);
	assert_int_equal(o.srv.accept_rc, -EKEYREJECTED);
	assert_contains(o.srv.error, "expired");
	assert_client_rejected(&o);
	assert_contains(o.error, "expired");

	tls_ctx_free(sctx);
	tls_ctx_free(cctx);
}

/* A server with dir/crl.pem (crl NULL: none): the context, or NULL with *ret_rc. */
static struct tls_ctx *make_crl_ctx(const char *dir, const char *crl, int *ret_rc)
{
	char crt[256], key[256], ca[256];
	struct tls_config cfg = {
		.server = true, .cert_file = crt, .key_file = key, .ca_file = ca, .crl_file = crl
	};
	struct tls_ctx *ctx = NULL;

	snprintf(crt, sizeof(crt), "%s/server.crt", dir);
	snprintf(key, sizeof(key), "%s/server.key", dir);
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	*ret_rc = tls_ctx_new(&cfg, &ctx);
	return ctx;
}

/* Issue 33: a CRL in the server's store refuses the client it lists, and only that one. */
static void test_crl_revoked_client(void **state)
{
	char crt[256], crl[256], other_crl[256];
	struct tls_ctx *sctx, *good, *bad;
	struct outcome o;
	int r;

	snprintf(crt, sizeof(crt), "%s/revoked.crt", dir_a);
	snprintf(crl, sizeof(crl), "%s/crl.pem", dir_a);
	snprintf(other_crl, sizeof(other_crl), "%s/crl.pem", dir_b);
	assert_int_equal(certs_issue_client(dir_a, "revoked", 0, 0), 0);
	assert_int_equal(certs_revoke(dir_a, crt, NULL, 0), 0);
	sctx = make_crl_ctx(dir_a, crl, &r);
	assert_int_equal(r, 0);
	good = make_ctx(false, dir_a, "client", dir_a, NULL);
	bad = make_ctx(false, dir_a, "revoked", dir_a, NULL);

	exchange(sctx, good, "localhost", &o);
	assert_int_equal(o.connect_rc, 0);
	assert_int_equal(o.io_rc, 5);

	exchange(sctx, bad, "localhost", &o);
	assert_int_equal(o.srv.accept_rc, -EKEYREJECTED);
	assert_contains(o.srv.error, "certificate revoked");
	assert_contains(o.srv.error, "CN=revoked");
	/* TLS 1.3: the client learns it at its first read, from the certificate_revoked alert. */
	assert_int_equal(o.connect_rc == 0 ? o.io_rc : o.connect_rc, -EKEYREVOKED);
	assert_contains(o.error, "certificate revoked");
	tls_ctx_free(sctx);

	/* Another CA's list, and a file with no list, are refused at load with the reason. */
	assert_int_equal(
	    certs_revoke(dir_b,
			 "sha256:"
			 "0000000000000000000000000000000000000000000000000000000000000000",
			 NULL, 0),
	    -ENOENT);
	snprintf(crt, sizeof(crt), "%s/client.crt", dir_b);
	assert_int_equal(certs_revoke(dir_b, crt, NULL, 0), 0);
	assert_null(make_crl_ctx(dir_a, other_crl, &r));
	assert_int_equal(r, -EINVAL);
	assert_contains(tls_last_error(), "not signed by a CA");
	assert_null(make_crl_ctx(dir_a, crt, &r));
	assert_int_equal(r, -EINVAL);
	assert_contains(tls_last_error(), "no PEM CRL");
	tls_ctx_free(good);
	tls_ctx_free(bad);
}

static void test_client_pins_server(void **state)
{
	struct tls_ctx *sctx = make_ctx(true, dir_a, "server", dir_a, NULL);
	uint8_t pin[TLS_FINGERPRINT_LEN], wrong[TLS_FINGERPRINT_LEN];
	struct tls_ctx *cctx;
	struct outcome o;

	file_fp(dir_a, "server.crt", pin);
	memcpy(wrong, pin, sizeof(wrong));
	wrong[TLS_FINGERPRINT_LEN - 1] ^= 1;

	/* The right pin stands in for the host name. */
	cctx = make_ctx(false, dir_a, "client", dir_a, pin);
	exchange(sctx, cctx, "wrong.example", &o);
	assert_int_equal(o.connect_rc, 0);
	assert_int_equal(o.io_rc, 5);
	assert_int_equal(o.srv.accept_rc, 0);
	tls_ctx_free(cctx);

	/* A wrong pin refuses even the right host. */
	cctx = make_ctx(false, dir_a, "client", dir_a, wrong);
	exchange(sctx, cctx, "localhost", &o);
	assert_int_equal(o.connect_rc, -EKEYREJECTED);
	assert_contains(o.error, "certificate pin mismatch: got sha256:");
	assert_int_equal(o.srv.accept_rc, -EKEYREJECTED);
	tls_ctx_free(cctx);

	/* A pin does not replace the CA check. */
	cctx = make_ctx(false, dir_a, "client", dir_b, pin);
	exchange(sctx, cctx, "localhost", &o);
	assert_int_equal(o.connect_rc, -EKEYREJECTED);
	assert_contains(o.error, "certificate verify failed: "
				 "self-signed certificate in certificate chain");
	tls_ctx_free(cctx);

	tls_ctx_free(sctx);
}

static void test_server_pins_client(void **state)
{
	struct tls_ctx *cctx = make_ctx(false, dir_a, "client", dir_a, NULL);
	uint8_t pin[TLS_FINGERPRINT_LEN], other[TLS_FINGERPRINT_LEN];
	struct tls_ctx *sctx;
	struct outcome o;

	file_fp(dir_a, "client.crt", pin);
	file_fp(dir_a, "pinned-other.crt", other); /* same CA, different client */

	sctx = make_ctx(true, dir_a, "server", dir_a, pin);
	exchange(sctx, cctx, "localhost", &o);
	assert_int_equal(o.srv.accept_rc, 0);
	assert_int_equal(o.io_rc, 5);
	assert_string_equal(o.srv.cn, "client");
	tls_ctx_free(sctx);

	sctx = make_ctx(true, dir_a, "server", dir_a, other);
	exchange(sctx, cctx, "localhost", &o);
	assert_int_equal(o.srv.accept_rc, -EKEYREJECTED);
	assert_contains(o.srv.error, "certificate pin mismatch: got sha256:");
	assert_client_rejected(&o);
	assert_contains(o.error, "peer rejected our certificate");
	tls_ctx_free(sctx);

	tls_ctx_free(cctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mutual_auth_roundtrip),
		cmocka_unit_test(test_host_names_and_ips),
		cmocka_unit_test(test_export_secret),
		cmocka_unit_test(test_tls12_refused),
		cmocka_unit_test(test_client_without_certificate),
		cmocka_unit_test(test_client_from_other_ca),
		cmocka_unit_test(test_expired_client),
		cmocka_unit_test(test_crl_revoked_client),
		cmocka_unit_test(test_client_pins_server),
		cmocka_unit_test(test_server_pins_client),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
