/* SPDX-License-Identifier: MIT */
#include "memhint.h"

#include <stdint.h>
#include <sys/mman.h>

#define HUGE_PAGE ((uintptr_t)2 << 20)

void mem_hint_huge(void *p, size_t len)
{
	uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	uintptr_t b = ((uintptr_t)p + len) & ~(HUGE_PAGE - 1);

	if (!p || len < MEM_HINT_MIN || b <= a) {
		return;
	}
	(void)madvise((void *)a, b - a, MADV_HUGEPAGE);
}
