/* SPDX-License-Identifier: MIT */
/* Bounds-checked big-endian writer and reader (see wire.h). */
#include "wire.h"

#include <endian.h>
#include <string.h>

static bool wbuf_room(struct wbuf *w, size_t n)
{
	if (w->overflow || n > w->cap - w->len) {
		w->overflow = true;
		return false;
	}
	return true;
}

void wbuf_put_bytes(struct wbuf *w, const void *p, size_t n)
{
	if (!wbuf_room(w, n)) {
		return;
	}
	if (n) {
		memcpy(w->buf + w->len, p, n);
	}
	w->len += n;
}

void wbuf_put_u8(struct wbuf *w, uint8_t v)
{
	wbuf_put_bytes(w, &v, 1);
}

void wbuf_put_u16(struct wbuf *w, uint16_t v)
{
	uint16_t be = htobe16(v);
	wbuf_put_bytes(w, &be, sizeof(be));
}

void wbuf_put_u32(struct wbuf *w, uint32_t v)
{
	uint32_t be = htobe32(v);
	wbuf_put_bytes(w, &be, sizeof(be));
}

void wbuf_put_u64(struct wbuf *w, uint64_t v)
{
	uint64_t be = htobe64(v);
	wbuf_put_bytes(w, &be, sizeof(be));
}

void wbuf_put_str16(struct wbuf *w, const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	if (n > max || n > UINT16_MAX) {
		w->overflow = true;
		return;
	}
	wbuf_put_u16(w, (uint16_t)n);
	wbuf_put_bytes(w, s, n);
}

static bool rbuf_take(struct rbuf *r, size_t n)
{
	if (r->error || n > r->len - r->pos) {
		r->error = true;
		return false;
	}
	return true;
}

void rbuf_get_bytes(struct rbuf *r, void *p, size_t n)
{
	if (!rbuf_take(r, n)) {
		memset(p, 0, n);
		return;
	}
	if (n) {
		memcpy(p, r->buf + r->pos, n);
	}
	r->pos += n;
}

uint8_t rbuf_get_u8(struct rbuf *r)
{
	uint8_t v;
	rbuf_get_bytes(r, &v, 1);
	return v;
}

uint16_t rbuf_get_u16(struct rbuf *r)
{
	uint16_t v;
	rbuf_get_bytes(r, &v, sizeof(v));
	return be16toh(v);
}

uint32_t rbuf_get_u32(struct rbuf *r)
{
	uint32_t v;
	rbuf_get_bytes(r, &v, sizeof(v));
	return be32toh(v);
}

uint64_t rbuf_get_u64(struct rbuf *r)
{
	uint64_t v;
	rbuf_get_bytes(r, &v, sizeof(v));
	return be64toh(v);
}

void rbuf_get_str16(struct rbuf *r, char *out, size_t outlen, size_t max)
{
	uint16_t n = rbuf_get_u16(r);

	if (outlen) {
		out[0] = '\0';
	}
	if (r->error || n > max || (size_t)n >= outlen || n > rbuf_left(r)) {
		r->error = true;
		return;
	}
	if (memchr(r->buf + r->pos, '\0', n)) {
		r->error = true;
		return;
	}
	memcpy(out, r->buf + r->pos, n);
	out[n] = '\0';
	r->pos += n;
}
