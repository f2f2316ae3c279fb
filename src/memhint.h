/* SPDX-License-Identifier: MIT */
/*
 * Hints about big tables of memory (hash sets of a tree's names, lists of
 * its entries): where the kernel gives transparent huge pages on request
 * (its "madvise" mode), a table of many megabytes is faulted in 2 MiB at a
 * time instead of 4 KiB, each fault far cheaper than 512 small ones.
 */
#pragma once

#include <stddef.h>

/*
 * Ask for huge pages under the 2 MiB-aligned part of [p, p + len): only a
 * hint (a kernel that says no leaves normal pages), nothing for less than
 * MEM_HINT_MIN bytes. For memory from calloc() or realloc(): a block this
 * big is a mapping of its own, and the hint stays with it when it is moved.
 */
void mem_hint_huge(void *p, size_t len);

#define MEM_HINT_MIN ((size_t)4 << 20)
