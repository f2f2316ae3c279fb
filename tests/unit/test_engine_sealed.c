/* SPDX-License-Identifier: MIT */
/*
 * Sealed slots (verbs' encryption, run here over tcp): no plaintext on the
 * wire when sealed, all of it when clear; a wrong key, a flipped, replayed,
 * moved or truncated slot refused.
 */
#include "engine_harness.h"

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
static size_t spied_transfer(struct fx *f, bool seal)
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
 * A slot that does not open fails the session at its first slot, before a
 * byte of it is written: nothing is committed. tamper: the sender's test
 * hook (0: the receiver holds another key).
 */
static void sealed_refused(struct fx *f, unsigned tamper)
{
	struct source s = { 0 };

	source_file(f, &s, "a", 3 * CHUNK + 5);
	source_file(f, &s, "b", 2 * CHUNK);
	seal_both(f, tamper ? 0x5a : 0xa5);
	f->txr.p.seal_tamper = tamper;

	run_both(f, &s);

	assert_failed_run(&f->rxr, -EBADMSG, PERR_TRANSPORT, "fails authentication");
	assert_int_not_equal(f->txr.r, 0);
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
		T(test_clear_slots_seen), T(test_sealed_transfer), T(test_sealed_wrong_key),
		T(test_sealed_flip),	  T(test_sealed_replay),   T(test_sealed_move),
		T(test_sealed_truncate),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
