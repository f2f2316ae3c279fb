/* SPDX-License-Identifier: MIT */
/*
 * Relay tickets (src/relay_ticket.c) with real certificates made by the
 * project's own tooling (src/certs.c): two CAs, clients of each, one
 * expired, one revoked by the CA's CRL. A good ticket checks; every byte
 * changed, a cut, a byte too many, an over-long field, an expired or
 * future ticket, a certificate of another CA, expired or revoked, a
 * signature by another key, the wrong path or flags: each is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include "testutil.h"

#include "certs.h"
#include "relay_ticket.h"
#include "tls.h"
#include "tls_keys.h"

static char *tmpdir, dir_a[512], dir_b[512];

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

static EVP_PKEY *load_key(const char *dir, const char *name)
{
	char path[600];
	FILE *f;
	EVP_PKEY *k;

	snprintf(path, sizeof(path), "%s/%s.key", dir, name);
	f = fopen(path, "r");
	assert_non_null(f);
	k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(k);
	return k;
}

static X509 *load_cert(const char *dir, const char *name)
{
	char path[600];
	FILE *f;
	X509 *c;

	snprintf(path, sizeof(path), "%s/%s.crt", dir, name);
	f = fopen(path, "r");
	assert_non_null(f);
	c = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(c);
	return c;
}

/* A daemon's context of CA dir (with its CRL when crl): its store is what tickets are checked by. */
static struct tls_ctx *daemon_ctx(const char *dir, bool crl)
{
	char crt[600], key[600], ca[600], crlf[600];
	struct tls_config cfg = {
		.server = true, .cert_file = crt, .key_file = key, .ca_file = ca
	};
	struct tls_ctx *ctx = NULL;

	snprintf(crt, sizeof(crt), "%s/server.crt", dir);
	snprintf(key, sizeof(key), "%s/server.key", dir);
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	snprintf(crlf, sizeof(crlf), "%s/crl.pem", dir);
	if (crl) {
		cfg.crl_file = crlf;
	}
	assert_int_equal(tls_ctx_new(&cfg, &ctx), 0);
	return ctx;
}

static void fill_ticket(struct relay_ticket *t, int64_t issued)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->host, sizeof(t->host), "node2.example");
	t->port = 7777;
	snprintf(t->path, sizeof(t->path), "data/in/set");
	t->open_flags = PROTO_OPEN_RECURSIVE | PROTO_OPEN_PRESERVE | PROTO_OPEN_PARTIAL;
	t->issued = issued;
	t->expires = issued + RELAY_TICKET_LIFE;
	assert_int_equal(RAND_bytes(t->nonce, sizeof(t->nonce)), 1);
}

/* A ticket of dir's client NAME, issued at issued. */
static void make(const char *dir, const char *name, int64_t issued, uint8_t **buf, size_t *len)
{
	EVP_PKEY *k = load_key(dir, name);
	X509 *c = load_cert(dir, name);
	struct relay_ticket t;

	fill_ticket(&t, issued);
	assert_int_equal(relay_ticket_make(k, c, &t, buf, len), 0);
	assert_true(*len > 0 && *len <= PROTO_MAX_RELAY_TICKET);
	EVP_PKEY_free(k);
	X509_free(c);
}

static int check(struct tls_ctx *ctx, const uint8_t *buf, size_t len, int64_t now)
{
	struct relay_ticket t;
	char why[256] = "";
	X509 *c = NULL;
	int r = relay_ticket_check(tls_ctx_store(ctx), buf, len, now, &t, &c, why, sizeof(why));

	if (r == 0) {
		assert_non_null(c);
		X509_free(c);
	} else {
		assert_null(c);
		assert_true(why[0] != '\0');
	}
	return r;
}

static int group_setup(void **state)
{
	(void)state;
	tmpdir = tu_mkdtemp();
	snprintf(dir_a, sizeof(dir_a), "%s/a", tmpdir);
	snprintf(dir_b, sizeof(dir_b), "%s/b", tmpdir);
	if (certs_init(dir_a, NULL, 0) != 0 || certs_init(dir_b, NULL, 0) != 0 ||
	    certs_issue_client(dir_a, "old", 1, 10) != 0 ||
	    certs_issue_client(dir_a, "other", 0, 0) != 0 ||
	    certs_issue_client(dir_a, "revoked", 0, 0) != 0) {
		return -1;
	}
	char crt[600];
	snprintf(crt, sizeof(crt), "%s/revoked.crt", dir_a);
	return certs_revoke(dir_a, crt, NULL, 0) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	tu_rmtree(tmpdir);
	free(tmpdir);
	return 0;
}

/* A good ticket checks, gives its fields back and the client's certificate. */
static void good_ticket(void **state)
{
	struct tls_ctx *ctx = daemon_ctx(dir_a, true);
	EVP_PKEY *k = load_key(dir_a, "client");
	X509 *c = load_cert(dir_a, "client"), *got = NULL;
	struct relay_ticket t, back;
	uint8_t *buf = NULL;
	size_t len = 0;
	char why[256];

	(void)state;
	fill_ticket(&t, now_s());
	assert_int_equal(relay_ticket_make(k, c, &t, &buf, &len), 0);
	assert_int_equal(relay_ticket_check(tls_ctx_store(ctx), buf, len, now_s(), &back, &got, why,
					    sizeof(why)),
			 0);
	assert_string_equal(back.host, t.host);
	assert_int_equal(back.port, t.port);
	assert_string_equal(back.path, t.path);
	assert_int_equal(back.open_flags, t.open_flags);
	assert_true(back.issued == t.issued && back.expires == t.expires);
	assert_memory_equal(back.nonce, t.nonce, sizeof(t.nonce));
	assert_int_equal(X509_cmp(got, c), 0);
	/* The path and flags the OPEN may carry. */
	assert_int_equal(
	    relay_ticket_admits_open(&back, "data/in/set", PROTO_OPEN_RECURSIVE, why, sizeof(why)),
	    0);
	assert_int_equal(
	    relay_ticket_admits_open(&back, "data/in/set2", PROTO_OPEN_RECURSIVE, why, sizeof(why)),
	    -EPERM);
	assert_non_null(strstr(why, "data/in/set2"));
	assert_int_equal(relay_ticket_admits_open(&back, "data/in", 0, why, sizeof(why)), -EPERM);
	assert_int_equal(relay_ticket_admits_open(&back, "data/in/set",
						  PROTO_OPEN_RECURSIVE | PROTO_OPEN_DELETE, why,
						  sizeof(why)),
			 -EPERM);
	assert_int_equal(relay_ticket_admits_open(&back, "data/in/set",
						  PROTO_OPEN_SKIP_QUICK | PROTO_OPEN_DELTA, why,
						  sizeof(why)),
			 0);
	X509_free(got);
	free(buf);
	EVP_PKEY_free(k);
	X509_free(c);
	tls_ctx_free(ctx);
}

/* Every byte changed, every cut, a byte too many: refused, and nothing handed back. */
static void tampered_and_truncated(void **state)
{
	struct tls_ctx *ctx = daemon_ctx(dir_a, true);
	uint8_t *buf = NULL, *copy;
	size_t len = 0;
	int64_t now = now_s();

	(void)state;
	make(dir_a, "client", now, &buf, &len);
	copy = malloc(len + 1);
	assert_non_null(copy);
	for (size_t i = 0; i < len; i++) {
		memcpy(copy, buf, len);
		copy[i] ^= 0x01;
		int r = check(ctx, copy, len, now);
		if (r != -EBADMSG && r != -EKEYREJECTED) {
			fail_msg("byte %zu changed: %d", i, r);
		}
	}
	for (size_t cut = 1; cut < len; cut++) {
		assert_int_equal(check(ctx, buf, len - cut, now), -EBADMSG);
	}
	memcpy(copy, buf, len);
	copy[len] = 0;
	assert_int_equal(check(ctx, copy, len + 1, now), -EBADMSG);
	assert_int_equal(check(ctx, buf, len, now), 0);
	free(copy);
	free(buf);
	tls_ctx_free(ctx);
}

/* The ticket's window: 300 s of skew before issued, nothing after expires. */
static void time_window(void **state)
{
	struct tls_ctx *ctx = daemon_ctx(dir_a, true);
	int64_t issued = now_s();
	uint8_t *buf = NULL;
	size_t len = 0;

	(void)state;
	make(dir_a, "client", issued, &buf, &len);
	assert_int_equal(check(ctx, buf, len, issued - RELAY_TICKET_SKEW), 0);
	assert_int_equal(check(ctx, buf, len, issued - RELAY_TICKET_SKEW - 1), -EKEYEXPIRED);
	assert_int_equal(check(ctx, buf, len, issued + RELAY_TICKET_LIFE), 0);
	assert_int_equal(check(ctx, buf, len, issued + RELAY_TICKET_LIFE + 1), -EKEYEXPIRED);
	free(buf);
	tls_ctx_free(ctx);
}

/* Another CA's client, an expired client certificate, a revoked one (with and without the CRL). */
static void certificates(void **state)
{
	struct tls_ctx *ctx = daemon_ctx(dir_a, true), *nocrl = daemon_ctx(dir_a, false);
	int64_t now = now_s();
	uint8_t *buf = NULL;
	size_t len = 0;

	(void)state;
	make(dir_b, "client", now, &buf, &len);
	assert_int_equal(check(ctx, buf, len, now), -EKEYREJECTED);
	free(buf);
	make(dir_a, "old", now, &buf, &len);
	assert_int_equal(check(ctx, buf, len, now), -EKEYREJECTED);
	free(buf);
	make(dir_a, "revoked", now, &buf, &len);
	assert_int_equal(check(ctx, buf, len, now), -EKEYREVOKED);
	assert_int_equal(check(nocrl, buf, len, now), 0);
	free(buf);
	/* The server's certificate is no client's: purpose sslclient. */
	make(dir_a, "server", now, &buf, &len);
	assert_int_equal(check(ctx, buf, len, now), -EKEYREJECTED);
	free(buf);
	tls_ctx_free(ctx);
	tls_ctx_free(nocrl);
}

/* Where the signature starts: every field's length is known from the ticket made. */
static size_t signed_len(const struct relay_ticket *t, X509 *c)
{
	return 8 + 2 + strlen(t->host) + 2 + 2 + strlen(t->path) + 4 + 8 + 8 + 16 + 2 +
	       (size_t)i2d_X509(c, NULL);
}

/* A key that is not the certificate's: make refuses it, and a signature by it does not check. */
static void key_of_another(void **state)
{
	struct tls_ctx *ctx = daemon_ctx(dir_a, true);
	EVP_PKEY *k = load_key(dir_a, "client"), *other = load_key(dir_a, "other");
	X509 *c = load_cert(dir_a, "client");
	uint8_t *buf = NULL, sig[RELAY_TICKET_MAX_SIG];
	struct relay_ticket t;
	size_t len = 0, siglen = sizeof(sig), sl;
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	(void)state;
	fill_ticket(&t, now_s());
	assert_int_equal(relay_ticket_make(other, c, &t, &buf, &len), -EINVAL);
	assert_int_equal(relay_ticket_make(k, c, &t, &buf, &len), 0);
	sl = signed_len(&t, c);
	assert_true(sl + 2 < len);
	assert_int_equal(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, other), 1);
	assert_int_equal(EVP_DigestSign(md, sig, &siglen, buf, sl), 1);
	buf = realloc(buf, sl + 2 + siglen);
	assert_non_null(buf);
	buf[sl] = (uint8_t)(siglen >> 8);
	buf[sl + 1] = (uint8_t)siglen;
	memcpy(buf + sl + 2, sig, siglen);
	assert_int_equal(check(ctx, buf, sl + 2 + siglen, now_s()), -EKEYREJECTED);
	EVP_MD_CTX_free(md);
	free(buf);
	EVP_PKEY_free(k);
	EVP_PKEY_free(other);
	X509_free(c);
	tls_ctx_free(ctx);
}

/* Over-long fields: refused by make, and on the wire (a length past its cap) by check. */
static void over_long_fields(void **state)
{
	struct tls_ctx *ctx = daemon_ctx(dir_a, true);
	EVP_PKEY *k = load_key(dir_a, "client");
	X509 *c = load_cert(dir_a, "client");
	struct relay_ticket t;
	uint8_t *buf = NULL, *big;
	size_t len = 0, at;

	(void)state;
	fill_ticket(&t, now_s());
	memset(t.host, 'h', sizeof(t.host)); /* no NUL within PROTO_MAX_HOST + 1 */
	assert_int_equal(relay_ticket_make(k, c, &t, &buf, &len), -EINVAL);
	fill_ticket(&t, now_s());
	t.expires = t.issued + RELAY_TICKET_LIFE + 1; /* a longer life than tickets have */
	assert_int_equal(relay_ticket_make(k, c, &t, &buf, &len), -EINVAL);
	t.port = 0;
	t.expires = t.issued + 1;
	assert_int_equal(relay_ticket_make(k, c, &t, &buf, &len), -EINVAL);
	fill_ticket(&t, now_s());
	assert_int_equal(relay_ticket_make(k, c, &t, &buf, &len), 0);
	/* The host's length said 256. */
	buf[8] = 0x01;
	buf[9] = 0x00;
	assert_int_equal(check(ctx, buf, len, now_s()), -EBADMSG);
	buf[8] = 0;
	buf[9] = (uint8_t)strlen(t.host);
	/* The certificate's length said 8 KiB + 1. */
	at = signed_len(&t, c) - (size_t)i2d_X509(c, NULL) - 2;
	buf[at] = 0x20;
	buf[at + 1] = 0x01;
	assert_int_equal(check(ctx, buf, len, now_s()), -EBADMSG);
	/* More than a ticket may be. */
	big = calloc(1, PROTO_MAX_RELAY_TICKET + 1);
	assert_non_null(big);
	assert_int_equal(check(ctx, big, PROTO_MAX_RELAY_TICKET + 1, now_s()), -EBADMSG);
	assert_int_equal(check(ctx, big, 0, now_s()), -EBADMSG);
	free(big);
	free(buf);
	EVP_PKEY_free(k);
	X509_free(c);
	tls_ctx_free(ctx);
}

/* The accessors: a client context has its key and certificate, a daemon's its store. */
static void accessors(void **state)
{
	struct tls_ctx *cl = tu_tls_ctx(dir_a, false, "client");
	X509 *c = load_cert(dir_a, "client");

	(void)state;
	assert_non_null(cl);
	assert_non_null(tls_ctx_key(cl));
	assert_int_equal(X509_cmp(tls_ctx_cert(cl), c), 0);
	assert_int_equal(X509_check_private_key(tls_ctx_cert(cl), tls_ctx_key(cl)), 1);
	assert_non_null(tls_ctx_store(cl));
	assert_null(tls_peer_cert(NULL));
	X509_free(c);
	tls_ctx_free(cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(good_ticket),	  cmocka_unit_test(tampered_and_truncated),
		cmocka_unit_test(time_window),	  cmocka_unit_test(certificates),
		cmocka_unit_test(key_of_another), cmocka_unit_test(over_long_fields),
		cmocka_unit_test(accessors),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown) ? 1 : 0;
}
