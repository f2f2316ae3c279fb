/* SPDX-License-Identifier: MIT */
/*
 * Fields several control messages share (see msg_codec.h): strings decoded
 * into fresh allocations, relative names, slot sizes, byte ranges.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "msg_codec.h"

char *msg_dec_str_alloc(struct rbuf *r, size_t max)
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

bool msg_rel_name_ok(const char *s)
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

bool msg_chunk_size_ok(uint32_t cs)
{
	return cs >= PROTO_MIN_CHUNK && cs <= PROTO_MAX_CHUNK && (cs & (cs - 1)) == 0;
}

void msg_enc_ranges(struct wbuf *w, const struct proto_range *g, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		wbuf_put_u64(w, g[i].offset);
		wbuf_put_u64(w, g[i].len);
	}
}

int msg_dec_ranges(struct rbuf *r, struct proto_range *g, size_t count)
{
	uint64_t end = 0;

	for (size_t i = 0; i < count; i++) {
		g[i].offset = rbuf_get_u64(r);
		g[i].len = rbuf_get_u64(r);
		if (r->error || g[i].len == 0 || g[i].offset > UINT64_MAX - g[i].len ||
		    (i > 0 && g[i].offset < end)) {
			return -EBADMSG;
		}
		end = g[i].offset + g[i].len;
	}
	return 0;
}
