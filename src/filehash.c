/* SPDX-License-Identifier: MIT */
/*
 * Hashing a local file with io_uring: FILEHASH_DEPTH reads of FILEHASH_CHUNK
 * bytes in flight, consumed strictly in file order (a completion that comes
 * early waits in its slot), each slot resubmitted for the next chunk as soon
 * as it has been hashed. Small files are read with one pread: a ring round
 * trip costs more than it saves there.
 */
#include "filehash.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diskio.h"
#include "macro.h"

/* Up to this size a file is read with one synchronous pread. */
#define FILEHASH_SMALL (256u << 10)
/*
 * A file mostly in the page cache is copied out, not read from a disk: in
 * blocks small enough to stay in the CPU's cache between the copy and the
 * hash (a ring of large reads would evict each before it is hashed).
 */
#define FILEHASH_CACHED_BLOCK (128u << 10)

struct filehash_slot {
	uint64_t offset;
	int res;
	bool busy; /* submitted, not yet hashed */
	bool done; /* completed, waiting for its turn */
};

struct filehasher {
	struct io_uring ring;
	uint8_t *buf; /* FILEHASH_DEPTH * FILEHASH_CHUNK, page-aligned */
	struct filehash_slot slot[FILEHASH_DEPTH];
};

int filehasher_new(struct filehasher **ret)
{
	struct filehasher *fh = calloc(1, sizeof(*fh));
	void *buf = NULL;
	int r;

	if (!fh) {
		return -ENOMEM;
	}
	r = posix_memalign(&buf, 4096, (size_t)FILEHASH_DEPTH * FILEHASH_CHUNK);
	if (r != 0) {
		free(fh);
		return -r;
	}
	fh->buf = buf;
	r = io_uring_queue_init(FILEHASH_DEPTH * 2, &fh->ring, 0);
	if (r < 0) {
		free(fh->buf);
		free(fh);
		return r;
	}
	*ret = fh;
	return 0;
}

void filehasher_free(struct filehasher *fh)
{
	if (!fh) {
		return;
	}
	io_uring_queue_exit(&fh->ring);
	free(fh->buf);
	free(fh);
}

static uint8_t *slot_buf(struct filehasher *fh, unsigned i)
{
	return fh->buf + (size_t)i * FILEHASH_CHUNK;
}

/* Read len bytes at off into buf (finishing a short read); -ESTALE at an early end. */
static int read_full(int fd, uint8_t *buf, size_t len, uint64_t off, size_t got)
{
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			return negerrno();
		}
		if (n == 0) {
			return -ESTALE;
		}
		got += (size_t)n;
	}
	return 0;
}

static int submit_read(struct filehasher *fh, int fd, unsigned i, uint64_t offset, bool direct,
		       uint64_t size)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&fh->ring);
	/* O_DIRECT reads whole aligned chunks (the last one comes back short). */
	uint32_t len = direct ? FILEHASH_CHUNK : (uint32_t)MIN(FILEHASH_CHUNK, size - offset);

	assert(sqe);
	io_uring_prep_read(sqe, fd, slot_buf(fh, i), len, offset);
	io_uring_sqe_set_data64(sqe, i);
	fh->slot[i] = (struct filehash_slot){ .offset = offset, .busy = true };
	return 0;
}

/* Wait for every read still in flight: its buffer must not be reused under it. */
static void drain(struct filehasher *fh)
{
	for (unsigned i = 0; i < FILEHASH_DEPTH; i++) {
		while (fh->slot[i].busy && !fh->slot[i].done) {
			struct io_uring_cqe *cqe;

			if (io_uring_wait_cqe(&fh->ring, &cqe) < 0) {
				/* Only EINTR-like failures: try again. */
				continue;
			}
			fh->slot[io_uring_cqe_get_data64(cqe) % FILEHASH_DEPTH].done = true;
			io_uring_cqe_seen(&fh->ring, cqe);
		}
		fh->slot[i].busy = fh->slot[i].done = false;
	}
}

/* Hash the completed slot i: its chunk is the next one in file order. */
static int consume(struct filehasher *fh, int fd, unsigned i, uint64_t size, struct file_hash *h)
{
	struct filehash_slot *s = &fh->slot[i];
	size_t want = (size_t)MIN(FILEHASH_CHUNK, size - s->offset);
	int r;

	if (s->res < 0) {
		return s->res;
	}
	if ((size_t)s->res < want) {
		r = read_full(fd, slot_buf(fh, i), want, s->offset, (size_t)s->res);
		if (r < 0) {
			return r;
		}
	}
	file_hash_update(h, slot_buf(fh, i), want);
	s->busy = s->done = false;
	return 0;
}

static int hash_ring(struct filehasher *fh, int fd, uint64_t size, bool direct, struct file_hash *h)
{
	uint64_t next_submit = 0, next_hash = 0;
	int r = 0;

	for (unsigned i = 0; i < FILEHASH_DEPTH && next_submit < size; i++) {
		submit_read(fh, fd, i, next_submit, direct, size);
		next_submit += FILEHASH_CHUNK;
	}
	io_uring_submit(&fh->ring);
	while (r == 0 && next_hash < size) {
		unsigned want = (unsigned)((next_hash / FILEHASH_CHUNK) % FILEHASH_DEPTH);
		struct io_uring_cqe *cqe;

		if (!fh->slot[want].done) {
			r = io_uring_wait_cqe(&fh->ring, &cqe);
			if (r == -EINTR) {
				r = 0;
				continue;
			}
			if (r < 0) {
				break;
			}
			unsigned i = (unsigned)(io_uring_cqe_get_data64(cqe) % FILEHASH_DEPTH);

			fh->slot[i].res = cqe->res;
			fh->slot[i].done = true;
			io_uring_cqe_seen(&fh->ring, cqe);
			continue;
		}
		r = consume(fh, fd, want, size, h);
		next_hash += FILEHASH_CHUNK;
		if (r == 0 && next_submit < size) {
			submit_read(fh, fd, want, next_submit, direct, size);
			next_submit += FILEHASH_CHUNK;
			io_uring_submit(&fh->ring);
		}
	}
	drain(fh);
	return r;
}

/* From the page cache: pread and hash block by block, each still in the CPU's cache. */
static int hash_cached(struct filehasher *fh, int fd, uint64_t size, struct file_hash *h)
{
	for (uint64_t off = 0; off < size;) {
		size_t n = (size_t)MIN((uint64_t)FILEHASH_CACHED_BLOCK, size - off);
		int r = read_full(fd, fh->buf, n, off, 0);

		if (r < 0) {
			return r;
		}
		file_hash_update(h, fh->buf, n);
		off += n;
	}
	return 0;
}

/* O_DIRECT on fd where the file system allows it; returns whether it is set. */
static bool try_direct(int fd, int fl)
{
	struct dio_align a;

	if (diskio_dio_align(fd, &a) < 0 || a.mem == 0 || FILEHASH_CHUNK % a.offset != 0 ||
	    4096 % a.mem != 0) {
		return false;
	}
	return fcntl(fd, F_SETFL, fl | O_DIRECT) == 0;
}

int filehasher_fd(struct filehasher *fh, int fd, uint64_t size, uint8_t ret[HASH_LEN])
{
	return filehasher_fd_tree(fh, fd, size, 0, ret);
}

int filehasher_fd_tree(struct filehasher *fh, int fd, uint64_t size, uint32_t chunk,
		       uint8_t ret[HASH_LEN])
{
	struct file_hash h = { 0 };
	bool direct = false;
	int fl = -1, r;

	assert(fh && ret);
	r = file_hash_init_tree(&h, chunk);
	if (r < 0) {
		return r;
	}
	if (size <= FILEHASH_SMALL) {
		r = read_full(fd, fh->buf, (size_t)size, 0, 0);
	} else if (diskio_mostly_cached(fd, size)) {
		r = hash_cached(fh, fd, size, &h);
	} else {
		fl = fcntl(fd, F_GETFL);
		if (fl < 0) {
			r = negerrno();
		} else {
			direct = !(fl & O_DIRECT) && try_direct(fd, fl);
			r = hash_ring(fh, fd, size, direct, &h);
			if (r == -EINVAL && direct) {
				/* The file system took the flag but refuses the I/O: buffered. */
				fcntl(fd, F_SETFL, fl);
				direct = false;
				file_hash_free(&h);
				r = file_hash_init_tree(&h, chunk);
				r = r < 0 ? r : hash_ring(fh, fd, size, false, &h);
			}
		}
	}
	if (direct) {
		fcntl(fd, F_SETFL, fl);
	}
	if (r == 0) {
		if (size <= FILEHASH_SMALL) {
			file_hash_update(&h, fh->buf, (size_t)size);
		}
		file_hash_final(&h, ret);
	}
	file_hash_free(&h);
	return r;
}

int filehasher_at(struct filehasher *fh, int dirfd, const char *path, uint64_t size,
		  uint8_t ret[HASH_LEN])
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	r = diskio_open_read(dirfd, path, 0, &fd, NULL, &st);
	if (r < 0) {
		return r;
	}
	if ((uint64_t)st.st_size != size) {
		return -ESTALE;
	}
	return filehasher_fd(fh, fd, size, ret);
}
