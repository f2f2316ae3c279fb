/* SPDX-License-Identifier: MIT */
/*
 * The registered buffer pool: one anonymous mapping carved into equal chunks,
 * a LIFO free list of chunk indexes, the io_uring fixed-buffer registration
 * (one iovec per <= 1 GiB piece, the kernel's per-buffer cap), the
 * RLIMIT_MEMLOCK check with advice, and the process-wide pinned-bytes budget.
 */
#include "pool.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "macro.h"
#include "units.h"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif

#define POOL_HUGE_PAGE (2u << 20)
#define POOL_MIN_CHUNK 4096u
#define POOL_MAX_CHUNK (64u << 20)
/* io_uring refuses a fixed buffer over 1 GiB. */
#define POOL_MAX_PIECE	 (1u << 30)
#define CAP_IPC_LOCK_BIT 14

/*
 * Per-chunk state lives right after the free list in the same allocation, so
 * that a double pool_put() (our own bug, and one that would hand the same
 * chunk to two transfers) is caught by an assert instead of corrupting data.
 */
static uint8_t *pool_chunk_busy(const struct pool *p)
{
	return (uint8_t *)(p->free_list + p->nchunks);
}

void *mem_map_thp(size_t size, size_t *ret_len)
{
	size_t len = (size + POOL_HUGE_PAGE - 1) & ~(size_t)(POOL_HUGE_PAGE - 1);
	uint8_t *raw;
	uintptr_t a;
	size_t head;

	if (len < size) {
		return NULL;
	}
	/* 2 MiB alignment: map 2 MiB more and trim both ends. */
	raw = mmap(NULL, len + POOL_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	if (raw == MAP_FAILED) {
		return NULL;
	}
	a = ((uintptr_t)raw + POOL_HUGE_PAGE - 1) & ~(uintptr_t)(POOL_HUGE_PAGE - 1);
	head = a - (uintptr_t)raw;
	if (head > 0) {
		munmap(raw, head);
	}
	munmap((uint8_t *)a + len, POOL_HUGE_PAGE - head);
	/* Only a hint: a kernel that says no (enabled = never) leaves normal pages. */
	(void)madvise((void *)a, len, MADV_HUGEPAGE);
	*ret_len = len;
	return (void *)a;
}

static void *pool_map(size_t size, bool *ret_huge)
{
	void *base;

	if (size % POOL_HUGE_PAGE == 0) {
		base = mmap(NULL, size, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB | MAP_POPULATE,
			    -1, 0);
		if (base != MAP_FAILED) {
			*ret_huge = true;
			return base;
		}
	}
	*ret_huge = false;
	/*
	 * No hugetlb pool: transparent huge pages where the kernel allows them.
	 * Fewer TLB misses while the pool is hashed and copied, and fewer pages
	 * to pin for io_uring and the NIC.
	 */
	if (size % POOL_HUGE_PAGE == 0) {
		size_t len;

		base = mem_map_thp(size, &len);
		if (base) {
			return base;
		}
	}
	/*
	 * Normal pages: mmap is page-aligned, which satisfies O_DIRECT (4 KiB).
	 * Not populated: registration (io_uring, RDMA) pins them when it comes,
	 * and a pool that is never used costs nothing.
	 */
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return base == MAP_FAILED ? NULL : base;
}

int pool_create(size_t size, size_t chunk_size, struct pool **ret_pool)
{
	_cleanup_free_ struct pool *p = NULL;
	_cleanup_free_ uint32_t *free_list = NULL;
	uint64_t nchunks;
	size_t total;
	bool huge = false;
	void *base;

	assert(ret_pool);
	if (chunk_size < POOL_MIN_CHUNK || chunk_size > POOL_MAX_CHUNK ||
	    (chunk_size & (chunk_size - 1)) != 0) {
		return -EINVAL;
	}
	nchunks = size / chunk_size;
	if (nchunks == 0) {
		nchunks = 1;
	}
	/* io_uring allows at most 16384 fixed buffers of 1 GiB: far beyond this cap. */
	if (nchunks > UINT32_MAX / 2) {
		return -EINVAL;
	}
	total = (size_t)nchunks * chunk_size;

	p = calloc(1, sizeof(*p));
	/* The free list plus one busy byte per chunk (see pool_chunk_busy). */
	free_list = calloc(nchunks, sizeof(uint32_t) + 1);
	if (!p || !free_list) {
		return -ENOMEM;
	}
	base = pool_map(total, &huge);
	if (!base) {
		return -ENOMEM;
	}

	p->base = base;
	p->size = total;
	p->chunk_size = chunk_size;
	p->nchunks = (uint32_t)nchunks;
	p->hugepages = huge;
	p->free_list = TAKE_PTR(free_list);
	/* LIFO: the lowest index comes out first, keeping the hot set small. */
	for (uint32_t i = 0; i < p->nchunks; i++) {
		p->free_list[i] = p->nchunks - 1 - i;
	}
	p->nfree = p->nchunks;
	p->ring = NULL;
	p->buf_piece_size = (unsigned)MIN(total, (size_t)POOL_MAX_PIECE);
	assert(p->buf_piece_size % chunk_size == 0);

	*ret_pool = TAKE_PTR(p);
	return 0;
}

void pool_destroy(struct pool *p)
{
	if (!p) {
		return;
	}
	/* The kernel holds page references until the buffers are unregistered. */
	if (p->ring) {
		io_uring_unregister_buffers(p->ring);
		p->ring = NULL;
	}
	free(p->chunk_pinned);
	if (p->base) {
		munmap(p->base, p->size);
	}
	free(p->free_list);
	free(p);
}

/*
 * From <linux/mempolicy.h>, spelled out here: the raw syscall keeps libnuma
 * (and its runtime dependency) out of the build for one call.
 */
#define POOL_MPOL_PREFERRED 1
#define POOL_MPOL_MF_MOVE   (1u << 1)
#define POOL_MAX_NODE	    1024

int pool_bind_node(struct pool *p, int node)
{
	unsigned long mask[POOL_MAX_NODE / (8 * sizeof(unsigned long))] = { 0 };
	const unsigned bits = 8 * sizeof(unsigned long);

	assert(p);
	if (node < 0 || node >= POOL_MAX_NODE) {
		return -EINVAL;
	}
	mask[node / bits] = 1ul << (node % bits);
	/* maxnode counts one past the highest bit the kernel reads (as libnuma passes it). */
	if (syscall(SYS_mbind, p->base, p->size, POOL_MPOL_PREFERRED, mask,
		    (unsigned long)POOL_MAX_NODE + 1, POOL_MPOL_MF_MOVE) != 0) {
		return negerrno();
	}
	return 0;
}

static unsigned pool_npieces(const struct pool *p)
{
	return (unsigned)((p->size + p->buf_piece_size - 1) / p->buf_piece_size);
}

int pool_register_uring(struct pool *p, struct io_uring *ring)
{
	_cleanup_free_ struct iovec *iovs = NULL;
	unsigned n;
	int r;

	assert(p && ring);
	if (p->ring) {
		return -EBUSY;
	}
	n = pool_npieces(p);
	iovs = calloc(n, sizeof(*iovs));
	if (!iovs) {
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		size_t off = (size_t)i * p->buf_piece_size;

		iovs[i].iov_base = (char *)p->base + off;
		iovs[i].iov_len = MIN((size_t)p->buf_piece_size, p->size - off);
	}
	r = io_uring_register_buffers(ring, iovs, n);
	if (r < 0) {
		return r;
	}
	p->ring = ring;
	p->pinned_bytes = p->size;
	return 0;
}

int pool_register_uring_lazy(struct pool *p, struct io_uring *ring)
{
	_cleanup_free_ bool *pinned = NULL;
	_cleanup_free_ struct iovec *empty = NULL;
	int r;

	assert(p && ring);
	if (p->ring) {
		return -EBUSY;
	}
	if (p->nchunks > POOL_MAX_FIXED_BUFS) {
		return -E2BIG;
	}
	pinned = calloc(p->nchunks, sizeof(*pinned));
	/* Empty entries (no base, no length) are holes the kernel fills on update. */
	empty = calloc(p->nchunks, sizeof(*empty));
	if (!pinned || !empty) {
		return -ENOMEM;
	}
	r = io_uring_register_buffers(ring, empty, p->nchunks);
	if (r < 0) {
		return r;
	}
	p->ring = ring;
	p->buf_piece_size = (unsigned)p->chunk_size;
	p->chunk_pinned = TAKE_PTR(pinned);
	p->pinned_bytes = 0;
	return 0;
}

int pool_pin_chunk(struct pool *p, uint32_t idx)
{
	struct iovec iov;
	int r;

	assert(p && p->ring && idx < p->nchunks);
	if (!p->chunk_pinned || p->chunk_pinned[idx]) {
		return 0;
	}
	iov.iov_base = pool_chunk(p, idx);
	iov.iov_len = p->chunk_size;
	r = io_uring_register_buffers_update_tag(p->ring, idx, &iov, NULL, 1);
	if (r < 0) {
		return r;
	}
	p->chunk_pinned[idx] = true;
	p->pinned_bytes += p->chunk_size;
	return 0;
}

int pool_buf_index(const struct pool *p, const void *ptr)
{
	uintptr_t b, q;

	assert(p);
	b = (uintptr_t)p->base;
	q = (uintptr_t)ptr;
	if (q < b || q - b >= p->size) {
		return -EINVAL;
	}
	return (int)((q - b) / p->buf_piece_size);
}

void *pool_chunk(const struct pool *p, uint32_t idx)
{
	assert(p && idx < p->nchunks);
	return (char *)p->base + (size_t)idx * p->chunk_size;
}

uint32_t pool_chunk_index(const struct pool *p, const void *ptr)
{
	uintptr_t b = (uintptr_t)p->base, q = (uintptr_t)ptr;

	assert(q >= b && q - b < p->size);
	return (uint32_t)((q - b) / p->chunk_size);
}

int pool_get(struct pool *p)
{
	uint32_t idx;

	assert(p);
	if (p->nfree == 0) {
		return -ENOBUFS;
	}
	idx = p->free_list[--p->nfree];
	assert(idx < p->nchunks && !pool_chunk_busy(p)[idx]);
	pool_chunk_busy(p)[idx] = 1;
	return (int)idx;
}

void pool_put(struct pool *p, uint32_t idx)
{
	assert(p && idx < p->nchunks);
	assert(pool_chunk_busy(p)[idx]); /* double put */
	assert(p->nfree < p->nchunks);
	pool_chunk_busy(p)[idx] = 0;
	p->free_list[p->nfree++] = idx;
}

int pool_memlock_advice(uint64_t need, uint64_t limit, bool cap_ipc_lock, char *msg, size_t msglen)
{
	char need_s[32], limit_s[32];

	if (msg && msglen > 0) {
		msg[0] = '\0';
	}
	if (cap_ipc_lock || limit == RLIM_INFINITY || need <= limit) {
		return 0;
	}
	if (msg && msglen > 0) {
		units_format_bytes(need, need_s, sizeof(need_s));
		units_format_bytes(limit, limit_s, sizeof(limit_s));
		snprintf(msg, msglen,
			 "pool needs %s of locked memory but RLIMIT_MEMLOCK is %s: raise it with "
			 "'ulimit -l unlimited', a 'memlock' line in /etc/security/limits.conf, "
			 "LimitMEMLOCK=infinity in the systemd unit, or "
			 "'docker run --ulimit memlock=-1'",
			 need_s, limit_s);
	}
	return -ENOMEM;
}

int pool_has_cap_ipc_lock(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
	char line[256];

	if (!f) {
		return negerrno();
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long long caps;

		if (strncmp(line, "CapEff:", 7) != 0) {
			continue;
		}
		errno = 0;
		caps = strtoull(line + 7, NULL, 16);
		if (errno != 0) {
			return -EINVAL;
		}
		return (caps >> CAP_IPC_LOCK_BIT) & 1 ? 1 : 0;
	}
	return -ENOENT;
}

int pool_memlock_unbounded(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
		return negerrno();
	}
	return rl.rlim_cur == RLIM_INFINITY ? 1 : pool_has_cap_ipc_lock();
}

int pool_memlock_check(size_t need, char *msg, size_t msglen)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
		return negerrno();
	}
	/* Unreadable capabilities count as "no CAP_IPC_LOCK": the strict answer. */
	return pool_memlock_advice(need, rl.rlim_cur, pool_has_cap_ipc_lock() > 0, msg, msglen);
}
