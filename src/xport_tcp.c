/* SPDX-License-Identifier: MIT */
/*
 * The `tcp` transport: RC RDMA-write semantics in software, like iWARP.
 *
 * One xport = nlanes TCP connections ("lanes") + one protection domain (the
 * MR table). Each lane has a TX thread that writes frames straight from the
 * caller's registered buffers and an RX thread that validates each incoming
 * frame header against the MR table and only then reads the payload straight
 * into the registered target memory. The responder acknowledges placed frames
 * (cumulative ACK) so a requester completion means "placed at the peer", and
 * a NAK tells the requester exactly which request was refused.
 * Wire format and semantics: docs/XPORT_TCP.md.
 */
#include "xport.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "clock.h"
#include "fdutil.h"
#include "fenceset.h"
#include "lane_hello.h"
#include "lane_seal.h"
#include "macro.h"

#define TCP_HELLO_LEN	  LANE_HELLO_LEN
#define TCP_ACK_LEN	  4
#define TCP_FRAME_HDR_LEN 32
#define TCP_MAX_INLINE	  256
#define TCP_MAX_DEPTH	  65536
#define TCP_MAX_PENDING	  32	       /* unauthenticated connections held at once by accept */
#define TCP_SEAL_PIECE	  (256 * 1024) /* sealed payload is encrypted and sent in pieces */

static const uint8_t tcp_hello_ack[TCP_ACK_LEN] = { 'R', 'D', 'O', 'K' };

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

/* ---- big-endian field codecs ---- */

static void put_be16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

static void put_be32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static void put_be64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, sizeof(v));
}

static uint16_t get_be16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

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

static void frame_encode(const struct tcp_frame *f, uint8_t out[TCP_FRAME_HDR_LEN])
{
	out[0] = f->op;
	out[1] = 0;
	put_be16(out + 2, 0);
	put_be32(out + 4, f->rkey);
	put_be64(out + 8, f->addr);
	put_be32(out + 16, f->len);
	put_be32(out + 20, f->imm);
	put_be64(out + 24, 0);
}

static void frame_decode(const uint8_t in[TCP_FRAME_HDR_LEN], struct tcp_frame *ret)
{
	ret->op = in[0];
	ret->flags = in[1];
	ret->reserved16 = get_be16(in + 2);
	ret->rkey = get_be32(in + 4);
	ret->addr = get_be64(in + 8);
	ret->len = get_be32(in + 16);
	ret->imm = get_be32(in + 20);
	ret->reserved64 = get_be64(in + 24);
}

_Static_assert(TCP_FRAME_HDR_LEN == 1 + 1 + 2 + 4 + 8 + 4 + 4 + 8, "frame layout");

/* ---- time ---- */

/* ---- completion queue ---- */

struct tcp_cq {
	pthread_mutex_t lock;
	struct xport_wc *ring;
	size_t cap, head, count;
	int efd;
};

/* Leaves cq safe for cq_fini whatever happens. */
static int cq_init(struct tcp_cq *cq, size_t cap)
{
	pthread_mutex_init(&cq->lock, NULL);
	cq->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (cq->efd < 0) {
		return negerrno();
	}
	cq->ring = calloc(cap, sizeof(*cq->ring));
	if (!cq->ring) {
		return -ENOMEM;
	}
	cq->cap = cap;
	return 0;
}

static void cq_fini(struct tcp_cq *cq)
{
	if (cq->efd >= 0) {
		close(cq->efd);
	}
	free(cq->ring);
	pthread_mutex_destroy(&cq->lock);
}

/* Completions are never dropped: the ring grows when a slow consumer lets it fill. */
static void cq_push(struct tcp_cq *cq, const struct xport_wc *wc)
{
	static const uint64_t one = 1;

	pthread_mutex_lock(&cq->lock);
	if (cq->count == cq->cap) {
		size_t ncap = cq->cap * 2;
		struct xport_wc *n = calloc(ncap, sizeof(*n));

		/* Out of memory here leaves no sane way on; treat it as our bug. */
		assert(n);
		for (size_t i = 0; i < cq->count; i++) {
			n[i] = cq->ring[(cq->head + i) % cq->cap];
		}
		free(cq->ring);
		cq->ring = n;
		cq->cap = ncap;
		cq->head = 0;
	}
	cq->ring[(cq->head + cq->count) % cq->cap] = *wc;
	cq->count++;
	pthread_mutex_unlock(&cq->lock);
	/* EAGAIN only when the counter would overflow: it is readable then anyway. */
	(void)!write(cq->efd, &one, sizeof(one));
}

/* ---- xport structures ---- */

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

static struct tcp_xport *to_tcp(struct xport *x)
{
	return container_of(x, struct tcp_xport, pub);
}

static void xport_set_error(struct tcp_xport *tx, const char *fmt, ...) _printf_(2, 3);
static void xport_set_error(struct tcp_xport *tx, const char *fmt, ...)
{
	va_list ap;

	/* The first failure is the cause; later ones are its consequences. */
	pthread_mutex_lock(&tx->err_lock);
	if (!tx->has_error) {
		va_start(ap, fmt);
		vsnprintf(tx->error, sizeof(tx->error), fmt, ap);
		va_end(ap);
		tx->has_error = true;
	}
	pthread_mutex_unlock(&tx->err_lock);
}

static void push_wc(struct tcp_xport *tx, uint64_t wr_id, int status, uint32_t opcode, uint32_t imm,
		    uint32_t len, unsigned lane)
{
	struct xport_wc wc = {
		.wr_id = wr_id,
		.status = status,
		.opcode = opcode,
		.imm = imm,
		.len = len,
		.lane = lane,
	};

	cq_push(&tx->cq, &wc);
}

static void push_write_wc(struct tcp_lane *ln, uint64_t wr_id, int status)
{
	push_wc(ln->tx, wr_id, status, XPORT_WC_WRITE, 0, 0, ln->idx);
}

/* ---- lane failure ---- */

enum lane_fail_kind {
	FAIL_CONN_LOST,	   /* peer closed / I/O error: first unacked WR gets RETRY_EXC_ERR */
	FAIL_NAK_RECEIVED, /* the peer refused frame `seq` */
	FAIL_WE_NAK,	   /* we refused a frame of the peer: NAK it, flush our queue */
};

/* Call with lane->lock held. Flushes posted receives now; the TX thread flushes the SQ. */
static void lane_fail_locked(struct tcp_lane *ln, enum lane_fail_kind kind, uint64_t seq,
			     int status)
{
	struct tcp_xport *tx = ln->tx;

	if (ln->failed) {
		return;
	}
	ln->failed = true;
	switch (kind) {
	case FAIL_CONN_LOST:
		ln->fail_good_upto = ln->seq_acked;
		ln->fail_hit_seq = ln->seq_acked < ln->seq_issued ? ln->seq_acked : UINT64_MAX;
		ln->fail_hit_status = XPORT_WC_RETRY_EXC_ERR;
		break;
	case FAIL_NAK_RECEIVED:
		ln->fail_good_upto = seq;
		ln->fail_hit_seq = seq;
		ln->fail_hit_status = status;
		break;
	case FAIL_WE_NAK:
		ln->fail_good_upto = ln->seq_acked;
		ln->fail_hit_seq = UINT64_MAX;
		ln->fail_hit_status = XPORT_WC_WR_FLUSH_ERR;
		ln->nak_pending = true;
		ln->nak_code = (uint32_t)status;
		ln->nak_seq = seq;
		break;
	}
	while (ln->rq_count > 0) {
		push_wc(tx, ln->rq[ln->rq_head], XPORT_WC_WR_FLUSH_ERR, XPORT_WC_RECV_IMM, 0, 0,
			ln->idx);
		ln->rq_head = (ln->rq_head + 1) % tx->pub.rq_depth;
		ln->rq_count--;
	}
	pthread_cond_broadcast(&ln->cond);
}

static void lane_fail(struct tcp_lane *ln, enum lane_fail_kind kind, uint64_t seq, int status)
{
	pthread_mutex_lock(&ln->lock);
	lane_fail_locked(ln, kind, seq, status);
	pthread_mutex_unlock(&ln->lock);
	if (kind != FAIL_WE_NAK) {
		/* Unblocks a TX thread stuck writing to a peer that stopped reading. */
		shutdown(ln->fd, SHUT_RDWR);
	}
}

/* TX thread, lane->lock held: complete every send WR of a failed lane. */
static void lane_flush_sq_locked(struct tcp_lane *ln)
{
	struct tcp_xport *tx = ln->tx;

	for (uint64_t s = ln->seq_acked; s < ln->seq_tail; s++) {
		const struct tcp_swr *w = &ln->sq[s % tx->pub.sq_depth];

		if (s < ln->fail_good_upto) {
			if (w->signaled) {
				push_write_wc(ln, w->wr_id, XPORT_WC_SUCCESS);
			}
		} else if (s == ln->fail_hit_seq) {
			push_write_wc(ln, w->wr_id, ln->fail_hit_status);
		} else {
			push_write_wc(ln, w->wr_id, XPORT_WC_WR_FLUSH_ERR);
		}
	}
	ln->seq_acked = ln->seq_issued = ln->seq_tail;
	ln->sq_flushed = true;
}

/* ---- socket I/O ---- */

/* Blocking full write of an iovec array; modifies iov. */
static int send_all(int fd, struct iovec *iov, int iovcnt)
{
	while (iovcnt > 0) {
		struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };
		ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			return negerrno();
		}
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/* Blocking full read. Returns 0, -EPIPE on EOF, or -errno. */
static int recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = recv(fd, p, len, MSG_WAITALL);

		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			return negerrno();
		}
		if (n == 0) {
			return -EPIPE;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The test hook's copy of what a lane sends (xport_params.test_tee_path). */
static void tee_iov(struct tcp_xport *tx, const struct iovec *iov, int iovcnt)
{
	pthread_mutex_lock(&tx->tee_lock);
	for (int i = 0; i < iovcnt; i++) {
		const char *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;

		while (left > 0) {
			ssize_t n = write(tx->tee_fd, p, left);

			if (n <= 0) {
				break;
			}
			p += n;
			left -= (size_t)n;
		}
	}
	pthread_mutex_unlock(&tx->tee_lock);
}

static int lane_send_iov(struct tcp_lane *ln, struct iovec *iov, int iovcnt)
{
	if (ln->tx->tee_fd >= 0) {
		tee_iov(ln->tx, iov, iovcnt);
	}
	return send_all(ln->fd, iov, iovcnt);
}

/* Lane 0's first payload write, once, when a test asked to spoil it. */
static unsigned tamper_this(struct tcp_lane *ln, const struct tcp_frame *f)
{
	struct tcp_xport *tx = ln->tx;

	if (tx->tamper == XPORT_TEST_TAMPER_NONE || tx->tamper_done || ln->idx != 0 ||
	    f->op != TCP_OP_WRITE || f->len < 2) {
		return XPORT_TEST_TAMPER_NONE;
	}
	tx->tamper_done = true;
	return tx->tamper;
}

/*
 * A sealed frame: the clear header (the additional data), the payload
 * encrypted piece by piece through seal_buf, the tag. The caller's buffer is
 * only read, as for a clear frame.
 */
static int send_sealed(struct tcp_lane *ln, const struct tcp_frame *f, const void *payload,
		       unsigned tamper)
{
	struct tcp_frame wire = *f;
	uint8_t hdr[TCP_FRAME_HDR_LEN], wire_hdr[TCP_FRAME_HDR_LEN], tag[LANE_SEAL_TAG_LEN];
	const uint8_t *p = payload;
	uint32_t off = 0, send_len = f->len;
	bool hdr_sent = false;
	int r;

	frame_encode(f, hdr);
	if (tamper == XPORT_TEST_TAMPER_MOVE) {
		wire.addr += f->len;
	} else if (tamper == XPORT_TEST_TAMPER_TRUNCATE) {
		wire.len = send_len = f->len / 2;
	}
	frame_encode(&wire, wire_hdr);
	r = lane_seal_begin(&ln->seal_tx, hdr, sizeof(hdr));
	if (r < 0) {
		return r;
	}
	do {
		uint32_t n = MIN(f->len - off, (uint32_t)TCP_SEAL_PIECE);
		bool failed;

		/*
		 * A failed lane's peer reads no more: stop sealing payload nobody
		 * will open (replies still go: the NAK tells the peer why).
		 */
		pthread_mutex_lock(&ln->lock);
		failed = ln->failed && (f->op == TCP_OP_WRITE || f->op == TCP_OP_WRITE_IMM);
		pthread_mutex_unlock(&ln->lock);
		if (failed) {
			return -ECANCELED;
		}
		uint32_t out_n = off >= send_len ? 0 : MIN(n, send_len - off);
		struct iovec iov[3];
		int iovcnt = 0;

		r = lane_seal_update(&ln->seal_tx, p + off, ln->seal_buf, n);
		if (r < 0) {
			return r;
		}
		if (tamper == XPORT_TEST_TAMPER_FLIP && off == 0) {
			ln->seal_buf[n / 2] ^= 0x01;
		}
		off += n;
		if (!hdr_sent) {
			iov[iovcnt++] =
			    (struct iovec){ .iov_base = wire_hdr, .iov_len = sizeof(hdr) };
			hdr_sent = true;
		}
		if (out_n > 0) {
			iov[iovcnt++] =
			    (struct iovec){ .iov_base = ln->seal_buf, .iov_len = out_n };
		}
		if (off == f->len) {
			r = lane_seal_end(&ln->seal_tx, tag);
			if (r < 0) {
				return r;
			}
			iov[iovcnt++] = (struct iovec){ .iov_base = tag, .iov_len = sizeof(tag) };
		}
		r = lane_send_iov(ln, iov, iovcnt);
		if (r < 0) {
			return r;
		}
	} while (off < f->len);
	if (tamper == XPORT_TEST_TAMPER_REPLAY) {
		/* The same nonce, key and bytes again: exactly what a replaying path sends. */
		ln->seal_tx.count--;
		return send_sealed(ln, f, payload, XPORT_TEST_TAMPER_NONE);
	}
	return 0;
}

static int send_frame(struct tcp_lane *ln, const struct tcp_frame *f, const void *payload)
{
	uint8_t hdr[TCP_FRAME_HDR_LEN];
	struct iovec iov[2] = {
		{ .iov_base = hdr, .iov_len = sizeof(hdr) },
		{ .iov_base = (void *)payload, .iov_len = f->len },
	};

	if (ln->tx->sealed) {
		return send_sealed(ln, f, payload, tamper_this(ln, f));
	}
	frame_encode(f, hdr);
	return lane_send_iov(ln, iov, f->len > 0 ? 2 : 1);
}

/* ---- TX thread ---- */

static struct tcp_mr *mr_lookup_locked(struct tcp_xport *tx, const struct xport_mr *pub);

/* Is pub still registered? A send from a deregistered buffer must not start. */
static bool mr_registered(struct tcp_xport *tx, const struct xport_mr *pub)
{
	bool ok;

	pthread_mutex_lock(&tx->mr_lock);
	ok = mr_lookup_locked(tx, pub) != NULL;
	pthread_mutex_unlock(&tx->mr_lock);
	return ok;
}

/*
 * TX thread: a send found the connection closed or reset by the peer. A
 * peer that fails a lane sends its NAK (why) and then closes, so the NAK
 * may be waiting in our receive queue, behind nothing the RX thread cannot
 * read: let the RX thread read it and fail the lane with that cause (a
 * remote access error, RNR) rather than fail it first as a lost
 * connection. Bounded: a second, then the caller fails it.
 */
static void tx_wait_rx_verdict(struct tcp_lane *ln)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1;
	pthread_mutex_lock(&ln->lock);
	while (!ln->failed && !ln->stopping) {
		if (pthread_cond_timedwait(&ln->cond, &ln->lock, &ts) == ETIMEDOUT) {
			break;
		}
	}
	pthread_mutex_unlock(&ln->lock);
}

static void *lane_tx_main(void *arg)
{
	struct tcp_lane *ln = arg;
	struct tcp_xport *tx = ln->tx;
	int r;

	pthread_mutex_lock(&ln->lock);
	for (;;) {
		while (!ln->stopping && !ln->failed && ln->placed == ln->ack_sent &&
		       ln->seq_issued == ln->seq_tail) {
			pthread_cond_wait(&ln->cond, &ln->lock);
		}
		/*
		 * A failed lane tells its peer why (the NAK) even when the session
		 * is being torn down at that moment: the peer must see a remote
		 * access error, not a lost connection.
		 */
		if (ln->stopping && !(ln->failed && ln->nak_pending)) {
			break;
		}
		if (ln->failed) {
			if (ln->nak_pending) {
				struct tcp_frame f = {
					.op = TCP_OP_NAK,
					.addr = ln->nak_seq,
					.imm = ln->nak_code,
				};

				ln->nak_pending = false;
				pthread_mutex_unlock(&ln->lock);
				(void)send_frame(ln, &f, NULL);
				shutdown(ln->fd, SHUT_RDWR);
				pthread_mutex_lock(&ln->lock);
			}
			lane_flush_sq_locked(ln);
			break;
		}
		if (ln->placed != ln->ack_sent) {
			struct tcp_frame f = { .op = TCP_OP_ACK, .addr = ln->placed };

			ln->ack_sent = ln->placed;
			pthread_mutex_unlock(&ln->lock);
			r = send_frame(ln, &f, NULL);
		} else {
			/* The slot stays ours until acked; post_writes only fills past seq_tail. */
			const struct tcp_swr *w = &ln->sq[ln->seq_issued % tx->pub.sq_depth];
			struct tcp_frame f = {
				.op = w->op,
				.rkey = w->rkey,
				.addr = w->remote_addr,
				.len = w->len,
				.imm = w->imm,
			};
			const void *payload = w->buf;
			bool gone;

			ln->seq_issued++;
			/*
			 * Marked before the check: a dereg_mr that unlinks the
			 * registration after it waits for this send to end.
			 */
			ln->tx_reading = payload;
			ln->tx_reading_len = w->len;
			gone = w->mr && !mr_registered(tx, w->mr);
			pthread_mutex_unlock(&ln->lock);
			r = gone ? -EFAULT : send_frame(ln, &f, payload);
			pthread_mutex_lock(&ln->lock);
			ln->tx_reading = NULL;
			if (ln->tx_waiters > 0) {
				pthread_cond_broadcast(&ln->cond);
			}
			pthread_mutex_unlock(&ln->lock);
		}
		/* -ECANCELED: the lane failed already, and may still owe its peer a NAK. */
		if (r < 0 && r != -ECANCELED) {
			if (r == -EPIPE || r == -ECONNRESET) {
				tx_wait_rx_verdict(ln);
			}
			xport_set_error(tx, "lane %u: send: %s", ln->idx, strerror(-r));
			lane_fail(ln, FAIL_CONN_LOST, 0, 0);
		}
		pthread_mutex_lock(&ln->lock);
	}
	pthread_mutex_unlock(&ln->lock);
	return NULL;
}

/* ---- RX thread ---- */

/* mr_lock held. The MR whose rkey matches and that allows remote writes, or NULL. */
static struct tcp_mr *mr_find_rkey_locked(struct tcp_xport *tx, uint32_t rkey)
{
	if (rkey == 0) {
		return NULL;
	}
	for (struct tcp_mr *m = tx->mrs; m; m = m->next) {
		if (m->pub.rkey == rkey && (m->pub.access & XPORT_ACCESS_REMOTE_WRITE)) {
			return m;
		}
	}
	return NULL;
}

/* Do [a, a+alen) and [b, b+blen) share a byte? Both lie inside one MR: no overflow. */
static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

static void mr_release(struct tcp_xport *tx, struct tcp_lane *ln, struct tcp_mr *m)
{
	pthread_mutex_lock(&tx->mr_lock);
	assert(m->busy > 0);
	m->busy--;
	ln->placing = NULL;
	if ((m->revoked && m->busy == 0) || m->fence_waiters > 0) {
		pthread_cond_broadcast(&tx->mr_cond);
	}
	pthread_mutex_unlock(&tx->mr_lock);
}

/*
 * Validate a WRITE/WRITE_IMM header. On success *ret_mr holds a busy
 * reference (NULL for len 0: a zero-length write touches no memory and, as on
 * verbs, needs no rkey) and *ret_target is where the payload goes. On failure
 * returns the NAK code and records why.
 */
static int rx_validate(struct tcp_lane *ln, const struct tcp_frame *f, struct tcp_mr **ret_mr,
		       uint8_t **ret_target)
{
	struct tcp_xport *tx = ln->tx;
	struct tcp_mr *m = NULL;
	uint64_t off = 0;

	if (f->flags != 0 || f->reserved16 != 0 || f->reserved64 != 0) {
		xport_set_error(tx, "lane %u: malformed frame (op %u, reserved bits set)", ln->idx,
				f->op);
		return TCP_NAK_INVALID;
	}
	if (f->len > 0) {
		pthread_mutex_lock(&tx->mr_lock);
		m = mr_find_rkey_locked(tx, f->rkey);
		if (!m) {
			pthread_mutex_unlock(&tx->mr_lock);
			xport_set_error(tx, "lane %u: write with unknown or revoked rkey 0x%x",
					ln->idx, f->rkey);
			return TCP_NAK_REM_ACCESS;
		}
		if (!xport_range_inside(m->pub.iova, m->pub.len, f->addr, f->len)) {
			pthread_mutex_unlock(&tx->mr_lock);
			xport_set_error(tx,
					"lane %u: write outside registration "
					"(rkey 0x%x addr 0x%llx len %u)",
					ln->idx, f->rkey, (unsigned long long)f->addr, f->len);
			return TCP_NAK_REM_ACCESS;
		}
		off = f->addr - m->pub.iova;
		if (fence_set_touches(&m->fences, off, f->len)) {
			pthread_mutex_unlock(&tx->mr_lock);
			xport_set_error(tx,
					"lane %u: write into memory the receiver holds "
					"(rkey 0x%x addr 0x%llx len %u)",
					ln->idx, f->rkey, (unsigned long long)f->addr, f->len);
			return TCP_NAK_REM_ACCESS;
		}
		m->busy++;
		ln->placing = m;
		ln->placing_off = off;
		ln->placing_len = f->len;
		pthread_mutex_unlock(&tx->mr_lock);
	}
	if (f->op == TCP_OP_WRITE_IMM) {
		bool have_recv;

		pthread_mutex_lock(&ln->lock);
		have_recv = ln->rq_count > 0;
		pthread_mutex_unlock(&ln->lock);
		if (!have_recv) {
			if (m) {
				mr_release(tx, ln, m);
			}
			xport_set_error(tx, "lane %u: WRITE_IMM with no receive posted (RNR)",
					ln->idx);
			return TCP_NAK_RNR;
		}
	}
	*ret_mr = m;
	*ret_target = m ? (uint8_t *)m->pub.addr + off : NULL;
	return 0;
}

static int nak_to_status(uint32_t code)
{
	switch (code) {
	case TCP_NAK_REM_ACCESS:
		return XPORT_WC_REM_ACCESS_ERR;
	case TCP_NAK_RNR:
		return XPORT_WC_RNR_ERR;
	default:
		return XPORT_WC_GENERAL_ERR;
	}
}

/* ACK or NAK from the peer about our requests. Returns false when the lane is done. */
static bool rx_handle_reply(struct tcp_lane *ln, const struct tcp_frame *f)
{
	struct tcp_xport *tx = ln->tx;
	bool ok, auth_nak = tx->sealed && f->op == TCP_OP_NAK && f->imm == TCP_NAK_AUTH;

	pthread_mutex_lock(&ln->lock);
	ok = f->flags == 0 && f->reserved16 == 0 && f->reserved64 == 0 && f->rkey == 0 &&
	     f->len == 0;
	if (ok && auth_nak) {
		/*
		 * The peer numbers the frames that reached it: after a replay or
		 * a drop on the way that is not what we sent, so its number names
		 * none of our requests reliably. (The NAK itself passed its tag.)
		 * The first unacknowledged request takes the blame.
		 */
		uint64_t blame = ln->seq_acked;

		pthread_mutex_unlock(&ln->lock);
		xport_set_error(tx,
				"lane %u: peer refused a frame: it failed authentication there "
				"(changed, replayed, reordered or cut short on the way)",
				ln->idx);
		lane_fail(ln, FAIL_NAK_RECEIVED, blame, XPORT_WC_GENERAL_ERR);
		return false;
	}
	ok = ok && f->addr >= ln->seq_acked && f->addr <= ln->seq_issued &&
	     (f->op == TCP_OP_ACK ? f->imm == 0 : f->addr < ln->seq_issued);
	if (!ok) {
		pthread_mutex_unlock(&ln->lock);
		xport_set_error(tx, "lane %u: malformed %s from peer", ln->idx,
				f->op == TCP_OP_ACK ? "ACK" : "NAK");
		lane_fail(ln, FAIL_CONN_LOST, 0, 0);
		return false;
	}
	if (f->op == TCP_OP_NAK) {
		int status = nak_to_status(f->imm);

		pthread_mutex_unlock(&ln->lock);
		xport_set_error(tx, "lane %u: peer refused request #%llu: %s", ln->idx,
				(unsigned long long)f->addr, xport_wc_status_str(status));
		lane_fail(ln, FAIL_NAK_RECEIVED, f->addr, status);
		return false;
	}
	if (!ln->failed) {
		for (; ln->seq_acked < f->addr; ln->seq_acked++) {
			const struct tcp_swr *w = &ln->sq[ln->seq_acked % tx->pub.sq_depth];

			if (w->signaled) {
				push_write_wc(ln, w->wr_id, XPORT_WC_SUCCESS);
			}
		}
	}
	pthread_mutex_unlock(&ln->lock);
	return true;
}

/* Sealed lanes: the payload lands as ciphertext and is opened in place, piece by piece. */
static int recv_open(struct tcp_lane *ln, uint8_t *target, uint32_t len)
{
	while (len > 0) {
		uint32_t n = MIN(len, (uint32_t)TCP_SEAL_PIECE);
		int r = recv_all(ln->fd, target, n);

		if (r < 0) {
			return r;
		}
		r = lane_seal_update(&ln->seal_rx, target, target, n);
		if (r < 0) {
			return r;
		}
		target += n;
		len -= n;
	}
	return 0;
}

/* Sealed lanes: read the frame's tag and check it. -EBADMSG: not what the peer sealed. */
static int recv_tag(struct tcp_lane *ln)
{
	uint8_t tag[LANE_SEAL_TAG_LEN];
	int r = recv_all(ln->fd, tag, sizeof(tag));

	return r < 0 ? r : lane_seal_end(&ln->seal_rx, tag);
}

static void *lane_rx_main(void *arg)
{
	struct tcp_lane *ln = arg;
	struct tcp_xport *tx = ln->tx;
	uint64_t rx_seq = 0; /* index of the next data frame from the peer */

	for (;;) {
		uint8_t hdr[TCP_FRAME_HDR_LEN];
		struct tcp_frame f;
		struct tcp_mr *m = NULL;
		uint8_t *target = NULL;
		int r, code;

		r = recv_all(ln->fd, hdr, sizeof(hdr));
		if (r < 0) {
			if (r == -EPIPE) {
				xport_set_error(tx, "lane %u: connection closed by peer", ln->idx);
			} else {
				xport_set_error(tx, "lane %u: recv: %s", ln->idx, strerror(-r));
			}
			lane_fail(ln, FAIL_CONN_LOST, 0, 0);
			break;
		}
		frame_decode(hdr, &f);
		/* The header as it came is what the tag covers: a changed byte fails it. */
		r = tx->sealed ? lane_seal_begin(&ln->seal_rx, hdr, sizeof(hdr)) : 0;
		if (r < 0) {
			xport_set_error(tx, "lane %u: cannot open frames: %s", ln->idx,
					strerror(-r));
			lane_fail(ln, FAIL_CONN_LOST, 0, 0);
			break;
		}
		if (f.op == TCP_OP_ACK || f.op == TCP_OP_NAK) {
			/* Sealed replies carry no payload: the tag follows the header. */
			r = tx->sealed ? recv_tag(ln) : 0;
			if (r < 0) {
				xport_set_error(
				    tx,
				    r == -EBADMSG ? "lane %u: a reply frame failed authentication "
						    "(changed, replayed or reordered on the way)"
						  : "lane %u: recv: %s",
				    ln->idx, strerror(-r));
				lane_fail(ln, FAIL_CONN_LOST, 0, 0);
				break;
			}
			if (!rx_handle_reply(ln, &f)) {
				break;
			}
			continue;
		}
		/* A failed lane places nothing more, whatever is still queued on its socket. */
		pthread_mutex_lock(&ln->lock);
		bool failed = ln->failed;
		pthread_mutex_unlock(&ln->lock);
		if (failed) {
			break;
		}
		if (f.op != TCP_OP_WRITE && f.op != TCP_OP_WRITE_IMM) {
			xport_set_error(tx, "lane %u: unknown frame op %u", ln->idx, f.op);
			lane_fail(ln, FAIL_WE_NAK, rx_seq, TCP_NAK_INVALID);
			break;
		}
		code = rx_validate(ln, &f, &m, &target);
		if (code != 0) {
			lane_fail(ln, FAIL_WE_NAK, rx_seq, code);
			break;
		}
		if (m) {
			/* Straight into the registered target: no bounce buffer. */
			r = tx->sealed ? recv_open(ln, target, f.len)
				       : recv_all(ln->fd, target, f.len);
			mr_release(tx, ln, m);
			if (r < 0) {
				xport_set_error(tx, "lane %u: connection lost inside a write: %s",
						ln->idx, strerror(-r));
				lane_fail(ln, FAIL_CONN_LOST, 0, 0);
				break;
			}
		}
		/*
		 * Checked before the frame counts as placed and before its
		 * immediate completes: the engine never sees a descriptor after
		 * bytes that were not the peer's, and a forged frame's target
		 * (not fenced, so nothing the engine holds) is never described.
		 */
		r = tx->sealed ? recv_tag(ln) : 0;
		if (r == -EBADMSG) {
			xport_set_error(tx,
					"lane %u: data frame #%llu failed authentication (changed, "
					"replayed, reordered or cut short on the way): refused",
					ln->idx, (unsigned long long)rx_seq);
			lane_fail(ln, FAIL_WE_NAK, rx_seq, TCP_NAK_AUTH);
			break;
		}
		if (r < 0) {
			xport_set_error(tx, "lane %u: connection lost inside a write: %s", ln->idx,
					strerror(-r));
			lane_fail(ln, FAIL_CONN_LOST, 0, 0);
			break;
		}
		rx_seq++;
		pthread_mutex_lock(&ln->lock);
		if (f.op == TCP_OP_WRITE_IMM && !ln->failed) {
			assert(ln->rq_count > 0);
			push_wc(tx, ln->rq[ln->rq_head], XPORT_WC_SUCCESS, XPORT_WC_RECV_IMM, f.imm,
				f.len, ln->idx);
			ln->rq_head = (ln->rq_head + 1) % tx->pub.rq_depth;
			ln->rq_count--;
		}
		ln->placed = rx_seq;
		pthread_cond_broadcast(&ln->cond);
		pthread_mutex_unlock(&ln->lock);
	}
	pthread_mutex_lock(&ln->lock);
	ln->rx_exited = true;
	pthread_cond_broadcast(&ln->cond);
	pthread_mutex_unlock(&ln->lock);
	return NULL;
}

/* ---- xport lifetime ---- */

static void tcp_destroy(struct xport *x)
{
	struct tcp_xport *tx;

	if (!x) {
		return;
	}
	tx = to_tcp(x);
	for (unsigned i = 0; i < x->nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];

		pthread_mutex_lock(&ln->lock);
		ln->stopping = true;
		pthread_cond_broadcast(&ln->cond);
		pthread_mutex_unlock(&ln->lock);
		if (ln->fd >= 0) {
			shutdown(ln->fd, SHUT_RD);
		}
	}
	for (unsigned i = 0; i < x->nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];
		struct timespec until;

		/*
		 * The sending thread may still owe its peer a NAK: give it a
		 * moment, then cut the connection whatever it is doing.
		 */
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 200 * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		if (ln->tx_started && pthread_timedjoin_np(ln->tx_thread, NULL, &until) == 0) {
			ln->tx_started = false;
		}
		if (ln->fd >= 0) {
			shutdown(ln->fd, SHUT_RDWR);
		}
		if (ln->tx_started) {
			pthread_join(ln->tx_thread, NULL);
		}
		if (ln->rx_started) {
			pthread_join(ln->rx_thread, NULL);
		}
		if (ln->fd >= 0) {
			close(ln->fd);
		}
		free(ln->sq);
		free(ln->inline_buf);
		free(ln->rq);
		free(ln->seal_buf);
		lane_seal_fini(&ln->seal_tx);
		lane_seal_fini(&ln->seal_rx);
		pthread_cond_destroy(&ln->cond);
		pthread_mutex_destroy(&ln->lock);
	}
	while (tx->mrs) {
		struct tcp_mr *m = tx->mrs;

		tx->mrs = m->next;
		fence_set_fini(&m->fences);
		free(m);
	}
	cq_fini(&tx->cq);
	if (tx->tee_fd >= 0) {
		close(tx->tee_fd);
	}
	pthread_mutex_destroy(&tx->tee_lock);
	pthread_cond_destroy(&tx->mr_cond);
	pthread_mutex_destroy(&tx->mr_lock);
	pthread_mutex_destroy(&tx->err_lock);
	free(tx);
}

static int params_check(const struct xport_params *p)
{
	if (!p || p->nlanes < 1 || p->nlanes > XPORT_MAX_LANES || p->sq_depth < 2 ||
	    p->sq_depth > TCP_MAX_DEPTH || p->rq_depth < 1 || p->rq_depth > TCP_MAX_DEPTH ||
	    p->timeout_ms <= 0) {
		return -EINVAL;
	}
	return 0;
}

/* Keys for both directions of every lane; connector: we connected the lanes. */
static int seal_setup(struct tcp_xport *tx, const struct xport_params *p, bool connector)
{
	for (unsigned i = 0; i < p->nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];
		int r;

		r = lane_seal_init(&ln->seal_tx, p->seal_secret, i, connector, true);
		if (r >= 0) {
			r = lane_seal_init(&ln->seal_rx, p->seal_secret, i, !connector, false);
		}
		if (r < 0) {
			return r;
		}
		ln->seal_buf = malloc(TCP_SEAL_PIECE);
		if (!ln->seal_buf) {
			return -ENOMEM;
		}
	}
	tx->sealed = true;
	return 0;
}

/* Takes ownership of fds[] (all of them, also on failure). */
static int xport_create(const struct xport_params *p, bool connector, int *fds, struct xport **ret)
{
	struct tcp_xport *tx;
	size_t cq_cap;
	int r;

	tx = calloc(1, sizeof(*tx));
	if (!tx) {
		for (unsigned i = 0; i < p->nlanes; i++) {
			close(TAKE_FD(fds[i]));
		}
		return -ENOMEM;
	}
	tx->pub.ops = &xport_tcp_ops;
	tx->pub.nlanes = p->nlanes;
	tx->pub.sq_depth = p->sq_depth;
	tx->pub.rq_depth = p->rq_depth;
	tx->pub.max_inline = TCP_MAX_INLINE;
	tx->timeout_ms = p->timeout_ms;
	pthread_mutex_init(&tx->mr_lock, NULL);
	pthread_cond_init(&tx->mr_cond, NULL);
	pthread_mutex_init(&tx->err_lock, NULL);
	pthread_mutex_init(&tx->tee_lock, NULL);
	tx->tee_fd = -1;
	tx->tamper = p->test_tamper;
	for (unsigned i = 0; i < p->nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];

		ln->tx = tx;
		ln->idx = i;
		ln->fd = TAKE_FD(fds[i]);
		pthread_mutex_init(&ln->lock, NULL);
		pthread_cond_init(&ln->cond, NULL);
	}
	cq_cap = (size_t)p->nlanes * (p->sq_depth + p->rq_depth) + 64;
	r = cq_init(&tx->cq, cq_cap);
	if (r < 0) {
		goto fail;
	}
	if (p->seal) {
		r = seal_setup(tx, p, connector);
		if (r < 0) {
			goto fail;
		}
	}
	if (p->test_tee_path) {
		tx->tee_fd =
		    open(p->test_tee_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (tx->tee_fd < 0) {
			r = negerrno();
			goto fail;
		}
	}
	for (unsigned i = 0; i < p->nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];

		ln->sq = calloc(p->sq_depth, sizeof(*ln->sq));
		ln->inline_buf = calloc(p->sq_depth, TCP_MAX_INLINE);
		ln->rq = calloc(p->rq_depth, sizeof(*ln->rq));
		if (!ln->sq || !ln->inline_buf || !ln->rq) {
			r = -ENOMEM;
			goto fail;
		}
	}
	for (unsigned i = 0; i < p->nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];

		r = -pthread_create(&ln->rx_thread, NULL, lane_rx_main, ln);
		if (r < 0) {
			goto fail;
		}
		ln->rx_started = true;
		r = -pthread_create(&ln->tx_thread, NULL, lane_tx_main, ln);
		if (r < 0) {
			goto fail;
		}
		ln->tx_started = true;
	}
	*ret = &tx->pub;
	return 0;
fail:
	tcp_destroy(&tx->pub);
	return r;
}

/* ---- socket setup helpers ---- */

static void set_nodelay(int fd)
{
	int one = 1;

	/* Frames are written whole; Nagle would only add latency to small ones. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- passive side ---- */

struct xport_listener {
	int fd;
	struct lane_tokens dead; /* tokens already used up */
};

static int tcp_listen(const struct sockaddr *addr, socklen_t addrlen,
		      struct xport_listener **ret_listener, uint16_t *ret_port)
{
	_cleanup_close_ int fd = -1;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct xport_listener *l;
	int one = 1;

	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) || !ret_listener) {
		return -EINVAL;
	}
	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		return negerrno();
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) {
		return negerrno();
	}
	if (bind(fd, addr, addrlen) < 0 || listen(fd, 64) < 0) {
		return negerrno();
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		return negerrno();
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		return -ENOMEM;
	}
	l->fd = TAKE_FD(fd);
	if (ret_port) {
		if (ss.ss_family == AF_INET6) {
			*ret_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		} else {
			*ret_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		}
	}
	*ret_listener = l;
	return 0;
}

static void tcp_listener_close(struct xport_listener *l)
{
	if (!l) {
		return;
	}
	close(l->fd);
	lane_tokens_free(&l->dead);
	free(l);
}

struct pending_conn {
	int fd;
	size_t got;
	uint8_t buf[TCP_HELLO_LEN];
};

/* A complete hello: which lane may this connection become? -1: none, drop it. */
static int hello_acceptable(const uint8_t buf[TCP_HELLO_LEN], const struct xport_params *p,
			    bool token_dead, const int *lanes)
{
	struct lane_hello h;

	if (lane_hello_decode(buf, TCP_HELLO_LEN, &h) < 0) {
		return -1;
	}
	if (token_dead || CRYPTO_memcmp(h.token, p->token, XPORT_TOKEN_LEN) != 0) {
		return -1;
	}
	if (h.nlanes != p->nlanes || h.lane >= p->nlanes || lanes[h.lane] >= 0) {
		return -1;
	}
	return h.lane;
}

static void pending_drop(struct pending_conn *pend, size_t *npend, size_t i)
{
	close(pend[i].fd);
	pend[i] = pend[--*npend];
}

static int tcp_accept(struct xport_listener *l, const struct xport_params *p, struct xport **ret)
{
	struct pending_conn pend[TCP_MAX_PENDING];
	int lanes[XPORT_MAX_LANES];
	size_t npend = 0;
	unsigned nin = 0;
	bool token_dead;
	int64_t deadline;
	int r;

	if (!l || !ret || params_check(p) < 0) {
		return -EINVAL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(lanes); i++) {
		lanes[i] = -1;
	}
	token_dead = lane_token_dead(&l->dead, p->token);
	deadline = now_ms() + p->timeout_ms;

	while (nin < p->nlanes) {
		struct pollfd pfd[1 + TCP_MAX_PENDING];
		int left = remaining_ms(deadline);

		if (left == 0) {
			r = -ETIMEDOUT;
			goto out;
		}
		pfd[0] = (struct pollfd){ .fd = l->fd, .events = POLLIN };
		for (size_t i = 0; i < npend; i++) {
			pfd[1 + i] = (struct pollfd){ .fd = pend[i].fd, .events = POLLIN };
		}
		r = poll(pfd, 1 + npend, left);
		if (r < 0) {
			if (errno == EINTR) {
				continue;
			}
			r = negerrno();
			goto out;
		}
		/* Walk backwards: pending_drop moves the last entry into the hole. */
		for (size_t i = npend; i-- > 0;) {
			struct pending_conn *pc = &pend[i];
			ssize_t n;

			if (!pfd[1 + i].revents) {
				continue;
			}
			n = recv(pc->fd, pc->buf + pc->got, TCP_HELLO_LEN - pc->got, 0);
			if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
				continue;
			}
			if (n <= 0) {
				pending_drop(pend, &npend, i);
				continue;
			}
			pc->got += (size_t)n;
			if (pc->got < TCP_HELLO_LEN) {
				continue;
			}
			int lane = hello_acceptable(pc->buf, p, token_dead, lanes);

			if (lane < 0 ||
			    send(pc->fd, tcp_hello_ack, TCP_ACK_LEN, MSG_NOSIGNAL) != TCP_ACK_LEN) {
				pending_drop(pend, &npend, i);
				continue;
			}
			lanes[lane] = pc->fd;
			nin++;
			pend[i] = pend[--npend];
		}
		if (pfd[0].revents & POLLIN) {
			int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

			if (fd >= 0) {
				if (npend == TCP_MAX_PENDING) {
					/* Slow or silent clients must not crowd out good lanes. */
					pending_drop(pend, &npend, 0);
				}
				pend[npend++] = (struct pending_conn){ .fd = fd };
			}
		}
	}
	r = lane_token_kill(&l->dead, p->token);
	for (unsigned i = 0; r >= 0 && i < p->nlanes; i++) {
		r = fd_set_nonblock(lanes[i], false);
		set_nodelay(lanes[i]);
	}
	if (r >= 0) {
		r = xport_create(p, false, lanes, ret);
		/* xport_create owns the fds now, whatever happened. */
		for (unsigned i = 0; i < p->nlanes; i++) {
			lanes[i] = -1;
		}
	}
out:
	for (size_t i = 0; i < npend; i++) {
		close(pend[i].fd);
	}
	for (unsigned i = 0; i < p->nlanes; i++) {
		if (lanes[i] >= 0) {
			close(lanes[i]);
		}
	}
	return r;
}

/* ---- active side ---- */

static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = events };
		int left = remaining_ms(deadline);
		int r;

		if (left == 0) {
			return -ETIMEDOUT;
		}
		r = poll(&pfd, 1, left);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r < 0) {
			return negerrno();
		}
		if (r > 0) {
			return 0;
		}
	}
}

static int connect_one(const struct sockaddr *addr, socklen_t addrlen, int64_t deadline,
		       int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	int err = 0;
	socklen_t el = sizeof(err);
	int r;

	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		return negerrno();
	}
	if (connect(fd, addr, addrlen) < 0) {
		if (errno != EINPROGRESS) {
			return negerrno();
		}
		r = wait_fd(fd, POLLOUT, deadline);
		if (r < 0) {
			return r;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) {
			return negerrno();
		}
		if (err != 0) {
			return -err;
		}
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

static int io_deadline(int fd, void *buf, size_t len, bool is_send, int64_t deadline)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n;
		int r = wait_fd(fd, is_send ? POLLOUT : POLLIN, deadline);

		if (r < 0) {
			return r;
		}
		n = is_send ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				continue;
			}
			/* A reset during the handshake is the acceptor turning us away. */
			return errno == ECONNRESET || errno == EPIPE ? -ECONNREFUSED : negerrno();
		}
		if (n == 0) {
			return -ECONNREFUSED;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int tcp_connect(const struct sockaddr *addr, socklen_t addrlen, const struct xport_params *p,
		       struct xport **ret)
{
	int fds[XPORT_MAX_LANES];
	int64_t deadline;
	int r = 0;

	if (!addr || !ret || params_check(p) < 0 ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) {
		return -EINVAL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
		fds[i] = -1;
	}
	deadline = now_ms() + p->timeout_ms;
	for (unsigned i = 0; r >= 0 && i < p->nlanes; i++) {
		struct lane_hello h = { .lane = (uint16_t)i, .nlanes = (uint16_t)p->nlanes };
		uint8_t buf[TCP_HELLO_LEN];

		memcpy(h.token, p->token, XPORT_TOKEN_LEN);
		lane_hello_encode(&h, buf);
		OPENSSL_cleanse(h.token, sizeof(h.token));
		r = connect_one(addr, addrlen, deadline, &fds[i]);
		if (r >= 0) {
			r = io_deadline(fds[i], buf, sizeof(buf), true, deadline);
		}
		OPENSSL_cleanse(buf, sizeof(buf));
	}
	for (unsigned i = 0; r >= 0 && i < p->nlanes; i++) {
		uint8_t ack[TCP_ACK_LEN];

		r = io_deadline(fds[i], ack, sizeof(ack), false, deadline);
		if (r >= 0 && memcmp(ack, tcp_hello_ack, TCP_ACK_LEN) != 0) {
			r = -EPROTO;
		}
	}
	for (unsigned i = 0; r >= 0 && i < p->nlanes; i++) {
		r = fd_set_nonblock(fds[i], false);
		set_nodelay(fds[i]);
	}
	if (r < 0) {
		for (unsigned i = 0; i < p->nlanes; i++) {
			if (fds[i] >= 0) {
				close(fds[i]);
			}
		}
		return r;
	}
	return xport_create(p, true, fds, ret);
}

/* ---- memory registration ---- */

static int random_key_locked(struct tcp_xport *tx, uint32_t *ret)
{
	for (int tries = 0; tries < 64; tries++) {
		uint32_t k;
		bool used = false;

		if (getrandom(&k, sizeof(k), 0) != sizeof(k)) {
			return negerrno();
		}
		if (k == 0) {
			continue;
		}
		for (struct tcp_mr *m = tx->mrs; m; m = m->next) {
			used |= m->pub.rkey == k || m->pub.lkey == k;
		}
		if (!used) {
			*ret = k;
			return 0;
		}
	}
	return -EAGAIN;
}

static int tcp_reg_mr(struct xport *x, void *addr, size_t len, unsigned access,
		      struct xport_mr **ret_mr)
{
	struct tcp_xport *tx = to_tcp(x);
	struct tcp_mr *m;
	int r;

	if (!addr || len == 0 || (uintptr_t)addr + len < (uintptr_t)addr || !ret_mr ||
	    (access & ~(unsigned)(XPORT_ACCESS_LOCAL | XPORT_ACCESS_REMOTE_WRITE)) != 0) {
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		return -ENOMEM;
	}
	m->pub.addr = addr;
	m->pub.iova = 0; /* zero-based: peers never learn our addresses */
	m->pub.len = len;
	m->pub.access = access;
	fence_set_init(&m->fences, len);
	pthread_mutex_lock(&tx->mr_lock);
	r = random_key_locked(tx, &m->pub.lkey);
	if (r >= 0 && (access & XPORT_ACCESS_REMOTE_WRITE)) {
		r = random_key_locked(tx, &m->pub.rkey);
	}
	if (r >= 0) {
		m->next = tx->mrs;
		tx->mrs = m;
	}
	pthread_mutex_unlock(&tx->mr_lock);
	if (r < 0) {
		free(m);
		return r;
	}
	/* One key space for all lanes. */
	for (unsigned i = 0; i < XPORT_MAX_LANES; i++) {
		m->pub.lane_lkey[i] = m->pub.lkey;
		m->pub.lane_rkey[i] = m->pub.rkey;
	}
	*ret_mr = &m->pub;
	return 0;
}

/* mr_lock held: end placements into m that a stalled peer keeps open. */
static void shut_lanes_placing_locked(struct tcp_xport *tx, struct tcp_mr *m)
{
	for (unsigned i = 0; i < tx->pub.nlanes; i++) {
		if (tx->lanes[i].placing == m) {
			xport_set_error(tx, "lane %u: write stalled during dereg_mr", i);
			shutdown(tx->lanes[i].fd, SHUT_RDWR);
		}
	}
}

/*
 * Waits until no TX thread reads from m's memory (a send in progress from a
 * buffer in it). A lane whose send stalls longer than timeout_ms is shut,
 * which ends the send.
 */
static void wait_tx_reads(struct tcp_xport *tx, const struct tcp_mr *m)
{
	uintptr_t lo = (uintptr_t)m->pub.addr, hi = lo + m->pub.len;

	for (unsigned i = 0; i < tx->pub.nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += tx->timeout_ms / 1000 + 1;
		pthread_mutex_lock(&ln->lock);
		while (ln->tx_reading && (uintptr_t)ln->tx_reading < hi &&
		       (uintptr_t)ln->tx_reading + ln->tx_reading_len > lo) {
			ln->tx_waiters++;
			if (pthread_cond_timedwait(&ln->cond, &ln->lock, &ts) == ETIMEDOUT) {
				xport_set_error(tx, "lane %u: send stalled during dereg_mr", i);
				shutdown(ln->fd, SHUT_RDWR);
				ts.tv_sec += 3600;
			}
			ln->tx_waiters--;
		}
		pthread_mutex_unlock(&ln->lock);
	}
}

/*
 * Unlinks the MR so no new placement can find it, then waits for placements
 * already in progress. A peer that stalls inside a write into this MR for
 * longer than timeout_ms gets its lane shut, which ends the placement.
 */
static int tcp_dereg_mr(struct xport *x, struct xport_mr *pub)
{
	struct tcp_xport *tx = to_tcp(x);
	struct tcp_mr *m, **pp;
	struct timespec ts;

	if (!pub) {
		return -EINVAL;
	}
	pthread_mutex_lock(&tx->mr_lock);
	for (pp = &tx->mrs; *pp && &(*pp)->pub != pub; pp = &(*pp)->next) {
	}
	if (!*pp) {
		pthread_mutex_unlock(&tx->mr_lock);
		return -ENOENT;
	}
	m = *pp;
	*pp = m->next;
	m->revoked = true;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += tx->timeout_ms / 1000;
	ts.tv_nsec += (long)(tx->timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	while (m->busy > 0) {
		if (pthread_cond_timedwait(&tx->mr_cond, &tx->mr_lock, &ts) == ETIMEDOUT) {
			shut_lanes_placing_locked(tx, m);
			ts.tv_sec += 3600;
		}
	}
	pthread_mutex_unlock(&tx->mr_lock);
	/* The caller may free the memory next: no send may still be reading it. */
	wait_tx_reads(tx, m);
	fence_set_fini(&m->fences);
	free(m);
	return 0;
}

/* mr_lock held: the registered MR behind pub, or NULL. */
static struct tcp_mr *mr_lookup_locked(struct tcp_xport *tx, const struct xport_mr *pub)
{
	for (struct tcp_mr *m = tx->mrs; m; m = m->next) {
		if (&m->pub == pub) {
			return m;
		}
	}
	return NULL;
}

/* mr_lock held: is an RX thread placing into [off, off+len) of m? Cuts it off if so. */
static bool cut_placements_locked(struct tcp_xport *tx, struct tcp_mr *m, uint64_t off,
				  uint64_t len)
{
	bool any = false;

	for (unsigned i = 0; i < tx->pub.nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];

		if (ln->placing == m &&
		    ranges_overlap(ln->placing_off, ln->placing_len, off, len)) {
			/*
			 * The range's data and its descriptor came before on one
			 * lane, so a sender that keeps the rules is never here.
			 */
			xport_set_error(tx, "lane %u: write into memory the receiver holds", i);
			shutdown(ln->fd, SHUT_RDWR);
			any = true;
		}
	}
	return any;
}

static int mr_fence_on_locked(struct tcp_xport *tx, struct tcp_mr *m, uint64_t off, uint64_t len)
{
	bool cut = false;
	int r = fence_set_add(&m->fences, off, len);

	if (r < 0) {
		return r;
	}
	/* New placements see the fence; wait out (after cutting) any already inside. */
	while (cut_placements_locked(tx, m, off, len)) {
		cut = true;
		m->fence_waiters++;
		pthread_cond_wait(&tx->mr_cond, &tx->mr_lock);
		m->fence_waiters--;
	}
	return cut ? -EIO : 0;
}

static int tcp_fence(struct xport *x, struct xport_mr *pub, uint64_t offset, uint64_t len, bool on)
{
	struct tcp_xport *tx = to_tcp(x);
	struct tcp_mr *m;
	int r;

	if (!pub || len == 0 || !xport_range_inside(0, pub->len, offset, len)) {
		return -EINVAL;
	}
	pthread_mutex_lock(&tx->mr_lock);
	m = mr_lookup_locked(tx, pub);
	if (!m) {
		r = -ENOENT;
	} else if (on) {
		r = mr_fence_on_locked(tx, m, offset, len);
	} else {
		r = fence_set_remove(&m->fences, offset, len);
	}
	pthread_mutex_unlock(&tx->mr_lock);
	return r;
}

/* ---- posting ---- */

static int wr_check(const struct tcp_xport *tx, const struct xport_wr *w)
{
	uint64_t base, b;
	int r = xport_wr_check_common(w, tx->pub.nlanes);

	if (r != 0) {
		return r < 0 ? r : 0;
	}
	if (w->flags & XPORT_SEND_INLINE) {
		/* Inline data is copied at post time and needs no registration (as on verbs). */
		return w->len <= tx->pub.max_inline ? 0 : -EINVAL;
	}
	if (!w->mr || w->mr->lkey == 0) {
		return -EINVAL;
	}
	base = (uint64_t)(uintptr_t)w->mr->addr;
	b = (uint64_t)(uintptr_t)w->buf;
	return xport_range_inside(base, w->mr->len, b, w->len) ? 0 : -EINVAL;
}

static int tcp_post_writes(struct xport *x, const struct xport_wr *wrs, size_t n)
{
	struct tcp_xport *tx = to_tcp(x);
	size_t need[XPORT_MAX_LANES] = { 0 };
	int r = 0;

	if (n > 0 && !wrs) {
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		r = wr_check(tx, &wrs[i]);
		if (r < 0) {
			return r;
		}
		need[wrs[i].lane]++;
	}
	/* All-or-nothing across lanes: lock every lane involved, in index order. */
	for (unsigned l = 0; l < x->nlanes; l++) {
		if (need[l]) {
			pthread_mutex_lock(&tx->lanes[l].lock);
		}
	}
	for (unsigned l = 0; l < x->nlanes; l++) {
		struct tcp_lane *ln = &tx->lanes[l];

		if (need[l] && !ln->sq_flushed &&
		    ln->seq_tail - ln->seq_acked + need[l] > x->sq_depth) {
			r = -ENOSPC;
		}
	}
	for (size_t i = 0; r >= 0 && i < n; i++) {
		const struct xport_wr *w = &wrs[i];
		struct tcp_lane *ln = &tx->lanes[w->lane];
		size_t slot;
		struct tcp_swr *s;

		if (ln->sq_flushed) {
			/* Lane already failed and flushed: complete at once, as verbs does. */
			push_write_wc(ln, w->wr_id, XPORT_WC_WR_FLUSH_ERR);
			continue;
		}
		slot = ln->seq_tail % x->sq_depth;
		s = &ln->sq[slot];
		*s = (struct tcp_swr){
			.wr_id = w->wr_id,
			.op = w->opcode == XPORT_OP_WRITE_IMM ? TCP_OP_WRITE_IMM : TCP_OP_WRITE,
			.signaled = (w->flags & XPORT_SEND_SIGNALED) != 0,
			.rkey = w->rkey,
			.remote_addr = w->remote_addr,
			.len = w->len,
			.imm = w->opcode == XPORT_OP_WRITE_IMM ? w->imm : 0,
			.buf = w->buf,
			.mr = (w->flags & XPORT_SEND_INLINE) || w->len == 0 ? NULL : w->mr,
		};
		if ((w->flags & XPORT_SEND_INLINE) && w->len > 0) {
			uint8_t *copy = ln->inline_buf + slot * TCP_MAX_INLINE;

			memcpy(copy, w->buf, w->len);
			s->buf = copy;
		}
		ln->seq_tail++;
	}
	for (unsigned l = x->nlanes; l-- > 0;) {
		if (need[l]) {
			pthread_cond_broadcast(&tx->lanes[l].cond);
			pthread_mutex_unlock(&tx->lanes[l].lock);
		}
	}
	return r;
}

static int tcp_post_recvs(struct xport *x, unsigned lane, const uint64_t *wr_ids, size_t n)
{
	struct tcp_xport *tx = to_tcp(x);
	struct tcp_lane *ln;
	int r = 0;

	if (lane >= x->nlanes || (n > 0 && !wr_ids)) {
		return -EINVAL;
	}
	ln = &tx->lanes[lane];
	pthread_mutex_lock(&ln->lock);
	if (ln->failed) {
		for (size_t i = 0; i < n; i++) {
			push_wc(tx, wr_ids[i], XPORT_WC_WR_FLUSH_ERR, XPORT_WC_RECV_IMM, 0, 0,
				lane);
		}
	} else if (ln->rq_count + n > x->rq_depth) {
		r = -ENOSPC;
	} else {
		for (size_t i = 0; i < n; i++) {
			ln->rq[(ln->rq_head + ln->rq_count) % x->rq_depth] = wr_ids[i];
			ln->rq_count++;
		}
	}
	pthread_mutex_unlock(&ln->lock);
	return r;
}

/* The connection cut as if lost: the peer reads EOF, our queues complete in error. */
static int tcp_lane_down(struct xport *x, unsigned lane)
{
	if (lane >= x->nlanes) {
		return -EINVAL;
	}
	struct tcp_lane *ln = &to_tcp(x)->lanes[lane];

	lane_fail(ln, FAIL_CONN_LOST, 0, 0);
	/* Its RX thread sees the shutdown at once; a write it is placing ends first. */
	pthread_mutex_lock(&ln->lock);
	while (ln->rx_started && !ln->rx_exited) {
		pthread_cond_wait(&ln->cond, &ln->lock);
	}
	pthread_mutex_unlock(&ln->lock);
	return 0;
}

static int tcp_poll_cq(struct xport *x, struct xport_wc *wcs, size_t max)
{
	struct tcp_xport *tx = to_tcp(x);
	uint64_t v;
	size_t n = 0;

	if (max > 0 && !wcs) {
		return -EINVAL;
	}
	/* Clear first: a push after this read makes the fd readable again. */
	(void)!read(tx->cq.efd, &v, sizeof(v));
	pthread_mutex_lock(&tx->cq.lock);
	while (n < max && n < INT32_MAX && tx->cq.count > 0) {
		wcs[n++] = tx->cq.ring[tx->cq.head];
		tx->cq.head = (tx->cq.head + 1) % tx->cq.cap;
		tx->cq.count--;
	}
	if (tx->cq.count > 0) {
		/* Leftovers: keep the fd readable so an edge-style waiter is not stranded. */
		static const uint64_t one = 1;

		(void)!write(tx->cq.efd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&tx->cq.lock);
	return (int)n;
}

static int tcp_event_fd(struct xport *x)
{
	return to_tcp(x)->cq.efd;
}

static const char *tcp_last_error(struct xport *x)
{
	struct tcp_xport *tx = to_tcp(x);
	bool has;

	pthread_mutex_lock(&tx->err_lock);
	has = tx->has_error;
	pthread_mutex_unlock(&tx->err_lock);
	/* Written once, before has_error is set: stable from then on. */
	return has ? tx->error : NULL;
}

const struct xport_ops xport_tcp_ops = {
	.name = "tcp",
	.kind = XPORT_KIND_TCP,
	.listen = tcp_listen,
	.accept = tcp_accept,
	.listener_close = tcp_listener_close,
	.connect = tcp_connect,
	.reg_mr = tcp_reg_mr,
	.dereg_mr = tcp_dereg_mr,
	.fence = tcp_fence,
	.lane_down = tcp_lane_down,
	.post_writes = tcp_post_writes,
	.post_recvs = tcp_post_recvs,
	.poll_cq = tcp_poll_cq,
	.event_fd = tcp_event_fd,
	.last_error = tcp_last_error,
	.destroy = tcp_destroy,
};
