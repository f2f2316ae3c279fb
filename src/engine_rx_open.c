/* SPDX-License-Identifier: MIT */
/*
 * The receiver's look at one entry before it takes it: limits, space,
 * the skip level, and a regular file's temp file (O_DIRECT where it can,
 * preallocated, its owner and mode); a probe's answers for the same.
 */
#include "engine_rx.h"

/*
 * A second, O_DIRECT descriptor for the temp file where the file system
 * allows it: a slot's whole pages then go from the ring to the disk without
 * a copy into the page cache (and without io_uring punting buffered writes
 * to its worker threads). Only the last page of a file, partly filled, and
 * short-write remainders go buffered (rx_submit_write). Not for a file that
 * may travel packed (its pieces are written buffered; engine_pack.c) or a
 * smaller one.
 */
static void rx_open_direct(struct engine *e, struct efile *f)
{
	uint64_t min = MAX(RX_DIRECT_MIN, PACK_FILE_MAX_FOR(e->p->chunk_size) + 1);
	char proc[64];

	if (f->size < MIN(min, e->p->chunk_size) || diskio_dio_align(f->tfd, &f->dio) < 0 ||
	    !f->dio.mem || !f->dio.offset || e->p->chunk_size % f->dio.offset ||
	    4096 % f->dio.mem) {
		return;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->tfd);
	f->dfd = open(proc, O_WRONLY | O_CLOEXEC | O_DIRECT);
}

/*
 * A new temp file that chunks go into with O_DIRECT, allocated first
 * (unwritten extents, which read as zeros). Every write is then
 * inside the file and onto blocks it has, which ext4 and XFS take under the
 * inode's shared lock: the chunks in flight on io_uring's workers are
 * written side by side instead of each waiting for the inode's exclusive
 * lock (extending writes, or writes into holes, need it). The file's
 * blocks also come in one piece. Only the whole chunks, which are what
 * goes direct: the short last chunk is written through the page cache, as
 * before, and stays a hole where the sender reports zeros there. Zeros it
 * reports inside are punched out again (rx_range_take), so a sparse source
 * stays sparse. Only a help: where it fails (no such call, no room) the
 * file is written as before; but one that failed part way (no room) may
 * have allocated some, so zeros are punched there as well. Not a file
 * whose digest a feature chose (f->dg: --delta's old copy), whose
 * unchanged ranges are copied in from that copy.
 */
static void rx_prealloc(struct efile *f, uint32_t chunk_size)
{
	uint64_t whole = f->size / chunk_size * chunk_size;

	if (f->dfd < 0 || f->dg || whole < 2 * (uint64_t)chunk_size ||
	    whole > (uint64_t)INT64_MAX) {
		return;
	}
	f->prealloc =
	    fallocate(f->tfd, 0, 0, (off_t)whole) == 0 || (errno != EOPNOTSUPP && errno != ENOSYS);
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
 * keeps an honest sender's ENOSPC early without reserving anything. need:
 * the bytes still to be written (less than the size when resumed).
 */
static uint32_t rx_check_space(struct engine *e, struct efile *f, uint64_t need, char *text,
			       size_t textlen)
{
	struct statvfs sv;

	if (need < e->p->chunk_size || fstatvfs(e->dirs[f->dir].fd, &sv) < 0 || sv.f_frsize == 0 ||
	    need / sv.f_frsize <= sv.f_bavail) {
		return PERR_OK;
	}
	snprintf(text, textlen, "%s: %llu bytes, %llu free", strerror(ENOSPC),
		 (unsigned long long)need, (unsigned long long)sv.f_bavail * sv.f_frsize);
	return PERR_NOSPACE;
}

/*
 * Skip level checksum: the file at the destination name has the declared
 * size; it is opened here (never through a symlink) and hashed on the
 * engine's hashing thread while the sender hashes its source. SUM_WANTED
 * asks the sender for its digest; the file waits for both (rx_sum_decide).
 * One that can't be opened is not a match: it is copied over.
 */
static uint32_t rx_sum_request(struct engine *e, struct efile *f)
{
	int fd = openat(e->dirs[f->dir].fd, f->leaf,
			O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;

	if (fd < 0) {
		return PERR_OK;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != f->size) {
		close(fd);
		return PERR_OK;
	}
	return sums_ask(e, f, fd) < 0 ? PERR_INTERNAL : PERR_SUM_WANTED;
}

/*
 * What is by regular file f's name (f->dir located), for its items and the
 * mode rule: nothing or another type (NEW), or a regular file (st, true)
 * that the data replaces (CONTENT, SIZE, and what differs of its metadata)
 * unless the skip level keeps it (rx_keep_file).
 */
static bool rx_item_file(struct engine *e, struct efile *f, struct stat *st)
{
	struct meta_policy mp = rx_meta_policy(e);
	struct meta_sent sent = rx_meta_sent(f, S_IFREG);

	f->old_seen = true;
	f->old_mode = 0;
	if (fstatat(e->dirs[f->dir].fd, f->leaf, st, AT_SYMLINK_NOFOLLOW) < 0) {
		f->items = PROTO_ITEM_NEW;
		return false;
	}
	f->old_mode = (uint32_t)st->st_mode;
	if (!S_ISREG(st->st_mode)) {
		/* A block device is written in place: its contents change, it is not new. */
		f->items = S_ISBLK(st->st_mode) ? PROTO_ITEM_CONTENT : PROTO_ITEM_NEW;
		return false;
	}
	f->items = PROTO_ITEM_CONTENT | meta_policy_changes(&mp, &sent, st) |
		   ((uint64_t)st->st_size != f->size ? PROTO_ITEM_SIZE : 0);
	return true;
}

/* A regular file the skip level keeps: SKIPPED, its metadata brought in line (rx_meta_keep). */
uint32_t rx_keep_file(struct engine *e, struct efile *f, const struct stat *st, char *text,
		      size_t textlen)
{
	uint32_t code = rx_meta_keep(e, f, e->dirs[f->dir].fd, f->leaf, st, text, textlen);

	if (code == PERR_OK) {
		/* What a hard link to it compares itself with (engine_links.c). */
		f->kept_dev = (uint64_t)st->st_dev;
		f->kept_ino = (uint64_t)st->st_ino;
		f->kept_nlink = (uint64_t)st->st_nlink;
	}
	return code == PERR_OK ? PERR_SKIPPED : code;
}

/*
 * The skip level (OPEN flags): PERR_SKIPPED when a regular file is there by
 * f's name (SKIP_EXISTS), with the declared size and mtime to the nanosecond
 * (SKIP_QUICK); with the declared size, SUM_WANTED (SKIP_CHECKSUM: the
 * contents decide, rx_sum_request). Looked at beneath the held directory,
 * never through a symlink; anything else there (a symlink, a directory) is
 * not a match and is dealt with as without a skip level.
 */
static uint32_t rx_check_skip(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	uint32_t level = e->p->open_flags & PROTO_OPEN_SKIP_LEVELS;
	struct stat st;

	if (!rx_item_file(e, f, &st) || !level) {
		return PERR_OK;
	}
	if (level == PROTO_OPEN_SKIP_EXISTS) {
		return rx_keep_file(e, f, &st, text, textlen);
	}
	if (level == PROTO_OPEN_SKIP_CHECKSUM) {
		if ((uint64_t)st.st_size != f->size) {
			return PERR_OK;
		}
		/* Two empty files have the same contents: nothing to hash. */
		return f->size == 0 ? rx_keep_file(e, f, &st, text, textlen) : rx_sum_request(e, f);
	}
	if ((uint64_t)st.st_size == f->size && st.st_mtim.tv_sec == f->meta.mtime_sec &&
	    (uint64_t)st.st_mtim.tv_nsec == f->meta.mtime_nsec) {
		return rx_keep_file(e, f, &st, text, textlen);
	}
	return PERR_OK;
}

/* A new file's owner and ACLs, before anything else is set on it. */
static uint32_t rx_temp_owner(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	struct meta_policy mp = rx_meta_policy(e);
	int r;

	/* Owner first: a chown later would clear attributes set meanwhile (file capabilities). */
	r = meta_policy_own(&mp, f->tfd, NULL, f->meta.uid, f->meta.gid);
	if (r < 0) {
		snprintf(text, textlen, "chown: %s", strerror(-r));
		return PERR_PERMISSION;
	}
	rx_acl_clear(e, f->tfd, false);
	return PERR_OK;
}

/* A regular file to be received: the limits, the space, and its temp file. */
/* A data file is open (temp, store or device): the rest it needs before its data. */
static void rx_temp_ready(struct engine *e, struct efile *f)
{
	engine_rx_opened(e, f);
	rx_open_direct(e, f);
	e->st.bytes_accepted += f->size;
}

/* A block device by that name: written in place (resumed with --partial), or refused. */
static uint32_t rx_open_device(struct engine *e, struct efile *f, uint32_t code, char *text,
			       size_t textlen)
{
	/* --partial: the journal of a cut run says what the device holds already. */
	if (code == PERR_OK && engine_rx_store(e, f) == -ENOMEM) {
		snprintf(text, textlen, "out of memory");
		return PERR_INTERNAL;
	}
	if (code == PERR_OK) {
		rx_temp_ready(e, f);
	}
	return code;
}

/*
 * --partial: into the store, resumed from what a cut run left there. Where
 * that cannot be (another session writes it, the store can't be made), the
 * file is written the usual way: it is only not resumable. False: not in
 * the store; true: *ret_code says how the entry is answered.
 */
static bool rx_open_store(struct engine *e, struct efile *f, char *text, size_t textlen,
			  uint32_t *ret_code)
{
	int r = engine_rx_store(e, f);

	if (r == -ENOMEM) {
		snprintf(text, textlen, "out of memory");
		*ret_code = PERR_INTERNAL;
		return true;
	}
	if (r != 0) {
		return false;
	}
	/* What a cut left is on the disk already (a full one, maybe). */
	*ret_code = rx_check_space(e, f, f->size - f->kept, text, textlen);
	if (*ret_code == PERR_OK) {
		*ret_code = rx_temp_owner(e, f, text, textlen);
	}
	/* Not OK: the partial stays for a run with more room. */
	if (*ret_code == PERR_OK) {
		rx_temp_ready(e, f);
	}
	return true;
}

uint32_t rx_open_temp(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	uint32_t code;
	int r;

	code = rx_check_limits(e, f, text, textlen);
	if (code == PERR_OK && f->dir < 0) {
		code = rx_locate(e, f, text, textlen);
	}
	if (code != PERR_OK) {
		return code;
	}
	/*
	 * Its hash state comes with its first streamed bytes (rx_hash_ready): a file
	 * that travels packed is hashed whole, in one call, and never needs one.
	 */
	f->hash_live = true;
	code = engine_rx_target(e, f, text, textlen);
	if (code != PERR_OK || f->device) {
		return rx_open_device(e, f, code, text, textlen);
	}
	rx_dir_sweep(e, f->dir);
	if (rx_open_store(e, f, text, textlen, &code)) {
		return code;
	}
	code = rx_check_space(e, f, f->size, text, textlen);
	if (code != PERR_OK) {
		return code;
	}
	/*
	 * An unnamed file where the file system allows it: it gets its name only
	 * when complete, and a crash leaves nothing behind. Else a named temp file.
	 */
	r = fspath_create_anon(e->dirs[f->dir].fd, rx_create_mode(e, f), &f->tfd);
	if (r == -EOPNOTSUPP) {
		f->tmode_set = false;
		r = file_tmpname(f) ? fspath_create_temp(e->dirs[f->dir].fd, f->leaf, &f->tfd,
							 f->tmpname, FILE_TMPNAME_LEN)
				    : -ENOMEM;
	}
	if (r < 0) {
		snprintf(text, textlen, "create temp file: %s", strerror(-r));
		return errno_to_perr(r);
	}
	code = rx_temp_owner(e, f, text, textlen);
	if (code != PERR_OK) {
		rx_discard(e, f);
		return code;
	}
	engine_rx_opened(e, f);
	rx_open_direct(e, f);
	rx_prealloc(f, e->p->chunk_size);
	e->st.bytes_accepted += f->size;
	return PERR_OK;
}

/*
 * A probe's regular file that would be received: the same limits and space
 * as rx_open_temp, counted as accepted, and nothing created. f->dir < 0: its
 * directory is not there (a real run would make it): the space is not known.
 */
uint32_t rx_probe_copy(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	uint32_t code = rx_check_limits(e, f, text, textlen);
	bool blk = false;

	if (code == PERR_OK && f->dir >= 0) {
		code = engine_rx_probe_target(e, f, &blk, text, textlen);
	}
	if (code == PERR_OK && f->dir >= 0 && !blk) {
		code = rx_check_space(e, f, f->size, text, textlen);
	}
	if (code == PERR_OK) {
		e->st.bytes_accepted += f->size;
	}
	return code;
}

/*
 * Where a probe's entry would go (rx_locate, nothing made). PERR_NOT_FOUND
 * from it means its directory is not there, which a real run would make:
 * then PERR_OK with f->dir < 0 (nothing there to keep or to replace).
 */
uint32_t rx_probe_locate(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	uint32_t code = rx_locate(e, f, text, textlen);

	if (code == PERR_NOT_FOUND && f->leaf) {
		text[0] = '\0';
		return PERR_OK;
	}
	return code;
}

/* A probe's regular file: the skip level as a real run decides it, else "would copy". */
static uint32_t rx_probe_file(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	uint32_t code = rx_probe_locate(e, f, text, textlen);

	f->items = PROTO_ITEM_NEW;
	if (code == PERR_OK && f->dir >= 0) {
		code = rx_check_skip(e, f, text, textlen);
	}
	return code == PERR_OK ? rx_probe_copy(e, f, text, textlen) : code;
}

/*
 * A probe's directory: one there already is taken as it is, one not there
 * would be made; anything else by that name (a file, a symlink) fails as
 * making it would. Nothing is created.
 */
uint32_t rx_probe_dir(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	_cleanup_close_ int fd = -1;
	int r = e->p->base_fd < 0 ? -ENOENT : fspath_open_dir(e->p->base_fd, f->name, &fd);
	uint32_t code = PERR_OK;
	struct stat st;

	f->items = PROTO_ITEM_NEW;
	/* Not there, or a file a real run would replace by the directory (rx_dir_replace). */
	if (r < 0 && r != -ENOENT && r != -ENOTDIR) {
		snprintf(text, textlen, "directory: %s", strerror(-r));
		return errno_to_perr(r);
	}
	/* One there already: what a run would bring in line (nothing is set in a probe). */
	if (fd >= 0 && fstat(fd, &st) == 0) {
		code = rx_meta_keep(e, f, fd, NULL, &st, text, textlen);
	}
	if (code == PERR_OK) {
		code = engine_rx_dir(e, f, text, textlen);
	}
	return code == PERR_OK && !(f->items & PROTO_ITEM_NEW) ? rx_kept_code(e) : code;
}

/* A probe's symlink: it would replace anything by its name but a directory. */
uint32_t rx_probe_symlink(struct engine *e, struct efile *f, const char *pf_link, char *text,
			  size_t textlen)
{
	uint32_t code = rx_probe_locate(e, f, text, textlen);
	struct stat st;

	f->items = PROTO_ITEM_NEW;
	if (code != PERR_OK || f->dir < 0) {
		return code;
	}
	if (rx_symlink_same(e, f, pf_link, &st)) {
		code = rx_meta_keep(e, f, e->dirs[f->dir].fd, f->leaf, &st, text, textlen);
		return code == PERR_OK ? rx_kept_code(e) : code;
	}
	if (S_ISDIR(st.st_mode)) {
		snprintf(text, textlen, "symlink: %s", strerror(EISDIR));
		return errno_to_perr(-EISDIR);
	}
	return code;
}

uint32_t rx_open_file(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	uint32_t code = PERR_OK;

	if (engine_probe(e)) {
		return rx_probe_file(e, f, text, textlen);
	}
	/* A file kept as it is counts against no limit: its name is looked at first. */
	code = rx_locate(e, f, text, textlen);
	if (code == PERR_OK) {
		code = rx_check_skip(e, f, text, textlen);
	}
	return code == PERR_OK ? rx_open_temp(e, f, text, textlen) : code;
}
