/* SPDX-License-Identifier: MIT */
/* The lane hello codec (see lane_hello.h), shared by every transport. */
#include "lane_hello.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "proto/wire.h"

_Static_assert(LANE_HELLO_LEN == 4 + 2 + 2 + 2 + 2 + XPORT_TOKEN_LEN + 4, "lane hello layout");
_Static_assert(LANE_HELLO_LEN <= 56, "the lane hello must fit rdma_cm private data");

void lane_hello_encode(const struct lane_hello *h, uint8_t out[LANE_HELLO_LEN])
{
	struct wbuf w;

	wbuf_init(&w, out, LANE_HELLO_LEN);
	wbuf_put_u32(&w, LANE_HELLO_MAGIC);
	wbuf_put_u16(&w, LANE_HELLO_VERSION);
	wbuf_put_u16(&w, h->lane);
	wbuf_put_u16(&w, h->nlanes);
	wbuf_put_u16(&w, 0);
	wbuf_put_bytes(&w, h->token, XPORT_TOKEN_LEN);
	wbuf_put_u32(&w, 0);
}

int lane_hello_decode(const void *in, size_t len, struct lane_hello *ret)
{
	struct lane_hello h;
	struct rbuf r;
	uint32_t magic, reserved32;
	uint16_t version, reserved16;

	if (!in || len < LANE_HELLO_LEN) {
		return -EPROTO;
	}
	rbuf_init(&r, in, LANE_HELLO_LEN);
	magic = rbuf_get_u32(&r);
	version = rbuf_get_u16(&r);
	h.lane = rbuf_get_u16(&r);
	h.nlanes = rbuf_get_u16(&r);
	reserved16 = rbuf_get_u16(&r);
	rbuf_get_bytes(&r, h.token, XPORT_TOKEN_LEN);
	reserved32 = rbuf_get_u32(&r);
	if (r.error || magic != LANE_HELLO_MAGIC || version != LANE_HELLO_VERSION ||
	    reserved16 != 0 || reserved32 != 0) {
		return -EPROTO;
	}
	*ret = h;
	return 0;
}

bool lane_token_dead(const struct lane_tokens *t, const uint8_t token[XPORT_TOKEN_LEN])
{
	bool dead = false;

	/* No early exit: the time taken says nothing about which token matched. */
	for (size_t i = 0; i < t->n; i++) {
		dead |= CRYPTO_memcmp(t->v[i], token, XPORT_TOKEN_LEN) == 0;
	}
	return dead;
}

int lane_token_kill(struct lane_tokens *t, const uint8_t token[XPORT_TOKEN_LEN])
{
	uint8_t(*v)[XPORT_TOKEN_LEN] = reallocarray(t->v, t->n + 1, sizeof(*v));

	if (!v) {
		return -ENOMEM;
	}
	t->v = v;
	memcpy(t->v[t->n++], token, XPORT_TOKEN_LEN);
	return 0;
}

void lane_tokens_free(struct lane_tokens *t)
{
	if (t->v) {
		OPENSSL_cleanse(t->v, t->n * XPORT_TOKEN_LEN);
	}
	free(t->v);
	t->v = NULL;
	t->n = 0;
}
