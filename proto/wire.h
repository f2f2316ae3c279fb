/* SPDX-License-Identifier: MIT */
/*
 * Bounds-checked big-endian writer and reader. Nothing on the wire is ever a
 * C struct: every field goes through these. A reader that runs past its end
 * or a writer past its capacity latches an error flag; callers check once.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct wbuf {
	uint8_t *buf;
	size_t cap;
	size_t len;
	bool overflow;
};

struct rbuf {
	const uint8_t *buf;
	size_t len;
	size_t pos;
	bool error;
};

static inline void wbuf_init(struct wbuf *w, void *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap;
	w->len = 0;
	w->overflow = false;
}

static inline void rbuf_init(struct rbuf *r, const void *buf, size_t len)
{
	r->buf = buf;
	r->len = len;
	r->pos = 0;
	r->error = false;
}

static inline size_t rbuf_left(const struct rbuf *r)
{
	return r->len - r->pos;
}

void wbuf_put_u8(struct wbuf *w, uint8_t v);
void wbuf_put_u16(struct wbuf *w, uint16_t v);
void wbuf_put_u32(struct wbuf *w, uint32_t v);
void wbuf_put_u64(struct wbuf *w, uint64_t v);
void wbuf_put_bytes(struct wbuf *w, const void *p, size_t n);
/* u16 length + bytes (no NUL). Latches overflow if strlen > max. */
void wbuf_put_str16(struct wbuf *w, const char *s, size_t max);

uint8_t rbuf_get_u8(struct rbuf *r);
uint16_t rbuf_get_u16(struct rbuf *r);
uint32_t rbuf_get_u32(struct rbuf *r);
uint64_t rbuf_get_u64(struct rbuf *r);
void rbuf_get_bytes(struct rbuf *r, void *p, size_t n);
/*
 * u16 length + bytes into out (NUL-terminated). The length is checked
 * against max (< outlen) and the bytes left before anything is copied;
 * embedded NUL bytes are an error.
 */
void rbuf_get_str16(struct rbuf *r, char *out, size_t outlen, size_t max);
