/* SPDX-License-Identifier: MIT */
/*
 * The sender's pipeline: entries taken from the source and offered (FILES),
 * opened, read through io_uring into pool chunks, hashed in file order,
 * posted into the receiver's free slots; FILE_DONE, and the answers.
 */
#include "engine_tx.h"

/*
 * Skip level checksum: the receiver has a file of this size and wants our
 * digest. The source is opened here and hashed on the hashing thread
 * (engine_sums.c); a source that can't be opened, or has another size now,
 * gets a SUMS entry saying so at once (the receiver then has it copied,
 * where the same failure is reported as usual).
 */
/* The worker's digest of a source the receiver asked about, while it still asks. */
static int tx_own_sum(struct engine *e, struct efile *f, int r, const uint8_t hash[HASH_LEN])
{
	return sums_wanted(e, f) ? tx_sum_done(e, f, r, hash) : 0;
}

static int tx_sum_start(struct engine *e, struct efile *f)
{
	struct stat st;
	int fd, r = sums_want(e, f, true);

	if (r < 0) {
		return engine_fail(e, PERR_INTERNAL, r, "out of memory");
	}
	if (f->src_window) {
		/* A digest of the whole source would not be this part's: no answer, it is sent. */
		return tx_sum_done(e, f, -EOPNOTSUPP, NULL);
	}
	r = diskio_open_read_flags(f->src_dirfd, f->src_path, 0, f->src_device ? DISKIO_BLOCK : 0,
				   &fd, NULL, &st);
	if (r < 0) {
		return tx_sum_done(e, f, r, NULL);
	}
	if ((uint64_t)st.st_size != f->size) {
		close(fd);
		return tx_sum_done(e, f, -ESTALE, NULL);
	}
	return sums_queue(e, f, fd, tx_own_sum);
}

/* Our source's digest (or why there is none), for the next SUMS. */
int tx_sum_done(struct engine *e, struct efile *f, int r, const uint8_t hash[HASH_LEN])
{
	struct sums_state *ss = sums_state(e);
	struct proto_sum *ps;

	if (!ss->out) {
		ss->out = calloc(PROTO_MAX_BATCH, sizeof(*ss->out));
		if (!ss->out) {
			return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
	}
	if (ss->nout == PROTO_MAX_BATCH && tx_sums_flush(e) < 0) {
		return -EIO;
	}
	ps = &ss->out[ss->nout++];
	*ps = (struct proto_sum){ .id = f->id };
	if (r < 0) {
		ps->status = r == -ESTALE ? PERR_SOURCE_CHANGED : errno_to_perr(r);
	} else {
		memcpy(ps->hash, hash, HASH_LEN);
	}
	return 0;
}

int tx_sums_flush(struct engine *e)
{
	struct sums_state *ss = sums_state(e);
	struct msg m = { .type = MSG_SUMS };
	int r;

	if (!ss || ss->nout == 0) {
		return 0;
	}
	m.u.sums.count = ss->nout;
	m.u.sums.sums = ss->out;
	ss->nout = 0;
	r = chan_queue(e->p->chan, &m);
	if (r < 0) {
		return engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
	}
	return 0;
}

/*
 * An entry the receiver kept (SKIPPED): a regular file by the skip level
 * (PROTO_CAP_SKIP), or a directory or symlink there already
 * (PROTO_CAP_ITEMIZE). Not read, not sent, not a failure.
 */
static int tx_check_kept(struct engine *e, const struct efile *f)
{
	bool file = f->ftype == PROTO_FT_REG || f->ftype == PROTO_FT_HARDLINK;

	if (file && !(e->p->peer_caps & PROTO_CAP_SKIP)) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "FILES_ACK: SKIPPED from a peer without skip levels");
	}
	if (!file && !(e->p->peer_caps & PROTO_CAP_ITEMIZE)) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "FILES_ACK: SKIPPED for a directory or symlink");
	}
	return 0;
}

/*
 * A final answer for f: kept, planned (a probe), made there (not a regular
 * file), or refused: f is resolved and leaves the table. OK for a regular
 * file (or a hard link) leaves it to be sent.
 */
static int tx_file_answered(struct engine *e, struct efile *f, const struct proto_status *st)
{
	int r;

	if (st->status == PERR_SKIPPED) {
		r = tx_check_kept(e, f);
		if (r == 0) {
			r = engine_tx_skipped(e, f);
		}
		if (r < 0) {
			return r;
		}
		file_note_kept(e, f);
	} else if (st->status == PERR_OK && engine_probe(e)) {
		/* A probe: the answer is the result; nothing is read or sent. */
		file_note_planned(e, f->name, f->ftype, f->size);
	} else if (st->status == PERR_OK && f->ftype == PROTO_FT_HARDLINK) {
		/* Made (or waiting for its file) there: its FILE_RESULT says. */
		f->done_sent = true;
		return 0;
	} else if (st->status == PERR_OK && f->ftype != PROTO_FT_REG) {
		file_note_committed(e, f, 0, NULL);
	} else if (st->status != PERR_OK) {
		/* The receiver refused it. */
		file_note_failure(e, f->name, f->ftype, st->status, false,
				  st->text ? st->text : "");
	} else {
		return 0;
	}
	e->offered_unresolved--;
	file_release(e, f);
	return 0;
}

/*
 * SKIPPED with PROTO_ITEM_WAIT (PROTO_CAP_KEPT_ITEMS, -X/-A): a kept regular
 * file whose attributes the receiver takes first; they go now (the
 * tx_skipped hook), and its answer comes again. Once per file. A kept
 * directory's (PROTO_CAP_DIR_ITEMS) went right after its FILES batch.
 */
static int tx_kept_wait(struct engine *e, struct efile *f, const struct proto_status *st)
{
	int r;

	if (st->status != PERR_SKIPPED || f->kept_wait || !xattr_kept_waits(e, f->ftype)) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "FILES_ACK: a wait for id %u unexpected", st->id);
	}
	f->kept_wait = true;
	r = engine_tx_skipped(e, f);
	if (r <= 0) {
		return r;
	}
	/* Nothing could be sent: a failure here, and the receiver stops waiting (ENTRY_FAILED). */
	file_note_failure(e, f->name, f->ftype, (uint32_t)r, true, file_fail_text(f));
	if (e->p->peer_caps & PROTO_CAP_ENTRY_FAILED) {
		struct msg m = { .type = MSG_ENTRY_FAILED };

		m.u.entry_failed.status = (uint32_t)r;
		snprintf(m.u.entry_failed.name, sizeof(m.u.entry_failed.name), "%s", f->name);
		snprintf(m.u.entry_failed.text, sizeof(m.u.entry_failed.text), "%s",
			 file_fail_text(f));
		r = chan_queue(e->p->chan, &m);
		if (r < 0) {
			return engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
	}
	e->offered_unresolved--;
	file_release(e, f);
	return 0;
}

static int tx_files_ack(struct engine *e, const struct msg_files_ack *a)
{
	for (size_t i = 0; i < a->count; i++) {
		struct efile *f = file_by_id(e, a->st[i].id);
		int r;

		if (!f || f->acked) {
			return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
					   "FILES_ACK for unknown id %u", a->st[i].id);
		}
		if (a->st[i].status == PERR_SUM_WANTED) {
			/* Once per file, for a regular file, from a peer that has the level. */
			if (f->ftype != PROTO_FT_REG || sums_wanted(e, f) ||
			    !(e->p->peer_caps & PROTO_CAP_CHECK)) {
				return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
						   "FILES_ACK: SUM_WANTED for id %u unexpected",
						   a->st[i].id);
			}
			r = tx_sum_start(e, f);
			if (r < 0) {
				return r;
			}
			continue;
		}
		/* The answer after SUM_WANTED: our digest, if still being made, is not needed. */
		(void)sums_want(e, f, false);
		if (a->st[i].items && !(e->p->peer_caps & PROTO_CAP_ITEMIZE)) {
			return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
					   "FILES_ACK: items from a peer without them");
		}
		if (a->st[i].items & PROTO_ITEM_WAIT) {
			r = tx_kept_wait(e, f, &a->st[i]);
			if (r < 0) {
				return r;
			}
			continue;
		}
		f->acked = true;
		f->items = a->st[i].items;
		r = tx_file_answered(e, f, &a->st[i]);
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/*
 * The receiver's END counts every entry it resolved, failures included. One
 * more than we heard of failed at its end, after its answer for the entry:
 * a directory whose mode or time (-p) it could not set last, or whose
 * attributes it could not set. Counted as failures here too (the run's
 * exit code says so), and told once; the receiver's log has the names.
 */
static void tx_unheard_failures(struct engine *e, uint32_t peer_files)
{
	uint64_t mine = e->st.files_ok + e->st.files_failed + e->st.files_skipped +
			e->st.files_updated + e->st.files_planned;
	char text[160];

	if (peer_files <= mine) {
		return;
	}
	e->st.files_failed += peer_files - mine;
	if (!e->st.first_error) {
		e->st.first_error = PERR_IO;
		e->st.first_error_local = false;
	}
	snprintf(text, sizeof(text),
		 "%" PRIu64 " failed at the receiver after the transfer (a directory's mode or "
		 "time, or attributes): its log names them",
		 peer_files - mine);
	if (e->p->ev.notice) {
		e->p->ev.notice(e->p->ev.ud, "entries", text);
	}
}

static int tx_file_result(struct engine *e, const struct msg_file_result *res)
{
	struct efile *f = file_by_id(e, res->id);
	uint64_t unsent = f ? engine_file_unsent_bytes(e, f) : 0;

	if (!f || !f->done_sent) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "FILE_RESULT for unknown id %u",
				   res->id);
	}
	if (res->status == PERR_OK && f->resumed) {
		file_note_resumed(e, f, f->size - f->resumed - unsent, f->resumed, f->done_hash);
	} else if (res->status == PERR_OK) {
		file_note_committed(e, f, f->size - unsent,
				    f->ftype == PROTO_FT_REG ? f->done_hash : NULL);
	} else if (f->failed) {
		/* Ours (open, read, a source that changed): the receiver only echoes it. */
		file_note_failure(e, f->name, f->ftype, f->fail_code, true, file_fail_text(f));
	} else {
		file_note_failure(e, f->name, f->ftype, res->status, false, res->text);
	}
	e->offered_unresolved--;
	file_release(e, f);
	return 0;
}

/*
 * The receiver keeps these ranges of a file it has not answered for yet
 * (--partial). Only from a peer that said it knows RESUME, only for a
 * regular file, once, and only whole chunks of it (the last may be short).
 */
static int tx_resume(struct engine *e, const struct msg_resume *rs)
{
	struct efile *f = file_by_id(e, rs->id);
	uint64_t cs = e->p->chunk_size;

	if (!(e->p->peer_caps & PROTO_CAP_PARTIAL) || !f || f->acked || f->resume ||
	    f->ftype != PROTO_FT_REG || rs->count == 0) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "RESUME for id %u out of place",
				   rs->id);
	}
	for (uint16_t i = 0; i < rs->count; i++) {
		const struct proto_range *g = &rs->r[i];

		/* The decoder checked order and overflow; the file's size and chunks are ours. */
		if (g->offset % cs || g->offset >= f->size || g->len > f->size - g->offset ||
		    (g->len % cs && g->offset + g->len != f->size)) {
			return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
					   "RESUME for %s: range %llu+%llu not whole chunks of it",
					   f->name, (unsigned long long)g->offset,
					   (unsigned long long)g->len);
		}
	}
	f->resume = calloc(rs->count, sizeof(*f->resume));
	if (!f->resume) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	memcpy(f->resume, rs->r, rs->count * sizeof(*f->resume));
	f->nresume = rs->count;
	return 0;
}

/* Sender: the first message must be the receiver's ring, and it must fit. */
int tx_wait_ring(struct engine *e)
{
	struct msg m;
	int r = chan_recv(e->p->chan, &m, e->p->idle_timeout_ms);

	if (r < 0) {
		return engine_fail(e, chan_err_code(r), r, "waiting for the receiver's ring: %s",
				   strerror(-r));
	}
	if (m.type == MSG_ERROR) {
		r = engine_fail(e, m.u.error.code, -EREMOTEIO, "peer: %s", m.u.error.text);
		msg_clear(&m);
		return r;
	}
	if (m.type != MSG_RING || m.u.ring.slots != e->p->slots ||
	    m.u.ring.slot_size != e->p->chunk_size || m.u.ring.nkeys != e->p->x->nlanes) {
		msg_clear(&m);
		chan_send_error(e->p->chan, PERR_PROTOCOL, "bad RING");
		e->error_sent = true;
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "receiver sent a bad RING");
	}
	e->rring_addr = m.u.ring.addr;
	e->rdesc_addr = m.u.ring.desc_addr;
	memcpy(e->rkey, m.u.ring.rkey, sizeof(uint32_t) * m.u.ring.nkeys);
	for (uint32_t i = 0; i < e->p->slots; i++) {
		tx_free_push(e, e->p->slots - 1 - i);
	}
	e->have_ring = true;
	/* Memory windows: no slot is ours before its credit names its window. */
	r = engine_fence_ring(e, &m.u.ring);
	return r < 0 ? r : 0;
}

/*
 * Fill and post. A probe has no data path: its files end with their
 * answers. Chunks passed over without a slot (zeros, kept bytes) free the
 * pool with no event to wake us: fill it again at once, a bounded number of
 * times, and then have the loop come back without sleeping.
 */
static int tx_fill_and_post(struct engine *e)
{
	int r = 0;

	for (unsigned turn = 0; r >= 0 && !engine_probe(e); turn++) {
		uint64_t passes = e->passes;

		r = tx_fill(e);
		if (r >= 0) {
			r = tx_post_ready(e);
		}
		if (e->passes == passes) {
			break;
		}
		if (turn == TX_PASS_TURNS) {
			e->again = true;
			break;
		}
	}
	return r;
}

/*
 * Files that failed while reading owe a FILE_DONE once their chunks are
 * gone. Only started ones can: none (a re-run that skips every file)
 * spares the walk over the whole table on every turn. Then END, once every
 * entry is offered and answered.
 */
static int tx_finish_step(struct engine *e)
{
	int r;

	for (size_t i = 0; e->tx_unfinished > 0 && i < e->files_hw; i++) {
		struct efile *f = file_at(e, i);
		if (f->used && f->failed && f->started && !f->done_sent && f->chunks_out == 0) {
			r = tx_send_done(e, f);
			if (r < 0) {
				return r;
			}
		}
	}
	if (!e->sent_end && e->src_done && !e->next_src && e->offered_unresolved == 0) {
		struct msg m = { .type = MSG_END };
		m.u.end.files = e->offered;
		m.u.end.bytes = e->st.bytes;
		r = chan_queue(e->p->chan, &m);
		if (r < 0) {
			return engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
		e->sent_end = true;
	}
	return 0;
}

static int step_sender(struct engine *e)
{
	int r = tx_sums_flush(e);
	bool more = false;

	if (r >= 0) {
		r = tx_offer(e);
		more = r > 0;
		r = MIN(r, 0);
	}
	e->again = false;
	if (r >= 0) {
		r = tx_fill_and_post(e);
	}
	if (more) {
		e->again = true; /* the next batch */
	}
	/*
	 * The receiver hashes data behind a zero range only once it has the
	 * range; an unchanged range too, and it copies it from its old file
	 * meanwhile.
	 */
	if (r >= 0) {
		r = engine_tx_flush(e);
	}
	return r < 0 ? r : tx_finish_step(e);
}

/* A hashing thread has hashed posted chunk ci of f (engine_workers.c). */
int tx_hashed(struct engine *e, struct efile *f, uint32_t ci)
{
	tx_chunk_unhold(e, ci);
	return tx_jobs_back(e, f);
}

/* A job of f's came back: its FILE_DONE, if it waited for the last one. */
int tx_jobs_back(struct engine *e, struct efile *f)
{
	if (f->hash_jobs == 0 && f->done_wait) {
		f->done_wait = false;
		return tx_send_done(e, f);
	}
	return 0;
}

static uint32_t tx_data_chunks(const struct engine_params *p)
{
	return p->pool_chunks;
}

/* The pool's chunk states and the receiver's free slots, then its RING. */
static int tx_setup(struct engine *e)
{
	engine_uring_handle(e, UD_READ, tx_read_done);
	e->sums_answered = tx_sums_flush;
	if (engine_probe(e)) {
		return 0; /* no pool, no RING */
	}
	e->chunks = calloc(e->pool->nchunks, sizeof(*e->chunks));
	if (!e->chunks || tx_free_alloc(e) < 0) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	/* Sealed slots are hashed and sealed in one job on them (engine_seal.c). */
	if (hashers_start(e, MIN(e->p->hash_threads, ENGINE_HASH_THREADS_MAX), tx_hashed) < 0) {
		return e->fail_r;
	}
	return tx_wait_ring(e);
}

static int tx_on_message(struct engine *e, struct msg *m)
{
	switch (m->type) {
	case MSG_END:
		if (e->sent_end && !e->got_end) {
			e->got_end = true;
			tx_unheard_failures(e, m->u.end.files);
			return 0;
		}
		break;
	case MSG_FILES_ACK:
		return tx_files_ack(e, &m->u.files_ack);
	case MSG_FILE_RESULT:
		return tx_file_result(e, &m->u.file_result);
	case MSG_RESUME:
		return tx_resume(e, &m->u.resume);
	default:
		break;
	}
	return engine_msg_unexpected(e, m);
}

/* A credit: the receiver has a slot free again. */
int tx_on_credit(struct engine *e, const struct xport_wc *wc)
{
	uint32_t kind = wc->imm >> PROTO_IMM_KIND_SHIFT;
	uint32_t slot = wc->imm & PROTO_IMM_SLOT_MASK;
	int r;

	if (kind != PROTO_IMM_CREDIT || slot >= e->p->slots) {
		return lane_imm_unexpected(e, wc);
	}
	/* Memory windows: the credit's word is the slot window's key; else there is none. */
	r = engine_tx_credit(e, wc, slot);
	if (r < 0) {
		return r;
	}
	if (r == ENGINE_DECLINED && wc->len != 0) {
		return lane_imm_unexpected(e, wc);
	}
	/* Kept by the fence: its chunk goes into it again, or its key is of a lost lane. */
	return r == ENGINE_FENCE_KEPT ? 0 : tx_slot_free(e, slot);
}

/* Ring slot `slot` is credited: free for the next chunk. */
int tx_slot_free(struct engine *e, uint32_t slot)
{
	if (e->nfree_slots >= e->p->slots) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "credit overflow");
	}
	tx_free_push(e, slot);
	e->credits++;
	lane_slot_credited(e, slot);
	return 0;
}

const struct engine_role_ops engine_sender_ops = {
	.data_chunks = tx_data_chunks,
	.peer_writes = false,
	.setup = tx_setup,
	.on_message = tx_on_message,
	.on_receive = tx_on_credit,
	.step = step_sender,
};
