/* SPDX-License-Identifier: MIT */
/* Process limits both programs adjust at start. */
#pragma once

/*
 * Raise the soft RLIMIT_NOFILE to the hard limit: a transfer keeps a temp
 * file (and an O_DIRECT twin) and a directory open for every file in flight,
 * up to about three thousand descriptors. Returns the new soft limit or -errno.
 */
long limits_raise_nofile(void);
