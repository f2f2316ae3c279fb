/* SPDX-License-Identifier: MIT */
/*
 * Messages about byte ranges of one file (see msg_codec.h): RESUME (what
 * the receiver kept and verified, --partial), ZEROS (what is all zeros and
 * crosses no data path) and DELTA (--delta: the receiver's chunk digests,
 * the sender's unchanged ranges). The decoders check the ranges' shape;
 * the peer checks them against the file.
 */
#include <errno.h>

#include "msg_codec.h"

/* ---- RESUME, ZEROS ------------------------------------------------------ */

int msg_enc_resume(const struct msg *m, struct wbuf *w)
{
	const struct msg_resume *rs = &m->u.resume; /* ZEROS: the same layout */

	if (rs->count > PROTO_MAX_RESUME_RANGES) {
		return -EMSGSIZE;
	}
	wbuf_put_u32(w, rs->id);
	wbuf_put_u16(w, rs->count);
	msg_enc_ranges(w, rs->r, rs->count);
	return 0;
}

/* Ranges ascending, not empty, not overlapping, not past 2^64: the sender checks the rest. */
int msg_dec_resume(struct rbuf *r, struct msg *m)
{
	struct msg_resume *rs = &m->u.resume;

	rs->id = rbuf_get_u32(r);
	rs->count = rbuf_get_u16(r);
	if (r->error || rs->count > PROTO_MAX_RESUME_RANGES) {
		return -EBADMSG;
	}
	return msg_dec_ranges(r, rs->r, rs->count);
}

/* ---- DELTA -------------------------------------------------------------- */

/* A known kind, known flags (none in SAME), count within its kind's cap: both ends check it. */
static bool delta_head_ok(const struct msg_delta *d)
{
	return d->count != 0 && !(d->kind == PROTO_DELTA_SUMS && d->count > PROTO_MAX_DELTA_SUMS) &&
	       !(d->kind == PROTO_DELTA_SAME && d->count > PROTO_MAX_RESUME_RANGES) &&
	       (d->kind == PROTO_DELTA_SUMS || d->kind == PROTO_DELTA_SAME) &&
	       (d->flags & ~PROTO_DELTA_FLAGS_KNOWN) == 0 &&
	       (d->kind == PROTO_DELTA_SUMS || d->flags == 0);
}

int msg_enc_delta(const struct msg *m, struct wbuf *w)
{
	const struct msg_delta *d = &m->u.delta;

	if (!delta_head_ok(d)) {
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
	msg_enc_ranges(w, d->r, d->count);
	return 0;
}

/*
 * DELTA: the head as the encoder keeps it (delta_head_ok); SUMS' first
 * chunk index below PROTO_MAX_DELTA_CHUNKS with room for count; SAME's
 * ranges as RESUME's. The peer checks them against the file.
 */
int msg_dec_delta(struct rbuf *r, struct msg *m)
{
	struct msg_delta *d = &m->u.delta;

	d->id = rbuf_get_u32(r);
	d->kind = rbuf_get_u8(r);
	d->flags = rbuf_get_u8(r);
	d->count = rbuf_get_u16(r);
	if (r->error || !delta_head_ok(d)) {
		return -EBADMSG;
	}
	if (d->kind == PROTO_DELTA_SAME) {
		return msg_dec_ranges(r, d->r, d->count);
	}
	d->first = rbuf_get_u64(r);
	if (r->error || d->first > PROTO_MAX_DELTA_CHUNKS - d->count) {
		return -EBADMSG;
	}
	for (size_t i = 0; i < d->count; i++) {
		rbuf_get_bytes(r, d->sums[i], PROTO_HASH_LEN);
	}
	return r->error ? -EBADMSG : 0;
}
