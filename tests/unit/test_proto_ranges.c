/* SPDX-License-Identifier: MIT */
/*
 * Byte ranges of a file (proto/msg_ranges.c): RESUME and ZEROS, which
 * share their layout and checks, and DELTA's two kinds.
 * Shared samples and checks: proto_testlib.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_testlib.h"

/*
 * RESUME and ZEROS share their layout and the decoder's checks: at most
 * PROTO_MAX_RESUME_RANGES ranges, ascending, none empty or past 2^64.
 */
static void bad_ranges(uint16_t type)
{
	struct msg m;
	struct wbuf w;
	size_t len;

	sample(type, &m);
	m.u.resume.count = 0;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.resume.count = PROTO_MAX_RESUME_RANGES;
	for (size_t i = 0; i < PROTO_MAX_RESUME_RANGES; i++) {
		m.u.resume.r[i] = (struct proto_range){ .offset = i * 10, .len = 10 };
	}
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.resume.count = PROTO_MAX_RESUME_RANGES + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	/* Over the cap on the wire: refused before anything is read into the table. */
	wbuf_init(&w, payload(), PROTO_MAX_PAYLOAD);
	wbuf_put_u32(&w, 1);
	wbuf_put_u16(&w, PROTO_MAX_RESUME_RANGES + 1);
	for (size_t i = 0; i <= PROTO_MAX_RESUME_RANGES; i++) {
		wbuf_put_u64(&w, i * 10);
		wbuf_put_u64(&w, 10);
	}
	len = w.len;
	assert_int_equal(decode_rc(type, payload(), len), -EBADMSG);
	sample(type, &m);
	m.u.resume.r[1].len = 0; /* empty */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample(type, &m);
	m.u.resume.r[1].offset = 1; /* overlaps the first */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample(type, &m);
	m.u.resume.r[0].offset = 9u << 20; /* not ascending */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample(type, &m);
	m.u.resume.r[1].offset = UINT64_MAX - 10; /* past 2^64 */
	m.u.resume.r[1].len = 11;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.resume.r[1].len = 10; /* ends exactly at 2^64 - 1 */
	assert_int_equal(encode_decode_rc(&m), 0);
}

static void test_bad_resume(void **state)
{
	(void)state;
	bad_ranges(MSG_RESUME);
}

/* ZEROS: empty, overlapping, unordered or overflowing ranges refused by the decoder. */
static void test_bad_zeros(void **state)
{
	(void)state;
	bad_ranges(MSG_ZEROS);
}

/* A DELTA SAME: two ranges, as ZEROS' sample. */
static void sample_delta_same(struct msg *m)
{
	*m = (struct msg){ .type = MSG_DELTA };
	m->u.delta.id = 12;
	m->u.delta.kind = PROTO_DELTA_SAME;
	m->u.delta.count = 2;
	m->u.delta.r[0] = (struct proto_range){ .offset = 1u << 20, .len = 4u << 20 };
	m->u.delta.r[1] = (struct proto_range){ .offset = 8u << 20, .len = 777 };
}

/* DELTA: both kinds round-trip; a bad kind, count, flag or range is refused. */
static void test_delta(void **state)
{
	static const uint8_t zero16[PROTO_HASH_LEN];
	struct msg m, *d;
	struct wbuf w;
	uint8_t *p;
	size_t len;

	(void)state;
	sample_delta_same(&m);
	d = calloc(1, sizeof(*d));
	assert_non_null(d);
	len = encode_ok(&m);
	assert_int_equal(msg_decode(MSG_DELTA, payload(), len, d), 0);
	assert_int_equal(d->u.delta.kind, PROTO_DELTA_SAME);
	assert_int_equal(d->u.delta.count, 2);
	assert_true(d->u.delta.r[1].offset == 8u << 20 && d->u.delta.r[1].len == 777);
	msg_clear(d);
	free(d);
	/* SAME ranges: the checks RESUME's have. */
	sample_delta_same(&m);
	m.u.delta.r[1].len = 0;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_delta_same(&m);
	m.u.delta.r[1].offset = 1; /* overlaps */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_delta_same(&m);
	m.u.delta.r[1].offset = UINT64_MAX - 10;
	m.u.delta.r[1].len = 11;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_delta_same(&m);
	m.u.delta.count = PROTO_MAX_RESUME_RANGES + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	/* No count, no kind, an unknown kind: the encoder refuses them... */
	sample(MSG_DELTA, &m);
	m.u.delta.count = 0;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	sample(MSG_DELTA, &m);
	m.u.delta.count = PROTO_MAX_DELTA_SUMS + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	sample(MSG_DELTA, &m);
	m.u.delta.kind = 3;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	sample(MSG_DELTA, &m);
	m.u.delta.flags = 2;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	/* TREE: in SUMS, round trip; never in SAME. */
	sample(MSG_DELTA, &m);
	m.u.delta.flags = PROTO_DELTA_TREE;
	d = calloc(1, sizeof(*d));
	assert_non_null(d);
	len = encode_ok(&m);
	assert_int_equal(msg_decode(MSG_DELTA, payload(), len, d), 0);
	assert_int_equal(d->u.delta.flags, PROTO_DELTA_TREE);
	free(d);
	sample_delta_same(&m);
	m.u.delta.flags = PROTO_DELTA_TREE;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	len = encode_ok(&(struct msg){ .type = MSG_DELTA,
				       .u.delta = { .id = 1,
						    .kind = PROTO_DELTA_SAME,
						    .count = 1,
						    .r = { { .offset = 0, .len = 1 } } } });
	payload()[5] = PROTO_DELTA_TREE;
	assert_int_equal(decode_rc(MSG_DELTA, payload(), len), -EBADMSG);
	/* ... and the decoder too, written by hand. */
	sample(MSG_DELTA, &m);
	len = encode_ok(&m);
	p = payload();
	p[4] = 3; /* kind */
	assert_int_equal(decode_rc(MSG_DELTA, p, len), -EBADMSG);
	p[4] = 0;
	assert_int_equal(decode_rc(MSG_DELTA, p, len), -EBADMSG);
	p[4] = PROTO_DELTA_SUMS;
	p[5] = 2; /* flags: an unknown one */
	assert_int_equal(decode_rc(MSG_DELTA, p, len), -EBADMSG);
	p[5] = PROTO_DELTA_TREE;
	assert_int_equal(decode_rc(MSG_DELTA, p, len), 0);
	p[5] = 0;
	assert_int_equal(decode_rc(MSG_DELTA, p, len), 0);
	assert_int_equal(decode_rc(MSG_DELTA, p, len - 1), -EBADMSG); /* a digest cut short */
	/* SUMS: count over the cap, or chunk indexes past PROTO_MAX_DELTA_CHUNKS. */
	wbuf_init(&w, payload(), PROTO_MAX_PAYLOAD);
	wbuf_put_u32(&w, 1);
	wbuf_put_u8(&w, PROTO_DELTA_SUMS);
	wbuf_put_u8(&w, 0);
	wbuf_put_u16(&w, PROTO_MAX_DELTA_SUMS + 1);
	wbuf_put_u64(&w, 0);
	for (size_t i = 0; i <= PROTO_MAX_DELTA_SUMS; i++) {
		wbuf_put_bytes(&w, zero16, PROTO_HASH_LEN);
	}
	assert_int_equal(decode_rc(MSG_DELTA, payload(), w.len), -EBADMSG);
	sample(MSG_DELTA, &m);
	m.u.delta.first = PROTO_MAX_DELTA_CHUNKS - 3;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.delta.first = PROTO_MAX_DELTA_CHUNKS - 2;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.delta.first = UINT64_MAX;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_resume),
		cmocka_unit_test(test_bad_zeros),
		cmocka_unit_test(test_delta),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
