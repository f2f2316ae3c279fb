/* SPDX-License-Identifier: MIT */
/*
 * "rdmacpd --check": module paths that someone other than root and the
 * module's own user could replace, module paths that export the kernel
 * or the whole host, and module directories their sessions can't write
 * (see modcheck.c).
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

/*
 * Call warn once if m takes pushes ('read only' not set) and its directory
 * is there, but a session of m (its uid and gid, the user's groups) can't
 * write in it or search it: every push would fail. Checked as that session
 * would be, in a child process that becomes the module's user (a daemon
 * that is not root checks as itself, as its sessions run). Returns the
 * number of warnings (0 or 1).
 */
size_t modcheck_writable(const struct module *m, void (*warn)(void *ud, const char *text),
			 void *ud);
