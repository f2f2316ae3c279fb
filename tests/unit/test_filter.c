/* SPDX-License-Identifier: MIT */
/*
 * The --include/--exclude matcher (src/filter.h): rsync's wildcard rules,
 * its documented examples, first match wins, the caps, and --exclude-from.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "filter.h"

#define FILE_ false
#define DIR_  true

/* A list from rules written as "- PAT" / "+ PAT", one per argument. */
static void build(struct filter_list *l, const char *const *rules)
{
	memset(l, 0, sizeof(*l));
	for (size_t i = 0; rules[i]; i++) {
		assert_true(rules[i][0] == '+' || rules[i][0] == '-');
		assert_int_equal(filter_add(l, rules[i][0] == '+' ? FILTER_INCLUDE : FILTER_EXCLUDE,
					    rules[i] + 2),
				 0);
	}
}

static bool incl(const char *const *rules, const char *name, bool is_dir)
{
	struct filter_list l;
	bool r;

	build(&l, rules);
	r = filter_included(&l, name, is_dir);
	filter_list_free(&l);
	return r;
}

#define RULES(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void test_wildmatch(void **state)
{
	(void)state;
	assert_true(filter_wildmatch("foo", "foo"));
	assert_false(filter_wildmatch("foo", "fo"));
	assert_false(filter_wildmatch("foo", "fooo"));
	assert_true(filter_wildmatch("*.o", "a.o"));
	assert_true(filter_wildmatch("*.o", ".o"));
	assert_false(filter_wildmatch("*.o", "d/a.o")); /* * stops at / */
	assert_true(filter_wildmatch("**.o", "d/e/a.o"));
	assert_true(filter_wildmatch("a/*/c", "a/b/c"));
	assert_false(filter_wildmatch("a/*/c", "a/b/x/c"));
	assert_true(filter_wildmatch("a/**/c", "a/b/x/c"));
	assert_false(filter_wildmatch("a/**/c", "a/c")); /* as rsync: ** doesn't eat the / */
	assert_true(filter_wildmatch("a/**", "a/b/c"));
	assert_false(filter_wildmatch("a/**", "a"));
	assert_true(filter_wildmatch("?", "x"));
	assert_false(filter_wildmatch("?", "/"));
	assert_false(filter_wildmatch("?", ""));
	assert_true(filter_wildmatch("a?c", "abc"));
	assert_false(filter_wildmatch("a?c", "a/c"));
	assert_true(filter_wildmatch("[abc]", "b"));
	assert_false(filter_wildmatch("[abc]", "d"));
	assert_true(filter_wildmatch("[a-c]x", "bx"));
	assert_false(filter_wildmatch("[a-c]x", "dx"));
	assert_true(filter_wildmatch("[!a-c]", "d"));
	assert_true(filter_wildmatch("[^a-c]", "d"));
	assert_false(filter_wildmatch("[!a-c]", "a"));
	assert_false(filter_wildmatch("[!a]", "/")); /* a class never matches / */
	assert_true(filter_wildmatch("[]]", "]"));
	assert_true(filter_wildmatch("[]a]", "a"));
	assert_true(filter_wildmatch("[a-]", "-"));
	assert_false(filter_wildmatch("[ab", "a")); /* unterminated: no match */
	assert_true(filter_wildmatch("\\*", "*"));
	assert_false(filter_wildmatch("\\*", "x"));
	assert_true(filter_wildmatch("a\\?", "a?"));
	assert_false(filter_wildmatch("a\\", "a\\"));
	assert_true(filter_wildmatch("*", ""));
	assert_true(filter_wildmatch("*", "abc"));
	assert_false(filter_wildmatch("*", "a/b"));
	assert_true(filter_wildmatch("**", "a/b"));
	assert_true(filter_wildmatch("*a*b*c*", "xxaxxbxxcxx"));
	assert_false(filter_wildmatch("*a*b*c*", "xxaxxcxxbxx"));
}

/* Many stars against a long name that doesn't match: the aborts keep this quick. */
static void test_wildmatch_pathological(void **state)
{
	char text[4001];

	(void)state;
	memset(text, 'a', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	assert_false(filter_wildmatch("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", text));
	assert_false(filter_wildmatch("**a**a**a**a**a**a**a**a**a**a**b", text));
}

static void test_basename_rules(void **state)
{
	(void)state;
	/* A pattern without / matches the last component at any depth. */
	assert_false(incl(RULES("- *.o"), "a.o", FILE_));
	assert_false(incl(RULES("- *.o"), "src/x/a.o", FILE_));
	assert_true(incl(RULES("- *.o"), "src/x/a.c", FILE_));
	assert_true(incl(RULES("- *.o"), "a.o/b", FILE_)); /* b is the last component */
	assert_false(incl(RULES("- foo"), "x/foo", DIR_));
	assert_false(incl(RULES("- foo"), "x/foo", FILE_));
	assert_true(incl(RULES("- foo"), "x/foox", FILE_));
	assert_true(incl(RULES("- foo"), "foo/x", FILE_)); /* below foo: the walker's job */
}

static void test_anchored(void **state)
{
	(void)state;
	/* rsync: "- /foo" excludes a file or directory named foo in the transfer root. */
	assert_false(incl(RULES("- /foo"), "foo", FILE_));
	assert_false(incl(RULES("- /foo"), "foo", DIR_));
	assert_true(incl(RULES("- /foo"), "x/foo", FILE_));
	assert_false(incl(RULES("- /src/*.c"), "src/a.c", FILE_));
	assert_true(incl(RULES("- /src/*.c"), "x/src/a.c", FILE_));
	assert_true(incl(RULES("- /src/*.c"), "src/d/a.c", FILE_));
}

static void test_dir_only(void **state)
{
	(void)state;
	/* rsync: "- foo/" excludes any directory named foo, not a file. */
	assert_false(incl(RULES("- foo/"), "foo", DIR_));
	assert_false(incl(RULES("- foo/"), "a/b/foo", DIR_));
	assert_true(incl(RULES("- foo/"), "foo", FILE_));
	assert_true(incl(RULES("- foo/"), "a/foo", FILE_));
	assert_false(incl(RULES("- /foo/"), "foo", DIR_));
	assert_true(incl(RULES("- /foo/"), "a/foo", DIR_));
	assert_false(incl(RULES("- a/b//"), "a/b", DIR_)); /* every trailing / */
}

static void test_inner_slash_unanchored(void **state)
{
	(void)state;
	/* An inner /: the whole name, or a tail of it starting at a directory boundary. */
	assert_false(incl(RULES("- b/c"), "b/c", FILE_));
	assert_false(incl(RULES("- b/c"), "a/b/c", FILE_));
	assert_true(incl(RULES("- b/c"), "a/xb/c", FILE_)); /* not mid-component */
	assert_true(incl(RULES("- b/c"), "a/b/c/d", FILE_));
	assert_false(incl(RULES("- b/*.o"), "src/b/x.o", FILE_));
	assert_true(incl(RULES("- b/*.o"), "src/b/d/x.o", FILE_));
}

static void test_double_star(void **state)
{
	(void)state;
	/* rsync: "- /foo/STAR/bar" excludes bar two levels below foo in the root. */
	assert_false(incl(RULES("- /foo/*/bar"), "foo/x/bar", FILE_));
	assert_true(incl(RULES("- /foo/*/bar"), "foo/x/y/bar", FILE_));
	/* "- /foo/STAR-STAR/bar": bar two or more levels below foo. */
	assert_false(incl(RULES("- /foo/**/bar"), "foo/x/bar", FILE_));
	assert_false(incl(RULES("- /foo/**/bar"), "foo/x/y/bar", FILE_));
	assert_true(incl(RULES("- /foo/**/bar"), "foo/bar", FILE_));
	assert_true(incl(RULES("- /foo/**/bar"), "z/foo/x/bar", FILE_));
	/* ** without a /: still the whole name. */
	assert_false(incl(RULES("- **.tmp"), "a/b/c.tmp", FILE_));
	assert_false(incl(RULES("- a**z"), "a/b/z", FILE_));
	assert_false(incl(RULES("- a**z"), "q/a/b/z", FILE_));
	/* dir/ and three asterisks: the directory and all that is in it. */
	assert_false(incl(RULES("- cache/***"), "cache", DIR_));
	assert_true(incl(RULES("- cache/***"), "cache", FILE_));
	assert_false(incl(RULES("- cache/***"), "cache/a", FILE_));
	assert_false(incl(RULES("- cache/***"), "x/cache/a/b", FILE_));
	assert_true(incl(RULES("- cache/***"), "x/cachex/a", FILE_));
}

static void test_first_match_wins(void **state)
{
	const char *const *only_c = RULES("+ */", "+ *.c", "- *");
	const char *const *foo_bar = RULES("+ foo/", "+ foo/bar.c", "- *");

	(void)state;
	assert_true(incl(RULES("+ keep.o", "- *.o"), "d/keep.o", FILE_));
	assert_false(incl(RULES("+ keep.o", "- *.o"), "d/drop.o", FILE_));
	assert_false(incl(RULES("- *.o", "+ keep.o"), "d/keep.o", FILE_));
	assert_true(incl(RULES("- *.o"), "d/keep.c", FILE_)); /* no rule: included */
	/* rsync: "+ *\/ + *.c - *" includes all directories and C source files. */
	assert_true(incl(only_c, "src", DIR_));
	assert_true(incl(only_c, "src/a/b", DIR_));
	assert_true(incl(only_c, "src/a/b/x.c", FILE_));
	assert_false(incl(only_c, "src/a/b/x.h", FILE_));
	/* rsync: "+ foo/ + foo/bar.c - *" includes only foo/ and foo/bar.c. */
	assert_true(incl(foo_bar, "foo", DIR_));
	assert_true(incl(foo_bar, "foo/bar.c", FILE_));
	assert_false(incl(foo_bar, "foo/baz.c", FILE_));
	assert_false(incl(foo_bar, "other", DIR_));
}

static void test_match_reports_rule(void **state)
{
	struct filter_list l;
	const struct filter_rule *r;

	(void)state;
	build(&l, RULES("+ a*", "- *"));
	r = filter_match(&l, "x/abc", FILE_);
	assert_non_null(r);
	assert_string_equal(r->text, "a*");
	assert_int_equal(r->action, FILTER_INCLUDE);
	r = filter_match(&l, "x/b", FILE_);
	assert_non_null(r);
	assert_string_equal(r->text, "*");
	filter_list_free(&l);
	assert_null(filter_match(NULL, "a", FILE_));
	assert_true(filter_included(NULL, "a", FILE_));
	assert_true(filter_empty(NULL));
}

static void test_caps(void **state)
{
	struct filter_list l = { 0 };
	char *big = malloc(PROTO_MAX_PATH + 2);

	(void)state;
	assert_non_null(big);
	assert_int_equal(filter_add(&l, FILTER_EXCLUDE, ""), -EINVAL);
	assert_int_equal(filter_add(&l, FILTER_EXCLUDE, "/"), -EINVAL);
	assert_int_equal(filter_add(&l, FILTER_EXCLUDE, "//"), -EINVAL);
	assert_int_equal(filter_add(&l, 7, "a"), -EINVAL);
	memset(big, 'a', PROTO_MAX_PATH + 1);
	big[PROTO_MAX_PATH + 1] = '\0';
	assert_int_equal(filter_add(&l, FILTER_EXCLUDE, big), -ENAMETOOLONG);
	big[PROTO_MAX_PATH] = '\0';
	assert_int_equal(filter_add(&l, FILTER_EXCLUDE, big), 0);
	assert_int_equal(l.n, 1);
	filter_list_free(&l);
	/* The byte cap: 64 patterns of 4096 bytes fill 256 KiB exactly. */
	for (int i = 0; i < 64; i++) {
		assert_int_equal(filter_add(&l, FILTER_EXCLUDE, big), 0);
	}
	assert_int_equal(filter_add(&l, FILTER_EXCLUDE, "a"), -E2BIG);
	assert_int_equal(l.n, 64);
	filter_list_free(&l);
	/* The count cap. */
	for (int i = 0; i < FILTER_MAX_RULES; i++) {
		assert_int_equal(filter_add(&l, FILTER_INCLUDE, "x"), 0);
	}
	assert_int_equal(filter_add(&l, FILTER_INCLUDE, "x"), -E2BIG);
	assert_int_equal(l.n, FILTER_MAX_RULES);
	filter_list_free(&l);
	free(big);
}

static void test_text_list(void **state)
{
	const char text[] = "# a comment\n"
			    "; another\n"
			    "\n"
			    "+ keep.o\r\n"
			    "*.o\n"
			    "- /build/\n"
			    "+ x\n"
			    "-nospace";
	struct filter_list l = { 0 };
	unsigned line = 99;

	(void)state;
	assert_int_equal(filter_add_text(&l, text, sizeof(text) - 1, &line), 0);
	assert_int_equal(line, 0);
	assert_int_equal(l.n, 5);
	assert_string_equal(l.rules[0].text, "keep.o");
	assert_int_equal(l.rules[0].action, FILTER_INCLUDE);
	assert_string_equal(l.rules[1].text, "*.o");
	assert_int_equal(l.rules[1].action, FILTER_EXCLUDE);
	assert_string_equal(l.rules[2].text, "/build/");
	assert_true(l.rules[2].anchored && l.rules[2].dir_only);
	assert_int_equal(l.rules[3].action, FILTER_INCLUDE);
	/* "-nospace" is no prefix: the whole line is an exclude pattern. */
	assert_string_equal(l.rules[4].text, "-nospace");
	assert_int_equal(l.rules[4].action, FILTER_EXCLUDE);
	assert_true(filter_included(&l, "d/keep.o", FILE_));
	assert_false(filter_included(&l, "d/a.o", FILE_));
	assert_false(filter_included(&l, "build", DIR_));
	filter_list_free(&l);
	/* A bad line is named. */
	assert_int_equal(filter_add_text(&l, "a\n+ \nb\n", 8, &line), -EINVAL);
	assert_int_equal(line, 2);
	filter_list_free(&l);
}

static void test_file_list(void **state)
{
	char path[] = "/tmp/test_filter.XXXXXX";
	struct filter_list l = { 0 };
	unsigned line = 0;
	FILE *f;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs("# excludes\n- *.tmp\n+ important.tmp\n", f);
	/* A comment longer than any pattern is fine. */
	fputc('#', f);
	for (int i = 0; i < 3 * PROTO_MAX_PATH; i++) {
		fputc('c', f);
	}
	fputs("\nlast", f); /* no final newline */
	fclose(f);
	assert_int_equal(filter_add_file(&l, path, &line), 0);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.rules[2].text, "last");
	assert_false(filter_included(&l, "important.tmp", FILE_)); /* first match wins */
	filter_list_free(&l);

	/* A pattern line over the cap: refused with its line. */
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("ok\n", f);
	for (int i = 0; i < PROTO_MAX_PATH + 1; i++) {
		fputc('p', f);
	}
	fputs("\n", f);
	fclose(f);
	assert_int_equal(filter_add_file(&l, path, &line), -ENAMETOOLONG);
	assert_int_equal(line, 2);
	filter_list_free(&l);
	unlink(path);
	assert_int_equal(filter_add_file(&l, path, &line), -ENOENT);
	assert_int_equal(line, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wildmatch),
		cmocka_unit_test(test_wildmatch_pathological),
		cmocka_unit_test(test_basename_rules),
		cmocka_unit_test(test_anchored),
		cmocka_unit_test(test_dir_only),
		cmocka_unit_test(test_inner_slash_unanchored),
		cmocka_unit_test(test_double_star),
		cmocka_unit_test(test_first_match_wins),
		cmocka_unit_test(test_match_reports_rule),
		cmocka_unit_test(test_caps),
		cmocka_unit_test(test_text_list),
		cmocka_unit_test(test_file_list),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
