/* SPDX-License-Identifier: MIT */
/*
 * The `tcp` transport's private parts, shared by its files (src/xport_tcp/):
 * the frame, the lane and xport structures, and what each file offers the
 * others. Nothing outside src/xport_tcp/ includes this; callers see only
 * xport_tcp_ops (src/xport.h).
 *
 * The transport: RC RDMA-write semantics in software, like iWARP. One xport
 * = nlanes TCP connections ("lanes") + one protection domain (the MR table).
 * Each lane has a TX thread that writes frames straight from the caller's
 * registered buffers and an RX thread that validates each incoming frame
 * header against the MR table and only then reads the payload straight into
 * the registered target memory. The responder acknowledges placed frames
 * (cumulative ACK) so a requester completion means "placed at the peer", and
 * a NAK tells the requester exactly which request was refused.
 * Wire format and semantics: docs/XPORT_TCP.md.
 *
 * Files, by object:
 *   tcp.c    the xport: create (lanes, threads), destroy, the ops table
 *   conn.c   connection set-up: listen and accept (hello, token), connect
 *   frame.c  the frame: its header codec, sending one (clear or sealed), and
 *            reading a payload and tag off a lane's socket
 *   tx.c     a lane's TX thread: requests, ACKs and its NAK onto the socket
 *   rx.c     a lane's RX thread: each frame checked, then placed or answered
 *   lane.c   a lane failing: why (the xport's error), what completes how
 *   mr.c     memory registrations, their keys and fences
 *   data.c   posting writes and receives
 *   cq.c     the completion queue and its event fd
 *
 * Locks: a lane's lock may be held while taking mr_lock (TX thread), never
 * the other way round; err_lock, tee_lock and the CQ's lock are taken last.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "fenceset.h"
#include "lane_hello.h"
#include "lane_seal.h"
#include "macro.h"
#include "xport.h"

#define TCP_HELLO_LEN	  LANE_HELLO_LEN
#define TCP_ACK_LEN	  4
#define TCP_FRAME_HDR_LEN 32
#define TCP_MAX_INLINE	  256
#define TCP_SEAL_PIECE	  (256 * 1024) /* sealed payload is encrypted and sent in pieces */

enum tcp_frame_op {
	TCP_OP_WRITE = 1,
	TCP_OP_WRITE_IMM = 2,
	TCP_OP_NAK = 3,
	TCP_OP_ACK = 4,
};

/* NAK codes on the wire (imm of a NAK frame). */
enum tcp_nak_code {
	TCP_NAK_REM_ACCESS = 1,
	TCP_NAK_RNR = 2,
	TCP_NAK_INVALID = 3,
	TCP_NAK_AUTH = 4, /* sealed lanes: the frame failed authentication */
};

struct tcp_frame {
	uint8_t op;
	uint8_t flags;
	uint16_t reserved16;
	uint32_t rkey;
	uint64_t addr;
	uint32_t len;
	uint32_t imm;
	uint64_t reserved64;
};

_Static_assert(TCP_FRAME_HDR_LEN == 1 + 1 + 2 + 4 + 8 + 4 + 4 + 8, "frame layout");

struct tcp_cq {
	pthread_mutex_t lock;
	struct xport_wc *ring;
	size_t cap, head, count;
	int efd;
};

struct tcp_mr {
	struct xport_mr pub;
	struct tcp_mr *next;
	unsigned busy; /* RX threads placing into it right now */
	bool revoked;
	/* Under mr_lock: ranges the engine holds; peer writes touching them are refused. */
	struct fence_set fences;
	unsigned fence_waiters; /* tcp_fence calls waiting for a placement to end */
};

struct tcp_swr {
	uint64_t wr_id;
	uint8_t op;
	bool signaled;
	uint32_t rkey;
	uint64_t remote_addr;
	uint32_t len;
	uint32_t imm;
	const void *buf;	   /* caller's buffer, or this slot's inline copy */
	const struct xport_mr *mr; /* the registration holding buf; NULL when inline or empty */
};

struct tcp_xport;

struct tcp_lane {
	struct tcp_xport *tx;
	unsigned idx;
	int fd;
	pthread_t tx_thread, rx_thread;
	bool tx_started, rx_started;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* wakes the TX thread */
	/* Send queue: slots [acked, tail) in use; [acked, issued) handed to the socket. */
	struct tcp_swr *sq;
	uint8_t *inline_buf; /* sq_depth * TCP_MAX_INLINE */
	uint64_t seq_acked, seq_issued, seq_tail;
	/* Posted receives. */
	uint64_t *rq;
	unsigned rq_head, rq_count;
	/* Responder: data frames placed, and the count last acknowledged. */
	uint64_t placed, ack_sent;

	bool stopping; /* destroy */
	bool failed;
	bool rx_exited;	 /* the RX thread is gone: nothing more is placed from this lane */
	bool sq_flushed; /* the TX thread has flushed the send queue */
	bool nak_pending;
	bool stalled; /* test hook XPORT_TEST_TAMPER_STALL: sends nothing more */
	uint32_t nak_code;
	uint64_t nak_seq;
	/* How the send queue completes on failure. */
	uint64_t fail_good_upto; /* seqs below complete as success */
	uint64_t fail_hit_seq;	 /* this seq gets fail_hit_status */
	int fail_hit_status;

	/* Under tx->mr_lock: the MR and range (offsets) the RX thread is placing into. */
	struct tcp_mr *placing;
	uint64_t placing_off, placing_len;

	/*
	 * Under lock: the caller's buffer the TX thread is reading (sending or
	 * sealing) right now; dereg_mr waits for it (tx_waiters) before the
	 * memory can go.
	 */
	const uint8_t *tx_reading;
	uint32_t tx_reading_len;
	unsigned tx_waiters;

	/* Sealed lanes: the TX thread's and the RX thread's own, never shared. */
	struct lane_seal seal_tx, seal_rx;
	uint8_t *seal_buf; /* TCP_SEAL_PIECE bytes of ciphertext on their way out */
};

struct tcp_xport {
	struct xport pub;
	int timeout_ms;
	struct tcp_cq cq;

	pthread_mutex_t mr_lock;
	pthread_cond_t mr_cond;
	struct tcp_mr *mrs;

	pthread_mutex_t err_lock;
	bool has_error;
	char error[256];

	bool sealed;
	/* Test hooks (xport_params): lane 0's TX thread alone reads and sets tamper_done. */
	unsigned tamper;
	bool tamper_done;
	int tee_fd;
	pthread_mutex_t tee_lock;

	struct tcp_lane lanes[XPORT_MAX_LANES];
};

static inline struct tcp_xport *to_tcp(struct xport *x)
{
	return container_of(x, struct tcp_xport, pub);
}

/* ---- tcp.c: the xport ---- */

int tcp_params_check(const struct xport_params *p);
/* Takes ownership of fds[] (all of them, also on failure). connector: we connected the lanes. */
int tcp_xport_create(const struct xport_params *p, bool connector, int *fds, struct xport **ret);
void tcp_destroy(struct xport *x);

/* ---- conn.c: connection set-up ---- */

int tcp_listen(const struct sockaddr *addr, socklen_t addrlen, int tos,
	       struct xport_listener **ret_listener, uint16_t *ret_port);
int tcp_accept(struct xport_listener *l, const struct xport_params *p, struct xport **ret);
void tcp_listener_close(struct xport_listener *l);
int tcp_connect(const struct sockaddr *addr, socklen_t addrlen, const struct xport_params *p,
		struct xport **ret);

/* ---- frame.c: the frame on a lane's socket ---- */

void tcp_frame_decode(const uint8_t in[TCP_FRAME_HDR_LEN], struct tcp_frame *ret);
/* One frame, header and payload (f->len bytes), clear or sealed; a test hook may spoil it. */
int tcp_send_frame(struct tcp_lane *ln, const struct tcp_frame *f, const void *payload);
/* Blocking full read. Returns 0, -EPIPE on EOF, or -errno. */
int tcp_recv_all(int fd, void *buf, size_t len);
/* Sealed lanes: the payload lands as ciphertext and is opened in place, piece by piece. */
int tcp_recv_open(struct tcp_lane *ln, uint8_t *target, uint32_t len);
/* Sealed lanes: read the frame's tag and check it. -EBADMSG: not what the peer sealed. */
int tcp_recv_tag(struct tcp_lane *ln);

/* ---- tx.c, rx.c: a lane's threads (arg: the struct tcp_lane) ---- */

void *tcp_lane_tx_main(void *arg);
void *tcp_lane_rx_main(void *arg);

/* ---- lane.c: a lane failing ---- */

enum lane_fail_kind {
	FAIL_CONN_LOST,	   /* peer closed / I/O error: first unacked WR gets RETRY_EXC_ERR */
	FAIL_NAK_RECEIVED, /* the peer refused frame `seq` */
	FAIL_WE_NAK,	   /* we refused a frame of the peer: NAK it, flush our queue */
};

/* The xport's error: the first failure is the cause, later ones are ignored. */
void tcp_set_error(struct tcp_xport *tx, const char *fmt, ...) _printf_(2, 3);
const char *tcp_last_error(struct xport *x);
/* Flushes posted receives now; the TX thread flushes the SQ (tcp_lane_flush_sq_locked). */
void tcp_lane_fail(struct tcp_lane *ln, enum lane_fail_kind kind, uint64_t seq, int status);
/* TX thread, lane->lock held: complete every send WR of a failed lane. */
void tcp_lane_flush_sq_locked(struct tcp_lane *ln);
int tcp_lane_down(struct xport *x, unsigned lane);

/* ---- mr.c: memory registrations ---- */

int tcp_reg_mr(struct xport *x, void *addr, size_t len, unsigned access, struct xport_mr **ret_mr);
int tcp_dereg_mr(struct xport *x, struct xport_mr *pub);
int tcp_fence(struct xport *x, struct xport_mr *pub, uint64_t offset, uint64_t len, bool on);
/* Is pub still registered? A send from a deregistered buffer must not start. */
bool tcp_mr_registered(struct tcp_xport *tx, const struct xport_mr *pub);
/* mr_lock held. The MR whose rkey matches and that allows remote writes, or NULL. */
struct tcp_mr *tcp_mr_find_rkey_locked(struct tcp_xport *tx, uint32_t rkey);
/* The RX thread of ln is done placing into m. */
void tcp_mr_release(struct tcp_xport *tx, struct tcp_lane *ln, struct tcp_mr *m);

/* ---- data.c: posting ---- */

int tcp_post_writes(struct xport *x, const struct xport_wr *wrs, size_t n);
int tcp_post_recvs(struct xport *x, unsigned lane, const uint64_t *wr_ids, size_t n);

/* ---- cq.c: completions ---- */

/* Leaves cq safe for tcp_cq_fini whatever happens. */
int tcp_cq_init(struct tcp_cq *cq, size_t cap);
void tcp_cq_fini(struct tcp_cq *cq);
void tcp_push_wc(struct tcp_xport *tx, uint64_t wr_id, int status, uint32_t opcode, uint32_t imm,
		 uint32_t len, unsigned lane);
void tcp_push_write_wc(struct tcp_lane *ln, uint64_t wr_id, int status);
int tcp_poll_cq(struct xport *x, struct xport_wc *wcs, size_t max);
int tcp_event_fd(struct xport *x);
