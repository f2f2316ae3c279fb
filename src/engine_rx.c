/* SPDX-License-Identifier: MIT */
/*
 * The receiver's data path: FILES (each entry checked and given its temp
 * file), FILE_DONE, descriptors, slots held (fenced or copied), hashed and
 * written through io_uring, and the credits back (paced by --bwlimit).
 */
#include "engine_rx.h"

static void rx_submit_write(struct engine *e, uint32_t slot)
{
	struct rslot *s = &e->rslots[slot];
	struct efile *f = file_at(e, s->fidx);
	uint8_t *buf = rx_slot_buf(e, slot);
	struct io_uring_sqe *sqe;

	if (engine_pin_pool(e) < 0) {
		return;
	}
	sqe = uring_sqe(e);
	if (!sqe) {
		engine_fail(e, PERR_IO, -EBUSY, "io_uring queue full");
		return;
	}
	int fd = f->tfd;
	uint32_t len = s->len - s->wdone;
	uint32_t pages = s->len / RX_PAGE * RX_PAGE;

	if (f->dfd >= 0 && s->wdone == 0) {
		if (diskio_dio_ok(&f->dio, buf, s->off, s->len)) {
			fd = f->dfd;
		} else if (pages > 0 && diskio_dio_ok(&f->dio, buf, s->off, pages)) {
			/*
			 * The file's last slot: its whole pages direct, the rest
			 * (less than a page, past them) then through the page
			 * cache as a short write's remainder (rx_write_done). Whole
			 * pages, so the buffered write never has to read a block
			 * the direct one wrote.
			 */
			fd = f->dfd;
			len = pages;
		}
	}
	io_uring_prep_write_fixed(sqe, fd, buf + s->wdone, len, s->off + s->wdone,
				  pool_buf_index(e->pool, buf));
	io_uring_sqe_set_data64(sqe, UD(UD_WRITE, slot));
	f->writes_out++;
}

/*
 * The next range of f is one without payload (zeros, --delta's unchanged
 * range), taken into its digest by the feature that noted it (rx_range);
 * like held slots, only once the hashing threads have what is before it.
 */
static bool rx_hash_range(struct engine *e, struct efile *f)
{
	uint64_t n = f->nranges && !f->hash_jobs ? engine_rx_range(e, f) : 0;

	f->hash_off += n;
	return n > 0;
}

/* Held chunk i is f's next bytes: hashed here, on its thread, or (a failed file) passed. */
static int rx_hash_slot(struct engine *e, struct efile *f, uint32_t i)
{
	struct rslot *s = &e->rslots[i];

	/* Its turn: it waits for no other chunk now, its ring slot may go. */
	if (rx_copy_credit(e, i, s->len) < 0) {
		return e->fail_r;
	}
	if (f->failed) {
		/* Its digest no longer counts (its thread may still hash). */
	} else if (engine_digest_folds(e, f) && f->hash.fill == 0) {
		/*
		 * A tree: the chunk's own digest, made where it was held (a
		 * worker's copy, open or digest; here without workers). Zeros
		 * a peer sent off the chunks' bounds: the bytes, below.
		 */
		file_hash_chunk(&f->hash, s->chash);
	} else if (e->hashers && !f->tree) {
		/* Its thread hashes it; rx_hashed when it has. */
		if (hashers_queue(e, f, i, rx_slot_buf(e, i), s->len) < 0) {
			return -ENOMEM;
		}
		s->hashing = true;
		f->hash_off += s->len;
		return 0;
	} else if (f->dg && f->dg->rx_chunk) {
		f->dg->rx_chunk(e, f, s->off, s->chash);
	} else {
		file_hash_update(&f->hash, rx_slot_buf(e, i), s->len);
	}
	f->hash_off += s->len;
	s->hashed = true;
	if (s->written) {
		rx_credit(e, i);
	}
	return 0;
}

/* f's stream digest can take bytes: started if it was not (0), or the session fails. */
static int rx_hash_begin(struct engine *e, struct efile *f)
{
	if (f->tree || f->hash.state) {
		return 0;
	}
	/* A packed file was hashed whole: nothing of it may stream after. */
	if (f->hash.whole) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "%s: data for a file that came packed", f->name);
	}
	if (engine_hash_start(e, f) < 0) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	return 0;
}

/* Hash, in file order, every held chunk (and range) that is next for its file. */
void rx_hash_ready(struct engine *e, struct efile *f)
{
	bool progress = true;

	if ((f->held || f->nranges) && rx_hash_begin(e, f) < 0) {
		return;
	}
	while (progress && (f->held || f->nranges)) {
		uint32_t h;

		progress = rx_hash_range(e, f);
		h = f->held ? rx_held_find(e, f, f->hash_off) : UINT32_MAX;
		if (h != UINT32_MAX) {
			const struct rslot *s = &e->rslots[h];

			if (!s->hashed && !s->hashing && !s->copying) {
				if (rx_hash_slot(e, f, h) < 0) {
					return;
				}
				progress = true;
			}
		}
	}
}

/* A worker has hashed held chunk `slot` of f (engine_workers.c). */
int rx_hashed(struct engine *e, struct efile *f, uint32_t slot)
{
	struct rslot *s = &e->rslots[slot];
	int r = 0;

	s->hashing = false;
	s->hashed = true;
	if (s->written) {
		r = rx_credit(e, slot);
	}
	/* Zeros or an unchanged range may have waited for it. */
	rx_hash_ready(e, f);
	return r < 0 ? r : rx_maybe_finish(e, f);
}

/*
 * A chunk of f a sender may send: canonical (aligned to the slot size, full
 * but the last), not hashed yet, not held already, not inside its zeros or
 * unchanged ranges.
 */
static int rx_chunk_check(struct engine *e, struct efile *f, const struct proto_desc *dp)
{
	const struct proto_desc d = *dp;
	const char *what = f->nranges ? engine_rx_range_holds(e, f, d.offset) : NULL;
	uint64_t expect;

	/* Chunks are canonical: aligned to the slot size, full except the last. */
	expect = f->size - MIN(f->size, d.offset);
	expect = MIN(expect, (uint64_t)e->p->chunk_size);
	if (d.offset % e->p->chunk_size || d.offset >= f->size || d.len != expect ||
	    d.offset < f->hash_off) {
		return engine_fail(
		    e, PERR_PROTOCOL, -EBADMSG, "bad chunk for %s: offset %llu len %u (size %llu)",
		    f->name, (unsigned long long)d.offset, d.len, (unsigned long long)f->size);
	}
	if (f->held && rx_held_find(e, f, d.offset) != UINT32_MAX) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "duplicate chunk for %s", f->name);
	}
	if (what) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "chunk for %s inside its %s",
				   f->name, what);
	}
	return 0;
}

/* A chunk of a tree file comes whole (it is checked by chunk digests), or f fails. */
static void rx_chunk_whole(struct engine *e, struct efile *f, const struct proto_desc *d)
{
	if (f->tree && !f->failed &&
	    (d->offset % e->p->chunk_size ||
	     d->len != MIN(e->p->chunk_size, f->size - d->offset))) {
		file_fail(f, PERR_PROTOCOL, "%s: data at %llu+%u is not a whole chunk", f->name,
			  (unsigned long long)d->offset, d->len);
		f->fail_peer = true;
	}
}

/* The digest of the bytes that are written (the held ones): --partial's journal, a tree. */
static bool rx_wants_chunk_digest(const struct engine *e, const struct efile *f)
{
	return (f->partial || f->tree || engine_digest_folds(e, f)) && !f->failed;
}

/* Held chunk h's bytes are in place (and out of the peer's reach): written and hashed. */
static int rx_held(struct engine *e, struct efile *f, uint32_t h)
{
	struct rslot *s = &e->rslots[h];

	if (f->failed) {
		/* Failed meanwhile (disk full, ...): the bytes are dropped. */
		s->hashed = !s->hashing;
		s->written = true;
		if (s->hashed) {
			int r = rx_credit(e, h);

			return r < 0 ? r : rx_maybe_finish(e, f);
		}
		return 0;
	}
	rx_submit_write(e, h);
	rx_hash_ready(e, f);
	e->bytes_progress += s->len;
	return 0;
}

/* A worker copied held chunk j->idx out of its ring slot: the slot's credit, then its write. */
static int rx_copied(struct engine *e, struct wjob *j, struct efile *hf)
{
	struct rslot *s = &e->rslots[j->idx];
	struct efile *f = file_at(e, s->fidx);
	int r;

	(void)hf;
	s->copying = false;
	if (j->hash) {
		s->hashing = false;
		s->hashed = true;
	}
	if (j->digest) {
		memcpy(s->chash, j->chash, HASH_LEN);
	}
	/* Hashed as it was copied: it waits for nothing more, its ring slot goes. */
	r = j->hash ? rx_copy_credit(e, j->idx, s->len) : 0;
	return r < 0 ? r : rx_held(e, f, j->idx);
}

/*
 * Can held chunk s of f feed f's stream digest as it is copied? Only the
 * file's next bytes, on a stream (not a tree, not --delta's chunk digests).
 */
static bool rx_hash_with_copy(struct engine *e, struct efile *f, const struct rslot *s)
{
	return !f->failed && !f->tree && !(f->dg && f->dg->rx_chunk) &&
	       !engine_digest_folds(e, f) && s->off == f->hash_off && rx_hash_begin(e, f) >= 0;
}

/* Held chunk h to a worker: copied out of ring slot `slot` (and hashed as it goes). */
static int rx_copy_queue(struct engine *e, struct efile *f, uint32_t h, uint32_t slot)
{
	struct rslot *s = &e->rslots[h];
	struct wjob *j = calloc(1, sizeof(*j));

	if (!j) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	*j = (struct wjob){ .kind = WJOB_COPY,
			    .src = pool_chunk(e->pool, slot),
			    .dst = rx_slot_buf(e, h),
			    .len = s->len,
			    .idx = h,
			    .ring = slot,
			    .lane = s->lane,
			    .flip = (e->p->faults & ENGINE_FAULT_FLIP_BYTE) && s->off == 0,
			    .digest = rx_wants_chunk_digest(e, f),
			    .done = rx_copied };
	s->copying = true;
	if (!rx_hash_with_copy(e, f, s)) {
		if (e->failed) {
			free(j);
			return e->fail_r;
		}
		return workers_queue(e, j, NULL);
	}
	j->hash = &f->hash;
	s->hashing = true;
	f->hash_off += s->len;
	return workers_queue(e, j, f);
}

/* A worker made held chunk j->idx's own digest (rx_hold_here): now written and hashed. */
static int rx_digested(struct engine *e, struct wjob *j, struct efile *hf)
{
	struct rslot *s = &e->rslots[j->idx];

	(void)hf;
	s->copying = false;
	s->digested = true;
	memcpy(s->chash, j->chash, HASH_LEN);
	return rx_held(e, file_at(e, s->fidx), j->idx);
}

/*
 * The bytes of held chunk h of f taken out of the peer's reach (or fenced)
 * here. Its own digest, when wanted and not made where it was opened: on a
 * worker (any, so that one file's chunks hash side by side; the chunk is
 * written once it is made, so its slot is never let go while a worker
 * reads it), or here without workers.
 */
static int rx_hold_here(struct engine *e, struct efile *f, uint32_t h)
{
	struct rslot *s = &e->rslots[h];
	int r = rx_slot_hold(e, h, s->len, true);

	if (r < 0) {
		return r;
	}
	if ((e->p->faults & ENGINE_FAULT_FLIP_BYTE) && s->off == 0) {
		rx_slot_buf(e, h)[0] ^= 0xff;
		s->digested = false; /* tests: changed after its open's digest */
	}
	if (rx_wants_chunk_digest(e, f) && !s->digested) {
		if (e->hashers) {
			s->copying = true;
			return workers_digest(e, h, rx_slot_buf(e, h), s->len, rx_digested);
		}
		hash_digest(rx_slot_buf(e, h), s->len, s->chash);
	}
	return rx_held(e, f, h);
}

/*
 * A descriptor d (opened or decoded) for ring slot `slot`, held as h: a
 * chunk of a file (or a pack), checked, held, copied, written, hashed
 * (chash: its own digest, made as it was opened, or NULL).
 */
int rx_desc_take(struct engine *e, uint32_t h, uint32_t slot, uint32_t lane,
		 const struct proto_desc *d, const uint8_t *chash)
{
	struct rslot *s;
	struct efile *f;
	int r;

	if (d->file_id == 0) {
		r = engine_rx_slot(e, h, lane, d);
		return r != ENGINE_DECLINED
			   ? r
			   : engine_fail(e, PERR_PROTOCOL, -EBADMSG,
					 "bad packed slot (%u bytes, %u files)", d->len, d->pieces);
	}
	f = file_by_id(e, d->file_id);
	/* FILE_DONE may overtake the data (different connections), not exceed it. */
	if (!f || sums_wanted(e, f) || (f->got_done && f->recv_bytes + d->len > f->done_bytes)) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "data for unknown file id %u",
				   d->file_id);
	}
	r = rx_chunk_check(e, f, d);
	if (r < 0) {
		return r;
	}
	s = &e->rslots[h];
	*s = (struct rslot){ .state = SL_HELD,
			     .fidx = file_index(e, f),
			     .off = d->offset,
			     .len = d->len,
			     .lane = lane,
			     .digested = chash != NULL };
	if (chash) {
		memcpy(s->chash, chash, HASH_LEN);
	}
	rx_held_add(e, f, h);
	f->recv_bytes += d->len;
	rx_chunk_whole(e, f, d);
	if (f->failed) {
		/* Already failed (disk full, ...): drop the bytes, keep the credits flowing. */
		r = rx_slot_hold(e, h, d->len, false);
		return r < 0 ? r : rx_held(e, f, h);
	}
	if (e->hashers && e->rx_copy && !e->sealed) {
		return rx_copy_queue(e, f, h, slot);
	}
	return rx_hold_here(e, f, h);
}

/* Ring slot `slot`, held as h: its descriptor opened (sealed: into the copy) or decoded. */
static int rx_data_at(struct engine *e, uint32_t h, uint32_t slot, uint32_t lane)
{
	struct proto_desc d;
	int r;

	/* A feature that opens the slot (sealed slots) takes it from here. */
	r = engine_rx_open(e, h, slot, lane);
	if (r != ENGINE_DECLINED) {
		return r;
	}
	if (proto_desc_decode(e->desc_area + (size_t)slot * PROTO_DESC_LEN, &d) < 0) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "bad slot descriptor");
	}
	return rx_desc_take(e, h, slot, lane, &d, NULL);
}

/* A descriptor came for ring slot `slot`: held as itself, or as a copy (or it waits for one). */
static int rx_data(struct engine *e, uint32_t slot, uint32_t lane)
{
	uint32_t h = slot;
	int r = rx_ring_take(e, slot, lane);

	if (r < 0) {
		return r;
	}
	if (e->rx_copy && !rx_copy_get(e, slot, &h)) {
		return 0; /* rx_step takes it once a copy is free */
	}
	return rx_data_at(e, h, slot, lane);
}

/* Ring slots that waited for a copy, as copies come free. */
static int rx_copy_waiters(struct engine *e)
{
	uint32_t slot, h;
	int r = 0;

	while (r >= 0 && !e->failed && rx_copy_next(e, &slot, &h)) {
		r = rx_data_at(e, h, slot, e->rring[slot].lane);
	}
	return r;
}

void rx_write_done(struct engine *e, uint32_t slot, int res)
{
	struct rslot *s = &e->rslots[slot];
	struct efile *f = file_at(e, s->fidx);

	f->writes_out--;
	if (res == -EAGAIN || res == -EINTR) {
		rx_submit_write(e, slot);
		return;
	}
	if (res < 0 || res == 0) {
		file_fail(f, errno_to_perr(res ? res : -EIO), "write %s: %s", f->name,
			  strerror(res ? -res : EIO));
		s->written = true;
		/* One with a hashing thread is credited when it comes back (rx_hashed). */
		s->hashed = !s->hashing;
	} else {
		s->wdone += (uint32_t)res;
		if (s->wdone < s->len) {
			rx_submit_write(e, slot); /* short write: the rest */
			return;
		}
		s->written = true;
		f->written += s->len;
		/* With zero extents, blocks of zeros inside data stay holes too. */
		int pr = engine_zeros(e)
			     ? sparse_punch_zeros(f->tfd, rx_slot_buf(e, slot), s->off, s->len)
			     : 0;

		if (pr < 0) {
			file_fail(f, errno_to_perr(pr), "punch %s: %s", f->name, strerror(-pr));
		}
		engine_rx_written(e, f, s->off, s->len, s->chash);
	}
	if (s->hashed) {
		rx_credit(e, slot);
	}
	rx_maybe_finish(e, f);
}

static uint32_t rx_data_chunks(const struct engine_params *p)
{
	return p->slots;
}

/* The slots' states and the commit path's tables, then the RING offered. */
static int rx_setup(struct engine *e)
{
	e->commit_batch = calloc(FILE_TABLE, sizeof(*e->commit_batch));
	e->sync_wait = calloc(FILE_TABLE, sizeof(*e->sync_wait));
	e->sync_run = calloc(FILE_TABLE, sizeof(*e->sync_run));
	if (rx_slots_setup(e) < 0 || !e->commit_batch || !e->sync_wait || !e->sync_run) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	engine_uring_handle(e, UD_WRITE, rx_write_done);
	rx_commit_handlers(e);
	if (sums_state(e)) {
		sums_state(e)->own_done = rx_sum_done;
	}
	if (engine_probe(e)) {
		return 0; /* no data path: no RING */
	}
	if (hashers_start(e, MIN(e->p->hash_threads, ENGINE_HASH_THREADS_MAX), rx_hashed) < 0) {
		return e->fail_r;
	}
	return rx_offer_ring(e);
}

/* Offer the ring: data slots, then the descriptor array. */
int rx_offer_ring(struct engine *e)
{
	struct msg m = { .type = MSG_RING };
	int r;

	/* In the registration's own address space: nothing of our heap's layout. */
	m.u.ring.addr = e->mr->iova;
	m.u.ring.desc_addr = e->mr->iova + (uint64_t)(e->desc_area - (uint8_t *)e->pool->base);
	m.u.ring.nkeys = (uint8_t)e->p->x->nlanes;
	for (unsigned i = 0; i < e->p->x->nlanes; i++) {
		m.u.ring.rkey[i] = e->mr->lane_rkey[i];
	}
	m.u.ring.slots = e->p->slots;
	m.u.ring.slot_size = e->p->chunk_size;
	/* A feature that fences slots itself may name other keys (memory windows). */
	r = engine_fence_ring(e, &m.u.ring);
	if (r < 0) {
		return r;
	}
	r = chan_send(e->p->chan, &m);
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

static int rx_on_message(struct engine *e, struct msg *m)
{
	int r;

	if (e->got_end) {
		return engine_msg_unexpected(e, m);
	}
	switch (m->type) {
	case MSG_FILES:
		return rx_files(e, &m->u.files);
	case MSG_FILE_DONE:
		return rx_file_done(e, &m->u.file_done);
	case MSG_ENTRY_FAILED:
		return rx_entry_failed(e, &m->u.entry_failed);
	case MSG_SUMS:
		return rx_sums(e, &m->u.sums);
	case MSG_END:
		if (e->files_open != 0) {
			return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "END with files in flight");
		}
		e->got_end = true;
		/* A pass of a feature (--delete) runs first: it changes directories' times. */
		r = engine_features_end(e);
		if (r == 0) {
			rx_finish_dirs(e);
		}
		return r < 0 ? r : 0;
	default:
		return engine_msg_unexpected(e, m);
	}
}

/* A descriptor written into the array: a slot holds data. */
static int rx_on_receive(struct engine *e, const struct xport_wc *wc)
{
	uint32_t kind = wc->imm >> PROTO_IMM_KIND_SHIFT;
	uint32_t slot = wc->imm & PROTO_IMM_SLOT_MASK;
	int r;

	if (kind != PROTO_IMM_DATA || wc->len != e->desc_len) {
		return lane_imm_unexpected(e, wc);
	}
	/* Memory windows: only a receive that closed the slot's window. */
	r = engine_rx_landed(e, wc, slot);
	if (r < 0) {
		return r;
	}
	return rx_data(e, slot, wc->lane);
}

/*
 * Kept files' held answers, durability batches, held-back credits,
 * directory fsyncs; END once the peer's came.
 */
static int rx_step(struct engine *e)
{
	int r = engine_rx_kept_flush(e);

	if (r >= 0) {
		r = rx_sync_step(e);
	}
	if (r >= 0) {
		r = rx_credit_flush(e);
	}
	if (r >= 0 && e->ncopy_wait) {
		r = rx_copy_waiters(e);
	}
	if (r >= 0) {
		r = rx_commit_batch(e);
	}
	/*
	 * Once: a feature may hold the session on after it (relay_rx's outbox),
	 * while the sender, told, takes its lanes down (lane_on_xport: sent_end).
	 */
	if (r >= 0 && e->got_end && !e->sent_end && !engine_busy(e)) {
		struct msg m = { .type = MSG_END };

		/* Metadata brought in line on kept entries is durable before the end is told. */
		if (e->meta_updated && !engine_probe(e) && syncfs(e->p->base_fd) < 0) {
			r = negerrno();
			return engine_fail(e, PERR_IO, r, "syncfs: %s", strerror(-r));
		}
		e->meta_updated = false;
		m.u.end.files =
		    (uint32_t)(e->st.files_ok + e->st.files_failed + e->st.files_skipped +
			       e->st.files_updated + e->st.files_planned);
		m.u.end.bytes = e->st.bytes;
		r = chan_queue(e->p->chan, &m);
		if (r < 0) {
			return engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
		e->sent_end = true;
	}
	return r;
}

/* Nothing after the peer's END but what every role takes (PING, a lane lost). */
static bool rx_takes_messages(const struct engine *e)
{
	return !e->got_end;
}

/* The sync's job used directory fds: it finished with the pool, before they close. */
static void rx_stop(struct engine *e)
{
	free(e->sync_wait);
	free(e->sync_run);
	e->sync_wait = e->sync_run = NULL;
	rx_slots_free(e);
}

/* The destination's name is no longer in flight. */
static void rx_file_release(struct engine *e, struct efile *f)
{
	if (f->name_key) {
		hash_set_del(&e->inflight, f->name_key);
	}
}

/* At teardown: a temp file not committed goes; a device written in place is said to be cut. */
static void rx_abandon(struct engine *e, struct efile *f)
{
	if (f->tfd >= 0 && f->dir >= 0 && !f->renamed) {
		rx_discard(e, f);
	}
	if (f->device && !f->renamed && e->p->ev.notice) {
		e->p->ev.notice(e->p->ev.ud, f->name,
				f->partial ? "the device is incomplete: a --partial run of "
					     "the same source finishes it"
					   : "the device is incomplete: copy it again");
	}
}

const struct engine_role_ops engine_receiver_ops = {
	.data_chunks = rx_data_chunks,
	.peer_writes = true,
	.setup = rx_setup,
	.on_message = rx_on_message,
	.on_receive = rx_on_receive,
	.step = rx_step,
	.takes_messages = rx_takes_messages,
	.stop = rx_stop,
	.file_release = rx_file_release,
	.abandon = rx_abandon,
};
