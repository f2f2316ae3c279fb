/* SPDX-License-Identifier: MIT */
/*
 * Inside the control-message codec (not for users of proto/msg.h): the row
 * every message type has in msg_codecs[] (proto/msg.c), the encoder, decoder
 * and clear function each family file gives its rows, and the field helpers
 * several families share (proto/msg_fields.c).
 *
 * Families: msg_session.c (HELLO, ERROR, OPEN, OPEN_OK, FILTER, BENCH, PING,
 * PONG, BYE), msg_files.c (FILES, FILES_ACK, FILE_DONE, FILE_RESULT, GET,
 * END, ENTRY_FAILED, XATTRS, DELETED), msg_data.c (RING, LANE_DOWN; slot
 * descriptors), msg_ranges.c (RESUME, ZEROS, DELTA), msg_list.c (LIST,
 * MODULES, SUMS, LIST_ATTRS), msg_assemble.c (ASSEMBLE, ASSEMBLED),
 * msg_relay.c (RELAY, RELAY_RESULT).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msg.h"
#include "wire.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* msg_codec.fixed_len of a type whose messages differ in length. */
#define MSG_LEN_VARIES (-1)

/*
 * One message type. encode writes the payload (the header is msg_encode's)
 * and returns 0, or -EMSGSIZE / -EINVAL for a value it will not put on the
 * wire; overflow of w is msg_encode's to check. decode reads the payload
 * and checks every field, returning 0, -EBADMSG or -ENOMEM; trailing bytes
 * are msg_decode's to refuse, and what a failed decode allocated is freed
 * by clear (so a decoder counts an entry before it allocates its strings).
 */
struct msg_codec {
	const char *name; /* proto_type_name(); NULL: a number this build does not define */
	/* Payload bytes of every message of the type, or MSG_LEN_VARIES. */
	int32_t fixed_len;
	int (*encode)(const struct msg *m, struct wbuf *w);
	int (*decode)(struct rbuf *r, struct msg *m);
	void (*clear)(struct msg *m); /* frees what decode allocated; NULL: nothing */
};

/* ---- shared field helpers (msg_fields.c) -------------------------------- */

/* Read a str16 into a fresh allocation, checking the cap before malloc; NULL latches r. */
char *msg_dec_str_alloc(struct rbuf *r, size_t max);
/*
 * A relative name with no empty, "." or ".." component (a hard link's first
 * name, an ASSEMBLE name): the receiver checks it again as it checks every name.
 */
bool msg_rel_name_ok(const char *s);
/* A slot size: a power of two in PROTO_MIN_CHUNK..PROTO_MAX_CHUNK. */
bool msg_chunk_size_ok(uint32_t cs);
/* count (offset u64, len u64) ranges. */
void msg_enc_ranges(struct wbuf *w, const struct proto_range *g, size_t count);
/* count ranges, ascending, not empty, not overlapping, not past 2^64: 0 or -EBADMSG. */
int msg_dec_ranges(struct rbuf *r, struct proto_range *g, size_t count);

/* ---- msg_session.c ------------------------------------------------------ */

int msg_enc_hello(const struct msg *m, struct wbuf *w);
int msg_dec_hello(struct rbuf *r, struct msg *m);
int msg_enc_error(const struct msg *m, struct wbuf *w);
int msg_dec_error(struct rbuf *r, struct msg *m);
int msg_enc_open(const struct msg *m, struct wbuf *w);
int msg_dec_open(struct rbuf *r, struct msg *m);
int msg_enc_open_ok(const struct msg *m, struct wbuf *w);
int msg_dec_open_ok(struct rbuf *r, struct msg *m);
int msg_enc_filter(const struct msg *m, struct wbuf *w);
int msg_dec_filter(struct rbuf *r, struct msg *m);
void msg_clear_filter(struct msg *m);
int msg_enc_bench(const struct msg *m, struct wbuf *w);
int msg_dec_bench(struct rbuf *r, struct msg *m);
/* PING and PONG */
int msg_enc_ping(const struct msg *m, struct wbuf *w);
int msg_dec_ping(struct rbuf *r, struct msg *m);
int msg_enc_bye(const struct msg *m, struct wbuf *w);
int msg_dec_bye(struct rbuf *r, struct msg *m);

/* ---- msg_files.c -------------------------------------------------------- */

int msg_enc_files(const struct msg *m, struct wbuf *w);
int msg_dec_files(struct rbuf *r, struct msg *m);
void msg_clear_files(struct msg *m);
int msg_enc_files_ack(const struct msg *m, struct wbuf *w);
int msg_dec_files_ack(struct rbuf *r, struct msg *m);
void msg_clear_files_ack(struct msg *m);
int msg_enc_file_done(const struct msg *m, struct wbuf *w);
int msg_dec_file_done(struct rbuf *r, struct msg *m);
int msg_enc_file_result(const struct msg *m, struct wbuf *w);
int msg_dec_file_result(struct rbuf *r, struct msg *m);
int msg_enc_get(const struct msg *m, struct wbuf *w);
int msg_dec_get(struct rbuf *r, struct msg *m);
void msg_clear_get(struct msg *m);
int msg_enc_end(const struct msg *m, struct wbuf *w);
int msg_dec_end(struct rbuf *r, struct msg *m);
int msg_enc_entry_failed(const struct msg *m, struct wbuf *w);
int msg_dec_entry_failed(struct rbuf *r, struct msg *m);
int msg_enc_xattrs(const struct msg *m, struct wbuf *w);
int msg_dec_xattrs(struct rbuf *r, struct msg *m);
void msg_clear_xattrs(struct msg *m);
int msg_enc_deleted(const struct msg *m, struct wbuf *w);
int msg_dec_deleted(struct rbuf *r, struct msg *m);
void msg_clear_deleted(struct msg *m);

/* ---- msg_data.c --------------------------------------------------------- */

int msg_enc_ring(const struct msg *m, struct wbuf *w);
int msg_dec_ring(struct rbuf *r, struct msg *m);
int msg_enc_lane_down(const struct msg *m, struct wbuf *w);
int msg_dec_lane_down(struct rbuf *r, struct msg *m);

/* ---- msg_ranges.c ------------------------------------------------------- */

/* RESUME and ZEROS (one layout, struct msg_resume) */
int msg_enc_resume(const struct msg *m, struct wbuf *w);
int msg_dec_resume(struct rbuf *r, struct msg *m);
int msg_enc_delta(const struct msg *m, struct wbuf *w);
int msg_dec_delta(struct rbuf *r, struct msg *m);

/* ---- msg_list.c --------------------------------------------------------- */

int msg_enc_list(const struct msg *m, struct wbuf *w);
int msg_dec_list(struct rbuf *r, struct msg *m);
int msg_enc_modules(const struct msg *m, struct wbuf *w);
int msg_dec_modules(struct rbuf *r, struct msg *m);
void msg_clear_modules(struct msg *m);
int msg_enc_sums(const struct msg *m, struct wbuf *w);
int msg_dec_sums(struct rbuf *r, struct msg *m);
void msg_clear_sums(struct msg *m);
int msg_enc_list_attrs(const struct msg *m, struct wbuf *w);
int msg_dec_list_attrs(struct rbuf *r, struct msg *m);
void msg_clear_list_attrs(struct msg *m);

/* ---- msg_assemble.c ----------------------------------------------------- */

int msg_enc_assemble(const struct msg *m, struct wbuf *w);
int msg_dec_assemble(struct rbuf *r, struct msg *m);
void msg_clear_assemble(struct msg *m);
int msg_enc_assembled(const struct msg *m, struct wbuf *w);
int msg_dec_assembled(struct rbuf *r, struct msg *m);

/* ---- msg_relay.c -------------------------------------------------------- */

int msg_enc_relay(const struct msg *m, struct wbuf *w);
int msg_dec_relay(struct rbuf *r, struct msg *m);
void msg_clear_relay(struct msg *m);
int msg_enc_relay_result(const struct msg *m, struct wbuf *w);
int msg_dec_relay_result(struct rbuf *r, struct msg *m);
void msg_clear_relay_result(struct msg *m);
