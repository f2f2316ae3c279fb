/* SPDX-License-Identifier: MIT */
/*
 * The receiver's entries other than file data: directories, symlinks, and
 * the modes, owners and times an entry gets (directories' last).
 */
#include "engine-internal.h"

/* The receiver's metadata rule (meta_policy.h), from the session's options. */
struct meta_policy rx_meta_policy(const struct engine *e)
{
	return (struct meta_policy){
		.preserve = e->p->open_flags & PROTO_OPEN_PRESERVE,
		.owner = (e->p->open_flags & PROTO_OPEN_OWNER) && geteuid() == 0,
		.keep_setid = e->p->keep_setid,
		.umask = e->p->umask,
	};
}

/* The mode a received regular file ends with. */
static uint32_t rx_file_mode(struct engine *e, struct efile *f)
{
	struct meta_policy mp = rx_meta_policy(e);
	/*
	 * Without -p a file replaced keeps its mode: the one seen when the file
	 * was accepted (rsync too looks once).
	 */
	uint32_t old_mode = f->old_mode;

	if (!mp.preserve && !f->old_seen) {
		struct stat old;

		old_mode = fstatat(e->dirs[f->dir].fd, f->leaf, &old, AT_SYMLINK_NOFOLLOW) == 0
			       ? (uint32_t)old.st_mode
			       : 0;
	}
	return meta_policy_mode(&mp, S_IFREG, f->meta.mode, old_mode);
}

/*
 * The mode to make a regular file's unnamed temp file with (f->tmode_set
 * says whether it is the final one). Its final mode where creating it gives
 * exactly that: no set-id or sticky bit (creation may drop those), nothing
 * the umask takes away, no default ACL in its directory (which would shape
 * the mode instead), and the owner may read and write it (the second,
 * O_DIRECT descriptor is opened by its /proc name). That spares a small
 * file's fchmod at commit. Else 0600, and its mode is set at commit.
 * Nobody can open the file by a name while it is written, whatever its mode.
 */
mode_t rx_create_mode(struct engine *e, struct efile *f)
{
	struct dirent_cache *d = &e->dirs[f->dir];
	uint32_t mode = rx_file_mode(e, f);

	f->tmode_set = false;
	if ((mode & ~0777u) || (mode & e->p->umask) || (mode & 0600) != 0600) {
		return 0600;
	}
	if (d->acl_default < 0) {
		d->acl_default = fspath_dir_default_acl(d->fd) == 0 ? 0 : 1;
	}
	if (d->acl_default) {
		return 0600;
	}
	f->tmode_set = true;
	f->tmode = mode;
	return mode;
}

void rx_apply_meta(struct engine *e, struct efile *f)
{
	uint32_t mode = rx_file_mode(e, f);

	/* The owner was set when the temp file was made (rx_open_file). */
	if (!(f->tmode_set && f->tmode == mode) && fchmod(f->tfd, mode) < 0) {
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
	struct meta_policy mp = rx_meta_policy(e);

	return meta_policy_mode(&mp, S_IFDIR, sent, 0);
}

/* Remember directory f for rx_finish_dirs. Returns >= 0 or -errno. */
static int rx_dir_remember(struct engine *e, const struct efile *f, bool created)
{
	size_t max = (e->p->faults & ENGINE_FAULT_FEW_DIRS) ? 8 : DIR_META_MAX;
	size_t bytes = sizeof(struct dir_meta) + strlen(f->name) + 1;
	struct dir_meta *d;

	if (e->ndirs_meta >= max || e->dirs_meta_bytes + bytes > DIR_META_BYTES_MAX) {
		return -E2BIG;
	}
	if (e->ndirs_meta == e->dirs_meta_cap) {
		size_t cap = e->dirs_meta_cap ? e->dirs_meta_cap * 2 : 256;
		struct dir_meta *t;

		cap = MIN(cap, (size_t)DIR_META_MAX);
		t = reallocarray(e->dirs_meta, cap, sizeof(*t));
		if (!t) {
			return -ENOMEM;
		}
		e->dirs_meta = t;
		e->dirs_meta_cap = cap;
	}
	d = &e->dirs_meta[e->ndirs_meta];
	d->name = strdup(f->name);
	if (!d->name) {
		return -ENOMEM;
	}
	d->mtime_sec = f->meta.mtime_sec;
	d->mtime_nsec = f->meta.mtime_nsec;
	d->mode = f->meta.mode;
	d->created = created;
	e->ndirs_meta++;
	e->dirs_meta_bytes += bytes;
	return 0;
}

uint32_t rx_make_dir(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	_cleanup_close_ int fd = -1;
	bool preserve = e->p->open_flags & PROTO_OPEN_PRESERVE, created;
	int r;

	/*
	 * Made private (0700), then given its own mode at once, but always
	 * writable and searchable for us while its contents arrive; its exact
	 * mode at the end (rx_finish_dirs), when it can no longer stop us
	 * writing into it. A run that is cut before its end so leaves the
	 * directory with its own mode (but for a missing u+rwx), which a later
	 * run, finding it there, keeps.
	 */
	r = rx_dir_create(e, f->name, 0700, &fd, &created);
	if (r < 0) {
		snprintf(text, textlen, "directory: %s", strerror(-r));
		return errno_to_perr(r);
	}
	if (created) {
		rx_acl_clear(e, fd, true);
		(void)fchmod(fd, rx_dir_mode(e, f->meta.mode) | 0700);
		if (rx_fresh_add(e, f->name) < 0) {
			snprintf(text, textlen, "out of memory");
			return PERR_INTERNAL;
		}
	}
	if (rx_xattr_dir_note(e, f, created) < 0) {
		snprintf(text, textlen, "out of memory");
		return PERR_INTERNAL;
	}
	if (!created && !preserve) {
		return PERR_OK;
	}
	r = rx_dir_remember(e, f, created);
	if (r < 0) {
		/* Its mode now, still writable for us; the entry is refused, not lost. */
		if (created) {
			fchmod(fd, rx_dir_mode(e, f->meta.mode) | 0700);
		}
		if (r == -E2BIG) {
			snprintf(text, textlen,
				 "more than %u directories (or %zu MiB of their names) in one "
				 "session: its mode and time could not be kept",
				 DIR_META_MAX, DIR_META_BYTES_MAX >> 20);
			return PERR_BUSY;
		}
		snprintf(text, textlen, "directory: %s", strerror(-r));
		return PERR_INTERNAL;
	}
	return PERR_OK;
}

uint32_t rx_make_symlink(struct engine *e, struct efile *f, const char *target, char *text,
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
		r = file_tmpname(f) ? fspath_temp_name(f->leaf, f->tmpname, FILE_TMPNAME_LEN)
				    : -ENOMEM;
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
	if (e->p->open_flags & PROTO_OPEN_PRESERVE) {
		/* -p: the link's own time, as cp -a and rsync -a keep it; nothing followed. */
		struct timespec ts[2] = {
			{ .tv_sec = 0, .tv_nsec = UTIME_OMIT },
			{ .tv_sec = f->meta.mtime_sec, .tv_nsec = f->meta.mtime_nsec },
		};
		if (utimensat(d->fd, f->leaf, ts, AT_SYMLINK_NOFOLLOW) < 0) {
			r = negerrno();
			snprintf(text, textlen, "symlink: set mtime: %s", strerror(-r));
			return errno_to_perr(r);
		}
	}
	return PERR_OK;
}

/*
 * Directories we created get their mode last (with -p their mtime too),
 * deepest first: in reverse arrival order, children before their parents.
 * One that can't be set is a failure of its own, reported.
 */
void rx_finish_dirs(struct engine *e)
{
	for (size_t i = e->ndirs_meta; i-- > 0;) {
		_cleanup_close_ int fd = -1;
		struct dir_meta *d = &e->dirs_meta[i];
		struct timespec ts[2] = {
			{ .tv_sec = 0, .tv_nsec = UTIME_OMIT },
			{ .tv_sec = d->mtime_sec, .tv_nsec = d->mtime_nsec },
		};
		const char *what = NULL;
		int r;

		r = fspath_open_dir(e->p->base_fd, d->name, &fd);
		if (r < 0) {
			what = "directory";
		} else if (d->created && fchmod(fd, rx_dir_mode(e, d->mode)) < 0) {
			what = "chmod";
			r = negerrno();
		} else if ((e->p->open_flags & PROTO_OPEN_PRESERVE) && futimens(fd, ts) < 0) {
			what = "set mtime";
			r = negerrno();
		}
		if (what) {
			char text[256];

			snprintf(text, sizeof(text), "%s: %s", what, strerror(-r));
			note_failure(e, d->name, PROTO_FT_DIR, errno_to_perr(r), true, text);
		}
		free(d->name);
	}
	e->ndirs_meta = 0;
	e->dirs_meta_bytes = 0;
}
