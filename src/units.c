/* SPDX-License-Identifier: MIT */
/* Byte counts as text (see units.h). */
#include "units.h"

#include <inttypes.h>
#include <stdio.h>

#include "macro.h"

void units_format_bytes(uint64_t v, char *buf, size_t len)
{
	static const char *const units[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	unsigned u = 0;
	uint64_t div = 1;

	while (u + 1 < ARRAY_SIZE(units) && v >= div * 1024) {
		div *= 1024;
		u++;
	}
	if (v % div == 0) {
		snprintf(buf, len, "%" PRIu64 " %s", v / div, units[u]);
	} else {
		snprintf(buf, len, "%.1f %s", (double)v / (double)div, units[u]);
	}
}
