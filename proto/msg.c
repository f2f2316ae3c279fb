/* SPDX-License-Identifier: MIT */
/*
 * Control message framing and dispatch (see msg.h and docs/PROTOCOL.md):
 * the 16-byte header, and msg_codecs[], one row per message type, through
 * which msg_encode, msg_decode and msg_clear reach each message's own code
 * (proto/msg_*.c, listed in msg_codec.h). Decoders check every count and
 * length against its cap before allocating; msg_decode refuses trailing
 * bytes and frees everything a failed decode allocated.
 */
#include "msg.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "msg_codec.h"

/*
 * Every message type: its name, its length when that never varies, its
 * encoder and decoder, and what frees a decode's allocations. A number
 * without a row (27, reserved for BENCH) is an unknown type.
 */
static const struct msg_codec msg_codecs[MSG_TYPE_MAX + 1] = {
	/* Session set-up and upkeep (msg_session.c) */
	[MSG_HELLO] = { .name = "HELLO",
			.fixed_len = MSG_LEN_VARIES,
			.encode = msg_enc_hello,
			.decode = msg_dec_hello },
	[MSG_ERROR] = { .name = "ERROR",
			.fixed_len = MSG_LEN_VARIES,
			.encode = msg_enc_error,
			.decode = msg_dec_error },
	[MSG_OPEN] = { .name = "OPEN",
		       .fixed_len = MSG_LEN_VARIES,
		       .encode = msg_enc_open,
		       .decode = msg_dec_open },
	[MSG_OPEN_OK] = { .name = "OPEN_OK",
			  .fixed_len = MSG_LEN_VARIES,
			  .encode = msg_enc_open_ok,
			  .decode = msg_dec_open_ok },
	[MSG_FILTER] = { .name = "FILTER",
			 .fixed_len = MSG_LEN_VARIES,
			 .encode = msg_enc_filter,
			 .decode = msg_dec_filter,
			 .clear = msg_clear_filter },
	[MSG_BENCH] = { .name = "BENCH",
			.fixed_len = 28,
			.encode = msg_enc_bench,
			.decode = msg_dec_bench },
	[MSG_PING] = { .name = "PING",
		       .fixed_len = 8,
		       .encode = msg_enc_ping,
		       .decode = msg_dec_ping },
	[MSG_PONG] = { .name = "PONG",
		       .fixed_len = 8,
		       .encode = msg_enc_ping,
		       .decode = msg_dec_ping },
	[MSG_BYE] = { .name = "BYE", .fixed_len = 0, .encode = msg_enc_bye, .decode = msg_dec_bye },
	/* A transfer's files (msg_files.c) */
	[MSG_FILES] = { .name = "FILES",
			.fixed_len = MSG_LEN_VARIES,
			.encode = msg_enc_files,
			.decode = msg_dec_files,
			.clear = msg_clear_files },
	[MSG_FILES_ACK] = { .name = "FILES_ACK",
			    .fixed_len = MSG_LEN_VARIES,
			    .encode = msg_enc_files_ack,
			    .decode = msg_dec_files_ack,
			    .clear = msg_clear_files_ack },
	[MSG_FILE_DONE] = { .name = "FILE_DONE",
			    .fixed_len = MSG_LEN_VARIES,
			    .encode = msg_enc_file_done,
			    .decode = msg_dec_file_done },
	[MSG_FILE_RESULT] = { .name = "FILE_RESULT",
			      .fixed_len = MSG_LEN_VARIES,
			      .encode = msg_enc_file_result,
			      .decode = msg_dec_file_result },
	[MSG_GET] = { .name = "GET",
		      .fixed_len = MSG_LEN_VARIES,
		      .encode = msg_enc_get,
		      .decode = msg_dec_get,
		      .clear = msg_clear_get },
	[MSG_END] = { .name = "END",
		      .fixed_len = 12,
		      .encode = msg_enc_end,
		      .decode = msg_dec_end },
	[MSG_ENTRY_FAILED] = { .name = "ENTRY_FAILED",
			       .fixed_len = MSG_LEN_VARIES,
			       .encode = msg_enc_entry_failed,
			       .decode = msg_dec_entry_failed },
	[MSG_XATTRS] = { .name = "XATTRS",
			 .fixed_len = MSG_LEN_VARIES,
			 .encode = msg_enc_xattrs,
			 .decode = msg_dec_xattrs,
			 .clear = msg_clear_xattrs },
	[MSG_DELETED] = { .name = "DELETED",
			  .fixed_len = MSG_LEN_VARIES,
			  .encode = msg_enc_deleted,
			  .decode = msg_dec_deleted,
			  .clear = msg_clear_deleted },
	/* The data path (msg_data.c) */
	[MSG_RING] = { .name = "RING",
		       .fixed_len = MSG_LEN_VARIES,
		       .encode = msg_enc_ring,
		       .decode = msg_dec_ring },
	[MSG_LANE_DOWN] = { .name = "LANE_DOWN",
			    .fixed_len = 12,
			    .encode = msg_enc_lane_down,
			    .decode = msg_dec_lane_down },
	/* Byte ranges of a file (msg_ranges.c) */
	[MSG_RESUME] = { .name = "RESUME",
			 .fixed_len = MSG_LEN_VARIES,
			 .encode = msg_enc_resume,
			 .decode = msg_dec_resume },
	[MSG_ZEROS] = { .name = "ZEROS",
			.fixed_len = MSG_LEN_VARIES,
			.encode = msg_enc_resume,
			.decode = msg_dec_resume },
	[MSG_DELTA] = { .name = "DELTA",
			.fixed_len = MSG_LEN_VARIES,
			.encode = msg_enc_delta,
			.decode = msg_dec_delta },
	/* Listings (msg_list.c) */
	[MSG_LIST] = { .name = "LIST",
		       .fixed_len = MSG_LEN_VARIES,
		       .encode = msg_enc_list,
		       .decode = msg_dec_list },
	[MSG_MODULES] = { .name = "MODULES",
			  .fixed_len = MSG_LEN_VARIES,
			  .encode = msg_enc_modules,
			  .decode = msg_dec_modules,
			  .clear = msg_clear_modules },
	[MSG_SUMS] = { .name = "SUMS",
		       .fixed_len = MSG_LEN_VARIES,
		       .encode = msg_enc_sums,
		       .decode = msg_dec_sums,
		       .clear = msg_clear_sums },
	[MSG_LIST_ATTRS] = { .name = "LIST_ATTRS",
			     .fixed_len = MSG_LEN_VARIES,
			     .encode = msg_enc_list_attrs,
			     .decode = msg_dec_list_attrs,
			     .clear = msg_clear_list_attrs },
	/* rdmacp finalize (msg_assemble.c) */
	[MSG_ASSEMBLE] = { .name = "ASSEMBLE",
			   .fixed_len = MSG_LEN_VARIES,
			   .encode = msg_enc_assemble,
			   .decode = msg_dec_assemble,
			   .clear = msg_clear_assemble },
	[MSG_ASSEMBLED] = { .name = "ASSEMBLED",
			    .fixed_len = 8,
			    .encode = msg_enc_assembled,
			    .decode = msg_dec_assembled },
	/* Relays (msg_relay.c) */
	[MSG_RELAY] = { .name = "RELAY",
			.fixed_len = MSG_LEN_VARIES,
			.encode = msg_enc_relay,
			.decode = msg_dec_relay,
			.clear = msg_clear_relay },
	[MSG_RELAY_RESULT] = { .name = "RELAY_RESULT",
			       .fixed_len = MSG_LEN_VARIES,
			       .encode = msg_enc_relay_result,
			       .decode = msg_dec_relay_result,
			       .clear = msg_clear_relay_result },
};

/* The row of type, or NULL for a number no message has (0, reserved, past the last). */
static const struct msg_codec *codec_of(uint16_t type)
{
	if (type < ARRAY_LEN(msg_codecs) && msg_codecs[type].name) {
		return &msg_codecs[type];
	}
	return NULL;
}

const char *proto_type_name(uint16_t type)
{
	const struct msg_codec *c = codec_of(type);

	return c ? c->name : "UNKNOWN";
}

void proto_hdr_encode(uint16_t type, uint32_t length, uint8_t out[PROTO_HDR_LEN])
{
	struct wbuf w;

	wbuf_init(&w, out, PROTO_HDR_LEN);
	wbuf_put_u32(&w, PROTO_MAGIC);
	wbuf_put_u8(&w, PROTO_VERSION);
	wbuf_put_u8(&w, 0);
	wbuf_put_u16(&w, type);
	wbuf_put_u16(&w, 0);
	wbuf_put_u16(&w, 0);
	wbuf_put_u32(&w, length);
}

int proto_hdr_decode(const uint8_t in[PROTO_HDR_LEN], struct proto_hdr *ret)
{
	struct rbuf r;
	uint32_t magic;
	uint8_t reserved8;
	uint16_t reserved16;
	struct proto_hdr h;

	rbuf_init(&r, in, PROTO_HDR_LEN);
	magic = rbuf_get_u32(&r);
	h.version = rbuf_get_u8(&r);
	reserved8 = rbuf_get_u8(&r);
	h.type = rbuf_get_u16(&r);
	h.flags = rbuf_get_u16(&r);
	reserved16 = rbuf_get_u16(&r);
	h.length = rbuf_get_u32(&r);
	if (r.error || magic != PROTO_MAGIC) {
		return -EBADMSG;
	}
	/* The version is checked before anything else it could change. */
	if (h.version < PROTO_VERSION_MIN || h.version > PROTO_VERSION) {
		*ret = h;
		return -EPROTONOSUPPORT;
	}
	if (reserved8 != 0 || reserved16 != 0 || (h.flags & ~PROTO_FLAGS_KNOWN) != 0) {
		return -EBADMSG;
	}
	if (h.length > PROTO_MAX_PAYLOAD) {
		return -EMSGSIZE;
	}
	/* Numbers reserved but not defined in this build are unknown types too. */
	if (!codec_of(h.type)) {
		*ret = h;
		return -ENOMSG;
	}
	*ret = h;
	return 0;
}

int msg_encode(const struct msg *m, uint8_t *buf, size_t cap)
{
	const struct msg_codec *c;
	struct wbuf w;
	size_t max = cap;
	int r;

	if (cap < PROTO_HDR_LEN) {
		return -EMSGSIZE;
	}
	c = codec_of(m->type);
	if (!c) {
		return -EINVAL;
	}
	if (max > PROTO_HDR_LEN + (size_t)PROTO_MAX_PAYLOAD) {
		max = PROTO_HDR_LEN + (size_t)PROTO_MAX_PAYLOAD;
	}
	wbuf_init(&w, buf + PROTO_HDR_LEN, max - PROTO_HDR_LEN);
	r = c->encode(m, &w);
	if (r < 0) {
		return r;
	}
	if (w.overflow) {
		return -EMSGSIZE;
	}
	/* The row's length is what its encoder writes: our own mistake otherwise. */
	assert(c->fixed_len == MSG_LEN_VARIES || w.len == (size_t)c->fixed_len);
	proto_hdr_encode(m->type, (uint32_t)w.len, buf);
	return (int)(PROTO_HDR_LEN + w.len);
}

int msg_decode(uint16_t type, const uint8_t *payload, size_t len, struct msg *ret)
{
	const struct msg_codec *c = codec_of(type);
	struct rbuf r;
	int err;

	memset(ret, 0, sizeof(*ret));
	if (len > PROTO_MAX_PAYLOAD) {
		return -EBADMSG;
	}
	ret->type = type;
	rbuf_init(&r, payload, len);
	if (!c || (c->fixed_len != MSG_LEN_VARIES && len != (size_t)c->fixed_len)) {
		err = -EBADMSG;
	} else {
		err = c->decode(&r, ret);
	}
	if (err == 0 && (r.error || rbuf_left(&r) != 0)) {
		err = -EBADMSG;
	}
	if (err < 0) {
		msg_clear(ret);
		return err;
	}
	return 0;
}

void msg_clear(struct msg *m)
{
	const struct msg_codec *c = codec_of(m->type);

	if (c && c->clear) {
		c->clear(m);
	}
	memset(m, 0, sizeof(*m));
}
