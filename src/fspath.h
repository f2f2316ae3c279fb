/* SPDX-License-Identifier: MIT */
/*
 * Safe paths beneath a module: every name from a peer is hostile. All
 * resolution goes through a held directory fd with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS); temp files are created O_CREAT|O_EXCL|O_NOFOLLOW, and
 * names are given with renameat()/linkat() on the held directory fd (the
 * engine's commit path fsyncs around them).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define FSPATH_MAX	4096 /* a relative path from a peer, bytes, without NUL */
#define FSPATH_NAME_MAX 255  /* one component */

/*
 * Validate a relative path from a peer: non-empty, no leading '/', no empty
 * component ("a//b"), no "." or "..", no component over NAME_MAX, total <
 * FSPATH_MAX; a trailing '/' is refused too. Control bytes are allowed (escape
 * them when printing).
 * Returns 0 or -EINVAL (-ENAMETOOLONG for length).
 */
int fspath_validate(const char *rel);

/*
 * May a received regular file take the name of an entry of type existing
 * (its st_mode; 0: nothing there)? Nothing, a regular file or a symlink: 0
 * (it is replaced). A directory: -EISDIR. A block or character device, a
 * FIFO or a socket: -EPERM, with *ret_kind naming it ("a block device"): a
 * special file is never replaced by a file (a block device is written in
 * place, where a receiver may write devices: engine_device.c). Every path
 * that puts a file under a name the peer chose asks this.
 */
int fspath_replace_rule(mode_t existing, const char **ret_kind);

/*
 * Open a module root directory by its absolute path with no symlink in any
 * component (-ELOOP if there is one; -EINVAL for a relative path).
 */
int fspath_open_root(const char *path, int *ret_fd);

/*
 * Resolve the directory part of rel beneath rootfd and return an fd for the
 * parent directory and a pointer to the leaf component inside rel.
 * mkdirs: create missing parent directories (mode 0755) one by one, each
 * with mkdirat on a held fd. Symlinks anywhere are refused (-ELOOP/-EXDEV),
 * so are escapes (-EXDEV).
 */
int fspath_open_parent(int rootfd, const char *rel, bool mkdirs, int *ret_dirfd,
		       const char **ret_leaf);

/* Open a directory beneath rootfd (rel "" or "." = the root itself). */
int fspath_open_dir(int rootfd, const char *rel, int *ret_fd);

/*
 * Open the directory rel beneath rootfd, creating it and every missing
 * directory above it (mode 0755) the way fspath_open_parent's mkdirs does.
 */
int fspath_open_or_create_dir(int rootfd, const char *rel, int *ret_fd);

/*
 * Create a temp file next to leaf in dirfd: ".<leaf>.rdmacp.<random>",
 * O_RDWR|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, mode 0600. The temp name is
 * written to ret_tmpname (at least FSPATH_NAME_MAX+1 bytes); a leaf so long
 * that the temp name would exceed NAME_MAX gets a shortened prefix.
 */
int fspath_create_temp(int dirfd, const char *leaf, int *ret_fd, char *ret_tmpname,
		       size_t tmpname_len);

/*
 * A fresh temp name for leaf: ".<leaf>.rdmacp.<8 random alnum>", the leaf part
 * shortened to stay within NAME_MAX. out needs FSPATH_NAME_MAX + 1 bytes.
 */
int fspath_temp_name(const char *leaf, char *out, size_t outlen);

/*
 * An unnamed file in dirfd (O_TMPFILE) with mode (less the umask, or as the
 * directory's default ACL gives it): a writer that dies leaves nothing
 * behind, and nobody can open it by a name while it is written. -EOPNOTSUPP
 * where the file system has no O_TMPFILE (use fspath_create_temp then).
 */
int fspath_create_anon(int dirfd, mode_t mode, int *ret_fd);

/*
 * Does directory fd carry a default ACL (which, not the umask, shapes the
 * mode of what is created in it)? 1 yes, 0 no (or no ACLs there), -errno.
 */
int fspath_dir_default_acl(int fd);

/*
 * Give the unnamed file fd the name leaf in dirfd: linked directly when the
 * name is free, else linked under a temp name and renamed over what is there
 * (atomic; a directory is never replaced: -EISDIR). Never follows a symlink.
 * The caller fsyncs fd before and dirfd after.
 */
int fspath_link_anon(int dirfd, int fd, const char *leaf);

/* Remove a temp file (ignores -ENOENT). */
int fspath_discard(int dirfd, const char *tmpname);

/*
 * The last component of a path as a user wrote it, trailing slashes ignored:
 * "a/b/c/" -> "c". What a copied entry is named after, on both ends.
 * -ENAMETOOLONG when it does not fit in outlen.
 */
int fspath_last_component(const char *path, char *out, size_t outlen);

/*
 * DIR/. (or "."): a path whose last component is "." names the directory's
 * contents, as in cp -r DIR/. DEST. Strips that "." (and the slashes after
 * it) in place, "a/b/." -> "a/b/", "." -> "", and says whether it did.
 */
bool fspath_strip_contents_dot(char *path);

/*
 * Remove temp files in dirfd left by writers that died (kill -9, a crash):
 * fspath_create_temp's writer holds an exclusive flock for its lifetime, so
 * a temp file unchanged for min_age_s (its mtime and its ctime: a hard link's
 * temp name has its file's mtime) that can be locked is stale. Returns the
 * number removed or -errno; *ret_empty (may be NULL): nothing else is there.
 */
int fspath_sweep_stale(int dirfd, unsigned min_age_s, bool *ret_empty);

/*
 * The process's umask, read without changing it (/proc/self/status; where
 * that is not readable, set and restored at once). What new entries lose
 * from the sender's mode when modes are not preserved.
 */
mode_t fspath_umask(void);

/* True for names fspath_create_temp makes (for stale-temp cleanup). */
bool fspath_is_temp_name(const char *name);
