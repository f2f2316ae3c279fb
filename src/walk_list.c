/* SPDX-License-Identifier: MIT */
/* A whole walk kept in memory: the src_list of walk.h. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memhint.h"
#include "walk-internal.h"

void src_list_free(struct src_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		walk_src_clear(&l->v[i]);
	}
	free(l->v);
	for (size_t i = 0; i < l->nheld; i++) {
		close(l->held[i]);
	}
	free(l->held);
	walk_parent_clear(&l->parent);
	memset(l, 0, sizeof(*l));
}

int src_list_reserve(struct src_list *l, size_t n)
{
	struct engine_src *v;

	if (n <= l->cap - l->n) {
		return 0;
	}
	if (n > SIZE_MAX / sizeof(*v) - l->n) {
		return -ENOMEM;
	}
	v = reallocarray(l->v, l->n + n, sizeof(*v));
	if (!v) {
		return -ENOMEM;
	}
	mem_hint_huge(v, (l->n + n) * sizeof(*v));
	l->v = v;
	l->cap = l->n + n;
	return 0;
}

static void ignore_warning(void *ud, const char *path, const char *why)
{
	(void)ud;
	(void)path;
	(void)why;
}

int walk_add(struct src_list *l, int rootfd, const char *path, const char *name, bool recursive,
	     walk_warn_fn warn, void *ud)
{
	return walk_add_flags(l, rootfd, path, name, recursive ? WALK_RECURSIVE : 0, warn, ud);
}

int walk_add_flags(struct src_list *l, int rootfd, const char *path, const char *name,
		   unsigned flags, walk_warn_fn warn, void *ud)
{
	struct walk *w = NULL;
	const struct engine_src *e;
	int r;

	r = walk_new(warn ? warn : ignore_warning, ud, &w);
	if (r < 0) {
		return r;
	}
	walk_set_filter(w, l->filter);
	walk_set_parent_cache(w, &l->parent);
	r = walk_add_root_flags(w, rootfd, path, name, flags);
	if (r >= 0 && w->nheld > 0) {
		/* The entries name the directories held: they stay open with l. */
		int *v = reallocarray(l->held, l->nheld + w->nheld, sizeof(*v));
		if (!v) {
			r = -ENOMEM;
		} else {
			l->held = v;
			memcpy(l->held + l->nheld, w->held, w->nheld * sizeof(*v));
			l->nheld += w->nheld;
			w->nheld = 0;
		}
	}
	while (r >= 0 && (r = walk_next(w, &e)) > 0) {
		/* Full: twice the room (64 to start). */
		if (l->n == l->cap && (r = src_list_reserve(l, l->cap ? l->cap : 64)) < 0) {
			break;
		}
		/* Take the entry's strings: the walker makes fresh ones for the next. */
		l->v[l->n++] = *e;
		l->total_bytes += e->size;
		memset(&w->cur, 0, sizeof(w->cur));
	}
	walk_free(w);
	return r < 0 ? r : 0;
}

static int src_list_next(void *ud, const struct engine_src **ret, char *why, size_t whylen)
{
	struct src_list *l = ud;

	(void)why;
	(void)whylen;
	if (l->next >= l->n) {
		return 0;
	}
	*ret = &l->v[l->next++];
	return 1;
}

void src_list_source(struct src_list *l, struct engine_source *ret)
{
	*ret = (struct engine_source){ .next = src_list_next, .ud = l };
}
