/* SPDX-License-Identifier: MIT */
/* The metadata a received entry gets (meta_policy.h). */
#include "meta_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "proto/msg.h"

uint32_t meta_policy_mode(const struct meta_policy *p, mode_t type, uint32_t sent,
			  uint32_t existing)
{
	if (p->preserve) {
		return sent & (p->keep_setid ? 07777u : 0777u);
	}
	if (existing && (existing & S_IFMT) == (type & S_IFMT)) {
		return existing & 0777u;
	}
	return sent & 0777u & ~(uint32_t)p->umask;
}

uint32_t meta_policy_changes(const struct meta_policy *p, const struct meta_sent *sent,
			     const struct stat *st)
{
	uint32_t items = 0;

	if (p->preserve && !S_ISLNK(sent->type) &&
	    meta_policy_mode(p, sent->type, sent->mode, st->st_mode) != (st->st_mode & 07777u)) {
		items |= PROTO_ITEM_PERMS;
	}
	if (p->preserve && sent->mtime_nsec != UTIME_OMIT &&
	    (st->st_mtim.tv_sec != sent->mtime_sec || st->st_mtim.tv_nsec != sent->mtime_nsec)) {
		items |= PROTO_ITEM_TIME;
	}
	if (p->owner && st->st_uid != sent->uid) {
		items |= PROTO_ITEM_OWNER;
	}
	if (p->owner && st->st_gid != sent->gid) {
		items |= PROTO_ITEM_GROUP;
	}
	return items;
}

/* A symlink's owner and time, by name, never followed. */
static int update_symlink(const struct meta_policy *p, int dirfd, const char *leaf,
			  const struct meta_sent *sent, uint32_t changes, const char **ret_what)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
				  { .tv_sec = (time_t)sent->mtime_sec,
				    .tv_nsec = sent->mtime_nsec } };

	if ((changes & (PROTO_ITEM_OWNER | PROTO_ITEM_GROUP)) && p->owner &&
	    fchownat(dirfd, leaf, sent->uid, sent->gid, AT_SYMLINK_NOFOLLOW) < 0) {
		*ret_what = "chown";
		return negerrno();
	}
	if ((changes & PROTO_ITEM_TIME) && utimensat(dirfd, leaf, ts, AT_SYMLINK_NOFOLLOW) < 0) {
		*ret_what = "set mtime";
		return negerrno();
	}
	return 0;
}

int meta_policy_update_at(const struct meta_policy *p, int dirfd, const char *leaf,
			  const struct stat *st, const struct meta_sent *sent, uint32_t changes,
			  const char **ret_what)
{
	_cleanup_close_ int fd = -1;
	int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;

	*ret_what = "open";
	if (!(changes & PROTO_ITEMS_META)) {
		return 0;
	}
	if (S_ISLNK(st->st_mode)) {
		return update_symlink(p, dirfd, leaf, sent, changes, ret_what);
	}
	/* Opened, never followed, and proven the entry looked at before anything is set. */
	fd = openat(dirfd, leaf, flags | (S_ISDIR(st->st_mode) ? O_DIRECTORY : 0));
	if (fd < 0) {
		return negerrno();
	}
	return meta_policy_update_fd(p, fd, st, sent, changes, ret_what);
}

int meta_policy_update_fd(const struct meta_policy *p, int fd, const struct stat *st,
			  const struct meta_sent *sent, uint32_t changes, const char **ret_what)
{
	struct stat now;

	*ret_what = "stat";
	if (!(changes & PROTO_ITEMS_META)) {
		return 0;
	}
	if (fstat(fd, &now) < 0) {
		return negerrno();
	}
	if (now.st_ino != st->st_ino || now.st_dev != st->st_dev ||
	    (now.st_mode & S_IFMT) != (st->st_mode & S_IFMT)) {
		return -ESTALE;
	}
	if (S_ISDIR(now.st_mode) && !(changes & (PROTO_ITEM_PERMS | PROTO_ITEM_TIME))) {
		/* The owner alone: a directory's mode and time wait for its contents. */
		if (p->owner && fchown(fd, sent->uid, sent->gid) < 0) {
			*ret_what = "chown";
			return negerrno();
		}
		return 0;
	}
	/* Only what differs: an unchanged mtime is left as it is. */
	return meta_policy_apply_fd(
	    p, fd, st->st_mode & S_IFMT, sent->mode, now.st_mode, sent->uid, sent->gid,
	    sent->mtime_sec, (changes & PROTO_ITEM_TIME) ? sent->mtime_nsec : UTIME_OMIT, ret_what);
}

int meta_policy_own(const struct meta_policy *p, int fd, const char *leaf, uid_t uid, gid_t gid)
{
	int r;

	if (!p->owner) {
		return 0;
	}
	r = leaf ? fchownat(fd, leaf, uid, gid, AT_SYMLINK_NOFOLLOW) : fchown(fd, uid, gid);
	return r < 0 ? negerrno() : 0;
}

int meta_policy_apply_fd(const struct meta_policy *p, int fd, mode_t type, uint32_t sent_mode,
			 uint32_t existing, uid_t uid, gid_t gid, int64_t mtime_sec,
			 long mtime_nsec, const char **ret_what)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
				  { .tv_sec = (time_t)mtime_sec, .tv_nsec = mtime_nsec } };

	if (p->owner && fchown(fd, uid, gid) < 0) {
		*ret_what = "chown";
		return negerrno();
	}
	/* After the chown, which clears set-id bits the mode may keep. */
	if (fchmod(fd, meta_policy_mode(p, type, sent_mode, existing)) < 0) {
		*ret_what = "chmod";
		return negerrno();
	}
	if (p->preserve && mtime_nsec != UTIME_OMIT && futimens(fd, ts) < 0) {
		*ret_what = "set mtime";
		return negerrno();
	}
	return 0;
}
