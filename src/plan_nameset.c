/* SPDX-License-Identifier: MIT */
/*
 * Sets of names by their XXH3-128 (plan.h): the latest journal state of each
 * name or range with its marks, and the digests of a split file's ranges;
 * both open-addressed hash tables.
 */
#include "plan.h"
#include "memhint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int nameset_grow(struct nameset *s)
{
	size_t cap = s->cap ? s->cap * 2 : 1024;
	struct nameset_slot *v = calloc(cap, sizeof(*v));

	if (!v) {
		return -ENOMEM;
	}
	mem_hint_huge(v, cap * sizeof(*v));
	for (size_t i = 0; i < s->cap; i++) {
		if (s->v[i].state) {
			size_t j = s->v[i].lo & (cap - 1);

			while (v[j].state) {
				j = (j + 1) & (cap - 1);
			}
			v[j] = s->v[i];
		}
	}
	free(s->v);
	s->v = v;
	s->cap = cap;
	return 0;
}

static struct nameset_slot *nameset_find(const struct nameset *s, XXH128_hash_t h)
{
	if (!s->cap) {
		return NULL;
	}
	for (size_t j = h.low64 & (s->cap - 1);; j = (j + 1) & (s->cap - 1)) {
		if (!s->v[j].state || (s->v[j].lo == h.low64 && s->v[j].hi == h.high64)) {
			return &s->v[j];
		}
	}
}

/* A range's key: the name, a NUL (no name has one), the range number. */
static XXH128_hash_t range_key(const char *name, uint32_t r)
{
	char key[PROTO_MAX_PATH + 1 + 5];
	size_t n = strnlen(name, PROTO_MAX_PATH);

	memcpy(key, name, n);
	key[n] = '\0';
	key[n + 1] = (char)(r >> 24);
	key[n + 2] = (char)(r >> 16);
	key[n + 3] = (char)(r >> 8);
	key[n + 4] = (char)r;
	return XXH3_128bits(key, n + 5);
}

static int nameset_put_hash(struct nameset *s, XXH128_hash_t h, int state, const char *code)
{
	struct nameset_slot *slot;

	if ((s->n + 1) * 4 > s->cap * 3) {
		int r = nameset_grow(s);
		if (r < 0) {
			return r;
		}
	}
	slot = nameset_find(s, h);
	if (!slot->state) {
		s->n++;
	}
	slot->lo = h.low64;
	slot->hi = h.high64;
	slot->state = (uint8_t)state;
	snprintf(slot->code, sizeof(slot->code), "%s", code ? code : "");
	return 0;
}

int nameset_put(struct nameset *s, const char *name, int state, const char *code)
{
	return nameset_put_hash(s, XXH3_128bits(name, strlen(name)), state, code);
}

int nameset_put_range(struct nameset *s, const char *name, uint32_t r, int state, const char *code)
{
	return nameset_put_hash(s, range_key(name, r), state, code);
}

const struct nameset_slot *nameset_get(const struct nameset *s, const char *name)
{
	const struct nameset_slot *slot = nameset_find(s, XXH3_128bits(name, strlen(name)));

	return slot && slot->state ? slot : NULL;
}

const struct nameset_slot *nameset_get_range(const struct nameset *s, const char *name, uint32_t r)
{
	const struct nameset_slot *slot = nameset_find(s, range_key(name, r));

	return slot && slot->state ? slot : NULL;
}

bool nameset_mark(struct nameset *s, const char *name, uint8_t marks)
{
	struct nameset_slot *slot = nameset_find(s, XXH3_128bits(name, strlen(name)));

	if (!slot || !slot->state) {
		return false;
	}
	slot->marks |= marks;
	return true;
}

bool nameset_mark_range(struct nameset *s, const char *name, uint32_t r, uint8_t marks)
{
	struct nameset_slot *slot = nameset_find(s, range_key(name, r));

	if (!slot || !slot->state) {
		return false;
	}
	slot->marks |= marks;
	return true;
}

size_t nameset_count_unmarked(const struct nameset *s, uint8_t marks)
{
	size_t n = 0;

	for (size_t i = 0; i < s->cap; i++) {
		n += s->v[i].state && (s->v[i].marks & marks) != marks;
	}
	return n;
}

void nameset_unmark_all(struct nameset *s, uint8_t marks)
{
	for (size_t i = 0; i < s->cap; i++) {
		s->v[i].marks &= (uint8_t)~marks;
	}
}

void nameset_free(struct nameset *s)
{
	free(s->v);
	*s = (struct nameset){ 0 };
}

static struct rangeset_slot *rangeset_find(struct rangeset_slot *v, size_t cap, XXH128_hash_t h)
{
	for (size_t j = h.low64 & (cap - 1);; j = (j + 1) & (cap - 1)) {
		if (!v[j].used || (v[j].lo == h.low64 && v[j].hi == h.high64)) {
			return &v[j];
		}
	}
}

int rangeset_put(struct rangeset *s, const char *name, uint32_t r, const uint8_t hash[16])
{
	XXH128_hash_t h = range_key(name, r);
	struct rangeset_slot *slot;

	if ((s->n + 1) * 4 > s->cap * 3) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct rangeset_slot *v = calloc(cap, sizeof(*v));

		if (!v) {
			return -ENOMEM;
		}
		for (size_t i = 0; i < s->cap; i++) {
			if (s->v[i].used) {
				*rangeset_find(v, cap,
					       (XXH128_hash_t){ .low64 = s->v[i].lo,
								.high64 = s->v[i].hi }) = s->v[i];
			}
		}
		free(s->v);
		s->v = v;
		s->cap = cap;
	}
	slot = rangeset_find(s->v, s->cap, h);
	if (!slot->used) {
		s->n++;
	}
	*slot = (struct rangeset_slot){ .lo = h.low64, .hi = h.high64, .used = true };
	memcpy(slot->hash, hash, 16);
	return 0;
}

const uint8_t *rangeset_get(const struct rangeset *s, const char *name, uint32_t r)
{
	const struct rangeset_slot *slot;

	if (!s->cap) {
		return NULL;
	}
	slot = rangeset_find(s->v, s->cap, range_key(name, r));
	return slot->used ? slot->hash : NULL;
}

void rangeset_free(struct rangeset *s)
{
	free(s->v);
	*s = (struct rangeset){ 0 };
}
