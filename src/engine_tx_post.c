/* SPDX-License-Identifier: MIT */
/*
 * The sender's posts: a ready chunk into the receiver's next free slot (the
 * payload WRITE, then its descriptor), chunks passed over without a slot
 * (kept, unchanged, zeros), in file order.
 */
#include "engine_tx.h"

/*
 * Chunk ci on its lane (c->lane, c->slot, c->post_len): its payload, then its
 * descriptor. Memory windows may move it to its window's lane and name their
 * keys (the slot is then counted on that lane).
 */
int tx_post_push(struct engine *e, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];
	unsigned lane = c->lane;
	struct xport_wr data = {
		.opcode = XPORT_OP_WRITE,
		.mr = e->mr,
		.buf = pool_chunk(e->pool, ci),
		.len = c->post_len,
		.remote_addr = e->rring_addr + (uint64_t)c->slot * e->p->chunk_size,
		.rkey = e->rkey[lane],
		.lane = lane,
	};
	struct xport_wr desc = {
		.opcode = XPORT_OP_WRITE_IMM,
		.flags = XPORT_SEND_INLINE,
		.mr = e->mr,
		.buf = e->desc_area + (size_t)ci * e->desc_len,
		.len = e->desc_len,
		.remote_addr = e->rdesc_addr + (uint64_t)c->slot * e->desc_len,
		.rkey = e->rkey[lane],
		.imm = proto_imm(PROTO_IMM_DATA, c->slot),
		.lane = lane,
	};
	int r = engine_tx_window(e, c->slot, &lane, &data, &desc);

	if (r < 0) {
		return r;
	}
	if (lane != c->lane) {
		lane_slot_moved(e, c->slot, lane);
		c->lane = (uint8_t)lane;
	}
	r = lane_push(e, &data, -1);
	return r < 0 ? r : lane_push_slot(e, &desc, (int32_t)ci, c->slot);
}

/*
 * Pool chunk ci, its descriptor c->desc, into slot on lane. *hash (hash
 * NULL: none): the stream its bytes feed, left for the caller unless a
 * feature fed it in its own pass (sealed slots hash and seal in one).
 */
static int tx_post_at(struct engine *e, uint32_t ci, unsigned lane, uint32_t slot,
		      struct file_hash **hash)
{
	struct chunk *c = &e->chunks[ci];
	uint8_t *stage = e->desc_area + (size_t)ci * e->desc_len;
	struct file_hash *none = NULL;
	int r;

	proto_desc_encode(&c->desc, stage);
	c->lane = (uint8_t)lane;
	c->slot = slot;
	c->post_len = c->desc.len;
	lane_slot_posted(e, slot, lane);
	/*
	 * A feature may seal it in place (and post less, a test's cut), now or
	 * on a worker: then it pushes the chunk itself once sealed (tx_post_push).
	 */
	r = engine_tx_seal(e, ci, lane, slot, stage, &c->post_len, hash ? hash : &none);
	if (r == 0) {
		r = tx_post_push(e, ci);
	}
	return r < 0 ? r : (int)slot;
}

int tx_post_slot(struct engine *e, uint32_t ci, unsigned lane, uint32_t file_id, uint64_t off,
		 uint32_t len, uint32_t pieces, struct file_hash **hash)
{
	uint32_t slot;

	/* Memory windows: a free slot whose window is on that lane, if one is, goes first. */
	engine_tx_take(e, lane);
	slot = tx_free_pop(e);

	e->chunks[ci].desc = (struct proto_desc){
		.file_id = file_id, .len = len, .offset = off, .seq = ++e->seq, .pieces = pieces
	};
	return tx_post_at(e, ci, lane, slot, hash);
}

int tx_post_again(struct engine *e, uint32_t ci, unsigned lane)
{
	struct chunk *c = &e->chunks[ci];
	int r = engine_tx_repost(e, ci);

	if (r < 0) {
		return r;
	}
	return tx_post_at(e, ci, lane, c->slot, NULL);
}

/*
 * Chunk c, next in f's order, into f's digest: its own digest folded (made
 * on a worker, tx_chunk_read), or the stream its bytes still feed (NULL:
 * none, --delta's tree is fed its own way).
 */
static struct file_hash *tx_chunk_hash(struct efile *f, const struct chunk *c)
{
	if (c->digested) {
		file_hash_chunk(&f->hash, c->chash);
		return NULL;
	}
	return f->tree ? NULL : &f->hash;
}

/* Posted chunk ci is let go by its worker: back to the pool if its lane is done with it too. */
void tx_chunk_unhold(struct engine *e, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];

	c->hashing = false;
	if (c->sent) {
		c->sent = false;
		c->state = CH_FREE;
		pool_put(e->pool, ci);
	}
}

/*
 * Chunk ci of f, posted, waits for its own digest (made in its seal job):
 * last in f's queue of those, which is f's order (chunks are posted in it).
 */
static void tx_fold_queue(struct engine *e, struct efile *f, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];

	c->hashing = true;
	c->fold_next = 0;
	if (f->fold_tail) {
		e->chunks[f->fold_tail - 1].fold_next = ci + 1;
	} else {
		f->fold_head = ci + 1;
	}
	f->fold_tail = ci + 1;
}

/*
 * Chunk ci of f, its own digest made as a worker sealed it
 * (engine_digest_in_seal): folded into f's tree in file order, with those
 * after it that waited for it (f's queue, tx_fold_queue), each let go once
 * folded (tx_chunk_unhold). The seal jobs of f are counted in
 * f->hash_jobs, so once none is out every posted chunk of f is folded
 * (what f's zero and kept chunks, and its FILE_DONE, wait for).
 */
void tx_seal_digested(struct engine *e, struct efile *f, uint32_t ci, const uint8_t chash[HASH_LEN])
{
	memcpy(e->chunks[ci].chash, chash, HASH_LEN);
	e->chunks[ci].digested = true;
	while (f->fold_head && e->chunks[f->fold_head - 1].digested) {
		uint32_t next = f->fold_head - 1;
		struct chunk *c = &e->chunks[next];

		if (!f->failed) {
			file_hash_chunk(&f->hash, c->chash);
		}
		f->fold_head = c->fold_next;
		f->fold_tail = f->fold_head ? f->fold_tail : 0;
		tx_chunk_unhold(e, next);
	}
}

/* Chunk ci, next in its file's order, hashed and posted (tx_post_slot). */
static int tx_post_chunk(struct engine *e, uint32_t ci, unsigned lane)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = file_at(e, c->fidx);
	/* Its digest made as it is sealed, folded once back: held until then. */
	bool in_seal = engine_digest_in_seal(e, f, c);
	struct file_hash *hash = in_seal ? NULL : tx_chunk_hash(f, c);
	int slot;

	if (in_seal) {
		tx_fold_queue(e, f, ci);
	}
	slot = tx_post_slot(e, ci, lane, f->id, c->off, c->len, 0, &hash);
	if (slot < 0) {
		return slot;
	}
	/* Still to hash (read only, so beside the lane's read): its thread, or here. */
	if (hash && e->hashers) {
		/* Freed when both are done. */
		if (hashers_queue(e, f, ci, pool_chunk(e->pool, ci), c->len) < 0) {
			return e->fail_r;
		}
		c->hashing = true;
	} else if (hash) {
		file_hash_update(hash, pool_chunk(e->pool, ci), c->len);
	}
	c->state = CH_POSTED;
	c->slot = (uint32_t)slot;
	f->send_off += c->len;
	f->chunks_out--;
	e->bytes_progress += c->len;
	e->bw_sent += c->len;
	return f->send_off == f->size ? tx_file_sent(e, f) : 0;
}

/* Is the chunk at off, len inside a range the receiver kept (RESUME)? */
bool tx_kept(const struct efile *f, uint64_t off, uint32_t len)
{
	for (uint16_t i = 0; i < f->nresume; i++) {
		if (off >= f->resume[i].offset &&
		    off + len <= f->resume[i].offset + f->resume[i].len) {
			return true;
		}
	}
	return false;
}

/*
 * A chunk next in its file that the receiver has: hashed like the others
 * (FILE_DONE's hash is the whole file's) but not sent.
 */
int tx_chunk_passed(struct engine *e, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = file_at(e, c->fidx);
	struct file_hash *hash = tx_chunk_hash(f, c);

	if (hash) {
		file_hash_update(hash, pool_chunk(e->pool, ci), c->len);
	}
	f->send_off += c->len;
	e->passes++;
	tx_chunk_drop(e, ci);
	return f->send_off == f->size ? tx_file_sent(e, f) : 0;
}

int tx_chunk_same(struct engine *e, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];
	int r = engine_tx_same(e, file_at(e, c->fidx), c->off, c->len);

	if (r == -ENOTSUP) {
		return engine_fail(e, PERR_INTERNAL, r,
				   "an unchanged range in a session without them");
	}
	if (r < 0) {
		return r;
	}
	e->bytes_progress += c->len;
	return tx_chunk_passed(e, ci);
}

/* [off, off + len) of f reads as zeros: noted for a ZEROS range (tx_zero hook). */
static int tx_zero(struct engine *e, struct efile *f, uint64_t off, uint64_t len, bool now)
{
	int r = engine_tx_zero(e, f, off, len, now);

	if (r == -ENOTSUP) {
		return engine_fail(e, PERR_INTERNAL, r, "a zero range in a session without them");
	}
	return r;
}

static int tx_pass_chunk(struct engine *e, uint32_t ci)
{
	file_at(e, e->chunks[ci].fidx)->resumed += e->chunks[ci].len;
	return tx_chunk_passed(e, ci);
}

/*
 * A chunk of zeros next in its file (a hole, or data that read as zeros):
 * hashed as zeros, a ZEROS range instead of payload, chunk by chunk so
 * that what the receiver kept (RESUME) is passed over as kept, never
 * described twice.
 */
static int tx_pass_zero(struct engine *e, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = file_at(e, c->fidx);
	uint64_t cs = e->p->chunk_size, end = c->off + c->len;
	int r;

	for (uint64_t off = c->off; off < end; off += cs) {
		uint64_t unit = MIN(cs, end - off);

		if (f->nresume && tx_kept(f, off, (uint32_t)unit)) {
			f->resumed += unit;
			continue;
		}
		r = tx_zero(e, f, off, unit, false);
		if (r < 0) {
			return r;
		}
	}
	/*
	 * A big hole: the receiver is told before we hash it, so both ends
	 * hash their zeros at the same time rather than one after the other.
	 */
	if (c->len >= ZERO_EARLY_FLUSH) {
		r = tx_zero(e, f, end, 0, true);
		if (r < 0) {
			return r;
		}
	}
	if (!f->tree) {
		hash_zeros(&f->hash, c->len);
	}
	f->send_off += c->len;
	e->bytes_progress += c->len;
	e->passes++;
	tx_chunk_drop(e, ci);
	return f->send_off == f->size ? tx_file_sent(e, f) : 0;
}

/*
 * --delta on a tree file: its digest is fed here, in file order, once per
 * chunk; a chunk the pre-pass found unchanged passes as SAME.
 */
static int claim_tree_same(struct engine *e, uint32_t ci, struct efile *f, bool wait)
{
	struct chunk *c = &e->chunks[ci];
	int r;

	(void)wait;
	if (f->dg && f->dg->tx_feed && !c->hashed) {
		c->same = f->dg->tx_feed(e, f, c, pool_chunk(e->pool, ci));
		c->hashed = true;
		if (f->failed) {
			tx_chunk_drop(e, ci);
			return READY_TAKEN;
		}
	}
	if (!c->same) {
		return READY_NONE;
	}
	r = tx_chunk_same(e, ci);
	return r < 0 ? r : READY_TAKEN;
}

/* A zero chunk (a hole, or read and found so) goes as ZEROS. */
static int claim_zero(struct engine *e, uint32_t ci, struct efile *f, bool wait)
{
	int r;

	(void)f;
	if (!e->chunks[ci].zero) {
		return READY_NONE;
	}
	if (wait) {
		return READY_WAIT;
	}
	r = tx_pass_zero(e, ci);
	return r < 0 ? r : READY_TAKEN;
}

/* --partial: a chunk the receiver keeps (RESUME) is hashed and passed over. */
static int claim_kept(struct engine *e, uint32_t ci, struct efile *f, bool wait)
{
	struct chunk *c = &e->chunks[ci];
	int r;

	if (!f->nresume || !tx_kept(f, c->off, c->len)) {
		return READY_NONE;
	}
	if (wait) {
		return READY_WAIT;
	}
	r = tx_pass_chunk(e, ci);
	return r < 0 ? r : READY_TAKEN;
}

/* The features' claims (--delta's unchanged chunks) come between these two. */
static int claim_features(struct engine *e, uint32_t ci, struct efile *f, bool wait)
{
	return engine_tx_claim(e, ci, f, wait);
}

/*
 * Who may take a ready chunk, in file order, before it is posted, in this
 * order. Zeros, kept and unchanged chunks are hashed here, on the loop:
 * only after what its hashing thread has before them (wait).
 */
static int (*const tx_claims[])(struct engine *e, uint32_t ci, struct efile *f, bool wait) = {
	claim_tree_same,
	claim_zero,
	claim_features,
	claim_kept,
};

/* Ready chunk ci: dropped (its file failed), claimed, posted, or left for later. */
static int tx_ready_chunk(struct engine *e, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f;
	int pick, r;

	if (c->packed) {
		return engine_tx_post(e, ci); /* a feature's own chunk (a pack) */
	}
	f = file_at(e, c->fidx);
	if (f->failed) {
		tx_chunk_drop(e, ci);
		return READY_TAKEN;
	}
	if (c->off != f->send_off) {
		return READY_NONE;
	}
	for (size_t i = 0; i < sizeof(tx_claims) / sizeof(tx_claims[0]); i++) {
		r = tx_claims[i](e, ci, f, f->hash_jobs > 0 && !f->tree);
		if (r != READY_NONE) {
			return r == READY_WAIT ? READY_NONE : r;
		}
	}
	if (e->p->bwlimit && !lane_bw_allows(e, c->len)) {
		return READY_STOP;
	}
	pick = lane_pick(e, 2);
	if (pick < 0) {
		return READY_NONE;
	}
	r = tx_post_chunk(e, ci, (unsigned)pick);
	return r < 0 ? r : READY_TAKEN;
}

int tx_post_ready(struct engine *e)
{
	bool progress = true;

	while (progress && e->nfree_slots > 0) {
		progress = false;
		for (uint32_t ci = 0; ci < e->pool->nchunks && e->nfree_slots > 0; ci++) {
			int r;

			if (e->chunks[ci].state != CH_READY) {
				continue;
			}
			r = tx_ready_chunk(e, ci);
			if (r < 0) {
				return r;
			}
			if (r == READY_STOP) {
				return 0;
			}
			progress |= r == READY_TAKEN;
		}
	}
	/* A failed file with nothing left in flight still owes its FILE_DONE. */
	return 0;
}
