/* SPDX-License-Identifier: MIT */
/*
 * Sparse data and zero extents (see sparse.h). The receiver never writes
 * a zero range byte by byte where the kernel can describe it: a file gets a
 * hole, a block device a write-zeroes the device may unmap (else
 * BLKZEROOUT). What reads back is zeros either way, which is what both ends
 * hashed (and what a device's read back checks).
 */
#include "sparse.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

#define ZERO_BUF ((size_t)1 << 20)

static const uint8_t zeros[ZERO_BUF];

const uint8_t *sparse_zero_buf(size_t *ret_len)
{
	*ret_len = sizeof(zeros);
	return zeros;
}

bool sparse_all_zero(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t head = MIN(len, (size_t)64);

	/* Data usually differs early: look at the head before the whole. */
	for (size_t i = 0; i < head; i++) {
		if (p[i]) {
			return false;
		}
	}
	return len <= 64 || memcmp(p, p + 64, len - 64) == 0;
}

int sparse_next_data(int fd, uint64_t off, uint64_t size, uint64_t *ret_data)
{
	off_t d;

	if (off >= size) {
		*ret_data = size;
		return 0;
	}
	d = lseek(fd, (off_t)off, SEEK_DATA);
	if (d < 0) {
		if (errno == ENXIO) {
			*ret_data = size; /* nothing but a hole up to the end */
			return 0;
		}
		if (errno == EINVAL || errno == EOPNOTSUPP) {
			*ret_data = off; /* the file system can't tell: all data */
			return 0;
		}
		return negerrno();
	}
	*ret_data = MIN((uint64_t)d, size);
	return 0;
}

static int zero_write(int fd, uint64_t off, uint64_t len)
{
	while (len > 0) {
		size_t n = (size_t)MIN(len, (uint64_t)sizeof(zeros));
		ssize_t w = pwrite(fd, zeros, n, (off_t)off);

		if (w < 0 && errno == EINTR) {
			continue;
		}
		if (w <= 0) {
			return w < 0 ? negerrno() : -EIO;
		}
		off += (uint64_t)w;
		len -= (uint64_t)w;
	}
	return 0;
}

/*
 * A block device's range made zeros that the device itself guarantees.
 * fallocate(PUNCH_HOLE) on a block device is a REQ_OP_WRITE_ZEROES that may
 * unmap the blocks, and never falls back to writing zeros: the device
 * offers it (NVMe Write Zeroes, which may deallocate; SCSI WRITE SAME with
 * UNMAP only where the device reports reading zeros after an unmap; a loop
 * device punches its backing file) or the call fails with EOPNOTSUPP. Then
 * BLKZEROOUT: a write-zeroes that keeps the blocks mapped, else zero pages
 * written by the kernel. A plain discard (BLKDISCARD) is never used: no
 * device promises what it reads back after one (BLKDISCARDZEROES is always
 * 0, discard_zeroes_data gone). The copy's read back checks it all anyway.
 */
static int blk_zero_range(int fd, uint64_t off, uint64_t len)
{
	uint64_t range[2] = { off, len }, size;

	/* fallocate with KEEP_SIZE would cut a range past the end short: refuse it whole. */
	if (ioctl(fd, BLKGETSIZE64, &size) < 0) {
		return negerrno();
	}
	if (off > size || len > size - off) {
		return -EINVAL;
	}
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) ==
	    0) {
		return 0;
	}
	if (errno != EOPNOTSUPP) {
		return negerrno();
	}
	return ioctl(fd, BLKZEROOUT, range) < 0 ? negerrno() : 0;
}

int sparse_zero_range(int fd, uint64_t off, uint64_t len, unsigned flags)
{
	struct stat st;
	uint64_t below;

	if (len == 0) {
		return 0;
	}
	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off) {
		return -EFBIG;
	}
	if (fstat(fd, &st) < 0) {
		return negerrno();
	}
	if (S_ISBLK(st.st_mode)) {
		return blk_zero_range(fd, off, len);
	}
	if (!S_ISREG(st.st_mode)) {
		return -EINVAL;
	}
	/* The part below the current end has (or may have) data: punched. */
	below = (uint64_t)st.st_size > off ? MIN(len, (uint64_t)st.st_size - off) : 0;
	if (below > 0 && !(flags & SPARSE_FRESH) &&
	    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)below) <
		0) {
		if (errno != EOPNOTSUPP && errno != ENOSYS) {
			return negerrno();
		}
		int r = zero_write(fd, off, below);

		if (r < 0) {
			return r;
		}
	}
	/* Past the end: a hole, by the size alone. */
	if (!(flags & SPARSE_KEEP_SIZE) && off + len > (uint64_t)st.st_size &&
	    ftruncate(fd, (off_t)(off + len)) < 0) {
		return negerrno();
	}
	return 0;
}

int sparse_punch_zeros(int fd, const uint8_t *buf, uint64_t off, size_t len)
{
	size_t run = 0, at = 0;
	bool checked = false;

	/* Offsets on blocks only: the part of a block before off is not ours to judge. */
	size_t skip = off % SPARSE_BLOCK ? SPARSE_BLOCK - off % SPARSE_BLOCK : 0;

	for (size_t i = skip; i <= len; i += SPARSE_BLOCK) {
		bool zero = i + SPARSE_BLOCK <= len && sparse_all_zero(buf + i, SPARSE_BLOCK);

		if (zero) {
			if (run == 0) {
				at = i;
			}
			run += SPARSE_BLOCK;
			continue;
		}
		if (run > 0 && !checked) {
			struct stat st;

			/* Regular files only: a device's written zeros are as good as any. */
			if (fstat(fd, &st) < 0) {
				return negerrno();
			}
			if (!S_ISREG(st.st_mode)) {
				return 0;
			}
			checked = true;
		}
		if (run > 0 && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					 (off_t)(off + at), (off_t)run) < 0) {
			return errno == EOPNOTSUPP || errno == ENOSYS ? 0 : negerrno();
		}
		run = 0;
	}
	return 0;
}

int sparse_grow_to(int fd, uint64_t size)
{
	struct stat st;

	if (size > (uint64_t)INT64_MAX) {
		return -EFBIG;
	}
	if (fstat(fd, &st) < 0) {
		return negerrno();
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size >= size) {
		return 0;
	}
	return ftruncate(fd, (off_t)size) < 0 ? negerrno() : 0;
}
