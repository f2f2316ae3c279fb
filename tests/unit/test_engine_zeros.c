/* SPDX-License-Identifier: MIT */
/*
 * Zero extents (PROTO_CAP_ZEROS): a sparse file with holes and a chunk of
 * zeros crosses as ZEROS (holes kept), a receiver without them gets data, and
 * ZEROS refused (no capability, a file not in flight, outside the file, not
 * whole chunks, over held data, described twice, data inside zeros).
 */
#include "engine_harness.h"

/* Where data starts at or after off (SEEK_DATA), or the size when none does. */
static uint64_t data_at(int dirfd, const char *name, uint64_t off)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	struct stat st;
	off_t d;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	d = lseek(fd, (off_t)off, SEEK_DATA);
	close(fd);
	return d < 0 ? (uint64_t)st.st_size : (uint64_t)d;
}

static uint64_t hole_at(int dirfd, const char *name, uint64_t off)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	off_t h;

	assert_true(fd >= 0);
	h = lseek(fd, (off_t)off, SEEK_HOLE);
	close(fd);
	assert_true(h >= 0);
	return (uint64_t)h;
}

/*
 * A sparse file of 10 chunks and a tail: holes at [0, 2), [3, 6) and from 8
 * to the end, data in chunks 2 and 7, and chunk 6 written with zeros. Both
 * ends announce ZEROS: only chunks 2 and 7 cross, the rest is described,
 * the copy is byte-identical and its holes are where the source has holes
 * or zeros.
 */
static void test_zeros_transfer(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	const uint64_t size = 10 * (uint64_t)CHUNK + 123;
	uint8_t *data = malloc(CHUNK);
	char *path = path_in(f->src, "sparse");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_non_null(data);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	fill(data, CHUNK, 7);
	assert_int_equal(pwrite(fd, data, CHUNK, 2 * CHUNK), CHUNK);
	assert_int_equal(pwrite(fd, data, CHUNK, 7 * CHUNK), CHUNK);
	memset(data, 0, CHUNK);
	assert_int_equal(pwrite(fd, data, CHUNK, 6 * CHUNK), CHUNK);
	close(fd);
	s.e[s.n++] = (struct engine_src){ .name = (char *)"sparse",
					  .path = (char *)"sparse",
					  .dirfd = f->src_fd,
					  .ftype = PROTO_FT_REG,
					  .mode = 0644,
					  .size = size };
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_ZEROS;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, 2 * CHUNK, PERR_OK);
	assert_stats(&f->txr.st, 1, 0, 2 * CHUNK, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_zero, size - 2 * CHUNK);
	assert_int_equal(f->txr.st.bytes_zero, size - 2 * CHUNK);
	assert_int_equal(f->rxr.ev.ok_bytes, 2 * CHUNK);
	assert_same_file(f->src, f->dst, "sparse");
	/* Where the file system has holes, the copy has them too (chunk 6 included). */
	if (data_at(f->src_fd, "sparse", 0) == 2 * CHUNK) {
		assert_int_equal(data_at(f->dst_fd, "sparse", 0), 2 * CHUNK);
		assert_int_equal(hole_at(f->dst_fd, "sparse", 2 * CHUNK), 3 * CHUNK);
		assert_int_equal(data_at(f->dst_fd, "sparse", 3 * CHUNK), 7 * CHUNK);
		assert_int_equal(hole_at(f->dst_fd, "sparse", 7 * CHUNK), 8 * CHUNK);
		assert_int_equal(data_at(f->dst_fd, "sparse", 8 * CHUNK), size);
	}
	free(data);
	free(path);
}

/* The same file to a receiver without ZEROS: all of it crosses, nothing is described. */
static void test_zeros_without_cap(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint64_t size = source_file(f, &s, "dense", 3 * CHUNK);
	char *path = path_in(f->src, "dense");
	int fd = open(path, O_RDWR | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0); /* all a hole now */
	close(fd);
	f->txr.p.peer_caps = 0;
	f->rxr.p.peer_caps = PROTO_CAP_ZEROS;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, size, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_zero, 0);
	assert_same_file(f->src, f->dst, "dense");
	free(path);
}

/*
 * A chunk and a ZEROS over it travel on different connections: which the
 * receiver takes first is not ours to say (a sleep makes one order likely).
 * Either way the session ends PROTOCOL, with one of the two reasons.
 */
static void raw_expect_either(struct raw *w, struct run *u, const char *why1, const char *why2)
{
	struct msg m;
	const char *why;

	raw_expect(w, MSG_ERROR, &m);
	why = strstr(m.u.error.text, why1) ? why1 : why2;
	if (m.u.error.code != PERR_PROTOCOL || !strstr(m.u.error.text, why)) {
		fail_msg("ERROR %s: %s; expected PROTOCOL (%s or %s)",
			 proto_err_name(m.u.error.code), m.u.error.text, why1, why2);
	}
	msg_clear(&m);
	run_join(u);
	assert_failed_run(u, -EBADMSG, PERR_PROTOCOL, why);
}

/* A hand-played sender: zeros, a chunk, zeros to the short end; verified and committed. */
static void test_zeros_by_hand(void **state)
{
	struct fx *f = *state;
	struct raw w;
	const uint64_t size = 3 * (uint64_t)CHUNK + 10;
	uint8_t *whole = calloc(1, size);
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "z" };
	const uint64_t sizes[] = { size };

	assert_non_null(whole);
	fill(whole + CHUNK, CHUNK, 9);
	f->rxr.p.peer_caps = PROTO_CAP_ZEROS;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	/* The chunk first, its zeros after: it waits for them to be hashed in order. */
	raw_chunk(&w, 0, 1, CHUNK, whole + CHUNK, CHUNK);
	raw_zeros(&w, 1, 0, CHUNK);
	raw_zeros(&w, 1, 2 * CHUNK, CHUNK + 10);
	raw_done(&w, 1, CHUNK, whole, size);
	raw_result(&w, 1, PERR_OK, "");
	raw_end(&w, 1);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, CHUNK, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_zero, 2 * CHUNK + 10);
	{
		size_t got;
		uint8_t *out = read_file(f->dst, "z", &got);

		assert_int_equal(got, size);
		assert_memory_equal(out, whole, size);
		free(out);
	}
	free(whole);
	raw_free(&w);
}

/*
 * A ZEROS the receiver refuses, after FILES (and, with data, one chunk at
 * offset CHUNK held, waiting for offset 0): the session ends PROTOCOL.
 */
static void zeros_refused(void **state, uint64_t caps, bool data, uint32_t id, uint64_t off,
			  uint64_t len, const char *why)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t buf[CHUNK];
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "z" };
	static const uint64_t sizes[] = { 4 * (uint64_t)CHUNK };

	fill(buf, sizeof(buf), 5);
	f->rxr.p.peer_caps = caps;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	if (data) {
		raw_chunk(&w, 0, 1, CHUNK, buf, CHUNK);
		usleep(200 * 1000); /* held, most likely, before the ZEROS comes */
	}
	raw_zeros(&w, id, off, len);
	if (data) {
		/* Taken after the zeros, the chunk is behind the hash already: a bad chunk. */
		raw_expect_either(&w, &f->rxr, why, "bad chunk");
	} else {
		raw_expect_error(&w, PERR_PROTOCOL, why);
		run_join(&f->rxr);
		assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, why);
	}
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	assert_dest(f->dst, "");
	raw_free(&w);
}

static void test_zeros_refused(void **state)
{
	/* From a peer that did not announce ZEROS; for a file not in flight. */
	zeros_refused(state, 0, false, 1, 0, CHUNK, "out of place");
	fx_teardown(state);
	fx_setup(state);
	zeros_refused(state, PROTO_CAP_ZEROS, false, 2, 0, CHUNK, "out of place");
	fx_teardown(state);
	fx_setup(state);
	/* Outside the file, past its end, not on a chunk, not whole chunks. */
	zeros_refused(state, PROTO_CAP_ZEROS, false, 1, 4 * CHUNK, CHUNK, "not whole chunks");
	fx_teardown(state);
	fx_setup(state);
	zeros_refused(state, PROTO_CAP_ZEROS, false, 1, 3 * CHUNK, 2 * CHUNK, "not whole chunks");
	fx_teardown(state);
	fx_setup(state);
	zeros_refused(state, PROTO_CAP_ZEROS, false, 1, 100, CHUNK, "not whole chunks");
	fx_teardown(state);
	fx_setup(state);
	zeros_refused(state, PROTO_CAP_ZEROS, false, 1, 0, CHUNK / 2, "not whole chunks");
	fx_teardown(state);
	fx_setup(state);
	/* Over a chunk of data held for the file. */
	zeros_refused(state, PROTO_CAP_ZEROS, true, 1, 0, 2 * CHUNK, "overlaps data");
}

/* More ranges ahead of the hash than a ring of chunks could separate: refused. */
static void test_zeros_too_many(void **state)
{
	struct fx *f = *state;
	struct raw w;
	struct msg m = { .type = MSG_ZEROS };
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "z" };
	static const uint64_t sizes[] = { 4 * (uint64_t)SLOTS * CHUNK };

	f->rxr.p.peer_caps = PROTO_CAP_ZEROS;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	/* Nothing at offset 0 ever comes: every range waits. SLOTS + 1 may, one more may not. */
	m.u.zeros.id = 1;
	m.u.zeros.count = SLOTS + 2;
	for (uint16_t i = 0; i < m.u.zeros.count; i++) {
		m.u.zeros.r[i] =
		    (struct proto_range){ .offset = (2 * i + 1) * (uint64_t)CHUNK, .len = CHUNK };
	}
	raw_send(&w, &m);
	raw_expect_error(&w, PERR_PROTOCOL, "too many ranges");
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, "too many ranges");
	assert_dest(f->dst, "");
	raw_free(&w);
}

/* Zeros described twice, and data inside zeros: both refused. */
static void test_zeros_overlap(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t buf[CHUNK];
	static const uint32_t ids[] = { 1, 2 }, ok[] = { PERR_OK, PERR_OK };
	static const char *const names[] = { "a", "b" };
	static const uint64_t sizes[] = { 4 * (uint64_t)CHUNK, 4 * (uint64_t)CHUNK };

	fill(buf, sizeof(buf), 6);
	f->rxr.p.peer_caps = PROTO_CAP_ZEROS;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 2, ids, names, sizes);
	raw_ack(&w, 2, ids, ok);
	raw_zeros(&w, 1, CHUNK, 2 * CHUNK);
	raw_zeros(&w, 1, 2 * CHUNK, CHUNK);
	raw_expect_error(&w, PERR_PROTOCOL, "overlapping");
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, "overlapping");
	raw_free(&w);
	assert_dest(f->dst, "");

	fx_teardown(state);
	fx_setup(state);
	f = *state;
	f->rxr.p.peer_caps = PROTO_CAP_ZEROS;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 2, ids, names, sizes);
	raw_ack(&w, 2, ids, ok);
	raw_zeros(&w, 2, CHUNK, 2 * CHUNK);
	usleep(200 * 1000); /* the ZEROS taken, most likely, before the chunk comes */
	raw_chunk(&w, 0, 2, 2 * CHUNK, buf, CHUNK);
	raw_expect_either(&w, &f->rxr, "inside its zeros", "overlaps data");
	assert_dest(f->dst, "");
	raw_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_zeros_transfer), T(test_zeros_without_cap), T(test_zeros_by_hand),
		T(test_zeros_refused),	T(test_zeros_overlap),	   T(test_zeros_too_many),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
