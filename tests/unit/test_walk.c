/* SPDX-License-Identifier: MIT */
/*
 * The streaming walker on a real tree in a temp directory: every entry once,
 * each directory before its contents, symlinks sent as symlinks (never
 * followed), special files skipped with a warning, the depth limit, the
 * entry cap, and the same order as the collected list.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
	(void)state;
	close(rootfd);
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

/* 140 nested directories: listed down to the depth limit, then a warning. */
static void test_depth_limit(void **state)
{
	char path[1024] = "deep";
	struct walk *w = NULL;
	const struct engine_src *e;
	size_t n = 0;

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
	}
	/* The root at depth 0 and directories down to depth 129, whose contents are not listed. */
	assert_int_equal(n, 130);
	assert_int_equal(nwarn, 1);
	assert_non_null(strstr(last_warn, "too deep"));
	walk_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_order_as_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_roots, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_depth_limit, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
