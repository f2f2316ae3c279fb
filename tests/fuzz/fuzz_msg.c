/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the control-protocol codec (proto/msg.c, proto/wire.c).
 *
 * The input is a stream of frames. For each: decode the header; decode the
 * payload (cut short by the end of the input, as a peer's truncated frame
 * would be); and for every message that decodes, check the codec is
 * canonical: encode(decode(x)) == x byte for byte, and that encoding decodes
 * and re-encodes to itself. Every payload is decoded from an exact-size heap
 * copy so ASan sees any over-read. The input is also read as 32-byte slot
 * descriptors (a packed slot's table too).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FRAME_CAP (PROTO_HDR_LEN + (size_t)PROTO_MAX_PAYLOAD)

static uint8_t enc1[FRAME_CAP];
static uint8_t enc2[FRAME_CAP];

#define CHECK(cond)                                                                              \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                 \
		}                                                                                \
	} while (0)

/* Encode m into out; the header must describe exactly what was written. */
static size_t encode_checked(const struct msg *m, uint8_t *out)
{
	struct proto_hdr h;
	int n = msg_encode(m, out, FRAME_CAP);

	CHECK(n >= PROTO_HDR_LEN);
	CHECK(proto_hdr_decode(out, &h) == 0);
	CHECK(h.type == m->type);
	CHECK(h.length == (size_t)n - PROTO_HDR_LEN);
	return (size_t)n - PROTO_HDR_LEN;
}

static void round_trip(const struct msg *m, const uint8_t *orig, size_t orig_len)
{
	struct msg again;
	size_t len1, len2;

	len1 = encode_checked(m, enc1);
	/* Every field is checked on decode, so the encoding is canonical. */
	CHECK(len1 == orig_len);
	CHECK(memcmp(enc1 + PROTO_HDR_LEN, orig, len1) == 0);

	CHECK(msg_decode(m->type, enc1 + PROTO_HDR_LEN, len1, &again) == 0);
	len2 = encode_checked(&again, enc2);
	CHECK(len2 == len1);
	CHECK(memcmp(enc1, enc2, PROTO_HDR_LEN + len1) == 0);
	msg_clear(&again);
}

static void one_payload(uint16_t type, const uint8_t *p, size_t len)
{
	uint8_t *copy = malloc(len ? len : 1);
	struct msg m;

	if (!copy) {
		return;
	}
	if (len) {
		memcpy(copy, p, len);
	}
	if (msg_decode(type, copy, len, &m) == 0) {
		round_trip(&m, copy, len);
		(void)proto_type_name(m.type);
		msg_clear(&m);
	} else {
		/* A failed decode leaves nothing behind, not even the type. */
		CHECK(m.type == 0);
	}
	free(copy);
}

static void descriptors(const uint8_t *data, size_t size)
{
	for (size_t off = 0; off + PROTO_DESC_LEN <= size; off += PROTO_DESC_LEN) {
		struct proto_desc d;
		uint8_t again[PROTO_DESC_LEN];

		if (proto_desc_decode(data + off, &d) == 0) {
			proto_desc_encode(&d, again);
			CHECK(memcmp(again, data + off, PROTO_DESC_LEN) == 0);
			/* A packed slot: its table read from what follows, within the input. */
			if (d.file_id == 0 && d.len <= size - off - PROTO_DESC_LEN) {
				struct proto_piece *pc = calloc(d.pieces, sizeof(*pc));
				uint64_t sum = 0;

				CHECK(pc != NULL);
				if (proto_pieces_decode(data + off + PROTO_DESC_LEN, &d, pc) == 0) {
					for (uint32_t i = 0; i < d.pieces; i++) {
						CHECK(pc[i].id != 0 && pc[i].len != 0);
						CHECK(pc[i].at == sum);
						sum += pc[i].len;
					}
					CHECK(sum + (uint64_t)d.pieces * PROTO_PIECE_LEN == d.len);
				}
				free(pc);
			}
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t pos = 0;

	descriptors(data, size);
	while (size - pos >= PROTO_HDR_LEN) {
		struct proto_hdr h;
		size_t len;

		if (proto_hdr_decode(data + pos, &h) < 0) {
			break;
		}
		CHECK(h.version == PROTO_VERSION && h.flags == 0);
		CHECK(h.length <= PROTO_MAX_PAYLOAD);
		CHECK(h.type >= 1 && h.type <= MSG_TYPE_MAX);
		pos += PROTO_HDR_LEN;
		len = h.length < size - pos ? h.length : size - pos;
		one_payload(h.type, data + pos, len);
		pos += len;
	}
	return 0;
}
