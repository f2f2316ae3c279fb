/* SPDX-License-Identifier: MIT */
/* The metadata a received entry gets (meta_policy.h). */
#include "meta_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

uint32_t meta_policy_mode(const struct meta_policy *p, mode_t type, uint32_t sent,
			  uint32_t existing)
{
	if (p->preserve) {
		return sent & (p->keep_setid ? 07777u : 0777u);
	}
	if (S_ISREG(type) && S_ISREG(existing)) {
		return existing & 0777u;
	}
	return sent & 0777u & ~(uint32_t)p->umask;
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
