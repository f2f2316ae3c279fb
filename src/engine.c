/* SPDX-License-Identifier: MIT */
/*
 * The transfer engine (see engine.h for the shape). One thread, one event
 * loop over three sources: the TLS control channel, the transport's
 * completion fd and io_uring's eventfd.
 */
#include "engine.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "diskio.h"
#include "fspath.h"
#include "hash.h"
#include "macro.h"
#include "pool.h"
#include "tls.h"
#include "xport.h"

_Static_assert(PROTO_MAX_LANES == XPORT_MAX_LANES, "RING carries one rkey per lane");

#define FILE_TABLE     1024 /* files in flight (power of two) */
#define FILES_WINDOW   768  /* offered but unresolved files, sender side */
#define OPEN_FILES_MAX 64   /* sender: source files open at once */
/*
 * Every file in flight holds its directory, so the cache is larger than the
 * file table: a free entry always exists.
 */
#define DIR_CACHE	   (FILE_TABLE + 64)
#define STALE_TEMP_AGE_S   2	/* younger temp files may not be locked yet */
#define DIR_META_MAX	   4096 /* directories whose mode (and with -p mtime) is set last */
#define URING_ENTRIES	   2048
#define IOWQ_BOUND_WORKERS 64
/*
 * Small files finishing in a stream are made durable together: one syncfs(2)
 * of their file system instead of one fsync each, once at least
 * SYNC_BATCH_MIN of them wait. Fewer (or bigger files) are fsynced alone, so
 * a lone file never flushes other writers' data.
 */
#define SYNC_BATCH_FILE_MAX ((uint64_t)1 << 20)
#define SYNC_BATCH_MIN	    8
#define HUGE_2M		    ((size_t)2 << 20)

enum { UD_READ = 1, UD_WRITE = 2, UD_FSYNC = 3, UD_DIRSYNC = 4 };
#define UD(kind, idx) (((uint64_t)(kind) << 56) | (uint64_t)(idx))
#define UD_KIND(ud)   ((unsigned)((ud) >> 56))
#define UD_IDX(ud)    ((uint32_t)(ud))

enum chunk_state { CH_FREE = 0, CH_READING, CH_READY, CH_POSTED };
enum slot_state { SL_FREE = 0, SL_HELD };

struct chunk {
	uint8_t state;
	uint32_t fidx; /* file table index */
	uint64_t off;
	uint32_t len;  /* payload bytes */
	uint32_t done; /* bytes read so far */
	uint32_t slot; /* receiver slot once posted */
};

struct rslot {
	uint8_t state;
	bool hashed, written;
	uint32_t fidx;
	uint64_t off;
	uint32_t len;
	uint32_t wdone; /* bytes written so far */
	uint32_t lane;
	bool credit_due; /* done, its credit held back by --bwlimit */
};

struct efile {
	bool used;
	uint32_t id;
	char *name;
	uint8_t ftype;
	uint64_t size;
	struct timespec t0;
	struct file_hash hash;
	bool hash_live;
	bool failed;
	uint32_t fail_code;
	bool fail_peer; /* the failure is the peer's (it said so, or sent what we refuse) */
	char fail_text[256];
	/* sender */
	char *src_path; /* what to open, relative to src_dirfd */
	int src_dirfd;
	bool acked, started, finished, done_sent;
	int fd, dfd;
	struct dio_align dio;
	uint64_t read_off, send_off;
	uint32_t chunks_out; /* chunks of this file not yet posted */
	/* receiver */
	int dir; /* dir cache index, -1 none */
	char *leaf;
	char tmpname[FSPATH_NAME_MAX + 1];
	int tfd;
	uint64_t hash_off, recv_bytes, written;
	uint32_t writes_out, held;
	bool got_done, fsyncing, renamed;
	uint64_t dir_sync_needed; /* renamed: durable once the dir's completed >= this */
	uint32_t done_status;
	uint64_t done_bytes;
	uint8_t done_hash[HASH_LEN];
	char done_text[256];
	struct proto_file meta;
};

struct lane_ent {
	uint64_t wr_id;
	int32_t chunk; /* sender chunk released on completion, -1 none */
};

struct lane {
	struct lane_ent *fifo;
	unsigned head, len, cap;
	unsigned unsignaled;
	unsigned batch_last; /* index in the pending batch of this lane's last WR, +1 */
};

/*
 * A destination directory. Renames into it become durable with an fsync of
 * the directory; one runs at a time per directory, and every rename made
 * while it runs waits for the next one, so a stream of small files shares
 * each directory fsync instead of paying one apiece.
 */
struct dirent_cache {
	char *path;
	int fd;
	unsigned refs;
	bool dirty;	    /* renames wait for a directory fsync */
	bool syncing;	    /* a directory fsync is in flight */
	uint64_t submitted; /* directory fsyncs submitted */
	uint64_t completed; /* ... and completed (in order: one at a time) */
	int sync_error;	    /* of the last completed one */
};

struct engine {
	const struct engine_params *p;
	struct engine_stats st;
	uint32_t err_code;
	char *err;
	size_t errlen;
	bool failed;
	bool error_sent; /* the peer has been told why (ERROR) */
	int fail_r;	 /* the -errno of the failure: -EREMOTEIO when the peer sent ERROR */

	struct io_uring ring;
	bool ring_ok;
	int uring_efd;
	unsigned uring_pending; /* SQEs prepared, not submitted */
	unsigned uring_inflight;

	struct pool *pool;
	struct xport_mr *mr;
	uint8_t *desc_area; /* receiver: descriptor array; sender: staging */

	struct efile files[FILE_TABLE];
	uint32_t next_id;    /* sender: next id to assign; receiver: last id seen */
	uint32_t files_open; /* entries used */

	/* sender */
	/* Taken from the source and not offered yet; the source has no more; offered in all. */
	const struct engine_src *next_src;
	bool src_done;
	uint32_t offered;

	uint32_t oldest_id; /* no file below this id is in flight */
	uint32_t offered_unresolved;
	uint32_t open_fds;
	struct chunk *chunks;
	uint32_t *free_slots;
	uint32_t nfree_slots;
	uint64_t rring_addr, rdesc_addr;
	uint32_t rkey[XPORT_MAX_LANES]; /* the receiver's, per lane (rails: per device) */
	bool have_ring;
	bool sent_end, got_end;
	uint64_t seq;
	size_t rr_lane;
	struct timespec bw_t0;
	uint64_t bw_sent;
	uint32_t ncredit_due; /* receiver: slots whose credit --bwlimit holds back */

	/* receiver */
	struct rslot *rslots;
	/*
	 * No transport fences (verbs): each held slot is copied here and hashed
	 * and written from the copy, which the peer cannot reach. Chunk index.
	 */
	bool rx_copy;
	uint32_t copy_base;
	struct dirent_cache dirs[DIR_CACHE];
	uint32_t *commit_batch; /* file indexes renamed, awaiting their dir fsync */
	uint32_t ncommit;
	/* batched durability (see SYNC_BATCH_MIN) */
	uint32_t *sync_wait; /* small files verified, waiting to be made durable */
	uint32_t nsync_wait;
	uint32_t *sync_run; /* the batch whose syncfs runs now */
	uint32_t nsync_run;
	bool sync_running;
	pthread_t sync_thread;
	int sync_efd;		 /* the sync thread says it is done */
	int sync_fds[DIR_CACHE]; /* one directory per file system in the batch */
	size_t nsync_fds;
	int sync_result;
	uint64_t *seen; /* hashes of names received this session */
	size_t seen_n, seen_cap;
	struct {
		char *name;
		struct proto_file meta;
		bool created; /* by us: takes the sender's mode (an existing one keeps its own) */
	} dirs_meta[DIR_META_MAX];
	size_t ndirs_meta;

	/* both */
	struct lane lanes[XPORT_MAX_LANES];
	struct xport_wr *batch;
	size_t nbatch, batch_cap;
	uint64_t wr_seq;
	uint64_t bytes_progress;
	uint64_t credits;	       /* returned (receiver) or received (sender) */
	struct timespec last_activity; /* the last data progress (see progress_mark) */
	struct timespec last_ping;
};

/* ---- small helpers ----------------------------------------------------- */

static double ts_now(struct timespec *ret)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	if (ret) {
		*ret = t;
	}
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double ts_since(const struct timespec *t0)
{
	return ts_now(NULL) - ((double)t0->tv_sec + (double)t0->tv_nsec / 1e9);
}

static int fail(struct engine *e, uint32_t code, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void rx_discard(struct engine *e, struct efile *f);

/* Record the session failure (the first one wins) and return r. */
static int fail(struct engine *e, uint32_t code, int r, const char *fmt, ...)
{
	va_list ap;

	if (!e->failed) {
		e->failed = true;
		e->err_code = code;
		e->fail_r = r;
		va_start(ap, fmt);
		vsnprintf(e->err, e->errlen, fmt, ap);
		va_end(ap);
	}
	return r;
}

static uint32_t errno_to_perr(int r)
{
	switch (r) {
	case -ENOSPC:
	case -EDQUOT:
		return PERR_NOSPACE;
	case -EACCES:
	case -EPERM:
	case -EROFS:
		return PERR_PERMISSION;
	case -ENOENT:
		return PERR_NOT_FOUND;
	case -ELOOP:
	case -EXDEV:
	case -ENOTDIR:
	case -EISDIR:
	case -EINVAL:
	case -ENAMETOOLONG:
		return PERR_BAD_PATH;
	default:
		return PERR_IO;
	}
}

static void file_fail(struct efile *f, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void file_fail(struct efile *f, uint32_t code, const char *fmt, ...)
{
	va_list ap;

	if (f->failed) {
		return;
	}
	f->failed = true;
	f->fail_code = code;
	va_start(ap, fmt);
	vsnprintf(f->fail_text, sizeof(f->fail_text), fmt, ap);
	va_end(ap);
}

/* Count a failed file: the first failure's code and side are kept for the exit code. */
static void note_failure(struct engine *e, const char *name, uint32_t code, bool local,
			 const char *text)
{
	e->st.files_failed++;
	if (!e->st.first_error) {
		e->st.first_error = code;
		e->st.first_error_local = local;
	}
	if (e->p->ev.file_failed) {
		e->p->ev.file_failed(e->p->ev.ud, name, code, local, text);
	}
}

static struct efile *file_by_id(struct engine *e, uint32_t id)
{
	struct efile *f = &e->files[id % FILE_TABLE];

	return f->used && f->id == id ? f : NULL;
}

static uint32_t file_index(struct engine *e, struct efile *f)
{
	return (uint32_t)(f - e->files);
}

static void file_release(struct engine *e, struct efile *f)
{
	if (f->hash_live) {
		file_hash_free(&f->hash);
	}
	if (f->fd >= 0) {
		close(f->fd);
		e->open_fds--;
	}
	if (f->dfd >= 0) {
		close(f->dfd);
	}
	if (f->tfd >= 0) {
		close(f->tfd);
	}
	if (f->dir >= 0) {
		e->dirs[f->dir].refs--;
	}
	free(f->name);
	free(f->leaf);
	free(f->src_path);
	memset(f, 0, sizeof(*f));
	f->fd = f->dfd = f->tfd = f->dir = -1;
	e->files_open--;
}

/* ---- io_uring ---------------------------------------------------------- */

static struct io_uring_sqe *uring_sqe(struct engine *e)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);

	if (!sqe) {
		io_uring_submit(&e->ring);
		e->uring_pending = 0;
		sqe = io_uring_get_sqe(&e->ring);
	}
	if (sqe) {
		e->uring_pending++;
		e->uring_inflight++;
	}
	return sqe;
}

static int uring_flush(struct engine *e)
{
	int r;

	if (e->uring_pending == 0) {
		return 0;
	}
	r = io_uring_submit(&e->ring);
	if (r < 0) {
		return fail(e, PERR_IO, r, "io_uring_submit: %s", strerror(-r));
	}
	e->uring_pending = 0;
	return 0;
}

/* ---- transport posting ------------------------------------------------- */

static int batch_add(struct engine *e, const struct xport_wr *wr)
{
	if (e->nbatch == e->batch_cap) {
		size_t cap = e->batch_cap ? e->batch_cap * 2 : 64;
		struct xport_wr *b = realloc(e->batch, cap * sizeof(*b));
		if (!b) {
			return -ENOMEM;
		}
		e->batch = b;
		e->batch_cap = cap;
	}
	e->batch[e->nbatch++] = *wr;
	return 0;
}

/* Room for n more WRs on a lane's send queue? */
static bool lane_room(struct engine *e, unsigned lane, unsigned n)
{
	return e->lanes[lane].len + n <= e->lanes[lane].cap;
}

/*
 * Queue a WR on its lane's FIFO and in the batch. Signal every quarter of
 * the send queue so it always drains; batch_flush signals each lane's last.
 */
static int lane_push(struct engine *e, struct xport_wr *wr, int32_t chunk)
{
	struct lane *l = &e->lanes[wr->lane];
	unsigned every = MAX(1u, l->cap / 4);
	int r;

	if (l->len >= l->cap) {
		return -ENOSPC;
	}
	wr->wr_id = ++e->wr_seq;
	if (++l->unsignaled >= every) {
		wr->flags |= XPORT_SEND_SIGNALED;
	}
	if (wr->flags & XPORT_SEND_SIGNALED) {
		l->unsignaled = 0;
	}
	l->fifo[(l->head + l->len) % l->cap] = (struct lane_ent){ wr->wr_id, chunk };
	l->len++;
	r = batch_add(e, wr);
	if (r < 0) {
		return fail(e, PERR_INTERNAL, r, "out of memory");
	}
	l->batch_last = (unsigned)e->nbatch;
	return 0;
}

static int batch_flush(struct engine *e)
{
	struct xport *x = e->p->x;
	int r;

	if (e->nbatch == 0) {
		return 0;
	}
	for (unsigned i = 0; i < x->nlanes; i++) {
		struct lane *l = &e->lanes[i];
		if (l->batch_last) {
			e->batch[l->batch_last - 1].flags |= XPORT_SEND_SIGNALED;
			l->batch_last = 0;
			l->unsignaled = 0;
		}
	}
	r = x->ops->post_writes(x, e->batch, e->nbatch);
	e->nbatch = 0;
	if (r < 0) {
		return fail(e, PERR_TRANSPORT, r, "post to transport: %s", strerror(-r));
	}
	return 0;
}

/* A signaled completion: everything up to wr_id on that lane is done. */
static void lane_complete(struct engine *e, unsigned lane, uint64_t wr_id)
{
	struct lane *l = &e->lanes[lane];

	while (l->len > 0 && l->fifo[l->head].wr_id <= wr_id) {
		int32_t c = l->fifo[l->head].chunk;
		if (c >= 0) {
			e->chunks[c].state = CH_FREE;
			pool_put(e->pool, (uint32_t)c);
		}
		l->head = (l->head + 1) % l->cap;
		l->len--;
	}
}

/* ---- receiver: directories and commits ---------------------------------- */

static int dir_get(struct engine *e, const char *path, int *ret_idx)
{
	int free_idx = -1, r, fd;

	for (int i = 0; i < DIR_CACHE; i++) {
		if (e->dirs[i].path && strcmp(e->dirs[i].path, path) == 0) {
			e->dirs[i].refs++;
			*ret_idx = i;
			return 0;
		}
		if (free_idx < 0 &&
		    (!e->dirs[i].path ||
		     (e->dirs[i].refs == 0 && !e->dirs[i].dirty && !e->dirs[i].syncing))) {
			free_idx = i;
		}
	}
	if (free_idx < 0) {
		return -EBUSY;
	}
	if (path[0] == '\0') {
		fd = fcntl(e->p->base_fd, F_DUPFD_CLOEXEC, 3);
		r = fd < 0 ? negerrno() : 0;
	} else {
		_cleanup_free_ char *tmp = NULL;
		const char *leaf;
		/* Resolve "path/x" so that fspath creates every component of path. */
		if (asprintf(&tmp, "%s/x", path) < 0) {
			return -ENOMEM;
		}
		r = fspath_open_parent(e->p->base_fd, tmp, true, &fd, &leaf);
	}
	if (r < 0) {
		return r;
	}
	if (e->dirs[free_idx].path) {
		free(e->dirs[free_idx].path);
		close(e->dirs[free_idx].fd);
	}
	e->dirs[free_idx].path = strdup(path);
	if (!e->dirs[free_idx].path) {
		close(fd);
		return -ENOMEM;
	}
	/* Temp files of writers that died here earlier go now (the first time we see the dir). */
	fspath_sweep_stale(fd, STALE_TEMP_AGE_S);
	e->dirs[free_idx].fd = fd;
	e->dirs[free_idx].refs = 1;
	e->dirs[free_idx].dirty = false;
	e->dirs[free_idx].syncing = false;
	e->dirs[free_idx].submitted = e->dirs[free_idx].completed = 0;
	*ret_idx = free_idx;
	return 0;
}

static int send_result(struct engine *e, struct efile *f, uint32_t status, const char *text)
{
	struct msg m = { .type = MSG_FILE_RESULT };

	m.u.file_result.id = f->id;
	m.u.file_result.status = status;
	snprintf(m.u.file_result.text, sizeof(m.u.file_result.text), "%s", text);
	return chan_queue(e->p->chan, &m);
}

/* Receiver: the file is resolved one way or the other; report and free it. */
static int rx_resolve(struct engine *e, struct efile *f)
{
	int r;

	if (f->failed) {
		if (f->tfd >= 0 && f->dir >= 0 && !f->renamed) {
			rx_discard(e, f);
		}
		note_failure(e, f->name, f->fail_code, !f->fail_peer, f->fail_text);
		r = send_result(e, f, f->fail_code, f->fail_text);
	} else {
		/* Reported only after verify, fsync, rename and the directory fsync. */
		e->st.files_ok++;
		e->st.bytes += f->size;
		if (e->p->ev.file_ok) {
			e->p->ev.file_ok(e->p->ev.ud, f->name, f->size, ts_since(&f->t0),
					 f->done_hash);
		}
		r = send_result(e, f, PERR_OK, "");
	}
	file_release(e, f);
	return r < 0 ? fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* The mode bits a received entry may get: no set-id or sticky bit unless allowed. */
static uint32_t rx_mode_mask(const struct engine *e)
{
	return e->p->keep_setid ? 07777 : 0777;
}

/*
 * Without -p, what cp, scp and rsync give: a new entry the sender's
 * permission bits less the receiver's umask, never a set-id or sticky bit.
 */
static uint32_t rx_plain_mode(const struct engine *e, uint32_t sent)
{
	return sent & 0777 & ~(uint32_t)e->p->umask;
}

static void rx_apply_meta(struct engine *e, struct efile *f)
{
	uint32_t mode = f->meta.mode & rx_mode_mask(e);

	if (!(e->p->open_flags & PROTO_OPEN_PRESERVE)) {
		struct stat old;

		mode = rx_plain_mode(e, f->meta.mode);
		/* A file replaced keeps its mode, as cp and rsync leave it. */
		if (fstatat(e->dirs[f->dir].fd, f->leaf, &old, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(old.st_mode)) {
			mode = old.st_mode & 0777;
		}
	}
	if ((e->p->open_flags & PROTO_OPEN_OWNER) && geteuid() == 0) {
		if (fchown(f->tfd, f->meta.uid, f->meta.gid) < 0) {
			file_fail(f, PERR_PERMISSION, "chown: %s", strerror(errno));
		}
	}
	if (fchmod(f->tfd, mode) < 0) {
		file_fail(f, PERR_IO, "chmod: %s", strerror(errno));
	}
	if (e->p->open_flags & PROTO_OPEN_PRESERVE) {
		struct timespec ts[2] = {
			{ .tv_sec = 0, .tv_nsec = UTIME_OMIT },
			{ .tv_sec = f->meta.mtime_sec, .tv_nsec = f->meta.mtime_nsec },
		};
		if (futimens(f->tfd, ts) < 0) {
			file_fail(f, PERR_IO, "set mtime: %s", strerror(errno));
		}
	}
}

static int rx_submit_fsync(struct engine *e, struct efile *f);

/* Receiver: everything the sender sent has arrived and is on disk? */
static int rx_maybe_finish(struct engine *e, struct efile *f)
{
	uint8_t h[HASH_LEN];

	if (!f->got_done || f->fsyncing || f->writes_out || f->held ||
	    f->recv_bytes < f->done_bytes) {
		return 0;
	}
	if (f->done_status != PERR_OK && !f->failed) {
		file_fail(f, f->done_status, "sender: %s", f->done_text);
		f->fail_peer = true; /* the sender's own failure */
	} else if (f->done_bytes != f->size || f->written != f->size) {
		file_fail(f, PERR_PROTOCOL, "size mismatch: announced %llu, sent %llu",
			  (unsigned long long)f->size, (unsigned long long)f->done_bytes);
	}
	if (f->failed) {
		return rx_resolve(e, f);
	}
	file_hash_final(&f->hash, h);
	if (CRYPTO_memcmp(h, f->done_hash, HASH_LEN) != 0) {
		char a[33], b[33];
		hash_to_hex(f->done_hash, a);
		hash_to_hex(h, b);
		file_fail(f, PERR_INTEGRITY, "checksum mismatch: sender xxh128 %s, received %s", a,
			  b);
		return rx_resolve(e, f);
	}
	rx_apply_meta(e, f);
	if (f->failed) {
		return rx_resolve(e, f);
	}
	f->fsyncing = true;
	if (f->size < SYNC_BATCH_FILE_MAX) {
		/* Maybe together with others: rx_sync_step decides. */
		e->sync_wait[e->nsync_wait++] = file_index(e, f);
		return 0;
	}
	return rx_submit_fsync(e, f);
}

/* fsync through io_uring so many files sync at once. */
static int rx_submit_fsync(struct engine *e, struct efile *f)
{
	struct io_uring_sqe *sqe = uring_sqe(e);

	if (!sqe) {
		return fail(e, PERR_IO, -EBUSY, "io_uring queue full");
	}
	io_uring_prep_fsync(sqe, f->tfd, 0);
	io_uring_sqe_set_data64(sqe, UD(UD_FSYNC, file_index(e, f)));
	return 0;
}

static void *sync_thread_main(void *arg)
{
	struct engine *e = arg;
	uint64_t one = 1;
	int r = 0;

	for (size_t i = 0; i < e->nsync_fds; i++) {
		if (syncfs(e->sync_fds[i]) < 0 && r == 0) {
			r = negerrno();
		}
	}
	e->sync_result = r;
	if (write(e->sync_efd, &one, sizeof(one)) < 0) {
		/* The engine waits for the join in teardown in any case. */
	}
	return NULL;
}

/*
 * Small files waiting to be durable: many → one syncfs per file system, on
 * a thread (syncfs blocks and io_uring has no such operation); few → fsync
 * each. Files that finish while a syncfs runs wait for the next one.
 */
static int rx_sync_step(struct engine *e)
{
	if (e->sync_running || e->nsync_wait == 0) {
		return 0;
	}
	if (e->nsync_wait < SYNC_BATCH_MIN) {
		for (uint32_t i = 0; i < e->nsync_wait; i++) {
			if (rx_submit_fsync(e, &e->files[e->sync_wait[i]]) < 0) {
				return -1;
			}
		}
		e->nsync_wait = 0;
		return 0;
	}
	/* One directory per file system is enough for syncfs. */
	e->nsync_fds = 0;
	for (uint32_t i = 0; i < e->nsync_wait; i++) {
		struct efile *f = &e->files[e->sync_wait[i]];
		int fd = e->dirs[f->dir].fd;
		bool dup = false;

		for (size_t k = 0; k < e->nsync_fds && !dup; k++) {
			dup = e->sync_fds[k] == fd;
		}
		if (!dup && e->nsync_fds < ARRAY_SIZE(e->sync_fds)) {
			e->sync_fds[e->nsync_fds++] = fd;
		}
	}
	memcpy(e->sync_run, e->sync_wait, e->nsync_wait * sizeof(*e->sync_wait));
	e->nsync_run = e->nsync_wait;
	e->nsync_wait = 0;
	if (pthread_create(&e->sync_thread, NULL, sync_thread_main, e) != 0) {
		/* No thread: fsync each instead. */
		for (uint32_t i = 0; i < e->nsync_run; i++) {
			if (rx_submit_fsync(e, &e->files[e->sync_run[i]]) < 0) {
				return -1;
			}
		}
		e->nsync_run = 0;
		return 0;
	}
	e->sync_running = true;
	return 0;
}

static void rx_fsync_done(struct engine *e, struct efile *f, int res);

/* The batch's syncfs finished: each of its files goes on as if fsynced alone. */
static void rx_sync_done(struct engine *e)
{
	uint64_t v;

	if (read(e->sync_efd, &v, sizeof(v)) < 0 || !e->sync_running) {
		return;
	}
	pthread_join(e->sync_thread, NULL);
	e->sync_running = false;
	for (uint32_t i = 0; i < e->nsync_run; i++) {
		rx_fsync_done(e, &e->files[e->sync_run[i]], e->sync_result);
	}
	e->nsync_run = 0;
}

static void rx_fsync_done(struct engine *e, struct efile *f, int res)
{
	struct dirent_cache *d = &e->dirs[f->dir];

	f->fsyncing = false;
	if (res < 0) {
		/* Never retried: the page cache may have dropped the data (fsyncgate). */
		file_fail(f, errno_to_perr(res), "fsync: %s", strerror(-res));
		rx_resolve(e, f);
		return;
	}
	int r = f->tmpname[0] ? (renameat(d->fd, f->tmpname, d->fd, f->leaf) < 0 ? negerrno() : 0)
			      : fspath_link_anon(d->fd, f->tfd, f->leaf);
	if (r < 0) {
		file_fail(f, errno_to_perr(r), "commit under its name: %s", strerror(-r));
		rx_resolve(e, f);
		return;
	}
	f->renamed = true;
	d->dirty = true;
	/* Only a directory fsync that starts after this rename covers it. */
	f->dir_sync_needed = d->submitted + 1;
	e->commit_batch[e->ncommit++] = file_index(e, f);
}

/* Start a directory fsync wherever renames wait and none is running. */
static int rx_commit_batch(struct engine *e)
{
	for (int i = 0; i < DIR_CACHE; i++) {
		struct dirent_cache *d = &e->dirs[i];
		struct io_uring_sqe *sqe;

		if (!d->path || !d->dirty || d->syncing) {
			continue;
		}
		sqe = uring_sqe(e);
		if (!sqe) {
			return fail(e, PERR_IO, -EBUSY, "io_uring queue full");
		}
		io_uring_prep_fsync(sqe, d->fd, 0);
		io_uring_sqe_set_data64(sqe, UD(UD_DIRSYNC, i));
		d->syncing = true;
		d->dirty = false;
		d->submitted++;
	}
	return 0;
}

/* A directory fsync finished: report every file whose rename it covers. */
static void rx_dirsync_done(struct engine *e, uint32_t di, int res)
{
	struct dirent_cache *d = &e->dirs[di];
	uint32_t kept = 0;

	d->syncing = false;
	d->completed = d->submitted;
	d->sync_error = res < 0 ? res : 0;
	for (uint32_t i = 0; i < e->ncommit; i++) {
		struct efile *f = &e->files[e->commit_batch[i]];

		if (f->dir != (int)di || f->dir_sync_needed > d->completed) {
			e->commit_batch[kept++] = e->commit_batch[i];
			continue;
		}
		if (res < 0) {
			file_fail(f, PERR_IO, "fsync of directory: %s", strerror(-res));
		}
		rx_resolve(e, f);
	}
	e->ncommit = kept;
}

/* ---- receiver: FILES and data ------------------------------------------ */

static int rx_map_name(struct engine *e, struct efile *f);

/* Remove an uncommitted temp file. An unnamed one (O_TMPFILE) goes with its fd. */
static void rx_discard(struct engine *e, struct efile *f)
{
	if (f->tmpname[0] != '\0' && f->dir >= 0) {
		fspath_discard(e->dirs[f->dir].fd, f->tmpname);
	}
}

/*
 * A second, O_DIRECT descriptor for the temp file where the file system
 * allows it: whole aligned chunks then go from the ring to the disk without
 * a copy into the page cache (and without io_uring punting buffered writes
 * to its worker threads). The tail and short-write remainders stay buffered.
 */
static void rx_open_direct(struct engine *e, struct efile *f)
{
	char proc[64];

	if (f->size < e->p->chunk_size || diskio_dio_align(f->tfd, &f->dio) < 0 || !f->dio.mem ||
	    !f->dio.offset || e->p->chunk_size % f->dio.offset || 4096 % f->dio.mem) {
		return;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->tfd);
	f->dfd = open(proc, O_WRONLY | O_CLOEXEC | O_DIRECT);
}

/*
 * Where a received entry goes: its final name (after rename_to), its leaf,
 * and its parent directory held in the cache (created as needed, beneath the
 * destination, never through a symlink).
 */
static uint32_t rx_locate(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	_cleanup_free_ char *dirpath = NULL;
	const char *slash;
	int r;

	slash = strrchr(f->name, '/');
	dirpath = slash ? strndup(f->name, (size_t)(slash - f->name)) : strdup("");
	f->leaf = strdup(slash ? slash + 1 : f->name);
	if (!dirpath || !f->leaf) {
		return PERR_INTERNAL;
	}
	r = dir_get(e, dirpath, &f->dir);
	if (r < 0) {
		snprintf(text, textlen, "destination directory: %s", strerror(-r));
		return errno_to_perr(r);
	}
	return PERR_OK;
}

/* Is a regular file of f->size within the receiver's limits? Checked before anything exists. */
static uint32_t rx_check_limits(struct engine *e, const struct efile *f, char *text, size_t textlen)
{
	const struct engine_limits *l = e->p->limits;

	if (!l) {
		return PERR_OK;
	}
	if (f->size > l->max_file_size) {
		snprintf(text, textlen, "%llu bytes: over the max file size of %llu bytes",
			 (unsigned long long)f->size, (unsigned long long)l->max_file_size);
		return PERR_PERMISSION;
	}
	if (e->st.bytes_accepted > l->max_session_bytes ||
	    f->size > l->max_session_bytes - e->st.bytes_accepted) {
		snprintf(text, textlen,
			 "%llu bytes: over the max session bytes of %llu (%llu accepted before)",
			 (unsigned long long)f->size, (unsigned long long)l->max_session_bytes,
			 (unsigned long long)e->st.bytes_accepted);
		return PERR_PERMISSION;
	}
	return PERR_OK;
}

/*
 * Disk space is taken as data arrives, never reserved for a declared size
 * (a peer could fill the file system without sending a byte). A big file
 * that cannot fit in the space free now is refused at once instead, which
 * keeps an honest sender's ENOSPC early without reserving anything.
 */
static uint32_t rx_check_space(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	struct statvfs sv;

	if (f->size < e->p->chunk_size || fstatvfs(e->dirs[f->dir].fd, &sv) < 0 ||
	    sv.f_frsize == 0 || f->size / sv.f_frsize <= sv.f_bavail) {
		return PERR_OK;
	}
	snprintf(text, textlen, "%s: %llu bytes, %llu free", strerror(ENOSPC),
		 (unsigned long long)f->size, (unsigned long long)sv.f_bavail * sv.f_frsize);
	return PERR_NOSPACE;
}

static uint32_t rx_open_file(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	uint32_t code = rx_check_limits(e, f, text, textlen);
	int r;

	if (code == PERR_OK) {
		code = rx_locate(e, f, text, textlen);
	}
	if (code == PERR_OK) {
		code = rx_check_space(e, f, text, textlen);
	}
	if (code != PERR_OK) {
		return code;
	}
	/*
	 * An unnamed file where the file system allows it: it gets its name only
	 * when complete, and a crash leaves nothing behind. Else a named temp file.
	 */
	f->tmpname[0] = '\0';
	r = fspath_create_anon(e->dirs[f->dir].fd, &f->tfd);
	if (r == -EOPNOTSUPP) {
		r = fspath_create_temp(e->dirs[f->dir].fd, f->leaf, &f->tfd, f->tmpname,
				       sizeof(f->tmpname));
	}
	if (r < 0) {
		snprintf(text, textlen, "create temp file: %s", strerror(-r));
		return errno_to_perr(r);
	}
	r = file_hash_init(&f->hash);
	if (r < 0) {
		rx_discard(e, f);
		return PERR_INTERNAL;
	}
	f->hash_live = true;
	rx_open_direct(e, f);
	e->st.bytes_accepted += f->size;
	return PERR_OK;
}

/* ---- receiver: names seen in this session ------------------------------ */

/*
 * The same destination twice in one session is refused (never two writers on
 * one name). Names are remembered as 64-bit hashes: 8 bytes per file.
 */
static int seen_add(struct engine *e, const char *name)
{
	uint64_t h = XXH3_64bits(name, strlen(name)) | 1; /* 0 marks an empty slot */

	if (e->seen_n * 2 >= e->seen_cap) {
		size_t cap = e->seen_cap ? e->seen_cap * 2 : 1024;
		uint64_t *t = calloc(cap, sizeof(*t));
		if (!t) {
			return -ENOMEM;
		}
		for (size_t i = 0; i < e->seen_cap; i++) {
			if (e->seen[i]) {
				size_t k = e->seen[i] & (cap - 1);
				while (t[k]) {
					k = (k + 1) & (cap - 1);
				}
				t[k] = e->seen[i];
			}
		}
		free(e->seen);
		e->seen = t;
		e->seen_cap = cap;
	}
	for (size_t k = h & (e->seen_cap - 1);; k = (k + 1) & (e->seen_cap - 1)) {
		if (e->seen[k] == h) {
			return 0;
		}
		if (!e->seen[k]) {
			e->seen[k] = h;
			e->seen_n++;
			return 1;
		}
	}
}

/* Apply rename_to to the top-level component of f->name. */
static int rx_map_name(struct engine *e, struct efile *f)
{
	char *mapped;
	const char *rest;

	if (!e->p->rename_to) {
		return 0;
	}
	rest = strchr(f->name, '/');
	if (asprintf(&mapped, "%s%s", e->p->rename_to, rest ? rest : "") < 0) {
		return -ENOMEM;
	}
	free(f->name);
	f->name = mapped;
	return 0;
}

/*
 * Create directory name (mode as given), or find it there. Returns an fd for it, and
 * whether this call created it: only a directory we made takes the sender's
 * mode, an existing one (the module's own, say) keeps its own.
 */
static int rx_dir_create(struct engine *e, const char *name, mode_t mode, int *ret_fd,
			 bool *ret_created)
{
	_cleanup_close_ int parent = -1;
	const char *leaf;
	bool created = false;
	int r;

	r = fspath_open_parent(e->p->base_fd, name, true, &parent, &leaf);
	if (r < 0) {
		return r;
	}
	if (mkdirat(parent, leaf, mode) == 0) {
		created = true;
	} else if (errno != EEXIST) {
		return negerrno();
	}
	r = fspath_open_dir(parent, leaf, ret_fd);
	if (r < 0) {
		return r;
	}
	*ret_created = created;
	return 0;
}

/* The mode a directory we created ends with (rx_finish_dirs). */
static uint32_t rx_dir_mode(const struct engine *e, uint32_t sent)
{
	if (e->p->open_flags & PROTO_OPEN_PRESERVE) {
		return sent & rx_mode_mask(e);
	}
	return rx_plain_mode(e, sent);
}

static uint32_t rx_make_dir(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	_cleanup_close_ int fd = -1;
	bool preserve = e->p->open_flags & PROTO_OPEN_PRESERVE, created;
	int r;

	/*
	 * Private while its contents arrive; its own mode at the end
	 * (rx_finish_dirs), when it can no longer stop us writing into it.
	 */
	r = rx_dir_create(e, f->name, 0700, &fd, &created);
	if (r < 0) {
		snprintf(text, textlen, "directory: %s", strerror(-r));
		return errno_to_perr(r);
	}
	if (created && e->ndirs_meta >= DIR_META_MAX) {
		/* No room to remember it: its mode now, still writable for us. */
		fchmod(fd, rx_dir_mode(e, f->meta.mode) | 0700);
	}
	if (created || preserve) {
		if (e->ndirs_meta < DIR_META_MAX) {
			e->dirs_meta[e->ndirs_meta].name = strdup(f->name);
			e->dirs_meta[e->ndirs_meta].meta = f->meta;
			e->dirs_meta[e->ndirs_meta].created = created;
			if (e->dirs_meta[e->ndirs_meta].name) {
				e->ndirs_meta++;
			}
		}
	}
	return PERR_OK;
}

static uint32_t rx_make_symlink(struct engine *e, struct efile *f, const char *target, char *text,
				size_t textlen)
{
	uint32_t code = rx_locate(e, f, text, textlen);
	struct dirent_cache *d;
	int r;

	if (code != PERR_OK) {
		return code;
	}
	d = &e->dirs[f->dir];
	/* A temp name first, then rename: atomic, and nothing is ever followed. */
	for (int tries = 0; tries < 16; tries++) {
		r = fspath_temp_name(f->leaf, f->tmpname, sizeof(f->tmpname));
		if (r < 0) {
			break;
		}
		if (symlinkat(target, d->fd, f->tmpname) == 0) {
			r = 0;
			break;
		}
		r = negerrno();
		if (r != -EEXIST) {
			break;
		}
	}
	if (r < 0) {
		snprintf(text, textlen, "symlink: %s", strerror(-r));
		return errno_to_perr(r);
	}
	if (renameat(d->fd, f->tmpname, d->fd, f->leaf) < 0) {
		r = negerrno();
		unlinkat(d->fd, f->tmpname, 0);
		snprintf(text, textlen, "symlink: %s", strerror(-r));
		return errno_to_perr(r);
	}
	d->dirty = true;
	return PERR_OK;
}

/* Directories we created get their mode last (with -p their mtime too), deepest first. */
static void rx_finish_dirs(struct engine *e)
{
	for (size_t i = e->ndirs_meta; i-- > 0;) {
		_cleanup_close_ int fd = -1;
		const struct proto_file *m = &e->dirs_meta[i].meta;
		struct timespec ts[2] = {
			{ .tv_sec = 0, .tv_nsec = UTIME_OMIT },
			{ .tv_sec = m->mtime_sec, .tv_nsec = m->mtime_nsec },
		};

		if (fspath_open_dir(e->p->base_fd, e->dirs_meta[i].name, &fd) == 0) {
			if (e->dirs_meta[i].created) {
				fchmod(fd, rx_dir_mode(e, m->mode));
			}
			if (e->p->open_flags & PROTO_OPEN_PRESERVE) {
				futimens(fd, ts);
			}
		}
		free(e->dirs_meta[i].name);
	}
	e->ndirs_meta = 0;
}

/* The sender could not send an entry: a failed file on this side too. */
static int rx_entry_failed(struct engine *e, const struct msg_entry_failed *ef)
{
	note_failure(e, ef->name, ef->status, false, ef->text);
	return 0;
}

static int rx_files(struct engine *e, struct msg_files *mf)
{
	struct msg ack = { .type = MSG_FILES_ACK };
	struct proto_status *st;
	char text[256];
	int r = 0;

	st = calloc(mf->count ? mf->count : 1, sizeof(*st));
	if (!st) {
		return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	ack.u.files_ack.st = st;
	for (size_t i = 0; i < mf->count; i++) {
		struct proto_file *pf = &mf->files[i];
		struct efile *f = &e->files[pf->id % FILE_TABLE];
		uint32_t code;
		bool peer = false; /* refused for what the peer sent, not for our disk */
		int dup;

		/* Ids strictly increase; the table bounds the files in flight. */
		if (pf->id <= e->next_id || f->used) {
			r = fail(e, PERR_PROTOCOL, -EBADMSG,
				 "FILES: id %u out of order or too many files in flight", pf->id);
			break;
		}
		e->next_id = pf->id;
		memset(f, 0, sizeof(*f));
		f->used = true;
		e->files_open++;
		f->id = pf->id;
		f->fd = f->dfd = f->tfd = f->dir = -1;
		f->ftype = pf->ftype;
		f->size = pf->size;
		f->meta = *pf;
		f->meta.name = f->meta.link = NULL;
		f->name = strdup(pf->name);
		ts_now(&f->t0);
		text[0] = '\0';
		if (!f->name) {
			code = PERR_INTERNAL;
		} else if (e->p->name_ok && !e->p->name_ok(e->p->name_ok_ud, f->name)) {
			code = PERR_BAD_PATH;
			peer = true;
			snprintf(text, sizeof(text), "not a name that was asked for");
		} else if (fspath_validate(f->name) < 0) {
			code = PERR_BAD_PATH;
			peer = true;
			snprintf(text, sizeof(text), "invalid name");
		} else if (rx_map_name(e, f) < 0) {
			code = PERR_INTERNAL;
		} else if ((dup = seen_add(e, f->name)) <= 0) {
			/*
			 * After the rename mapping: with OPEN "mod/target", "a", "b"
			 * and a symlink "c" would all be "target" (issue 8 item 9).
			 */
			code = dup < 0 ? PERR_INTERNAL : PERR_DUPLICATE;
			peer = dup == 0;
			snprintf(text, sizeof(text), "%s",
				 dup < 0 ? "out of memory"
					 : "same destination twice in one session");
		} else if (pf->ftype == PROTO_FT_DIR) {
			code = rx_make_dir(e, f, text, sizeof(text));
		} else if (pf->ftype == PROTO_FT_SYMLINK) {
			code = rx_make_symlink(e, f, pf->link, text, sizeof(text));
		} else {
			code = rx_open_file(e, f, text, sizeof(text));
		}
		st[ack.u.files_ack.count].id = pf->id;
		st[ack.u.files_ack.count].status = code;
		st[ack.u.files_ack.count].text = NULL;
		ack.u.files_ack.count++;
		if (code != PERR_OK) {
			file_fail(f, code, "%s", text);
			st[ack.u.files_ack.count - 1].text = strdup(f->fail_text);
			/* A refused file is reported now and forgotten. */
			note_failure(e, f->name ? f->name : pf->name, code, !peer, f->fail_text);
			if (f->tfd >= 0 && f->dir >= 0) {
				rx_discard(e, f);
			}
			file_release(e, f);
		} else if (pf->ftype != PROTO_FT_REG) {
			/* Directories and symlinks are done the moment they exist. */
			e->st.files_ok++;
			if (e->p->ev.file_ok) {
				static const uint8_t none[HASH_LEN];
				e->p->ev.file_ok(e->p->ev.ud, f->name, 0, ts_since(&f->t0), none);
			}
			file_release(e, f);
		}
	}
	if (r == 0) {
		r = chan_queue(e->p->chan, &ack);
		if (r < 0) {
			fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
	}
	for (size_t i = 0; i < ack.u.files_ack.count; i++) {
		free(st[i].text);
	}
	free(st);
	return r;
}

static int rx_file_done(struct engine *e, const struct msg_file_done *d)
{
	struct efile *f = file_by_id(e, d->id);

	if (!f || f->got_done) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "FILE_DONE for unknown file id %u", d->id);
	}
	if (d->bytes > f->size || d->bytes < f->recv_bytes) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "FILE_DONE: impossible byte count");
	}
	f->got_done = true;
	f->done_status = d->status;
	f->done_bytes = d->bytes;
	memcpy(f->done_hash, d->hash, HASH_LEN);
	snprintf(f->done_text, sizeof(f->done_text), "%.200s", d->text);
	return rx_maybe_finish(e, f);
}

/* The bytes of a held slot: the ones that are hashed and written (see rx_slot_hold). */
static uint8_t *rx_slot_buf(struct engine *e, uint32_t slot)
{
	return pool_chunk(e->pool, e->rx_copy ? e->copy_base + slot : slot);
}

/*
 * From here until its credit goes back the slot's bytes must not change
 * under us: what is hashed must be what is written. Where the transport can
 * fence the slot the peer's writes into it are refused (its lane fails);
 * elsewhere the bytes are copied out of the peer's reach first.
 */
static int rx_slot_hold(struct engine *e, uint32_t slot, uint32_t len, bool need_bytes)
{
	struct xport *x = e->p->x;
	int r;

	if (e->rx_copy) {
		if (need_bytes) {
			memcpy(rx_slot_buf(e, slot), pool_chunk(e->pool, slot), len);
		}
		return 0;
	}
	r = x->ops->fence(x, e->mr, (uint64_t)slot * e->p->chunk_size, e->p->chunk_size, true);
	if (r < 0) {
		const char *why = x->ops->last_error ? x->ops->last_error(x) : NULL;

		return fail(e, PERR_TRANSPORT, r,
			    "data transport: slot %u rewritten while held%s%s", slot,
			    why ? ": " : "", why ? why : "");
	}
	return 0;
}

static int rx_slot_unhold(struct engine *e, uint32_t slot)
{
	struct xport *x = e->p->x;
	int r;

	if (e->rx_copy) {
		return 0;
	}
	r = x->ops->fence(x, e->mr, (uint64_t)slot * e->p->chunk_size, e->p->chunk_size, false);
	return r < 0 ? fail(e, PERR_INTERNAL, r, "unfence slot %u: %s", slot, strerror(-r)) : 0;
}

static bool bw_allows(struct engine *e, uint32_t len);

static int rx_credit_now(struct engine *e, uint32_t slot)
{
	struct rslot *s = &e->rslots[slot];
	struct xport_wr wr = {
		.opcode = XPORT_OP_WRITE_IMM,
		.imm = proto_imm(PROTO_IMM_CREDIT, slot),
		.lane = s->lane,
	};
	struct efile *f = &e->files[s->fidx];

	s->state = SL_FREE;
	f->held--;
	e->credits++;
	/* The peer may write the slot again once it has the credit, not before. */
	if (rx_slot_unhold(e, slot) < 0) {
		return -1;
	}
	if (!lane_room(e, wr.lane, 1)) {
		/* Cannot happen while credits <= slots <= sq_depth; be loud if it does. */
		return fail(e, PERR_INTERNAL, -ENOSPC, "send queue full for credits");
	}
	return lane_push(e, &wr, -1);
}

/*
 * --bwlimit on the receiver (a pull): the peer may write a slot again only
 * once it has the credit, so credits go back no faster than the limit; the
 * slot stays held (and its file uncommitted) until then.
 */
static int rx_credit(struct engine *e, uint32_t slot)
{
	struct rslot *s = &e->rslots[slot];

	if (e->p->bwlimit && !e->failed) {
		if (s->credit_due) {
			return 0;
		}
		if (e->ncredit_due > 0 || !bw_allows(e, s->len)) {
			s->credit_due = true;
			e->ncredit_due++;
			return 0;
		}
		e->bw_sent += s->len;
	}
	return rx_credit_now(e, slot);
}

static int rx_maybe_finish(struct engine *e, struct efile *f);

/* The credits --bwlimit held back, as the rate allows. */
static int rx_credit_flush(struct engine *e)
{
	for (uint32_t i = 0; e->ncredit_due > 0 && i < e->p->slots; i++) {
		struct rslot *s = &e->rslots[i];
		struct efile *f = &e->files[s->fidx];

		if (!s->credit_due) {
			continue;
		}
		if (!e->failed && !bw_allows(e, s->len)) {
			return 0;
		}
		s->credit_due = false;
		e->ncredit_due--;
		e->bw_sent += s->len;
		if (rx_credit_now(e, i) < 0 || rx_maybe_finish(e, f) < 0) {
			return -1;
		}
	}
	return 0;
}

static void rx_submit_write(struct engine *e, uint32_t slot)
{
	struct rslot *s = &e->rslots[slot];
	struct efile *f = &e->files[s->fidx];
	uint8_t *buf = rx_slot_buf(e, slot);
	struct io_uring_sqe *sqe = uring_sqe(e);

	if (!sqe) {
		fail(e, PERR_IO, -EBUSY, "io_uring queue full");
		return;
	}
	int fd = f->tfd;

	if (f->dfd >= 0 && s->wdone == 0 && diskio_dio_ok(&f->dio, buf, s->off, s->len)) {
		fd = f->dfd;
	}
	io_uring_prep_write_fixed(sqe, fd, buf + s->wdone, s->len - s->wdone, s->off + s->wdone,
				  pool_buf_index(e->pool, buf));
	io_uring_sqe_set_data64(sqe, UD(UD_WRITE, slot));
	f->writes_out++;
}

/* Hash, in file order, every held chunk that is next for its file. */
static void rx_hash_ready(struct engine *e, struct efile *f)
{
	bool progress = true;

	while (progress && f->held) {
		progress = false;
		for (uint32_t i = 0; i < e->p->slots; i++) {
			struct rslot *s = &e->rslots[i];
			if (s->state == SL_HELD && !s->hashed && &e->files[s->fidx] == f &&
			    s->off == f->hash_off) {
				file_hash_update(&f->hash, rx_slot_buf(e, i), s->len);
				f->hash_off += s->len;
				s->hashed = true;
				progress = true;
				if (s->written) {
					rx_credit(e, i);
				}
			}
		}
	}
}

static int rx_data(struct engine *e, uint32_t slot, uint32_t lane)
{
	struct proto_desc d;
	struct rslot *s;
	struct efile *f;
	uint64_t expect;

	if (slot >= e->p->slots || e->rslots[slot].state != SL_FREE) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "data for busy or unknown slot %u", slot);
	}
	if (proto_desc_decode(e->desc_area + (size_t)slot * PROTO_DESC_LEN, &d) < 0) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "bad slot descriptor");
	}
	f = file_by_id(e, d.file_id);
	/* FILE_DONE may overtake the data (different connections), not exceed it. */
	if (!f || (f->got_done && f->recv_bytes + d.len > f->done_bytes)) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "data for unknown file id %u", d.file_id);
	}
	/* Chunks are canonical: aligned to the slot size, full except the last. */
	expect = f->size - MIN(f->size, d.offset);
	expect = MIN(expect, (uint64_t)e->p->chunk_size);
	if (d.offset % e->p->chunk_size || d.offset >= f->size || d.len != expect ||
	    d.offset < f->hash_off) {
		return fail(e, PERR_PROTOCOL, -EBADMSG,
			    "bad chunk for %s: offset %llu len %u (size %llu)", f->name,
			    (unsigned long long)d.offset, d.len, (unsigned long long)f->size);
	}
	for (uint32_t i = 0; f->held && i < e->p->slots; i++) {
		if (e->rslots[i].state == SL_HELD && &e->files[e->rslots[i].fidx] == f &&
		    e->rslots[i].off == d.offset) {
			return fail(e, PERR_PROTOCOL, -EBADMSG, "duplicate chunk for %s", f->name);
		}
	}
	s = &e->rslots[slot];
	*s = (struct rslot){ .state = SL_HELD,
			     .fidx = file_index(e, f),
			     .off = d.offset,
			     .len = d.len,
			     .lane = lane };
	f->held++;
	f->recv_bytes += d.len;
	if (rx_slot_hold(e, slot, d.len, !f->failed) < 0) {
		return -1;
	}
	if ((e->p->faults & ENGINE_FAULT_FLIP_BYTE) && d.offset == 0) {
		rx_slot_buf(e, slot)[0] ^= 0xff;
	}
	if (f->failed) {
		/* Already failed (disk full, ...): drop the bytes, keep the credits flowing. */
		s->hashed = s->written = true;
		if (rx_credit(e, slot) < 0) {
			return -1;
		}
		return rx_maybe_finish(e, f);
	}
	rx_submit_write(e, slot);
	rx_hash_ready(e, f);
	e->bytes_progress += d.len;
	return 0;
}

static void rx_write_done(struct engine *e, uint32_t slot, int res)
{
	struct rslot *s = &e->rslots[slot];
	struct efile *f = &e->files[s->fidx];

	f->writes_out--;
	if (res == -EAGAIN || res == -EINTR) {
		rx_submit_write(e, slot);
		return;
	}
	if (res < 0 || res == 0) {
		file_fail(f, errno_to_perr(res ? res : -EIO), "write %s: %s", f->name,
			  strerror(res ? -res : EIO));
		s->written = s->hashed = true;
	} else {
		s->wdone += (uint32_t)res;
		if (s->wdone < s->len) {
			rx_submit_write(e, slot); /* short write: the rest */
			return;
		}
		s->written = true;
		f->written += s->len;
	}
	if (s->hashed) {
		rx_credit(e, slot);
	}
	rx_maybe_finish(e, f);
}

/* ---- sender ------------------------------------------------------------- */

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

	note_failure(e, s->name, code, true, s->why);
	if (!(e->p->peer_caps & PROTO_CAP_ENTRY_FAILED)) {
		return 0;
	}
	m.u.entry_failed.status = code;
	snprintf(m.u.entry_failed.name, sizeof(m.u.entry_failed.name), "%s", s->name);
	snprintf(m.u.entry_failed.text, sizeof(m.u.entry_failed.text), "%s", s->why);
	r = chan_queue(e->p->chan, &m);
	return r < 0 ? fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

static int tx_offer(struct engine *e)
{
	struct msg m = { .type = MSG_FILES };
	struct proto_file pf[PROTO_MAX_BATCH];
	char *links[PROTO_MAX_BATCH];
	int r;

	while (e->offered_unresolved < FILES_WINDOW && tx_have_src(e)) {
		uint32_t n = 0;

		while (n < PROTO_MAX_BATCH && e->offered_unresolved < FILES_WINDOW &&
		       tx_have_src(e)) {
			const struct engine_src *s = e->next_src;
			uint32_t id;
			struct efile *f;

			if (s->error) {
				e->next_src = NULL;
				if (tx_entry_failed(e, s) < 0) {
					break;
				}
				continue;
			}
			id = ++e->next_id;
			f = &e->files[id % FILE_TABLE];
			if (f->used) {
				e->next_id--;
				break;
			}
			memset(f, 0, sizeof(*f));
			f->used = true;
			e->files_open++;
			f->id = id;
			f->fd = f->dfd = f->tfd = f->dir = -1;
			f->name = strdup(s->name);
			f->src_path = strdup(s->path);
			f->src_dirfd = s->dirfd;
			f->ftype = s->ftype;
			f->size = s->size;
			ts_now(&f->t0);
			/* The message keeps its own copies: the source may reuse s. */
			links[n] = s->link ? strdup(s->link) : NULL;
			if (!f->name || !f->src_path || (s->link && !links[n])) {
				for (uint32_t i = 0; i <= n; i++) {
					free(links[i]);
				}
				return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
			}
			pf[n] = (struct proto_file){
				.id = id,
				.ftype = s->ftype,
				.mode = s->mode & 07777,
				.size = s->ftype == PROTO_FT_REG ? s->size : 0,
				.mtime_sec = s->mtime.tv_sec,
				.mtime_nsec = (uint32_t)s->mtime.tv_nsec,
				.uid = s->uid,
				.gid = s->gid,
				.name = f->name,
				.link = links[n],
			};
			n++;
			e->next_src = NULL;
			e->offered++;
			e->offered_unresolved++;
		}
		if (n == 0 || e->failed) {
			for (uint32_t i = 0; i < n; i++) {
				free(links[i]);
			}
			break;
		}
		m.u.files.count = (uint16_t)n;
		m.u.files.files = pf;
		r = chan_queue(e->p->chan, &m);
		for (uint32_t i = 0; i < n; i++) {
			free(links[i]);
		}
		if (r < 0) {
			return fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
	}
	return e->failed ? -1 : 0;
}

static int tx_send_done(struct engine *e, struct efile *f)
{
	struct msg m = { .type = MSG_FILE_DONE };

	m.u.file_done.id = f->id;
	m.u.file_done.bytes = f->send_off;
	if (f->failed) {
		m.u.file_done.status = f->fail_code;
		snprintf(m.u.file_done.text, sizeof(m.u.file_done.text), "%s", f->fail_text);
	} else {
		file_hash_final(&f->hash, m.u.file_done.hash);
		memcpy(f->done_hash, m.u.file_done.hash, HASH_LEN);
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
	char proc[64];
	int fd;

	/* Beneath dirfd without following symlinks, unless dirfd is AT_FDCWD. */
	int r = diskio_open_read(f->src_dirfd, f->src_path, 0, &fd, NULL, &st);
	if (r < 0) {
		file_fail(f, errno_to_perr(r), "open: %s", strerror(-r));
		return 0;
	}
	f->fd = fd;
	e->open_fds++;
	if ((uint64_t)st.st_size != f->size) {
		file_fail(f, PERR_SOURCE_CHANGED, "changed size before it was read (%llu -> %llu)",
			  (unsigned long long)f->size, (unsigned long long)st.st_size);
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
	struct io_uring_sqe *sqe = uring_sqe(e);
	uint32_t want = c->len - c->done;
	int fd = f->fd;

	if (!sqe) {
		return fail(e, PERR_IO, -EBUSY, "io_uring queue full");
	}
	/* Direct I/O only for whole, aligned requests; the tail goes buffered. */
	if (f->dfd >= 0 && c->done == 0 && diskio_dio_ok(&f->dio, buf, c->off, want)) {
		fd = f->dfd;
	}
	io_uring_prep_read_fixed(sqe, fd, buf + c->done, want, c->off + c->done,
				 pool_buf_index(e->pool, buf));
	io_uring_sqe_set_data64(sqe, UD(UD_READ, ci));
	c->state = CH_READING;
	return 0;
}

/* Start reads for accepted files while pool chunks are free. */
static int tx_fill(struct engine *e)
{
	/* Walk files in id order, from the oldest still in flight. */
	while (e->oldest_id <= e->next_id && !file_by_id(e, e->oldest_id)) {
		e->oldest_id++;
	}
	for (uint32_t id = e->oldest_id; id <= e->next_id && e->pool->nfree > 0; id++) {
		struct efile *f = file_by_id(e, id);

		if (!f || !f->acked || f->done_sent) {
			continue;
		}
		if (!f->started) {
			if (e->open_fds >= OPEN_FILES_MAX) {
				break;
			}
			f->started = true;
			if (tx_open(e, f) < 0) {
				return -1;
			}
		}
		if (f->failed) {
			if (f->chunks_out == 0) {
				tx_send_done(e, f);
			}
			continue;
		}
		if (f->size == 0 && !f->finished) {
			f->finished = true;
			tx_send_done(e, f);
			continue;
		}
		while (f->read_off < f->size && e->pool->nfree > 0) {
			int ci = pool_get(e->pool);
			struct chunk *c = &e->chunks[ci];

			*c = (struct chunk){ .fidx = file_index(e, f),
					     .off = f->read_off,
					     .len = (uint32_t)MIN((uint64_t)e->p->chunk_size,
								  f->size - f->read_off) };
			f->read_off += c->len;
			f->chunks_out++;
			if (tx_submit_read(e, (uint32_t)ci) < 0) {
				return -1;
			}
		}
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

static void tx_read_done(struct engine *e, uint32_t ci, int res)
{
	struct chunk *c = &e->chunks[ci];
	struct efile *f = &e->files[c->fidx];

	if (res == -EAGAIN || res == -EINTR) {
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
		return;
	}
	/* Failed: this chunk will never be sent; neither will later ones. */
	tx_chunk_drop(e, ci);
}

/*
 * --bwlimit: may another len bytes go (a sender's chunk, a receiver's credit)
 * now? Averaged since the first one, with no allowance ahead of the clock:
 * the first chunk waits its own time too, so no burst starts the transfer.
 */
static bool bw_allows(struct engine *e, uint32_t len)
{
	double el;

	if (e->bw_t0.tv_sec == 0 && e->bw_t0.tv_nsec == 0) {
		ts_now(&e->bw_t0);
	}
	el = ts_since(&e->bw_t0);
	return (double)(e->bw_sent + len) <= (double)e->p->bwlimit * el;
}

/* Hash and post every ready chunk that is next in its file, while slots last. */
static int tx_post_ready(struct engine *e)
{
	struct xport *x = e->p->x;
	bool progress = true;

	while (progress && e->nfree_slots > 0) {
		progress = false;
		for (uint32_t ci = 0; ci < e->pool->nchunks && e->nfree_slots > 0; ci++) {
			struct chunk *c = &e->chunks[ci];
			struct efile *f;
			unsigned lane;
			uint32_t slot;
			uint8_t *stage;
			struct proto_desc d;

			if (c->state != CH_READY) {
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
			if (e->p->bwlimit && !bw_allows(e, c->len)) {
				return 0;
			}
			lane = (unsigned)(e->rr_lane % x->nlanes);
			if (!lane_room(e, lane, 2)) {
				continue;
			}
			e->rr_lane++;
			slot = e->free_slots[--e->nfree_slots];
			file_hash_update(&f->hash, pool_chunk(e->pool, ci), c->len);
			d = (struct proto_desc){
				.file_id = f->id, .len = c->len, .offset = c->off, .seq = ++e->seq
			};
			stage = e->desc_area + (size_t)ci * PROTO_DESC_LEN;
			proto_desc_encode(&d, stage);
			struct xport_wr data = {
				.opcode = XPORT_OP_WRITE,
				.mr = e->mr,
				.buf = pool_chunk(e->pool, ci),
				.len = c->len,
				.remote_addr = e->rring_addr + (uint64_t)slot * e->p->chunk_size,
				.rkey = e->rkey[lane],
				.lane = lane,
			};
			struct xport_wr desc = {
				.opcode = XPORT_OP_WRITE_IMM,
				.flags = XPORT_SEND_INLINE,
				.mr = e->mr,
				.buf = stage,
				.len = PROTO_DESC_LEN,
				.remote_addr = e->rdesc_addr + (uint64_t)slot * PROTO_DESC_LEN,
				.rkey = e->rkey[lane],
				.imm = proto_imm(PROTO_IMM_DATA, slot),
				.lane = lane,
			};
			if (lane_push(e, &data, -1) < 0 || lane_push(e, &desc, (int32_t)ci) < 0) {
				return -1;
			}
			c->state = CH_POSTED;
			c->slot = slot;
			f->send_off += c->len;
			f->chunks_out--;
			e->bytes_progress += c->len;
			e->bw_sent += c->len;
			progress = true;
			if (f->send_off == f->size) {
				struct stat st;
				/* The source must not have changed under us. */
				if (fstat(f->fd, &st) == 0 && (uint64_t)st.st_size != f->size) {
					file_fail(
					    f, PERR_SOURCE_CHANGED,
					    "file changed size while being sent (%llu -> %llu)",
					    (unsigned long long)f->size,
					    (unsigned long long)st.st_size);
				}
				if (tx_send_done(e, f) < 0) {
					return -1;
				}
			}
		}
	}
	/* A failed file with nothing left in flight still owes its FILE_DONE. */
	return 0;
}

static int tx_files_ack(struct engine *e, const struct msg_files_ack *a)
{
	for (size_t i = 0; i < a->count; i++) {
		struct efile *f = file_by_id(e, a->st[i].id);

		if (!f || f->acked) {
			return fail(e, PERR_PROTOCOL, -EBADMSG, "FILES_ACK for unknown id %u",
				    a->st[i].id);
		}
		f->acked = true;
		if (a->st[i].status == PERR_OK && f->ftype != PROTO_FT_REG) {
			static const uint8_t none[HASH_LEN];
			e->st.files_ok++;
			if (e->p->ev.file_ok) {
				e->p->ev.file_ok(e->p->ev.ud, f->name, 0, ts_since(&f->t0), none);
			}
			e->offered_unresolved--;
			file_release(e, f);
			continue;
		}
		if (a->st[i].status != PERR_OK) {
			/* The receiver refused it. */
			note_failure(e, f->name, a->st[i].status, false,
				     a->st[i].text ? a->st[i].text : "");
			e->offered_unresolved--;
			file_release(e, f);
		}
	}
	return 0;
}

static int tx_file_result(struct engine *e, const struct msg_file_result *res)
{
	struct efile *f = file_by_id(e, res->id);

	if (!f || !f->done_sent) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "FILE_RESULT for unknown id %u", res->id);
	}
	if (res->status == PERR_OK) {
		e->st.files_ok++;
		e->st.bytes += f->size;
		if (e->p->ev.file_ok) {
			e->p->ev.file_ok(e->p->ev.ud, f->name, f->size, ts_since(&f->t0),
					 f->done_hash);
		}
	} else if (f->failed) {
		/* Ours (open, read, a source that changed): the receiver only echoes it. */
		note_failure(e, f->name, f->fail_code, true, f->fail_text);
	} else {
		note_failure(e, f->name, res->status, false, res->text);
	}
	e->offered_unresolved--;
	file_release(e, f);
	return 0;
}

/* ---- completions and messages ------------------------------------------ */

static int on_uring(struct engine *e)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	uint64_t v;

	if (read(e->uring_efd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
		return fail(e, PERR_IO, negerrno(), "eventfd: %s", strerror(errno));
	}
	io_uring_for_each_cqe(&e->ring, head, cqe)
	{
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		int res = cqe->res;

		n++;
		e->uring_inflight--;
		switch (UD_KIND(ud)) {
		case UD_READ:
			tx_read_done(e, UD_IDX(ud), res);
			break;
		case UD_WRITE:
			rx_write_done(e, UD_IDX(ud), res);
			break;
		case UD_FSYNC:
			rx_fsync_done(e, &e->files[UD_IDX(ud)], res);
			break;
		case UD_DIRSYNC:
			rx_dirsync_done(e, UD_IDX(ud), res);
			break;
		default:
			break;
		}
	}
	io_uring_cq_advance(&e->ring, n);
	return 0;
}

/* Has the peer closed the control connection (EOF waiting on the socket)? */
static bool peer_closed(struct engine *e)
{
	char b;
	struct pollfd p = { .fd = tls_fd(e->p->chan->tls), .events = POLLIN };

	return poll(&p, 1, 0) == 1 &&
	       (p.revents & POLLHUP || recv(p.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0);
}

static int on_xport(struct engine *e)
{
	struct xport *x = e->p->x;
	struct xport_wc wc[64];
	int n;

	while ((n = x->ops->poll_cq(x, wc, ARRAY_SIZE(wc))) > 0) {
		for (int i = 0; i < n; i++) {
			uint32_t kind = wc[i].imm >> PROTO_IMM_KIND_SHIFT;
			uint32_t slot = wc[i].imm & PROTO_IMM_SLOT_MASK;

			if (wc[i].status != XPORT_WC_SUCCESS && e->sent_end) {
				/*
				 * Everything is resolved and END is on its way: the
				 * receiver may already be tearing its lanes down.
				 * Its END (or its failure) comes over the control channel.
				 */
				continue;
			}
			if (wc[i].status != XPORT_WC_SUCCESS) {
				const char *why = x->ops->last_error ? x->ops->last_error(x) : NULL;
				/*
				 * A peer that died takes its memory registrations with
				 * it: say so rather than let this read like an attack.
				 */
				bool gone = peer_closed(e);
				return fail(e, PERR_TRANSPORT, -EIO, "data transport: %s%s%s%s",
					    xport_wc_status_str(wc[i].status), why ? ": " : "",
					    why ? why : "",
					    gone ? " (the peer closed its control connection: it "
						   "probably ended)"
						 : "");
			}
			if (wc[i].opcode == XPORT_WC_WRITE) {
				lane_complete(e, wc[i].lane, wc[i].wr_id);
				continue;
			}
			/* A receive was consumed: give it back right away. */
			uint64_t id = wc[i].lane;
			int r = x->ops->post_recvs(x, wc[i].lane, &id, 1);
			if (r < 0) {
				return fail(e, PERR_TRANSPORT, r, "post receive: %s", strerror(-r));
			}
			if (e->p->role == ENGINE_RECEIVER && kind == PROTO_IMM_DATA &&
			    wc[i].len == PROTO_DESC_LEN) {
				if (rx_data(e, slot, wc[i].lane) < 0) {
					return -1;
				}
			} else if (e->p->role == ENGINE_SENDER && kind == PROTO_IMM_CREDIT &&
				   wc[i].len == 0 && slot < e->p->slots) {
				if (e->nfree_slots >= e->p->slots) {
					return fail(e, PERR_PROTOCOL, -EBADMSG, "credit overflow");
				}
				e->free_slots[e->nfree_slots++] = slot;
				e->credits++;
			} else {
				return fail(e, PERR_PROTOCOL, -EBADMSG,
					    "unexpected immediate 0x%08x (len %u)", wc[i].imm,
					    wc[i].len);
			}
		}
	}
	if (n < 0) {
		return fail(e, PERR_TRANSPORT, n, "poll transport: %s", strerror(-n));
	}
	return 0;
}

static int on_message(struct engine *e, struct msg *m)
{
	bool rx = e->p->role == ENGINE_RECEIVER;

	switch (m->type) {
	case MSG_FILES:
		if (rx && !e->got_end) {
			return rx_files(e, &m->u.files);
		}
		break;
	case MSG_FILE_DONE:
		if (rx && !e->got_end) {
			return rx_file_done(e, &m->u.file_done);
		}
		break;
	case MSG_ENTRY_FAILED:
		if (rx && !e->got_end) {
			return rx_entry_failed(e, &m->u.entry_failed);
		}
		break;
	case MSG_END:
		if (rx && !e->got_end) {
			if (e->files_open != 0) {
				return fail(e, PERR_PROTOCOL, -EBADMSG, "END with files in flight");
			}
			e->got_end = true;
			rx_finish_dirs(e);
			return 0;
		}
		if (!rx && e->sent_end && !e->got_end) {
			e->got_end = true;
			return 0;
		}
		break;
	case MSG_FILES_ACK:
		if (!rx) {
			return tx_files_ack(e, &m->u.files_ack);
		}
		break;
	case MSG_FILE_RESULT:
		if (!rx) {
			return tx_file_result(e, &m->u.file_result);
		}
		break;
	case MSG_PING: {
		struct msg pong = { .type = MSG_PONG };
		pong.u.ping.nonce = m->u.ping.nonce;
		return chan_queue(e->p->chan, &pong);
	}
	case MSG_PONG:
		return 0; /* not progress: see progress_mark */
	case MSG_ERROR:
		return fail(e, m->u.error.code ? m->u.error.code : PERR_PROTOCOL, -EREMOTEIO,
			    "peer: %s", m->u.error.text);
	default:
		break;
	}
	return fail(e, PERR_PROTOCOL, -EBADMSG, "unexpected %s during transfer",
		    proto_type_name(m->type));
}

static int on_control(struct engine *e)
{
	do {
		struct msg m;
		int r = chan_recv(e->p->chan, &m, e->p->idle_timeout_ms);

		if (r < 0) {
			if (r == -EPIPE || r == -ECONNRESET) {
				return fail(e, PERR_TRANSPORT, r,
					    "the peer closed the control connection mid-transfer");
			}
			char why[160];

			/* engine_run tells the peer, with this reason. */
			return fail(e, chan_err_code(r), r, "control channel: %s",
				    chan_recv_error(e->p->chan, r, why, sizeof(why)));
		}
		r = on_message(e, &m);
		msg_clear(&m);
		if (r < 0) {
			return r;
		}
	} while (!e->failed && chan_readable_now(e->p->chan));
	return 0;
}

/* ---- setup and teardown ------------------------------------------------ */

static uint32_t engine_data_chunks(const struct engine_params *p)
{
	return p->role == ENGINE_SENDER ? p->pool_chunks : p->slots;
}

bool engine_rx_copies_slots(const struct xport_ops *ops)
{
	return !ops->fence;
}

/* Receiver on a transport that cannot fence slots: one private copy per slot. */
static bool engine_copies_slots(const struct engine_params *p, const struct xport_ops *ops)
{
	return p->role == ENGINE_RECEIVER &&
	       (engine_rx_copies_slots(ops) || (p->faults & ENGINE_FAULT_COPY_SLOTS));
}

/* Data chunks and the descriptor chunks behind them: what the transport registers. */
static uint64_t engine_registered_chunks(const struct engine_params *p)
{
	uint64_t data_chunks = engine_data_chunks(p);
	uint64_t desc_bytes = data_chunks * PROTO_DESC_LEN;

	return data_chunks + (desc_bytes + p->chunk_size - 1) / p->chunk_size;
}

uint64_t engine_pinned_bytes(const struct engine_params *p, const struct xport_ops *ops)
{
	uint64_t copies = engine_copies_slots(p, ops) ? p->slots : 0;
	uint64_t bytes = (engine_registered_chunks(p) + copies) * p->chunk_size;

	/* Whole 2 MiB pages, so the pool can be backed by huge pages. */
	if (bytes >= HUGE_2M) {
		bytes = (bytes + HUGE_2M - 1) / HUGE_2M * HUGE_2M;
	}
	return bytes;
}

static int setup_memory(struct engine *e)
{
	const struct engine_params *p = e->p;
	struct xport *x = p->x;
	uint32_t data_chunks = engine_data_chunks(p);
	/* The peer reaches the slots and descriptors, never the copies behind them. */
	size_t reg_bytes = (size_t)engine_registered_chunks(p) * p->chunk_size;
	/* The size a caller reserved against its budget is the size pinned here. */
	size_t bytes = (size_t)engine_pinned_bytes(p, x->ops);
	int r;

	e->rx_copy = engine_copies_slots(p, x->ops);
	e->copy_base = (uint32_t)engine_registered_chunks(p);
	r = pool_create(bytes, p->chunk_size, &e->pool);
	if (r < 0) {
		return fail(e, PERR_INTERNAL, r, "buffer pool of %zu MiB: %s", bytes >> 20,
			    strerror(-r));
	}
	assert(e->pool->size == bytes);
	/*
	 * Before anything touches the pages again: place them on the device's
	 * node. Only a hint; the copy works the same from any node, so a refusal
	 * (no NUMA in this kernel, a node cpusets forbid) is not a failure.
	 */
	if (x->ops->numa_node) {
		int node = x->ops->numa_node(x);

		if (node >= 0) {
			(void)pool_bind_node(e->pool, node);
		}
	}
	/* The extra chunks hold descriptors; they never enter the free list. */
	while (pool_get(e->pool) >= 0) {
	}
	for (uint32_t i = data_chunks; i-- > 0;) {
		pool_put(e->pool, i);
	}
	e->desc_area = pool_chunk(e->pool, data_chunks);
	r = pool_register_uring(e->pool, &e->ring);
	if (r < 0) {
		char advice[512];
		pool_memlock_check(e->pool->size, advice, sizeof(advice));
		return fail(e, PERR_INTERNAL, r, "register buffers with io_uring: %s (%s)",
			    strerror(-r), advice);
	}
	r = x->ops->reg_mr(x, e->pool->base, p->role == ENGINE_RECEIVER ? reg_bytes : e->pool->size,
			   p->role == ENGINE_RECEIVER
			       ? XPORT_ACCESS_LOCAL | XPORT_ACCESS_REMOTE_WRITE
			       : XPORT_ACCESS_LOCAL,
			   &e->mr);
	if (r < 0) {
		return fail(e, PERR_TRANSPORT, r, "register memory with the transport: %s",
			    strerror(-r));
	}
	return 0;
}

static int setup(struct engine *e)
{
	const struct engine_params *p = e->p;
	struct xport *x = p->x;
	struct io_uring_params up = { 0 };
	int r;

	for (size_t i = 0; i < FILE_TABLE; i++) {
		e->files[i].fd = e->files[i].dfd = e->files[i].tfd = e->files[i].dir = -1;
	}
	for (int i = 0; i < DIR_CACHE; i++) {
		e->dirs[i].fd = -1;
	}
	r = io_uring_queue_init_params(URING_ENTRIES, &e->ring, &up);
	if (r < 0) {
		return fail(e, PERR_INTERNAL, r, "io_uring: %s", strerror(-r));
	}
	e->ring_ok = true;
	/*
	 * fsync is a blocking operation that io_uring runs on its bounded
	 * workers, by default 4 per CPU. Many small files finishing together
	 * want many fsyncs in flight: the disk queues them side by side.
	 */
	unsigned workers[2] = { IOWQ_BOUND_WORKERS, 0 };
	io_uring_register_iowq_max_workers(&e->ring, workers);
	e->uring_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->uring_efd < 0 || io_uring_register_eventfd(&e->ring, e->uring_efd) < 0) {
		return fail(e, PERR_INTERNAL, -EIO, "io_uring eventfd");
	}
	r = setup_memory(e);
	if (r < 0) {
		return r;
	}
	for (unsigned i = 0; i < x->nlanes; i++) {
		e->lanes[i].cap = x->sq_depth;
		e->lanes[i].fifo = calloc(x->sq_depth, sizeof(struct lane_ent));
		if (!e->lanes[i].fifo) {
			return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
		/* Receives for the peer's immediates: at most one per slot in flight. */
		for (uint32_t k = 0; k < p->slots; k++) {
			uint64_t id = i;
			r = x->ops->post_recvs(x, i, &id, 1);
			if (r < 0) {
				return fail(e, PERR_TRANSPORT, r, "post receives: %s",
					    strerror(-r));
			}
		}
	}
	if (p->role == ENGINE_SENDER) {
		e->chunks = calloc(e->pool->nchunks, sizeof(*e->chunks));
		e->free_slots = calloc(p->slots, sizeof(*e->free_slots));
		if (!e->chunks || !e->free_slots) {
			return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
		return 0;
	}
	e->rslots = calloc(p->slots, sizeof(*e->rslots));
	e->commit_batch = calloc(FILE_TABLE, sizeof(*e->commit_batch));
	e->sync_wait = calloc(FILE_TABLE, sizeof(*e->sync_wait));
	e->sync_run = calloc(FILE_TABLE, sizeof(*e->sync_run));
	e->sync_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!e->rslots || !e->commit_batch || !e->sync_wait || !e->sync_run || e->sync_efd < 0) {
		return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	/* Offer the ring: data slots, then the descriptor array. */
	struct msg m = { .type = MSG_RING };
	/* In the registration's own address space: nothing of our heap's layout. */
	m.u.ring.addr = e->mr->iova;
	m.u.ring.desc_addr = e->mr->iova + (uint64_t)(e->desc_area - (uint8_t *)e->pool->base);
	m.u.ring.nkeys = (uint8_t)x->nlanes;
	for (unsigned i = 0; i < x->nlanes; i++) {
		m.u.ring.rkey[i] = e->mr->lane_rkey[i];
	}
	m.u.ring.slots = p->slots;
	m.u.ring.slot_size = p->chunk_size;
	r = chan_send(p->chan, &m);
	return r < 0 ? fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* Sender: the first message must be the receiver's ring, and it must fit. */
static int tx_wait_ring(struct engine *e)
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

static void teardown(struct engine *e)
{
	struct xport *x = e->p->x;

	/* The sync thread uses directory fds: it finishes before they close. */
	if (e->sync_running) {
		pthread_join(e->sync_thread, NULL);
		e->sync_running = false;
	}
	if (e->sync_efd >= 0) {
		close(e->sync_efd);
	}
	free(e->sync_wait);
	free(e->sync_run);

	/* Receiver: every temp file not committed goes. */
	for (size_t i = 0; i < FILE_TABLE; i++) {
		struct efile *f = &e->files[i];
		if (!f->used) {
			continue;
		}
		if (f->tfd >= 0 && f->dir >= 0 && !f->renamed) {
			rx_discard(e, f);
		}
		file_release(e, f);
	}
	if (e->ring_ok) {
		/* Drain what the kernel still owns before the buffers go. */
		while (e->uring_inflight > 0) {
			struct io_uring_cqe *cqe;
			io_uring_submit(&e->ring);
			if (io_uring_wait_cqe(&e->ring, &cqe) < 0) {
				break;
			}
			io_uring_cqe_seen(&e->ring, cqe);
			e->uring_inflight--;
		}
	}
	/* Revoke remote access before the memory can be reused or freed. */
	if (e->mr) {
		x->ops->dereg_mr(x, e->mr);
		e->mr = NULL;
	}
	pool_destroy(e->pool);
	if (e->ring_ok) {
		io_uring_queue_exit(&e->ring);
	}
	if (e->uring_efd >= 0) {
		close(e->uring_efd);
	}
	for (int i = 0; i < DIR_CACHE; i++) {
		if (e->dirs[i].path) {
			free(e->dirs[i].path);
			close(e->dirs[i].fd);
		}
	}
	for (unsigned i = 0; i < XPORT_MAX_LANES; i++) {
		free(e->lanes[i].fifo);
	}
	free(e->chunks);
	free(e->free_slots);
	free(e->rslots);
	free(e->commit_batch);
	free(e->batch);
	free(e->seen);
	for (size_t i = 0; i < e->ndirs_meta; i++) {
		free(e->dirs_meta[i].name);
	}
}

/* ---- the loop ------------------------------------------------------------ */

static bool finished(struct engine *e)
{
	return e->got_end;
}

static int step_sender(struct engine *e)
{
	if (tx_offer(e) < 0 || tx_fill(e) < 0 || tx_post_ready(e) < 0) {
		return -1;
	}
	/* Files that failed while reading owe a FILE_DONE once their chunks are gone. */
	for (size_t i = 0; i < FILE_TABLE; i++) {
		struct efile *f = &e->files[i];
		if (f->used && f->failed && f->started && !f->done_sent && f->chunks_out == 0) {
			if (tx_send_done(e, f) < 0) {
				return -1;
			}
		}
	}
	if (!e->sent_end && e->src_done && !e->next_src && e->offered_unresolved == 0) {
		struct msg m = { .type = MSG_END };
		m.u.end.files = e->offered;
		m.u.end.bytes = e->st.bytes;
		if (chan_queue(e->p->chan, &m) < 0) {
			return fail(e, PERR_IO, -EIO, "control channel");
		}
		e->sent_end = true;
	}
	return 0;
}

/*
 * What keeps a transfer alive: payload bytes moved, credits returned or
 * received, and entries committed. Control chatter (PING, PONG, FILES with
 * refused entries) is not progress: a peer that only answers PINGs is idle,
 * and the session ends after the idle timeout with its temp files removed.
 */
static uint64_t progress_mark(const struct engine *e)
{
	return e->bytes_progress + e->credits + e->st.files_ok;
}

/* Our own disk work in flight (reads, writes, fsyncs): waiting on it is not idling. */
static bool local_io_busy(const struct engine *e)
{
	return e->uring_inflight > 0 || e->sync_running;
}

static int loop(struct engine *e)
{
	const struct engine_params *p = e->p;
	struct xport *x = p->x;
	int idle_ms = p->idle_timeout_ms > 0 ? p->idle_timeout_ms : 300000;

	ts_now(&e->last_activity);
	e->last_ping = e->last_activity;
	while (!e->failed) {
		struct pollfd pfd[4] = {
			{ .fd = tls_fd(p->chan->tls), .events = POLLIN },
			{ .fd = x->ops->event_fd(x), .events = POLLIN },
			{ .fd = e->uring_efd, .events = POLLIN },
			{ .fd = e->sync_efd, .events = POLLIN },
		};
		uint64_t before = e->bytes_progress, mark = progress_mark(e);
		int n, wait_ms;

		if (p->stop && *p->stop) {
			chan_send_error(p->chan, PERR_SHUTDOWN, "interrupted");
			e->error_sent = true;
			return fail(e, PERR_SHUTDOWN, -EINTR, "interrupted");
		}
		if (p->role == ENGINE_SENDER && step_sender(e) < 0) {
			break;
		}
		if (p->role == ENGINE_RECEIVER) {
			if (rx_sync_step(e) < 0 || rx_credit_flush(e) < 0) {
				break;
			}
			rx_commit_batch(e);
			if (e->got_end) {
				struct msg m = { .type = MSG_END };
				m.u.end.files = (uint32_t)(e->st.files_ok + e->st.files_failed);
				m.u.end.bytes = e->st.bytes;
				chan_queue(p->chan, &m);
			}
		}
		if (batch_flush(e) < 0 || uring_flush(e) < 0) {
			break;
		}
		if (chan_flush(p->chan) < 0) {
			return fail(e, PERR_IO, -EIO, "control channel write failed");
		}
		if (finished(e)) {
			return 0;
		}
		wait_ms = chan_readable_now(p->chan) || p->busy_poll ? 0 : p->bwlimit ? 10 : 1000;
		n = poll(pfd, 4, wait_ms);
		if (n < 0 && errno != EINTR) {
			return fail(e, PERR_INTERNAL, negerrno(), "poll: %s", strerror(errno));
		}
		if (pfd[2].revents & POLLIN) {
			on_uring(e);
		}
		if (pfd[3].revents & POLLIN) {
			rx_sync_done(e);
		}
		if (!e->failed && ((pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) ||
				   chan_readable_now(p->chan))) {
			on_control(e);
		}
		if (!e->failed && !finished(e) && (pfd[1].revents & POLLIN)) {
			on_xport(e);
		}
		if (progress_mark(e) != mark || local_io_busy(e)) {
			ts_now(&e->last_activity);
			if (p->ev.progress && e->bytes_progress != before) {
				p->ev.progress(p->ev.ud, e->bytes_progress);
			}
		} else if (ts_since(&e->last_activity) * 1000 > idle_ms) {
			chan_send_error(p->chan, PERR_TIMEOUT, "idle timeout: no data progress");
			e->error_sent = true;
			return fail(e, PERR_TIMEOUT, -ETIMEDOUT, "no data progress for %d s",
				    idle_ms / 1000);
		} else if (ts_since(&e->last_activity) * 1000 > idle_ms / 3 &&
			   ts_since(&e->last_ping) * 1000 > idle_ms / 3) {
			/* Tells a peer we are alive; its PONG does not keep us waiting longer. */
			struct msg ping = { .type = MSG_PING };
			ts_now(&e->last_ping);
			chan_queue(p->chan, &ping);
		}
	}
	return -1;
}

/*
 * A session that fails here tells the peer why before the caller closes the
 * connection (issue 8 item 11): ERROR with the failure's code and reason, so
 * a protocol violation is never answered by a bare EOF. Not when the peer
 * ended it with its own ERROR, or when it was told already.
 */
static void report_failure(struct engine *e)
{
	if (e->error_sent || e->fail_r == -EREMOTEIO) {
		return;
	}
	/* On a dead channel this fails quietly: nothing more to do then. */
	chan_send_error(e->p->chan, e->err_code ? e->err_code : PERR_INTERNAL, "%s", e->err);
	e->error_sent = true;
}

int engine_run(const struct engine_params *p, struct engine_stats *ret_stats, uint32_t *ret_code,
	       char *err, size_t errlen)
{
	struct engine *e;
	int r;

	if (!p->chan || !p->x || p->slots == 0 || p->slots > PROTO_MAX_SLOTS ||
	    p->chunk_size < PROTO_MIN_CHUNK || p->x->nlanes == 0 || p->x->sq_depth < 4) {
		snprintf(err, errlen, "bad engine parameters");
		*ret_code = PERR_INTERNAL;
		return -EINVAL;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		return -ENOMEM;
	}
	e->p = p;
	e->err = err;
	e->errlen = errlen;
	e->uring_efd = -1;
	e->sync_efd = -1;
	e->oldest_id = 1;
	err[0] = '\0';

	r = setup(e);
	if (r >= 0 && p->role == ENGINE_SENDER) {
		r = tx_wait_ring(e);
	}
	if (r >= 0) {
		r = loop(e);
	}
	if (e->failed) {
		/* The failure's own errno: -EREMOTEIO tells the caller the peer ended it. */
		r = e->fail_r < 0 ? e->fail_r : r < 0 ? r : -EIO;
		report_failure(e);
	}
	teardown(e);
	*ret_stats = e->st;
	*ret_code = e->failed ? e->err_code : PERR_OK;
	free(e);
	return r < 0 ? r : 0;
}
