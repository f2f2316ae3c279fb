/* SPDX-License-Identifier: MIT */
/* The streaming walk of the sender's entries (see walk.h). */
#include "walk.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirread.h"
#include "diskio.h"
#include "fspath.h"
#include "macro.h"
#include "proto/msg.h"
#include "walk-internal.h"

void walk_src_clear(struct engine_src *e)
{
	free(e->name);
	free(e->path);
	free(e->link);
	free(e->why);
	memset(e, 0, sizeof(*e));
}

static void pop_frame(struct walk *w)
{
	struct walk_frame *f = &w->stack[--w->nstack];

	dir_reader_close(f->d);
	free(f->path);
	free(f->name);
	memset(f, 0, sizeof(*f));
}

int walk_new(walk_warn_fn warn, void *ud, struct walk **ret)
{
	struct walk *w = calloc(1, sizeof(*w));

	if (!w) {
		return -ENOMEM;
	}
	w->warn = warn;
	w->ud = ud;
	w->max_depth = UINT_MAX;
	*ret = w;
	return 0;
}

void walk_free(struct walk *w)
{
	if (!w) {
		return;
	}
	while (w->nstack > 0) {
		pop_frame(w);
	}
	for (size_t i = 0; i < w->nroots; i++) {
		walk_src_clear(&w->roots[i].top);
		free(w->roots[i].shown);
	}
	free(w->shown);
	free(w->roots);
	walk_src_clear(&w->cur);
	for (size_t i = 0; i < w->nheld; i++) {
		close(w->held[i]);
	}
	free(w->held);
	free(w);
}

void walk_set_max_entries(struct walk *w, uint64_t max)
{
	w->max = max;
}

void walk_set_filter(struct walk *w, const struct filter_list *filter)
{
	w->filter = filter;
}

void walk_set_max_depth(struct walk *w, unsigned depth)
{
	w->max_depth = depth;
}

uint64_t walk_count(const struct walk *w)
{
	return w->count;
}

/* Is name left out by the rules? (The empty name of a listed directory never is.) */
static bool walk_excluded(const struct walk *w, const char *name, bool is_dir)
{
	return w->filter && name[0] != '\0' && !filter_included(w->filter, name, is_dir);
}

/*
 * An entry's path and name made already (a directory's child): make_entry
 * takes them (their pointers set to NULL) instead of copying them, one
 * allocation fewer for each of a tree's names.
 */
struct own_names {
	char **path, **name;
};

/* Fill e from st; takes link, and own's strings when given (else copies path and name). */
static int make_entry(struct engine_src *e, int rootfd, const char *path, const char *name,
		      const struct own_names *own, const struct stat *st, uint8_t ftype, char *link)
{
	if (strlen(name) > PROTO_MAX_PATH) {
		free(link);
		return -ENAMETOOLONG;
	}
	*e = (struct engine_src){
		.name = own ? TAKE_PTR(*own->name) : strdup(name),
		.path = own ? TAKE_PTR(*own->path) : strdup(path),
		.dirfd = rootfd,
		.ftype = ftype,
		.mode = st->st_mode & 07777,
		.size = ftype == PROTO_FT_REG ? (uint64_t)st->st_size : 0,
		.mtime = st->st_mtim,
		.uid = st->st_uid,
		.gid = st->st_gid,
		.link = link,
		.dev = (uint64_t)st->st_dev,
		.ino = (uint64_t)st->st_ino,
		.nlink = (uint64_t)st->st_nlink,
	};
	if (!e->name || !e->path) {
		walk_src_clear(e);
		return -ENOMEM;
	}
	return 0;
}

static char *join(const char *a, const char *b);

/* Warn about path, found beneath rootfd: named as the user gave its root. */
static void warn_at(struct walk *w, int rootfd, const char *path, const char *why)
{
	_cleanup_free_ char *full = NULL;

	if (rootfd >= 0 && rootfd == w->rootfd && w->shown) {
		full = join(w->shown, path);
	}
	w->warn(w->ud, full ? full : path, why);
}

/*
 * name, shortened in the middle when the wire can't carry it: what people
 * read, never a path anything resolves.
 */
char *walk_name_for_people(const char *name)
{
	size_t len = strlen(name), head = PROTO_MAX_PATH / 2 - 2, tail;
	char *s;

	if (len <= PROTO_MAX_PATH) {
		return strdup(name);
	}
	tail = PROTO_MAX_PATH - head - 3;
	/* Not in the middle of a UTF-8 sequence. */
	while (head > 0 && ((unsigned char)name[head] & 0xc0) == 0x80) {
		head--;
	}
	while (tail > 0 && ((unsigned char)name[len - tail] & 0xc0) == 0x80) {
		tail--;
	}
	s = malloc(head + 3 + tail + 1);
	if (s) {
		memcpy(s, name, head);
		memcpy(s + head, "...", 3);
		memcpy(s + head + 3, name + len - tail, tail + 1);
	}
	return s;
}

/*
 * e: an entry that can't be sent (error -errno), named name, for the reason
 * why: the engine reports it as a failed file. 0 or -ENOMEM.
 */
static int fail_entry(struct engine_src *e, const char *name, int error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_entry(struct engine_src *e, const char *name, int error, const char *fmt, ...)
{
	va_list ap;
	int n;

	assert(error < 0);
	*e = (struct engine_src){ .name = walk_name_for_people(name), .dirfd = -1, .error = error };
	va_start(ap, fmt);
	n = vasprintf(&e->why, fmt, ap);
	va_end(ap);
	if (n < 0) {
		e->why = NULL;
	}
	e->path = strdup("");
	if (!e->name || !e->why || !e->path) {
		walk_src_clear(e);
		return -ENOMEM;
	}
	return 0;
}

/* The failure entry for what classify() or fstatat() refused (r < 0, not -ENOMEM). */
static int fail_found(struct engine_src *e, const char *name, int r)
{
	if (r == -ENAMETOOLONG && strlen(name) > PROTO_MAX_PATH) {
		return fail_entry(e, name, r,
				  "name of %zu bytes: longer than the %u the protocol carries",
				  strlen(name), PROTO_MAX_PATH);
	}
	return fail_entry(e, name, r, "%s", strerror(-r));
}

/*
 * A block device root (WALK_DEVICES): a regular file of the device's size,
 * opened now as the engine will open it, so a device that can't be read
 * fails here, with its reason, before anything is offered.
 */
static int classify_device(struct engine_src *e, int rootfd, const char *path, const char *name)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	r = diskio_open_read_flags(rootfd, path, 0, DISKIO_BLOCK, &fd, NULL, &st);
	if (r < 0) {
		return r;
	}
	r = make_entry(e, rootfd, path, name, NULL, &st, PROTO_FT_REG, NULL);
	if (r < 0) {
		return r;
	}
	e->device = true;
	/* Who it is means nothing for -H: a device is read by its contents. */
	e->nlink = 1;
	return 1;
}

/*
 * A symlink's target, in an allocation of its own length: a list of a
 * tree's entries (walk_add) keeps one for each symlink until it is sent.
 */
static int read_target(int parentfd, const char *leaf, char **ret)
{
	char buf[PROTO_MAX_PATH + 1];
	ssize_t n = readlinkat(parentfd, leaf, buf, sizeof(buf));

	if (n < 0) {
		return negerrno();
	}
	if (n == 0 || n > PROTO_MAX_PATH) {
		return -ENAMETOOLONG;
	}
	*ret = strndup(buf, (size_t)n);
	return *ret ? 0 : -ENOMEM;
}

/*
 * The entry for one thing found: 1 with e filled, 0 when it is skipped with
 * a warning, -errno when it can't be sent (-EISDIR: a directory, not
 * recursive).
 */
static int classify(struct walk *w, struct engine_src *e, int rootfd, const char *path,
		    const char *name, const struct own_names *own, const struct stat *st,
		    int parentfd, const char *leaf, bool recursive, bool devices)
{
	int r;

	if (S_ISBLK(st->st_mode) && devices) {
		return classify_device(e, rootfd, path, name);
	}
	if (S_ISREG(st->st_mode)) {
		r = make_entry(e, rootfd, path, name, own, st, PROTO_FT_REG, NULL);
		return r < 0 ? r : 1;
	}
	if (S_ISDIR(st->st_mode)) {
		if (!recursive) {
			return -EISDIR;
		}
		r = make_entry(e, rootfd, path, name, own, st, PROTO_FT_DIR, NULL);
		return r < 0 ? r : 1;
	}
	if (S_ISLNK(st->st_mode)) {
		char *target = NULL;

		r = read_target(parentfd, leaf, &target);
		if (r < 0) {
			return r;
		}
		r = make_entry(e, rootfd, path, name, own, st, PROTO_FT_SYMLINK, target);
		return r < 0 ? r : 1;
	}
	warn_at(w, rootfd, path, "not a regular file, directory or symlink: skipped");
	return 0;
}

/*
 * A directory given as a local path is opened now and walked from its fd:
 * its entries are opened beneath it, so their depth below it is all that
 * counts, not the length of the path above (cp -r walks the same way).
 */
static int hold_local_dir(struct walk *w, struct engine_src *top)
{
	_cleanup_close_ int fd = -1;
	char *empty;

	if (w->nheld == w->held_cap) {
		size_t cap = w->held_cap ? w->held_cap * 2 : 4;
		int *v = reallocarray(w->held, cap, sizeof(*v));
		if (!v) {
			return -ENOMEM;
		}
		w->held = v;
		w->held_cap = cap;
	}
	/* Followed like stat() did: the command line's own symlinks are the user's. */
	fd = open(top->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		return negerrno();
	}
	empty = strdup("");
	if (!empty) {
		return -ENOMEM;
	}
	free(top->path);
	top->path = empty;
	top->dirfd = fd;
	w->held[w->nheld++] = TAKE_FD(fd);
	return 0;
}

/* Append root (taken on success). */
static int queue_root(struct walk *w, const struct walk_root *root)
{
	if (w->nroots == w->roots_cap) {
		size_t cap = w->roots_cap ? w->roots_cap * 2 : 8;
		struct walk_root *v = reallocarray(w->roots, cap, sizeof(*v));

		if (!v) {
			return -ENOMEM;
		}
		w->roots = v;
		w->roots_cap = cap;
	}
	w->roots[w->nroots++] = *root;
	return 0;
}

int walk_add_root(struct walk *w, int rootfd, const char *path, const char *name, bool recursive)
{
	return walk_add_root_flags(w, rootfd, path, name, recursive ? WALK_RECURSIVE : 0);
}

void walk_set_parent_cache(struct walk *w, struct walk_parent *p)
{
	w->parent = p;
}

void walk_parent_clear(struct walk_parent *p)
{
	if (p->dir) {
		close(p->fd);
		free(p->dir);
	}
	*p = (struct walk_parent){ .fd = -1 };
}

/*
 * The directory above path beneath rootfd, resolved as fspath_open_parent()
 * does (no symlink on the way), or the kept one when it is that directory.
 * Returns the fd to look in, and in *ret_owned the one the caller closes
 * (-1 when the fd is the cache's); or -errno.
 */
static int open_parent(struct walk *w, int rootfd, const char *path, int *ret_owned,
		       const char **ret_leaf)
{
	struct walk_parent *p = w->parent;
	const char *slash = strrchr(path, '/');
	size_t dlen = slash ? (size_t)(slash - path) : 0;
	char *dir;
	int fd, r;

	r = fspath_validate(path);
	if (r < 0) {
		return r;
	}
	if (p && p->dir && p->rootfd == rootfd && strlen(p->dir) == dlen &&
	    memcmp(p->dir, path, dlen) == 0) {
		*ret_leaf = slash ? slash + 1 : path;
		return p->fd;
	}
	r = fspath_open_parent(rootfd, path, false, &fd, ret_leaf);
	if (r < 0) {
		return r;
	}
	dir = p ? strndup(path, dlen) : NULL;
	if (!dir) {
		*ret_owned = fd; /* not kept: this name alone */
		return fd;
	}
	walk_parent_clear(p);
	*p = (struct walk_parent){ .rootfd = rootfd, .fd = fd, .dir = dir };
	return fd;
}

int walk_add_root_flags(struct walk *w, int rootfd, const char *path, const char *name,
			unsigned flags)
{
	bool recursive = flags & WALK_RECURSIVE;
	bool devices = flags & WALK_DEVICES;
	/* Classified as under -r: a directory taken alone is an entry too. */
	bool take_dirs = recursive || (flags & WALK_DIR_ALONE);
	struct walk_root root = { .recursive = recursive,
				  .alone = !recursive,
				  .contents = flags & WALK_CONTENTS };
	_cleanup_close_ int parentfd = -1;
	const char *leaf = path;
	struct stat st;
	int r;

	if (rootfd == AT_FDCWD) {
		/* The command line's own symlinks are followed, like cp and scp. */
		if (stat(path, &st) < 0) {
			return negerrno();
		}
		r = walk_excluded(w, name, S_ISDIR(st.st_mode))
			? 0
			: classify(w, &root.top, rootfd, path, name, NULL, &st, AT_FDCWD, path,
				   take_dirs, devices);
	} else if (path[0] == '\0') {
		if (fstat(rootfd, &st) < 0) {
			return negerrno();
		}
		r = walk_excluded(w, name, S_ISDIR(st.st_mode))
			? 0
			: classify(w, &root.top, rootfd, path, name, NULL, &st, rootfd, ".",
				   take_dirs, devices);
	} else {
		int dirfd = open_parent(w, rootfd, path, &parentfd, &leaf);

		if (dirfd < 0) {
			return dirfd;
		}
		if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			return negerrno();
		}
		r = walk_excluded(w, name, S_ISDIR(st.st_mode))
			? 0
			: classify(w, &root.top, rootfd, path, name, NULL, &st, dirfd, leaf,
				   take_dirs, devices);
	}
	if (r <= 0) {
		return r; /* 0: skipped (excluded, or with a warning), nothing to queue */
	}
	if (rootfd == AT_FDCWD && root.top.ftype == PROTO_FT_DIR) {
		root.shown = strdup(path);
		r = root.shown ? hold_local_dir(w, &root.top) : -ENOMEM;
		if (r < 0) {
			free(root.shown);
			walk_src_clear(&root.top);
			return r;
		}
	}
	r = queue_root(w, &root);
	if (r < 0) {
		free(root.shown);
		walk_src_clear(&root.top);
	}
	return r;
}

int walk_add_failed_root(struct walk *w, const char *name, int error, const char *why)
{
	struct walk_root root = { .alone = true };
	int r = fail_entry(&root.top, name, error, "%s", why);

	if (r == 0) {
		r = queue_root(w, &root);
	}
	if (r < 0) {
		walk_src_clear(&root.top);
	}
	return r;
}

/* Open a directory for listing: beneath rootfd, or plainly for local paths. */
static int open_dir(int rootfd, const char *path, int *ret_fd)
{
	if (rootfd == AT_FDCWD) {
		int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0) {
			return negerrno();
		}
		*ret_fd = fd;
		return 0;
	}
	return fspath_open_dir(rootfd, path, ret_fd);
}

/*
 * Start listing the directory just handed out (w->cur) at `depth`: opened
 * beneath the directory it was found in, so no path longer than one name is
 * ever resolved. 0, -ENOMEM, or 1 when it can't be listed: w->cur is then
 * the failure that says so.
 */
static int descend(struct walk *w, unsigned depth)
{
	struct walk_frame *f;
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *name = NULL;
	struct dir_reader *d;
	int r;

	if (depth > WALK_MAX_DEPTH) {
		r = -ELOOP;
		goto cannot;
	}
	assert(w->nstack < ARRAY_SIZE(w->stack));
	if (w->nstack > 0) {
		const char *leaf = strrchr(w->cur.path, '/');

		r = fspath_open_dir(dir_reader_fd(w->stack[w->nstack - 1].d),
				    leaf ? leaf + 1 : w->cur.path, &fd);
	} else {
		r = open_dir(w->rootfd, w->cur.path, &fd);
	}
	if (r < 0) {
		goto cannot;
	}
	r = dir_reader_open(fd, &d);
	if (r < 0) {
		return r;
	}
	TAKE_FD(fd); /* owned by d now */
	f = &w->stack[w->nstack];
	*f = (struct walk_frame){
		.d = d, .path = strdup(w->cur.path), .name = strdup(w->cur.name), .depth = depth
	};
	w->nstack++;
	if (!f->path || !f->name) {
		pop_frame(w);
		return -ENOMEM;
	}
	return 0;

cannot:
	/* The directory is not sent: what it holds could not be. */
	name = TAKE_PTR(w->cur.name);
	walk_src_clear(&w->cur);
	if (r == -ELOOP && depth > WALK_MAX_DEPTH) {
		r = fail_entry(&w->cur, name, -ELOOP, "more than %u directories deep",
			       WALK_MAX_DEPTH);
	} else {
		r = fail_entry(&w->cur, name, r, "open directory: %s", strerror(-r));
	}
	return r < 0 ? r : 1;
}

/* a/b (a's own trailing '/' kept as the one between), or b when a is empty; NULL: no memory. */
static char *join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t sep = la > 0 && a[la - 1] != '/';
	char *s = malloc(la + sep + lb + 1);

	if (!s) {
		return NULL;
	}
	memcpy(s, a, la);
	s[la] = '/';
	memcpy(s + la + sep, b, lb + 1);
	return s;
}

/*
 * The next entry of the innermost directory: 1 in w->cur (maybe a failure
 * entry), 0 when it is done, -ENOMEM.
 */
static int next_in_dir(struct walk *w)
{
	struct walk_frame *f = &w->stack[w->nstack - 1];
	const struct dirent64 *de;

	for (;;) {
		_cleanup_free_ char *cpath = NULL, *cname = NULL;
		struct stat st;
		int r;

		if (f->broken) {
			return 0;
		}
		r = dir_reader_next(f->d, &de);
		if (r < 0) {
			f->broken = true;
			r = fail_entry(&w->cur, f->name, r, "reading the directory: %s",
				       strerror(-r));
			return r < 0 ? r : 1;
		}
		if (r == 0) {
			return 0;
		}
		cpath = join(f->path, de->d_name);
		cname = join(f->name, de->d_name);
		if (!cpath || !cname) {
			return -ENOMEM;
		}
		if (fstatat(dir_reader_fd(f->d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = negerrno();
			/* What can't be looked at but is excluded is no failure. */
			if (walk_excluded(w, cname, de->d_type == DT_DIR)) {
				continue;
			}
			r = fail_found(&w->cur, cname, r);
			return r < 0 ? r : 1;
		}
		/* Excluded: not sent, and an excluded directory is not read (rsync). */
		if (walk_excluded(w, cname, S_ISDIR(st.st_mode))) {
			continue;
		}
		/* A receiver's store of cut files (--partial): its bookkeeping, not the tree's. */
		if (S_ISDIR(st.st_mode) && !strcmp(de->d_name, ENGINE_PARTIAL_DIR)) {
			continue;
		}
		r = classify(w, &w->cur, w->rootfd, cpath, cname,
			     &(struct own_names){ &cpath, &cname }, &st, dir_reader_fd(f->d),
			     de->d_name, true, false);
		if (r == -ENOMEM || r > 0) {
			return r;
		}
		if (r < 0) {
			r = fail_found(&w->cur, cname, r);
			return r < 0 ? r : 1;
		}
		/* 0: skipped with a warning (a special file), as rsync does. */
	}
}

static int walk_next_entry(struct walk *w, const struct engine_src **ret)
{
	unsigned depth = 0;
	int r = 0;

	if (w->over) {
		return -ECANCELED;
	}
	walk_src_clear(&w->cur);
	while (w->nstack > 0) {
		depth = w->stack[w->nstack - 1].depth + 1;
		r = next_in_dir(w);
		if (r != 0) {
			break;
		}
		pop_frame(w);
	}
	if (r == 0 && w->next_root < w->nroots) {
		struct walk_root *root = &w->roots[w->next_root++];

		w->cur = root->top;
		w->cur_alone = root->alone;
		w->cur_contents = root->contents;
		memset(&root->top, 0, sizeof(root->top));
		w->rootfd = w->cur.dirfd;
		free(w->shown);
		w->shown = TAKE_PTR(root->shown);
		depth = 0;
		r = 1;
	}
	if (r == 1 && !w->cur.error && w->max && w->count >= w->max) {
		r = -E2BIG;
	}
	if (r == 1 && !w->cur.error && w->cur.ftype == PROTO_FT_DIR && depth < w->max_depth &&
	    !(depth == 0 && w->cur_alone)) {
		/* Children go to the roots' and the directory's own rule: -r was needed for both. */
		r = descend(w, depth);
		r = r < 0 ? r : 1;
	}
	if (r < 0) {
		w->over = true;
		walk_src_clear(&w->cur);
		return r;
	}
	if (r == 0) {
		return 0;
	}
	/* DIR/.: what the directory holds comes out, the directory itself does not. */
	w->cur_hidden =
	    depth == 0 && w->cur_contents && !w->cur.error && w->cur.ftype == PROTO_FT_DIR;
	if (!w->cur.error && !w->cur_hidden) {
		w->count++;
	}
	*ret = &w->cur;
	return 1;
}

int walk_next(struct walk *w, const struct engine_src **ret)
{
	int r;

	do {
		r = walk_next_entry(w, ret);
	} while (r == 1 && w->cur_hidden);
	return r;
}

size_t walk_nroots(const struct walk *w)
{
	return w->nroots;
}

static int walk_source_next(void *ud, const struct engine_src **ret, char *why, size_t whylen)
{
	int r = walk_next(ud, ret);

	if (r == -E2BIG) {
		snprintf(why, whylen, "too many entries");
	} else if (r < 0) {
		snprintf(why, whylen, "walking the source: %s", strerror(-r));
	}
	return r;
}

void walk_source(struct walk *w, struct engine_source *ret)
{
	*ret = (struct engine_source){ .next = walk_source_next, .ud = w };
}
