/* SPDX-License-Identifier: MIT */
/*
 * What the control-protocol tests (unit/test_proto_*.c) share: one valid
 * sample of every message type and the data behind them
 * (unit/proto_samples.c), and the checks every test uses
 * (unit/proto_checks.c): encode and check the header, decode from an
 * exact-size heap copy (so ASan sees any over-read; on failure the message
 * must be all zero), compare field by field, round trip byte for byte.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "testutil.h"

#include "proto/msg.h"
#include "proto/wire.h"

#define FRAME_CAP (PROTO_HDR_LEN + (size_t)PROTO_MAX_PAYLOAD)
#define N_TYPES	  MSG_TYPE_MAX

/* ---- proto_checks.c ------------------------------------------------------ */

/* A whole frame's room: encode_ok writes here, payload() is its payload. */
extern uint8_t frame[FRAME_CAP];
extern const struct msg zero_msg;

/* Encode m into frame; check the header; return the payload length. */
size_t encode_ok(const struct msg *m);
uint8_t *payload(void);
/* Decode from an exact-size heap copy; on failure ret must be all zero. */
int decode_copy(uint16_t type, const uint8_t *p, size_t len, struct msg *ret);
int decode_rc(uint16_t type, const uint8_t *p, size_t len);
/* The encoder does not validate field values, so it can build bad payloads. */
int encode_decode_rc(const struct msg *m);
/* n times c, allocated. */
char *repeat(char c, size_t n);
/* Type numbers may have gaps (reserved for other features): those have no sample. */
bool type_defined(uint16_t t);
/* a: what was sent, b: what was decoded. */
void assert_msg_equal(const struct msg *a, const struct msg *b);
/* Encode, decode, compare fields, and check the re-encoding is byte-identical. */
void round_trip(const struct msg *m);
/*
 * Replace the string at the end of an encoded payload (length u16 at
 * len - slen - 2) by one byte longer: the same message, one over its cap.
 */
int decode_last_string_grown(uint16_t type, const uint8_t *p, size_t len, size_t slen);
/* A FILES entry written field by field, with no checks (link written even if not a symlink). */
void put_file_raw(struct wbuf *w, const struct proto_file *f);
/* A FILES of that one entry, written with put_file_raw, decoded. */
int decode_one_file_raw(const struct proto_file *f);

/* ---- proto_samples.c ----------------------------------------------------- */

/* One valid message of type (every field set), pointing into the data below. */
void sample(uint16_t type, struct msg *m);
/* An ASSEMBLE of s_parts (sample(MSG_ASSEMBLE) too). */
void sample_assemble(struct msg *m);
/* An OPEN of a push with --delete: max_delete follows the path. */
void sample_open_delete(struct msg *m);

/* The samples' data some tests change or reuse. */
extern struct proto_file s_files[3]; /* a regular file, a directory, a symlink */
extern struct proto_status s_st[2];
extern char s_get1[];
extern struct proto_filter_rule s_rules[3];
extern struct proto_module s_mods[3];
extern char s_xname0[];
extern uint8_t s_xval0[];
extern char s_del0[], s_deltext[], s_empty[];
extern char s_asm_path[], s_asm_name[], s_asm_staging[];
extern struct proto_part s_parts[3];
extern uint8_t s_self_ticket[11];
extern struct proto_relay_hop s_hops[2];
