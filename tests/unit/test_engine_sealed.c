/* SPDX-License-Identifier: MIT */
/*
 * Sealed slots (verbs' encryption, run here over tcp): no plaintext on the
 * wire when sealed, all of it when clear, under each suite (engine_params.
 * seal_suite), opened on the loop and on workers; a wrong key, ends given
 * different suites, a flipped, replayed, moved or truncated slot refused.
 */
#include "engine_harness.h"
#include "engine-internal.h"

/* The sender's posts, looked at: how many payload writes carry bytes of spy_plain. */
static const struct xport_ops *spy_orig;
static uint8_t *spy_plain;
static size_t spy_len, spy_writes, spy_hits;

static int spy_post_writes(struct xport *x, const struct xport_wr *wrs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (wrs[i].opcode == XPORT_OP_WRITE && wrs[i].len >= 32) {
			spy_writes++;
			spy_hits += memmem(spy_plain, spy_len, wrs[i].buf, 32) != NULL;
		}
	}
	return spy_orig->post_writes(x, wrs, n);
}

/*
 * Every kind of slot, sealed or not: chunks, the last short one, packs,
 * many rounds of credits. Returns the payload writes that showed plaintext.
 */
static size_t spied_transfer_suite(struct fx *f, bool seal, enum lane_seal_suite suite,
				   unsigned workers, unsigned tx_workers)
{
	struct source s = { 0 };
	static const char *const regs[] = {
		"empty", "one", "small", "exact", "span", "d/tail", NULL
	};
	static struct xport_ops spy;
	uint64_t bytes = 0;

	bytes += source_file(f, &s, "empty", 0);
	bytes += source_file(f, &s, "one", 1);
	bytes += source_file(f, &s, "small", 100);
	bytes += source_file(f, &s, "exact", CHUNK);
	bytes += source_file(f, &s, "span", 5 * CHUNK + 17);
	source_dir(f, &s, "d");
	bytes += source_file(f, &s, "d/tail", 3000);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK;
	if (seal) {
		seal_both(f, 0x5a);
		f->txr.p.seal_suite = f->rxr.p.seal_suite = suite;
		f->rxr.p.hash_threads = workers;
		f->txr.p.hash_threads = tx_workers;
	}
	/* "span" is the source's fifth entry: its contents come from seed 4. */
	spy_len = 5 * CHUNK + 17;
	spy_plain = malloc(spy_len);
	assert_non_null(spy_plain);
	fill(spy_plain, spy_len, 4);
	spy_writes = spy_hits = 0;
	spy_orig = f->tx.x->ops;
	spy = *spy_orig;
	spy.post_writes = spy_post_writes;
	f->tx.x->ops = &spy;

	run_both(f, &s);

	f->tx.x->ops = spy_orig;
	free(spy_plain);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_true(spy_writes >= 6);
	assert_stats(&f->rxr.st, 7, 0, bytes, PERR_OK);
	assert_true(f->rxr.st.files_packed >= 2);
	assert_dest(f->dst, "d d/tail empty exact one small span");
	for (size_t i = 0; regs[i]; i++) {
		assert_same_file(f->src, f->dst, regs[i]);
	}
	return spy_hits;
}

static size_t spied_transfer(struct fx *f, bool seal)
{
	return spied_transfer_suite(f, seal, 0, 0, 0);
}

/* The spy sees the file's bytes in clear slots (so it can see them)... */
static void test_clear_slots_seen(void **state)
{
	/* span's five whole chunks (its last, 17 bytes, is too short to look at) */
	assert_int_equal(spied_transfer(*state, false), 5);
}

/* ...and none in sealed ones, which arrive whole all the same. */
static void test_sealed_transfer(void **state)
{
	assert_int_equal(spied_transfer(*state, true), 0);
}

/*
 * Each suite, on the receiver's loop and on its workers (their own keys):
 * a worker or an end that took another suite than the other end's would
 * fail the first slot's tag, so the bytes arriving whole says both used it.
 */
static void test_sealed_aes256_pinned(void **state)
{
	assert_int_equal(spied_transfer_suite(*state, true, LANE_SEAL_AES256_GCM, 0, 0), 0);
}

static void test_sealed_aes128(void **state)
{
	assert_int_equal(spied_transfer_suite(*state, true, LANE_SEAL_AES128_GCM, 0, 0), 0);
}

static void test_sealed_chacha(void **state)
{
	assert_int_equal(spied_transfer_suite(*state, true, LANE_SEAL_CHACHA20_POLY1305, 0, 0), 0);
}

static void test_sealed_aes128_workers(void **state)
{
	assert_int_equal(spied_transfer_suite(*state, true, LANE_SEAL_AES128_GCM, 2, 0), 0);
}

static void test_sealed_chacha_workers(void **state)
{
	assert_int_equal(spied_transfer_suite(*state, true, LANE_SEAL_CHACHA20_POLY1305, 3, 0), 0);
}

/*
 * The sender's seals on its workers (hashed and sealed in one job, pushed
 * in each lane's count order): no plaintext, every file whole, with the
 * receiver opening on its loop or its workers, slow jobs finishing late.
 */
static void test_sealed_sender_workers(void **state)
{
	assert_int_equal(spied_transfer_suite(*state, true, LANE_SEAL_AES256_GCM, 0, 2), 0);
}

static void test_sealed_sender_workers_both(void **state)
{
	assert_int_equal(spied_transfer_suite(*state, true, LANE_SEAL_CHACHA20_POLY1305, 2, 3), 0);
}

static void test_sealed_sender_workers_slow(void **state)
{
	struct fx *f = *state;

	f->txr.p.faults |= ENGINE_FAULT_SLOW_HASH;
	assert_int_equal(spied_transfer_suite(f, true, LANE_SEAL_AES128_GCM, 1, 3), 0);
}

/*
 * A worker's seal is the loop's: sealed at a count and fed to a hash in
 * one pass, it opens at that count with the clear bytes back, the hash is
 * the clear bytes', and another count or slot does not open.
 */
static void test_slot_seal_at_opens(void **state)
{
	struct lane_seal tx, rx;
	struct engine_params p = { .seal_suite = LANE_SEAL_AES128_GCM };
	struct proto_desc d = { .file_id = 7, .len = 3 * ENGINE_BLOCK + 5, .offset = 0 }, got;
	uint8_t stage[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN], again[sizeof(stage)];
	uint32_t len = d.len;
	uint8_t *clear = malloc(len), *buf = malloc(len), *out = malloc(len);
	struct file_hash h = { 0 }, want = { 0 };
	uint8_t dh[HASH_LEN], dwant[HASH_LEN];

	(void)state;
	assert_true(clear && buf && out);
	fill(clear, len, 3);
	memcpy(buf, clear, len);
	memset(p.seal_secret, 0x33, sizeof(p.seal_secret));
	assert_int_equal(slot_key_init(&p, &tx, 1, true), 0);
	assert_int_equal(slot_key_init(&p, &rx, 1, false), 0);
	assert_int_equal(file_hash_init(&h), 0);
	assert_int_equal(file_hash_init(&want), 0);
	proto_desc_encode(&d, stage);
	assert_int_equal(slot_seal_at(&tx, 9, 41, stage, buf, len, &h), 0);
	file_hash_update(&want, clear, len);
	file_hash_final(&h, dh);
	file_hash_final(&want, dwant);
	assert_memory_equal(dh, dwant, HASH_LEN);
	assert_memory_not_equal(buf, clear, len);
	memcpy(again, stage, sizeof(stage));
	assert_int_equal(slot_open_copy(&rx, 9, 40, again, buf, out, len, &got), -EBADMSG);
	memcpy(again, stage, sizeof(stage));
	assert_int_equal(slot_open_copy(&rx, 8, 41, again, buf, out, len, &got), -EBADMSG);
	memcpy(again, stage, sizeof(stage));
	assert_int_equal(slot_open_copy(&rx, 9, 41, again, buf, out, len, &got), 0);
	assert_int_equal(got.file_id, 7);
	assert_int_equal(got.len, len);
	assert_memory_equal(out, clear, len);
	lane_seal_fini(&tx);
	lane_seal_fini(&rx);
	file_hash_free(&h);
	file_hash_free(&want);
	free(clear);
	free(buf);
	free(out);
}

/*
 * A slot that does not open fails the session at its first slot, before a
 * byte of it is written: nothing is committed. tamper: the sender's test
 * hook (0: the receiver holds another key); tx_workers: the sender's seals
 * on its workers.
 */
static void sealed_refused_on(struct fx *f, unsigned tamper, unsigned tx_workers)
{
	struct source s = { 0 };

	source_file(f, &s, "a", 3 * CHUNK + 5);
	source_file(f, &s, "b", 2 * CHUNK);
	seal_both(f, tamper ? 0x5a : 0xa5);
	f->txr.p.seal_tamper = tamper;
	f->txr.p.hash_threads = tx_workers;

	run_both(f, &s);

	assert_failed_run(&f->rxr, -EBADMSG, PERR_TRANSPORT, "fails authentication");
	assert_int_not_equal(f->txr.r, 0);
	assert_dest(f->dst, "");
}

static void sealed_refused(struct fx *f, unsigned tamper)
{
	sealed_refused_on(f, tamper, 0);
}

/* Each spoilt slot, sealed on the sender's workers: refused the same way. */
static void test_sealed_tamper_sender_workers(void **state)
{
	static const unsigned tampers[] = { XPORT_TEST_TAMPER_FLIP, XPORT_TEST_TAMPER_REPLAY,
					    XPORT_TEST_TAMPER_MOVE, XPORT_TEST_TAMPER_TRUNCATE };

	for (size_t i = 0; i < sizeof(tampers) / sizeof(tampers[0]); i++) {
		struct fx *f = *state;

		if (i > 0) {
			assert_int_equal(fx_teardown(state), 0);
			assert_int_equal(fx_setup(state), 0);
			f = *state;
		}
		sealed_refused_on(f, tampers[i], 2);
	}
}

/*
 * The same secret, different suites (what two ends that each chose their own
 * would hold): the first slot fails its tag, nothing is committed. Without
 * the suite reaching the keys both ends would seal AES-256-GCM and talk.
 */
static void suites_differ(struct fx *f, enum lane_seal_suite tx, enum lane_seal_suite rx,
			  unsigned workers)
{
	struct source s = { 0 };

	source_file(f, &s, "a", 3 * CHUNK + 5);
	source_file(f, &s, "b", 2 * CHUNK);
	seal_both(f, 0x5a);
	f->txr.p.seal_suite = tx;
	f->rxr.p.seal_suite = rx;
	f->rxr.p.hash_threads = workers;

	run_both(f, &s);

	assert_failed_run(&f->rxr, -EBADMSG, PERR_TRANSPORT, "fails authentication");
	assert_int_not_equal(f->txr.r, 0);
	assert_dest(f->dst, "");
}

static void test_suites_differ_aes128_chacha(void **state)
{
	suites_differ(*state, LANE_SEAL_AES128_GCM, LANE_SEAL_CHACHA20_POLY1305, 0);
}

/* An old peer (0: AES-256-GCM) against a suite. */
static void test_suites_differ_default_aes128(void **state)
{
	suites_differ(*state, 0, LANE_SEAL_AES128_GCM, 0);
}

static void test_suites_differ_chacha_default(void **state)
{
	suites_differ(*state, LANE_SEAL_CHACHA20_POLY1305, 0, 0);
}

/* On workers: their keys follow the suite, not AES-256-GCM. */
static void test_suites_differ_workers(void **state)
{
	suites_differ(*state, LANE_SEAL_CHACHA20_POLY1305, LANE_SEAL_AES256_GCM, 2);
}

/* No such suite: the end refuses it at set-up, before a slot moves. */
static void test_suite_unknown(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "a", 2 * CHUNK);
	seal_both(f, 0x5a);
	f->txr.p.seal_suite = (enum lane_seal_suite)(LANE_SEAL_NSUITES + 1);

	run_both(f, &s);

	assert_failed_run(&f->txr, -EINVAL, PERR_INTERNAL, "slot keys");
	assert_int_not_equal(f->rxr.r, 0);
	assert_dest(f->dst, "");
}

static void test_sealed_wrong_key(void **state)
{
	sealed_refused(*state, XPORT_TEST_TAMPER_NONE);
}

static void test_sealed_flip(void **state)
{
	sealed_refused(*state, XPORT_TEST_TAMPER_FLIP);
}

static void test_sealed_replay(void **state)
{
	sealed_refused(*state, XPORT_TEST_TAMPER_REPLAY);
}

static void test_sealed_move(void **state)
{
	sealed_refused(*state, XPORT_TEST_TAMPER_MOVE);
}

static void test_sealed_truncate(void **state)
{
	sealed_refused(*state, XPORT_TEST_TAMPER_TRUNCATE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_clear_slots_seen),
		T(test_sealed_transfer),
		T(test_sealed_wrong_key),
		T(test_sealed_flip),
		T(test_sealed_replay),
		T(test_sealed_move),
		T(test_sealed_truncate),
		T(test_sealed_aes256_pinned),
		T(test_sealed_aes128),
		T(test_sealed_chacha),
		T(test_sealed_aes128_workers),
		T(test_sealed_chacha_workers),
		T(test_suites_differ_aes128_chacha),
		T(test_suites_differ_default_aes128),
		T(test_suites_differ_chacha_default),
		T(test_suites_differ_workers),
		T(test_suite_unknown),
		T(test_slot_seal_at_opens),
		T(test_sealed_sender_workers),
		T(test_sealed_sender_workers_both),
		T(test_sealed_sender_workers_slow),
		T(test_sealed_tamper_sender_workers),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
