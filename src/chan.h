/* SPDX-License-Identifier: MIT */
/*
 * A message channel over the TLS control connection: frames out through a
 * buffer flushed once per event-loop turn, frames in with header checks,
 * the payload cap checked before the payload is read.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/msg.h"

struct tls_conn;

struct chan {
	struct tls_conn *tls;
	int io_timeout_ms; /* for a frame already started, and for flushes */
	uint8_t *out;
	size_t out_len, out_cap;
	uint8_t *in; /* payload buffer, PROTO_MAX_PAYLOAD */
	/*
	 * Bytes the peer sent while a flush waited for room (the peer may be
	 * waiting for room too): read before the socket, ib_off..ib_len.
	 */
	uint8_t *ib;
	size_t ib_off, ib_len, ib_cap;
	bool ib_closed; /* the peer's close_notify came in meanwhile */
	/* What the last failed chan_recv saw, for the ERROR reply. */
	uint16_t bad_type;
};

int chan_init(struct chan *c, struct tls_conn *tls, int io_timeout_ms);
void chan_done(struct chan *c);

/* Queue a message; flushes first when the buffer would overflow. */
int chan_queue(struct chan *c, const struct msg *m);
/*
 * Write what is queued, within io_timeout_ms. While the socket has no room,
 * what the peer sends is read into the inbox (up to CHAN_INBOX_MAX): two
 * ends that flush at once never wait for each other.
 */
int chan_flush(struct chan *c);
/* Queue + flush. */
int chan_send(struct chan *c, const struct msg *m);
/* Queue + flush an ERROR. */
int chan_send_error(struct chan *c, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True when a frame can be read without waiting for the network. */
bool chan_readable_now(struct chan *c);
/*
 * Receive one message. timeout_ms applies to the wait for the first byte;
 * the rest of the frame must follow within io_timeout_ms. Errors: those of
 * proto_hdr_decode / msg_decode (-EBADMSG, -EMSGSIZE, -ENOMSG,
 * -EPROTONOSUPPORT), -ECONNRESET, -ETIMEDOUT, and -EPIPE for a clean
 * close_notify where a message was expected.
 */
int chan_recv(struct chan *c, struct msg *ret, int timeout_ms);

/* The error code an ERROR reply should carry for a chan_recv failure. */
uint32_t chan_err_code(int r);
/*
 * Why chan_recv failed with r, for an ERROR's text and logs: "unknown message
 * type 99", "malformed FILES message: Bad message", "timed out", ... Into buf.
 */
const char *chan_recv_error(const struct chan *c, int r, char *buf, size_t len);
