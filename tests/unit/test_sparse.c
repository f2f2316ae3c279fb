/* SPDX-License-Identifier: MIT */
/*
 * Zero extents (src/sparse.c) on real files: the all-zero test, SEEK_DATA
 * as the sender uses it, and the zero-range writer: a punch where a file
 * has data (it reads zeros and its blocks are freed), only a size past the
 * end, nothing with KEEP_SIZE, the size grown last. The block-device branch
 * (BLKZEROOUT) is tested on a loop device in test_sparse_loop.c.
 */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sparse.h"

#define MIB ((uint64_t)1 << 20)

static char *dir;

static int file_new(const char *name)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	return fd;
}

static void fill(int fd, uint64_t off, uint64_t len, uint8_t byte)
{
	uint8_t *buf = malloc(len);

	assert_non_null(buf);
	memset(buf, byte, len);
	assert_int_equal(pwrite(fd, buf, len, (off_t)off), (ssize_t)len);
	free(buf);
}

/* Does [off, off + len) of fd read as all zeros? */
static bool reads_zero(int fd, uint64_t off, uint64_t len)
{
	uint8_t *buf = malloc(len);
	bool z;

	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	z = sparse_all_zero(buf, len);
	free(buf);
	return z;
}

static uint64_t allocated(int fd)
{
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

static void test_all_zero(void **state)
{
	uint8_t buf[4096] = { 0 };

	(void)state;
	assert_true(sparse_all_zero(buf, 0));
	assert_true(sparse_all_zero(buf, 1));
	assert_true(sparse_all_zero(buf, sizeof(buf)));
	/* A byte anywhere: in the head, just past it, the very last. */
	for (size_t at = 0; at < sizeof(buf); at += at < 70 ? 1 : 997) {
		buf[at] = 1;
		assert_false(sparse_all_zero(buf, sizeof(buf)));
		assert_true(sparse_all_zero(buf, at));
		buf[at] = 0;
	}
	buf[sizeof(buf) - 1] = 0x80;
	assert_false(sparse_all_zero(buf, sizeof(buf)));
}

static void test_next_data(void **state)
{
	int fd = file_new("nd");
	uint64_t d;

	(void)state;
	assert_int_equal(ftruncate(fd, (off_t)(64 * MIB)), 0);
	fill(fd, 8 * MIB, MIB, 0xaa);
	assert_int_equal(sparse_next_data(fd, 0, 64 * MIB, &d), 0);
	if (d == 0) {
		close(fd);
		skip(); /* a file system without holes: everything is data */
	}
	assert_true(d <= 8 * MIB);
	assert_int_equal(sparse_next_data(fd, 8 * MIB, 64 * MIB, &d), 0);
	assert_true(d == 8 * MIB);
	/* Past the last data: the end. At or past the end: the end too. */
	assert_int_equal(sparse_next_data(fd, 10 * MIB, 64 * MIB, &d), 0);
	assert_true(d == 64 * MIB);
	assert_int_equal(sparse_next_data(fd, 64 * MIB, 64 * MIB, &d), 0);
	assert_true(d == 64 * MIB);
	/* A size below the file's: capped to it. */
	assert_int_equal(sparse_next_data(fd, 0, 4 * MIB, &d), 0);
	assert_true(d == 4 * MIB);
	close(fd);
}

/* Data below the end is punched: zeros, and its blocks are given back. */
static void test_zero_punches(void **state)
{
	int fd = file_new("punch");
	uint64_t before;

	(void)state;
	fill(fd, 0, 16 * MIB, 0x5a);
	assert_int_equal(fsync(fd), 0);
	before = allocated(fd);
	assert_int_equal(sparse_zero_range(fd, 4 * MIB, 8 * MIB, 0), 0);
	assert_true(reads_zero(fd, 4 * MIB, 8 * MIB));
	assert_false(reads_zero(fd, 4 * MIB - 1, 1));
	assert_false(reads_zero(fd, 12 * MIB, 1));
	assert_true(allocated(fd) <= before - 8 * MIB);
	/* The size stays. */
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 16 * MIB);
	close(fd);
}

/* Past the end: a hole by the size alone; with KEEP_SIZE not even that; grown last. */
static void test_zero_past_end(void **state)
{
	int fd = file_new("tail");
	struct stat st;

	(void)state;
	fill(fd, 0, MIB, 0x11);
	/* Straddling the end: the data part punched, the rest made by the size. */
	assert_int_equal(sparse_zero_range(fd, MIB / 2, 4 * MIB, 0), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, MIB / 2 + 4 * MIB);
	assert_true(reads_zero(fd, MIB / 2, 4 * MIB));
	assert_false(reads_zero(fd, 0, 1));
	assert_int_equal(sparse_zero_range(fd, 8 * MIB, MIB, SPARSE_KEEP_SIZE), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, MIB / 2 + 4 * MIB);
	assert_int_equal(sparse_grow_to(fd, 9 * MIB), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 9 * MIB);
	assert_true(reads_zero(fd, MIB / 2, 9 * MIB - MIB / 2));
	/* Never shrinks. */
	assert_int_equal(sparse_grow_to(fd, MIB), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 9 * MIB);
	close(fd);
}

/* FRESH: the caller says nothing is there; data that is there stays (not the writer's to touch). */
static void test_zero_fresh(void **state)
{
	int fd = file_new("fresh");

	(void)state;
	fill(fd, 0, MIB, 0x77);
	assert_int_equal(sparse_zero_range(fd, 0, 2 * MIB, SPARSE_FRESH), 0);
	assert_false(reads_zero(fd, 0, 1));
	assert_true(reads_zero(fd, MIB, MIB));
	close(fd);
}

/* Blocks of zeros inside written data become holes; partial blocks and other bytes stay. */
static void test_punch_zeros(void **state)
{
	int fd = file_new("pz");
	size_t len = 64 * SPARSE_BLOCK;
	uint8_t *buf = calloc(1, len);
	uint64_t before;

	(void)state;
	assert_non_null(buf);
	/* Data in blocks 0, 10..11, a byte in the middle of block 40, the last byte. */
	memset(buf, 0x33, SPARSE_BLOCK);
	memset(buf + 10 * SPARSE_BLOCK, 0x44, 2 * SPARSE_BLOCK);
	buf[40 * SPARSE_BLOCK + 2000] = 1;
	buf[len - 1] = 2;
	assert_int_equal(pwrite(fd, buf, len, 0), (ssize_t)len);
	assert_int_equal(fsync(fd), 0);
	before = allocated(fd);
	assert_int_equal(sparse_punch_zeros(fd, buf, 0, len), 0);
	if (allocated(fd) == before) {
		free(buf);
		close(fd);
		skip(); /* a file system that can't punch */
	}
	/* 59 of the 64 blocks are zeros: at most the 5 others stay (and metadata). */
	assert_true(allocated(fd) <= 8 * SPARSE_BLOCK);
	{
		uint8_t *back = malloc(len);

		assert_non_null(back);
		assert_int_equal(pread(fd, back, len, 0), (ssize_t)len);
		assert_memory_equal(back, buf, len);
		free(back);
	}
	/* Not on a block boundary: the head up to the next block is left alone. */
	assert_int_equal(sparse_punch_zeros(fd, buf + 1, 1, len - 1), 0);
	free(buf);
	close(fd);
}

static void test_zero_refuses(void **state)
{
	int fd = file_new("bad"), p[2];

	(void)state;
	assert_int_equal(sparse_zero_range(fd, 0, 0, 0), 0);
	assert_int_equal(sparse_zero_range(fd, UINT64_MAX - 1, 2, 0), -EFBIG);
	assert_int_equal(sparse_zero_range(fd, (uint64_t)INT64_MAX, 1, 0), -EFBIG);
	close(fd);
	assert_int_equal(sparse_zero_range(fd, 0, 1, 0), -EBADF);
	/* Neither a file nor a block device. */
	assert_int_equal(pipe(p), 0);
	assert_int_equal(sparse_zero_range(p[1], 0, 1, 0), -EINVAL);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_zero),     cmocka_unit_test(test_next_data),
		cmocka_unit_test(test_zero_punches), cmocka_unit_test(test_zero_past_end),
		cmocka_unit_test(test_zero_fresh),   cmocka_unit_test(test_zero_refuses),
		cmocka_unit_test(test_punch_zeros),
	};
	int r;

	dir = tu_mkdtemp();
	r = cmocka_run_group_tests(tests, NULL, NULL);
	tu_rmtree(dir);
	free(dir);
	return r;
}
