/* SPDX-License-Identifier: MIT */
/*
 * rawpeer's data path (completions, posts), its control channel (messages
 * in and out, PINGs answered) and its connection.
 */
#include "rawpeer.h"

/* ---- the data path ----------------------------------------------------- */

static void lane_error(struct peer *p, const struct xport_wc *wc)
{
	const char *why;

	uint32_t bit = 1u << (wc->status & 31), *seen;

	if (wc->lane >= XPORT_MAX_LANES) {
		return;
	}
	/* Each status once per lane; flushes only when they are all we know. */
	seen = &p->lane_errs[wc->lane];
	if ((*seen & bit) || (wc->status == XPORT_WC_WR_FLUSH_ERR && *seen)) {
		return;
	}
	*seen |= bit;
	why = p->x->ops->last_error ? p->x->ops->last_error(p->x) : NULL;
	say(p, "DATA_ERROR lane=%u %s: %s", wc->lane, xport_wc_status_str(wc->status),
	    why ? why : "(no reason given)");
}

struct recv_state; /* recv-all's, when it runs */

/*
 * Drain the completion queue: credits are counted and their receive posted
 * again; failures print (see lane_error). *ret_done is set when want_id
 * completed: 1 placed, -status failed.
 */
void drain_cq(struct peer *p, uint64_t want_id, int *ret_done, struct recv_state *rs)
{
	struct xport_wc wc[64];
	int n;

	if (!p->x) {
		return;
	}
	while ((n = p->x->ops->poll_cq(p->x, wc, ARRAY_SIZE(wc))) != 0) {
		if (n < 0) {
			/* The transport as a whole (verbs: a device event), said once. */
			if (!p->poll_failed) {
				const char *why =
				    p->x->ops->last_error ? p->x->ops->last_error(p->x) : NULL;
				p->poll_failed = true;
				say(p, "DATA_ERROR transport: %s (%s)", strerror(-n),
				    why ? why : "no reason given");
			}
			return;
		}
		for (int i = 0; i < n; i++) {
			if (wc[i].status != XPORT_WC_SUCCESS) {
				lane_error(p, &wc[i]);
				/* Errors complete every WR, signaled or not. */
				if (ret_done && wc[i].opcode != XPORT_WC_RECV_IMM &&
				    wc[i].wr_id == want_id) {
					*ret_done = -wc[i].status;
				}
				continue;
			}
			if (wc[i].opcode == XPORT_WC_WRITE) {
				if (ret_done && wc[i].wr_id == want_id) {
					*ret_done = 1;
				}
				continue;
			}
			uint64_t id = wc[i].lane;
			(void)p->x->ops->post_recvs(p->x, wc[i].lane, &id, 1);
			if (rs) {
				recv_on_imm(p, rs, &wc[i]);
				continue;
			}
			uint32_t kind = wc[i].imm >> PROTO_IMM_KIND_SHIFT;
			uint32_t slot = wc[i].imm & PROTO_IMM_SLOT_MASK;
			if (kind == PROTO_IMM_CREDIT && wc[i].len == 0 && slot < PROTO_MAX_SLOTS) {
				p->credit[slot] = 1;
				p->credits_returned++;
			} else {
				say(p, "IMM lane=%u imm=0x%08x len=%u (not a credit)", wc[i].lane,
				    wc[i].imm, wc[i].len);
			}
		}
	}
}

/*
 * Post WRs (the last one signaled) and wait until they are placed or fail.
 * Returns 0 (placed), a positive enum xport_wc_status, or -errno.
 */
int post_and_wait(struct peer *p, struct xport_wr *wrs, size_t n)
{
	int64_t deadline = now_ms() + p->timeout_ms;
	int done = 0, r;

	for (size_t i = 0; i < n; i++) {
		wrs[i].wr_id = ++p->wr_id;
	}
	wrs[n - 1].flags |= XPORT_SEND_SIGNALED;
	r = p->x->ops->post_writes(p->x, wrs, n);
	if (r < 0) {
		say(p, "POST_FAILED %s", strerror(-r));
		return r;
	}
	while (!done) {
		int64_t left = deadline - now_ms();
		struct pollfd pfd = { .fd = p->x->ops->event_fd(p->x), .events = POLLIN };

		drain_cq(p, p->wr_id, &done, NULL);
		if (done) {
			break;
		}
		if (p->poll_failed) {
			return -EIO;
		}
		if (left <= 0) {
			say(p, "TIMEOUT waiting for the write to be placed");
			return -ETIMEDOUT;
		}
		poll(&pfd, 1, (int)MIN(left, 200));
	}
	return done > 0 ? 0 : -done;
}

/* How a post_and_wait ended, for the step's line. */
const char *outcome(int r, char *buf, size_t len)
{
	if (r == 0) {
		snprintf(buf, len, "placed");
	} else if (r > 0) {
		snprintf(buf, len, "failed (%s)", xport_wc_status_str(r));
	} else {
		snprintf(buf, len, "failed (%s)", strerror(-r));
	}
	return buf;
}

/* ---- the control channel ----------------------------------------------- */

static void mark_closed(struct peer *p, const char *how, int64_t t0)
{
	p->closed = true;
	snprintf(p->closed_how, sizeof(p->closed_how), "%s", how);
	say(p, "closed (%s) after %.1f s", how, (double)(now_ms() - t0) / 1000.0);
}

int send_msg(struct peer *p, const struct msg *m)
{
	int r = chan_send(&p->chan, m);

	if (r < 0) {
		say(p, "SEND_FAILED %s: %s", proto_type_name(m->type), strerror(-r));
	}
	return r;
}

/*
 * The next control message before deadline, answering nothing and
 * draining the data path meanwhile. 1: *m holds it; 0: deadline; -1: the
 * channel is closed or broken (a line was printed).
 */
int next_msg(struct peer *p, int64_t deadline, int64_t t0, struct msg *m, struct recv_state *rs)
{
	if (p->closed) {
		say(p, "closed (%s) earlier", p->closed_how);
		return -1;
	}
	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = tls_fd(p->tls), .events = POLLIN },
			{ .fd = p->x ? p->x->ops->event_fd(p->x) : -1, .events = POLLIN },
		};
		int64_t left = deadline - now_ms();
		int r;

		drain_cq(p, 0, NULL, rs);
		if (!chan_readable_now(&p->chan)) {
			if (left <= 0) {
				return 0;
			}
			poll(pfd, 2, (int)MIN(left, 200));
			if (!(pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    !chan_readable_now(&p->chan)) {
				continue;
			}
		}
		r = chan_recv(&p->chan, m, 100);
		if (r == -ETIMEDOUT) {
			continue; /* a record not complete yet */
		}
		if (r == -EPIPE) {
			mark_closed(p, "close_notify", t0);
			return -1;
		}
		if (r == -ECONNRESET) {
			mark_closed(p, "EOF without close_notify", t0);
			return -1;
		}
		if (r < 0) {
			say(p, "BAD_FRAME from the daemon: %s (type %u)", strerror(-r),
			    p->chan.bad_type);
			p->closed = true;
			snprintf(p->closed_how, sizeof(p->closed_how), "after a bad frame");
			return -1;
		}
		return 1;
	}
}

/* Print m; answer a PING when pong is set. */
void handle_msg(struct peer *p, const struct msg *m, bool pong)
{
	if (m->type == MSG_PING && pong) {
		struct msg reply = { .type = MSG_PONG };
		reply.u.ping.nonce = m->u.ping.nonce;
		print_msg(p, m, chan_send(&p->chan, &reply) < 0 ? " (PONG failed)" : " (answered)");
		return;
	}
	print_msg(p, m, "");
}

/*
 * Read messages until one whose type is in want (or an ERROR) arrives,
 * printing each and answering PINGs. 1: it is in *ret (caller clears);
 * 0: timeout (printed); -1: closed.
 */
int await(struct peer *p, uint64_t want, const char *what, struct msg *ret)
{
	int64_t t0 = now_ms(), deadline = t0 + p->timeout_ms;

	for (;;) {
		struct msg m;
		int r = next_msg(p, deadline, t0, &m, NULL);

		if (r == 0) {
			say(p, "TIMEOUT waiting for %s after %.1f s", what,
			    (double)(now_ms() - t0) / 1000.0);
			return 0;
		}
		if (r < 0) {
			return -1;
		}
		handle_msg(p, &m, true);
		if ((want & TYPE_BIT(m.type)) || m.type == MSG_ERROR) {
			*ret = m;
			return 1;
		}
		msg_clear(&m);
	}
}

int await_print(struct peer *p, uint16_t type)
{
	struct msg m;

	if (await(p, TYPE_BIT(type), proto_type_name(type), &m) > 0) {
		msg_clear(&m);
	}
	return 0;
}

/* ---- connecting -------------------------------------------------------- */

static int connect_tcp(struct peer *p, int *ret_fd)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL, *src = NULL;
	char portstr[8];
	int r = -EHOSTUNREACH;

	snprintf(portstr, sizeof(portstr), "%u", p->port);
	if (getaddrinfo(p->host, portstr, &hints, &res) != 0) {
		return -ENOENT;
	}
	if (p->source && getaddrinfo(p->source, "0", &hints, &src) != 0) {
		freeaddrinfo(res);
		return -EADDRNOTAVAIL;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		_cleanup_close_ int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct timeval tv = { .tv_sec = p->timeout_ms / 1000 };

		if (fd < 0) {
			r = negerrno();
			continue;
		}
		if (src && bind(fd, src->ai_addr, src->ai_addrlen) < 0) {
			r = negerrno();
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			r = negerrno();
			continue;
		}
		memcpy(&p->addr, ai->ai_addr, ai->ai_addrlen);
		p->addrlen = ai->ai_addrlen;
		*ret_fd = TAKE_FD(fd);
		r = 0;
		break;
	}
	freeaddrinfo(res);
	if (src) {
		freeaddrinfo(src);
	}
	return r;
}

/* 0: connected, or the failure printed (only expect steps run); 1: setup error. */
int connect_control(struct peer *p)
{
	struct tls_config tc = {
		.server = false, .cert_file = p->cert, .key_file = p->key, .ca_file = p->ca
	};
	char addr[128];
	int fd = -1, r;

	r = tls_ctx_new(&tc, &p->ctx);
	if (r < 0) {
		fprintf(stderr, "rawpeer: TLS setup: %s\n", tls_last_error());
		return 1;
	}
	r = connect_tcp(p, &fd);
	if (r < 0) {
		say(p, "CONNECT_FAILED %s port %u: %s", p->host, p->port, strerror(-r));
		return r;
	}
	r = tls_connect(p->ctx, fd, p->host, p->timeout_ms, &p->tls);
	if (r < 0) {
		say(p, "TLS_FAILED %s: %s", strerror(-r), tls_last_error());
		return r;
	}
	r = chan_init(&p->chan, p->tls, p->timeout_ms);
	if (r < 0) {
		return 1;
	}
	p->connected = true;
	say(p, "CONNECTED %s TLS 1.3 server CN=%s",
	    net_addr_str((struct sockaddr *)&p->addr, p->addrlen, addr, sizeof(addr)),
	    tls_peer_cn(p->tls));
	return 0;
}
