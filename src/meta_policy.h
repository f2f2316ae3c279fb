/* SPDX-License-Identifier: MIT */
/*
 * The one rule for the metadata a received entry gets: which mode bits
 * (set-id and sticky bits only where kept, the umask without -p, an
 * existing file's own mode kept without -p), whether the sender's owner is
 * set, and in which order owner, mode and times go on so that none undoes
 * another (a chown clears set-id bits). Every path that makes an entry for
 * a peer calls it: the engine's receiver (push and pull, files and
 * directories) and the assembler of split files. A new path that makes
 * entries must call it too; none computes a mode of its own.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct meta_policy {
	bool preserve;	 /* -p: the sender's permission bits and times */
	bool owner;	 /* the sender's uid and gid are set (--owner, where allowed) */
	bool keep_setid; /* set-id and sticky bits as sent (a module's 'keep setid') */
	mode_t umask;	 /* without -p, new entries lose these bits */
};

/*
 * The mode bits (07777) an entry of type S_IFREG or S_IFDIR ends with, from
 * the bits the sender sent and existing, the st_mode of what held its name
 * before (0: nothing, or a fresh directory). With -p: the sender's, less
 * set-id and sticky bits unless kept. Without: a regular file that is
 * replaced keeps its own permission bits (as cp and rsync leave it), a new
 * entry gets the sender's less the umask; never a set-id or sticky bit.
 */
uint32_t meta_policy_mode(const struct meta_policy *p, mode_t type, uint32_t sent,
			  uint32_t existing);

/*
 * Owner, mode and mtime on fd, an entry of type (S_IFREG, S_IFDIR) that is
 * not yet under its final name: chown first (where p->owner; it clears
 * set-id bits), then the mode of meta_policy_mode, then the mtime (with -p;
 * mtime_nsec UTIME_OMIT leaves it). 0, or -errno with *ret_what naming the
 * step that failed ("chown", "chmod", "set mtime").
 */
int meta_policy_apply_fd(const struct meta_policy *p, int fd, mode_t type, uint32_t sent_mode,
			 uint32_t existing, uid_t uid, gid_t gid, int64_t mtime_sec,
			 long mtime_nsec, const char **ret_what);
