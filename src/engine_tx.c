/* SPDX-License-Identifier: MIT */
/*
 * The sender's pipeline: entries taken from the source and offered (FILES),
 * opened, read through io_uring into pool chunks, hashed in file order,
 * posted into the receiver's free slots; FILE_DONE, and the answers.
 */
#include "engine-internal.h"

/*
 * Take the next entry from the source unless one is waiting already. False
 * when there is none: the source is done, or failed (then the peer is told).
 */
static bool tx_have_src(struct engine *e)
{
	const struct engine_source *src = &e->p->source;
	char why[256] = "";
	int r;

	if (e->next_src || e->src_done || e->failed) {
		return e->next_src != NULL;
	}
	r = src->next ? src->next(src->ud, &e->next_src, why, sizeof(why)) : 0;
	if (r > 0 && e->offered == UINT32_MAX) {
		r = -E2BIG; /* ids and END's count are 32-bit */
	}
	if (r <= 0) {
		e->next_src = NULL;
		e->src_done = true;
	}
	if (r < 0) {
		if (!why[0]) {
			snprintf(why, sizeof(why), "listing the sources: %s", strerror(-r));
		}
		chan_send_error(e->p->chan, errno_to_perr(r), "%s", why);
		fail(e, errno_to_perr(r), r, "%s", why);
	}
	return e->next_src != NULL;
}

/*
 * An entry the source could not make (s->error): a failed file here, and
 * the receiver is told so it counts it too (a peer from before
 * ENTRY_FAILED only sees the session's failure count fall short).
 */
static int tx_entry_failed(struct engine *e, const struct engine_src *s)
{
	struct msg m = { .type = MSG_ENTRY_FAILED };
	uint32_t code = errno_to_perr(s->error);
	int r;

	note_failure(e, s->name, s->ftype, code, true, s->why);
	if (!(e->p->peer_caps & PROTO_CAP_ENTRY_FAILED)) {
		return 0;
	}
	m.u.entry_failed.status = code;
	snprintf(m.u.entry_failed.name, sizeof(m.u.entry_failed.name), "%s", s->name);
	snprintf(m.u.entry_failed.text, sizeof(m.u.entry_failed.text), "%s", s->why);
	r = chan_queue(e->p->chan, &m);
	return r < 0 ? fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* Room for one more file in flight: the receiver's window, and our memory for names. */
static bool tx_room(const struct engine *e)
{
	return e->offered_unresolved < e->files_window &&
	       (e->names_in_flight < ENGINE_NAMES_IN_FLIGHT_MAX || e->offered_unresolved == 0);
}

/* oldest_id: the lowest id still in flight, or next_id + 1 when none is. */
static void tx_oldest_advance(struct engine *e)
{
	while (e->oldest_id <= e->next_id && !file_by_id(e, e->oldest_id)) {
		e->oldest_id++;
	}
}

/*
 * Source entry s as file id: its place in the file table and its FILES
 * record. 1: taken; 0: its place is still in use (offer it later); -errno.
 * *ret_link is the record's own copy of the symlink target (the source may
 * reuse s); on failure nothing is left to free.
 */
static int tx_file_new(struct engine *e, const struct engine_src *s, uint32_t id,
		       struct proto_file *ret_pf, char **ret_link)
{
	struct efile *f = &e->files[id % FILE_TABLE];
	const char *first = NULL;
	uint8_t ftype = s->ftype;
	int r;

	/* The receiver's table may be smaller than ours: its span is the bound. */
	tx_oldest_advance(e);
	if (f->used || id - e->oldest_id >= e->files_span) {
		return 0;
	}
	r = tx_link_check(e, s, &first);
	if (r < 0) {
		return fail(e, PERR_INTERNAL, r, "out of memory");
	}
	if (r > 0) {
		ftype = PROTO_FT_HARDLINK;
	}
	file_take(e, f, id);
	f->name = strdup(s->name);
	f->src_path = strdup(s->path);
	f->src_dirfd = s->dirfd;
	f->src_device = s->device;
	f->ftype = ftype;
	f->size = ftype == PROTO_FT_REG ? s->size : 0;
	f->src_whole = f->size;
	if (s->window && ftype == PROTO_FT_REG) {
		if (s->window_off > s->window_whole || s->size > s->window_whole - s->window_off) {
			return fail(e, PERR_INTERNAL, -EINVAL, "a window beyond its file");
		}
		f->src_window = true;
		f->src_base = s->window_off;
		f->src_whole = s->window_whole;
	}
	ts_now(&f->t0);
	if (first) {
		*ret_link = strdup(first);
	} else {
		*ret_link = s->link ? strdup(s->link) : NULL;
	}
	if (!f->name || !f->src_path || ((s->link || first) && !*ret_link)) {
		free(*ret_link);
		return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	f->name_bytes = (uint32_t)(strlen(f->name) + strlen(f->src_path) + 2);
	e->names_in_flight += f->name_bytes;
	*ret_pf = (struct proto_file){
		.id = id,
		.ftype = ftype,
		.mode = s->mode & 07777,
		.size = f->size,
		.mtime_sec = s->mtime.tv_sec,
		.mtime_nsec = (uint32_t)s->mtime.tv_nsec,
		.uid = s->uid,
		.gid = s->gid,
		.name = f->name,
		.link = *ret_link,
	};
	return 1;
}

/* One FILES batch of n records on its way; the links are freed either way. */
static int tx_send_files(struct engine *e, struct proto_file *pf, char **links, uint32_t n)
{
	struct msg m = { .type = MSG_FILES };
	int r;

	m.u.files.count = (uint16_t)n;
	m.u.files.files = pf;
	r = chan_queue(e->p->chan, &m);
	for (uint32_t i = 0; i < n; i++) {
		free(links[i]);
	}
	return r < 0 ? fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/*
 * One FILES batch taken from the source and offered, per loop turn. The
 * walk is the slow part (a stat per entry): offering the whole window at
 * once would keep the data path idle while it runs (6,144 entries, about
 * 70 ms here, before the first read). One batch, then the loop reads and
 * sends what the receiver has accepted, and comes back without sleeping.
 * Returns 1 when there is room and source for another batch.
 */
static int tx_offer(struct engine *e)
{
	struct proto_file pf[PROTO_MAX_BATCH];
	char *links[PROTO_MAX_BATCH];
	uint32_t n = 0;
	int r;

	while (n < PROTO_MAX_BATCH && tx_room(e) && tx_have_src(e)) {
		const struct engine_src *s = e->next_src;

		if (s->error) {
			e->next_src = NULL;
			if (tx_entry_failed(e, s) < 0) {
				break;
			}
			continue;
		}
		r = tx_file_new(e, s, e->next_id + 1, &pf[n], &links[n]);
		if (r < 0) {
			for (uint32_t i = 0; i < n; i++) {
				free(links[i]);
			}
			return r;
		}
		if (r == 0) {
			break;
		}
		e->next_id++;
		n++;
		e->next_src = NULL;
		e->offered++;
		e->offered_unresolved++;
	}
	if (n == 0 || e->failed) {
		for (uint32_t i = 0; i < n; i++) {
			free(links[i]);
		}
		return e->failed ? e->fail_r : 0;
	}
	r = tx_send_files(e, pf, links, n);
	/* A probe reads nothing but names: no attributes either. */
	if (r >= 0 && !engine_probe(e)) {
		r = tx_send_dir_xattrs(e, pf, n);
	}
	if (r < 0) {
		return r;
	}
	return e->failed ? e->fail_r : tx_room(e) && tx_have_src(e);
}

/* The zero ranges noted so far, in one ZEROS (before anything that must follow them). */
int tx_zeros_flush(struct engine *e)
{
	struct msg m = { .type = MSG_ZEROS };
	int r;

	if (e->zq.count == 0) {
		return 0;
	}
	m.u.zeros = e->zq;
	e->zq.count = 0;
	r = chan_queue(e->p->chan, &m);
	return r < 0 ? fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* [off, off + len) of f is zeros: into the next ZEROS, merged with the range before it. */
static int tx_zero_note(struct engine *e, struct efile *f, uint64_t off, uint64_t len)
{
	struct msg_resume *q = &e->zq;
	/* One order for all ranges: the SAME noted before go first. */
	int r = tx_delta_flush(e);

	if (r < 0) {
		return r;
	}
	f->zeroed += len;
	if (q->count > 0 && q->id == f->id &&
	    q->r[q->count - 1].offset + q->r[q->count - 1].len == off) {
		q->r[q->count - 1].len += len;
		return 0;
	}
	if (q->count > 0 && (q->id != f->id || q->count == PROTO_MAX_ZERO_RANGES)) {
		r = tx_zeros_flush(e);
		if (r < 0) {
			return r;
		}
	}
	q->id = f->id;
	q->r[q->count++] = (struct proto_range){ .offset = off, .len = len };
	return 0;
}

int tx_send_done(struct engine *e, struct efile *f)
{
	/* Its digest is not whole before its hashing thread is done with it (tx_hashed). */
	if (f->hash_jobs > 0) {
		f->done_wait = true;
		return 0;
	}
	struct msg m = { .type = MSG_FILE_DONE };
	/* Its zero and unchanged ranges go first: the receiver refuses them after FILE_DONE. */
	int zr = tx_zeros_flush(e);

	if (zr >= 0) {
		zr = tx_delta_flush(e);
	}
	if (zr < 0) {
		return zr;
	}
	m.u.file_done.id = f->id;
	/* put on the data path: neither kept by the receiver nor zeros */
	m.u.file_done.bytes = f->send_off - f->resumed - f->zeroed - f->skipped;
	if (f->failed) {
		m.u.file_done.status = f->fail_code;
		snprintf(m.u.file_done.text, sizeof(m.u.file_done.text), "%s", file_fail_text(f));
	} else {
		if (f->tree) {
			tx_tree_final(f, m.u.file_done.hash);
		} else {
			file_hash_final(&f->hash, m.u.file_done.hash);
		}
		memcpy(f->done_hash, m.u.file_done.hash, HASH_LEN);
	}
	if (f->started && !f->done_sent) {
		e->tx_unfinished--;
	}
	f->done_sent = true;
	if (f->fd >= 0) {
		close(f->fd);
		f->fd = -1;
		e->open_fds--;
	}
	if (f->dfd >= 0) {
		close(f->dfd);
		f->dfd = -1;
	}
	int r = chan_queue(e->p->chan, &m);
	return r < 0 ? fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* Open an accepted source; O_DIRECT on a second descriptor where it applies. */
static int tx_open(struct engine *e, struct efile *f)
{
	struct stat st;
	char proc[64], text[256];
	int fd;

	/* Beneath dirfd without following symlinks, unless dirfd is AT_FDCWD. */
	int r = diskio_open_read_flags(f->src_dirfd, f->src_path, 0,
				       DISKIO_NONBLOCK | (f->src_device ? DISKIO_BLOCK : 0), &fd,
				       NULL, &st);
	if (r < 0) {
		file_fail(f, errno_to_perr(r), "open: %s", strerror(-r));
		return 0;
	}
	f->fd = fd;
	f->src_nonblock = true;
	e->open_fds++;
	if ((uint64_t)st.st_size != f->src_whole) {
		file_fail(f, PERR_SOURCE_CHANGED, "changed size before it was read (%llu -> %llu)",
			  (unsigned long long)f->src_whole, (unsigned long long)st.st_size);
		return 0;
	}
	/* -X, -A: its attributes go ahead of its FILE_DONE. */
	r = tx_send_xattrs(e, f->id, fd, false, text, sizeof(text));
	if (r < 0) {
		return r;
	}
	if (r > 0) {
		file_fail(f, (uint32_t)r, "%s", text);
		return 0;
	}
	/* A file that travels packed is hashed whole in one call (tx_post_pack): no state. */
	if (tx_packable(e, f)) {
		return 0;
	}
	/*
	 * O_DIRECT keeps a big copy from flushing the page cache. Files under a
	 * chunk are read in one buffered request, and a file that is already in
	 * the page cache is read from there: fetching it again from the disk
	 * would only be slower.
	 */
	if (f->size >= e->p->chunk_size && !diskio_mostly_cached(fd, f->size) &&
	    diskio_dio_align(fd, &f->dio) == 0 && f->dio.mem && f->dio.offset &&
	    e->p->chunk_size % f->dio.offset == 0 && 4096 % f->dio.mem == 0) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		f->dfd = open(proc, O_RDONLY | O_CLOEXEC | O_DIRECT);
	}
	return file_hash_init(&f->hash) < 0 ? fail(e, PERR_INTERNAL, -ENOMEM, "oom")
					    : (f->hash_live = true, 0);
}

static int tx_submit_read(struct engine *e, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = &e->files[c->fidx];
	uint8_t *buf = pool_chunk(e->pool, ci);
	struct io_uring_sqe *sqe;
	uint32_t want = c->len - c->done;
	int fd = f->fd;
	int r = engine_pin_pool(e);

	if (r < 0) {
		return r;
	}
	sqe = uring_sqe(e);
	if (!sqe) {
		return fail(e, PERR_IO, -EBUSY, "io_uring queue full");
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
 */
static uint64_t tx_hole_at(struct engine *e, struct efile *f)
{
	uint64_t cs = e->p->chunk_size, off = f->read_off, end;

	if (off >= f->next_hole) {
		/* In the source, at the window's base (0 for a whole file); kept relative to it. */
		uint64_t base = f->src_base, d;

		if (sparse_next_data(f->fd, base + off, base + f->size, &d) < 0) {
			d = base + off;
		}
		d -= base;
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
static int tx_fill(struct engine *e)
{
	int r;
	/* Walk files in id order, from the oldest still in flight. */
	tx_oldest_advance(e);
	bool fds_full = false;

	for (uint32_t id = e->oldest_id;
	     id <= e->next_id && (e->pool->nfree > 0 || e->pack_ci >= 0); id++) {
		struct efile *f = file_by_id(e, id);

		if (!f || !f->acked || f->done_sent) {
			continue;
		}
		if (!f->started) {
			if (e->open_fds >= OPEN_FILES_MAX) {
				fds_full = true;
				break;
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
			if (r < 0) {
				return r;
			}
			continue;
		}
		if (f->size == 0 && !f->finished) {
			f->finished = true;
			r = tx_send_done(e, f);
			if (r < 0) {
				return r;
			}
			continue;
		}
		if (f->read_off == 0 && tx_packable(e, f)) {
			/* Whole, into the pack being filled: read with the others, one slot. */
			r = tx_pack_add(e, f);
			if (r < 0) {
				return r;
			}
			if (r == 0) {
				break; /* no pool chunk for a new pack */
			}
			continue;
		}
		while (f->read_off < f->size && e->pool->nfree > 0) {
			int ci = pool_get(e->pool);
			struct chunk *c = &e->chunks[ci];
			uint64_t hole = engine_zeros(e) ? tx_hole_at(e, f) : 0;
			uint64_t same =
			    !hole && f->tree ? tx_tree_same_at(e, f, engine_zeros(e)) : 0;

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
	}
	/*
	 * A pack goes when nothing more can join it now; one that waits only
	 * for open files to close (their reads complete) stays open for more.
	 */
	if (!fds_full) {
		tx_pack_close(e);
	}
	return 0;
}

static void tx_chunk_drop(struct engine *e, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = &e->files[c->fidx];

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

void tx_read_done(struct engine *e, uint32_t ci, int res)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = &e->files[c->fidx];

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
		c->state = CH_READY;
		/* Data that reads as zeros goes as zeros, when the receiver knows ZEROS. */
		c->zero = engine_zeros(e) && sparse_all_zero(pool_chunk(e->pool, ci), c->len);
		return;
	}
	/* Failed: this chunk will never be sent; neither will later ones. */
	tx_chunk_drop(e, ci);
}

/* Hash and post every ready chunk that is next in its file, while slots last. */
/* The last chunk of f is posted: its FILE_DONE, unless the source changed size meanwhile. */
static int tx_file_sent(struct engine *e, struct efile *f)
{
	uint64_t size;

	if (diskio_fd_size(f->fd, &size) == 0 && size != f->src_whole) {
		file_fail(f, PERR_SOURCE_CHANGED,
			  "file changed size while being sent (%llu -> %llu)",
			  (unsigned long long)f->src_whole, (unsigned long long)size);
	}
	return tx_send_done(e, f);
}

/* Pool chunk ci, its descriptor c->desc, into slot on lane: payload, then the descriptor. */
static int tx_post_at(struct engine *e, uint32_t ci, unsigned lane, uint32_t slot)
{
	struct chunk *c = &e->chunks[ci];
	uint8_t *stage = e->desc_area + (size_t)ci * e->desc_len;
	struct xport_wr data = {
		.opcode = XPORT_OP_WRITE,
		.mr = e->mr,
		.buf = pool_chunk(e->pool, ci),
		.len = c->desc.len,
		.remote_addr = e->rring_addr + (uint64_t)slot * e->p->chunk_size,
		.rkey = e->rkey[lane],
		.lane = lane,
	};
	struct xport_wr desc = {
		.opcode = XPORT_OP_WRITE_IMM,
		.flags = XPORT_SEND_INLINE,
		.mr = e->mr,
		.buf = stage,
		.len = e->desc_len,
		.remote_addr = e->rdesc_addr + (uint64_t)slot * e->desc_len,
		.rkey = e->rkey[lane],
		.imm = proto_imm(PROTO_IMM_DATA, slot),
		.lane = lane,
	};
	int r;

	proto_desc_encode(&c->desc, stage);
	c->lane = (uint8_t)lane;
	c->seal_count = e->lanes[lane].seal.count;
	if (e->sealed) {
		/* Hashed already: from here the chunk holds ciphertext until it is free. */
		r = slot_seal(e, lane, slot, stage, pool_chunk(e->pool, ci), c->desc.len);
		if (r < 0) {
			return r;
		}
		data.len = (uint32_t)r;
	}
	c->post_len = data.len;
	r = lane_push(e, &data, -1);
	if (r >= 0) {
		r = lane_push_slot(e, &desc, (int32_t)ci, slot);
	}
	if (r < 0) {
		return r;
	}
	e->slot_lane[slot] = (uint8_t)lane;
	e->lanes[lane].load++;
	return (int)slot;
}

int tx_post_slot(struct engine *e, uint32_t ci, unsigned lane, uint32_t file_id, uint64_t off,
		 uint32_t len, uint32_t pieces)
{
	uint32_t slot = e->free_slots[--e->nfree_slots];

	e->chunks[ci].desc = (struct proto_desc){
		.file_id = file_id, .len = len, .offset = off, .seq = ++e->seq, .pieces = pieces
	};
	return tx_post_at(e, ci, lane, slot);
}

int tx_post_again(struct engine *e, uint32_t ci, unsigned lane)
{
	struct chunk *c = &e->chunks[ci];

	if (e->sealed) {
		int r = slot_unseal(e, c->lane, c->slot, c->seal_count, pool_chunk(e->pool, ci),
				    c->post_len);
		if (r < 0) {
			return r;
		}
	}
	return tx_post_at(e, ci, lane, c->slot);
}

/* Chunk ci, next in its file's order, hashed and posted (tx_post_slot). */
static int tx_post_chunk(struct engine *e, uint32_t ci, unsigned lane)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = &e->files[c->fidx];
	int slot;

	if (e->hashers && !f->tree) {
		/* Its thread hashes it while it goes; freed when both are done. */
		if (hashers_queue(e, f, ci, pool_chunk(e->pool, ci), c->len) < 0) {
			return e->fail_r;
		}
		c->hashing = true;
	} else if (!f->tree) {
		file_hash_update(&f->hash, pool_chunk(e->pool, ci), c->len);
	}
	slot = tx_post_slot(e, ci, lane, f->id, c->off, c->len, 0);
	if (slot < 0) {
		return slot;
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
static bool tx_kept(const struct efile *f, uint64_t off, uint32_t len)
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
static int tx_pass_chunk(struct engine *e, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = &e->files[c->fidx];

	if (!f->tree) {
		file_hash_update(&f->hash, pool_chunk(e->pool, ci), c->len);
	}
	f->send_off += c->len;
	f->resumed += c->len;
	e->passes++;
	tx_chunk_drop(e, ci);
	return f->send_off == f->size ? tx_file_sent(e, f) : 0;
}

/*
 * --delta: a chunk next in its file that the receiver has unchanged:
 * hashed like the others, a SAME range instead of payload.
 */
static int tx_pass_same(struct engine *e, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = &e->files[c->fidx];
	int r = tx_delta_note(e, f, c->off, c->len);

	if (r < 0) {
		return r;
	}
	if (!f->tree) {
		file_hash_update(&f->hash, pool_chunk(e->pool, ci), c->len);
	}
	f->send_off += c->len;
	e->bytes_progress += c->len;
	e->passes++;
	tx_chunk_drop(e, ci);
	return f->send_off == f->size ? tx_file_sent(e, f) : 0;
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
	struct efile *f = &e->files[c->fidx];
	uint64_t cs = e->p->chunk_size, end = c->off + c->len;
	int r;

	for (uint64_t off = c->off; off < end; off += cs) {
		uint64_t unit = MIN(cs, end - off);

		if (f->nresume && tx_kept(f, off, (uint32_t)unit)) {
			f->resumed += unit;
			continue;
		}
		r = tx_zero_note(e, f, off, unit);
		if (r < 0) {
			return r;
		}
	}
	/*
	 * A big hole: the receiver is told before we hash it, so both ends
	 * hash their zeros at the same time rather than one after the other.
	 */
	if (c->len >= ZERO_EARLY_FLUSH) {
		r = tx_zeros_flush(e);
		if (r >= 0) {
			r = chan_flush(e->p->chan);
		}
		if (r < 0) {
			return e->failed ? r
					 : fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
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

static int tx_post_ready(struct engine *e)
{
	bool progress = true;
	int r;

	while (progress && e->nfree_slots > 0) {
		progress = false;
		for (uint32_t ci = 0; ci < e->pool->nchunks && e->nfree_slots > 0; ci++) {
			struct chunk *c = &e->chunks[ci];
			struct efile *f;
			int pick;

			if (c->state != CH_READY) {
				continue;
			}
			if (c->packed) {
				if (e->p->bwlimit && !bw_allows(e, c->fill)) {
					return 0;
				}
				pick = lane_pick(e, 2);
				if (pick < 0) {
					continue;
				}
				r = tx_post_pack(e, ci, (unsigned)pick);
				if (r < 0) {
					return r;
				}
				progress = true;
				continue;
			}
			f = &e->files[c->fidx];
			if (f->failed) {
				tx_chunk_drop(e, ci);
				progress = true;
				continue;
			}
			if (c->off != f->send_off) {
				continue;
			}
			/*
			 * Zeros, kept and unchanged chunks are hashed here, on the
			 * loop: only after what its hashing thread has before them.
			 */
			bool wait = f->hash_jobs > 0 && !f->tree;
			/* A tree file: its digest is fed here, in file order, once per chunk. */
			if (f->tree && !c->hashed) {
				c->same = tx_tree_feed(e, f, c, pool_chunk(e->pool, ci));
				c->hashed = true;
				if (f->failed) {
					tx_chunk_drop(e, ci);
					progress = true;
					continue;
				}
			}
			if (c->same) {
				r = tx_pass_same(e, ci);
				if (r < 0) {
					return r;
				}
				progress = true;
				continue;
			}
			if (c->zero) {
				if (wait) {
					continue;
				}
				r = tx_pass_zero(e, ci);
				if (r < 0) {
					return r;
				}
				progress = true;
				continue;
			}
			if (f->ndsum && !f->tree && !(f->nresume && tx_kept(f, c->off, c->len)) &&
			    tx_delta_unchanged(e, f, c, pool_chunk(e->pool, ci))) {
				if (wait) {
					continue;
				}
				r = tx_pass_same(e, ci);
				if (r < 0) {
					return r;
				}
				progress = true;
				continue;
			}
			if (f->nresume && tx_kept(f, c->off, c->len)) {
				if (wait) {
					continue;
				}
				r = tx_pass_chunk(e, ci);
				if (r < 0) {
					return r;
				}
				progress = true;
				continue;
			}
			if (e->p->bwlimit && !bw_allows(e, c->len)) {
				return 0;
			}
			pick = lane_pick(e, 2);
			if (pick < 0) {
				continue;
			}
			r = tx_post_chunk(e, ci, (unsigned)pick);
			if (r < 0) {
				return r;
			}
			progress = true;
		}
	}
	/* A failed file with nothing left in flight still owes its FILE_DONE. */
	return 0;
}

/*
 * Skip level checksum: the receiver has a file of this size and wants our
 * digest. The source is opened here and hashed on the hashing thread
 * (engine_sums.c); a source that can't be opened, or has another size now,
 * gets a SUMS entry saying so at once (the receiver then has it copied,
 * where the same failure is reported as usual).
 */
static int tx_sum_start(struct engine *e, struct efile *f)
{
	struct stat st;
	int fd, r;

	f->sum_wanted = true;
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
	return sums_queue(e, f, fd);
}

/* Our source's digest (or why there is none), for the next SUMS. */
int tx_sum_done(struct engine *e, struct efile *f, int r, const uint8_t hash[HASH_LEN])
{
	struct proto_sum *ps;

	if (!e->sum_out) {
		e->sum_out = calloc(PROTO_MAX_BATCH, sizeof(*e->sum_out));
		if (!e->sum_out) {
			return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
	}
	if (e->nsum_out == PROTO_MAX_BATCH && tx_sums_flush(e) < 0) {
		return -EIO;
	}
	ps = &e->sum_out[e->nsum_out++];
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
	struct msg m = { .type = MSG_SUMS };
	int r;

	if (e->nsum_out == 0) {
		return 0;
	}
	m.u.sums.count = e->nsum_out;
	m.u.sums.sums = e->sum_out;
	e->nsum_out = 0;
	r = chan_queue(e->p->chan, &m);
	if (r < 0) {
		return fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
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
		return fail(e, PERR_PROTOCOL, -EBADMSG,
			    "FILES_ACK: SKIPPED from a peer without skip levels");
	}
	if (!file && !(e->p->peer_caps & PROTO_CAP_ITEMIZE)) {
		return fail(e, PERR_PROTOCOL, -EBADMSG,
			    "FILES_ACK: SKIPPED for a directory or symlink");
	}
	return 0;
}

static int tx_files_ack(struct engine *e, const struct msg_files_ack *a)
{
	for (size_t i = 0; i < a->count; i++) {
		struct efile *f = file_by_id(e, a->st[i].id);
		int r;

		if (!f || f->acked) {
			return fail(e, PERR_PROTOCOL, -EBADMSG, "FILES_ACK for unknown id %u",
				    a->st[i].id);
		}
		if (a->st[i].status == PERR_SUM_WANTED) {
			/* Once per file, for a regular file, from a peer that has the level. */
			if (f->ftype != PROTO_FT_REG || f->sum_wanted ||
			    !(e->p->peer_caps & PROTO_CAP_CHECK)) {
				return fail(e, PERR_PROTOCOL, -EBADMSG,
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
		f->sum_wanted = false;
		f->acked = true;
		f->items = a->st[i].items;
		if (a->st[i].items && !(e->p->peer_caps & PROTO_CAP_ITEMIZE)) {
			return fail(e, PERR_PROTOCOL, -EBADMSG,
				    "FILES_ACK: items from a peer without them");
		}
		if (a->st[i].status == PERR_SKIPPED) {
			r = tx_check_kept(e, f);
			if (r == 0) {
				r = tx_kept_xattrs(e, f);
			}
			if (r < 0) {
				return r;
			}
			note_kept(e, f);
			e->offered_unresolved--;
			file_release(e, f);
			continue;
		}
		if (a->st[i].status == PERR_OK && engine_probe(e)) {
			/* A probe: the answer is the result; nothing is read or sent. */
			note_planned(e, f->name, f->ftype, f->size);
			e->offered_unresolved--;
			file_release(e, f);
			continue;
		}
		if (a->st[i].status == PERR_OK && f->ftype == PROTO_FT_HARDLINK) {
			/* Made (or waiting for its file) there: its FILE_RESULT says. */
			f->done_sent = true;
			continue;
		}
		if (a->st[i].status == PERR_OK && f->ftype != PROTO_FT_REG) {
			note_committed(e, f, 0, NULL);
			e->offered_unresolved--;
			file_release(e, f);
			continue;
		}
		if (a->st[i].status != PERR_OK) {
			/* The receiver refused it. */
			note_failure(e, f->name, f->ftype, a->st[i].status, false,
				     a->st[i].text ? a->st[i].text : "");
			e->offered_unresolved--;
			file_release(e, f);
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

	if (!f || !f->done_sent) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "FILE_RESULT for unknown id %u", res->id);
	}
	if (res->status == PERR_OK && f->resumed) {
		note_resumed(e, f, f->size - f->resumed - f->zeroed - f->skipped, f->resumed,
			     f->done_hash);
	} else if (res->status == PERR_OK) {
		note_committed(e, f, f->size - f->zeroed - f->skipped,
			       f->ftype == PROTO_FT_REG ? f->done_hash : NULL);
	} else if (f->failed) {
		/* Ours (open, read, a source that changed): the receiver only echoes it. */
		note_failure(e, f->name, f->ftype, f->fail_code, true, file_fail_text(f));
	} else {
		note_failure(e, f->name, f->ftype, res->status, false, res->text);
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
		return fail(e, PERR_PROTOCOL, -EBADMSG, "RESUME for id %u out of place", rs->id);
	}
	for (uint16_t i = 0; i < rs->count; i++) {
		const struct proto_range *g = &rs->r[i];

		/* The decoder checked order and overflow; the file's size and chunks are ours. */
		if (g->offset % cs || g->offset >= f->size || g->len > f->size - g->offset ||
		    (g->len % cs && g->offset + g->len != f->size)) {
			return fail(e, PERR_PROTOCOL, -EBADMSG,
				    "RESUME for %s: range %llu+%llu not whole chunks of it",
				    f->name, (unsigned long long)g->offset,
				    (unsigned long long)g->len);
		}
	}
	f->resume = calloc(rs->count, sizeof(*f->resume));
	if (!f->resume) {
		return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
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
		return fail(e, chan_err_code(r), r, "waiting for the receiver's ring: %s",
			    strerror(-r));
	}
	if (m.type == MSG_ERROR) {
		r = fail(e, m.u.error.code, -EREMOTEIO, "peer: %s", m.u.error.text);
		msg_clear(&m);
		return r;
	}
	if (m.type != MSG_RING || m.u.ring.slots != e->p->slots ||
	    m.u.ring.slot_size != e->p->chunk_size || m.u.ring.nkeys != e->p->x->nlanes) {
		msg_clear(&m);
		chan_send_error(e->p->chan, PERR_PROTOCOL, "bad RING");
		e->error_sent = true;
		return fail(e, PERR_PROTOCOL, -EBADMSG, "receiver sent a bad RING");
	}
	e->rring_addr = m.u.ring.addr;
	e->rdesc_addr = m.u.ring.desc_addr;
	memcpy(e->rkey, m.u.ring.rkey, sizeof(uint32_t) * m.u.ring.nkeys);
	for (uint32_t i = 0; i < e->p->slots; i++) {
		e->free_slots[e->nfree_slots++] = e->p->slots - 1 - i;
	}
	e->have_ring = true;
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
	/*
	 * A probe has no data path: its files end with their answers. Chunks
	 * passed over without a slot (zeros, kept bytes) free the pool with no
	 * event to wake us: fill it again at once, a bounded number of times,
	 * and then have the loop come back without sleeping.
	 */
	e->again = false;
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
	if (more) {
		e->again = true; /* the next batch */
	}
	/* --delta: our digests of a tree file made while the receiver makes its own. */
	if (r >= 0 && e->prehash_id) {
		r = tx_delta_prehash(e);
	}
	/* The receiver hashes data behind a zero range only once it has the range. */
	if (r >= 0) {
		r = tx_zeros_flush(e);
	}
	/* An unchanged range too; and it copies it from its old file meanwhile. */
	if (r >= 0) {
		r = tx_delta_flush(e);
	}
	if (r < 0) {
		return r;
	}
	/*
	 * Files that failed while reading owe a FILE_DONE once their chunks are
	 * gone. Only started ones can: none (a re-run that skips every file)
	 * spares the walk over the whole table on every turn.
	 */
	for (size_t i = 0; e->tx_unfinished > 0 && i < e->files_hw; i++) {
		struct efile *f = &e->files[i];
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
			return fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
		e->sent_end = true;
	}
	return 0;
}

/* A hashing thread has hashed posted chunk ci of f (engine_hashers.c). */
int tx_hashed(struct engine *e, struct efile *f, uint32_t ci)
{
	struct chunk *c = &e->chunks[ci];

	c->hashing = false;
	if (c->sent) {
		c->sent = false;
		c->state = CH_FREE;
		pool_put(e->pool, ci);
	}
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
	if (engine_probe(e)) {
		return 0; /* no pool, no RING */
	}
	e->chunks = calloc(e->pool->nchunks, sizeof(*e->chunks));
	e->free_slots = calloc(e->p->slots, sizeof(*e->free_slots));
	if (!e->chunks || !e->free_slots) {
		return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	/* Sealed slots are sealed in place once hashed: those hash here. */
	if (!e->sealed && hashers_start(e, MIN(e->p->hash_threads, ENGINE_HASH_THREADS_MAX)) < 0) {
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
	return msg_unexpected(e, m);
}

/* A credit: the receiver has a slot free again. */
int tx_on_credit(struct engine *e, const struct xport_wc *wc)
{
	uint32_t kind = wc->imm >> PROTO_IMM_KIND_SHIFT;
	uint32_t slot = wc->imm & PROTO_IMM_SLOT_MASK;

	if (kind != PROTO_IMM_CREDIT || wc->len != 0 || slot >= e->p->slots) {
		return imm_unexpected(e, wc);
	}
	if (e->nfree_slots >= e->p->slots) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "credit overflow");
	}
	e->free_slots[e->nfree_slots++] = slot;
	e->credits++;
	rails_on_credit(e, slot);
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
