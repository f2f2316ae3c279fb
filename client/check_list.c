/* SPDX-License-Identifier: MIT */
/*
 * rdmacp check's lists of entries (check.h): an entry appended with its
 * strings copied, up to CHECK_MAX_ENTRIES, and the list freed. Both sides
 * fill one: the local walk (check.c) and the daemon's answer
 * (check_remote.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

void check_list_free(struct check_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].link);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

int check_list_add(struct check_list *l, const char *name, const char *link,
		   struct check_entry **ret)
{
	struct check_entry *e;

	if (l->n == CHECK_MAX_ENTRIES) {
		return -E2BIG;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		struct check_entry *v = reallocarray(l->v, cap, sizeof(*v));

		if (!v) {
			return -ENOMEM;
		}
		l->v = v;
		l->cap = cap;
	}
	e = &l->v[l->n];
	*e = (struct check_entry){ .name = strdup(name), .link = link ? strdup(link) : NULL };
	if (!e->name || (link && !e->link)) {
		free(e->name);
		free(e->link);
		return -ENOMEM;
	}
	l->n++;
	*ret = e;
	return 0;
}
