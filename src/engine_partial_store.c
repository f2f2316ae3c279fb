/* SPDX-License-Identifier: MIT */
/*
 * The --partial store of a directory (ENGINE_PARTIAL_DIR beneath it), as
 * every receiver sees it: opened never through a symlink, and swept of the
 * files of cut runs nobody resumed (engine_partial_sweep, for each
 * directory a receiver writes, with --partial or not). What a resumable
 * file keeps there is engine_partial.c's.
 */
#include "engine-internal.h"
#include "engine_partial.h"

#include <sys/file.h>

#include "dirread.h"

/* The store beneath dirfd, created (0700) when create is set; never through a symlink. */
int partial_store_open(int dirfd, bool create, int *ret_fd)
{
	int r;

	if (create && mkdirat(dirfd, ENGINE_PARTIAL_DIR, 0700) < 0 && errno != EEXIST) {
		return negerrno();
	}
	r = fspath_open_dir(dirfd, ENGINE_PARTIAL_DIR, ret_fd);
	return r;
}

/* "<32 hex of XXH3-128(leaf)><suffix>" */
void partial_name(const char *leaf, const char *suffix, char *out, size_t outlen)
{
	XXH128_canonical_t c;
	uint8_t h[HASH_LEN];
	char hex[2 * HASH_LEN + 1];

	XXH128_canonicalFromHash(&c, XXH3_128bits(leaf, strlen(leaf)));
	memcpy(h, c.digest, HASH_LEN);
	hash_to_hex(h, hex);
	snprintf(out, outlen, "%s%s", hex, suffix);
}

/* "<32 hex>.data", ".jnl" or ".jnl.new": a name the store may hold. */
static bool store_name(const char *n)
{
	size_t i = 0;

	while (i < 2 * HASH_LEN && n[i] && strchr("0123456789abcdef", n[i])) {
		i++;
	}
	return i == 2 * HASH_LEN &&
	       (!strcmp(n + i, ".data") || !strcmp(n + i, ".jnl") || !strcmp(n + i, ".jnl.new"));
}

int engine_partial_sweep(int parent, uint64_t max_age_s)
{
	_cleanup_close_ int store = -1;
	struct timespec now;
	const struct dirent64 *de;
	struct dir_reader *d;
	int removed = 0;

	if (max_age_s == 0) {
		return 0;
	}
	int r = partial_store_open(parent, false, &store);
	if (r < 0) {
		return r == -ENOENT ? 0 : r;
	}
	r = dir_reader_open(store, &d);
	if (r < 0) {
		return r;
	}
	store = -1;
	clock_gettime(CLOCK_REALTIME, &now);
	/* A read error ends the sweep: what is left is for the next one. */
	while (dir_reader_next(d, &de) > 0) {
		_cleanup_close_ int fd = -1;
		struct stat sb;

		if (!store_name(de->d_name)) {
			continue;
		}
		fd = openat(dir_reader_fd(d), de->d_name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
		    (uint64_t)sb.st_mtim.tv_sec + max_age_s > (uint64_t)now.tv_sec) {
			continue;
		}
		/* A data file a live session writes is locked (and young). */
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			continue;
		}
		if (unlinkat(dir_reader_fd(d), de->d_name, 0) == 0) {
			removed++;
		}
	}
	dir_reader_close(d);
	unlinkat(parent, ENGINE_PARTIAL_DIR, AT_REMOVEDIR);
	return removed;
}

int engine_partial_forget(int parent, const char *leaf)
{
	static const char *const suffixes[] = { ".data", ".jnl", ".jnl.new" };
	_cleanup_close_ int store = -1;
	int r = partial_store_open(parent, false, &store);

	if (r < 0) {
		return r == -ENOENT ? 0 : r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
		_cleanup_close_ int fd = -1;
		char name[2 * HASH_LEN + 16];

		partial_name(leaf, suffixes[i], name, sizeof(name));
		fd = openat(store, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		/* A data file a live session writes is locked: left to it. */
		if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
			continue;
		}
		unlinkat(store, name, 0);
	}
	unlinkat(parent, ENGINE_PARTIAL_DIR, AT_REMOVEDIR);
	return 0;
}
