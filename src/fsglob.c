/* SPDX-License-Identifier: MIT */
/* Wildcard expansion beneath a held directory (see fsglob.h). */
#include "fsglob.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirread.h"
#include "fspath.h"
#include "macro.h"

struct glob_state {
	struct fsglob *out;
	uint64_t max_matches, max_scanned, scanned;
};

bool fsglob_has_magic(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

void fsglob_free(struct fsglob *g)
{
	for (size_t i = 0; i < g->n; i++) {
		free(g->paths[i]);
	}
	free(g->paths);
	memset(g, 0, sizeof(*g));
}

static int add_match(struct glob_state *gs, const char *prefix, const char *name)
{
	struct fsglob *g = gs->out;
	char *s;

	if (g->n >= gs->max_matches) {
		return -E2BIG;
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		char **v = reallocarray(g->paths, cap, sizeof(*v));
		if (!v) {
			return -ENOMEM;
		}
		g->paths = v;
		g->cap = cap;
	}
	if (asprintf(&s, "%s%s%s", prefix, prefix[0] ? "/" : "", name) < 0) {
		return -ENOMEM;
	}
	g->paths[g->n++] = s;
	return 0;
}

/* What a component names in dirfd, never through a symlink: a file, a directory, or neither. */
static mode_t entry_type(int dirfd, const char *name)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		return 0;
	}
	return st.st_mode & S_IFMT;
}

/*
 * What a last component may match: a file, a directory, or a symlink (the
 * match itself, never followed: sent as a symlink, as a -r pull of its
 * directory would send it). Never a special file.
 */
static bool matchable(mode_t t)
{
	return t == S_IFREG || t == S_IFDIR || t == S_IFLNK;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i]);
	}
	free(v);
}

/* The names in dirfd that match pat, sorted. */
static int match_dir(struct glob_state *gs, int dirfd, const char *pat, char ***ret, size_t *ret_n)
{
	_cleanup_close_ int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char **v = NULL;
	size_t n = 0, cap = 0;
	const struct dirent64 *de;
	struct dir_reader *d;
	int r = 0;

	if (fd < 0 || dir_reader_open(fd, &d) < 0) {
		return 0; /* unreadable: passed over */
	}
	TAKE_FD(fd);
	/* A read error ends the list, as glob(3) without GLOB_ERR. */
	while (dir_reader_next(d, &de) > 0) {
		if (++gs->scanned > gs->max_scanned) {
			r = -E2BIG;
			break;
		}
		if (fnmatch(pat, de->d_name, FNM_PERIOD) != 0) {
			continue;
		}
		if (n == cap) {
			size_t c = cap ? cap * 2 : 16;
			char **nv = reallocarray(v, c, sizeof(*nv));
			if (!nv) {
				r = -ENOMEM;
				break;
			}
			v = nv;
			cap = c;
		}
		v[n] = strdup(de->d_name);
		if (!v[n]) {
			r = -ENOMEM;
			break;
		}
		n++;
	}
	dir_reader_close(d);
	if (r < 0) {
		free_names(v, n);
		return r;
	}
	if (n > 1) {
		qsort(v, n, sizeof(*v), cmp_str);
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

/*
 * Components comps[i..n) beneath dirfd, which is `prefix` relative to the
 * root. Literal components are opened one at a time without following
 * symlinks; a wildcard component lists dirfd.
 */
static int expand_at(struct glob_state *gs, int dirfd, const char *prefix, char **comps, size_t i,
		     size_t n)
{
	bool last = i + 1 == n;
	_cleanup_free_ char *path = NULL;
	char **names = NULL;
	size_t nnames = 0;
	int r = 0;

	if (!fsglob_has_magic(comps[i]) && last) {
		mode_t t = entry_type(dirfd, comps[i]);

		return matchable(t) ? add_match(gs, prefix, comps[i]) : 0;
	}
	if (!fsglob_has_magic(comps[i])) {
		/* The literal run up to the next wildcard (or the last component): one open. */
		_cleanup_free_ char *sub = NULL;
		_cleanup_close_ int fd = -1;
		size_t j = i;

		while (j + 1 < n && !fsglob_has_magic(comps[j])) {
			j++;
		}
		for (size_t k = i; k < j; k++) {
			char *t = NULL;

			if (asprintf(&t, "%s%s%s", sub ? sub : "", sub ? "/" : "", comps[k]) < 0) {
				return -ENOMEM;
			}
			free(sub);
			sub = t;
		}
		if (fspath_open_dir(dirfd, sub, &fd) < 0) {
			return 0; /* missing, not a directory, or a symlink on the way */
		}
		if (asprintf(&path, "%s%s%s", prefix, prefix[0] ? "/" : "", sub) < 0) {
			return -ENOMEM;
		}
		return expand_at(gs, fd, path, comps, j, n);
	}
	r = match_dir(gs, dirfd, comps[i], &names, &nnames);
	for (size_t k = 0; r >= 0 && k < nnames; k++) {
		mode_t t = entry_type(dirfd, names[k]);
		_cleanup_close_ int fd = -1;

		if (last) {
			r = matchable(t) ? add_match(gs, prefix, names[k]) : 0;
			continue;
		}
		if (t != S_IFDIR || fspath_open_dir(dirfd, names[k], &fd) < 0) {
			continue;
		}
		free(path);
		path = NULL;
		if (asprintf(&path, "%s%s%s", prefix, prefix[0] ? "/" : "", names[k]) < 0) {
			r = -ENOMEM;
			break;
		}
		r = expand_at(gs, fd, path, comps, i + 1, n);
	}
	free_names(names, nnames);
	return r;
}

int fsglob_expand(int rootfd, const char *pattern, uint64_t max_matches, uint64_t max_scanned,
		  struct fsglob *ret)
{
	_cleanup_free_ char *copy = NULL;
	char *comps[FSPATH_MAX / 2 + 1];
	struct fsglob g = { 0 };
	struct glob_state gs = { .out = &g,
				 .max_matches = max_matches,
				 .max_scanned = max_scanned };
	size_t n = 0, nmagic = 0;
	char *save = NULL;
	int r;

	if (max_matches == 0 || max_scanned == 0) {
		return -EINVAL;
	}
	r = fspath_validate(pattern);
	if (r < 0) {
		return r;
	}
	copy = strdup(pattern);
	if (!copy) {
		return -ENOMEM;
	}
	for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (n == ARRAY_SIZE(comps)) {
			return -EINVAL;
		}
		nmagic += fsglob_has_magic(c);
		comps[n++] = c;
	}
	if (n == 0 || nmagic > FSGLOB_MAX_MAGIC) {
		return -EINVAL;
	}
	r = expand_at(&gs, rootfd, "", comps, 0, n);
	if (r < 0) {
		fsglob_free(&g);
		return r;
	}
	*ret = g;
	return 0;
}
