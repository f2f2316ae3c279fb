/* SPDX-License-Identifier: MIT */
/*
 * Session set-up messages (proto/msg_session.c): HELLO, OPEN, OPEN_OK
 * and its daemon rails, BENCH, a pull's FILTER; every field checked at
 * and past its edges.
 * Shared samples and checks: proto_testlib.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_testlib.h"

/* FILTER rules written with no checks: count, then (action, pattern) each. */
static size_t filter_raw(uint8_t *buf, size_t cap, uint16_t count, uint8_t action,
			 const char *pattern)
{
	struct wbuf w;

	wbuf_init(&w, buf, cap);
	wbuf_put_u16(&w, count);
	for (size_t i = 0; i < count; i++) {
		wbuf_put_u8(&w, action);
		wbuf_put_str16(&w, pattern, UINT16_MAX);
	}
	assert_false(w.overflow);
	return w.len;
}

/* FILTER: the decoder's checks, each on a message otherwise good. */
static void test_filter_checks(void **state)
{
	size_t cap = PROTO_MAX_PAYLOAD;
	uint8_t *buf = malloc(cap);
	char *big = repeat('p', PROTO_MAX_PATH + 1);
	struct msg m;
	size_t len;

	(void)state;
	assert_non_null(buf);
	len = filter_raw(buf, cap, 1, PROTO_FILTER_EXCLUDE, "*.o");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), 0);
	len = filter_raw(buf, cap, 1, PROTO_FILTER_INCLUDE, "*.o");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), 0);
	/* An unknown action, an empty pattern, no rules at all. */
	for (uint8_t a = 0; a < 8; a++) {
		len = filter_raw(buf, cap, 1, a, "x");
		assert_int_equal(decode_rc(MSG_FILTER, buf, len),
				 a == PROTO_FILTER_INCLUDE || a == PROTO_FILTER_EXCLUDE ? 0
											: -EBADMSG);
	}
	len = filter_raw(buf, cap, 1, PROTO_FILTER_EXCLUDE, "");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	len = filter_raw(buf, cap, 0, PROTO_FILTER_EXCLUDE, "x");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	/* A pattern over PROTO_MAX_PATH; one at it is fine. */
	len = filter_raw(buf, cap, 1, PROTO_FILTER_EXCLUDE, big);
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	len = filter_raw(buf, cap, 1, PROTO_FILTER_EXCLUDE, big + 1);
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), 0);
	/* The count cap, and a count the payload can't hold (before any allocation). */
	len = filter_raw(buf, cap, PROTO_MAX_FILTERS, PROTO_FILTER_EXCLUDE, "a");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), 0);
	len = filter_raw(buf, cap, PROTO_MAX_FILTERS + 1, PROTO_FILTER_EXCLUDE, "a");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	len = filter_raw(buf, cap, 2, PROTO_FILTER_EXCLUDE, "a");
	buf[1] = 200;
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	/* The byte cap: 64 patterns of PROTO_MAX_PATH fill it, 65 are over. */
	len = filter_raw(buf, cap, 64, PROTO_FILTER_EXCLUDE, big + 1);
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), 0);
	len = filter_raw(buf, cap, 65, PROTO_FILTER_EXCLUDE, big + 1);
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	/* Trailing bytes, a cut message, a NUL in a pattern. */
	len = filter_raw(buf, cap, 1, PROTO_FILTER_EXCLUDE, "ab");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len + 1), -EBADMSG);
	assert_int_equal(decode_rc(MSG_FILTER, buf, len - 1), -EBADMSG);
	buf[len - 1] = '\0';
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	/* The encoder refuses more rules than the cap. */
	m = (struct msg){ .type = MSG_FILTER,
			  .u.filter = { .count = PROTO_MAX_FILTERS + 1, .rules = s_rules } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	free(big);
	free(buf);
}

static void test_bad_hello(void **state)
{
	struct msg m;

	(void)state;
	sample(MSG_HELLO, &m);
	m.u.hello.min_version = 2;
	m.u.hello.max_version = 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
}

#define BAD_OPEN(field, value)                                    \
	do {                                                      \
		sample(MSG_OPEN, &m);                             \
		m.u.open.field = (value);                         \
		assert_int_equal(encode_decode_rc(&m), -EBADMSG); \
	} while (0)

/* Each field out of its range, each unknown flag. */
static void bad_open_fields(void)
{
	struct msg m;

	BAD_OPEN(direction, 0);
	BAD_OPEN(direction, 3);
	BAD_OPEN(transport, 3);
	BAD_OPEN(lanes, 0);
	BAD_OPEN(lanes, PROTO_MAX_LANES + 1);
	BAD_OPEN(chunk_size, 0);
	BAD_OPEN(chunk_size, PROTO_MIN_CHUNK / 2);
	BAD_OPEN(chunk_size, PROTO_MIN_CHUNK + 1);
	BAD_OPEN(chunk_size, 3 * PROTO_MIN_CHUNK);
	BAD_OPEN(chunk_size, PROTO_MAX_CHUNK * 2);
	BAD_OPEN(chunk_size, 1u << 31);
	BAD_OPEN(slots, 0);
	BAD_OPEN(slots, PROTO_MAX_SLOTS + 1);
	for (unsigned bit = 7; bit < 32; bit++) {
		if (PROTO_OPEN_FLAGS_KNOWN & (1u << bit)) {
			continue;
		}
		BAD_OPEN(flags, (PROTO_OPEN_FLAGS_KNOWN & ~PROTO_OPEN_SKIP_EXISTS &
				 ~PROTO_OPEN_SKIP_CHECKSUM & ~PROTO_OPEN_DELETE) |
				    (1u << bit));
	}
}

static void bad_open_delete(void)
{
	struct msg m;

	/*
	 * DELETE: a recursive push's (a dry run's too: a probe), a pull's only
	 * in a dry run (a probe, the client receives), never without RECURSIVE.
	 */
	sample_open_delete(&m);
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.open.direction = PROTO_DIR_PULL;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.open.flags |= PROTO_OPEN_DRY_RUN;
	assert_int_equal(encode_decode_rc(&m), 0);
	assert_true(proto_open_is_probe(m.u.open.flags));
	sample_open_delete(&m);
	m.u.open.flags &= ~PROTO_OPEN_RECURSIVE;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.open.flags |= PROTO_OPEN_DRY_RUN;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_open_delete(&m);
	m.u.open.flags |= PROTO_OPEN_DRY_RUN;
	assert_int_equal(encode_decode_rc(&m), 0);
	assert_true(proto_open_is_probe(m.u.open.flags));
	/* A probe is a dry run with a skip level or DELETE; a plain dry run is not one. */
	assert_false(proto_open_is_probe(PROTO_OPEN_DRY_RUN | PROTO_OPEN_RECURSIVE));
	assert_false(proto_open_is_probe(PROTO_OPEN_SKIP_QUICK | PROTO_OPEN_DELETE));
	assert_true(proto_open_is_probe(PROTO_OPEN_DRY_RUN | PROTO_OPEN_SKIP_CHECKSUM));
}

static void bad_open_push_flags(void)
{
	struct msg m;

	/* ASSUME_ZERO: a push's only (a pull's receiver is the client, which applies it). */
	sample(MSG_OPEN, &m);
	assert_true(m.u.open.flags & PROTO_OPEN_ASSUME_ZERO);
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.open.direction = PROTO_DIR_PULL;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.open.flags |= PROTO_OPEN_DRY_RUN;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.open.flags &= ~PROTO_OPEN_ASSUME_ZERO;
	assert_int_equal(encode_decode_rc(&m), 0);
	assert_true(PROTO_CAPS_KNOWN & PROTO_CAP_ASSUME_ZERO);
	/* WRITE + SEND: a flag any OPEN may carry (the daemon checks the capability). */
	m.u.open.flags |= PROTO_OPEN_WRITE_SEND;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.open.direction = PROTO_DIR_PUSH;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.open.flags &= ~PROTO_OPEN_WRITE_SEND;
	assert_true(PROTO_CAPS_KNOWN & PROTO_CAP_WRITE_SEND);
	assert_true(PROTO_OPEN_FLAGS_KNOWN & PROTO_OPEN_WRITE_SEND);
}

/* The bytes after the path (max_delete, the wish byte) and the reserved byte. */
static void bad_open_bytes(void)
{
	struct msg m;
	size_t len;

	/* Its max_delete cut short, or missing. */
	sample_open_delete(&m);
	len = encode_ok(&m);
	for (size_t cut = len - 8; cut < len; cut++) {
		assert_int_equal(decode_rc(MSG_OPEN, payload(), cut), -EBADMSG);
	}
	/* Two skip levels at once. */
	BAD_OPEN(flags, PROTO_OPEN_SKIP_EXISTS | PROTO_OPEN_SKIP_QUICK);
	BAD_OPEN(flags, PROTO_OPEN_SKIP_EXISTS | PROTO_OPEN_SKIP_CHECKSUM);
	BAD_OPEN(flags, PROTO_OPEN_SKIP_QUICK | PROTO_OPEN_SKIP_CHECKSUM);
	BAD_OPEN(flags, PROTO_OPEN_SKIP_LEVELS);
	/* ENCRYPT's wish byte: known values only, and there. */
	BAD_OPEN(encrypt, 0);
	BAD_OPEN(encrypt, 3);
	sample(MSG_OPEN, &m);
	len = encode_ok(&m);
	assert_int_equal(decode_rc(MSG_OPEN, payload(), len - 1), -EBADMSG);
	/* Without the flag there is no wish byte, and a stray byte is refused. */
	sample(MSG_OPEN, &m);
	m.u.open.flags &= ~PROTO_OPEN_ENCRYPT;
	m.u.open.encrypt = 0;
	assert_int_equal(encode_decode_rc(&m), 0);
	len = encode_ok(&m);
	payload()[len] = PROTO_ENCRYPT_PREFER;
	assert_int_equal(decode_rc(MSG_OPEN, payload(), len + 1), -EBADMSG);
	/* The reserved byte after lanes. */
	sample(MSG_OPEN, &m);
	len = encode_ok(&m);
	payload()[3] = 1;
	assert_int_equal(decode_rc(MSG_OPEN, payload(), len), -EBADMSG);
}
#undef BAD_OPEN

static void test_bad_open(void **state)
{
	(void)state;
	bad_open_fields();
	bad_open_delete();
	bad_open_push_flags();
	bad_open_bytes();
}

/* BENCH: every field at its edges; each out of range, and the reserved bytes, refused. */
static void test_bench(void **state)
{
	struct msg m;
	size_t len;

	(void)state;
	sample(MSG_BENCH, &m);
	m.u.bench.transport = 0;
	m.u.bench.lanes = PROTO_MAX_LANES;
	m.u.bench.chunk_size = PROTO_MAX_CHUNK;
	m.u.bench.slots = PROTO_MAX_SLOTS;
	m.u.bench.bytes = PROTO_BENCH_MAX_BYTES;
	round_trip(&m);
	m.u.bench.transport = 2;
	m.u.bench.lanes = 1;
	m.u.bench.chunk_size = PROTO_MIN_CHUNK;
	m.u.bench.slots = 1;
	m.u.bench.bytes = 1;
	m.u.bench.seed = 0;
	round_trip(&m);
#define BAD_BENCH(field, value)                                   \
	do {                                                      \
		sample(MSG_BENCH, &m);                            \
		m.u.bench.field = (value);                        \
		assert_int_equal(encode_decode_rc(&m), -EBADMSG); \
	} while (0)
	BAD_BENCH(transport, 3);
	BAD_BENCH(lanes, 0);
	BAD_BENCH(lanes, PROTO_MAX_LANES + 1);
	BAD_BENCH(chunk_size, 0);
	BAD_BENCH(chunk_size, PROTO_MIN_CHUNK + 1);
	BAD_BENCH(chunk_size, PROTO_MAX_CHUNK * 2);
	BAD_BENCH(slots, 0);
	BAD_BENCH(slots, PROTO_MAX_SLOTS + 1);
	BAD_BENCH(bytes, 0);
	BAD_BENCH(bytes, PROTO_BENCH_MAX_BYTES + 1);
#undef BAD_BENCH
	/* The encrypt byte: a wish (1 prefer, 2 require) or 0; the byte after it reserved. */
	for (uint8_t w = 0; w <= PROTO_ENCRYPT_REQUIRE; w++) {
		sample(MSG_BENCH, &m);
		m.u.bench.encrypt = w;
		round_trip(&m);
	}
	sample(MSG_BENCH, &m);
	len = encode_ok(&m);
	payload()[2] = PROTO_ENCRYPT_REQUIRE + 1;
	assert_int_equal(decode_rc(MSG_BENCH, payload(), len), -EBADMSG);
	sample(MSG_BENCH, &m);
	len = encode_ok(&m);
	payload()[3] = 1;
	assert_int_equal(decode_rc(MSG_BENCH, payload(), len), -EBADMSG);
	/* Short by one byte, one byte too many. */
	sample(MSG_BENCH, &m);
	len = encode_ok(&m);
	assert_int_equal(len, 28);
	assert_int_equal(decode_rc(MSG_BENCH, payload(), len - 1), -EBADMSG);
	assert_int_equal(decode_rc(MSG_BENCH, payload(), len + 1), -EBADMSG);
}

static void test_bad_open_ok(void **state)
{
	struct msg m;
	size_t len;

	(void)state;
#define BAD_OPEN_OK(field, value)                                 \
	do {                                                      \
		sample(MSG_OPEN_OK, &m);                          \
		m.u.open_ok.field = (value);                      \
		assert_int_equal(encode_decode_rc(&m), -EBADMSG); \
	} while (0)
	BAD_OPEN_OK(data_port, 0);
	BAD_OPEN_OK(transport, 0);
	BAD_OPEN_OK(transport, 3);
	BAD_OPEN_OK(lanes, 0);
	BAD_OPEN_OK(lanes, PROTO_MAX_LANES + 1);
	BAD_OPEN_OK(chunk_size, 0);
	BAD_OPEN_OK(chunk_size, PROTO_MIN_CHUNK + PROTO_MIN_CHUNK / 2);
	BAD_OPEN_OK(chunk_size, PROTO_MAX_CHUNK * 2);
	BAD_OPEN_OK(slots, 0);
	BAD_OPEN_OK(slots, PROTO_MAX_SLOTS + 1);
	BAD_OPEN_OK(lanes_sealed, PROTO_LANES_MAX + 1);
#undef BAD_OPEN_OK
	/* The lanes byte: absent for an OPEN without ENCRYPT (what older clients parse), one byte. */
	sample(MSG_OPEN_OK, &m);
	m.u.open_ok.lanes_sealed = 0;
	assert_int_equal(encode_decode_rc(&m), 0);
	sample(MSG_OPEN_OK, &m);
	m.u.open_ok.lanes_sealed = PROTO_LANES_CLEAR;
	assert_int_equal(encode_decode_rc(&m), 0);
	len = encode_ok(&m);
	payload()[len] = PROTO_LANES_CLEAR;
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len + 1), -EBADMSG);
}

/* Daemon rails: the lanes byte, then the count and the addresses; every cut or bad field refused. */
static void test_open_ok_rails(void **state)
{
	struct msg m, back;
	size_t len, base;

	(void)state;
	sample(MSG_OPEN_OK, &m);
	m.u.open_ok.lanes_sealed = 0;
	base = encode_ok(&m);
	m.u.open_ok.nrails = 2;
	m.u.open_ok.rails[0] = (struct proto_rail){ .family = PROTO_RAIL_INET,
						    .addr = { 10, 0, 0, 1 },
						    .port = 40002 };
	m.u.open_ok.rails[1] = (struct proto_rail){ .family = PROTO_RAIL_INET6, .port = 40003 };
	m.u.open_ok.rails[1].addr[15] = 1;
	len = encode_ok(&m);
	/* lanes byte (clear: not asked), count, 1 + 4 + 2, 1 + 16 + 2 */
	assert_int_equal(len, base + 1 + 1 + 7 + 19);
	assert_int_equal(payload()[base], PROTO_LANES_CLEAR);
	assert_int_equal(decode_copy(MSG_OPEN_OK, payload(), len, &back), 0);
	assert_int_equal(back.u.open_ok.lanes_sealed, PROTO_LANES_CLEAR);
	assert_int_equal(back.u.open_ok.nrails, 2);
	for (unsigned i = 0; i < 2; i++) {
		assert_int_equal(back.u.open_ok.rails[i].family, m.u.open_ok.rails[i].family);
		assert_int_equal(back.u.open_ok.rails[i].port, m.u.open_ok.rails[i].port);
		assert_memory_equal(back.u.open_ok.rails[i].addr, m.u.open_ok.rails[i].addr, 16);
	}
	msg_clear(&back);
	/* Cut anywhere inside the rails (the count included): refused. */
	for (size_t cut = base + 2; cut < len; cut++) {
		assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), cut), -EBADMSG);
	}
	/* A sealed lanes byte stays what it was. */
	m.u.open_ok.lanes_sealed = PROTO_LANES_SEALED;
	len = encode_ok(&m);
	assert_int_equal(decode_copy(MSG_OPEN_OK, payload(), len, &back), 0);
	assert_int_equal(back.u.open_ok.lanes_sealed, PROTO_LANES_SEALED);
	msg_clear(&back);
	/* Bad family, port 0, count 0 or beyond PROTO_MAX_RAILS, trailing bytes. */
	m.u.open_ok.rails[1].family = 5;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.open_ok.rails[1].family = PROTO_RAIL_INET6;
	m.u.open_ok.rails[0].port = 0;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.open_ok.rails[0].port = 1;
	len = encode_ok(&m);
	payload()[base + 1] = 0;
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len), -EBADMSG);
	payload()[base + 1] = PROTO_MAX_RAILS + 1;
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len), -EBADMSG);
	payload()[base + 1] = 2;
	payload()[len] = 0;
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len), 0);
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len + 1), -EBADMSG);
	/* The encoder refuses more than PROTO_MAX_RAILS. */
	m.u.open_ok.nrails = PROTO_MAX_RAILS + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EINVAL);
}

/* Rails only: the flags byte after the rails, sent only when set; unknown bits refused. */
static void test_open_ok_rails_flags(void **state)
{
	struct msg m, back;
	size_t len, plain;

	(void)state;
	sample(MSG_OPEN_OK, &m);
	m.u.open_ok.nrails = 1;
	m.u.open_ok.rails[0] = (struct proto_rail){ .family = PROTO_RAIL_INET,
						    .addr = { 10, 0, 0, 2 },
						    .port = 40002 };
	plain = encode_ok(&m);
	m.u.open_ok.rails_flags = PROTO_RAILS_UNREACHED;
	len = encode_ok(&m);
	assert_int_equal(len, plain + 1);
	assert_int_equal(payload()[len - 1], PROTO_RAILS_UNREACHED);
	assert_int_equal(decode_copy(MSG_OPEN_OK, payload(), len, &back), 0);
	assert_int_equal(back.u.open_ok.rails_flags, PROTO_RAILS_UNREACHED);
	assert_int_equal(back.u.open_ok.nrails, 1);
	msg_clear(&back);
	/* Without the byte: no flags. */
	assert_int_equal(decode_copy(MSG_OPEN_OK, payload(), plain, &back), 0);
	assert_int_equal(back.u.open_ok.rails_flags, 0);
	msg_clear(&back);
	/* A zero or unknown flag, or a byte after it: refused. */
	payload()[len - 1] = 0;
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len), -EBADMSG);
	payload()[len - 1] = 2;
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len), -EBADMSG);
	payload()[len - 1] = PROTO_RAILS_UNREACHED;
	payload()[len] = 0;
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len + 1), -EBADMSG);
	/* The encoder refuses unknown bits. */
	m.u.open_ok.rails_flags = 0x80;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_hello),	    cmocka_unit_test(test_bad_open),
		cmocka_unit_test(test_bad_open_ok),	    cmocka_unit_test(test_open_ok_rails),
		cmocka_unit_test(test_open_ok_rails_flags), cmocka_unit_test(test_bench),
		cmocka_unit_test(test_filter_checks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
