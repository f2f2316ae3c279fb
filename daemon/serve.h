/* SPDX-License-Identifier: MIT */
/*
 * One client connection, served in its own process: TLS handshake under the
 * handshake deadline, HELLO, then transfers until BYE or an error.
 */
#pragma once

#include <stdint.h>
#include <sys/socket.h>

#include "config.h"

struct tls_ctx;
struct session_table;

/*
 * Serve the connected socket fd (ownership taken). sessions is the table
 * shared with the supervisor (memory budget, bytes moved); NULL in tests. Returns 0 when the
 * session ended cleanly, a negative errno otherwise. Logs with the peer's
 * address and identity.
 */
int serve_connection(const struct daemon_config *cfg, struct tls_ctx *tls,
		     struct session_table *sessions, int fd, const struct sockaddr *peer,
		     socklen_t peerlen);

/*
 * RLIMIT_MEMLOCK for a session that is not root: the memory budget (what
 * all sessions of one user may pin together, see privs.h) plus a little per
 * connection for page rounding.
 */
uint64_t serve_session_memlock(const struct daemon_config *cfg);
