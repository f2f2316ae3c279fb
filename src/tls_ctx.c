/* SPDX-License-Identifier: MIT */
/*
 * The TLS context (tls.h): TLS 1.3 only, certificate, key and CA loaded and
 * checked with a reason for each failure, and the CAs' revocation lists;
 * certificate fingerprints (parse,
 * format, of a file); and the verify callback that enforces a pin during the
 * handshake.
 */
#include "tls-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>

static pthread_once_t conn_index_once = PTHREAD_ONCE_INIT;
int tls_conn_index = -1;

DEFINE_TRIVIAL_CLEANUP_FUNC(X509 *, X509_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(SSL_CTX *, SSL_CTX_free)

static void conn_index_init(void)
{
	tls_conn_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* ---- fingerprints ---- */

void tls_format_fingerprint(const uint8_t fp[TLS_FINGERPRINT_LEN], char out[65])
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < TLS_FINGERPRINT_LEN; i++) {
		out[2 * i] = hex[fp[i] >> 4];
		out[2 * i + 1] = hex[fp[i] & 0xf];
	}
	out[2 * TLS_FINGERPRINT_LEN] = '\0';
}

static int hex_value(char ch)
{
	if (ch >= '0' && ch <= '9') {
		return ch - '0';
	}
	if (ch >= 'a' && ch <= 'f') {
		return ch - 'a' + 10;
	}
	if (ch >= 'A' && ch <= 'F') {
		return ch - 'A' + 10;
	}
	return -1;
}

/*
 * Either 64 hex digits, or 32 hex pairs separated by single ':' ("ab:cd:..."),
 * optionally after "sha256:". Nothing else.
 */
int tls_parse_fingerprint(const char *text, uint8_t ret_fp[TLS_FINGERPRINT_LEN])
{
	uint8_t fp[TLS_FINGERPRINT_LEN];
	const char *p = text;
	bool colons;
	size_t len;

	if (!text) {
		return -EINVAL;
	}
	if (strncasecmp(p, "sha256:", 7) == 0) {
		p += 7;
	}
	len = strlen(p);
	if (len == 2 * TLS_FINGERPRINT_LEN) {
		colons = false;
	} else if (len == 3 * TLS_FINGERPRINT_LEN - 1) {
		colons = true;
	} else {
		return -EINVAL;
	}
	for (size_t i = 0; i < TLS_FINGERPRINT_LEN; i++) {
		int hi = hex_value(p[0]);
		int lo = hex_value(p[1]);

		if (hi < 0 || lo < 0) {
			return -EINVAL;
		}
		fp[i] = (uint8_t)(hi << 4 | lo);
		p += 2;
		if (colons && i + 1 < TLS_FINGERPRINT_LEN) {
			if (*p != ':') {
				return -EINVAL;
			}
			p++;
		}
	}
	if (*p != '\0') {
		return -EINVAL;
	}
	memcpy(ret_fp, fp, sizeof(fp));
	return 0;
}

int tls_cert_fingerprint(X509 *cert, uint8_t ret_fp[TLS_FINGERPRINT_LEN])
{
	unsigned int n = 0;

	if (X509_digest(cert, EVP_sha256(), ret_fp, &n) != 1 || n != TLS_FINGERPRINT_LEN) {
		return -EIO;
	}
	return 0;
}

int tls_file_fingerprint(const char *cert_file, uint8_t ret_fp[TLS_FINGERPRINT_LEN])
{
	_cleanup_fclose_ FILE *f = NULL;
	_cleanup_(X509_freep) X509 *cert = NULL;

	if (!cert_file) {
		return -EINVAL;
	}
	f = fopen(cert_file, "re");
	if (!f) {
		return negerrno();
	}
	cert = PEM_read_X509(f, NULL, NULL, NULL);
	ERR_clear_error();
	if (!cert) {
		return -EINVAL;
	}
	return tls_cert_fingerprint(cert, ret_fp);
}

/* ---- context ---- */

static int verify_callback(int ok, X509_STORE_CTX *store);

/* Distinguish a missing or unreadable file from one OpenSSL cannot parse. */
static int check_readable(const char *what, const char *path)
{
	int fd;

	if (!path || !*path) {
		last_reason("no %s file configured", what);
		return -EINVAL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int r = negerrno();

		last_reason("cannot open %s file %s: %s", what, path, strerror(-r));
		return r;
	}
	close(fd);
	return 0;
}

static void last_reason_openssl(const char *what, const char *path)
{
	char buf[256] = "unknown error";
	unsigned long e = ERR_peek_last_error();

	if (e) {
		ERR_error_string_n(e, buf, sizeof(buf));
	}
	ERR_clear_error();
	last_reason("cannot load %s file %s: %s", what, path, buf);
}

/* The certificate, key and CA files, each there and readable. */
static int check_config_files(const struct tls_config *cfg)
{
	int r = check_readable("certificate", cfg->cert_file);

	if (r >= 0) {
		r = check_readable("key", cfg->key_file);
	}
	if (r >= 0) {
		r = check_readable("CA", cfg->ca_file);
	}
	return r;
}

/* A context for TLS 1.3 only: no tickets, no resumption, no early data. */
static int new_ssl_ctx(bool server, SSL_CTX **ret_sctx)
{
	_cleanup_(SSL_CTX_freep) SSL_CTX *sctx = NULL;

	ERR_clear_error();
	sctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	if (!sctx) {
		last_reason("SSL_CTX_new failed");
		return -ENOMEM;
	}
	if (!SSL_CTX_set_min_proto_version(sctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(sctx, TLS1_3_VERSION)) {
		last_reason("cannot restrict the context to TLS 1.3");
		return -EINVAL;
	}
	/*
	 * No tickets, no resumption, hence no 0-RTT; an EOF without close_notify
	 * must stay an error (so SSL_OP_IGNORE_UNEXPECTED_EOF stays clear).
	 */
	SSL_CTX_set_options(sctx,
			    SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	SSL_CTX_clear_options(sctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_session_cache_mode(sctx, SSL_SESS_CACHE_OFF);
	if (!SSL_CTX_set_num_tickets(sctx, 0) || !SSL_CTX_set_max_early_data(sctx, 0) ||
	    !SSL_CTX_set_recv_max_early_data(sctx, 0)) {
		last_reason("cannot disable session tickets / early data");
		return -EINVAL;
	}
	SSL_CTX_set_mode(sctx, SSL_MODE_ENABLE_PARTIAL_WRITE);
	*ret_sctx = TAKE_PTR(sctx);
	return 0;
}

/* Is crl signed by a CA of the store, and still current? 0, or -EINVAL with the reason. */
static int check_crl(X509_STORE *store, X509_CRL *crl, const char *path)
{
	STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(store);
	const ASN1_TIME *next = X509_CRL_get0_nextUpdate(crl);
	bool signed_ok = false;

	for (int i = 0; i < sk_X509_OBJECT_num(objs) && !signed_ok; i++) {
		X509 *ca = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objs, i));

		signed_ok =
		    ca && X509_NAME_cmp(X509_get_subject_name(ca), X509_CRL_get_issuer(crl)) == 0 &&
		    X509_CRL_verify(crl, X509_get0_pubkey(ca)) == 1;
	}
	ERR_clear_error();
	if (!signed_ok) {
		last_reason("CRL file %s: not signed by a CA of the 'ca' file", path);
		return -EINVAL;
	}
	if (next && X509_cmp_current_time(next) < 0) {
		last_reason("CRL file %s: past its next update (sign it anew: rdmacp certs revoke)",
			    path);
		return -EINVAL;
	}
	return 0;
}

/* The CAs' revocation lists: every peer certificate is checked against them. */
static int load_crl(SSL_CTX *sctx, const char *path)
{
	X509_STORE *store = SSL_CTX_get_cert_store(sctx);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	int n = 0, r;

	if (!f) {
		r = negerrno();
		last_reason("cannot open CRL file %s: %s", path, strerror(-r));
		return r;
	}
	for (;;) {
		X509_CRL *crl = PEM_read_X509_CRL(f, NULL, NULL, NULL);

		if (!crl) {
			break;
		}
		r = check_crl(store, crl, path);
		if (r >= 0 && X509_STORE_add_crl(store, crl) != 1) {
			last_reason_openssl("CRL", path);
			r = -EINVAL;
		}
		X509_CRL_free(crl);
		if (r < 0) {
			return r;
		}
		n++;
	}
	ERR_clear_error();
	if (n == 0) {
		last_reason("CRL file %s holds no PEM CRL", path);
		return -EINVAL;
	}
	X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
	return 0;
}

/* Our certificate and key, the CA the peer's is verified against, and who must send one. */
static int load_identity(SSL_CTX *sctx, const struct tls_config *cfg)
{
	if (SSL_CTX_use_certificate_chain_file(sctx, cfg->cert_file) != 1) {
		last_reason_openssl("certificate", cfg->cert_file);
		return -EINVAL;
	}
	if (SSL_CTX_use_PrivateKey_file(sctx, cfg->key_file, SSL_FILETYPE_PEM) != 1) {
		last_reason_openssl("key", cfg->key_file);
		return -EINVAL;
	}
	if (SSL_CTX_check_private_key(sctx) != 1) {
		ERR_clear_error();
		last_reason("key %s does not match certificate %s", cfg->key_file, cfg->cert_file);
		return -EINVAL;
	}
	if (SSL_CTX_load_verify_locations(sctx, cfg->ca_file, NULL) != 1) {
		last_reason_openssl("CA", cfg->ca_file);
		return -EINVAL;
	}
	if (cfg->crl_file && *cfg->crl_file) {
		int r = load_crl(sctx, cfg->crl_file);

		if (r < 0) {
			return r;
		}
	}
	SSL_CTX_set_verify(
	    sctx, cfg->server ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER,
	    verify_callback);
	return 0;
}

int tls_ctx_new(const struct tls_config *cfg, struct tls_ctx **ret_ctx)
{
	_cleanup_(SSL_CTX_freep) SSL_CTX *sctx = NULL;
	struct tls_ctx *ctx;
	int r;

	tls_last_error_buf[0] = '\0';
	if (!cfg) {
		last_reason("no TLS configuration");
		return -EINVAL;
	}
	r = check_config_files(cfg);
	if (r < 0) {
		return r;
	}
	pthread_once(&conn_index_once, conn_index_init);
	if (tls_conn_index < 0) {
		last_reason("SSL_get_ex_new_index failed");
		return -ENOMEM;
	}
	r = new_ssl_ctx(cfg->server, &sctx);
	if (r < 0) {
		return r;
	}
	r = load_identity(sctx, cfg);
	if (r < 0) {
		return r;
	}
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		last_reason("out of memory");
		return -ENOMEM;
	}
	ctx->ssl_ctx = TAKE_PTR(sctx);
	ctx->server = cfg->server;
	ctx->have_pin = cfg->have_pin;
	memcpy(ctx->pin, cfg->pin, sizeof(ctx->pin));
	*ret_ctx = ctx;
	return 0;
}

void tls_ctx_free(struct tls_ctx *ctx)
{
	if (!ctx) {
		return;
	}
	SSL_CTX_free(ctx->ssl_ctx);
	OPENSSL_cleanse(ctx->pin, sizeof(ctx->pin));
	free(ctx);
}

/* ---- verification ---- */

static void describe_cert(X509 *cert, char *buf, size_t size)
{
	if (!cert || !X509_NAME_oneline(X509_get_subject_name(cert), buf, (int)size)) {
		snprintf(buf, size, "?");
	}
}

static void describe_issuer(X509 *cert, char *buf, size_t size)
{
	if (!cert || !X509_NAME_oneline(X509_get_issuer_name(cert), buf, (int)size)) {
		snprintf(buf, size, "?");
	}
}

/*
 * Runs inside OpenSSL's chain verification, so a failure here becomes a TLS
 * alert to the peer, not a silent close after the handshake.
 */
static int verify_callback(int ok, X509_STORE_CTX *store)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
	struct tls_conn *c = ssl ? SSL_get_ex_data(ssl, tls_conn_index) : NULL;
	X509 *cert = X509_STORE_CTX_get_current_cert(store);
	int depth = X509_STORE_CTX_get_error_depth(store);
	char subject[256], issuer[256];

	if (!c) {
		return 0;
	}
	if (!ok) {
		int err = X509_STORE_CTX_get_error(store);

		if (!c->verify_failed) {
			describe_cert(cert, subject, sizeof(subject));
			/* The issuer names the CA ("rdmacp CA HOST DATE ID"): which one is wrong. */
			describe_issuer(cert, issuer, sizeof(issuer));
			tls_set_reason(
			    c->verify_reason, sizeof(c->verify_reason),
			    "certificate verify failed: %s (depth %d, subject %s, issuer %s)",
			    X509_verify_cert_error_string(err), depth, subject, issuer);
			c->verify_failed = true;
		}
		/* Let the peer see bad_certificate rather than a generic handshake_failure. */
		if (err == X509_V_ERR_HOSTNAME_MISMATCH || err == X509_V_ERR_IP_ADDRESS_MISMATCH) {
			X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);
		}
		return 0;
	}
	if (depth == 0 && c->have_pin) {
		uint8_t fp[TLS_FINGERPRINT_LEN];
		char got[65], want[65];

		if (tls_cert_fingerprint(cert, fp) < 0 ||
		    CRYPTO_memcmp(fp, c->pin, TLS_FINGERPRINT_LEN) != 0) {
			if (!c->verify_failed) {
				tls_format_fingerprint(fp, got);
				tls_format_fingerprint(c->pin, want);
				tls_set_reason(
				    c->verify_reason, sizeof(c->verify_reason),
				    "certificate pin mismatch: got sha256:%s, expected sha256:%s",
				    got, want);
				c->verify_failed = true;
			}
			X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);
			return 0;
		}
	}
	return 1;
}
