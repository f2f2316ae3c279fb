/* SPDX-License-Identifier: MIT */
/*
 * Disk I/O rules on real files: open_read of a file (O_DIRECT where the file
 * system allows, and then really set), of a directory, a FIFO (refused
 * without blocking), a device; names beneath a held directory never follow
 * symlinks or escape; the dio_ok truth table.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "diskio.h"

#define FILE_LEN (3 * 4096 + 100)

static char *tmpdir;

static char *path_in(const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", tmpdir, name) > 0);
	return p;
}

static void make_file(const char *name, size_t len)
{
	char *p = path_in(name);
	char *data = malloc(len);
	int fd;

	for (size_t i = 0; i < len; i++) {
		data[i] = (char)('a' + i % 26);
	}
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fsync(fd), 0);
	close(fd);
	free(data);
	free(p);
}

static int setup(void **state)
{
	(void)state;
	tmpdir = tu_mkdtemp();
	make_file("f", FILE_LEN);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmtree(tmpdir);
	free(tmpdir);
	return 0;
}

static void on_alarm(int sig)
{
	(void)sig;
	/* open_read blocked (a FIFO waiting for a writer): that is the bug. */
	static const char m[] = "open_read blocked\n";
	(void)!write(2, m, sizeof(m) - 1);
	_exit(1);
}

static void test_open_regular(void **state)
{
	char *p = path_in("f");
	struct dio_align a;
	struct stat st;
	bool direct = false;
	int fd = -1, fl;
	static char buf[8192] __attribute__((aligned(4096)));

	(void)state;
	assert_int_equal(diskio_open_read(AT_FDCWD, p, 1 << 20, &fd, &direct, &st), 0);
	assert_true(fd >= 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_size, FILE_LEN);
	fl = fcntl(fd, F_GETFL);
	assert_true(fl >= 0);
	assert_int_equal(fl & O_NONBLOCK, 0);
	assert_int_equal(!!(fl & O_DIRECT), direct);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(diskio_dio_align(fd, &a), 0);
	printf("%s: dio mem %u offset %u, opened %s\n", tmpdir, a.mem, a.offset,
	       direct ? "O_DIRECT" : "buffered");
	if (a.mem != 0 && 4096 % a.mem == 0 && (1u << 20) % a.offset == 0) {
		/* The file system said yes: so must we. */
		assert_true(direct);
	}
	if (direct) {
		/* An aligned O_DIRECT read really works, and an unaligned one really does not. */
		assert_true(diskio_dio_ok(&a, buf, 4096, 4096));
		assert_int_equal(pread(fd, buf, 4096, 4096), 4096);
		assert_int_equal(buf[0], 'a' + 4096 % 26);
		if (a.mem > 1) {
			assert_false(diskio_dio_ok(&a, buf + 1, 0, 4096));
			assert_int_equal(pread(fd, buf + 1, 4096, 0), -1);
			assert_int_equal(errno, EINVAL);
		}
	}
	close(fd);

	/* A chunk size the file system cannot align to: buffered. */
	if (a.offset > 1) {
		assert_int_equal(diskio_open_read(AT_FDCWD, p, a.offset + 1, &fd, &direct, NULL),
				 0);
		assert_false(direct);
		assert_int_equal(fcntl(fd, F_GETFL) & O_DIRECT, 0);
		close(fd);
	}
	free(p);
}

static void test_open_refused(void **state)
{
	char *fifo = path_in("fifo");
	struct stat st = { .st_size = 4242 };
	bool direct = true;
	int fd = -7;

	(void)state;
	assert_int_equal(diskio_open_read(AT_FDCWD, tmpdir, 4096, &fd, &direct, &st), -EISDIR);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	signal(SIGALRM, on_alarm);
	alarm(10);
	assert_int_equal(diskio_open_read(AT_FDCWD, fifo, 4096, &fd, &direct, &st), -EINVAL);
	alarm(0);
	assert_int_equal(diskio_open_read(AT_FDCWD, "/dev/null", 4096, &fd, &direct, &st), -EINVAL);
	assert_int_equal(diskio_open_read(AT_FDCWD, "/nonexistent/x", 4096, &fd, &direct, &st),
			 -ENOENT);
	/* Outputs untouched on failure. */
	assert_int_equal(fd, -7);
	assert_true(direct);
	assert_int_equal(st.st_size, 4242);
	free(fifo);
}

/*
 * DISKIO_BLOCK: block devices only, read as files of the device's size;
 * other special files are still refused. A block device is tried where one
 * can be opened (/dev/loop0, attached or not); else that part is left out.
 */
static void test_open_block(void **state)
{
	char *fifo = path_in("fifo-blk");
	char *p = path_in("f");
	struct stat st;
	uint64_t size = 0;
	uint32_t lbs = 0;
	int fd = -7;

	(void)state;
	assert_int_equal(
	    diskio_open_read_flags(AT_FDCWD, "/dev/null", 4096, DISKIO_BLOCK, &fd, NULL, &st),
	    -EINVAL);
	assert_int_equal(
	    diskio_open_read_flags(AT_FDCWD, tmpdir, 4096, DISKIO_BLOCK, &fd, NULL, &st), -EISDIR);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(diskio_open_read_flags(AT_FDCWD, fifo, 4096, DISKIO_BLOCK, &fd, NULL, &st),
			 -EINVAL);
	assert_int_equal(fd, -7);

	/* A regular file: its st_size; no device geometry. */
	fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(diskio_fd_size(fd, &size), 0);
	assert_int_equal(size, FILE_LEN);
	assert_int_equal(diskio_blk_geometry(fd, &size, &lbs), -ENOTTY);
	close(fd);

	/* Another program may attach or detach it meanwhile: only what one open says is compared. */
	fd = open("/dev/loop0", O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		close(fd);
		fd = -1;
		assert_int_equal(diskio_open_read(AT_FDCWD, "/dev/loop0", 4096, &fd, NULL, &st),
				 -EINVAL);
		assert_int_equal(diskio_open_read_flags(AT_FDCWD, "/dev/loop0", 4096, DISKIO_BLOCK,
							&fd, NULL, &st),
				 0);
		assert_true(S_ISBLK(st.st_mode));
		assert_int_equal(diskio_blk_geometry(fd, NULL, &lbs), 0);
		assert_true(lbs >= 512 && (lbs & (lbs - 1)) == 0);
		assert_int_equal(diskio_fd_size(fd, &size), 0);
		close(fd);
	} else {
		print_message("no /dev/loop0 to open: the block device part is left out\n");
	}
	unlink(fifo);
	free(p);
	free(fifo);
}

static void test_open_beneath(void **state)
{
	char *link = path_in("link"), *sub = path_in("sub");
	int dirfd, fd = -1;
	bool direct;

	(void)state;
	assert_int_equal(symlink("f", link), 0);
	assert_int_equal(mkdir(sub, 0755), 0);
	dirfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dirfd >= 0);

	assert_int_equal(diskio_open_read(dirfd, "f", 4096, &fd, &direct, NULL), 0);
	close(fd);
	/* Local path typed by the user: symlinks followed. */
	assert_int_equal(diskio_open_read(AT_FDCWD, link, 4096, &fd, &direct, NULL), 0);
	close(fd);
	/* Beneath a held directory: never. */
	fd = -1;
	assert_int_equal(diskio_open_read(dirfd, "link", 4096, &fd, &direct, NULL), -ELOOP);
	assert_int_equal(diskio_open_read(dirfd, "sub/../../etc/passwd", 4096, &fd, &direct, NULL),
			 -EXDEV);
	assert_int_equal(diskio_open_read(dirfd, "/etc/passwd", 4096, &fd, &direct, NULL), -EXDEV);
	assert_int_equal(fd, -1);
	close(dirfd);
	free(link);
	free(sub);
}

static void test_dio_align(void **state)
{
	struct dio_align a = { 77, 77 };
	int pfd[2];

	(void)state;
	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(diskio_dio_align(pfd[0], &a), 0);
	assert_int_equal(a.mem, 0);
	assert_int_equal(a.offset, 0);
	close(pfd[0]);
	close(pfd[1]);
	a.mem = 77;
	assert_int_equal(diskio_dio_align(-1, &a), -EBADF);
	assert_int_equal(a.mem, 77);
}

static void test_dio_ok_table(void **state)
{
	const struct dio_align none = { 0, 0 }, mem_only = { 512, 0 }, off_only = { 0, 512 };
	const struct dio_align a = { 512, 4096 };
	char *const aligned = (char *)(uintptr_t)0x100000;

	(void)state;
	assert_false(diskio_dio_ok(NULL, aligned, 0, 4096));
	assert_false(diskio_dio_ok(&none, aligned, 0, 4096));
	assert_false(diskio_dio_ok(&mem_only, aligned, 0, 4096));
	assert_false(diskio_dio_ok(&off_only, aligned, 0, 4096));

	assert_true(diskio_dio_ok(&a, aligned, 0, 4096));
	assert_true(diskio_dio_ok(&a, aligned + 512, 8192, 1 << 20));
	assert_true(diskio_dio_ok(&a, aligned, 1ull << 40, 4096)); /* offsets past 4 GiB */
	assert_true(diskio_dio_ok(&a, aligned, 0, 0));
	/* Each of the three misaligned alone is enough to refuse. */
	assert_false(diskio_dio_ok(&a, aligned + 1, 0, 4096));
	assert_false(diskio_dio_ok(&a, aligned + 256, 0, 4096));
	assert_false(diskio_dio_ok(&a, aligned, 512, 4096));
	assert_false(diskio_dio_ok(&a, aligned, (1ull << 40) + 1, 4096));
	/* The short last chunk of a file: buffered. */
	assert_false(diskio_dio_ok(&a, aligned, 8192, 100));
	assert_false(diskio_dio_ok(&a, aligned, 8192, 4096 + 512));
}

/*
 * POSIX_FADV_DONTNEED is best effort: pages just read may still sit in
 * another CPU's LRU batch, where it can't drop them. Ask again a few times.
 */
static bool drop_cached(int fd)
{
	for (int i = 0; i < 50; i++) {
		if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) {
			return false;
		}
		if (!diskio_mostly_cached(fd, FILE_LEN)) {
			return true;
		}
		usleep(10000);
	}
	return false;
}

/* A file in the page cache is reported as such; once dropped, it is not. */
static void test_mostly_cached(void **state)
{
	char *p;
	int fd;

	(void)state;
	assert_true(asprintf(&p, "%s/f", tmpdir) > 0);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	if (!diskio_mostly_cached(fd, FILE_LEN)) {
		/* Just written: cached, unless the kernel lacks cachestat(2). */
		close(fd);
		free(p);
		skip();
	}
	assert_true(drop_cached(fd));
	assert_false(diskio_mostly_cached(fd, FILE_LEN));
	assert_false(diskio_mostly_cached(fd, 0));
	assert_false(diskio_mostly_cached(-1, FILE_LEN));
	close(fd);
	free(p);
}

/*
 * An ordinary user reading another user's file: cachestat(2) refuses it
 * (Linux 6.14+), the page cache is sampled instead. Needs root to become
 * nobody (65534) in a child.
 */
static void test_mostly_cached_other_user(void **state)
{
	char *p, buf[FILE_LEN];
	int status;
	pid_t pid;

	(void)state;
	if (geteuid() != 0) {
		skip();
	}
	assert_true(asprintf(&p, "%s/f", tmpdir) > 0);
	assert_int_equal(chmod(tmpdir, 0711), 0);
	assert_int_equal(chmod(p, 0644), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd;

		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0) {
			_exit(2);
		}
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || read(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
			_exit(3);
		}
		if (!diskio_mostly_cached(fd, FILE_LEN)) {
			_exit(4); /* just read: in the cache */
		}
		if (!drop_cached(fd)) {
			_exit(5); /* dropped: not */
		}
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_regular),
		cmocka_unit_test(test_open_refused),
		cmocka_unit_test(test_open_block),
		cmocka_unit_test(test_open_beneath),
		cmocka_unit_test(test_dio_align),
		cmocka_unit_test(test_dio_ok_table),
		cmocka_unit_test(test_mostly_cached),
		cmocka_unit_test(test_mostly_cached_other_user),
	};

	return cmocka_run_group_tests(tests, setup, teardown) ? 1 : 0;
}
