/* SPDX-License-Identifier: MIT */
/*
 * What the tcp transport's tests (test_xport_tcp*.c) share: parameters with a
 * fixed token and seal secret, a loopback listener whose accept runs on a
 * thread of its own, a connected pair of transports, and waits for
 * completions. g_seal and the g_cli_* test hooks shape the next make_pair.
 */
#pragma once

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xport.h"

#define PAGE 4096u

extern const struct xport_ops *ops;

/* Sealed lanes for make_pair (tests set and reset these); the client side's test hooks. */
extern bool g_seal;
extern uint8_t g_cli_secret_xor;
extern unsigned g_cli_tamper;
extern const char *g_cli_tee;

struct server {
	struct xport_listener *l;
	uint16_t port;
	struct xport_params p;
	pthread_t thr;
	struct xport *x;
	int rc;
};

struct pair {
	struct xport *srv, *cli;
};

struct xport_params mkparams(unsigned nlanes, unsigned sq, unsigned rq, int timeout_ms);
struct sockaddr_in loopback(uint16_t port);
void server_listen(struct server *s);
void server_start_accept(struct server *s, const struct xport_params *p);
int server_join(struct server *s);
struct pair make_pair(unsigned nlanes, unsigned sq, unsigned rq);
void free_pair(struct pair *pr);
void wait_wcs(struct xport *x, struct xport_wc *out, size_t want, int timeout_ms);
void expect_no_wcs(struct xport *x, int ms);
void post_recvs(struct xport *x, unsigned lane, uint64_t first, size_t n);
struct xport_wr wr_write(const struct xport_mr *mr, const void *buf, uint32_t len, uint64_t raddr,
			 uint32_t rkey, unsigned lane, uint64_t wr_id);
void fill(uint8_t *p, size_t n, uint32_t seed);

/* A raw peer on a lane: its socket, its hello, the acceptor's answer, a frame header. */
int raw_connect(uint16_t port);
void raw_hello(int fd, uint16_t lane, uint16_t nlanes, const uint8_t *token);
void expect_ack(int fd);
void expect_dropped(int fd);
void put32(uint8_t *p, uint32_t v);
void put64(uint8_t *p, uint64_t v);
void raw_frame(uint8_t h[32], uint8_t op, uint32_t rkey, uint64_t addr, uint32_t len);
