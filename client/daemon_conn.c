/* SPDX-License-Identifier: MIT */
/* One control connection to a daemon (see daemon_conn.h). */
#include "daemon_conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "busywait.h"

#include "exitcodes.h"
#include "hello.h"
#include "lane_seal.h"
#include "log.h"
#include "macro.h"
#include "net.h"
#include "proto/msg.h"
#include "xport.h"

/* The exit code for a failure the daemon reported (transfer_run.c maps our own failures). */
int exit_for_perr(uint32_t code)
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
		/* Our own Ctrl-C is EXIT_INTERRUPTED, decided before the daemon's word is read. */
		return EXIT_DAEMON_STOPPING;
	case PERR_NOSPACE:
	case PERR_IO:
	case PERR_SOURCE_CHANGED: /* a file the daemon sent changed under it */
	case PERR_INTERNAL:	  /* its set-up failed: io_uring, memory */
		return EXIT_REMOTE_IO;
	case PERR_TIMEOUT:
		return EXIT_TRANSPORT;
	case PERR_DEVICE_REFUSED:
	case PERR_DEVICE_BUSY:
	case PERR_DEVICE_SMALL:
		return EXIT_DEVICE;
	case PERR_ENCRYPTION:
		return EXIT_ENCRYPTION;
	case PERR_ASSEMBLY:
		return EXIT_ASSEMBLY;
	case PERR_UNAVAILABLE:
		return EXIT_MODULE_UNAVAILABLE;
	default:
		return EXIT_PROTOCOL;
	}
}

void daemon_conn_close(struct daemon_conn *s, bool clean)
{
	if (s->chan_ok) {
		if (clean) {
			struct msg bye = { .type = MSG_BYE };
			/*
			 * Everything the daemon had to say is in: our close_notify
			 * follows BYE, and the daemon's own (sent once its session
			 * has wound down) is not waited for.
			 */
			if (chan_send(&s->chan, &bye) >= 0) {
				tls_close_notify(s->tls, 1000);
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

void daemon_conn_busy(struct daemon_conn *s, const char *fmt, ...)
{
	va_list ap;

	s->busy = true;
	va_start(ap, fmt);
	vsnprintf(s->busy_why, sizeof(s->busy_why), fmt, ap);
	va_end(ap);
	if (s->quiet_busy) {
		log_debug("%s", s->busy_why);
	} else {
		log_error("%s", s->busy_why);
	}
}

int daemon_conn_open_waiting(struct daemon_conn *s, int (*step)(struct daemon_conn *s, void *ud),
			     void *ud, const volatile sig_atomic_t *stop)
{
	struct client_opts *o = s->o;
	const struct remote *rem = s->rem;
	struct busy_wait w;
	char why[sizeof(s->busy_why)];
	bool quiet;
	int rc;

	busy_wait_init(&w, o, rem->host, stop);
	for (;;) {
		/* Said once, after the wait, with how long it lasted. */
		s->quiet_busy = o->wait_busy_ms > 0;
		rc = daemon_conn_open(s);
		if (rc == 0 && step) {
			rc = step(s, ud);
		}
		if (rc == 0 || !s->busy) {
			return rc;
		}
		quiet = s->quiet_busy;
		memcpy(why, s->busy_why, sizeof(why));
		daemon_conn_close(s, false);
		*s = (struct daemon_conn){ .o = o, .rem = rem };
		if (!busy_wait_next(&w, why)) {
			break;
		}
	}
	if (stop && *stop) {
		log_error("%s: interrupted while waiting for a busy daemon", rem->host);
		return EXIT_INTERRUPTED;
	}
	if (quiet) {
		log_error("%s (still busy after %u s of --wait-busy)", why, busy_wait_seconds(&w));
	}
	return rc;
}

/* -vv: who we are talking to. */
/*
 * Can this host's verbs lanes fence slots by memory windows (the --devices,
 * else the device of the control connection's own address)? What HELLO
 * announces (PROTO_CAP_MW_FENCE); never for --transport tcp.
 */
static int lanes_windows(const struct daemon_conn *s)
{
	const char *devs[XPORT_MAX_LANES];
	unsigned n = MIN(s->o->ndevices, (unsigned)XPORT_MAX_LANES);
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	char why[256];
	int r;

	if (s->o->transport == XPORT_KIND_TCP ||
	    getsockname(tls_fd(s->tls), (struct sockaddr *)&local, &len) < 0) {
		return 0;
	}
	for (unsigned i = 0; i < n; i++) {
		devs[i] = s->o->devices[i];
	}
	r = xport_verbs_windows((struct sockaddr *)&local, devs, n, why, sizeof(why));
	log_debug("memory windows: %s", r == 1 ? "yes" : why);
	return r;
}

static void log_conn_debug(struct daemon_conn *s)
{
	uint8_t fp[TLS_FINGERPRINT_LEN];
	char fph[65], esc[256], cn[1024];

	tls_peer_fingerprint(s->tls, fp);
	tls_format_fingerprint(fp, fph);
	log_debug("connected to %s port %u: %s, protocol %d, server certificate CN=%s sha256:%s",
		  s->rem->host, s->o->port, log_escape(s->hello.software, esc, sizeof(esc)),
		  s->version, log_escape(tls_peer_cn(s->tls), cn, sizeof(cn)), fph);
}

/* Connect, TLS, HELLO. Returns 0 or an exit code (error already printed). */
int daemon_conn_open(struct daemon_conn *s)
{
	struct tls_config tc = { .server = false };
	char err[1200], esc[4 * sizeof(err)];
	uint32_t code = 0;
	int fd, r;

	tc.cert_file = s->o->cert;
	tc.key_file = s->o->key;
	tc.ca_file = s->o->ca;
	tc.have_pin = s->o->have_pin;
	memcpy(tc.pin, s->o->pin, sizeof(tc.pin));
	/*
	 * Connected first: the daemon accepts and forks the session while we
	 * load our certificate and key. A broken TLS set-up is still the error
	 * reported, whether or not the daemon answered.
	 */
	r = net_connect(s->rem->host, s->o->port, s->o->connect_timeout_s * 1000, &fd, &s->peer,
			&s->peerlen);
	if (tls_ctx_new(&tc, &s->ctx) < 0) {
		if (r >= 0) {
			close(fd);
		}
		log_error("TLS setup: %s", tls_last_error());
		return EXIT_CONFIG;
	}
	if (r < 0) {
		log_error("cannot connect to %s port %u: %s", s->rem->host, s->o->port,
			  r == -ENOENT ? "unknown host" : strerror(-r));
		return EXIT_CONNECT;
	}
	r = tls_connect(s->ctx, fd, s->rem->host, s->o->connect_timeout_s * 1000, &s->tls);
	if (r == -ECONNRESET || r == -EPIPE) {
		/* A daemon at its connection limits closes before any TLS: "busy". */
		daemon_conn_busy(s,
				 "%s closed the connection before the TLS handshake finished "
				 "(busy, or not accepting connections): %s",
				 s->rem->host, tls_last_error());
		return EXIT_CONNECT;
	}
	if (r == -EBADMSG) {
		/* An sshd or a web server on that port: no certificate can fix that. */
		log_error("%s port %u is not an rdmacp daemon: %s", s->rem->host, s->o->port,
			  tls_last_error());
		return EXIT_CONNECT;
	}
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
	hello_offer_windows(lanes_windows(s));
	r = hello_client(&s->chan, s->o->connect_timeout_s * 1000, &s->hello, &code, err,
			 sizeof(err));
	if (r == -EKEYREVOKED) {
		log_error("%s refused our certificate: certificate revoked (the daemon's CRL lists "
			  "it: ask for a new one)",
			  s->rem->host);
		return EXIT_REVOKED;
	}
	if (r == -EKEYREJECTED) {
		/* TLS 1.3: the daemon's verdict on our certificate arrives here. */
		log_error("%s refused our certificate: %s", s->rem->host, tls_conn_error(s->tls));
		return EXIT_AUTH;
	}
	/* err may hold the daemon's own words: escaped (SECURITY.md G46). */
	if (r == -EPROTONOSUPPORT) {
		log_error("%s", log_escape(err, esc, sizeof(esc)));
		return EXIT_VERSION;
	}
	if (r == -EREMOTEIO && code == PERR_BUSY) {
		daemon_conn_busy(s, "%s: %s", s->rem->host, log_escape(err, esc, sizeof(esc)));
		return exit_for_perr(code);
	}
	if (r == -EREMOTEIO) {
		log_error("%s: %s", s->rem->host, log_escape(err, esc, sizeof(esc)));
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
	log_conn_debug(s);
	return 0;
}

/*
 * What to ask for the data lanes: sealed (--encrypt: or nothing), sealed
 * where the daemon can (the default: tcp lanes; verbs lanes only where its
 * module requires it), or clear (--no-encrypt, or a daemon from before
 * encryption). verbs lanes are sealed only with a daemon that seals slots:
 * with an older one --encrypt asks for tcp when the transport is auto.
 * Returns 0 or an exit code.
 */
int daemon_conn_encryption_wish(struct daemon_conn *s, uint64_t cap, uint8_t *transport)
{
	const struct client_opts *o = s->o;

	s->encrypt_wish = 0;
	if (o->encrypt == 0) {
		s->clear_why = "--no-encrypt";
		return 0;
	}
	/* What we announced is what we do (the tests play a client from before this way). */
	if (!(hello_local_caps() & cap)) {
		s->clear_why = "this client does not encrypt them";
		return 0;
	}
	if (!(s->hello.caps & cap)) {
		if (o->encrypt == 1) {
			log_error("%s: the daemon is too old for --encrypt (its data lanes are in "
				  "clear): upgrade it, or copy with --no-encrypt",
				  s->rem->host);
			return EXIT_VERSION;
		}
		s->clear_why = "the daemon is too old to encrypt them";
		return 0;
	}
	if (o->encrypt == 1 && *transport != XPORT_KIND_TCP &&
	    !(hello_local_caps() & s->hello.caps & PROTO_CAP_VERBS_SEAL)) {
		if (*transport == XPORT_KIND_VERBS) {
			log_error(
			    "%s: the daemon is too old to encrypt verbs lanes: upgrade it, or "
			    "copy with --transport tcp or --no-encrypt",
			    s->rem->host);
			return EXIT_VERSION;
		}
		if (o->verbose > 0) {
			log_info("transport: tcp (--encrypt: the daemon encrypts only tcp lanes)");
		}
		*transport = XPORT_KIND_TCP;
	}
	s->encrypt_wish = o->encrypt == 1 ? PROTO_ENCRYPT_REQUIRE : PROTO_ENCRYPT_PREFER;
	return 0;
}

/*
 * Sealed lanes we can take: AES-256-GCM on tcp, on verbs with
 * PROTO_CAP_VERBS_SEAL; another suite only when we announced
 * PROTO_CAP_SEAL_SUITES (an old client would not know it), on tcp frames,
 * and on verbs slots only with PROTO_CAP_SLOT_SUITES too.
 */
static bool sealed_as_asked(const struct msg_open_ok *ok)
{
	uint64_t ours = hello_local_caps();

	if (ok->transport == XPORT_KIND_VERBS && !(ours & PROTO_CAP_VERBS_SEAL)) {
		return false;
	}
	if (ok->lanes_sealed == PROTO_LANES_SEALED) {
		return true;
	}
	if (ok->transport == XPORT_KIND_VERBS && !(ours & PROTO_CAP_SLOT_SUITES)) {
		return false;
	}
	return proto_lanes_sealed(ok->lanes_sealed) && (ours & PROTO_CAP_SEAL_SUITES) &&
	       lane_seal_lanes_suite(ok->lanes_sealed) != 0;
}

/* OPEN_OK's lanes byte against what we asked. Returns 0 or an exit code. */
int daemon_conn_check_lanes(struct daemon_conn *s, const struct msg_open_ok *ok)
{
	/* Daemon rails: only for verbs lanes, to a client that announced them. */
	if (ok->nrails &&
	    (ok->transport != XPORT_KIND_VERBS || !(hello_local_caps() & PROTO_CAP_DAEMON_RAILS))) {
		log_error("%s: protocol error: OPEN_OK offers rails we did not ask for",
			  s->rem->host);
		return EXIT_PROTOCOL;
	}
	if (ok->rails_flags && !(hello_local_caps() & PROTO_CAP_RAILS_ONLY)) {
		log_error("%s: protocol error: OPEN_OK puts no lanes on the address we reached, "
			  "which we did not announce",
			  s->rem->host);
		return EXIT_PROTOCOL;
	}
	if (!s->encrypt_wish) {
		/* With rails the lanes byte is always there: clear when not asked. */
		if (ok->lanes_sealed == 0 ||
		    (ok->nrails && ok->lanes_sealed == PROTO_LANES_CLEAR)) {
			return 0;
		}
	} else if (sealed_as_asked(ok) || (ok->lanes_sealed == PROTO_LANES_CLEAR &&
					   s->encrypt_wish == PROTO_ENCRYPT_PREFER)) {
		s->clear_why = ok->transport == XPORT_KIND_VERBS
				   ? "verbs lanes are encrypted only with --encrypt"
				   : "the daemon's module has encryption = off";
		return 0;
	}
	log_error("%s: protocol error: OPEN_OK does not answer what we asked for the data lanes "
		  "(encryption)",
		  s->rem->host);
	return EXIT_PROTOCOL;
}
