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

/* Pure: may an I/O of len bytes at offset from buf use O_DIRECT? */
bool diskio_dio_ok(const struct dio_align *a, const void *buf, uint64_t offset, uint32_t len);

/*
 * Is at least half of the first size bytes of fd in the page cache?
 * (cachestat(2), Linux 6.5+; where it fails, as for a file the caller may
 * not write since 6.14, a sample of RWF_NOWAIT reads decides.)
 */
bool diskio_mostly_cached(int fd, uint64_t size);

/* statx STATX_DIOALIGN for an open fd; zeros when unsupported. */
int diskio_dio_align(int fd, struct dio_align *ret);
