/* SPDX-License-Identifier: MIT */
/*
 * The sender's reads: chunks of a file filled from the disk through io_uring
 * (holes found and passed over as zeros), a short or waiting read taken
 * again, and a file's last chunk read.
 */
#include "engine_tx.h"

static int tx_submit_read(struct engine *e, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = file_at(e, c->fidx);
	uint8_t *buf = pool_chunk(e->pool, ci);
	struct io_uring_sqe *sqe;
	uint32_t want = c->len - c->done;
	int fd = f->fd;
	int r = engine_pin_chunk(e, ci);

	if (r < 0) {
		return r;
	}
	sqe = uring_sqe(e);
	if (!sqe) {
		return engine_fail(e, PERR_IO, -EBUSY, "io_uring queue full");
	}
	/* Direct I/O only for whole, aligned requests; the tail goes buffered. */
	if (f->dfd >= 0 && c->done == 0 &&
	    diskio_dio_ok(&f->dio, buf, f->src_base + c->off, want)) {
		fd = f->dfd;
	}
	io_uring_prep_read_fixed(sqe, fd, buf + c->done, want, f->src_base + c->off + c->done,
				 pool_buf_index(e->pool, buf));
	io_uring_sqe_set_data64(sqe, UD(UD_READ, ci));
	c->state = CH_READING;
	return 0;
}

/*
 * How many bytes from f->read_off (a chunk boundary) are a hole of whole
 * chunks, or a hole to the end of the file: 0 when data starts within the
 * next chunk. SEEK_DATA/SEEK_HOLE, remembered until read_off passes them,
 * so a file of data costs two lseeks. A file system that can't tell has
 * only data; a source that changes meanwhile is caught by the hash and the
 * size checks as ever (a hole that gets data is sent as zeros, and the
 * receiver's whole-file digest matches the sender's, which hashed zeros).
 * A file still being written (avail < its size) is looked at again each
 * time, and only below avail: what lies past it is not there yet.
 */
static uint64_t tx_hole_at(struct engine *e, struct efile *f, uint64_t avail)
{
	uint64_t cs = e->p->chunk_size, off = f->read_off, end, lim = MIN(avail, f->size);

	if (off >= f->next_hole || lim < f->size) {
		/* In the source, at the window's base (0 for a whole file); kept relative to it. */
		uint64_t base = f->src_base, d;

		if (sparse_next_data(f->fd, base + off, base + lim, &d) < 0) {
			d = base + off;
		}
		d = MIN(d - base, lim);
		f->next_data = d;
		if (d >= f->size) {
			f->next_hole = f->size;
		} else {
			off_t h = lseek(f->fd, (off_t)(base + d), SEEK_HOLE);

			f->next_hole =
			    h < 0 || (uint64_t)h - base > f->size ? f->size : (uint64_t)h - base;
			/* Never stuck: the data run is at least one byte long. */
			f->next_hole = MAX(f->next_hole, d + 1);
		}
	}
	if (off >= f->next_data) {
		return 0;
	}
	end = f->next_data >= f->size ? f->size : f->next_data / cs * cs;
	if (end <= off) {
		return 0;
	}
	end = MIN(end - off, ZERO_CHUNK_MAX);
	return end == f->size - off ? end : end / cs * cs;
}

/* Start reads for accepted files while pool chunks are free. */
/* f's next chunks into free pool chunks: read, or (a hole, unchanged chunks) not read at all. */
static int tx_fill_chunks(struct engine *e, struct efile *f)
{
	uint64_t avail = engine_tx_avail(e, f);

	while (f->read_off < f->size && e->pool->nfree > 0) {
		uint64_t hole = engine_zeros(e) ? tx_hole_at(e, f, avail) : 0;
		uint64_t same = !hole && f->dg && f->dg->tx_same_at
				    ? f->dg->tx_same_at(e, f, engine_zeros(e))
				    : 0;

		/* A chunk is read only once it is there whole (or to the file's end). */
		if (!hole && !same &&
		    MIN(f->read_off + e->p->chunk_size, f->size) > MIN(avail, f->size)) {
			return 0;
		}
		int ci = pool_get(e->pool), r;
		struct chunk *c = &e->chunks[ci];

		*c = (struct chunk){ .fidx = file_index(e, f),
				     .off = f->read_off,
				     .len = (uint32_t)MIN((uint64_t)e->p->chunk_size,
							  f->size - f->read_off) };
		if (hole > 0 || same > 0) {
			/*
			 * Not read, one pool chunk for all of it: a hole (zeros), or
			 * chunks the pre-pass found unchanged (a tree file).
			 */
			c->len = (uint32_t)(hole > 0 ? hole : same);
			c->zero = hole > 0;
			c->same = same > 0;
			c->state = CH_READY;
			f->read_off += c->len;
			f->chunks_out++;
			continue;
		}
		f->read_off += c->len;
		f->chunks_out++;
		r = tx_submit_read(e, (uint32_t)ci);
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* What tx_fill_file says: go on to the next file, or stop (no pool chunk, no fd). */
enum { FILL_NEXT = 0, FILL_STOP = 1, FILL_FDS_FULL = 2 };

/* One acked file: opened the first time, its FILE_DONE when failed or empty, else filled. */
static int tx_fill_file(struct engine *e, struct efile *f)
{
	int r;

	if (!f->started) {
		if (e->open_fds >= OPEN_FILES_MAX) {
			return FILL_FDS_FULL;
		}
		f->started = true;
		e->tx_unfinished++;
		r = tx_open(e, f);
		if (r < 0) {
			return r;
		}
	}
	if (f->failed) {
		r = f->chunks_out == 0 ? tx_send_done(e, f) : 0;
		return r < 0 ? r : FILL_NEXT;
	}
	if (f->size == 0 && !f->finished) {
		f->finished = true;
		r = tx_send_done(e, f);
		return r < 0 ? r : FILL_NEXT;
	}
	/* Read by a feature (whole, into the pack being filled, with the others). */
	r = f->read_off == 0 && engine_tx_avail(e, f) >= f->size ? engine_tx_read(e, f)
								 : ENGINE_DECLINED;
	if (r != ENGINE_DECLINED) {
		return r < 0 ? r : r == ENGINE_TX_FULL ? FILL_STOP : FILL_NEXT;
	}
	return tx_fill_chunks(e, f);
}

/*
 * From the oldest file that may still be read: past those resolved, done,
 * or kept with their answer held (kept_wait), which are never read; a
 * file not answered yet stops it. Else every turn walks a window of them.
 */
static void tx_fill_advance(struct engine *e)
{
	const struct efile *f;

	tx_oldest_advance(e);
	e->fill_id = MAX(e->fill_id, e->oldest_id);
	while (e->fill_id <= e->next_id &&
	       (!(f = file_by_id(e, e->fill_id)) || f->kept_wait || f->done_sent)) {
		e->fill_id++;
	}
}

int tx_fill(struct engine *e)
{
	bool fds_full = false;

	/* Walk files in id order, from the oldest that may still be read. */
	tx_fill_advance(e);
	for (uint32_t id = e->fill_id;
	     id <= e->next_id && (e->pool->nfree > 0 || engine_tx_filling(e)); id++) {
		struct efile *f = file_by_id(e, id);
		int r;

		if (!f || !f->acked || f->done_sent) {
			continue;
		}
		r = tx_fill_file(e, f);
		if (r < 0) {
			return r;
		}
		if (r == FILL_FDS_FULL) {
			fds_full = true;
		}
		if (r != FILL_NEXT) {
			break;
		}
	}
	/*
	 * A pack goes when nothing more can join it now; one that waits only
	 * for open files to close (their reads complete) stays open for more.
	 */
	if (!fds_full) {
		engine_tx_read_end(e);
	}
	return 0;
}

void tx_chunk_drop(struct engine *e, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = file_at(e, c->fidx);

	c->state = CH_FREE;
	pool_put(e->pool, ci);
	f->chunks_out--;
}

/*
 * A read answered -EAGAIN or -EINTR is submitted again: returns 0 for that,
 * else 1 with *res the read's answer. On an fd still O_NONBLOCK (tx_open),
 * -EAGAIN means its file system would not wait for the disk on io_uring's
 * worker (ext4, XFS and btrfs do), so the fd blocks from now on.
 */
int tx_read_again(struct engine *e, struct efile *f, int *res)
{
	if ((e->p->faults & ENGINE_FAULT_READ_EAGAIN) && f->src_nonblock && *res >= 0) {
		*res = -EAGAIN;
	}
	if (*res != -EAGAIN && *res != -EINTR) {
		return 1;
	}
	if (*res == -EAGAIN && f->src_nonblock) {
		if (fcntl(f->fd, F_SETFL, 0) < 0) {
			*res = negerrno();
			return 1;
		}
		f->src_nonblock = false;
	}
	return 0;
}

/* A worker made chunk j->idx's own digest: ready, to be folded when posted (tx_chunk_hash). */
static int tx_digested(struct engine *e, struct wjob *j, struct efile *f)
{
	struct chunk *c = &e->chunks[j->idx];

	(void)f;
	memcpy(c->chash, j->chash, HASH_LEN);
	c->digested = true;
	c->state = CH_READY;
	return 0;
}

/*
 * Chunk ci of f is read whole: ready, or, for a tree folded from digests
 * made apart (engine_digest_folds) with workers, ready once one has made its
 * digest, so that one file's chunks hash side by side; ready now where the
 * worker that seals it makes its digest in the same pass (engine_digest_in_seal).
 */
static void tx_chunk_read(struct engine *e, struct efile *f, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];

	/* Data that reads as zeros goes as zeros, when the receiver knows ZEROS. */
	c->zero = engine_zeros(e) && sparse_all_zero(pool_chunk(e->pool, ci), c->len);
	if (c->zero || !e->hashers || !engine_digest_folds(e, f) ||
	    engine_digest_in_seal(e, f, c)) {
		c->state = CH_READY;
		return;
	}
	workers_digest(e, ci, pool_chunk(e->pool, ci), c->len, tx_digested);
}

void tx_read_done(struct engine *e, uint32_t ci, int res)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = file_at(e, c->fidx);

	if (tx_read_again(e, f, &res) == 0) {
		tx_submit_read(e, ci);
		return;
	}
	if (res < 0) {
		file_fail(f, PERR_IO, "read: %s", strerror(-res));
	} else if (res == 0) {
		file_fail(f, PERR_SOURCE_CHANGED, "file shrank while being read (at %llu of %llu)",
			  (unsigned long long)(c->off + c->done), (unsigned long long)f->size);
	} else {
		c->done += (uint32_t)MIN((uint32_t)res, c->len - c->done);
		if (c->done < c->len) {
			tx_submit_read(e, ci); /* short read: the rest, buffered */
			return;
		}
		tx_chunk_read(e, f, ci);
		return;
	}
	/* Failed: this chunk will never be sent; neither will later ones. */
	tx_chunk_drop(e, ci);
}

/* Hash and post every ready chunk that is next in its file, while slots last. */
/* The last chunk of f is posted: its FILE_DONE, unless the source changed size meanwhile. */
int tx_file_sent(struct engine *e, struct efile *f)
{
	uint64_t size;

	if (diskio_fd_size(f->fd, &size) == 0 && size != f->src_whole) {
		file_fail(f, PERR_SOURCE_CHANGED,
			  "file changed size while being sent (%llu -> %llu)",
			  (unsigned long long)f->src_whole, (unsigned long long)size);
	}
	return tx_send_done(e, f);
}
