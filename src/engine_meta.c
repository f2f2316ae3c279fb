/* SPDX-License-Identifier: MIT */
/*
 * The receiver's entries other than file data: directories, symlinks, and
 * the modes, owners and times an entry gets (directories' last).
 */
#include "engine-internal.h"

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

void rx_apply_meta(struct engine *e, struct efile *f)
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

uint32_t rx_make_dir(struct engine *e, struct efile *f, char *text, size_t textlen)
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
void rx_finish_dirs(struct engine *e)
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
