/* SPDX-License-Identifier: MIT */
/*
 * One client connection in its own process (see serve.h): TLS, HELLO, then
 * requests until BYE or an error, each dispatched through requests[] below.
 * Every request that touches a module is checked against the module's rules
 * before the client gets any resource (listener, lanes, memory, temp files);
 * the handlers live in serve_*.c (serve_internal.h lists them).
 */
#include "serve.h"
#include "serve_internal.h"

#include <errno.h>
#include <ifaddrs.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "hello.h"
#include "log.h"
#include "macro.h"
#include "net.h"
#include "privs.h"
#include "rdmadev.h"
#include "session_table.h"
#include "windows_check.h"
#include "xport.h"

static volatile sig_atomic_t stop_requested;

static void on_term(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/*
 * The rules of a FILTER, kept for the OPEN that must follow it: each one
 * checked as the client's own parser checks it.
 */
static int req_filter(struct conn *c, const struct msg *m)
{
	const struct msg_filter *f = &m->u.filter;

	for (size_t i = 0; i < f->count; i++) {
		char esc[PROTO_MAX_PATH * 4 + 1];
		int r = filter_add(&c->filter, f->rules[i].action, f->rules[i].pattern);

		if (r == -ENOMEM) {
			return serve_refuse(c, PERR_INTERNAL, "out of memory");
		}
		if (r < 0) {
			return serve_refuse(c, PERR_PROTOCOL, "FILTER: bad rule '%s': %s",
					    log_escape(f->rules[i].pattern, esc, sizeof(esc)),
					    r == -E2BIG ? "too many rules" : strerror(-r));
		}
	}
	c->have_filter = true;
	log_debug("%s: FILTER: %zu rules for the next OPEN", c->peer, c->filter.n);
	return 0;
}

static int req_ping(struct conn *c, const struct msg *m)
{
	struct msg pong = { .type = MSG_PONG };

	pong.u.ping.nonce = m->u.ping.nonce;
	return chan_send(&c->chan, &pong);
}

/* BYE: nothing to answer; its row ends the session cleanly. */
static int req_bye(struct conn *c, const struct msg *m)
{
	(void)c;
	(void)m;
	return 0;
}

/* What a client may ask between transfers: one row per request. */
static const struct request {
	uint16_t type;
	int (*handle)(struct conn *c, const struct msg *m);
	/* A request restarts the idle clock: a client that just sends PINGs is idle. */
	bool restarts_idle;
	/* The FILTER right before it is for it (and only it may follow one), then gone. */
	bool uses_filter;
	bool ends_session; /* a clean end: TLS close_notify, exit 0 */
} requests[] = {
	{ .type = MSG_FILTER, .handle = req_filter },
	{ .type = MSG_RELAY, .handle = serve_relay_request },
	{ .type = MSG_OPEN, .handle = serve_open, .restarts_idle = true, .uses_filter = true },
	{ .type = MSG_BENCH, .handle = serve_bench, .restarts_idle = true },
	{ .type = MSG_ASSEMBLE, .handle = serve_assemble, .restarts_idle = true },
	{ .type = MSG_LIST, .handle = serve_list, .restarts_idle = true },
	{ .type = MSG_PING, .handle = req_ping },
	{ .type = MSG_BYE, .handle = req_bye, .ends_session = true },
};

static const struct request *request_of(uint16_t type)
{
	for (size_t i = 0; i < ARRAY_SIZE(requests); i++) {
		if (requests[i].type == type) {
			return &requests[i];
		}
	}
	return NULL;
}

/* One request m through its row; *idle_deadline restarted where the row says. */
static int dispatch(struct conn *c, const struct msg *m, int64_t *idle_deadline, bool *ret_end)
{
	const struct request *rq = request_of(m->type);
	int r;

	/* A FILTER is for the OPEN right after it (a RELAY between), nothing else. */
	if (c->have_filter && !(rq && (rq->uses_filter || rq->type == MSG_RELAY))) {
		log_notice("%s (%s): %s after FILTER", c->peer, c->id, proto_type_name(m->type));
		chan_send_error(&c->chan, PERR_PROTOCOL, "FILTER must come right before OPEN");
		return -EBADMSG;
	}
	/* So is a RELAY (a FILTER between). */
	if (serve_relay_pending(c) && !(rq && (rq->uses_filter || rq->type == MSG_FILTER))) {
		log_notice("%s (%s): %s after RELAY", c->peer, c->id, proto_type_name(m->type));
		chan_send_error(&c->chan, PERR_PROTOCOL,
				"RELAY must come right before a push's OPEN");
		return -EBADMSG;
	}
	if (!rq) {
		log_notice("%s (%s): unexpected %s", c->peer, c->id, proto_type_name(m->type));
		chan_send_error(&c->chan, PERR_PROTOCOL, "unexpected %s", proto_type_name(m->type));
		return -EBADMSG;
	}
	r = rq->handle(c, m);
	if (rq->uses_filter) {
		filter_list_free(&c->filter);
		c->have_filter = false;
		serve_relay_free(c);
	}
	if (rq->restarts_idle) {
		*idle_deadline = now_ms() + (int64_t)c->cfg->idle_timeout_s * 1000;
	}
	*ret_end = rq->ends_session;
	return r;
}

/* The control channel failed between requests: the client hears why where it can. */
static int control_channel_failed(struct conn *c, int r)
{
	log_notice_errno(r, "%s (%s): control channel: %m", c->peer, c->id);
	if (r != -ECONNRESET) {
		char why[160];

		chan_send_error(&c->chan, chan_err_code(r), "%s",
				r == -ETIMEDOUT ? "idle timeout"
						: chan_recv_error(&c->chan, r, why, sizeof(why)));
	}
	return r;
}

/*
 * Requests until BYE (or the client's close_notify between them: *ret_clean),
 * an error, or SIGTERM.
 */
static int conn_requests(struct conn *c, bool *ret_clean)
{
	/*
	 * Between transfers only a request restarts the idle clock: a client
	 * that just sends PINGs is idle, and goes at the idle timeout.
	 */
	int64_t idle_deadline = now_ms() + (int64_t)c->cfg->idle_timeout_s * 1000;

	for (;;) {
		bool end = false;
		struct msg m;
		int r;

		r = chan_recv(&c->chan, &m, remaining_ms(idle_deadline));
		if (r == -EPIPE) {
			*ret_clean = true; /* close_notify between requests: a clean end */
			return 0;
		}
		if (r < 0) {
			return control_channel_failed(c, r);
		}
		r = dispatch(c, &m, &idle_deadline, &end);
		msg_clear(&m);
		if (end) {
			*ret_clean = true;
			return 0;
		}
		if (r < 0 || stop_requested) {
			return r;
		}
	}
}

/* The session's peak resident memory, for the debug log (and the tests that bound it). */
static void log_peak_memory(const struct conn *c)
{
	_cleanup_fclose_ FILE *f = NULL;
	char line[128];

	if (log_get_max_level() < LOG_DEBUG) {
		return;
	}
	f = fopen("/proc/self/status", "re");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long kb;

		if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) {
			log_debug("%s: session peak memory %llu kB (VmHWM)", c->peer, kb);
			return;
		}
	}
}

static void describe_peer(struct conn *c)
{
	char fp[65], cn[128];

	tls_peer_fingerprint(c->tls, c->fp);
	tls_format_fingerprint(c->fp, fp);
	log_escape(tls_peer_cn(c->tls), cn, sizeof(cn));
	snprintf(c->id, sizeof(c->id), "CN=%s sha256:%s", cn, fp);
}

/*
 * Up to the TLS session and its control channel: the peer's address, the
 * pre-authentication privileges, the local address (the data path's), TLS.
 * fd is closed (or the TLS connection's) on failure.
 */
static int conn_start(struct conn *c, struct tls_ctx *tls, int fd, const struct sockaddr *peer,
		      socklen_t peerlen)
{
	char err[512];
	int r;

	signal(SIGTERM, on_term);
	signal(SIGPIPE, SIG_IGN);
	net_addr_str(peer, peerlen, c->peer, sizeof(c->peer));
	if (peer && peerlen <= sizeof(c->peer_addr)) {
		memcpy(&c->peer_addr, peer, peerlen);
	}
	/* Still root until the first OPEN (serve_enter_module), but not all of root. */
	if (geteuid() == 0) {
		r = privs_limit_preauth(err, sizeof(err));
		if (r < 0) {
			log_error("%s: %s", c->peer, err);
			close(fd);
			return r;
		}
	}
	c->locallen = sizeof(c->local);
	if (getsockname(fd, (struct sockaddr *)&c->local, &c->locallen) < 0) {
		close(fd);
		return negerrno();
	}
	r = tls_accept(tls, fd, (int)c->cfg->handshake_timeout_s * 1000, &c->tls);
	if (r < 0) {
		log_notice("%s: TLS handshake failed: %s", c->peer, tls_last_error());
		return r;
	}
	describe_peer(c);
	r = chan_init(&c->chan, c->tls, (int)c->cfg->idle_timeout_s * 1000);
	if (r < 0) {
		tls_conn_free(c->tls);
		return r;
	}
	return 0;
}

/*
 * [global]'s 'deny': refused before anything is served, and told so in
 * answer to its HELLO (read first, so the answer is not lost in a reset).
 */
static int conn_refuse_denied(struct conn *c, int64_t deadline)
{
	struct policy_peer peer = serve_conn_peer(c);
	struct msg m;

	if (!policy_peer_denied(c->cfg, NULL, &peer)) {
		return 0;
	}
	log_notice("%s (%s): refused: certificate on the deny list ('deny' in [global])", c->peer,
		   c->id);
	c->chan.io_timeout_ms = remaining_ms(deadline);
	if (c->chan.io_timeout_ms > 0 && chan_recv(&c->chan, &m, c->chan.io_timeout_ms) >= 0) {
		msg_clear(&m);
	}
	chan_send_error(&c->chan, PERR_AUTH,
			"this client's certificate (%s) is denied by the daemon's deny list",
			c->id);
	return -EPERM;
}

/*
 * The RDMA device of the interface holding addr, into dev (sysfs, never
 * rdma_cm: the device contexts librdmacm keeps open would belong to this
 * session's credentials of before it takes the module's, and the kernel
 * then refuses every later post on them, EACCES). 0, or -ENODEV.
 */
static int addr_device(const struct ifaddrs *ifs, const struct sockaddr *addr,
		       char dev[RDMADEV_NAME_MAX + 1])
{
	const char *ifname = rdmadev_ifname_of_addr(ifs, addr);

	return ifname && rdmadev_of_netdev(RDMADEV_SYSFS, RDMADEV_NETSYSFS, ifname, dev) == 0
		   ? 0
		   : -ENODEV;
}

/*
 * Can this daemon's verbs lanes fence slots by memory windows: the devices
 * of the address the client reached and of each of its rails bind type-2
 * windows? What HELLO announces (PROTO_CAP_MW_FENCE), from the answers the
 * supervisor got at start or reload (windows_check.h): no device is opened
 * here unless it is new since.
 */
static int lanes_windows(const struct conn *c)
{
	char dev[1 + DAEMON_MAX_RAILS][RDMADEV_NAME_MAX + 1],
	    why[256] = "no RDMA device holds the address";
	const char *devs[1 + DAEMON_MAX_RAILS];
	struct ifaddrs *ifs = NULL;
	unsigned n = 0;
	int r = 0;

	if (getifaddrs(&ifs) < 0) {
		return 0;
	}
	if (addr_device(ifs, (const struct sockaddr *)&c->local, dev[n]) == 0) {
		devs[n] = dev[n];
		n++;
	}
	for (size_t i = 0; n > 0 && i < c->cfg->nrails; i++) {
		if (addr_device(ifs, (const struct sockaddr *)&c->cfg->rails[i], dev[n]) < 0) {
			snprintf(why, sizeof(why), "no RDMA device holds rail %zu's address", i);
			n = 0;
			break;
		}
		devs[n] = dev[n];
		n++;
	}
	if (n > 0) {
		r = windows_table_answer(windows_table_daemon(), devs, n, why, sizeof(why));
	}
	freeifaddrs(ifs);
	log_debug("%s (%s): memory windows: %s", c->peer, c->id, r == 1 ? "yes" : why);
	return r;
}

/* The client's HELLO, by the handshake's deadline; then it is authenticated. */
static int conn_hello(struct conn *c, int64_t deadline)
{
	const struct daemon_config *cfg = c->cfg;
	struct msg_hello hello;
	char err[512];
	int r;

	hello_offer_windows(lanes_windows(c));
	/* A HELLO dripped byte by byte gets no more than what is left either. */
	c->chan.io_timeout_ms = remaining_ms(deadline);
	r = c->chan.io_timeout_ms > 0
		? hello_server(&c->chan, c->chan.io_timeout_ms, &hello, err, sizeof(err))
		: -ETIMEDOUT;
	c->chan.io_timeout_ms = (int)cfg->idle_timeout_s * 1000;
	if (r == -ETIMEDOUT) {
		snprintf(err, sizeof(err), "no HELLO within the handshake timeout (%u s)",
			 cfg->handshake_timeout_s);
	}
	if (r < 0) {
		log_notice("%s (%s): %s", c->peer, c->id, err);
		return r;
	}
	c->peer_caps = hello.caps;
	/* From here this connection no longer counts against the pre-authentication caps. */
	if (c->sessions) {
		session_table_set_authenticated(c->sessions);
	}
	log_info("%s (%s): connected (%s, protocol %d)", c->peer, c->id,
		 log_escape(hello.software, err, sizeof(err)), r);
	return 0;
}

/* The end of a session that got as far as TLS, however it ended. */
static void conn_end(struct conn *c, int r, bool clean)
{
	if (clean) {
		tls_shutdown(c->tls, 1000);
	} else if (r != -ECONNRESET && r != -EPIPE) {
		/*
		 * Whatever ended the session, the client was told why (ERROR) where
		 * it can still hear it; now a TLS close_notify, never a bare EOF.
		 * Briefly: a client that won't answer it can't hold us.
		 */
		tls_shutdown(c->tls, 200);
	}
	filter_list_free(&c->filter);
	serve_relay_free(c);
	log_peak_memory(c);
	chan_done(&c->chan);
	tls_conn_free(c->tls);
}

int serve_connection(const struct daemon_config *cfg, struct tls_ctx *tls,
		     struct session_table *sessions, int fd, const struct sockaddr *peer,
		     socklen_t peerlen)
{
	struct conn c = {
		.cfg = cfg, .tls_ctx = tls, .sessions = sessions, .stop = &stop_requested
	};
	/* TLS and HELLO together: one absolute deadline (SECURITY.md G47). */
	int64_t deadline = now_ms() + (int64_t)cfg->handshake_timeout_s * 1000;
	bool clean = false;
	int r;

	r = conn_start(&c, tls, fd, peer, peerlen);
	if (r < 0) {
		return r;
	}
	r = conn_refuse_denied(&c, deadline);
	if (r >= 0) {
		r = conn_hello(&c, deadline);
	}
	if (r >= 0) {
		r = conn_requests(&c, &clean);
	}
	conn_end(&c, r, clean);
	return r;
}
