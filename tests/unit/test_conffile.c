/* SPDX-License-Identifier: MIT */
/*
 * src/conffile.c, the one reader of config files: only a regular file within
 * the size cap is read, whole; lines are split and checked against the line
 * cap. Both configs' loaders are tested on top of it (test_client_config,
 * test_daemon_config); this is the rule itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "conffile.h"

static char *tmpdir;
static char why[4400];

static int setup(void **state)
{
	tmpdir = tu_mkdtemp();
	return tmpdir ? 0 : -1;
}

static int teardown(void **state)
{
	tu_rmtree(tmpdir);
	free(tmpdir);
	return 0;
}

/* tmpdir/name holding len bytes of c; its path in ret (4200 bytes). */
static void make_file(const char *name, size_t len, char c, char *ret)
{
	char *buf = malloc(len + 1);
	int fd;

	assert_non_null(buf);
	memset(buf, c, len);
	snprintf(ret, 4200, "%s/%s", tmpdir, name);
	fd = open(ret, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
	free(buf);
}

/* conffile_read(path) fails with r, "path: " and word in why, and leaves its outputs alone. */
static void expect_refused(const char *path, int r, const char *word)
{
	char *text = (char *)"untouched";
	size_t len = 42;

	/* A regression reads /dev/zero or waits on a FIFO for ever: fail instead. */
	alarm(10);
	assert_int_equal(conffile_read(path, &text, &len, why, sizeof(why)), r);
	alarm(0);
	assert_string_equal(text, "untouched");
	assert_int_equal(len, 42);
	if (strncmp(why, path, strlen(path)) != 0 || strncmp(why + strlen(path), ": ", 2) != 0 ||
	    !strstr(why, word)) {
		fail_msg("expected \"%s: ...%s...\", got \"%s\"", path, word, why);
	}
}

static void test_read_regular(void **state)
{
	char path[4200], *text = NULL;
	size_t len = 0;

	make_file("empty", 0, 'x', path);
	assert_int_equal(conffile_read(path, &text, &len, why, sizeof(why)), 0);
	assert_int_equal(len, 0);
	assert_string_equal(text, "");
	free(text);

	/* Exactly the cap is a config; its text is NUL-terminated. */
	make_file("max", CONFFILE_MAX_SIZE, '#', path);
	assert_int_equal(conffile_read(path, &text, &len, why, sizeof(why)), 0);
	assert_int_equal(len, CONFFILE_MAX_SIZE);
	assert_int_equal(text[len - 1], '#');
	assert_int_equal(text[len], '\0');
	free(text);
}

static void test_read_refused(void **state)
{
	char path[4200];

	make_file("big", CONFFILE_MAX_SIZE + 1, '#', path);
	expect_refused(path, -EFBIG, "file too big (1048577 bytes");
	snprintf(path, sizeof(path), "%s/fifo", tmpdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	expect_refused(path, -EINVAL, "not a regular file (it is a FIFO)");
	expect_refused(tmpdir, -EISDIR, "not a regular file (it is a directory)");
	snprintf(path, sizeof(path), "%s/missing", tmpdir);
	expect_refused(path, -ENOENT, "cannot open: ");
	/* /dev/null too: an empty config is the caller's choice (client/config.c). */
	expect_refused("/dev/null", -EINVAL, "not a regular file (it is a character device)");
	if (access("/dev/zero", R_OK) == 0) {
		expect_refused("/dev/zero", -EINVAL,
			       "not a regular file (it is a character device)");
	}
}

/* Lines without their "\n" or "\r\n"; the last one may lack its line end. */
static void test_lines(void **state)
{
	static const char text[] = "a = 1\r\n\nb\r\r\nlast";
	static const char *const want[] = { "a = 1", "", "b", "last" };
	size_t pos = 0, n = 0, len = strlen(text);
	const char *line;
	size_t line_len;

	while (conffile_next_line(text, len, &pos, &line, &line_len)) {
		assert_true(n < 4);
		assert_int_equal(line_len, strlen(want[n]));
		assert_memory_equal(line, want[n], line_len);
		n++;
	}
	assert_int_equal(n, 4);
	assert_int_equal(pos, len);
	/* A final line end makes no empty line after it. */
	pos = 0;
	assert_true(conffile_next_line("x\n", 2, &pos, &line, &line_len));
	assert_false(conffile_next_line("x\n", 2, &pos, &line, &line_len));
}

static void test_line_check(void **state)
{
	char *line = malloc(CONFFILE_MAX_LINE + 1);

	assert_non_null(line);
	memset(line, 'k', CONFFILE_MAX_LINE + 1);
	assert_int_equal(conffile_line_check(line, CONFFILE_MAX_LINE, why, sizeof(why)), 0);
	assert_int_equal(conffile_line_check(line, CONFFILE_MAX_LINE + 1, why, sizeof(why)),
			 -E2BIG);
	assert_string_equal(why, "line too long (4097 bytes, at most 4096)");
	line[3] = '\0';
	assert_int_equal(conffile_line_check(line, 10, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "NUL byte in line");
	free(line);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_regular),
		cmocka_unit_test(test_read_refused),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_line_check),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
