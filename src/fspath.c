/* SPDX-License-Identifier: MIT */
/*
 * Safe paths beneath a module. Every name that reaches here may come from a
 * peer: it is validated lexically first, then resolved only through held
 * directory fds with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS), so that neither a symlink planted in the tree nor a
 * parent swapped during a transfer can lead a write outside the module.
 */
#include "fspath.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/xattr.h>
#include <sys/random.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dirread.h"
#include "macro.h"

#define FSPATH_RESOLVE	 (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define FSPATH_DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_CLOEXEC)

#define TEMP_TAG      ".rdmacp."
#define TEMP_TAG_LEN  (sizeof(TEMP_TAG) - 1)
#define TEMP_RAND_LEN 8
/* "." + leaf + ".rdmacp." + random */
#define TEMP_OVERHEAD	  (1 + TEMP_TAG_LEN + TEMP_RAND_LEN)
#define TEMP_CREATE_TRIES 16

static const char alnum[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

static int openat2_beneath(int dirfd, const char *path, uint64_t flags, uint64_t mode)
{
	struct open_how how = {
		.flags = flags,
		.mode = mode,
		.resolve = FSPATH_RESOLVE,
	};
	int fd;

	/* EAGAIN: a concurrent rename raced the resolution; the kernel asks us to retry. */
	do {
		fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	} while (fd < 0 && errno == EAGAIN);
	return fd < 0 ? negerrno() : fd;
}

/*
 * Control characters are legal in Linux names and users have them (rsync
 * copies them too): they are allowed here and escaped wherever a name is
 * printed. Only NUL (impossible in a C string) and '/' are not name bytes.
 */
static bool byte_ok(unsigned char c)
{
	return c != '\0';
}

/* One component of len bytes: non-empty, not "." or "..", no '/'. */
static int component_validate(const char *s, size_t len)
{
	if (len == 0) {
		return -EINVAL;
	}
	if (len > FSPATH_NAME_MAX) {
		return -ENAMETOOLONG;
	}
	if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.')) {
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '/' || !byte_ok((unsigned char)s[i])) {
			return -EINVAL;
		}
	}
	return 0;
}

static int leaf_validate(const char *leaf)
{
	if (!leaf) {
		return -EINVAL;
	}
	return component_validate(leaf, strnlen(leaf, FSPATH_NAME_MAX + 1));
}

int fspath_validate(const char *rel)
{
	size_t len;
	const char *p;

	if (!rel) {
		return -EINVAL;
	}
	len = strnlen(rel, FSPATH_MAX);
	if (len >= FSPATH_MAX) {
		return -ENAMETOOLONG;
	}
	if (len == 0 || rel[0] == '/') {
		return -EINVAL;
	}
	p = rel;
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t clen = slash ? (size_t)(slash - p) : strlen(p);
		int r = component_validate(p, clen);

		if (r < 0) {
			return r;
		}
		if (!slash) {
			return 0;
		}
		/* A trailing '/' leaves an empty last component: refused on the next pass. */
		p = slash + 1;
	}
}

int fspath_open_root(const char *path, int *ret_fd)
{
	struct open_how how = {
		.flags = FSPATH_DIR_FLAGS,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd;

	assert(path && ret_fd);
	if (path[0] != '/') {
		return -EINVAL;
	}
	/*
	 * The path is the administrator's, but its parents may not be: whoever
	 * can write to one could put a symlink in its place, so no component
	 * may be one. (The caller also checks the directory's identity.)
	 */
	do {
		fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	} while (fd < 0 && errno == EAGAIN);
	if (fd < 0) {
		return negerrno();
	}
	*ret_fd = fd;
	return 0;
}

/* Open (and with mkdirs, create) one directory component beneath dirfd. */
static int open_component_dir(int dirfd, const char *name, bool mkdirs)
{
	for (int tries = 0; tries < 8; tries++) {
		int fd = openat2_beneath(dirfd, name, FSPATH_DIR_FLAGS, 0);

		if (fd >= 0 || fd != -ENOENT || !mkdirs) {
			return fd;
		}
		/* Lost a race with another creator: fine, open what is there (checked again). */
		if (mkdirat(dirfd, name, 0755) < 0 && errno != EEXIST) {
			return negerrno();
		}
	}
	/* Someone keeps removing what we create. */
	return -ENOENT;
}

static int open_parent_walk(int rootfd, char *dirpart, int *ret_fd)
{
	_cleanup_close_ int cur = -1;
	char *save = NULL;

	/*
	 * Mostly the directories are there: one resolution of the whole path,
	 * under the same rules as each step's. Only a missing one (ENOENT) takes
	 * the walk that makes it; any other error is the walk's too.
	 */
	cur = openat2_beneath(rootfd, dirpart, FSPATH_DIR_FLAGS, 0);
	if (cur != -ENOENT) {
		if (cur < 0) {
			return cur;
		}
		*ret_fd = TAKE_FD(cur);
		return 0;
	}
	cur = openat2_beneath(rootfd, ".", FSPATH_DIR_FLAGS, 0);
	if (cur < 0) {
		return cur;
	}
	for (char *c = strtok_r(dirpart, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int next = open_component_dir(cur, c, true);

		if (next < 0) {
			return next;
		}
		close(cur);
		cur = next;
	}
	*ret_fd = TAKE_FD(cur);
	return 0;
}

int fspath_open_parent(int rootfd, const char *rel, bool mkdirs, int *ret_dirfd,
		       const char **ret_leaf)
{
	char dirpart[FSPATH_MAX];
	const char *slash;
	size_t dlen;
	int fd, r;

	assert(ret_dirfd && ret_leaf);
	r = fspath_validate(rel);
	if (r < 0) {
		return r;
	}
	slash = strrchr(rel, '/');
	if (!slash) {
		fd = openat2_beneath(rootfd, ".", FSPATH_DIR_FLAGS, 0);
		if (fd < 0) {
			return fd;
		}
		*ret_dirfd = fd;
		*ret_leaf = rel;
		return 0;
	}
	dlen = (size_t)(slash - rel);
	assert(dlen > 0 && dlen < sizeof(dirpart));
	memcpy(dirpart, rel, dlen);
	dirpart[dlen] = '\0';

	if (mkdirs) {
		r = open_parent_walk(rootfd, dirpart, &fd);
		if (r < 0) {
			return r;
		}
	} else {
		fd = openat2_beneath(rootfd, dirpart, FSPATH_DIR_FLAGS, 0);
		if (fd < 0) {
			return fd;
		}
	}
	*ret_dirfd = fd;
	*ret_leaf = slash + 1;
	return 0;
}

int fspath_open_dir(int rootfd, const char *rel, int *ret_fd)
{
	int fd, r;

	assert(rel && ret_fd);
	if (rel[0] == '\0' || strcmp(rel, ".") == 0) {
		rel = ".";
	} else {
		r = fspath_validate(rel);
		if (r < 0) {
			return r;
		}
	}
	fd = openat2_beneath(rootfd, rel, FSPATH_DIR_FLAGS, 0);
	if (fd < 0) {
		return fd;
	}
	*ret_fd = fd;
	return 0;
}

int fspath_open_or_create_dir(int rootfd, const char *rel, int *ret_fd)
{
	char path[FSPATH_MAX];
	int r;

	assert(rel && ret_fd);
	r = fspath_validate(rel);
	if (r < 0) {
		return r;
	}
	snprintf(path, sizeof(path), "%s", rel);
	return open_parent_walk(rootfd, path, ret_fd);
}

static int random_alnum(char *out, size_t n)
{
	size_t filled = 0;

	while (filled < n) {
		unsigned char buf[32];
		ssize_t got = getrandom(buf, sizeof(buf), 0);

		if (got < 0) {
			if (errno == EINTR) {
				continue;
			}
			return negerrno();
		}
		for (ssize_t i = 0; i < got && filled < n; i++) {
			/* Reject the top bytes so that every character is equally likely. */
			if (buf[i] < 248) {
				out[filled++] = alnum[buf[i] % 62];
			}
		}
	}
	return 0;
}

int fspath_temp_name(const char *leaf, char *out, size_t outlen)
{
	char rnd[TEMP_RAND_LEN];
	size_t prefix;
	int r;

	r = leaf_validate(leaf);
	if (r < 0) {
		return r;
	}
	if (outlen < FSPATH_NAME_MAX + 1) {
		return -EINVAL;
	}
	/* Keep the whole name within NAME_MAX by cutting the leaf part short. */
	prefix = MIN(strlen(leaf), (size_t)FSPATH_NAME_MAX - TEMP_OVERHEAD);
	r = random_alnum(rnd, sizeof(rnd));
	if (r < 0) {
		return r;
	}
	out[0] = '.';
	memcpy(out + 1, leaf, prefix);
	memcpy(out + 1 + prefix, TEMP_TAG, TEMP_TAG_LEN);
	memcpy(out + 1 + prefix + TEMP_TAG_LEN, rnd, TEMP_RAND_LEN);
	out[TEMP_OVERHEAD + prefix] = '\0';
	return 0;
}

int fspath_create_temp(int dirfd, const char *leaf, int *ret_fd, char *ret_tmpname,
		       size_t tmpname_len)
{
	char name[FSPATH_NAME_MAX + 1];
	int r;

	assert(ret_fd && ret_tmpname);
	if (tmpname_len < FSPATH_NAME_MAX + 1) {
		return -EINVAL;
	}
	for (int tries = 0; tries < TEMP_CREATE_TRIES; tries++) {
		int fd;

		r = fspath_temp_name(leaf, name, sizeof(name));
		if (r < 0) {
			return r;
		}
		/* O_EXCL: never reuse, never follow, whatever already has this name. */
		fd = openat2_beneath(dirfd, name,
				     O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd == -EEXIST) {
			continue;
		}
		if (fd < 0) {
			return fd;
		}
		/*
		 * The writer holds an exclusive lock for as long as it lives: a
		 * temp file that can be locked belongs to a dead writer (see
		 * fspath_sweep_stale). The lock goes with the process.
		 */
		flock(fd, LOCK_EX | LOCK_NB);
		memcpy(ret_tmpname, name, strlen(name) + 1);
		*ret_fd = fd;
		return 0;
	}
	return -EEXIST;
}

int fspath_sweep_stale(int dfd_in, unsigned min_age_s, bool *ret_empty)
{
	_cleanup_close_ int dfd = -1;
	struct timespec now;
	const struct dirent64 *de;
	struct dir_reader *d;
	int removed = 0, kept = 0, r;

	dfd = openat2_beneath(dfd_in, ".", FSPATH_DIR_FLAGS, 0);
	if (dfd < 0) {
		return dfd;
	}
	r = dir_reader_open(dfd, &d);
	if (r < 0) {
		return r;
	}
	dfd = -1;
	clock_gettime(CLOCK_REALTIME, &now);
	/* A read error ends the sweep: what is left is for the next one. */
	while ((r = dir_reader_next(d, &de)) > 0) {
		_cleanup_close_ int fd = -1;
		struct stat st;

		kept++;
		if (!fspath_is_temp_name(de->d_name)) {
			continue;
		}
		fd = openat(dir_reader_fd(d), de->d_name,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			continue;
		}
		/*
		 * Young: changed (ctime) or written (mtime) in the last min_age_s. A
		 * file may be between its creation and its writer's lock; a hard
		 * link's temp name (made, then renamed over its final name) shares an
		 * old file's mtime and has no lock, but its link made the ctime new.
		 */
		if (MAX(st.st_mtim.tv_sec, st.st_ctim.tv_sec) + (time_t)min_age_s > now.tv_sec) {
			continue;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			continue; /* a live writer holds it */
		}
		if (unlinkat(dir_reader_fd(d), de->d_name, 0) == 0) {
			removed++;
			kept--;
		}
	}
	dir_reader_close(d);
	if (ret_empty) {
		/* Not all of it seen: not known to be empty. */
		*ret_empty = kept == 0 && r == 0;
	}
	return removed;
}

int fspath_create_anon(int dirfd, mode_t mode, int *ret_fd)
{
	int fd;

	assert(ret_fd);
	/* An inode with no name: nothing to clean up if the writer dies. */
	fd = openat2_beneath(dirfd, ".", O_RDWR | O_TMPFILE | O_CLOEXEC, mode & 0777);
	if (fd < 0) {
		return fd == -EISDIR || fd == -EINVAL ? -EOPNOTSUPP : fd;
	}
	*ret_fd = fd;
	return 0;
}

int fspath_dir_default_acl(int fd)
{
	if (fgetxattr(fd, "system.posix_acl_default", NULL, 0) >= 0) {
		return 1;
	}
	return errno == ENODATA || errno == EOPNOTSUPP ? 0 : negerrno();
}

int fspath_link_anon(int dirfd, int fd, const char *leaf)
{
	char proc[64], tmp[FSPATH_NAME_MAX + 1];
	int r;

	r = leaf_validate(leaf);
	if (r < 0) {
		return r;
	}
	/*
	 * linkat creates the name or fails with EEXIST: it never follows or
	 * replaces what is there, so a first copy needs one directory entry.
	 * AT_EMPTY_PATH spares the lookup of a /proc path, but needs
	 * CAP_DAC_READ_SEARCH (ENOENT without it); through /proc needs none.
	 */
	static _Atomic bool no_empty_path;
	int ok = -1;

	if (!no_empty_path) {
		ok = linkat(fd, "", dirfd, leaf, AT_EMPTY_PATH);
		if (ok < 0 && (errno == ENOENT || errno == EPERM)) {
			no_empty_path = true;
		}
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (ok < 0 && no_empty_path) {
		ok = linkat(AT_FDCWD, proc, dirfd, leaf, AT_SYMLINK_FOLLOW);
	}
	if (ok == 0) {
		return 0;
	}
	if (errno != EEXIST) {
		return negerrno();
	}
	/* Something has the name: a temp name, then an atomic rename over it. */
	tmp[0] = '\0';
	for (int tries = 0; tries < TEMP_CREATE_TRIES; tries++) {
		r = fspath_temp_name(leaf, tmp, sizeof(tmp));
		if (r < 0) {
			return r;
		}
		if (linkat(AT_FDCWD, proc, dirfd, tmp, AT_SYMLINK_FOLLOW) == 0) {
			break;
		}
		if (errno != EEXIST) {
			return negerrno();
		}
		tmp[0] = '\0';
	}
	if (tmp[0] == '\0') {
		return -EEXIST;
	}
	if (renameat(dirfd, tmp, dirfd, leaf) < 0) {
		r = negerrno();
		unlinkat(dirfd, tmp, 0);
		return r;
	}
	return 0;
}

int fspath_discard(int dirfd, const char *tmpname)
{
	int r = leaf_validate(tmpname);

	if (r < 0) {
		return r;
	}
	if (unlinkat(dirfd, tmpname, 0) < 0 && errno != ENOENT) {
		return negerrno();
	}
	return 0;
}

int fspath_last_component(const char *path, char *out, size_t outlen)
{
	size_t n = strlen(path);
	const char *p;

	while (n > 1 && path[n - 1] == '/') {
		n--;
	}
	p = memrchr(path, '/', n);
	p = p ? p + 1 : path;
	n -= (size_t)(p - path);
	if (n >= outlen) {
		return -ENAMETOOLONG;
	}
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

bool fspath_strip_contents_dot(char *path)
{
	size_t n = strlen(path);

	while (n > 1 && path[n - 1] == '/') {
		n--;
	}
	if (n == 0 || path[n - 1] != '.' || (n > 1 && path[n - 2] != '/')) {
		return false;
	}
	path[n - 1] = '\0';
	return true;
}

bool fspath_is_temp_name(const char *name)
{
	size_t len;
	const char *tag, *rnd;

	if (!name) {
		return false;
	}
	len = strnlen(name, FSPATH_NAME_MAX + 1);
	/* At least one byte of leaf. */
	if (len > FSPATH_NAME_MAX || len < TEMP_OVERHEAD + 1 || name[0] != '.') {
		return false;
	}
	tag = name + len - TEMP_RAND_LEN - TEMP_TAG_LEN;
	if (memcmp(tag, TEMP_TAG, TEMP_TAG_LEN) != 0) {
		return false;
	}
	rnd = name + len - TEMP_RAND_LEN;
	for (size_t i = 0; i < TEMP_RAND_LEN; i++) {
		if (!rnd[i] || !strchr(alnum, rnd[i])) {
			return false;
		}
	}
	return true;
}

mode_t fspath_umask(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	mode_t m;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned v;

		if (sscanf(line, "Umask: %o", &v) == 1) {
			return (mode_t)(v & 0777);
		}
	}
	m = umask(022);
	umask(m);
	return m;
}

int fspath_replace_rule(mode_t existing, const char **ret_kind)
{
	*ret_kind = NULL;
	if (existing == 0 || S_ISREG(existing) || S_ISLNK(existing)) {
		return 0;
	}
	if (S_ISDIR(existing)) {
		*ret_kind = "a directory";
		return -EISDIR;
	}
	*ret_kind = S_ISBLK(existing)	 ? "a block device"
		    : S_ISCHR(existing)	 ? "a character device"
		    : S_ISFIFO(existing) ? "a FIFO"
		    : S_ISSOCK(existing) ? "a socket"
					 : "a special file";
	return -EPERM;
}
