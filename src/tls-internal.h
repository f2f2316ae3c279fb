/* SPDX-License-Identifier: MIT */
/*
 * What the tls_*.c files share (see tls.h for the channel): the context and
 * connection structs, the reason buffers and the helpers one file gives
 * another. Not for callers outside src/tls_*.c.
 */
#pragma once

#include "tls.h"
#include "tls_keys.h"

#include <stdarg.h>
#include <stdint.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

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

/* tls_last_error()'s text: the reason of the last failed tls_ctx_new/connect/accept. */
extern __thread char tls_last_error_buf[TLS_REASON_MAX];
/* The SSL ex_data index that leads from an SSL back to its tls_conn (set in tls_ctx_new). */
extern int tls_conn_index;

void _printf_(3, 4) tls_set_reason(char *buf, size_t size, const char *fmt, ...);

#define conn_reason(c, ...) tls_set_reason((c)->error, sizeof((c)->error), __VA_ARGS__)
#define last_reason(...)    tls_set_reason(tls_last_error_buf, sizeof(tls_last_error_buf), __VA_ARGS__)

/* tls_error.c: map a failed SSL_* call (not WANT_READ/WANT_WRITE) to -errno and a reason. */
int tls_fail_ssl(struct tls_conn *c, int ssl_error, int saved_errno, const char *op);
/* tls_io.c: the deadline timeout_ms from now (-1: none), and waiting for the socket by it. */
int64_t tls_deadline_after(int timeout_ms);
int tls_wait_or_fail(struct tls_conn *c, int ssl_error, int64_t deadline, int timeout_ms,
		     const char *op);
