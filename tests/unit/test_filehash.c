/* SPDX-License-Identifier: MIT */
/*
 * filehash: the io_uring file hasher gives the digest hash.h gives for the
 * same bytes, at every size around its chunk and small-file boundaries,
 * buffered and (where the file system allows) O_DIRECT; a file shorter
 * than announced is -ESTALE; the fd's flags are left as they were.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "filehash.h"

static char *dir;

static uint8_t *pattern(size_t len)
{
	uint8_t *b = malloc(len ? len : 1);
	uint32_t x = (uint32_t)len * 2654435761u + 1;

	assert_non_null(b);
	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		b[i] = (uint8_t)(x >> 16);
	}
	return b;
}

/* A file of len pattern bytes, fsynced and dropped from the page cache. */
static int make_file(size_t len, uint8_t **ret_data)
{
	char path[4096];
	uint8_t *b = pattern(len);
	int fd;

	snprintf(path, sizeof(path), "%s/f%zu", dir, len);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, b + off, len - off);
		assert_true(n > 0);
		off += (size_t)n;
	}
	assert_int_equal(fsync(fd), 0);
	/* Not cached: the hasher tries O_DIRECT on this one. */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	*ret_data = b;
	return fd;
}

static void expect_digest(struct filehasher *fh, size_t len)
{
	uint8_t *data, got[HASH_LEN], want[HASH_LEN];
	struct file_hash h = { 0 };
	int fd = make_file(len, &data);
	int fl = fcntl(fd, F_GETFL);

	assert_int_equal(file_hash_init(&h), 0);
	file_hash_update(&h, data, len);
	file_hash_final(&h, want);
	file_hash_free(&h);

	memset(got, 0, sizeof(got));
	assert_int_equal(filehasher_fd(fh, fd, len, got), 0);
	assert_memory_equal(got, want, HASH_LEN);
	assert_int_equal(fcntl(fd, F_GETFL), fl);
	/* Again, now from the page cache (read in small blocks, not through the ring). */
	for (off_t off = 0; off < (off_t)len;) {
		static uint8_t sink[1 << 16];
		ssize_t n = pread(fd, sink, sizeof(sink), off);

		assert_true(n > 0);
		off += n;
	}
	memset(got, 0, sizeof(got));
	assert_int_equal(filehasher_fd(fh, fd, len, got), 0);
	assert_memory_equal(got, want, HASH_LEN);
	close(fd);
	free(data);
}

static void test_sizes(void **state)
{
	const size_t sizes[] = {
		0,
		1,
		4095,
		256u << 10,
		(256u << 10) + 1,
		FILEHASH_CHUNK - 1,
		FILEHASH_CHUNK,
		FILEHASH_CHUNK + 1,
		(size_t)FILEHASH_CHUNK * FILEHASH_DEPTH,
		(size_t)FILEHASH_CHUNK * (FILEHASH_DEPTH + 3) + 12345,
	};
	struct filehasher *fh = NULL;

	(void)state;
	assert_int_equal(filehasher_new(&fh), 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		expect_digest(fh, sizes[i]);
	}
	filehasher_free(fh);
	filehasher_free(NULL);
}

/* The empty file's digest is the published XXH3-128 of no bytes. */
static void test_known_empty(void **state)
{
	struct filehasher *fh = NULL;
	uint8_t got[HASH_LEN], *data;
	char hex[2 * HASH_LEN + 1];
	int fd = make_file(0, &data);

	(void)state;
	assert_int_equal(filehasher_new(&fh), 0);
	assert_int_equal(filehasher_fd(fh, fd, 0, got), 0);
	hash_to_hex(got, hex);
	assert_string_equal(hex, "99aa06d3014798d86001c324468d497f");
	filehasher_free(fh);
	close(fd);
	free(data);
}

/* Shorter than announced (it changed under us): -ESTALE, small and large, digest untouched. */
static void test_short_file(void **state)
{
	const size_t sizes[] = { 1000, (size_t)FILEHASH_CHUNK * 2 + 7 };
	struct filehasher *fh = NULL;

	(void)state;
	assert_int_equal(filehasher_new(&fh), 0);
	for (size_t i = 0; i < 2; i++) {
		uint8_t got[HASH_LEN], *data;
		int fd = make_file(sizes[i], &data);

		memset(got, 0xa5, sizeof(got));
		assert_int_equal(filehasher_fd(fh, fd, sizes[i] + FILEHASH_CHUNK, got), -ESTALE);
		for (size_t k = 0; k < HASH_LEN; k++) {
			assert_int_equal(got[k], 0xa5);
		}
		/* The hasher is still usable after a failure. */
		assert_int_equal(filehasher_fd(fh, fd, sizes[i], got), 0);
		close(fd);
		free(data);
	}
	filehasher_free(fh);
}

/* A file descriptor that can't be read: the read's error. */
static void test_unreadable(void **state)
{
	struct filehasher *fh = NULL;
	uint8_t got[HASH_LEN];
	char path[4096];
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/wo", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)FILEHASH_CHUNK * 3), 0);
	assert_int_equal(filehasher_new(&fh), 0);
	assert_int_equal(filehasher_fd(fh, fd, 100, got), -EBADF);
	assert_int_equal(filehasher_fd(fh, fd, (uint64_t)FILEHASH_CHUNK * 3, got), -EBADF);
	filehasher_free(fh);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_known_empty),
		cmocka_unit_test(test_short_file),
		cmocka_unit_test(test_unreadable),
	};
	int r;

	dir = tu_mkdtemp();
	r = cmocka_run_group_tests(tests, NULL, NULL);
	tu_rmtree(dir);
	free(dir);
	return r ? 1 : 0;
}
