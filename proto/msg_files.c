/* SPDX-License-Identifier: MIT */
/*
 * The messages of a transfer's files (see msg_codec.h): FILES offered and
 * FILES_ACK answered, FILE_DONE and FILE_RESULT, a pull's GET, END,
 * ENTRY_FAILED, a file's XATTRS, and --delete's DELETED.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "msg_codec.h"

/* Smallest encoding of one entry of each list: fixed fields + empty strings. */
#define FILE_ENTRY_MIN	(4 + 1 + 4 + 8 + 8 + 4 + 4 + 4 + 2 + 2)
#define ACK_ENTRY_MIN	(4 + 4 + 2)
#define GET_ENTRY_MIN	2
#define XATTR_ENTRY_MIN (2 + 1 + 4)
#define DEL_ENTRY_MIN	(1 + 1 + 4 + 2 + 2)

/* ---- FILES -------------------------------------------------------------- */

static void enc_file(struct wbuf *w, const struct proto_file *f)
{
	wbuf_put_u32(w, f->id);
	wbuf_put_u8(w, f->ftype);
	wbuf_put_u32(w, f->mode | (f->linked ? PROTO_FILE_LINKED : 0));
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

int msg_enc_files(const struct msg *m, struct wbuf *w)
{
	if (m->u.files.count > PROTO_MAX_BATCH) {
		return -EMSGSIZE;
	}
	wbuf_put_u16(w, m->u.files.count);
	for (size_t i = 0; i < m->u.files.count; i++) {
		enc_file(w, &m->u.files.files[i]);
	}
	return 0;
}

/*
 * An entry's fields together: a known type, permission bits, nanoseconds
 * of a second, a target for (only) a symlink or a hard link, a hard link's
 * first name relative, a size for (only) a regular file, within off_t; only
 * a regular file marked linked.
 */
static bool file_fields_ok(const struct proto_file *e)
{
	bool has_link = e->ftype == PROTO_FT_SYMLINK || e->ftype == PROTO_FT_HARDLINK;

	return !(e->ftype < PROTO_FT_REG || e->ftype > PROTO_FT_HARDLINK ||
		 (e->mode & ~07777u) != 0 || e->mtime_nsec >= 1000000000u ||
		 (!has_link && e->link[0] != '\0') || (has_link && e->link[0] == '\0') ||
		 (e->ftype == PROTO_FT_HARDLINK && !msg_rel_name_ok(e->link)) ||
		 (e->ftype != PROTO_FT_REG && (e->size != 0 || e->linked)) ||
		 (e->size > (uint64_t)INT64_MAX));
}

/* An entry's fixed fields (its strings follow). */
static void dec_file_fixed(struct rbuf *r, struct proto_file *e)
{
	e->id = rbuf_get_u32(r);
	e->ftype = rbuf_get_u8(r);
	e->mode = rbuf_get_u32(r);
	e->linked = (e->mode & PROTO_FILE_LINKED) != 0;
	e->mode &= ~PROTO_FILE_LINKED;
	e->size = rbuf_get_u64(r);
	e->mtime_sec = (int64_t)rbuf_get_u64(r);
	e->mtime_nsec = rbuf_get_u32(r);
	e->uid = rbuf_get_u32(r);
	e->gid = rbuf_get_u32(r);
}

int msg_dec_files(struct rbuf *r, struct msg *m)
{
	struct msg_files *f = &m->u.files;
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

		dec_file_fixed(r, e);
		f->count = (uint16_t)(i + 1); /* so msg_clear frees this entry */
		e->name = msg_dec_str_alloc(r, PROTO_MAX_PATH);
		e->link = msg_dec_str_alloc(r, PROTO_MAX_PATH);
		if (r->error || !file_fields_ok(e)) {
			return -EBADMSG;
		}
		if (e->ftype != PROTO_FT_SYMLINK && e->ftype != PROTO_FT_HARDLINK) {
			free(e->link);
			e->link = NULL;
		}
	}
	return 0;
}

void msg_clear_files(struct msg *m)
{
	for (size_t i = 0; i < m->u.files.count; i++) {
		free(m->u.files.files[i].name);
		free(m->u.files.files[i].link);
	}
	free(m->u.files.files);
}

/* ---- FILES_ACK ---------------------------------------------------------- */

int msg_enc_files_ack(const struct msg *m, struct wbuf *w)
{
	const struct msg_files_ack *a = &m->u.files_ack;

	if (a->count > PROTO_MAX_BATCH) {
		return -EMSGSIZE;
	}
	wbuf_put_u16(w, a->count);
	for (size_t i = 0; i < a->count; i++) {
		const struct proto_status *s = &a->st[i];

		if (s->items && (s->status > 0xffffu || (s->items & ~PROTO_ITEMS_KNOWN))) {
			return -EINVAL;
		}
		wbuf_put_u32(w, s->id);
		wbuf_put_u32(w, s->status | s->items << 16);
		wbuf_put_str16(w, s->text, PROTO_MAX_TEXT);
	}
	return 0;
}

int msg_dec_files_ack(struct rbuf *r, struct msg *m)
{
	struct msg_files_ack *a = &m->u.files_ack;
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
		a->st[i].text = msg_dec_str_alloc(r, PROTO_MAX_TEXT);
		if (r->error || a->st[i].status > PERR_MAX ||
		    (a->st[i].items & ~PROTO_ITEMS_KNOWN)) {
			return -EBADMSG;
		}
	}
	return 0;
}

void msg_clear_files_ack(struct msg *m)
{
	for (size_t i = 0; i < m->u.files_ack.count; i++) {
		free(m->u.files_ack.st[i].text);
	}
	free(m->u.files_ack.st);
}

/* ---- FILE_DONE, FILE_RESULT --------------------------------------------- */

int msg_enc_file_done(const struct msg *m, struct wbuf *w)
{
	const struct msg_file_done *d = &m->u.file_done;

	wbuf_put_u32(w, d->id);
	wbuf_put_u32(w, d->status);
	wbuf_put_u64(w, d->bytes);
	wbuf_put_bytes(w, d->hash, PROTO_HASH_LEN);
	wbuf_put_str16(w, d->text, PROTO_MAX_TEXT);
	return 0;
}

int msg_dec_file_done(struct rbuf *r, struct msg *m)
{
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

int msg_enc_file_result(const struct msg *m, struct wbuf *w)
{
	wbuf_put_u32(w, m->u.file_result.id);
	wbuf_put_u32(w, m->u.file_result.status);
	wbuf_put_str16(w, m->u.file_result.text, PROTO_MAX_TEXT);
	return 0;
}

int msg_dec_file_result(struct rbuf *r, struct msg *m)
{
	struct msg_file_result *fr = &m->u.file_result;

	fr->id = rbuf_get_u32(r);
	fr->status = rbuf_get_u32(r);
	rbuf_get_str16(r, fr->text, sizeof(fr->text), PROTO_MAX_TEXT);
	if (!r->error && fr->status > PERR_MAX) {
		return -EBADMSG;
	}
	return 0;
}

/* ---- GET, END ----------------------------------------------------------- */

int msg_enc_get(const struct msg *m, struct wbuf *w)
{
	if (m->u.get.count > PROTO_MAX_BATCH) {
		return -EMSGSIZE;
	}
	wbuf_put_u16(w, m->u.get.count);
	for (size_t i = 0; i < m->u.get.count; i++) {
		wbuf_put_str16(w, m->u.get.paths[i], PROTO_MAX_PATH);
	}
	return 0;
}

/* 1..PROTO_MAX_BATCH paths. */
int msg_dec_get(struct rbuf *r, struct msg *m)
{
	struct msg_get *g = &m->u.get;
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
		g->paths[i] = msg_dec_str_alloc(r, PROTO_MAX_PATH);
		if (r->error) {
			return -EBADMSG;
		}
	}
	return 0;
}

void msg_clear_get(struct msg *m)
{
	for (size_t i = 0; i < m->u.get.count; i++) {
		free(m->u.get.paths[i]);
	}
	free(m->u.get.paths);
}

int msg_enc_end(const struct msg *m, struct wbuf *w)
{
	wbuf_put_u32(w, m->u.end.files);
	wbuf_put_u64(w, m->u.end.bytes);
	return 0;
}

int msg_dec_end(struct rbuf *r, struct msg *m)
{
	m->u.end.files = rbuf_get_u32(r);
	m->u.end.bytes = rbuf_get_u64(r);
	return 0;
}

/* ---- ENTRY_FAILED ------------------------------------------------------- */

int msg_enc_entry_failed(const struct msg *m, struct wbuf *w)
{
	wbuf_put_u32(w, m->u.entry_failed.status);
	wbuf_put_str16(w, m->u.entry_failed.name, PROTO_MAX_PATH);
	wbuf_put_str16(w, m->u.entry_failed.text, PROTO_MAX_TEXT);
	return 0;
}

/* A failure: neither OK nor one of the receiver's answers (SKIPPED, SUM_WANTED). */
int msg_dec_entry_failed(struct rbuf *r, struct msg *m)
{
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

/* ---- XATTRS ------------------------------------------------------------- */

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

int msg_enc_xattrs(const struct msg *m, struct wbuf *w)
{
	const struct msg_xattrs *x = &m->u.xattrs;

	if (x->count > PROTO_MAX_XATTRS || (x->unread && x->count)) {
		return -EMSGSIZE;
	}
	wbuf_put_u32(w, x->id);
	wbuf_put_u16(w, x->unread ? PROTO_XATTRS_UNREAD : x->count);
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

int msg_dec_xattrs(struct rbuf *r, struct msg *m)
{
	struct msg_xattrs *x = &m->u.xattrs;
	uint16_t count;

	x->id = rbuf_get_u32(r);
	count = rbuf_get_u16(r);
	x->unread = !r->error && count == PROTO_XATTRS_UNREAD && rbuf_left(r) == 0;
	if (x->unread) {
		count = 0;
	}
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
		a->name = msg_dec_str_alloc(r, PROTO_MAX_XATTR_NAME);
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

void msg_clear_xattrs(struct msg *m)
{
	for (size_t i = 0; i < m->u.xattrs.count; i++) {
		free(m->u.xattrs.x[i].name);
		free(m->u.xattrs.x[i].value);
	}
	free(m->u.xattrs.x);
}

/* ---- DELETED ------------------------------------------------------------ */

int msg_enc_deleted(const struct msg *m, struct wbuf *w)
{
	const struct msg_deleted *md = &m->u.deleted;

	if (md->count > PROTO_MAX_BATCH) {
		return -EMSGSIZE;
	}
	wbuf_put_u8(w, md->flags);
	wbuf_put_u16(w, md->count);
	for (size_t i = 0; i < md->count; i++) {
		const struct proto_deleted *d = &md->ents[i];

		wbuf_put_u8(w, d->what);
		wbuf_put_u8(w, d->ftype);
		wbuf_put_u32(w, d->code);
		wbuf_put_str16(w, d->name, PROTO_MAX_PATH);
		wbuf_put_str16(w, d->text ? d->text : "", PROTO_MAX_TEXT);
	}
	return 0;
}

/*
 * Each entry: what, a code only for a failure (and then not OK or SKIPPED),
 * a name (never empty), a text only for a failure. Nothing else is allowed.
 */
static bool deleted_entry_ok(const struct proto_deleted *d)
{
	bool failed = d->what == PROTO_DEL_FAILED;

	return !(d->what < PROTO_DEL_DELETED || d->what > PROTO_DEL_FAILED ||
		 d->ftype > PROTO_FT_SYMLINK || d->name[0] == '\0' ||
		 (failed && (d->code == PERR_OK || d->code == PERR_SKIPPED ||
			     d->code == PERR_SUM_WANTED || d->code > PERR_MAX)) ||
		 (!failed && (d->code != PERR_OK || d->text[0] != '\0')));
}

int msg_dec_deleted(struct rbuf *r, struct msg *m)
{
	struct msg_deleted *md = &m->u.deleted;
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

		d->what = rbuf_get_u8(r);
		d->ftype = rbuf_get_u8(r);
		d->code = rbuf_get_u32(r);
		md->count = (uint16_t)(i + 1); /* so msg_clear frees this entry */
		d->name = msg_dec_str_alloc(r, PROTO_MAX_PATH);
		d->text = msg_dec_str_alloc(r, PROTO_MAX_TEXT);
		if (r->error || !deleted_entry_ok(d)) {
			return -EBADMSG;
		}
	}
	return 0;
}

void msg_clear_deleted(struct msg *m)
{
	for (size_t i = 0; i < m->u.deleted.count; i++) {
		free(m->u.deleted.ents[i].name);
		free(m->u.deleted.ents[i].text);
	}
	free(m->u.deleted.ents);
}
