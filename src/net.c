/* SPDX-License-Identifier: MIT */
/* Sockets: connecting with a deadline, addresses as text (see net.h). */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fdutil.h"
#include "macro.h"
#include "proto/msg.h"

const char *net_addr_str(const struct sockaddr *sa, socklen_t len, char *buf, size_t buflen)
{
	char host[NI_MAXHOST], port[NI_MAXSERV];

	if (getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(buf, buflen, "?");
		return buf;
	}
	snprintf(buf, buflen, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
	return buf;
}

void net_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET) {
		((struct sockaddr_in *)(void *)ss)->sin_port = htons(port);
	} else if (ss->ss_family == AF_INET6) {
		((struct sockaddr_in6 *)(void *)ss)->sin6_port = htons(port);
	}
}

static int connect_one(const struct addrinfo *ai, int timeout_ms, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	struct pollfd p;
	int err = 0, one = 1, r;
	socklen_t elen = sizeof(err);

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
	if (fd < 0) {
		return negerrno();
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			return negerrno();
		}
		p = (struct pollfd){ .fd = fd, .events = POLLOUT };
		int n = poll(&p, 1, timeout_ms);
		if (n == 0) {
			return -ETIMEDOUT;
		}
		if (n < 0) {
			return negerrno();
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0) {
			return negerrno();
		}
		if (err) {
			return -err;
		}
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	r = fd_set_nonblock(fd, false);
	if (r < 0) {
		return r;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int net_connect(const char *host, uint16_t port, int timeout_ms, int *ret_fd,
		struct sockaddr_storage *ret_peer, socklen_t *ret_peerlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char portstr[8];
	int r = -EHOSTUNREACH;

	snprintf(portstr, sizeof(portstr), "%u", port);
	int g = getaddrinfo(host, portstr, &hints, &res);
	if (g != 0) {
		return g == EAI_SYSTEM ? negerrno() : -ENOENT;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd;
		r = connect_one(ai, timeout_ms, &fd);
		if (r == 0) {
			memcpy(ret_peer, ai->ai_addr, ai->ai_addrlen);
			*ret_peerlen = ai->ai_addrlen;
			*ret_fd = fd;
			break;
		}
	}
	freeaddrinfo(res);
	return r;
}

void net_rail_addr(const struct proto_rail *rl, struct sockaddr_storage *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (rl->family == PROTO_RAIL_INET) {
		struct sockaddr_in *a4 = (struct sockaddr_in *)ret;

		a4->sin_family = AF_INET;
		memcpy(&a4->sin_addr, rl->addr, 4);
	} else {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ret;

		a6->sin6_family = AF_INET6;
		memcpy(&a6->sin6_addr, rl->addr, 16);
	}
	net_set_port(ret, rl->port);
}
