/* SPDX-License-Identifier: MIT */
/*
 * Control-message framing and dispatch (proto/msg.c): header checks, a
 * round trip of every message type, every truncation and trailing byte,
 * string fields at and one past their caps and with a NUL inside, the
 * frame's payload cap, the encoder's refusals (SECURITY.md A1-A5, A9).
 * Shared samples and checks: proto_testlib.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_testlib.h"

static void test_hdr_round_trip(void **state)
{
	uint8_t h[PROTO_HDR_LEN];
	const uint8_t expect[PROTO_HDR_LEN] = { 0x52, 0x44, 0x4d, 0x43, 1, 0, 0, 6,
						0,    0,    0,	  0,	0, 1, 2, 3 };
	struct proto_hdr d;

	(void)state;
	proto_hdr_encode(MSG_FILES, 0x10203, h);
	assert_memory_equal(h, expect, sizeof(h));
	assert_int_equal(proto_hdr_decode(h, &d), 0);
	assert_int_equal(d.version, 1);
	assert_int_equal(d.type, MSG_FILES);
	assert_int_equal(d.flags, 0);
	assert_int_equal(d.length, 0x10203);

	for (uint16_t t = 1; t <= MSG_TYPE_MAX; t++) {
		if (!type_defined(t)) {
			proto_hdr_encode(t, 0, h);
			assert_int_equal(proto_hdr_decode(h, &d), -ENOMSG);
			continue;
		}
		proto_hdr_encode(t, 0, h);
		assert_int_equal(proto_hdr_decode(h, &d), 0);
		assert_int_equal(d.type, t);
	}
	assert_true(type_defined(MSG_ENTRY_FAILED) && type_defined(MSG_XATTRS));
	assert_string_equal(proto_type_name(0), "UNKNOWN");
	assert_string_equal(proto_type_name(MSG_TYPE_MAX + 1), "UNKNOWN");
	assert_string_equal(proto_err_name(PERR_VERSION), "VERSION_MISMATCH");
	assert_string_equal(proto_err_name(PERR_MAX + 1), "UNKNOWN");
}

static void test_hdr_bad_fields(void **state)
{
	uint8_t h[PROTO_HDR_LEN];
	struct proto_hdr d;

	(void)state;
	/* Any byte of the magic wrong. */
	for (size_t i = 0; i < 4; i++) {
		proto_hdr_encode(MSG_PING, 8, h);
		h[i] ^= 0x01;
		assert_int_equal(proto_hdr_decode(h, &d), -EBADMSG);
	}
	/* Version 0 and 2 (and 255) are not spoken. */
	for (unsigned v = 0; v < 256; v++) {
		proto_hdr_encode(MSG_PING, 8, h);
		h[4] = (uint8_t)v;
		assert_int_equal(proto_hdr_decode(h, &d),
				 v == PROTO_VERSION ? 0 : -EPROTONOSUPPORT);
	}
	/* Reserved u8, reserved u16 and every flag bit. */
	for (unsigned bit = 0; bit < 8; bit++) {
		proto_hdr_encode(MSG_PING, 8, h);
		h[5] = (uint8_t)(1u << bit);
		assert_int_equal(proto_hdr_decode(h, &d), -EBADMSG);
	}
	for (unsigned bit = 0; bit < 16; bit++) {
		proto_hdr_encode(MSG_PING, 8, h);
		h[8 + (bit / 8)] = (uint8_t)(1u << (bit % 8));
		assert_int_equal(proto_hdr_decode(h, &d), -EBADMSG);
		proto_hdr_encode(MSG_PING, 8, h);
		h[10 + (bit / 8)] = (uint8_t)(1u << (bit % 8));
		assert_int_equal(proto_hdr_decode(h, &d), -EBADMSG);
	}
}

static void test_hdr_length_and_type(void **state)
{
	uint8_t h[PROTO_HDR_LEN];
	struct proto_hdr d;

	(void)state;
	proto_hdr_encode(MSG_FILES, PROTO_MAX_PAYLOAD, h);
	assert_int_equal(proto_hdr_decode(h, &d), 0);
	assert_int_equal(d.length, PROTO_MAX_PAYLOAD);
	proto_hdr_encode(MSG_FILES, PROTO_MAX_PAYLOAD + 1, h);
	assert_int_equal(proto_hdr_decode(h, &d), -EMSGSIZE);
	proto_hdr_encode(MSG_FILES, UINT32_MAX, h);
	assert_int_equal(proto_hdr_decode(h, &d), -EMSGSIZE);

	proto_hdr_encode(0, 0, h);
	assert_int_equal(proto_hdr_decode(h, &d), -ENOMSG);
	proto_hdr_encode(MSG_TYPE_MAX + 1, 0, h);
	assert_int_equal(proto_hdr_decode(h, &d), -ENOMSG);
	assert_int_equal(d.type, MSG_TYPE_MAX + 1); /* reported for the error reply */
	proto_hdr_encode(UINT16_MAX, 0, h);
	assert_int_equal(proto_hdr_decode(h, &d), -ENOMSG);
}

static void test_round_trip_every_type(void **state)
{
	struct msg m;

	(void)state;
	for (uint16_t t = 1; t <= N_TYPES; t++) {
		if (!type_defined(t)) {
			continue;
		}
		sample(t, &m);
		round_trip(&m);
	}
	/* FILES and FILES_ACK with no entries are valid; GET with none is not. */
	m = (struct msg){ .type = MSG_FILES };
	round_trip(&m);
	m = (struct msg){ .type = MSG_FILES_ACK };
	round_trip(&m);
	/* An empty LIST path asks for the modules; a MODULES batch may be empty. */
	m = (struct msg){ .type = MSG_LIST };
	round_trip(&m);
	m = (struct msg){ .type = MSG_MODULES };
	round_trip(&m);
	/* An empty DELETED: still looking; SUPPRESSED: nothing looked at. */
	m = (struct msg){ .type = MSG_DELETED };
	round_trip(&m);
	m = (struct msg){ .type = MSG_DELETED, .u.deleted.flags = PROTO_DELETED_SUPPRESSED };
	round_trip(&m);
	/* With DELETE, OPEN carries max_delete (any value, "none" too). */
	sample_open_delete(&m);
	round_trip(&m);
	m.u.open.max_delete = PROTO_NO_MAX_DELETE;
	round_trip(&m);
	m.u.open.max_delete = 0;
	round_trip(&m);
}

static void test_round_trip_edges(void **state)
{
	struct msg m;

	(void)state;
	/* Every limit exactly at its edge is accepted. */
	sample(MSG_OPEN, &m);
	m.u.open.direction = PROTO_DIR_PULL;
	m.u.open.flags &= ~PROTO_OPEN_ASSUME_ZERO; /* a push's only */
	m.u.open.transport = 0;
	m.u.open.lanes = PROTO_MAX_LANES;
	m.u.open.chunk_size = PROTO_MAX_CHUNK;
	m.u.open.slots = PROTO_MAX_SLOTS;
	round_trip(&m);
	m.u.open.lanes = 1;
	m.u.open.chunk_size = PROTO_MIN_CHUNK;
	m.u.open.slots = 1;
	m.u.open.flags = 0;
	round_trip(&m);

	sample(MSG_OPEN_OK, &m);
	m.u.open_ok.transport = 1;
	m.u.open_ok.lanes = PROTO_MAX_LANES;
	m.u.open_ok.data_port = UINT16_MAX;
	m.u.open_ok.chunk_size = PROTO_MAX_CHUNK;
	m.u.open_ok.slots = PROTO_MAX_SLOTS;
	round_trip(&m);

	sample(MSG_RING, &m);
	m.u.ring.slots = PROTO_MAX_SLOTS;
	m.u.ring.slot_size = PROTO_MAX_CHUNK;
	m.u.ring.addr = UINT64_MAX - (uint64_t)PROTO_MAX_SLOTS * PROTO_MAX_CHUNK;
	m.u.ring.desc_addr = UINT64_MAX - (uint64_t)PROTO_MAX_SLOTS * PROTO_DESC_LEN;
	round_trip(&m);

	sample(MSG_HELLO, &m);
	m.u.hello.min_version = m.u.hello.max_version = 7;
	round_trip(&m);

	sample(MSG_FILE_DONE, &m);
	m.u.file_done.status = PERR_MAX;
	round_trip(&m);
	sample(MSG_FILE_RESULT, &m);
	m.u.file_result.status = PERR_MAX;
	round_trip(&m);

	/* A regular file of INT64_MAX bytes, mode 07777, nsec just below 1e9. */
	{
		char name[] = "big";
		struct proto_file f = { .id = UINT32_MAX,
					.ftype = PROTO_FT_REG,
					.mode = 07777,
					.size = INT64_MAX,
					.mtime_sec = INT64_MIN,
					.mtime_nsec = 999999999,
					.uid = UINT32_MAX,
					.gid = UINT32_MAX,
					.name = name };

		m = (struct msg){ .type = MSG_FILES, .u.files = { .count = 1, .files = &f } };
		round_trip(&m);
	}
}

/* Strings exactly at their cap decode; one byte over is refused (A9, A1). */
static void test_string_caps(void **state)
{
	struct msg m;
	size_t len;
	char *text = repeat('t', PROTO_MAX_TEXT);
	char *path = repeat('p', PROTO_MAX_PATH);

	(void)state;
	sample(MSG_HELLO, &m);
	strcpy(m.u.hello.software, text);
	round_trip(&m);
	len = encode_ok(&m);
	assert_int_equal(decode_last_string_grown(MSG_HELLO, payload(), len, PROTO_MAX_TEXT),
			 -EBADMSG);

	sample(MSG_ERROR, &m);
	strcpy(m.u.error.text, text);
	round_trip(&m);
	len = encode_ok(&m);
	assert_int_equal(decode_last_string_grown(MSG_ERROR, payload(), len, PROTO_MAX_TEXT),
			 -EBADMSG);

	sample(MSG_OPEN, &m);
	strcpy(m.u.open.path, path);
	round_trip(&m);
	m.u.open.flags &= ~PROTO_OPEN_ENCRYPT; /* its wish byte would follow the path */
	len = encode_ok(&m);
	assert_int_equal(decode_last_string_grown(MSG_OPEN, payload(), len, PROTO_MAX_PATH),
			 -EBADMSG);

	sample(MSG_FILE_DONE, &m);
	strcpy(m.u.file_done.text, text);
	round_trip(&m);
	len = encode_ok(&m);
	assert_int_equal(decode_last_string_grown(MSG_FILE_DONE, payload(), len, PROTO_MAX_TEXT),
			 -EBADMSG);

	sample(MSG_FILE_RESULT, &m);
	strcpy(m.u.file_result.text, text);
	round_trip(&m);
	len = encode_ok(&m);
	assert_int_equal(decode_last_string_grown(MSG_FILE_RESULT, payload(), len, PROTO_MAX_TEXT),
			 -EBADMSG);

	{
		struct proto_status st = { .id = 1, .status = PERR_IO, .text = text };

		m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
		round_trip(&m);
		len = encode_ok(&m);
		assert_int_equal(
		    decode_last_string_grown(MSG_FILES_ACK, payload(), len, PROTO_MAX_TEXT),
		    -EBADMSG);
	}
	{
		m = (struct msg){ .type = MSG_GET, .u.get = { .count = 1, .paths = &path } };
		round_trip(&m);
		len = encode_ok(&m);
		assert_int_equal(decode_last_string_grown(MSG_GET, payload(), len, PROTO_MAX_PATH),
				 -EBADMSG);
	}
	{
		/* FILES: a symlink whose name and target are both at PROTO_MAX_PATH. */
		struct proto_file f = {
			.id = 1, .ftype = PROTO_FT_SYMLINK, .mode = 0777, .name = path, .link = path
		};
		char *over = repeat('o', PROTO_MAX_PATH + 1);

		m = (struct msg){ .type = MSG_FILES, .u.files = { .count = 1, .files = &f } };
		round_trip(&m);
		len = encode_ok(&m);
		assert_int_equal(
		    decode_last_string_grown(MSG_FILES, payload(), len, PROTO_MAX_PATH), -EBADMSG);
		/* The name (not the last field) over its cap. */
		f.name = over;
		assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
		f.name = path;
		assert_int_equal(decode_one_file_raw(&f), 0);
		free(over);
	}
	free(text);
	free(path);
}

/* The string length also must not run past the payload. */
static void test_string_longer_than_payload(void **state)
{
	struct msg m;
	size_t len;

	(void)state;
	sample(MSG_ERROR, &m);
	len = encode_ok(&m);
	/* Claim 2 more bytes than the text has, and supply only one. */
	payload()[5] = (uint8_t)(strlen(m.u.error.text) + 2);
	assert_int_equal(decode_rc(MSG_ERROR, payload(), len + 1), -EBADMSG);

	sample(MSG_GET, &m);
	len = encode_ok(&m);
	payload()[len - strlen(s_get1) - 1] = (uint8_t)(strlen(s_get1) + 1);
	assert_int_equal(decode_rc(MSG_GET, payload(), len), -EBADMSG);
}

/* Embedded NUL bytes would make a peer's name differ from what we check. */
static void test_embedded_nul(void **state)
{
	struct msg m;
	size_t len;
	uint16_t types[] = { MSG_HELLO,	      MSG_ERROR,     MSG_OPEN, MSG_FILE_DONE,
			     MSG_FILE_RESULT, MSG_FILES_ACK, MSG_GET,  MSG_FILES };

	(void)state;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		sample(types[i], &m);
		len = encode_ok(&m);
		assert_int_equal(decode_rc(types[i], payload(), len), 0);
		/* The last string in each sample is at least 2 bytes: put a NUL in its middle. */
		payload()[len - 2] = '\0';
		assert_int_equal(decode_rc(types[i], payload(), len), -EBADMSG);
	}
	/* A NUL in a FILES name (not the last string). */
	{
		char name[] = "a?b";
		struct proto_file f = { .id = 1, .ftype = PROTO_FT_REG, .name = name };
		uint8_t buf[128];
		struct wbuf w;

		wbuf_init(&w, buf, sizeof(buf));
		wbuf_put_u16(&w, 1);
		put_file_raw(&w, &f);
		assert_int_equal(decode_rc(MSG_FILES, buf, w.len), 0);
		buf[w.len - 2 - 2] = '\0'; /* the '?' (before the empty link's u16) */
		assert_int_equal(decode_rc(MSG_FILES, buf, w.len), -EBADMSG);
	}
}

static void test_truncated_every_byte(void **state)
{
	struct msg m;

	(void)state;
	for (uint16_t t = 1; t <= N_TYPES; t++) {
		size_t len;
		uint8_t *full;

		if (!type_defined(t)) {
			continue;
		}
		sample(t, &m);
		if (t == MSG_OPEN_OK) {
			/*
			 * Its lanes byte is optional: cut off, the rest is the
			 * older form, which the client refuses when its OPEN asked
			 * (test_bad_open_ok; client/copy.c).
			 */
			m.u.open_ok.lanes_sealed = 0;
		}
		len = encode_ok(&m);
		full = malloc(len + 1);
		assert_non_null(full);
		memcpy(full, payload(), len);
		for (size_t cut = 0; cut < len; cut++) {
			if (decode_rc(t, full, cut) != -EBADMSG) {
				fail_msg("%s cut at %zu of %zu decoded", proto_type_name(t), cut,
					 len);
			}
		}
		/* Trailing garbage, whatever its value. */
		full[len] = 0;
		assert_int_equal(decode_rc(t, full, len + 1), -EBADMSG);
		full[len] = 0xff;
		assert_int_equal(decode_rc(t, full, len + 1), -EBADMSG);
		assert_int_equal(decode_rc(t, full, len), 0);
		free(full);
	}
}

static void test_decode_refuses_oversize_and_unknown(void **state)
{
	/*
	 * More than PROTO_MAX_PAYLOAD bytes handed in: refused, even though
	 * they are a well-formed GET (256 paths at PROTO_MAX_PATH).
	 */
	size_t big = 2 + PROTO_MAX_BATCH * (2 + (size_t)PROTO_MAX_PATH);
	uint8_t *buf = malloc(big);
	char *path = repeat('p', PROTO_MAX_PATH);
	struct wbuf w;

	(void)state;
	assert_non_null(buf);
	wbuf_init(&w, buf, big);
	wbuf_put_u16(&w, PROTO_MAX_BATCH);
	for (size_t i = 0; i < PROTO_MAX_BATCH; i++) {
		wbuf_put_str16(&w, path, PROTO_MAX_PATH);
	}
	assert_false(w.overflow);
	assert_int_equal(w.len, big);
	assert_true(big > PROTO_MAX_PAYLOAD);
	assert_int_equal(decode_rc(MSG_GET, buf, big), -EBADMSG);
	free(path);
	free(buf);
	assert_int_equal(decode_rc(0, frame, 0), -EBADMSG);
	assert_int_equal(decode_rc(MSG_TYPE_MAX + 1, frame, 0), -EBADMSG);
}

/* One path short of a full frame fits; one byte more is refused by the encoder. */
static void test_encode_payload_cap(void **state)
{
	/* 2 + 255 * (2 + 4096) + (2 + 3582) == PROTO_MAX_PAYLOAD */
	char *full = repeat('p', PROTO_MAX_PATH);
	char *tail = repeat('q', 3583);
	char **paths = calloc(PROTO_MAX_BATCH, sizeof(*paths));
	size_t big = FRAME_CAP + 4096;
	uint8_t *buf = malloc(big);
	struct msg m = { .type = MSG_GET, .u.get = { .count = PROTO_MAX_BATCH } };

	(void)state;
	assert_non_null(paths);
	assert_non_null(buf);
	for (size_t i = 0; i < PROTO_MAX_BATCH - 1; i++) {
		paths[i] = full;
	}
	paths[PROTO_MAX_BATCH - 1] = tail + 1;
	m.u.get.paths = paths;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), (int)FRAME_CAP);
	round_trip(&m);
	assert_int_equal(msg_encode(&m, frame, sizeof(frame) - 1), -EMSGSIZE);

	/* Over PROTO_MAX_PAYLOAD, even with room to spare in the buffer. */
	paths[PROTO_MAX_BATCH - 1] = tail;
	assert_int_equal(msg_encode(&m, buf, big), -EMSGSIZE);
	free(buf);
	free(paths);
	free(full);
	free(tail);
}

static void test_encode_refuses(void **state)
{
	struct msg m;
	int n;
	uint8_t small[PROTO_HDR_LEN + 512];
	char *over_path = repeat('p', PROTO_MAX_PATH + 1);
	char *over_text = repeat('t', PROTO_MAX_TEXT + 1);

	(void)state;
	/* Strings over their cap. */
	{
		struct proto_file f = s_files[0];

		f.name = over_path;
		m = (struct msg){ .type = MSG_FILES, .u.files = { .count = 1, .files = &f } };
		assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
		f = s_files[2];
		f.link = over_path;
		assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	}
	{
		struct proto_status st = { .id = 1, .text = over_text };

		m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
		assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	}
	m = (struct msg){ .type = MSG_GET, .u.get = { .count = 1, .paths = &over_path } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);

	/* Buffer too small: below a header, one byte short, exact. */
	for (uint16_t t = 1; t <= N_TYPES; t++) {
		if (!type_defined(t)) {
			continue;
		}
		sample(t, &m);
		n = msg_encode(&m, small, sizeof(small));
		assert_true(n >= PROTO_HDR_LEN);
		assert_int_equal(msg_encode(&m, small, (size_t)n - 1), -EMSGSIZE);
		assert_int_equal(msg_encode(&m, small, (size_t)n), n);
		assert_int_equal(msg_encode(&m, small, PROTO_HDR_LEN - 1), -EMSGSIZE);
		assert_int_equal(msg_encode(&m, small, 0), -EMSGSIZE);
	}
	/* Unknown type. */
	m = (struct msg){ .type = 0 };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EINVAL);
	m = (struct msg){ .type = MSG_TYPE_MAX + 1 };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EINVAL);
	free(over_path);
	free(over_text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hdr_round_trip),
		cmocka_unit_test(test_hdr_bad_fields),
		cmocka_unit_test(test_hdr_length_and_type),
		cmocka_unit_test(test_round_trip_every_type),
		cmocka_unit_test(test_round_trip_edges),
		cmocka_unit_test(test_string_caps),
		cmocka_unit_test(test_string_longer_than_payload),
		cmocka_unit_test(test_embedded_nul),
		cmocka_unit_test(test_truncated_every_byte),
		cmocka_unit_test(test_decode_refuses_oversize_and_unknown),
		cmocka_unit_test(test_encode_payload_cap),
		cmocka_unit_test(test_encode_refuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
