/* SPDX-License-Identifier: MIT */
/*
 * What the engine tests (unit/test_engine_*.c) share: engine_run in one
 * process, a sender and a receiver engine on two threads, joined by a real
 * TLS 1.3 pair (certificates from certs_init, over a socketpair) and real tcp
 * lanes on loopback, the receiver writing real files into a temp directory
 * through io_uring. Where a case needs a misbehaving peer, the test thread
 * plays it by hand (engine_raw.c) the way tests/tools/rawpeer.c does against
 * a daemon: control messages through chan, chunks as WRITE + WRITE_WITH_IMM
 * through the xport ops; or a receiver: a ring registered for the sender's
 * writes, RING and FILES_ACK by hand, credits withheld.
 *
 * Every case checks engine_run's return, its protocol error code, the stats,
 * and the destination: nothing under a final name unless it was committed, no
 * temp file (".NAME.rdmacp.XXXXXXXX"), no descriptor left open beneath it
 * (an O_TMPFILE file lives only as one).
 *
 * Only engine.h's public API and the tls/chan/xport APIs are used, so the
 * harness stands while the engine behind them is reorganised. Each test
 * executable runs its cases with group_setup/group_teardown (io_uring checked,
 * SIGPIPE ignored, certificates made) and T(fn) (a fresh fixture per case).
 */
#ifndef RDMACP_TEST_ENGINE_HARNESS_H
#define RDMACP_TEST_ENGINE_HARNESS_H

#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>

#include "certs.h"
#include "chan.h"
#include "clock.h"
#include "engine.h"
#include "hash.h"
#include "macro.h"
#include "proto/msg.h"
#include "tls.h"
#include "xport.h"

#define CHUNK  (64u * 1024)
#define SLOTS  4u
#define NLANES 2u
#define IO_MS  5000
/* Longest any one engine may take in these cases before the test gives up. */
#define JOIN_MS 8000

/*
 * How long the cases that go silent wait for the engine to notice (the
 * comment on test_idle_timeout says why one second).
 */
#define IDLE_MS 1000

/* ---- the link: TLS control pair + tcp lanes ---------------------------- */

struct end {
	struct tls_conn *tls;
	struct chan chan;
	bool chan_ok;
	struct xport *x;
};

/* ---- an engine on its own thread ---------------------------------------- */

struct events {
	unsigned ok, failed, skipped, notices;
	uint64_t ok_bytes;
	uint32_t first_failed_code;
	bool first_failed_local; /* the failure happened on this side */
	/* The last regular file committed: its digest, and its kind (engine_entry_ev's). */
	uint8_t last_hash[HASH_LEN];
	uint32_t last_tree;
};

struct run {
	struct engine_params p;
	struct events ev;
	struct engine_stats st;
	uint32_t code;
	int r;
	char err[512];
	pthread_t th;
	bool started;
};

/* ---- the fixture: directories, the link, the receiver's run ------------ */

struct fx {
	char *dir, *src, *dst;
	int src_fd, dst_fd;
	struct end tx, rx;
	struct run rxr, txr;
};

/* ---- the sender's entries ------------------------------------------------ */

struct source {
	struct engine_src e[16];
	size_t n, next;
};

/* ---- a sender played by hand --------------------------------------------- */

struct raw {
	struct end *end;
	uint8_t *buf; /* one chunk of payload, then a descriptor */
	struct xport_mr *mr;
	struct msg_ring ring;
	uint64_t wr_id, seq;
	unsigned credits;
	/* Played receiver: buf is the ring (SLOTS chunks, then the descriptors). */
	bool receiver;
	unsigned data_imms;
	uint32_t data_slot[64];
	uint32_t data_lane[64]; /* the lane each came on */
};

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

/* engine_harness.c: files, the link, an engine on its thread, the fixture, the sender's entries */
char *path_in(const char *dir, const char *name);
void fill(uint8_t *buf, size_t len, unsigned seed);
void hash_of(const uint8_t *buf, size_t len, uint8_t out[HASH_LEN]);
void write_file(const char *dir, const char *name, const uint8_t *buf, size_t len);
uint8_t *read_file(const char *dir, const char *name, size_t *ret_len);
void assert_same_file(const char *src, const char *dst, const char *name);
int cmp_str(const void *a, const void *b);
void collect(const char *root, const char *rel, char ***names, size_t *n);
char *tree(const char *dir);
void assert_no_fd_beneath(const char *dir);
void assert_dest(const char *dir, const char *expect);
void end_close(struct end *e);
void run_start(struct run *u);
void run_join(struct run *u);
int fx_setup(void **state);
int fx_teardown(void **state);
int source_next(void *ud, const struct engine_src **ret, char *why, size_t whylen);
uint64_t source_file(struct fx *f, struct source *s, const char *name, size_t size);
void source_dir(struct fx *f, struct source *s, const char *name);
void source_symlink(struct source *s, const char *name, const char *target);
void run_both(struct fx *f, struct source *s);
void assert_ok_run(const struct run *u);
void assert_failed_run(const struct run *u, int r, uint32_t code, const char *why);
void dest_file(struct fx *f, const char *name, size_t size, unsigned seed, struct timespec mtime);
int group_setup(void **state);
int group_teardown(void **state);
void seal_both(struct fx *f, uint8_t rx_key_byte);

/* engine_raw.c: a peer played by hand */
void raw_init(struct raw *w, struct end *e);
void raw_init_receiver(struct raw *w, struct end *e);
void raw_free(struct raw *w);
void raw_drain(struct raw *w, uint64_t want_id, int *done);
void raw_chunk(struct raw *w, uint32_t slot, uint32_t id, uint64_t off, const uint8_t *data,
	       uint32_t len);
void raw_pack(struct raw *w, uint32_t slot, size_t n, const uint32_t *ids,
	      const uint8_t *const *data, const uint32_t *lens, uint32_t table_extra);
void raw_send(struct raw *w, const struct msg *m);
void raw_next(struct raw *w, struct msg *m);
void raw_expect(struct raw *w, uint16_t type, struct msg *m);
void raw_expect_error(struct raw *w, uint32_t code, const char *why);
void raw_ring(struct raw *w);
void raw_files(struct raw *w, size_t n, const uint32_t *ids, const char *const *names,
	       const uint64_t *sizes);
void raw_ack(struct raw *w, size_t n, const uint32_t *ids, const uint32_t *status);
void raw_done(struct raw *w, uint32_t id, uint64_t bytes, const uint8_t *data, size_t len);
void raw_result(struct raw *w, uint32_t id, uint32_t status, const char *why);
void raw_end(struct raw *w, uint32_t files);
void assert_stats(const struct engine_stats *st, uint64_t ok, uint64_t failed, uint64_t bytes,
		  uint32_t first_error);
void raw_zeros(struct raw *w, uint32_t id, uint64_t off, uint64_t len);
/* The tree of buf, independently: the XXH3-128 of each CHUNK of it, canonical, in order. */
void tree_ref(const uint8_t *buf, size_t len, uint8_t out[HASH_LEN]);

#endif
