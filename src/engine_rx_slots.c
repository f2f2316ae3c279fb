/* SPDX-License-Identifier: MIT */
/*
 * The receiver's ring slots and held chunks. A descriptor names a ring
 * slot; the chunk it carries is held as rslots[h] until it is written and
 * hashed. Where the transport fences slots (tcp) h is the ring slot itself,
 * fenced while held and credited when let go. Where it cannot (verbs), or
 * slots are sealed, h is a private copy of its own pool (rx_copy; ncopies
 * chunks behind the registered ones, out of the peer's reach) and the ring
 * slot is credited as soon as its copy is made (or opened) and its turn to
 * be hashed has come, not when the copy is written and hashed: the ring's
 * hold time is a copy's, not the disk's (rx_copy_credit). A descriptor that finds no free copy waits (copy_wait, in order)
 * with its slot uncredited. Held chunks are found by (file, offset) in O(1)
 * (held_map); credits that --bwlimit holds back wait in order (credit_q).
 */
#include "engine_rx.h"

#define HELD_NONE UINT32_MAX

/* The bytes of held chunk h: the ones that are hashed and written. */
uint8_t *rx_slot_buf(struct engine *e, uint32_t h)
{
	return pool_chunk(e->pool, e->rx_copy ? e->copy_base + h : h);
}

static uint32_t held_home(const struct engine *e, uint32_t fidx, uint64_t off)
{
	uint64_t k = ((uint64_t)fidx << 40) ^ (off / e->p->chunk_size);

	k *= 0x9e3779b97f4a7c15ull;
	return (uint32_t)(k >> 32) & e->held_mask;
}

/* The chunk of f at off that is held (not a packed slot), or HELD_NONE. */
uint32_t rx_held_find(struct engine *e, const struct efile *f, uint64_t off)
{
	uint32_t fidx = file_index(e, f);

	for (uint32_t i = held_home(e, fidx, off);; i = (i + 1) & e->held_mask) {
		uint32_t v = e->held_map[i];

		if (v == 0) {
			return HELD_NONE;
		}
		if (e->rslots[v - 1].fidx == fidx && e->rslots[v - 1].off == off) {
			return v - 1;
		}
	}
}

static void held_add(struct engine *e, uint32_t h)
{
	uint32_t i = held_home(e, e->rslots[h].fidx, e->rslots[h].off);

	while (e->held_map[i]) {
		i = (i + 1) & e->held_mask;
	}
	e->held_map[i] = h + 1;
}

/* Linear probing's deletion: the entries after it move back where their probe allows. */
static void held_del(struct engine *e, uint32_t h)
{
	uint32_t i = held_home(e, e->rslots[h].fidx, e->rslots[h].off);

	while (e->held_map[i] != h + 1) {
		assert(e->held_map[i] != 0);
		i = (i + 1) & e->held_mask;
	}
	for (uint32_t j = (i + 1) & e->held_mask; e->held_map[j]; j = (j + 1) & e->held_mask) {
		const struct rslot *s = &e->rslots[e->held_map[j] - 1];
		uint32_t home = held_home(e, s->fidx, s->off);

		/* It may fill the hole when its home is not in (i, j]. */
		if (((j - home) & e->held_mask) >= ((j - i) & e->held_mask)) {
			e->held_map[i] = e->held_map[j];
			i = j;
		}
	}
	e->held_map[i] = 0;
}

/* Held chunk h (rslots[h] set: file, offset, length) now counts as f's. */
void rx_held_add(struct engine *e, struct efile *f, uint32_t h)
{
	f->held++;
	held_add(e, h);
}

/* Ring slot `slot` got a descriptor on lane: refused when unknown or not credited yet. */
int rx_ring_take(struct engine *e, uint32_t slot, uint32_t lane)
{
	if (slot >= e->p->slots || e->rring[slot].busy) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "data for busy or unknown slot %u",
				   slot);
	}
	e->rring[slot] = (struct rring){ .busy = true, .lane = lane };
	return 0;
}

static int rx_unfence(struct engine *e, uint32_t slot)
{
	struct xport *x = e->p->x;
	int r;

	if (e->rx_copy) {
		return 0;
	}
	r = engine_rx_fence(e, slot, false);
	if (r != ENGINE_DECLINED) {
		return r;
	}
	r = x->ops->fence(x, e->mr, (uint64_t)slot * e->p->chunk_size, e->p->chunk_size, false);
	return r < 0 ? engine_fail(e, PERR_INTERNAL, r, "unfence slot %u: %s", slot, strerror(-r))
		     : 0;
}

/* The credit of ring slot `slot` on its lane (another if that one is lost). */
static int rx_credit_send(struct engine *e, uint32_t slot)
{
	unsigned lane = e->rring[slot].lane;
	/* The peer may write the slot again once it has the credit, not before. */
	int r = rx_unfence(e, slot);

	e->rring[slot].busy = false;
	e->credits++;
	if (r < 0) {
		return r;
	}
	if (!lane_is_up(e, lane)) {
		/* Rails: its lane is lost; the credit goes on another. */
		int pick = lane_pick(e, 1);

		if (pick < 0) {
			return engine_fail(e, PERR_INTERNAL, -ENOSPC,
					   "no lane has room for a credit");
		}
		lane = (unsigned)pick;
	}
	return rx_credit_post(e, slot, lane);
}

/*
 * The credit of ring slot `slot` on lane (up, with room), every credit's
 * way (rails' again too): memory windows open the slot's window on that
 * lane, its key in the credit.
 */
int rx_credit_post(struct engine *e, uint32_t slot, unsigned lane)
{
	struct xport_wr wr = {
		.opcode = XPORT_OP_WRITE_IMM,
		.imm = proto_imm(PROTO_IMM_CREDIT, slot),
		.lane = lane,
	};
	int r;

	if (!lane_room(e, lane, 1)) {
		/* Cannot happen while credits <= slots <= sq_depth; be loud if it does. */
		return engine_fail(e, PERR_INTERNAL, -ENOSPC, "send queue full for credits");
	}
	r = engine_rx_credit(e, slot, &wr);
	if (r < 0) {
		return r;
	}
	return lane_push_slot(e, &wr, -1, slot);
}

/*
 * Ring slot `slot` (len bytes) may be written again: its credit. --bwlimit on
 * the receiver (a pull): the peer may write a slot again only once it has
 * the credit, so credits go back no faster than the limit, in order.
 */
int rx_ring_credit(struct engine *e, uint32_t slot, uint32_t len)
{
	if (e->p->bwlimit && !e->failed) {
		if (e->ncredit_due > 0 || !lane_bw_allows(e, len)) {
			uint32_t at = (e->credit_head + e->ncredit_due) % e->p->slots;

			e->credit_q[at] = slot;
			e->credit_len[slot] = len;
			e->ncredit_due++;
			return 0;
		}
		e->bw_sent += len;
	}
	return rx_credit_send(e, slot);
}

/* The credits --bwlimit held back, as the rate allows. */
int rx_credit_flush(struct engine *e)
{
	while (e->ncredit_due > 0) {
		uint32_t slot = e->credit_q[e->credit_head];
		int r;

		if (!e->failed && !lane_bw_allows(e, e->credit_len[slot])) {
			return 0;
		}
		e->credit_head = (e->credit_head + 1) % e->p->slots;
		e->ncredit_due--;
		e->bw_sent += e->credit_len[slot];
		r = rx_credit_send(e, slot);
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/*
 * Held chunk h is done with (written and hashed, or dropped): its ring slot
 * credited (fenced: h is the slot), or its copy free for the next one.
 */
int rx_credit(struct engine *e, uint32_t h)
{
	struct rslot *s = &e->rslots[h];

	s->state = SL_FREE;
	if (!s->packed) {
		file_at(e, s->fidx)->held--;
		held_del(e, h);
	}
	if (!e->rx_copy) {
		return rx_ring_credit(e, h, s->len);
	}
	e->copy_free[e->ncopy_free++] = h;
	return rx_copy_credit(e, h, s->len);
}

/*
 * Copy h's ring slot credited, if it was not yet. Not before the copy is
 * made, and not while the chunk waits for another one to be hashed first
 * (rx_hash_slot credits it when its turn comes): every chunk that waits
 * for another holds a ring slot, so the sender can never fill the copies
 * with chunks that wait for one still in the ring (the predecessor finds a
 * copy once those that do not wait are written).
 */
int rx_copy_credit(struct engine *e, uint32_t h, uint32_t len)
{
	if (!e->rx_copy || !e->copy_owes[h]) {
		return 0;
	}
	e->copy_owes[h] = false;
	return rx_ring_credit(e, e->copy_ring[h], len);
}

/*
 * From here until it is let go, held chunk h's bytes must not change under
 * us: what is hashed must be what is written. Where the transport can fence
 * the slot the peer's writes into it are refused (its lane fails);
 * elsewhere the bytes are copied out of the peer's reach first (here, on
 * the loop: a packed slot, or no workers; a sealed one was opened into its
 * copy already). A packed slot's ring slot is credited at once (its files
 * are hashed whole, waiting for nothing); a chunk's when its turn to be
 * hashed comes (rx_copy_credit). need_bytes false: the bytes are dropped.
 */
int rx_slot_hold(struct engine *e, uint32_t h, uint32_t len, bool need_bytes)
{
	struct xport *x = e->p->x;
	int r;

	if (e->rx_copy) {
		uint32_t slot = e->copy_ring[h];

		if (need_bytes && !e->sealed) {
			memcpy(rx_slot_buf(e, h), pool_chunk(e->pool, slot), len);
		}
		return e->rslots[h].packed ? rx_copy_credit(e, h, len) : 0;
	}
	r = engine_rx_fence(e, h, true);
	if (r != ENGINE_DECLINED) {
		return r;
	}
	r = x->ops->fence(x, e->mr, (uint64_t)h * e->p->chunk_size, e->p->chunk_size, true);
	if (r < 0) {
		const char *why = x->ops->last_error ? x->ops->last_error(x) : NULL;

		return engine_fail(e, PERR_TRANSPORT, r,
				   "data transport: slot %u rewritten while held%s%s", h,
				   why ? ": " : "", why ? why : "");
	}
	return 0;
}

/* A copy for ring slot `slot` (copy mode): true and *ret_h, or false: it waits for one. */
bool rx_copy_get(struct engine *e, uint32_t slot, uint32_t *ret_h)
{
	if (e->ncopy_free == 0 || e->ncopy_wait > 0) {
		uint32_t at = (e->copy_wait_head + e->ncopy_wait) % e->p->slots;

		e->copy_wait[at] = slot;
		e->ncopy_wait++;
		return false;
	}
	*ret_h = e->copy_free[--e->ncopy_free];
	e->copy_ring[*ret_h] = slot;
	e->copy_owes[*ret_h] = true;
	return true;
}

/* The next ring slot that waited for a copy, now that one is free: *ret_slot, *ret_h. */
bool rx_copy_next(struct engine *e, uint32_t *ret_slot, uint32_t *ret_h)
{
	if (e->ncopy_wait == 0 || e->ncopy_free == 0) {
		return false;
	}
	*ret_slot = e->copy_wait[e->copy_wait_head];
	e->copy_wait_head = (e->copy_wait_head + 1) % e->p->slots;
	e->ncopy_wait--;
	*ret_h = e->copy_free[--e->ncopy_free];
	e->copy_ring[*ret_h] = *ret_slot;
	e->copy_owes[*ret_h] = true;
	return true;
}

/* The tables of the above; the copies all free. */
int rx_slots_setup(struct engine *e)
{
	uint32_t n = e->p->slots, cap = 4;

	assert(!e->rx_copy || engine_rx_copies(e->p) == n);
	while (cap < 2 * n) {
		cap *= 2;
	}
	e->rslots = calloc(n, sizeof(*e->rslots));
	e->rring = calloc(n, sizeof(*e->rring));
	e->credit_q = calloc(n, sizeof(*e->credit_q));
	e->credit_len = calloc(n, sizeof(*e->credit_len));
	e->copy_free = calloc(n, sizeof(*e->copy_free));
	e->copy_wait = calloc(n, sizeof(*e->copy_wait));
	e->copy_ring = calloc(n, sizeof(*e->copy_ring));
	e->copy_owes = calloc(n, sizeof(*e->copy_owes));
	e->held_map = calloc(cap, sizeof(*e->held_map));
	if (!e->rslots || !e->rring || !e->credit_q || !e->credit_len || !e->copy_free ||
	    !e->copy_wait || !e->copy_ring || !e->copy_owes || !e->held_map) {
		return -ENOMEM;
	}
	e->held_mask = cap - 1;
	for (uint32_t i = n; i-- > 0;) {
		e->copy_free[e->ncopy_free++] = i;
	}
	return 0;
}

void rx_slots_free(struct engine *e)
{
	free(e->rring);
	free(e->credit_q);
	free(e->credit_len);
	free(e->copy_free);
	free(e->copy_wait);
	free(e->copy_ring);
	free(e->copy_owes);
	e->copy_owes = NULL;
	free(e->held_map);
	e->rring = NULL;
	e->credit_q = e->copy_free = e->copy_wait = e->copy_ring = e->held_map = NULL;
	e->credit_len = NULL;
}
