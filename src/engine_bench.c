/* SPDX-License-Identifier: MIT */
/*
 * rdmacp bench: the engine's data path with memory at both ends. The two
 * bench roles run inside engine_run like the copy's: the same pool and
 * ring, RING exchange, lanes, batching, signaling, credits and idle clock
 * (engine.c, engine_lane.c); only what fills a chunk and what becomes of a
 * slot differ. The sender writes a seeded pattern into each pool chunk and
 * posts it with its descriptor (file id 1, the stream offset); the receiver
 * checks the descriptor and every byte of the slot against the pattern for
 * that offset, then returns the credit at once. With worker threads
 * (hash_threads) a slot's check, and its open when sealed, runs on one of
 * them: the loop does per-chunk work only. Nothing touches a disk.
 */
#include "engine-internal.h"

#include <endian.h>

#define BENCH_STREAM_ID 1
/*
 * How far (in chunks) the newest chunk posted may be ahead of the oldest
 * one not yet credited. Bounds the receiver's record of the chunks it has
 * seen, so a chunk sent twice, or one never sent, is caught exactly.
 */
#define BENCH_WINDOW (1u << 16)
#define BENCH_NONE   UINT64_MAX
/* Odd: words of a chunk, and block heads at different offsets, never repeat. */
#define BENCH_STEP 0x9e3779b97f4a7c15ull

/* Chunks [low, low + BENCH_WINDOW): which have been seen; all below low have. */
struct bench_window {
	uint64_t low;
	uint64_t bits[BENCH_WINDOW / 64];
};

struct bench_state {
	uint64_t nchunks; /* of the stream */
	uint64_t next;	  /* sender: the next chunk to post */
	uint64_t done;	  /* chunks credited (sender) or verified (receiver) */
	struct bench_window win;
	uint64_t *slot_chunk; /* sender: the chunk each receiver slot holds, or BENCH_NONE */
	struct timespec t0;
	bool started;
	bool end_sent;
};

/*
 * The pattern: in each 4 KiB block, word 0 names the block's stream offset,
 * words 1.. are seed + (their index in the chunk) × BENCH_STEP. The sender
 * fills its pool chunks once and stamps only the block heads per chunk; the
 * receiver compares every word.
 */
static inline uint64_t bench_head(uint64_t offset, uint64_t seed)
{
	return (offset * BENCH_STEP) ^ ~seed;
}

static inline uint64_t bench_base(uint32_t word, uint64_t seed)
{
	return seed + (uint64_t)word * BENCH_STEP;
}

static inline void put_le64(uint8_t *p, uint64_t v, uint32_t n)
{
	uint64_t le = htole64(v);

	memcpy(p, &le, n);
}

void engine_bench_stamp(uint8_t *buf, uint32_t len, uint64_t offset, uint64_t seed)
{
	assert(offset % ENGINE_BENCH_BLOCK == 0);
	for (uint32_t b = 0; b < len; b += ENGINE_BENCH_BLOCK) {
		put_le64(buf + b, bench_head(offset + b, seed), MIN(8u, len - b));
	}
}

void engine_bench_fill(uint8_t *buf, uint32_t len, uint64_t offset, uint64_t seed)
{
	uint32_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		put_le64(buf + i, bench_base(i / 8, seed), 8);
	}
	if (i < len) {
		put_le64(buf + i, bench_base(i / 8, seed), len - i);
	}
	engine_bench_stamp(buf, len, offset, seed);
}

/* Two words a vector, two vectors a turn: SSE2 registers whatever the build flags. */
typedef uint64_t bench_v2 __attribute__((vector_size(16)));

/* Does one block hold what it should? No early exit: one OR of every difference. */
static bool bench_block_ok(const uint8_t *p, uint32_t n, uint32_t first_word, uint64_t head,
			   uint64_t seed)
{
	size_t words = n / 8, i = 1;
	uint64_t acc = 0, w, v = bench_base(first_word + 1, seed);

	if (words > 0) {
		memcpy(&w, p, 8);
		acc |= le64toh(w) ^ head;
	}
	for (; i < words && i % 4; i++, v += BENCH_STEP) {
		memcpy(&w, p + 8 * i, 8);
		acc |= le64toh(w) ^ v;
	}
#if __BYTE_ORDER == __LITTLE_ENDIAN
	if (i + 4 <= words) {
		bench_v2 va = { v, v + BENCH_STEP },
			 vb = { v + 2 * BENCH_STEP, v + 3 * BENCH_STEP };
		const bench_v2 step = { 4 * BENCH_STEP, 4 * BENCH_STEP };
		bench_v2 acc_a = { 0, 0 }, acc_b = { 0, 0 }, wa, wb;

		for (; i + 4 <= words; i += 4) {
			memcpy(&wa, p + 8 * i, sizeof(wa));
			memcpy(&wb, p + 8 * i + sizeof(wa), sizeof(wb));
			acc_a |= wa ^ va;
			acc_b |= wb ^ vb;
			va += step;
			vb += step;
		}
		acc_a |= acc_b;
		acc |= acc_a[0] | acc_a[1];
		v = va[0];
	}
#endif
	for (; i < words; i++, v += BENCH_STEP) {
		memcpy(&w, p + 8 * i, 8);
		acc |= le64toh(w) ^ v;
	}
	if (n % 8) {
		uint8_t want[8];

		put_le64(want, words ? v : head, 8);
		acc |= (uint64_t)memcmp(p + 8 * words, want, n % 8);
	}
	return acc == 0;
}

int engine_bench_check(const uint8_t *buf, uint32_t len, uint64_t offset, uint64_t seed,
		       uint32_t *ret_at)
{
	assert(offset % ENGINE_BENCH_BLOCK == 0);
	for (uint32_t b = 0; b < len; b += ENGINE_BENCH_BLOCK) {
		uint32_t n = MIN((uint32_t)ENGINE_BENCH_BLOCK, len - b);
		uint8_t want[ENGINE_BENCH_BLOCK];
		uint32_t i = 0;

		if (bench_block_ok(buf + b, n, b / 8, bench_head(offset + b, seed), seed)) {
			continue;
		}
		/* The first byte that differs, for the message. */
		for (uint32_t k = 0; k < n; k += 8) {
			put_le64(want + k, bench_base((b + k) / 8, seed), MIN(8u, n - k));
		}
		put_le64(want, bench_head(offset + b, seed), MIN(8u, n));
		while (i < n && buf[b + i] == want[i]) {
			i++;
		}
		*ret_at = b + i;
		return -EBADMSG;
	}
	return 0;
}

/* Mark chunk idx seen: -ERANGE outside the window, -EEXIST seen already. */
static int window_mark(struct bench_window *w, uint64_t idx)
{
	if (idx < w->low || idx - w->low >= BENCH_WINDOW) {
		return -ERANGE;
	}
	uint64_t bit = idx % BENCH_WINDOW;

	if (w->bits[bit / 64] & (1ull << (bit % 64))) {
		return -EEXIST;
	}
	w->bits[bit / 64] |= 1ull << (bit % 64);
	for (;;) {
		uint64_t b = w->low % BENCH_WINDOW;

		if (!(w->bits[b / 64] & (1ull << (b % 64)))) {
			break;
		}
		w->bits[b / 64] &= ~(1ull << (b % 64));
		w->low++;
	}
	return 0;
}

void bench_free(struct engine *e)
{
	if (e->bench) {
		free(e->bench->slot_chunk);
		free(e->bench);
		e->bench = NULL;
	}
}

static int bench_alloc(struct engine *e)
{
	const struct engine_params *p = e->p;

	if (p->bench_bytes == 0) {
		return engine_fail(e, PERR_INTERNAL, -EINVAL, "bench: no bytes to send");
	}
	e->bench = calloc(1, sizeof(*e->bench));
	if (!e->bench) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	e->bench->nchunks = (p->bench_bytes + p->chunk_size - 1) / p->chunk_size;
	return 0;
}

static void bench_clock(struct engine *e)
{
	if (!e->bench->started) {
		e->bench->started = true;
		ts_now(&e->bench->t0);
	}
}

static uint32_t bench_chunk_len(const struct engine *e, uint64_t idx)
{
	uint64_t off = idx * e->p->chunk_size;

	return (uint32_t)MIN((uint64_t)e->p->chunk_size, e->p->bench_bytes - off);
}

/* ---- sender ---- */

static uint32_t btx_data_chunks(const struct engine_params *p)
{
	return p->pool_chunks;
}

static int btx_setup(struct engine *e)
{
	int r = bench_alloc(e);

	if (r < 0) {
		return r;
	}
	e->chunks = calloc(e->pool->nchunks, sizeof(*e->chunks));
	e->bench->slot_chunk = calloc(e->p->slots, sizeof(uint64_t));
	if (!e->chunks || tx_free_alloc(e) < 0 || !e->bench->slot_chunk) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < e->p->slots; i++) {
		e->bench->slot_chunk[i] = BENCH_NONE;
	}
	/*
	 * A copy registers its pool with io_uring at its first disk read; a
	 * bench has none, and measures the data path as a copy in full flow
	 * has it: pinned from the start, and counted (VmPin) as such.
	 */
	r = engine_pin_pool(e);
	if (r < 0) {
		return r;
	}
	/* The pattern once; each chunk posted gets only its block heads stamped. */
	for (uint32_t ci = 0; ci < e->p->pool_chunks; ci++) {
		engine_bench_fill(pool_chunk(e->pool, ci), e->p->chunk_size, 0, e->p->bench_seed);
	}
	return tx_wait_ring(e);
}

/* The next chunk of the stream, from pool chunk ci into a free slot on lane (tx_post_slot). */
static int btx_post(struct engine *e, uint32_t ci, unsigned lane)
{
	struct bench_state *b = e->bench;
	uint64_t idx = b->next;
	uint64_t off = idx * e->p->chunk_size;
	uint32_t len = bench_chunk_len(e, idx);
	uint8_t *buf = pool_chunk(e->pool, ci);
	int slot;

	if (e->sealed) {
		/* Sealing left ciphertext where the pattern was: the whole of it again. */
		engine_bench_fill(buf, len, off, e->p->bench_seed);
	} else {
		engine_bench_stamp(buf, len, off, e->p->bench_seed);
	}
	if ((e->p->faults & ENGINE_FAULT_BENCH_MISPLACE) && idx == 1) {
		engine_bench_stamp(buf, len, 0, e->p->bench_seed);
	}
	e->chunks[ci].state = CH_POSTED;
	slot = tx_post_slot(e, ci, lane, BENCH_STREAM_ID, off, len, 0, NULL);
	if (slot < 0) {
		return slot;
	}
	b->slot_chunk[slot] = idx;
	b->next++;
	e->bytes_progress += len;
	e->st.lane_bytes[lane] += len;
	return 0;
}

static int btx_step(struct engine *e)
{
	struct bench_state *b = e->bench;
	struct xport *x = e->p->x;

	bench_clock(e);
	while (b->next < b->nchunks && e->nfree_slots > 0 && b->next - b->win.low < BENCH_WINDOW) {
		unsigned lane = (unsigned)(e->rr_lane % x->nlanes);
		int ci;
		int r;

		if (!lane_room(e, lane, 2)) {
			break; /* in turn: the lanes share the load evenly */
		}
		ci = pool_get(e->pool);
		if (ci < 0) {
			break; /* every pool chunk is still being written out */
		}
		r = btx_post(e, (uint32_t)ci, lane);
		if (r < 0) {
			return r;
		}
		e->rr_lane++;
	}
	if (!b->end_sent && b->done == b->nchunks) {
		struct msg m = { .type = MSG_END };
		int r;

		e->st.data_seconds = ts_since(&b->t0);
		m.u.end.bytes = e->p->bench_bytes;
		r = chan_queue(e->p->chan, &m);
		if (r < 0) {
			return engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
		b->end_sent = e->sent_end = true;
	}
	return 0;
}

/* A credit: the receiver checked the chunk in that slot. */
static int btx_on_receive(struct engine *e, const struct xport_wc *wc)
{
	struct bench_state *b = e->bench;
	uint32_t slot = wc->imm & PROTO_IMM_SLOT_MASK;
	int r = tx_on_credit(e, wc);

	if (r < 0) {
		return r;
	}
	if (b->slot_chunk[slot] == BENCH_NONE || window_mark(&b->win, b->slot_chunk[slot]) < 0) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "credit for slot %u, which holds no chunk", slot);
	}
	e->st.bytes += bench_chunk_len(e, b->slot_chunk[slot]);
	b->slot_chunk[slot] = BENCH_NONE;
	b->done++;
	return 0;
}

static int btx_on_message(struct engine *e, struct msg *m)
{
	if (m->type == MSG_END && e->bench->end_sent && !e->got_end) {
		if (m->u.end.bytes != e->p->bench_bytes) {
			return engine_fail(e, PERR_INTEGRITY, -EBADMSG,
					   "the receiver verified %llu bytes of %llu",
					   (unsigned long long)m->u.end.bytes,
					   (unsigned long long)e->p->bench_bytes);
		}
		e->got_end = true;
		return 0;
	}
	return engine_msg_unexpected(e, m);
}

const struct engine_role_ops engine_bench_sender_ops = {
	.data_chunks = btx_data_chunks,
	.peer_writes = false,
	.setup = btx_setup,
	.on_message = btx_on_message,
	.on_receive = btx_on_receive,
	.step = btx_step,
};

/* ---- receiver ---- */

static uint32_t brx_data_chunks(const struct engine_params *p)
{
	return p->slots;
}

static int brx_setup(struct engine *e)
{
	int r = bench_alloc(e);

	/* Pinned before RING, as btx_setup pins its pool (a copy: at its first write). */
	if (r >= 0) {
		r = engine_pin_pool(e);
	}
	if (r >= 0) {
		r = hashers_start(e, MIN(e->p->hash_threads, ENGINE_HASH_THREADS_MAX), NULL);
	}
	return r < 0 ? r : rx_offer_ring(e);
}

/* Slot's descriptor: opened where it lies when sealed, else from the descriptor area. */
static int brx_desc(struct engine *e, uint32_t slot, uint32_t lane, struct proto_desc *ret)
{
	int r;

	if (slot >= e->p->slots) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "data for unknown slot %u", slot);
	}
	/* Sealed: opened where it lies (a bench keeps nothing). */
	r = engine_rx_unseal(e, slot, lane, pool_chunk(e->pool, slot), ret, NULL);
	if (r != ENGINE_DECLINED) {
		return r < 0 ? r : 0;
	}
	if (proto_desc_decode(e->desc_area + (size_t)slot * PROTO_DESC_LEN, ret) < 0) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "bad slot descriptor");
	}
	return 0;
}

/* d names a chunk of the stream, whole, and one not seen before (in the window). */
static int brx_check_desc(struct engine *e, const struct proto_desc *d, uint64_t idx)
{
	int r;

	if (d->file_id != BENCH_STREAM_ID || d->offset % e->p->chunk_size ||
	    d->offset >= e->p->bench_bytes || d->len != bench_chunk_len(e, idx)) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "bad chunk: id %u offset %llu len %u (stream of %llu bytes)",
				   d->file_id, (unsigned long long)d->offset, d->len,
				   (unsigned long long)e->p->bench_bytes);
	}
	r = window_mark(&e->bench->win, idx);
	if (r < 0) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "chunk at offset %llu %s",
				   (unsigned long long)d->offset,
				   r == -EEXIST ? "came twice"
						: "is too far ahead of the oldest one missing");
	}
	return 0;
}

/* The slot's credit back to the sender, at once. */
static int brx_credit(struct engine *e, uint32_t slot, uint32_t lane)
{
	struct xport_wr wr = {
		.opcode = XPORT_OP_WRITE_IMM,
		.imm = proto_imm(PROTO_IMM_CREDIT, slot),
		.lane = lane,
	};

	e->credits++;
	if (!lane_room(e, lane, 1)) {
		/* Cannot happen while credits <= slots <= sq_depth; be loud if it does. */
		return engine_fail(e, PERR_INTERNAL, -ENOSPC, "send queue full for credits");
	}
	return lane_push(e, &wr, -1);
}

/* A chunk of len bytes checked: counted, and its slot's credit back. */
static int brx_counted(struct engine *e, uint32_t slot, uint32_t lane, uint32_t len)
{
	struct bench_state *b = e->bench;

	b->done++;
	e->st.bytes += len;
	e->st.lane_bytes[lane] += len;
	e->bytes_progress += len;
	if (b->done == b->nchunks) {
		e->st.data_seconds = ts_since(&b->t0);
	}
	return brx_credit(e, slot, lane);
}

/* A descriptor arrived: check it and the slot's every byte, then the credit back. */
static int brx_data(struct engine *e, uint32_t slot, uint32_t lane)
{
	struct proto_desc d;
	uint64_t idx;
	uint32_t at;
	uint8_t *buf;
	int r;

	r = brx_desc(e, slot, lane, &d);
	if (r < 0) {
		return r;
	}
	idx = d.offset / e->p->chunk_size;
	r = brx_check_desc(e, &d, idx);
	if (r < 0) {
		return r;
	}
	bench_clock(e);
	buf = pool_chunk(e->pool, slot);
	if ((e->p->faults & ENGINE_FAULT_FLIP_BYTE) && idx == 0) {
		buf[d.len / 2] ^= 0xff;
	}
	if (engine_bench_check(buf, d.len, d.offset, e->p->bench_seed, &at) < 0) {
		return engine_fail(
		    e, PERR_INTEGRITY, -EBADMSG,
		    "chunk at offset %llu (slot %u, lane %u) is not what was sent for it: "
		    "byte %llu differs",
		    (unsigned long long)d.offset, slot, lane, (unsigned long long)(d.offset + at));
	}
	return brx_counted(e, slot, lane, d.len);
}

/* On a worker: job j's slot (opened if sealed) checked against the pattern; its at. */
static int brx_check_job(struct wjob *j)
{
	uint8_t *buf = j->dst;

	if (j->flip && j->d.offset == 0) {
		buf[j->d.len / 2] ^= 0xff;
	}
	return engine_bench_check(buf, j->d.len, j->d.offset, j->arg, &j->at);
}

/* A worker checked (and opened) slot j->ring: the chunk counted, the credit back. */
static int brx_checked(struct engine *e, struct wjob *j, struct efile *f)
{
	uint64_t idx = j->d.offset / e->p->chunk_size;
	int r;

	(void)f;
	if (j->r < 0) {
		return engine_fail_sealed(e, j->ring, j->lane, j->r);
	}
	/* Opened on the worker: the descriptor is known (and authentic) only now. */
	r = j->kind == WJOB_OPEN ? brx_check_desc(e, &j->d, idx) : 0;
	if (r < 0) {
		return r;
	}
	if (j->rc < 0) {
		return engine_fail(
		    e, PERR_INTEGRITY, -EBADMSG,
		    "chunk at offset %llu (slot %u, lane %u) is not what was sent for it: "
		    "byte %llu differs",
		    (unsigned long long)j->d.offset, j->ring, j->lane,
		    (unsigned long long)(j->d.offset + j->at));
	}
	return brx_counted(e, j->ring, j->lane, j->d.len);
}

/* A clear slot's descriptor, decoded into j and checked. */
static int brx_clear_desc(struct engine *e, uint32_t slot, struct wjob *j)
{
	if (proto_desc_decode(e->desc_area + (size_t)slot * PROTO_DESC_LEN, &j->d) < 0 ||
	    brx_check_desc(e, &j->d, j->d.offset / e->p->chunk_size) < 0) {
		return e->failed ? e->fail_r
				 : engine_fail(e, PERR_PROTOCOL, -EBADMSG, "bad slot descriptor");
	}
	return 0;
}

/* Slot's check (and open) to a worker; a clear one's descriptor checked here first. */
static int brx_queue(struct engine *e, uint32_t slot, uint32_t lane)
{
	struct wjob *j = calloc(1, sizeof(*j));
	uint8_t *buf;
	int r;

	if (!j) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	if (slot >= e->p->slots) {
		free(j);
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "data for unknown slot %u", slot);
	}
	buf = pool_chunk(e->pool, slot);
	*j = (struct wjob){ .kind = WJOB_RUN,
			    .src = buf,
			    .dst = buf,
			    .len = e->p->chunk_size,
			    .ring = slot,
			    .lane = lane,
			    .arg = e->p->bench_seed,
			    .run = brx_check_job,
			    .done = brx_checked };
	/* Sealed: opened on the worker before its check; clear: its descriptor checked here. */
	r = engine_rx_unseal(e, slot, lane, buf, NULL, j);
	if (r == ENGINE_DECLINED) {
		r = brx_clear_desc(e, slot, j);
	}
	if (r < 0) {
		free(j);
		return r;
	}
	/* Tests (FLIP_BYTE): the first chunk's middle byte, changed on the worker. */
	j->flip = e->p->faults & ENGINE_FAULT_FLIP_BYTE;
	bench_clock(e);
	return workers_queue(e, j, NULL);
}

static int brx_on_receive(struct engine *e, const struct xport_wc *wc)
{
	uint32_t kind = wc->imm >> PROTO_IMM_KIND_SHIFT;

	if (kind != PROTO_IMM_DATA || wc->len != e->desc_len) {
		return lane_imm_unexpected(e, wc);
	}
	if (e->hashers) {
		return brx_queue(e, wc->imm & PROTO_IMM_SLOT_MASK, wc->lane);
	}
	return brx_data(e, wc->imm & PROTO_IMM_SLOT_MASK, wc->lane);
}

static int brx_on_message(struct engine *e, struct msg *m)
{
	if (m->type != MSG_END || e->got_end) {
		return engine_msg_unexpected(e, m);
	}
	if (e->bench->done != e->bench->nchunks || m->u.end.bytes != e->p->bench_bytes) {
		return engine_fail(
		    e, PERR_PROTOCOL, -EBADMSG,
		    "END after %llu of %llu chunks (%llu bytes said sent, %llu asked for)",
		    (unsigned long long)e->bench->done, (unsigned long long)e->bench->nchunks,
		    (unsigned long long)m->u.end.bytes, (unsigned long long)e->p->bench_bytes);
	}
	e->got_end = true;
	return 0;
}

static int brx_step(struct engine *e)
{
	if (e->got_end && !e->bench->end_sent) {
		struct msg m = { .type = MSG_END };
		int r;

		m.u.end.bytes = e->st.bytes;
		r = chan_queue(e->p->chan, &m);
		if (r < 0) {
			return engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
		e->bench->end_sent = true;
	}
	return 0;
}

const struct engine_role_ops engine_bench_receiver_ops = {
	.data_chunks = brx_data_chunks,
	.peer_writes = true,
	.setup = brx_setup,
	.on_message = brx_on_message,
	.on_receive = brx_on_receive,
	.step = brx_step,
};

/* rdmacp bench: its state is the bench roles' (engine_bench_*_ops). */
static bool bench_enable(struct engine *e)
{
	return e->p->role == ENGINE_BENCH_SENDER || e->p->role == ENGINE_BENCH_RECEIVER;
}

const struct engine_feature engine_feature_bench = {
	.name = "bench",
	.enable = bench_enable,
	.release = bench_free,
};
