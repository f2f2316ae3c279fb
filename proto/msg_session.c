/* SPDX-License-Identifier: MIT */
/*
 * Session set-up and upkeep messages (see msg_codec.h): HELLO and ERROR,
 * OPEN and its answer OPEN_OK (daemon rails), a pull's FILTER before its
 * OPEN, BENCH (answered like OPEN), PING/PONG and BYE.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "msg_codec.h"

/* ---- HELLO, ERROR ------------------------------------------------------- */

int msg_enc_hello(const struct msg *m, struct wbuf *w)
{
	wbuf_put_u16(w, m->u.hello.min_version);
	wbuf_put_u16(w, m->u.hello.max_version);
	wbuf_put_u64(w, m->u.hello.caps);
	wbuf_put_str16(w, m->u.hello.software, PROTO_MAX_TEXT);
	return 0;
}

int msg_dec_hello(struct rbuf *r, struct msg *m)
{
	struct msg_hello *h = &m->u.hello;

	h->min_version = rbuf_get_u16(r);
	h->max_version = rbuf_get_u16(r);
	h->caps = rbuf_get_u64(r);
	rbuf_get_str16(r, h->software, sizeof(h->software), PROTO_MAX_TEXT);
	if (!r->error && h->min_version > h->max_version) {
		return -EBADMSG;
	}
	/* Unknown capability bits are reported, not rejected: see HELLO in PROTOCOL.md. */
	return 0;
}

int msg_enc_error(const struct msg *m, struct wbuf *w)
{
	wbuf_put_u32(w, m->u.error.code);
	wbuf_put_str16(w, m->u.error.text, PROTO_MAX_TEXT);
	return 0;
}

int msg_dec_error(struct rbuf *r, struct msg *m)
{
	m->u.error.code = rbuf_get_u32(r);
	rbuf_get_str16(r, m->u.error.text, sizeof(m->u.error.text), PROTO_MAX_TEXT);
	return 0;
}

/* ---- OPEN --------------------------------------------------------------- */

int msg_enc_open(const struct msg *m, struct wbuf *w)
{
	const struct msg_open *o = &m->u.open;

	wbuf_put_u8(w, o->direction);
	wbuf_put_u8(w, o->transport);
	wbuf_put_u8(w, o->lanes);
	wbuf_put_u8(w, 0);
	wbuf_put_u32(w, o->flags);
	wbuf_put_u32(w, o->chunk_size);
	wbuf_put_u32(w, o->slots);
	wbuf_put_str16(w, o->path, PROTO_MAX_PATH);
	if (o->flags & PROTO_OPEN_DELETE) {
		wbuf_put_u64(w, o->max_delete);
	}
	if (o->flags & PROTO_OPEN_ENCRYPT) {
		wbuf_put_u8(w, o->encrypt);
	}
	return 0;
}

/* An OPEN's fields together: the flags' combinations, the proposal's bounds. */
static bool open_fields_ok(const struct msg_open *o)
{
	if ((o->flags & PROTO_OPEN_ENCRYPT) && o->encrypt != PROTO_ENCRYPT_PREFER &&
	    o->encrypt != PROTO_ENCRYPT_REQUIRE) {
		return false;
	}
	/*
	 * Deletion is a recursive push's; a pull carries the flag only in a
	 * dry run, where it asks for a probe (the client is the receiver).
	 */
	if ((o->flags & PROTO_OPEN_DELETE) &&
	    (!(o->flags & PROTO_OPEN_RECURSIVE) ||
	     (o->direction != PROTO_DIR_PUSH && !(o->flags & PROTO_OPEN_DRY_RUN)))) {
		return false;
	}
	/* The daemon receives only in a push; a pull's client applies it itself. */
	if ((o->flags & PROTO_OPEN_ASSUME_ZERO) && o->direction != PROTO_DIR_PUSH) {
		return false;
	}
	return (o->direction == PROTO_DIR_PUSH || o->direction == PROTO_DIR_PULL) &&
	       o->transport <= 2 && o->lanes != 0 && o->lanes <= PROTO_MAX_LANES &&
	       (o->flags & ~PROTO_OPEN_FLAGS_KNOWN) == 0 &&
	       __builtin_popcount(o->flags & PROTO_OPEN_SKIP_LEVELS) <= 1 &&
	       msg_chunk_size_ok(o->chunk_size) && o->slots != 0 && o->slots <= PROTO_MAX_SLOTS;
}

int msg_dec_open(struct rbuf *r, struct msg *m)
{
	struct msg_open *o = &m->u.open;

	o->direction = rbuf_get_u8(r);
	o->transport = rbuf_get_u8(r);
	o->lanes = rbuf_get_u8(r);
	if (rbuf_get_u8(r) != 0) {
		return -EBADMSG;
	}
	o->flags = rbuf_get_u32(r);
	o->chunk_size = rbuf_get_u32(r);
	o->slots = rbuf_get_u32(r);
	rbuf_get_str16(r, o->path, sizeof(o->path), PROTO_MAX_PATH);
	o->max_delete = o->flags & PROTO_OPEN_DELETE ? rbuf_get_u64(r) : 0;
	o->encrypt = o->flags & PROTO_OPEN_ENCRYPT ? rbuf_get_u8(r) : 0;
	if (r->error || !open_fields_ok(o)) {
		return -EBADMSG;
	}
	return 0;
}

/* ---- OPEN_OK ------------------------------------------------------------ */

/* Daemon rails: only to a client with PROTO_CAP_DAEMON_RAILS. */
static int enc_rails(struct wbuf *w, const struct msg_open_ok *o)
{
	if (o->nrails > PROTO_MAX_RAILS) {
		return -EINVAL;
	}
	wbuf_put_u8(w, o->nrails);
	for (unsigned i = 0; i < o->nrails; i++) {
		const struct proto_rail *rl = &o->rails[i];

		wbuf_put_u8(w, rl->family);
		wbuf_put_bytes(w, rl->addr, rl->family == PROTO_RAIL_INET6 ? 16 : 4);
		wbuf_put_u16(w, rl->port);
	}
	if (o->rails_flags & ~(unsigned)PROTO_RAILS_UNREACHED) {
		return -EINVAL;
	}
	if (o->rails_flags) {
		wbuf_put_u8(w, o->rails_flags);
	}
	return 0;
}

int msg_enc_open_ok(const struct msg *m, struct wbuf *w)
{
	const struct msg_open_ok *o = &m->u.open_ok;

	wbuf_put_u8(w, o->transport);
	wbuf_put_u8(w, o->lanes);
	wbuf_put_u16(w, o->data_port);
	wbuf_put_u32(w, o->chunk_size);
	wbuf_put_u32(w, o->slots);
	wbuf_put_bytes(w, o->token, PROTO_TOKEN_LEN);
	/* Only in answer to an OPEN with PROTO_OPEN_ENCRYPT: older clients know no more. */
	if (o->lanes_sealed || o->nrails) {
		wbuf_put_u8(w, o->lanes_sealed ? o->lanes_sealed : PROTO_LANES_CLEAR);
	}
	return o->nrails ? enc_rails(w, o) : 0;
}

/* The rails after the lanes byte: a count, then each address (a known family, a port). */
static int dec_rails(struct rbuf *r, struct msg_open_ok *o)
{
	o->nrails = rbuf_get_u8(r);
	if (o->nrails == 0 || o->nrails > PROTO_MAX_RAILS) {
		return -EBADMSG;
	}
	for (unsigned i = 0; i < o->nrails && !r->error; i++) {
		struct proto_rail *rl = &o->rails[i];

		memset(rl, 0, sizeof(*rl));
		rl->family = rbuf_get_u8(r);
		if (rl->family != PROTO_RAIL_INET && rl->family != PROTO_RAIL_INET6) {
			return -EBADMSG;
		}
		rbuf_get_bytes(r, rl->addr, rl->family == PROTO_RAIL_INET6 ? 16 : 4);
		rl->port = rbuf_get_u16(r);
		if (rl->port == 0) {
			return -EBADMSG;
		}
	}
	/* The flags byte: only when set, only known bits. */
	o->rails_flags = 0;
	if (!r->error && rbuf_left(r) > 0) {
		o->rails_flags = rbuf_get_u8(r);
		if (o->rails_flags == 0 || (o->rails_flags & ~(unsigned)PROTO_RAILS_UNREACHED)) {
			return -EBADMSG;
		}
	}
	return 0;
}

int msg_dec_open_ok(struct rbuf *r, struct msg *m)
{
	struct msg_open_ok *o = &m->u.open_ok;

	o->transport = rbuf_get_u8(r);
	o->lanes = rbuf_get_u8(r);
	o->data_port = rbuf_get_u16(r);
	o->chunk_size = rbuf_get_u32(r);
	o->slots = rbuf_get_u32(r);
	rbuf_get_bytes(r, o->token, PROTO_TOKEN_LEN);
	/* The lanes byte is there when the OPEN asked (the client checks that it did). */
	o->lanes_sealed = 0;
	o->nrails = 0;
	o->rails_flags = 0;
	if (!r->error && rbuf_left(r) > 0) {
		o->lanes_sealed = rbuf_get_u8(r);
		if (o->lanes_sealed < PROTO_LANES_CLEAR || o->lanes_sealed > PROTO_LANES_MAX) {
			return -EBADMSG;
		}
	}
	/* Daemon rails: after the lanes byte, which is then always there. */
	if (!r->error && rbuf_left(r) > 0 && dec_rails(r, o) < 0) {
		return -EBADMSG;
	}
	if (r->error || o->transport < 1 || o->transport > 2 || o->lanes == 0 ||
	    o->lanes > PROTO_MAX_LANES || o->data_port == 0 || !msg_chunk_size_ok(o->chunk_size) ||
	    o->slots == 0 || o->slots > PROTO_MAX_SLOTS) {
		return -EBADMSG;
	}
	return 0;
}

/* ---- FILTER ------------------------------------------------------------- */

#define FILTER_RULE_MIN (1 + 2 + 1)

int msg_enc_filter(const struct msg *m, struct wbuf *w)
{
	const struct msg_filter *f = &m->u.filter;

	if (f->count > PROTO_MAX_FILTERS) {
		return -EMSGSIZE;
	}
	wbuf_put_u16(w, f->count);
	for (size_t i = 0; i < f->count; i++) {
		wbuf_put_u8(w, f->rules[i].action);
		wbuf_put_str16(w, f->rules[i].pattern, PROTO_MAX_PATH);
	}
	return 0;
}

/* 1..PROTO_MAX_FILTERS rules of a known action and a pattern, PROTO_MAX_FILTER_BYTES in all. */
int msg_dec_filter(struct rbuf *r, struct msg *m)
{
	struct msg_filter *f = &m->u.filter;
	uint16_t count = rbuf_get_u16(r);
	size_t bytes = 0;

	if (r->error || count == 0 || count > PROTO_MAX_FILTERS ||
	    (size_t)count * FILTER_RULE_MIN > rbuf_left(r)) {
		return -EBADMSG;
	}
	f->count = 0;
	f->rules = calloc(count, sizeof(*f->rules));
	if (!f->rules) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < count; i++) {
		struct proto_filter_rule *e = &f->rules[i];

		e->action = rbuf_get_u8(r);
		f->count = (uint16_t)(i + 1); /* so msg_clear frees this entry */
		e->pattern = msg_dec_str_alloc(r, PROTO_MAX_PATH);
		if (r->error) {
			return -EBADMSG;
		}
		bytes += strlen(e->pattern);
		if ((e->action != PROTO_FILTER_INCLUDE && e->action != PROTO_FILTER_EXCLUDE) ||
		    e->pattern[0] == '\0' || bytes > PROTO_MAX_FILTER_BYTES) {
			return -EBADMSG;
		}
	}
	return 0;
}

void msg_clear_filter(struct msg *m)
{
	for (size_t i = 0; i < m->u.filter.count; i++) {
		free(m->u.filter.rules[i].pattern);
	}
	free(m->u.filter.rules);
}

/* ---- BENCH -------------------------------------------------------------- */

int msg_enc_bench(const struct msg *m, struct wbuf *w)
{
	const struct msg_bench *b = &m->u.bench;

	wbuf_put_u8(w, b->transport);
	wbuf_put_u8(w, b->lanes);
	wbuf_put_u8(w, b->encrypt);
	wbuf_put_u8(w, 0);
	wbuf_put_u32(w, b->chunk_size);
	wbuf_put_u32(w, b->slots);
	wbuf_put_u64(w, b->bytes);
	wbuf_put_u64(w, b->seed);
	return 0;
}

int msg_dec_bench(struct rbuf *r, struct msg *m)
{
	struct msg_bench *b = &m->u.bench;

	b->transport = rbuf_get_u8(r);
	b->lanes = rbuf_get_u8(r);
	b->encrypt = rbuf_get_u8(r);
	if (rbuf_get_u8(r) != 0 || b->encrypt > PROTO_ENCRYPT_REQUIRE) {
		return -EBADMSG;
	}
	b->chunk_size = rbuf_get_u32(r);
	b->slots = rbuf_get_u32(r);
	b->bytes = rbuf_get_u64(r);
	b->seed = rbuf_get_u64(r);
	if (r->error || b->transport > 2 || b->lanes == 0 || b->lanes > PROTO_MAX_LANES ||
	    !msg_chunk_size_ok(b->chunk_size) || b->slots == 0 || b->slots > PROTO_MAX_SLOTS ||
	    b->bytes == 0 || b->bytes > PROTO_BENCH_MAX_BYTES) {
		return -EBADMSG;
	}
	return 0;
}

/* ---- PING, PONG, BYE ---------------------------------------------------- */

int msg_enc_ping(const struct msg *m, struct wbuf *w)
{
	wbuf_put_u64(w, m->u.ping.nonce);
	return 0;
}

int msg_dec_ping(struct rbuf *r, struct msg *m)
{
	m->u.ping.nonce = rbuf_get_u64(r);
	return 0;
}

int msg_enc_bye(const struct msg *m, struct wbuf *w)
{
	return 0;
}

int msg_dec_bye(struct rbuf *r, struct msg *m)
{
	return 0;
}
