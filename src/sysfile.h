/* SPDX-License-Identifier: MIT */
/* Small kernel text files (sysfs, procfs): one value per file. */
#pragma once

#include <stddef.h>

/*
 * The first line of the small text file at path, without its newline, in
 * buf (len > 1 bytes; a longer line is cut). Returns the line's length (0 for
 * an empty line), -ENODATA for an empty file, or -errno when unreadable.
 */
int sysfile_read_line(const char *path, char *buf, size_t len);
