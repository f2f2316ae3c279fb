/* SPDX-License-Identifier: MIT */
/* The lane hello codec (see lane.h), shared by every transport. */
#include "lane.h"

#include <errno.h>

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
