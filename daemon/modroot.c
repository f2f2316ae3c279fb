/* SPDX-License-Identifier: MIT */
/*
 * A module's root directory (modroot.h). Pinned once, by the loader
 * (config_module.c) or by the supervisor at a connection after a path
 * missing at load appeared (supervisor_find_modules); a session forked
 * after that has the identity in its copy of the configuration, and refuses
 * anything else at that path: a directory swapped in by whoever can write a
 * parent (SECURITY.md G41), or the empty mount point under a file system
 * mounted since the pin (a reload pins again).
 */
#include "modroot.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fspath.h"
#include "macro.h"

/* The module's path opened as a directory (never through a symlink), and its stat. */
static int root_open(const struct module *m, int *ret_fd, struct stat *st)
{
	_cleanup_close_ int fd = -1;
	int r = fspath_open_root(m->path, &fd);

	if (r >= 0 && fstat(fd, st) < 0) {
		r = negerrno();
	}
	if (r >= 0) {
		*ret_fd = TAKE_FD(fd);
	}
	return r;
}

/* Why a path is not a module root, for errno err (positive). */
static const char *root_why(int err)
{
	return err == ELOOP	? "a symlink in the path (refused)"
	       : err == ENOTDIR ? "not a directory"
				: strerror(err);
}

int modroot_pin(struct module *m)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r = root_open(m, &fd, &st);

	if (r < 0) {
		m->root_known = false;
		m->root_errno = -r;
		return r;
	}
	m->root_known = true;
	m->root_errno = 0;
	m->root_dev = st.st_dev;
	m->root_ino = st.st_ino;
	return 0;
}

const char *modroot_missing_why(const struct module *m)
{
	return m->root_errno == 0 ? "not found yet" : root_why(m->root_errno);
}

int modroot_open(const struct module *m, int *ret_fd, char *why, size_t whylen)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r = root_open(m, &fd, &st);

	if (r < 0) {
		snprintf(why, whylen, "cannot open %s: %s", m->path, root_why(-r));
		return r;
	}
	if (!m->root_known) {
		/* Appeared after this session forked: the next connection pins it. */
		snprintf(why, whylen,
			 "%s appeared after this connection began: the next one serves it",
			 m->path);
		return -EAGAIN;
	}
	if (st.st_dev != m->root_dev || st.st_ino != m->root_ino) {
		snprintf(why, whylen,
			 "%s is not the directory loaded from the configuration (device/inode "
			 "%llu/%llu, now %llu/%llu): refused; reload rdmacpd if it was moved or "
			 "mounted over on purpose",
			 m->path, (unsigned long long)m->root_dev, (unsigned long long)m->root_ino,
			 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
		return -ESTALE;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

bool modroot_available(const struct module *m)
{
	_cleanup_close_ int fd = -1;

	return modroot_open(m, &fd, NULL, 0) >= 0;
}
