/* SPDX-License-Identifier: MIT */
/* One control connection to a daemon: connect, TLS, HELLO, BYE (daemon_conn.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "chan.h"
#include "client.h"
#include "fit.h"
#include "tls.h"

struct daemon_conn {
	struct client_opts *o;
	const struct remote *rem;
	struct tls_ctx *ctx;
	struct tls_conn *tls;
	struct chan chan;
	bool chan_ok;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	int version;
	struct msg_hello hello; /* the daemon's */
	struct client_fit fit;	/* what open_transfer fitted to the limits */
	bool have_fit;
	/* What open_transfer asked for the lanes (0, or enum proto_encrypt_wish) and why not. */
	uint8_t encrypt_wish;
	const char *clear_why;
};

/* Connect, TLS, HELLO. Returns 0 or an exit code (error already printed). */
int daemon_conn_open(struct daemon_conn *s);
void daemon_conn_close(struct daemon_conn *s, bool clean);
/* The exit code for a daemon's ERROR code. */
int exit_for_perr(uint32_t code);
