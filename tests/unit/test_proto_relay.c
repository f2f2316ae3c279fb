/* SPDX-License-Identifier: MIT */
/*
 * Relay messages (proto/msg_relay.c): RELAY's hops and tickets, and
 * RELAY_RESULT's fields, each at and one past its limit.
 * Shared samples and checks: proto_testlib.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_testlib.h"

/* Counts: 0..16 hops, not 0 hops with no self ticket; the count checked against the bytes. */
static void relay_counts(void **state)
{
	struct proto_relay_hop hops[PROTO_MAX_RELAY_HOPS + 1];
	struct msg m;

	(void)state;
	for (size_t i = 0; i <= PROTO_MAX_RELAY_HOPS; i++) {
		hops[i] = s_hops[i % 2];
		hops[i].port = (uint16_t)(1000 + i); /* no destination twice */
	}
	sample(MSG_RELAY, &m);
	m.u.relay.hops = hops;
	m.u.relay.count = PROTO_MAX_RELAY_HOPS;
	round_trip(&m);
	m.u.relay.count = PROTO_MAX_RELAY_HOPS + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m.u.relay.count = 0; /* the last hop: only its own ticket */
	round_trip(&m);
	m.u.relay.self_ticket_len = 0; /* from the client with nothing after: malformed */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.relay.count = 1; /* from the client: no self ticket, a chain */
	round_trip(&m);

	/* A count the bytes cannot hold, and one hop cut short. */
	static const uint8_t short_count[] = { 0, 0, 0, 0, 16, 0, 1, 'h', 0, 1 };
	assert_int_equal(decode_rc(MSG_RELAY, short_count, sizeof(short_count)), -EBADMSG);
	size_t len = encode_ok(&m);
	for (size_t cut = 1; cut < len; cut++) {
		assert_int_equal(decode_rc(MSG_RELAY, payload(), len - cut), -EBADMSG);
	}
}

/* Each hop: a host 1..255 bytes, a port, a path 1..4096 bytes, a ticket 1..16 KiB. */
static void relay_hop_fields(void **state)
{
	struct proto_relay_hop hop;
	struct msg m;
	char empty[] = "";

	(void)state;
	sample(MSG_RELAY, &m);
	m.u.relay.hops = &hop;
	m.u.relay.count = 1;
	hop = s_hops[0];
	hop.host = repeat('h', PROTO_MAX_HOST);
	round_trip(&m);
	free(hop.host);
	hop.host = repeat('h', PROTO_MAX_HOST + 1);
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	free(hop.host);
	hop.host = empty;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	hop = s_hops[0];
	hop.port = 0;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	hop = s_hops[0];
	hop.path = empty;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	hop.path = repeat('p', PROTO_MAX_PATH);
	round_trip(&m);
	free(hop.path);
	hop = s_hops[0];
	hop.ticket_len = 0;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	hop.ticket = calloc(1, PROTO_MAX_RELAY_TICKET + 1);
	assert_non_null(hop.ticket);
	hop.ticket_len = PROTO_MAX_RELAY_TICKET;
	round_trip(&m);
	m.u.relay.self_ticket = hop.ticket;
	m.u.relay.self_ticket_len = PROTO_MAX_RELAY_TICKET;
	round_trip(&m);
	hop.ticket_len = PROTO_MAX_RELAY_TICKET + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	free(hop.ticket);
}

/* A ticket length over the cap on the wire is refused before anything is allocated. */
static void relay_ticket_over_cap(void **state)
{
	uint8_t p[8] = { 0 };

	(void)state;
	p[0] = 0;
	p[1] = 0;
	p[2] = 0x40; /* 16 KiB + 1 */
	p[3] = 0x01;
	assert_int_equal(decode_rc(MSG_RELAY, p, sizeof(p)), -EBADMSG);
	p[0] = 0xff; /* 4 GiB */
	assert_int_equal(decode_rc(MSG_RELAY, p, sizeof(p)), -EBADMSG);
}

/* RELAY_RESULT: index 1..16, status 1..4, reserved zero, a host, a text <= PROTO_MAX_TEXT. */
static void relay_result_fields(void **state)
{
	struct msg m;
	char empty[] = "";

	(void)state;
	sample(MSG_RELAY_RESULT, &m);
	round_trip(&m);
	assert_string_equal(proto_type_name(MSG_RELAY_RESULT), "RELAY_RESULT");
	assert_string_equal(proto_type_name(MSG_RELAY), "RELAY");
	m.u.relay_result.index = 0;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.relay_result.index = PROTO_MAX_RELAY_HOPS;
	round_trip(&m);
	m.u.relay_result.index = PROTO_MAX_RELAY_HOPS + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample(MSG_RELAY_RESULT, &m);
	m.u.relay_result.status = 0;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.relay_result.status = PROTO_RELAY_UNREACHED + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.relay_result.status = PROTO_RELAY_COPIED;
	m.u.relay_result.text = empty;
	round_trip(&m);
	m.u.relay_result.host = empty;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample(MSG_RELAY_RESULT, &m);
	m.u.relay_result.text = repeat('t', PROTO_MAX_TEXT);
	round_trip(&m);
	size_t len = encode_ok(&m);
	assert_int_equal(decode_last_string_grown(MSG_RELAY_RESULT, payload(), len, PROTO_MAX_TEXT),
			 -EBADMSG);
	free(m.u.relay_result.text);
	sample(MSG_RELAY_RESULT, &m);
	len = encode_ok(&m);
	payload()[3] = 1; /* the reserved byte */
	assert_int_equal(decode_rc(MSG_RELAY_RESULT, payload(), len), -EBADMSG);
	assert_true((PROTO_CAPS_KNOWN & PROTO_CAP_RELAY) != 0);
}

/* The tree trailer: fan-out 2..16 round-trips; 0, 1, 17 and reserved bytes are refused. */
static void relay_tree_trailer(void **state)
{
	struct msg m;
	size_t len;

	(void)state;
	sample(MSG_RELAY, &m);
	len = encode_ok(&m); /* a chain: no trailer */
	m.u.relay.fanout = 1;
	assert_int_equal(encode_ok(&m), len);
	for (unsigned k = 2; k <= PROTO_MAX_RELAY_FANOUT; k++) {
		m.u.relay.fanout = (uint8_t)k;
		assert_int_equal(encode_ok(&m), len + 4);
		round_trip(&m);
	}
	m.u.relay.fanout = PROTO_MAX_RELAY_FANOUT + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);

	/* Hostile trailers, written by hand after a good chain. */
	static const uint8_t bad[][4] = {
		{ 0, 0, 0, 0 }, { 1, 0, 0, 0 }, { 17, 0, 0, 0 }, { 255, 0, 0, 0 },
		{ 2, 1, 0, 0 }, { 2, 0, 0, 1 }, { 2, 0, 1, 0 },
	};
	m.u.relay.fanout = 0;
	len = encode_ok(&m);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(payload() + len, bad[i], 4);
		assert_int_equal(decode_rc(MSG_RELAY, payload(), len + 4), -EBADMSG);
	}
	/* A trailer cut short, or with bytes after it. */
	static const uint8_t good[5] = { 2, 0, 0, 0, 0 };
	memcpy(payload() + len, good, sizeof(good));
	for (size_t cut = 1; cut < 4; cut++) {
		assert_int_equal(decode_rc(MSG_RELAY, payload(), len + cut), -EBADMSG);
	}
	assert_int_equal(decode_rc(MSG_RELAY, payload(), len + 5), -EBADMSG);
	assert_int_equal(decode_rc(MSG_RELAY, payload(), len + 4), 0);
	assert_true((PROTO_CAPS_KNOWN & PROTO_CAP_RELAY_TREE) != 0);
}

/* No destination twice (a loop): the same host (in any case), port and path ('/' at its end aside). */
static void relay_repeats(void **state)
{
	struct proto_relay_hop hops[3];
	char upper[] = "NODE2.example", slash[] = "data/in/set/", other[] = "data/in";
	struct msg m;

	(void)state;
	sample(MSG_RELAY, &m);
	m.u.relay.hops = hops;
	m.u.relay.count = 3;
	hops[0] = s_hops[0];
	hops[1] = s_hops[1];
	hops[2] = s_hops[0];
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	hops[2].host = upper;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	hops[2].path = slash;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.relay.fanout = 2; /* a tree is no excuse */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	hops[2].path = other; /* another module path on the same host: fine */
	round_trip(&m);
	hops[2] = s_hops[0];
	hops[2].port = 7778; /* another daemon on the same host: fine */
	round_trip(&m);
	assert_true(proto_relay_same_dest("a", 1, "m/x//", "A", 1, "m/x"));
	assert_false(proto_relay_same_dest("a", 1, "m/x", "a", 1, "m/xy"));
	assert_false(proto_relay_same_dest("a", 1, "m/x", "b", 1, "m/x"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(relay_counts),		 cmocka_unit_test(relay_tree_trailer),
		cmocka_unit_test(relay_repeats),	 cmocka_unit_test(relay_hop_fields),
		cmocka_unit_test(relay_ticket_over_cap), cmocka_unit_test(relay_result_fields),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
