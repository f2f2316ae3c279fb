/* SPDX-License-Identifier: MIT */
/*
 * The window sized to the link (src/linkwin.c), table-driven: the slots for
 * 2.5 (Soft-RoCE), 25, 100, 200 and 400 Gb/s at short, expected and long
 * hold times and several chunk sizes, the floor (32, or 32 MiB of larger
 * chunks, and 4 per lane), the caps (1024 slots, 256 MiB), an unknown rate; the queue pairs and chunk size per
 * port; and linkwin_fit over one port, rails, and what the user set.
 */
#include "testutil.h"

#include <stdio.h>

#include "linkwin.h"
#include "macro.h"

#define MiB (1u << 20)

static void test_slots_table(void **state)
{
	static const struct {
		uint64_t mbps;
		uint32_t hold_us, chunk;
		unsigned lanes;
		uint32_t want;
	} rows[] = {
		/* The expected hold (1 ms), 1 MiB chunks: 32 covers up to about 268 Gb/s. */
		{ 2500, LINKWIN_HOLD_US, MiB, 2, 32 },
		{ 25000, LINKWIN_HOLD_US, MiB, 2, 32 },
		{ 100000, LINKWIN_HOLD_US, MiB, 2, 32 },
		{ 200000, LINKWIN_HOLD_US, MiB, 2, 32 },
		{ 400000, LINKWIN_HOLD_US, MiB, 2, 48 },     /* 50 MB / 1 MiB = 47.7 */
		{ 400000, LINKWIN_HOLD_US, 4 * MiB, 4, 16 }, /* 11.9: 4 per QP */
		{ 400000, LINKWIN_HOLD_US, 4 * MiB, 1, 12 }, /* 11.9: 12, over 32 MiB */
		{ 100000, LINKWIN_HOLD_US, 4 * MiB, 1, 8 },  /* 32 MiB of 4 MiB */
		{ 100000, LINKWIN_HOLD_US, 2 * MiB, 1, 16 }, /* 32 MiB of 2 MiB */
		{ 2500, LINKWIN_HOLD_US, 64 * 1024, 1, 32 }, /* never more than 32 for it */
		/* A short hold (the workers' copy, ~100 us): the floor everywhere. */
		{ 2500, 100, MiB, 2, 32 },
		{ 400000, 100, MiB, 2, 32 },
		/* A slow disk (5 ms held). */
		{ 2500, 5000, MiB, 2, 32 },
		{ 25000, 5000, MiB, 2, 32 },	      /* 15.6 MB: 15 */
		{ 100000, 5000, MiB, 2, 60 },	      /* 62.5 MB: 59.6 */
		{ 200000, 5000, MiB, 2, 120 },	      /* 125 MB: 119.2 */
		{ 400000, 5000, MiB, 2, 239 },	      /* 250 MB: 238.4 */
		{ 400000, 5000, 4 * MiB, 4, 60 },     /* 59.6 */
		{ 400000, 5000, 64 * 1024, 2, 1024 }, /* 3815: the slot cap */
		/* The byte cap: 256 MiB of 1 MiB chunks; chunks so big that the cap is under the floor. */
		{ 400000, 20000, MiB, 2, 256 },
		{ 400000, 20000, 64 * MiB, 2, 8 }, /* 4 per QP: over the byte cap */
		{ 400000, 20000, 64 * MiB, 0, 4 }, /* the byte cap: 4 of 64 MiB */
		{ 2500, 20000, 64 * MiB, 0, 2 },   /* two at least */
		/* The floor per lane: 16 lanes want 64. */
		{ 2500, LINKWIN_HOLD_US, MiB, 16, 64 },
		{ 400000, 5000, MiB, 16, 239 },
		/* Unknown rate: today's ring, whatever the lanes. */
		{ 0, LINKWIN_HOLD_US, MiB, 16, 32 },
		/* Absurd inputs stay bounded. */
		{ UINT64_MAX, UINT32_MAX, 4096, 2, 1024 },
		{ 1, 1, MiB, 2, 32 },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		uint32_t got =
		    linkwin_slots(rows[i].mbps, rows[i].hold_us, rows[i].chunk, rows[i].lanes);

		if (got != rows[i].want) {
			fail_msg("row %zu: %llu Mb/s, %u us, chunk %u, %u lanes: %u slots, want %u",
				 i, (unsigned long long)rows[i].mbps, rows[i].hold_us,
				 rows[i].chunk, rows[i].lanes, got, rows[i].want);
		}
	}
}

/* ceil(rate x hold / chunk) exactly, between the floor and the caps. */
static void test_slots_ceiling(void **state)
{
	(void)state;
	/* 100 Gb/s held 8 ms: 100 MB = 95.37 MiB -> 96 slots. */
	assert_int_equal(linkwin_slots(100000, 8000, MiB, 2), 96);
	/* Exactly 40 MiB in flight: 40 slots, not 41; a byte more: 41. */
	assert_int_equal(linkwin_slots(8ull * 40 * MiB, 1, MiB, 2), 40);
	assert_int_equal(linkwin_slots(8ull * 40 * MiB + 8, 1, MiB, 2), 41);
}

static void test_lanes_and_chunk(void **state)
{
	static const struct {
		uint64_t mbps;
		unsigned lanes;
		uint32_t chunk;
	} rows[] = {
		{ 2500, 1, MiB },	{ 25000, 1, MiB },	{ 100000, 1, MiB },
		{ 199999, 1, MiB },	{ 200000, 4, MiB },	{ 399999, 4, MiB },
		{ 400000, 4, 4 * MiB }, { 800000, 4, 4 * MiB },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		assert_int_equal(linkwin_port_lanes(rows[i].mbps), rows[i].lanes);
		assert_int_equal(linkwin_chunk(rows[i].mbps, MiB), rows[i].chunk);
	}
	/* A default already bigger stays. */
	assert_int_equal(linkwin_chunk(400000, 8 * MiB), 8 * MiB);
}

static struct linkwin_ask defaults(void)
{
	return (struct linkwin_ask){ .lanes = 2, .chunk_size = MiB, .slots = 32 };
}

static void test_fit(void **state)
{
	struct linkwin_ask a;
	uint64_t r;
	/* Soft-RoCE, 25 and 100 Gb/s: the defaults. */
	static const uint64_t slow[] = { 2500, 25000, 100000 };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(slow); i++) {
		uint64_t one = slow[i];

		a = defaults();
		assert_int_equal(linkwin_fit(&one, 1, 16, &a), one);
		assert_int_equal(a.lanes, 2);
		assert_int_equal(a.chunk_size, MiB);
		assert_int_equal(a.slots, 32);
	}
	/* 200 Gb/s: 4 QPs. 400 Gb/s: 4 QPs and 4 MiB chunks. */
	a = defaults();
	r = 200000;
	linkwin_fit(&r, 1, 16, &a);
	assert_int_equal(a.lanes, 4);
	assert_int_equal(a.chunk_size, MiB);
	assert_int_equal(a.slots, 32);
	a = defaults();
	r = 400000;
	linkwin_fit(&r, 1, 16, &a);
	assert_int_equal(a.lanes, 4);
	assert_int_equal(a.chunk_size, 4 * MiB);
	assert_int_equal(a.slots, 16); /* 50 MB: 12 of 4 MiB, 4 per QP: 16 */
	/* The user's chunk kept at 400 Gb/s: the slots follow it. */
	a = defaults();
	a.chunk_set = true;
	linkwin_fit(&r, 1, 16, &a);
	assert_int_equal(a.chunk_size, MiB);
	assert_int_equal(a.slots, 48);
	/* What the user set stays: --lanes 1 --slots 2. */
	a = defaults();
	a.lanes = 1;
	a.lanes_set = true;
	a.slots = 2;
	a.slots_set = true;
	linkwin_fit(&r, 1, 16, &a);
	assert_int_equal(a.lanes, 1);
	assert_int_equal(a.slots, 2);
	assert_int_equal(a.chunk_size, 4 * MiB);
}

static void test_fit_rails(void **state)
{
	uint64_t two200[] = { 200000, 200000 }, four400[] = { 400000, 400000, 400000, 400000 };
	uint64_t mixed[] = { 0, 100000, 400000 }, none[] = { 0, 0 };
	struct linkwin_ask a = defaults();

	(void)state;
	/* Two 200 Gb/s rails: 4 QPs each, one ring for 400 Gb/s of 1 MiB chunks. */
	assert_int_equal(linkwin_fit(two200, 2, 16, &a), 400000);
	assert_int_equal(a.lanes, 8);
	assert_int_equal(a.chunk_size, MiB);
	assert_int_equal(a.slots, 48);
	/* Four 400 Gb/s rails: 16 QPs (the cap given), 4 MiB chunks, 200 MB in flight. */
	a = defaults();
	linkwin_fit(four400, 4, 16, &a);
	assert_int_equal(a.lanes, 16);
	assert_int_equal(a.chunk_size, 4 * MiB);
	assert_int_equal(a.slots, 64); /* 190.7 MiB / 4 MiB = 47.7, but 4 per QP */
	a = defaults();
	linkwin_fit(four400, 4, 8, &a);
	assert_int_equal(a.lanes, 8);
	/* A rail of unknown rate counts for nothing; the others are sized. */
	a = defaults();
	assert_int_equal(linkwin_fit(mixed, 3, 16, &a), 500000);
	assert_int_equal(a.lanes, 5);
	assert_int_equal(a.chunk_size, 4 * MiB);
	assert_int_equal(a.slots, 20);
	/* No rate known: nothing changes. */
	a = defaults();
	a.lanes = 3;
	assert_int_equal(linkwin_fit(none, 2, 16, &a), 0);
	assert_int_equal(a.lanes, 3);
	assert_int_equal(a.chunk_size, MiB);
	assert_int_equal(a.slots, 32);
	assert_int_equal(linkwin_fit(none, 0, 16, &a), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slots_table),	cmocka_unit_test(test_slots_ceiling),
		cmocka_unit_test(test_lanes_and_chunk), cmocka_unit_test(test_fit),
		cmocka_unit_test(test_fit_rails),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
