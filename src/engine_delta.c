/* SPDX-License-Identifier: MIT */
/*
 * --delta re-sync (OPEN DELTA, DELTA messages). The receiver, for a regular
 * file that exists under the destination name with the declared size,
 * hashes that old file chunk by chunk (XXH3-128) and sends the digests
 * (DELTA SUMS) before the FILES_ACK. The sender hashes each chunk it reads
 * anyway; one whose digest matches crosses no data path: it goes into a
 * DELTA SAME range, like a ZEROS range. The receiver copies those ranges
 * from the old file into the new temp file (copy_file_range, a reflink
 * where the file system can), reads them back from the temp file and hashes
 * them in file order, so the end-to-end XXH3-128 still covers every byte
 * of what is renamed into place.
 */
#include "engine-internal.h"

#include "hello.h"

#include "proto/wire.h"

#define DELTA_BUF ((size_t)4 << 20)

static void delta_digest(const void *buf, size_t len, uint8_t out[HASH_LEN])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, len));
	memcpy(out, c.digest, HASH_LEN);
}

/*
 * The read buffer (DELTA_BUF), made once per session: a file's ranges come
 * many. Aligned for direct I/O (a device's digest pass).
 */
static uint8_t *delta_buf(struct engine *e)
{
	void *p;

	if (!e->delta_buf && posix_memalign(&p, 4096, DELTA_BUF) == 0) {
		e->delta_buf = p;
	}
	return e->delta_buf;
}

static bool bit_get(const uint8_t *map, uint64_t i)
{
	return map[i / 8] >> (i % 8) & 1;
}

static void bit_set(uint8_t *map, uint64_t i, bool on)
{
	if (on) {
		map[i / 8] |= (uint8_t)(1u << (i % 8));
	} else {
		map[i / 8] &= (uint8_t) ~(1u << (i % 8));
	}
}

/*
 * A read of the old file at off: a device's through a direct reopen of it
 * (dfd, -1 none) when it can, as the page cache of a device only costs a
 * copy here; the rest, and anything direct I/O refuses, buffered.
 */
static ssize_t delta_pread(struct efile *f, int dfd, uint8_t *buf, size_t len, uint64_t off)
{
	if (dfd >= 0 && len % 4096 == 0 && off % 4096 == 0) {
		ssize_t n = pread(dfd, buf, len, (off_t)off);

		if (n == (ssize_t)len) {
			return n;
		}
	}
	return pread(f->oldfd, buf, len, (off_t)off);
}

static uint64_t delta_chunks(const struct engine *e, uint64_t size)
{
	return size / e->p->chunk_size + (size % e->p->chunk_size != 0);
}

/*
 * Receiver: keep the old file open when it is a regular file of the
 * declared size (never through a symlink), or the block device target
 * itself (at least that size: the digests cover the source's length).
 * Anything else: a full copy. Nothing to compare when a cut run (--partial)
 * left all of it.
 */
void rx_delta_open(struct engine *e, struct efile *f)
{
	struct stat st;
	int fd;

	if (!e->delta || f->size == 0 || f->kept >= f->size ||
	    delta_chunks(e, f->size) > PROTO_MAX_DELTA_CHUNKS) {
		return;
	}
	if (f->device) {
		/* Written in place: unchanged chunks simply stay (rx_delta_take). */
		f->oldfd = fcntl(f->tfd, F_DUPFD_CLOEXEC, 3);
		return;
	}
	fd = openat(e->dirs[f->dir].fd, f->leaf,
		    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != f->size) {
		close(fd);
		return;
	}
	f->oldfd = fd;
}

/*
 * The digests so far, queued; with now, sent now: the pass holds the loop,
 * and the sender waits for the FILES_ACK that follows it; each SUMS it
 * hears is progress to it (and to us), so a long pass ends in no idle
 * timeout.
 */
static int rx_delta_queue(struct engine *e, struct msg *m, bool now)
{
	int r = chan_queue(e->p->chan, m);

	m->u.delta.count = 0;
	if (r >= 0 && now) {
		r = chan_flush(e->p->chan);
	}
	e->delta_heard++;
	return r < 0 ? fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/*
 * Receiver, before f's FILES_ACK: the digests of the old file's chunks.
 * A read that fails stops the list there (the sender sends the rest);
 * ndsum counts the digests sent, the SAME ranges the sender may name.
 * The chunks a cut run left (--partial, [0, kept), whole chunks) are not
 * read: their digests are zeros, which the sender never compares (it
 * passes kept chunks over) and we never accept a SAME for (they are hashed).
 */
int rx_delta_send_sums(struct engine *e, struct efile *f)
{
	uint64_t cs = e->p->chunk_size, n = delta_chunks(e, f->size);
	size_t per = MAX(DELTA_BUF / cs, 1), cap = per * cs;
	_cleanup_free_ struct msg *m = calloc(1, sizeof(*m));
	_cleanup_free_ uint8_t *big = NULL;
	uint8_t *buf = delta_buf(e);
	_cleanup_close_ int dfd = -1;
	double last = ts_now(NULL);
	int r;

	if (cap > DELTA_BUF) {
		void *p;

		buf = posix_memalign(&p, 4096, cap) == 0 ? (big = p) : NULL;
	}
	if (!m || !buf) {
		return 0; /* only a full copy */
	}
	m->type = MSG_DELTA;
	m->u.delta.id = f->id;
	m->u.delta.kind = PROTO_DELTA_SUMS;
	/* A device's chunks that read as zeros need no write-zeroes (rx_delta_zeros). */
	if (f->device) {
		char proc[64];

		f->dzero = calloc(n / 8 + 1, 1);
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->oldfd);
		dfd = open(proc, O_RDONLY | O_CLOEXEC | O_DIRECT);
		/*
		 * Checked by chunk digests (PROTO_CAP_DELTA_TREE): the chunks this
		 * pass reads need no read back at the commit; only the ones
		 * written after it do. Not with a cut run's kept prefix (its
		 * chunks are the journal's, hashed as a whole).
		 */
		if (e->delta_tree && f->kept == 0 && f->dzero) {
			f->rd = calloc(n, HASH_LEN);
			f->rdisk = calloc(n / 8 + 1, 1);
			f->tree = f->rd && f->rdisk;
		}
	}
	m->u.delta.flags = f->tree ? PROTO_DELTA_TREE : 0;
	for (uint64_t i = 0; i < n;) {
		uint64_t off = i * cs, want = MIN((uint64_t)cap, f->size - off);
		ssize_t got;

		if (off + cs <= f->kept) {
			if (m->u.delta.count == 0) {
				m->u.delta.first = i;
			}
			memset(m->u.delta.sums[m->u.delta.count++], 0, HASH_LEN);
			f->ndsum++;
			i++;
			if (m->u.delta.count == PROTO_MAX_DELTA_SUMS) {
				r = rx_delta_queue(e, m, false);
				if (r < 0) {
					return r;
				}
			}
			continue;
		}
		/* At least one SUMS a second, however slow the disk (see rx_delta_queue). */
		if (m->u.delta.count > 0 && ts_now(NULL) - last >= 1.0) {
			r = rx_delta_queue(e, m, true);
			if (r < 0) {
				return r;
			}
			last = ts_now(NULL);
		}
		if (e->p->faults & ENGINE_FAULT_SLOW_DISK) {
			sleep(1);
		}
		got = delta_pread(f, dfd, buf, want, off);

		if (got != (ssize_t)want) {
			break;
		}
		for (uint64_t o = 0; o < want; o += cs, i++) {
			uint8_t *d;

			if (m->u.delta.count == 0) {
				m->u.delta.first = i;
			}
			d = m->u.delta.sums[m->u.delta.count++];
			delta_digest(buf + o, MIN(cs, want - o), d);
			if (f->dzero && sparse_all_zero(buf + o, MIN(cs, want - o))) {
				bit_set(f->dzero, i, true);
			}
			if (f->tree) {
				memcpy(f->rd[i], d, HASH_LEN);
				bit_set(f->rdisk, i, true);
			}
			f->ndsum++;
			if (m->u.delta.count == PROTO_MAX_DELTA_SUMS) {
				r = rx_delta_queue(e, m, false);
				if (r < 0) {
					return r;
				}
			}
		}
		/* The sender's own pass runs beside ours from the first digests on. */
		if (f->tree && m->u.delta.count > 0 && f->ndsum <= per) {
			r = rx_delta_queue(e, m, true);
			if (r < 0) {
				return r;
			}
			last = ts_now(NULL);
		}
	}
	if (m->u.delta.count) {
		r = rx_delta_queue(e, m, false);
		if (r < 0) {
			return r;
		}
	}
	if (f->ndsum == 0) {
		close(f->oldfd);
		f->oldfd = -1;
	}
	return 0;
}

/*
 * Receiver, a device target: a ZEROS range [off, off + len). The chunks the
 * digest pass read as zeros are zeros already: not written again (the
 * device takes only what changed; its read back at the commit checks them
 * like every byte), journaled now; the others go to the zero writer.
 */
int rx_delta_zeros(struct engine *e, struct efile *f, uint64_t off, uint64_t len)
{
	uint64_t cs = e->p->chunk_size, end = off + len;

	while (off < end) {
		uint64_t i = off / cs, at = off;
		bool zero = i < f->ndsum && bit_get(f->dzero, i);

		/* The run of chunks of one kind from off. */
		do {
			at = MIN(end, (at / cs + 1) * cs);
			i = at / cs;
		} while (at < end && (i < f->ndsum && bit_get(f->dzero, i)) == zero);
		if (zero) {
			rx_zeros_journal(e, f, off, at);
		} else {
			int r = sums_queue_zeros(e, f, off, at - off);

			if (r < 0) {
				return r;
			}
		}
		off = at;
	}
	return 0;
}

/*
 * Receiver, at g's turn in file order: g's bytes from the old file into
 * the temp file (or the partial's data file), then read back from there
 * into the file's hash (what is hashed is what will be renamed into place).
 * A device is its own old copy: nothing to copy, only the read back. With
 * --partial each chunk read back is journaled, so a cut keeps it.
 * Failures fail the file, not the session.
 */
void rx_delta_take(struct engine *e, struct efile *f, const struct proto_range *g)
{
	uint64_t cs = e->p->chunk_size, done = 0;
	XXH3_state_t *cst = NULL;
	uint8_t *buf;

	if (f->failed) {
		return;
	}
	while (!f->device && done < g->len) {
		loff_t in = (loff_t)(g->offset + done), out = in;
		ssize_t n = copy_file_range(f->oldfd, &in, f->tfd, &out, g->len - done, 0);

		if (n <= 0) {
			file_fail(f, n < 0 ? errno_to_perr(negerrno()) : PERR_IO,
				  "delta %s: copy from the old file: %s", f->name,
				  n < 0 ? strerror(errno) : "it got shorter");
			return;
		}
		done += (uint64_t)n;
	}
	buf = delta_buf(e);
	if (!buf) {
		file_fail(f, PERR_INTERNAL, "out of memory");
		return;
	}
	if (f->partial && f->jfd >= 0) {
		cst = XXH3_createState();
		if (!cst || XXH3_128bits_reset(cst) != XXH_OK) {
			XXH3_freeState(cst);
			cst = NULL;
			close(f->jfd); /* only less of it can be resumed */
			f->jfd = -1;
		}
	}
	for (done = 0; done < g->len;) {
		uint64_t at = g->offset + done;
		/* Never across a chunk's end: each chunk's own digest goes into the journal. */
		size_t want = MIN(MIN((uint64_t)DELTA_BUF, g->len - done), cs - at % cs);
		ssize_t n = pread(f->tfd, buf, want, (off_t)at);

		if (n <= 0) {
			file_fail(f, n < 0 ? errno_to_perr(negerrno()) : PERR_IO,
				  "delta %s: read back: %s", f->name,
				  n < 0 ? strerror(errno) : "short file");
			break;
		}
		file_hash_update(&f->hash, buf, (size_t)n);
		done += (uint64_t)n;
		if (cst) {
			XXH3_128bits_update(cst, buf, (size_t)n);
		}
		at += (uint64_t)n;
		if (cst && (at % cs == 0 || done == g->len)) {
			uint64_t start = at - ((at - 1) % cs + 1);
			XXH128_canonical_t c;

			XXH128_canonicalFromHash(&c, XXH3_128bits_digest(cst));
			XXH3_128bits_reset(cst);
			if (rx_partial_note(f, start, (uint32_t)(at - start), c.digest) < 0) {
				close(f->jfd);
				f->jfd = -1;
				XXH3_freeState(cst);
				cst = NULL;
			}
		}
	}
	XXH3_freeState(cst);
}

/*
 * Receiver, a tree file (f->tree), at g's turn in file order: the device
 * holds those chunks as the digest pass read them, so their digests are
 * the pass's (rd) and nothing is read back. With --partial each is
 * journaled with that digest.
 */
void rx_tree_same(struct engine *e, struct efile *f, const struct proto_range *g)
{
	uint64_t cs = e->p->chunk_size;

	for (uint64_t off = g->offset; f->partial && f->jfd >= 0 && off < g->offset + g->len;
	     off += cs) {
		if (rx_partial_note(f, off, (uint32_t)MIN(cs, f->size - off), f->rd[off / cs]) <
		    0) {
			close(f->jfd);
			f->jfd = -1;
		}
	}
}

/*
 * Receiver, a tree file: zeros at [off, off + len) (whole chunks, or to the
 * file's end). Chunks the digest pass read as zeros were not written again
 * (rx_delta_zeros): they stay the pass's; the others are zeros now, or
 * will be read back as such at the commit (written, or assumed).
 */
void rx_tree_zeros(struct engine *e, struct efile *f, uint64_t off, uint64_t len)
{
	uint64_t cs = e->p->chunk_size;

	for (uint64_t at = off; at < off + len; at += cs) {
		uint64_t i = at / cs;

		if (!(i < f->ndsum && bit_get(f->dzero, i) && bit_get(f->rdisk, i))) {
			zero_digest(e, MIN(cs, f->size - at), f->rd[i]);
			bit_set(f->rdisk, i, false);
		}
	}
}

/* Receiver, a tree file: chunk at off arrived with this digest (its own bytes'). */
void rx_tree_chunk(struct engine *e, struct efile *f, uint64_t off, const uint8_t d[HASH_LEN])
{
	uint64_t i = off / e->p->chunk_size;

	memcpy(f->rd[i], d, HASH_LEN);
	bit_set(f->rdisk, i, false);
}

/* A tree's digest: the XXH3-128 of n chunk digests in order. */
static void tree_digest(uint8_t (*rd)[HASH_LEN], uint64_t n, uint8_t out[HASH_LEN])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(rd, (size_t)n * HASH_LEN));
	memcpy(out, c.digest, HASH_LEN);
}

/* Receiver, a tree file with every chunk accounted for: its digest, to match FILE_DONE's. */
void rx_tree_digest(struct engine *e, struct efile *f, uint8_t out[HASH_LEN])
{
	tree_digest(f->rd, delta_chunks(e, f->size), out);
}

/*
 * On the hashing thread, after the device's fsync and with its cached
 * pages dropped: the chunks written since the digest pass read back from
 * the device and hashed, the others taken as that pass read them, into
 * the tree's digest (rx_device_verified matches it to FILE_DONE's). rd and
 * rdisk are the job's own copies.
 */
int tree_verify(int fd, uint64_t size, uint32_t cs, uint8_t (*rd)[HASH_LEN], const uint8_t *rdisk,
		uint8_t out[HASH_LEN])
{
	uint64_t n = size / cs + (size % cs != 0);
	_cleanup_free_ uint8_t *buf = NULL;
	_cleanup_close_ int dfd = -1;
	char proc[64];
	void *p;

	if (posix_memalign(&p, 4096, cs) != 0) {
		return -ENOMEM;
	}
	buf = p;
	/* From the device itself, not a cache, and no more than asked (no read-ahead). */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	dfd = open(proc, O_RDONLY | O_CLOEXEC | O_DIRECT);
	for (uint64_t i = 0; i < n; i++) {
		size_t want = (size_t)MIN((uint64_t)cs, size - i * cs);
		ssize_t got;

		if (bit_get(rdisk, i)) {
			continue;
		}
		got = -1;
		if (dfd >= 0 && want % 4096 == 0 && cs % 4096 == 0) {
			got = pread(dfd, buf, want, (off_t)(i * cs));
		}
		if (got != (ssize_t)want) {
			got = pread(fd, buf, want, (off_t)(i * cs));
		}
		if (got < 0) {
			return negerrno();
		}
		if (got != (ssize_t)want) {
			return -EIO;
		}
		delta_digest(buf, want, rd[i]);
	}
	tree_digest(rd, n, out);
	return 0;
}

/*
 * Sender: DELTA SUMS for a file offered and not answered yet, in order
 * from chunk 0, never more than the file has chunks. Only in a session
 * that asked for --delta with a peer that knows it.
 */
int tx_delta_sums(struct engine *e, const struct msg_delta *d)
{
	struct efile *f = file_by_id(e, d->id);
	uint64_t n;

	bool tree = d->flags & PROTO_DELTA_TREE;

	if (!e->delta || d->kind != PROTO_DELTA_SUMS || !f || f->acked ||
	    f->ftype != PROTO_FT_REG || d->first != f->ndsum ||
	    (tree && (!e->delta_tree || (d->first > 0 && !f->tree))) || (!tree && f->tree)) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "DELTA SUMS for id %u out of place", d->id);
	}
	e->delta_heard++;
	n = delta_chunks(e, f->size);
	if (n > PROTO_MAX_DELTA_CHUNKS || d->count > n - d->first) {
		return fail(e, PERR_PROTOCOL, -EBADMSG,
			    "DELTA SUMS for %s: chunks %llu..%llu, the file has %llu", f->name,
			    (unsigned long long)d->first,
			    (unsigned long long)(d->first + d->count - 1), (unsigned long long)n);
	}
	if (!f->dsum) {
		f->dsum = calloc(n, HASH_LEN);
		if (!f->dsum) {
			return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
	}
	if (tree && !f->tree) {
		/* Its digest is its chunks': our pass over the source can start now. */
		f->mine = calloc(n, HASH_LEN);
		f->tst = XXH3_createState();
		if (!f->mine || !f->tst || XXH3_128bits_reset(f->tst) != XXH_OK) {
			return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
		f->tree = true;
		e->prehash_id = f->id;
	}
	memcpy(f->dsum[f->ndsum], d->sums, (size_t)d->count * HASH_LEN);
	f->ndsum += d->count;
	return 0;
}

/* The most bytes the pre-pass reads in one turn of the loop. */
#define PREHASH_TURN ((uint64_t)64 << 20)

/*
 * Sender, a tree file offered and not answered yet: while the receiver
 * makes its digests, make ours (mine) of the source, a bounded piece a
 * turn; after the FILES_ACK, tx_fill takes the chunks both have alike
 * without reading them again. The pass ends at the FILES_ACK (the rest is
 * hashed as it is read), at the file's end, or at a failure (the file is
 * then read and hashed as any).
 */
int tx_delta_prehash(struct engine *e)
{
	struct efile *f = e->prehash_id ? file_by_id(e, e->prehash_id) : NULL;
	uint64_t cs = e->p->chunk_size, n, budget = PREHASH_TURN;
	size_t cap = MAX(DELTA_BUF / cs, 1) * cs;
	_cleanup_free_ uint8_t *big = NULL;
	uint8_t *buf;

	if (!f || !f->tree || f->acked || f->failed) {
		goto done;
	}
	n = delta_chunks(e, f->size);
	if (f->pfd < 0) {
		struct stat st;
		int r =
		    diskio_open_read_flags(f->src_dirfd, f->src_path, 0,
					   f->src_device ? DISKIO_BLOCK : 0, &f->pfd, NULL, &st);

		if (r < 0 || (!f->src_device && (uint64_t)st.st_size != f->src_whole)) {
			goto done; /* the main pass says why */
		}
	}
	buf = cap > DELTA_BUF ? (big = malloc(cap)) : delta_buf(e);
	if (!buf) {
		goto done;
	}
	while (f->prehashed < n && budget > 0) {
		uint64_t off = f->prehashed * cs;
		/* Whole chunks, at least one. */
		size_t want = (size_t)MIN((uint64_t)cap, f->size - off);
		ssize_t got;

		if (want > budget && budget >= cs) {
			want = (size_t)(budget / cs * cs);
		}
		got = pread(f->pfd, buf, want, (off_t)(f->src_base + off));
		if (got != (ssize_t)want) {
			goto done;
		}
		for (size_t o = 0; o < want; o += cs) {
			delta_digest(buf + o, MIN(cs, want - o), f->mine[f->prehashed++]);
		}
		budget -= MIN(budget, want);
	}
	if (f->prehashed < n) {
		e->again = true; /* more next turn, without sleeping */
		return 0;
	}
done:
	if (f && f->pfd >= 0) {
		close(f->pfd);
		f->pfd = -1;
	}
	e->prehash_id = 0;
	return 0;
}

/*
 * Sender, a tree file: from read_off (a chunk's start), the bytes of the
 * run of chunks whose pre-pass digest is the receiver's: unchanged, they
 * need no read (at most ZERO_CHUNK_MAX at a time). 0: read the next one.
 * With zero extents the run stops where the source's next hole has whole
 * chunks (tx_hole_at's f->next_hole): a hole goes as zeros, as ever.
 */
uint64_t tx_tree_same_at(const struct engine *e, const struct efile *f, bool holes)
{
	uint64_t cs = e->p->chunk_size, off = f->read_off, end = f->size;

	if (off % cs) {
		return 0;
	}
	if (holes && f->next_hole > off) {
		end = MIN(end, (f->next_hole + cs - 1) / cs * cs);
	}
	for (uint64_t i = off / cs; off < end && off - f->read_off < ZERO_CHUNK_MAX; i++) {
		if (i >= f->prehashed || i >= f->ndsum ||
		    memcmp(f->mine[i], f->dsum[i], HASH_LEN) != 0) {
			break;
		}
		off = MIN(off + cs, f->size);
	}
	return off - f->read_off;
}

/*
 * Sender, a tree file: chunk c, next in file order, into the digest of its
 * chunks' digests: a same run by the pre-pass's digests, zeros by theirs,
 * data (buf) by its own, which must be the pre-pass's where there is one
 * (else the source changed: the file fails). True: data the receiver has
 * unchanged (a SAME range, not posted).
 */
bool tx_tree_feed(struct engine *e, struct efile *f, const struct chunk *c, const void *buf)
{
	uint64_t cs = e->p->chunk_size, i = c->off / cs;
	uint8_t d[HASH_LEN];

	if (c->same || c->zero) {
		for (uint64_t off = c->off; off < c->off + c->len; off += cs, i++) {
			if (c->same) {
				memcpy(d, f->mine[i], HASH_LEN);
			} else {
				zero_digest(e, MIN(cs, f->size - off), d);
			}
			XXH3_128bits_update(f->tst, d, HASH_LEN);
		}
		return c->same;
	}
	delta_digest(buf, c->len, d);
	XXH3_128bits_update(f->tst, d, HASH_LEN);
	if (i < f->prehashed && memcmp(d, f->mine[i], HASH_LEN) != 0) {
		file_fail(f, PERR_SOURCE_CHANGED, "changed while being sent (chunk at %llu)",
			  (unsigned long long)c->off);
		return false;
	}
	return c->off % cs == 0 && c->len == MIN(cs, f->size - c->off) && i < f->ndsum &&
	       memcmp(d, f->dsum[i], HASH_LEN) == 0;
}

/* Sender, a tree file with every chunk fed: FILE_DONE's digest. */
void tx_tree_final(struct efile *f, uint8_t out[HASH_LEN])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(f->tst));
	memcpy(out, c.digest, HASH_LEN);
}

/* Sender: has the receiver this chunk (whole, canonical) already? */
bool tx_delta_unchanged(const struct engine *e, const struct efile *f, const struct chunk *c,
			const void *buf)
{
	uint64_t cs = e->p->chunk_size, i = c->off / cs;
	uint8_t h[HASH_LEN];

	if (c->off % cs || i >= f->ndsum || c->len != MIN(cs, f->size - c->off)) {
		return false;
	}
	delta_digest(buf, c->len, h);
	return memcmp(h, f->dsum[i], HASH_LEN) == 0;
}

/* The SAME ranges noted so far, in one DELTA (before anything that must follow them). */
int tx_delta_flush(struct engine *e)
{
	_cleanup_free_ struct msg *m = NULL;
	int r;

	if (!e->sq || e->sq->count == 0) {
		return 0;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	m->type = MSG_DELTA;
	m->u.delta = *e->sq;
	e->sq->count = 0;
	r = chan_queue(e->p->chan, m);
	return r < 0 ? fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* [off, off + len) of f is unchanged: into the next SAME, merged with the range before it. */
int tx_delta_note(struct engine *e, struct efile *f, uint64_t off, uint64_t len)
{
	struct msg_delta *q;
	int r;

	/* One order for all ranges: the ZEROS noted before go first. */
	r = tx_zeros_flush(e);
	if (r < 0) {
		return r;
	}
	if (!e->sq) {
		e->sq = calloc(1, sizeof(*e->sq));
		if (!e->sq) {
			return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
	}
	q = e->sq;
	f->skipped += len;
	if (q->count > 0 && q->id == f->id &&
	    q->r[q->count - 1].offset + q->r[q->count - 1].len == off) {
		q->r[q->count - 1].len += len;
		return 0;
	}
	if (q->count > 0 && (q->id != f->id || q->count == PROTO_MAX_RESUME_RANGES)) {
		r = tx_delta_flush(e);
		if (r < 0) {
			return r;
		}
	}
	q->id = f->id;
	q->kind = PROTO_DELTA_SAME;
	q->r[q->count++] = (struct proto_range){ .offset = off, .len = len };
	return 0;
}

/* --delta asked for, and both ends know DELTA (and its TREE). */
static bool delta_enable(struct engine *e)
{
	const struct engine_params *p = e->p;

	e->delta = p->x && (p->open_flags & PROTO_OPEN_DELTA) && (p->peer_caps & PROTO_CAP_DELTA) &&
		   (hello_local_caps() & PROTO_CAP_DELTA);
	e->delta_tree = e->delta && (p->peer_caps & PROTO_CAP_DELTA_TREE) &&
			(hello_local_caps() & PROTO_CAP_DELTA_TREE);
	return true; /* a DELTA from a peer in a session without it is refused here */
}

/* SUMS sent or received: a long digest pass is progress. */
static uint64_t delta_progress(const struct engine *e)
{
	return e->delta_heard;
}

static int delta_on_sums(struct engine *e, struct msg *m)
{
	return tx_delta_sums(e, &m->u.delta);
}

static int delta_on_same(struct engine *e, struct msg *m)
{
	return rx_delta_same(e, &m->u.delta);
}

static void delta_release(struct engine *e)
{
	free(e->sq);
	free(e->delta_buf);
}

static const struct engine_msg_row delta_msgs[] = {
	{ MSG_DELTA, ENGINE_ROLE_BIT(ENGINE_SENDER), 0, delta_on_sums },
	{ MSG_DELTA, ENGINE_ROLE_BIT(ENGINE_RECEIVER), 0, delta_on_same },
	{ 0 },
};

const struct engine_feature engine_feature_delta = {
	.name = "delta",
	.enable = delta_enable,
	.progress = delta_progress,
	.release = delta_release,
	.msgs = delta_msgs,
};
