/* SPDX-License-Identifier: MIT */
/*
 * The TLS control channel over real loopback TCP with real certificates from
 * certs_init: mutual authentication, every refusal of SECURITY.md D.26 on both
 * sides, pinning, EOF without close_notify, handshake deadline, fingerprints.
 * The server side runs in a thread; raw OpenSSL plays peers our API refuses to
 * be (TLS 1.2 only, no client certificate).
 */
#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "certs.h"
#include "chan.h"
#include "clock.h"
#include "tls.h"

#define IO_TIMEOUT_MS 5000
#define BULK_LEN      (1024 * 1024)

static char *tmpdir;
static char *dir_a; /* CA "A": server, client, old (expired) */
static char *dir_b; /* CA "B": an unrelated CA with its own client */

/* ---- plumbing ---- */

static char *path_in(const char *dir, const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static struct tls_ctx *make_ctx(bool server, const char *dir, const char *name, const char *ca_dir,
				const uint8_t *pin)
{
	char crt[256], key[256], ca[256];
	struct tls_config cfg = {
		.server = server, .cert_file = crt, .key_file = key, .ca_file = ca
	};
	struct tls_ctx *ctx = NULL;
	int r;

	snprintf(crt, sizeof(crt), "%s/%s.crt", dir, name);
	snprintf(key, sizeof(key), "%s/%s.key", dir, name);
	snprintf(ca, sizeof(ca), "%s/ca.crt", ca_dir);
	if (pin) {
		cfg.have_pin = true;
		memcpy(cfg.pin, pin, TLS_FINGERPRINT_LEN);
	}
	r = tls_ctx_new(&cfg, &ctx);
	if (r < 0) {
		fail_msg("tls_ctx_new: %s (%s)", strerror(-r), tls_last_error());
	}
	return ctx;
}

static void file_fp(const char *dir, const char *name, uint8_t fp[TLS_FINGERPRINT_LEN])
{
	char *p = path_in(dir, name);

	assert_int_equal(tls_file_fingerprint(p, fp), 0);
	free(p);
}

static int listen_tcp(int *ret_port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*ret_port = ntohs(sa.sin_port);
	return fd;
}

static int connect_tcp(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void fill_pattern(uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		buf[i] = (uint8_t)(i * 31 + 7);
	}
}

/* ---- the server thread ---- */

enum srv_mode {
	SRV_ECHO,	  /* read "hello", write "world", close_notify */
	SRV_RAW_CLOSE,	  /* write `partial` bytes, then shut the TCP socket down */
	SRV_NOTIFY_CLOSE, /* write `partial` bytes, then close_notify */
	SRV_READ,	  /* read 5 bytes and record the result */
	SRV_BULK,	  /* read BULK_LEN bytes and check them */
	SRV_RAW_TLS12,	  /* raw OpenSSL server limited to TLS 1.2 */
};

struct server {
	struct tls_ctx *ctx;
	SSL_CTX *raw_ctx;
	enum srv_mode mode;
	size_t partial;
	int lfd;
	pthread_t thread;
	/* results */
	int accept_rc;
	int io_rc;
	int shutdown_rc;
	char error[512];
	char cn[256];
	int export_rc;
	uint8_t exported[32]; /* tls_export_secret right after the handshake */
};

static void *server_main(void *arg)
{
	struct server *s = arg;
	struct tls_conn *c = NULL;
	uint8_t buf[16];
	int fd;

	fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		s->accept_rc = -errno;
		return NULL;
	}
	if (s->mode == SRV_RAW_TLS12) {
		SSL *ssl = SSL_new(s->raw_ctx);

		SSL_set_fd(ssl, fd);
		s->accept_rc = SSL_accept(ssl) == 1 ? 0 : -EPROTO;
		SSL_free(ssl);
		close(fd);
		return NULL;
	}
	s->accept_rc = tls_accept(s->ctx, fd, IO_TIMEOUT_MS, &c);
	if (s->accept_rc < 0) {
		snprintf(s->error, sizeof(s->error), "%s", tls_last_error());
		return NULL;
	}
	snprintf(s->cn, sizeof(s->cn), "%s", tls_peer_cn(c));
	s->export_rc =
	    tls_export_secret(c, "EXPORTER-rdmacp-test", s->exported, sizeof(s->exported));
	switch (s->mode) {
	case SRV_ECHO:
		s->io_rc = tls_read_full(c, buf, 5, IO_TIMEOUT_MS);
		if (s->io_rc == 5 && memcmp(buf, "hello", 5) == 0) {
			s->io_rc = tls_write_full(c, "world", 5, IO_TIMEOUT_MS);
			s->shutdown_rc = tls_shutdown(c, IO_TIMEOUT_MS);
		} else if (s->io_rc >= 0) {
			s->io_rc = -EBADMSG;
		}
		break;
	case SRV_RAW_CLOSE:
		s->io_rc = tls_write_full(c, "0123456789", s->partial, IO_TIMEOUT_MS);
		shutdown(tls_fd(c), SHUT_RDWR);
		break;
	case SRV_NOTIFY_CLOSE:
		s->io_rc = tls_write_full(c, "0123456789", s->partial, IO_TIMEOUT_MS);
		s->shutdown_rc = tls_shutdown(c, 200);
		break;
	case SRV_READ:
		s->io_rc = tls_read_full(c, buf, 5, IO_TIMEOUT_MS);
		break;
	case SRV_BULK: {
		uint8_t *got = malloc(BULK_LEN), *want = malloc(BULK_LEN);

		fill_pattern(want, BULK_LEN);
		s->io_rc = tls_read_full(c, got, BULK_LEN, IO_TIMEOUT_MS);
		if (s->io_rc == BULK_LEN && memcmp(got, want, BULK_LEN) != 0) {
			s->io_rc = -EBADMSG;
		}
		free(got);
		free(want);
		break;
	}
	case SRV_RAW_TLS12:
		break;
	}
	if (s->io_rc < 0) {
		snprintf(s->error, sizeof(s->error), "%s", tls_conn_error(c));
	}
	tls_conn_free(c);
	return NULL;
}

static int server_start(struct server *s, struct tls_ctx *ctx, enum srv_mode mode)
{
	int port;

	s->ctx = ctx;
	s->mode = mode;
	s->lfd = listen_tcp(&port);
	assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
	return port;
}

static void server_join(struct server *s)
{
	assert_int_equal(pthread_join(s->thread, NULL), 0);
	close(s->lfd);
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

static void assert_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle)) {
		fail_msg("'%s' does not mention '%s'", haystack, needle);
	}
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

static void test_ctx_errors(void **state)
{
	char crt[256], key[256], ca[256], junk[256];
	struct tls_config cfg = {
		.server = true, .cert_file = crt, .key_file = key, .ca_file = ca
	};
	struct tls_ctx *ctx = NULL;
	FILE *f;

	snprintf(crt, sizeof(crt), "%s/server.crt", dir_a);
	snprintf(key, sizeof(key), "%s/client.key", dir_a); /* wrong key */
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir_a);
	snprintf(junk, sizeof(junk), "%s/junk.pem", tmpdir);
	f = fopen(junk, "w");
	fputs("not a certificate\n", f);
	fclose(f);

	assert_int_equal(tls_ctx_new(&cfg, &ctx), -EINVAL);
	assert_contains(tls_last_error(), "mismatch");
	snprintf(key, sizeof(key), "%s/server.key", dir_a);
	cfg.ca_file = "/nonexistent/ca.crt";
	assert_int_equal(tls_ctx_new(&cfg, &ctx), -ENOENT);
	assert_contains(tls_last_error(), "/nonexistent/ca.crt");
	cfg.ca_file = junk;
	assert_int_equal(tls_ctx_new(&cfg, &ctx), -EINVAL);
	cfg.ca_file = ca;
	cfg.cert_file = junk;
	assert_int_equal(tls_ctx_new(&cfg, &ctx), -EINVAL);
	cfg.cert_file = NULL;
	assert_int_equal(tls_ctx_new(&cfg, &ctx), -EINVAL);
	assert_null(ctx);
}

static void test_fingerprints(void **state)
{
	static const char hex[] =
	    "00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978";
	static const char *const bad[] = {
		"",
		"sha256:",
		"00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a697",   /* 63 */
		"00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a69780", /* 65 */
		"g0112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978",
		" 00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a697",
		"sha1:00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978",
		"sha256:sha256:00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978",
		"001:12233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978",
		":00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:01:23:45:67:89:ab:cd:ef:0f:1e:2d:"
		"3c:4b:5a:69:7",
		"00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:01:23:45:67:89:ab:cd:ef:0f:1e:2d:"
		"3c:4b:5a:69:78:",
		"00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:01:23:45:67:89:ab:cd:ef:0f:1e:2d:"
		"3c:4b:5a:6978",
	};
	uint8_t fp[TLS_FINGERPRINT_LEN], fp2[TLS_FINGERPRINT_LEN], orig[TLS_FINGERPRINT_LEN];
	char out[65], *p;
	X509 *x;
	FILE *f;
	unsigned int n;

	assert_int_equal(tls_parse_fingerprint(hex, fp), 0);
	assert_int_equal(fp[0], 0x00);
	assert_int_equal(fp[10], 0xaa);
	assert_int_equal(fp[31], 0x78);
	tls_format_fingerprint(fp, out);
	assert_string_equal(out, hex);

	assert_int_equal(tls_parse_fingerprint("SHA256:00112233445566778899AABBCCDDEEFF0123456789"
					       "ABCDEF0F1E2D3C4B5A6978",
					       fp2),
			 0);
	assert_memory_equal(fp, fp2, sizeof(fp));
	memset(fp2, 0, sizeof(fp2));
	assert_int_equal(tls_parse_fingerprint("sha256:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:"
					       "ee:ff:01:23:45:67:89:ab:cd:ef:0f:1e:2d:3c:4b:5a:"
					       "69:78",
					       fp2),
			 0);
	assert_memory_equal(fp, fp2, sizeof(fp));

	memcpy(orig, fp, sizeof(fp));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (tls_parse_fingerprint(bad[i], fp) != -EINVAL) {
			fail_msg("accepted '%s'", bad[i]);
		}
	}
	assert_int_equal(tls_parse_fingerprint(NULL, fp), -EINVAL);
	/* Output untouched on failure. */
	assert_memory_equal(fp, orig, sizeof(fp));

	/* File fingerprint = SHA-256 over the DER. */
	p = path_in(dir_a, "server.crt");
	f = fopen(p, "r");
	x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_int_equal(X509_digest(x, EVP_sha256(), fp, &n), 1);
	X509_free(x);
	assert_int_equal(tls_file_fingerprint(p, fp2), 0);
	assert_memory_equal(fp, fp2, sizeof(fp));
	free(p);
	assert_int_equal(tls_file_fingerprint("/nonexistent.crt", fp2), -ENOENT);
	p = path_in(dir_a, "server.key");
	assert_int_equal(tls_file_fingerprint(p, fp2), -EINVAL);
	free(p);
}

static int group_setup(void **state)
{
	static const char *const hosts[] = { "server.test" };

	signal(SIGPIPE, SIG_IGN);
	tmpdir = tu_mkdtemp();
	dir_a = path_in(tmpdir, "a");
	dir_b = path_in(tmpdir, "b");
	if (certs_init(dir_a, hosts, 1) != 0 || certs_init(dir_b, NULL, 0) != 0 ||
	    certs_issue_client(dir_a, "old", 1, 10) != 0 ||
	    certs_issue_client(dir_a, "pinned-other", 0, 0) != 0) {
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	tu_rmtree(tmpdir);
	free(tmpdir);
	free(dir_a);
	free(dir_b);
	return 0;
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
		cmocka_unit_test(test_eof_without_close_notify),
		cmocka_unit_test(test_bulk_transfer),
		cmocka_unit_test(test_chan_both_flush),
		cmocka_unit_test(test_handshake_deadline),
		cmocka_unit_test(test_ctx_errors),
		cmocka_unit_test(test_fingerprints),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
