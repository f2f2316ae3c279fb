/* SPDX-License-Identifier: MIT */
/*
 * Relay messages (see msg_codec.h and msg_relay.h): RELAY, the chain of
 * destinations after the receiving daemon with their tickets, and
 * RELAY_RESULT, one destination's outcome. Tickets are opaque bytes here
 * (src/relay_ticket.c reads them); every length is capped before it is
 * allocated.
 *
 * RELAY:        self ticket (u32 length, bytes) | count u8 | count hops
 *               [ tree trailer: fanout u8 (2..16) | reserved u8 x3 (0) ]
 *   a hop:      host str16 | port u16 | path str16 | ticket (u32 length, bytes)
 *               (proto_relay_hop_enc/_dec: the relay feed's START uses them too)
 * The trailer is there only for a tree (PROTO_CAP_RELAY_TREE): a chain's
 * RELAY is the same bytes as before trees. No destination twice.
 * RELAY_RESULT: index u8 | status u8 | exit code u8 | reserved u8 (0) |
 *               files ok u64 | files failed u64 | bytes u64 | host str16 | text str16
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "msg_codec.h"

/* Smallest encoding of one hop: a 1-byte host, port, a 1-byte path, a 1-byte ticket. */
#define RELAY_HOP_MIN (2 + 1 + 2 + 2 + 1 + 4 + 1)

/* A u32 length (min..PROTO_MAX_RELAY_TICKET) and the bytes, into a fresh allocation. */
static uint8_t *dec_ticket(struct rbuf *r, uint32_t min, uint32_t *ret_len)
{
	uint32_t n = rbuf_get_u32(r);
	uint8_t *p;

	if (r->error || n < min || n > PROTO_MAX_RELAY_TICKET || n > rbuf_left(r)) {
		r->error = true;
		return NULL;
	}
	p = malloc(n ? n : 1);
	if (!p) {
		r->error = true;
		return NULL;
	}
	rbuf_get_bytes(r, p, n);
	*ret_len = n;
	return p;
}

/*
 * What the encoder needs to write a hop at all. Values the decoder refuses
 * (an empty host, port 0) are written as they are: the peer checks them.
 */
static bool hop_writable(const struct proto_relay_hop *h)
{
	return h->host && h->path && (h->ticket || h->ticket_len == 0) &&
	       h->ticket_len <= PROTO_MAX_RELAY_TICKET;
}

int proto_relay_hop_enc(struct wbuf *w, const struct proto_relay_hop *h)
{
	if (!hop_writable(h)) {
		return -EMSGSIZE;
	}
	wbuf_put_str16(w, h->host, PROTO_MAX_HOST);
	wbuf_put_u16(w, h->port);
	wbuf_put_str16(w, h->path, PROTO_MAX_PATH);
	wbuf_put_u32(w, h->ticket_len);
	if (h->ticket_len) {
		wbuf_put_bytes(w, h->ticket, h->ticket_len);
	}
	return 0;
}

bool proto_relay_hop_valid(const struct proto_relay_hop *h)
{
	return h->host && h->host[0] && strlen(h->host) <= PROTO_MAX_HOST && h->port != 0 &&
	       h->path && h->path[0] && strlen(h->path) <= PROTO_MAX_PATH && h->ticket &&
	       h->ticket_len >= 1 && h->ticket_len <= PROTO_MAX_RELAY_TICKET;
}

int proto_relay_hop_dec(struct rbuf *r, struct proto_relay_hop *h)
{
	h->host = msg_dec_str_alloc(r, PROTO_MAX_HOST);
	h->port = rbuf_get_u16(r);
	h->path = h->host ? msg_dec_str_alloc(r, PROTO_MAX_PATH) : NULL;
	h->ticket = h->path ? dec_ticket(r, 1, &h->ticket_len) : NULL;
	if (r->error || !h->ticket || !proto_relay_hop_valid(h)) {
		r->error = true;
		return -EBADMSG;
	}
	return 0;
}

void proto_relay_hop_clear(struct proto_relay_hop *h)
{
	free(h->host);
	free(h->path);
	free(h->ticket);
	*h = (struct proto_relay_hop){ 0 };
}

/* A path's length without the '/' at its end. */
static size_t dest_path_len(const char *path)
{
	size_t n = strlen(path);

	while (n > 0 && path[n - 1] == '/') {
		n--;
	}
	return n;
}

bool proto_relay_same_dest(const char *host1, uint16_t port1, const char *path1, const char *host2,
			   uint16_t port2, const char *path2)
{
	size_t n = dest_path_len(path1);

	return port1 == port2 && !strcasecmp(host1, host2) && n == dest_path_len(path2) &&
	       !memcmp(path1, path2, n);
}

/* Whether a hop of rl names the destination of one before it. */
static bool hops_repeat(const struct msg_relay *rl)
{
	for (size_t i = 1; i < rl->count; i++) {
		const struct proto_relay_hop *h = &rl->hops[i];

		for (size_t j = 0; j < i; j++) {
			const struct proto_relay_hop *g = &rl->hops[j];

			if (proto_relay_same_dest(h->host, h->port, h->path, g->host, g->port,
						  g->path)) {
				return true;
			}
		}
	}
	return false;
}

static bool fanout_ok(uint8_t fanout)
{
	return fanout <= PROTO_MAX_RELAY_FANOUT;
}

/* The tree trailer, for a fan-out above 1 only. */
static void enc_tree(const struct msg_relay *rl, struct wbuf *w)
{
	if (rl->fanout > 1) {
		wbuf_put_u8(w, rl->fanout);
		wbuf_put_u8(w, 0);
		wbuf_put_u16(w, 0);
	}
}

int msg_enc_relay(const struct msg *m, struct wbuf *w)
{
	const struct msg_relay *rl = &m->u.relay;

	if (rl->count > PROTO_MAX_RELAY_HOPS || rl->self_ticket_len > PROTO_MAX_RELAY_TICKET ||
	    (rl->count && !rl->hops) || (rl->self_ticket_len && !rl->self_ticket) ||
	    !fanout_ok(rl->fanout)) {
		return -EMSGSIZE;
	}
	wbuf_put_u32(w, rl->self_ticket_len);
	if (rl->self_ticket_len) {
		wbuf_put_bytes(w, rl->self_ticket, rl->self_ticket_len);
	}
	wbuf_put_u8(w, rl->count);
	for (size_t i = 0; i < rl->count; i++) {
		int r = proto_relay_hop_enc(w, &rl->hops[i]);

		if (r < 0) {
			return r;
		}
	}
	enc_tree(rl, w);
	return 0;
}

/* The tree trailer when bytes are left: a fan-out 2..16, reserved 0. */
static int dec_tree(struct rbuf *r, struct msg_relay *rl)
{
	uint8_t fanout, reserved8;
	uint16_t reserved16;

	if (rbuf_left(r) == 0) {
		rl->fanout = 1;
		return 0;
	}
	fanout = rbuf_get_u8(r);
	reserved8 = rbuf_get_u8(r);
	reserved16 = rbuf_get_u16(r);
	if (r->error || fanout < 2 || !fanout_ok(fanout) || reserved8 || reserved16) {
		return -EBADMSG;
	}
	rl->fanout = fanout;
	return 0;
}

/*
 * RELAY: a self ticket of 0..PROTO_MAX_RELAY_TICKET bytes, 0..PROTO_MAX_RELAY_HOPS
 * hops (not both empty), each with a host, a non-zero port, a path and a ticket,
 * no destination twice; then the tree trailer, if any.
 */
int msg_dec_relay(struct rbuf *r, struct msg *m)
{
	struct msg_relay *rl = &m->u.relay;

	rl->self_ticket = dec_ticket(r, 0, &rl->self_ticket_len);
	if (!rl->self_ticket) {
		return -EBADMSG;
	}
	rl->count = rbuf_get_u8(r);
	if (r->error || rl->count > PROTO_MAX_RELAY_HOPS ||
	    (rl->count == 0 && rl->self_ticket_len == 0) ||
	    rbuf_left(r) < (size_t)rl->count * RELAY_HOP_MIN) {
		rl->count = 0;
		return -EBADMSG;
	}
	if (rl->count == 0) {
		return dec_tree(r, rl);
	}
	rl->hops = calloc(rl->count, sizeof(*rl->hops));
	if (!rl->hops) {
		rl->count = 0;
		return -ENOMEM;
	}
	for (size_t i = 0; i < rl->count; i++) {
		int err = proto_relay_hop_dec(r, &rl->hops[i]);

		if (err < 0) {
			return err;
		}
	}
	return hops_repeat(rl) ? -EBADMSG : dec_tree(r, rl);
}

void msg_clear_relay(struct msg *m)
{
	struct msg_relay *rl = &m->u.relay;

	for (size_t i = 0; rl->hops && i < rl->count; i++) {
		proto_relay_hop_clear(&rl->hops[i]);
	}
	free(rl->hops);
	free(rl->self_ticket);
}

static bool relay_index_ok(uint8_t index)
{
	return index >= 1 && index <= PROTO_MAX_RELAY_HOPS;
}

static bool relay_status_ok(uint8_t status)
{
	return status >= PROTO_RELAY_COPIED && status <= PROTO_RELAY_STATUS_MAX;
}

int msg_enc_relay_result(const struct msg *m, struct wbuf *w)
{
	const struct msg_relay_result *rr = &m->u.relay_result;

	if (!rr->host || !rr->text) {
		return -EMSGSIZE;
	}
	wbuf_put_u8(w, rr->index);
	wbuf_put_u8(w, rr->status);
	wbuf_put_u8(w, rr->exit_code);
	wbuf_put_u8(w, 0);
	wbuf_put_u64(w, rr->files_ok);
	wbuf_put_u64(w, rr->files_failed);
	wbuf_put_u64(w, rr->bytes);
	wbuf_put_str16(w, rr->host, PROTO_MAX_HOST);
	wbuf_put_str16(w, rr->text, PROTO_MAX_TEXT);
	return 0;
}

/* RELAY_RESULT: index 1..PROTO_MAX_RELAY_HOPS, a known status, reserved 0, a host, a text. */
int msg_dec_relay_result(struct rbuf *r, struct msg *m)
{
	struct msg_relay_result *rr = &m->u.relay_result;
	uint8_t reserved;

	rr->index = rbuf_get_u8(r);
	rr->status = rbuf_get_u8(r);
	rr->exit_code = rbuf_get_u8(r);
	reserved = rbuf_get_u8(r);
	rr->files_ok = rbuf_get_u64(r);
	rr->files_failed = rbuf_get_u64(r);
	rr->bytes = rbuf_get_u64(r);
	if (r->error || !relay_index_ok(rr->index) || !relay_status_ok(rr->status) ||
	    reserved != 0) {
		return -EBADMSG;
	}
	rr->host = msg_dec_str_alloc(r, PROTO_MAX_HOST);
	rr->text = rr->host ? msg_dec_str_alloc(r, PROTO_MAX_TEXT) : NULL;
	if (!rr->text || !rr->host[0]) {
		return -EBADMSG;
	}
	return 0;
}

void msg_clear_relay_result(struct msg *m)
{
	free(m->u.relay_result.host);
	free(m->u.relay_result.text);
}
