/* SPDX-License-Identifier: MIT */
/*
 * Checks the control-protocol tests share (see proto_testlib.h): encode with
 * the header checked, decode from exact-size heap copies, compare every
 * field of every message type (one compare function per type, in equals[]),
 * round trips that must re-encode byte for byte, and raw writers for what
 * our encoder would refuse to write.
 */
#include <stdlib.h>
#include <string.h>

#include "proto_testlib.h"

uint8_t frame[FRAME_CAP];
const struct msg zero_msg;

size_t encode_ok(const struct msg *m)
{
	struct proto_hdr h;
	int n = msg_encode(m, frame, sizeof(frame));

	assert_true(n >= PROTO_HDR_LEN);
	assert_int_equal(proto_hdr_decode(frame, &h), 0);
	assert_int_equal(h.version, PROTO_VERSION);
	assert_int_equal(h.type, m->type);
	assert_int_equal(h.flags, 0);
	assert_int_equal(h.length, (size_t)n - PROTO_HDR_LEN);
	return (size_t)n - PROTO_HDR_LEN;
}

uint8_t *payload(void)
{
	return frame + PROTO_HDR_LEN;
}

int decode_copy(uint16_t type, const uint8_t *p, size_t len, struct msg *ret)
{
	uint8_t *copy = malloc(len ? len : 1);
	int r;

	assert_non_null(copy);
	if (len) {
		memcpy(copy, p, len);
	}
	r = msg_decode(type, copy, len, ret);
	free(copy);
	if (r < 0) {
		assert_memory_equal(ret, &zero_msg, sizeof(*ret));
	}
	return r;
}

int decode_rc(uint16_t type, const uint8_t *p, size_t len)
{
	struct msg m;
	int r = decode_copy(type, p, len, &m);

	msg_clear(&m);
	return r;
}

int encode_decode_rc(const struct msg *m)
{
	size_t len = encode_ok(m);

	return decode_rc(m->type, payload(), len);
}

char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

bool type_defined(uint16_t t)
{
	return strcmp(proto_type_name(t), "UNKNOWN") != 0;
}

/* ---- every type's fields, compared --------------------------------------- */

static void assert_file_equal(const struct proto_file *a, const struct proto_file *b)
{
	assert_int_equal(a->id, b->id);
	assert_int_equal(a->ftype, b->ftype);
	assert_int_equal(a->mode, b->mode);
	assert_int_equal(a->linked, b->linked);
	assert_true(a->size == b->size);
	assert_true(a->mtime_sec == b->mtime_sec);
	assert_int_equal(a->mtime_nsec, b->mtime_nsec);
	assert_int_equal(a->uid, b->uid);
	assert_int_equal(a->gid, b->gid);
	assert_string_equal(a->name, b->name);
	if (a->ftype == PROTO_FT_SYMLINK || a->ftype == PROTO_FT_HARDLINK) {
		assert_string_equal(a->link, b->link);
	} else {
		assert_null(b->link);
	}
}

static void equal_hello(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.hello.min_version, b->u.hello.min_version);
	assert_int_equal(a->u.hello.max_version, b->u.hello.max_version);
	assert_true(a->u.hello.caps == b->u.hello.caps);
	assert_string_equal(a->u.hello.software, b->u.hello.software);
}

static void equal_error(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.error.code, b->u.error.code);
	assert_string_equal(a->u.error.text, b->u.error.text);
}

static void equal_open(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.open.direction, b->u.open.direction);
	assert_int_equal(a->u.open.transport, b->u.open.transport);
	assert_int_equal(a->u.open.lanes, b->u.open.lanes);
	assert_int_equal(a->u.open.flags, b->u.open.flags);
	assert_int_equal(a->u.open.chunk_size, b->u.open.chunk_size);
	assert_int_equal(a->u.open.slots, b->u.open.slots);
	assert_string_equal(a->u.open.path, b->u.open.path);
	assert_true(a->u.open.max_delete == b->u.open.max_delete);
	assert_int_equal(a->u.open.flags & PROTO_OPEN_ENCRYPT ? a->u.open.encrypt : 0,
			 b->u.open.encrypt);
}

static void equal_open_ok(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.open_ok.transport, b->u.open_ok.transport);
	assert_int_equal(a->u.open_ok.lanes, b->u.open_ok.lanes);
	assert_int_equal(a->u.open_ok.data_port, b->u.open_ok.data_port);
	assert_int_equal(a->u.open_ok.chunk_size, b->u.open_ok.chunk_size);
	assert_int_equal(a->u.open_ok.slots, b->u.open_ok.slots);
	assert_memory_equal(a->u.open_ok.token, b->u.open_ok.token, PROTO_TOKEN_LEN);
	assert_int_equal(a->u.open_ok.lanes_sealed, b->u.open_ok.lanes_sealed);
	assert_int_equal(a->u.open_ok.nrails, b->u.open_ok.nrails);
	assert_int_equal(a->u.open_ok.rails_flags, b->u.open_ok.rails_flags);
}

static void equal_ring(const struct msg *a, const struct msg *b)
{
	assert_true(a->u.ring.addr == b->u.ring.addr);
	assert_true(a->u.ring.desc_addr == b->u.ring.desc_addr);
	assert_int_equal(a->u.ring.nkeys, b->u.ring.nkeys);
	for (unsigned i = 0; i < a->u.ring.nkeys; i++) {
		assert_int_equal(a->u.ring.rkey[i], b->u.ring.rkey[i]);
	}
	assert_int_equal(a->u.ring.slots, b->u.ring.slots);
	assert_int_equal(a->u.ring.slot_size, b->u.ring.slot_size);
}

static void equal_files(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.files.count, b->u.files.count);
	assert_non_null(b->u.files.files);
	for (size_t i = 0; i < a->u.files.count; i++) {
		assert_file_equal(&a->u.files.files[i], &b->u.files.files[i]);
	}
}

static void equal_files_ack(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.files_ack.count, b->u.files_ack.count);
	for (size_t i = 0; i < a->u.files_ack.count; i++) {
		assert_int_equal(a->u.files_ack.st[i].id, b->u.files_ack.st[i].id);
		assert_int_equal(a->u.files_ack.st[i].status, b->u.files_ack.st[i].status);
		assert_int_equal(a->u.files_ack.st[i].items, b->u.files_ack.st[i].items);
		assert_string_equal(a->u.files_ack.st[i].text, b->u.files_ack.st[i].text);
	}
}

static void equal_file_done(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.file_done.id, b->u.file_done.id);
	assert_int_equal(a->u.file_done.status, b->u.file_done.status);
	assert_true(a->u.file_done.bytes == b->u.file_done.bytes);
	assert_memory_equal(a->u.file_done.hash, b->u.file_done.hash, PROTO_HASH_LEN);
	assert_string_equal(a->u.file_done.text, b->u.file_done.text);
}

static void equal_file_result(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.file_result.id, b->u.file_result.id);
	assert_int_equal(a->u.file_result.status, b->u.file_result.status);
	assert_string_equal(a->u.file_result.text, b->u.file_result.text);
}

static void equal_get(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.get.count, b->u.get.count);
	for (size_t i = 0; i < a->u.get.count; i++) {
		assert_string_equal(a->u.get.paths[i], b->u.get.paths[i]);
	}
}

static void equal_end(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.end.files, b->u.end.files);
	assert_true(a->u.end.bytes == b->u.end.bytes);
}

/* PING, PONG */
static void equal_ping(const struct msg *a, const struct msg *b)
{
	assert_true(a->u.ping.nonce == b->u.ping.nonce);
}

static void equal_entry_failed(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.entry_failed.status, b->u.entry_failed.status);
	assert_string_equal(a->u.entry_failed.name, b->u.entry_failed.name);
	assert_string_equal(a->u.entry_failed.text, b->u.entry_failed.text);
}

/* RESUME, ZEROS: the same layout */
static void equal_resume(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.resume.id, b->u.resume.id);
	assert_int_equal(a->u.resume.count, b->u.resume.count);
	for (size_t i = 0; i < a->u.resume.count; i++) {
		assert_true(a->u.resume.r[i].offset == b->u.resume.r[i].offset);
		assert_true(a->u.resume.r[i].len == b->u.resume.r[i].len);
	}
}

static void equal_delta(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.delta.id, b->u.delta.id);
	assert_int_equal(a->u.delta.kind, b->u.delta.kind);
	assert_int_equal(a->u.delta.flags, b->u.delta.flags);
	assert_int_equal(a->u.delta.count, b->u.delta.count);
	if (a->u.delta.kind == PROTO_DELTA_SUMS) {
		assert_true(a->u.delta.first == b->u.delta.first);
		assert_memory_equal(a->u.delta.sums, b->u.delta.sums,
				    (size_t)a->u.delta.count * PROTO_HASH_LEN);
	}
	for (size_t i = 0; a->u.delta.kind == PROTO_DELTA_SAME && i < a->u.delta.count; i++) {
		assert_true(a->u.delta.r[i].offset == b->u.delta.r[i].offset);
		assert_true(a->u.delta.r[i].len == b->u.delta.r[i].len);
	}
}

static void equal_list(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.list.flags, b->u.list.flags);
	assert_string_equal(a->u.list.path, b->u.list.path);
}

static void equal_modules(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.modules.count, b->u.modules.count);
	assert_non_null(b->u.modules.mods);
	for (size_t i = 0; i < a->u.modules.count; i++) {
		assert_int_equal(a->u.modules.mods[i].flags, b->u.modules.mods[i].flags);
		assert_string_equal(a->u.modules.mods[i].name, b->u.modules.mods[i].name);
		assert_string_equal(a->u.modules.mods[i].comment, b->u.modules.mods[i].comment);
	}
}

static void equal_xattrs(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.xattrs.id, b->u.xattrs.id);
	assert_int_equal(a->u.xattrs.count, b->u.xattrs.count);
	for (size_t i = 0; i < a->u.xattrs.count; i++) {
		assert_string_equal(a->u.xattrs.x[i].name, b->u.xattrs.x[i].name);
		assert_int_equal(a->u.xattrs.x[i].len, b->u.xattrs.x[i].len);
		assert_non_null(b->u.xattrs.x[i].value);
		assert_memory_equal(a->u.xattrs.x[i].value, b->u.xattrs.x[i].value,
				    a->u.xattrs.x[i].len);
	}
}

static void equal_filter(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.filter.count, b->u.filter.count);
	assert_non_null(b->u.filter.rules);
	for (size_t i = 0; i < a->u.filter.count; i++) {
		assert_int_equal(a->u.filter.rules[i].action, b->u.filter.rules[i].action);
		assert_string_equal(a->u.filter.rules[i].pattern, b->u.filter.rules[i].pattern);
	}
}

static void equal_deleted(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.deleted.flags, b->u.deleted.flags);
	assert_int_equal(a->u.deleted.count, b->u.deleted.count);
	assert_non_null(b->u.deleted.ents);
	for (size_t i = 0; i < a->u.deleted.count; i++) {
		const struct proto_deleted *x = &a->u.deleted.ents[i];
		const struct proto_deleted *y = &b->u.deleted.ents[i];

		assert_int_equal(x->what, y->what);
		assert_int_equal(x->ftype, y->ftype);
		assert_int_equal(x->code, y->code);
		assert_string_equal(x->name, y->name);
		assert_string_equal(x->text, y->text);
	}
}

static void equal_sums(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.sums.count, b->u.sums.count);
	assert_non_null(b->u.sums.sums);
	for (size_t i = 0; i < a->u.sums.count; i++) {
		assert_int_equal(a->u.sums.sums[i].id, b->u.sums.sums[i].id);
		assert_int_equal(a->u.sums.sums[i].status, b->u.sums.sums[i].status);
		assert_memory_equal(a->u.sums.sums[i].hash, b->u.sums.sums[i].hash, PROTO_HASH_LEN);
	}
}

static void equal_list_attrs(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.list_attrs.fields, b->u.list_attrs.fields);
	assert_int_equal(a->u.list_attrs.count, b->u.list_attrs.count);
	for (size_t i = 0; i < a->u.list_attrs.count; i++) {
		const struct proto_entry_attrs *x = &a->u.list_attrs.ents[i];
		const struct proto_entry_attrs *y = &b->u.list_attrs.ents[i];

		assert_int_equal(x->id, y->id);
		assert_int_equal(x->status, y->status);
		assert_memory_equal(x->digest, y->digest, sizeof(x->digest));
		assert_true(x->link_group == y->link_group);
	}
}

static void equal_assemble(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.assemble.flags, b->u.assemble.flags);
	assert_string_equal(a->u.assemble.path, b->u.assemble.path);
	assert_string_equal(a->u.assemble.name, b->u.assemble.name);
	assert_string_equal(a->u.assemble.staging, b->u.assemble.staging);
	assert_int_equal(a->u.assemble.mode, b->u.assemble.mode);
	assert_true(a->u.assemble.mtime_sec == b->u.assemble.mtime_sec);
	assert_int_equal(a->u.assemble.mtime_nsec, b->u.assemble.mtime_nsec);
	assert_int_equal(a->u.assemble.uid, b->u.assemble.uid);
	assert_int_equal(a->u.assemble.gid, b->u.assemble.gid);
	assert_true(a->u.assemble.size == b->u.assemble.size);
	assert_int_equal(a->u.assemble.count, b->u.assemble.count);
	for (size_t i = 0; i < a->u.assemble.count; i++) {
		const struct proto_part *x = &a->u.assemble.parts[i];
		const struct proto_part *y = &b->u.assemble.parts[i];

		assert_string_equal(x->name, y->name);
		assert_true(x->offset == y->offset && x->len == y->len);
		assert_memory_equal(x->hash, y->hash, PROTO_HASH_LEN);
	}
}

static void equal_assembled(const struct msg *a, const struct msg *b)
{
	assert_true(a->u.assembled.size == b->u.assembled.size);
}

static void equal_lane_down(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.lane_down.lane, b->u.lane_down.lane);
	assert_true(a->u.lane_down.count == b->u.lane_down.count);
}

static void equal_relay(const struct msg *a, const struct msg *b)
{
	const struct msg_relay *x = &a->u.relay, *y = &b->u.relay;

	assert_int_equal(x->self_ticket_len, y->self_ticket_len);
	if (x->self_ticket_len) {
		assert_memory_equal(x->self_ticket, y->self_ticket, x->self_ticket_len);
	}
	assert_int_equal(x->count, y->count);
	for (size_t i = 0; i < x->count; i++) {
		assert_string_equal(x->hops[i].host, y->hops[i].host);
		assert_int_equal(x->hops[i].port, y->hops[i].port);
		assert_string_equal(x->hops[i].path, y->hops[i].path);
		assert_int_equal(x->hops[i].ticket_len, y->hops[i].ticket_len);
		assert_memory_equal(x->hops[i].ticket, y->hops[i].ticket, x->hops[i].ticket_len);
	}
	/* 0 and 1 are both a chain (no trailer on the wire; decode says 1). */
	assert_int_equal(x->fanout > 1 ? x->fanout : 1, y->fanout > 1 ? y->fanout : 1);
}

static void equal_relay_result(const struct msg *a, const struct msg *b)
{
	const struct msg_relay_result *x = &a->u.relay_result, *y = &b->u.relay_result;

	assert_int_equal(x->index, y->index);
	assert_int_equal(x->status, y->status);
	assert_int_equal(x->exit_code, y->exit_code);
	assert_true(x->files_ok == y->files_ok && x->files_failed == y->files_failed);
	assert_true(x->bytes == y->bytes);
	assert_string_equal(x->host, y->host);
	assert_string_equal(x->text, y->text);
}

static void equal_bench(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->u.bench.transport, b->u.bench.transport);
	assert_int_equal(a->u.bench.lanes, b->u.bench.lanes);
	assert_int_equal(a->u.bench.encrypt, b->u.bench.encrypt);
	assert_int_equal(a->u.bench.chunk_size, b->u.bench.chunk_size);
	assert_int_equal(a->u.bench.slots, b->u.bench.slots);
	assert_true(a->u.bench.bytes == b->u.bench.bytes);
	assert_true(a->u.bench.seed == b->u.bench.seed);
}

/* BYE has no fields. */
static void equal_nothing(const struct msg *a, const struct msg *b)
{
}

/* One compare function per type: a's fields (what was sent) against b's (what was decoded). */
static void (*const equals[MSG_TYPE_MAX + 1])(const struct msg *a, const struct msg *b) = {
	[MSG_HELLO] = equal_hello,
	[MSG_ERROR] = equal_error,
	[MSG_OPEN] = equal_open,
	[MSG_OPEN_OK] = equal_open_ok,
	[MSG_RING] = equal_ring,
	[MSG_FILES] = equal_files,
	[MSG_FILES_ACK] = equal_files_ack,
	[MSG_FILE_DONE] = equal_file_done,
	[MSG_FILE_RESULT] = equal_file_result,
	[MSG_GET] = equal_get,
	[MSG_END] = equal_end,
	[MSG_PING] = equal_ping,
	[MSG_PONG] = equal_ping,
	[MSG_ENTRY_FAILED] = equal_entry_failed,
	[MSG_RESUME] = equal_resume,
	[MSG_ZEROS] = equal_resume,
	[MSG_DELTA] = equal_delta,
	[MSG_LIST] = equal_list,
	[MSG_MODULES] = equal_modules,
	[MSG_XATTRS] = equal_xattrs,
	[MSG_FILTER] = equal_filter,
	[MSG_DELETED] = equal_deleted,
	[MSG_SUMS] = equal_sums,
	[MSG_LIST_ATTRS] = equal_list_attrs,
	[MSG_ASSEMBLE] = equal_assemble,
	[MSG_ASSEMBLED] = equal_assembled,
	[MSG_LANE_DOWN] = equal_lane_down,
	[MSG_BENCH] = equal_bench,
	[MSG_RELAY] = equal_relay,
	[MSG_RELAY_RESULT] = equal_relay_result,
	[MSG_BYE] = equal_nothing,
};

void assert_msg_equal(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->type, b->type);
	if (a->type < sizeof(equals) / sizeof(equals[0]) && equals[a->type]) {
		equals[a->type](a, b);
	} else {
		fail();
	}
}

/* ---- round trips and raw payloads ----------------------------------------- */

void round_trip(const struct msg *m)
{
	struct msg d;
	size_t len = encode_ok(m);
	uint8_t *first = malloc(len ? len : 1);

	assert_non_null(first);
	memcpy(first, payload(), len);
	assert_int_equal(decode_copy(m->type, first, len, &d), 0);
	assert_msg_equal(m, &d);
	assert_int_equal(encode_ok(&d), len);
	assert_memory_equal(payload(), first, len);
	msg_clear(&d);
	assert_memory_equal(&d, &zero_msg, sizeof(d));
	free(first);
}

int decode_last_string_grown(uint16_t type, const uint8_t *p, size_t len, size_t slen)
{
	uint8_t *grown = malloc(len + 1);
	size_t at = len - slen - 2;
	int r;

	assert_non_null(grown);
	memcpy(grown, p, len);
	assert_int_equal((grown[at] << 8) | grown[at + 1], slen);
	grown[at] = (uint8_t)((slen + 1) >> 8);
	grown[at + 1] = (uint8_t)(slen + 1);
	grown[len] = 'x';
	r = decode_rc(type, grown, len + 1);
	free(grown);
	return r;
}

void put_file_raw(struct wbuf *w, const struct proto_file *f)
{
	wbuf_put_u32(w, f->id);
	wbuf_put_u8(w, f->ftype);
	wbuf_put_u32(w, f->mode);
	wbuf_put_u64(w, f->size);
	wbuf_put_u64(w, (uint64_t)f->mtime_sec);
	wbuf_put_u32(w, f->mtime_nsec);
	wbuf_put_u32(w, f->uid);
	wbuf_put_u32(w, f->gid);
	wbuf_put_str16(w, f->name, UINT16_MAX);
	wbuf_put_str16(w, f->link ? f->link : "", UINT16_MAX);
}

int decode_one_file_raw(const struct proto_file *f)
{
	static uint8_t buf[3 * PROTO_MAX_PATH];
	struct wbuf w;

	wbuf_init(&w, buf, sizeof(buf));
	wbuf_put_u16(&w, 1);
	put_file_raw(&w, f);
	assert_false(w.overflow);
	return decode_rc(MSG_FILES, buf, w.len);
}
