/* SPDX-License-Identifier: MIT */
/*
 * The receiver's data path: FILES (each entry checked and given its temp
 * file), FILE_DONE, descriptors, slots held (fenced or copied), hashed and
 * written through io_uring, and the credits back (paced by --bwlimit).
 */
#include "engine-internal.h"

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
	uint64_t min = MAX(RX_DIRECT_MIN, pack_file_max(e) + 1);
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
 * reports inside are punched out again (rx_zero_range), so a sparse source
 * stays sparse. Only a help: where it fails (no such call, no room) the
 * file is written as before; but one that failed part way (no room) may
 * have allocated some, so zeros are punched there as well.
 */
static void rx_prealloc(struct efile *f, uint32_t chunk_size)
{
	uint64_t whole = f->size / chunk_size * chunk_size;

	if (f->dfd < 0 || f->oldfd >= 0 || whole < 2 * (uint64_t)chunk_size ||
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
	f->sum_wanted = true;
	return sums_queue(e, f, fd) < 0 ? PERR_INTERNAL : PERR_SUM_WANTED;
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
static uint32_t rx_keep_file(struct engine *e, struct efile *f, const struct stat *st, char *text,
			     size_t textlen)
{
	uint32_t code = rx_meta_keep(e, f, e->dirs[f->dir].fd, f->leaf, st, text, textlen);

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

/* --partial asked for, with a peer that knows RESUME. */
static bool rx_partial_on(const struct engine *e)
{
	return (e->p->open_flags & PROTO_OPEN_PARTIAL) && (e->p->peer_caps & PROTO_CAP_PARTIAL);
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
static uint32_t rx_open_temp(struct engine *e, struct efile *f, char *text, size_t textlen)
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
	/* A block device by that name is written in place, or the entry refused. */
	code = rx_device_target(e, f, text, textlen);
	if (code != PERR_OK || f->device) {
		/* --partial: the journal of a cut run says what the device holds already. */
		if (code == PERR_OK && rx_partial_on(e) && f->size > e->p->chunk_size &&
		    rx_partial_open(e, f) == -ENOMEM) {
			snprintf(text, textlen, "out of memory");
			return PERR_INTERNAL;
		}
		if (code == PERR_OK) {
			rx_delta_open(e, f);
			rx_open_direct(e, f);
			e->st.bytes_accepted += f->size;
		}
		return code;
	}
	/*
	 * --partial: into the store, resumed from what a cut run left there.
	 * Where that cannot be (another session writes it, the store can't be
	 * made), the file is written the usual way: it is only not resumable.
	 */
	if (rx_partial_on(e) && f->size > e->p->chunk_size) {
		r = rx_partial_open(e, f);
		if (r == -ENOMEM) {
			snprintf(text, textlen, "out of memory");
			return PERR_INTERNAL;
		}
		if (r == 0) {
			/* What a cut left is on the disk already (a full one, maybe). */
			code = rx_check_space(e, f, f->size - f->kept, text, textlen);
			if (code == PERR_OK) {
				code = rx_temp_owner(e, f, text, textlen);
			}
			if (code != PERR_OK) {
				return code; /* the partial stays for a run with more room */
			}
			rx_delta_open(e, f);
			rx_open_direct(e, f);
			e->st.bytes_accepted += f->size;
			return PERR_OK;
		}
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
	rx_delta_open(e, f);
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
static uint32_t rx_probe_copy(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	uint32_t code = rx_check_limits(e, f, text, textlen);
	bool blk = false;

	if (code == PERR_OK && f->dir >= 0) {
		code = rx_device_probe(e, f, &blk, text, textlen);
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
static uint32_t rx_probe_dir(struct engine *e, struct efile *f, char *text, size_t textlen)
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
		code = rx_delete_note_dir(e, f, text, textlen);
	}
	return code == PERR_OK && !(f->items & PROTO_ITEM_NEW) ? rx_kept_code(e) : code;
}

/* A probe's symlink: it would replace anything by its name but a directory. */
static uint32_t rx_probe_symlink(struct engine *e, struct efile *f, const char *pf_link, char *text,
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

static uint32_t rx_open_file(struct engine *e, struct efile *f, char *text, size_t textlen)
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

/* The sender could not send an entry: a failed file on this side too. */
static int rx_entry_failed(struct engine *e, const struct msg_entry_failed *ef)
{
	note_failure(e, ef->name, 0, ef->status, false, ef->text);
	return 0;
}

/* A new entry in the file table, from its FILES record. */
static void rx_entry_init(struct engine *e, struct efile *f, const struct proto_file *pf)
{
	file_take(e, f, pf->id);
	f->ftype = pf->ftype;
	f->size = pf->size;
	f->meta = *pf;
	f->meta.name = f->meta.link = NULL;
	f->name = strdup(pf->name);
	ts_now(&f->t0);
}

/*
 * Take an entry or refuse it: its name (rx_check_name), then the directory,
 * symlink or temp file made for it. *ret_peer: refused for what the peer
 * sent, not for our disk.
 */
static uint32_t rx_entry_accept(struct engine *e, struct efile *f, const struct proto_file *pf,
				char *text, size_t textlen, bool *ret_peer)
{
	uint32_t code = rx_check_name(e, f, text, textlen, ret_peer);

	if (code != PERR_OK) {
		return code;
	}
	if (engine_probe(e) && pf->ftype == PROTO_FT_DIR) {
		return rx_probe_dir(e, f, text, textlen);
	}
	if (engine_probe(e) && pf->ftype == PROTO_FT_SYMLINK) {
		return rx_probe_symlink(e, f, pf->link, text, textlen);
	}
	if (pf->ftype == PROTO_FT_DIR) {
		code = rx_make_dir(e, f, text, textlen);
		if (code == PERR_OK) {
			code = rx_delete_note_dir(e, f, text, textlen);
		}
		/* One there already is kept (its metadata brought in line). */
		return code == PERR_OK && !(f->items & PROTO_ITEM_NEW) ? rx_kept_code(e) : code;
	}
	if (pf->ftype == PROTO_FT_SYMLINK) {
		return rx_make_symlink(e, f, pf->link, text, textlen);
	}
	if (pf->ftype == PROTO_FT_HARDLINK) {
		return rx_link_accept(e, f, pf->link, text, textlen, ret_peer);
	}
	return rx_open_file(e, f, text, textlen);
}

/*
 * A refused entry is reported now and forgotten; directories and symlinks
 * are done the moment they exist; a regular file waits for its data, a
 * hard link for its directory's fsync (and maybe for the file it links to).
 */
static void rx_entry_settle(struct engine *e, struct efile *f, const struct proto_file *pf,
			    uint32_t code, bool peer)
{
	if (code == PERR_SUM_WANTED) {
		return; /* waits for the digests (rx_sum_decide) */
	}
	if (code == PERR_SKIPPED) {
		/* A file kept as it is may be linked to; its attributes may come next. */
		rx_link_target_done(e, f, true);
		if (rx_xattr_kept_note(e, f) == -ENOMEM) {
			fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
		note_kept(e, f);
		file_release(e, f);
	} else if (code == PERR_OK && engine_probe(e)) {
		/* A probe's answer resolves the entry: it would be copied (or made). */
		rx_link_target_planned(e, f);
		note_planned(e, f->name, f->ftype, f->ftype == PROTO_FT_REG ? f->size : 0);
		file_release(e, f);
	} else if (code != PERR_OK) {
		note_failure(e, f->name ? f->name : pf->name, pf->ftype, code, !peer,
			     file_fail_text(f));
		if (f->tfd >= 0 && f->dir >= 0) {
			rx_discard(e, f);
		}
		file_release(e, f);
	} else if (pf->ftype != PROTO_FT_REG && pf->ftype != PROTO_FT_HARDLINK) {
		note_committed(e, f, 0, NULL);
		file_release(e, f);
	}
}

/* Before its FILES_ACK: the bytes of f kept from a cut run, which the sender passes over. */
static int rx_send_resume(struct engine *e, const struct efile *f)
{
	struct msg m = { .type = MSG_RESUME };
	int r;

	m.u.resume.id = f->id;
	m.u.resume.count = 1;
	m.u.resume.r[0] = (struct proto_range){ .offset = 0, .len = f->kept };
	r = chan_queue(e->p->chan, &m);
	return r < 0 ? fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* What differs, in a FILES_ACK entry: to a peer that knows it, for an entry taken or kept. */
static uint32_t rx_items_for_peer(const struct engine *e, const struct efile *f, uint32_t code)
{
	if (!(e->p->peer_caps & PROTO_CAP_ITEMIZE) || e->p->conceal ||
	    (code != PERR_OK && code != PERR_SKIPPED)) {
		return 0;
	}
	return f->items & PROTO_ITEMS_KNOWN;
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
	rx_xattr_dirs_reset(e);
	ack.u.files_ack.st = st;
	e->verify_deadline =
	    ts_now(NULL) + MIN(e->p->idle_timeout_ms / 4000.0, VERIFY_BUDGET_MAX_S);
	if (e->p->faults & ENGINE_FAULT_NO_VERIFY_TIME) {
		e->verify_deadline = 0;
	}
	for (size_t i = 0; i < mf->count; i++) {
		struct proto_file *pf = &mf->files[i];
		struct efile *f = &e->files[pf->id % FILE_TABLE];
		struct proto_status *s = &st[ack.u.files_ack.count];
		bool peer = false;
		uint32_t code;

		/* Ids strictly increase; the table bounds the files in flight. */
		if (pf->id <= e->next_id || f->used) {
			r = fail(e, PERR_PROTOCOL, -EBADMSG,
				 "FILES: id %u out of order or too many files in flight", pf->id);
			break;
		}
		if (pf->ftype == PROTO_FT_HARDLINK && !(e->p->open_flags & PROTO_OPEN_HARDLINKS)) {
			r = fail(e, PERR_PROTOCOL, -EBADMSG,
				 "FILES: a hard link in a session without hard links");
			break;
		}
		e->next_id = pf->id;
		rx_entry_init(e, f, pf);
		text[0] = '\0';
		code = rx_entry_accept(e, f, pf, text, sizeof(text), &peer);
		*s = (struct proto_status){ .id = pf->id,
					    .status = proto_err_for_peer(code, e->p->peer_caps),
					    .items = rx_items_for_peer(e, f, code) };
		ack.u.files_ack.count++;
		if (code != PERR_OK && code != PERR_SKIPPED && code != PERR_SUM_WANTED) {
			file_fail(f, code, "%s", text);
			s->text = strdup(file_fail_text(f));
		}
		if (code == PERR_OK && f->kept > 0) {
			r = rx_send_resume(e, f);
			if (r < 0) {
				break;
			}
		}
		if (code == PERR_OK && f->oldfd >= 0) {
			r = rx_delta_send_sums(e, f);
			if (r < 0) {
				break;
			}
		}
		rx_entry_settle(e, f, pf, code, peer);
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

/*
 * A file kept after the digests were compared (skip level checksum): looked
 * at again, as the hashing may have taken a while. One no longer there as
 * hashed is copied over after all.
 */
static uint32_t rx_keep_file_again(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	struct stat st;

	if (fstatat(e->dirs[f->dir].fd, f->leaf, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode) || (uint64_t)st.st_size != f->size) {
		f->items |= PROTO_ITEM_CHECKSUM;
		return engine_probe(e) ? rx_probe_copy(e, f, text, textlen)
				       : rx_open_temp(e, f, text, textlen);
	}
	return rx_keep_file(e, f, &st, text, textlen);
}

/*
 * Both digests are here: the same contents keep the file (SKIPPED), others
 * (or a side that could not hash) copy it as without a skip level. The
 * second FILES_ACK entry for the id says which.
 */
static int rx_sum_decide(struct engine *e, struct efile *f)
{
	struct msg ack = { .type = MSG_FILES_ACK };
	struct proto_status st = { .id = f->id };
	char text[256] = "";
	uint32_t code;
	int r;

	f->sum_wanted = false;
	if (f->own_sum_status == PERR_OK && f->peer_sum_status == PERR_OK &&
	    memcmp(f->own_sum, f->peer_sum, HASH_LEN) == 0) {
		code = rx_keep_file_again(e, f, text, sizeof(text));
	} else {
		f->items |= PROTO_ITEM_CHECKSUM;
		code = engine_probe(e) ? rx_probe_copy(e, f, text, sizeof(text))
				       : rx_open_temp(e, f, text, sizeof(text));
	}
	st.status = proto_err_for_peer(code, e->p->peer_caps);
	st.items = rx_items_for_peer(e, f, code);
	if (code != PERR_OK && code != PERR_SKIPPED) {
		file_fail(f, code, "%s", text);
		st.text = (char *)file_fail_text(f);
	}
	ack.u.files_ack.count = 1;
	ack.u.files_ack.st = &st;
	r = chan_queue(e->p->chan, &ack);
	if (r < 0) {
		return fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
	}
	rx_entry_settle(e, f, &f->meta, code, false);
	return 0;
}

/* Our own digest of the file at the destination name (engine_sums.c). */
int rx_sum_done(struct engine *e, struct efile *f, int r, const uint8_t hash[HASH_LEN])
{
	f->own_sum_done = true;
	f->own_sum_status = r < 0 ? PERR_IO : PERR_OK;
	memcpy(f->own_sum, hash, HASH_LEN);
	return f->peer_sum_done ? rx_sum_decide(e, f) : 0;
}

/* The sender's digests: one for each file we answered SUM_WANTED, once. */
static int rx_sums(struct engine *e, const struct msg_sums *ms)
{
	for (size_t i = 0; i < ms->count; i++) {
		const struct proto_sum *ps = &ms->sums[i];
		struct efile *f = file_by_id(e, ps->id);
		int r;

		if (!f || !f->sum_wanted || f->peer_sum_done) {
			return fail(e, PERR_PROTOCOL, -EBADMSG, "SUMS for id %u, not asked for",
				    ps->id);
		}
		f->peer_sum_done = true;
		f->peer_sum_status = ps->status;
		memcpy(f->peer_sum, ps->hash, HASH_LEN);
		r = f->own_sum_done ? rx_sum_decide(e, f) : 0;
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

static int rx_file_done(struct engine *e, const struct msg_file_done *d)
{
	struct efile *f = file_by_id(e, d->id);

	/* Nor for one we have not answered yet (SUM_WANTED): it has nowhere to go. */
	if (!f || f->got_done || f->sum_wanted) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "FILE_DONE for unknown file id %u", d->id);
	}
	/* Its ZEROS came before it (one channel): what is neither kept nor zeros is payload. */
	if (d->bytes > f->size - f->kept - f->zeroed - f->skipped || d->bytes < f->recv_bytes) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "FILE_DONE: impossible byte count");
	}
	f->got_done = true;
	f->done_status = d->status;
	f->done_bytes = d->bytes;
	memcpy(f->done_hash, d->hash, HASH_LEN);
	/*
	 * The sender's reason waits in fail_text (unused until the file fails;
	 * rx_maybe_finish fails it with this one unless it failed here first,
	 * and then file_fail has written its own reason over this).
	 */
	if (d->status != PERR_OK && !f->failed && file_fail_buf(f)) {
		snprintf(f->fail_text, FILE_FAIL_TEXT_LEN, "sender: %.200s", d->text);
	}
	return rx_maybe_finish(e, f);
}

/* The XXH3-128 of len zero bytes (the journal's record of a zero chunk; a tree's digest). */
void zero_digest(struct engine *e, uint64_t len, uint8_t out[HASH_LEN])
{
	struct file_hash h;

	if (len == e->p->chunk_size && e->zero_chunk_hashed) {
		memcpy(out, e->zero_chunk_hash, HASH_LEN);
		return;
	}
	if (file_hash_init(&h) < 0) {
		memset(out, 0xff, HASH_LEN); /* a record that never verifies: re-sent, not wrong */
		return;
	}
	hash_zeros(&h, len);
	file_hash_final(&h, out);
	file_hash_free(&h);
	if (len == e->p->chunk_size) {
		memcpy(e->zero_chunk_hash, out, HASH_LEN);
		e->zero_chunk_hashed = true;
	}
}

/*
 * One ZEROS range of f, checked: whole chunks of the file (the last may be
 * short), past everything hashed, kept or described before, and no chunk
 * of data held for it inside. Queued to be hashed in file order, and made
 * zeros on the disk now (sparse_zero_range: a hole in a new temp file, a
 * punch in a partial's data file, zeroes on a device), or on a device
 * taken to be zeros already (--assume-zero-target) left alone.
 */
static int rx_zero_range(struct engine *e, struct efile *f, const struct proto_range *g, bool same)
{
	uint64_t cs = e->p->chunk_size, end;
	struct proto_range **zr = same ? &f->sr : &f->zr;
	uint32_t *nzr = same ? &f->nsr : &f->nzr, *zr_cap = same ? &f->sr_cap : &f->zr_cap;
	struct proto_range *last = *nzr ? &(*zr)[*nzr - 1] : NULL;
	const char *what = same ? "DELTA SAME" : "ZEROS";
	int r;

	if (g->offset % cs || g->offset >= f->size || g->len > f->size - g->offset ||
	    (g->len % cs && g->offset + g->len != f->size) ||
	    g->offset < MAX(f->zr_end, f->hash_off)) {
		return fail(e, PERR_PROTOCOL, -EBADMSG,
			    "%s for %s: range %llu+%llu not whole chunks of it, or overlapping",
			    what, f->name, (unsigned long long)g->offset,
			    (unsigned long long)g->len);
	}
	/* Only chunks whose digests we sent can be unchanged. */
	if (same && g->offset + g->len > MIN(f->size, f->ndsum * cs)) {
		return fail(e, PERR_PROTOCOL, -EBADMSG,
			    "DELTA SAME for %s: range %llu+%llu past the digests sent", f->name,
			    (unsigned long long)g->offset, (unsigned long long)g->len);
	}
	end = g->offset + g->len;
	for (uint32_t i = 0; f->held && i < e->p->slots; i++) {
		const struct rslot *s = &e->rslots[i];

		if (s->state == SL_HELD && !s->packed && &e->files[s->fidx] == f &&
		    s->off >= g->offset && s->off < end) {
			return fail(e, PERR_PROTOCOL, -EBADMSG,
				    "%s for %s: range %llu+%llu overlaps data", what, f->name,
				    (unsigned long long)g->offset, (unsigned long long)g->len);
		}
	}
	if (last && last->offset + last->len == g->offset) {
		last->len += g->len;
	} else {
		/*
		 * An honest sender is at most a ring of chunks ahead of our hash,
		 * and its ranges between them are merged: more (per file, or in
		 * all, one more per file) is not a sender's.
		 */
		if (f->nzr + f->nsr > e->p->slots || e->zr_total >= e->p->slots + FILE_TABLE) {
			return fail(e, PERR_PROTOCOL, -EBADMSG,
				    "%s for %s: too many ranges ahead of the data", what, f->name);
		}
		if (*nzr == *zr_cap) {
			uint32_t cap = *zr_cap ? *zr_cap * 2 : 8;
			struct proto_range *t = realloc(*zr, cap * sizeof(*t));

			if (!t) {
				return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
			}
			*zr = t;
			*zr_cap = cap;
		}
		(*zr)[(*nzr)++] = *g;
		e->zr_total++;
	}
	f->zr_end = end;
	e->bytes_progress += g->len;
	if (same) {
		f->skipped += g->len;
		return 0; /* copied and hashed at its turn (rx_hash_ready) */
	}
	f->zeroed += g->len;
	if (f->failed) {
		return 0;
	}
	/*
	 * --assume-zero-target: the user says the device reads as zeros there
	 * already. Not trusted: its read back (rx_device_verified) covers these
	 * bytes too, so a device that was not zeros fails the copy.
	 */
	if (f->device && e->assume_zero) {
		f->zero_assumed += g->len;
		r = 0;
	} else if (f->device) {
		/* On the worker, off the loop; journaled when written (rx_device_zeroed). */
		r = f->dzero ? rx_delta_zeros(e, f, g->offset, g->len)
			     : sums_queue_zeros(e, f, g->offset, g->len);
		if (r == 0) {
			return 0;
		}
	} else {
		/*
		 * A new temp file has nothing there, unless it was allocated
		 * whole (rx_prealloc): then punched. Its size is set last
		 * (rx_maybe_finish).
		 */
		r = sparse_zero_range(f->tfd, g->offset, g->len,
				      SPARSE_KEEP_SIZE |
					  (f->partial || f->prealloc ? 0 : SPARSE_FRESH));
	}
	if (r < 0) {
		file_fail(f, errno_to_perr(r), "zeros %s: %s", f->name, strerror(-r));
		return 0;
	}
	rx_zeros_journal(e, f, g->offset, end);
	return 0;
}

/* --partial: [off, end) of f is zeros on the disk: one journal record per chunk. */
void rx_zeros_journal(struct engine *e, struct efile *f, uint64_t off, uint64_t end)
{
	uint64_t cs = e->p->chunk_size;

	for (; f->partial && off < end; off += cs) {
		uint64_t unit = MIN(cs, end - off);
		uint8_t h[HASH_LEN];

		zero_digest(e, unit, h);
		if (rx_partial_note(f, off, (uint32_t)unit, h) < 0) {
			close(f->jfd);
			f->jfd = -1;
		}
	}
}

static void rx_hash_ready(struct engine *e, struct efile *f);

/* ZEROS: only from a peer that knows them, for a file of ours whose FILE_DONE is still to come. */
static int rx_zeros(struct engine *e, const struct msg_resume *z)
{
	struct efile *f = file_by_id(e, z->id);
	int r;

	if (!engine_zeros(e) || !f || f->ftype != PROTO_FT_REG || f->sum_wanted || f->got_done ||
	    z->count == 0) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "ZEROS for id %u out of place", z->id);
	}
	for (uint16_t i = 0; i < z->count; i++) {
		r = rx_zero_range(e, f, &z->r[i], false);
		if (r < 0) {
			return r;
		}
	}
	rx_hash_ready(e, f);
	return rx_maybe_finish(e, f);
}

/* DELTA SAME: only in a --delta session, for a file whose old copy we hashed, before FILE_DONE. */
int rx_delta_same(struct engine *e, const struct msg_delta *d)
{
	struct efile *f = file_by_id(e, d->id);
	int r;

	if (!e->delta || d->kind != PROTO_DELTA_SAME || !f || f->ftype != PROTO_FT_REG ||
	    f->oldfd < 0 || f->got_done) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "DELTA for id %u out of place", d->id);
	}
	for (uint16_t i = 0; i < d->count; i++) {
		r = rx_zero_range(e, f, &d->r[i], true);
		if (r < 0) {
			return r;
		}
	}
	rx_hash_ready(e, f);
	return rx_maybe_finish(e, f);
}

/* The bytes of a held slot: the ones that are hashed and written (see rx_slot_hold). */
uint8_t *rx_slot_buf(struct engine *e, uint32_t slot)
{
	return pool_chunk(e->pool, e->rx_copy ? e->copy_base + slot : slot);
}

/*
 * From here until its credit goes back the slot's bytes must not change
 * under us: what is hashed must be what is written. Where the transport can
 * fence the slot the peer's writes into it are refused (its lane fails);
 * elsewhere the bytes are copied out of the peer's reach first.
 */
int rx_slot_hold(struct engine *e, uint32_t slot, uint32_t len, bool need_bytes)
{
	struct xport *x = e->p->x;
	int r;

	if (e->rx_copy) {
		/* A sealed slot was opened into its copy (slot_open). */
		if (need_bytes && !e->sealed) {
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

static int rx_credit_now(struct engine *e, uint32_t slot)
{
	struct rslot *s = &e->rslots[slot];
	struct xport_wr wr = {
		.opcode = XPORT_OP_WRITE_IMM,
		.imm = proto_imm(PROTO_IMM_CREDIT, slot),
		.lane = s->lane,
	};
	struct efile *f = &e->files[s->fidx];
	int r;

	s->state = SL_FREE;
	if (!s->packed) {
		f->held--;
	}
	e->credits++;
	/* The peer may write the slot again once it has the credit, not before. */
	r = rx_slot_unhold(e, slot);
	if (r < 0) {
		return r;
	}
	if (!lane_is_up(e, wr.lane)) {
		/* Rails: its lane is lost; the credit goes on another. */
		int pick = lane_pick(e, 1);

		if (pick < 0) {
			return fail(e, PERR_INTERNAL, -ENOSPC, "no lane has room for a credit");
		}
		wr.lane = (uint32_t)pick;
	}
	if (!lane_room(e, wr.lane, 1)) {
		/* Cannot happen while credits <= slots <= sq_depth; be loud if it does. */
		return fail(e, PERR_INTERNAL, -ENOSPC, "send queue full for credits");
	}
	return lane_push_slot(e, &wr, -1, slot);
}

/*
 * --bwlimit on the receiver (a pull): the peer may write a slot again only
 * once it has the credit, so credits go back no faster than the limit; the
 * slot stays held (and its file uncommitted) until then.
 */
int rx_credit(struct engine *e, uint32_t slot)
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
		bool packed = s->packed;
		int r = rx_credit_now(e, i);

		/* A pack's files finish with their writes (rx_pwrite_done). */
		if (r >= 0 && !packed) {
			r = rx_maybe_finish(e, f);
		}
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

static void rx_submit_write(struct engine *e, uint32_t slot)
{
	struct rslot *s = &e->rslots[slot];
	struct efile *f = &e->files[s->fidx];
	uint8_t *buf = rx_slot_buf(e, slot);
	struct io_uring_sqe *sqe;

	if (engine_pin_pool(e) < 0) {
		return;
	}
	sqe = uring_sqe(e);
	if (!sqe) {
		fail(e, PERR_IO, -EBUSY, "io_uring queue full");
		return;
	}
	int fd = f->tfd;
	uint32_t len = s->len - s->wdone;
	uint32_t pages = s->len / RX_PAGE * RX_PAGE;

	if (f->dfd >= 0 && s->wdone == 0) {
		if (diskio_dio_ok(&f->dio, buf, s->off, s->len)) {
			fd = f->dfd;
		} else if (pages > 0 && diskio_dio_ok(&f->dio, buf, s->off, pages)) {
			/*
			 * The file's last slot: its whole pages direct, the rest
			 * (less than a page, past them) then through the page
			 * cache as a short write's remainder (rx_write_done). Whole
			 * pages, so the buffered write never has to read a block
			 * the direct one wrote.
			 */
			fd = f->dfd;
			len = pages;
		}
	}
	io_uring_prep_write_fixed(sqe, fd, buf + s->wdone, len, s->off + s->wdone,
				  pool_buf_index(e->pool, buf));
	io_uring_sqe_set_data64(sqe, UD(UD_WRITE, slot));
	f->writes_out++;
}

/* Hash, in file order, every held chunk that is next for its file. */
static void rx_hash_ready(struct engine *e, struct efile *f)
{
	bool progress = true;

	if (!f->tree && !f->hash.state && (f->held || f->nzr || f->nsr)) {
		/* A packed file was hashed whole: nothing of it may stream after. */
		if (f->hash.whole) {
			fail(e, PERR_PROTOCOL, -EBADMSG, "%s: data for a file that came packed",
			     f->name);
			return;
		}
		if (file_hash_init(&f->hash) < 0) {
			fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
			return;
		}
	}
	while (progress && (f->held || f->nzr || f->nsr)) {
		progress = false;
		/*
		 * An unchanged range next (--delta): from the old file, hashed as read
		 * back; like zeros, only once the hashing threads have what is before it.
		 */
		if (f->nsr && f->sr[0].offset == f->hash_off && !f->hash_jobs) {
			if (f->tree) {
				rx_tree_same(e, f, &f->sr[0]);
			} else {
				rx_delta_take(e, f, &f->sr[0]);
			}
			f->hash_off += f->sr[0].len;
			memmove(f->sr, f->sr + 1, (f->nsr - 1) * sizeof(*f->sr));
			f->nsr--;
			e->zr_total--;
			progress = true;
		}
		/* A zero range next: hashed as the zeros it stands for. */
		if (f->nzr && f->zr[0].offset == f->hash_off && !f->hash_jobs) {
			if (f->failed) {
			} else if (f->tree) {
				rx_tree_zeros(e, f, f->zr[0].offset, f->zr[0].len);
			} else {
				hash_zeros(&f->hash, f->zr[0].len);
			}
			f->hash_off += f->zr[0].len;
			memmove(f->zr, f->zr + 1, (f->nzr - 1) * sizeof(*f->zr));
			f->nzr--;
			e->zr_total--;
			progress = true;
		}
		for (uint32_t i = 0; i < e->p->slots; i++) {
			struct rslot *s = &e->rslots[i];
			if (s->state == SL_HELD && !s->hashed && !s->hashing &&
			    &e->files[s->fidx] == f && s->off == f->hash_off) {
				if (f->failed) {
					/* Its digest no longer counts (its thread may still hash). */
				} else if (e->hashers && !f->tree) {
					/* Its thread hashes it; rx_hashed when it has. */
					if (hashers_queue(e, f, i, rx_slot_buf(e, i), s->len) < 0) {
						return;
					}
					s->hashing = true;
					f->hash_off += s->len;
					progress = true;
					continue;
				} else if (f->tree) {
					rx_tree_chunk(e, f, s->off, s->chash);
				} else {
					file_hash_update(&f->hash, rx_slot_buf(e, i), s->len);
				}
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

/* A hashing thread has hashed held slot `slot` of f (engine_hashers.c). */
int rx_hashed(struct engine *e, struct efile *f, uint32_t slot)
{
	struct rslot *s = &e->rslots[slot];
	int r = 0;

	s->hashing = false;
	s->hashed = true;
	if (s->written) {
		r = rx_credit(e, slot);
	}
	/* Zeros or an unchanged range may have waited for it. */
	rx_hash_ready(e, f);
	return r < 0 ? r : rx_maybe_finish(e, f);
}

static int rx_data(struct engine *e, uint32_t slot, uint32_t lane)
{
	int r;
	struct proto_desc d;
	struct rslot *s;
	struct efile *f;
	uint64_t expect;

	if (slot >= e->p->slots || e->rslots[slot].state != SL_FREE) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "data for busy or unknown slot %u", slot);
	}
	if (e->sealed) {
		/* Opened into the slot's copy: what rx_slot_hold would take. */
		r = slot_open(e, lane, slot, rx_slot_buf(e, slot), &d);
		if (r < 0) {
			return fail_sealed(e, slot, lane, r);
		}
	} else if (proto_desc_decode(e->desc_area + (size_t)slot * PROTO_DESC_LEN, &d) < 0) {
		return fail(e, PERR_PROTOCOL, -EBADMSG, "bad slot descriptor");
	}
	if (d.file_id == 0) {
		return rx_packed(e, slot, lane, &d);
	}
	f = file_by_id(e, d.file_id);
	/* FILE_DONE may overtake the data (different connections), not exceed it. */
	if (!f || f->sum_wanted || (f->got_done && f->recv_bytes + d.len > f->done_bytes)) {
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
	/* A packed slot names no file of its own (its fidx and off are 0): never this one. */
	for (uint32_t i = 0; f->held && i < e->p->slots; i++) {
		if (e->rslots[i].state == SL_HELD && !e->rslots[i].packed &&
		    &e->files[e->rslots[i].fidx] == f && e->rslots[i].off == d.offset) {
			return fail(e, PERR_PROTOCOL, -EBADMSG, "duplicate chunk for %s", f->name);
		}
	}
	for (uint32_t i = 0; i < f->nzr; i++) {
		if (d.offset >= f->zr[i].offset && d.offset - f->zr[i].offset < f->zr[i].len) {
			return fail(e, PERR_PROTOCOL, -EBADMSG, "chunk for %s inside its zeros",
				    f->name);
		}
	}
	for (uint32_t i = 0; i < f->nsr; i++) {
		if (d.offset >= f->sr[i].offset && d.offset - f->sr[i].offset < f->sr[i].len) {
			return fail(e, PERR_PROTOCOL, -EBADMSG,
				    "chunk for %s inside its unchanged ranges", f->name);
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
	r = rx_slot_hold(e, slot, d.len, !f->failed);
	if (r < 0) {
		return r;
	}
	if ((e->p->faults & ENGINE_FAULT_FLIP_BYTE) && d.offset == 0) {
		rx_slot_buf(e, slot)[0] ^= 0xff;
	}
	if (f->tree && !f->failed &&
	    (d.offset % e->p->chunk_size || d.len != MIN(e->p->chunk_size, f->size - d.offset))) {
		/* Checked by chunk digests: data comes in whole chunks. */
		file_fail(f, PERR_PROTOCOL, "%s: data at %llu+%u is not a whole chunk", f->name,
			  (unsigned long long)d.offset, d.len);
		f->fail_peer = true;
	}
	if ((f->partial || f->tree) && !f->failed) {
		/* The digest of the bytes that are written (the held ones): journal, tree. */
		XXH128_canonical_t c;

		XXH128_canonicalFromHash(&c, XXH3_128bits(rx_slot_buf(e, slot), d.len));
		memcpy(s->chash, c.digest, HASH_LEN);
	}
	if (f->failed) {
		/* Already failed (disk full, ...): drop the bytes, keep the credits flowing. */
		s->hashed = s->written = true;
		r = rx_credit(e, slot);
		return r < 0 ? r : rx_maybe_finish(e, f);
	}
	rx_submit_write(e, slot);
	rx_hash_ready(e, f);
	e->bytes_progress += d.len;
	return 0;
}

void rx_write_done(struct engine *e, uint32_t slot, int res)
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
		s->written = true;
		/* One with a hashing thread is credited when it comes back (rx_hashed). */
		s->hashed = !s->hashing;
	} else {
		s->wdone += (uint32_t)res;
		if (s->wdone < s->len) {
			rx_submit_write(e, slot); /* short write: the rest */
			return;
		}
		s->written = true;
		f->written += s->len;
		/* With zero extents, blocks of zeros inside data stay holes too. */
		int pr = engine_zeros(e)
			     ? sparse_punch_zeros(f->tfd, rx_slot_buf(e, slot), s->off, s->len)
			     : 0;

		if (pr < 0) {
			file_fail(f, errno_to_perr(pr), "punch %s: %s", f->name, strerror(-pr));
		}
		if (f->partial && rx_partial_note(f, s->off, s->len, s->chash) < 0) {
			/* Not a failure of the copy: only less of it can be resumed. */
			close(f->jfd);
			f->jfd = -1;
		}
	}
	if (s->hashed) {
		rx_credit(e, slot);
	}
	rx_maybe_finish(e, f);
}

static uint32_t rx_data_chunks(const struct engine_params *p)
{
	return p->slots;
}

/* The slots' states and the commit path's tables, then the RING offered. */
static int rx_setup(struct engine *e)
{
	e->rslots = calloc(e->p->slots, sizeof(*e->rslots));
	e->commit_batch = calloc(FILE_TABLE, sizeof(*e->commit_batch));
	e->sync_wait = calloc(FILE_TABLE, sizeof(*e->sync_wait));
	e->sync_run = calloc(FILE_TABLE, sizeof(*e->sync_run));
	e->sync_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!e->rslots || !e->commit_batch || !e->sync_wait || !e->sync_run || e->sync_efd < 0 ||
	    engine_watch_add(e, e->sync_efd, rx_sync_ready, ENGINE_WATCH_ALWAYS) < 0) {
		return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	engine_uring_handle(e, UD_WRITE, rx_write_done);
	rx_commit_handlers(e);
	if (engine_probe(e)) {
		return 0; /* no data path: no RING */
	}
	if (hashers_start(e, MIN(e->p->hash_threads, ENGINE_HASH_THREADS_MAX)) < 0) {
		return e->fail_r;
	}
	return rx_offer_ring(e);
}

/* Offer the ring: data slots, then the descriptor array. */
int rx_offer_ring(struct engine *e)
{
	struct msg m = { .type = MSG_RING };
	int r;

	/* In the registration's own address space: nothing of our heap's layout. */
	m.u.ring.addr = e->mr->iova;
	m.u.ring.desc_addr = e->mr->iova + (uint64_t)(e->desc_area - (uint8_t *)e->pool->base);
	m.u.ring.nkeys = (uint8_t)e->p->x->nlanes;
	for (unsigned i = 0; i < e->p->x->nlanes; i++) {
		m.u.ring.rkey[i] = e->mr->lane_rkey[i];
	}
	m.u.ring.slots = e->p->slots;
	m.u.ring.slot_size = e->p->chunk_size;
	r = chan_send(e->p->chan, &m);
	return r < 0 ? fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

static int rx_on_message(struct engine *e, struct msg *m)
{
	int r;

	if (e->got_end) {
		return msg_unexpected(e, m);
	}
	switch (m->type) {
	case MSG_FILES:
		return rx_files(e, &m->u.files);
	case MSG_FILE_DONE:
		return rx_file_done(e, &m->u.file_done);
	case MSG_ENTRY_FAILED:
		return rx_entry_failed(e, &m->u.entry_failed);
	case MSG_SUMS:
		return rx_sums(e, &m->u.sums);
	case MSG_ZEROS:
		return rx_zeros(e, &m->u.zeros);
	case MSG_END:
		if (e->files_open != 0) {
			return fail(e, PERR_PROTOCOL, -EBADMSG, "END with files in flight");
		}
		e->got_end = true;
		/* A pass of a feature (--delete) runs first: it changes directories' times. */
		r = engine_features_end(e);
		if (r == 0) {
			rx_finish_dirs(e);
		}
		return r < 0 ? r : 0;
	default:
		return msg_unexpected(e, m);
	}
}

/* A descriptor written into the array: a slot holds data. */
static int rx_on_receive(struct engine *e, const struct xport_wc *wc)
{
	uint32_t kind = wc->imm >> PROTO_IMM_KIND_SHIFT;
	uint32_t slot = wc->imm & PROTO_IMM_SLOT_MASK;

	if (kind != PROTO_IMM_DATA || wc->len != e->desc_len) {
		return imm_unexpected(e, wc);
	}
	return rx_data(e, slot, wc->lane);
}

/* Durability batches, held-back credits, directory fsyncs; END once the peer's came. */
static int rx_step(struct engine *e)
{
	int r = rx_sync_step(e);

	if (r >= 0) {
		r = rx_credit_flush(e);
	}
	if (r >= 0) {
		r = rx_commit_batch(e);
	}
	if (r >= 0 && e->got_end && !engine_busy(e)) {
		struct msg m = { .type = MSG_END };

		/* Metadata brought in line on kept entries is durable before the end is told. */
		if (e->meta_updated && !engine_probe(e) && syncfs(e->p->base_fd) < 0) {
			r = negerrno();
			return fail(e, PERR_IO, r, "syncfs: %s", strerror(-r));
		}
		e->meta_updated = false;
		m.u.end.files =
		    (uint32_t)(e->st.files_ok + e->st.files_failed + e->st.files_skipped +
			       e->st.files_updated + e->st.files_planned);
		m.u.end.bytes = e->st.bytes;
		r = chan_queue(e->p->chan, &m);
		if (r < 0) {
			return fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
	}
	return r;
}

/* Nothing after the peer's END but what every role takes (PING, a lane lost). */
static bool rx_takes_messages(const struct engine *e)
{
	return !e->got_end;
}

/* The sync thread uses directory fds: it finishes before they close. */
static void rx_stop(struct engine *e)
{
	rx_sync_thread_stop(e);
	if (e->sync_efd >= 0) {
		engine_watch_del(e, e->sync_efd);
		close(e->sync_efd);
		e->sync_efd = -1;
	}
	free(e->sync_wait);
	free(e->sync_run);
	e->sync_wait = e->sync_run = NULL;
}

const struct engine_role_ops engine_receiver_ops = {
	.data_chunks = rx_data_chunks,
	.peer_writes = true,
	.setup = rx_setup,
	.on_message = rx_on_message,
	.on_receive = rx_on_receive,
	.step = rx_step,
	.takes_messages = rx_takes_messages,
	.stop = rx_stop,
};
