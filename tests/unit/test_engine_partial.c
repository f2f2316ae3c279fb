/* SPDX-License-Identifier: MIT */
/*
 * --partial: a journal made by hand resumed (a gap, everything kept, a
 * flipped byte, records of another chunk size, no time, held a moment by
 * another session), discarded (another
 * mtime, overlapping records, a record past the size), a name in the store
 * refused, and a RESUME the sender refuses (no capability, not whole chunks,
 * past the size).
 */
#include "engine_harness.h"

#include <pthread.h>
#include <sys/file.h>

#define PART_SIZE (5 * CHUNK + 17)

struct prange {
	uint64_t off, len;
};

static void put_be(uint8_t **p, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++) {
		(*p)[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
	}
	*p += bytes;
}

/*
 * A partial as a cut run leaves it (the format of docs/ARCHITECTURE.md):
 * dst/.rdmacp-partial/<hex xxh128 of leaf>.data holding data, and .jnl with
 * the header (magic "RDPT", version 1, size, mtime, leaf) and a record
 * (offset, len, XXH3-128 of those bytes of data) per range.
 */
static void make_partial(struct fx *f, const char *leaf, const uint8_t *data, size_t size,
			 int64_t mtime_sec, const struct prange *r, size_t n)
{
	char *store = path_in(f->dst, ENGINE_PARTIAL_DIR), dname[64], jname[64], hex[33];
	uint8_t h[HASH_LEN], jnl[512], *p = jnl;
	XXH128_canonical_t c;

	assert_int_equal(mkdir(store, 0700), 0);
	XXH128_canonicalFromHash(&c, XXH3_128bits(leaf, strlen(leaf)));
	memcpy(h, c.digest, HASH_LEN);
	hash_to_hex(h, hex);
	snprintf(dname, sizeof(dname), "%s.data", hex);
	snprintf(jname, sizeof(jname), "%s.jnl", hex);
	write_file(store, dname, data, size);
	put_be(&p, 0x52445054u, 4);
	put_be(&p, 1, 4);
	put_be(&p, size, 8);
	put_be(&p, (uint64_t)mtime_sec, 8);
	put_be(&p, 0, 4);
	put_be(&p, strlen(leaf), 2);
	memcpy(p, leaf, strlen(leaf));
	p += strlen(leaf);
	for (size_t i = 0; i < n; i++) {
		assert_true((size_t)(p - jnl) + 32 <= sizeof(jnl));
		put_be(&p, r[i].off, 8);
		put_be(&p, r[i].len, 8);
		/* The digest of the source's bytes: what the receiver wrote there. */
		XXH128_canonicalFromHash(&c, XXH3_128bits(data + r[i].off, r[i].len));
		memcpy(p, c.digest, HASH_LEN);
		p += HASH_LEN;
	}
	write_file(store, jname, jnl, (size_t)(p - jnl));
	free(store);
}

/* A session that still holds the partial (a stale one, cut with its upstream): its lock. */
struct holder {
	int fd;
	unsigned ms; /* let go after this long */
	pthread_t t;
};

static void *holder_run(void *arg)
{
	struct holder *h = arg;

	usleep(h->ms * 1000);
	close(h->fd);
	return NULL;
}

/* The store's data file locked, let go after ms in a thread of its own. */
static void hold_partial(struct fx *f, struct holder *h, unsigned ms)
{
	char *store = path_in(f->dst, ENGINE_PARTIAL_DIR);
	DIR *d = opendir(store);
	struct dirent *de;

	assert_non_null(d);
	h->fd = -1;
	h->ms = ms;
	while ((de = readdir(d))) {
		if (strstr(de->d_name, ".data")) {
			h->fd = openat(dirfd(d), de->d_name, O_RDWR | O_CLOEXEC);
		}
	}
	closedir(d);
	free(store);
	assert_true(h->fd >= 0);
	assert_int_equal(flock(h->fd, LOCK_EX | LOCK_NB), 0);
	assert_int_equal(pthread_create(&h->t, NULL, holder_run, h), 0);
}

/* ms > 0: the partial is held that long by another session when the transfer starts. */
static unsigned held_ms;

/*
 * A --partial transfer of PART_SIZE bytes over the partial make_partial
 * leaves with these ranges (flip: a byte of the data file changed at that
 * offset, unless negative); kept bytes must be kept, the rest sent, and the
 * file committed whole and right, the store gone.
 */
static void resume_case(void **state, int64_t mtime_sec, const struct prange *r, size_t n,
			int64_t flip, uint64_t kept, unsigned faults)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct holder holder = { .fd = -1 };
	uint8_t *src, *part;
	size_t len;

	source_file(f, &s, "big", PART_SIZE);
	src = read_file(f->src, "big", &len);
	assert_non_null(src);
	part = malloc(len);
	assert_non_null(part);
	memcpy(part, src, len);
	make_partial(f, "big", part, len, mtime_sec, r, n);
	if (flip >= 0) {
		char *store = path_in(f->dst, ENGINE_PARTIAL_DIR);
		DIR *d = opendir(store);
		struct dirent *de;

		part[flip] ^= 0x40;
		while ((de = readdir(d))) {
			if (strstr(de->d_name, ".data")) {
				write_file(store, de->d_name, part, len);
			}
		}
		closedir(d);
		free(store);
	}
	if (held_ms) {
		hold_partial(f, &holder, held_ms);
	}
	f->rxr.p.open_flags = PROTO_OPEN_PARTIAL;
	f->rxr.p.faults = faults;
	f->rxr.p.peer_caps = PROTO_CAP_PARTIAL;
	f->txr.p.peer_caps = PROTO_CAP_PARTIAL;

	run_both(f, &s);
	if (held_ms) {
		pthread_join(holder.t, NULL);
	}

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, PART_SIZE - kept, PERR_OK);
	assert_stats(&f->txr.st, 1, 0, PART_SIZE - kept, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_resumed, kept);
	assert_int_equal(f->txr.st.bytes_resumed, kept);
	assert_int_equal(f->txr.st.files_resumed, kept ? 1 : 0);
	assert_int_equal(f->txr.ev.ok_bytes, PART_SIZE - kept);
	assert_same_file(f->src, f->dst, "big");
	assert_dest(f->dst, "big");
	free(src);
	free(part);
}

/* Chunks 0-3 and 5 journaled (4 missing): the first four kept, the rest sent. */
static void test_partial_resume(void **state)
{
	const struct prange r[] = { { 0, CHUNK },
				    { 2 * CHUNK, CHUNK },
				    { CHUNK, CHUNK },
				    { 3 * CHUNK, CHUNK },
				    { 5 * CHUNK, 17 } };

	resume_case(state, 0, r, ARRAY_SIZE(r), -1, 4 * CHUNK, 0);
}

/*
 * The partial still locked by a session that is ending (the one a dead relay
 * hop fed): waited for, then resumed, not written again into a temp file.
 */
static void test_partial_held_briefly(void **state)
{
	const struct prange r[] = { { 0, 3 * CHUNK } };

	held_ms = 400;
	resume_case(state, 0, r, ARRAY_SIZE(r), -1, 3 * CHUNK, 0);
	held_ms = 0;
}

/* Everything journaled: nothing sent, the file still verified whole. */
static void test_partial_complete(void **state)
{
	const struct prange r[] = { { 0, 3 * CHUNK }, { 3 * CHUNK, 2 * CHUNK + 17 } };

	resume_case(state, 0, r, ARRAY_SIZE(r), -1, PART_SIZE, 0);
}

/* A byte flipped in chunk 2 of the kept data: kept up to it, the rest re-sent. */
static void test_partial_flipped(void **state)
{
	const struct prange r[] = {
		{ 0, CHUNK }, { CHUNK, CHUNK }, { 2 * CHUNK, CHUNK }, { 3 * CHUNK, CHUNK }
	};

	resume_case(state, 0, r, ARRAY_SIZE(r), 2 * CHUNK + 100, 2 * CHUNK, 0);
}

/* Records of another chunk size: kept in whole chunks of this session's. */
static void test_partial_other_chunks(void **state)
{
	const struct prange r[] = { { 0, CHUNK / 2 },
				    { CHUNK / 2, CHUNK / 2 },
				    { CHUNK, CHUNK / 2 },
				    { 3 * CHUNK / 2, CHUNK / 4 } };

	resume_case(state, 0, r, ARRAY_SIZE(r), -1, CHUNK, 0);
}

/* No time left to re-read kept data (the peer would time out): nothing kept, all sent. */
static void test_partial_no_time(void **state)
{
	const struct prange r[] = { { 0, CHUNK }, { CHUNK, CHUNK } };

	resume_case(state, 0, r, ARRAY_SIZE(r), -1, 0, ENGINE_FAULT_NO_VERIFY_TIME);
}

/* Another source (its mtime), overlapping records, a record past the size: all sent. */
static void test_partial_discarded(void **state)
{
	const struct prange r[] = { { 0, CHUNK }, { CHUNK, CHUNK } };

	resume_case(state, 1, r, ARRAY_SIZE(r), -1, 0, 0);
}

static void test_partial_overlap(void **state)
{
	const struct prange r[] = { { 0, CHUNK }, { CHUNK, CHUNK }, { CHUNK / 2, CHUNK } };

	resume_case(state, 0, r, ARRAY_SIZE(r), -1, 0, 0);
}

static void test_partial_past_size(void **state)
{
	const struct prange r[] = { { 0, CHUNK }, { PART_SIZE - 10, 20 } };

	resume_case(state, 0, r, ARRAY_SIZE(r), -1, 0, 0);
}

/* A name in a partial store, from a peer: refused (BAD_PATH), nothing written there. */
static void test_partial_store_name_refused(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint64_t bytes = source_file(f, &s, "ok", 3000);

	source_dir(f, &s, ENGINE_PARTIAL_DIR);
	source_file(f, &s, ENGINE_PARTIAL_DIR "/x.data", 2000);

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 2, bytes, PERR_BAD_PATH);
	assert_dest(f->dst, "ok");
}

/*
 * A receiver's RESUME the sender must refuse: one from a peer that did not
 * say it knows RESUME, or ranges that are not whole chunks of the file.
 */
static void resume_refused(void **state, bool cap, struct proto_range g, const char *why)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	uint32_t id;

	source_file(f, &s, "big", PART_SIZE);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.peer_caps = cap ? PROTO_CAP_PARTIAL : 0;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_RESUME };
	m.u.resume.id = id;
	m.u.resume.count = 1;
	m.u.resume.r[0] = g;
	raw_send(&w, &m);
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->txr);

	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, why);
	assert_stats(&f->txr.st, 0, 0, 0, PERR_OK);
	raw_free(&w);
}

static void test_resume_without_cap(void **state)
{
	resume_refused(state, false, (struct proto_range){ 0, CHUNK }, "out of place");
}

static void test_resume_not_chunks(void **state)
{
	resume_refused(state, true, (struct proto_range){ 0, CHUNK / 2 }, "not whole chunks");
}

static void test_resume_past_size(void **state)
{
	resume_refused(state, true, (struct proto_range){ 5 * CHUNK, CHUNK }, "not whole chunks");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_partial_resume),	      T(test_partial_complete),
		T(test_partial_flipped),      T(test_partial_other_chunks),
		T(test_partial_discarded),    T(test_partial_overlap),
		T(test_partial_past_size),    T(test_partial_store_name_refused),
		T(test_partial_no_time),      T(test_resume_without_cap),
		T(test_resume_not_chunks),    T(test_resume_past_size),
		T(test_partial_held_briefly),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
