/* SPDX-License-Identifier: MIT */
/*
 * The registered buffer pool: one anonymous region (2 MiB huge pages when the
 * system has a hugetlb pool; else, for whole 2 MiB, aligned to 2 MiB and
 * advised for transparent huge pages; 4 KiB-aligned otherwise), registered once with io_uring as
 * fixed buffers, carved into equal power-of-two chunks. The transport
 * registration is done by the caller (it needs the xport). Bounded: the size
 * is fixed at creation and counts against a caller-held budget.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct io_uring;

struct pool {
	void *base;
	size_t size;	   /* bytes mapped (chunk_size * nchunks) */
	size_t chunk_size; /* power of two, >= 4096 */
	uint32_t nchunks;
	bool hugepages; /* backed by MAP_HUGETLB */
	/* free-list of chunk indexes (LIFO) */
	uint32_t *free_list;
	uint32_t nfree;
	/* io_uring fixed-buffer registration: one iovec per <= 1 GiB piece, or per chunk */
	struct io_uring *ring;
	unsigned buf_piece_size; /* bytes per registered iovec (multiple of chunk_size) */
	/*
	 * Registered chunk by chunk (pool_register_uring_lazy): which chunks
	 * the kernel holds (NULL: the whole pool went in at once), and their bytes.
	 */
	bool *chunk_pinned;
	size_t pinned_bytes;
};

/*
 * Map size bytes (rounded down to whole chunks; at least one). chunk_size must
 * be a power of two in [4 KiB, 64 MiB]. -ENOMEM when the mapping fails.
 */
int pool_create(size_t size, size_t chunk_size, struct pool **ret_pool);

/*
 * An anonymous zeroed mapping of at least size bytes, aligned to 2 MiB and
 * advised for transparent huge pages (where the kernel allows them, enabled
 * = always or madvise; normal pages otherwise). *ret_len: the length mapped,
 * size rounded up to 2 MiB, for munmap. NULL when mmap fails.
 */
void *mem_map_thp(size_t size, size_t *ret_len);
void pool_destroy(struct pool *p); /* unregisters from io_uring first; NULL ok */

/*
 * Prefer NUMA node `node` for the pool's pages and move those already there
 * (libnuma's numa_tonode_memory: MPOL_PREFERRED, MPOL_MF_MOVE). -EINVAL for a
 * node that does not exist, -ENOSYS on kernels without NUMA.
 */
int pool_bind_node(struct pool *p, int node);

/*
 * Register with io_uring as fixed buffers (may pin memory). -ENOMEM/-EPERM
 * from the kernel when RLIMIT_MEMLOCK is too small: see pool_memlock_advice.
 */
int pool_register_uring(struct pool *p, struct io_uring *ring);

/*
 * Register with io_uring a table of one empty fixed buffer per chunk
 * (nothing pinned, nothing faulted in); pool_pin_chunk fills a chunk's entry
 * when it is first read into. A pool registered so pays, in zeroed and pinned
 * pages, for the chunks it uses, not for its size. -E2BIG past io_uring's
 * table size (POOL_MAX_FIXED_BUFS chunks): register the whole pool instead.
 */
#define POOL_MAX_FIXED_BUFS 16384u
int pool_register_uring_lazy(struct pool *p, struct io_uring *ring);
/*
 * Make chunk idx usable by READ/WRITE_FIXED: pins it (RLIMIT_MEMLOCK applies,
 * as to pool_register_uring) the first time; 0 at once after that, and for a
 * pool registered whole.
 */
int pool_pin_chunk(struct pool *p, uint32_t idx);

/* Fixed-buffer index for a pointer inside the pool (for READ/WRITE_FIXED). */
int pool_buf_index(const struct pool *p, const void *ptr);

void *pool_chunk(const struct pool *p, uint32_t idx);
uint32_t pool_chunk_index(const struct pool *p, const void *ptr);
/* Take a free chunk: returns its index, or -ENOBUFS when none is free. */
int pool_get(struct pool *p);
void pool_put(struct pool *p, uint32_t idx);

/*
 * Check RLIMIT_MEMLOCK against `need` bytes (CAP_IPC_LOCK lifts it). Returns
 * 0 when fine, -ENOMEM when too small, and writes advice into msg: the limit,
 * the need, and how to raise it (ulimit -l, LimitMEMLOCK=infinity,
 * docker --ulimit memlock=-1).
 */
int pool_memlock_check(size_t need, char *msg, size_t msglen);
/*
 * The pure part of pool_memlock_check, with the limit (RLIM_INFINITY for none)
 * and whether the process holds CAP_IPC_LOCK given explicitly. msg is "" when
 * the need fits.
 */
int pool_memlock_advice(uint64_t need, uint64_t limit, bool cap_ipc_lock, char *msg, size_t msglen);
/* 1 when CAP_IPC_LOCK is in the effective set (/proc/self/status), 0 if not, -errno. */
int pool_has_cap_ipc_lock(void);
/* 1 when RLIMIT_MEMLOCK does not bound what we pin (RLIM_INFINITY or CAP_IPC_LOCK), 0, -errno. */
int pool_memlock_unbounded(void);
