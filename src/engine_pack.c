/* SPDX-License-Identifier: MIT */
/*
 * Packed slots (PROTO_CAP_PACK): many small files in one slot. The sender
 * reads whole files back to back into one pool chunk (one io_uring read
 * each), appends a table of (id, length), and posts it as one chunk: one
 * payload WRITE, one descriptor, one credit for all of them. The receiver
 * checks the table against the files it has accepted, hashes each file (a
 * piece is always a whole file, so in file order), and writes each to its
 * temp file; the slot's credit goes back when the last write is done. A
 * file's FILE_DONE, its commit and its FILE_RESULT are the same as for a
 * file sent alone.
 */
#include "engine-internal.h"
#include "engine_delta.h"

#include "hello.h"

extern const struct engine_feature engine_feature_pack;

/*
 * A file that travels packed: the sender's pool chunk or the receiver's
 * slot it travels in, where its bytes start there, how many are read or
 * written; the sender's next file in the same pack (fidx + 1).
 */
struct pack_file {
	bool packed;
	uint32_t pk_at, pk_off, pk_done, pk_next;
};

/* f's pack state: every file of a session with packed slots has it. */
static struct pack_file *pack_file(const struct engine *e, const struct efile *f)
{
	return engine_file_state(e, &engine_feature_pack, f);
}

/* The largest file that may travel packed with this chunk size. */
static uint64_t pack_file_max(const struct engine *e)
{
	return PACK_FILE_MAX_FOR(e->p->chunk_size);
}

/* The session state of packed slots (on when both ends know them). */
struct pack_state {
	bool pack;
	int32_t ci;		    /* sender: the pack being filled, -1 none */
	struct proto_piece *pieces; /* receiver: a packed slot's table, decoded */
};

static struct pack_state *pack_of(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_pack);
}

/* Sender: may f travel in a pack? Only a plain whole regular file. */
static bool tx_packable(const struct engine *e, const struct efile *f)
{
	struct pack_state *pk = pack_of(e);
	return pk->pack && f->ftype == PROTO_FT_REG && f->size > 0 && f->size <= pack_file_max(e) &&
	       !f->src_device && !f->src_window && !f->failed && f->nresume == 0 &&
	       delta_ndsum(e, f) == 0 && !f->tree && f->fd >= 0;
}

static void tx_pack_ready(struct engine *e, struct chunk *c)
{
	if (c->closed && c->reads_out == 0) {
		c->state = CH_READY;
	}
}

/* The pack being filled takes no more files; it goes once its reads are done. */
static void tx_pack_close(struct engine *e)
{
	struct pack_state *ps = pack_of(e);
	struct chunk *c;

	if (ps->ci < 0) {
		return;
	}
	c = &e->chunks[ps->ci];
	ps->ci = -1;
	c->closed = true;
	tx_pack_ready(e, c);
}

static int tx_pread_submit(struct engine *e, struct efile *f)
{
	const struct pack_file *pk = pack_file(e, f);
	uint8_t *buf = pool_chunk(e->pool, pk->pk_at) + pk->pk_off;
	struct io_uring_sqe *sqe = uring_sqe(e);

	if (!sqe) {
		return engine_fail(e, PERR_IO, -EBUSY, "io_uring queue full");
	}
	/* Not a fixed buffer: a run of small files pins nothing (engine_pin_chunk). */
	io_uring_prep_read(sqe, f->fd, buf + pk->pk_done, (unsigned)(f->size - pk->pk_done),
			   pk->pk_done);
	io_uring_sqe_set_data64(sqe, UD(UD_PREAD, file_index(e, f)));
	return 0;
}

/*
 * f (packable, opened) into the pack being filled, or a new one: 1 when it
 * is on its way, 0 when no pool chunk is free for a new pack, or -errno.
 */
static int tx_pack_add(struct engine *e, struct efile *f)
{
	uint64_t cs = e->p->chunk_size;
	struct pack_state *ps = pack_of(e);
	struct pack_file *pk = pack_file(e, f);
	struct chunk *c = ps->ci >= 0 ? &e->chunks[ps->ci] : NULL;
	/* Its bytes and the table with one more entry; a pack within a piece's length of full has no room. */
	uint64_t used = c ? c->fill + (uint64_t)(c->npieces + 1) * PROTO_PIECE_LEN : 0;

	if (c && (c->npieces == PROTO_MAX_PIECES || used > cs || f->size > cs - used)) {
		tx_pack_close(e);
		c = NULL;
	}
	if (!c) {
		int ci;

		if (e->pool->nfree == 0) {
			return 0;
		}
		ci = pool_get(e->pool);
		c = &e->chunks[ci];
		*c = (struct chunk){ .state = CH_READING, .packed = true };
		ps->ci = ci;
	}
	pk->packed = true;
	pk->pk_at = (uint32_t)ps->ci;
	pk->pk_off = c->fill;
	pk->pk_done = 0;
	pk->pk_next = 0;
	if (c->last) {
		pack_file(e, file_at(e, c->last - 1))->pk_next = file_index(e, f) + 1;
	} else {
		c->first = file_index(e, f) + 1;
	}
	c->last = file_index(e, f) + 1;
	c->fill += (uint32_t)f->size;
	c->npieces++;
	c->reads_out++;
	f->read_off = f->size;
	f->chunks_out = 1;
	return tx_pread_submit(e, f) < 0 ? -EIO : 1;
}

/*
 * A packed file's read completed. Whole, and the file still that size: its
 * descriptor closes at once (the pack needs only its bytes), so many files
 * can fill a pack. A failure is the file's own; its place in the pack stays
 * (the receiver discards it on its FILE_DONE).
 */
void tx_pread_done(struct engine *e, uint32_t fidx, int res)
{
	struct efile *f = file_at(e, fidx);
	struct pack_file *pk = pack_file(e, f);
	struct chunk *c = &e->chunks[pk->pk_at];
	uint64_t size;

	if (tx_read_again(e, f, &res) == 0) {
		tx_pread_submit(e, f);
		return;
	}
	if (res < 0) {
		file_fail(f, PERR_IO, "read: %s", strerror(-res));
	} else if (res == 0) {
		file_fail(f, PERR_SOURCE_CHANGED, "file shrank while being read (at %u of %llu)",
			  pk->pk_done, (unsigned long long)f->size);
	} else {
		pk->pk_done += (uint32_t)MIN((uint64_t)res, f->size - pk->pk_done);
		if (pk->pk_done < f->size) {
			tx_pread_submit(e, f); /* short read: the rest */
			return;
		}
		if (diskio_fd_size(f->fd, &size) == 0 && size != f->size) {
			file_fail(f, PERR_SOURCE_CHANGED,
				  "file changed size while being read (%llu -> %llu)",
				  (unsigned long long)f->size, (unsigned long long)size);
		}
	}
	close(f->fd);
	f->fd = -1;
	e->open_fds--;
	c->reads_out--;
	tx_pack_ready(e, c);
}

/*
 * Pack ci, its reads done: each file hashed (whole, so in file order), the
 * table written behind the files, one slot posted, and every file's
 * FILE_DONE queued.
 */
static int tx_post_pack(struct engine *e, uint32_t ci, unsigned lane)
{
	struct chunk *c = &e->chunks[ci];
	uint8_t *buf = pool_chunk(e->pool, ci);
	uint32_t n = 0, len = c->fill + c->npieces * PROTO_PIECE_LEN;
	int slot, r;

	for (uint32_t i = c->first; i; i = pack_file(e, file_at(e, i - 1))->pk_next) {
		struct efile *f = file_at(e, i - 1);
		struct proto_piece pc = { .id = f->id, .len = (uint32_t)f->size };

		if (!f->failed) {
			file_hash_whole(&f->hash, buf + pack_file(e, f)->pk_off, f->size);
		}
		proto_piece_encode(&pc, buf + c->fill + (size_t)n++ * PROTO_PIECE_LEN);
	}
	assert(n == c->npieces);
	slot = tx_post_slot(e, ci, lane, 0, 0, len, n, NULL);
	if (slot < 0) {
		return slot;
	}
	c->state = CH_POSTED;
	c->slot = (uint32_t)slot;
	e->st.packed_slots++;
	e->st.files_packed += n;
	e->bytes_progress += len;
	e->bw_sent += len;
	for (uint32_t i = c->first; i; i = pack_file(e, file_at(e, i - 1))->pk_next) {
		struct efile *f = file_at(e, i - 1);

		f->send_off = f->size;
		f->chunks_out = 0;
		r = tx_send_done(e, f);
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

static int rx_pwrite_submit(struct engine *e, struct efile *f)
{
	const struct pack_file *pk = pack_file(e, f);
	uint8_t *buf = rx_slot_buf(e, pk->pk_at) + pk->pk_off;
	struct io_uring_sqe *sqe = uring_sqe(e);

	if (!sqe) {
		return engine_fail(e, PERR_IO, -EBUSY, "io_uring queue full");
	}
	io_uring_prep_write(sqe, f->tfd, buf + pk->pk_done, (unsigned)(f->size - pk->pk_done),
			    pk->pk_done);
	io_uring_sqe_set_data64(sqe, UD(UD_PWRITE, file_index(e, f)));
	f->writes_out++;
	return 0;
}

/*
 * The piece's file: one we accepted, a regular file not yet sent a byte of
 * (nor described as kept, zeros or unchanged), whose size is the piece's.
 */
static struct efile *rx_piece_file(struct engine *e, const struct proto_piece *pc)
{
	struct efile *f = file_by_id(e, pc->id);

	if (!f || f->ftype != PROTO_FT_REG || sums_wanted(e, f) || pack_file(e, f)->packed ||
	    f->partial || f->size != pc->len || f->recv_bytes || f->held || f->hash_off ||
	    f->kept || engine_file_unsent_bytes(e, f) || f->nranges ||
	    (f->got_done && f->done_bytes != pc->len)) {
		return NULL;
	}
	return f;
}

/* The slot held, a packed one, and its table (untrusted) decoded into the pieces. */
static int rx_packed_hold(struct engine *e, uint32_t slot, uint32_t lane,
			  const struct proto_desc *d, uint8_t **ret_buf)
{
	struct pack_state *pk = pack_of(e);
	struct rslot *s = &e->rslots[slot];
	uint8_t *buf;
	int r;

	if (!pk->pack || d->len > e->p->chunk_size) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "bad packed slot (%u bytes, %u files)", d->len, d->pieces);
	}
	if (!pk->pieces) {
		pk->pieces = calloc(PROTO_MAX_PIECES, sizeof(*pk->pieces));
		if (!pk->pieces) {
			return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
	}
	*s = (struct rslot){
		.state = SL_HELD, .packed = true, .hashed = true, .len = d->len, .lane = lane
	};
	/* From here the bytes are ours alone: the table is read from what is written. */
	r = rx_slot_hold(e, slot, d->len, true);
	if (r < 0) {
		return r;
	}
	buf = rx_slot_buf(e, slot);
	if (proto_pieces_decode(buf, d, pk->pieces) < 0) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "packed slot: bad table of %u files",
				   d->pieces);
	}
	*ret_buf = buf;
	return 0;
}

/* Piece i of the slot at buf: its file's whole bytes, hashed, and their write submitted. */
static int rx_piece(struct engine *e, uint32_t slot, uint32_t i, uint8_t *buf)
{
	struct pack_state *pk = pack_of(e);
	const struct proto_piece *pc = &pk->pieces[i];
	struct efile *f = rx_piece_file(e, pc);
	int r;

	if (!f) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "packed slot: file id %u (%u bytes) not one in flight whole",
				   pc->id, pc->len);
	}
	*pack_file(e, f) = (struct pack_file){ .packed = true, .pk_at = slot, .pk_off = pc->at };
	f->recv_bytes = pc->len;
	f->hash_off = pc->len;
	if ((e->p->faults & ENGINE_FAULT_FLIP_BYTE) && i == 0) {
		buf[pc->at] ^= 0xff;
	}
	if (f->failed) {
		return 0; /* disk full, ...: its bytes are dropped */
	}
	/* The whole file, in one call (no streaming state unless one was made). */
	if (f->hash.state) {
		file_hash_update(&f->hash, buf + pc->at, pc->len);
	} else {
		file_hash_whole(&f->hash, buf + pc->at, pc->len);
	}
	r = rx_pwrite_submit(e, f);
	if (r < 0) {
		return r;
	}
	e->rslots[slot].pieces_left++;
	return 0;
}

/* A packed slot arrived (descriptor d, file id 0): hold it, check its table, write its files. */
static int rx_packed(struct engine *e, uint32_t slot, uint32_t lane, const struct proto_desc *d)
{
	struct pack_state *pk = pack_of(e);
	struct rslot *s = &e->rslots[slot];
	uint8_t *buf = NULL;
	int r;

	r = rx_packed_hold(e, slot, lane, d, &buf);
	for (uint32_t i = 0; r >= 0 && i < d->pieces; i++) {
		r = rx_piece(e, slot, i, buf);
	}
	if (r < 0) {
		return r;
	}
	e->bytes_progress += d->len;
	e->st.packed_slots++;
	e->st.files_packed += d->pieces;
	r = 0;
	if (s->pieces_left == 0) {
		s->written = true;
		r = rx_credit(e, slot);
	}
	/* The failed ones are done with the slot already: resolved (maybe freed) last. */
	for (uint32_t i = 0; r >= 0 && i < d->pieces; i++) {
		struct efile *f = file_by_id(e, pk->pieces[i].id);

		if (f && f->failed && f->writes_out == 0) {
			r = rx_maybe_finish(e, f);
		}
	}
	return r < 0 ? r : 0;
}

void rx_pwrite_done(struct engine *e, uint32_t fidx, int res)
{
	struct efile *f = file_at(e, fidx);
	struct pack_file *pk = pack_file(e, f);
	uint32_t slot = pk->pk_at;
	struct rslot *s = &e->rslots[slot];

	f->writes_out--;
	if (res == -EAGAIN || res == -EINTR) {
		rx_pwrite_submit(e, f);
		return;
	}
	if (res <= 0) {
		file_fail(f, errno_to_perr(res ? res : -EIO), "write %s: %s", f->name,
			  strerror(res ? -res : EIO));
	} else {
		pk->pk_done += (uint32_t)res;
		if (pk->pk_done < f->size) {
			rx_pwrite_submit(e, f); /* short write: the rest */
			return;
		}
		f->written = f->size;
		if (engine_zeros(e)) {
			int pr = sparse_punch_zeros(f->tfd, rx_slot_buf(e, slot) + pk->pk_off, 0,
						    (uint32_t)f->size);

			if (pr < 0) {
				file_fail(f, errno_to_perr(pr), "punch %s: %s", f->name,
					  strerror(-pr));
			}
		}
	}
	if (--s->pieces_left == 0) {
		s->written = true;
		rx_credit(e, slot);
	}
	rx_maybe_finish(e, f);
}

/* Sender: a small file goes whole into the pack being filled, one slot for many. */
static int pack_tx_read(struct engine *e, struct efile *f)
{
	int r;

	if (!tx_packable(e, f)) {
		return ENGINE_DECLINED;
	}
	r = tx_pack_add(e, f);
	/* r == 0: no pool chunk for a new pack */
	return r < 0 ? r : r == 0 ? ENGINE_TX_FULL : ENGINE_TX_TAKEN;
}

/* A pack: posted whole when the rate and a lane allow. */
static int pack_tx_post(struct engine *e, uint32_t ci)
{
	int pick, r;

	if (e->p->bwlimit && !lane_bw_allows(e, e->chunks[ci].fill)) {
		return READY_STOP;
	}
	pick = lane_pick(e, 2);
	if (pick < 0) {
		return READY_NONE;
	}
	r = tx_post_pack(e, ci, (unsigned)pick);
	return r < 0 ? r : READY_TAKEN;
}

/* Both ends know packed slots. */
static bool pack_enable(struct engine *e)
{
	struct pack_state *pk = pack_of(e);
	const struct engine_params *p = e->p;

	pk->ci = -1;
	pk->pack = p->x && (p->peer_caps & PROTO_CAP_PACK) && (hello_local_caps() & PROTO_CAP_PACK);
	return pk->pack;
}

/* The pack being filled takes more files: the sender reads on without a free pool chunk. */
static bool tx_pack_filling(const struct engine *e)
{
	return pack_of(e)->ci >= 0;
}

static void pack_release(struct engine *e)
{
	free(pack_of(e)->pieces);
}

/* A pack's files are read (sender) and written (receiver) one io_uring operation each. */
static size_t pack_file_size(const struct engine *e)
{
	(void)e;
	return sizeof(struct pack_file);
}

static int pack_setup(struct engine *e)
{
	if (e->p->role == ENGINE_SENDER) {
		engine_uring_handle(e, UD_PREAD, tx_pread_done);
	} else if (e->p->role == ENGINE_RECEIVER) {
		engine_uring_handle(e, UD_PWRITE, rx_pwrite_done);
	}
	return 0;
}

const struct engine_feature engine_feature_pack = {
	.name = "pack",
	.enable = pack_enable,
	.file_size = pack_file_size,
	.state_size = sizeof(struct pack_state),
	.release = pack_release,
	.rx_slot = rx_packed,
	.tx_whole = tx_packable,
	.tx_read = pack_tx_read,
	.tx_read_end = tx_pack_close,
	.tx_filling = tx_pack_filling,
	.tx_post = pack_tx_post,
	.setup = pack_setup,
};
