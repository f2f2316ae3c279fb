/* SPDX-License-Identifier: MIT */
/*
 * The --partial journal read back (engine_partial.h): its header and records
 * checked as untrusted input (every length and offset, no overlaps), and the
 * data each record names re-read and re-hashed, so that only a verified
 * prefix is kept. engine_partial.c writes the journal and decides what a
 * verified prefix means for the file.
 */
#include "engine-internal.h"

#include "engine_partial.h"
#include "proto/wire.h"

size_t jnl_header(const struct efile *f, uint8_t *buf, size_t cap)
{
	struct wbuf w;

	wbuf_init(&w, buf, cap);
	wbuf_put_u32(&w, JNL_MAGIC);
	wbuf_put_u32(&w, JNL_VERSION);
	wbuf_put_u64(&w, f->size);
	wbuf_put_u64(&w, (uint64_t)f->meta.mtime_sec);
	wbuf_put_u32(&w, f->meta.mtime_nsec);
	wbuf_put_str16(&w, f->leaf, FSPATH_NAME_MAX);
	return w.overflow ? 0 : w.len;
}

void jnl_record(const struct jrec *j, uint8_t out[JNL_REC_LEN])
{
	struct wbuf w;

	wbuf_init(&w, out, JNL_REC_LEN);
	wbuf_put_u64(&w, j->off);
	wbuf_put_u64(&w, j->len);
	wbuf_put_bytes(&w, j->hash, HASH_LEN);
}

/*
 * Hash len bytes of fd at off into rec (the range's own hash) and file (the
 * file's, in order; may be NULL). -EIO when the file ends before them,
 * -ETIMEDOUT past the deadline (ts_now's clock; 0: none).
 */
int hash_range(int fd, uint64_t off, uint64_t len, uint8_t *buf, XXH3_state_t *rec,
	       struct file_hash *file, double deadline)
{
	while (len > 0) {
		if (deadline > 0 && ts_now(NULL) > deadline) {
			return -ETIMEDOUT;
		}
		size_t want = (size_t)MIN(len, (uint64_t)VERIFY_BUF);
		ssize_t n = pread(fd, buf, want, (off_t)off);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n <= 0) {
			return n < 0 ? negerrno() : -EIO;
		}
		if (rec) {
			XXH3_128bits_update(rec, buf, (size_t)n);
		}
		if (file) {
			file_hash_update(file, buf, (size_t)n);
		}
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/*
 * Does the data at j still hash to j's digest? Feeds the file's hash on the
 * way, and takes it back (from saved) when the data does not verify.
 */
static bool verify_record(struct efile *f, const struct jrec *j, uint8_t *buf, XXH3_state_t *st,
			  double deadline)
{
	struct file_hash saved = { 0 };
	XXH128_canonical_t c;

	/* The whole of it (a chunk tree's part-fed chunk too), not just its state. */
	if (file_hash_copy(&saved, &f->hash) < 0) {
		return false;
	}
	XXH3_128bits_reset(st);
	if (hash_range(f->tfd, j->off, j->len, buf, st, &f->hash, deadline) == 0) {
		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
		if (CRYPTO_memcmp(c.digest, j->hash, HASH_LEN) == 0) {
			file_hash_free(&saved);
			return true;
		}
	}
	file_hash_free(&f->hash);
	f->hash = saved;
	return false;
}

/* A journal being verified (jnl_verify): its records pending, those kept, the prefix. */
struct jnl_scan {
	struct efile *f;
	double deadline;
	struct jrec *pend; /* JNL_PENDING_MAX records ahead of the prefix, in no order */
	struct jrec *kept; /* the records of the prefix, in order */
	size_t npend, nkept, capkept;
	uint8_t *buf; /* VERIFY_BUF */
	XXH3_state_t *st;
	uint64_t prefix;
	bool stopped; /* verified no further: what is kept stays, the rest is re-sent */
};

static void jnl_scan_free(struct jnl_scan *s)
{
	free(s->pend);
	free(s->kept);
	free(s->buf);
	XXH3_freeState(s->st);
}

/* Is jfd's header f's (source, name)? 0 with its length and the journal's size. */
static int jnl_check_header(struct efile *f, int jfd, size_t *ret_hlen, uint64_t *ret_size)
{
	uint8_t want[JNL_HDR_MAX], have[JNL_HDR_MAX];
	size_t hlen = jnl_header(f, want, sizeof(want));
	struct stat sb;

	if (hlen == 0 || fstat(jfd, &sb) < 0) {
		return hlen == 0 ? -EINVAL : negerrno();
	}
	if ((uint64_t)sb.st_size < hlen || pread(jfd, have, hlen, 0) != (ssize_t)hlen ||
	    memcmp(have, want, hlen) != 0) {
		return -EBADMSG; /* another source, another name, or nothing yet */
	}
	*ret_hlen = hlen;
	*ret_size = (uint64_t)sb.st_size;
	return 0;
}

/* The record at pos (untrusted): within the file and not before the prefix, or -EBADMSG. */
static int jnl_read_record(const struct jnl_scan *s, int jfd, uint64_t pos, struct jrec *ret)
{
	uint8_t rec[JNL_REC_LEN];
	struct rbuf rb;
	struct jrec j;

	if (pread(jfd, rec, JNL_REC_LEN, (off_t)pos) != JNL_REC_LEN) {
		return -EIO;
	}
	rbuf_init(&rb, rec, JNL_REC_LEN);
	j.off = rbuf_get_u64(&rb);
	j.len = rbuf_get_u64(&rb);
	rbuf_get_bytes(&rb, j.hash, HASH_LEN);
	if (rb.error || j.len == 0 || j.len > s->f->size || j.off > s->f->size - j.len ||
	    j.off < s->prefix) {
		return -EBADMSG;
	}
	*ret = j;
	return 0;
}

/*
 * j among the pending records: 0; -EBADMSG when one starts where it does
 * (an overlap: corrupt); 1 when they are full (too far out of order: what
 * is verified is kept).
 */
static int jnl_pend(struct jnl_scan *s, const struct jrec *j)
{
	int r = 0;

	for (size_t i = 0; i < s->npend && r == 0; i++) {
		r = s->pend[i].off == j->off ? -EBADMSG : 0;
	}
	if (r < 0 || s->npend == JNL_PENDING_MAX) {
		return r < 0 ? r : 1;
	}
	s->pend[s->npend++] = *j;
	return 0;
}

/* Room for one more kept record; false: as many as we keep (the rest is re-sent). */
static bool jnl_keep_room(struct jnl_scan *s)
{
	if (s->nkept == s->capkept) {
		size_t cap = s->capkept ? s->capkept * 2 : 1024;
		struct jrec *t = cap <= JNL_KEEP_MAX ? realloc(s->kept, cap * sizeof(*t)) : NULL;

		if (!t) {
			return false;
		}
		s->kept = t;
		s->capkept = cap;
	}
	return true;
}

/* Extend the prefix with every pending record that starts where it ends, verified. */
static void jnl_extend(struct jnl_scan *s)
{
	for (size_t i = 0; i < s->npend && !s->stopped;) {
		struct jrec j;

		if (s->pend[i].off != s->prefix) {
			i++;
			continue;
		}
		j = s->pend[i];
		s->pend[i] = s->pend[--s->npend];
		/*
		 * A flipped bit, data never written, or out of time (the
		 * peer waits): what is verified is kept, the rest re-sent.
		 */
		if (!jnl_keep_room(s) || ts_now(NULL) > s->deadline ||
		    !verify_record(s->f, &j, s->buf, s->st, s->deadline)) {
			s->stopped = true;
			break;
		}
		s->kept[s->nkept++] = j;
		s->prefix += j.len;
		i = 0;
	}
}

/*
 * Read the journal jfd: 0 with *ret_prefix = the bytes from 0 that its
 * records cover and the data verifies (f->hash fed with them) before the
 * deadline (ts_now's clock), and those records in order in *ret_recs, *ret_n
 * (the caller frees them); -EBADMSG for a journal of another source or one
 * that does not parse (untrusted: every length and offset checked, no
 * overlaps); -errno.
 */
int jnl_verify(struct efile *f, int jfd, double deadline, uint64_t *ret_prefix,
	       struct jrec **ret_recs, size_t *ret_n)
{
	_cleanup_(jnl_scan_free) struct jnl_scan s = { .f = f, .deadline = deadline };
	uint64_t pos, size;
	size_t hlen;
	int r;

	r = jnl_check_header(f, jfd, &hlen, &size);
	if (r < 0) {
		return r;
	}
	s.pend = calloc(JNL_PENDING_MAX, sizeof(*s.pend));
	s.buf = malloc(VERIFY_BUF);
	s.st = XXH3_createState();
	if (!s.pend || !s.buf || !s.st) {
		return -ENOMEM;
	}
	/* A torn last record (a crash mid-append) is ignored, not corrupt. */
	for (pos = hlen; !s.stopped && pos + JNL_REC_LEN <= size; pos += JNL_REC_LEN) {
		struct jrec j;

		r = jnl_read_record(&s, jfd, pos, &j);
		if (r == 0) {
			r = jnl_pend(&s, &j);
		}
		if (r != 0) {
			r = MIN(
			    r,
			    0); /* overlap: corrupt; too far out of order: keep what is verified */
			break;
		}
		jnl_extend(&s);
	}
	for (size_t i = 0; r == 0 && !s.stopped && i < s.npend; i++) {
		r = s.pend[i].off < s.prefix ? -EBADMSG : 0;
	}
	if (r == 0) {
		*ret_prefix = s.prefix;
		*ret_recs = TAKE_PTR(s.kept);
		*ret_n = s.nkept;
	}
	return r;
}
