/* SPDX-License-Identifier: MIT */
/*
 * Safe paths beneath a module, on real directories: lexical validation,
 * parent creation that never follows a symlink or leaves the module, temp
 * files that never reuse or follow an existing name, and the commit that
 * replaces files (never a symlink's target, never a directory) atomically.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "fspath.h"

static char *base; /* test dir: base/mod is the module, base/out is outside */
static char *mod;
static char *out;
static int rootfd = -1;

/*
 * getrandom() interposed so that temp names can be predicted and a name
 * collision staged; the real syscall otherwise. Call n yields the character
 * "0-9A-Za-z"[10 + n], i.e. "AAAAAAAA", then "BBBBBBBB", ...
 */
static int fake_random = -1;

ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
	if (fake_random < 0) {
		return syscall(SYS_getrandom, buf, len, flags);
	}
	memset(buf, 10 + fake_random++, len);
	return (ssize_t)len;
}

/* Paths built by at() live until teardown. */
static char *allocs[64];
static size_t nallocs;

static char *at(const char *dir, const char *rel)
{
	char *p;

	assert_true(nallocs < sizeof(allocs) / sizeof(allocs[0]));
	assert_true(asprintf(&p, "%s/%s", dir, rel) > 0);
	allocs[nallocs++] = p;
	return p;
}

static void write_file(const char *path, const char *content)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
}

static char *read_file_at(int dirfd, const char *name)
{
	static char buf[256];
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	assert_true(n >= 0);
	buf[n] = '\0';
	close(fd);
	return buf;
}

static bool exists_nofollow(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static int dir_entries(const char *path)
{
	char *cmd;
	int n = 0;
	FILE *f;
	char line[512];

	assert_true(asprintf(&cmd, "ls -A '%s'", path) > 0);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		n++;
	}
	pclose(f);
	free(cmd);
	return n;
}

static int setup(void **state)
{
	(void)state;
	base = tu_mkdtemp();
	mod = at(base, "mod");
	out = at(base, "out");
	assert_int_equal(mkdir(mod, 0755), 0);
	assert_int_equal(mkdir(out, 0755), 0);
	assert_int_equal(fspath_open_root(mod, &rootfd), 0);
	fake_random = -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	close(rootfd);
	rootfd = -1;
	tu_rmtree(base);
	free(base);
	while (nallocs > 0) {
		free(allocs[--nallocs]);
	}
	return 0;
}

static void test_validate(void **state)
{
	static const char *const good[] = {
		"a", "a/b/c", "x.y", "..a", "a..", "...", ".a/b.", "a b", "\xc3\xa9t\xc3\xa9",
		"a\\b",
		/* control bytes are legal name bytes (escaped when printed) */
		"a\nb", "a\x7f", "\x01", "a/\x1f/b", "a\tb"
	};
	static const char *const bad[] = { "",	   "/abs", "..",  "a/../b",   "a/./b",
					   ".",	   "a//b", "a/",  "/",	      "./a",
					   "../a", "a/..", "a/.", "a/\n/../b" };
	char comp[300], path[FSPATH_MAX + 2];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (fspath_validate(good[i]) != 0) {
			fail_msg("refused good path '%s'", good[i]);
		}
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (fspath_validate(bad[i]) != -EINVAL) {
			fail_msg("accepted bad path #%zu '%s'", i, bad[i]);
		}
	}
	assert_int_equal(fspath_validate(NULL), -EINVAL);

	/* One component: 255 bytes fine, 256 too long. */
	memset(comp, 'c', 255);
	comp[255] = '\0';
	assert_int_equal(fspath_validate(comp), 0);
	comp[255] = 'c';
	comp[256] = '\0';
	assert_int_equal(fspath_validate(comp), -ENAMETOOLONG);
	snprintf(path, sizeof(path), "a/%s/b", comp);
	assert_int_equal(fspath_validate(path), -ENAMETOOLONG);

	/* Whole path: 4095 bytes fine, 4096 too long. */
	memset(path, 'p', FSPATH_MAX - 1);
	for (size_t i = 200; i < FSPATH_MAX - 1; i += 201) {
		path[i] = '/';
	}
	path[FSPATH_MAX - 1] = '\0';
	assert_int_equal(fspath_validate(path), 0);
	path[FSPATH_MAX - 1] = 'p';
	path[FSPATH_MAX] = '\0';
	assert_int_equal(fspath_validate(path), -ENAMETOOLONG);
}

static void assert_same_dir(int fd, const char *path)
{
	struct stat a, b;

	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(stat(path, &b), 0);
	assert_true(S_ISDIR(a.st_mode));
	assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
}

static void test_open_parent_nested(void **state)
{
	const char *leaf = NULL;
	char *abc = at(mod, "a/b/c");
	struct stat st;
	int dirfd = -1;

	(void)state;
	assert_int_equal(fspath_open_parent(rootfd, "a/b/c/file", false, &dirfd, &leaf), -ENOENT);
	assert_int_equal(dirfd, -1);
	assert_int_equal(fspath_open_parent(rootfd, "a/b/c/file", true, &dirfd, &leaf), 0);
	assert_string_equal(leaf, "file");
	assert_same_dir(dirfd, abc);
	assert_int_equal(stat(abc, &st), 0);
	{
		mode_t mask = umask(0);

		umask(mask);
		assert_int_equal(st.st_mode & 07777, 0755 & ~mask);
	}
	close(dirfd);

	/* Existing now: the single-openat2 path finds it too. */
	assert_int_equal(fspath_open_parent(rootfd, "a/b/c/other", false, &dirfd, &leaf), 0);
	assert_string_equal(leaf, "other");
	assert_same_dir(dirfd, abc);
	close(dirfd);

	/* Made already: mkdirs finds it in one resolution; a missing last part is made. */
	assert_int_equal(fspath_open_parent(rootfd, "a/b/c/again", true, &dirfd, &leaf), 0);
	assert_same_dir(dirfd, abc);
	close(dirfd);
	assert_int_equal(fspath_open_parent(rootfd, "a/b/d/file", true, &dirfd, &leaf), 0);
	assert_string_equal(leaf, "file");
	assert_int_equal(fstat(dirfd, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(unlinkat(rootfd, "a/b/d", AT_REMOVEDIR), 0);
	close(dirfd);

	/* A bare name: the parent is the module root. */
	assert_int_equal(fspath_open_parent(rootfd, "top", false, &dirfd, &leaf), 0);
	assert_string_equal(leaf, "top");
	assert_same_dir(dirfd, mod);
	close(dirfd);

	/* Invalid names are refused before anything is created. */
	assert_int_equal(fspath_open_parent(rootfd, "n/../x", true, &dirfd, &leaf), -EINVAL);
	assert_int_equal(fspath_open_parent(rootfd, "n/", true, &dirfd, &leaf), -EINVAL);
	assert_false(exists_nofollow(at(mod, "n")));
}

static void test_open_parent_symlink(void **state)
{
	const char *leaf;
	int dirfd = -1;
	char *link = at(mod, "dir"), *rel = at(mod, "a/rel"), *inside = at(mod, "in");
	char *target;

	(void)state;
	/* An absolute symlink inside the module pointing outside it. */
	assert_int_equal(symlink(out, link), 0);
	assert_int_equal(fspath_open_parent(rootfd, "dir/x/y/file", true, &dirfd, &leaf), -ELOOP);
	assert_int_equal(fspath_open_parent(rootfd, "dir/file", true, &dirfd, &leaf), -ELOOP);
	assert_int_equal(fspath_open_parent(rootfd, "dir/file", false, &dirfd, &leaf), -ELOOP);
	assert_int_equal(fspath_open_parent(rootfd, "dir/x/file", false, &dirfd, &leaf), -ELOOP);
	assert_int_equal(dirfd, -1);
	assert_int_equal(dir_entries(out), 0); /* nothing created through the link */

	/* A relative one deeper down, escaping with "..". */
	assert_int_equal(mkdir(at(mod, "a"), 0755), 0);
	assert_int_equal(symlink("../../out", rel), 0);
	assert_int_equal(fspath_open_parent(rootfd, "a/rel/x/file", true, &dirfd, &leaf), -ELOOP);
	assert_int_equal(fspath_open_parent(rootfd, "a/rel/file", false, &dirfd, &leaf), -ELOOP);
	assert_int_equal(dir_entries(out), 0);

	/* Even a symlink that stays inside the module is not followed. */
	assert_int_equal(symlink("a", inside), 0);
	assert_int_equal(fspath_open_parent(rootfd, "in/file", true, &dirfd, &leaf), -ELOOP);
	assert_int_equal(fspath_open_parent(rootfd, "in/file", false, &dirfd, &leaf), -ELOOP);

	/* A file where a directory is wanted. */
	target = at(mod, "plain");
	write_file(target, "x");
	assert_int_equal(fspath_open_parent(rootfd, "plain/file", true, &dirfd, &leaf), -ENOTDIR);
	assert_int_equal(fspath_open_parent(rootfd, "plain/x/file", true, &dirfd, &leaf), -ENOTDIR);
	assert_int_equal(fspath_open_parent(rootfd, "plain/file", false, &dirfd, &leaf), -ENOTDIR);
	assert_int_equal(dirfd, -1);
}

static void test_escapes(void **state)
{
	const char *leaf;
	int fd = -1;

	(void)state;
	assert_int_equal(fspath_open_parent(rootfd, "../out/file", true, &fd, &leaf), -EINVAL);
	assert_int_equal(fspath_open_parent(rootfd, "a/../../out/f", true, &fd, &leaf), -EINVAL);
	assert_int_equal(fspath_open_parent(rootfd, "/tmp/f", true, &fd, &leaf), -EINVAL);
	assert_int_equal(fspath_open_dir(rootfd, "..", &fd), -EINVAL);
	assert_int_equal(fspath_open_dir(rootfd, "../out", &fd), -EINVAL);
	assert_int_equal(fspath_open_dir(rootfd, "/", &fd), -EINVAL);
	assert_int_equal(fd, -1);
	assert_int_equal(dir_entries(out), 0);
	assert_int_equal(dir_entries(mod), 0);
}

static void test_open_dir(void **state)
{
	int fd = -1;
	char *ab = at(mod, "a/b");

	(void)state;
	assert_int_equal(fspath_open_dir(rootfd, "", &fd), 0);
	assert_same_dir(fd, mod);
	close(fd);
	assert_int_equal(fspath_open_dir(rootfd, ".", &fd), 0);
	assert_same_dir(fd, mod);
	close(fd);
	assert_int_equal(mkdir(at(mod, "a"), 0755), 0);
	assert_int_equal(mkdir(ab, 0755), 0);
	assert_int_equal(fspath_open_dir(rootfd, "a/b", &fd), 0);
	assert_same_dir(fd, ab);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	assert_int_equal(symlink(out, at(mod, "a/l")), 0);
	assert_int_equal(fspath_open_dir(rootfd, "a/l", &fd), -ELOOP);
	write_file(at(mod, "f"), "x");
	assert_int_equal(fspath_open_dir(rootfd, "f", &fd), -ENOTDIR);
}

/* The destination directory of a push: made with every missing parent, never through a link. */
static void test_open_or_create_dir(void **state)
{
	int fd = -1;
	char *abc = at(mod, "a/b/c");

	(void)state;
	assert_int_equal(fspath_open_or_create_dir(rootfd, "a/b/c", &fd), 0);
	assert_same_dir(fd, abc);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	/* Already there: opened, nothing else made. */
	assert_int_equal(fspath_open_or_create_dir(rootfd, "a/b", &fd), 0);
	assert_same_dir(fd, at(mod, "a/b"));
	close(fd);
	assert_int_equal(dir_entries(at(mod, "a/b")), 1);
	/* A link anywhere in the path, a file, or a name that climbs: refused, nothing made. */
	assert_int_equal(symlink(out, at(mod, "l")), 0);
	assert_int_equal(fspath_open_or_create_dir(rootfd, "l/x", &fd), -ELOOP);
	assert_int_equal(fspath_open_or_create_dir(rootfd, "l", &fd), -ELOOP);
	assert_int_equal(dir_entries(out), 0);
	write_file(at(mod, "f"), "x");
	assert_int_equal(fspath_open_or_create_dir(rootfd, "f/x", &fd), -ENOTDIR);
	assert_int_equal(fspath_open_or_create_dir(rootfd, "../out/x", &fd), -EINVAL);
	assert_int_equal(fspath_open_or_create_dir(rootfd, "", &fd), -EINVAL);
	assert_int_equal(dir_entries(out), 0);
}

/* A module root: by absolute path, and never through a symlink, last or not. */
static void test_open_root(void **state)
{
	int fd = -1;

	(void)state;
	assert_int_equal(fspath_open_root(mod, &fd), 0);
	assert_same_dir(fd, mod);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	assert_int_equal(fspath_open_root("relative", &fd), -EINVAL);
	assert_int_equal(mkdir(at(out, "real"), 0755), 0);
	assert_int_equal(mkdir(at(out, "real/m"), 0755), 0);
	assert_int_equal(symlink(at(out, "real/m"), at(base, "leaf")), 0);
	assert_int_equal(fspath_open_root(at(base, "leaf"), &fd), -ELOOP);
	assert_int_equal(symlink(at(out, "real"), at(base, "mid")), 0);
	assert_int_equal(fspath_open_root(at(base, "mid/m"), &fd), -ELOOP);
	assert_int_equal(fspath_open_root(at(out, "real/m"), &fd), 0);
	close(fd);
}

static void test_create_temp(void **state)
{
	char name[FSPATH_NAME_MAX + 1], name2[FSPATH_NAME_MAX + 1], leaf[FSPATH_NAME_MAX + 1];
	struct stat st;
	int fd = -1, fd2 = -1;

	(void)state;
	assert_int_equal(fspath_create_temp(rootfd, "data.bin", &fd, name, sizeof(name)), 0);
	printf("temp name: %s\n", name);
	assert_int_equal(strncmp(name, ".data.bin.rdmacp.", 17), 0);
	assert_int_equal(strlen(name), 17 + 8);
	assert_true(fspath_is_temp_name(name));
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_size, 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);

	assert_int_equal(fspath_create_temp(rootfd, "data.bin", &fd2, name2, sizeof(name2)), 0);
	assert_string_not_equal(name, name2);
	close(fd2);

	/* A leaf at NAME_MAX: the temp name is cut to fit, and still recognised. */
	memset(leaf, 'L', FSPATH_NAME_MAX);
	leaf[FSPATH_NAME_MAX] = '\0';
	assert_int_equal(fspath_create_temp(rootfd, leaf, &fd2, name2, sizeof(name2)), 0);
	assert_int_equal(strlen(name2), FSPATH_NAME_MAX);
	assert_int_equal(name2[0], '.');
	assert_int_equal(strncmp(name2 + 1, leaf, FSPATH_NAME_MAX - 17), 0);
	assert_true(fspath_is_temp_name(name2));
	close(fd2);

	/* Bad leaves and a short name buffer. */
	assert_int_equal(fspath_create_temp(rootfd, "a/b", &fd2, name2, sizeof(name2)), -EINVAL);
	assert_int_equal(fspath_create_temp(rootfd, "..", &fd2, name2, sizeof(name2)), -EINVAL);
	assert_int_equal(fspath_create_temp(rootfd, "", &fd2, name2, sizeof(name2)), -EINVAL);
	assert_int_equal(fspath_create_temp(rootfd, "x", &fd2, name2, 64), -EINVAL);
	close(fd);
}

/* A name that already exists (file or planted symlink) is never reused or followed. */
static void test_create_temp_collision(void **state)
{
	char name[FSPATH_NAME_MAX + 1];
	char *victim = at(out, "victim"), *planted_link = at(mod, ".f.rdmacp.AAAAAAAA");
	char *planted_file = at(mod, ".f.rdmacp.BBBBBBBB");
	struct stat st;
	int fd = -1;

	(void)state;
	write_file(victim, "precious");
	assert_int_equal(symlink(victim, planted_link), 0);
	write_file(planted_file, "mine");

	fake_random = 0;
	assert_int_equal(fspath_create_temp(rootfd, "f", &fd, name, sizeof(name)), 0);
	assert_int_equal(fake_random, 3); /* AAAAAAAA and BBBBBBBB taken, CCCCCCCC made */
	assert_string_equal(name, ".f.rdmacp.CCCCCCCC");
	assert_int_equal(write(fd, "new", 3), 3);
	close(fd);
	assert_string_equal(read_file_at(rootfd, ".f.rdmacp.BBBBBBBB"), "mine");
	assert_int_equal(lstat(planted_link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(stat(victim, &st), 0);
	assert_string_equal(read_file_at(AT_FDCWD, victim), "precious");

	/* Every try collides: an error, nothing touched. */
	fake_random = 0;
	assert_int_equal(mkdir(at(mod, ".g.rdmacp.AAAAAAAA"), 0755), 0);
	for (char c = 'B'; c <= 'Z'; c++) {
		char n[32];

		snprintf(n, sizeof(n), ".g.rdmacp.%c%c%c%c%c%c%c%c", c, c, c, c, c, c, c, c);
		write_file(at(mod, n), "taken");
	}
	fd = -1;
	assert_int_equal(fspath_create_temp(rootfd, "g", &fd, name, sizeof(name)), -EEXIST);
	assert_int_equal(fd, -1);
	fake_random = -1;
}

static int make_temp_with(int dirfd, const char *leaf, const char *content, char *name,
			  ino_t *ret_ino)
{
	struct stat st;
	int fd = -1;

	assert_int_equal(fspath_create_temp(dirfd, leaf, &fd, name, FSPATH_NAME_MAX + 1), 0);
	assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	assert_int_equal(fstat(fd, &st), 0);
	*ret_ino = st.st_ino;
	return fd;
}

static void test_discard(void **state)
{
	char name[FSPATH_NAME_MAX + 1];
	ino_t tmp_ino;
	int fd;

	(void)state;
	fd = make_temp_with(rootfd, "d", "partial", name, &tmp_ino);
	close(fd);
	assert_int_equal(faccessat(rootfd, name, F_OK, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(fspath_discard(rootfd, name), 0);
	assert_int_equal(faccessat(rootfd, name, F_OK, AT_SYMLINK_NOFOLLOW), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(fspath_discard(rootfd, name), 0); /* already gone: fine */
	assert_int_equal(fspath_discard(rootfd, "../x"), -EINVAL);
	assert_int_equal(dir_entries(mod), 0);
}

/* Make a temp file's mtime old enough for the sweeper. */
static void age(int dirfd, const char *name)
{
	struct timespec ts[2] = { { .tv_sec = 1000000, .tv_nsec = 0 },
				  { .tv_sec = 1000000, .tv_nsec = 0 } };

	assert_int_equal(utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW), 0);
}

/*
 * THREATS E29: temp files of dead writers go; a live writer's never do, nor
 * one just made (by its ctime: what it holds may have an old mtime already).
 */
static void test_sweep_stale(void **state)
{
	char dead[FSPATH_NAME_MAX + 1], live[FSPATH_NAME_MAX + 1], young[FSPATH_NAME_MAX + 1];
	char linked[FSPATH_NAME_MAX + 1];
	int live_fd, young_fd, status, fd;
	bool empty;
	pid_t pid;

	(void)state;
	/* A writer that dies: its lock dies with it. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		_exit(fspath_create_temp(rootfd, "dead", &fd, dead, sizeof(dead)) < 0 ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(fspath_create_temp(rootfd, "live", &live_fd, live, sizeof(live)), 0);
	/* A file of the tree with an old mtime, as a copy keeps it. */
	fd = openat(rootfd, "kept", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	age(rootfd, "kept");
	/* Unchanged for more than the sweeper's minimum age (1 s), by mtime and ctime alike. */
	sleep(2);
	assert_int_equal(fspath_create_temp(rootfd, "young", &young_fd, young, sizeof(young)), 0);
	close(young_fd); /* unlocked, but too young to judge */
	/*
	 * A hard link being made (rx_link_make): a temp name for an old file, no
	 * lock, its mtime the file's; its ctime says it was linked just now.
	 */
	assert_int_equal(fspath_temp_name("link", linked, sizeof(linked)), 0);
	assert_int_equal(linkat(rootfd, "kept", rootfd, linked, 0), 0);
	assert_int_equal(fspath_sweep_stale(rootfd, 1, &empty), 1);
	assert_false(empty);
	assert_int_equal(faccessat(rootfd, live, F_OK, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(faccessat(rootfd, young, F_OK, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(faccessat(rootfd, linked, F_OK, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(dir_entries(mod), 4);
	close(live_fd);
	assert_int_equal(unlinkat(rootfd, linked, 0), 0);
	assert_int_equal(unlinkat(rootfd, "kept", 0), 0);
	/* Once the live writer is gone too, and its file has waited, it is stale. */
	sleep(2);
	assert_int_equal(fspath_sweep_stale(rootfd, 1, &empty), 2); /* live's and young's */
	assert_true(empty);
	assert_int_equal(dir_entries(mod), 0);
}

/* O_TMPFILE files: no name until linked; linking never follows or clobbers blindly. */
static void test_anon_link(void **state)
{
	char buf[16] = { 0 };
	struct stat st;
	int fd, fd2, r;

	(void)state;
	r = fspath_create_anon(rootfd, 0600, &fd);
	if (r == -EOPNOTSUPP) {
		skip();
	}
	assert_int_equal(r, 0);
	assert_int_equal(write(fd, "first", 5), 5);
	assert_int_equal(dir_entries(mod), 0); /* nameless */
	assert_int_equal(fspath_link_anon(rootfd, fd, "new"), 0);
	assert_int_equal(dir_entries(mod), 1);
	close(fd);

	/* An existing name is replaced atomically, through a temp name. */
	assert_int_equal(fspath_create_anon(rootfd, 0600, &fd2), 0);
	assert_int_equal(write(fd2, "second", 6), 6);
	assert_int_equal(fspath_link_anon(rootfd, fd2, "new"), 0);
	close(fd2);
	fd = openat(rootfd, "new", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf) - 1), 6);
	assert_string_equal(buf, "second");
	close(fd);
	assert_int_equal(dir_entries(mod), 1); /* no temp name left */

	/* A symlink leaf is replaced itself; its target is untouched. */
	assert_int_equal(symlinkat("/etc/hostname", rootfd, "link"), 0);
	assert_int_equal(fspath_create_anon(rootfd, 0600, &fd), 0);
	assert_int_equal(fspath_link_anon(rootfd, fd, "link"), 0);
	close(fd);
	assert_int_equal(fstatat(rootfd, "link", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISREG(st.st_mode));

	/* A directory is never replaced. */
	assert_int_equal(mkdirat(rootfd, "dir", 0755), 0);
	assert_int_equal(fspath_create_anon(rootfd, 0600, &fd), 0);
	assert_int_equal(fspath_link_anon(rootfd, fd, "dir"), -EISDIR);
	assert_int_equal(fspath_link_anon(rootfd, fd, "../x"), -EINVAL);
	close(fd);
	assert_int_equal(dir_entries(mod), 3); /* new, link, dir: no temp left */
}

/* THREATS B14: the parent is swapped for a symlink mid-transfer; the held fd wins. */
static void test_parent_swapped(void **state)
{
	char name[FSPATH_NAME_MAX + 1];
	char *b = at(mod, "a/b"), *b2 = at(mod, "a/b2");
	const char *leaf;
	ino_t tmp_ino;
	int dirfd, fd;

	(void)state;
	assert_int_equal(fspath_open_parent(rootfd, "a/b/file", true, &dirfd, &leaf), 0);
	fd = make_temp_with(dirfd, leaf, "payload", name, &tmp_ino);
	assert_int_equal(rename(b, b2), 0);
	assert_int_equal(symlink(out, b), 0);
	assert_int_equal(renameat(dirfd, name, dirfd, leaf), 0);
	close(fd);
	close(dirfd);
	assert_int_equal(dir_entries(out), 0);
	assert_string_equal(read_file_at(AT_FDCWD, at(mod, "a/b2/file")), "payload");
}

static void test_is_temp_name(void **state)
{
	(void)state;
	assert_true(fspath_is_temp_name(".x.rdmacp.ABCDEFGH"));
	assert_true(fspath_is_temp_name(".file.tar.gz.rdmacp.a1b2c3d4"));
	assert_false(fspath_is_temp_name("..rdmacp.AAAAAAAA")); /* no leaf byte */
	assert_false(fspath_is_temp_name(NULL));
	assert_false(fspath_is_temp_name(""));
	assert_false(fspath_is_temp_name("file"));
	assert_false(fspath_is_temp_name(".rdmacp.ABCDEFGH"));
	assert_false(fspath_is_temp_name("x.rdmacp.ABCDEFGH"));
	assert_false(fspath_is_temp_name(".x.rdmacp.ABCDEFG"));
	assert_false(fspath_is_temp_name(".x.rdmacp.ABCDEFG!"));
	assert_false(fspath_is_temp_name(".x.rdmacq.ABCDEFGH"));
	assert_false(fspath_is_temp_name(".x.rdmacp.ABCDEFGHI"));
	assert_false(fspath_is_temp_name(".x.rdmacp.ABCD-FGH"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_validate),
		cmocka_unit_test_setup_teardown(test_open_parent_nested, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_parent_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_escapes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_or_create_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_temp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_temp_collision, setup, teardown),
		cmocka_unit_test_setup_teardown(test_discard, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parent_swapped, setup, teardown),
		cmocka_unit_test(test_is_temp_name),
		cmocka_unit_test_setup_teardown(test_sweep_stale, setup, teardown),
		cmocka_unit_test_setup_teardown(test_anon_link, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
