/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's listening sockets (supervisor.h): the ones systemd passed
 * (socket activation), or one per configured 'listen' address, by default
 * 0.0.0.0 on DAEMON_DEFAULT_PORT. Non-blocking: accept4 never waits.
 */
#include "supervisor.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "fdutil.h"
#include "log.h"
#include "macro.h"

static int listen_on(const struct listen_addr *la)
{
	_cleanup_close_ int fd = -1;
	int one = 1;

	fd = socket(la->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		return negerrno();
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) {
		return negerrno();
	}
	/* One socket per address family: [::] must not also grab 0.0.0.0. */
	if (la->ss.ss_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) {
		return negerrno();
	}
	if (bind(fd, (const struct sockaddr *)&la->ss, la->len) < 0) {
		return negerrno();
	}
	if (listen(fd, SOMAXCONN) < 0) {
		return negerrno();
	}
	return TAKE_FD(fd);
}

/* The n sockets systemd passed, each checked to be a listening stream socket. */
static int take_systemd_sockets(struct daemon *d, int n)
{
	if ((size_t)n > DAEMON_MAX_LISTEN) {
		return log_error_errno(-E2BIG, "socket activation passed %d sockets, at most %d", n,
				       DAEMON_MAX_LISTEN);
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;

		if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
			return log_error_errno(-EINVAL,
					       "socket activation: fd %d is not "
					       "a listening stream socket",
					       fd);
		}
		/* accept4 in the loop must never block on a vanished connection. */
		int nb = fd_set_nonblock(fd, true);

		if (nb < 0) {
			return log_error_errno(nb, "fd %d: %m", fd);
		}
		d->listen_fds[d->nlisten++] = fd;
	}
	d->socket_activated = true;
	log_info("using %d socket%s from systemd", n, n == 1 ? "" : "s");
	return 0;
}

int listeners_setup(struct daemon *d)
{
	char default_addr[32];
	struct listen_addr def;
	const struct listen_addr *addrs = d->cfg->listen;
	size_t n = d->cfg->nlisten;
	int r;

	/* unset_environment: children must not think they were activated. */
	r = sd_listen_fds(1);
	if (r < 0) {
		return log_error_errno(r, "socket activation: %m");
	}
	if (r > 0) {
		return take_systemd_sockets(d, r);
	}

	if (n == 0) {
		snprintf(default_addr, sizeof(default_addr), "0.0.0.0:%d", DAEMON_DEFAULT_PORT);
		r = parse_listen_addr(default_addr, &def);
		assert(r == 0);
		addrs = &def;
		n = 1;
	}
	for (size_t i = 0; i < n; i++) {
		int fd = listen_on(&addrs[i]);

		if (fd < 0) {
			return log_error_errno(fd, "cannot listen on %s: %m", addrs[i].text);
		}
		d->listen_fds[d->nlisten++] = fd;
		log_info("listening on %s", addrs[i].text);
	}
	return 0;
}

void listeners_close(struct daemon *d)
{
	for (size_t i = 0; i < d->nlisten; i++) {
		close(d->listen_fds[i]);
	}
	d->nlisten = 0;
}
