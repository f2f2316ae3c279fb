/* SPDX-License-Identifier: MIT */
/*
 * The control channel: TLS 1.3 only (OpenSSL 3), mutual certificates, no
 * 0-RTT, no session tickets. The server demands a client certificate signed
 * by its CA; the client verifies the server's certificate against its CA and
 * the host name or IP it dialled. Either side may additionally pin the peer's
 * certificate by SHA-256 (a pin replaces the host-name check, not the CA check).
 *
 * Sockets are made non-blocking; every call takes a timeout and waits with
 * poll(). EOF without close_notify is -ECONNRESET, never a clean end.
 *
 * Error mapping (what callers turn into exit codes):
 *   -EKEYREJECTED  certificate verification failed (ours rejected by the peer,
 *                  or theirs by us: unknown CA, expired, host mismatch, pin)
 *   -EKEYREVOKED   the peer says our certificate is revoked (its CRL lists it)
 *   -EPROTO        TLS protocol failure (e.g. peer offers only TLS <= 1.2)
 *   -ETIMEDOUT     handshake deadline or I/O timeout passed
 *   -ECONNRESET    peer closed without close_notify / connection reset
 *   -EBADMSG       the peer does not speak TLS at all: its first bytes are no
 *                  TLS record (an sshd, an HTTP server); the reason quotes them
 *   -ENOENT/-EACCES/-EINVAL  loading certificate, key or CA files
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TLS_FINGERPRINT_LEN 32

struct tls_config {
	bool server;
	const char *cert_file; /* PEM certificate (chain) */
	const char *key_file;  /* PEM private key */
	const char *ca_file;   /* PEM CA bundle used to verify the peer */
	/*
	 * Optional: PEM CRLs, one for each CA of ca_file, each checked at load
	 * (signed by its CA, not past its next update); a peer certificate they
	 * list fails the handshake (certificate_revoked).
	 */
	const char *crl_file;
	/* Optional pin: SHA-256 of the peer certificate's DER. */
	bool have_pin;
	uint8_t pin[TLS_FINGERPRINT_LEN];
};

struct tls_ctx;
struct tls_conn;

int tls_ctx_new(const struct tls_config *cfg, struct tls_ctx **ret_ctx);
void tls_ctx_free(struct tls_ctx *ctx);

/* Take ownership of fd (closed by tls_conn_free). host: name or IP literal. */
int tls_connect(struct tls_ctx *ctx, int fd, const char *host, int timeout_ms,
		struct tls_conn **ret_conn);
int tls_accept(struct tls_ctx *ctx, int fd, int timeout_ms, struct tls_conn **ret_conn);

/*
 * Read exactly len bytes. Returns len, 0 on a clean close_notify before the
 * first byte, -ECONNRESET on EOF without close_notify or mid-buffer EOF.
 * timeout_ms < 0 waits forever.
 */
int tls_read_full(struct tls_conn *c, void *buf, size_t len, int timeout_ms);
int tls_write_full(struct tls_conn *c, const void *buf, size_t len, int timeout_ms);
/*
 * One try each, never waiting: the bytes moved (> 0), -EAGAIN when the
 * socket has no room (write) or nothing ready (read), or a failure as above;
 * tls_read_some returns 0 at the peer's close_notify. A write that returned
 * -EAGAIN is tried again with the same bytes; reads may come in between.
 */
ssize_t tls_write_some(struct tls_conn *c, const void *buf, size_t len);
ssize_t tls_read_some(struct tls_conn *c, void *buf, size_t len);
/* Bytes already decrypted and buffered (poll() on the fd would miss them). */
bool tls_pending(struct tls_conn *c);
int tls_fd(struct tls_conn *c);
/* Send close_notify (and wait briefly for the peer's). */
int tls_shutdown(struct tls_conn *c, int timeout_ms);
/*
 * Send close_notify only, for a side that has nothing more to hear: RFC 8446
 * 6.1 does not require the one that closes first to wait for the peer's.
 */
int tls_close_notify(struct tls_conn *c, int timeout_ms);
void tls_conn_free(struct tls_conn *c);

/* Peer identity after the handshake. */
const char *tls_peer_cn(struct tls_conn *c); /* subject CN, or "" */
/* Calls fn for each DNS/IP SAN of the peer (as text); stops when fn returns true. */
bool tls_peer_match_san(struct tls_conn *c, bool (*fn)(const char *san, void *ud), void *ud);
void tls_peer_fingerprint(struct tls_conn *c, uint8_t ret_fp[TLS_FINGERPRINT_LEN]);
/*
 * len bytes of keying material for label (RFC 8446 7.5, empty context): the
 * same at both ends of this connection, different for every other session.
 */
int tls_export_secret(struct tls_conn *c, const char *label, uint8_t *out, size_t len);
/*
 * The same with a context (RFC 8446 7.5): another context, other bytes, so
 * one session can give each use of a label its own secret.
 */
int tls_export_secret_ctx(struct tls_conn *c, const char *label, const uint8_t *context,
			  size_t contextlen, uint8_t *out, size_t len);
/* The last failure's reason (verify error string, alert, OpenSSL error), never NULL. */
const char *tls_conn_error(struct tls_conn *c);
/* Reason for a failed tls_connect/tls_accept (thread-local, overwritten per call). */
const char *tls_last_error(void);

/* "ab12..." (64 hex, optional "sha256:" prefix, optional ':' separators). */
int tls_parse_fingerprint(const char *text, uint8_t ret_fp[TLS_FINGERPRINT_LEN]);
void tls_format_fingerprint(const uint8_t fp[TLS_FINGERPRINT_LEN], char out[65]);
/* Fingerprint of a PEM certificate file. */
int tls_file_fingerprint(const char *cert_file, uint8_t ret_fp[TLS_FINGERPRINT_LEN]);
