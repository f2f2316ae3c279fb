/* SPDX-License-Identifier: MIT */
/*
 * Disk I/O helpers around io_uring: choosing O_DIRECT, and submitting reads
 * and writes into registered (fixed) buffers. The engine owns the ring; this
 * file owns the rules for alignment and short I/O.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct statx;

struct dio_align {
	uint32_t mem;	 /* memory alignment (0 = O_DIRECT unsupported) */
	uint32_t offset; /* file offset/length alignment */
};

/*
 * Open a regular file for reading beneath dirfd (AT_FDCWD allowed for local
 * sources). Tries O_DIRECT when statx reports STATX_DIOALIGN support and
 * the chunk size fits its alignment; falls back to buffered I/O otherwise.
 * Refuses non-regular files (-EINVAL... -EISDIR for directories).
 */
int diskio_open_read(int dirfd, const char *path, uint32_t chunk_size, int *ret_fd,
		     bool *ret_direct, struct stat *ret_st);

/*
 * diskio_open_read() with flags. DISKIO_BLOCK: a block device is read too,
 * as a file of the device's size (BLKGETSIZE64): *ret_st says S_ISBLK and
 * holds that size in st_size. Without it a block device is -EINVAL as any
 * other special file. DISKIO_NONBLOCK: a buffered fd keeps the O_NONBLOCK it
 * was opened with (one system call less a file). io_uring still waits for
 * the disk on its worker where the file system supports that (ext4, XFS,
 * btrfs); elsewhere it answers -EAGAIN, and the caller clears O_NONBLOCK
 * (F_SETFL 0) and reads again.
 */
enum { DISKIO_BLOCK = 1u << 0, DISKIO_NONBLOCK = 1u << 1 };
int diskio_open_read_flags(int dirfd, const char *path, uint32_t chunk_size, unsigned flags,
			   int *ret_fd, bool *ret_direct, struct stat *ret_st);

/*
 * A block device's size in bytes (BLKGETSIZE64) and logical block size
 * (BLKSSZGET), the unit every O_DIRECT offset and length on it must keep.
 */
int diskio_blk_geometry(int fd, uint64_t *ret_size, uint32_t *ret_lbs);

/* The size of what fd is: st_size for a file, the device's size for a block device. */
int diskio_fd_size(int fd, uint64_t *ret_size);

/* Pure: may an I/O of len bytes at offset from buf use O_DIRECT? */
bool diskio_dio_ok(const struct dio_align *a, const void *buf, uint64_t offset, uint32_t len);

/*
 * Is at least half of the first size bytes of fd in the page cache?
 * (cachestat(2), Linux 6.5+; where it fails, as for a file the caller may
 * not write since 6.14, a sample of RWF_NOWAIT reads decides.)
 */
bool diskio_mostly_cached(int fd, uint64_t size);

/*
 * statx STATX_DIOALIGN for an open fd; zeros when unsupported. A block
 * device the kernel does not answer for gets its logical block size for
 * both.
 */
int diskio_dio_align(int fd, struct dio_align *ret);
