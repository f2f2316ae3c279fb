/* SPDX-License-Identifier: MIT */
/* Sockets: connecting with a deadline, addresses as text. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* "1.2.3.4:7471" or "[::1]:7471"; "?" when it has no numeric form. */
const char *net_addr_str(const struct sockaddr *sa, socklen_t len, char *buf, size_t buflen);

/*
 * Resolve host (name, IPv4, or IPv6 without brackets) and connect to the
 * first address that answers within timeout_ms. Returns a connected,
 * blocking, CLOEXEC socket in *ret_fd and its peer address.
 * -EHOSTUNREACH/-ECONNREFUSED/-ETIMEDOUT/-ENOENT (name unknown).
 */
int net_connect(const char *host, uint16_t port, int timeout_ms, int *ret_fd,
		struct sockaddr_storage *ret_peer, socklen_t *ret_peerlen);

/* Copy sa with its port replaced. */
void net_set_port(struct sockaddr_storage *ss, uint16_t port);

struct proto_rail;
/* A daemon rail of OPEN_OK (its family, address and port) as a socket address. */
void net_rail_addr(const struct proto_rail *rl, struct sockaddr_storage *ret);
