/* SPDX-License-Identifier: MIT */
/*
 * Who can replace a module directory? Whoever can rename entries of its
 * parent: the parent's owner; anyone with write permission on it; and, in a
 * sticky directory (/tmp), the owner of the entry. That holds for every
 * ancestor up to "/". rdmacpd refuses a module root that changed since the
 * config was loaded (serve.c), but that makes the module unavailable: these
 * warnings tell the administrator before a local user can.
 */
#include "modcheck.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
