/* SPDX-License-Identifier: MIT */
/* Control-message channel over TLS (see chan.h). */
#include "chan.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "macro.h"
#include "tls.h"

#define CHAN_OUT_CAP (PROTO_HDR_LEN + PROTO_MAX_PAYLOAD)
/* The inbox grows by at least this much, up to CHAN_INBOX_MAX; then the flush just waits. */
#define CHAN_INBOX_STEP (64 * 1024)
#define CHAN_INBOX_MAX	(16 * 1024 * 1024)

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
	free(c->ib);
	c->out = c->in = c->ib = NULL;
	c->ib_off = c->ib_len = c->ib_cap = 0;
}

/* Room for CHAN_INBOX_STEP more bytes in the inbox: 0, 1 when it is full, -ENOMEM. */
static int inbox_room(struct chan *c)
{
	size_t cap;
	uint8_t *p;

	if (c->ib_off > 0) {
		memmove(c->ib, c->ib + c->ib_off, c->ib_len - c->ib_off);
		c->ib_len -= c->ib_off;
		c->ib_off = 0;
	}
	if (c->ib_cap - c->ib_len >= CHAN_INBOX_STEP) {
		return 0;
	}
	if (c->ib_cap >= CHAN_INBOX_MAX) {
		return 1;
	}
	cap = MIN(MAX(2 * c->ib_cap, 4 * (size_t)CHAN_INBOX_STEP), (size_t)CHAN_INBOX_MAX);
	p = realloc(c->ib, cap);
	if (!p) {
		return -ENOMEM;
	}
	c->ib = p;
	c->ib_cap = cap;
	return 0;
}

/* Read what the peer has sent into the inbox, without waiting. *more: worth polling for. */
static int inbox_take(struct chan *c, bool *more)
{
	*more = false;
	while (!c->ib_closed) {
		ssize_t n;
		int r = inbox_room(c);

		if (r != 0) {
			return r < 0 ? r : 0;
		}
		n = tls_read_some(c->tls, c->ib + c->ib_len, c->ib_cap - c->ib_len);
		if (n == -EAGAIN) {
			*more = true;
			return 0;
		}
		if (n == 0) {
			c->ib_closed = true; /* chan_recv finds it after the inbox */
			return 0;
		}
		if (n < 0) {
			return (int)n;
		}
		c->ib_len += (size_t)n;
	}
	return 0;
}

int chan_flush(struct chan *c)
{
	int64_t deadline = c->io_timeout_ms < 0 ? -1 : now_ms() + c->io_timeout_ms;
	size_t done = 0;
	int r = 0;

	while (done < c->out_len) {
		ssize_t n = tls_write_some(c->tls, c->out + done, c->out_len - done);
		struct pollfd p = { .fd = tls_fd(c->tls), .events = POLLOUT };
		bool more;

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n != -EAGAIN) {
			r = (int)n;
			break;
		}
		/* The peer may be waiting for room as well: take what it sent. */
		r = inbox_take(c, &more);
		if (r < 0) {
			break;
		}
		if (more) {
			p.events |= POLLIN;
		}
		if (deadline >= 0 && remaining_ms(deadline) == 0) {
			r = -ETIMEDOUT;
			break;
		}
		if (poll(&p, 1, deadline < 0 ? -1 : remaining_ms(deadline)) < 0 && errno != EINTR) {
			r = negerrno();
			break;
		}
	}
	c->out_len = 0;
	return r;
}

/* Like tls_read_full, the inbox first. */
static int chan_read_full(struct chan *c, uint8_t *buf, size_t len, int timeout_ms)
{
	size_t have = MIN(len, c->ib_len - c->ib_off);
	int r;

	if (have > 0) {
		memcpy(buf, c->ib + c->ib_off, have);
		c->ib_off += have;
		if (c->ib_off == c->ib_len) {
			c->ib_off = c->ib_len = 0;
		}
		if (have == len) {
			return (int)len;
		}
	}
	r = tls_read_full(c->tls, buf + have, len - have, timeout_ms);
	return r <= 0 ? r : (int)len;
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

	return c->ib_len > c->ib_off || tls_pending(c->tls) || poll(&p, 1, 0) > 0;
}

int chan_recv(struct chan *c, struct msg *ret, int timeout_ms)
{
	uint8_t hdr[PROTO_HDR_LEN];
	struct proto_hdr h = { 0 };
	int r;

	c->bad_type = 0;
	r = chan_read_full(c, hdr, 1, timeout_ms);
	if (r == 0) {
		return -EPIPE;
	}
	if (r < 0) {
		return r;
	}
	r = chan_read_full(c, hdr + 1, sizeof(hdr) - 1, c->io_timeout_ms);
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
		r = chan_read_full(c, c->in, h.length, c->io_timeout_ms);
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
