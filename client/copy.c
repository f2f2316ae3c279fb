/* SPDX-License-Identifier: MIT */
/*
 * rdmacp's transfers: connect, authenticate, negotiate, run the engine.
 * Every failure maps to one exit code (src/exitcodes.h) and one line.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "client.h"
#include "engine.h"
#include "exitcodes.h"
#include "hash.h"
#include "log.h"
#include "net.h"
#include "session.h"
#include "xport.h"

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

struct session {
	struct client_opts *o;
	const struct remote *rem;
	struct tls_ctx *ctx;
	struct tls_conn *tls;
	struct chan chan;
	bool chan_ok;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	int version;
	struct msg_hello hello;
};

static int exit_for_perr(uint32_t code)
{
	switch (code) {
	case PERR_OK:
		return EXIT_OK;
	case PERR_VERSION:
		return EXIT_VERSION;
	case PERR_PROTOCOL:
		return EXIT_PROTOCOL;
	case PERR_AUTH:
		return EXIT_AUTH;
	case PERR_NO_MODULE:
	case PERR_PERMISSION:
	case PERR_BAD_PATH:
	case PERR_NOT_FOUND:
	case PERR_BUSY:
	case PERR_DUPLICATE:
		return EXIT_REFUSED;
	case PERR_INTEGRITY:
		return EXIT_INTEGRITY;
	case PERR_TRANSPORT:
		return EXIT_TRANSPORT;
	case PERR_SHUTDOWN:
		return EXIT_INTERRUPTED;
	case PERR_NOSPACE:
	case PERR_IO:
		return EXIT_REMOTE_IO;
	case PERR_SOURCE_CHANGED:
		return EXIT_LOCAL_IO;
	case PERR_TIMEOUT:
		return EXIT_TRANSPORT;
	default:
		return EXIT_PROTOCOL;
	}
}

static void session_close(struct session *s, bool clean)
{
	if (s->chan_ok) {
		if (clean) {
			struct msg bye = { .type = MSG_BYE };
			if (chan_send(&s->chan, &bye) >= 0) {
				tls_shutdown(s->tls, 1000);
			}
		}
		chan_done(&s->chan);
	}
	if (s->tls) {
		tls_conn_free(s->tls);
	}
	if (s->ctx) {
		tls_ctx_free(s->ctx);
	}
}

/* Connect, TLS, HELLO. Returns 0 or an exit code (error already printed). */
static int session_open(struct session *s)
{
	struct tls_config tc = { .server = false };
	char err[1200];
	uint32_t code = 0;
	int fd, r;

	tc.cert_file = s->o->cert;
	tc.key_file = s->o->key;
	tc.ca_file = s->o->ca;
	tc.have_pin = s->o->have_pin;
	memcpy(tc.pin, s->o->pin, sizeof(tc.pin));
	r = tls_ctx_new(&tc, &s->ctx);
	if (r < 0) {
		log_error("TLS setup: %s", tls_last_error());
		return EXIT_CONFIG;
	}
	r = net_connect(s->rem->host, s->o->port, s->o->connect_timeout_s * 1000, &fd, &s->peer,
			&s->peerlen);
	if (r < 0) {
		log_error("cannot connect to %s port %u: %s", s->rem->host, s->o->port,
			  r == -ENOENT ? "unknown host" : strerror(-r));
		return EXIT_CONNECT;
	}
	r = tls_connect(s->ctx, fd, s->rem->host, s->o->connect_timeout_s * 1000, &s->tls);
	if (r < 0) {
		log_error("TLS handshake with %s failed: %s", s->rem->host, tls_last_error());
		return r == -ETIMEDOUT ? EXIT_CONNECT : EXIT_AUTH;
	}
	r = chan_init(&s->chan, s->tls, s->o->idle_timeout_s * 1000);
	if (r < 0) {
		log_error("out of memory");
		return EXIT_LOCAL_IO;
	}
	s->chan_ok = true;
	r = session_hello_client(&s->chan, s->o->connect_timeout_s * 1000, &s->hello, &code, err,
				 sizeof(err));
	if (r == -EKEYREJECTED) {
		/* TLS 1.3: the daemon's verdict on our certificate arrives here. */
		log_error("%s refused our certificate: %s", s->rem->host, tls_conn_error(s->tls));
		return EXIT_AUTH;
	}
	if (r == -EPROTONOSUPPORT) {
		log_error("%s", err);
		return EXIT_VERSION;
	}
	if (r == -EREMOTEIO) {
		log_error("%s: %s", s->rem->host, err);
		return exit_for_perr(code);
	}
	if (r < 0) {
		log_error("handshake with %s failed: %s%s%s", s->rem->host,
			  r == -ECONNRESET || r == -EPIPE ? "connection closed" : strerror(-r),
			  *tls_conn_error(s->tls) ? ": " : "", tls_conn_error(s->tls));
		return r == -ECONNRESET || r == -EPIPE || r == -ETIMEDOUT ? EXIT_CONNECT
									  : EXIT_PROTOCOL;
	}
	s->version = r;
	return 0;
}

int cmd_ping(struct client_opts *o, char **args, int nargs)
{
	struct remote rem = { 0 };
	struct session s = { .o = o, .rem = &rem };
	struct timespec t0, t1;
	uint8_t fp[TLS_FINGERPRINT_LEN];
	char fph[65], esc[256];
	int r;

	if (nargs != 1 || strlen(args[0]) >= sizeof(rem.host)) {
		log_error("usage: rdmacp ping HOST");
		return EXIT_USAGE;
	}
	snprintf(rem.host, sizeof(rem.host), "%s", args[0]);
	if (rem.host[0] == '[') {
		size_t n = strlen(rem.host);
		if (n < 3 || rem.host[n - 1] != ']') {
			log_error("bad host '%s'", args[0]);
			return EXIT_USAGE;
		}
		memmove(rem.host, rem.host + 1, n - 2);
		rem.host[n - 2] = '\0';
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = session_open(&s);
	if (r == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		tls_peer_fingerprint(s.tls, fp);
		tls_format_fingerprint(fp, fph);
		printf("%s: %s, protocol %d, TLS 1.3, server certificate CN=%s sha256:%s, %.1f ms\n",
		       rem.host, log_escape(s.hello.software, esc, sizeof(esc)), s.version,
		       tls_peer_cn(s.tls), fph,
		       (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	}
	session_close(&s, r == 0);
	return r;
}

/* ---- push ---------------------------------------------------------------- */

struct report {
	struct client_opts *o;
	uint64_t files_failed;
};

static void ev_ok(void *ud, const char *name, uint64_t bytes, double secs, const uint8_t h[16])
{
	struct report *rep = ud;
	char esc[1024], hex[33];

	if (rep->o->verbose > 0) {
		hash_to_hex(h, hex);
		fprintf(stderr, "%s: %" PRIu64 " bytes, verified xxh128 %s, committed\n",
			log_escape(name, esc, sizeof(esc)), bytes, hex);
	}
	(void)secs;
}

static void ev_failed(void *ud, const char *name, uint32_t code, const char *text)
{
	struct report *rep = ud;
	char esc[1024], esc2[1024];

	rep->files_failed++;
	log_error("%s: %s (%s)", log_escape(name, esc, sizeof(esc)),
		  log_escape(text, esc2, sizeof(esc2)), proto_err_name(code));
}

static void free_srcs(struct engine_src *srcs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(srcs[i].name);
		free(srcs[i].path);
		free(srcs[i].link);
	}
	free(srcs);
}

/* Turn the command line's sources into engine entries. Returns failures. */
static int collect_sources(char **args, int nargs, struct engine_src **ret, size_t *ret_n)
{
	struct engine_src *srcs = calloc((size_t)nargs, sizeof(*srcs));
	size_t n = 0;
	int failures = 0;

	if (!srcs) {
		return -ENOMEM;
	}
	for (int i = 0; i < nargs; i++) {
		struct stat st;
		_cleanup_free_ char *copy = strdup(args[i]);
		char esc[1024];

		if (!copy) {
			free_srcs(srcs, n);
			return -ENOMEM;
		}
		if (stat(args[i], &st) < 0) {
			log_error("%s: %s", log_escape(args[i], esc, sizeof(esc)), strerror(errno));
			failures++;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			log_error("%s: is a directory (not copied)", log_escape(args[i], esc, sizeof(esc)));
			failures++;
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			log_warning("%s: not a regular file, skipped",
				    log_escape(args[i], esc, sizeof(esc)));
			failures++;
			continue;
		}
		srcs[n] = (struct engine_src){
			.name = strdup(basename(copy)), .path = strdup(args[i]), .dirfd = AT_FDCWD,
			.ftype = PROTO_FT_REG, .mode = st.st_mode & 07777, .size = (uint64_t)st.st_size,
			.mtime = st.st_mtim, .uid = st.st_uid, .gid = st.st_gid,
		};
		if (!srcs[n].name || !srcs[n].path) {
			free_srcs(srcs, n + 1);
			return -ENOMEM;
		}
		n++;
	}
	*ret = srcs;
	*ret_n = n;
	return failures;
}

static int open_transfer(struct session *s, uint8_t direction, uint32_t flags,
			 struct msg_open_ok *ret_ok)
{
	struct msg m = { .type = MSG_OPEN }, in;
	char esc[1024];
	int r;

	m.u.open.direction = direction;
	m.u.open.transport = (uint8_t)s->o->transport;
	m.u.open.lanes = (uint8_t)s->o->lanes;
	m.u.open.flags = flags;
	m.u.open.chunk_size = s->o->chunk_size;
	m.u.open.slots = s->o->slots;
	snprintf(m.u.open.path, sizeof(m.u.open.path), "%s", s->rem->path);
	r = chan_send(&s->chan, &m);
	if (r >= 0) {
		r = chan_recv(&s->chan, &in, s->o->idle_timeout_s * 1000);
	}
	if (r < 0) {
		log_error("%s: control channel: %s", s->rem->host,
			  r == -EPIPE || r == -ECONNRESET ? "connection closed" : strerror(-r));
		return r == -EPIPE || r == -ECONNRESET ? EXIT_CONNECT : EXIT_PROTOCOL;
	}
	if (in.type == MSG_ERROR) {
		log_error("%s: %s", s->rem->host, log_escape(in.u.error.text, esc, sizeof(esc)));
		return exit_for_perr(in.u.error.code);
	}
	if (in.type != MSG_OPEN_OK) {
		log_error("%s: protocol error: expected OPEN_OK, got %s", s->rem->host,
			  proto_type_name(in.type));
		msg_clear(&in);
		return EXIT_PROTOCOL;
	}
	*ret_ok = in.u.open_ok;
	return 0;
}

static int connect_data(struct session *s, const struct msg_open_ok *ok, struct xport **ret)
{
	const struct xport_ops *ops = xport_ops_by_kind(ok->transport);
	struct xport_params xp = { 0 };
	struct sockaddr_storage addr = s->peer;
	int r;

	if (!ops) {
		log_error("daemon chose a transport this build lacks");
		return EXIT_TRANSPORT;
	}
	if (ok->lanes > s->o->lanes || ok->chunk_size > PROTO_MAX_CHUNK ||
	    ok->slots > PROTO_MAX_SLOTS) {
		log_error("daemon offered parameters beyond what we asked for");
		return EXIT_PROTOCOL;
	}
	xp.nlanes = ok->lanes;
	xp.sq_depth = 4 * ok->slots + 16;
	xp.rq_depth = ok->slots;
	xp.timeout_ms = s->o->connect_timeout_s * 1000;
	memcpy(xp.token, ok->token, sizeof(xp.token));
	net_set_port(&addr, ok->data_port);
	r = ops->connect((struct sockaddr *)&addr, s->peerlen, &xp, ret);
	explicit_bzero(xp.token, sizeof(xp.token));
	if (r < 0) {
		log_error("data connection (%s, %u lanes, port %u): %s", ops->name, xp.nlanes,
			  ok->data_port, strerror(-r));
		return EXIT_TRANSPORT;
	}
	return 0;
}

static int push(struct client_opts *o, char **srcs_arg, int nsrcs, const struct remote *rem)
{
	struct session s = { .o = o, .rem = rem };
	struct engine_src *srcs = NULL;
	size_t n = 0;
	struct msg_open_ok ok = { 0 };
	struct xport *x = NULL;
	struct report rep = { .o = o };
	struct engine_params ep = { 0 };
	struct engine_stats st = { 0 };
	struct timespec t0, t1;
	uint32_t code = 0, flags = 0;
	char err[1200];
	int local_failures, rc, r;

	local_failures = collect_sources(srcs_arg, nsrcs, &srcs, &n);
	if (local_failures < 0) {
		log_error("out of memory");
		return EXIT_LOCAL_IO;
	}
	if (n == 0) {
		free_srcs(srcs, n);
		return EXIT_LOCAL_IO;
	}
	if (nsrcs > 1 || rem->path[0] == '\0' || rem->path[strlen(rem->path) - 1] == '/') {
		flags |= PROTO_OPEN_DEST_IS_DIR;
	}
	if (o->preserve) {
		flags |= PROTO_OPEN_PRESERVE;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = session_open(&s);
	if (rc == 0) {
		rc = open_transfer(&s, PROTO_DIR_PUSH, flags, &ok);
	}
	if (rc == 0) {
		rc = connect_data(&s, &ok, &x);
	}
	if (rc == 0) {
		ep.role = ENGINE_SENDER;
		ep.chan = &s.chan;
		ep.x = x;
		ep.chunk_size = ok.chunk_size;
		ep.slots = ok.slots;
		ep.pool_chunks = MAX(o->pool_chunks, 2u);
		ep.idle_timeout_ms = o->idle_timeout_s * 1000;
		ep.srcs = srcs;
		ep.nsrcs = n;
		ep.ev = (struct engine_events){ .file_ok = ev_ok, .file_failed = ev_failed, .ud = &rep };
		ep.stop = &interrupted;
		r = engine_run(&ep, &st, &code, err, sizeof(err));
		x->ops->destroy(x);
		if (r < 0) {
			log_error("transfer failed: %s", err);
			rc = interrupted ? EXIT_INTERRUPTED : exit_for_perr(code);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	session_close(&s, rc == 0);
	free_srcs(srcs, n);
	if (rc != 0) {
		return rc;
	}
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (o->verbose >= 0) {
		fprintf(stderr,
			"%" PRIu64 " files, %" PRIu64 " bytes in %.2f s (%.1f MB/s), %" PRIu64
			" failed, over %s (%u lanes)\n",
			st.files_ok, st.bytes, secs, secs > 0 ? (double)st.bytes / secs / 1e6 : 0.0,
			st.files_failed + (uint64_t)local_failures, ok.transport == XPORT_KIND_TCP ? "tcp" : "verbs",
			ok.lanes);
	}
	if (st.files_failed == 0 && local_failures == 0) {
		return EXIT_OK;
	}
	if (st.files_ok > 0 || local_failures > 0) {
		return EXIT_PARTIAL;
	}
	return exit_for_perr(st.first_error);
}

int cmd_copy(struct client_opts *o, char **args, int nargs)
{
	struct remote dst;
	struct sigaction sa = { .sa_handler = on_signal };
	int r;

	if (nargs < 2) {
		log_error("usage: rdmacp [OPTIONS] SRC... HOST:MODULE/PATH (see rdmacp --help)");
		return EXIT_USAGE;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = parse_remote(args[nargs - 1], &dst);
	if (r < 0) {
		log_error("bad remote '%s': expected HOST:MODULE/PATH", args[nargs - 1]);
		return EXIT_USAGE;
	}
	if (r == 0) {
		log_error("the destination must be remote (HOST:MODULE/PATH); pull is not built yet");
		return EXIT_USAGE;
	}
	for (int i = 0; i < nargs - 1; i++) {
		struct remote tmp;
		if (parse_remote(args[i], &tmp) != 0) {
			log_error("remote source '%s': pull is not built yet", args[i]);
			return EXIT_USAGE;
		}
	}
	return push(o, args, nargs - 1, &dst);
}
