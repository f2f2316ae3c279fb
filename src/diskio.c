/* SPDX-License-Identifier: MIT */
/*
 * Disk I/O rules: when a file may be read with O_DIRECT (statx
 * STATX_DIOALIGN), and the alignment test every single I/O must pass before
 * it is issued on an O_DIRECT fd.
 */
#include "diskio.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "macro.h"

/* Pool chunks are at least page-aligned (pool.h): the memory alignment we can promise. */
#define DISKIO_CHUNK_MEM_ALIGN 4096u

#ifdef STATX_DIOALIGN
static int diskio_statx_dio(int fd, uint32_t *ret_mem, uint32_t *ret_offset)
{
	struct statx stx = { 0 };

	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) < 0) {
		return negerrno();
	}
	if (!(stx.stx_mask & STATX_DIOALIGN)) {
		*ret_mem = *ret_offset = 0;
		return 0;
	}
	*ret_mem = stx.stx_dio_mem_align;
	*ret_offset = stx.stx_dio_offset_align;
	return 0;
}
#else
/*
 * Headers older than Linux 6.1: the kernel's struct statx layout (fixed ABI,
 * 256 bytes) with the DIO fields at their kernel offsets, through the raw
 * syscall.
 */
#define STATX_DIOALIGN 0x00002000U
struct diskio_statx {
	uint32_t stx_mask;
	uint32_t stx_blksize;
	uint64_t stx_attributes;
	uint32_t stx_nlink, stx_uid, stx_gid;
	uint16_t stx_mode, spare0;
	uint64_t stx_ino, stx_size, stx_blocks, stx_attributes_mask;
	uint8_t stx_times[4 * 16];
	uint32_t stx_rdev_major, stx_rdev_minor, stx_dev_major, stx_dev_minor;
	uint64_t stx_mnt_id;
	uint32_t stx_dio_mem_align;
	uint32_t stx_dio_offset_align;
	uint64_t spare3[12];
};
_Static_assert(sizeof(struct diskio_statx) == 256, "kernel struct statx is 256 bytes");
_Static_assert(offsetof(struct diskio_statx, stx_dio_mem_align) == 0x98, "statx dio offset");

static int diskio_statx_dio(int fd, uint32_t *ret_mem, uint32_t *ret_offset)
{
	struct diskio_statx stx = { 0 };

	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) < 0) {
		return negerrno();
	}
	if (!(stx.stx_mask & STATX_DIOALIGN)) {
		*ret_mem = *ret_offset = 0;
		return 0;
	}
	*ret_mem = stx.stx_dio_mem_align;
	*ret_offset = stx.stx_dio_offset_align;
	return 0;
}
#endif

int diskio_dio_align(int fd, struct dio_align *ret)
{
	uint32_t mem = 0, offset = 0;
	int r;

	assert(ret);
	r = diskio_statx_dio(fd, &mem, &offset);
	/* A kernel without statx, or one that rejects the mask: no O_DIRECT. */
	if (r == -ENOSYS || r == -EINVAL) {
		mem = offset = 0;
	} else if (r < 0) {
		return r;
	}
	/* Half an answer is no answer. */
	if (mem == 0 || offset == 0) {
		struct stat st;
		uint64_t size;
		uint32_t lbs;

		mem = offset = 0;
		/* A block device always takes I/O in whole logical blocks. */
		if (fstat(fd, &st) == 0 && S_ISBLK(st.st_mode) &&
		    diskio_blk_geometry(fd, &size, &lbs) == 0) {
			mem = offset = lbs;
		}
	}
	ret->mem = mem;
	ret->offset = offset;
	return 0;
}

bool diskio_dio_ok(const struct dio_align *a, const void *buf, uint64_t offset, uint32_t len)
{
	/*
	 * Every one of buffer address, file offset and length must be aligned.
	 * The last chunk of a file is usually shorter than the alignment allows:
	 * that read fails this test, and the engine must issue it on a buffered
	 * fd (or read the aligned round-up and trim) rather than on the O_DIRECT
	 * fd, where the kernel would answer -EINVAL.
	 */
	if (!a || a->mem == 0 || a->offset == 0) {
		return false;
	}
	return (uintptr_t)buf % a->mem == 0 && offset % a->offset == 0 && len % a->offset == 0;
}

static int diskio_open_beneath(int dirfd, const char *path)
{
	/* O_NONBLOCK: opening a FIFO must not wait for a writer before we can refuse it. */
	int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	int fd;

	if (dirfd == AT_FDCWD) {
		/* A local path the user typed: symlinks are theirs to follow. */
		fd = openat(AT_FDCWD, path, flags);
	} else {
		/* Beneath a held directory (a module): the name may come from a peer. */
		struct open_how how = {
			.flags = (uint64_t)flags,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};

		do {
			fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
		} while (fd < 0 && errno == EAGAIN);
	}
	return fd < 0 ? negerrno() : fd;
}

int diskio_blk_geometry(int fd, uint64_t *ret_size, uint32_t *ret_lbs)
{
	uint64_t size;
	int lbs;

	if (ioctl(fd, BLKGETSIZE64, &size) < 0 || ioctl(fd, BLKSSZGET, &lbs) < 0) {
		return negerrno();
	}
	/* A power of two from 512 up, or the device lies: refuse it. */
	if (lbs < 512 || lbs > (1 << 20) || (lbs & (lbs - 1)) != 0) {
		return -EINVAL;
	}
	if (ret_size) {
		*ret_size = size;
	}
	if (ret_lbs) {
		*ret_lbs = (uint32_t)lbs;
	}
	return 0;
}

int diskio_fd_size(int fd, uint64_t *ret_size)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		return negerrno();
	}
	if (S_ISBLK(st.st_mode)) {
		return diskio_blk_geometry(fd, ret_size, NULL);
	}
	*ret_size = (uint64_t)st.st_size;
	return 0;
}

int diskio_open_read(int dirfd, const char *path, uint32_t chunk_size, int *ret_fd,
		     bool *ret_direct, struct stat *ret_st)
{
	return diskio_open_read_flags(dirfd, path, chunk_size, 0, ret_fd, ret_direct, ret_st);
}

int diskio_open_read_flags(int dirfd, const char *path, uint32_t chunk_size, unsigned flags,
			   int *ret_fd, bool *ret_direct, struct stat *ret_st)
{
	_cleanup_close_ int fd = -1;
	struct dio_align a;
	struct stat st;
	bool direct = false;
	int fl, r;

	assert(path && ret_fd);
	fd = diskio_open_beneath(dirfd, path);
	if (fd < 0) {
		return fd;
	}
	if (fstat(fd, &st) < 0) {
		return negerrno();
	}
	if (S_ISDIR(st.st_mode)) {
		return -EISDIR;
	}
	if (S_ISBLK(st.st_mode) && (flags & DISKIO_BLOCK)) {
		uint64_t size;

		r = diskio_blk_geometry(fd, &size, NULL);
		if (r < 0) {
			return r;
		}
		st.st_size = (off_t)size;
	} else if (!S_ISREG(st.st_mode)) {
		return -EINVAL;
	}
	/*
	 * The status flags diskio_open_beneath set, less O_NONBLOCK (where the
	 * file system can't wait for the disk on io_uring's worker, io_uring
	 * hands -EAGAIN back for such a read; DISKIO_NONBLOCK keeps it for a
	 * caller that handles that): F_SETFL changes only those, so nothing
	 * needs reading first.
	 */
	fl = 0;

	/* Direct I/O's alignment only matters where it is asked for. */
	r = chunk_size != 0 ? diskio_dio_align(fd, &a) : (a = (struct dio_align){ 0 }, 0);
	if (r < 0) {
		return r;
	}
	if (a.mem != 0 && chunk_size != 0 && chunk_size % a.offset == 0 &&
	    DISKIO_CHUNK_MEM_ALIGN % a.mem == 0) {
		/* The kernel refuses F_SETFL O_DIRECT where the file system can't: fall back. */
		if (fcntl(fd, F_SETFL, fl | O_DIRECT) == 0) {
			direct = true;
		}
	}
	if (!direct && !(flags & DISKIO_NONBLOCK) && fcntl(fd, F_SETFL, fl) < 0) {
		return negerrno();
	}

	*ret_fd = TAKE_FD(fd);
	if (ret_direct) {
		*ret_direct = direct;
	}
	if (ret_st) {
		*ret_st = st;
	}
	return 0;
}

#ifndef __NR_cachestat
#define __NR_cachestat 451 /* the same number on every architecture */
#endif

/* The kernel's struct cachestat_range and struct cachestat (linux/mman.h, 6.5+). */
struct diskio_cachestat_range {
	uint64_t off;
	uint64_t len;
};

struct diskio_cachestat {
	uint64_t nr_cache;
	uint64_t nr_dirty;
	uint64_t nr_writeback;
	uint64_t nr_evicted;
	uint64_t nr_recently_evicted;
};

#define DISKIO_CACHE_SAMPLES 16

/*
 * Without cachestat: read one byte at evenly spread offsets with RWF_NOWAIT,
 * which succeeds only from the page cache; any user may do this. A miss ends
 * it: the miss starts readahead, which later samples must not count.
 */
static bool diskio_sampled_cached(int fd, uint64_t size)
{
	for (unsigned i = 0; i < DISKIO_CACHE_SAMPLES; i++) {
		char b;
		struct iovec iov = { .iov_base = &b, .iov_len = 1 };
		off_t off = (off_t)(size / DISKIO_CACHE_SAMPLES * i);

		if (preadv2(fd, &iov, 1, off, RWF_NOWAIT) != 1) {
			return false;
		}
	}
	return true;
}

bool diskio_mostly_cached(int fd, uint64_t size)
{
	struct diskio_cachestat_range range = { .off = 0, .len = size };
	struct diskio_cachestat cs = { 0 };
	long page = sysconf(_SC_PAGESIZE);

	if (size == 0 || page <= 0) {
		return false;
	}
	/*
	 * Since Linux 6.14 cachestat answers EPERM for a file the caller may
	 * not write (an ordinary user reading someone else's file): sample.
	 */
	if (syscall(__NR_cachestat, fd, &range, &cs, 0) < 0) {
		return diskio_sampled_cached(fd, size);
	}
	return cs.nr_cache * (uint64_t)page >= size / 2;
}
