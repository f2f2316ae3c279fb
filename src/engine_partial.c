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
#include <time.h>

#include "engine_partial.h"
#include "proto/wire.h"

/* The receiver's session state of --partial. */
struct partial_state {
	/* Kept data is re-verified until then in one FILES batch (see partial_rx_batch). */
	double verify_deadline;
};

extern const struct engine_feature engine_feature_partial;

static struct partial_state *partial_of(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_partial);
}

/* A file kept resumable: the store directory, the journal, its length, records not appended. */
struct partial_file {
	int part_store;
	int jfd;
	uint64_t jend;
	uint8_t *jbuf;
	uint32_t jn;
};

/* f's journal state: every file of a session with --partial has it. */
static struct partial_file *partial_file(const struct engine *e, const struct efile *f)
{
	return engine_file_state(e, &engine_feature_partial, f);
}

/*
 * A fresh journal for f: its header and the n records (in order, from 0),
 * written beside the old one and renamed over it. Records stay one per
 * chunk, so a later run re-verifies (and loses to a flipped bit) no more
 * than a chunk at a time.
 */
static int jnl_rewrite(struct efile *f, struct partial_file *pf, int store, const struct jrec *recs,
		       size_t n, int *ret_fd)
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
	pf->jend = len;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/*
 * How long a partial another session holds is waited for. A session cut
 * with its upstream (a relay hop that died: the hop before it then sends
 * again, fanout.h) lets go as soon as its engine ends; a live writer keeps
 * it, and this session then writes a temp file.
 */
#define PARTIAL_LOCK_WAIT_MS 3000

/* An exclusive lock on fd, waiting at most PARTIAL_LOCK_WAIT_MS. 0 or -EWOULDBLOCK / -errno. */
static int lock_waiting(int fd)
{
	for (int waited = 0;; waited += 20) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			return 0;
		}
		if (errno != EWOULDBLOCK || waited >= PARTIAL_LOCK_WAIT_MS) {
			return negerrno();
		}
		nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
	}
}

/* The data file of f in the store, locked; -EWOULDBLOCK: another writer has it. */
static int data_open(struct efile *f, int store, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	char name[64];
	struct stat sb;
	int r;

	partial_name(f->leaf, ".data", name, sizeof(name));
	fd = openat(store, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		return negerrno();
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_nlink != 1) {
		return -EINVAL;
	}
	r = lock_waiting(fd);
	if (r < 0) {
		return r;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* f's data: the device itself (a second descriptor of it), or the store's data file, locked. */
static int partial_data_open(struct efile *f, int store, int *ret_fd)
{
	int fd;

	if (!f->device) {
		return data_open(f, store, ret_fd);
	}
	/* The device is the data (held O_EXCL: no other writer); the store keeps the journal. */
	fd = fcntl(f->tfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0) {
		return negerrno();
	}
	*ret_fd = fd;
	return 0;
}

/* f's journal in the store, verified against its data (dfd): jnl_verify's answer, or -ENOENT. */
static int partial_jnl_read(struct engine *e, struct efile *f, int store, int dfd,
			    uint64_t *ret_prefix, struct jrec **ret_recs, size_t *ret_n)
{
	struct partial_state *ps = partial_of(e);
	_cleanup_close_ int jfd = -1;
	int own_tfd = f->tfd, r;
	char name[64];

	f->tfd = dfd; /* for the reads below */
	partial_name(f->leaf, ".jnl", name, sizeof(name));
	jfd = openat(store, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	r = jfd >= 0 ? jnl_verify(f, jfd, ps->verify_deadline, ret_prefix, ret_recs, ret_n)
		     : -ENOENT;
	f->tfd = own_tfd;
	return r;
}

/* f->hash again, from nothing: [0, kept) of dfd, by the verify deadline. */
static int partial_rehash(struct engine *e, struct efile *f, int dfd, uint64_t kept, uint8_t *buf)
{
	struct partial_state *ps = partial_of(e);
	int r;

	file_hash_free(&f->hash);
	r = engine_hash_start(e, f);
	if (r == 0) {
		r = hash_range(dfd, 0, kept, buf, NULL, &f->hash, ps->verify_deadline);
	}
	return r;
}

/*
 * The records (*io_recs, *io_n of them) cut to those that end within the
 * kept bytes, and one more for the rest of them, hashed from dfd: the
 * fresh journal covers [0, kept) exactly.
 */
static int jnl_records_to(int dfd, uint64_t kept, uint8_t *buf, struct jrec **io_recs, size_t *io_n)
{
	size_t n = *io_n;
	uint64_t end;
	int r = 0;

	while (n > 0 && (*io_recs)[n - 1].off + (*io_recs)[n - 1].len > kept) {
		n--;
	}
	end = n ? (*io_recs)[n - 1].off + (*io_recs)[n - 1].len : 0;
	if (end < kept) {
		XXH3_state_t *st = XXH3_createState();
		struct jrec *t = realloc(*io_recs, (n + 1) * sizeof(*t));
		XXH128_canonical_t c;

		if (t) {
			*io_recs = t;
		}
		r = !st || !t ? -ENOMEM : 0;
		if (r == 0) {
			XXH3_128bits_reset(st);
			r = hash_range(dfd, end, kept - end, buf, st, NULL, 0);
		}
		if (r == 0) {
			XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
			t[n] = (struct jrec){ .off = end, .len = kept - end };
			memcpy(t[n++].hash, c.digest, HASH_LEN);
		}
		XXH3_freeState(st);
	}
	*io_n = n;
	return r;
}

/*
 * f writes into its partial from here: its data (*io_dfd) and a fresh
 * journal of the n records, in the store (*io_store), [0, kept) kept.
 */
static int partial_start(struct engine *e, struct efile *f, uint64_t kept, const struct jrec *recs,
			 size_t n, int *io_store, int *io_dfd)
{
	struct partial_file *pf = partial_file(e, f);
	_cleanup_close_ int newj = -1;
	int r;

	/*
	 * Nothing past the kept bytes is trusted (and a file longer than the
	 * source never commits). A device keeps its size: its bytes past the
	 * kept ones are written again, and what lies past the source's length
	 * is not the copy's.
	 */
	if (!f->device && ftruncate(*io_dfd, (off_t)kept) < 0) {
		return negerrno();
	}
	r = jnl_rewrite(f, pf, *io_store, recs, n, &newj);
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
	f->tfd = TAKE_FD(*io_dfd);
	pf->jfd = TAKE_FD(newj);
	pf->part_store = TAKE_FD(*io_store);
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
	_cleanup_close_ int store = -1, dfd = -1;
	_cleanup_free_ struct jrec *recs = NULL;
	_cleanup_free_ uint8_t *buf = NULL;
	uint64_t prefix = 0, kept;
	size_t n = 0;
	int r;

	r = partial_store_open(e->dirs[f->dir].fd, true, &store);
	if (r >= 0) {
		r = partial_data_open(f, store, &dfd);
	}
	if (r < 0) {
		return r;
	}
	r = partial_jnl_read(e, f, store, dfd, &prefix, &recs, &n);
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
	r = r < 0 || kept != prefix ? partial_rehash(e, f, dfd, kept, buf) : 0;
	/* The records that end within the kept bytes, and one for the rest of them. */
	if (r >= 0) {
		r = jnl_records_to(dfd, kept, buf, &recs, &n);
	}
	if (r < 0) {
		return r;
	}
	return partial_start(e, f, kept, recs, n, &store, &dfd);
}

static int rx_partial_open(struct engine *e, struct efile *f)
{
	int r = -ENOENT;

	/* What a cut run left is hashed from the disk into f->hash. */
	if (!f->hash.state) {
		r = engine_hash_start(e, f);
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
			int h = engine_hash_start(e, f);

			if (h < 0) {
				return h;
			}
		}
	}
	return r;
}

bool rx_partial_journaled(const struct engine *e, const struct efile *f)
{
	return f->partial && partial_file(e, f)->jfd >= 0;
}

void rx_partial_stop(struct engine *e, struct efile *f)
{
	struct partial_file *pf = partial_file(e, f);

	if (pf->jfd >= 0) {
		close(pf->jfd);
	}
	pf->jfd = -1;
}

static int partial_flush(struct partial_file *pf)
{
	size_t len = (size_t)pf->jn * JNL_REC_LEN;

	if (pf->jn == 0 || pf->jfd < 0) {
		pf->jn = 0;
		return 0;
	}
	pf->jn = 0;
	/* After the data is written; a record whose data is lost is caught by the re-check. */
	if (pwrite(pf->jfd, pf->jbuf, len, (off_t)pf->jend) != (ssize_t)len) {
		return -EIO;
	}
	pf->jend += len;
	return 0;
}

static int partial_note(struct partial_file *pf, uint64_t off, uint32_t len,
			const uint8_t hash[HASH_LEN])
{
	struct jrec j = { .off = off, .len = len };

	if (!pf->jbuf) {
		pf->jbuf = malloc(ENGINE_JNL_BATCH * JNL_REC_LEN);
		if (!pf->jbuf) {
			return -ENOMEM;
		}
	}
	memcpy(j.hash, hash, HASH_LEN);
	jnl_record(&j, pf->jbuf + (size_t)pf->jn * JNL_REC_LEN);
	pf->jn++;
	return pf->jn == ENGINE_JNL_BATCH ? partial_flush(pf) : 0;
}

static int rx_partial_note(struct engine *e, struct efile *f, uint64_t off, uint32_t len,
			   const uint8_t hash[HASH_LEN])
{
	int r = partial_note(partial_file(e, f), off, len, hash);

	if (r < 0) {
		rx_partial_stop(e, f);
	}
	return r;
}

/* The store's name of f's data (for the commit's rename). */
static void rx_partial_data_name(const struct efile *f, char *out, size_t outlen)
{
	partial_name(f->leaf, ".data", out, outlen);
}

/* After the commit's rename: the journal goes, and the store when it is empty. */
void rx_partial_committed(struct engine *e, struct efile *f)
{
	char name[64];

	partial_name(f->leaf, ".jnl", name, sizeof(name));
	unlinkat(partial_file(e, f)->part_store, name, 0);
	unlinkat(e->dirs[f->dir].fd, ENGINE_PARTIAL_DIR, AT_REMOVEDIR);
}

/* A partial that must not be resumed (wrong data, a changed source): removed. */
static void rx_partial_drop(struct engine *e, const struct efile *f)
{
	const struct partial_file *pf = partial_file(e, f);
	char name[64];

	if (pf->part_store < 0) {
		return;
	}
	partial_name(f->leaf, ".data", name, sizeof(name));
	unlinkat(pf->part_store, name, 0);
	partial_name(f->leaf, ".jnl", name, sizeof(name));
	unlinkat(pf->part_store, name, 0);
	unlinkat(e->dirs[f->dir].fd, ENGINE_PARTIAL_DIR, AT_REMOVEDIR);
}

/* --partial on a receiver, with a peer that knows RESUME. */
static bool partial_enable(struct engine *e)
{
	return e->p->role == ENGINE_RECEIVER && (e->p->open_flags & PROTO_OPEN_PARTIAL) &&
	       (e->p->peer_caps & PROTO_CAP_PARTIAL);
}

/*
 * A FILES batch: the time it may spend re-reading kept data is a quarter of
 * the idle timeout, at most VERIFY_BUDGET_MAX_S.
 */
static void partial_rx_batch(struct engine *e)
{
	struct partial_state *ps = partial_of(e);

	ps->verify_deadline =
	    ts_now(NULL) + MIN(e->p->idle_timeout_ms / 4000.0, VERIFY_BUDGET_MAX_S);
	if (e->p->faults & ENGINE_FAULT_NO_VERIFY_TIME) {
		ps->verify_deadline = 0;
	}
}

/* What is on disk is journaled each turn, so a cut loses little. */
static int partial_step(struct engine *e)
{
	for (uint32_t i = 0; i < e->files_hw; i++) {
		struct efile *f = file_at(e, i);
		struct partial_file *pf = partial_file(e, f);

		if (f->used && pf->jn > 0 && partial_flush(pf) < 0) {
			rx_partial_stop(e, f);
		}
	}
	return 0;
}

static size_t partial_file_size(const struct engine *e)
{
	(void)e;
	return sizeof(struct partial_file);
}

static void partial_file_init(struct engine *e, struct efile *f)
{
	struct partial_file *pf = partial_file(e, f);

	pf->part_store = pf->jfd = -1;
}

/* A cut file keeps every record it has; then what it holds of the store goes. */
static void partial_file_release(struct engine *e, struct efile *f)
{
	struct partial_file *pf = partial_file(e, f);

	if (pf->jfd >= 0) {
		partial_flush(pf);
		close(pf->jfd);
	}
	if (pf->part_store >= 0) {
		close(pf->part_store);
	}
	free(pf->jbuf);
}

/* A file bigger than a chunk is kept resumable: in the store, or a device's journal. */
static int partial_rx_store(struct engine *e, struct efile *f)
{
	int r;

	if (f->size <= e->p->chunk_size) {
		return ENGINE_DECLINED;
	}
	r = rx_partial_open(e, f);
	return r == 0 || r == -ENOMEM ? r : ENGINE_DECLINED;
}

/* Not a failure of the copy when the journal can't be written: only less can be resumed. */
static void partial_rx_written(struct engine *e, struct efile *f, uint64_t off, uint32_t len,
			       const uint8_t *d)
{
	if (f->partial && d) {
		rx_partial_note(e, f, off, len, d);
	}
}

/* Durable in the store: renamed from there into place (a device is named already). */
static int partial_rx_durable(struct engine *e, struct efile *f)
{
	char pname[64];

	if (!f->partial || f->device) {
		return ENGINE_DECLINED;
	}
	rx_partial_data_name(f, pname, sizeof(pname));
	rx_named(e, f,
		 renameat(partial_file(e, f)->part_store, pname, e->dirs[f->dir].fd, f->leaf) < 0
		     ? negerrno()
		     : 0);
	return 0;
}

static void partial_rx_named(struct engine *e, struct efile *f)
{
	if (f->partial) {
		rx_partial_committed(e, f);
	}
}

/* A partial that verified wrong, or of a source that changed, is never resumed. */
static void partial_rx_settled(struct engine *e, const struct efile *f, enum engine_rx_end how)
{
	if (how == ENGINE_RX_FAILED && f->partial && !f->renamed &&
	    (f->fail_code == PERR_INTEGRITY || f->fail_code == PERR_SOURCE_CHANGED)) {
		rx_partial_drop(e, f);
	}
}

const struct engine_feature engine_feature_partial = {
	.name = "partial",
	.file_size = partial_file_size,
	.file_init = partial_file_init,
	.file_release = partial_file_release,
	.enable = partial_enable,
	.state_size = sizeof(struct partial_state),
	.step = partial_step,
	.rx_batch = partial_rx_batch,
	.rx_store = partial_rx_store,
	.rx_written = partial_rx_written,
	.rx_durable = partial_rx_durable,
	.rx_named = partial_rx_named,
	.rx_settled = partial_rx_settled,
};
