/* SPDX-License-Identifier: MIT */
/*
 * A module's root directory: found and pinned (its device and inode) at
 * load, or later, once a path missing at load appears; opened for each
 * request only as the directory pinned. A module whose directory is not
 * there (a file system not mounted yet, a typo) is unavailable, and only
 * that module: the daemon serves the others.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/*
 * Look for m's directory, with no symlink in the path (fspath_open_root).
 * Found: m->root_known, its identity kept, 0. Not: m->root_errno set and
 * -errno (-ELOOP: a symlink in the path, -ENOTDIR: not a directory).
 */
int modroot_pin(struct module *m);

/*
 * m's root, opened as the pinned directory, into *ret_fd. -errno otherwise,
 * with the reason in why for the daemon's log (not for the client: it names
 * the path and what is wrong with it); why may be NULL with whylen 0.
 */
int modroot_open(const struct module *m, int *ret_fd, char *why, size_t whylen);

/* Can m be served now (what a listing of modules says)? */
bool modroot_available(const struct module *m);

/* What keeps a module without a pinned root unavailable, for the log. */
const char *modroot_missing_why(const struct module *m);
