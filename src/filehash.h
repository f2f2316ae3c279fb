/* SPDX-License-Identifier: MIT */
/*
 * XXH3-128 of a local file (the digest src/hash.h streams), read through a
 * private io_uring with a few large reads in flight: while one buffer is
 * hashed the next ones are being read. For `--skip checksum` style
 * comparisons and `rdmacp check`, where each side hashes its own files.
 */
#pragma once

#include <stdint.h>

#include "hash.h"

/* Reads in flight and their size: FILEHASH_DEPTH * FILEHASH_CHUNK bytes of buffers. */
#define FILEHASH_DEPTH 4
#define FILEHASH_CHUNK (2u << 20)

struct filehasher;

/* One ring and its buffers, reused for many files; not thread-safe. */
int filehasher_new(struct filehasher **ret);
void filehasher_free(struct filehasher *fh);
static inline void filehasher_freep(struct filehasher **fh)
{
	filehasher_free(*fh);
}

/*
 * The XXH3-128 of the first size bytes of fd, a regular file open for
 * reading (its file status flags are restored before returning). A file
 * mostly in the page cache is copied out in small blocks that stay in the
 * CPU's cache until hashed; another goes through the ring, with O_DIRECT
 * where the file system allows it, buffered otherwise.
 * Returns 0, -ESTALE when the file ends before size bytes (it changed), or
 * the read's -errno. ret is untouched on failure.
 */
int filehasher_fd(struct filehasher *fh, int fd, uint64_t size, uint8_t ret[HASH_LEN]);
/* The same digest as a chunk tree of chunk bytes a chunk (hash.h; 0: the stream, as above). */
int filehasher_fd_tree(struct filehasher *fh, int fd, uint64_t size, uint32_t chunk,
		       uint8_t ret[HASH_LEN]);

/*
 * The same for path beneath dirfd (diskio_open_read's rules: AT_FDCWD for a
 * local path, else resolved beneath dirfd without following symlinks),
 * which must be a regular file of exactly size bytes (-ESTALE otherwise).
 */
int filehasher_at(struct filehasher *fh, int dirfd, const char *path, uint64_t size,
		  uint8_t ret[HASH_LEN]);
