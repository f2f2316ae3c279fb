/* SPDX-License-Identifier: MIT */
/*
 * The TLS control channel (see tls.h): OpenSSL 3, TLS 1.3 only, mutual
 * certificates, optional SHA-256 pinning, non-blocking sockets driven by
 * poll() against deadlines, and one mapping of OpenSSL failures onto -errno
 * with a human-readable reason.
 */
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "clock.h"
#include "fdutil.h"
#include "log.h"
#include "macro.h"

#define TLS_REASON_MAX	512
#define TLS_CN_MAX	256
#define TLS_FIRST_BYTES 64

struct tls_ctx {
	SSL_CTX *ssl_ctx;
	bool server;
	bool have_pin;
	uint8_t pin[TLS_FINGERPRINT_LEN];
};

struct tls_conn {
	SSL *ssl;
	int fd;
	bool have_pin;
	uint8_t pin[TLS_FINGERPRINT_LEN];
	/* A fatal TLS error happened: no more SSL_* calls but free. */
	bool broken;
	/* Set by verify_callback: more precise than OpenSSL's generic message. */
	bool verify_failed;
	char verify_reason[TLS_REASON_MAX];
	uint8_t peer_fp[TLS_FINGERPRINT_LEN];
	char peer_cn[TLS_CN_MAX];
	char error[TLS_REASON_MAX];
	/* The peer's first bytes, kept to tell "not TLS at all" (an sshd) from a TLS failure. */
	unsigned char first[TLS_FIRST_BYTES];
	size_t nfirst;
};

static __thread char last_error[TLS_REASON_MAX];

static pthread_once_t conn_index_once = PTHREAD_ONCE_INIT;
static int conn_index = -1;

DEFINE_TRIVIAL_CLEANUP_FUNC(X509 *, X509_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(SSL_CTX *, SSL_CTX_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct tls_conn *, tls_conn_free)

static void conn_index_init(void)
{
	conn_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

static void _printf_(3, 4) set_reason(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

#define conn_reason(c, ...) set_reason((c)->error, sizeof((c)->error), __VA_ARGS__)
#define last_reason(...)    set_reason(last_error, sizeof(last_error), __VA_ARGS__)

const char *tls_last_error(void)
{
	return last_error;
}

const char *tls_conn_error(struct tls_conn *c)
{
	return c ? c->error : "";
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

static int cert_fingerprint(X509 *cert, uint8_t ret_fp[TLS_FINGERPRINT_LEN])
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
	return cert_fingerprint(cert, ret_fp);
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

int tls_ctx_new(const struct tls_config *cfg, struct tls_ctx **ret_ctx)
{
	_cleanup_(SSL_CTX_freep) SSL_CTX *sctx = NULL;
	struct tls_ctx *ctx;
	int r;

	last_error[0] = '\0';
	if (!cfg) {
		last_reason("no TLS configuration");
		return -EINVAL;
	}
	r = check_readable("certificate", cfg->cert_file);
	if (r >= 0) {
		r = check_readable("key", cfg->key_file);
	}
	if (r >= 0) {
		r = check_readable("CA", cfg->ca_file);
	}
	if (r < 0) {
		return r;
	}
	pthread_once(&conn_index_once, conn_index_init);
	if (conn_index < 0) {
		last_reason("SSL_get_ex_new_index failed");
		return -ENOMEM;
	}

	ERR_clear_error();
	sctx = SSL_CTX_new(cfg->server ? TLS_server_method() : TLS_client_method());
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
	SSL_CTX_set_verify(
	    sctx, cfg->server ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER,
	    verify_callback);

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
	struct tls_conn *c = ssl ? SSL_get_ex_data(ssl, conn_index) : NULL;
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
			set_reason(
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

		if (cert_fingerprint(cert, fp) < 0 ||
		    CRYPTO_memcmp(fp, c->pin, TLS_FINGERPRINT_LEN) != 0) {
			if (!c->verify_failed) {
				tls_format_fingerprint(fp, got);
				tls_format_fingerprint(c->pin, want);
				set_reason(
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

/* ---- error mapping ---- */

enum failure_class {
	FAIL_OTHER,
	FAIL_VERIFY,   /* we rejected the peer's certificate */
	FAIL_NO_CERT,  /* the peer sent none */
	FAIL_REJECTED, /* the peer rejected ours (alert) */
	FAIL_VERSION,  /* not TLS 1.3 */
	FAIL_EOF,      /* EOF without close_notify */
};

static enum failure_class classify_reason(int reason)
{
	switch (reason) {
	case SSL_R_CERTIFICATE_VERIFY_FAILED:
		return FAIL_VERIFY;
	case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
	case SSL_R_NO_CERTIFICATES_RETURNED:
		return FAIL_NO_CERT;
	case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
	case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
	case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
	case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
	case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
	case SSL_R_TLSV1_CERTIFICATE_UNOBTAINABLE:
	case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
		return FAIL_REJECTED;
	case SSL_R_UNSUPPORTED_PROTOCOL:
	case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
	case SSL_R_NO_PROTOCOLS_AVAILABLE:
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_VERSION_TOO_LOW:
	case SSL_R_WRONG_SSL_VERSION:
		return FAIL_VERSION;
	case SSL_R_UNEXPECTED_EOF_WHILE_READING:
		return FAIL_EOF;
	default:
		return FAIL_OTHER;
	}
}

/* Drain OpenSSL's error queue into c->error; return the -errno it means. */
static int fail_from_queue(struct tls_conn *c, const char *op)
{
	enum failure_class cls = FAIL_OTHER;
	unsigned long e, first = 0, hit = 0;
	char buf[256];

	while ((e = ERR_get_error()) != 0) {
		if (!first) {
			first = e;
		}
		if (!hit && ERR_GET_LIB(e) == ERR_LIB_SSL) {
			cls = classify_reason(ERR_GET_REASON(e));
			if (cls != FAIL_OTHER) {
				hit = e;
			}
		}
	}
	switch (cls) {
	case FAIL_VERIFY:
		if (c->verify_failed) {
			conn_reason(c, "%s", c->verify_reason);
		} else {
			conn_reason(c, "certificate verify failed: %s",
				    X509_verify_cert_error_string(SSL_get_verify_result(c->ssl)));
		}
		return -EKEYREJECTED;
	case FAIL_NO_CERT:
		conn_reason(c, "peer did not send a certificate");
		return -EKEYREJECTED;
	case FAIL_REJECTED:
		conn_reason(c, "peer rejected our certificate (%s)", ERR_reason_error_string(hit));
		return -EKEYREJECTED;
	case FAIL_VERSION:
		conn_reason(c, "TLS 1.3 required but the peer does not offer it (%s)",
			    ERR_reason_error_string(hit));
		return -EPROTO;
	case FAIL_EOF:
		conn_reason(c, "peer closed the connection without close_notify during %s", op);
		return -ECONNRESET;
	case FAIL_OTHER:
		break;
	}
	if (first) {
		ERR_error_string_n(first, buf, sizeof(buf));
		conn_reason(c, "TLS error during %s: %s", op, buf);
	} else {
		conn_reason(c, "TLS error during %s", op);
	}
	return -EPROTO;
}

/* Map a failed SSL_* call (not WANT_READ/WANT_WRITE) to -errno and a reason. */
static int fail_ssl(struct tls_conn *c, int ssl_error, int saved_errno, const char *op)
{
	c->broken = true;
	switch (ssl_error) {
	case SSL_ERROR_ZERO_RETURN:
		ERR_clear_error();
		conn_reason(c, "peer sent close_notify during %s", op);
		return -ECONNRESET;
	case SSL_ERROR_SYSCALL:
		if (ERR_peek_error() != 0) {
			return fail_from_queue(c, op);
		}
		if (saved_errno == 0 || saved_errno == EPIPE || saved_errno == ECONNRESET) {
			conn_reason(c, "connection reset by peer during %s", op);
			return -ECONNRESET;
		}
		conn_reason(c, "%s: %s", op, strerror(saved_errno));
		return -saved_errno;
	case SSL_ERROR_SSL:
		return fail_from_queue(c, op);
	default:
		ERR_clear_error();
		conn_reason(c, "unexpected OpenSSL state %d during %s", ssl_error, op);
		return -EPROTO;
	}
}

/* ---- waiting ---- */

/* timeout_ms < 0: no deadline (-1). */
static int64_t deadline_after(int timeout_ms)
{
	return timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
}

static int wait_fd(int fd, int ssl_error, int64_t deadline)
{
	struct pollfd p = {
		.fd = fd,
		.events = ssl_error == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN,
	};

	for (;;) {
		int tmo = -1;
		int r;

		if (deadline >= 0) {
			int64_t left = deadline - now_ms();

			tmo = left <= 0 ? 0 : (int)MIN(left, (int64_t)INT_MAX);
		}
		r = poll(&p, 1, tmo);
		if (r > 0) {
			/* POLLERR/POLLHUP too: the next SSL call reports what happened. */
			return 0;
		}
		if (r == 0) {
			return -ETIMEDOUT;
		}
		if (errno != EINTR) {
			return negerrno();
		}
	}
}

static int wait_or_fail(struct tls_conn *c, int ssl_error, int64_t deadline, int timeout_ms,
			const char *op)
{
	int r = wait_fd(c->fd, ssl_error, deadline);

	if (r == -ETIMEDOUT) {
		conn_reason(c, "%s timed out after %d ms", op, timeout_ms);
	} else if (r < 0) {
		conn_reason(c, "poll during %s: %s", op, strerror(-r));
	}
	return r;
}

/* ---- connections ---- */

/* Copies the first bytes the socket BIO reads into c->first. */
static long record_first_bytes(BIO *bio, int oper, const char *argp, size_t len, int argi,
			       long argl, int ret, size_t *processed)
{
	struct tls_conn *c = (struct tls_conn *)(void *)BIO_get_callback_arg(bio);

	(void)len;
	(void)argi;
	(void)argl;
	if (c && oper == (BIO_CB_READ | BIO_CB_RETURN) && ret > 0 && processed && argp) {
		size_t n = MIN(*processed, sizeof(c->first) - c->nfirst);

		memcpy(c->first + c->nfirst, argp, n);
		c->nfirst += n;
	}
	return oper & BIO_CB_RETURN ? ret : 1;
}

/*
 * Did the peer answer with something that is no TLS record at all (an SSH
 * banner, an HTTP reply)? A TLS record starts with a content type 20..24
 * and a version 3.x, whatever the peer's TLS version.
 */
static bool peer_not_tls(const struct tls_conn *c)
{
	if (c->nfirst == 0) {
		return false;
	}
	if (c->first[0] < 20 || c->first[0] > 24) {
		return true;
	}
	return c->nfirst >= 2 && c->first[1] != 3;
}

/*
 * OpenSSL stopped at the 5 bytes of a record header: read the rest of the
 * peer's first line (what has arrived, or arrives within 200 ms).
 */
static void read_first_line(struct tls_conn *c)
{
	int64_t deadline = now_ms() + 200;

	while (c->nfirst < sizeof(c->first) && !memchr(c->first, '\n', c->nfirst)) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			return;
		}
		n = recv(c->fd, c->first + c->nfirst, sizeof(c->first) - c->nfirst, MSG_DONTWAIT);
		if (n <= 0) {
			return;
		}
		c->nfirst += (size_t)n;
	}
}

/* "the peer does not speak TLS (it sent 'SSH-2.0-OpenSSH_9.2')": its first line, escaped. */
static void reason_not_tls(struct tls_conn *c)
{
	char line[TLS_FIRST_BYTES + 1], esc[4 * sizeof(line)];
	size_t n = 0;

	read_first_line(c);

	while (n < c->nfirst && c->first[n] != '\r' && c->first[n] != '\n' && c->first[n] != 0) {
		line[n] = (char)c->first[n];
		n++;
	}
	line[n] = '\0';
	conn_reason(c, "the peer does not speak TLS (it sent '%s%s')",
		    log_escape(line, esc, sizeof(esc)), n == sizeof(c->first) ? "..." : "");
}

static int conn_new(struct tls_ctx *ctx, int fd, struct tls_conn **ret)
{
	_cleanup_close_ int owned = fd;
	struct tls_conn *c;
	int r;

	if (!ctx || fd < 0) {
		last_reason("invalid arguments");
		return -EINVAL;
	}
	r = fd_set_nonblock(fd, true);
	if (r < 0) {
		last_reason("cannot make the socket non-blocking: %s", strerror(-r));
		return r;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		last_reason("out of memory");
		return -ENOMEM;
	}
	c->fd = TAKE_FD(owned);
	ERR_clear_error();
	c->ssl = SSL_new(ctx->ssl_ctx);
	if (!c->ssl || !SSL_set_fd(c->ssl, c->fd) || !SSL_set_ex_data(c->ssl, conn_index, c)) {
		ERR_clear_error();
		tls_conn_free(c);
		last_reason("cannot create a TLS connection");
		return -ENOMEM;
	}
	BIO_set_callback_arg(SSL_get_rbio(c->ssl), (char *)c);
	BIO_set_callback_ex(SSL_get_rbio(c->ssl), record_first_bytes);
	c->have_pin = ctx->have_pin;
	memcpy(c->pin, ctx->pin, sizeof(c->pin));
	*ret = c;
	return 0;
}

static void extract_peer_cn(struct tls_conn *c, X509 *peer)
{
	X509_NAME *name = X509_get_subject_name(peer);
	int idx = name ? X509_NAME_get_index_by_NID(name, NID_commonName, -1) : -1;
	unsigned char *utf8 = NULL;
	int n;

	c->peer_cn[0] = '\0';
	if (idx < 0) {
		return;
	}
	n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, idx)));
	if (n > 0 && (size_t)n < sizeof(c->peer_cn)) {
		bool clean = true;

		/* No NULs or control characters: callers log and compare this. */
		for (int i = 0; i < n; i++) {
			if (utf8[i] < 0x20 || utf8[i] == 0x7f) {
				clean = false;
			}
		}
		if (clean) {
			memcpy(c->peer_cn, utf8, (size_t)n);
			c->peer_cn[n] = '\0';
		}
	}
	OPENSSL_free(utf8);
}

/* Checks after OpenSSL reports success; each also enforced during the handshake. */
static int check_peer(struct tls_conn *c)
{
	X509 *peer;
	long vr;

	if (SSL_version(c->ssl) != TLS1_3_VERSION) {
		conn_reason(c, "negotiated %s, TLS 1.3 required", SSL_get_version(c->ssl));
		return -EPROTO;
	}
	peer = SSL_get0_peer_certificate(c->ssl);
	if (!peer) {
		conn_reason(c, "peer did not send a certificate");
		return -EKEYREJECTED;
	}
	vr = SSL_get_verify_result(c->ssl);
	if (vr != X509_V_OK) {
		conn_reason(c, "certificate verify failed: %s", X509_verify_cert_error_string(vr));
		return -EKEYREJECTED;
	}
	if (cert_fingerprint(peer, c->peer_fp) < 0) {
		conn_reason(c, "cannot hash the peer certificate");
		return -EIO;
	}
	if (c->have_pin && CRYPTO_memcmp(c->peer_fp, c->pin, TLS_FINGERPRINT_LEN) != 0) {
		char got[65];

		tls_format_fingerprint(c->peer_fp, got);
		conn_reason(c, "certificate pin mismatch: got sha256:%s", got);
		return -EKEYREJECTED;
	}
	extract_peer_cn(c, peer);
	return 0;
}

static int handshake(struct tls_conn *c, int timeout_ms)
{
	int64_t deadline = deadline_after(timeout_ms);

	for (;;) {
		int r, err, saved;

		ERR_clear_error();
		errno = 0;
		r = SSL_do_handshake(c->ssl);
		if (r == 1) {
			break;
		}
		saved = errno;
		err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			r = wait_or_fail(c, err, deadline, timeout_ms, "TLS handshake");
			if (r < 0) {
				return r;
			}
			continue;
		}
		r = fail_ssl(c, err, saved, "handshake");
		if (peer_not_tls(c)) {
			reason_not_tls(c);
			return -EBADMSG;
		}
		return r;
	}
	/* The peer spoke TLS: no need to watch its bytes any more. */
	BIO_set_callback_ex(SSL_get_rbio(c->ssl), NULL);
	return check_peer(c);
}

/*
 * Before closing a connection we failed, read what the peer already sent:
 * closing with unread data makes the kernel send RST, which can overtake the
 * alert that tells the peer why.
 */
static void drain_input(int fd)
{
	char buf[4096];

	for (int i = 0; i < 16; i++) {
		if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0) {
			break;
		}
	}
}

static int handshake_and_hand_over(struct tls_conn *c, int timeout_ms, struct tls_conn **ret)
{
	int r = handshake(c, timeout_ms);

	if (r < 0) {
		snprintf(last_error, sizeof(last_error), "%s", c->error);
		drain_input(c->fd);
		tls_conn_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

static bool is_ip_literal(const char *host)
{
	unsigned char addr[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

static int set_peer_host(struct tls_conn *c, const char *host)
{
	char name[256];
	size_t n;
	bool ip;

	if (!host || !*host) {
		if (c->have_pin) {
			return 0;
		}
		last_reason("no host name to verify the server certificate against");
		return -EINVAL;
	}
	/* "[::1]" as written in URLs. */
	n = strlen(host);
	if (host[0] == '[' && n >= 2 && host[n - 1] == ']') {
		host++;
		n -= 2;
	}
	if (n >= sizeof(name)) {
		last_reason("host name too long");
		return -EINVAL;
	}
	memcpy(name, host, n);
	name[n] = '\0';
	ip = is_ip_literal(name);

	ERR_clear_error();
	if (!ip && SSL_set_tlsext_host_name(c->ssl, name) != 1) {
		ERR_clear_error();
		last_reason("invalid host name for SNI");
		return -EINVAL;
	}
	/* A pin is a stronger statement about the peer than its name. */
	if (c->have_pin) {
		return 0;
	}
	if (ip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), name) != 1) {
			ERR_clear_error();
			last_reason("cannot set IP address %s for verification", name);
			return -EINVAL;
		}
	} else {
		SSL_set_hostflags(c->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		if (SSL_set1_host(c->ssl, name) != 1) {
			ERR_clear_error();
			last_reason("cannot set host name %s for verification", name);
			return -EINVAL;
		}
	}
	return 0;
}

int tls_connect(struct tls_ctx *ctx, int fd, const char *host, int timeout_ms,
		struct tls_conn **ret_conn)
{
	_cleanup_(tls_conn_freep) struct tls_conn *c = NULL;
	int r;

	last_error[0] = '\0';
	if (ctx && ctx->server) {
		if (fd >= 0) {
			close(fd);
		}
		last_reason("tls_connect on a server context");
		return -EINVAL;
	}
	r = conn_new(ctx, fd, &c);
	if (r < 0) {
		return r;
	}
	r = set_peer_host(c, host);
	if (r < 0) {
		return r;
	}
	SSL_set_connect_state(c->ssl);
	return handshake_and_hand_over(TAKE_PTR(c), timeout_ms, ret_conn);
}

int tls_accept(struct tls_ctx *ctx, int fd, int timeout_ms, struct tls_conn **ret_conn)
{
	struct tls_conn *c = NULL;
	int r;

	last_error[0] = '\0';
	if (ctx && !ctx->server) {
		if (fd >= 0) {
			close(fd);
		}
		last_reason("tls_accept on a client context");
		return -EINVAL;
	}
	r = conn_new(ctx, fd, &c);
	if (r < 0) {
		return r;
	}
	SSL_set_accept_state(c->ssl);
	return handshake_and_hand_over(c, timeout_ms, ret_conn);
}

int tls_read_full(struct tls_conn *c, void *buf, size_t len, int timeout_ms)
{
	int64_t deadline = deadline_after(timeout_ms);
	size_t got = 0;

	if (len > INT_MAX) {
		return -EINVAL;
	}
	if (c->broken) {
		return -EPIPE;
	}
	while (got < len) {
		size_t n = 0;
		int r, err, saved;

		ERR_clear_error();
		errno = 0;
		r = SSL_read_ex(c->ssl, (char *)buf + got, len - got, &n);
		if (r == 1) {
			got += n;
			continue;
		}
		saved = errno;
		err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			r = wait_or_fail(c, err, deadline, timeout_ms, "read");
			if (r < 0) {
				return r;
			}
			continue;
		}
		if (err == SSL_ERROR_ZERO_RETURN) {
			ERR_clear_error();
			if (got == 0) {
				conn_reason(c, "peer closed the connection");
				return 0;
			}
			c->broken = true;
			conn_reason(c, "peer sent close_notify in the middle of a message");
			return -ECONNRESET;
		}
		return fail_ssl(c, err, saved, "read");
	}
	return (int)len;
}

int tls_write_full(struct tls_conn *c, const void *buf, size_t len, int timeout_ms)
{
	int64_t deadline = deadline_after(timeout_ms);
	size_t done = 0;

	if (len > INT_MAX) {
		return -EINVAL;
	}
	if (c->broken) {
		return -EPIPE;
	}
	while (done < len) {
		size_t n = 0;
		int r, err, saved;

		ERR_clear_error();
		errno = 0;
		r = SSL_write_ex(c->ssl, (const char *)buf + done, len - done, &n);
		if (r == 1) {
			done += n;
			continue;
		}
		saved = errno;
		err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			r = wait_or_fail(c, err, deadline, timeout_ms, "write");
			if (r < 0) {
				return r;
			}
			continue;
		}
		return fail_ssl(c, err, saved, "write");
	}
	return (int)len;
}

ssize_t tls_write_some(struct tls_conn *c, const void *buf, size_t len)
{
	size_t n = 0;
	int r, err, saved;

	if (c->broken) {
		return -EPIPE;
	}
	ERR_clear_error();
	errno = 0;
	r = SSL_write_ex(c->ssl, buf, len, &n);
	if (r == 1) {
		return (ssize_t)n;
	}
	saved = errno;
	err = SSL_get_error(c->ssl, r);
	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
		return -EAGAIN;
	}
	return fail_ssl(c, err, saved, "write");
}

ssize_t tls_read_some(struct tls_conn *c, void *buf, size_t len)
{
	size_t n = 0;
	int r, err, saved;

	if (c->broken) {
		return -EPIPE;
	}
	ERR_clear_error();
	errno = 0;
	r = SSL_read_ex(c->ssl, buf, len, &n);
	if (r == 1) {
		return (ssize_t)n;
	}
	saved = errno;
	err = SSL_get_error(c->ssl, r);
	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
		return -EAGAIN;
	}
	if (err == SSL_ERROR_ZERO_RETURN) {
		ERR_clear_error();
		return 0;
	}
	return fail_ssl(c, err, saved, "read");
}

bool tls_pending(struct tls_conn *c)
{
	return SSL_pending(c->ssl) > 0 || SSL_has_pending(c->ssl);
}

int tls_fd(struct tls_conn *c)
{
	return c->fd;
}

/* Our close_notify, on its way by the deadline. 1: the peer's is in already. */
static int send_close_notify(struct tls_conn *c, int64_t deadline, int timeout_ms)
{
	if (c->broken) {
		return -EPIPE;
	}
	for (;;) {
		int r, err, saved;

		ERR_clear_error();
		errno = 0;
		r = SSL_shutdown(c->ssl);
		if (r == 1) {
			return 1; /* both close_notify exchanged */
		}
		if (r == 0) {
			return 0; /* ours sent */
		}
		saved = errno;
		err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			r = wait_or_fail(c, err, deadline, timeout_ms, "shutdown");
			if (r < 0) {
				return r;
			}
			continue;
		}
		return fail_ssl(c, err, saved, "shutdown");
	}
}

int tls_close_notify(struct tls_conn *c, int timeout_ms)
{
	int r = send_close_notify(c, deadline_after(timeout_ms), timeout_ms);

	return MIN(r, 0);
}

int tls_shutdown(struct tls_conn *c, int timeout_ms)
{
	int64_t deadline = deadline_after(timeout_ms);
	char scratch[4096];
	int s = send_close_notify(c, deadline, timeout_ms);

	if (s != 0) {
		return MIN(s, 0);
	}
	/* Wait for the peer's close_notify, discarding anything it still sends. */
	for (;;) {
		size_t n = 0;
		int r, err, saved;

		ERR_clear_error();
		errno = 0;
		r = SSL_read_ex(c->ssl, scratch, sizeof(scratch), &n);
		if (r == 1) {
			continue;
		}
		saved = errno;
		err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_ZERO_RETURN) {
			ERR_clear_error();
			return 0;
		}
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			r = wait_or_fail(c, err, deadline, timeout_ms, "shutdown");
			if (r < 0) {
				return r;
			}
			continue;
		}
		return fail_ssl(c, err, saved, "shutdown");
	}
}

void tls_conn_free(struct tls_conn *c)
{
	if (!c) {
		return;
	}
	SSL_free(c->ssl);
	if (c->fd >= 0) {
		close(c->fd);
	}
	OPENSSL_cleanse(c->pin, sizeof(c->pin));
	free(c);
}

/* ---- peer identity ---- */

const char *tls_peer_cn(struct tls_conn *c)
{
	return c ? c->peer_cn : "";
}

void tls_peer_fingerprint(struct tls_conn *c, uint8_t ret_fp[TLS_FINGERPRINT_LEN])
{
	memcpy(ret_fp, c->peer_fp, TLS_FINGERPRINT_LEN);
}

int tls_export_secret(struct tls_conn *c, const char *label, uint8_t *out, size_t len)
{
	if (!c || !c->ssl || c->broken || !label || !out || len == 0) {
		return -EINVAL;
	}
	/* RFC 8446 7.5: both ends of this session get the same bytes, nobody else can. */
	if (SSL_export_keying_material(c->ssl, out, len, label, strlen(label), NULL, 0, 0) != 1) {
		return -EIO;
	}
	return 0;
}

int tls_export_secret_ctx(struct tls_conn *c, const char *label, const uint8_t *context,
			  size_t contextlen, uint8_t *out, size_t len)
{
	if (!c || !c->ssl || c->broken || !label || !out || len == 0 ||
	    (!context && contextlen > 0)) {
		return -EINVAL;
	}
	/* use_context = 1: the context is part of the derivation, even when empty. */
	if (SSL_export_keying_material(c->ssl, out, len, label, strlen(label), context, contextlen,
				       1) != 1) {
		return -EIO;
	}
	return 0;
}

static bool san_text(const GENERAL_NAME *gn, char *out, size_t size)
{
	if (gn->type == GEN_DNS) {
		const ASN1_IA5STRING *s = gn->d.dNSName;
		int n = ASN1_STRING_length(s);
		const unsigned char *d = ASN1_STRING_get0_data(s);

		if (n <= 0 || (size_t)n >= size || memchr(d, '\0', (size_t)n)) {
			return false;
		}
		memcpy(out, d, (size_t)n);
		out[n] = '\0';
		return true;
	}
	if (gn->type == GEN_IPADD) {
		const ASN1_OCTET_STRING *s = gn->d.iPAddress;
		int n = ASN1_STRING_length(s);
		const unsigned char *d = ASN1_STRING_get0_data(s);

		if (n == 4) {
			return inet_ntop(AF_INET, d, out, (socklen_t)size) != NULL;
		}
		if (n == 16) {
			return inet_ntop(AF_INET6, d, out, (socklen_t)size) != NULL;
		}
	}
	return false;
}

bool tls_peer_match_san(struct tls_conn *c, bool (*fn)(const char *san, void *ud), void *ud)
{
	X509 *peer = c ? SSL_get0_peer_certificate(c->ssl) : NULL;
	GENERAL_NAMES *names;
	bool matched = false;

	if (!peer) {
		return false;
	}
	names = X509_get_ext_d2i(peer, NID_subject_alt_name, NULL, NULL);
	if (!names) {
		ERR_clear_error();
		return false;
	}
	for (int i = 0; i < sk_GENERAL_NAME_num(names) && !matched; i++) {
		char text[256];

		if (san_text(sk_GENERAL_NAME_value(names, i), text, sizeof(text))) {
			matched = fn(text, ud);
		}
	}
	GENERAL_NAMES_free(names);
	return matched;
}
