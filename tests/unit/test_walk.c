/* SPDX-License-Identifier: MIT */
/*
 * The streaming walker on a real tree in a temp directory: every entry once,
 * each directory before its contents, symlinks sent as symlinks (never
 * followed), special files skipped with a warning, the depth limit and
 * names too long for the wire as failure entries, a local root deeper than
 * PATH_MAX, the entry cap, and the same order as the collected list.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diskio.h"
#include "proto/msg.h"
#include "testutil.h"
#include "walk.h"

static char *tmpdir;
static int rootfd = -1;
static unsigned nwarn;
static char last_warn[512];

static void on_warn(void *ud, const char *path, const char *why)
{
	(void)ud;
	nwarn++;
	snprintf(last_warn, sizeof(last_warn), "%s: %s", path, why);
}

static void make_file(const char *rel, const char *text)
{
	int fd = openat(rootfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static int setup(void **state)
{
	(void)state;
	tmpdir = tu_mkdtemp();
	rootfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(rootfd >= 0);
	/* d/{a, s -> a, fifo, up -> .., sub/{b, deeper/c}, empty/} */
	assert_int_equal(mkdirat(rootfd, "d", 0755), 0);
	assert_int_equal(mkdirat(rootfd, "d/sub", 0755), 0);
	assert_int_equal(mkdirat(rootfd, "d/sub/deeper", 0755), 0);
	assert_int_equal(mkdirat(rootfd, "d/empty", 0755), 0);
	make_file("d/a", "hello");
	make_file("d/sub/b", "bb");
	make_file("d/sub/deeper/c", "c");
	assert_int_equal(symlinkat("a", rootfd, "d/s"), 0);
	assert_int_equal(symlinkat("..", rootfd, "d/up"), 0);
	assert_int_equal(mkfifoat(rootfd, "d/fifo", 0644), 0);
	nwarn = 0;
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 32];

	(void)state;
	close(rootfd);
	/* Trees deeper than PATH_MAX: rm walks them by fds, nftw can't. */
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	assert_int_equal(system(cmd), 0);
	tu_rmtree(tmpdir);
	free(tmpdir);
	return 0;
}

static const char *const tree_names[] = {
	"t", "t/a", "t/s", "t/up", "t/sub", "t/sub/b", "t/sub/deeper", "t/empty", "t/sub/deeper/c",
};

static int name_index(const char *name)
{
	for (size_t i = 0; i < sizeof(tree_names) / sizeof(tree_names[0]); i++) {
		if (!strcmp(tree_names[i], name)) {
			return (int)i;
		}
	}
	return -1;
}

static void test_tree(void **state)
{
	struct walk *w = NULL;
	const struct engine_src *e;
	char seen[16] = { 0 };
	char dirs[16][64];
	size_t ndirs = 0, n = 0;
	int r;

	(void)state;
	assert_int_equal(walk_new(on_warn, NULL, &w), 0);
	assert_int_equal(walk_add_root(w, rootfd, "d", "t", true), 0);
	while ((r = walk_next(w, &e)) > 0) {
		int i = name_index(e->name);
		const char *slash = strrchr(e->name, '/');
		bool parent_seen = !slash;

		if (i < 0) {
			fail_msg("unexpected entry %s", e->name);
		}
		assert_false(seen[i]);
		seen[i] = 1;
		n++;
		/* Each directory comes before what it holds. */
		for (size_t k = 0; slash && k < ndirs; k++) {
			if (strlen(dirs[k]) == (size_t)(slash - e->name) &&
			    !strncmp(dirs[k], e->name, (size_t)(slash - e->name))) {
				parent_seen = true;
			}
		}
		assert_true(parent_seen);
		/* The wire name maps onto the path beneath the root. */
		assert_string_equal(e->path + 1, e->name + 1);
		assert_int_equal(e->dirfd, rootfd);
		if (e->ftype == PROTO_FT_DIR) {
			snprintf(dirs[ndirs++], sizeof(dirs[0]), "%s", e->name);
		}
		if (!strcmp(e->name, "t/s")) {
			assert_int_equal(e->ftype, PROTO_FT_SYMLINK);
			assert_string_equal(e->link, "a");
		} else if (!strcmp(e->name, "t/up")) {
			/* Never followed: sent as the link it is. */
			assert_int_equal(e->ftype, PROTO_FT_SYMLINK);
			assert_string_equal(e->link, "..");
		} else if (!strcmp(e->name, "t/a")) {
			assert_int_equal(e->ftype, PROTO_FT_REG);
			assert_int_equal(e->size, 5);
		} else {
			assert_null(e->link);
		}
	}
	assert_int_equal(r, 0);
	assert_int_equal(n, sizeof(tree_names) / sizeof(tree_names[0]));
	assert_int_equal(walk_count(w), n);
	/* The FIFO: skipped, with a warning. */
	assert_int_equal(nwarn, 1);
	assert_non_null(strstr(last_warn, "d/fifo: not a regular file"));
	assert_int_equal(walk_next(w, &e), 0);
	walk_free(w);
}

static void test_same_order_as_list(void **state)
{
	struct src_list l = { 0 };
	struct walk *w = NULL;
	const struct engine_src *e;
	size_t i = 0;

	(void)state;
	assert_int_equal(walk_add(&l, rootfd, "d", "t", true, on_warn, NULL), 0);
	assert_int_equal(l.total_bytes, 5 + 2 + 1);
	assert_int_equal(walk_new(on_warn, NULL, &w), 0);
	assert_int_equal(walk_add_root(w, rootfd, "d", "t", true), 0);
	while (walk_next(w, &e) > 0) {
		assert_true(i < l.n);
		assert_string_equal(e->name, l.v[i].name);
		i++;
	}
	assert_int_equal(i, l.n);
	walk_free(w);
	src_list_free(&l);
}

/*
 * A list keeps every entry until it is sent: a symlink's target is kept in
 * an allocation of its own length, not in a buffer of the longest target
 * (4 KiB a symlink, 4 GB for a million of them). The longest target Linux
 * allows comes through whole.
 */
static void test_list_symlink_targets(void **state)
{
	struct src_list l = { 0 };
	char longest[4096];
	size_t found = 0;

	(void)state;
	memset(longest, 'x', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	assert_int_equal(symlinkat(longest, rootfd, "d/long"), 0);
	assert_int_equal(walk_add(&l, rootfd, "d", "t", true, on_warn, NULL), 0);
	for (size_t i = 0; i < l.n; i++) {
		const char *want = !strcmp(l.v[i].name, "t/s")	    ? "a"
				   : !strcmp(l.v[i].name, "t/up")   ? ".."
				   : !strcmp(l.v[i].name, "t/long") ? longest
								    : NULL;

		if (!want) {
			continue;
		}
		assert_int_equal(l.v[i].ftype, PROTO_FT_SYMLINK);
		assert_string_equal(l.v[i].link, want);
		assert_true(malloc_usable_size(l.v[i].link) < strlen(want) + 64);
		found++;
	}
	assert_int_equal(found, 3);
	src_list_free(&l);
}

/*
 * Names listed one by one (a plan's, --files-from's) share their parent
 * directory, kept open between them; each is still resolved beneath the root
 * without a symlink on the way and checked as a path, and each entry is the
 * file's own.
 */
static void test_list_keeps_parent(void **state)
{
	static const struct {
		const char *name;
		int r;
		const char *kept; /* the directory kept open afterwards */
		uint64_t size;
	} names[] = {
		{ "d/a", 0, "d", 5 },
		{ "d/sub/b", 0, "d/sub", 2 },
		{ "d/sub/deeper/c", 0, "d/sub/deeper", 1 },
		{ "d/sub/b", 0, "d/sub", 2 },
		{ "d/s", 0, "d", 0 },
		{ "d/../d/a", -EINVAL, "d", 0 },
		{ "d/up/d/a", -ELOOP, "d", 0 },
		{ "d/nosuch", -ENOENT, "d", 0 },
		{ "d", 0, "", 0 },
	};
	struct src_list l = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int r = walk_add_flags(&l, rootfd, names[i].name, names[i].name, WALK_DIR_ALONE,
				       on_warn, NULL);

		assert_int_equal(r, names[i].r);
		assert_non_null(l.parent.dir);
		assert_string_equal(l.parent.dir, names[i].kept);
		if (r == 0) {
			assert_string_equal(l.v[l.n - 1].name, names[i].name);
			assert_int_equal(l.v[l.n - 1].size, names[i].size);
		}
	}
	assert_int_equal(l.n, 6);
	assert_int_equal(l.v[4].ftype, PROTO_FT_SYMLINK);
	assert_string_equal(l.v[4].link, "a");
	assert_int_equal(l.v[5].ftype, PROTO_FT_DIR);
	src_list_free(&l);
	assert_null(l.parent.dir);
}

static void test_roots(void **state)
{
	struct walk *w = NULL;
	const struct engine_src *e;

	(void)state;
	assert_int_equal(walk_new(on_warn, NULL, &w), 0);
	/* A directory without -r; missing; through a symlink. */
	assert_int_equal(walk_add_root(w, rootfd, "d", "d", false), -EISDIR);
	assert_int_equal(walk_add_root(w, rootfd, "d/nosuch", "nosuch", false), -ENOENT);
	assert_true(walk_add_root(w, rootfd, "d/up/d/a", "a", false) < 0);
	/* Roots come out in the order they were queued, each once. */
	assert_int_equal(walk_add_root(w, rootfd, "d/sub/b", "b", false), 0);
	assert_int_equal(walk_add_root(w, rootfd, "d/s", "s", false), 0);
	assert_int_equal(walk_add_root(w, rootfd, "d/sub", "sub", true), 0);
	assert_int_equal(walk_next(w, &e), 1);
	assert_string_equal(e->name, "b");
	assert_int_equal(walk_next(w, &e), 1);
	assert_string_equal(e->name, "s");
	assert_int_equal(e->ftype, PROTO_FT_SYMLINK);
	assert_int_equal(walk_next(w, &e), 1);
	assert_string_equal(e->name, "sub");
	for (int i = 0; i < 3; i++) {
		assert_int_equal(walk_next(w, &e), 1);
		assert_int_equal(strncmp(e->name, "sub/", 4), 0);
	}
	assert_int_equal(walk_next(w, &e), 0);
	walk_free(w);
}

/* Collect a walk's names, in order, joined by spaces. */
static void walk_names(struct walk *w, char *buf, size_t len)
{
	const struct engine_src *e;
	size_t n = 0;

	buf[0] = '\0';
	while (walk_next(w, &e) == 1) {
		n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? " " : "", e->name);
		assert_true(n < len);
	}
}

/*
 * Rules by wire name: an excluded entry is left out without a warning (the
 * fifo), an excluded directory is not entered, an excluded root is no error.
 */
static void test_filter(void **state)
{
	struct filter_list fl = { 0 };
	struct walk *w = NULL;
	char names[512];

	(void)state;
	assert_int_equal(filter_add(&fl, FILTER_EXCLUDE, "fifo"), 0);
	assert_int_equal(filter_add(&fl, FILTER_INCLUDE, "/t/sub/"), 0);
	assert_int_equal(filter_add(&fl, FILTER_EXCLUDE, "deeper/"), 0);
	assert_int_equal(filter_add(&fl, FILTER_EXCLUDE, "/t/[ase]*"), 0);
	assert_int_equal(filter_add(&fl, FILTER_EXCLUDE, "x"), 0);
	assert_int_equal(walk_new(on_warn, NULL, &w), 0);
	walk_set_filter(w, &fl);
	assert_int_equal(walk_add_root(w, rootfd, "d", "t", true), 0);
	assert_int_equal(walk_add_root(w, rootfd, "d/a", "x", false), 0); /* excluded: no entry */
	walk_names(w, names, sizeof(names));
	/* Sorted is not the walk's order: look for each. */
	assert_non_null(strstr(names, "t/sub/b"));
	assert_non_null(strstr(names, "t/up"));
	assert_null(strstr(names, "deeper"));
	assert_null(strstr(names, "t/a"));
	assert_null(strstr(names, "t/s "));
	assert_null(strstr(names, "t/empty"));
	assert_null(strstr(names, "x"));
	assert_int_equal(strncmp(names, "t ", 2), 0);
	assert_int_equal(nwarn, 0); /* the fifo was excluded, not warned about */
	walk_free(w);
	filter_list_free(&fl);
}

/* A directory taken alone (--files-from without -r): itself, not its contents. */
static void test_dir_alone(void **state)
{
	struct walk *w = NULL;
	char names[512];

	(void)state;
	assert_int_equal(walk_new(on_warn, NULL, &w), 0);
	assert_int_equal(walk_add_root_flags(w, rootfd, "d/sub", "d/sub", WALK_DIR_ALONE), 0);
	assert_int_equal(walk_add_root_flags(w, rootfd, "d/sub/b", "d/sub/b", WALK_DIR_ALONE), 0);
	assert_int_equal(
	    walk_add_root_flags(w, rootfd, "d/empty", "d/empty", WALK_DIR_ALONE | WALK_RECURSIVE),
	    0);
	assert_int_equal(walk_add_root_flags(w, rootfd, "d/sub", "sub", 0), -EISDIR);
	walk_names(w, names, sizeof(names));
	assert_string_equal(names, "d/sub d/sub/b d/empty");
	walk_free(w);
}

static void test_max_entries(void **state)
{
	struct walk *w = NULL;
	const struct engine_src *e;

	(void)state;
	assert_int_equal(walk_new(on_warn, NULL, &w), 0);
	walk_set_max_entries(w, 3);
	assert_int_equal(walk_add_root(w, rootfd, "d", "t", true), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(walk_next(w, &e), 1);
	}
	assert_int_equal(walk_next(w, &e), -E2BIG);
	/* Over: it stays over. */
	assert_true(walk_next(w, &e) < 0);
	assert_int_equal(walk_count(w), 3);
	walk_free(w);

	/* Exactly the limit passes. */
	assert_int_equal(walk_new(on_warn, NULL, &w), 0);
	walk_set_max_entries(w, sizeof(tree_names) / sizeof(tree_names[0]));
	assert_int_equal(walk_add_root(w, rootfd, "d", "t", true), 0);
	while (walk_next(w, &e) > 0) {
	}
	assert_int_equal(walk_next(w, &e), 0);
	walk_free(w);
}

/* 140 nested directories: listed down to the depth limit, then a failure entry. */
static void test_depth_limit(void **state)
{
	char path[1024] = "deep";
	struct walk *w = NULL;
	const struct engine_src *e;
	size_t n = 0, nfailed = 0;

	(void)state;
	assert_int_equal(mkdirat(rootfd, path, 0755), 0);
	for (int i = 0; i < 140; i++) {
		strcat(path, "/x");
		assert_int_equal(mkdirat(rootfd, path, 0755), 0);
	}
	assert_int_equal(walk_new(on_warn, NULL, &w), 0);
	assert_int_equal(walk_add_root(w, rootfd, "deep", "deep", true), 0);
	while (walk_next(w, &e) > 0) {
		n++;
		if (e->error) {
			nfailed++;
			assert_non_null(strstr(e->why, "deep"));
			assert_int_equal(strlen(e->name), strlen("deep") + 2 * 129);
		}
	}
	/*
	 * The root at depth 0 and directories down to depth 128; the one at
	 * depth 129 can't be listed: it is a failure, not a warning.
	 */
	assert_int_equal(n, 130);
	assert_int_equal(nfailed, 1);
	assert_int_equal(nwarn, 0);
	assert_int_equal(walk_count(w), 129);
	walk_free(w);
}

/* Make dirs of 200-byte names beneath fd, n levels; returns an fd of the deepest. */
static int make_chain(int fd, int n, char c)
{
	char leaf[201];

	memset(leaf, c, 200);
	leaf[200] = '\0';
	fd = dup(fd);
	assert_true(fd >= 0);
	for (int i = 0; i < n; i++) {
		int next;

		assert_int_equal(mkdirat(fd, leaf, 0755), 0);
		next = openat(fd, leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	return fd;
}

/*
 * A name longer than the wire carries: a failure entry, named shortened in
 * the middle (head and tail kept), with its reason; the walk goes on.
 */
static void test_name_too_long(void **state)
{
	struct walk *w = NULL;
	const struct engine_src *e;
	size_t n = 0, nfailed = 0;
	int deepfd;

	(void)state;
	assert_int_equal(mkdirat(rootfd, "long", 0755), 0);
	make_file("long/ok", "ok");
	{
		int lfd = openat(rootfd, "long", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		/* 21 levels of 201 bytes: 4221 bytes below "long". */
		deepfd = make_chain(lfd, 21, 'q');
		close(lfd);
	}
	close(openat(deepfd, "leaf-file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	close(deepfd);
	assert_int_equal(walk_new(on_warn, NULL, &w), 0);
	assert_int_equal(walk_add_root(w, rootfd, "long", "long", true), 0);
	while (walk_next(w, &e) > 0) {
		n++;
		if (e->error) {
			nfailed++;
			assert_int_equal(e->error, -ENAMETOOLONG);
			assert_true(strlen(e->name) <= PROTO_MAX_PATH);
			assert_non_null(strstr(e->name, "..."));
			assert_memory_equal(e->name, "long/qqq", 8);
			assert_non_null(strstr(e->why, "longer than"));
		} else {
			assert_true(strlen(e->name) <= PROTO_MAX_PATH);
		}
	}
	/* long, long/ok, 20 directories that fit (4 + 20 * 201 bytes); the 21st fails. */
	assert_int_equal(nfailed, 1);
	assert_int_equal(n, 2 + 20 + 1);
	assert_int_equal(nwarn, 0);
	walk_free(w);
}

/*
 * A local directory (AT_FDCWD) whose entries lie deeper than PATH_MAX on
 * the local side: every entry is listed, and each file opens beneath the
 * fd it names.
 */
static void test_local_deeper_than_path_max(void **state)
{
	char base[PATH_MAX];
	struct walk *w = NULL;
	const struct engine_src *e;
	size_t nfiles = 0, n = 0;
	int fd, top;

	(void)state;
	/* tmpdir/p/<12 x 200>/root/<12 x 200>/f: over 4800 bytes in all, < 2500 from root. */
	assert_int_equal(mkdirat(rootfd, "p", 0755), 0);
	top = openat(rootfd, "p", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fd = make_chain(top, 12, 'u');
	close(top);
	assert_int_equal(mkdirat(fd, "root", 0755), 0);
	top = openat(fd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(fd);
	fd = make_chain(top, 12, 'v');
	close(top);
	close(openat(fd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	close(fd);
	snprintf(base, sizeof(base), "%s/p", tmpdir);
	for (int i = 0; i < 12; i++) {
		strcat(base, "/");
		memset(base + strlen(base), 'u', 200);
		base[strlen(tmpdir) + 2 + (size_t)(i + 1) * 201] = '\0';
	}
	strcat(base, "/root");
	assert_true(strlen(base) < PATH_MAX);
	assert_int_equal(walk_new(on_warn, NULL, &w), 0);
	assert_int_equal(walk_add_root(w, AT_FDCWD, base, "root", true), 0);
	while (walk_next(w, &e) > 0) {
		assert_int_equal(e->error, 0);
		n++;
		if (e->ftype == PROTO_FT_REG) {
			int ffd = -1;
			struct stat st;

			nfiles++;
			assert_int_equal(diskio_open_read(e->dirfd, e->path, 0, &ffd, NULL, &st),
					 0);
			close(ffd);
		}
	}
	assert_int_equal(n, 1 + 12 + 1);
	assert_int_equal(nfiles, 1);
	walk_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_order_as_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_symlink_targets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_roots, setup, teardown),
		cmocka_unit_test_setup_teardown(test_filter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dir_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_keeps_parent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_depth_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_name_too_long, setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_deeper_than_path_max, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
