/* SPDX-License-Identifier: MIT */
/*
 * Dropping root in a session (see privs.h). The order matters: what needs a
 * capability (RLIMIT_MEMLOCK above the hard limit, the bounding set, the
 * groups) comes before setresuid, which takes the capabilities away; then
 * the result is read back and checked, so that a kernel or a container that
 * quietly did less is an error and not a session running as root.
 */
#include "privs.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macro.h"

#define PRIVS_MAX_GROUPS 65536 /* NGROUPS_MAX */
#define PRIVS_MAX_CAP	 63

uint64_t privs_root_caps(void)
{
	/*
	 * Storing files anywhere in the module and, with "preserve owner",
	 * giving them away: no SETUID/SETGID (the identity is final), no
	 * SYS_ADMIN, NET_*, SYS_PTRACE, MKNOD, ... IPC_LOCK spares root's
	 * shared locked-memory count (every root process on the host adds
	 * to it) from our pinned buffers.
	 */
	return UINT64_C(1) << CAP_CHOWN | UINT64_C(1) << CAP_DAC_OVERRIDE |
	       UINT64_C(1) << CAP_DAC_READ_SEARCH | UINT64_C(1) << CAP_FOWNER |
	       UINT64_C(1) << CAP_FSETID | UINT64_C(1) << CAP_IPC_LOCK;
}

uint64_t privs_preauth_caps(void)
{
	/* What privs_drop needs, and what a root module's session keeps. */
	return privs_root_caps() | UINT64_C(1) << CAP_SETUID | UINT64_C(1) << CAP_SETGID |
	       UINT64_C(1) << CAP_SETPCAP | UINT64_C(1) << CAP_SYS_RESOURCE;
}

_printf_(3, 4) static int failed(char *err, size_t errlen, const char *fmt, ...)
{
	int r = -errno;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return r < 0 ? r : -EPERM;
}

static int caps_get(uint64_t *ret_eff, uint64_t *ret_perm, uint64_t *ret_inh)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { 0 };

	if (syscall(SYS_capget, &h, d) < 0) {
		return negerrno();
	}
	*ret_eff = (uint64_t)d[1].effective << 32 | d[0].effective;
	*ret_perm = (uint64_t)d[1].permitted << 32 | d[0].permitted;
	*ret_inh = (uint64_t)d[1].inheritable << 32 | d[0].inheritable;
	return 0;
}

/* Effective = permitted = caps, inheritable empty. */
static int caps_set(uint64_t caps)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { 0 };

	d[0].effective = d[0].permitted = (uint32_t)caps;
	d[1].effective = d[1].permitted = (uint32_t)(caps >> 32);
	return syscall(SYS_capset, &h, d) < 0 ? negerrno() : 0;
}

/* Everything not in keep out of the bounding set (needs CAP_SETPCAP). */
static int bounding_drop(uint64_t keep)
{
	for (int cap = 0; cap <= PRIVS_MAX_CAP; cap++) {
		int have = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);

		if (have < 0) {
			break; /* past the kernel's last capability */
		}
		if (have && !(keep & (UINT64_C(1) << cap)) &&
		    prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			return negerrno();
		}
	}
	return 0;
}

static bool bounding_within(uint64_t keep)
{
	for (int cap = 0; cap <= PRIVS_MAX_CAP; cap++) {
		int have = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);

		if (have < 0) {
			break;
		}
		if (have && !(keep & (UINT64_C(1) << cap))) {
			return false;
		}
	}
	return true;
}

/* The user's groups (initgroups(3)'s list, gid included), or just gid. */
static int user_groups(uid_t uid, gid_t gid, gid_t **ret, int *ret_n)
{
	struct passwd pw, *res = NULL;
	_cleanup_free_ char *buf = NULL;
	_cleanup_free_ gid_t *groups = NULL;
	long bufsize = sysconf(_SC_GETPW_R_SIZE_MAX);
	int n = 64;

	bufsize = bufsize > 0 ? bufsize : 16384;
	buf = malloc((size_t)bufsize);
	if (!buf) {
		return -ENOMEM;
	}
	for (;;) {
		groups = calloc((size_t)n, sizeof(*groups));
		if (!groups) {
			return -ENOMEM;
		}
		if (getpwuid_r(uid, &pw, buf, (size_t)bufsize, &res) != 0 || !res) {
			/* No user entry (a bare number in the config): the group alone. */
			groups[0] = gid;
			*ret_n = 1;
			*ret = TAKE_PTR(groups);
			return 0;
		}
		int want = n;
		if (getgrouplist(pw.pw_name, gid, groups, &want) >= 0) {
			*ret_n = want;
			*ret = TAKE_PTR(groups);
			return 0;
		}
		if (want <= n || want > PRIVS_MAX_GROUPS) {
			return -E2BIG;
		}
		free(TAKE_PTR(groups));
		n = want;
	}
}

void privs_preload_nss(void)
{
	_cleanup_free_ gid_t *groups = NULL;
	int n = 0;

	(void)user_groups(getuid(), getgid(), &groups, &n);
}

const char *privs_missing(void)
{
	static const struct {
		int cap;
		const char *name;
	} need[] = {
		{ CAP_SETUID, "CAP_SETUID" },
		{ CAP_SETGID, "CAP_SETGID" },
		{ CAP_SETPCAP, "CAP_SETPCAP" },
	};
	uint64_t eff, perm, inh;

	if (caps_get(&eff, &perm, &inh) < 0) {
		return "capget";
	}
	for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
		if (!(eff & UINT64_C(1) << need[i].cap)) {
			return need[i].name;
		}
	}
	return NULL;
}

bool privs_memlock_settable(uint64_t memlock)
{
	struct rlimit rl;
	uint64_t eff, perm, inh;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
	    (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= memlock)) {
		return true; /* lowering needs no privilege */
	}
	return caps_get(&eff, &perm, &inh) == 0 && (eff & UINT64_C(1) << CAP_SYS_RESOURCE);
}

/*
 * RLIMIT_MEMLOCK = memlock, soft and hard (a session can't raise it again).
 * Where that can't be done, the session keeps CAP_IPC_LOCK alone instead, if
 * it has it: returns the capabilities to keep.
 */
static uint64_t set_memlock(uint64_t memlock, uint64_t perm)
{
	struct rlimit rl = { .rlim_cur = memlock, .rlim_max = memlock };
	struct rlimit old;

	/* Raising the hard limit needs CAP_SYS_RESOURCE, lowering it does not. */
	if (setrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		return 0;
	}
	if (perm & UINT64_C(1) << CAP_IPC_LOCK) {
		return UINT64_C(1) << CAP_IPC_LOCK;
	}
	/* As much as the hard limit allows; pool.c explains a shortfall. */
	if (getrlimit(RLIMIT_MEMLOCK, &old) == 0) {
		old.rlim_cur = old.rlim_max;
		(void)setrlimit(RLIMIT_MEMLOCK, &old);
	}
	return 0;
}

int privs_limit_preauth(char *err, size_t errlen)
{
	uint64_t keep = privs_preauth_caps(), eff, perm, inh;
	int r;

	r = caps_get(&eff, &perm, &inh);
	if (r >= 0) {
		keep &= perm;
		r = bounding_drop(keep);
	}
	if (r >= 0) {
		r = caps_set(keep);
	}
	if (r >= 0 && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL) {
		r = negerrno();
	}
	if (r < 0) {
		errno = -r;
		return failed(err, errlen, "capabilities before authentication: %s%s", strerror(-r),
			      r == -EPERM ? " (rdmacpd needs CAP_SETPCAP)" : "");
	}
	return 0;
}

int privs_drop(uid_t uid, gid_t gid, uint64_t memlock, uint64_t *ret_kept, char *err, size_t errlen)
{
	uint64_t keep = uid == 0 ? privs_root_caps() : 0, eff, perm, inh;
	_cleanup_free_ gid_t *groups = NULL;
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	int ngroups = 0, r;

	r = caps_get(&eff, &perm, &inh);
	if (r < 0) {
		errno = -r;
		return failed(err, errlen, "capget: %s", strerror(-r));
	}
	keep &= perm; /* a root whose bounding set was cut already (systemd) */
	r = user_groups(uid, gid, &groups, &ngroups);
	if (r < 0) {
		errno = -r;
		return failed(err, errlen, "groups of uid %u: %s", (unsigned)uid, strerror(-r));
	}
	if (uid != 0) {
		keep = set_memlock(memlock, perm);
	}
	r = bounding_drop(keep);
	if (r < 0) {
		errno = -r;
		return failed(err, errlen, "capability bounding set: %s%s", strerror(-r),
			      r == -EPERM ? " (rdmacpd needs CAP_SETPCAP)" : "");
	}
	if (setgroups((size_t)ngroups, groups) < 0) {
		return failed(err, errlen, "setgroups: %m");
	}
	if (setresgid(gid, gid, gid) < 0) {
		return failed(err, errlen, "setresgid %u: %m", (unsigned)gid);
	}
	/* Only to carry CAP_IPC_LOCK over into a session that is not root. */
	if (uid != 0 && keep && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0) {
		return failed(err, errlen, "keepcaps: %m");
	}
	if (setresuid(uid, uid, uid) < 0) {
		return failed(err, errlen, "setresuid %u: %m", (unsigned)uid);
	}
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0) {
		return failed(err, errlen, "keepcaps: %m");
	}
	r = caps_set(keep);
	if (r < 0) {
		errno = -r;
		return failed(err, errlen, "capset: %s", strerror(-r));
	}
	/* EINVAL: a kernel before ambient capabilities (4.3), which has none to clear. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) {
		return failed(err, errlen, "clear ambient capabilities: %m");
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		return failed(err, errlen, "no_new_privs: %m");
	}
	/* Another process of the same user must not read the TLS key out of us. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		return failed(err, errlen, "dumpable: %m");
	}

	/* Read it all back. */
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0) {
		return failed(err, errlen, "getresuid: %m");
	}
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid) {
		errno = EPERM;
		return failed(err, errlen, "still uid %u/%u/%u gid %u/%u/%u after the switch",
			      (unsigned)ru, (unsigned)eu, (unsigned)su, (unsigned)rg, (unsigned)eg,
			      (unsigned)sg);
	}
	r = caps_get(&eff, &perm, &inh);
	if (r < 0 || eff != keep || perm != keep || inh != 0 || !bounding_within(keep)) {
		errno = EPERM;
		return failed(err, errlen,
			      "capabilities left after the switch (effective %#llx, permitted "
			      "%#llx, inheritable %#llx)",
			      (unsigned long long)eff, (unsigned long long)perm,
			      (unsigned long long)inh);
	}
	if (uid != 0 && setresuid(0, 0, 0) == 0) {
		errno = EPERM;
		return failed(err, errlen, "could become root again");
	}
	*ret_kept = keep;
	return 0;
}
