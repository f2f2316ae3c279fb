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
 * of what is renamed into place. A device target checked by its chunks'
 * digests (DELTA SUMS' TREE) is engine_delta_tree.c's.
 */
#include "engine_delta.h"
#include "engine_partial.h"

#include "hello.h"

#include "proto/wire.h"

#define DELTA_BUF ((size_t)4 << 20)

/*
 * The session state of --delta. The feature is on in every session, so
 * that a DELTA out of place is refused here: delta, delta_tree say whether
 * it was asked for and both ends know it (and its TREE).
 */
struct delta_state {
	bool delta, delta_tree;
	/* SAME ranges not sent yet (allocated at the first), like the ZEROS queue. */
	struct msg_delta *sq;
	uint8_t *delta_buf;   /* receiver: reads of the old file and read-backs */
	uint64_t delta_heard; /* SUMS sent or received (a long digest pass is progress) */
	uint32_t prehash_id;  /* sender: the tree file whose source the pre-pass reads */
};

static struct delta_state *delta_of(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_delta);
}

/*
 * The read buffer (DELTA_BUF), made once per session: a file's ranges come
 * many. Aligned for direct I/O (a device's digest pass).
 */
static uint8_t *delta_buf(struct engine *e)
{
	struct delta_state *ds = delta_of(e);
	void *p;

	if (!ds->delta_buf && posix_memalign(&p, 4096, DELTA_BUF) == 0) {
		ds->delta_buf = p;
	}
	return ds->delta_buf;
}

/*
 * A read of the old file at off: a device's through a direct reopen of it
 * (dfd, -1 none) when it can, as the page cache of a device only costs a
 * copy here; the rest, and anything direct I/O refuses, buffered.
 */
static ssize_t delta_pread(const struct delta_file *df, int dfd, uint8_t *buf, size_t len,
			   uint64_t off)
{
	if (dfd >= 0 && len % 4096 == 0 && off % 4096 == 0) {
		ssize_t n = pread(dfd, buf, len, (off_t)off);

		if (n == (ssize_t)len) {
			return n;
		}
	}
	return pread(df->oldfd, buf, len, (off_t)off);
}

/*
 * Receiver: keep the old file open when it is a regular file of the
 * declared size (never through a symlink), or the block device target
 * itself (at least that size: the digests cover the source's length).
 * Anything else: a full copy. Nothing to compare when a cut run (--partial)
 * left all of it.
 */
static void rx_delta_take(struct engine *e, struct efile *f, const struct proto_range *g);

/* The stream digest, with the unchanged ranges read back from the old file into it. */
static const struct engine_digest delta_stream_digest = { .rx_same = rx_delta_take };

static void rx_delta_open(struct engine *e, struct efile *f)
{
	struct delta_state *ds = delta_of(e);
	struct delta_file *df = delta_file(e, f);
	struct stat st;
	int fd;

	if (!ds->delta || !df || f->size == 0 || f->kept >= f->size ||
	    delta_chunks(e, f->size) > PROTO_MAX_DELTA_CHUNKS) {
		return;
	}
	if (f->device) {
		/* Written in place: unchanged chunks simply stay (rx_delta_take). */
		df->oldfd = fcntl(f->tfd, F_DUPFD_CLOEXEC, 3);
		f->dg = df->oldfd >= 0 ? &delta_stream_digest : NULL;
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
	df->oldfd = fd;
	f->dg = &delta_stream_digest;
}

/*
 * The digests so far, queued; with now, sent now: the pass holds the loop,
 * and the sender waits for the FILES_ACK that follows it; each SUMS it
 * hears is progress to it (and to us), so a long pass ends in no idle
 * timeout.
 */
static int rx_delta_queue(struct engine *e, struct msg *m, bool now)
{
	struct delta_state *ds = delta_of(e);
	int r = chan_queue(e->p->chan, m);

	m->u.delta.count = 0;
	if (r >= 0 && now) {
		r = chan_flush(e->p->chan);
	}
	ds->delta_heard++;
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* The pass's reads, whole chunks: the session's buffer, or (*ret_big) one as big as a chunk. */
static uint8_t *rx_sums_buf(struct engine *e, size_t cap, uint8_t **ret_big)
{
	uint8_t *buf = delta_buf(e);

	if (cap > DELTA_BUF) {
		void *p;

		buf = posix_memalign(&p, 4096, cap) == 0 ? (*ret_big = p) : NULL;
	}
	return buf;
}

/*
 * A device target's digest pass: a direct reopen of it to read (-1: none),
 * the map of its chunks that read as zeros (they need no write-zeroes,
 * rx_zeros_mapped in engine_zeros.c) and, with PROTO_CAP_DELTA_TREE, the digests it keeps.
 */
static int rx_sums_device(struct engine *e, struct efile *f, uint64_t n)
{
	struct delta_state *ds = delta_of(e);
	struct delta_file *df = delta_file(e, f);
	char proc[64];
	int dfd;

	df->dzero = calloc(n / 8 + 1, 1);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", df->oldfd);
	dfd = open(proc, O_RDONLY | O_CLOEXEC | O_DIRECT);
	/*
	 * Checked by chunk digests (PROTO_CAP_DELTA_TREE): the chunks this
	 * pass reads need no read back at the commit; only the ones
	 * written after it do. Not with a cut run's kept prefix (its
	 * chunks are the journal's, hashed as a whole).
	 */
	if (ds->delta_tree && f->kept == 0 && df->dzero) {
		df->rd = calloc(n, HASH_LEN);
		df->rdisk = calloc(n / 8 + 1, 1);
		f->tree = df->rd && df->rdisk;
		if (f->tree) {
			f->dg = &delta_tree_digest;
		}
	}
	return dfd;
}

/* The next digest's place in m, chunk i (the first of m's sets its start). */
static uint8_t *rx_sums_slot(struct msg *m, uint64_t i)
{
	if (m->u.delta.count == 0) {
		m->u.delta.first = i;
	}
	return m->u.delta.sums[m->u.delta.count++];
}

/* m full: queued, a new one starts. */
static int rx_sums_full(struct engine *e, struct msg *m)
{
	return m->u.delta.count == PROTO_MAX_DELTA_SUMS ? rx_delta_queue(e, m, false) : 0;
}

/* Chunk i, kept by a cut run: a zero digest, never compared (see rx_delta_send_sums). */
static int rx_sums_kept(struct engine *e, struct efile *f, struct msg *m, uint64_t i)
{
	memset(rx_sums_slot(m, i), 0, HASH_LEN);
	delta_file(e, f)->ndsum++;
	return rx_sums_full(e, m);
}

/* m sent now (see rx_delta_queue), the clock of the next one restarted. */
static int rx_sums_send_now(struct engine *e, struct msg *m, double *last)
{
	int r = rx_delta_queue(e, m, true);

	if (r < 0) {
		return r;
	}
	*last = ts_now(NULL);
	return 0;
}

/* Before a read: at least one SUMS a second, however slow the disk (see rx_delta_queue). */
static int rx_sums_pace(struct engine *e, struct msg *m, double *last)
{
	if (m->u.delta.count > 0 && ts_now(NULL) - *last >= 1.0) {
		int r = rx_sums_send_now(e, m, last);

		if (r < 0) {
			return r;
		}
	}
	if (e->p->faults & ENGINE_FAULT_SLOW_DISK) {
		sleep(1);
	}
	return 0;
}

/*
 * The digests of want bytes read at chunk *i (whole chunks but the file's
 * last), into m; a device's zero map and tree digests noted on the way.
 */
static int rx_sums_digests(struct engine *e, struct efile *f, struct msg *m, const uint8_t *buf,
			   uint64_t want, uint64_t *i)
{
	struct delta_file *df = delta_file(e, f);
	uint64_t cs = e->p->chunk_size;
	int r;

	for (uint64_t o = 0; o < want; o += cs, (*i)++) {
		uint8_t *d = rx_sums_slot(m, *i);

		delta_digest(buf + o, MIN(cs, want - o), d);
		if (df->dzero && sparse_all_zero(buf + o, MIN(cs, want - o))) {
			bit_set(df->dzero, *i, true);
		}
		if (f->tree) {
			memcpy(df->rd[*i], d, HASH_LEN);
			bit_set(df->rdisk, *i, true);
		}
		df->ndsum++;
		r = rx_sums_full(e, m);
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/*
 * Receiver, before f's FILES_ACK: the digests of the old file's chunks.
 * A read that fails stops the list there (the sender sends the rest);
 * ndsum counts the digests sent, the SAME ranges the sender may name.
 * The chunks a cut run left (--partial, [0, kept), whole chunks) are not
 * read: their digests are zeros, which the sender never compares (it
 * passes kept chunks over) and we never accept a SAME for (they are hashed).
 */
static int rx_delta_send_sums(struct engine *e, struct efile *f)
{
	struct delta_file *df = delta_file(e, f);
	uint64_t cs = e->p->chunk_size, n = delta_chunks(e, f->size);
	size_t per = MAX(DELTA_BUF / cs, 1), cap = per * cs;
	_cleanup_free_ struct msg *m = calloc(1, sizeof(*m));
	_cleanup_free_ uint8_t *big = NULL;
	uint8_t *buf = rx_sums_buf(e, cap, &big);
	_cleanup_close_ int dfd = -1;
	double last = ts_now(NULL);
	int r;

	if (!m || !buf) {
		return 0; /* only a full copy */
	}
	m->type = MSG_DELTA;
	m->u.delta.id = f->id;
	m->u.delta.kind = PROTO_DELTA_SUMS;
	if (f->device) {
		dfd = rx_sums_device(e, f, n);
	}
	m->u.delta.flags = f->tree ? PROTO_DELTA_TREE : 0;
	for (uint64_t i = 0; i < n;) {
		uint64_t off = i * cs, want = MIN((uint64_t)cap, f->size - off);

		if (off + cs <= f->kept) {
			r = rx_sums_kept(e, f, m, i++);
			if (r < 0) {
				return r;
			}
			continue;
		}
		r = rx_sums_pace(e, m, &last);
		if (r < 0) {
			return r;
		}
		if (delta_pread(df, dfd, buf, want, off) != (ssize_t)want) {
			break;
		}
		r = rx_sums_digests(e, f, m, buf, want, &i);
		/* The sender's own pass runs beside ours from the first digests on. */
		if (r >= 0 && f->tree && m->u.delta.count > 0 && df->ndsum <= per) {
			r = rx_sums_send_now(e, m, &last);
		}
		if (r < 0) {
			return r;
		}
	}
	r = m->u.delta.count ? rx_delta_queue(e, m, false) : 0;
	if (r < 0) {
		return r;
	}
	if (df->ndsum == 0) {
		close(df->oldfd);
		df->oldfd = -1;
	}
	return 0;
}

/* g's bytes from the old file into the temp file; false: f failed. */
static bool rx_delta_copy(struct efile *f, int oldfd, const struct proto_range *g)
{
	uint64_t done = 0;

	while (!f->device && done < g->len) {
		loff_t in = (loff_t)(g->offset + done), out = in;
		ssize_t n = copy_file_range(oldfd, &in, f->tfd, &out, g->len - done, 0);

		if (n <= 0) {
			file_fail(f, n < 0 ? errno_to_perr(negerrno()) : PERR_IO,
				  "delta %s: copy from the old file: %s", f->name,
				  n < 0 ? strerror(errno) : "it got shorter");
			return false;
		}
		done += (uint64_t)n;
	}
	return true;
}

/* With --partial, each chunk's own digest (NULL: none; its journal is closed, not resumable). */
static XXH3_state_t *rx_delta_chunk_state(struct engine *e, struct efile *f)
{
	XXH3_state_t *cst = NULL;

	if (rx_partial_journaled(e, f)) {
		cst = XXH3_createState();
		if (!cst || XXH3_128bits_reset(cst) != XXH_OK) {
			XXH3_freeState(cst);
			cst = NULL;
			rx_partial_stop(e, f); /* only less of it can be resumed */
		}
	}
	return cst;
}

/*
 * The chunk read back that ends at at, journaled with its digest (cst,
 * then reset); one the journal refuses closes it: NULL, no more digests.
 */
static XXH3_state_t *rx_delta_chunk_note(struct engine *e, struct efile *f, XXH3_state_t *cst,
					 uint64_t at, uint64_t cs)
{
	uint64_t start = at - ((at - 1) % cs + 1);
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(cst));
	XXH3_128bits_reset(cst);
	engine_rx_written(e, f, start, (uint32_t)(at - start), c.digest);
	if (!rx_partial_journaled(e, f)) {
		XXH3_freeState(cst);
		cst = NULL;
	}
	return cst;
}

/*
 * Receiver, at g's turn in file order: g's bytes from the old file into
 * the temp file (or the partial's data file), then read back from there
 * into the file's hash (what is hashed is what will be renamed into place).
 * A device is its own old copy: nothing to copy, only the read back. With
 * --partial each chunk read back is journaled, so a cut keeps it.
 * Failures fail the file, not the session.
 */
static void rx_delta_take(struct engine *e, struct efile *f, const struct proto_range *g)
{
	uint64_t cs = e->p->chunk_size, done;
	XXH3_state_t *cst;
	uint8_t *buf;
	bool journal;

	if (f->failed || !rx_delta_copy(f, delta_file(e, f)->oldfd, g)) {
		return;
	}
	buf = delta_buf(e);
	if (!buf) {
		file_fail(f, PERR_INTERNAL, "out of memory");
		return;
	}
	cst = rx_delta_chunk_state(e, f);
	journal = cst != NULL;
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
			cst = rx_delta_chunk_note(e, f, cst, at, cs);
		}
	}
	XXH3_freeState(cst);
	if (!journal && done) {
		engine_rx_written(e, f, g->offset, (uint32_t)MIN(done, UINT32_MAX), NULL);
	}
}

/*
 * Sender: DELTA SUMS for a file offered and not answered yet, in order
 * from chunk 0, never more than the file has chunks. Only in a session
 * that asked for --delta with a peer that knows it.
 */
static int tx_delta_sums(struct engine *e, const struct msg_delta *d)
{
	struct delta_state *ds = delta_of(e);
	struct efile *f = file_by_id(e, d->id);
	struct delta_file *df;
	uint64_t n;

	bool tree = d->flags & PROTO_DELTA_TREE;

	if (!ds->delta || d->kind != PROTO_DELTA_SUMS || !f || f->acked ||
	    f->ftype != PROTO_FT_REG || d->first != delta_ndsum(e, f) ||
	    (tree && (!ds->delta_tree || (d->first > 0 && !f->tree))) || (!tree && f->tree)) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "DELTA SUMS for id %u out of place",
				   d->id);
	}
	ds->delta_heard++;
	n = delta_chunks(e, f->size);
	if (n > PROTO_MAX_DELTA_CHUNKS || d->count > n - d->first) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "DELTA SUMS for %s: chunks %llu..%llu, the file has %llu",
				   f->name, (unsigned long long)d->first,
				   (unsigned long long)(d->first + d->count - 1),
				   (unsigned long long)n);
	}
	df = delta_file(e, f);
	if (!df->dsum) {
		df->dsum = calloc(n, HASH_LEN);
		if (!df->dsum) {
			return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
	}
	if (tree && !f->tree) {
		/* Its digest is its chunks': our pass over the source can start now. */
		df->mine = calloc(n, HASH_LEN);
		df->tst = XXH3_createState();
		if (!df->mine || !df->tst || XXH3_128bits_reset(df->tst) != XXH_OK) {
			return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
		f->tree = true;
		f->dg = &delta_tree_digest;
		ds->prehash_id = f->id;
	}
	memcpy(df->dsum[df->ndsum], d->sums, (size_t)d->count * HASH_LEN);
	df->ndsum += d->count;
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
static int tx_delta_prehash(struct engine *e)
{
	struct delta_state *ds = delta_of(e);
	struct efile *f = ds->prehash_id ? file_by_id(e, ds->prehash_id) : NULL;
	struct delta_file *df = f ? delta_file(e, f) : NULL;
	uint64_t cs = e->p->chunk_size, n, budget = PREHASH_TURN;
	size_t cap = MAX(DELTA_BUF / cs, 1) * cs;
	_cleanup_free_ uint8_t *big = NULL;
	uint8_t *buf;

	if (!f || !f->tree || f->acked || f->failed) {
		goto done;
	}
	n = delta_chunks(e, f->size);
	if (df->pfd < 0) {
		struct stat st;
		int r =
		    diskio_open_read_flags(f->src_dirfd, f->src_path, 0,
					   f->src_device ? DISKIO_BLOCK : 0, &df->pfd, NULL, &st);

		if (r < 0 || (!f->src_device && (uint64_t)st.st_size != f->src_whole)) {
			goto done; /* the main pass says why */
		}
	}
	buf = cap > DELTA_BUF ? (big = malloc(cap)) : delta_buf(e);
	if (!buf) {
		goto done;
	}
	while (df->prehashed < n && budget > 0) {
		uint64_t off = df->prehashed * cs;
		/* Whole chunks, at least one. */
		size_t want = (size_t)MIN((uint64_t)cap, f->size - off);
		ssize_t got;

		if (want > budget && budget >= cs) {
			want = (size_t)(budget / cs * cs);
		}
		got = pread(df->pfd, buf, want, (off_t)(f->src_base + off));
		if (got != (ssize_t)want) {
			goto done;
		}
		for (size_t o = 0; o < want; o += cs) {
			delta_digest(buf + o, MIN(cs, want - o), df->mine[df->prehashed++]);
		}
		budget -= MIN(budget, want);
	}
	if (df->prehashed < n) {
		e->again = true; /* more next turn, without sleeping */
		return 0;
	}
done:
	if (df && df->pfd >= 0) {
		close(df->pfd);
		df->pfd = -1;
	}
	ds->prehash_id = 0;
	return 0;
}

/* Sender: has the receiver this chunk (whole, canonical) already? */
static bool tx_delta_unchanged(const struct engine *e, const struct efile *f, const struct chunk *c,
			       const void *buf)
{
	const struct delta_file *df = delta_file(e, f);
	uint64_t cs = e->p->chunk_size, i = c->off / cs;
	uint8_t h[HASH_LEN];

	if (c->off % cs || i >= df->ndsum || c->len != MIN(cs, f->size - c->off)) {
		return false;
	}
	delta_digest(buf, c->len, h);
	return memcmp(h, df->dsum[i], HASH_LEN) == 0;
}

/* The SAME ranges noted so far, in one DELTA (before anything that must follow them). */
static int tx_delta_flush(struct engine *e)
{
	struct delta_state *ds = delta_of(e);
	_cleanup_free_ struct msg *m = NULL;
	int r;

	if (!ds->sq || ds->sq->count == 0) {
		return 0;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	m->type = MSG_DELTA;
	m->u.delta = *ds->sq;
	ds->sq->count = 0;
	r = chan_queue(e->p->chan, m);
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* [off, off + len) of f is unchanged: into the next SAME, merged with the range before it. */
static int tx_delta_note(struct engine *e, struct efile *f, uint64_t off, uint64_t len)
{
	struct delta_state *ds = delta_of(e);
	struct msg_delta *q;
	int r;

	/* One order for all ranges: the ZEROS noted before go first. */
	r = engine_tx_flush_others(e, &engine_feature_delta);
	if (r < 0) {
		return r;
	}
	if (!ds->sq) {
		ds->sq = calloc(1, sizeof(*ds->sq));
		if (!ds->sq) {
			return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
	}
	q = ds->sq;
	delta_file(e, f)->skipped += len;
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

/* DELTA SAME: only in a --delta session, for a file whose old copy we hashed, before FILE_DONE. */
static int rx_delta_same(struct engine *e, const struct msg_delta *d)
{
	struct delta_state *ds = delta_of(e);
	struct efile *f = file_by_id(e, d->id);
	const struct delta_file *df = f ? delta_file(e, f) : NULL;
	int r;

	if (!ds->delta || d->kind != PROTO_DELTA_SAME || !f || f->ftype != PROTO_FT_REG || !df ||
	    df->oldfd < 0 || f->got_done) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "DELTA for id %u out of place",
				   d->id);
	}
	for (uint16_t i = 0; i < d->count; i++) {
		r = rx_range_take(e, f, &d->r[i], true);
		if (r < 0) {
			return r;
		}
	}
	rx_hash_ready(e, f);
	return rx_maybe_finish(e, f);
}

/* --delta asked for, and both ends know DELTA (and its TREE). */
static bool delta_enable(struct engine *e)
{
	struct delta_state *ds = delta_of(e);
	const struct engine_params *p = e->p;

	ds->delta = p->x && (p->open_flags & PROTO_OPEN_DELTA) &&
		    (p->peer_caps & PROTO_CAP_DELTA) && (hello_local_caps() & PROTO_CAP_DELTA);
	ds->delta_tree = ds->delta && (p->peer_caps & PROTO_CAP_DELTA_TREE) &&
			 (hello_local_caps() & PROTO_CAP_DELTA_TREE);
	return true; /* a DELTA from a peer in a session without it is refused here */
}

/* SUMS sent or received: a long digest pass is progress. */
static uint64_t delta_progress(const struct engine *e)
{
	struct delta_state *ds = delta_of(e);
	return ds->delta_heard;
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
	struct delta_state *ds = delta_of(e);
	free(ds->sq);
	free(ds->delta_buf);
}

static const struct engine_msg_row delta_msgs[] = {
	{ MSG_DELTA, ENGINE_ROLE_BIT(ENGINE_SENDER), 0, delta_on_sums },
	{ MSG_DELTA, ENGINE_ROLE_BIT(ENGINE_RECEIVER), 0, delta_on_same },
	{ 0 },
};

/* Sender: our digests of a tree file, made while the receiver makes its own. */
static int delta_late_step(struct engine *e)
{
	struct delta_state *ds = delta_of(e);
	return e->p->role == ENGINE_SENDER && ds->prehash_id ? tx_delta_prehash(e) : 0;
}

/*
 * Sender: a chunk whose digest the receiver has already (not one it keeps
 * anyway): hashed like the others, a SAME range instead of payload.
 */
static int delta_tx_claim(struct engine *e, uint32_t ci, struct efile *f, bool wait)
{
	struct chunk *c = &e->chunks[ci];
	int r;

	if (!delta_ndsum(e, f) || f->tree || (f->nresume && tx_kept(f, c->off, c->len)) ||
	    !tx_delta_unchanged(e, f, c, pool_chunk(e->pool, ci))) {
		return READY_NONE;
	}
	if (wait) {
		return READY_WAIT;
	}
	r = tx_chunk_same(e, ci);
	return r < 0 ? r : READY_TAKEN;
}

/* A file with an old copy to compare: its digests go before its FILES_ACK entry. */
static int delta_rx_answered(struct engine *e, struct efile *f)
{
	const struct delta_file *df = delta_file(e, f);

	return df && df->oldfd >= 0 ? rx_delta_send_sums(e, f) : 0;
}

static size_t delta_file_size(const struct engine *e)
{
	const struct delta_state *ds = delta_of(e);

	return ds && ds->delta ? sizeof(struct delta_file) : 0;
}

static void delta_file_unsent(const struct engine *e, const struct efile *f,
			      struct engine_unsent *u)
{
	u->skipped += delta_file(e, f)->skipped;
}

static void delta_file_init(struct engine *e, struct efile *f)
{
	struct delta_file *df = delta_file(e, f);

	if (df) {
		df->pfd = df->oldfd = -1;
	}
}

static void delta_file_release(struct engine *e, struct efile *f)
{
	struct delta_file *df = delta_file(e, f);

	if (!df) {
		return;
	}
	free(df->dsum);
	free(df->mine);
	XXH3_freeState(df->tst);
	if (df->pfd >= 0) {
		close(df->pfd);
	}
	free(df->dzero);
	free(df->rd);
	free(df->rdisk);
	if (df->oldfd >= 0) {
		close(df->oldfd);
	}
}

const struct engine_feature engine_feature_delta = {
	.name = "delta",
	.enable = delta_enable,
	.file_size = delta_file_size,
	.file_init = delta_file_init,
	.file_release = delta_file_release,
	.file_unsent = delta_file_unsent,
	.state_size = sizeof(struct delta_state),
	.progress = delta_progress,
	.release = delta_release,
	.msgs = delta_msgs,
	.late_step = delta_late_step,
	.rx_opened = rx_delta_open,
	.rx_answered = delta_rx_answered,
	.tx_claim = delta_tx_claim,
	.tx_same = tx_delta_note,
	.tx_flush = tx_delta_flush,
};
