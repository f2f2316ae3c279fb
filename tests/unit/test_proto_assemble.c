/* SPDX-License-Identifier: MIT */
/*
 * rdmacp finalize's messages (proto/msg_assemble.c): ASSEMBLE's parts,
 * names, counts and fields.
 * Shared samples and checks: proto_testlib.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto_testlib.h"

/* Parts that do not add up (a gap, an overlap, an empty one, a wrap), part names not single. */
static void bad_parts(void)
{
	struct msg m;

	sample_assemble(&m);
	assert_int_equal(encode_decode_rc(&m), 0);
	s_parts[1].offset++; /* a gap */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	s_parts[1].offset -= 2; /* an overlap */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	s_parts[1].offset++;
	m.u.assemble.size++; /* the parts fall short of it */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.assemble.size -= 2; /* past it */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_assemble(&m);
	s_parts[2].len = 0;
	m.u.assemble.size = 8u << 20;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	s_parts[2].len = UINT64_MAX - (8u << 20) + 1; /* wraps to 0 */
	m.u.assemble.size = 0;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	s_parts[2].len = 17;
	static const char *const bad_part[] = { "", ".", "..", "a/b", "../x" };
	for (size_t i = 0; i < (sizeof(bad_part) / sizeof(bad_part[0])); i++) {
		sample_assemble(&m);
		strcpy(s_parts[1].name, bad_part[i]);
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	}
	strcpy(s_parts[1].name, "5.1");
}

/* SEED's parts: some of a file's, ascending and apart, within size; never with DISCARD. */
static void seed_parts(void)
{
	struct msg m;

	sample_assemble(&m);
	m.u.assemble.flags = PROTO_ASM_SEED;
	assert_int_equal(encode_decode_rc(&m), 0);
	s_parts[2].offset++; /* a gap: fine */
	m.u.assemble.size++;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.assemble.size += 100; /* ending before size: fine */
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.assemble.size -= 101; /* past it */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.assemble.size += 1;
	s_parts[2].offset -= 2; /* an overlap */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	s_parts[2].offset = 8u << 20;
	sample_assemble(&m);
	m.u.assemble.flags = PROTO_ASM_SEED | PROTO_ASM_DISCARD;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_assemble(&m);
	m.u.assemble.flags = PROTO_ASM_SEED;
	s_parts[2].len = UINT64_MAX - s_parts[2].offset + 1; /* wraps to 0 */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	s_parts[2].len = 17;
}

/* The count and a part's name past their caps, written by hand (the encoder refuses them). */
static void bad_by_hand(void)
{
	struct msg m;
	struct wbuf w;
	uint8_t *p;
	size_t len;

	/* By hand: a count of 0, one past the cap, 65535 with no parts behind it. */
	static const uint16_t bad_count[] = { 0, PROTO_MAX_PARTS + 1, UINT16_MAX, 4 };
	sample_assemble(&m);
	len = encode_ok(&m);
	p = payload();
	{
		/* The count: after flags, three strings and 36 bytes of fixed fields. */
		size_t at = 4 + 3 * 2 + strlen(s_asm_path) + strlen(s_asm_name) +
			    strlen(s_asm_staging) + 4 + 8 + 4 + 4 + 4 + 8;

		assert_int_equal((p[at] << 8) | p[at + 1], 3);
		for (size_t i = 0; i < (sizeof(bad_count) / sizeof(bad_count[0])); i++) {
			p[at] = (uint8_t)(bad_count[i] >> 8);
			p[at + 1] = (uint8_t)bad_count[i];
			assert_int_equal(decode_rc(MSG_ASSEMBLE, p, len), -EBADMSG);
		}
		p[at] = 0;
		p[at + 1] = 3;
		assert_int_equal(decode_rc(MSG_ASSEMBLE, p, len), 0);
	}
	/* A name of 256 bytes (over PROTO_MAX_PART_NAME), written by hand. */
	wbuf_init(&w, payload(), PROTO_MAX_PAYLOAD);
	wbuf_put_u32(&w, 0);
	wbuf_put_str16(&w, "m", PROTO_MAX_PATH);
	wbuf_put_str16(&w, "f", PROTO_MAX_PATH);
	wbuf_put_str16(&w, "s", PROTO_MAX_PATH);
	wbuf_put_u32(&w, 0644);
	wbuf_put_u64(&w, 0);
	wbuf_put_u32(&w, 0);
	wbuf_put_u32(&w, 0);
	wbuf_put_u32(&w, 0);
	wbuf_put_u64(&w, 1);
	wbuf_put_u16(&w, 1);
	{
		char *longname = repeat('n', PROTO_MAX_PART_NAME + 1);

		wbuf_put_str16(&w, longname, UINT16_MAX);
		free(longname);
	}
	wbuf_put_u64(&w, 0);
	wbuf_put_u64(&w, 1);
	wbuf_put_bytes(&w, (uint8_t[PROTO_HASH_LEN]){ 0 }, PROTO_HASH_LEN);
	assert_false(w.overflow);
	assert_int_equal(decode_rc(MSG_ASSEMBLE, payload(), w.len), -EBADMSG);
}

/*
 * ASSEMBLE: parts that do not add up (a gap, an overlap, an empty one, a
 * sum other than size, an offset that wraps), names that could leave the
 * staging directory or the destination, counts past the cap (the encoder
 * refuses them, and so does the decoder, written by hand, before it
 * allocates), unknown flags, SEED's parts (seed_parts), a mode beyond 07777, nanoseconds of a second.
 */
static void test_assemble(void **state)
{
	struct msg m;

	(void)state;
	bad_parts();
	static const char *const bad_rel[] = { "", "/etc/passwd", "../up", "a/../../b", "a//b" };
	for (size_t i = 0; i < (sizeof(bad_rel) / sizeof(bad_rel[0])); i++) {
		sample_assemble(&m);
		m.u.assemble.name = (char *)bad_rel[i];
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
		sample_assemble(&m);
		m.u.assemble.staging = (char *)bad_rel[i];
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	}
	sample_assemble(&m);
	m.u.assemble.flags = 0x8;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	seed_parts();
	/* DISCARD (a vanished file's parts) is known, with OWNER or alone. */
	sample_assemble(&m);
	m.u.assemble.flags = PROTO_ASM_DISCARD | PROTO_ASM_OWNER;
	assert_int_equal(encode_decode_rc(&m), 0);
	sample_assemble(&m);
	m.u.assemble.mode = 010000;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_assemble(&m);
	m.u.assemble.mtime_nsec = 1000000000;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_assemble(&m);
	m.u.assemble.count = 0;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m.u.assemble.count = PROTO_MAX_PARTS + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	bad_by_hand();
	/* A peer without the capability hears INTEGRITY, not a code it does not know. */
	assert_int_equal(proto_err_for_peer(PERR_ASSEMBLY, PROTO_CAP_TCP), PERR_INTEGRITY);
	assert_int_equal(proto_err_for_peer(PERR_ASSEMBLY, PROTO_CAP_ASSEMBLE), PERR_ASSEMBLY);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_assemble),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
