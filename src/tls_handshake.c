/* SPDX-License-Identifier: MIT */
/*
 * TLS connections (tls.h): made on a socket, the handshake driven against
 * its deadline, the peer checked after it (version, certificate, pin) and
 * the server's name or IP set for verification; a peer that does not speak
 * TLS at all told apart by its first bytes. tls_connect, tls_accept and
 * tls_conn_free.
 */
#include "tls-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "clock.h"
#include "fdutil.h"
#include "log.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct tls_conn *, tls_conn_free)

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
	if (!c->ssl || !SSL_set_fd(c->ssl, c->fd) || !SSL_set_ex_data(c->ssl, tls_conn_index, c)) {
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
	if (tls_cert_fingerprint(peer, c->peer_fp) < 0) {
		conn_reason(c, "cannot hash the peer certificate");
		return -EIO;
	}
	if (c->have_pin && CRYPTO_memcmp(c->peer_fp, c->pin, TLS_FINGERPRINT_LEN) != 0) {
		char got[65];

		tls_format_fingerprint(c->peer_fp, got);
		conn_reason(c, "certificate pin mismatch: got sha256:%s", got);
		return -EKEYREJECTED;
	}
	tls_cert_cn(peer, c->peer_cn, sizeof(c->peer_cn));
	return 0;
}

static int handshake(struct tls_conn *c, int timeout_ms)
{
	int64_t deadline = tls_deadline_after(timeout_ms);

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
			r = tls_wait_or_fail(c, err, deadline, timeout_ms, "TLS handshake");
			if (r < 0) {
				return r;
			}
			continue;
		}
		r = tls_fail_ssl(c, err, saved, "handshake");
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
		snprintf(tls_last_error_buf, sizeof(tls_last_error_buf), "%s", c->error);
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

	tls_last_error_buf[0] = '\0';
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

	tls_last_error_buf[0] = '\0';
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
