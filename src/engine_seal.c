/* SPDX-License-Identifier: MIT */
/*
 * Sealed slots (engine_params.seal_slots; PROTOCOL.md "Sealed slots"), both
 * roles, as a feature: the lanes' slot keys, the sender's seal of a slot
 * before it is posted, fused with its hash (on a worker when there are
 * workers, the slot pushed once sealed, in its lane's count order), its
 * payload back to clear bytes before rails posts it again on another lane,
 * the receiver's open of a slot into its private copy, on the loop or on a
 * worker, and the bench's open of a slot where it lies (rx_unseal), all
 * under the negotiated suite
 * (engine_params.seal_suite, slot_key_init). The AEAD open of one slot
 * (slot_open_copy, thread-safe) and the failure of one that does not open
 * (engine_fail_sealed) are the core's, engine_lane.c, for the workers; the descriptor's length with its tag (desc_len) and the copy
 * mode are decided at set-up from the parameters (engine.c).
 */
#include "engine_rx.h"

/*
 * A sender's order of sealed chunks on one lane (with workers): the chunks
 * in the order of the counts they were given, pushed in that order once
 * sealed, since the receiver opens a lane's slots at its next count.
 */
struct seal_order {
	uint32_t *ci; /* a ring of the pool's chunks */
	uint32_t head, len;
};

/* The session state of sealed slots. */
struct seal_state {
	unsigned sealed_sent; /* tests (seal_tamper): sealed slots posted on lane 0 */
	uint32_t cap;	      /* the pool's chunks: each is in one order at most */
	bool *sealed;	      /* per pool chunk: its seal job came back */
	struct seal_order order[XPORT_MAX_LANES];
};

extern const struct engine_feature engine_feature_seal;

static struct seal_state *seal_of(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_seal);
}

/* Tests (seal_tamper): the way the next slot sealed on lane is spoilt, if any. */
static unsigned seal_tamper_next(struct engine *e, unsigned lane, uint32_t len)
{
	struct seal_state *ss = seal_of(e);
	unsigned at = e->p->seal_tamper == XPORT_TEST_TAMPER_REPLAY ? 1 : 0;

	if (lane != 0 || !e->p->seal_tamper || len < 2 || ss->sealed_sent++ != at) {
		return XPORT_TEST_TAMPER_NONE;
	}
	return e->p->seal_tamper;
}

/* Tests: a slot sealed for its neighbour (moved): the slot its AAD names. */
static uint32_t seal_aad_slot(const struct engine *e, unsigned tamper, uint32_t slot)
{
	return tamper == XPORT_TEST_TAMPER_MOVE ? (slot + 1) % e->p->slots : slot;
}

/* Tests, once sealed: a byte flipped, or the payload cut; the bytes to post. */
static uint32_t seal_tamper_after(unsigned tamper, uint8_t *buf, uint32_t len)
{
	if (tamper == XPORT_TEST_TAMPER_FLIP) {
		buf[len / 2] ^= 0x01;
	}
	return tamper == XPORT_TEST_TAMPER_TRUNCATE ? len / 2 : len;
}

/*
 * Sender, on the loop: seal stage (the slot's descriptor, PROTO_DESC_LEN
 * bytes, the tag written behind it) and the payload buf[0, len) in place,
 * for slot on lane, feeding hash first (when not NULL). Returns how many
 * payload bytes to post (len; less only for a test's truncation) or -errno.
 */
static int slot_seal(struct engine *e, unsigned lane, uint32_t slot, uint8_t *stage, uint8_t *buf,
		     uint32_t len, struct file_hash *hash)
{
	struct lane_seal *s = &e->lanes[lane].seal;
	unsigned tamper = seal_tamper_next(e, lane, len);
	/* Tests: under the last nonce again. */
	uint64_t count = tamper == XPORT_TEST_TAMPER_REPLAY ? s->count - 1 : s->count;
	int r = slot_seal_at(s, seal_aad_slot(e, tamper, slot), count, stage, buf, len, hash);

	if (r < 0) {
		return engine_fail(e, PERR_INTERNAL, r, "seal slot %u: %s", slot, strerror(-r));
	}
	return (int)seal_tamper_after(tamper, buf, len);
}

/*
 * Sender, rails: a payload sealed in place for slot under lane's key and
 * count back to its clear bytes (AES-GCM's stream applied once more), to be
 * sealed again for another lane. Our count for the lane stays as it is.
 */
static int slot_unseal(struct engine *e, unsigned lane, uint32_t slot, uint64_t count, uint8_t *buf,
		       uint32_t len)
{
	struct lane_seal *s = &e->lanes[lane].seal;
	uint64_t next = s->count;
	uint8_t aad[4], tag[LANE_SEAL_TAG_LEN], desc[PROTO_DESC_LEN] = { 0 };
	int r;

	slot_aad(slot, aad);
	s->count = count;
	r = lane_seal_begin(s, aad, sizeof(aad));
	/* The descriptor came first in the stream: its bytes are skipped the same way. */
	if (r >= 0) {
		r = lane_seal_update(s, desc, desc, PROTO_DESC_LEN);
	}
	if (r >= 0) {
		r = lane_seal_update(s, buf, buf, len);
	}
	if (r >= 0) {
		r = lane_seal_end(s, tag);
	}
	s->count = next;
	return r < 0 ? engine_fail(e, PERR_INTERNAL, r, "unseal slot %u: %s", slot, strerror(-r))
		     : 0;
}

/* Slot's sealed descriptor, read from the peer's reach once. */
static void slot_sealed_desc(struct engine *e, uint32_t slot,
			     uint8_t ret[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN])
{
	memcpy(ret, e->desc_area + (size_t)slot * e->desc_len, PROTO_DESC_LEN + LANE_SEAL_TAG_LEN);
}

/* Receiver, on the loop: slot_open_copy with the lane's key, at its next count. */
static int slot_open(struct engine *e, unsigned lane, uint32_t slot, uint8_t *dst,
		     struct proto_desc *d)
{
	struct lane_seal *s = &e->lanes[lane].seal;
	uint8_t sealed[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN];

	slot_sealed_desc(e, slot, sealed);
	return slot_open_copy(s, slot, s->count, sealed, pool_chunk(e->pool, slot), dst,
			      e->p->chunk_size, d);
}

/* A worker opened sealed ring slot j->ring into copy j->idx: its descriptor is taken. */
static int rx_opened(struct engine *e, struct wjob *j, struct efile *f)
{
	(void)f;
	if (j->r < 0) {
		return engine_fail_sealed(e, j->ring, j->lane, j->r);
	}
	return rx_desc_take(e, j->idx, j->ring, j->lane, &j->d, j->digest ? j->chash : NULL);
}

/* Sealed ring slot `slot` to a worker, to be opened into copy h at the lane's next count. */
static int rx_open_queue(struct engine *e, uint32_t h, uint32_t slot, uint32_t lane)
{
	struct wjob *j = calloc(1, sizeof(*j));

	if (!j) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	*j = (struct wjob){ .kind = WJOB_OPEN,
			    .src = pool_chunk(e->pool, slot),
			    .dst = rx_slot_buf(e, h),
			    .len = e->p->chunk_size,
			    .idx = h,
			    .ring = slot,
			    .lane = lane,
			    .count = e->lanes[lane].seal.count++,
			    .digest = e->tree_chunk > 0,
			    .tree_chunk = e->tree_chunk,
			    .done = rx_opened };
	slot_sealed_desc(e, slot, j->sealed);
	return workers_queue(e, j, NULL);
}

/*
 * Sender, with workers: lane's chunks sealed, pushed in their counts'
 * order; a lane lost meanwhile sends its chunks to another (tx_post_again:
 * back to clear bytes, sealed for that one). Stops at a chunk not sealed
 * yet, or at no room (the next turn's step goes on).
 */
static int seal_push(struct engine *e, unsigned lane)
{
	struct seal_state *ss = seal_of(e);
	struct seal_order *o = &ss->order[lane];

	while (o->len > 0 && ss->sealed[o->ci[o->head]]) {
		uint32_t ci = o->ci[o->head];
		int pick = lane_is_up(e, lane) ? (lane_room(e, lane, 2) ? (int)lane : -1)
					       : lane_pick(e, 2);
		int r;

		if (pick < 0) {
			return 0;
		}
		ss->sealed[ci] = false;
		o->head = (o->head + 1) % ss->cap;
		o->len--;
		r = (unsigned)pick == lane ? tx_post_push(e, ci)
					   : tx_post_again(e, ci, (unsigned)pick);
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* A worker sealed chunk j->idx (and fed its file's stream, f): pushed in its lane's turn. */
static int seal_done(struct engine *e, struct wjob *j, struct efile *f)
{
	struct seal_state *ss = seal_of(e);
	uint32_t ci = j->idx;
	struct chunk *c = &e->chunks[ci];
	int r;

	if (j->r < 0) {
		return engine_fail(e, PERR_INTERNAL, j->r, "seal slot %u: %s", c->slot,
				   strerror(-j->r));
	}
	/* Its digest folded first: a lane lost in seal_push seals it again, with none. */
	if (j->digest) {
		tx_seal_digested(e, f, ci, j->chash);
	}
	memcpy(e->desc_area + (size_t)ci * e->desc_len, j->sealed,
	       PROTO_DESC_LEN + LANE_SEAL_TAG_LEN);
	c->post_len = seal_tamper_after(j->at, pool_chunk(e->pool, ci), j->len);
	ss->sealed[ci] = true;
	r = seal_push(e, j->lane);
	/* Its file's FILE_DONE may have waited for this one (tx_hashed). */
	if (r < 0 || !f) {
		return r;
	}
	return j->digest ? tx_jobs_back(e, f) : tx_hashed(e, f, ci);
}

/* The orders, at the first chunk sealed on a worker. */
static int seal_orders(struct engine *e, struct seal_state *ss)
{
	ss->cap = e->pool->nchunks;
	ss->sealed = calloc(ss->cap, sizeof(*ss->sealed));
	for (unsigned l = 0; ss->sealed && l < e->p->x->nlanes; l++) {
		ss->order[l].ci = calloc(ss->cap, sizeof(uint32_t));
		if (!ss->order[l].ci) {
			break;
		}
	}
	if (!ss->sealed || !ss->order[e->p->x->nlanes - 1].ci) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	return 0;
}

/*
 * Sender, with workers: chunk ci to be fed to hash and sealed at the lane's
 * next count on a worker (its file's thread when it feeds the file's
 * stream, after that thread's hashes of the file), pushed when its turn
 * on the lane comes (seal_done). A tree file's chunk is fed to its own
 * digest instead, in the same pass, on the next worker round
 * (engine_digest_in_seal).
 */
static int seal_queue(struct engine *e, uint32_t ci, unsigned lane, uint32_t slot,
		      const uint8_t *stage, struct file_hash *hash)
{
	struct seal_state *ss = seal_of(e);
	struct chunk *c = &e->chunks[ci];
	struct seal_order *o = &ss->order[lane];
	bool digest = !c->packed && engine_digest_in_seal(e, file_at(e, c->fidx), c);
	struct wjob *j;
	unsigned tamper;

	if (!ss->sealed && seal_orders(e, ss) < 0) {
		return e->fail_r;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	tamper = seal_tamper_next(e, lane, c->post_len);
	*j = (struct wjob){ .kind = WJOB_SEAL,
			    .hash = hash,
			    .digest = digest,
			    .dst = pool_chunk(e->pool, ci),
			    .len = c->post_len,
			    .idx = ci,
			    .ring = seal_aad_slot(e, tamper, slot),
			    .lane = lane,
			    .count = c->seal_count - (tamper == XPORT_TEST_TAMPER_REPLAY),
			    .at = tamper,
			    .done = seal_done };
	memcpy(j->sealed, stage, PROTO_DESC_LEN);
	o->ci[(o->head + o->len++) % ss->cap] = ci;
	return workers_queue(e, j, hash || digest ? file_at(e, c->fidx) : NULL);
}

/*
 * Sender: chunk ci's descriptor (stage) and payload sealed in place, fed to
 * *hash first (in the same pass): on a worker when there are workers
 * (ENGINE_TX_LATER: pushed once sealed, seal_done), else here.
 */
static int seal_tx_seal(struct engine *e, uint32_t ci, unsigned lane, uint32_t slot, uint8_t *stage,
			uint32_t *io_len, struct file_hash **hash)
{
	struct chunk *c = &e->chunks[ci];
	struct file_hash *h = *hash;
	int r;

	/* From here the chunk holds ciphertext until it is free. */
	c->seal_count = e->lanes[lane].seal.count;
	*hash = NULL;
	if (e->hashers) {
		e->lanes[lane].seal.count++; /* the worker's key seals at it */
		r = seal_queue(e, ci, lane, slot, stage, h);
		return r < 0 ? r : ENGINE_TX_LATER;
	}
	r = slot_seal(e, lane, slot, stage, pool_chunk(e->pool, ci), *io_len, h);
	if (r < 0) {
		return r;
	}
	*io_len = (uint32_t)r;
	return 0;
}

/* Sender, rails: chunk ci, sealed for the lane it went on, back to clear bytes. */
static int seal_tx_repost(struct engine *e, uint32_t ci)
{
	const struct chunk *c = &e->chunks[ci];

	return slot_unseal(e, c->lane, c->slot, c->seal_count, pool_chunk(e->pool, ci),
			   c->post_len);
}

/* Receiver: ring slot `slot`, held as h, opened into its copy, where nothing can change it. */
static int seal_rx_open(struct engine *e, uint32_t h, uint32_t slot, uint32_t lane)
{
	struct proto_desc d;
	int r;

	if (e->hashers) {
		return rx_open_queue(e, h, slot, lane);
	}
	r = slot_open(e, lane, slot, rx_slot_buf(e, h), &d);
	if (r < 0) {
		return engine_fail_sealed(e, slot, lane, r);
	}
	return rx_desc_take(e, h, slot, lane, &d, NULL);
}

/*
 * Ring slot `slot` opened where it lies for a role that keeps nothing (the
 * bench): into dst now (j NULL), or j made a worker's open of it.
 */
static int seal_rx_unseal(struct engine *e, uint32_t slot, uint32_t lane, uint8_t *dst,
			  struct proto_desc *d, struct wjob *j)
{
	int r;

	if (j) {
		j->kind = WJOB_OPEN;
		j->count = e->lanes[lane].seal.count++;
		slot_sealed_desc(e, slot, j->sealed);
		return 0;
	}
	r = slot_open(e, lane, slot, dst, d);
	return r < 0 ? engine_fail_sealed(e, slot, lane, r) : 0;
}

/*
 * On with seal_slots on a data path. e->sealed stays for what is decided
 * by it outside this file: where a slot's bytes are copied and hashed.
 */
static bool seal_enable(struct engine *e)
{
	e->sealed = e->p->seal_slots && e->p->x;
	return e->sealed;
}

/* Each lane's slot key: only the sender seals slots, only the receiver opens them. */
static int seal_setup(struct engine *e)
{
	const struct engine_params *p = e->p;

	for (unsigned i = 0; i < p->x->nlanes; i++) {
		int r = slot_key_init(p, &e->lanes[i].seal, i, !e->role->peer_writes);

		if (r < 0) {
			return engine_fail(e, PERR_INTERNAL, r, "slot keys: %s", strerror(-r));
		}
	}
	return 0;
}

/* Sender, with workers: chunks sealed and waiting for room on their lane, or a lane. */
static int seal_step(struct engine *e)
{
	struct seal_state *ss = seal_of(e);
	int r = 0;

	for (unsigned l = 0; ss->sealed && l < e->p->x->nlanes && r >= 0; l++) {
		r = ss->order[l].len > 0 ? seal_push(e, l) : 0;
	}
	return r;
}

static void seal_release(struct engine *e)
{
	struct seal_state *ss = seal_of(e);

	free(ss->sealed);
	for (unsigned l = 0; l < XPORT_MAX_LANES; l++) {
		free(ss->order[l].ci);
	}
	for (unsigned i = 0; i < XPORT_MAX_LANES; i++) {
		lane_seal_fini(&e->lanes[i].seal);
	}
}

const struct engine_feature engine_feature_seal = {
	.name = "seal",
	.enable = seal_enable,
	.state_size = sizeof(struct seal_state),
	.setup = seal_setup,
	.step = seal_step,
	.release = seal_release,
	.tx_seal = seal_tx_seal,
	.tx_repost = seal_tx_repost,
	.rx_open = seal_rx_open,
	.rx_unseal = seal_rx_unseal,
};
