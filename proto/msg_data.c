/* SPDX-License-Identifier: MIT */
/*
 * The data path's wire formats (see msg_codec.h): RING (the receiver's slots
 * and their keys), LANE_DOWN (rails), and the slot descriptors and packed
 * slots' piece tables the sender writes into the receiver's memory.
 */
#include <errno.h>

#include "msg_codec.h"

/* ---- RING --------------------------------------------------------------- */

int msg_enc_ring(const struct msg *m, struct wbuf *w)
{
	const struct msg_ring *g = &m->u.ring;

	wbuf_put_u64(w, g->addr);
	wbuf_put_u64(w, g->desc_addr);
	wbuf_put_u32(w, g->slots);
	wbuf_put_u32(w, g->slot_size);
	if (g->nkeys == 0 || g->nkeys > PROTO_MAX_LANES) {
		return -EINVAL;
	}
	wbuf_put_u8(w, g->nkeys);
	for (unsigned i = 0; i < g->nkeys; i++) {
		wbuf_put_u32(w, g->rkey[i]);
	}
	return 0;
}

/* One rkey per lane; slots and descriptors that end below 2^64. */
int msg_dec_ring(struct rbuf *r, struct msg *m)
{
	struct msg_ring *g = &m->u.ring;

	g->addr = rbuf_get_u64(r);
	g->desc_addr = rbuf_get_u64(r);
	g->slots = rbuf_get_u32(r);
	g->slot_size = rbuf_get_u32(r);
	g->nkeys = rbuf_get_u8(r);
	/* The count is checked before it sizes anything. */
	if (r->error || g->nkeys == 0 || g->nkeys > PROTO_MAX_LANES) {
		return -EBADMSG;
	}
	for (unsigned i = 0; i < g->nkeys; i++) {
		g->rkey[i] = rbuf_get_u32(r);
	}
	if (r->error) {
		return -EBADMSG;
	}
	if (g->slots == 0 || g->slots > PROTO_MAX_SLOTS || !msg_chunk_size_ok(g->slot_size) ||
	    g->addr > UINT64_MAX - (uint64_t)g->slots * g->slot_size ||
	    g->desc_addr > UINT64_MAX - (uint64_t)g->slots * PROTO_DESC_LEN) {
		return -EBADMSG;
	}
	return 0;
}

/* ---- LANE_DOWN ---------------------------------------------------------- */

int msg_enc_lane_down(const struct msg *m, struct wbuf *w)
{
	if (m->u.lane_down.lane >= PROTO_MAX_LANES) {
		return -EMSGSIZE;
	}
	wbuf_put_u8(w, m->u.lane_down.lane);
	wbuf_put_u8(w, 0);
	wbuf_put_u16(w, 0);
	wbuf_put_u64(w, m->u.lane_down.count);
	return 0;
}

/* A lane the session can have, reserved bytes zero; the count is the engine's to check. */
int msg_dec_lane_down(struct rbuf *r, struct msg *m)
{
	struct msg_lane_down *ld = &m->u.lane_down;
	uint8_t lane = rbuf_get_u8(r);
	uint8_t res8 = rbuf_get_u8(r);
	uint16_t res16 = rbuf_get_u16(r);

	ld->count = rbuf_get_u64(r);
	if (r->error || lane >= PROTO_MAX_LANES || res8 != 0 || res16 != 0) {
		return -EBADMSG;
	}
	ld->lane = lane;
	return 0;
}

/* ---- slot descriptors and piece tables ---------------------------------- */

void proto_desc_encode(const struct proto_desc *d, uint8_t out[PROTO_DESC_LEN])
{
	struct wbuf w;

	wbuf_init(&w, out, PROTO_DESC_LEN);
	wbuf_put_u32(&w, d->file_id);
	wbuf_put_u32(&w, d->len);
	wbuf_put_u64(&w, d->offset);
	wbuf_put_u64(&w, d->seq);
	wbuf_put_u32(&w, d->file_id == 0 ? d->pieces : 0);
	wbuf_put_u32(&w, 0);
}

int proto_desc_decode(const uint8_t in[PROTO_DESC_LEN], struct proto_desc *ret)
{
	struct rbuf r;
	struct proto_desc d;

	rbuf_init(&r, in, PROTO_DESC_LEN);
	d.file_id = rbuf_get_u32(&r);
	d.len = rbuf_get_u32(&r);
	d.offset = rbuf_get_u64(&r);
	d.seq = rbuf_get_u64(&r);
	d.pieces = rbuf_get_u32(&r);
	if (r.error || rbuf_get_u32(&r) != 0) {
		return -EBADMSG;
	}
	/* Packed: at least one piece of one byte and its table entry; else no pieces. */
	if (d.file_id == 0 ? d.pieces == 0 || d.pieces > PROTO_MAX_PIECES || d.offset != 0 ||
				 d.len / (PROTO_PIECE_LEN + 1) < d.pieces
			   : d.pieces != 0) {
		return -EBADMSG;
	}
	*ret = d;
	return 0;
}

void proto_piece_encode(const struct proto_piece *pc, uint8_t out[PROTO_PIECE_LEN])
{
	struct wbuf w;

	wbuf_init(&w, out, PROTO_PIECE_LEN);
	wbuf_put_u32(&w, pc->id);
	wbuf_put_u32(&w, pc->len);
}

int proto_pieces_decode(const uint8_t *slot, const struct proto_desc *d, struct proto_piece *out)
{
	uint32_t table = d->len - d->pieces * PROTO_PIECE_LEN, at = 0;
	struct rbuf r;

	if (d->file_id != 0 || d->pieces == 0 || d->pieces > PROTO_MAX_PIECES ||
	    d->len / (PROTO_PIECE_LEN + 1) < d->pieces) {
		return -EBADMSG;
	}
	rbuf_init(&r, slot + table, (size_t)d->pieces * PROTO_PIECE_LEN);
	for (uint32_t i = 0; i < d->pieces; i++) {
		out[i].id = rbuf_get_u32(&r);
		out[i].len = rbuf_get_u32(&r);
		out[i].at = at;
		if (out[i].id == 0 || out[i].len == 0 || out[i].len > table - at) {
			return -EBADMSG;
		}
		at += out[i].len;
	}
	return r.error || at != table ? -EBADMSG : 0;
}
