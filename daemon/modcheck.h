/* SPDX-License-Identifier: MIT */
/*
 * "rdmacpd --check": module paths that someone other than root and the
 * module's own user could replace, and module paths that export the kernel
 * or the whole host (see modcheck.c).
 */
#pragma once

#include <stddef.h>

#include "config.h"

/*
 * Call warn once per problem found with m's path: a parent directory that
 * another user could change (rename the module directory away and put
 * another one, or a symlink, in its place). Returns the number of warnings.
 */
size_t modcheck_module(const struct module *m, void (*warn)(void *ud, const char *text), void *ud);

/*
 * Call warn once if m's path, "." and ".." resolved, is "/", or /proc, /sys
 * or /dev or under one (/dev only without 'devices = yes'). Returns the
 * number of warnings (0 or 1).
 */
size_t modcheck_system_path(const struct module *m, void (*warn)(void *ud, const char *text),
			    void *ud);
