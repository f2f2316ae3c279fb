/* SPDX-License-Identifier: MIT */
/*
 * Config files, rdmacpd.conf and the client's: what may be read as one and
 * how. Both programs read their config through here, so the caps on a file
 * and on its lines are one rule (rdmacpd.conf(5), rdmacp(1)).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Largest config file. A real one is a few KiB, and even the daemon's 256
 * modules of a dozen short keys each stay far below the cap. A config is read
 * whole (the daemon's again on every SIGHUP), so the cap bounds the memory and
 * time a load can cost.
 */
#define CONFFILE_MAX_SIZE (UINT64_C(1) << 20)
/* Longest line, without its line end: a path of PATH_MAX and its key fit. */
#define CONFFILE_MAX_LINE 4096

/*
 * The whole of the config file at path, NUL-terminated, in *ret_text (the
 * caller frees it) and its length in *ret_len. Only a regular file of at most
 * CONFFILE_MAX_SIZE bytes is read; anything else would hang the open (a FIFO
 * nobody writes to) or the read (/dev/urandom), or cost unbounded memory.
 * Returns 0, or -errno and "PATH: problem" in why: cannot open or read it
 * (its errno), not a regular file (-EISDIR for a directory, else -EINVAL),
 * bigger than the cap or grown past it while read (-EFBIG). On failure the
 * outputs are untouched.
 */
int conffile_read(const char *path, char **ret_text, size_t *ret_len, char *why, size_t whylen);

/*
 * The line of text[0..len) that starts at *pos, without its line end ("\n",
 * and any "\r" before it), in *ret_line and *ret_line_len; *pos moves past the
 * line end. Returns false, outputs untouched, when no line is left.
 */
bool conffile_next_line(const char *text, size_t len, size_t *pos, const char **ret_line,
			size_t *ret_line_len);

/*
 * Whether a line from conffile_next_line() may be parsed: 0, or -EINVAL with
 * "NUL byte in line" or -E2BIG with "line too long (N bytes, at most M)" in
 * why, for the caller to prefix with "PATH:LINE: ".
 */
int conffile_line_check(const char *line, size_t line_len, char *why, size_t whylen);
