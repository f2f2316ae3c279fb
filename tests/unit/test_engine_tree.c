/* SPDX-License-Identifier: MIT */
/*
 * The chunk tree as a file's end-to-end digest (PROTO_CAP_FILE_TREE,
 * engine_digest.c): where both ends announce it a file of more than one
 * chunk is checked by the XXH3-128 of its chunks' XXH3-128 (made here apart
 * from hash.c, with libxxhash's one-shot calls), on the loop and on the
 * workers' copy path, holes as ZEROS too; a file of one chunk, or a pair
 * where one end has the bit masked, keeps the stream of its bytes; a byte
 * changed on the way fails the file under the tree as under the stream.
 */
#include "engine_harness.h"

#include "hello.h"

static void both_announce(struct fx *f, uint64_t more)
{
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_FILE_TREE | more;
}

/* The last file committed, on both sides: digest and kind as wanted. */
static void assert_digest(struct fx *f, const char *name, bool tree)
{
	size_t len;
	uint8_t *buf = read_file(f->src, name, &len), want[HASH_LEN];

	if (tree) {
		tree_ref(buf, len, want);
	} else {
		hash_of(buf, len, want);
	}
	free(buf);
	assert_int_equal(f->rxr.ev.last_tree, tree ? CHUNK : 0);
	assert_int_equal(f->txr.ev.last_tree, tree ? CHUNK : 0);
	assert_memory_equal(f->rxr.ev.last_hash, want, HASH_LEN);
	assert_memory_equal(f->txr.ev.last_hash, want, HASH_LEN);
	assert_same_file(f->src, f->dst, name);
}

/* One file, sent and checked; its digest is the tree's (or the stream's). */
static void one_file(struct fx *f, size_t size, bool tree)
{
	struct source s = { 0 };

	source_file(f, &s, "f", size);
	run_both(f, &s);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, size, PERR_OK);
	assert_digest(f, "f", tree);
}

/* Many chunks and a short last one, hashed on the loop: the tree. */
static void test_tree_on_loop(void **state)
{
	struct fx *f = *state;

	both_announce(f, 0);
	one_file(f, 9 * CHUNK + 77, true);
}

/* The verbs way on tcp (private copies), three workers: each chunk's digest made as it is copied. */
static void test_tree_on_workers(void **state)
{
	struct fx *f = *state;

	both_announce(f, 0);
	f->rxr.p.faults |= ENGINE_FAULT_COPY_SLOTS;
	f->rxr.p.hash_threads = 3;
	f->txr.p.hash_threads = 2;
	one_file(f, 23 * CHUNK + 1, true);
}

/* Workers without copies: the bytes go to the file's thread, into the same tree. */
static void test_tree_workers_no_copy(void **state)
{
	struct fx *f = *state;

	both_announce(f, 0);
	f->rxr.p.hash_threads = 2;
	one_file(f, 6 * CHUNK, true);
}

/* A file of one chunk (exactly) is its stream: a packed one is never a tree. */
static void test_one_chunk_is_stream(void **state)
{
	struct fx *f = *state;

	both_announce(f, 0);
	one_file(f, CHUNK, false);
}

/* A sparse file with ZEROS: holes of whole chunks join the tree as the zeros' digests. */
static void test_tree_holes(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	const uint64_t size = 12 * (uint64_t)CHUNK + 5;
	uint8_t *data = malloc(CHUNK);
	char *path = path_in(f->src, "sparse");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_non_null(data);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	fill(data, CHUNK, 3);
	assert_int_equal(pwrite(fd, data, CHUNK, 3 * CHUNK), CHUNK);
	assert_int_equal(pwrite(fd, data, 100, 8 * CHUNK + 9), 100);
	close(fd);
	free(path);
	free(data);
	s.e[s.n++] = (struct engine_src){ .name = (char *)"sparse",
					  .path = (char *)"sparse",
					  .dirfd = f->src_fd,
					  .ftype = PROTO_FT_REG,
					  .mode = 0644,
					  .size = size };
	both_announce(f, PROTO_CAP_ZEROS);
	f->rxr.p.faults |= ENGINE_FAULT_COPY_SLOTS;
	f->rxr.p.hash_threads = 2;
	run_both(f, &s);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_true(f->rxr.st.bytes_zero > 0);
	assert_digest(f, "sparse", true);
}

/*
 * A pair where one end has the bit masked (RDMACP_TEST_CAPS_OFF, as an old
 * peer): the other announced it, but neither chooses the tree.
 */
static void test_masked_is_stream(void **state)
{
	struct fx *f = *state;
	char off[32];

	snprintf(off, sizeof(off), "%llu", (unsigned long long)PROTO_CAP_FILE_TREE);
	assert_int_equal(setenv("RDMACP_TEST_CAPS_OFF", off, 1), 0);
	assert_false(hello_local_caps() & PROTO_CAP_FILE_TREE);
	f->rxr.p.peer_caps = PROTO_CAP_FILE_TREE; /* the masked end sees the other's bit */
	one_file(f, 9 * CHUNK + 77, false);
	unsetenv("RDMACP_TEST_CAPS_OFF");
}

/* A byte changed in the receiver's copy: the tree sees it, on the loop and on workers. */
static void flip(struct fx *f, unsigned workers)
{
	struct source s = { 0 };

	source_file(f, &s, "big", 5 * CHUNK + 3);
	both_announce(f, 0);
	f->rxr.p.faults |= ENGINE_FAULT_FLIP_BYTE | (workers ? ENGINE_FAULT_COPY_SLOTS : 0);
	f->rxr.p.hash_threads = workers;
	run_both(f, &s);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 0, 1, 0, PERR_INTEGRITY);
	assert_dest(f->dst, "");
}

static void test_tree_flip_loop(void **state)
{
	flip(*state, 0);
}

static void test_tree_flip_workers(void **state)
{
	flip(*state, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_tree_on_loop),	      T(test_tree_on_workers),
		T(test_tree_workers_no_copy), T(test_one_chunk_is_stream),
		T(test_tree_holes),	      T(test_masked_is_stream),
		T(test_tree_flip_loop),	      T(test_tree_flip_workers),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
