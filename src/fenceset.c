/* SPDX-License-Identifier: MIT */
/*
 * Fenced ranges of a registration: exact ranges in an open-addressing hash
 * table (linear probing, backward-shift deletion, no tombstones) and a
 * fence count per page for the hot check. See fenceset.h.
 */
#include "fenceset.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FENCE_MIN_CAP	16
#define FENCE_MAX_PAGES ((uint64_t)1 << 20) /* counters: pages grow past 4 KiB for huge spans */

void fence_set_init(struct fence_set *s, uint64_t span)
{
	*s = (struct fence_set){ .span = span, .min_shift = FENCE_PAGE_SHIFT };
	while ((span >> s->min_shift) >= FENCE_MAX_PAGES) {
		s->min_shift++;
	}
	s->page_shift = s->min_shift;
}

void fence_set_fini(struct fence_set *s)
{
	free(s->tab);
	free(s->pages);
	*s = (struct fence_set){ 0 };
}

static size_t home_of(size_t cap, uint64_t off, uint64_t len)
{
	uint64_t h = off * UINT64_C(0x9e3779b97f4a7c15) ^ len * UINT64_C(0xc2b2ae3d27d4eb4f);

	h ^= h >> 32;
	return (size_t)(h & (cap - 1));
}

/* Index of exactly [off, off+len), or SIZE_MAX. */
static size_t find(const struct fence_set *s, uint64_t off, uint64_t len)
{
	size_t mask = s->cap - 1;

	if (s->cap == 0) {
		return SIZE_MAX;
	}
	for (size_t i = home_of(s->cap, off, len); s->tab[i].len != 0; i = (i + 1) & mask) {
		if (s->tab[i].off == off && s->tab[i].len == len) {
			return i;
		}
	}
	return SIZE_MAX;
}

static void place(struct fence_range *tab, size_t cap, struct fence_range r)
{
	size_t i = home_of(cap, r.off, r.len);

	while (tab[i].len != 0) {
		i = (i + 1) & (cap - 1);
	}
	tab[i] = r;
}

static int grow(struct fence_set *s)
{
	size_t ncap = s->cap ? 2 * s->cap : FENCE_MIN_CAP;
	struct fence_range *n = calloc(ncap, sizeof(*n));

	if (!n) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->cap; i++) {
		if (s->tab[i].len != 0) {
			place(n, ncap, s->tab[i]);
		}
	}
	free(s->tab);
	s->tab = n;
	s->cap = ncap;
	return 0;
}

static void count_pages(struct fence_set *s, uint64_t off, uint64_t len, int delta)
{
	uint64_t last = (off + len - 1) >> s->page_shift;

	for (uint64_t p = off >> s->page_shift; p <= last; p++) {
		s->pages[p] += (uint32_t)delta;
	}
}

/* Count again with granules of 1 << shift. Nothing changes on failure. */
static int regranulate(struct fence_set *s, unsigned shift)
{
	size_t npages = (size_t)(((s->span - 1) >> shift) + 1);
	uint32_t *pages = calloc(npages, sizeof(*pages));

	if (!pages) {
		return -ENOMEM;
	}
	free(s->pages);
	s->pages = pages;
	s->npages = npages;
	s->page_shift = shift;
	for (size_t i = 0; i < s->cap; i++) {
		if (s->tab[i].len != 0) {
			count_pages(s, s->tab[i].off, s->tab[i].len, 1);
		}
	}
	return 0;
}

int fence_set_add(struct fence_set *s, uint64_t off, uint64_t len)
{
	unsigned want;
	int r;

	if (len == 0 || off > s->span || len > s->span - off) {
		return -EINVAL;
	}
	if (find(s, off, len) != SIZE_MAX) {
		return -EEXIST;
	}
	/* Granules no larger than the smallest fence: one counter per whole-slot fence. */
	want = 63u - (unsigned)__builtin_clzll(len);
	want = want > s->min_shift ? want : s->min_shift;
	if (!s->pages || want < s->page_shift) {
		r = regranulate(s, want);
		if (r < 0) {
			return r;
		}
	}
	if ((s->n + 1) * 2 > s->cap) {
		r = grow(s);
		if (r < 0) {
			return r;
		}
	}
	place(s->tab, s->cap, (struct fence_range){ .off = off, .len = len });
	s->n++;
	count_pages(s, off, len, 1);
	return 0;
}

int fence_set_remove(struct fence_set *s, uint64_t off, uint64_t len)
{
	size_t mask = s->cap - 1, i = find(s, off, len), j;

	if (i == SIZE_MAX) {
		return -ENOENT;
	}
	count_pages(s, off, len, -1);
	s->n--;
	/* Backward shift: pull later entries of the probe run into the hole. */
	for (j = (i + 1) & mask; s->tab[j].len != 0; j = (j + 1) & mask) {
		size_t home = home_of(s->cap, s->tab[j].off, s->tab[j].len);

		/* Entry j may move to i unless its home lies cyclically in (i, j]. */
		bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);

		if (!stays) {
			s->tab[i] = s->tab[j];
			i = j;
		}
	}
	s->tab[i] = (struct fence_range){ 0 };
	return 0;
}

bool fence_set_touches(const struct fence_set *s, uint64_t off, uint64_t len)
{
	uint64_t last;
	bool hit = false;

	assert(off <= s->span && len <= s->span - off);
	if (s->n == 0 || len == 0) {
		return false;
	}
	last = (off + len - 1) >> s->page_shift;
	for (uint64_t p = off >> s->page_shift; p <= last && !hit; p++) {
		hit = s->pages[p] != 0;
	}
	if (!hit) {
		return false;
	}
	/* A page it spans holds a fence: compare exactly (rare: fences are whole slots). */
	for (size_t i = 0; i < s->cap; i++) {
		const struct fence_range *f = &s->tab[i];

		if (f->len != 0 && f->off < off + len && off < f->off + f->len) {
			return true;
		}
	}
	return false;
}
