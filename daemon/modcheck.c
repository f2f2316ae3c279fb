/* SPDX-License-Identifier: MIT */
/*
 * Module paths that deserve a warning, though they load.
 *
 * Who can replace a module directory? Whoever can rename entries of its
 * parent: the parent's owner; anyone with write permission on it; and, in a
 * sticky directory (/tmp), the owner of the entry. That holds for every
 * ancestor up to "/". rdmacpd refuses a module root that changed since the
 * config was loaded (serve.c), but that makes the module unavailable: these
 * warnings tell the administrator before a local user can.
 *
 * Which module paths hand a client the kernel or the whole host: "/", and
 * /proc, /sys and /dev (see system_dirs[]). Nothing stops an administrator
 * who means it, but a typo or a copied example should not do it silently.
 *
 * Which modules take pushes their user can't store: asked of the kernel as
 * that user (faccessat in a child that switched), so groups, ACLs and
 * read-only mounts count as they will for a session.
 */
#include "modcheck.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fspath.h"
#include "macro.h"
#include "policy.h"
#include "privs.h"

/* Anyone but root and the module's own user. */
static bool foreign_owner(const struct module *m, uid_t uid)
{
	return uid != 0 && uid != m->run_uid;
}

/* dir's entry child: can another user replace it? Text in why when so. */
static bool replaceable(const struct module *m, const char *dir, const struct stat *d,
			const struct stat *child, char *why, size_t whylen)
{
	bool writable = d->st_mode & (S_IWGRP | S_IWOTH);

	if (foreign_owner(m, d->st_uid)) {
		snprintf(why, whylen, "%s is owned by uid %u", dir, (unsigned)d->st_uid);
		return true;
	}
	if (writable && !(d->st_mode & S_ISVTX)) {
		snprintf(why, whylen, "%s is writable by %s (mode %04o)", dir,
			 d->st_mode & S_IWOTH ? "every user" : "its group", d->st_mode & 07777);
		return true;
	}
	if (writable && foreign_owner(m, child->st_uid)) {
		snprintf(why, whylen,
			 "%s is writable by others (mode %04o, sticky) and its entry is owned by "
			 "uid %u",
			 dir, d->st_mode & 07777, (unsigned)child->st_uid);
		return true;
	}
	return false;
}

size_t modcheck_module(const struct module *m, void (*warn)(void *ud, const char *text), void *ud)
{
	char dir[sizeof(m->path)], sub[sizeof(m->path)];
	char why[sizeof(m->path) + 128];
	char text[sizeof(why) + sizeof(m->path) + sizeof(m->name) + 128];
	struct stat d, child;
	size_t n = 0, len = strlen(m->path);

	/* Each proper ancestor dir, "/" first, with sub, the path one component down. */
	for (size_t i = 0; i < len; i++) {
		const char *next;

		if (m->path[i] != '/' || i + 1 == len || m->path[i + 1] == '/') {
			continue; /* not a separator, or a trailing or doubled one */
		}
		next = strchr(m->path + i + 1, '/');
		snprintf(dir, sizeof(dir), "%.*s", i ? (int)i : 1, m->path);
		snprintf(sub, sizeof(sub), "%.*s", next ? (int)(next - m->path) : (int)len,
			 m->path);
		if (lstat(dir, &d) < 0 || lstat(sub, &child) < 0) {
			continue; /* the load checked the path; a race is for OPEN to see */
		}
		if (replaceable(m, dir, &d, &child, why, sizeof(why))) {
			snprintf(text, sizeof(text),
				 "module [%s]: %s: another user could replace %s (rdmacpd then "
				 "refuses the module until a reload)",
				 m->name, why, m->path);
			warn(ud, text);
			n++;
		}
	}
	return n;
}

/*
 * path with "." and ".." components, repeated and trailing slashes resolved
 * lexically, into out (at least as big as path). The load refused any
 * symlink in a module path (fspath_open_root), so ".." means here what it
 * meant to the kernel: "/srv/../proc" is /proc.
 */
static void resolve_dots(const char *path, char *out, size_t outlen)
{
	size_t o = 0;

	assert(path[0] == '/' && outlen > strlen(path));
	while (*path) {
		size_t n;

		path += strspn(path, "/");
		n = strcspn(path, "/");
		if (n == 2 && path[0] == '.' && path[1] == '.') {
			while (o > 0 && out[--o] != '/') {
			}
		} else if (n > 0 && !(n == 1 && path[0] == '.')) {
			out[o++] = '/';
			memcpy(out + o, path, n);
			o += n;
		}
		path += n;
	}
	if (o == 0) {
		out[o++] = '/';
	}
	out[o] = '\0';
}

static bool path_is_or_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Directories whose export hands a client the kernel, not files; each with why. */
static const struct {
	const char *dir;
	bool devices_ok; /* no warning with 'devices = yes' */
	const char *why;
} system_dirs[] = {
	{ "/proc", false,
	  "/proc is the kernel's view of every process (memory, environment, open files) and "
	  "its tunables (/proc/sys)" },
	{ "/sys", false,
	  "/sys is the kernel's device and driver tree; writes there reconfigure it" },
	/*
	 * With 'devices = yes' a module under /dev is how block devices are
	 * exported; without it those are refused, and what is left is
	 * /dev/shm and /dev/mqueue: other programs' shared memory.
	 */
	{ "/dev", true,
	  "that exports no devices, only other programs' shared memory (/dev/shm, "
	  "/dev/mqueue)" },
};

size_t modcheck_system_path(const struct module *m, void (*warn)(void *ud, const char *text),
			    void *ud)
{
	char path[sizeof(m->path)];
	char text[sizeof(m->path) + sizeof(m->name) + 256];

	resolve_dots(m->path, path, sizeof(path));
	if (strcmp(path, "/") == 0) {
		snprintf(text, sizeof(text),
			 "module [%s]: path %s exports the whole host (/etc, /proc, /sys and /dev "
			 "included)",
			 m->name, m->path);
		warn(ud, text);
		return 1;
	}
	for (size_t i = 0; i < ARRAY_SIZE(system_dirs); i++) {
		if (!path_is_or_under(path, system_dirs[i].dir) ||
		    (system_dirs[i].devices_ok && m->devices)) {
			continue;
		}
		snprintf(text, sizeof(text), "module [%s]: path %s is under %s%s: %s", m->name,
			 m->path, system_dirs[i].dir,
			 system_dirs[i].devices_ok ? " without 'devices = yes'" : "",
			 system_dirs[i].why);
		warn(ud, text);
		return 1;
	}
	return 0;
}

/* 0 or -errno: can this process write in m's directory and search it? */
static int writable_here(const struct module *m)
{
	_cleanup_close_ int fd = -1;
	int r = fspath_open_root(m->path, &fd);

	if (r < 0) {
		return r;
	}
	return faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0 ? negerrno() : 0;
}

/* writable_here() as m's sessions run: in a child that became m's user (when root). */
static int writable_as_user(const struct module *m)
{
	uint64_t kept;
	char err[256];
	int status;
	pid_t pid;

	if (geteuid() != 0) {
		return writable_here(m);
	}
	pid = fork();
	if (pid < 0) {
		return negerrno();
	}
	if (pid == 0) {
		int r = privs_drop(m->run_uid, m->run_gid, 0, &kept, err, sizeof(err));

		_exit(r < 0 ? 255 : -writable_here(m) & 0xff);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			return negerrno();
		}
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) == 255) {
		return 0; /* could not look as that user: the session says it, better */
	}
	return -WEXITSTATUS(status);
}

size_t modcheck_writable(const struct module *m, void (*warn)(void *ud, const char *text), void *ud)
{
	char text[sizeof(m->path) + sizeof(m->name) + 512];
	struct passwd *pw;
	int r;

	if (!policy_module_takes_pushes(m) || !m->root_known) {
		return 0;
	}
	r = writable_as_user(m);
	if (r >= 0) {
		return 0;
	}
	pw = getpwuid(m->run_uid);
	snprintf(text, sizeof(text),
		 "module [%s]: its user %s%s%s(uid %u, gid %u) cannot write in %s (%s): every "
		 "push into it will fail; give that user write access, or set 'read only = yes'",
		 m->name, pw ? "'" : "", pw ? pw->pw_name : "", pw ? "' " : "",
		 (unsigned)m->run_uid, (unsigned)m->run_gid, m->path, strerror(-r));
	warn(ud, text);
	return 1;
}
