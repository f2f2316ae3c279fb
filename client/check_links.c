/* SPDX-License-Identifier: MIT */
/*
 * rdmacp check -H: hard-link groups compared as sets of names. Each side's
 * entries are numbered by group (the index of the group's first name, or
 * the entry's own index when it has no other name), then every name on
 * both sides becomes a pair (group here, group there). A name's two groups
 * hold the same names exactly when as many names share that pair as each
 * group has: one sort of the pairs, O(n log n), whatever the groups' sizes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "macro.h"

struct side_groups {
	uint32_t *group; /* per entry: its group's number */
	uint32_t *size;	 /* per group number: names in it */
};

struct by_group {
	uint64_t link_group;
	uint32_t index;
};

static int cmp_by_group(const void *a, const void *b)
{
	const struct by_group *x = a, *y = b;

	if (x->link_group != y->link_group) {
		return x->link_group < y->link_group ? -1 : 1;
	}
	return x->index < y->index ? -1 : x->index > y->index;
}

static void side_groups_free(struct side_groups *s)
{
	free(s->group);
	free(s->size);
}

/* Number l's entries by group, and count each group's names. */
static int side_groups_make(const struct check_list *l, struct side_groups *ret)
{
	_cleanup_free_ struct by_group *v = calloc(l->n + 1, sizeof(*v));
	size_t nv = 0;

	ret->group = calloc(l->n + 1, sizeof(*ret->group));
	ret->size = calloc(l->n + 1, sizeof(*ret->size));
	if (!v || !ret->group || !ret->size) {
		side_groups_free(ret);
		return -ENOMEM;
	}
	for (size_t i = 0; i < l->n; i++) {
		ret->group[i] = (uint32_t)i;
		ret->size[i] = 1;
		if (l->v[i].link_group) {
			v[nv++] = (struct by_group){ l->v[i].link_group, (uint32_t)i };
		}
	}
	if (nv > 1) {
		qsort(v, nv, sizeof(*v), cmp_by_group);
	}
	for (size_t i = 0, first = 0; i < nv; i++) {
		if (i > 0 && v[i].link_group == v[i - 1].link_group) {
			ret->group[v[i].index] = v[first].index;
			ret->size[v[first].index]++;
		} else {
			first = i;
		}
	}
	return 0;
}

struct pair {
	uint32_t here, there; /* group numbers */
	uint32_t index;	      /* the entry's in src */
};

static int cmp_pair(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;

	if (x->here != y->here) {
		return x->here < y->here ? -1 : 1;
	}
	return x->there < y->there ? -1 : x->there > y->there;
}

/* Every name on both sides, as a pair of group numbers (a merge of the sorted lists). */
static size_t make_pairs(const struct check_list *src, const struct check_list *dst,
			 const struct side_groups *a, const struct side_groups *b, struct pair *p)
{
	size_t i = 0, k = 0, n = 0;

	while (i < src->n && k < dst->n) {
		int d = strcmp(src->v[i].name, dst->v[k].name);

		if (d == 0) {
			p[n++] = (struct pair){ a->group[i], b->group[k], (uint32_t)i };
		}
		i += d <= 0;
		k += d >= 0;
	}
	return n;
}

int check_links(struct check_list *src, const struct check_list *dst)
{
	struct side_groups a = { 0 }, b = { 0 };
	_cleanup_free_ struct pair *p = NULL;
	size_t n;

	if (src->n >= UINT32_MAX || dst->n >= UINT32_MAX) {
		return -E2BIG;
	}
	if (side_groups_make(src, &a) < 0) {
		return -ENOMEM;
	}
	p = calloc(MIN(src->n, dst->n) + 1, sizeof(*p));
	if (!p || side_groups_make(dst, &b) < 0) {
		side_groups_free(&a);
		return -ENOMEM;
	}
	n = make_pairs(src, dst, &a, &b, p);
	if (n > 1) {
		qsort(p, n, sizeof(*p), cmp_pair);
	}
	for (size_t i = 0, run; i < n; i += run) {
		for (run = 1; i + run < n && !cmp_pair(&p[i], &p[i + run]); run++) {
		}
		for (size_t j = i; j < i + run; j++) {
			struct check_entry *e = &src->v[p[j].index];

			e->links_here = a.size[p[j].here];
			e->links_there = b.size[p[j].there];
			e->links_differ = run != e->links_here || run != e->links_there;
		}
	}
	side_groups_free(&a);
	side_groups_free(&b);
	return 0;
}
