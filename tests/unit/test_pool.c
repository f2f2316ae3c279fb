/* SPDX-License-Identifier: MIT */
/*
 * The registered buffer pool: sizes, chunk accounting, alignment, a real
 * io_uring fixed-buffer registration with a READ_FIXED of a real file, the
 * registration chunk by chunk (only the chunks pinned come into memory), the
 * piece index, the NUMA binding, the RLIMIT_MEMLOCK advice (deterministic and
 * in a child that really lacks CAP_IPC_LOCK) and the pinned-bytes budget.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "pool.h"

#define KiB (1024ul)
#define MiB (1024ul * 1024ul)
#define GiB (1024ul * MiB)

static void test_create_sizes(void **state)
{
	static const struct {
		size_t size, chunk, want_chunks;
	} ok[] = {
		{ 1, 4096, 1 }, /* below one chunk: one chunk */
		{ 4096, 4096, 1 },
		{ 10 * MiB + 5, MiB, 10 }, /* rounded down to whole chunks */
		{ 4 * MiB, 2 * MiB, 2 },   /* a hugepage candidate */
		{ 64 * MiB, 64 * MiB, 1 },
		{ 1 * MiB, 64 * KiB, 16 },
	};
	static const size_t bad_chunks[] = { 0, 1, 2048, 4095, 6000, 3 * MiB, 128 * MiB };

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct pool *p = NULL;

		assert_int_equal(pool_create(ok[i].size, ok[i].chunk, &p), 0);
		assert_non_null(p);
		assert_int_equal(p->nchunks, ok[i].want_chunks);
		assert_int_equal(p->size, ok[i].want_chunks * ok[i].chunk);
		assert_int_equal(p->chunk_size, ok[i].chunk);
		assert_int_equal(p->nfree, p->nchunks);
		assert_int_equal((uintptr_t)p->base % 4096, 0);
		assert_true(p->buf_piece_size % p->chunk_size == 0);
		assert_true(p->buf_piece_size <= GiB);
		if (p->hugepages) {
			assert_int_equal(p->size % (2 * MiB), 0);
			assert_int_equal((uintptr_t)p->base % (2 * MiB), 0);
		}
		printf("pool %zu/%zu: %u chunks, %s pages\n", ok[i].size, ok[i].chunk, p->nchunks,
		       p->hugepages ? "2 MiB huge" : "normal");
		/* The memory is really there and writable end to end. */
		memset(p->base, 0xa5, p->size);
		pool_destroy(p);
	}
	for (size_t i = 0; i < sizeof(bad_chunks) / sizeof(bad_chunks[0]); i++) {
		struct pool *p = (struct pool *)0x1;

		assert_int_equal(pool_create(8 * MiB, bad_chunks[i], &p), -EINVAL);
		assert_ptr_equal(p, (struct pool *)0x1); /* untouched on failure */
	}
	pool_destroy(NULL);
}

/* The VmFlags line of the mapping that starts at base, from /proc/self/smaps ("" none). */
static void smaps_flags(const void *base, char *out, size_t len)
{
	char line[512], want[32];
	bool in = false;
	FILE *f = fopen("/proc/self/smaps", "re");

	out[0] = '\0';
	assert_non_null(f);
	snprintf(want, sizeof(want), "%lx-", (unsigned long)(uintptr_t)base);
	while (fgets(line, sizeof(line), f)) {
		if (strchr(line, '-') && strncmp(line, want, strlen(want)) == 0) {
			in = true;
		} else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			snprintf(out, len, "%.200s", line + 8);
			break;
		}
	}
	fclose(f);
}

/*
 * Without a hugetlb pool, a pool of whole 2 MiB is 2 MiB aligned and advised
 * for transparent huge pages ("hg" in its VmFlags), where the kernel has them.
 */
static void test_transparent_huge(void **state)
{
	struct pool *p = NULL;
	char flags[512];

	(void)state;
	assert_int_equal(pool_create(8 * MiB, MiB, &p), 0);
	assert_int_equal((uintptr_t)p->base % (2 * MiB), 0);
	memset(p->base, 0x5a, p->size);
	smaps_flags(p->base, flags, sizeof(flags));
	if (p->hugepages) {
		printf("hugetlb pages: transparent ones not asked for\n");
	} else if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0) {
		printf("this kernel has no transparent huge pages\n");
	} else {
		printf("pool VmFlags:%s", flags);
		assert_non_null(strstr(flags, " hg"));
	}
	pool_destroy(p);
	/* Not whole 2 MiB: normal pages, page aligned, not advised. */
	assert_int_equal(pool_create(3 * MiB, MiB, &p), 0);
	smaps_flags(p->base, flags, sizeof(flags));
	assert_null(strstr(flags, " hg"));
	pool_destroy(p);
}

static void test_chunk_accounting(void **state)
{
	const size_t chunk = 64 * KiB;
	struct pool *p = NULL;
	bool seen[16] = { false };
	int idx;

	(void)state;
	assert_int_equal(pool_create(16 * chunk, chunk, &p), 0);
	assert_int_equal(p->nchunks, 16);
	for (int i = 0; i < 16; i++) {
		char *c;

		idx = pool_get(p);
		assert_true(idx >= 0 && idx < 16);
		assert_false(seen[idx]);
		seen[idx] = true;
		c = pool_chunk(p, (uint32_t)idx);
		assert_int_equal((uintptr_t)c % 4096, 0);
		assert_int_equal((uintptr_t)c % chunk, (uintptr_t)p->base % chunk);
		assert_ptr_equal(c, (char *)p->base + (size_t)idx * chunk);
		assert_int_equal(pool_chunk_index(p, c), idx);
		assert_int_equal(pool_chunk_index(p, c + chunk - 1), idx);
	}
	assert_int_equal(p->nfree, 0);
	assert_int_equal(pool_get(p), -ENOBUFS);
	assert_int_equal(pool_get(p), -ENOBUFS);

	pool_put(p, 7);
	assert_int_equal(p->nfree, 1);
	assert_int_equal(pool_get(p), 7); /* LIFO */
	assert_int_equal(pool_get(p), -ENOBUFS);
	for (uint32_t i = 0; i < 16; i++) {
		pool_put(p, i);
	}
	assert_int_equal(p->nfree, 16);
	pool_destroy(p);
}

static void test_double_put_aborts(void **state)
{
	struct pool *p = NULL;
	pid_t pid;
	int status;

	(void)state;
	assert_int_equal(pool_create(4 * 4096, 4096, &p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int idx = pool_get(p);

		/* A second chunk out, so the free list is not full after the first put. */
		(void)pool_get(p);
		/* Silence the expected assert message. */
		(void)!freopen("/dev/null", "w", stderr);
		pool_put(p, (uint32_t)idx);
		pool_put(p, (uint32_t)idx); /* must abort: one chunk handed out twice */
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	pool_destroy(p);
}

static int write_pattern_file(const char *dir, size_t len, char **ret_path, uint8_t **ret_data)
{
	uint8_t *data = malloc(len);
	char *path;
	int fd;

	assert_non_null(data);
	for (size_t i = 0; i < len; i++) {
		data[i] = (uint8_t)(i * 7 + (i >> 8));
	}
	assert_true(asprintf(&path, "%s/src", dir) > 0);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
	*ret_path = path;
	*ret_data = data;
	return 0;
}

static void test_register_read_fixed(void **state)
{
	const size_t chunk = MiB, len = 300 * KiB + 123;
	struct io_uring ring, ring2;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct pool *p = NULL;
	char *dir = tu_mkdtemp(), *path;
	uint8_t *data, *buf;
	struct iovec iov;
	int fd, r, bi;

	(void)state;
	r = io_uring_queue_init(8, &ring, 0);
	if (r < 0) {
		tu_rmtree(dir);
		tu_skip("io_uring_queue_init: %s", strerror(-r));
	}
	write_pattern_file(dir, len, &path, &data);
	assert_int_equal(pool_create(8 * chunk, chunk, &p), 0);
	assert_int_equal(pool_register_uring(p, &ring), 0);
	assert_ptr_equal(p->ring, &ring);
	assert_int_equal(pool_register_uring(p, &ring), -EBUSY);

	/* Into the last chunk, so that an off-by-one registration would show. */
	buf = pool_chunk(p, p->nchunks - 1);
	memset(buf, 0, chunk);
	bi = pool_buf_index(p, buf);
	assert_int_equal(bi, 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	sqe = io_uring_get_sqe(&ring);
	assert_non_null(sqe);
	io_uring_prep_read_fixed(sqe, fd, buf, (unsigned)chunk, 0, bi);
	assert_int_equal(io_uring_submit(&ring), 1);
	assert_int_equal(io_uring_wait_cqe(&ring, &cqe), 0);
	assert_int_equal(cqe->res, (int)len);
	io_uring_cqe_seen(&ring, cqe);
	assert_memory_equal(buf, data, len);
	assert_int_equal(buf[len], 0);

	/* A READ_FIXED outside the registered memory is refused by the kernel. */
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read_fixed(sqe, fd, data, 4096, 0, bi);
	assert_int_equal(io_uring_submit(&ring), 1);
	assert_int_equal(io_uring_wait_cqe(&ring, &cqe), 0);
	assert_int_equal(cqe->res, -EFAULT);
	io_uring_cqe_seen(&ring, cqe);

	/* Destroy unregisters: the ring accepts a new registration afterwards. */
	pool_destroy(p);
	iov.iov_base = data;
	iov.iov_len = 4096;
	assert_int_equal(io_uring_register_buffers(&ring, &iov, 1), 0);
	assert_int_equal(io_uring_unregister_buffers(&ring), 0);

	/* And a pool that never registered leaves a ring's buffers alone. */
	assert_int_equal(io_uring_queue_init(4, &ring2, 0), 0);
	assert_int_equal(pool_create(chunk, chunk, &p), 0);
	pool_destroy(p);
	io_uring_queue_exit(&ring2);

	close(fd);
	io_uring_queue_exit(&ring);
	free(data);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/* Pages of [base, base + len) in memory (mincore). */
static size_t resident_pages(const void *base, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (len + page - 1) / page, in = 0;
	unsigned char *vec = calloc(n, 1);

	assert_non_null(vec);
	assert_int_equal(mincore((void *)base, len, vec), 0);
	for (size_t i = 0; i < n; i++) {
		in += vec[i] & 1;
	}
	free(vec);
	return in;
}

/*
 * Registered chunk by chunk (2 MiB chunks: a huge page each where THP is
 * on, so residency counts whole chunks either way; 6 MiB in all, within
 * an ordinary user's 8 MiB RLIMIT_MEMLOCK): the table costs nothing, a chunk is faulted in
 * and pinned when pinned, once, and a READ_FIXED into it works; the chunks
 * never pinned stay out of memory (registered whole, all of them come in).
 */
static void test_register_lazy(void **state)
{
	const size_t chunk = 2 * MiB, len = 100 * KiB + 7;
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct pool *p = NULL;
	char *dir = tu_mkdtemp(), *path;
	uint8_t *data, *buf;
	int fd, r;

	(void)state;
	r = io_uring_queue_init(8, &ring, 0);
	if (r < 0) {
		tu_rmtree(dir);
		tu_skip("io_uring_queue_init: %s", strerror(-r));
	}
	write_pattern_file(dir, len, &path, &data);
	assert_int_equal(pool_create(3 * chunk, chunk, &p), 0);
	assert_int_equal(pool_register_uring_lazy(p, &ring), 0);
	assert_int_equal(pool_register_uring_lazy(p, &ring), -EBUSY);
	assert_int_equal(p->pinned_bytes, 0);
	assert_int_equal(resident_pages(p->base, p->size), 0);

	buf = pool_chunk(p, 1);
	assert_int_equal(pool_pin_chunk(p, 1), 0);
	assert_int_equal(pool_pin_chunk(p, 1), 0);
	assert_int_equal(p->pinned_bytes, chunk);
	assert_int_equal(pool_buf_index(p, buf), 1);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read_fixed(sqe, fd, buf, (unsigned)chunk, 0, pool_buf_index(p, buf));
	assert_int_equal(io_uring_submit(&ring), 1);
	assert_int_equal(io_uring_wait_cqe(&ring, &cqe), 0);
	assert_int_equal(cqe->res, (int)len);
	io_uring_cqe_seen(&ring, cqe);
	assert_memory_equal(buf, data, len);
	/* Only the pinned chunk came into memory. */
	assert_int_equal(resident_pages(p->base, p->size), chunk / (size_t)sysconf(_SC_PAGESIZE));

	/* A chunk not pinned is a hole: the kernel refuses a READ_FIXED into it. */
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read_fixed(sqe, fd, pool_chunk(p, 2), 4096, 0, 2);
	assert_int_equal(io_uring_submit(&ring), 1);
	assert_int_equal(io_uring_wait_cqe(&ring, &cqe), 0);
	assert_true(cqe->res < 0);
	io_uring_cqe_seen(&ring, cqe);
	pool_destroy(p);

	/* The whole pool registered at once: every page is in. */
	assert_int_equal(pool_create(3 * chunk, chunk, &p), 0);
	assert_int_equal(pool_register_uring(p, &ring), 0);
	assert_int_equal(p->pinned_bytes, p->size);
	assert_int_equal(pool_pin_chunk(p, 2), 0);
	assert_int_equal(resident_pages(p->base, p->size), p->size / (size_t)sysconf(_SC_PAGESIZE));
	pool_destroy(p);

	close(fd);
	io_uring_queue_exit(&ring);
	free(data);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void test_buf_index(void **state)
{
	struct pool *p = NULL;
	struct pool fake;
	char *base;

	(void)state;
	assert_int_equal(pool_create(4 * MiB, MiB, &p), 0);
	assert_int_equal(pool_buf_index(p, pool_chunk(p, 0)), 0);
	assert_int_equal(pool_buf_index(p, pool_chunk(p, 3)), 0);
	assert_int_equal(pool_buf_index(p, (char *)pool_chunk(p, 3) + MiB - 1), 0);
	assert_int_equal(pool_buf_index(p, (char *)p->base + p->size), -EINVAL);
	assert_int_equal(pool_buf_index(p, (char *)p->base - 1), -EINVAL);
	pool_destroy(p);

	/*
	 * Over 1 GiB: several pieces. The index is pure arithmetic, so a pool
	 * description without 3 GiB of memory behind it checks it.
	 */
	memset(&fake, 0, sizeof(fake));
	base = (char *)(uintptr_t)(64 * GiB);
	fake.base = base;
	fake.chunk_size = 64 * MiB;
	fake.nchunks = 40; /* 2.5 GiB */
	fake.size = fake.nchunks * fake.chunk_size;
	fake.buf_piece_size = (unsigned)GiB;
	assert_int_equal(pool_buf_index(&fake, base), 0);
	assert_int_equal(pool_buf_index(&fake, base + GiB - 1), 0);
	assert_int_equal(pool_buf_index(&fake, base + GiB), 1);
	assert_int_equal(pool_buf_index(&fake, base + 2 * GiB), 2);
	assert_int_equal(pool_buf_index(&fake, base + 39 * 64 * MiB), 2); /* last chunk */
	assert_int_equal(pool_buf_index(&fake, base + fake.size - 1), 2);
	assert_int_equal(pool_buf_index(&fake, base + fake.size), -EINVAL);
}

static void test_memlock_advice(void **state)
{
	char msg[512];

	(void)state;
	memset(msg, 'X', sizeof(msg));
	assert_int_equal(pool_memlock_advice(64 * MiB, 8 * MiB, false, msg, sizeof(msg)), -ENOMEM);
	printf("advice: %s\n", msg);
	assert_non_null(strstr(msg, "64 MiB"));
	assert_non_null(strstr(msg, "8 MiB"));
	assert_non_null(strstr(msg, "RLIMIT_MEMLOCK"));
	assert_non_null(strstr(msg, "ulimit -l unlimited"));
	assert_non_null(strstr(msg, "LimitMEMLOCK=infinity"));
	assert_non_null(strstr(msg, "--ulimit memlock=-1"));

	assert_int_equal(pool_memlock_advice(3 * GiB, 64 * KiB, false, msg, sizeof(msg)), -ENOMEM);
	assert_non_null(strstr(msg, "3 GiB"));
	assert_non_null(strstr(msg, "64 KiB"));
	/* A short buffer is truncated, still terminated. */
	assert_int_equal(pool_memlock_advice(64 * MiB, 8 * MiB, false, msg, 10), -ENOMEM);
	assert_int_equal(strlen(msg), 9);

	/* Fits; capability lifts the limit; unlimited. */
	assert_int_equal(pool_memlock_advice(8 * MiB, 8 * MiB, false, msg, sizeof(msg)), 0);
	assert_string_equal(msg, "");
	assert_int_equal(pool_memlock_advice(64 * MiB, 8 * MiB, true, msg, sizeof(msg)), 0);
	assert_string_equal(msg, "");
	assert_int_equal(pool_memlock_advice(64 * MiB, RLIM_INFINITY, false, msg, sizeof(msg)), 0);
	assert_int_equal(pool_memlock_advice(1, 0, false, msg, sizeof(msg)), -ENOMEM);
}

static int drop_cap_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data) < 0) {
		return -errno;
	}
	data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	if (syscall(SYS_capset, &hdr, data) < 0) {
		return -errno;
	}
	return 0;
}

/*
 * In a child: a low RLIMIT_MEMLOCK, CAP_IPC_LOCK dropped from the effective
 * set. The check must see both, and the real io_uring registration must
 * fail the way the advice predicts.
 */
static void test_memlock_check_child(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	assert_int_equal(pool_has_cap_ipc_lock() >= 0, 1);
	printf("this process %s CAP_IPC_LOCK\n", pool_has_cap_ipc_lock() ? "has" : "lacks");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = { 8 * MiB, 8 * MiB };
		struct io_uring ring;
		struct pool *p = NULL;
		char msg[512];
		int r;

		if (setrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
			_exit(10);
		}
		if (pool_has_cap_ipc_lock() == 1 && drop_cap_ipc_lock() < 0) {
			_exit(T_EXIT_SKIP);
		}
		if (pool_has_cap_ipc_lock() != 0) {
			_exit(11);
		}
		if (pool_memlock_check(4 * MiB, msg, sizeof(msg)) != 0) {
			_exit(12);
		}
		if (pool_memlock_check(64 * MiB, msg, sizeof(msg)) != -ENOMEM) {
			_exit(13);
		}
		if (!strstr(msg, "64 MiB") || !strstr(msg, "8 MiB")) {
			_exit(14);
		}
		/* The kernel agrees: pinning 64 MiB over an 8 MiB limit fails. */
		if (io_uring_queue_init(4, &ring, 0) < 0) {
			_exit(0); /* no io_uring: the check itself passed */
		}
		if (pool_create(64 * MiB, MiB, &p) < 0) {
			_exit(15);
		}
		r = pool_register_uring(p, &ring);
		if (r != -ENOMEM && r != -EPERM) {
			_exit(16);
		}
		if (p->ring) {
			_exit(17);
		}
		pool_destroy(p);
		io_uring_queue_exit(&ring);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == T_EXIT_SKIP) {
		printf("could not drop CAP_IPC_LOCK; child part skipped\n");
		return;
	}
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* The raw mbind: node 0 always exists; a node past the machine's is refused. */
static void test_bind_node(void **state)
{
	struct pool *p = NULL;

	(void)state;
	assert_int_equal(pool_create(4 * MiB, MiB, &p), 0);
	assert_int_equal(pool_bind_node(p, 0), 0);
	assert_int_equal(pool_bind_node(p, 1023), -EINVAL);
	assert_int_equal(pool_bind_node(p, -1), -EINVAL);
	assert_int_equal(pool_bind_node(p, 1024), -EINVAL);
	/* Still usable after a refused bind. */
	memset(p->base, 0x5a, p->size);
	pool_destroy(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_sizes),
		cmocka_unit_test(test_transparent_huge),
		cmocka_unit_test(test_chunk_accounting),
		cmocka_unit_test(test_double_put_aborts),
		cmocka_unit_test(test_register_read_fixed),
		cmocka_unit_test(test_register_lazy),
		cmocka_unit_test(test_buf_index),
		cmocka_unit_test(test_memlock_advice),
		cmocka_unit_test(test_memlock_check_child),
		cmocka_unit_test(test_bind_node),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
