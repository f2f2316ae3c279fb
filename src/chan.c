/* SPDX-License-Identifier: MIT */
/* Control-message channel over TLS (see chan.h). */
#include "chan.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "tls.h"

#define CHAN_OUT_CAP (PROTO_HDR_LEN + PROTO_MAX_PAYLOAD)

int chan_init(struct chan *c, struct tls_conn *tls, int io_timeout_ms)
{
	memset(c, 0, sizeof(*c));
	c->tls = tls;
	c->io_timeout_ms = io_timeout_ms;
	c->out_cap = CHAN_OUT_CAP;
	c->out = malloc(c->out_cap);
	c->in = malloc(PROTO_MAX_PAYLOAD);
	if (!c->out || !c->in) {
		chan_done(c);
		return -ENOMEM;
	}
	return 0;
}

void chan_done(struct chan *c)
{
	free(c->out);
	free(c->in);
	c->out = c->in = NULL;
}

int chan_flush(struct chan *c)
{
	int r;

	if (c->out_len == 0) {
		return 0;
	}
	r = tls_write_full(c->tls, c->out, c->out_len, c->io_timeout_ms);
	c->out_len = 0;
	return r < 0 ? r : 0;
}

int chan_queue(struct chan *c, const struct msg *m)
{
	int n = msg_encode(m, c->out + c->out_len, c->out_cap - c->out_len);

	if (n == -EMSGSIZE && c->out_len > 0) {
		int r = chan_flush(c);
		if (r < 0) {
			return r;
		}
		n = msg_encode(m, c->out, c->out_cap);
	}
	if (n < 0) {
		return n;
	}
	c->out_len += (size_t)n;
	return 0;
}

int chan_send(struct chan *c, const struct msg *m)
{
	int r = chan_queue(c, m);

	return r < 0 ? r : chan_flush(c);
}

int chan_send_error(struct chan *c, uint32_t code, const char *fmt, ...)
{
	struct msg m = { .type = MSG_ERROR };
	va_list ap;

	m.u.error.code = code;
	va_start(ap, fmt);
	vsnprintf(m.u.error.text, sizeof(m.u.error.text), fmt, ap);
	va_end(ap);
	return chan_send(c, &m);
}

bool chan_readable_now(struct chan *c)
{
	struct pollfd p = { .fd = tls_fd(c->tls), .events = POLLIN };

	return tls_pending(c->tls) || poll(&p, 1, 0) > 0;
}

int chan_recv(struct chan *c, struct msg *ret, int timeout_ms)
{
	uint8_t hdr[PROTO_HDR_LEN];
	struct proto_hdr h = { 0 };
	int r;

	c->bad_type = 0;
	r = tls_read_full(c->tls, hdr, 1, timeout_ms);
	if (r == 0) {
		return -EPIPE;
	}
	if (r < 0) {
		return r;
	}
	r = tls_read_full(c->tls, hdr + 1, sizeof(hdr) - 1, c->io_timeout_ms);
	if (r == 0) {
		return -ECONNRESET; /* a frame cut short is never a clean end */
	}
	if (r < 0) {
		return r;
	}
	r = proto_hdr_decode(hdr, &h);
	if (r < 0) {
		c->bad_type = h.type;
		return r;
	}
	if (h.length > 0) {
		r = tls_read_full(c->tls, c->in, h.length, c->io_timeout_ms);
		if (r == 0) {
			return -ECONNRESET;
		}
		if (r < 0) {
			return r;
		}
	}
	c->bad_type = h.type;
	return msg_decode(h.type, c->in, h.length, ret);
}

uint32_t chan_err_code(int r)
{
	switch (r) {
	case -EPROTONOSUPPORT:
		return PERR_VERSION;
	case -ETIMEDOUT:
		return PERR_TIMEOUT;
	default:
		return PERR_PROTOCOL;
	}
}

const char *chan_recv_error(const struct chan *c, int r, char *buf, size_t len)
{
	switch (r) {
	case -ENOMSG:
		snprintf(buf, len, "unknown message type %u", c->bad_type);
		break;
	case -EPROTONOSUPPORT:
		snprintf(buf, len, "unknown protocol version in a frame header");
		break;
	case -ETIMEDOUT:
		snprintf(buf, len, "a message did not arrive in time");
		break;
	case -ECONNRESET:
	case -EPIPE:
		snprintf(buf, len, "connection closed");
		break;
	default:
		if (c->bad_type) {
			snprintf(buf, len, "malformed %s message: %s", proto_type_name(c->bad_type),
				 strerror(-r));
		} else {
			snprintf(buf, len, "malformed message: %s", strerror(-r));
		}
	}
	return buf;
}
