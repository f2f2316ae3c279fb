/* SPDX-License-Identifier: MIT */
/*
 * The frame of a tcp lane (docs/XPORT_TCP.md): its 32-byte header, big-endian
 * and never a C struct on the wire; sending one whole, in clear or sealed
 * (the transfer's AEAD, src/lane_seal.h) with the tests' tee and tamper hooks; and
 * reading a payload and its tag off the socket.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp-internal.h"

/* ---- the header ---- */

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

void tcp_frame_decode(const uint8_t in[TCP_FRAME_HDR_LEN], struct tcp_frame *ret)
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

/* ---- sending ---- */

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

/* One sealed frame on its way out, piece by piece. */
struct sealed_send {
	struct tcp_lane *ln;
	const struct tcp_frame *f;
	const uint8_t *payload;
	unsigned tamper;
	uint8_t wire_hdr[TCP_FRAME_HDR_LEN]; /* the header as sent: a test may spoil it */
	uint32_t off;			     /* payload bytes sealed so far */
	uint32_t send_len;		     /* bytes that go out (a test may cut it short) */
	bool hdr_sent;
};

/*
 * A failed lane's peer reads no more: stop sealing payload nobody will
 * open (replies still go: the NAK tells the peer why).
 */
static bool sealed_send_cancelled(struct tcp_lane *ln, const struct tcp_frame *f)
{
	bool failed;

	pthread_mutex_lock(&ln->lock);
	failed = ln->failed && (f->op == TCP_OP_WRITE || f->op == TCP_OP_WRITE_IMM);
	pthread_mutex_unlock(&ln->lock);
	return failed;
}

/* The next piece through seal_buf: after the header (first piece), before the tag (last). */
static int send_sealed_piece(struct sealed_send *s)
{
	struct tcp_lane *ln = s->ln;
	const struct tcp_frame *f = s->f;
	uint32_t n = MIN(f->len - s->off, (uint32_t)TCP_SEAL_PIECE);
	uint32_t out_n = s->off >= s->send_len ? 0 : MIN(n, s->send_len - s->off);
	uint8_t tag[LANE_SEAL_TAG_LEN];
	struct iovec iov[3];
	int iovcnt = 0, r;

	if (sealed_send_cancelled(ln, f)) {
		return -ECANCELED;
	}
	r = lane_seal_update(&ln->seal_tx, s->payload + s->off, ln->seal_buf, n);
	if (r < 0) {
		return r;
	}
	if (s->tamper == XPORT_TEST_TAMPER_FLIP && s->off == 0) {
		ln->seal_buf[n / 2] ^= 0x01;
	}
	s->off += n;
	if (!s->hdr_sent) {
		iov[iovcnt++] =
		    (struct iovec){ .iov_base = s->wire_hdr, .iov_len = sizeof(s->wire_hdr) };
		s->hdr_sent = true;
	}
	if (out_n > 0) {
		iov[iovcnt++] = (struct iovec){ .iov_base = ln->seal_buf, .iov_len = out_n };
	}
	if (s->off == f->len) {
		r = lane_seal_end(&ln->seal_tx, tag);
		if (r < 0) {
			return r;
		}
		iov[iovcnt++] = (struct iovec){ .iov_base = tag, .iov_len = sizeof(tag) };
	}
	return lane_send_iov(ln, iov, iovcnt);
}

/*
 * A sealed frame: the clear header (the additional data), the payload
 * encrypted piece by piece through seal_buf, the tag. The caller's buffer is
 * only read, as for a clear frame.
 */
static int send_sealed(struct tcp_lane *ln, const struct tcp_frame *f, const void *payload,
		       unsigned tamper)
{
	struct sealed_send s = {
		.ln = ln, .f = f, .payload = payload, .tamper = tamper, .send_len = f->len
	};
	struct tcp_frame wire = *f;
	uint8_t hdr[TCP_FRAME_HDR_LEN];
	int r;

	frame_encode(f, hdr);
	if (tamper == XPORT_TEST_TAMPER_MOVE) {
		wire.addr += f->len;
	} else if (tamper == XPORT_TEST_TAMPER_TRUNCATE) {
		wire.len = s.send_len = f->len / 2;
	}
	frame_encode(&wire, s.wire_hdr);
	r = lane_seal_begin(&ln->seal_tx, hdr, sizeof(hdr));
	if (r < 0) {
		return r;
	}
	do {
		r = send_sealed_piece(&s);
		if (r < 0) {
			return r;
		}
	} while (s.off < f->len);
	if (tamper == XPORT_TEST_TAMPER_REPLAY) {
		/* The same nonce, key and bytes again: exactly what a replaying path sends. */
		ln->seal_tx.count--;
		return send_sealed(ln, f, payload, XPORT_TEST_TAMPER_NONE);
	}
	return 0;
}

int tcp_send_frame(struct tcp_lane *ln, const struct tcp_frame *f, const void *payload)
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

/* ---- receiving ---- */

int tcp_recv_all(int fd, void *buf, size_t len)
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

int tcp_recv_open(struct tcp_lane *ln, uint8_t *target, uint32_t len)
{
	while (len > 0) {
		uint32_t n = MIN(len, (uint32_t)TCP_SEAL_PIECE);
		int r = tcp_recv_all(ln->fd, target, n);

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

int tcp_recv_tag(struct tcp_lane *ln)
{
	uint8_t tag[LANE_SEAL_TAG_LEN];
	int r = tcp_recv_all(ln->fd, tag, sizeof(tag));

	return r < 0 ? r : lane_seal_end(&ln->seal_rx, tag);
}
