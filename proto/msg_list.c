/* SPDX-License-Identifier: MIT */
/*
 * Listing messages (see msg_codec.h): LIST asks for a path or the modules,
 * MODULES answers the latter (FILES batches the former), and after each
 * FILES batch of a listing SUMS (rdmacp check's digests) and LIST_ATTRS
 * (attribute digests, link groups).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "msg_codec.h"

#define MOD_ENTRY_MIN (1 + 2 + 2)
#define SUM_ENTRY_LEN (4 + 4 + PROTO_HASH_LEN)

/* ---- LIST --------------------------------------------------------------- */

int msg_enc_list(const struct msg *m, struct wbuf *w)
{
	wbuf_put_u32(w, m->u.list.flags);
	wbuf_put_str16(w, m->u.list.path, PROTO_MAX_PATH);
	return 0;
}

int msg_dec_list(struct rbuf *r, struct msg *m)
{
	m->u.list.flags = rbuf_get_u32(r);
	rbuf_get_str16(r, m->u.list.path, sizeof(m->u.list.path), PROTO_MAX_PATH);
	if (!r->error && (m->u.list.flags & ~PROTO_LIST_FLAGS_KNOWN) != 0) {
		return -EBADMSG;
	}
	return 0;
}

/* ---- MODULES ------------------------------------------------------------ */

int msg_enc_modules(const struct msg *m, struct wbuf *w)
{
	const struct msg_modules *md = &m->u.modules;

	if (md->count > PROTO_MAX_BATCH) {
		return -EMSGSIZE;
	}
	wbuf_put_u16(w, md->count);
	for (size_t i = 0; i < md->count; i++) {
		wbuf_put_u8(w, md->mods[i].flags);
		wbuf_put_str16(w, md->mods[i].name, PROTO_MAX_MODNAME);
		wbuf_put_str16(w, md->mods[i].comment, PROTO_MAX_TEXT);
	}
	return 0;
}

int msg_dec_modules(struct rbuf *r, struct msg *m)
{
	struct msg_modules *md = &m->u.modules;
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
		e->name = msg_dec_str_alloc(r, PROTO_MAX_MODNAME);
		e->comment = msg_dec_str_alloc(r, PROTO_MAX_TEXT);
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

void msg_clear_modules(struct msg *m)
{
	for (size_t i = 0; i < m->u.modules.count; i++) {
		free(m->u.modules.mods[i].name);
		free(m->u.modules.mods[i].comment);
	}
	free(m->u.modules.mods);
}

/* ---- SUMS --------------------------------------------------------------- */

int msg_enc_sums(const struct msg *m, struct wbuf *w)
{
	const struct msg_sums *ms = &m->u.sums;

	if (ms->count > PROTO_MAX_BATCH) {
		return -EMSGSIZE;
	}
	wbuf_put_u16(w, ms->count);
	for (size_t i = 0; i < ms->count; i++) {
		wbuf_put_u32(w, ms->sums[i].id);
		wbuf_put_u32(w, ms->sums[i].status);
		wbuf_put_bytes(w, ms->sums[i].hash, PROTO_HASH_LEN);
	}
	return 0;
}

/*
 * SUMS: fixed-size entries, exactly count of them; a digest only with
 * PERR_OK (otherwise all zero), a failure status otherwise (never SKIPPED).
 */
int msg_dec_sums(struct rbuf *r, struct msg *m)
{
	static const uint8_t zero[PROTO_HASH_LEN];
	struct msg_sums *ms = &m->u.sums;
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

void msg_clear_sums(struct msg *m)
{
	free(m->u.sums.sums);
}

/* ---- LIST_ATTRS --------------------------------------------------------- */

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

int msg_enc_list_attrs(const struct msg *m, struct wbuf *w)
{
	const struct msg_list_attrs *la = &m->u.list_attrs;

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
int msg_dec_list_attrs(struct rbuf *r, struct msg *m)
{
	struct msg_list_attrs *la = &m->u.list_attrs;
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

void msg_clear_list_attrs(struct msg *m)
{
	free(m->u.list_attrs.ents);
}
