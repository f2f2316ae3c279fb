/* SPDX-License-Identifier: MIT */
/*
 * Sealed slots (engine_params.seal_slots; PROTOCOL.md "Sealed slots"), both
 * roles, as a feature: the lanes' slot keys, the sender's seal of a slot
 * before it is posted (and its payload back to clear bytes before rails
 * posts it again on another lane), the receiver's open of a slot into its
 * private copy, on the loop or on a worker, and the bench's open of a slot
 * where it lies (rx_unseal), all under the negotiated suite
 * (engine_params.seal_suite, slot_key_init). The AEAD open of one slot
 * (slot_open_copy, thread-safe) and the failure of one that does not open
 * (engine_fail_sealed) are the core's, engine_lane.c, for the workers; the descriptor's length with its tag (desc_len) and the copy
 * mode are decided at set-up from the parameters (engine.c).
 */
#include "engine_rx.h"

/* The session state of sealed slots. */
struct seal_state {
	unsigned sealed_sent; /* tests (seal_tamper): sealed slots posted on lane 0 */
};

extern const struct engine_feature engine_feature_seal;

static struct seal_state *seal_of(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_seal);
}

/*
 * Sender: seal stage (the slot's descriptor, PROTO_DESC_LEN bytes, the tag
 * written behind it) and the payload buf[0, len) in place, for slot on lane.
 * Returns how many payload bytes to post (len; less only for a test's
 * truncation) or -errno.
 */
static int slot_seal(struct engine *e, unsigned lane, uint32_t slot, uint8_t *stage, uint8_t *buf,
		     uint32_t len)
{
	struct seal_state *ss = seal_of(e);
	struct lane_seal *s = &e->lanes[lane].seal;
	unsigned tamper = XPORT_TEST_TAMPER_NONE;
	uint8_t aad[4];
	int r;

	if (lane == 0 && e->p->seal_tamper && len >= 2) {
		unsigned at = e->p->seal_tamper == XPORT_TEST_TAMPER_REPLAY ? 1 : 0;

		if (ss->sealed_sent++ == at) {
			tamper = e->p->seal_tamper;
		}
	}
	/* Tests: a slot sealed for its neighbour (moved), or under the last nonce again. */
	slot_aad(tamper == XPORT_TEST_TAMPER_MOVE ? (slot + 1) % e->p->slots : slot, aad);
	if (tamper == XPORT_TEST_TAMPER_REPLAY) {
		s->count--;
	}
	r = lane_seal_begin(s, aad, sizeof(aad));
	if (r >= 0) {
		r = lane_seal_update(s, stage, stage, PROTO_DESC_LEN);
	}
	if (r >= 0) {
		r = lane_seal_update(s, buf, buf, len);
	}
	if (r >= 0) {
		r = lane_seal_end(s, stage + PROTO_DESC_LEN);
	}
	if (r < 0) {
		return engine_fail(e, PERR_INTERNAL, r, "seal slot %u: %s", slot, strerror(-r));
	}
	if (tamper == XPORT_TEST_TAMPER_FLIP) {
		buf[len / 2] ^= 0x01;
	}
	return (int)(tamper == XPORT_TEST_TAMPER_TRUNCATE ? len / 2 : len);
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
	return rx_desc_take(e, j->idx, j->ring, j->lane, &j->d);
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
			    .done = rx_opened };
	slot_sealed_desc(e, slot, j->sealed);
	return workers_queue(e, j, NULL);
}

/* Sender: chunk ci's descriptor (stage) and payload, hashed already, sealed in place. */
static int seal_tx_seal(struct engine *e, uint32_t ci, unsigned lane, uint32_t slot, uint8_t *stage,
			uint32_t *io_len)
{
	struct chunk *c = &e->chunks[ci];
	int r;

	/* From here the chunk holds ciphertext until it is free. */
	c->seal_count = e->lanes[lane].seal.count;
	r = slot_seal(e, lane, slot, stage, pool_chunk(e->pool, ci), *io_len);
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
	return rx_desc_take(e, h, slot, lane, &d);
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

static void seal_release(struct engine *e)
{
	for (unsigned i = 0; i < XPORT_MAX_LANES; i++) {
		lane_seal_fini(&e->lanes[i].seal);
	}
}

const struct engine_feature engine_feature_seal = {
	.name = "seal",
	.enable = seal_enable,
	.state_size = sizeof(struct seal_state),
	.setup = seal_setup,
	.release = seal_release,
	.tx_seal = seal_tx_seal,
	.tx_repost = seal_tx_repost,
	.rx_open = seal_rx_open,
	.rx_unseal = seal_rx_unseal,
};
