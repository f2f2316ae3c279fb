/* SPDX-License-Identifier: MIT */
/*
 * rdmacp finalize's messages (see msg_codec.h): ASSEMBLE, the parts of a
 * split file to join, and the daemon's ASSEMBLED once the file is in place.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "msg_codec.h"

/* Smallest encoding of one part: an empty name, offset, len, digest. */
#define PART_ENTRY_MIN (2 + 16 + PROTO_HASH_LEN)

int msg_enc_assemble(const struct msg *m, struct wbuf *w)
{
	const struct msg_assemble *a = &m->u.assemble;

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

/* A part's name: one path component, not "." or "..". */
static bool part_name_ok(const char *s)
{
	return s[0] && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/*
 * The parts: single names, contiguous from 0, not empty, adding up to size
 * without overflow; a seed's (PROTO_ASM_SEED) ascending and apart, within size.
 */
static int dec_parts(struct rbuf *r, struct msg_assemble *a)
{
	bool seed = a->flags & PROTO_ASM_SEED;
	uint64_t end = 0;

	for (size_t i = 0; i < a->count; i++) {
		struct proto_part *p = &a->parts[i];

		rbuf_get_str16(r, p->name, sizeof(p->name), PROTO_MAX_PART_NAME);
		p->offset = rbuf_get_u64(r);
		p->len = rbuf_get_u64(r);
		rbuf_get_bytes(r, p->hash, PROTO_HASH_LEN);
		if (r->error || !part_name_ok(p->name) || p->len == 0 ||
		    (seed ? p->offset < end : p->offset != end) ||
		    p->len > UINT64_MAX - p->offset) {
			return -EBADMSG;
		}
		end = p->offset + p->len;
	}
	return seed ? (end <= a->size ? 0 : -EBADMSG) : end == a->size ? 0 : -EBADMSG;
}

/*
 * ASSEMBLE: known flags, relative names, a mode of permission bits,
 * nanoseconds below a second, 1..PROTO_MAX_PARTS parts (dec_parts).
 */
int msg_dec_assemble(struct rbuf *r, struct msg *m)
{
	struct msg_assemble *a = &m->u.assemble;

	a->flags = rbuf_get_u32(r);
	if (r->error || (a->flags & ~PROTO_ASM_FLAGS_KNOWN) ||
	    (a->flags & (PROTO_ASM_DISCARD | PROTO_ASM_SEED)) ==
		(PROTO_ASM_DISCARD | PROTO_ASM_SEED)) {
		return -EBADMSG;
	}
	a->path = msg_dec_str_alloc(r, PROTO_MAX_PATH);
	a->name = a->path ? msg_dec_str_alloc(r, PROTO_MAX_PATH) : NULL;
	a->staging = a->name ? msg_dec_str_alloc(r, PROTO_MAX_PATH) : NULL;
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
	if (r->error || !msg_rel_name_ok(a->name) || !msg_rel_name_ok(a->staging) ||
	    a->mode > 07777 || a->mtime_nsec >= 1000000000u || a->count == 0 ||
	    a->count > PROTO_MAX_PARTS || rbuf_left(r) < (size_t)a->count * PART_ENTRY_MIN) {
		return -EBADMSG;
	}
	a->parts = calloc(a->count, sizeof(*a->parts));
	if (!a->parts) {
		a->count = 0;
		return -ENOMEM;
	}
	return dec_parts(r, a);
}

void msg_clear_assemble(struct msg *m)
{
	free(m->u.assemble.path);
	free(m->u.assemble.name);
	free(m->u.assemble.staging);
	free(m->u.assemble.parts);
}

int msg_enc_assembled(const struct msg *m, struct wbuf *w)
{
	wbuf_put_u64(w, m->u.assembled.size);
	return 0;
}

int msg_dec_assembled(struct rbuf *r, struct msg *m)
{
	m->u.assembled.size = rbuf_get_u64(r);
	return 0;
}
