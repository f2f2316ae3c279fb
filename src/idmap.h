/* SPDX-License-Identifier: MIT */
/*
 * A map of 32-bit keys to non-zero 32-bit values: open addressing, linear
 * probing, at most half full, so a lookup costs O(1) whatever the number of
 * keys. Keys are only set (added or overwritten), never removed: a caller
 * whose values go stale checks what it finds (the relay child's book by
 * the hop's entry id, and by descriptor, which the kernel reuses).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct idmap {
	uint64_t *slots; /* key << 32 | value; 0: empty (a value is never 0) */
	size_t cap, n;	 /* cap: 0 or a power of two, more than twice n */
};

/* key's value is val (not 0) from now on. 0 or -ENOMEM (the map unchanged); -EINVAL: val 0. */
int idmap_set(struct idmap *m, uint32_t key, uint32_t val);

/* key's value, or 0 when it has none. */
uint32_t idmap_get(const struct idmap *m, uint32_t key);

/* Frees the slots; the map is empty again (and may be used again). */
void idmap_free(struct idmap *m);
