/* SPDX-License-Identifier: MIT */
/*
 * The receiver's entries other than file data: directories, symlinks, and
 * the modes, owners and times an entry gets (directories' last), and no ACL
 * inherited by one it creates (-A).
 */
#include "engine-internal.h"

#include <sys/xattr.h>

/* The receiver's metadata rule (meta_policy.h), from the session's options. */
struct meta_policy rx_meta_policy(const struct engine *e)
{
	return (struct meta_policy){
		.preserve = e->p->open_flags & PROTO_OPEN_PRESERVE,
		.owner = (e->p->open_flags & PROTO_OPEN_OWNER) && e->euid_root,
		.keep_setid = e->p->keep_setid,
		.umask = e->p->umask,
	};
}

/* What the sender says entry f is, as the metadata rule takes it. */
struct meta_sent rx_meta_sent(const struct efile *f, mode_t type)
{
	return (struct meta_sent){
		.type = type,
		.mode = f->meta.mode,
		.uid = f->meta.uid,
		.gid = f->meta.gid,
		.mtime_sec = f->meta.mtime_sec,
		.mtime_nsec = f->meta.mtime_nsec,
	};
}

/*
 * An entry there already that is kept as it is (a file the skip level
 * keeps, a directory, a symlink to the same target), st as looked at: what
 * differs of its metadata goes into f->items and, unless this is a probe,
 * is brought in line (meta_policy_update_at; leaf NULL: dirfd is the entry,
 * held open). PERR_OK, or why not (text).
 */
uint32_t rx_meta_keep(struct engine *e, struct efile *f, int dirfd, const char *leaf,
		      const struct stat *st, char *text, size_t textlen)
{
	struct meta_policy mp = rx_meta_policy(e);
	struct meta_sent sent = rx_meta_sent(f, st->st_mode & S_IFMT);
	const char *what;
	int r;

	f->items = meta_policy_changes(&mp, &sent, st);
	if (engine_probe(e) || !f->items) {
		return PERR_OK;
	}
	if (leaf) {
		r = meta_policy_update_at(&mp, dirfd, leaf, st, &sent, f->items, &what);
	} else {
		/* A directory: its owner now, its mode and time last (rx_finish_dirs). */
		r = meta_policy_update_fd(&mp, dirfd, st, &sent,
					  f->items & (PROTO_ITEM_OWNER | PROTO_ITEM_GROUP), &what);
	}
	if (r < 0) {
		snprintf(text, textlen, "%s: %s", what, strerror(-r));
		return errno_to_perr(r);
	}
	e->meta_updated = true;
	return PERR_OK;
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
 * Something is by a directory's name: a directory is kept (0); a file or a
 * symlink is replaced by a new directory (1), as rsync replaces it; a
 * special file never is (fspath_replace_rule: -EPERM). Another writer of
 * the same tree (a shard of the same migration) may do the same at once:
 * what it removed first, or made first, is looked at again.
 */
static int rx_dir_replace(int parent, const char *leaf, mode_t mode)
{
	const char *kind;
	struct stat st;
	int r;

	for (int tries = 0; tries < 8; tries++) {
		if (fstatat(parent, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT) {
				return negerrno();
			}
		} else if (S_ISDIR(st.st_mode)) {
			return 0;
		} else {
			r = fspath_replace_rule(st.st_mode, &kind);
			if (r < 0) {
				return r;
			}
			if (unlinkat(parent, leaf, 0) < 0 && errno != ENOENT) {
				return negerrno();
			}
		}
		if (mkdirat(parent, leaf, mode) == 0) {
			return 1;
		}
		if (errno != EEXIST) {
			return negerrno();
		}
	}
	/* Someone keeps putting something else there. */
	return -EEXIST;
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
	bool created = false, keep;
	struct stat pst;
	int r;

	/* Mostly it is there (a re-run): one resolution, under the same rules; else make it. */
	if (fspath_open_dir(e->p->base_fd, name, ret_fd) == 0) {
		*ret_created = false;
		return 0;
	}
	r = fspath_open_parent(e->p->base_fd, name, true, &parent, &leaf);
	if (r < 0) {
		return r;
	}
	/* A parent that keeps its time gets back the one it had before this name. */
	keep = rx_dir_parent_keeps_time(e, name) && fstat(parent, &pst) == 0;
	if (mkdirat(parent, leaf, mode) == 0) {
		created = true;
	} else if (errno != EEXIST) {
		return negerrno();
	} else {
		r = rx_dir_replace(parent, leaf, mode);
		if (r < 0) {
			return r;
		}
		created = r > 0;
	}
	if (keep) {
		struct timespec ts[2] = { { .tv_sec = 0, .tv_nsec = UTIME_OMIT }, pst.st_mtim };

		(void)futimens(parent, ts);
	}
	r = fspath_open_dir(parent, leaf, ret_fd);
	if (r < 0) {
		return r;
	}
	*ret_created = created;
	return 0;
}

/* The mode a directory ends with (rx_finish_dirs): one we created, or one whose mode differs (-p). */
static uint32_t rx_dir_mode(const struct engine *e, uint32_t sent)
{
	struct meta_policy mp = rx_meta_policy(e);

	return meta_policy_mode(&mp, S_IFDIR, sent, 0);
}

/*
 * -p, a kept directory whose mode or time differs: set at once too (and
 * again at the end, rx_finish_dirs), as rsync sets a directory's mode when
 * it comes to it, so that another session looking at it meanwhile (a shard
 * of the same migration) finds it in line, not a change to count again.
 * The mode as a directory we make gets it (rx_dir_new): still writable and
 * searchable for us while its contents arrive, exact at the end.
 */
static void rx_dir_keep_now(struct engine *e, const struct efile *f, int fd)
{
	struct timespec ts[2] = {
		{ .tv_sec = 0, .tv_nsec = UTIME_OMIT },
		{ .tv_sec = f->meta.mtime_sec, .tv_nsec = f->meta.mtime_nsec },
	};

	if (f->items & PROTO_ITEM_PERMS) {
		(void)fchmod(fd, rx_dir_mode(e, f->meta.mode) | 0700);
	}
	if (f->items & PROTO_ITEM_TIME) {
		(void)futimens(fd, ts);
	}
}

/* A directory there already: what differs (f->items); set now, its exact mode and time last. */
static uint32_t rx_dir_keep(struct engine *e, struct efile *f, int fd, char *text, size_t textlen)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		int r = negerrno();

		snprintf(text, textlen, "directory: %s", strerror(-r));
		return errno_to_perr(r);
	}
	/* Named by the descriptor itself: the entry that is held, whatever its name is now. */
	uint32_t code = rx_meta_keep(e, f, fd, NULL, &st, text, textlen);

	if (code == PERR_OK && !engine_probe(e) && (e->p->open_flags & PROTO_OPEN_PRESERVE)) {
		rx_dir_keep_now(e, f, fd);
	}
	return code;
}

/* A directory we made: its owner, its mode (but writable for us), and made this session. */
static uint32_t rx_dir_new(struct engine *e, struct efile *f, int fd, char *text, size_t textlen)
{
	struct meta_policy mp = rx_meta_policy(e);
	int r;

	f->items = PROTO_ITEM_NEW;
	rx_acl_clear(e, fd, true);
	/* Its owner first: a chown may clear set-id bits its mode keeps. */
	r = meta_policy_own(&mp, fd, NULL, f->meta.uid, f->meta.gid);
	if (r < 0) {
		snprintf(text, textlen, "chown: %s", strerror(-r));
		return errno_to_perr(r);
	}
	(void)fchmod(fd, rx_dir_mode(e, f->meta.mode) | 0700);
	if (rx_fresh_add(e, f->name) < 0) {
		snprintf(text, textlen, "out of memory");
		return PERR_INTERNAL;
	}
	return PERR_OK;
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
	d->items = f->items;
	e->ndirs_meta++;
	e->dirs_meta_bytes += bytes;
	return 0;
}

/* What comes next is mostly in it: held open for that (not in a probe, which only looks). */
static void rx_dir_offer(struct engine *e, const char *name, int *fd)
{
	if (!engine_probe(e)) {
		rx_dir_cache_offer(e, name, fd);
	}
}

uint32_t rx_make_dir(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	_cleanup_close_ int fd = -1;
	bool preserve = e->p->open_flags & PROTO_OPEN_PRESERVE, created;
	uint32_t code;
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
	code = created ? rx_dir_new(e, f, fd, text, textlen) : rx_dir_keep(e, f, fd, text, textlen);
	if (code != PERR_OK) {
		return code;
	}
	if (rx_xattr_dir_note(e, f, created) < 0) {
		snprintf(text, textlen, "out of memory");
		return PERR_INTERNAL;
	}
	if (!created && !preserve) {
		rx_dir_offer(e, f->name, &fd);
		return PERR_OK;
	}
	r = rx_dir_remember(e, f, created);
	if (r == 0 && preserve) {
		r = rx_timed_add(e, f->name);
	}
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
	rx_dir_offer(e, f->name, &fd);
	return PERR_OK;
}

/*
 * What is by symlink f's name (f->dir located): NEW (nothing, or another
 * type), CONTENT (a symlink to elsewhere), or a symlink to target already:
 * true, with st, the entry to keep.
 */
bool rx_symlink_same(struct engine *e, struct efile *f, const char *target, struct stat *st)
{
	int dfd = e->dirs[f->dir].fd;
	size_t len = strlen(target);
	char buf[PROTO_MAX_PATH + 1];
	ssize_t n;

	if (fstatat(dfd, f->leaf, st, AT_SYMLINK_NOFOLLOW) < 0) {
		st->st_mode = 0;
	}
	if (!S_ISLNK(st->st_mode)) {
		f->items = PROTO_ITEM_NEW;
		return false;
	}
	n = readlinkat(dfd, f->leaf, buf, sizeof(buf));
	if (n < 0 || (size_t)n != len || memcmp(buf, target, len) != 0) {
		f->items = PROTO_ITEM_CONTENT;
		return false;
	}
	return true;
}

/*
 * The answer for an entry there already that is kept (a directory, a
 * symlink to the same target): SKIPPED to a sender that knows it
 * (PROTO_CAP_ITEMIZE), else OK, as peers before it were told; OK in a
 * 'write only' module too, where no answer shows what is there.
 */
uint32_t rx_kept_code(const struct engine *e)
{
	return (e->p->peer_caps & PROTO_CAP_ITEMIZE) && !e->p->conceal ? PERR_SKIPPED : PERR_OK;
}

/*
 * The link made under a fresh temp name in dirfd (f->tmpname): then renamed,
 * atomic, and nothing is ever followed. 0 or -errno.
 */
static int rx_symlink_temp(struct efile *f, int dirfd, const char *target)
{
	int r = 0;

	for (int tries = 0; tries < 16; tries++) {
		r = file_tmpname(f) ? fspath_temp_name(f->leaf, f->tmpname, FILE_TMPNAME_LEN)
				    : -ENOMEM;
		if (r < 0) {
			break;
		}
		if (symlinkat(target, dirfd, f->tmpname) == 0) {
			r = 0;
			break;
		}
		r = negerrno();
		if (r != -EEXIST) {
			break;
		}
	}
	return r;
}

/* -p: the link's own time, as cp -a and rsync -a keep it; nothing followed. */
static uint32_t rx_symlink_mtime(struct engine *e, struct efile *f, int dirfd, char *text,
				 size_t textlen)
{
	if (e->p->open_flags & PROTO_OPEN_PRESERVE) {
		struct timespec ts[2] = {
			{ .tv_sec = 0, .tv_nsec = UTIME_OMIT },
			{ .tv_sec = f->meta.mtime_sec, .tv_nsec = f->meta.mtime_nsec },
		};
		if (utimensat(dirfd, f->leaf, ts, AT_SYMLINK_NOFOLLOW) < 0) {
			int r = negerrno();

			snprintf(text, textlen, "symlink: set mtime: %s", strerror(-r));
			return errno_to_perr(r);
		}
	}
	return PERR_OK;
}

uint32_t rx_make_symlink(struct engine *e, struct efile *f, const char *target, char *text,
			 size_t textlen)
{
	uint32_t code = rx_locate(e, f, text, textlen);
	struct dirent_cache *d;
	struct stat st;
	int r;

	if (code != PERR_OK) {
		return code;
	}
	d = &e->dirs[f->dir];
	if (rx_symlink_same(e, f, target, &st)) {
		/* The same link: kept, its owner and time brought in line. */
		code = rx_meta_keep(e, f, d->fd, f->leaf, &st, text, textlen);
		return code == PERR_OK ? rx_kept_code(e) : code;
	}
	/* A temp name first, then rename: atomic, and nothing is ever followed. */
	r = rx_symlink_temp(f, d->fd, target);
	if (r == 0) {
		struct meta_policy mp = rx_meta_policy(e);

		/* Its owner on its temp name, before it has its own. */
		r = meta_policy_own(&mp, d->fd, f->tmpname, f->meta.uid, f->meta.gid);
		if (r < 0) {
			unlinkat(d->fd, f->tmpname, 0);
			snprintf(text, textlen, "symlink: chown: %s", strerror(-r));
			return errno_to_perr(r);
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
	rx_dir_named(d);
	return rx_symlink_mtime(e, f, d->fd, text, textlen);
}

/* Whether directory fd's mtime is d's already (nothing written there since, or set back). */
static bool rx_dir_mtime_is(int fd, const struct dir_meta *d)
{
	struct stat st;

	return fstat(fd, &st) == 0 && st.st_mtim.tv_sec == d->mtime_sec &&
	       st.st_mtim.tv_nsec == (long)d->mtime_nsec;
}

/*
 * Directories we created get their mode last (with -p every directory its
 * mode and mtime), deepest first: in reverse arrival order, children before
 * their parents. One that can't be set is a failure of its own, reported.
 * A time that is the directory's already is not set again (that would only
 * dirty its inode: a re-run's unchanged tree writes nothing, and the syncfs
 * before END, meta_updated, which makes the session's work durable, finds
 * nothing to write).
 */
void rx_finish_dirs(struct engine *e)
{
	e->meta_updated |= e->ndirs_meta > 0;
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
		} else if ((d->created || (d->items & PROTO_ITEM_PERMS)) &&
			   fchmod(fd, rx_dir_mode(e, d->mode)) < 0) {
			what = "chmod";
			r = negerrno();
		} else if ((e->p->open_flags & PROTO_OPEN_PRESERVE) && !rx_dir_mtime_is(fd, d) &&
			   futimens(fd, ts) < 0) {
			what = "set mtime";
			r = negerrno();
		}
		if (what) {
			char text[256];

			snprintf(text, sizeof(text), "%s: %s", what, strerror(-r));
			file_note_failure(e, d->name, PROTO_FT_DIR, errno_to_perr(r), true, text);
		}
		free(d->name);
	}
	e->ndirs_meta = 0;
	e->dirs_meta_bytes = 0;
}

/*
 * -A on an entry we create: no ACL but the sender's. A new file or
 * directory inherits its parent's default ACL; the sender's ACLs, if any,
 * come in XATTRS.
 */
void rx_acl_clear(struct engine *e, int fd, bool dir)
{
	if (!(e->p->open_flags & PROTO_OPEN_ACLS)) {
		return;
	}
	fremovexattr(fd, "system.posix_acl_access");
	if (dir) {
		fremovexattr(fd, "system.posix_acl_default");
	}
}
