/* SPDX-License-Identifier: MIT */
/*
 * A session giving up root for its module's user (rsyncd's model): one
 * identity per session, for good, with no capability left over.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Become uid/gid for the rest of the process: supplementary groups (the
 * user's, from the group database, or none when uid has no user entry),
 * then setresgid, setresuid, and every capability gone from the effective,
 * permitted, inheritable, ambient and bounding sets; no new privileges, not
 * dumpable (the TLS key is in this process's memory). For uid 0 (a module
 * with "uid = root" written out) the sets keep only privs_root_caps().
 *
 * memlock: RLIMIT_MEMLOCK (soft and hard) for a session that is not root.
 * io_uring charges registered buffers to the *user* while it checks the
 * *process* limit, so it must cover everything all sessions of one user pin
 * together (the daemon's memory budget), not one session. Where the limit
 * can't be raised that far (a hard limit below it and no CAP_SYS_RESOURCE),
 * the session keeps CAP_IPC_LOCK alone instead, if the daemon has it.
 * *ret_kept: the capabilities kept (a bit per CAP_*).
 *
 * Returns 0, or a negative errno with err naming the step that failed; the
 * process is then in an unknown state and must exit. Only for a process that
 * is root; the caller checks.
 */
int privs_drop(uid_t uid, gid_t gid, uint64_t memlock, uint64_t *ret_kept, char *err,
	       size_t errlen);

/* Capabilities a root session keeps: chown, DAC override/read, fowner, fsetid, ipc_lock. */
uint64_t privs_root_caps(void);

/* Can privs_drop set RLIMIT_MEMLOCK to memlock here (else CAP_IPC_LOCK stays)? */
bool privs_memlock_settable(uint64_t memlock);

/*
 * Before a session has authenticated anyone: only the capabilities that
 * privs_drop and a root module's session need (privs_preauth_caps()) stay,
 * in every set, so the TLS handshake and HELLO never run with the rest of
 * root's (CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_NET_ADMIN, ...). Returns 0 or a
 * negative errno with err set.
 */
int privs_limit_preauth(char *err, size_t errlen);
uint64_t privs_preauth_caps(void);

/*
 * Load the name service modules privs_drop's group lookup uses (getpwuid_r,
 * getgrouplist) into this process, the listener, once: every session forked
 * from it then finds them loaded instead of loading them itself (a dlopen of
 * libnss_systemd and what it needs, per session). The session still looks
 * its user up afresh. Nothing is kept, and a failure here changes nothing.
 */
void privs_preload_nss(void);

/* For a root daemon: the first capability privs_drop needs and lacks, or NULL. */
const char *privs_missing(void);
