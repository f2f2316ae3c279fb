/* SPDX-License-Identifier: MIT */
/* Placeholder until the session code lands (see serve.h). */
#include "serve.h"

#include <errno.h>
#include <unistd.h>

int serve_connection(const struct daemon_config *cfg, struct tls_ctx *tls, int fd,
		     const struct sockaddr *peer, socklen_t peerlen)
{
	(void)cfg;
	(void)tls;
	(void)peer;
	(void)peerlen;
	close(fd);
	return -ENOSYS;
}
