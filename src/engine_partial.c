/* SPDX-License-Identifier: MIT */
/*
 * Verified resume (--partial), the receiver's side. A regular file is
 * written not into an unnamed temp file but into the partial store of its
 * destination directory, ENGINE_PARTIAL_DIR (mode 0700): a data file and a
 * journal, both named from the XXH3-128 of the leaf (never the final name,
 * never a name a reader takes for the file). The journal holds the source's
 * identity (size, mtime, leaf) and one record per range written: offset,
 * length and the XXH3-128 of those bytes, appended once they are on disk.
 *
 * A cut session leaves both. A later session for the same leaf, size and
 * mtime re-reads and re-hashes every journaled range (a flipped bit stops
 * it there), keeps the verified prefix whole chunks long, and tells the
 * sender (RESUME) not to send it; the kept bytes are folded into the file's
 * hash first, so the end-to-end check still covers the whole file. A journal
 * that does not parse, or a different source, and the partial is started
 * again from nothing. Committing renames the data file into place.
 */
#include "engine-internal.h"

#include <dirent.h>
#include <sys/file.h>

#include "proto/wire.h"

#define JNL_MAGIC	0x52445054u /* "RDPT" */
#define JNL_VERSION	1
#define JNL_HDR_MAX	(4 + 4 + 8 + 8 + 4 + 2 + FSPATH_NAME_MAX)
#define JNL_REC_LEN	32   /* offset u64, len u64, XXH3-128 */
#define JNL_PENDING_MAX 8192 /* records ahead of the verified prefix, held to sort them */
/* Verified records carried into the fresh journal (32 MiB of them); past it, kept no further. */
#define JNL_KEEP_MAX ((size_t)1 << 20)
#define VERIFY_BUF   ((size_t)4 << 20)

struct jrec {
	uint64_t off, len;
	uint8_t hash[HASH_LEN];
};

/* "<32 hex of XXH3-128(leaf)><suffix>" */
static void partial_name(const char *leaf, const char *suffix, char *out, size_t outlen)
{
	XXH128_canonical_t c;
	uint8_t h[HASH_LEN];
	char hex[2 * HASH_LEN + 1];

	XXH128_canonicalFromHash(&c, XXH3_128bits(leaf, strlen(leaf)));
	memcpy(h, c.digest, HASH_LEN);
	hash_to_hex(h, hex);
	snprintf(out, outlen, "%s%s", hex, suffix);
}

/* The store beneath dirfd, created (0700) when create is set; never through a symlink. */
static int store_open(int dirfd, bool create, int *ret_fd)
{
	int r;

	if (create && mkdirat(dirfd, ENGINE_PARTIAL_DIR, 0700) < 0 && errno != EEXIST) {
		return negerrno();
	}
	r = fspath_open_dir(dirfd, ENGINE_PARTIAL_DIR, ret_fd);
	return r;
}

static size_t jnl_header(const struct efile *f, uint8_t *buf, size_t cap)
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

static void jnl_record(const struct jrec *j, uint8_t out[JNL_REC_LEN])
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
static int hash_range(int fd, uint64_t off, uint64_t len, uint8_t *buf, XXH3_state_t *rec,
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
			  XXH3_state_t *saved, double deadline)
{
	XXH128_canonical_t c;

	XXH3_copyState(saved, f->hash.state);
	XXH3_128bits_reset(st);
	if (hash_range(f->tfd, j->off, j->len, buf, st, &f->hash, deadline) == 0) {
		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
		if (CRYPTO_memcmp(c.digest, j->hash, HASH_LEN) == 0) {
			return true;
		}
	}
	XXH3_copyState(f->hash.state, saved);
	return false;
}

/*
 * Read the journal jfd: 0 with *ret_prefix = the bytes from 0 that its
 * records cover and the data verifies (f->hash fed with them) before the
 * deadline (ts_now's clock), and those records in order in *ret_recs, *ret_n
 * (the caller frees them); -EBADMSG for a journal of another source or one
 * that does not parse (untrusted: every length and offset checked, no
 * overlaps); -errno.
 */
static int jnl_verify(struct efile *f, int jfd, double deadline, uint64_t *ret_prefix,
		      struct jrec **ret_recs, size_t *ret_n)
{
	_cleanup_free_ struct jrec *pend = NULL, *kept = NULL;
	size_t nkept = 0, capkept = 0;
	_cleanup_free_ uint8_t *buf = NULL;
	uint8_t want[JNL_HDR_MAX], have[JNL_HDR_MAX], rec[JNL_REC_LEN];
	size_t hlen = jnl_header(f, want, sizeof(want)), npend = 0;
	uint64_t prefix = 0, pos;
	XXH3_state_t *st, *saved;
	struct stat sb;
	bool stopped = false;
	int r = 0;

	if (hlen == 0 || fstat(jfd, &sb) < 0) {
		return hlen == 0 ? -EINVAL : negerrno();
	}
	if ((uint64_t)sb.st_size < hlen || pread(jfd, have, hlen, 0) != (ssize_t)hlen ||
	    memcmp(have, want, hlen) != 0) {
		return -EBADMSG; /* another source, another name, or nothing yet */
	}
	pend = calloc(JNL_PENDING_MAX, sizeof(*pend));
	buf = malloc(VERIFY_BUF);
	st = XXH3_createState();
	saved = XXH3_createState();
	if (!pend || !buf || !st || !saved) {
		XXH3_freeState(st);
		XXH3_freeState(saved);
		return -ENOMEM;
	}
	/* A torn last record (a crash mid-append) is ignored, not corrupt. */
	for (pos = hlen; !stopped && pos + JNL_REC_LEN <= (uint64_t)sb.st_size;
	     pos += JNL_REC_LEN) {
		struct rbuf rb;
		struct jrec j;

		if (pread(jfd, rec, JNL_REC_LEN, (off_t)pos) != JNL_REC_LEN) {
			r = -EIO;
			break;
		}
		rbuf_init(&rb, rec, JNL_REC_LEN);
		j.off = rbuf_get_u64(&rb);
		j.len = rbuf_get_u64(&rb);
		rbuf_get_bytes(&rb, j.hash, HASH_LEN);
		if (rb.error || j.len == 0 || j.len > f->size || j.off > f->size - j.len ||
		    j.off < prefix) {
			r = -EBADMSG;
			break;
		}
		for (size_t i = 0; i < npend && r == 0; i++) {
			r = pend[i].off == j.off ? -EBADMSG : 0;
		}
		if (r < 0 || npend == JNL_PENDING_MAX) {
			break; /* overlap: corrupt; too far out of order: keep what is verified */
		}
		pend[npend++] = j;
		/* Extend the prefix with every pending record that starts where it ends. */
		for (size_t i = 0; i < npend && !stopped;) {
			if (pend[i].off != prefix) {
				i++;
				continue;
			}
			j = pend[i];
			pend[i] = pend[--npend];
			if (nkept == capkept) {
				size_t cap = capkept ? capkept * 2 : 1024;
				struct jrec *t =
				    cap <= JNL_KEEP_MAX ? realloc(kept, cap * sizeof(*t)) : NULL;

				/* As many as we keep: the rest is re-sent. */
				if (!t) {
					stopped = true;
					break;
				}
				kept = t;
				capkept = cap;
			}
			/*
			 * A flipped bit, data never written, or out of time (the
			 * peer waits): what is verified is kept, the rest re-sent.
			 */
			if (ts_now(NULL) > deadline ||
			    !verify_record(f, &j, buf, st, saved, deadline)) {
				stopped = true;
				break;
			}
			kept[nkept++] = j;
			prefix += j.len;
			i = 0;
		}
	}
	for (size_t i = 0; r == 0 && !stopped && i < npend; i++) {
		r = pend[i].off < prefix ? -EBADMSG : 0;
	}
	XXH3_freeState(st);
	XXH3_freeState(saved);
	if (r == 0) {
		*ret_prefix = prefix;
		*ret_recs = TAKE_PTR(kept);
		*ret_n = nkept;
	}
	return r;
}

/*
 * A fresh journal for f: its header and the n records (in order, from 0),
 * written beside the old one and renamed over it. Records stay one per
 * chunk, so a later run re-verifies (and loses to a flipped bit) no more
 * than a chunk at a time.
 */
static int jnl_rewrite(struct efile *f, int store, const struct jrec *recs, size_t n, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ uint8_t *buf = malloc(JNL_HDR_MAX + n * JNL_REC_LEN);
	char tmp[64], name[64];
	size_t len = buf ? jnl_header(f, buf, JNL_HDR_MAX) : 0;

	if (len == 0) {
		return buf ? -EINVAL : -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		jnl_record(&recs[i], buf + len);
		len += JNL_REC_LEN;
	}
	partial_name(f->leaf, ".jnl.new", tmp, sizeof(tmp));
	partial_name(f->leaf, ".jnl", name, sizeof(name));
	fd = openat(store, tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		return negerrno();
	}
	if (pwrite(fd, buf, len, 0) != (ssize_t)len || renameat(store, tmp, store, name) < 0) {
		int r = negerrno();

		unlinkat(store, tmp, 0);
		return r < 0 ? r : -EIO;
	}
	f->jend = len;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* The data file of f in the store, locked; -EWOULDBLOCK: another writer has it. */
static int data_open(struct efile *f, int store, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	char name[64];
	struct stat sb;

	partial_name(f->leaf, ".data", name, sizeof(name));
	fd = openat(store, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		return negerrno();
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_nlink != 1) {
		return -EINVAL;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		return negerrno();
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/*
 * Open f's partial: the data file (locked), the journal verified, kept
 * bytes folded into f->hash (initialised by the caller). 0 with f->partial
 * set; -EWOULDBLOCK when another session writes it (the caller then uses a
 * temp file); -errno.
 */
static int partial_open_once(struct engine *e, struct efile *f)
{
	_cleanup_close_ int store = -1, dfd = -1, jfd = -1, newj = -1;
	_cleanup_free_ struct jrec *recs = NULL;
	_cleanup_free_ uint8_t *buf = NULL;
	uint64_t prefix = 0, kept, end = 0;
	size_t n = 0;
	char name[64];
	int r;

	r = store_open(e->dirs[f->dir].fd, true, &store);
	if (r < 0) {
		return r;
	}
	if (f->device) {
		/* The device is the data (held O_EXCL: no other writer); the store keeps the journal. */
		dfd = fcntl(f->tfd, F_DUPFD_CLOEXEC, 3);
		r = dfd < 0 ? negerrno() : 0;
	} else {
		r = data_open(f, store, &dfd);
	}
	if (r < 0) {
		return r;
	}
	int own_tfd = f->tfd;

	f->tfd = dfd; /* for the reads below */
	partial_name(f->leaf, ".jnl", name, sizeof(name));
	jfd = openat(store, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	r = jfd >= 0 ? jnl_verify(f, jfd, e->verify_deadline, &prefix, &recs, &n) : -ENOENT;
	f->tfd = own_tfd;
	if (r == -ENOMEM) {
		return r;
	}
	/* Nothing there, another source, or not a journal: from nothing. */
	kept = r < 0 ? 0 : prefix;
	/* Whole chunks of this session (or all of it): the sender skips whole chunks. */
	if (kept != f->size) {
		kept = kept / e->p->chunk_size * e->p->chunk_size;
	}
	buf = malloc(VERIFY_BUF);
	if (!buf) {
		return -ENOMEM;
	}
	/*
	 * f->hash must hold exactly [0, kept): again from the disk when it holds
	 * more (records of another chunk size: rare). Out of time for that, the
	 * file goes to a temp file and the partial stays as it is.
	 */
	if (r < 0 || kept != prefix) {
		file_hash_free(&f->hash);
		r = file_hash_init(&f->hash);
		if (r == 0) {
			r = hash_range(dfd, 0, kept, buf, NULL, &f->hash, e->verify_deadline);
		}
		if (r < 0) {
			return r;
		}
	}
	/* The records that end within the kept bytes, and one for the rest of them. */
	while (n > 0 && recs[n - 1].off + recs[n - 1].len > kept) {
		n--;
	}
	end = n ? recs[n - 1].off + recs[n - 1].len : 0;
	if (end < kept) {
		XXH3_state_t *st = XXH3_createState();
		struct jrec *t = realloc(recs, (n + 1) * sizeof(*recs));
		XXH128_canonical_t c;

		if (t) {
			recs = t;
		}
		r = !st || !t ? -ENOMEM : 0;
		if (r == 0) {
			XXH3_128bits_reset(st);
			r = hash_range(dfd, end, kept - end, buf, st, NULL, 0);
		}
		if (r == 0) {
			XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
			recs[n] = (struct jrec){ .off = end, .len = kept - end };
			memcpy(recs[n++].hash, c.digest, HASH_LEN);
		}
		XXH3_freeState(st);
		if (r < 0) {
			return r;
		}
	}
	/*
	 * Nothing past the kept bytes is trusted (and a file longer than the
	 * source never commits). A device keeps its size: its bytes past the
	 * kept ones are written again, and what lies past the source's length
	 * is not the copy's.
	 */
	if (!f->device && ftruncate(dfd, (off_t)kept) < 0) {
		return negerrno();
	}
	r = jnl_rewrite(f, store, recs, n, &newj);
	if (r < 0) {
		return r;
	}
	if (f->device) {
		close(f->tfd); /* dfd is the same open device */
	}
	f->partial = true;
	f->kept = kept;
	f->hash_off = kept;
	f->written = 0;
	f->tfd = TAKE_FD(dfd);
	f->jfd = TAKE_FD(newj);
	f->part_store = TAKE_FD(store);
	return 0;
}

int rx_partial_open(struct engine *e, struct efile *f)
{
	int r = -ENOENT;

	/* What a cut run left is hashed from the disk into f->hash. */
	if (!f->hash.state) {
		r = file_hash_init(&f->hash);
		if (r < 0) {
			return r;
		}
		r = -ENOENT;
	}

	/* A session that commits the last partial of a directory removes the store: again. */
	for (int tries = 0; tries < 3 && r == -ENOENT; tries++) {
		r = partial_open_once(e, f);
		if (r < 0) {
			/* f->hash may hold part of a prefix: start it again. */
			file_hash_free(&f->hash);
			int h = file_hash_init(&f->hash);

			if (h < 0) {
				return h;
			}
		}
	}
	return r;
}

int rx_partial_note(struct efile *f, uint64_t off, uint32_t len, const uint8_t hash[HASH_LEN])
{
	struct jrec j = { .off = off, .len = len };

	if (!f->jbuf) {
		f->jbuf = malloc(ENGINE_JNL_BATCH * JNL_REC_LEN);
		if (!f->jbuf) {
			return -ENOMEM;
		}
	}
	memcpy(j.hash, hash, HASH_LEN);
	jnl_record(&j, f->jbuf + (size_t)f->jn * JNL_REC_LEN);
	f->jn++;
	return f->jn == ENGINE_JNL_BATCH ? rx_partial_flush(f) : 0;
}

int rx_partial_flush(struct efile *f)
{
	size_t len = (size_t)f->jn * JNL_REC_LEN;

	if (f->jn == 0 || f->jfd < 0) {
		f->jn = 0;
		return 0;
	}
	f->jn = 0;
	/* After the data is written; a record whose data is lost is caught by the re-check. */
	if (pwrite(f->jfd, f->jbuf, len, (off_t)f->jend) != (ssize_t)len) {
		return -EIO;
	}
	f->jend += len;
	return 0;
}

/* The store's name of f's data (for the commit's rename). */
void rx_partial_data_name(const struct efile *f, char *out, size_t outlen)
{
	partial_name(f->leaf, ".data", out, outlen);
}

/* After the commit's rename: the journal goes, and the store when it is empty. */
void rx_partial_committed(struct engine *e, struct efile *f)
{
	char name[64];

	partial_name(f->leaf, ".jnl", name, sizeof(name));
	unlinkat(f->part_store, name, 0);
	unlinkat(e->dirs[f->dir].fd, ENGINE_PARTIAL_DIR, AT_REMOVEDIR);
}

/* A partial that must not be resumed (wrong data, a changed source): removed. */
void rx_partial_drop(struct engine *e, struct efile *f)
{
	char name[64];

	if (f->part_store < 0) {
		return;
	}
	partial_name(f->leaf, ".data", name, sizeof(name));
	unlinkat(f->part_store, name, 0);
	partial_name(f->leaf, ".jnl", name, sizeof(name));
	unlinkat(f->part_store, name, 0);
	unlinkat(e->dirs[f->dir].fd, ENGINE_PARTIAL_DIR, AT_REMOVEDIR);
}

/* "<32 hex>.data", ".jnl" or ".jnl.new": a name the store may hold. */
static bool store_name(const char *n)
{
	size_t i = 0;

	while (i < 2 * HASH_LEN && n[i] && strchr("0123456789abcdef", n[i])) {
		i++;
	}
	return i == 2 * HASH_LEN &&
	       (!strcmp(n + i, ".data") || !strcmp(n + i, ".jnl") || !strcmp(n + i, ".jnl.new"));
}

int engine_partial_sweep(int parent, uint64_t max_age_s)
{
	_cleanup_close_ int store = -1;
	struct timespec now;
	struct dirent *de;
	int removed = 0;
	DIR *d;

	if (max_age_s == 0) {
		return 0;
	}
	int r = store_open(parent, false, &store);
	if (r < 0) {
		return r == -ENOENT ? 0 : r;
	}
	d = fdopendir(store);
	if (!d) {
		return negerrno();
	}
	store = -1;
	clock_gettime(CLOCK_REALTIME, &now);
	while ((de = readdir(d))) {
		_cleanup_close_ int fd = -1;
		struct stat sb;

		if (!store_name(de->d_name)) {
			continue;
		}
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
		    (uint64_t)sb.st_mtim.tv_sec + max_age_s > (uint64_t)now.tv_sec) {
			continue;
		}
		/* A data file a live session writes is locked (and young). */
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			continue;
		}
		if (unlinkat(dirfd(d), de->d_name, 0) == 0) {
			removed++;
		}
	}
	closedir(d);
	unlinkat(parent, ENGINE_PARTIAL_DIR, AT_REMOVEDIR);
	return removed;
}

/* --partial on a receiver, with a peer that knows RESUME. */
static bool partial_enable(struct engine *e)
{
	return e->p->role == ENGINE_RECEIVER && (e->p->open_flags & PROTO_OPEN_PARTIAL) &&
	       (e->p->peer_caps & PROTO_CAP_PARTIAL);
}

/* What is on disk is journaled each turn, so a cut loses little. */
static int partial_step(struct engine *e)
{
	for (uint32_t i = 0; i < e->files_hw; i++) {
		struct efile *f = &e->files[i];

		if (f->used && f->jn > 0 && rx_partial_flush(f) < 0) {
			close(f->jfd);
			f->jfd = -1;
		}
	}
	return 0;
}

/* A cut file keeps every record it has. */
static void partial_file_release(struct engine *e, struct efile *f)
{
	(void)e;
	if (f->jfd >= 0) {
		rx_partial_flush(f);
	}
}

const struct engine_feature engine_feature_partial = {
	.name = "partial",
	.file_release = partial_file_release,
	.enable = partial_enable,
	.step = partial_step,
};
