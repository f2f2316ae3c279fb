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
#include <sys/stat.h>
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
 * set-id and sticky bits unless kept. Without: an entry of the same type
 * there (a file replaced, a directory kept) keeps its own permission bits
 * (as cp and rsync leave them), a new entry gets the sender's less the
 * umask; never a set-id or sticky bit.
 */
uint32_t meta_policy_mode(const struct meta_policy *p, mode_t type, uint32_t sent,
			  uint32_t existing);

/* What the sender says an entry is: its type (S_IFREG, S_IFDIR, S_IFLNK) and metadata. */
struct meta_sent {
	mode_t type;
	uint32_t mode; /* permission bits (07777) */
	uid_t uid;
	gid_t gid;
	int64_t mtime_sec;
	long mtime_nsec;
};

/*
 * What differs, of the metadata the options keep, between sent and st (the
 * entry of the same type there, lstat'd): PROTO_ITEM_PERMS (-p: the mode
 * meta_policy_mode gives; a symlink has none), PROTO_ITEM_TIME (-p: the
 * mtime to the nanosecond), PROTO_ITEM_OWNER and _GROUP (where p->owner).
 * Without -p an entry there keeps its mode and times, as rsync leaves them.
 */
uint32_t meta_policy_changes(const struct meta_policy *p, const struct meta_sent *sent,
			     const struct stat *st);

/*
 * Bring the entry leaf of dirfd, st when looked at (lstat), in line with
 * sent where changes (meta_policy_changes) says it differs, by the same
 * rule and in the same order as meta_policy_apply_fd; a symlink is never
 * followed. An entry that is no longer the one looked at (another inode or
 * type) is left alone: -ESTALE. 0, or -errno with *ret_what naming the step.
 */
int meta_policy_update_at(const struct meta_policy *p, int dirfd, const char *leaf,
			  const struct stat *st, const struct meta_sent *sent, uint32_t changes,
			  const char **ret_what);

/* The same on fd, the entry looked at (a regular file or a directory), held open. */
int meta_policy_update_fd(const struct meta_policy *p, int fd, const struct stat *st,
			  const struct meta_sent *sent, uint32_t changes, const char **ret_what);

/*
 * Where p->owner, the owner of a new entry before anything else is set on
 * it: fd itself (leaf NULL), or leaf of fd, never followed (a symlink).
 * 0 or -errno.
 */
int meta_policy_own(const struct meta_policy *p, int fd, const char *leaf, uid_t uid, gid_t gid);

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
