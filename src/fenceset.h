/* SPDX-License-Identifier: MIT */
/*
 * A set of fenced byte ranges inside one memory registration (xport_tcp's
 * fences). Two views of the same ranges:
 *   - the exact ranges, in a hash table keyed by (offset, length): adding and
 *     removing one costs O(1) whatever the number of fences;
 *   - a count of fences per granule: "does this write touch a fence?" reads
 *     one counter per granule the write spans, and looks at the exact ranges
 *     only when one of those granules holds a fence. A granule is as large as
 *     the smallest fence so far (a power of two, 4 KiB at least), so whole-slot
 *     fences cost one counter per slot.
 * So the per-frame check of the receiving thread stays cheap with thousands of
 * slots held at once. Not thread-safe: the caller locks.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fence_range {
	uint64_t off, len; /* len 0: empty table entry */
};

struct fence_set {
	uint64_t span; /* bytes the ranges must lie in: [0, span) */
	struct fence_range *tab;
	size_t cap, n;	 /* cap: 0 or a power of two, at least twice n */
	uint32_t *pages; /* fences touching each granule; allocated with the first fence */
	size_t npages;
	unsigned page_shift; /* log2 of the granule */
	unsigned min_shift;  /* 12 (4 KiB), more for spans of over 4 GiB: at most 2^20 counters */
};

#define FENCE_PAGE_SHIFT 12

/* An empty set for ranges inside [0, span). Allocates nothing. */
void fence_set_init(struct fence_set *s, uint64_t span);
void fence_set_fini(struct fence_set *s);
/*
 * Fence [off, off+len). -EINVAL: empty or outside [0, span); -EEXIST: exactly
 * this range is fenced already; -ENOMEM. Nothing changes on failure.
 */
int fence_set_add(struct fence_set *s, uint64_t off, uint64_t len);
/* Unfence exactly a range that was fenced; -ENOENT otherwise. */
int fence_set_remove(struct fence_set *s, uint64_t off, uint64_t len);
/* Does a fence share a byte with [off, off+len)? The range lies inside [0, span). */
bool fence_set_touches(const struct fence_set *s, uint64_t off, uint64_t len);
