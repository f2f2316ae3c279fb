/* SPDX-License-Identifier: MIT */
/*
 * The engine's transport side, both roles: work requests batched per lane
 * with their completions tracked, the --bwlimit rate, and the transport's
 * completions (write completions, receives: data for the receiver,
 * credits for the sender).
 */
#include "engine-internal.h"

static int batch_add(struct engine *e, const struct xport_wr *wr)
{
	if (e->nbatch == e->batch_cap) {
		size_t cap = e->batch_cap ? e->batch_cap * 2 : 64;
		struct xport_wr *b = realloc(e->batch, cap * sizeof(*b));
		if (!b) {
			return -ENOMEM;
		}
		e->batch = b;
		e->batch_cap = cap;
	}
	e->batch[e->nbatch++] = *wr;
	return 0;
}

/* Room for n more WRs on a lane's send queue? */
bool lane_room(struct engine *e, unsigned lane, unsigned n)
{
	return e->lanes[lane].len + n <= e->lanes[lane].cap;
}

bool lane_is_up(const struct engine *e, unsigned lane)
{
	return e->lanes[lane].state == LANE_UP;
}

/*
 * The lane for the next slot: of those up with room for n WRs, the one with
 * the fewest slots posted and not credited, so a slow rail holds fewer of
 * them; from the lane after the last one picked, so equal loads take turns.
 */
int lane_pick(struct engine *e, unsigned n)
{
	unsigned nl = e->p->x->nlanes;
	int best = -1;

	for (unsigned k = 0; k < nl; k++) {
		unsigned i = (unsigned)((e->rr_lane + k) % nl);

		if (!lane_is_up(e, i) || !lane_room(e, i, n)) {
			continue;
		}
		if (best < 0 || e->lanes[i].load < e->lanes[best].load) {
			best = (int)i;
		}
	}
	if (best >= 0) {
		e->rr_lane = (size_t)best + 1;
	}
	return best;
}

/* Sender: a slot went out on lane: it holds one more until credited. */
void lane_slot_posted(struct engine *e, uint32_t slot, unsigned lane)
{
	struct lane *l = &e->lanes[lane];

	e->slot_lane[slot] = (uint8_t)lane;
	if (l->load++ == 0 && e->rails) {
		l->credit_since = now_ms(); /* rails' watchdog: its wait for credits starts */
	}
}

/* Sender: slot is free again; the lane it went on holds one fewer. */
void lane_slot_credited(struct engine *e, uint32_t slot)
{
	struct lane *l = &e->lanes[e->slot_lane[slot]];

	if (l->load > 0) {
		l->load--;
	}
	if (e->rails) {
		l->credit_since = now_ms(); /* rails' watchdog: the lane moves */
	}
}

/* Sender: slot, about to go, goes on lane instead (its window's): no credit came. */
void lane_slot_moved(struct engine *e, uint32_t slot, unsigned lane)
{
	struct lane *l = &e->lanes[e->slot_lane[slot]];

	if (l->load > 0) {
		l->load--;
	}
	lane_slot_posted(e, slot, lane);
}

/*
 * Queue a WR on its lane's FIFO and in the batch. Signal every quarter of
 * the send queue so it always drains; lane_batch_flush signals each lane's last.
 */
/* The sender's free-slot stack (engine-internal.h: its only ways in and out). */
int tx_free_alloc(struct engine *e)
{
	e->free_slots = calloc(e->p->slots, sizeof(*e->free_slots));
	e->free_pos = malloc(e->p->slots * sizeof(*e->free_pos));
	if (!e->free_slots || !e->free_pos) {
		return -ENOMEM;
	}
	tx_free_clear(e);
	return 0;
}

void tx_free_push(struct engine *e, uint32_t slot)
{
	e->free_pos[slot] = e->nfree_slots;
	e->free_slots[e->nfree_slots++] = slot;
}

uint32_t tx_free_pop(struct engine *e)
{
	uint32_t slot = e->free_slots[--e->nfree_slots];

	e->free_pos[slot] = TX_FREE_NONE;
	return slot;
}

bool tx_free_has(const struct engine *e, uint32_t slot)
{
	return e->free_pos[slot] != TX_FREE_NONE;
}

/* A free slot swapped with the one on top: the next tx_free_pop takes it. */
void tx_free_to_top(struct engine *e, uint32_t slot)
{
	uint32_t at = e->free_pos[slot], top = e->nfree_slots - 1;
	uint32_t other = e->free_slots[top];

	e->free_slots[at] = other;
	e->free_pos[other] = at;
	e->free_slots[top] = slot;
	e->free_pos[slot] = top;
}

void tx_free_clear(struct engine *e)
{
	for (uint32_t i = 0; i < e->p->slots; i++) {
		e->free_pos[i] = TX_FREE_NONE;
	}
	e->nfree_slots = 0;
}

static int lane_push_ent(struct engine *e, struct xport_wr *wr, int32_t chunk, bool counted,
			 uint32_t slot)
{
	struct lane *l = &e->lanes[wr->lane];
	unsigned every = MAX(1u, l->cap / 4);
	int r;

	if (l->len >= l->cap) {
		return -ENOSPC;
	}
	if (l->len == 0 && e->rails) {
		l->busy_since = now_ms();
	}
	wr->wr_id = ++e->wr_seq;
	if (++l->unsignaled >= every) {
		wr->flags |= XPORT_SEND_SIGNALED;
	}
	if (wr->flags & XPORT_SEND_SIGNALED) {
		l->unsignaled = 0;
	}
	l->fifo[(l->head + l->len) % l->cap] = (struct lane_ent){
		.wr_id = wr->wr_id,
		.chunk = chunk,
		.idx = counted ? ++l->posted : 0,
		.slot = slot,
	};
	l->len++;
	r = batch_add(e, wr);
	if (r < 0) {
		return engine_fail(e, PERR_INTERNAL, r, "out of memory");
	}
	l->batch_last = (unsigned)e->nbatch;
	return 0;
}

int lane_push(struct engine *e, struct xport_wr *wr, int32_t chunk)
{
	return lane_push_ent(e, wr, chunk, false, 0);
}

int lane_push_slot(struct engine *e, struct xport_wr *wr, int32_t chunk, uint32_t slot)
{
	return lane_push_ent(e, wr, chunk, true, slot);
}

int lane_batch_flush(struct engine *e)
{
	struct xport *x = e->p->x;
	int r;

	if (e->nbatch == 0) {
		return 0;
	}
	for (unsigned i = 0; i < x->nlanes; i++) {
		struct lane *l = &e->lanes[i];
		if (l->batch_last) {
			e->batch[l->batch_last - 1].flags |= XPORT_SEND_SIGNALED;
			l->batch_last = 0;
			l->unsignaled = 0;
		}
	}
	r = x->ops->post_writes(x, e->batch, e->nbatch);
	e->nbatch = 0;
	if (r < 0) {
		return engine_fail(e, PERR_TRANSPORT, r, "post to transport: %s", strerror(-r));
	}
	return 0;
}

/* An immediate this role does not take: the session fails. */
int lane_imm_unexpected(struct engine *e, const struct xport_wc *wc)
{
	return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "unexpected immediate 0x%08x (len %u)",
			   wc->imm, wc->len);
}

/* Sender: a posted chunk's lane is done with it: back to the pool, or once hashed (tx_hashed). */
void lane_chunk_sent(struct engine *e, uint32_t ci)
{
	if (e->chunks[ci].hashing) {
		e->chunks[ci].sent = true;
		return;
	}
	e->chunks[ci].state = CH_FREE;
	pool_put(e->pool, ci);
}

/* A signaled completion: everything up to wr_id on that lane is done. */
static void lane_complete(struct engine *e, unsigned lane, uint64_t wr_id)
{
	struct lane *l = &e->lanes[lane];

	while (l->len > 0 && l->fifo[l->head].wr_id <= wr_id) {
		int32_t c = l->fifo[l->head].chunk;
		if (c >= 0) {
			lane_chunk_sent(e, (uint32_t)c);
		}
		l->head = (l->head + 1) % l->cap;
		l->len--;
	}
	if (e->rails) {
		/* Rails' watchdog: the lane moves; what is still out counts from now. */
		l->busy_since = l->len > 0 ? now_ms() : 0;
	}
}

/*
 * --bwlimit: may another len bytes go (a sender's chunk, a receiver's credit)
 * now? Averaged since the first one, with no allowance ahead of the clock:
 * the first chunk waits its own time too, so no burst starts the transfer.
 */
bool lane_bw_allows(struct engine *e, uint32_t len)
{
	double el;

	if (e->bw_t0.tv_sec == 0 && e->bw_t0.tv_nsec == 0) {
		ts_now(&e->bw_t0);
	}
	el = ts_since(&e->bw_t0);
	return (double)(e->bw_sent + len) <= (double)e->p->bwlimit * el;
}

/* Has the peer closed the control connection (EOF waiting on the socket)? */
static bool peer_closed(struct engine *e)
{
	char b;
	struct pollfd p = { .fd = tls_fd(e->p->chan->tls), .events = POLLIN };

	return poll(&p, 1, 0) == 1 &&
	       (p.revents & POLLHUP || recv(p.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0);
}

int engine_fail_lane(struct engine *e, const struct xport_wc *wc)
{
	struct xport *x = e->p->x;
	const char *why = x->ops->last_error ? x->ops->last_error(x) : NULL;
	/*
	 * A peer that died takes its memory registrations with it: say so
	 * rather than let this read like an attack.
	 */
	bool gone = peer_closed(e);

	return engine_fail(e, PERR_TRANSPORT, -EIO, "data transport: %s%s%s%s",
			   xport_wc_status_str(wc->status), why ? ": " : "", why ? why : "",
			   gone ? " (the peer closed its control connection: it probably ended)"
				: "");
}

int lane_on_xport(struct engine *e)
{
	struct xport *x = e->p->x;
	struct xport_wc wc[64];
	int n;

	while ((n = x->ops->poll_cq(x, wc, ARRAY_SIZE(wc))) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].lane >= x->nlanes || e->lanes[wc[i].lane].state == LANE_DEAD) {
				/* Rails: nothing more is taken from a lane whose count is final. */
				continue;
			}
			if (wc[i].status != XPORT_WC_SUCCESS && e->sent_end) {
				/*
				 * Everything is resolved and END is on its way: the
				 * receiver may already be tearing its lanes down.
				 * Its END (or its failure) comes over the control channel.
				 */
				continue;
			}
			if (wc[i].status != XPORT_WC_SUCCESS) {
				int r = engine_features_lane_error(e, &wc[i]);

				if (r == ENGINE_DECLINED) {
					r = engine_fail_lane(e, &wc[i]);
				}

				if (r < 0) {
					return r;
				}
				continue;
			}
			if (wc[i].opcode == XPORT_WC_WRITE) {
				lane_complete(e, wc[i].lane, wc[i].wr_id);
				continue;
			}
			/* A receive was consumed: give it back right away. */
			e->lanes[wc[i].lane].taken++;
			uint64_t id = wc[i].lane;
			int r = (e->p->faults & ENGINE_FAULT_NO_REPOST)
				    ? 0
				    : x->ops->post_recvs(x, wc[i].lane, &id, 1);
			if (r < 0) {
				return engine_fail(e, PERR_TRANSPORT, r, "post receive: %s",
						   strerror(-r));
			}
			r = e->role->on_receive(e, &wc[i]);
			if (r < 0) {
				return r;
			}
		}
	}
	if (n < 0) {
		return engine_fail(e, PERR_TRANSPORT, n, "poll transport: %s", strerror(-n));
	}
	return 0;
}

/*
 * Sealed slots (engine_params.seal_slots; PROTOCOL.md "Sealed slots"): one
 * AEAD message (engine_params.seal_suite) per slot on its lane's key, nonce from the lane and its
 * count of slots, the slot's number (u32 BE) as additional data. It covers
 * the descriptor first, then the payload, so the receiver learns the length
 * before it opens the payload; the tag follows the descriptor.
 */
int slot_key_init(const struct engine_params *p, struct lane_seal *s, unsigned lane, bool encrypt)
{
	/* Every suite's tag is LANE_SEAL_TAG_LEN bytes: the descriptor's size does not change. */
	enum lane_seal_suite suite = p->seal_suite ? p->seal_suite : LANE_SEAL_AES256_GCM;

	return slot_seal_init_suite(s, suite, p->seal_secret, lane, encrypt);
}

void slot_aad(uint32_t slot, uint8_t aad[4])
{
	uint32_t be = htobe32(slot);

	memcpy(aad, &be, sizeof(be));
}

/*
 * Sender: seal a slot with s (a key of the slot's lane, encrypting) at
 * count, for aad_slot: its descriptor (stage: PROTO_DESC_LEN bytes, the tag
 * written behind them) and its payload buf[0, len) in place, block by
 * block, each block first fed to hash (when not NULL) while it is still
 * clear and in cache: one pass over the bytes. Touches nothing of the
 * engine's: a worker thread runs it with a key of its own.
 */
int slot_seal_at(struct lane_seal *s, uint32_t aad_slot, uint64_t count,
		 uint8_t stage[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN], uint8_t *buf, uint32_t len,
		 struct file_hash *hash)
{
	uint8_t aad[4];
	int r;

	slot_aad(aad_slot, aad);
	s->count = count;
	r = lane_seal_begin(s, aad, sizeof(aad));
	if (r >= 0) {
		r = lane_seal_update(s, stage, stage, PROTO_DESC_LEN);
	}
	for (uint32_t at = 0; at < len && r >= 0; at += ENGINE_BLOCK) {
		uint32_t n = MIN(ENGINE_BLOCK, len - at);

		if (hash) {
			file_hash_update(hash, buf + at, n);
		}
		r = lane_seal_update(s, buf + at, buf + at, n);
	}
	return r < 0 ? r : lane_seal_end(s, stage + PROTO_DESC_LEN);
}

/*
 * Receiver: begin to open a sealed slot with s (a key of the slot's lane)
 * at the slot's count: its descriptor (sealed: PROTO_DESC_LEN bytes and the
 * tag) into d, not authenticated yet, only bounded by max_len so that its
 * payload can be opened (slot_open_payload). Touches nothing of the
 * engine's: a worker thread runs it with a key of its own.
 */
int slot_open_desc(struct lane_seal *s, uint32_t slot, uint64_t count,
		   const uint8_t sealed[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN], uint32_t max_len,
		   struct proto_desc *d)
{
	uint8_t clear[PROTO_DESC_LEN];
	uint8_t aad[4];
	int r;

	slot_aad(slot, aad);
	s->count = count;
	r = lane_seal_begin(s, aad, sizeof(aad));
	if (r >= 0) {
		r = lane_seal_update(s, sealed, clear, PROTO_DESC_LEN);
	}
	if (r < 0) {
		return r;
	}
	if (proto_desc_decode(clear, d) < 0 || d->len > max_len) {
		return -EBADMSG;
	}
	return 0;
}

/*
 * Receiver, after slot_open_desc: the payload's len bytes from src (in the
 * peer's reach) into dst (the slot's private copy; or src itself), block by
 * block, each copied out of the peer's reach first and opened there while
 * it is in cache, then fed to hash (when not NULL) while still in cache: one
 * pass. Then the tag checked: what stays is what was checked, and neither
 * the bytes nor what hash was fed may be used unless this returns 0.
 */
int slot_open_payload(struct lane_seal *s, const uint8_t *src, uint8_t *dst, uint32_t len,
		      uint8_t tag[LANE_SEAL_TAG_LEN], struct file_hash *hash)
{
	int r = 0;

	for (uint32_t at = 0; at < len && r >= 0; at += ENGINE_BLOCK) {
		uint32_t n = MIN(ENGINE_BLOCK, len - at);

		if (dst != src) {
			memcpy(dst + at, src + at, n);
		}
		r = lane_seal_update(s, dst + at, dst + at, n);
		if (r >= 0 && hash) {
			file_hash_update(hash, dst + at, n);
		}
	}
	return r < 0 ? r : lane_seal_end(s, tag);
}

/* Receiver: a sealed slot opened whole (slot_open_desc, slot_open_payload), nothing fed. */
int slot_open_copy(struct lane_seal *s, uint32_t slot, uint64_t count,
		   uint8_t sealed[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN], const uint8_t *src,
		   uint8_t *dst, uint32_t max_len, struct proto_desc *d)
{
	int r = slot_open_desc(s, slot, count, sealed, max_len, d);

	return r < 0 ? r : slot_open_payload(s, src, dst, d->len, sealed + PROTO_DESC_LEN, NULL);
}

/*
 * A sealed slot that did not open (slot_open_copy's r, on the loop or a
 * worker): the session fails (the tcp lanes' NAK_AUTH, exit 8).
 */
int engine_fail_sealed(struct engine *e, uint32_t slot, unsigned lane, int r)
{
	if (r == -EBADMSG) {
		return engine_fail(
		    e, PERR_TRANSPORT, r,
		    "data lane %u: sealed slot %u fails authentication (changed, replayed, "
		    "moved or cut on the way, or sealed under another key)",
		    lane, slot);
	}
	return engine_fail(e, PERR_INTERNAL, r, "open sealed slot %u: %s", slot, strerror(-r));
}
