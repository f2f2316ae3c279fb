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

#include "proto/wire.h"

#define DELTA_BUF ((size_t)4 << 20)

static void delta_digest(const void *buf, size_t len, uint8_t out[HASH_LEN])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, len));
	memcpy(out, c.digest, HASH_LEN);
}

/* The receiver's read buffer (DELTA_BUF), made once per session: a file's ranges come many. */
static uint8_t *delta_buf(struct engine *e)
{
	if (!e->delta_buf) {
		e->delta_buf = malloc(DELTA_BUF);
	}
	return e->delta_buf;
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
	_cleanup_free_ uint8_t *big = cap > DELTA_BUF ? malloc(cap) : NULL;
	uint8_t *buf = cap > DELTA_BUF ? big : delta_buf(e);
	double last = ts_now(NULL);
	int r;

	if (!m || !buf) {
		return 0; /* only a full copy */
	}
	m->type = MSG_DELTA;
	m->u.delta.id = f->id;
	m->u.delta.kind = PROTO_DELTA_SUMS;
	/* A device's chunks that read as zeros need no write-zeroes (rx_delta_zeros). */
	if (f->device) {
		f->dzero = calloc(n / 8 + 1, 1);
	}
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
		got = pread(f->oldfd, buf, want, (off_t)off);

		if (got != (ssize_t)want) {
			break;
		}
		for (uint64_t o = 0; o < want; o += cs, i++) {
			if (m->u.delta.count == 0) {
				m->u.delta.first = i;
			}
			delta_digest(buf + o, MIN(cs, want - o),
				     m->u.delta.sums[m->u.delta.count++]);
			if (f->dzero && sparse_all_zero(buf + o, MIN(cs, want - o))) {
				f->dzero[i / 8] |= (uint8_t)(1u << (i % 8));
			}
			f->ndsum++;
			if (m->u.delta.count == PROTO_MAX_DELTA_SUMS) {
				r = rx_delta_queue(e, m, false);
				if (r < 0) {
					return r;
				}
			}
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
		bool zero = i < f->ndsum && (f->dzero[i / 8] >> (i % 8) & 1);

		/* The run of chunks of one kind from off. */
		do {
			at = MIN(end, (at / cs + 1) * cs);
			i = at / cs;
		} while (at < end && (i < f->ndsum && (f->dzero[i / 8] >> (i % 8) & 1)) == zero);
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
 * Sender: DELTA SUMS for a file offered and not answered yet, in order
 * from chunk 0, never more than the file has chunks. Only in a session
 * that asked for --delta with a peer that knows it.
 */
int tx_delta_sums(struct engine *e, const struct msg_delta *d)
{
	struct efile *f = file_by_id(e, d->id);
	uint64_t n;

	if (!e->delta || d->kind != PROTO_DELTA_SUMS || !f || f->acked ||
	    f->ftype != PROTO_FT_REG || d->first != f->ndsum) {
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
	memcpy(f->dsum[f->ndsum], d->sums, (size_t)d->count * HASH_LEN);
	f->ndsum += d->count;
	return 0;
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
