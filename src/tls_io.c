/* SPDX-License-Identifier: MIT */
/*
 * TLS record I/O (tls.h): reads and writes, whole with a deadline or one
 * try each, on a non-blocking socket waited for with poll(); close_notify
 * and the shutdown that waits for the peer's.
 */
#include "tls-internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>

#include <openssl/err.h>

#include "clock.h"

/* ---- waiting ---- */

/* timeout_ms < 0: no deadline (-1). */
int64_t tls_deadline_after(int timeout_ms)
{
	return timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
}

static int wait_fd(int fd, int ssl_error, int64_t deadline)
{
	struct pollfd p = {
		.fd = fd,
		.events = ssl_error == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN,
	};

	for (;;) {
		int tmo = -1;
		int r;

		if (deadline >= 0) {
			int64_t left = deadline - now_ms();

			tmo = left <= 0 ? 0 : (int)MIN(left, (int64_t)INT_MAX);
		}
		r = poll(&p, 1, tmo);
		if (r > 0) {
			/* POLLERR/POLLHUP too: the next SSL call reports what happened. */
			return 0;
		}
		if (r == 0) {
			return -ETIMEDOUT;
		}
		if (errno != EINTR) {
			return negerrno();
		}
	}
}

int tls_wait_or_fail(struct tls_conn *c, int ssl_error, int64_t deadline, int timeout_ms,
		     const char *op)
{
	int r = wait_fd(c->fd, ssl_error, deadline);

	if (r == -ETIMEDOUT) {
		conn_reason(c, "%s timed out after %d ms", op, timeout_ms);
	} else if (r < 0) {
		conn_reason(c, "poll during %s: %s", op, strerror(-r));
	}
	return r;
}

/* ---- record I/O ---- */

int tls_read_full(struct tls_conn *c, void *buf, size_t len, int timeout_ms)
{
	int64_t deadline = tls_deadline_after(timeout_ms);
	size_t got = 0;

	if (len > INT_MAX) {
		return -EINVAL;
	}
	if (c->broken) {
		return -EPIPE;
	}
	while (got < len) {
		size_t n = 0;
		int r, err, saved;

		ERR_clear_error();
		errno = 0;
		r = SSL_read_ex(c->ssl, (char *)buf + got, len - got, &n);
		if (r == 1) {
			got += n;
			continue;
		}
		saved = errno;
		err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			r = tls_wait_or_fail(c, err, deadline, timeout_ms, "read");
			if (r < 0) {
				return r;
			}
			continue;
		}
		if (err == SSL_ERROR_ZERO_RETURN) {
			ERR_clear_error();
			if (got == 0) {
				conn_reason(c, "peer closed the connection");
				return 0;
			}
			c->broken = true;
			conn_reason(c, "peer sent close_notify in the middle of a message");
			return -ECONNRESET;
		}
		return tls_fail_ssl(c, err, saved, "read");
	}
	return (int)len;
}

int tls_write_full(struct tls_conn *c, const void *buf, size_t len, int timeout_ms)
{
	int64_t deadline = tls_deadline_after(timeout_ms);
	size_t done = 0;

	if (len > INT_MAX) {
		return -EINVAL;
	}
	if (c->broken) {
		return -EPIPE;
	}
	while (done < len) {
		size_t n = 0;
		int r, err, saved;

		ERR_clear_error();
		errno = 0;
		r = SSL_write_ex(c->ssl, (const char *)buf + done, len - done, &n);
		if (r == 1) {
			done += n;
			continue;
		}
		saved = errno;
		err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			r = tls_wait_or_fail(c, err, deadline, timeout_ms, "write");
			if (r < 0) {
				return r;
			}
			continue;
		}
		return tls_fail_ssl(c, err, saved, "write");
	}
	return (int)len;
}

ssize_t tls_write_some(struct tls_conn *c, const void *buf, size_t len)
{
	size_t n = 0;
	int r, err, saved;

	if (c->broken) {
		return -EPIPE;
	}
	ERR_clear_error();
	errno = 0;
	r = SSL_write_ex(c->ssl, buf, len, &n);
	if (r == 1) {
		return (ssize_t)n;
	}
	saved = errno;
	err = SSL_get_error(c->ssl, r);
	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
		return -EAGAIN;
	}
	return tls_fail_ssl(c, err, saved, "write");
}

ssize_t tls_read_some(struct tls_conn *c, void *buf, size_t len)
{
	size_t n = 0;
	int r, err, saved;

	if (c->broken) {
		return -EPIPE;
	}
	ERR_clear_error();
	errno = 0;
	r = SSL_read_ex(c->ssl, buf, len, &n);
	if (r == 1) {
		return (ssize_t)n;
	}
	saved = errno;
	err = SSL_get_error(c->ssl, r);
	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
		return -EAGAIN;
	}
	if (err == SSL_ERROR_ZERO_RETURN) {
		ERR_clear_error();
		return 0;
	}
	return tls_fail_ssl(c, err, saved, "read");
}

bool tls_pending(struct tls_conn *c)
{
	return SSL_pending(c->ssl) > 0 || SSL_has_pending(c->ssl);
}

int tls_fd(struct tls_conn *c)
{
	return c->fd;
}

/* Our close_notify, on its way by the deadline. 1: the peer's is in already. */
static int send_close_notify(struct tls_conn *c, int64_t deadline, int timeout_ms)
{
	if (c->broken) {
		return -EPIPE;
	}
	for (;;) {
		int r, err, saved;

		ERR_clear_error();
		errno = 0;
		r = SSL_shutdown(c->ssl);
		if (r == 1) {
			return 1; /* both close_notify exchanged */
		}
		if (r == 0) {
			return 0; /* ours sent */
		}
		saved = errno;
		err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			r = tls_wait_or_fail(c, err, deadline, timeout_ms, "shutdown");
			if (r < 0) {
				return r;
			}
			continue;
		}
		return tls_fail_ssl(c, err, saved, "shutdown");
	}
}

int tls_close_notify(struct tls_conn *c, int timeout_ms)
{
	int r = send_close_notify(c, tls_deadline_after(timeout_ms), timeout_ms);

	return MIN(r, 0);
}

int tls_shutdown(struct tls_conn *c, int timeout_ms)
{
	int64_t deadline = tls_deadline_after(timeout_ms);
	char scratch[4096];
	int s = send_close_notify(c, deadline, timeout_ms);

	if (s != 0) {
		return MIN(s, 0);
	}
	/* Wait for the peer's close_notify, discarding anything it still sends. */
	for (;;) {
		size_t n = 0;
		int r, err, saved;

		ERR_clear_error();
		errno = 0;
		r = SSL_read_ex(c->ssl, scratch, sizeof(scratch), &n);
		if (r == 1) {
			continue;
		}
		saved = errno;
		err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_ZERO_RETURN) {
			ERR_clear_error();
			return 0;
		}
		if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
			r = tls_wait_or_fail(c, err, deadline, timeout_ms, "shutdown");
			if (r < 0) {
				return r;
			}
			continue;
		}
		return tls_fail_ssl(c, err, saved, "shutdown");
	}
}
