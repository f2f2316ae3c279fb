/* SPDX-License-Identifier: MIT */
/*
 * Control message encode/decode (see msg.h and docs/PROTOCOL.md). Decoders
 * check every count and length against its cap before allocating, refuse
 * trailing bytes, and free everything they allocated on failure.
 */
#include "msg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static const char *const type_names[] = {
	[MSG_HELLO] = "HELLO",
	[MSG_ERROR] = "ERROR",
	[MSG_OPEN] = "OPEN",
	[MSG_OPEN_OK] = "OPEN_OK",
	[MSG_RING] = "RING",
	[MSG_FILES] = "FILES",
	[MSG_FILES_ACK] = "FILES_ACK",
	[MSG_FILE_DONE] = "FILE_DONE",
	[MSG_FILE_RESULT] = "FILE_RESULT",
	[MSG_GET] = "GET",
	[MSG_END] = "END",
	[MSG_PING] = "PING",
	[MSG_PONG] = "PONG",
	[MSG_BYE] = "BYE",
	[MSG_ENTRY_FAILED] = "ENTRY_FAILED",
	[MSG_RESUME] = "RESUME",
	[MSG_LIST] = "LIST",
	[MSG_MODULES] = "MODULES",
	[MSG_XATTRS] = "XATTRS",
	[MSG_FILTER] = "FILTER",
	[MSG_DELETED] = "DELETED",
	[MSG_SUMS] = "SUMS",
	[MSG_LIST_ATTRS] = "LIST_ATTRS",
	[MSG_ZEROS] = "ZEROS",
	[MSG_BENCH] = "BENCH",
	[MSG_DELTA] = "DELTA",
	[MSG_ASSEMBLE] = "ASSEMBLE",
	[MSG_ASSEMBLED] = "ASSEMBLED",
	[MSG_LANE_DOWN] = "LANE_DOWN",
};

static const char *const err_names[] = {
	[PERR_OK] = "OK",
	[PERR_PROTOCOL] = "PROTOCOL",
	[PERR_VERSION] = "VERSION_MISMATCH",
	[PERR_AUTH] = "AUTH",
	[PERR_NO_MODULE] = "NO_MODULE",
	[PERR_PERMISSION] = "PERMISSION",
	[PERR_BAD_PATH] = "BAD_PATH",
	[PERR_IO] = "IO",
	[PERR_NOSPACE] = "NOSPACE",
	[PERR_INTEGRITY] = "INTEGRITY",
	[PERR_BUSY] = "BUSY",
	[PERR_TRANSPORT] = "TRANSPORT",
	[PERR_SHUTDOWN] = "SHUTDOWN",
	[PERR_TIMEOUT] = "TIMEOUT",
	[PERR_SOURCE_CHANGED] = "SOURCE_CHANGED",
	[PERR_NOT_FOUND] = "NOT_FOUND",
	[PERR_INTERNAL] = "INTERNAL",
	[PERR_DUPLICATE] = "DUPLICATE",
	[PERR_SKIPPED] = "SKIPPED",
	[PERR_SUM_WANTED] = "SUM_WANTED",
	[PERR_DEVICE_REFUSED] = "DEVICE_REFUSED",
	[PERR_DEVICE_BUSY] = "DEVICE_BUSY",
	[PERR_DEVICE_SMALL] = "DEVICE_SMALL",
	[PERR_ENCRYPTION] = "ENCRYPTION",
	[PERR_ASSEMBLY] = "ASSEMBLY",
};

const char *proto_type_name(uint16_t type)
{
	if (type < ARRAY_LEN(type_names) && type_names[type]) {
		return type_names[type];
	}
	return "UNKNOWN";
}

uint32_t proto_err_for_peer(uint32_t code, uint64_t peer_caps)
{
	if (code == PERR_ASSEMBLY && !(peer_caps & PROTO_CAP_ASSEMBLE)) {
		return PERR_INTEGRITY;
	}
	if (peer_caps & PROTO_CAP_DEVICES) {
		return code;
	}
	switch (code) {
	case PERR_DEVICE_REFUSED:
		return PERR_PERMISSION;
	case PERR_DEVICE_BUSY:
		return PERR_BUSY;
	case PERR_DEVICE_SMALL:
		return PERR_NOSPACE;
	default:
		return code;
	}
}

void proto_itemize(char out[12], char y, uint8_t ftype, uint32_t items)
{
	bool link = ftype == PROTO_FT_SYMLINK;

	out[0] = y;
	out[1] = ftype == PROTO_FT_DIR ? 'd' : link ? 'L' : 'f';
	if (items & PROTO_ITEM_NEW) {
		memcpy(out + 2, "+++++++++", 10);
		return;
	}
	memcpy(out + 2, ".........", 10);
	if ((items & PROTO_ITEM_CHECKSUM) || (link && (items & PROTO_ITEM_CONTENT))) {
		out[2] = 'c';
	}
	out[3] = (items & PROTO_ITEM_SIZE) ? 's' : '.';
	out[4] = (items & PROTO_ITEM_TIME) ? 't' : '.';
	out[5] = (items & PROTO_ITEM_PERMS) ? 'p' : '.';
	out[6] = (items & PROTO_ITEM_OWNER) ? 'o' : '.';
	out[7] = (items & PROTO_ITEM_GROUP) ? 'g' : '.';
}

const char *proto_err_name(uint32_t code)
{
	if (code < ARRAY_LEN(err_names) && err_names[code]) {
		return err_names[code];
	}
	return "UNKNOWN";
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
	if (h.type == 0 || h.type > MSG_TYPE_MAX || !type_names[h.type]) {
		*ret = h;
		return -ENOMSG;
	}
	*ret = h;
	return 0;
}

void proto_desc_encode(const struct proto_desc *d, uint8_t out[PROTO_DESC_LEN])
{
	struct wbuf w;

	wbuf_init(&w, out, PROTO_DESC_LEN);
	wbuf_put_u32(&w, d->file_id);
	wbuf_put_u32(&w, d->len);
	wbuf_put_u64(&w, d->offset);
	wbuf_put_u64(&w, d->seq);
	wbuf_put_u32(&w, d->file_id == 0 ? d->pieces : 0);
	wbuf_put_u32(&w, 0);
}

int proto_desc_decode(const uint8_t in[PROTO_DESC_LEN], struct proto_desc *ret)
{
	struct rbuf r;
	struct proto_desc d;

	rbuf_init(&r, in, PROTO_DESC_LEN);
	d.file_id = rbuf_get_u32(&r);
	d.len = rbuf_get_u32(&r);
	d.offset = rbuf_get_u64(&r);
	d.seq = rbuf_get_u64(&r);
	d.pieces = rbuf_get_u32(&r);
	if (r.error || rbuf_get_u32(&r) != 0) {
		return -EBADMSG;
	}
	/* Packed: at least one piece of one byte and its table entry; else no pieces. */
	if (d.file_id == 0 ? d.pieces == 0 || d.pieces > PROTO_MAX_PIECES || d.offset != 0 ||
				 d.len / (PROTO_PIECE_LEN + 1) < d.pieces
			   : d.pieces != 0) {
		return -EBADMSG;
	}
	*ret = d;
	return 0;
}

void proto_piece_encode(const struct proto_piece *pc, uint8_t out[PROTO_PIECE_LEN])
{
	struct wbuf w;

	wbuf_init(&w, out, PROTO_PIECE_LEN);
	wbuf_put_u32(&w, pc->id);
	wbuf_put_u32(&w, pc->len);
}

int proto_pieces_decode(const uint8_t *slot, const struct proto_desc *d, struct proto_piece *out)
{
	uint32_t table = d->len - d->pieces * PROTO_PIECE_LEN, at = 0;
	struct rbuf r;

	if (d->file_id != 0 || d->pieces == 0 || d->pieces > PROTO_MAX_PIECES ||
	    d->len / (PROTO_PIECE_LEN + 1) < d->pieces) {
		return -EBADMSG;
	}
	rbuf_init(&r, slot + table, (size_t)d->pieces * PROTO_PIECE_LEN);
	for (uint32_t i = 0; i < d->pieces; i++) {
		out[i].id = rbuf_get_u32(&r);
		out[i].len = rbuf_get_u32(&r);
		out[i].at = at;
		if (out[i].id == 0 || out[i].len == 0 || out[i].len > table - at) {
			return -EBADMSG;
		}
		at += out[i].len;
	}
	return r.error || at != table ? -EBADMSG : 0;
}

/* ---- encoders ---------------------------------------------------------- */

static void enc_file(struct wbuf *w, const struct proto_file *f)
{
	wbuf_put_u32(w, f->id);
	wbuf_put_u8(w, f->ftype);
	wbuf_put_u32(w, f->mode);
	wbuf_put_u64(w, f->size);
	wbuf_put_u64(w, (uint64_t)f->mtime_sec);
	wbuf_put_u32(w, f->mtime_nsec);
	wbuf_put_u32(w, f->uid);
	wbuf_put_u32(w, f->gid);
	wbuf_put_str16(w, f->name, PROTO_MAX_PATH);
	wbuf_put_str16(w,
		       f->ftype == PROTO_FT_SYMLINK || f->ftype == PROTO_FT_HARDLINK ? f->link : "",
		       PROTO_MAX_PATH);
}

_Static_assert(PROTO_LATTR_XATTRS == 1u << PROTO_LATTR_DIGEST_XATTRS &&
		   PROTO_LATTR_PRIVILEGED == 1u << PROTO_LATTR_DIGEST_PRIVILEGED &&
		   PROTO_LATTR_ACLS == 1u << PROTO_LATTR_DIGEST_ACLS,
	       "a digest's field bit is its index");

/* LIST_ATTRS fields: some, known, PRIVILEGED only with XATTRS. */
static bool list_attrs_fields_ok(uint8_t fields)
{
	return fields != 0 && (fields & ~PROTO_LATTR_KNOWN) == 0 &&
	       (!(fields & PROTO_LATTR_PRIVILEGED) || (fields & PROTO_LATTR_XATTRS));
}

/* A LIST_ATTRS record's length on the wire: what fields says it carries. */
static size_t list_attrs_entry_len(uint8_t fields)
{
	return 4 + 4 + PROTO_HASH_LEN * (size_t)__builtin_popcount(fields & 0x7u) +
	       (fields & PROTO_LATTR_LINKS ? 8 : 0);
}

static int enc_list_attrs(struct wbuf *w, const struct msg_list_attrs *la)
{
	if (la->count > PROTO_MAX_BATCH || !list_attrs_fields_ok(la->fields)) {
		return -EMSGSIZE;
	}
	wbuf_put_u8(w, la->fields);
	wbuf_put_u8(w, 0);
	wbuf_put_u16(w, la->count);
	for (size_t i = 0; i < la->count; i++) {
		const struct proto_entry_attrs *e = &la->ents[i];

		wbuf_put_u32(w, e->id);
		wbuf_put_u32(w, e->status);
		for (unsigned k = 0; k < PROTO_LATTR_DIGESTS; k++) {
			if (la->fields & (1u << k)) {
				wbuf_put_bytes(w, e->digest[k], PROTO_HASH_LEN);
			}
		}
		if (la->fields & PROTO_LATTR_LINKS) {
			wbuf_put_u64(w, e->link_group);
		}
	}
	return 0;
}

bool proto_xattr_name_ok(const char *name)
{
	static const char *const prefixes[] = { "user.", "security.", "trusted." };
	size_t n = strlen(name);

	if (n > PROTO_MAX_XATTR_NAME) {
		return false;
	}
	for (size_t i = 0; i < ARRAY_LEN(prefixes); i++) {
		size_t k = strlen(prefixes[i]);

		if (n > k && strncmp(name, prefixes[i], k) == 0) {
			return true;
		}
	}
	return strcmp(name, "system.posix_acl_access") == 0 ||
	       strcmp(name, "system.posix_acl_default") == 0;
}

static int enc_xattrs(struct wbuf *w, const struct msg_xattrs *x)
{
	if (x->count > PROTO_MAX_XATTRS) {
		return -EMSGSIZE;
	}
	wbuf_put_u32(w, x->id);
	wbuf_put_u16(w, x->count);
	for (size_t i = 0; i < x->count; i++) {
		if (x->x[i].len > PROTO_MAX_XATTR_VALUE) {
			return -EMSGSIZE;
		}
		wbuf_put_str16(w, x->x[i].name, PROTO_MAX_XATTR_NAME);
		wbuf_put_u32(w, x->x[i].len);
		wbuf_put_bytes(w, x->x[i].value, x->x[i].len);
	}
	return 0;
}

static int enc_delta(struct wbuf *w, const struct msg_delta *d)
{
	if (d->count == 0 || (d->kind == PROTO_DELTA_SUMS && d->count > PROTO_MAX_DELTA_SUMS) ||
	    (d->kind == PROTO_DELTA_SAME && d->count > PROTO_MAX_RESUME_RANGES) ||
	    (d->kind != PROTO_DELTA_SUMS && d->kind != PROTO_DELTA_SAME) ||
	    (d->flags & ~PROTO_DELTA_FLAGS_KNOWN) || (d->kind != PROTO_DELTA_SUMS && d->flags)) {
		return -EMSGSIZE;
	}
	wbuf_put_u32(w, d->id);
	wbuf_put_u8(w, d->kind);
	wbuf_put_u8(w, d->flags);
	wbuf_put_u16(w, d->count);
	if (d->kind == PROTO_DELTA_SUMS) {
		wbuf_put_u64(w, d->first);
		for (size_t i = 0; i < d->count; i++) {
			wbuf_put_bytes(w, d->sums[i], PROTO_HASH_LEN);
		}
		return 0;
	}
	for (size_t i = 0; i < d->count; i++) {
		wbuf_put_u64(w, d->r[i].offset);
		wbuf_put_u64(w, d->r[i].len);
	}
	return 0;
}

static int enc_assemble(struct wbuf *w, const struct msg_assemble *a)
{
	if (a->count == 0 || a->count > PROTO_MAX_PARTS || !a->path || !a->name || !a->staging) {
		return -EMSGSIZE;
	}
	wbuf_put_u32(w, a->flags);
	wbuf_put_str16(w, a->path, PROTO_MAX_PATH);
	wbuf_put_str16(w, a->name, PROTO_MAX_PATH);
	wbuf_put_str16(w, a->staging, PROTO_MAX_PATH);
	wbuf_put_u32(w, a->mode);
	wbuf_put_u64(w, (uint64_t)a->mtime_sec);
	wbuf_put_u32(w, a->mtime_nsec);
	wbuf_put_u32(w, a->uid);
	wbuf_put_u32(w, a->gid);
	wbuf_put_u64(w, a->size);
	wbuf_put_u16(w, a->count);
	for (size_t i = 0; i < a->count; i++) {
		wbuf_put_str16(w, a->parts[i].name, PROTO_MAX_PART_NAME);
		wbuf_put_u64(w, a->parts[i].offset);
		wbuf_put_u64(w, a->parts[i].len);
		wbuf_put_bytes(w, a->parts[i].hash, PROTO_HASH_LEN);
	}
	return 0;
}

static int enc_payload(const struct msg *m, struct wbuf *w)
{
	switch (m->type) {
	case MSG_HELLO:
		wbuf_put_u16(w, m->u.hello.min_version);
		wbuf_put_u16(w, m->u.hello.max_version);
		wbuf_put_u64(w, m->u.hello.caps);
		wbuf_put_str16(w, m->u.hello.software, PROTO_MAX_TEXT);
		break;
	case MSG_ERROR:
		wbuf_put_u32(w, m->u.error.code);
		wbuf_put_str16(w, m->u.error.text, PROTO_MAX_TEXT);
		break;
	case MSG_OPEN:
		wbuf_put_u8(w, m->u.open.direction);
		wbuf_put_u8(w, m->u.open.transport);
		wbuf_put_u8(w, m->u.open.lanes);
		wbuf_put_u8(w, 0);
		wbuf_put_u32(w, m->u.open.flags);
		wbuf_put_u32(w, m->u.open.chunk_size);
		wbuf_put_u32(w, m->u.open.slots);
		wbuf_put_str16(w, m->u.open.path, PROTO_MAX_PATH);
		if (m->u.open.flags & PROTO_OPEN_DELETE) {
			wbuf_put_u64(w, m->u.open.max_delete);
		}
		if (m->u.open.flags & PROTO_OPEN_ENCRYPT) {
			wbuf_put_u8(w, m->u.open.encrypt);
		}
		break;
	case MSG_OPEN_OK:
		wbuf_put_u8(w, m->u.open_ok.transport);
		wbuf_put_u8(w, m->u.open_ok.lanes);
		wbuf_put_u16(w, m->u.open_ok.data_port);
		wbuf_put_u32(w, m->u.open_ok.chunk_size);
		wbuf_put_u32(w, m->u.open_ok.slots);
		wbuf_put_bytes(w, m->u.open_ok.token, PROTO_TOKEN_LEN);
		/* Only in answer to an OPEN with PROTO_OPEN_ENCRYPT: older clients know no more. */
		if (m->u.open_ok.lanes_sealed || m->u.open_ok.nrails) {
			wbuf_put_u8(w, m->u.open_ok.lanes_sealed ? m->u.open_ok.lanes_sealed
								 : PROTO_LANES_CLEAR);
		}
		/* Daemon rails: only to a client with PROTO_CAP_DAEMON_RAILS. */
		if (m->u.open_ok.nrails) {
			const struct proto_rail *rl = m->u.open_ok.rails;

			if (m->u.open_ok.nrails > PROTO_MAX_RAILS) {
				return -EINVAL;
			}
			wbuf_put_u8(w, m->u.open_ok.nrails);
			for (unsigned i = 0; i < m->u.open_ok.nrails; i++) {
				wbuf_put_u8(w, rl[i].family);
				wbuf_put_bytes(w, rl[i].addr,
					       rl[i].family == PROTO_RAIL_INET6 ? 16 : 4);
				wbuf_put_u16(w, rl[i].port);
			}
		}
		break;
	case MSG_RING:
		wbuf_put_u64(w, m->u.ring.addr);
		wbuf_put_u64(w, m->u.ring.desc_addr);
		wbuf_put_u32(w, m->u.ring.slots);
		wbuf_put_u32(w, m->u.ring.slot_size);
		if (m->u.ring.nkeys == 0 || m->u.ring.nkeys > PROTO_MAX_LANES) {
			return -EINVAL;
		}
		wbuf_put_u8(w, m->u.ring.nkeys);
		for (unsigned i = 0; i < m->u.ring.nkeys; i++) {
			wbuf_put_u32(w, m->u.ring.rkey[i]);
		}
		break;
	case MSG_FILES:
		if (m->u.files.count > PROTO_MAX_BATCH) {
			return -EMSGSIZE;
		}
		wbuf_put_u16(w, m->u.files.count);
		for (size_t i = 0; i < m->u.files.count; i++) {
			enc_file(w, &m->u.files.files[i]);
		}
		break;
	case MSG_FILES_ACK:
		if (m->u.files_ack.count > PROTO_MAX_BATCH) {
			return -EMSGSIZE;
		}
		wbuf_put_u16(w, m->u.files_ack.count);
		for (size_t i = 0; i < m->u.files_ack.count; i++) {
			const struct proto_status *s = &m->u.files_ack.st[i];

			if (s->items && (s->status > 0xffffu || (s->items & ~PROTO_ITEMS_KNOWN))) {
				return -EINVAL;
			}
			wbuf_put_u32(w, s->id);
			wbuf_put_u32(w, s->status | s->items << 16);
			wbuf_put_str16(w, m->u.files_ack.st[i].text, PROTO_MAX_TEXT);
		}
		break;
	case MSG_FILE_DONE:
		wbuf_put_u32(w, m->u.file_done.id);
		wbuf_put_u32(w, m->u.file_done.status);
		wbuf_put_u64(w, m->u.file_done.bytes);
		wbuf_put_bytes(w, m->u.file_done.hash, PROTO_HASH_LEN);
		wbuf_put_str16(w, m->u.file_done.text, PROTO_MAX_TEXT);
		break;
	case MSG_FILE_RESULT:
		wbuf_put_u32(w, m->u.file_result.id);
		wbuf_put_u32(w, m->u.file_result.status);
		wbuf_put_str16(w, m->u.file_result.text, PROTO_MAX_TEXT);
		break;
	case MSG_GET:
		if (m->u.get.count > PROTO_MAX_BATCH) {
			return -EMSGSIZE;
		}
		wbuf_put_u16(w, m->u.get.count);
		for (size_t i = 0; i < m->u.get.count; i++) {
			wbuf_put_str16(w, m->u.get.paths[i], PROTO_MAX_PATH);
		}
		break;
	case MSG_END:
		wbuf_put_u32(w, m->u.end.files);
		wbuf_put_u64(w, m->u.end.bytes);
		break;
	case MSG_PING:
	case MSG_PONG:
		wbuf_put_u64(w, m->u.ping.nonce);
		break;
	case MSG_BYE:
		break;
	case MSG_BENCH:
		wbuf_put_u8(w, m->u.bench.transport);
		wbuf_put_u8(w, m->u.bench.lanes);
		wbuf_put_u8(w, m->u.bench.encrypt);
		wbuf_put_u8(w, 0);
		wbuf_put_u32(w, m->u.bench.chunk_size);
		wbuf_put_u32(w, m->u.bench.slots);
		wbuf_put_u64(w, m->u.bench.bytes);
		wbuf_put_u64(w, m->u.bench.seed);
		break;
	case MSG_XATTRS:
		return enc_xattrs(w, &m->u.xattrs);
	case MSG_ENTRY_FAILED:
		wbuf_put_u32(w, m->u.entry_failed.status);
		wbuf_put_str16(w, m->u.entry_failed.name, PROTO_MAX_PATH);
		wbuf_put_str16(w, m->u.entry_failed.text, PROTO_MAX_TEXT);
		break;
	case MSG_RESUME:
	case MSG_ZEROS: /* the same layout (struct msg_resume) */
		if (m->u.resume.count > PROTO_MAX_RESUME_RANGES) {
			return -EMSGSIZE;
		}
		wbuf_put_u32(w, m->u.resume.id);
		wbuf_put_u16(w, m->u.resume.count);
		for (size_t i = 0; i < m->u.resume.count; i++) {
			wbuf_put_u64(w, m->u.resume.r[i].offset);
			wbuf_put_u64(w, m->u.resume.r[i].len);
		}
		break;
	case MSG_DELTA:
		return enc_delta(w, &m->u.delta);
	case MSG_ASSEMBLE:
		return enc_assemble(w, &m->u.assemble);
	case MSG_ASSEMBLED:
		wbuf_put_u64(w, m->u.assembled.size);
		break;
	case MSG_LANE_DOWN:
		if (m->u.lane_down.lane >= PROTO_MAX_LANES) {
			return -EMSGSIZE;
		}
		wbuf_put_u8(w, m->u.lane_down.lane);
		wbuf_put_u8(w, 0);
		wbuf_put_u16(w, 0);
		wbuf_put_u64(w, m->u.lane_down.count);
		break;
	case MSG_LIST:
		wbuf_put_u32(w, m->u.list.flags);
		wbuf_put_str16(w, m->u.list.path, PROTO_MAX_PATH);
		break;
	case MSG_SUMS:
		if (m->u.sums.count > PROTO_MAX_BATCH) {
			return -EMSGSIZE;
		}
		wbuf_put_u16(w, m->u.sums.count);
		for (size_t i = 0; i < m->u.sums.count; i++) {
			wbuf_put_u32(w, m->u.sums.sums[i].id);
			wbuf_put_u32(w, m->u.sums.sums[i].status);
			wbuf_put_bytes(w, m->u.sums.sums[i].hash, PROTO_HASH_LEN);
		}
		break;
	case MSG_LIST_ATTRS:
		return enc_list_attrs(w, &m->u.list_attrs);
	case MSG_MODULES:
		if (m->u.modules.count > PROTO_MAX_BATCH) {
			return -EMSGSIZE;
		}
		wbuf_put_u16(w, m->u.modules.count);
		for (size_t i = 0; i < m->u.modules.count; i++) {
			wbuf_put_u8(w, m->u.modules.mods[i].flags);
			wbuf_put_str16(w, m->u.modules.mods[i].name, PROTO_MAX_MODNAME);
			wbuf_put_str16(w, m->u.modules.mods[i].comment, PROTO_MAX_TEXT);
		}
		break;
	case MSG_FILTER:
		if (m->u.filter.count > PROTO_MAX_FILTERS) {
			return -EMSGSIZE;
		}
		wbuf_put_u16(w, m->u.filter.count);
		for (size_t i = 0; i < m->u.filter.count; i++) {
			wbuf_put_u8(w, m->u.filter.rules[i].action);
			wbuf_put_str16(w, m->u.filter.rules[i].pattern, PROTO_MAX_PATH);
		}
		break;
	case MSG_DELETED:
		if (m->u.deleted.count > PROTO_MAX_BATCH) {
			return -EMSGSIZE;
		}
		wbuf_put_u8(w, m->u.deleted.flags);
		wbuf_put_u16(w, m->u.deleted.count);
		for (size_t i = 0; i < m->u.deleted.count; i++) {
			const struct proto_deleted *d = &m->u.deleted.ents[i];

			wbuf_put_u8(w, d->what);
			wbuf_put_u8(w, d->ftype);
			wbuf_put_u32(w, d->code);
			wbuf_put_str16(w, d->name, PROTO_MAX_PATH);
			wbuf_put_str16(w, d->text ? d->text : "", PROTO_MAX_TEXT);
		}
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

int msg_encode(const struct msg *m, uint8_t *buf, size_t cap)
{
	struct wbuf w;
	size_t max = cap;
	int r;

	if (cap < PROTO_HDR_LEN) {
		return -EMSGSIZE;
	}
	if (max > PROTO_HDR_LEN + (size_t)PROTO_MAX_PAYLOAD) {
		max = PROTO_HDR_LEN + (size_t)PROTO_MAX_PAYLOAD;
	}
	wbuf_init(&w, buf + PROTO_HDR_LEN, max - PROTO_HDR_LEN);
	r = enc_payload(m, &w);
	if (r < 0) {
		return r;
	}
	if (w.overflow) {
		return -EMSGSIZE;
	}
	proto_hdr_encode(m->type, (uint32_t)w.len, buf);
	return (int)(PROTO_HDR_LEN + w.len);
}

/* ---- decoders ---------------------------------------------------------- */

/* Read a str16 into a fresh allocation, checking the cap before malloc. */
static char *dec_str_alloc(struct rbuf *r, size_t max)
{
	uint16_t n = rbuf_get_u16(r);
	char *s;

	if (r->error || n > max || n > rbuf_left(r)) {
		r->error = true;
		return NULL;
	}
	if (memchr(r->buf + r->pos, '\0', n)) {
		r->error = true;
		return NULL;
	}
	s = malloc((size_t)n + 1);
	if (!s) {
		r->error = true;
		return NULL;
	}
	memcpy(s, r->buf + r->pos, n);
	s[n] = '\0';
	r->pos += n;
	return s;
}

/* Smallest encoding of one FILES entry: fixed fields + two empty strings. */
#define FILE_ENTRY_MIN	(4 + 1 + 4 + 8 + 8 + 4 + 4 + 4 + 2 + 2)
#define ACK_ENTRY_MIN	(4 + 4 + 2)
#define GET_ENTRY_MIN	2
#define MOD_ENTRY_MIN	(1 + 2 + 2)
#define FILTER_RULE_MIN (1 + 2 + 1)
#define DEL_ENTRY_MIN	(1 + 1 + 4 + 2 + 2)
#define SUM_ENTRY_LEN	(4 + 4 + PROTO_HASH_LEN)

/*
 * A hard link's first name: relative, no empty, "." or ".." component (the
 * receiver checks it again as it checks every name).
 */
static bool rel_name_ok(const char *s)
{
	const char *p = s;

	if (s[0] == '\0' || s[0] == '/') {
		return false;
	}
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
			return false;
		}
		if (!slash) {
			return true;
		}
		p = slash + 1;
	}
}

static int dec_files(struct rbuf *r, struct msg_files *f)
{
	uint16_t count = rbuf_get_u16(r);

	if (r->error || count > PROTO_MAX_BATCH || (size_t)count * FILE_ENTRY_MIN > rbuf_left(r)) {
		return -EBADMSG;
	}
	f->count = 0;
	f->files = calloc(count ? count : 1, sizeof(*f->files));
	if (!f->files) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < count; i++) {
		struct proto_file *e = &f->files[i];

		e->id = rbuf_get_u32(r);
		e->ftype = rbuf_get_u8(r);
		e->mode = rbuf_get_u32(r);
		e->size = rbuf_get_u64(r);
		e->mtime_sec = (int64_t)rbuf_get_u64(r);
		e->mtime_nsec = rbuf_get_u32(r);
		e->uid = rbuf_get_u32(r);
		e->gid = rbuf_get_u32(r);
		f->count = (uint16_t)(i + 1); /* so msg_clear frees this entry */
		e->name = dec_str_alloc(r, PROTO_MAX_PATH);
		e->link = dec_str_alloc(r, PROTO_MAX_PATH);
		if (r->error) {
			return -EBADMSG;
		}
		bool has_link = e->ftype == PROTO_FT_SYMLINK || e->ftype == PROTO_FT_HARDLINK;

		if (e->ftype < PROTO_FT_REG || e->ftype > PROTO_FT_HARDLINK ||
		    (e->mode & ~07777u) != 0 || e->mtime_nsec >= 1000000000u ||
		    (!has_link && e->link[0] != '\0') || (has_link && e->link[0] == '\0') ||
		    (e->ftype == PROTO_FT_HARDLINK && !rel_name_ok(e->link)) ||
		    (e->ftype != PROTO_FT_REG && e->size != 0) || (e->size > (uint64_t)INT64_MAX)) {
			return -EBADMSG;
		}
		if (!has_link) {
			free(e->link);
			e->link = NULL;
		}
	}
	return 0;
}

#define XATTR_ENTRY_MIN (2 + 1 + 4)

static int dec_xattrs(struct rbuf *r, struct msg_xattrs *x)
{
	uint16_t count;

	x->id = rbuf_get_u32(r);
	count = rbuf_get_u16(r);
	if (r->error || count > PROTO_MAX_XATTRS ||
	    (size_t)count * XATTR_ENTRY_MIN > rbuf_left(r)) {
		return -EBADMSG;
	}
	x->count = 0;
	x->x = calloc(count ? count : 1, sizeof(*x->x));
	if (!x->x) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < count; i++) {
		struct proto_xattr *a = &x->x[i];

		x->count = (uint16_t)(i + 1); /* so msg_clear frees this entry */
		a->name = dec_str_alloc(r, PROTO_MAX_XATTR_NAME);
		a->len = rbuf_get_u32(r);
		if (r->error || !proto_xattr_name_ok(a->name) || a->len > PROTO_MAX_XATTR_VALUE ||
		    a->len > rbuf_left(r)) {
			return -EBADMSG;
		}
		a->value = malloc(a->len ? a->len : 1);
		if (!a->value) {
			return -ENOMEM;
		}
		rbuf_get_bytes(r, a->value, a->len);
	}
	return r->error ? -EBADMSG : 0;
}

static int dec_files_ack(struct rbuf *r, struct msg_files_ack *a)
{
	uint16_t count = rbuf_get_u16(r);

	if (r->error || count > PROTO_MAX_BATCH || (size_t)count * ACK_ENTRY_MIN > rbuf_left(r)) {
		return -EBADMSG;
	}
	a->count = 0;
	a->st = calloc(count ? count : 1, sizeof(*a->st));
	if (!a->st) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < count; i++) {
		uint32_t word;

		a->st[i].id = rbuf_get_u32(r);
		word = rbuf_get_u32(r);
		/* The code, and what differs (PROTO_CAP_ITEMIZE; 0 from older peers). */
		a->st[i].status = word & 0xffffu;
		a->st[i].items = word >> 16;
		a->count = (uint16_t)(i + 1);
		a->st[i].text = dec_str_alloc(r, PROTO_MAX_TEXT);
		if (r->error || a->st[i].status > PERR_MAX ||
		    (a->st[i].items & ~PROTO_ITEMS_KNOWN)) {
			return -EBADMSG;
		}
	}
	return 0;
}

static int dec_get(struct rbuf *r, struct msg_get *g)
{
	uint16_t count = rbuf_get_u16(r);

	if (r->error || count == 0 || count > PROTO_MAX_BATCH ||
	    (size_t)count * GET_ENTRY_MIN > rbuf_left(r)) {
		return -EBADMSG;
	}
	g->count = 0;
	g->paths = calloc(count, sizeof(*g->paths));
	if (!g->paths) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < count; i++) {
		g->count = (uint16_t)(i + 1);
		g->paths[i] = dec_str_alloc(r, PROTO_MAX_PATH);
		if (r->error) {
			return -EBADMSG;
		}
	}
	return 0;
}

static int dec_modules(struct rbuf *r, struct msg_modules *md)
{
	uint16_t count = rbuf_get_u16(r);

	if (r->error || count > PROTO_MAX_BATCH || (size_t)count * MOD_ENTRY_MIN > rbuf_left(r)) {
		return -EBADMSG;
	}
	md->count = 0;
	md->mods = calloc(count ? count : 1, sizeof(*md->mods));
	if (!md->mods) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < count; i++) {
		struct proto_module *e = &md->mods[i];

		e->flags = rbuf_get_u8(r);
		md->count = (uint16_t)(i + 1); /* so msg_clear frees this entry */
		e->name = dec_str_alloc(r, PROTO_MAX_MODNAME);
		e->comment = dec_str_alloc(r, PROTO_MAX_TEXT);
		if (r->error) {
			return -EBADMSG;
		}
		/* Read only and write only together would leave nothing to do. */
		if ((e->flags & ~PROTO_MOD_FLAGS_KNOWN) != 0 ||
		    e->flags == (PROTO_MOD_READ_ONLY | PROTO_MOD_WRITE_ONLY) ||
		    e->name[0] == '\0' || strchr(e->name, '/')) {
			return -EBADMSG;
		}
	}
	return 0;
}

static int dec_filter(struct rbuf *r, struct msg_filter *f)
{
	uint16_t count = rbuf_get_u16(r);
	size_t bytes = 0;

	if (r->error || count == 0 || count > PROTO_MAX_FILTERS ||
	    (size_t)count * FILTER_RULE_MIN > rbuf_left(r)) {
		return -EBADMSG;
	}
	f->count = 0;
	f->rules = calloc(count, sizeof(*f->rules));
	if (!f->rules) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < count; i++) {
		struct proto_filter_rule *e = &f->rules[i];

		e->action = rbuf_get_u8(r);
		f->count = (uint16_t)(i + 1); /* so msg_clear frees this entry */
		e->pattern = dec_str_alloc(r, PROTO_MAX_PATH);
		if (r->error) {
			return -EBADMSG;
		}
		bytes += strlen(e->pattern);
		if ((e->action != PROTO_FILTER_INCLUDE && e->action != PROTO_FILTER_EXCLUDE) ||
		    e->pattern[0] == '\0' || bytes > PROTO_MAX_FILTER_BYTES) {
			return -EBADMSG;
		}
	}
	return 0;
}

/*
 * Each entry: what, a code only for a failure (and then not OK or SKIPPED),
 * a name (never empty), a text only for a failure. Nothing else is allowed.
 */
static int dec_deleted(struct rbuf *r, struct msg_deleted *md)
{
	uint16_t count;

	md->flags = rbuf_get_u8(r);
	count = rbuf_get_u16(r);
	if (r->error || (md->flags & ~PROTO_DELETED_FLAGS_KNOWN) || count > PROTO_MAX_BATCH ||
	    (size_t)count * DEL_ENTRY_MIN > rbuf_left(r) ||
	    ((md->flags & PROTO_DELETED_SUPPRESSED) && count != 0)) {
		return -EBADMSG;
	}
	md->count = 0;
	md->ents = calloc(count ? count : 1, sizeof(*md->ents));
	if (!md->ents) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < count; i++) {
		struct proto_deleted *d = &md->ents[i];
		bool failed;

		d->what = rbuf_get_u8(r);
		d->ftype = rbuf_get_u8(r);
		d->code = rbuf_get_u32(r);
		md->count = (uint16_t)(i + 1); /* so msg_clear frees this entry */
		d->name = dec_str_alloc(r, PROTO_MAX_PATH);
		d->text = dec_str_alloc(r, PROTO_MAX_TEXT);
		if (r->error) {
			return -EBADMSG;
		}
		failed = d->what == PROTO_DEL_FAILED;
		if (d->what < PROTO_DEL_DELETED || d->what > PROTO_DEL_FAILED ||
		    d->ftype > PROTO_FT_SYMLINK || d->name[0] == '\0' ||
		    (failed && (d->code == PERR_OK || d->code == PERR_SKIPPED ||
				d->code == PERR_SUM_WANTED || d->code > PERR_MAX)) ||
		    (!failed && (d->code != PERR_OK || d->text[0] != '\0'))) {
			return -EBADMSG;
		}
	}
	return 0;
}

/*
 * SUMS: fixed-size entries, exactly count of them; a digest only with
 * PERR_OK (otherwise all zero), a failure status otherwise (never SKIPPED).
 */
/* A lane the session can have, reserved bytes zero; the count is the engine's to check. */
static int dec_lane_down(struct rbuf *r, struct msg_lane_down *ld)
{
	uint8_t lane = rbuf_get_u8(r);
	uint8_t res8 = rbuf_get_u8(r);
	uint16_t res16 = rbuf_get_u16(r);

	ld->count = rbuf_get_u64(r);
	if (r->error || lane >= PROTO_MAX_LANES || res8 != 0 || res16 != 0) {
		return -EBADMSG;
	}
	ld->lane = lane;
	return 0;
}

/* One LIST_ATTRS record: a digest only with PERR_OK (else all zero), never SKIPPED. */
static int dec_entry_attrs(struct rbuf *r, uint8_t fields, struct proto_entry_attrs *e)
{
	static const uint8_t zero[PROTO_HASH_LEN];

	e->id = rbuf_get_u32(r);
	e->status = rbuf_get_u32(r);
	for (unsigned k = 0; k < PROTO_LATTR_DIGESTS; k++) {
		if (fields & (1u << k)) {
			rbuf_get_bytes(r, e->digest[k], PROTO_HASH_LEN);
		}
		if (e->status != PERR_OK && memcmp(e->digest[k], zero, PROTO_HASH_LEN) != 0) {
			return -EBADMSG;
		}
	}
	if (fields & PROTO_LATTR_LINKS) {
		e->link_group = rbuf_get_u64(r);
	}
	if (r->error || e->id == 0 || e->status > PERR_MAX || e->status == PERR_SKIPPED ||
	    e->status == PERR_SUM_WANTED) {
		return -EBADMSG;
	}
	return 0;
}

/* LIST_ATTRS: known fields, fixed-size records, exactly count of them. */
static int dec_list_attrs(struct rbuf *r, struct msg_list_attrs *la)
{
	uint8_t fields = rbuf_get_u8(r), reserved = rbuf_get_u8(r);
	uint16_t count = rbuf_get_u16(r);

	if (r->error || reserved != 0 || !list_attrs_fields_ok(fields) || count > PROTO_MAX_BATCH ||
	    (size_t)count * list_attrs_entry_len(fields) != rbuf_left(r)) {
		return -EBADMSG;
	}
	la->ents = calloc(count ? count : 1, sizeof(*la->ents));
	if (!la->ents) {
		return -ENOMEM;
	}
	la->fields = fields;
	la->count = count;
	for (size_t i = 0; i < count; i++) {
		if (dec_entry_attrs(r, fields, &la->ents[i]) < 0) {
			return -EBADMSG;
		}
	}
	return 0;
}

static int dec_sums(struct rbuf *r, struct msg_sums *ms)
{
	static const uint8_t zero[PROTO_HASH_LEN];
	uint16_t count = rbuf_get_u16(r);

	if (r->error || count > PROTO_MAX_BATCH || (size_t)count * SUM_ENTRY_LEN != rbuf_left(r)) {
		return -EBADMSG;
	}
	ms->count = 0;
	ms->sums = calloc(count ? count : 1, sizeof(*ms->sums));
	if (!ms->sums) {
		return -ENOMEM;
	}
	ms->count = count;
	for (size_t i = 0; i < count; i++) {
		struct proto_sum *e = &ms->sums[i];

		e->id = rbuf_get_u32(r);
		e->status = rbuf_get_u32(r);
		rbuf_get_bytes(r, e->hash, PROTO_HASH_LEN);
		if (r->error || e->id == 0 || e->status > PERR_MAX || e->status == PERR_SKIPPED ||
		    e->status == PERR_SUM_WANTED ||
		    (e->status != PERR_OK && memcmp(e->hash, zero, PROTO_HASH_LEN) != 0)) {
			return -EBADMSG;
		}
	}
	return 0;
}

/*
 * DELTA: a known kind, known flags (none in SAME), count within its kind's cap;
 * SUMS' first chunk index below PROTO_MAX_DELTA_CHUNKS with room for count;
 * SAME's ranges as RESUME's. The peer checks them against the file.
 */
/* A part's name: one path component, not "." or "..". */
static bool part_name_ok(const char *s)
{
	return s[0] && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/*
 * ASSEMBLE: known flags, a mode of permission bits, nanoseconds below a
 * second, 1..PROTO_MAX_PARTS parts of single names, contiguous from 0, not
 * empty, their ends adding up to size without overflow.
 */
static int dec_assemble(struct rbuf *r, struct msg_assemble *a)
{
	uint64_t end = 0;

	a->flags = rbuf_get_u32(r);
	if (r->error || (a->flags & ~PROTO_ASM_FLAGS_KNOWN)) {
		return -EBADMSG;
	}
	a->path = dec_str_alloc(r, PROTO_MAX_PATH);
	a->name = a->path ? dec_str_alloc(r, PROTO_MAX_PATH) : NULL;
	a->staging = a->name ? dec_str_alloc(r, PROTO_MAX_PATH) : NULL;
	if (!a->staging) {
		return -EBADMSG;
	}
	a->mode = rbuf_get_u32(r);
	a->mtime_sec = (int64_t)rbuf_get_u64(r);
	a->mtime_nsec = rbuf_get_u32(r);
	a->uid = rbuf_get_u32(r);
	a->gid = rbuf_get_u32(r);
	a->size = rbuf_get_u64(r);
	a->count = rbuf_get_u16(r);
	if (r->error || !rel_name_ok(a->name) || !rel_name_ok(a->staging) || a->mode > 07777 ||
	    a->mtime_nsec >= 1000000000u || a->count == 0 || a->count > PROTO_MAX_PARTS ||
	    rbuf_left(r) < (size_t)a->count * (2 + 16 + PROTO_HASH_LEN)) {
		return -EBADMSG;
	}
	a->parts = calloc(a->count, sizeof(*a->parts));
	if (!a->parts) {
		a->count = 0;
		return -ENOMEM;
	}
	for (size_t i = 0; i < a->count; i++) {
		struct proto_part *p = &a->parts[i];

		rbuf_get_str16(r, p->name, sizeof(p->name), PROTO_MAX_PART_NAME);
		p->offset = rbuf_get_u64(r);
		p->len = rbuf_get_u64(r);
		rbuf_get_bytes(r, p->hash, PROTO_HASH_LEN);
		if (r->error || !part_name_ok(p->name) || p->offset != end || p->len == 0 ||
		    p->len > UINT64_MAX - end) {
			return -EBADMSG;
		}
		end += p->len;
	}
	return end == a->size ? 0 : -EBADMSG;
}

static int dec_delta(struct rbuf *r, struct msg_delta *d)
{
	uint64_t end = 0;

	d->id = rbuf_get_u32(r);
	d->kind = rbuf_get_u8(r);
	d->flags = rbuf_get_u8(r);
	d->count = rbuf_get_u16(r);
	if (r->error || (d->flags & ~PROTO_DELTA_FLAGS_KNOWN) || d->count == 0 ||
	    (d->kind != PROTO_DELTA_SUMS && d->flags)) {
		return -EBADMSG;
	}
	if (d->kind == PROTO_DELTA_SUMS) {
		d->first = rbuf_get_u64(r);
		if (r->error || d->count > PROTO_MAX_DELTA_SUMS ||
		    d->first > PROTO_MAX_DELTA_CHUNKS - d->count) {
			return -EBADMSG;
		}
		for (size_t i = 0; i < d->count; i++) {
			rbuf_get_bytes(r, d->sums[i], PROTO_HASH_LEN);
		}
		return r->error ? -EBADMSG : 0;
	}
	if (d->kind != PROTO_DELTA_SAME || d->count > PROTO_MAX_RESUME_RANGES) {
		return -EBADMSG;
	}
	for (size_t i = 0; i < d->count; i++) {
		struct proto_range *g = &d->r[i];

		g->offset = rbuf_get_u64(r);
		g->len = rbuf_get_u64(r);
		if (r->error || g->len == 0 || g->offset > UINT64_MAX - g->len ||
		    (i > 0 && g->offset < end)) {
			return -EBADMSG;
		}
		end = g->offset + g->len;
	}
	return 0;
}

/* Ranges ascending, not empty, not overlapping, not past 2^64: the sender checks the rest. */
static int dec_resume(struct rbuf *r, struct msg_resume *rs)
{
	uint64_t end = 0;

	rs->id = rbuf_get_u32(r);
	rs->count = rbuf_get_u16(r);
	if (r->error || rs->count > PROTO_MAX_RESUME_RANGES) {
		return -EBADMSG;
	}
	for (size_t i = 0; i < rs->count; i++) {
		struct proto_range *g = &rs->r[i];

		g->offset = rbuf_get_u64(r);
		g->len = rbuf_get_u64(r);
		if (r->error || g->len == 0 || g->offset > UINT64_MAX - g->len ||
		    (i > 0 && g->offset < end)) {
			return -EBADMSG;
		}
		end = g->offset + g->len;
	}
	return 0;
}

static bool chunk_size_ok(uint32_t cs)
{
	return cs >= PROTO_MIN_CHUNK && cs <= PROTO_MAX_CHUNK && (cs & (cs - 1)) == 0;
}

static int dec_payload(struct rbuf *r, struct msg *m)
{
	switch (m->type) {
	case MSG_HELLO: {
		struct msg_hello *h = &m->u.hello;

		h->min_version = rbuf_get_u16(r);
		h->max_version = rbuf_get_u16(r);
		h->caps = rbuf_get_u64(r);
		rbuf_get_str16(r, h->software, sizeof(h->software), PROTO_MAX_TEXT);
		if (!r->error && h->min_version > h->max_version) {
			return -EBADMSG;
		}
		/* Unknown capability bits are reported, not rejected: see HELLO in PROTOCOL.md. */
		return 0;
	}
	case MSG_ERROR:
		m->u.error.code = rbuf_get_u32(r);
		rbuf_get_str16(r, m->u.error.text, sizeof(m->u.error.text), PROTO_MAX_TEXT);
		return 0;
	case MSG_OPEN: {
		struct msg_open *o = &m->u.open;

		o->direction = rbuf_get_u8(r);
		o->transport = rbuf_get_u8(r);
		o->lanes = rbuf_get_u8(r);
		if (rbuf_get_u8(r) != 0) {
			return -EBADMSG;
		}
		o->flags = rbuf_get_u32(r);
		o->chunk_size = rbuf_get_u32(r);
		o->slots = rbuf_get_u32(r);
		rbuf_get_str16(r, o->path, sizeof(o->path), PROTO_MAX_PATH);
		o->max_delete = o->flags & PROTO_OPEN_DELETE ? rbuf_get_u64(r) : 0;
		o->encrypt = o->flags & PROTO_OPEN_ENCRYPT ? rbuf_get_u8(r) : 0;
		if (r->error) {
			return -EBADMSG;
		}
		if ((o->flags & PROTO_OPEN_ENCRYPT) && o->encrypt != PROTO_ENCRYPT_PREFER &&
		    o->encrypt != PROTO_ENCRYPT_REQUIRE) {
			return -EBADMSG;
		}
		/*
		 * Deletion is a recursive push's; a pull carries the flag only in a
		 * dry run, where it asks for a probe (the client is the receiver).
		 */
		if ((o->flags & PROTO_OPEN_DELETE) &&
		    (!(o->flags & PROTO_OPEN_RECURSIVE) ||
		     (o->direction != PROTO_DIR_PUSH && !(o->flags & PROTO_OPEN_DRY_RUN)))) {
			return -EBADMSG;
		}
		/* The daemon receives only in a push; a pull's client applies it itself. */
		if ((o->flags & PROTO_OPEN_ASSUME_ZERO) && o->direction != PROTO_DIR_PUSH) {
			return -EBADMSG;
		}
		if ((o->direction != PROTO_DIR_PUSH && o->direction != PROTO_DIR_PULL) ||
		    o->transport > 2 || o->lanes == 0 || o->lanes > PROTO_MAX_LANES ||
		    (o->flags & ~PROTO_OPEN_FLAGS_KNOWN) ||
		    __builtin_popcount(o->flags & PROTO_OPEN_SKIP_LEVELS) > 1 ||
		    !chunk_size_ok(o->chunk_size) || o->slots == 0 || o->slots > PROTO_MAX_SLOTS) {
			return -EBADMSG;
		}
		return 0;
	}
	case MSG_OPEN_OK: {
		struct msg_open_ok *o = &m->u.open_ok;

		o->transport = rbuf_get_u8(r);
		o->lanes = rbuf_get_u8(r);
		o->data_port = rbuf_get_u16(r);
		o->chunk_size = rbuf_get_u32(r);
		o->slots = rbuf_get_u32(r);
		rbuf_get_bytes(r, o->token, PROTO_TOKEN_LEN);
		/* The lanes byte is there when the OPEN asked (the client checks that it did). */
		o->lanes_sealed = 0;
		o->nrails = 0;
		if (!r->error && rbuf_left(r) > 0) {
			o->lanes_sealed = rbuf_get_u8(r);
			if (o->lanes_sealed != PROTO_LANES_CLEAR &&
			    o->lanes_sealed != PROTO_LANES_SEALED) {
				return -EBADMSG;
			}
		}
		/* Daemon rails: after the lanes byte, which is then always there. */
		if (!r->error && rbuf_left(r) > 0) {
			o->nrails = rbuf_get_u8(r);
			if (o->nrails == 0 || o->nrails > PROTO_MAX_RAILS) {
				return -EBADMSG;
			}
			for (unsigned i = 0; i < o->nrails && !r->error; i++) {
				struct proto_rail *rl = &o->rails[i];

				memset(rl, 0, sizeof(*rl));
				rl->family = rbuf_get_u8(r);
				if (rl->family != PROTO_RAIL_INET &&
				    rl->family != PROTO_RAIL_INET6) {
					return -EBADMSG;
				}
				rbuf_get_bytes(r, rl->addr,
					       rl->family == PROTO_RAIL_INET6 ? 16 : 4);
				rl->port = rbuf_get_u16(r);
				if (rl->port == 0) {
					return -EBADMSG;
				}
			}
		}
		if (r->error) {
			return -EBADMSG;
		}
		if (o->transport < 1 || o->transport > 2 || o->lanes == 0 ||
		    o->lanes > PROTO_MAX_LANES || o->data_port == 0 ||
		    !chunk_size_ok(o->chunk_size) || o->slots == 0 || o->slots > PROTO_MAX_SLOTS) {
			return -EBADMSG;
		}
		return 0;
	}
	case MSG_RING: {
		struct msg_ring *g = &m->u.ring;

		g->addr = rbuf_get_u64(r);
		g->desc_addr = rbuf_get_u64(r);
		g->slots = rbuf_get_u32(r);
		g->slot_size = rbuf_get_u32(r);
		g->nkeys = rbuf_get_u8(r);
		/* The count is checked before it sizes anything. */
		if (r->error || g->nkeys == 0 || g->nkeys > PROTO_MAX_LANES) {
			return -EBADMSG;
		}
		for (unsigned i = 0; i < g->nkeys; i++) {
			g->rkey[i] = rbuf_get_u32(r);
		}
		if (r->error) {
			return -EBADMSG;
		}
		if (g->slots == 0 || g->slots > PROTO_MAX_SLOTS || !chunk_size_ok(g->slot_size) ||
		    g->addr > UINT64_MAX - (uint64_t)g->slots * g->slot_size ||
		    g->desc_addr > UINT64_MAX - (uint64_t)g->slots * PROTO_DESC_LEN) {
			return -EBADMSG;
		}
		return 0;
	}
	case MSG_FILES:
		return dec_files(r, &m->u.files);
	case MSG_FILES_ACK:
		return dec_files_ack(r, &m->u.files_ack);
	case MSG_FILE_DONE: {
		struct msg_file_done *d = &m->u.file_done;

		d->id = rbuf_get_u32(r);
		d->status = rbuf_get_u32(r);
		d->bytes = rbuf_get_u64(r);
		rbuf_get_bytes(r, d->hash, PROTO_HASH_LEN);
		rbuf_get_str16(r, d->text, sizeof(d->text), PROTO_MAX_TEXT);
		if (!r->error && d->status > PERR_MAX) {
			return -EBADMSG;
		}
		return 0;
	}
	case MSG_FILE_RESULT: {
		struct msg_file_result *fr = &m->u.file_result;

		fr->id = rbuf_get_u32(r);
		fr->status = rbuf_get_u32(r);
		rbuf_get_str16(r, fr->text, sizeof(fr->text), PROTO_MAX_TEXT);
		if (!r->error && fr->status > PERR_MAX) {
			return -EBADMSG;
		}
		return 0;
	}
	case MSG_GET:
		return dec_get(r, &m->u.get);
	case MSG_END:
		m->u.end.files = rbuf_get_u32(r);
		m->u.end.bytes = rbuf_get_u64(r);
		return 0;
	case MSG_PING:
	case MSG_PONG:
		m->u.ping.nonce = rbuf_get_u64(r);
		return 0;
	case MSG_BYE:
		return 0;
	case MSG_BENCH: {
		struct msg_bench *b = &m->u.bench;

		b->transport = rbuf_get_u8(r);
		b->lanes = rbuf_get_u8(r);
		b->encrypt = rbuf_get_u8(r);
		if (rbuf_get_u8(r) != 0 || b->encrypt > PROTO_ENCRYPT_REQUIRE) {
			return -EBADMSG;
		}
		b->chunk_size = rbuf_get_u32(r);
		b->slots = rbuf_get_u32(r);
		b->bytes = rbuf_get_u64(r);
		b->seed = rbuf_get_u64(r);
		if (r->error || b->transport > 2 || b->lanes == 0 || b->lanes > PROTO_MAX_LANES ||
		    !chunk_size_ok(b->chunk_size) || b->slots == 0 || b->slots > PROTO_MAX_SLOTS ||
		    b->bytes == 0 || b->bytes > PROTO_BENCH_MAX_BYTES) {
			return -EBADMSG;
		}
		return 0;
	}
	case MSG_ENTRY_FAILED: {
		struct msg_entry_failed *ef = &m->u.entry_failed;

		ef->status = rbuf_get_u32(r);
		rbuf_get_str16(r, ef->name, sizeof(ef->name), PROTO_MAX_PATH);
		rbuf_get_str16(r, ef->text, sizeof(ef->text), PROTO_MAX_TEXT);
		if (!r->error && (ef->status == PERR_OK || ef->status == PERR_SKIPPED ||
				  ef->status == PERR_SUM_WANTED || ef->status > PERR_MAX)) {
			return -EBADMSG;
		}
		return 0;
	}
	case MSG_RESUME:
		return dec_resume(r, &m->u.resume);
	case MSG_ZEROS:
		return dec_resume(r, &m->u.zeros);
	case MSG_DELTA:
		return dec_delta(r, &m->u.delta);
	case MSG_LIST:
		m->u.list.flags = rbuf_get_u32(r);
		rbuf_get_str16(r, m->u.list.path, sizeof(m->u.list.path), PROTO_MAX_PATH);
		if (!r->error && (m->u.list.flags & ~PROTO_LIST_FLAGS_KNOWN) != 0) {
			return -EBADMSG;
		}
		return 0;
	case MSG_MODULES:
		return dec_modules(r, &m->u.modules);
	case MSG_XATTRS:
		return dec_xattrs(r, &m->u.xattrs);
	case MSG_FILTER:
		return dec_filter(r, &m->u.filter);
	case MSG_DELETED:
		return dec_deleted(r, &m->u.deleted);
	case MSG_SUMS:
		return dec_sums(r, &m->u.sums);
	case MSG_LIST_ATTRS:
		return dec_list_attrs(r, &m->u.list_attrs);
	case MSG_ASSEMBLE:
		return dec_assemble(r, &m->u.assemble);
	case MSG_ASSEMBLED:
		m->u.assembled.size = rbuf_get_u64(r);
		return 0;
	case MSG_LANE_DOWN:
		return dec_lane_down(r, &m->u.lane_down);
	default:
		return -EBADMSG;
	}
}

int msg_decode(uint16_t type, const uint8_t *payload, size_t len, struct msg *ret)
{
	struct rbuf r;
	int err;

	memset(ret, 0, sizeof(*ret));
	if (len > PROTO_MAX_PAYLOAD) {
		return -EBADMSG;
	}
	ret->type = type;
	rbuf_init(&r, payload, len);
	err = dec_payload(&r, ret);
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
	switch (m->type) {
	case MSG_FILES:
		for (size_t i = 0; i < m->u.files.count; i++) {
			free(m->u.files.files[i].name);
			free(m->u.files.files[i].link);
		}
		free(m->u.files.files);
		break;
	case MSG_FILES_ACK:
		for (size_t i = 0; i < m->u.files_ack.count; i++) {
			free(m->u.files_ack.st[i].text);
		}
		free(m->u.files_ack.st);
		break;
	case MSG_GET:
		for (size_t i = 0; i < m->u.get.count; i++) {
			free(m->u.get.paths[i]);
		}
		free(m->u.get.paths);
		break;
	case MSG_MODULES:
		for (size_t i = 0; i < m->u.modules.count; i++) {
			free(m->u.modules.mods[i].name);
			free(m->u.modules.mods[i].comment);
		}
		free(m->u.modules.mods);
		break;
	case MSG_XATTRS:
		for (size_t i = 0; i < m->u.xattrs.count; i++) {
			free(m->u.xattrs.x[i].name);
			free(m->u.xattrs.x[i].value);
		}
		free(m->u.xattrs.x);
		break;
	case MSG_FILTER:
		for (size_t i = 0; i < m->u.filter.count; i++) {
			free(m->u.filter.rules[i].pattern);
		}
		free(m->u.filter.rules);
		break;
	case MSG_DELETED:
		for (size_t i = 0; i < m->u.deleted.count; i++) {
			free(m->u.deleted.ents[i].name);
			free(m->u.deleted.ents[i].text);
		}
		free(m->u.deleted.ents);
		break;
	case MSG_SUMS:
		free(m->u.sums.sums);
		break;
	case MSG_LIST_ATTRS:
		free(m->u.list_attrs.ents);
		break;
	case MSG_ASSEMBLE:
		free(m->u.assemble.path);
		free(m->u.assemble.name);
		free(m->u.assemble.staging);
		free(m->u.assemble.parts);
		break;
	default:
		break;
	}
	memset(m, 0, sizeof(*m));
}
