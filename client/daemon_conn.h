/* SPDX-License-Identifier: MIT */
/* One control connection to a daemon: connect, TLS, HELLO, BYE (daemon_conn.c). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "chan.h"
#include "client.h"
#include "fit.h"
#include "lane_seal.h"
#include "tls.h"

struct fanout;

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
	/* --wait-busy: a busy answer is kept quiet (quiet_busy) and said in busy_why */
	bool quiet_busy;
	bool busy;
	char busy_why[512];
	/* What open_transfer asked for the lanes (0, or enum proto_encrypt_wish) and why not. */
	uint8_t encrypt_wish;
	const char *clear_why;
	/* OPEN asked for the WRITE + SEND verbs path (this host's device needs it). */
	bool write_send;
	/* The data lanes fence slots by memory windows (both ends announced it: mwfence_agreed). */
	bool windows;
	/* Sealed transfers on this connection so far (lane_seal_export counts them). */
	unsigned sealed_transfers;
	/* A fan-out push: MSG_RELAY goes before OPEN (client/fanout.h); NULL: none. */
	const struct fanout *fanout;
};

/* Connect, TLS, HELLO. Returns 0 or an exit code (error already printed). */
int daemon_conn_open(struct daemon_conn *s);
void daemon_conn_close(struct daemon_conn *s, bool clean);
/*
 * A busy answer (s->busy set): said now, or kept quiet for the caller when
 * s->quiet_busy. fmt names what the daemon said.
 */
void daemon_conn_busy(struct daemon_conn *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/*
 * daemon_conn_open, then step (NULL: none), again from the start while the
 * daemon answers busy and --wait-busy has time left (busywait.h); stop: a
 * signal's flag, or NULL. Returns 0 or an exit code (error printed; 10 when
 * stop cut the wait). The connection is open only on success.
 */
int daemon_conn_open_waiting(struct daemon_conn *s, int (*step)(struct daemon_conn *s, void *ud),
			     void *ud, const volatile sig_atomic_t *stop);
/* The exit code for a daemon's ERROR code. */
int exit_for_perr(uint32_t code);

struct xport;
struct engine_params;
/*
 * The transport to ask for (--transport; auto asks the daemon only when an
 * RDMA device is here), and the data lanes to the daemon's OPEN_OK (transfer_open.c).
 * Return 0 or an exit code, the error printed.
 */
int daemon_conn_pick_transport(struct daemon_conn *s, uint8_t *ret);
/*
 * What to ask for the data lanes (s->encrypt_wish, and s->clear_why when
 * clear) from --encrypt / --no-encrypt and the daemon's HELLO, where cap is
 * the capability that lets the request say so (OPEN's, BENCH's); --encrypt
 * asks for tcp when the transport is auto and the daemon cannot seal verbs
 * lanes. Returns 0 or an exit code.
 */
int daemon_conn_encryption_wish(struct daemon_conn *s, uint64_t cap, uint8_t *transport);
/* OPEN_OK's lanes byte against what was asked. Returns 0 or an exit code. */
int daemon_conn_check_lanes(struct daemon_conn *s, const struct msg_open_ok *ok);
/*
 * Connects the data lanes OPEN_OK offers; sealed verbs lanes set ep's slot
 * sealing and its secret, which the caller wipes once the engine has run.
 * purpose: what was asked (OPEN's direction, or BENCH), part of the keys.
 */
int daemon_conn_connect_data(struct daemon_conn *s, const struct msg_open_ok *ok,
			     enum lane_seal_purpose purpose, struct engine_params *ep,
			     struct xport **ret);
