/* SPDX-License-Identifier: MIT */
/*
 * Compressed plans (src/zfile.c, plan_read.c): a zstd plan read as its plain
 * self, cut short naming the line; the zreader under it, plain and zstd alike.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "plan.h"
#include "plan_harness.h"
#include "zfile.h"

/* path (a plain file) as a zstd frame into zpath; only the first keep bytes of it when keep. */
static void compress_file(const char *path, const char *zpath, size_t keep)
{
	struct zwriter *w;
	char buf[4096];
	size_t n;
	FILE *in = fopen(path, "r");
	int fd = open(zpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_non_null(in);
	assert_true(fd >= 0);
	assert_int_equal(zwriter_new(fd, true, &w), 0);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
		assert_int_equal(zwriter_write(w, buf, n), 0);
	}
	assert_int_equal(zwriter_finish(w), 0);
	zwriter_free(w);
	if (keep) {
		assert_int_equal(ftruncate(fd, (off_t)keep), 0);
	}
	close(fd);
	fclose(in);
}

/* A zstd plan reads as its plain self, passes twice; cut short or corrupt it names the line. */
static void test_plan_zstd(void **state)
{
	char path[] = "/tmp/test_plan.XXXXXX", zpath[64], err[8192];
	struct plan_header h;
	struct plan_reader *r;
	struct plan_entry e;
	struct stat st;
	unsigned n;
	int fd = mkstemp(path), q;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	snprintf(zpath, sizeof(zpath), "%s.zst", path);
	write_plan(path, &h, 20000);
	compress_file(path, zpath, 0);
	assert_int_equal(plan_open(zpath, &r, err, sizeof(err)), 0);
	assert_string_equal(plan_reader_header(r)->id, h.id);
	for (int pass = 0; pass < 2; pass++) {
		n = 0;
		assert_int_equal(plan_rewind(r), 0);
		while ((q = plan_next(r, &e, err, sizeof(err))) > 0) {
			n++;
			assert_int_equal(e.n, n);
		}
		assert_int_equal(q, 0);
		assert_int_equal(n, 20000);
	}
	plan_close(r);

	/* Cut in the middle of the frame: an error naming a line past the header. */
	assert_int_equal(stat(zpath, &st), 0);
	compress_file(path, zpath, (size_t)st.st_size / 2);
	assert_int_equal(plan_open(zpath, &r, err, sizeof(err)), 0);
	n = 0;
	while ((q = plan_next(r, &e, err, sizeof(err))) > 0) {
		n++;
	}
	assert_int_equal(q, -EBADMSG);
	assert_non_null(strstr(err, "the zstd stream ends inside a frame"));
	{
		char want[128];

		snprintf(want, sizeof(want), "%s:%u: ", zpath, n + 2);
		assert_non_null(strstr(err, want));
	}
	plan_close(r);
	unlink(zpath);
	unlink(path);
}

/* zreader: fgets-like lines, capped; tell and seek, plain and zstd alike. */
static void test_zreader(void **state)
{
	char path[] = "/tmp/test_zfile.XXXXXX", zpath[64], buf[16];
	const char *files[2] = { path, zpath };
	int fd = mkstemp(path);
	size_t len;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "one\ntwo-and-more\nthree", 23), 23);
	close(fd);
	snprintf(zpath, sizeof(zpath), "%s.zst", path);
	compress_file(path, zpath, 0);
	for (int i = 0; i < 2; i++) {
		struct zreader *r;
		uint64_t at;

		assert_int_equal(zreader_open(files[i], &r), 0);
		assert_int_equal(zreader_compressed(r), i == 1);
		assert_int_equal(zreader_gets(r, buf, sizeof(buf), &len), 1);
		assert_string_equal(buf, "one\n");
		at = zreader_tell(r);
		assert_int_equal(at, 4);
		/* A line longer than the buffer: cap - 1 bytes, no newline. */
		assert_int_equal(zreader_gets(r, buf, 8, &len), 1);
		assert_string_equal(buf, "two-and");
		assert_int_equal(zreader_gets(r, buf, sizeof(buf), &len), 1);
		assert_string_equal(buf, "-more\n");
		assert_int_equal(zreader_gets(r, buf, sizeof(buf), &len), 1);
		assert_string_equal(buf, "three");
		assert_int_equal(zreader_gets(r, buf, sizeof(buf), &len), 0);
		assert_int_equal(zreader_seek(r, at), 0);
		assert_int_equal(zreader_gets(r, buf, sizeof(buf), &len), 1);
		assert_string_equal(buf, "two-and-more\n");
		zreader_close(r);
	}
	unlink(zpath);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_zstd),
		cmocka_unit_test(test_zreader),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
