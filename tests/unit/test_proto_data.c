/* SPDX-License-Identifier: MIT */
/*
 * The data path's wire formats (proto/msg_data.c): RING and its keys,
 * LANE_DOWN, slot descriptors, packed slots' piece tables.
 * Shared samples and checks: proto_testlib.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_testlib.h"

static void test_bad_ring(void **state)
{
	struct msg m;
	uint64_t span;

	(void)state;
#define BAD_RING(field, value)                                    \
	do {                                                      \
		sample(MSG_RING, &m);                             \
		m.u.ring.field = (value);                         \
		assert_int_equal(encode_decode_rc(&m), -EBADMSG); \
	} while (0)
	BAD_RING(slot_size, 0);
	BAD_RING(slot_size, 5000);
	BAD_RING(slot_size, PROTO_MAX_CHUNK * 2);
	BAD_RING(slots, 0);
	BAD_RING(slots, PROTO_MAX_SLOTS + 1);
	BAD_RING(addr, UINT64_MAX);
	BAD_RING(desc_addr, UINT64_MAX);
#undef BAD_RING
	/* The last slot (or descriptor) would wrap past 2^64 by one byte. */
	sample(MSG_RING, &m);
	span = (uint64_t)m.u.ring.slots * m.u.ring.slot_size;
	m.u.ring.addr = UINT64_MAX - span;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.ring.addr = UINT64_MAX - span + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);

	sample(MSG_RING, &m);
	span = (uint64_t)m.u.ring.slots * PROTO_DESC_LEN;
	m.u.ring.desc_addr = UINT64_MAX - span;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.ring.desc_addr = UINT64_MAX - span + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);

	/* One rkey per lane: 1..PROTO_MAX_LANES, and exactly that many follow. */
	sample(MSG_RING, &m);
	m.u.ring.nkeys = 0;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EINVAL);
	m.u.ring.nkeys = PROTO_MAX_LANES + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EINVAL);
	{
		/* addr, desc_addr, slots 16, slot_size 1 MiB, nkeys, keys */
		uint8_t p[25 + 4 * (PROTO_MAX_LANES + 1)] = { [16] = 0, 0, 0, 16, 0, 0x10, 0, 0 };
		struct msg d;

		for (unsigned n = 0; n <= PROTO_MAX_LANES + 1; n++) {
			p[24] = (uint8_t)n;
			for (unsigned k = 0; k < 4 * n; k++) {
				p[25 + k] = (uint8_t)(k + 1);
			}
			/* Exact length only: one key short, or one more, is refused. */
			if (n >= 1 && n <= PROTO_MAX_LANES) {
				assert_int_equal(decode_copy(MSG_RING, p, 25 + 4 * n, &d), 0);
				assert_int_equal(d.u.ring.nkeys, n);
				assert_int_equal(d.u.ring.rkey[n - 1],
						 (uint32_t)(4 * n - 3) << 24 | (4 * n - 2) << 16 |
						     (4 * n - 1) << 8 | (4 * n));
				msg_clear(&d);
				assert_int_equal(decode_rc(MSG_RING, p, 25 + 4 * n - 1), -EBADMSG);
				assert_int_equal(decode_rc(MSG_RING, p, 25 + 4 * n + 4), -EBADMSG);
			} else {
				assert_int_equal(decode_rc(MSG_RING, p, 25 + 4 * n), -EBADMSG);
			}
		}
	}
}

/* LANE_DOWN: its exact bytes; a lane past PROTO_MAX_LANES or a reserved byte set is refused. */
static void test_lane_down(void **state)
{
	static const uint8_t expect[12] = { 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x02 };
	uint8_t bad[12];
	struct msg m = { .type = MSG_LANE_DOWN }, d;

	(void)state;
	m.u.lane_down.lane = PROTO_MAX_LANES - 1;
	m.u.lane_down.count = 0x102;
	assert_int_equal(encode_ok(&m), sizeof(expect));
	assert_memory_equal(payload(), expect, sizeof(expect));
	round_trip(&m);
	assert_string_equal(proto_type_name(MSG_LANE_DOWN), "LANE_DOWN");
	m.u.lane_down.lane = PROTO_MAX_LANES;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	for (size_t at = 0; at < 4; at++) {
		memcpy(bad, expect, sizeof(bad));
		bad[at] = at == 0 ? PROTO_MAX_LANES : 1;
		assert_int_equal(decode_rc(MSG_LANE_DOWN, bad, sizeof(bad)), -EBADMSG);
	}
	assert_int_equal(decode_rc(MSG_LANE_DOWN, expect, sizeof(expect) - 1), -EBADMSG);
	assert_int_equal(decode_copy(MSG_LANE_DOWN, expect, sizeof(expect), &d), 0);
	assert_int_equal(d.u.lane_down.lane, PROTO_MAX_LANES - 1);
	assert_true(d.u.lane_down.count == 0x102);
	assert_true((PROTO_CAPS_KNOWN & PROTO_CAP_RAILS) != 0);
}

static void test_desc(void **state)
{
	const struct proto_desc d = { .file_id = 0x01020304,
				      .len = 0x05060708,
				      .offset = 0x1112131415161718ull,
				      .seq = UINT64_MAX };
	const uint8_t expect[PROTO_DESC_LEN] = { 1,    2,    3,	   4,	 5,    6,    7,	   8,
						 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
						 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t b[PROTO_DESC_LEN];
	struct proto_desc out;

	(void)state;
	memset(b, 0xee, sizeof(b));
	proto_desc_encode(&d, b);
	assert_memory_equal(b, expect, sizeof(b)); /* and the tail is zeroed */
	assert_int_equal(proto_desc_decode(b, &out), 0);
	assert_int_equal(out.file_id, d.file_id);
	assert_int_equal(out.len, d.len);
	assert_true(out.offset == d.offset);
	assert_true(out.seq == d.seq);

	for (size_t i = 24; i < PROTO_DESC_LEN; i++) {
		proto_desc_encode(&d, b);
		b[i] = 0x80;
		memset(&out, 0x5a, sizeof(out));
		assert_int_equal(proto_desc_decode(b, &out), -EBADMSG);
		assert_int_equal(out.file_id, 0x5a5a5a5a); /* untouched on failure */
	}
	assert_int_equal(proto_imm(PROTO_IMM_CREDIT, 0x1234567), 0x02234567u);
}

/* A packed slot's descriptor: file id 0, offset 0, a piece count that fits its length. */
static void test_desc_packed(void **state)
{
	struct proto_desc d = { .len = 9 * 3, .seq = 7, .pieces = 3 }, out;
	uint8_t b[PROTO_DESC_LEN];

	(void)state;
	proto_desc_encode(&d, b);
	assert_int_equal(b[27], 3); /* pieces, big-endian u32 at 24 */
	assert_int_equal(proto_desc_decode(b, &out), 0);
	assert_int_equal(out.file_id, 0);
	assert_int_equal(out.pieces, 3);
	assert_int_equal(out.len, 27);

	/* Each piece needs its byte and its table entry. */
	d.len = 9 * 3 - 1;
	proto_desc_encode(&d, b);
	assert_int_equal(proto_desc_decode(b, &out), -EBADMSG);
	/* No pieces, too many, an offset: refused. */
	d = (struct proto_desc){ .len = 1u << 20, .pieces = 0 };
	proto_desc_encode(&d, b);
	assert_int_equal(proto_desc_decode(b, &out), -EBADMSG);
	d.pieces = PROTO_MAX_PIECES + 1;
	proto_desc_encode(&d, b);
	assert_int_equal(proto_desc_decode(b, &out), -EBADMSG);
	d.pieces = PROTO_MAX_PIECES;
	proto_desc_encode(&d, b);
	assert_int_equal(proto_desc_decode(b, &out), 0);
	d.offset = 4096;
	proto_desc_encode(&d, b);
	assert_int_equal(proto_desc_decode(b, &out), -EBADMSG);
	/* A file's chunk carries no piece count (the encoder writes none; a peer might). */
	d = (struct proto_desc){ .file_id = 1, .len = 10, .pieces = 2 };
	proto_desc_encode(&d, b);
	assert_int_equal(b[27], 0);
	b[27] = 2;
	assert_int_equal(proto_desc_decode(b, &out), -EBADMSG);
}

/* A packed slot's table: pieces back to back, accounting for every byte before the table. */
static void test_pieces(void **state)
{
	uint8_t slot[64] = { 0 };
	struct proto_piece out[4];
	struct proto_desc d = { .pieces = 2 };
	const struct proto_piece in[] = { { .id = 5, .len = 10 }, { .id = 9, .len = 6 } };

	(void)state;
	/* 16 bytes of data, then the table */
	proto_piece_encode(&in[0], slot + 16);
	proto_piece_encode(&in[1], slot + 24);
	d.len = 32;
	assert_int_equal(proto_pieces_decode(slot, &d, out), 0);
	assert_int_equal(out[0].id, 5);
	assert_int_equal(out[0].len, 10);
	assert_int_equal(out[0].at, 0);
	assert_int_equal(out[1].id, 9);
	assert_int_equal(out[1].at, 10);

	/* A byte more or less before the table than the pieces account for. */
	d.len = 33;
	memmove(slot + 17, slot + 16, 16);
	assert_int_equal(proto_pieces_decode(slot, &d, out), -EBADMSG);
	memmove(slot + 16, slot + 17, 16);
	d.len = 32;
	/* A piece of no bytes, id 0, a piece running into the table. */
	struct proto_piece bad = { .id = 5, .len = 0 };
	proto_piece_encode(&bad, slot + 16);
	assert_int_equal(proto_pieces_decode(slot, &d, out), -EBADMSG);
	bad = (struct proto_piece){ .id = 0, .len = 10 };
	proto_piece_encode(&bad, slot + 16);
	assert_int_equal(proto_pieces_decode(slot, &d, out), -EBADMSG);
	bad = (struct proto_piece){ .id = 5, .len = 17 };
	proto_piece_encode(&bad, slot + 16);
	assert_int_equal(proto_pieces_decode(slot, &d, out), -EBADMSG);
	bad = (struct proto_piece){ .id = 5, .len = UINT32_MAX };
	proto_piece_encode(&bad, slot + 16);
	assert_int_equal(proto_pieces_decode(slot, &d, out), -EBADMSG);
	/* Not a packed descriptor at all. */
	proto_piece_encode(&in[0], slot + 16);
	d.file_id = 1;
	assert_int_equal(proto_pieces_decode(slot, &d, out), -EBADMSG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_ring), cmocka_unit_test(test_lane_down),
		cmocka_unit_test(test_desc),	 cmocka_unit_test(test_desc_packed),
		cmocka_unit_test(test_pieces),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
