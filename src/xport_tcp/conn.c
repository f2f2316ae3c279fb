/* SPDX-License-Identifier: MIT */
/*
 * Setting up a tcp xport's lanes. The passive side listens, and accept
 * takes connections until every lane has presented the session token in
 * its hello (src/lane_hello.h), answering each good one; anything else is
 * dropped before a byte of it is placed, and the token dies once all lanes
 * are in. The active side connects every lane, sends the hellos and waits
 * for the answers. Both hand the connected sockets to tcp_xport_create.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "clock.h"
#include "fdutil.h"
#include "tcp-internal.h"

#define TCP_MAX_PENDING 32 /* unauthenticated connections held at once by accept */

static const uint8_t tcp_hello_ack[TCP_ACK_LEN] = { 'R', 'D', 'O', 'K' };

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

int tcp_listen(const struct sockaddr *addr, socklen_t addrlen, int tos,
	       struct xport_listener **ret_listener, uint16_t *ret_port)
{
	_cleanup_close_ int fd = -1;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct xport_listener *l;
	int one = 1;

	(void)tos; /* the class of service is the RDMA lanes' (tcp lanes have none of theirs) */
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

void tcp_listener_close(struct xport_listener *l)
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

/* What accept holds while the lanes come in. */
struct accept_state {
	const struct xport_params *p;
	bool token_dead;
	struct pending_conn pend[TCP_MAX_PENDING]; /* connected, hello not all in yet */
	size_t npend;
	int lanes[XPORT_MAX_LANES]; /* each lane's fd once it is in, else -1 */
	unsigned nin;
};

/* Hello bytes on pending connection i: it becomes its lane, waits for more, or is dropped. */
static void pending_read(struct accept_state *st, size_t i)
{
	struct pending_conn *pc = &st->pend[i];
	ssize_t n = recv(pc->fd, pc->buf + pc->got, TCP_HELLO_LEN - pc->got, 0);
	int lane;

	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		return;
	}
	if (n <= 0) {
		pending_drop(st->pend, &st->npend, i);
		return;
	}
	pc->got += (size_t)n;
	if (pc->got < TCP_HELLO_LEN) {
		return;
	}
	lane = hello_acceptable(pc->buf, st->p, st->token_dead, st->lanes);
	if (lane < 0 || send(pc->fd, tcp_hello_ack, TCP_ACK_LEN, MSG_NOSIGNAL) != TCP_ACK_LEN) {
		pending_drop(st->pend, &st->npend, i);
		return;
	}
	st->lanes[lane] = pc->fd;
	st->nin++;
	st->pend[i] = st->pend[--st->npend];
}

/* A new connection on the listener, pending until its hello is in. */
static void pending_add(struct accept_state *st, int listen_fd)
{
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0) {
		return;
	}
	if (st->npend == TCP_MAX_PENDING) {
		/* Slow or silent clients must not crowd out good lanes. */
		pending_drop(st->pend, &st->npend, 0);
	}
	st->pend[st->npend++] = (struct pending_conn){ .fd = fd };
}

/* One wait on the listener and the pending connections, and what it brought. */
static int accept_step(struct xport_listener *l, struct accept_state *st, int64_t deadline)
{
	struct pollfd pfd[1 + TCP_MAX_PENDING];
	int left = remaining_ms(deadline);

	if (left == 0) {
		return -ETIMEDOUT;
	}
	pfd[0] = (struct pollfd){ .fd = l->fd, .events = POLLIN };
	for (size_t i = 0; i < st->npend; i++) {
		pfd[1 + i] = (struct pollfd){ .fd = st->pend[i].fd, .events = POLLIN };
	}
	if (poll(pfd, 1 + st->npend, left) < 0) {
		return errno == EINTR ? 0 : negerrno();
	}
	/* Walk backwards: pending_drop moves the last entry into the hole. */
	for (size_t i = st->npend; i-- > 0;) {
		if (pfd[1 + i].revents) {
			pending_read(st, i);
		}
	}
	if (pfd[0].revents & POLLIN) {
		pending_add(st, l->fd);
	}
	return 0;
}

/* Every lane is in: the token dies, and the lanes become the xport (which owns their fds). */
static int accept_finish(struct xport_listener *l, struct accept_state *st, struct xport **ret)
{
	const struct xport_params *p = st->p;
	int r = lane_token_kill(&l->dead, p->token);

	for (unsigned i = 0; r >= 0 && i < p->nlanes; i++) {
		r = fd_set_nonblock(st->lanes[i], false);
		set_nodelay(st->lanes[i]);
	}
	if (r >= 0) {
		r = tcp_xport_create(p, false, st->lanes, ret);
		/* tcp_xport_create owns the fds now, whatever happened. */
		for (unsigned i = 0; i < p->nlanes; i++) {
			st->lanes[i] = -1;
		}
	}
	return r;
}

int tcp_accept(struct xport_listener *l, const struct xport_params *p, struct xport **ret)
{
	struct accept_state st = { .p = p };
	int64_t deadline;
	int r = 0;

	if (!l || !ret || tcp_params_check(p) < 0) {
		return -EINVAL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(st.lanes); i++) {
		st.lanes[i] = -1;
	}
	st.token_dead = lane_token_dead(&l->dead, p->token);
	deadline = now_ms() + p->timeout_ms;
	while (r >= 0 && st.nin < p->nlanes) {
		r = accept_step(l, &st, deadline);
	}
	if (r >= 0) {
		r = accept_finish(l, &st, ret);
	}
	for (size_t i = 0; i < st.npend; i++) {
		close(st.pend[i].fd);
	}
	for (unsigned i = 0; i < p->nlanes; i++) {
		if (st.lanes[i] >= 0) {
			close(st.lanes[i]);
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

int tcp_connect(const struct sockaddr *addr, socklen_t addrlen, const struct xport_params *p,
		struct xport **ret)
{
	int fds[XPORT_MAX_LANES];
	int64_t deadline;
	int r = 0;

	if (!addr || !ret || tcp_params_check(p) < 0 ||
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
	return tcp_xport_create(p, true, fds, ret);
}
