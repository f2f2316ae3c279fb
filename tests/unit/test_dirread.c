/* SPDX-License-Identifier: MIT */
/*
 * The directory reader under the walk (src/dirread.c), on real directories:
 * every name of one too big for one read comes out once and "." and ".."
 * never; an empty one ends at once, and stays ended; a descriptor that is
 * no directory fails, and keeps failing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dirread.h"
#include "testutil.h"

#define NAMES 3000

static int open_dir_fd(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	assert_true(fd >= 0);
	return fd;
}

/* 3,000 names of 70 bytes: about 250 KiB of records, several reads of the reader's 32 KiB. */
static void test_many_names(void **state)
{
	char *dir = tu_mkdtemp();
	static bool seen[NAMES];
	const struct dirent64 *de;
	struct dir_reader *d;
	char name[128];
	size_t n = 0;
	int dfd, r;

	(void)state;
	dfd = open_dir_fd(dir);
	for (int i = 0; i < NAMES; i++) {
		int fd;

		snprintf(name, sizeof(name), "%04d-%065d", i, 0);
		fd = openat(dfd, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		close(fd);
	}
	assert_int_equal(dir_reader_open(dfd, &d), 0);
	assert_int_equal(dir_reader_fd(d), dfd);
	while ((r = dir_reader_next(d, &de)) == 1) {
		int i = atoi(de->d_name);

		assert_true(strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0);
		assert_int_equal(strlen(de->d_name), 70);
		assert_true(i >= 0 && i < NAMES);
		assert_false(seen[i]);
		assert_int_equal(de->d_type, DT_REG);
		seen[i] = true;
		n++;
	}
	assert_int_equal(r, 0);
	assert_int_equal(n, NAMES);
	assert_int_equal(dir_reader_next(d, &de), 0);
	dir_reader_close(d); /* closes dfd */
	tu_rmtree(dir);
	free(dir);
}

static void test_empty(void **state)
{
	char *dir = tu_mkdtemp();
	const struct dirent64 *de;
	struct dir_reader *d;

	(void)state;
	assert_int_equal(dir_reader_open(open_dir_fd(dir), &d), 0);
	assert_int_equal(dir_reader_next(d, &de), 0);
	assert_int_equal(dir_reader_next(d, &de), 0);
	dir_reader_close(d);
	tu_rmtree(dir);
	free(dir);
}

/* A regular file's descriptor: getdents64 refuses it; the error stays. */
static void test_not_a_directory(void **state)
{
	char *dir = tu_mkdtemp();
	const struct dirent64 *de;
	struct dir_reader *d;
	char path[4096];
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(dir_reader_open(fd, &d), 0);
	assert_int_equal(dir_reader_next(d, &de), -ENOTDIR);
	assert_int_equal(dir_reader_next(d, &de), -ENOTDIR);
	dir_reader_close(d);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_names),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_not_a_directory),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
