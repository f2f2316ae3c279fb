/* SPDX-License-Identifier: MIT */
/*
 * The receiver's data path: FILES (each entry checked and given its temp
 * file), FILE_DONE, descriptors, slots held (fenced or copied), hashed and
 * written through io_uring, and the credits back (paced by --bwlimit).
 */
#include "engine_rx.h"

/* The bytes of a held slot: the ones that are hashed and written (see rx_slot_hold). */
uint8_t *rx_slot_buf(struct engine *e, uint32_t slot)
{
	return pool_chunk(e->pool, e->rx_copy ? e->copy_base + slot : slot);
}

/*
 * From here until its credit goes back the slot's bytes must not change
 * under us: what is hashed must be what is written. Where the transport can
 * fence the slot the peer's writes into it are refused (its lane fails);
 * elsewhere the bytes are copied out of the peer's reach first.
 */
int rx_slot_hold(struct engine *e, uint32_t slot, uint32_t len, bool need_bytes)
{
	struct xport *x = e->p->x;
	int r;

	if (e->rx_copy) {
		/* A sealed slot was opened into its copy (slot_open). */
		if (need_bytes && !e->sealed) {
			memcpy(rx_slot_buf(e, slot), pool_chunk(e->pool, slot), len);
		}
		return 0;
	}
	r = x->ops->fence(x, e->mr, (uint64_t)slot * e->p->chunk_size, e->p->chunk_size, true);
	if (r < 0) {
		const char *why = x->ops->last_error ? x->ops->last_error(x) : NULL;

		return engine_fail(e, PERR_TRANSPORT, r,
				   "data transport: slot %u rewritten while held%s%s", slot,
				   why ? ": " : "", why ? why : "");
	}
	return 0;
}

static int rx_slot_unhold(struct engine *e, uint32_t slot)
{
	struct xport *x = e->p->x;
	int r;

	if (e->rx_copy) {
		return 0;
	}
	r = x->ops->fence(x, e->mr, (uint64_t)slot * e->p->chunk_size, e->p->chunk_size, false);
	return r < 0 ? engine_fail(e, PERR_INTERNAL, r, "unfence slot %u: %s", slot, strerror(-r))
		     : 0;
}

static int rx_credit_now(struct engine *e, uint32_t slot)
{
	struct rslot *s = &e->rslots[slot];
	struct xport_wr wr = {
		.opcode = XPORT_OP_WRITE_IMM,
		.imm = proto_imm(PROTO_IMM_CREDIT, slot),
		.lane = s->lane,
	};
	struct efile *f = &e->files[s->fidx];
	int r;

	s->state = SL_FREE;
	if (!s->packed) {
		f->held--;
	}
	e->credits++;
	/* The peer may write the slot again once it has the credit, not before. */
	r = rx_slot_unhold(e, slot);
	if (r < 0) {
		return r;
	}
	if (!lane_is_up(e, wr.lane)) {
		/* Rails: its lane is lost; the credit goes on another. */
		int pick = lane_pick(e, 1);

		if (pick < 0) {
			return engine_fail(e, PERR_INTERNAL, -ENOSPC,
					   "no lane has room for a credit");
		}
		wr.lane = (uint32_t)pick;
	}
	if (!lane_room(e, wr.lane, 1)) {
		/* Cannot happen while credits <= slots <= sq_depth; be loud if it does. */
		return engine_fail(e, PERR_INTERNAL, -ENOSPC, "send queue full for credits");
	}
	return lane_push_slot(e, &wr, -1, slot);
}

/*
 * --bwlimit on the receiver (a pull): the peer may write a slot again only
 * once it has the credit, so credits go back no faster than the limit; the
 * slot stays held (and its file uncommitted) until then.
 */
int rx_credit(struct engine *e, uint32_t slot)
{
	struct rslot *s = &e->rslots[slot];

	if (e->p->bwlimit && !e->failed) {
		if (s->credit_due) {
			return 0;
		}
		if (e->ncredit_due > 0 || !bw_allows(e, s->len)) {
			s->credit_due = true;
			e->ncredit_due++;
			return 0;
		}
		e->bw_sent += s->len;
	}
	return rx_credit_now(e, slot);
}

/* The credits --bwlimit held back, as the rate allows. */
static int rx_credit_flush(struct engine *e)
{
	for (uint32_t i = 0; e->ncredit_due > 0 && i < e->p->slots; i++) {
		struct rslot *s = &e->rslots[i];
		struct efile *f = &e->files[s->fidx];

		if (!s->credit_due) {
			continue;
		}
		if (!e->failed && !bw_allows(e, s->len)) {
			return 0;
		}
		s->credit_due = false;
		e->ncredit_due--;
		e->bw_sent += s->len;
		bool packed = s->packed;
		int r = rx_credit_now(e, i);

		/* A pack's files finish with their writes (rx_pwrite_done). */
		if (r >= 0 && !packed) {
			r = rx_maybe_finish(e, f);
		}
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

static void rx_submit_write(struct engine *e, uint32_t slot)
{
	struct rslot *s = &e->rslots[slot];
	struct efile *f = &e->files[s->fidx];
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
 * The next range of f is an unchanged one (--delta: from the old file,
 * hashed as read back) or zeros (hashed as the zeros it stands for); like
 * held slots, only once the hashing threads have what is before it.
 */
static bool rx_hash_range(struct engine *e, struct efile *f)
{
	bool progress = false;

	if (f->nsr && f->sr[0].offset == f->hash_off && !f->hash_jobs) {
		/* Only a file with an old copy takes SAME (rx_delta_same): it chose how. */
		f->dg->rx_same(e, f, &f->sr[0]);
		f->hash_off += f->sr[0].len;
		memmove(f->sr, f->sr + 1, (f->nsr - 1) * sizeof(*f->sr));
		f->nsr--;
		e->zr_total--;
		progress = true;
	}
	if (f->nzr && f->zr[0].offset == f->hash_off && !f->hash_jobs) {
		if (f->failed) {
		} else if (f->dg && f->dg->rx_zeros) {
			f->dg->rx_zeros(e, f, f->zr[0].offset, f->zr[0].len);
		} else {
			hash_zeros(&f->hash, f->zr[0].len);
		}
		f->hash_off += f->zr[0].len;
		memmove(f->zr, f->zr + 1, (f->nzr - 1) * sizeof(*f->zr));
		f->nzr--;
		e->zr_total--;
		progress = true;
	}
	return progress;
}

/* Held slot i is f's next bytes: hashed here, on its thread, or (a failed file) passed. */
static int rx_hash_slot(struct engine *e, struct efile *f, uint32_t i)
{
	struct rslot *s = &e->rslots[i];

	if (f->failed) {
		/* Its digest no longer counts (its thread may still hash). */
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

/* Hash, in file order, every held chunk (and range) that is next for its file. */
void rx_hash_ready(struct engine *e, struct efile *f)
{
	bool progress = true;

	if (!f->tree && !f->hash.state && (f->held || f->nzr || f->nsr)) {
		/* A packed file was hashed whole: nothing of it may stream after. */
		if (f->hash.whole) {
			engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				    "%s: data for a file that came packed", f->name);
			return;
		}
		if (file_hash_init(&f->hash) < 0) {
			engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
			return;
		}
	}
	while (progress && (f->held || f->nzr || f->nsr)) {
		progress = rx_hash_range(e, f);
		for (uint32_t i = 0; i < e->p->slots; i++) {
			const struct rslot *s = &e->rslots[i];

			if (s->state == SL_HELD && !s->hashed && !s->hashing &&
			    &e->files[s->fidx] == f && s->off == f->hash_off) {
				if (rx_hash_slot(e, f, i) < 0) {
					return;
				}
				progress = true;
			}
		}
	}
}

/* A hashing thread has hashed held slot `slot` of f (engine_hashers.c). */
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

/* The slot's descriptor: opened (sealed) into the slot's copy, or decoded from the array. */
static int rx_desc(struct engine *e, uint32_t slot, uint32_t lane, struct proto_desc *d)
{
	int r;

	if (slot >= e->p->slots || e->rslots[slot].state != SL_FREE) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "data for busy or unknown slot %u",
				   slot);
	}
	if (e->sealed) {
		/* Opened into the slot's copy: what rx_slot_hold would take. */
		r = slot_open(e, lane, slot, rx_slot_buf(e, slot), d);
		if (r < 0) {
			return engine_fail_sealed(e, slot, lane, r);
		}
	} else if (proto_desc_decode(e->desc_area + (size_t)slot * PROTO_DESC_LEN, d) < 0) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "bad slot descriptor");
	}
	return 0;
}

/*
 * A chunk of f a sender may send: canonical (aligned to the slot size, full
 * but the last), not hashed yet, not held already, not inside its zeros or
 * unchanged ranges.
 */
static int rx_chunk_check(struct engine *e, struct efile *f, const struct proto_desc *dp)
{
	const struct proto_desc d = *dp;
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
	/* A packed slot names no file of its own (its fidx and off are 0): never this one. */
	for (uint32_t i = 0; f->held && i < e->p->slots; i++) {
		if (e->rslots[i].state == SL_HELD && !e->rslots[i].packed &&
		    &e->files[e->rslots[i].fidx] == f && e->rslots[i].off == d.offset) {
			return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "duplicate chunk for %s",
					   f->name);
		}
	}
	for (uint32_t i = 0; i < f->nzr; i++) {
		if (d.offset >= f->zr[i].offset && d.offset - f->zr[i].offset < f->zr[i].len) {
			return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
					   "chunk for %s inside its zeros", f->name);
		}
	}
	for (uint32_t i = 0; i < f->nsr; i++) {
		if (d.offset >= f->sr[i].offset && d.offset - f->sr[i].offset < f->sr[i].len) {
			return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
					   "chunk for %s inside its unchanged ranges", f->name);
		}
	}
	return 0;
}

/* A held chunk of a tree (whole chunks only) or --partial file: its own digest. */
static void rx_chunk_digest(struct engine *e, struct efile *f, uint32_t slot,
			    const struct proto_desc *d)
{
	if (f->tree && !f->failed &&
	    (d->offset % e->p->chunk_size ||
	     d->len != MIN(e->p->chunk_size, f->size - d->offset))) {
		/* Checked by chunk digests: data comes in whole chunks. */
		file_fail(f, PERR_PROTOCOL, "%s: data at %llu+%u is not a whole chunk", f->name,
			  (unsigned long long)d->offset, d->len);
		f->fail_peer = true;
	}
	if ((f->partial || f->tree) && !f->failed) {
		/* The digest of the bytes that are written (the held ones): journal, tree. */
		XXH128_canonical_t c;

		XXH128_canonicalFromHash(&c, XXH3_128bits(rx_slot_buf(e, slot), d->len));
		memcpy(e->rslots[slot].chash, c.digest, HASH_LEN);
	}
}

/* A descriptor came: its slot holds a chunk of a file (or a pack), checked, held, written, hashed. */
static int rx_data(struct engine *e, uint32_t slot, uint32_t lane)
{
	struct proto_desc d;
	struct rslot *s;
	struct efile *f;
	int r = rx_desc(e, slot, lane, &d);

	if (r < 0) {
		return r;
	}
	if (d.file_id == 0) {
		r = engine_rx_slot(e, slot, lane, &d);
		return r != ENGINE_DECLINED
			   ? r
			   : engine_fail(e, PERR_PROTOCOL, -EBADMSG,
					 "bad packed slot (%u bytes, %u files)", d.len, d.pieces);
	}
	f = file_by_id(e, d.file_id);
	/* FILE_DONE may overtake the data (different connections), not exceed it. */
	if (!f || f->sum_wanted || (f->got_done && f->recv_bytes + d.len > f->done_bytes)) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "data for unknown file id %u",
				   d.file_id);
	}
	r = rx_chunk_check(e, f, &d);
	if (r < 0) {
		return r;
	}
	s = &e->rslots[slot];
	*s = (struct rslot){ .state = SL_HELD,
			     .fidx = file_index(e, f),
			     .off = d.offset,
			     .len = d.len,
			     .lane = lane };
	f->held++;
	f->recv_bytes += d.len;
	r = rx_slot_hold(e, slot, d.len, !f->failed);
	if (r < 0) {
		return r;
	}
	if ((e->p->faults & ENGINE_FAULT_FLIP_BYTE) && d.offset == 0) {
		rx_slot_buf(e, slot)[0] ^= 0xff;
	}
	rx_chunk_digest(e, f, slot, &d);
	if (f->failed) {
		/* Already failed (disk full, ...): drop the bytes, keep the credits flowing. */
		s->hashed = s->written = true;
		r = rx_credit(e, slot);
		return r < 0 ? r : rx_maybe_finish(e, f);
	}
	rx_submit_write(e, slot);
	rx_hash_ready(e, f);
	e->bytes_progress += d.len;
	return 0;
}

void rx_write_done(struct engine *e, uint32_t slot, int res)
{
	struct rslot *s = &e->rslots[slot];
	struct efile *f = &e->files[s->fidx];

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
	e->rslots = calloc(e->p->slots, sizeof(*e->rslots));
	e->commit_batch = calloc(FILE_TABLE, sizeof(*e->commit_batch));
	e->sync_wait = calloc(FILE_TABLE, sizeof(*e->sync_wait));
	e->sync_run = calloc(FILE_TABLE, sizeof(*e->sync_run));
	e->sync_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!e->rslots || !e->commit_batch || !e->sync_wait || !e->sync_run || e->sync_efd < 0 ||
	    engine_watch_add(e, e->sync_efd, rx_sync_ready, ENGINE_WATCH_ALWAYS) < 0) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	engine_uring_handle(e, UD_WRITE, rx_write_done);
	rx_commit_handlers(e);
	e->own_sum_done = rx_sum_done;
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
	r = chan_send(e->p->chan, &m);
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

static int rx_on_message(struct engine *e, struct msg *m)
{
	int r;

	if (e->got_end) {
		return msg_unexpected(e, m);
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
		return msg_unexpected(e, m);
	}
}

/* A descriptor written into the array: a slot holds data. */
static int rx_on_receive(struct engine *e, const struct xport_wc *wc)
{
	uint32_t kind = wc->imm >> PROTO_IMM_KIND_SHIFT;
	uint32_t slot = wc->imm & PROTO_IMM_SLOT_MASK;

	if (kind != PROTO_IMM_DATA || wc->len != e->desc_len) {
		return imm_unexpected(e, wc);
	}
	return rx_data(e, slot, wc->lane);
}

/* Durability batches, held-back credits, directory fsyncs; END once the peer's came. */
static int rx_step(struct engine *e)
{
	int r = rx_sync_step(e);

	if (r >= 0) {
		r = rx_credit_flush(e);
	}
	if (r >= 0) {
		r = rx_commit_batch(e);
	}
	if (r >= 0 && e->got_end && !engine_busy(e)) {
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
	}
	return r;
}

/* Nothing after the peer's END but what every role takes (PING, a lane lost). */
static bool rx_takes_messages(const struct engine *e)
{
	return !e->got_end;
}

/* The sync thread uses directory fds: it finishes before they close. */
static void rx_stop(struct engine *e)
{
	rx_sync_thread_stop(e);
	if (e->sync_efd >= 0) {
		engine_watch_del(e, e->sync_efd);
		close(e->sync_efd);
		e->sync_efd = -1;
	}
	free(e->sync_wait);
	free(e->sync_run);
	e->sync_wait = e->sync_run = NULL;
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
