/* SPDX-License-Identifier: MIT */
/* Byte counts as text for people, in messages about memory and limits. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* "8 MiB", "1.5 GiB", "512 bytes": exact when whole, else one decimal. */
void units_format_bytes(uint64_t v, char *buf, size_t len);
