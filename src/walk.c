/* SPDX-License-Identifier: MIT */
/* Building the sender's entry list (see walk.h). */
#include "walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fspath.h"
#include "macro.h"
#include "proto/msg.h"

#define WALK_MAX_DEPTH 128

void src_list_free(struct src_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].path);
		free(l->v[i].link);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int push_entry(struct src_list *l, int rootfd, const char *path, const char *name,
		      const struct stat *st, uint8_t ftype, char *link)
{
	struct engine_src *e;

	if (strlen(name) > PROTO_MAX_PATH) {
		free(link);
		return -ENAMETOOLONG;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct engine_src *v = realloc(l->v, cap * sizeof(*v));
		if (!v) {
			free(link);
			return -ENOMEM;
		}
		l->v = v;
		l->cap = cap;
	}
	e = &l->v[l->n];
	*e = (struct engine_src){
		.name = strdup(name),
		.path = strdup(path),
		.dirfd = rootfd,
		.ftype = ftype,
		.mode = st->st_mode & 07777,
		.size = ftype == PROTO_FT_REG ? (uint64_t)st->st_size : 0,
		.mtime = st->st_mtim,
		.uid = st->st_uid,
		.gid = st->st_gid,
		.link = link,
	};
	if (!e->name || !e->path) {
		free(e->name);
		free(e->path);
		free(link);
		return -ENOMEM;
	}
	l->n++;
	l->total_bytes += e->size;
	return 0;
}

static char *join(const char *a, const char *b)
{
	char *s;

	if (a[0] == '\0') {
		return strdup(b);
	}
	return asprintf(&s, "%s%s%s", a, a[strlen(a) - 1] == '/' ? "" : "/", b) < 0 ? NULL : s;
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

static int add_one(struct src_list *l, int rootfd, const char *path, const char *name,
		   const struct stat *st, int parentfd, const char *leaf, bool recursive,
		   unsigned depth, walk_warn_fn warn, void *ud);

static int add_dir_contents(struct src_list *l, int rootfd, const char *path, const char *name,
			    unsigned depth, walk_warn_fn warn, void *ud)
{
	_cleanup_close_ int fd = -1;
	DIR *d;
	struct dirent *de;
	int r;

	if (depth > WALK_MAX_DEPTH) {
		warn(ud, path, "too deep, skipped");
		return 0;
	}
	r = open_dir(rootfd, path, &fd);
	if (r < 0) {
		warn(ud, path, strerror(-r));
		return 0;
	}
	d = fdopendir(fd);
	if (!d) {
		warn(ud, path, strerror(errno));
		return 0;
	}
	fd = -1; /* owned by d now */
	r = 0;
	while (r >= 0 && (errno = 0, de = readdir(d))) {
		struct stat st;
		_cleanup_free_ char *cpath = NULL, *cname = NULL;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) {
			continue;
		}
		cpath = join(path, de->d_name);
		cname = join(name, de->d_name);
		if (!cpath || !cname) {
			r = -ENOMEM;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			warn(ud, cpath, strerror(errno));
			continue;
		}
		r = add_one(l, rootfd, cpath, cname, &st, dirfd(d), de->d_name, true, depth + 1,
			    warn, ud);
		if (r == -ENOMEM) {
			break;
		}
		if (r < 0) {
			warn(ud, cpath, strerror(-r));
			r = 0;
		}
	}
	closedir(d);
	return r == -ENOMEM ? r : 0;
}

static int add_one(struct src_list *l, int rootfd, const char *path, const char *name,
		   const struct stat *st, int parentfd, const char *leaf, bool recursive,
		   unsigned depth, walk_warn_fn warn, void *ud)
{
	if (S_ISREG(st->st_mode)) {
		return push_entry(l, rootfd, path, name, st, PROTO_FT_REG, NULL);
	}
	if (S_ISDIR(st->st_mode)) {
		int r;
		if (!recursive) {
			return -EISDIR;
		}
		r = push_entry(l, rootfd, path, name, st, PROTO_FT_DIR, NULL);
		return r < 0 ? r : add_dir_contents(l, rootfd, path, name, depth, warn, ud);
	}
	if (S_ISLNK(st->st_mode)) {
		char *target = malloc(PROTO_MAX_PATH + 1);
		ssize_t n;
		if (!target) {
			return -ENOMEM;
		}
		n = readlinkat(parentfd, leaf, target, PROTO_MAX_PATH + 1);
		if (n <= 0 || n > PROTO_MAX_PATH) {
			free(target);
			return n < 0 ? negerrno() : -ENAMETOOLONG;
		}
		target[n] = '\0';
		return push_entry(l, rootfd, path, name, st, PROTO_FT_SYMLINK, target);
	}
	warn(ud, path, "not a regular file, directory or symlink: skipped");
	return 0;
}

int walk_add(struct src_list *l, int rootfd, const char *path, const char *name, bool recursive,
	     walk_warn_fn warn, void *ud)
{
	struct stat st;
	_cleanup_close_ int parentfd = -1;
	const char *leaf = path;

	if (rootfd == AT_FDCWD) {
		/* The command line's own symlinks are followed, like cp and scp. */
		if (stat(path, &st) < 0) {
			return negerrno();
		}
		return add_one(l, rootfd, path, name, &st, AT_FDCWD, path, recursive, 0, warn, ud);
	}
	if (path[0] == '\0') {
		if (fstat(rootfd, &st) < 0) {
			return negerrno();
		}
		return add_one(l, rootfd, path, name, &st, rootfd, ".", recursive, 0, warn, ud);
	}
	int r = fspath_open_parent(rootfd, path, false, &parentfd, &leaf);
	if (r < 0) {
		return r;
	}
	if (fstatat(parentfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		return negerrno();
	}
	return add_one(l, rootfd, path, name, &st, parentfd, leaf, recursive, 0, warn, ud);
}
