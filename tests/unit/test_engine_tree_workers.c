/* SPDX-License-Identifier: MIT */
/*
 * One big file's chunk tree hashed by many cores (engine_digest_folds):
 * each chunk's own digest is made on the worker that handles the chunk,
 * round the workers, and the loop folds them in file order. The sender's
 * clear chunks as they are read, its sealed ones in the pass that seals
 * them (engine_digest_in_seal), checked against a digest made here apart
 * from hash.c; the receiver's sealed slots in the pass that opens them,
 * its held slots without private copies (tcp) apart. Every chunk counted
 * on a worker (those made in the seal's or the open's pass counted apart,
 * fused_digests) and more than one worker used, so a tree hashed on one
 * thread in order, or in a pass of its own, fails. A file of one chunk
 * keeps its stream on its file's thread.
 */
#include "engine_harness.h"

#include "hello.h"

/* One file of size bytes sent and committed, both ends' digest its tree (or its stream). */
static void one_file(struct fx *f, size_t size, bool tree)
{
	struct source s = { 0 };
	size_t len;
	uint8_t *buf, want[HASH_LEN];

	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_FILE_TREE;
	source_file(f, &s, "f", size);
	run_both(f, &s);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, size, PERR_OK);
	buf = read_file(f->src, "f", &len);
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
	assert_same_file(f->src, f->dst, "f");
}

/* Every one of chunks digests made on a worker, by each of the first `workers` of them. */
static void assert_spread(const struct engine_stats *st, uint64_t chunks, unsigned workers)
{
	assert_int_equal(st->worker_digests, chunks);
	assert_int_equal(st->worker_digest_mask, (1u << workers) - 1);
}

/* The same, each digest made in the pass that sealed or opened its chunk: none apart. */
static void assert_fused(const struct engine_stats *st, uint64_t chunks, unsigned workers)
{
	assert_spread(st, chunks, workers);
	assert_int_equal(st->fused_digests, chunks);
}

/* The sender's chunks: each digest made as it is read, round two workers, folded in order. */
static void test_sender_digests_on_workers(void **state)
{
	struct fx *f = *state;

	f->txr.p.hash_threads = 2;
	one_file(f, 23 * CHUNK + 1, true);
	assert_spread(&f->txr.st, 24, 2);
	assert_int_equal(f->txr.st.fused_digests, 0);  /* clear: made apart as read */
	assert_int_equal(f->rxr.st.worker_digests, 0); /* the receiver has none */
}

/* Slow jobs on three workers finish out of order: the fold is still in file order. */
static void test_sender_digests_slow(void **state)
{
	struct fx *f = *state;

	f->txr.p.hash_threads = 3;
	f->txr.p.faults |= ENGINE_FAULT_SLOW_HASH;
	one_file(f, 11 * CHUNK + 999, true);
	assert_spread(&f->txr.st, 12, 3);
}

/*
 * Sealed: each digest made in the job that seals its chunk, one pass, round
 * the workers; the receiver makes its tree on its loop, apart from them.
 */
static void test_sender_sealed_digests(void **state)
{
	struct fx *f = *state;

	seal_both(f, 0x5a);
	f->txr.p.hash_threads = 2;
	one_file(f, 9 * CHUNK + 5, true);
	assert_fused(&f->txr.st, 10, 2);
}

/* Sealed, slow seals on three workers finish out of order: folded in file order. */
static void test_sender_sealed_slow(void **state)
{
	struct fx *f = *state;

	seal_both(f, 0x5a);
	f->txr.p.hash_threads = 3;
	f->txr.p.faults |= ENGINE_FAULT_SLOW_HASH;
	one_file(f, 13 * CHUNK + 7, true);
	assert_fused(&f->txr.st, 14, 3);
}

/*
 * Sealed, two tree files and a small one in flight together: each tree's
 * digests folded in its own order. The receiver, without workers, checks
 * each against its own tree made on its loop.
 */
static void test_sender_sealed_files(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_FILE_TREE;
	source_file(f, &s, "a", 6 * CHUNK + 11);
	source_file(f, &s, "b", 100);
	source_file(f, &s, "c", 5 * CHUNK);
	seal_both(f, 0x5a);
	f->txr.p.hash_threads = 3;
	f->txr.p.faults |= ENGINE_FAULT_SLOW_HASH;
	run_both(f, &s);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 3, 0, 11 * CHUNK + 111, PERR_OK);
	assert_int_equal(f->txr.st.fused_digests, 12);
	assert_same_file(f->src, f->dst, "a");
	assert_same_file(f->src, f->dst, "c");
}

/* A file of one chunk is its stream, fed on its file's thread: no chunk digest made. */
static void test_sender_one_chunk_stream(void **state)
{
	struct fx *f = *state;

	f->txr.p.hash_threads = 2;
	one_file(f, CHUNK, false);
	assert_int_equal(f->txr.st.worker_digests, 0);
}

/* The receiver's sealed slots: each chunk's digest made as a worker opens it, folded in order. */
static void test_receiver_sealed_digests(void **state)
{
	struct fx *f = *state;

	seal_both(f, 0x5a);
	f->rxr.p.hash_threads = 2;
	one_file(f, 14 * CHUNK + 3, true);
	assert_fused(&f->rxr.st, 15, 2);
}

/* Sealed, both ends on workers, slow jobs finishing out of order. */
static void test_sealed_both_slow(void **state)
{
	struct fx *f = *state;

	seal_both(f, 0x5a);
	f->rxr.p.hash_threads = 3;
	f->txr.p.hash_threads = 2;
	f->rxr.p.faults |= ENGINE_FAULT_SLOW_HASH;
	one_file(f, 8 * CHUNK + 100, true);
	assert_fused(&f->rxr.st, 9, 3);
	assert_fused(&f->txr.st, 9, 2);
}

/*
 * Sealed, both ends on workers, a sparse file with ZEROS: the holes' chunks
 * join the tree on the sender's loop only after the seals' digests before
 * them are folded; each chunk with bytes is digested in its seal's pass.
 */
static void test_sealed_holes(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	const uint64_t size = 10 * (uint64_t)CHUNK;
	uint8_t *data = malloc(CHUNK), want[HASH_LEN];
	char *path = path_in(f->src, "sparse");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	size_t len;
	uint8_t *buf;

	assert_non_null(data);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	fill(data, CHUNK, 3);
	for (unsigned c = 0; c < 10; c++) {
		/* Chunks 0, 1, 4, 5, 8, 9 hold bytes, the others are holes. */
		if (c % 4 < 2) {
			assert_int_equal(pwrite(fd, data, CHUNK, (off_t)c * CHUNK), CHUNK);
		}
	}
	close(fd);
	free(path);
	free(data);
	s.e[s.n++] = (struct engine_src){ .name = (char *)"sparse",
					  .path = (char *)"sparse",
					  .dirfd = f->src_fd,
					  .ftype = PROTO_FT_REG,
					  .mode = 0644,
					  .size = size };
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_FILE_TREE | PROTO_CAP_ZEROS;
	seal_both(f, 0x5a);
	f->txr.p.hash_threads = 2;
	f->rxr.p.hash_threads = 2;
	f->txr.p.faults |= ENGINE_FAULT_SLOW_HASH;
	run_both(f, &s);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_true(f->rxr.st.bytes_zero > 0);
	assert_fused(&f->txr.st, 6, 2);
	buf = read_file(f->src, "sparse", &len);
	tree_ref(buf, len, want);
	free(buf);
	assert_memory_equal(f->txr.ev.last_hash, want, HASH_LEN);
	assert_memory_equal(f->rxr.ev.last_hash, want, HASH_LEN);
	assert_same_file(f->src, f->dst, "sparse");
}

/*
 * A tree chunk's slot flipped after its seal (its digest made in that pass
 * on the sender): the receiver's open, which digests it in the same pass,
 * fails its tag; the digest is thrown away, the session fails, nothing is
 * committed.
 */
static void test_sealed_tag_fails(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_FILE_TREE;
	source_file(f, &s, "big", 6 * CHUNK + 3);
	seal_both(f, 0x5a);
	f->txr.p.hash_threads = 2;
	f->rxr.p.hash_threads = 2;
	f->txr.p.seal_tamper = XPORT_TEST_TAMPER_FLIP;
	run_both(f, &s);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_TRANSPORT, "fails authentication");
	assert_int_not_equal(f->txr.r, 0);
	assert_int_equal(f->rxr.st.files_ok, 0);
	assert_dest(f->dst, "");
}

/* A sealed file of one whole chunk: its stream, on its file's thread, no digest used. */
static void test_receiver_sealed_one_chunk(void **state)
{
	struct fx *f = *state;

	seal_both(f, 0x5a);
	f->rxr.p.hash_threads = 2;
	one_file(f, CHUNK, false);
}

/* A byte changed after the open: the tree sees it (the open's digest is not the bytes'). */
static void test_receiver_sealed_flip(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "big", 5 * CHUNK + 3);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_FILE_TREE;
	seal_both(f, 0x5a);
	f->rxr.p.hash_threads = 2;
	f->rxr.p.faults |= ENGINE_FAULT_FLIP_BYTE;
	run_both(f, &s);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 0, 1, 0, PERR_INTEGRITY);
	assert_dest(f->dst, "");
}

/* A tcp receiver without private copies: each held slot digested on a worker, folded in order. */
static void test_receiver_no_copy_digests(void **state)
{
	struct fx *f = *state;

	f->rxr.p.hash_threads = 2;
	one_file(f, 17 * CHUNK + 4000, true);
	assert_spread(&f->rxr.st, 18, 2);
	assert_int_equal(f->rxr.st.fused_digests, 0); /* no pass to join: apart */
}

/* The same with both ends on three workers whose jobs finish out of order. */
static void test_no_copy_both_slow(void **state)
{
	struct fx *f = *state;

	f->rxr.p.hash_threads = 3;
	f->txr.p.hash_threads = 3;
	f->rxr.p.faults |= ENGINE_FAULT_SLOW_HASH;
	f->txr.p.faults |= ENGINE_FAULT_SLOW_HASH;
	one_file(f, 7 * CHUNK, true);
	assert_spread(&f->rxr.st, 7, 3);
	assert_spread(&f->txr.st, 7, 3);
}

/* A byte changed in a held slot before its digest: the file fails, nothing committed. */
static void test_receiver_no_copy_flip(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "big", 4 * CHUNK + 1);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_FILE_TREE;
	f->rxr.p.hash_threads = 2;
	f->rxr.p.faults |= ENGINE_FAULT_FLIP_BYTE;
	run_both(f, &s);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 0, 1, 0, PERR_INTEGRITY);
	assert_dest(f->dst, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_sender_digests_on_workers), T(test_sender_digests_slow),
		T(test_sender_sealed_digests),	   T(test_sender_sealed_slow),
		T(test_sender_sealed_files),	   T(test_sealed_holes),
		T(test_sealed_tag_fails),	   T(test_sender_one_chunk_stream),
		T(test_receiver_sealed_digests),   T(test_sealed_both_slow),
		T(test_receiver_sealed_one_chunk), T(test_receiver_sealed_flip),
		T(test_receiver_no_copy_digests),  T(test_no_copy_both_slow),
		T(test_receiver_no_copy_flip),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
