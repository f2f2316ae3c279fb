/* SPDX-License-Identifier: MIT */
/*
 * The 32-bit map (idmap.h): Fibonacci hashing into a power-of-two table,
 * linear probing, doubled when half full.
 */
#include "idmap.h"

#include <errno.h>
#include <stdlib.h>

static size_t idmap_home(uint32_t key, size_t cap)
{
	return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

/* The slot holding key, or the empty one where it would go. */
static size_t idmap_find(const uint64_t *slots, size_t cap, uint32_t key)
{
	size_t k = idmap_home(key, cap);

	while (slots[k] && (uint32_t)(slots[k] >> 32) != key) {
		k = (k + 1) & (cap - 1);
	}
	return k;
}

static int idmap_grow(struct idmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	uint64_t *t = calloc(cap, sizeof(*t));

	if (!t) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (m->slots[i]) {
			t[idmap_find(t, cap, (uint32_t)(m->slots[i] >> 32))] = m->slots[i];
		}
	}
	free(m->slots);
	m->slots = t;
	m->cap = cap;
	return 0;
}

int idmap_set(struct idmap *m, uint32_t key, uint32_t val)
{
	size_t k;

	if (!val) {
		return -EINVAL;
	}
	if ((m->n + 1) * 2 > m->cap && idmap_grow(m) < 0) {
		return -ENOMEM;
	}
	k = idmap_find(m->slots, m->cap, key);
	m->n += m->slots[k] == 0;
	m->slots[k] = (uint64_t)key << 32 | val;
	return 0;
}

uint32_t idmap_get(const struct idmap *m, uint32_t key)
{
	if (!m->cap) {
		return 0;
	}
	return (uint32_t)m->slots[idmap_find(m->slots, m->cap, key)];
}

void idmap_free(struct idmap *m)
{
	free(m->slots);
	*m = (struct idmap){ 0 };
}
