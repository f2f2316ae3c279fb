/* SPDX-License-Identifier: MIT */
/*
 * The zero-range writer's block-device branch (sparse_zero_range: a
 * write-zeroes the device may unmap, else BLKZEROOUT) on a real loop device
 * over a file of non-zero bytes: the range reads zeros through the device,
 * the bytes around it are untouched, and where the loop device offers
 * write-zeroes the range is unmapped (a hole in its backing file); a range
 * off the device's blocks or past its end is refused. Needs root and loop devices
 * (losetup); without them it exits 77 saying why. The device is always
 * detached.
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

#define MIB	 ((uint64_t)1 << 20)
#define DEV_SIZE (16 * MIB)

static char *dir;
static char dev[64];

static void detach(void)
{
	char cmd[128];

	if (dev[0]) {
		snprintf(cmd, sizeof(cmd), "losetup -d %s", dev);
		if (system(cmd) != 0) {
			fprintf(stderr, "warning: %s failed\n", cmd);
		}
		dev[0] = '\0';
	}
	if (dir) {
		tu_rmtree(dir);
		free(dir);
		dir = NULL;
	}
}

/* A loop device over a file of 0xa5 bytes: its path in dev, or exit 77. */
static void attach(void)
{
	char img[4096], cmd[4200];
	uint8_t *buf = malloc(DEV_SIZE);
	FILE *p;
	int fd;

	assert_non_null(buf);
	if (geteuid() != 0) {
		tu_skip("loop devices need root");
	}
	snprintf(img, sizeof(img), "%s/img", dir);
	fd = open(img, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	memset(buf, 0xa5, DEV_SIZE);
	assert_int_equal(pwrite(fd, buf, DEV_SIZE, 0), (ssize_t)DEV_SIZE);
	close(fd);
	free(buf);
	snprintf(cmd, sizeof(cmd), "losetup -f --show %s 2>/dev/null", img);
	p = popen(cmd, "r");
	if (!p || !fgets(dev, sizeof(dev), p)) {
		dev[0] = '\0';
		if (p) {
			pclose(p);
		}
		detach();
		tu_skip("no loop device (losetup -f failed)");
	}
	pclose(p);
	dev[strcspn(dev, "\n")] = '\0';
	if (strncmp(dev, "/dev/loop", 9) != 0) {
		dev[0] = '\0';
		detach();
		tu_skip("losetup said something unexpected");
	}
}

static bool range_is(int fd, uint64_t off, uint64_t len, uint8_t byte)
{
	uint8_t *buf = malloc(len);
	bool ok = true;

	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	for (uint64_t i = 0; i < len && ok; i++) {
		ok = buf[i] == byte;
	}
	free(buf);
	return ok;
}

/* The loop device's queue/write_zeroes_max_bytes (0: none, or unknown). */
static unsigned long long write_zeroes_max(void)
{
	char path[128];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/block/%s/queue/write_zeroes_max_bytes", dev + 5);
	f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%llu", &v) != 1) {
			v = 0;
		}
		fclose(f);
	}
	return v;
}

static void test_blkzeroout(void **state)
{
	int fd = open(dev, O_RDWR | O_CLOEXEC | O_DIRECT);
	struct stat st;

	(void)state;
	if (fd < 0) {
		fd = open(dev, O_RDWR | O_CLOEXEC);
	}
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISBLK(st.st_mode));
	assert_int_equal(sparse_zero_range(fd, 4 * MIB, 6 * MIB, 0), 0);
	close(fd);
	/* Read back through a fresh, buffered descriptor. */
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_true(range_is(fd, 4 * MIB, 6 * MIB, 0));
	assert_true(range_is(fd, 0, 4 * MIB, 0xa5));
	assert_true(range_is(fd, 10 * MIB, DEV_SIZE - 10 * MIB, 0xa5));
	close(fd);
	/* Unmapped, not written: the loop device punched its backing file there. */
	if (write_zeroes_max() > 0) {
		char img[4096];
		int ifd;

		snprintf(img, sizeof(img), "%s/img", dir);
		ifd = open(img, O_RDONLY | O_CLOEXEC);
		assert_true(ifd >= 0);
		assert_int_equal(lseek(ifd, (off_t)(4 * MIB), SEEK_HOLE), (off_t)(4 * MIB));
		assert_int_equal(lseek(ifd, (off_t)(4 * MIB), SEEK_DATA), (off_t)(10 * MIB));
		close(ifd);
	} else {
		fprintf(stderr, "note: %s has no write-zeroes: the unmapping is not checked\n",
			dev);
	}
	/* Off the device's logical blocks, or past its end: the kernel refuses. */
	fd = open(dev, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(sparse_zero_range(fd, 100, 512, 0), -EINVAL);
	assert_int_equal(sparse_zero_range(fd, DEV_SIZE - MIB, 2 * MIB, 0), -EINVAL);
	assert_true(range_is(fd, DEV_SIZE - MIB, MIB, 0xa5));
	/* sparse_grow_to leaves a device alone. */
	assert_int_equal(sparse_grow_to(fd, 2 * DEV_SIZE), 0);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blkzeroout),
	};
	int r;

	dir = tu_mkdtemp();
	attach();
	r = cmocka_run_group_tests(tests, NULL, NULL);
	detach();
	return r;
}
