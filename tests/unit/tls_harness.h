/* SPDX-License-Identifier: MIT */
/*
 * What the TLS control-channel tests (test_tls_*.c) share: two CAs made by
 * certs_init in a private temp directory (group_setup), contexts from their
 * files, loopback TCP, and a server thread that plays one end of a connection
 * in a chosen mode, its results kept for the test to check.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "tls.h"

#define IO_TIMEOUT_MS 5000
#define BULK_LEN      (1024 * 1024)

extern char *tmpdir;
extern char *dir_a; /* CA "A": server, client, old (expired) */
extern char *dir_b; /* CA "B": an unrelated CA with its own client */

/* dir/name, allocated. */
char *path_in(const char *dir, const char *name);
/* A context from dir's name.crt and name.key trusting ca_dir's CA, pinned to pin when given. */
struct tls_ctx *make_ctx(bool server, const char *dir, const char *name, const char *ca_dir,
			 const uint8_t *pin);
/* A socket listening on a loopback port of its own, that port in *ret_port. */
int listen_tcp(int *ret_port);
int connect_tcp(int port);
/* The bytes SRV_BULK expects. */
void fill_pattern(uint8_t *buf, size_t len);

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

/* Start the server thread on a fresh listening socket; its port. */
int server_start(struct server *s, struct tls_ctx *ctx, enum srv_mode mode);
void server_join(struct server *s);

void assert_contains(const char *haystack, const char *needle);

/* The two CAs, a client certificate already expired ("old") and another of CA A ("pinned-other"). */
int group_setup(void **state);
int group_teardown(void **state);
