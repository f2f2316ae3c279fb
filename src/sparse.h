/* SPDX-License-Identifier: MIT */
/*
 * Sparse data and zero extents: where a source file has data (SEEK_DATA,
 * SEEK_HOLE), whether a buffer is all zeros, and the one writer of zero
 * ranges on the receiving side (holes in files, write-zeroes on devices).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A buffer of *ret_len zero bytes (read only), for hashing zero ranges. */
const uint8_t *sparse_zero_buf(size_t *ret_len);

/* Is every byte of buf[0..len) zero? (len 0: yes) */
bool sparse_all_zero(const void *buf, size_t len);

/*
 * The first offset at or after off, below size, where fd has data
 * (SEEK_DATA): *ret_data, or size when there is none up to size. Where the
 * file system can't say (no SEEK_DATA: -EINVAL, -ENXIO semantics aside),
 * off itself: everything is taken for data. Returns 0 or -errno.
 */
int sparse_next_data(int fd, uint64_t off, uint64_t size, uint64_t *ret_data);

/* sparse_zero_range flags */
enum {
	/* Nothing was ever written in the range (a new temp file): nothing to punch. */
	SPARSE_FRESH = 1u << 0,
	/*
	 * Leave a regular file's size alone: writes may be in flight past the
	 * range (io_uring), and a size set from a stale fstat would cut them
	 * off. The caller grows the file last (sparse_grow_to).
	 */
	SPARSE_KEEP_SIZE = 1u << 1,
};

/*
 * Make [off, off + len) of fd read as zeros:
 *  - a block device: a write-zeroes the device may unmap
 *    (fallocate PUNCH_HOLE), or where it has none BLKZEROOUT (zeros
 *    written); the range must lie on its logical blocks;
 *  - a regular file: below its end the range is punched
 *    (FALLOC_FL_PUNCH_HOLE | KEEP_SIZE), or, where the file system can't
 *    punch, written with zeros; past its end only its size grows (a hole).
 * Returns 0 or -errno.
 */
int sparse_zero_range(int fd, uint64_t off, uint64_t len, unsigned flags);

/*
 * buf holds the len bytes just written at off of the regular file fd: give
 * back every run of whole SPARSE_BLOCK blocks of zeros in it (a punch, as
 * cp --sparse=always leaves them), so data chunks with holes inside keep
 * them. Nothing to do where the file system can't punch, nor for anything
 * but a regular file. 0 or -errno.
 */
#define SPARSE_BLOCK 4096u
int sparse_punch_zeros(int fd, const uint8_t *buf, uint64_t off, size_t len);

/* A regular file shorter than size grows to it (the tail a hole); others are left alone. */
int sparse_grow_to(int fd, uint64_t size);
