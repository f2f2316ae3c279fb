/* SPDX-License-Identifier: MIT */
/*
 * Wildcards beneath a held directory (src/fsglob.c, issue 15): matches are
 * per component, sorted, never a dotfile for a wildcard, never through a
 * symlink (a symlink matches as itself, not followed), never outside the root; the caps on matches and on entries read
 * hold; a bad pattern is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsglob.h"
#include "testutil.h"

static char *tmpdir;
static int rootfd = -1;

static void make_file(const char *rel)
{
	int fd = openat(rootfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	close(fd);
}

static int setup(void **state)
{
	(void)state;
	tmpdir = tu_mkdtemp();
	rootfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(rootfd >= 0);
	/*
	 * b.img a.img .hidden.img link.img -> a.img fifo.img dir.img/ notes.txt
	 * sub/{one/x, two/x, three/y} sub/lnk -> one  out -> ..
	 */
	make_file("b.img");
	make_file("a.img");
	make_file(".hidden.img");
	make_file("notes.txt");
	assert_int_equal(symlinkat("a.img", rootfd, "link.img"), 0);
	assert_int_equal(mkfifoat(rootfd, "fifo.img", 0644), 0);
	assert_int_equal(mkdirat(rootfd, "dir.img", 0755), 0);
	assert_int_equal(mkdirat(rootfd, "sub", 0755), 0);
	assert_int_equal(mkdirat(rootfd, "sub/one", 0755), 0);
	assert_int_equal(mkdirat(rootfd, "sub/two", 0755), 0);
	assert_int_equal(mkdirat(rootfd, "sub/three", 0755), 0);
	make_file("sub/one/x");
	make_file("sub/two/x");
	make_file("sub/three/y");
	assert_int_equal(symlinkat("one", rootfd, "sub/lnk"), 0);
	assert_int_equal(symlinkat("..", rootfd, "out"), 0);
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

/* Expand pattern and compare with the expected matches, in order. */
static void expect(const char *pattern, const char *const *want, size_t nwant)
{
	struct fsglob g;

	assert_int_equal(fsglob_expand(rootfd, pattern, 1000, 100000, &g), 0);
	if (g.n != nwant) {
		for (size_t i = 0; i < g.n; i++) {
			fprintf(stderr, "  got %s\n", g.paths[i]);
		}
		fail_msg("%s: %zu matches, wanted %zu", pattern, g.n, nwant);
	}
	for (size_t i = 0; i < nwant; i++) {
		assert_string_equal(g.paths[i], want[i]);
	}
	fsglob_free(&g);
}

#define EXPECT(pattern, ...)                                     \
	do {                                                     \
		static const char *const w_[] = { __VA_ARGS__ }; \
		expect(pattern, w_, sizeof(w_) / sizeof(w_[0])); \
	} while (0)

static void test_magic(void **state)
{
	(void)state;
	assert_true(fsglob_has_magic("*.img"));
	assert_true(fsglob_has_magic("a?"));
	assert_true(fsglob_has_magic("[ab]"));
	assert_false(fsglob_has_magic("plain.img"));
	assert_false(fsglob_has_magic(""));
}

static void test_star_files_dirs_symlinks_no_dot(void **state)
{
	(void)state;
	/* Not .hidden.img (FNM_PERIOD), not fifo.img; link.img as itself (issue 32 item 11). */
	EXPECT("*.img", "a.img", "b.img", "dir.img", "link.img");
	EXPECT("?.img", "a.img", "b.img");
	EXPECT("[a].img", "a.img");
	EXPECT(".*.img", ".hidden.img");
	EXPECT("*", "a.img", "b.img", "dir.img", "link.img", "notes.txt", "out", "sub");
}

static void test_several_components(void **state)
{
	(void)state;
	/* sub/lnk is a symlink to one: not followed, so one/x comes once; it matches last. */
	EXPECT("sub/*/x", "sub/one/x", "sub/two/x");
	EXPECT("s*/t*/?", "sub/three/y", "sub/two/x");
	EXPECT("*/one/x", "sub/one/x");
	EXPECT("sub/*", "sub/lnk", "sub/one", "sub/three", "sub/two");
}

static void test_no_match(void **state)
{
	struct fsglob g;

	(void)state;
	assert_int_equal(fsglob_expand(rootfd, "*.zz", 10, 100, &g), 0);
	assert_int_equal(g.n, 0);
	fsglob_free(&g);
	/* Through a symlinked directory: nothing (out -> .., sub/lnk -> one). */
	assert_int_equal(fsglob_expand(rootfd, "out/*", 10, 100, &g), 0);
	assert_int_equal(g.n, 0);
	fsglob_free(&g);
	assert_int_equal(fsglob_expand(rootfd, "sub/lnk/*", 10, 100, &g), 0);
	assert_int_equal(g.n, 0);
	fsglob_free(&g);
	assert_int_equal(fsglob_expand(rootfd, "nope/*/x", 10, 100, &g), 0);
	assert_int_equal(g.n, 0);
	fsglob_free(&g);
}

static void test_bad_patterns(void **state)
{
	struct fsglob g;
	char many[FSGLOB_MAX_MAGIC * 2 + 8] = "";

	(void)state;
	assert_int_equal(fsglob_expand(rootfd, "../*", 10, 100, &g), -EINVAL);
	assert_int_equal(fsglob_expand(rootfd, "sub/../*", 10, 100, &g), -EINVAL);
	assert_int_equal(fsglob_expand(rootfd, "./*", 10, 100, &g), -EINVAL);
	assert_int_equal(fsglob_expand(rootfd, "/etc/*", 10, 100, &g), -EINVAL);
	assert_int_equal(fsglob_expand(rootfd, "", 10, 100, &g), -EINVAL);
	assert_int_equal(fsglob_expand(rootfd, "*", 0, 100, &g), -EINVAL);
	for (int i = 0; i <= FSGLOB_MAX_MAGIC; i++) {
		strcat(many, i ? "/*" : "*");
	}
	assert_int_equal(fsglob_expand(rootfd, many, 10, 100, &g), -EINVAL);
}

static void test_caps(void **state)
{
	struct fsglob g;

	(void)state;
	assert_int_equal(fsglob_expand(rootfd, "*.img", 4, 100, &g), 0);
	assert_int_equal(g.n, 4);
	fsglob_free(&g);
	assert_int_equal(fsglob_expand(rootfd, "*.img", 3, 100, &g), -E2BIG);
	/* The root holds 9 entries: reading them is over a budget of 8. */
	assert_int_equal(fsglob_expand(rootfd, "*.zz", 10, 9, &g), 0);
	fsglob_free(&g);
	assert_int_equal(fsglob_expand(rootfd, "*.zz", 10, 8, &g), -E2BIG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_magic),
		cmocka_unit_test(test_star_files_dirs_symlinks_no_dot),
		cmocka_unit_test(test_several_components),
		cmocka_unit_test(test_no_match),
		cmocka_unit_test(test_bad_patterns),
		cmocka_unit_test(test_caps),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
