/* SPDX-License-Identifier: MIT */
/* The TLS tests' certificates, sockets and server thread (tls_harness.h). */
#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "certs.h"
#include "tls.h"
#include "tls_harness.h"

char *tmpdir;
char *dir_a;
char *dir_b;

/* ---- plumbing ---- */

char *path_in(const char *dir, const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

struct tls_ctx *make_ctx(bool server, const char *dir, const char *name, const char *ca_dir,
			 const uint8_t *pin)
{
	char crt[256], key[256], ca[256];
	struct tls_config cfg = {
		.server = server, .cert_file = crt, .key_file = key, .ca_file = ca
	};
	struct tls_ctx *ctx = NULL;
	int r;

	snprintf(crt, sizeof(crt), "%s/%s.crt", dir, name);
	snprintf(key, sizeof(key), "%s/%s.key", dir, name);
	snprintf(ca, sizeof(ca), "%s/ca.crt", ca_dir);
	if (pin) {
		cfg.have_pin = true;
		memcpy(cfg.pin, pin, TLS_FINGERPRINT_LEN);
	}
	r = tls_ctx_new(&cfg, &ctx);
	if (r < 0) {
		fail_msg("tls_ctx_new: %s (%s)", strerror(-r), tls_last_error());
	}
	return ctx;
}

int listen_tcp(int *ret_port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*ret_port = ntohs(sa.sin_port);
	return fd;
}

int connect_tcp(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

void fill_pattern(uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		buf[i] = (uint8_t)(i * 31 + 7);
	}
}

/* ---- the server thread ---- */

static void *server_main(void *arg)
{
	struct server *s = arg;
	struct tls_conn *c = NULL;
	uint8_t buf[16];
	int fd;

	fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		s->accept_rc = -errno;
		return NULL;
	}
	if (s->mode == SRV_RAW_TLS12) {
		SSL *ssl = SSL_new(s->raw_ctx);

		SSL_set_fd(ssl, fd);
		s->accept_rc = SSL_accept(ssl) == 1 ? 0 : -EPROTO;
		SSL_free(ssl);
		close(fd);
		return NULL;
	}
	s->accept_rc = tls_accept(s->ctx, fd, IO_TIMEOUT_MS, &c);
	if (s->accept_rc < 0) {
		snprintf(s->error, sizeof(s->error), "%s", tls_last_error());
		return NULL;
	}
	snprintf(s->cn, sizeof(s->cn), "%s", tls_peer_cn(c));
	s->export_rc =
	    tls_export_secret(c, "EXPORTER-rdmacp-test", s->exported, sizeof(s->exported));
	switch (s->mode) {
	case SRV_ECHO:
		s->io_rc = tls_read_full(c, buf, 5, IO_TIMEOUT_MS);
		if (s->io_rc == 5 && memcmp(buf, "hello", 5) == 0) {
			s->io_rc = tls_write_full(c, "world", 5, IO_TIMEOUT_MS);
			s->shutdown_rc = tls_shutdown(c, IO_TIMEOUT_MS);
		} else if (s->io_rc >= 0) {
			s->io_rc = -EBADMSG;
		}
		break;
	case SRV_RAW_CLOSE:
		s->io_rc = tls_write_full(c, "0123456789", s->partial, IO_TIMEOUT_MS);
		shutdown(tls_fd(c), SHUT_RDWR);
		break;
	case SRV_NOTIFY_CLOSE:
		s->io_rc = tls_write_full(c, "0123456789", s->partial, IO_TIMEOUT_MS);
		s->shutdown_rc = tls_shutdown(c, 200);
		break;
	case SRV_READ:
		s->io_rc = tls_read_full(c, buf, 5, IO_TIMEOUT_MS);
		break;
	case SRV_BULK: {
		uint8_t *got = malloc(BULK_LEN), *want = malloc(BULK_LEN);

		fill_pattern(want, BULK_LEN);
		s->io_rc = tls_read_full(c, got, BULK_LEN, IO_TIMEOUT_MS);
		if (s->io_rc == BULK_LEN && memcmp(got, want, BULK_LEN) != 0) {
			s->io_rc = -EBADMSG;
		}
		free(got);
		free(want);
		break;
	}
	case SRV_RAW_TLS12:
		break;
	}
	if (s->io_rc < 0) {
		snprintf(s->error, sizeof(s->error), "%s", tls_conn_error(c));
	}
	tls_conn_free(c);
	return NULL;
}

int server_start(struct server *s, struct tls_ctx *ctx, enum srv_mode mode)
{
	int port;

	s->ctx = ctx;
	s->mode = mode;
	s->lfd = listen_tcp(&port);
	assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
	return port;
}

void server_join(struct server *s)
{
	assert_int_equal(pthread_join(s->thread, NULL), 0);
	close(s->lfd);
}

void assert_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle)) {
		fail_msg("'%s' does not mention '%s'", haystack, needle);
	}
}

int group_setup(void **state)
{
	static const char *const hosts[] = { "server.test" };

	signal(SIGPIPE, SIG_IGN);
	tmpdir = tu_mkdtemp();
	dir_a = path_in(tmpdir, "a");
	dir_b = path_in(tmpdir, "b");
	if (certs_init(dir_a, hosts, 1) != 0 || certs_init(dir_b, NULL, 0) != 0 ||
	    certs_issue_client(dir_a, "old", 1, 10) != 0 ||
	    certs_issue_client(dir_a, "pinned-other", 0, 0) != 0) {
		return -1;
	}
	return 0;
}

int group_teardown(void **state)
{
	tu_rmtree(tmpdir);
	free(tmpdir);
	free(dir_a);
	free(dir_b);
	return 0;
}
