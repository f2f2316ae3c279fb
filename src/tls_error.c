/* SPDX-License-Identifier: MIT */
/*
 * TLS failures as -errno with a human-readable reason (tls.h's error
 * mapping): OpenSSL's error queue and SSL_get_error() classified once, for
 * the handshake and for record I/O alike; and the reason buffers.
 */
#include "tls-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>

__thread char tls_last_error_buf[TLS_REASON_MAX];

void tls_set_reason(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

const char *tls_last_error(void)
{
	return tls_last_error_buf;
}

const char *tls_conn_error(struct tls_conn *c)
{
	return c ? c->error : "";
}

/* ---- error mapping ---- */

enum failure_class {
	FAIL_OTHER,
	FAIL_VERIFY,   /* we rejected the peer's certificate */
	FAIL_NO_CERT,  /* the peer sent none */
	FAIL_REJECTED, /* the peer rejected ours (alert) */
	FAIL_REVOKED,  /* the peer's CRL lists ours (alert) */
	FAIL_VERSION,  /* not TLS 1.3 */
	FAIL_EOF,      /* EOF without close_notify */
};

static enum failure_class classify_reason(int reason)
{
	switch (reason) {
	case SSL_R_CERTIFICATE_VERIFY_FAILED:
		return FAIL_VERIFY;
	case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
		return FAIL_REVOKED;
	case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
	case SSL_R_NO_CERTIFICATES_RETURNED:
		return FAIL_NO_CERT;
	case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
	case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
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
	case FAIL_REVOKED:
		conn_reason(
		    c, "peer rejected our certificate: certificate revoked (its CRL lists it)");
		return -EKEYREVOKED;
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
int tls_fail_ssl(struct tls_conn *c, int ssl_error, int saved_errno, const char *op)
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
