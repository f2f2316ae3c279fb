/* SPDX-License-Identifier: MIT */
/*
 * The lane hello: how every data connection (a TCP lane, or an RC QP's
 * rdma_cm connect request) proves it belongs to an authenticated session.
 * 48 bytes, big-endian, the same for both transports:
 *   magic u32 "RDLN" | version u16 (1) | lane u16 | nlanes u16 | reserved u16 (0)
 *   | token[32] | reserved u32 (0)
 * It fits rdma_cm's 56 bytes of connect private data.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xport.h"

#define LANE_HELLO_LEN	   48
#define LANE_HELLO_MAGIC   0x52444c4eu /* "RDLN" */
#define LANE_HELLO_VERSION 1

struct lane_hello {
	uint16_t lane;
	uint16_t nlanes;
	uint8_t token[XPORT_TOKEN_LEN];
};

void lane_hello_encode(const struct lane_hello *h, uint8_t out[LANE_HELLO_LEN]);
/*
 * Structure only (the caller compares the token in constant time). len may
 * exceed LANE_HELLO_LEN: InfiniBand pads private data. -EPROTO otherwise.
 */
int lane_hello_decode(const void *in, size_t len, struct lane_hello *ret);

/*
 * Tokens a listener has already accepted a full set of lanes for: a token is
 * one-time, so a later lane presenting it is dropped. Compared in constant
 * time; wiped when freed.
 */
struct lane_tokens {
	uint8_t (*v)[XPORT_TOKEN_LEN];
	size_t n;
};

bool lane_token_dead(const struct lane_tokens *t, const uint8_t token[XPORT_TOKEN_LEN]);
int lane_token_kill(struct lane_tokens *t, const uint8_t token[XPORT_TOKEN_LEN]);
void lane_tokens_free(struct lane_tokens *t);
