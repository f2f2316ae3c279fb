/* SPDX-License-Identifier: MIT */
/*
 * The engine's file table (entries taken by id, set up when taken, released
 * with everything they hold) and its failure reporting: the session's
 * (engine_fail), a file's (file_fail), and what the caller's events are told of
 * each entry (note_*).
 */
#include "engine-internal.h"
#include "engine_rx.h"

#include <sys/mman.h>

/* Record the session failure (the first one wins) and return r. */
int engine_fail(struct engine *e, uint32_t code, int r, const char *fmt, ...)
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

uint32_t errno_to_perr(int r)
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

void file_fail(struct efile *f, uint32_t code, const char *fmt, ...)
{
	va_list ap;

	if (f->failed) {
		return;
	}
	f->failed = true;
	f->fail_code = code;
	if (file_fail_buf(f)) {
		va_start(ap, fmt);
		vsnprintf(f->fail_text, FILE_FAIL_TEXT_LEN, fmt, ap);
		va_end(ap);
	}
}

/*
 * Few files fail, and a file table entry is touched once per session at
 * least: the text lives apart, so that entries stay small.
 */
char *file_fail_buf(struct efile *f)
{
	if (!f->fail_text) {
		f->fail_text = calloc(1, FILE_FAIL_TEXT_LEN);
	}
	return f->fail_text;
}

const char *file_fail_text(const struct efile *f)
{
	return f->fail_text ? f->fail_text : "";
}

/* Count a failed file: the first failure's code and side are kept for the exit code. */
void file_note_failure(struct engine *e, const char *name, uint8_t ftype, uint32_t code, bool local,
		       const char *text)
{
	e->st.files_failed++;
	if (!e->st.first_error) {
		e->st.first_error = code;
		e->st.first_error_local = local;
	}
	if (e->p->ev.file_failed) {
		e->p->ev.file_failed(e->p->ev.ud, name, ftype, code, local, text);
	}
}

/*
 * Count a committed file: bytes of payload (0 for a directory or a symlink,
 * which have no hash: NULL).
 */
void file_note_committed(struct engine *e, const struct efile *f, uint64_t bytes,
			 const uint8_t *hash)
{
	struct engine_unsent u = engine_file_unsent(e, f);

	e->st.files_ok++;
	e->st.bytes += bytes;
	e->st.bytes_zero += u.zeroed;
	e->st.bytes_unchanged += u.skipped;
	if (e->p->ev.file_ok) {
		struct engine_entry_ev ev = {
			.name = f->name,
			.ftype = f->ftype,
			.bytes = bytes,
			.zero_bytes = u.zeroed,
			.skipped_bytes = u.skipped,
			.seconds = ts_since(&f->t0),
			.hash = f->ftype == PROTO_FT_REG ? hash : NULL,
			.tree_chunk = f->ftype == PROTO_FT_REG ? engine_digest_tree(e, f) : 0,
			.items = f->items,
		};

		e->p->ev.file_ok(e->p->ev.ud, &ev);
	}
}

/*
 * Count a committed file of which the receiver had kept bytes from a cut
 * run (--partial): sent is the payload that crossed now.
 */
void file_note_resumed(struct engine *e, const struct efile *f, uint64_t sent, uint64_t kept,
		       const uint8_t *hash)
{
	struct engine_unsent u = engine_file_unsent(e, f);

	e->st.files_ok++;
	e->st.files_resumed++;
	e->st.bytes += sent;
	e->st.bytes_resumed += kept;
	e->st.bytes_zero += u.zeroed;
	e->st.bytes_unchanged += u.skipped;
	if (e->p->ev.file_resumed) {
		e->p->ev.file_resumed(e->p->ev.ud, f->name, sent, kept, u.zeroed, u.skipped,
				      ts_since(&f->t0), hash, engine_digest_tree(e, f), f->items);
	} else if (e->p->ev.file_ok) {
		struct engine_entry_ev ev = {
			.name = f->name,
			.ftype = f->ftype,
			.bytes = sent,
			.zero_bytes = u.zeroed,
			.skipped_bytes = u.skipped,
			.seconds = ts_since(&f->t0),
			.hash = hash,
			.tree_chunk = engine_digest_tree(e, f),
		};

		e->p->ev.file_ok(e->p->ev.ud, &ev);
	}
}

/* Feed len zero bytes to h: a ZEROS range, hashed as the bytes it stands for. */
void hash_zeros(struct file_hash *h, uint64_t len)
{
	size_t zlen;
	const uint8_t *z = sparse_zero_buf(&zlen);

	while (len > 0) {
		size_t n = (size_t)MIN(len, (uint64_t)zlen);

		file_hash_update(h, z, n);
		len -= n;
	}
}

/* A probe: an entry the receiver would copy (or make). */
void file_note_planned(struct engine *e, const char *name, uint8_t ftype, uint64_t bytes)
{
	e->st.files_planned++;
	e->st.bytes_planned += bytes;
	if (e->p->ev.planned) {
		e->p->ev.planned(e->p->ev.ud, name, ftype, bytes);
	}
}

/*
 * Count an entry the receiver kept (a skip level, or a directory or symlink
 * there already): unchanged, or updated when its metadata alone was brought
 * in line (f->items). Not a failure.
 */
void file_note_kept(struct engine *e, const struct efile *f)
{
	uint32_t items = f->items & PROTO_ITEMS_META;

	if (items) {
		e->st.files_updated++;
	} else {
		e->st.files_skipped++;
	}
	if (e->p->ev.file_skipped) {
		e->p->ev.file_skipped(e->p->ev.ud, f->name, f->ftype, items);
	}
}

int engine_rx_kept_flush(struct engine *e)
{
	struct msg ack = { .type = MSG_FILES_ACK };
	int r;

	if (!e->nkept_acks) {
		return 0;
	}
	ack.u.files_ack.count = e->nkept_acks;
	ack.u.files_ack.st = e->kept_acks;
	e->nkept_acks = 0;
	r = chan_queue(e->p->chan, &ack);
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

int engine_rx_kept_answer(struct engine *e, struct efile *f, uint32_t items)
{
	/* Only a session with held answers (-X/-A and PROTO_CAP_KEPT_ITEMS) pays for them. */
	if (!e->kept_acks) {
		e->kept_acks = calloc(PROTO_MAX_BATCH, sizeof(*e->kept_acks));
		if (!e->kept_acks) {
			return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
	}
	f->items |= items;
	e->kept_acks[e->nkept_acks++] =
	    (struct proto_status){ .id = f->id,
				   .status = PERR_SKIPPED,
				   .items = e->p->conceal ? 0 : f->items & PROTO_ITEMS_KNOWN };
	/* Settled as kept when its answer was held: counted and let go now. */
	file_note_kept(e, f);
	file_release(e, f);
	return e->nkept_acks < PROTO_MAX_BATCH ? 0 : engine_rx_kept_flush(e);
}

struct efile *file_by_id(struct engine *e, uint32_t id)
{
	struct efile *f = file_at(e, id % FILE_TABLE);

	return f->used && f->id == id ? f : NULL;
}

uint32_t file_index(const struct engine *e, const struct efile *f)
{
	return (uint32_t)(((const char *)f - (const char *)e->files) / e->file_stride);
}

/*
 * Entries are taken in id order, so the table's untouched pages are
 * reached one after another, and each would trap on its first write. Some
 * hypervisors make that trap cost tens of microseconds (measured in one
 * guest: 19 us a 4 KiB page; 0.7 us populated in bulk, but then 13 us more
 * at the first touch, where the hypervisor maps it; 2 MiB pages: 0.5 ms for
 * all three). With 4 KiB pages that is about 1,500 pages a session on each
 * end. The table's mapping asks for 2 MiB pages (mem_map_thp); where the
 * kernel has none, the pages of the next FILE_POPULATE_STEP entries are
 * populated in one call, ahead of use. A kernel without MADV_POPULATE_WRITE
 * (before 5.14) says EINVAL and is not asked again.
 */
#define FILE_POPULATE_STEP 512

static void file_populate(struct engine *e, uint32_t idx)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uint32_t end = MIN(idx + FILE_POPULATE_STEP, (uint32_t)FILE_TABLE);
	uintptr_t a = (uintptr_t)file_at(e, e->files_ready) & ~(page - 1);
	uintptr_t b = (uintptr_t)file_at(e, end) & ~(page - 1);

	e->files_ready = end;
	if (b > a && madvise((void *)a, b - a, MADV_POPULATE_WRITE) < 0 && errno == EINVAL) {
		e->files_ready = FILE_TABLE;
	}
}

void file_take(struct engine *e, struct efile *f, uint32_t id)
{
	if (file_index(e, f) >= e->files_ready) {
		file_populate(e, file_index(e, f));
	}
	memset(f, 0, e->file_stride);
	f->used = true;
	f->id = id;
	f->fd = f->dfd = f->tfd = f->dir = -1;
	engine_features_file_init(e, f);
	e->files_open++;
	e->files_hw = MAX(e->files_hw, file_index(e, f) + 1);
}

char *file_tmpname(struct efile *f)
{
	if (!f->tmpname) {
		f->tmpname = malloc(FILE_TMPNAME_LEN);
		if (!f->tmpname) {
			return NULL;
		}
	}
	f->tmpname[0] = '\0';
	return f->tmpname;
}

void file_release(struct engine *e, struct efile *f)
{
	if (e->role->file_release) {
		e->role->file_release(e, f);
	}
	engine_features_file_release(e, f);
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
	free(f->fail_text);
	free(f->tmpname);
	free(f->resume);
	e->names_in_flight -= f->name_bytes;
	free(f->name);
	free(f->leaf);
	free(f->src_path);
	memset(f, 0, e->file_stride);
	f->fd = f->dfd = f->tfd = f->dir = -1;
	e->files_open--;
}
