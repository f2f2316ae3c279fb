/* SPDX-License-Identifier: MIT */
/*
 * rawpeer (tests/tools/rawpeer.c has its manual): what its files share, the
 * peer's state and the calls between them. Split by concern: rawpeer_out.c
 * (output, arguments, printing), rawpeer_net.c (data path, control channel,
 * connecting), rawpeer_open.c, rawpeer_data.c and rawpeer_wait.c (the steps),
 * rawpeer_recv.c (recv-all), rawpeer.c (the step table and main).
 */
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "clock.h"
#include "hash.h"
#include "lane_seal.h"
#include "log.h"
#include "macro.h"
#include "net.h"
#include "proto/msg.h"
#include "proto/wire.h"
#include "tls.h"
#include "xport.h"

#define EXIT_EXPECT 1
#define EXIT_SETUP  2

#define DEFAULT_CHUNK (1u << 20)
#define DEFAULT_SLOTS 8
#define STAGE_BYTES   4096 /* the descriptor of a chunk is staged here */
#define LINE_MAX_LEN  8192
/* A message type's bit in what await waits for. */
#define TYPE_BIT(t) (1ull << (t))

struct peer {
	/* options */
	const char *host, *cert, *key, *ca, *source;
	uint16_t port;
	int timeout_ms;

	/* control channel */
	struct tls_ctx *ctx;
	struct tls_conn *tls;
	struct chan chan;
	bool connected;
	bool closed;
	char closed_how[64];
	struct sockaddr_storage addr;
	socklen_t addrlen;
	uint64_t caps, peer_caps;  /* the HELLOs: ours, the daemon's */
	unsigned sealed_transfers; /* lane_seal_export's count */

	/* the transfer */
	bool have_ok;
	struct msg_open_ok ok;
	enum lane_seal_purpose purpose; /* what asked for ok: OPEN's direction, BENCH */
	uint32_t open_flags; /* the last OPEN's: WRITE_SEND picks the verbs lanes' path */
	struct xport *x;
	struct xport_mr *mr;
	uint8_t *buf; /* two chunks, then STAGE_BYTES */
	size_t buflen;
	uint32_t lane_errs[XPORT_MAX_LANES]; /* statuses already printed, as bits */
	bool poll_failed;		     /* poll_cq's own failure printed */
	bool have_ring;
	struct msg_ring ring;
	uint8_t credit[PROTO_MAX_SLOTS]; /* 1: we may write the slot */
	uint64_t credits_returned;
	uint64_t wr_id;
	uint64_t seq;
	uint32_t files_offered;
	uint8_t *rring; /* recv-all: our ring (registered until the end) */
	struct xport_mr *rmr;

	/* output */
	char last[LINE_MAX_LEN];
	char *seen;
	size_t seen_len, seen_cap;
};

struct step {
	const char *name;
	int min_args, max_args; /* max -1: any number */
	int (*fn)(struct peer *p, char **args, int nargs);
	bool needs_conn;
};

struct rfile {
	uint32_t id;
	uint64_t size, got, hash_off;
	struct file_hash h;
	bool live;
};

struct recv_state {
	uint8_t *ring; /* slots * chunk, then the descriptors */
	struct xport_mr *mr;
	uint32_t slots, chunk;
	struct rfile files[64];
	struct {
		bool held;
		uint32_t id, len, lane;
		uint64_t off;
	} held[PROTO_MAX_SLOTS]; /* chunks waiting for their turn in the hash */
	uint64_t chunks;
	uint32_t files_ok, files_bad;
	bool failed, got_end;
	/* hostile options */
	bool no_credit;	  /* never return a slot */
	bool have_result; /* answer every FILE_DONE with this status */
	uint32_t result;
};

void say(struct peer *p, const char *fmt, ...) _printf_(2, 3);
int usage_error(const char *fmt, ...) _printf_(1, 2);
int parse_u64(const char *s, uint64_t *ret);
int parse_u32(const char *s, uint32_t *ret);
int parse_hex(const char *s, uint8_t **ret, size_t *ret_len);
int unescape(const char *in, char *out, size_t outlen);
const char *opt_value(char **args, int nargs, const char *key);
bool has_word(char **args, int nargs, const char *word);
int opt_u32(char **args, int nargs, const char *key, uint32_t def, uint32_t *ret);
int msg_type_by_name(const char *s, uint16_t *ret);
int status_by_name(const char *s, uint32_t *ret);
const char *transport_name(unsigned kind);
void print_msg(struct peer *p, const struct msg *m, const char *suffix);
void drain_cq(struct peer *p, uint64_t want_id, int *ret_done, struct recv_state *rs);
int post_and_wait(struct peer *p, struct xport_wr *wrs, size_t n);
const char *outcome(int r, char *buf, size_t len);
int send_msg(struct peer *p, const struct msg *m);
int next_msg(struct peer *p, int64_t deadline, int64_t t0, struct msg *m, struct recv_state *rs);
void handle_msg(struct peer *p, const struct msg *m, bool pong);
int await(struct peer *p, uint64_t want, const char *what, struct msg *ret);
int await_print(struct peer *p, uint16_t type);
int connect_control(struct peer *p);
int step_hello(struct peer *p, char **args, int nargs);
int step_ping(struct peer *p, char **args, int nargs);
int step_open(struct peer *p, char **args, int nargs);
int step_bench(struct peer *p, char **args, int nargs);
void drop_transfer(struct peer *p);
int step_drop_lanes(struct peer *p, char **args, int nargs);
int step_lanes(struct peer *p, char **args, int nargs);
int step_ring(struct peer *p, char **args, int nargs);
int step_files(struct peer *p, char **args, int nargs);
int step_ack(struct peer *p, char **args, int nargs);
int step_result(struct peer *p, char **args, int nargs);
int step_chunk(struct peer *p, char **args, int nargs);
int step_poke(struct peer *p, char **args, int nargs);
int step_write(struct peer *p, char **args, int nargs);
int step_credits(struct peer *p, char **args, int nargs);
int step_done(struct peer *p, char **args, int nargs);
int step_get(struct peer *p, char **args, int nargs);
int step_end(struct peer *p, char **args, int nargs);
int step_bye(struct peer *p, char **args, int nargs);
int step_close(struct peer *p, char **args, int nargs);
int step_fin(struct peer *p, char **args, int nargs);
int step_frame(struct peer *p, char **args, int nargs);
int step_raw(struct peer *p, char **args, int nargs);
int step_wait(struct peer *p, char **args, int nargs);
int parse_secs(const char *s, double *ret);
int step_idle(struct peer *p, char **args, int nargs);
int step_sleep(struct peer *p, char **args, int nargs);
int step_expect(struct peer *p, char **args, int nargs);
int step_expect_not(struct peer *p, char **args, int nargs);
int step_expect_seen(struct peer *p, char **args, int nargs);
int recv_on_imm(struct peer *p, struct recv_state *rs, const struct xport_wc *wc);
int step_recv_all(struct peer *p, char **args, int nargs);
