/* SPDX-License-Identifier: MIT */
/*
 * Turning what a sender was asked to send into engine entries: files,
 * directories (with -r, contents after the directory itself) and symlinks
 * (sent as symlinks, never followed inside a tree). Special files are
 * skipped with a warning.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

struct src_list {
	struct engine_src *v;
	size_t n, cap;
	uint64_t total_bytes;
};

typedef void (*walk_warn_fn)(void *ud, const char *path, const char *why);

/*
 * Add `path` under the wire name `name`.
 * - rootfd == AT_FDCWD: a local path as the user typed it; a symlink given
 *   on the command line is followed (like cp and scp), symlinks inside are not.
 * - otherwise path is relative to rootfd and is resolved beneath it without
 *   following any symlink ("" is the root itself).
 * Directories need `recursive` (else -EISDIR). Returns 0, or -errno for the
 * top entry itself; problems below it go to warn and are skipped.
 */
int walk_add(struct src_list *l, int rootfd, const char *path, const char *name, bool recursive,
	     walk_warn_fn warn, void *ud);
void src_list_free(struct src_list *l);
