/* SPDX-License-Identifier: MIT */
/*
 * A --files-from list: the names to send, relative to one source directory,
 * one a line (or each ended by a NUL, -0). Reading only: what a name means
 * (it must exist beneath the directory, never escape it) is the caller's to
 * check, entry by entry.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define FILES_LIST_MAX (1u << 22) /* names in one list (4 Mi) */

struct files_list {
	char **names;
	size_t n, cap;
};

/*
 * Read the list at path ("-": standard input). Empty names are skipped; a
 * trailing "/" and leading "./" are dropped and "//" is read as "/" (so
 * "./a//b/" is "a/b"), nothing else is changed: ".." and absolute names are
 * kept for the caller to refuse. Returns 0, or -ENAMETOOLONG (a name over
 * PROTO_MAX_PATH bytes), -E2BIG (over FILES_LIST_MAX names), -ENOMEM, or
 * the error of the file; *ret_entry is the entry at fault (1-based, 0 for
 * the file itself). On failure nothing stays allocated.
 */
int files_list_read(const char *path, bool from0, struct files_list *ret, size_t *ret_entry);

/*
 * Drop a name listed before, and with `recursive` a name below another
 * listed name (that one's walk sends it): order otherwise kept. 0 or -ENOMEM.
 */
int files_list_prune(struct files_list *l, bool recursive);

void files_list_free(struct files_list *l);
