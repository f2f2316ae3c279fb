/* SPDX-License-Identifier: MIT */
/* Reading a --files-from list (src/fileslist.h): delimiters, tidying, caps, pruning. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "fileslist.h"
#include "proto/msg.h"

static char list_path[] = "/tmp/test_fileslist.XXXXXX";

/* Write len bytes of text as the list file. */
static void write_list(const char *text, size_t len)
{
	FILE *f = fopen(list_path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
}

static void expect_names(const struct files_list *l, const char *const *want)
{
	size_t n = 0;

	while (want[n]) {
		assert_true(n < l->n);
		assert_string_equal(l->names[n], want[n]);
		n++;
	}
	assert_int_equal(l->n, n);
}

#define NAMES(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void test_lines(void **state)
{
	const char text[] = "a/b/c\n\n./d\ne//f///\n./\n.\n/abs\n../up\nno-newline";
	struct files_list l;
	size_t entry = 99;

	(void)state;
	write_list(text, sizeof(text) - 1);
	assert_int_equal(files_list_read(list_path, false, &l, &entry), 0);
	assert_int_equal(entry, 0);
	/* Empty names skipped, tidied; absolute and .. kept for the caller to refuse. */
	expect_names(&l, NAMES("a/b/c", "d", "e/f", "/abs", "../up", "no-newline"));
	files_list_free(&l);
}

static void test_nul(void **state)
{
	const char text[] = "x\ny\0sp ace\0\0./z/\0";
	struct files_list l;
	size_t entry;

	(void)state;
	write_list(text, sizeof(text) - 1);
	assert_int_equal(files_list_read(list_path, true, &l, &entry), 0);
	expect_names(&l, NAMES("x\ny", "sp ace", "z"));
	files_list_free(&l);
	/* A NUL inside a newline-separated list: refused with its entry. */
	assert_int_equal(files_list_read(list_path, false, &l, &entry), -EINVAL);
	assert_int_equal(entry, 2);
	assert_null(l.names);
}

static void test_long_name(void **state)
{
	char *text = malloc(PROTO_MAX_PATH + 10);
	struct files_list l = { 0 };
	size_t entry;

	(void)state;
	assert_non_null(text);
	memcpy(text, "ok\n", 3);
	memset(text + 3, 'a', PROTO_MAX_PATH);
	text[3 + PROTO_MAX_PATH] = '\n';
	/* Exactly PROTO_MAX_PATH: fine. */
	write_list(text, PROTO_MAX_PATH + 4);
	assert_int_equal(files_list_read(list_path, false, &l, &entry), 0);
	assert_int_equal(l.n, 2);
	assert_int_equal(strlen(l.names[1]), PROTO_MAX_PATH);
	files_list_free(&l);
	/* One byte more: refused, the entry named. */
	memset(text + 3, 'a', PROTO_MAX_PATH + 1);
	text[4 + PROTO_MAX_PATH] = '\n';
	write_list(text, PROTO_MAX_PATH + 5);
	assert_int_equal(files_list_read(list_path, false, &l, &entry), -ENAMETOOLONG);
	assert_int_equal(entry, 2);
	free(text);
}

static void test_missing_file(void **state)
{
	struct files_list l = { 0 };
	size_t entry = 5;

	(void)state;
	assert_int_equal(files_list_read("/nonexistent/list", false, &l, &entry), -ENOENT);
	assert_int_equal(entry, 0);
}

static void test_prune(void **state)
{
	const char text[] = "a/b/c\nb\na\nb\na/b\nab/x\nc/d\nc\n";
	struct files_list l;
	size_t entry;

	(void)state;
	write_list(text, sizeof(text) - 1);
	/* Without -r only the repeats go. */
	assert_int_equal(files_list_read(list_path, false, &l, &entry), 0);
	assert_int_equal(files_list_prune(&l, false), 0);
	expect_names(&l, NAMES("a/b/c", "b", "a", "a/b", "ab/x", "c/d", "c"));
	files_list_free(&l);
	/* With -r also what a listed directory's walk sends (ab/x is not below a). */
	assert_int_equal(files_list_read(list_path, false, &l, &entry), 0);
	assert_int_equal(files_list_prune(&l, true), 0);
	expect_names(&l, NAMES("b", "a", "ab/x", "c"));
	files_list_free(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines),	  cmocka_unit_test(test_nul),
		cmocka_unit_test(test_long_name), cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_prune),
	};
	int fd = mkstemp(list_path), r;

	if (fd < 0) {
		return 1;
	}
	close(fd);
	r = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(list_path);
	return r;
}
