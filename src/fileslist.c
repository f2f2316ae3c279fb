/* SPDX-License-Identifier: MIT */
/* Reading a --files-from list (see fileslist.h). */
#include "fileslist.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "proto/msg.h"

void files_list_free(struct files_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->names[i]);
	}
	free(l->names);
	memset(l, 0, sizeof(*l));
}

/* "./a//b/" -> "a/b", in place. */
static void tidy(char *s)
{
	size_t n = 0, start = 0;

	for (size_t i = 0; s[i]; i++) {
		if (s[i] == '/' && n > 0 && s[n - 1] == '/') {
			continue;
		}
		s[n++] = s[i];
	}
	s[n] = '\0';
	while (s[start] == '.' && s[start + 1] == '/') {
		start += 2;
	}
	memmove(s, s + start, n - start + 1);
	n -= start;
	while (n > 1 && s[n - 1] == '/') {
		s[--n] = '\0';
	}
}

static int push_name(struct files_list *l, const char *s)
{
	char *dup;

	if (l->n >= FILES_LIST_MAX) {
		return -E2BIG;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		char **v = reallocarray(l->names, cap, sizeof(*v));

		if (!v) {
			return -ENOMEM;
		}
		l->names = v;
		l->cap = cap;
	}
	dup = strdup(s);
	if (!dup) {
		return -ENOMEM;
	}
	l->names[l->n++] = dup;
	return 0;
}

int files_list_read(const char *path, bool from0, struct files_list *ret, size_t *ret_entry)
{
	_cleanup_fclose_ FILE *owned = NULL;
	struct files_list l = { 0 };
	char name[PROTO_MAX_PATH + 2];
	int delim = from0 ? '\0' : '\n';
	size_t entry = 0;
	FILE *f;
	int r = 0;

	*ret_entry = 0;
	if (!strcmp(path, "-")) {
		f = stdin;
	} else {
		owned = fopen(path, "re");
		if (!owned) {
			return negerrno();
		}
		f = owned;
	}
	for (;;) {
		size_t n = 0;
		bool over = false;
		int c;

		while ((c = getc(f)) != EOF && c != delim) {
			if (n < sizeof(name) - 1) {
				name[n++] = (char)c;
			} else {
				over = true;
			}
		}
		if (c == EOF && n == 0 && !over) {
			break;
		}
		entry++;
		name[n] = '\0';
		if (over || n > PROTO_MAX_PATH || (!from0 && memchr(name, '\0', n))) {
			r = over || n > PROTO_MAX_PATH ? -ENAMETOOLONG : -EINVAL;
			break;
		}
		tidy(name);
		if (name[0] != '\0' && strcmp(name, ".") != 0) {
			r = push_name(&l, name);
			if (r < 0) {
				break;
			}
		}
		if (c == EOF) {
			break;
		}
	}
	if (r == 0 && ferror(f)) {
		r = -EIO;
		entry = 0;
	}
	if (r < 0) {
		*ret_entry = entry;
		files_list_free(&l);
		return r;
	}
	*ret = l;
	return 0;
}

struct ranked {
	const char *name;
	size_t index;
};

static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c) {
		return c;
	}
	return x->index < y->index ? -1 : x->index > y->index;
}

static int cmp_name_only(const void *key, const void *elem)
{
	return strcmp(key, ((const struct ranked *)elem)->name);
}

int files_list_prune(struct files_list *l, bool recursive)
{
	_cleanup_free_ struct ranked *v = NULL;
	_cleanup_free_ bool *drop = NULL;
	char prefix[PROTO_MAX_PATH + 1];
	size_t n = 0;

	if (l->n < 2) {
		return 0;
	}
	v = calloc(l->n, sizeof(*v));
	drop = calloc(l->n, sizeof(*drop));
	if (!v || !drop) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < l->n; i++) {
		v[i] = (struct ranked){ .name = l->names[i], .index = i };
	}
	qsort(v, l->n, sizeof(*v), cmp_ranked);
	for (size_t i = 1; i < l->n; i++) {
		if (!strcmp(v[i].name, v[i - 1].name)) {
			drop[v[i].index] = true; /* listed before: the first one counts */
		}
	}
	for (size_t i = 0; recursive && i < l->n; i++) {
		const char *s = l->names[i];

		for (const char *slash = strchr(s, '/'); slash; slash = strchr(slash + 1, '/')) {
			size_t len = (size_t)(slash - s);

			if (len > PROTO_MAX_PATH) {
				break;
			}
			memcpy(prefix, s, len);
			prefix[len] = '\0';
			if (bsearch(prefix, v, l->n, sizeof(*v), cmp_name_only)) {
				drop[i] = true;
				break;
			}
		}
	}
	for (size_t i = 0; i < l->n; i++) {
		if (drop[i]) {
			free(l->names[i]);
		} else {
			l->names[n++] = l->names[i];
		}
	}
	l->n = n;
	return 0;
}
