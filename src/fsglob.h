/* SPDX-License-Identifier: MIT */
/*
 * Wildcards in a peer's path, expanded beneath a held directory fd, as scp
 * and rsync expand a remote source such as dir/?.img: each component with a
 * wildcard (asterisk, ? or [..]) is
 * matched against its directory's entries with fnmatch(FNM_PERIOD) (so a
 * wildcard never matches a leading dot), never following a symlink and
 * never leaving the root ("." and ".." are refused by fspath_validate).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Does s hold a wildcard character (*, ? or [)? */
bool fsglob_has_magic(const char *s);

struct fsglob {
	char **paths; /* relative to the root, sorted per directory */
	size_t n, cap;
};

/*
 * Expand pattern (a relative path as fspath_validate accepts it) beneath
 * rootfd. A match is a regular file, a directory or a symlink (the link
 * itself: never followed) reached through directories only: no symlink is
 * gone through, special files never match, and a directory that can't be
 * opened is passed over, as a shell does.
 * At most max_matches matches and max_scanned directory entries read
 * (both > 0): beyond either, -E2BIG. Returns 0 with ret filled (n may be 0:
 * no match), -EINVAL for a bad pattern (more than FSGLOB_MAX_MAGIC wildcard
 * components, too), -ENOMEM. On failure nothing stays allocated.
 */
#define FSGLOB_MAX_MAGIC 16
int fsglob_expand(int rootfd, const char *pattern, uint64_t max_matches, uint64_t max_scanned,
		  struct fsglob *ret);
void fsglob_free(struct fsglob *g);
