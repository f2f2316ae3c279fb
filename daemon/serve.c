/* SPDX-License-Identifier: MIT */
/*
 * One client connection in its own process (see serve.h): TLS, HELLO, then
 * OPEN requests, each checked against the module's rules before the client
 * gets any resource (listener, lanes, memory, temp files).
 */
#include "serve.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pwd.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assemble.h"
#include "chan.h"
#include "clock.h"
#include "engine.h"
#include "filehash.h"
#include "fsglob.h"
#include "fspath.h"
#include "hash.h"
#include "log.h"
#include "macro.h"
#include "net.h"
#include "policy.h"
#include "privs.h"
#include "hello.h"
#include "listattrs.h"
#include "session_table.h"
#include "lane_seal.h"
#include "tls.h"
#include "walk.h"
#include "xport.h"

#define POLICY_MAX_LANES 8
#define POLICY_MIN_CHUNK (64u << 10)
#define POLICY_MAX_CHUNK (16u << 20)
/* Per connection, above the memory budget: a pool's rounding to 2 MiB pages and the like. */
#define POLICY_MEMLOCK_SLACK (4u << 20)

static volatile sig_atomic_t stop_requested;

static void on_term(int sig)
{
	(void)sig;
	stop_requested = 1;
}

struct conn {
	const struct daemon_config *cfg;
	struct tls_conn *tls;
	struct chan chan;
	char peer[96];			   /* address */
	struct sockaddr_storage peer_addr; /* the client's, for its data lanes (verbs) */
	char id[320];			   /* "CN=client sha256:ab12.." for logs */
	uint8_t fp[TLS_FINGERPRINT_LEN];
	struct sockaddr_storage local;
	socklen_t locallen;
	struct session_table *sessions;
	uint64_t last_progress;
	struct policy_session used; /* what this connection stored, against its modules' caps */
	uint64_t peer_caps;	    /* the client's HELLO caps */
	bool switched;		    /* runs as a module's user now, for good */
	uid_t uid;
	gid_t gid;
	/*
	 * The FILTER that came right before this OPEN (filter.h): a pull's
	 * walk applies it; a push's receiver keeps it for a delete pass.
	 */
	struct filter_list filter;
	bool have_filter;
	unsigned sealed_transfers; /* lane_seal_export's count: v1 keys seal only the first */
};

static int refuse(struct conn *c, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Tell the client no, and log who asked for what and why. */
static int refuse(struct conn *c, uint32_t code, const char *fmt, ...)
{
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	log_notice("%s (%s): refused: %s", c->peer, c->id, text);
	chan_send_error(&c->chan, proto_err_for_peer(code, c->peer_caps), "%s", text);
	return -EPERM;
}

static struct policy_peer conn_peer(const struct conn *c)
{
	return (struct policy_peer){ .tls = c->tls, .fp = c->fp, .caps = c->peer_caps };
}

/* Ask the module policy (policy.h); a no is sent to the client, with its reason. */
static int decide(struct conn *c, const struct policy_request *rq, struct policy_grant *ret)
{
	struct policy_peer peer = conn_peer(c);
	uint32_t code;
	char why[512];

	if (policy_decide(c->cfg, &peer, &c->used, rq, ret, &code, why, sizeof(why)) < 0) {
		return refuse(c, code, "%s", why);
	}
	return 0;
}

/* A path the granted request names in its module (policy_path); a no is sent. */
static int check_path(struct conn *c, const struct policy_grant *g, int rootfd, const char *rel)
{
	uint32_t code;
	char why[PROTO_MAX_PATH * 4 + 256];

	if (policy_path(g, rootfd, rel, &code, why, sizeof(why)) < 0) {
		return refuse(c, code, "%s", why);
	}
	return 0;
}

struct push_dest {
	int fd;
	char rename_to[FSPATH_NAME_MAX + 1];
};

/*
 * Where a push lands: REL itself when it is a directory (or must be one);
 * otherwise its parent, with the single source renamed to REL's last
 * component, as cp and scp do.
 */
static int resolve_push_dest(int rootfd, const char *rel, bool dest_is_dir, bool create,
			     struct push_dest *ret)
{
	_cleanup_free_ char *trimmed = strdup(rel);
	const char *leaf;
	size_t n;
	int r;

	if (!trimmed) {
		return -ENOMEM;
	}
	n = strlen(trimmed);
	while (n > 0 && trimmed[n - 1] == '/') {
		trimmed[--n] = '\0';
	}
	ret->rename_to[0] = '\0';
	if (n == 0) {
		return fspath_open_dir(rootfd, "", &ret->fd);
	}
	r = fspath_validate(trimmed);
	if (r < 0) {
		return r;
	}
	r = fspath_open_dir(rootfd, trimmed, &ret->fd);
	/*
	 * Not a directory (or a symlink, which is never followed): the single
	 * source replaces it by name. A symlink higher up still fails below.
	 */
	if (r != -ENOENT && r != -ENOTDIR && !(r == -ELOOP && !dest_is_dir)) {
		return r;
	}
	if (dest_is_dir) {
		if (r == -ENOTDIR) {
			return r;
		}
		if (!create) {
			/* A dry run: it would be created; create nothing now. */
			ret->fd = -1;
			return 0;
		}
		return fspath_open_or_create_dir(rootfd, trimmed, &ret->fd);
	}
	r = fspath_open_parent(rootfd, trimmed, false, &ret->fd, &leaf);
	if (r < 0) {
		return r;
	}
	snprintf(ret->rename_to, sizeof(ret->rename_to), "%s", leaf);
	return 0;
}

static void ev_file_ok(void *ud, const struct engine_entry_ev *ev)
{
	struct conn *c = ud;
	char esc[512], hex[33] = "none";

	if (log_get_max_level() >= LOG_DEBUG) {
		if (ev->hash) {
			hash_to_hex(ev->hash, hex);
		}
		log_debug("%s: committed %s (%llu bytes, %.3f s, xxh128 %s)", c->peer,
			  log_escape(ev->name, esc, sizeof(esc)), (unsigned long long)ev->bytes,
			  ev->seconds, hex);
	}
}

static void ev_file_resumed(void *ud, const char *name, uint64_t sent, uint64_t kept, uint64_t zero,
			    uint64_t skipped, double secs, const uint8_t h[16])
{
	struct conn *c = ud;
	char esc[512], hex[33];

	if (log_get_max_level() >= LOG_DEBUG) {
		hash_to_hex(h, hex);
		log_debug("%s: committed %s, resumed (%llu bytes sent, %llu kept, %llu zeros, %llu "
			  "unchanged, %.3f s, xxh128 %s)",
			  c->peer, log_escape(name, esc, sizeof(esc)), (unsigned long long)sent,
			  (unsigned long long)kept, (unsigned long long)zero,
			  (unsigned long long)skipped, secs, hex);
	}
}

static void ev_file_skipped(void *ud, const char *name, uint8_t ftype, uint32_t items)
{
	struct conn *c = ud;
	char esc[512], item[12];

	proto_itemize(item, '.', ftype, items);
	log_debug("%s: kept %s (%s)", c->peer, log_escape(name, esc, sizeof(esc)),
		  items ? item : "unchanged");
}

static void ev_notice(void *ud, const char *name, const char *text)
{
	struct conn *c = ud;
	char esc[512];

	log_notice("%s (%s): %s: %s", c->peer, c->id, log_escape_short(name, esc, sizeof(esc)),
		   text);
}

/* --delete: each removal is in the log (debug), the totals in the "done" line. */
static void ev_deleted(void *ud, const char *name, uint8_t ftype)
{
	struct conn *c = ud;
	char esc[512];

	(void)ftype;
	log_debug("%s: deleted %s (--delete)", c->peer, log_escape(name, esc, sizeof(esc)));
}

static void ev_planned(void *ud, const char *name, uint8_t ftype, uint64_t bytes)
{
	struct conn *c = ud;
	char esc[512];

	(void)ftype;
	log_debug("%s: dry run: would copy %s (%llu bytes)", c->peer,
		  log_escape(name, esc, sizeof(esc)), (unsigned long long)bytes);
}

static void ev_progress(void *ud, uint64_t bytes)
{
	struct conn *c = ud;

	if (c->sessions && bytes > c->last_progress) {
		session_table_add_bytes(c->sessions, bytes - c->last_progress);
	}
	c->last_progress = bytes;
}

static void ev_file_failed(void *ud, const char *name, uint8_t ftype, uint32_t code, bool local,
			   const char *text)
{
	struct conn *c = ud;

	(void)ftype;
	char esc[900], esc2[512];

	log_notice("%s (%s): %s failed%s: %s: %s", c->peer, c->id,
		   log_escape_short(name, esc, sizeof(esc)), local ? "" : " at the client",
		   proto_err_name(code), log_escape_short(text, esc2, sizeof(esc2)));
}

struct get_source;
static int expand_get(struct conn *c, const struct policy_grant *gr, int rootfd, bool recursive,
		      struct get_source *g);
static void get_source_engine(struct get_source *g, struct engine_source *ret);

/*
 * RDMA lanes only from the client's own address: their
 * token crosses the network in clear in the CM request. 'lanes from other
 * addresses = yes' lifts it, for clients whose rails leave from addresses of
 * their own (--devices).
 */
static void lanes_from_peer(const struct conn *c, struct xport_params *xp)
{
	if (!c->cfg->lanes_any_source && c->peer_addr.ss_family != AF_UNSPEC) {
		xp->peer_set = true;
		xp->peer = c->peer_addr;
	}
}

/* The module's (or [global]'s) "tos": the daemon's lanes' own traffic class. */
static void lanes_tos(int tos, struct xport_params *xp)
{
	if (tos >= 0) {
		xp->tos_set = true;
		xp->tos = (uint8_t)tos;
	}
}

/*
 * Which verbs path the lanes take (*ret_send: WRITE + SEND): the client's
 * word when it asked for WRITE + SEND (OPEN flag), which any device can
 * carry; else WRITE WITH IMMEDIATE, which the device of the address must
 * have. 1: verbs can go; 0: not here (why says so); <0: refused (said).
 */
static int verbs_path_check(struct conn *c, unsigned want, bool client_send,
			    const struct sockaddr *addr, bool *ret_send, char *why, size_t whylen)
{
	const char *force = getenv("RDMACPD_TEST_WRITE_SEND");
	char dev[256];
	int path = xport_verbs_path(addr, NULL, 0, force && *force, dev, sizeof(dev));

	*ret_send = client_send;
	/*
	 * No device found for the address (or rdma_cm could not say): its
	 * listen says whether verbs can go, as before.
	 */
	if ((path < 0 && path != -EOPNOTSUPP) ||
	    (path > 0 && (client_send || path == XPORT_PATH_WRITE_IMM))) {
		return 1;
	}
	if (path < 0) {
		snprintf(why, whylen, "%s", dev);
	} else {
		snprintf(why, whylen,
			 "this daemon's RDMA device needs the WRITE + SEND verbs path (%s), and %s",
			 dev,
			 c->peer_caps & PROTO_CAP_WRITE_SEND
			     ? "the client's lanes use RDMA WRITE WITH IMMEDIATE"
			     : "the client is too old for it: upgrade it");
	}
	if (want == XPORT_KIND_VERBS) {
		return refuse(c, PERR_TRANSPORT, "%s; use --transport tcp", why);
	}
	return 0;
}

/*
 * The data path's listener on the control connection's own address: verbs
 * when asked for (or, for "auto", when this address has an RDMA device
 * that can take the client's path), tcp otherwise. Binding rdma_cm to the
 * address is what proves the device reaches the client: it is the device
 * the client's traffic arrives on. client_send: the client asked for the
 * WRITE + SEND path; *ret_send says whether verbs lanes take it.
 */
static int transport_listen(struct conn *c, unsigned want, bool client_send,
			    struct sockaddr_storage *addr, const struct xport_ops **ret_ops,
			    struct xport_listener **ret_l, uint16_t *ret_port, bool *ret_send)
{
	const struct xport_ops *verbs = xport_ops_by_kind(XPORT_KIND_VERBS);
	char why[512] = "";
	int r = -ENODEV;

	*ret_send = false;
	if (want == XPORT_KIND_VERBS || want == 0) {
		if (verbs && xport_verbs_probe(why, sizeof(why)) > 0) {
			/*
			 * A dual-stack listener (socket activation) sees an IPv4
			 * client as ::ffff:a.b.c.d; rdma_cm binds IPv4 addresses,
			 * so the device is found from the plain IPv4 one.
			 */
			struct sockaddr_storage v4 = { 0 };
			const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)addr;
			const struct sockaddr *bind = (const struct sockaddr *)addr;
			socklen_t bindlen = c->locallen;

			if (addr->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
				struct sockaddr_in *s4 = (struct sockaddr_in *)&v4;

				s4->sin_family = AF_INET;
				s4->sin_port = s6->sin6_port;
				memcpy(&s4->sin_addr, &s6->sin6_addr.s6_addr[12], 4);
				bind = (const struct sockaddr *)&v4;
				bindlen = sizeof(*s4);
			}
			r = verbs_path_check(c, want, client_send, bind, ret_send, why,
					     sizeof(why));
			if (r < 0) {
				return r;
			}
			r = r > 0 ? verbs->listen(bind, bindlen, ret_l, ret_port) : -EOPNOTSUPP;
			if (r == 0) {
				*ret_ops = verbs;
				return 0;
			}
			*ret_send = false;
			if (r != -EOPNOTSUPP) {
				snprintf(why, sizeof(why), "rdma_cm listen on this address: %s",
					 strerror(-r));
			}
		} else if (!verbs) {
			snprintf(why, sizeof(why), "built without the verbs transport");
		}
		if (want == XPORT_KIND_VERBS) {
			return refuse(c, PERR_TRANSPORT,
				      "no RDMA device on the daemon (%s); use "
				      "--transport tcp",
				      why);
		}
		log_debug("%s: auto transport: tcp (%s)", c->peer, why);
	}
	r = xport_tcp_ops.listen((struct sockaddr *)addr, c->locallen, ret_l, ret_port);
	if (r < 0) {
		return refuse(c, PERR_TRANSPORT, "cannot listen for data lanes: %s", strerror(-r));
	}
	*ret_ops = &xport_tcp_ops;
	return 0;
}

/*
 * Daemon rails ('rails' addresses): verbs lanes are taken on those too, for
 * a client that announced PROTO_CAP_DAEMON_RAILS; ok lists them. Only
 * addresses of the lanes' family, other than the one the client reached;
 * one rdma_cm cannot listen on (no RDMA device there) is left out.
 */
static void offer_rails(const struct conn *c, const struct xport_ops *ops, struct xport_listener *l,
			const struct sockaddr_storage *reached, struct msg_open_ok *ok)
{
	const struct sockaddr_in6 *r6 = (const struct sockaddr_in6 *)reached;
	int family = reached->ss_family;

	if (ops->kind != XPORT_KIND_VERBS || !ops->listen_rail ||
	    !(c->peer_caps & PROTO_CAP_DAEMON_RAILS) || c->cfg->nrails == 0) {
		return;
	}
	if (family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&r6->sin6_addr)) {
		family = AF_INET;
	}
	for (size_t i = 0; i < c->cfg->nrails && ok->nrails < PROTO_MAX_RAILS; i++) {
		const struct sockaddr_storage *a = &c->cfg->rails[i];
		struct proto_rail *rl = &ok->rails[ok->nrails];
		char text[INET6_ADDRSTRLEN + 8];
		uint16_t port = 0;
		int r;

		if (a->ss_family != family ||
		    xport_same_ip((const struct sockaddr *)a, (const struct sockaddr *)reached)) {
			continue;
		}
		(void)net_addr_str((const struct sockaddr *)a, sizeof(*a), text, sizeof(text));
		r = ops->listen_rail(l, (const struct sockaddr *)a,
				     family == AF_INET ? sizeof(struct sockaddr_in)
						       : sizeof(struct sockaddr_in6),
				     &port);
		if (r < 0) {
			log_notice_errno(r, "%s (%s): rail %s left out: rdma_cm listen: %m",
					 c->peer, c->id, text);
			continue;
		}
		memset(rl, 0, sizeof(*rl));
		if (family == AF_INET) {
			rl->family = PROTO_RAIL_INET;
			memcpy(rl->addr, &((const struct sockaddr_in *)a)->sin_addr, 4);
		} else {
			rl->family = PROTO_RAIL_INET6;
			memcpy(rl->addr, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
		}
		rl->port = port;
		ok->nrails++;
		log_debug("%s (%s): lanes also on rail %s port %u", c->peer, c->id, text, port);
	}
}

/*
 * OPEN_OK (ok, filled in) to the client, then its lanes on the listener;
 * the listener closed and the session's token and lane key wiped either
 * way. what names the lanes in the log ("data", "bench").
 */
static int offer_lanes(struct conn *c, const struct msg *ok, const struct xport_ops *ops,
		       struct xport_listener *l, struct xport_params *xp, struct xport **ret,
		       const char *what)
{
	int r = chan_send(&c->chan, ok);

	if (r >= 0) {
		r = ops->accept(l, xp, ret);
		if (r < 0) {
			log_notice_errno(r, "%s (%s): %s lanes did not connect: %m", c->peer, c->id,
					 what);
			chan_send_error(&c->chan, PERR_TRANSPORT, "data lanes did not connect: %s",
					strerror(-r));
		}
	}
	ops->listener_close(l);
	explicit_bzero(xp->token, sizeof(xp->token));
	explicit_bzero(xp->seal_secret, sizeof(xp->seal_secret));
	return r;
}

/*
 * Sealed or clear data lanes, from the client's wish (OPEN's ENCRYPT and its
 * wish byte, or BENCH's), the "encryption" that applies (the module's, or
 * [global]'s for a bench; who names it) and the transport chosen. Where they
 * cannot agree the client hears why (PERR_ENCRYPTION, its exit 20).
 */
static int decide_sealing_for(struct conn *c, uint8_t wish, int encryption, const char *who,
			      const struct xport_ops *ops, bool *ret_seal)
{
	*ret_seal = false;
	if (encryption == ENCRYPTION_OFF) {
		if (wish == PROTO_ENCRYPT_REQUIRE) {
			return refuse(c, PERR_ENCRYPTION,
				      "%s does not encrypt data lanes (encryption = off): "
				      "copy with --no-encrypt",
				      who);
		}
		return 0;
	}
	if (!wish) {
		if (encryption == ENCRYPTION_REQUIRED) {
			return refuse(c, PERR_ENCRYPTION,
				      "%s requires encrypted data lanes (encryption = "
				      "required): %s",
				      who,
				      c->peer_caps & PROTO_CAP_ENCRYPT
					  ? "copy without --no-encrypt"
					  : "this client cannot encrypt them: upgrade it");
		}
		return 0;
	}
	/*
	 * verbs: sealed slots only where asked for or required. By default its
	 * lanes stay clear: sealing costs the CPU that RDMA saves, and RDMA
	 * fabrics are most often trusted.
	 */
	if (ops->kind != XPORT_KIND_TCP) {
		if (wish != PROTO_ENCRYPT_REQUIRE && encryption != ENCRYPTION_REQUIRED) {
			return 0;
		}
		if (!(c->peer_caps & PROTO_CAP_VERBS_SEAL)) {
			return refuse(c, PERR_ENCRYPTION,
				      "%s: this client cannot encrypt verbs data lanes: upgrade "
				      "it, or copy with --transport tcp",
				      who);
		}
	}
	*ret_seal = true;
	return 0;
}

/*
 * Sealed lanes' keys, from the TLS session: the tcp transport seals its
 * frames (xp), on verbs the engine seals each slot (ep). Both ends export
 * the same secret, bound to this transfer (its purpose and xp->token); they
 * never carry it.
 */
static int seal_keys(struct conn *c, const struct xport_ops *ops, struct xport_params *xp,
		     struct engine_params *ep, enum lane_seal_purpose purpose)
{
	uint8_t *secret = ops->kind == XPORT_KIND_TCP ? xp->seal_secret : ep->seal_secret;
	int r;

	if (ops->kind == XPORT_KIND_TCP) {
		xp->seal = true;
	} else {
		ep->seal_slots = true;
		ep->seal_tamper = xp->test_tamper;
	}
	r = lane_seal_export(c->tls, hello_local_caps() & c->peer_caps, purpose, xp->token,
			     sizeof(xp->token), &c->sealed_transfers, secret);
	if (r == -EKEYREJECTED) {
		return refuse(c, PERR_ENCRYPTION,
			      "this client cannot encrypt a second transfer on one connection "
			      "(its lane keys would repeat): upgrade it, or reconnect");
	}
	if (r < 0) {
		return refuse(c, PERR_INTERNAL, "no lane keys from the TLS session");
	}
	return 0;
}

static int decide_sealing(struct conn *c, const struct msg_open *o, const struct policy_grant *gr,
			  const struct xport_ops *ops, bool *ret_seal)
{
	char who[128];

	snprintf(who, sizeof(who), "module '%s'", gr->m->name);
	return decide_sealing_for(c, o->flags & PROTO_OPEN_ENCRYPT ? o->encrypt : 0, gr->encryption,
				  who, ops, ret_seal);
}

/*
 * "pool size" bounds what one session pins, descriptor chunks and the
 * rounding to whole pages included: fewer slots (or sender chunks) until it
 * fits, down to the engine's minimum of two.
 */
static void fit_pool_size(struct engine_params *ep, const struct xport_ops *ops, uint64_t pool_size)
{
	uint32_t *n = ep->role == ENGINE_SENDER ? &ep->pool_chunks : &ep->slots;

	while (*n > 2 && engine_pinned_bytes(ep, ops) > pool_size) {
		(*n)--;
	}
}

/*
 * The engine on a session's data path x, or a probe's (x NULL: a dry run that
 * looks at the destination, on the control channel alone). ep holds the
 * sizes and test faults; x is destroyed here.
 */
static int run_session_engine(struct conn *c, const struct msg_open *o,
			      const struct policy_grant *gr, int basefd, const char *rename_to,
			      struct get_source *pull_srcs, struct xport *x,
			      struct engine_params *ep_in)
{
	const struct daemon_config *cfg = c->cfg;
	struct engine_params ep = *ep_in;
	struct engine_limits limits = { 0 };
	struct engine_stats st;
	uint32_t code = 0;
	char err[512], skipped[120] = "", resumed[256] = "";
	int r;

	ep.role = pull_srcs ? ENGINE_SENDER : ENGINE_RECEIVER;
	if (pull_srcs) {
		get_source_engine(pull_srcs, &ep.source);
	}
	ep.chan = &c->chan;
	ep.x = x;
	ep.idle_timeout_ms = (int)cfg->idle_timeout_s * 1000;
	ep.peer_caps = c->peer_caps;
	ep.base_fd = basefd;
	ep.rename_to = rename_to && *rename_to ? rename_to : NULL;
	ep.open_flags = o->flags;
	/*
	 * --delete (a push's; a pull's probe carries the flag for the client's
	 * own pass, which a sender ignores); the client hears each removal.
	 */
	ep.max_delete = o->max_delete;
	ep.delete_tell_peer = true;
	/* The client's rules (its FILTER before this OPEN): what they exclude is kept. */
	if (c->have_filter) {
		ep.delete_keep = filter_protects;
		ep.delete_keep_ud = &c->filter;
	}
	ep.partial_max_age_s = cfg->partial_max_age_s;
	/* The module's metadata rule (policy.h): files belong to whoever the session runs as. */
	ep.keep_setid = gr->meta.keep_setid;
	ep.conceal = gr->conceal;
	ep.umask = gr->meta.umask;
	/* 'devices = yes': an existing block device by its name is written in place. */
	ep.write_devices = gr->devices;
	/* The module's limits count every push of this connection together. */
	limits.max_file_size = gr->max_file_size;
	limits.max_session_bytes = gr->session_bytes_left;
	ep.limits = &limits;
	ep.ev = (struct engine_events){ .file_ok = ev_file_ok,
					.file_failed = ev_file_failed,
					.progress = ev_progress,
					.file_skipped = ev_file_skipped,
					.notice = ev_notice,
					.deleted = ev_deleted,
					.file_resumed = ev_file_resumed,
					.planned = ev_planned,
					.ud = c };
	c->last_progress = 0;
	ep.stop = &stop_requested;
	r = engine_run(&ep, &st, &code, err, sizeof(err));
	explicit_bzero(ep.seal_secret, sizeof(ep.seal_secret));
	if (x) {
		policy_account(&c->used, gr, st.bytes_accepted);
		x->ops->destroy(x);
	}
	if (r < 0) {
		char esc[4 * sizeof(err)];

		/* err may quote the peer's ERROR text or a file name (THREATS.md G46). */
		log_notice("%s (%s): transfer failed: %s: %s", c->peer, c->id, proto_err_name(code),
			   log_escape(err, esc, sizeof(esc)));
		return r;
	}
	if (st.files_skipped || st.files_updated) {
		snprintf(skipped, sizeof(skipped), ", %llu updated, %llu unchanged",
			 (unsigned long long)st.files_updated,
			 (unsigned long long)st.files_skipped);
	}
	if (o->flags & PROTO_OPEN_DELETE) {
		size_t n = strlen(skipped);

		snprintf(skipped + n, sizeof(skipped) - n, ", %llu deleted%s",
			 (unsigned long long)st.files_deleted,
			 st.delete_suppressed ? " (failures: nothing deleted)"
			 : st.delete_withheld ? " (--max-delete reached)"
					      : "");
	}
	if (!x) {
		log_info("%s (%s): dry run of a %s %s: %llu would be copied, %llu failed%s",
			 c->peer, c->id, pull_srcs ? "pull from" : "push to", gr->m->name,
			 (unsigned long long)st.files_planned, (unsigned long long)st.files_failed,
			 skipped);
		return 0;
	}
	if (st.files_resumed) {
		snprintf(resumed, sizeof(resumed), ", %llu resumed (%llu bytes kept, not sent)",
			 (unsigned long long)st.files_resumed,
			 (unsigned long long)st.bytes_resumed);
	}
	if (st.bytes_zero) {
		size_t n = strlen(resumed);

		snprintf(resumed + n, sizeof(resumed) - n, ", %llu bytes as zeros",
			 (unsigned long long)st.bytes_zero);
	}
	if (st.bytes_unchanged) {
		size_t n = strlen(resumed);

		snprintf(resumed + n, sizeof(resumed) - n, ", %llu bytes unchanged (--delta)",
			 (unsigned long long)st.bytes_unchanged);
	}
	if (st.packed_slots) {
		log_debug("%s: %llu files travelled packed in %llu slots", c->peer,
			  (unsigned long long)st.files_packed, (unsigned long long)st.packed_slots);
	}
	if (st.uring_overflows) {
		log_debug("%s: io_uring's completion queue was full %llu times", c->peer,
			  (unsigned long long)st.uring_overflows);
	}
	log_info("%s (%s): %s %s done: %llu files, %llu bytes, %llu failed%s%s", c->peer, c->id,
		 pull_srcs ? "pull from" : "push to", gr->m->name, (unsigned long long)st.files_ok,
		 (unsigned long long)st.bytes, (unsigned long long)st.files_failed, skipped,
		 resumed);
	return 0;
}

/* Set up the data connection the client asked for, then run the engine. */
static int run_transfer_pinned(struct conn *c, const struct msg_open *o,
			       const struct policy_grant *gr, int basefd, const char *rename_to,
			       struct get_source *pull_srcs)
{
	const struct daemon_config *cfg = c->cfg;
	const struct xport_ops *ops = NULL;
	struct xport_listener *l = NULL;
	struct xport *x = NULL;
	struct xport_params xp = { 0 };
	struct msg ok = { .type = MSG_OPEN_OK };
	struct sockaddr_storage bind_addr = c->local;
	struct engine_params ep = { 0 };
	uint32_t chunk, slots;
	uint64_t pinned;
	uint16_t port;
	bool sealed = false;
	int r;

	chunk = MIN(MAX(o->chunk_size, POLICY_MIN_CHUNK), POLICY_MAX_CHUNK);
	slots = (uint32_t)MIN((uint64_t)o->slots, cfg->pool_size / chunk);
	slots = MAX(slots, 2u);
	/* The daemon sends a pull from its own pool and receives a push into its ring. */
	ep.role = pull_srcs ? ENGINE_SENDER : ENGINE_RECEIVER;
	ep.chunk_size = chunk;
	ep.slots = slots;
	if (pull_srcs) {
		ep.pool_chunks = (uint32_t)MAX(cfg->pool_size / chunk / 2, 2);
	}
	ep.faults = getenv("RDMACPD_TEST_FLIP_BYTE") ? ENGINE_FAULT_FLIP_BYTE : 0;
	ep.faults |= getenv("RDMACPD_TEST_COPY_SLOTS") ? ENGINE_FAULT_COPY_SLOTS : 0;
	ep.faults |= getenv("RDMACPD_TEST_SLOW_DISK") ? ENGINE_FAULT_SLOW_DISK : 0;
	ep.faults |= getenv("RDMACPD_TEST_NO_REPOST") ? ENGINE_FAULT_NO_REPOST : 0;
	ep.faults |= getenv("RDMACPD_TEST_SLOW_HASH") ? ENGINE_FAULT_SLOW_HASH : 0;
	ep.faults |= getenv("RDMACPD_TEST_READ_EAGAIN") ? ENGINE_FAULT_READ_EAGAIN : 0;
	ep.faults |= getenv("RDMACPD_TEST_SMALL_RING") ? ENGINE_FAULT_SMALL_RING : 0;
	if (getenv("RDMACPD_TEST_KILL_LANES")) {
		ep.faults |= ENGINE_FAULT_KILL_LANE;
		ep.test_kill_lanes = (unsigned)strtoul(getenv("RDMACPD_TEST_KILL_LANES"), NULL, 10);
	}
	if (RAND_bytes(xp.token, sizeof(xp.token)) != 1) {
		return refuse(c, PERR_INTERNAL, "no randomness for a session token");
	}
	net_set_port(&bind_addr, 0);
	r = transport_listen(c, o->transport, o->flags & PROTO_OPEN_WRITE_SEND, &bind_addr, &ops,
			     &l, &port, &xp.write_send);
	if (r < 0) {
		return r;
	}
	xport_test_hooks(&xp, "RDMACPD_TEST_LANE_TAMPER", "RDMACPD_TEST_LANE_TEE");
	ep.hash_threads = engine_hash_threads(cfg->hash_threads, ops->kind == XPORT_KIND_VERBS);
	r = decide_sealing(c, o, gr, ops, &sealed);
	if (r >= 0 && sealed) {
		r = seal_keys(c, ops, &xp, &ep, pull_srcs ? LANE_SEAL_PULL : LANE_SEAL_PUSH);
	}
	if (r < 0) {
		ops->listener_close(l);
		explicit_bzero(xp.seal_secret, sizeof(xp.seal_secret));
		explicit_bzero(ep.seal_secret, sizeof(ep.seal_secret));
		return r;
	}
	/* What the engine pins depends on the transport (slot copies where it cannot fence). */
	fit_pool_size(&ep, ops, cfg->pool_size);
	slots = ep.slots;
	xp.nlanes = MIN((unsigned)o->lanes, POLICY_MAX_LANES);
	xport_params_set_slots(&xp, slots);
	xp.timeout_ms = (int)cfg->handshake_timeout_s * 1000;
	lanes_from_peer(c, &xp);
	lanes_tos(gr->tos, &xp);
	/*
	 * Pinned memory counts against the daemon-wide budget: over it, "busy".
	 * Reserved exactly as the engine will size it, for either role.
	 */
	pinned = engine_pinned_bytes(&ep, ops);
	if (c->sessions && session_table_reserve(c->sessions, pinned) < 0) {
		ops->listener_close(l);
		explicit_bzero(xp.seal_secret, sizeof(xp.seal_secret));
		explicit_bzero(ep.seal_secret, sizeof(ep.seal_secret));
		return refuse(c, PERR_BUSY, "busy: memory budget in use, try again later");
	}
	ok.u.open_ok.transport = (uint8_t)ops->kind;
	ok.u.open_ok.lanes = (uint8_t)xp.nlanes;
	ok.u.open_ok.data_port = port;
	ok.u.open_ok.chunk_size = chunk;
	ok.u.open_ok.slots = slots;
	memcpy(ok.u.open_ok.token, xp.token, sizeof(xp.token));
	if (o->flags & PROTO_OPEN_ENCRYPT) {
		ok.u.open_ok.lanes_sealed = sealed ? PROTO_LANES_SEALED : PROTO_LANES_CLEAR;
	}
	offer_rails(c, ops, l, &c->local, &ok.u.open_ok);
	r = offer_lanes(c, &ok, ops, l, &xp, &x, "data");
	if (r < 0) {
		explicit_bzero(ep.seal_secret, sizeof(ep.seal_secret));
		return r;
	}
	log_info("%s (%s): %s %s: %u %s lanes%s, %s", c->peer, c->id,
		 pull_srcs ? "pull from" : "push to", gr->m->name, xp.nlanes, ops->name,
		 xp.write_send ? " (WRITE + SEND)" : "",
		 sealed ? "encrypted (AES-256-GCM)" : "in clear");
	if (ep.hash_threads > 0 && !ep.seal_slots) {
		log_debug("%s: %u hashing threads", c->peer, ep.hash_threads);
	}

	if (pull_srcs) {
		/* The client names what it wants once the lanes are up. */
		r = expand_get(c, gr, basefd, o->flags & PROTO_OPEN_RECURSIVE, pull_srcs);
		if (r < 0) {
			x->ops->destroy(x);
			explicit_bzero(ep.seal_secret, sizeof(ep.seal_secret));
			return r;
		}
	}
	r = run_session_engine(c, o, gr, basefd, rename_to, pull_srcs, x, &ep);
	explicit_bzero(ep.seal_secret, sizeof(ep.seal_secret));
	return r;
}

/* The client asked for an OPEN: is this peer allowed to do it on this module? */
static int run_transfer(struct conn *c, const struct msg_open *o, const struct policy_grant *gr,
			int basefd, const char *rename_to, struct get_source *pull_srcs)
{
	int r = run_transfer_pinned(c, o, gr, basefd, rename_to, pull_srcs);

	if (c->sessions) {
		session_table_release(c->sessions);
	}
	return r;
}

/* ---- rdmacp bench: memory to memory, no module, no file ---- */

/*
 * A root daemon runs a bench session as DAEMON_DEFAULT_USER, as it runs a
 * module without 'uid': the data path never needs root. A connection that
 * has switched to a module's user already stays that user.
 */
static int become_bench_user(struct conn *c)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	uint64_t kept = 0;
	char err[256];
	int r;

	if (c->switched || geteuid() != 0) {
		return 0;
	}
	if (getpwnam_r(DAEMON_DEFAULT_USER, &pw, buf, sizeof(buf), &res) != 0 || !res) {
		log_error("bench: no user %s to run it as", DAEMON_DEFAULT_USER);
		return refuse(c, PERR_INTERNAL, "bench is unavailable on this daemon");
	}
	r = privs_drop(pw.pw_uid, pw.pw_gid, serve_session_memlock(c->cfg), &kept, err,
		       sizeof(err));
	if (r < 0) {
		log_error("bench: cannot switch to %s: %s", DAEMON_DEFAULT_USER, err);
		refuse(c, PERR_INTERNAL, "bench is unavailable on this daemon");
		return r;
	}
	c->switched = true;
	c->uid = pw.pw_uid;
	c->gid = pw.pw_gid;
	return 0;
}

/*
 * The receiving end of rdmacp bench: the same policy, listener, memory
 * budget and engine as a push, with a ring that is checked and dropped.
 */
static int run_bench_pinned(struct conn *c, const struct msg_bench *b,
			    const struct policy_grant *gr)
{
	const struct daemon_config *cfg = c->cfg;
	const struct xport_ops *ops = NULL;
	struct xport_listener *l = NULL;
	struct xport *x = NULL;
	struct xport_params xp = { 0 };
	struct msg ok = { .type = MSG_OPEN_OK };
	struct sockaddr_storage bind_addr = c->local;
	struct engine_params ep = { 0 };
	struct engine_stats st;
	uint32_t code = 0;
	char err[512];
	uint16_t port;
	bool sealed = false;
	int r;

	ep.role = ENGINE_BENCH_RECEIVER;
	ep.chunk_size = MIN(MAX(b->chunk_size, POLICY_MIN_CHUNK), POLICY_MAX_CHUNK);
	ep.slots = MAX((uint32_t)MIN((uint64_t)b->slots, cfg->pool_size / ep.chunk_size), 2u);
	ep.bench_bytes = b->bytes;
	ep.bench_seed = b->seed;
	ep.faults = getenv("RDMACPD_TEST_FLIP_BYTE") ? ENGINE_FAULT_FLIP_BYTE : 0;
	if (RAND_bytes(xp.token, sizeof(xp.token)) != 1) {
		return refuse(c, PERR_INTERNAL, "no randomness for a session token");
	}
	net_set_port(&bind_addr, 0);
	/* BENCH has no flags: its verbs lanes are WRITE WITH IMMEDIATE only. */
	r = transport_listen(c, b->transport, false, &bind_addr, &ops, &l, &port, &xp.write_send);
	if (r < 0) {
		return r;
	}
	/* Sealed lanes as for a copy, under [global]'s "encryption" (a bench has no module). */
	r = decide_sealing_for(c, b->encrypt, gr->encryption, "this daemon", ops, &sealed);
	if (r >= 0 && sealed) {
		r = seal_keys(c, ops, &xp, &ep, LANE_SEAL_BENCH);
	}
	if (r < 0) {
		ops->listener_close(l);
		explicit_bzero(xp.seal_secret, sizeof(xp.seal_secret));
		explicit_bzero(ep.seal_secret, sizeof(ep.seal_secret));
		return r;
	}
	/* Sealed slots change what is pinned (their tags): sized once that is known. */
	fit_pool_size(&ep, ops, cfg->pool_size);
	xp.nlanes = MIN((unsigned)b->lanes, POLICY_MAX_LANES);
	xport_params_set_slots(&xp, ep.slots);
	xp.timeout_ms = (int)cfg->handshake_timeout_s * 1000;
	lanes_from_peer(c, &xp);
	lanes_tos(gr->tos, &xp);
	/* The pinned-memory budget every session shares: over it, "busy". */
	if (c->sessions && session_table_reserve(c->sessions, engine_pinned_bytes(&ep, ops)) < 0) {
		ops->listener_close(l);
		explicit_bzero(xp.seal_secret, sizeof(xp.seal_secret));
		explicit_bzero(ep.seal_secret, sizeof(ep.seal_secret));
		return refuse(c, PERR_BUSY, "busy: memory budget in use, try again later");
	}
	ok.u.open_ok.transport = (uint8_t)ops->kind;
	ok.u.open_ok.lanes = (uint8_t)xp.nlanes;
	ok.u.open_ok.data_port = port;
	ok.u.open_ok.chunk_size = ep.chunk_size;
	ok.u.open_ok.slots = ep.slots;
	memcpy(ok.u.open_ok.token, xp.token, sizeof(xp.token));
	if (b->encrypt) {
		ok.u.open_ok.lanes_sealed = sealed ? PROTO_LANES_SEALED : PROTO_LANES_CLEAR;
	}
	r = offer_lanes(c, &ok, ops, l, &xp, &x, "bench");
	if (r < 0) {
		explicit_bzero(ep.seal_secret, sizeof(ep.seal_secret));
		return r;
	}
	ep.chan = &c->chan;
	ep.x = x;
	ep.idle_timeout_ms = (int)cfg->idle_timeout_s * 1000;
	ep.peer_caps = c->peer_caps;
	ep.stop = &stop_requested;
	r = engine_run(&ep, &st, &code, err, sizeof(err));
	explicit_bzero(ep.seal_secret, sizeof(ep.seal_secret));
	x->ops->destroy(x);
	if (r < 0) {
		char esc[4 * sizeof(err)];

		log_notice("%s (%s): bench failed: %s: %s", c->peer, c->id, proto_err_name(code),
			   log_escape(err, esc, sizeof(esc)));
		return r;
	}
	log_info("%s (%s): bench done: %llu bytes checked over %u %s lanes in %.3f s%s", c->peer,
		 c->id, (unsigned long long)st.bytes, xp.nlanes, ops->name, st.data_seconds,
		 sealed ? ", encrypted (AES-256-GCM)" : "");
	return 0;
}

static int handle_bench(struct conn *c, const struct msg_bench *b)
{
	struct policy_request rq = { .op = POLICY_BENCH, .encrypt = b->encrypt };
	struct policy_grant gr;
	int r;

	/* Never to a peer that did not announce it: it could not have sent BENCH. */
	if (!(c->peer_caps & PROTO_CAP_BENCH)) {
		chan_send_error(&c->chan, PERR_PROTOCOL, "BENCH from a client without bench");
		return -EBADMSG;
	}
	if (b->encrypt && !(c->peer_caps & PROTO_CAP_BENCH_SEAL)) {
		chan_send_error(&c->chan, PERR_PROTOCOL,
				"BENCH asks for sealed lanes from a client without them");
		return -EBADMSG;
	}
	r = decide(c, &rq, &gr);
	if (r < 0) {
		return r;
	}
	r = become_bench_user(c);
	if (r < 0) {
		return r;
	}
	r = run_bench_pinned(c, b, &gr);
	if (c->sessions) {
		session_table_release(c->sessions);
	}
	return r;
}

/* A dry run gets every check a real transfer would, then END instead of a data path. */
static int accept_dry_run(struct conn *c)
{
	struct msg end = { .type = MSG_END };

	return chan_send(&c->chan, &end);
}

/*
 * A probe (proto_open_is_probe), after its END: the engine on the control
 * channel alone. It pins and reserves nothing.
 */
static int run_probe(struct conn *c, const struct msg_open *o, const struct policy_grant *gr,
		     int basefd, const char *rename_to, struct get_source *pull_srcs)
{
	struct engine_params ep = { 0 };

	return run_session_engine(c, o, gr, basefd, rename_to, pull_srcs, NULL, &ep);
}

/*
 * What a pull sends: the walk of the GET's paths, made as the engine (or the
 * dry run's listing) asks for entries, and capped by the module.
 */
struct get_source {
	struct conn *c;
	const struct policy_grant *gr;
	struct walk *w;
	uint64_t queued; /* top entries queued on w */
	/* Wildcard matches queued so far, sorted: each is sent once per GET. */
	char **globbed;
	size_t nglobbed;
	/* LIST with PROTO_LIST_SUMS: each regular file listed is hashed here. */
	struct filehasher *fh;
	/* LIST with attribute flags: a LIST_ATTRS record per entry of the batch. */
	struct list_attrs la;
	struct proto_entry_attrs *attrs; /* PROTO_MAX_BATCH of them */
};

static void pull_warning(void *ud, const char *path, const char *why)
{
	struct get_source *g = ud;
	char esc[1024];

	log_notice("%s (%s): pull: %s: %s", g->c->peer, g->c->id,
		   log_escape_short(path, esc, sizeof(esc)), why);
}

static int get_source_next(void *ud, const struct engine_src **ret, char *why, size_t whylen)
{
	struct get_source *g = ud;
	int r = walk_next(g->w, ret);

	if (r == -E2BIG) {
		snprintf(why, whylen,
			 "more than %u files in one session: module '%s' allows no more "
			 "('max files per session')",
			 g->gr->max_files, g->gr->m->name);
		return -EPERM;
	}
	return r;
}

static void get_source_engine(struct get_source *g, struct engine_source *ret)
{
	*ret = (struct engine_source){ .next = get_source_next, .ud = g };
}

/*
 * Has this GET named (path, name) already? The same path twice would only
 * send the same entries twice, which the client refuses as duplicates: it
 * is walked once. A path inside another one (data/a and data/a/b with -r)
 * is a different request, as with cp -r: its entries have other names and
 * other destinations, so it is kept; the per-session file cap bounds what
 * such overlaps can cost.
 */
static bool get_path_seen(char *const *paths, char *const *names, size_t n, const char *path,
			  const char *name)
{
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(paths[i], path) && !strcmp(names[i], name)) {
			return true;
		}
	}
	return false;
}

static void free_strings(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i]);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Was (path, name) queued by a wildcard of this GET already? Its name is its last component. */
static bool glob_seen(const struct get_source *g, const char *path, const char *name)
{
	const char *slash = strrchr(path, '/');

	return g->nglobbed > 0 && !strcmp(slash ? slash + 1 : path, name) &&
	       bsearch(&path, g->globbed, g->nglobbed, sizeof(*g->globbed), cmp_str);
}

/* Keep a pattern's queued matches (taken from gl; the others are NULL) for glob_seen. */
static int glob_keep(struct get_source *g, struct fsglob *gl)
{
	size_t n = 0;
	char **v;

	for (size_t i = 0; i < gl->n; i++) {
		if (gl->paths[i]) {
			gl->paths[n++] = gl->paths[i];
		}
	}
	gl->n = n;
	if (gl->n == 0) {
		return 0;
	}
	v = reallocarray(g->globbed, g->nglobbed + gl->n, sizeof(*v));
	if (!v) {
		return -ENOMEM;
	}
	memcpy(v + g->nglobbed, gl->paths, gl->n * sizeof(*v));
	g->globbed = v;
	g->nglobbed += gl->n;
	gl->n = 0;
	if (g->nglobbed > 1) {
		qsort(g->globbed, g->nglobbed, sizeof(*g->globbed), cmp_str);
	}
	return 0;
}

/* The walker's refusal of a path's top entry, as the client hears it. */
static int refuse_top(struct conn *c, int r, const char *esc)
{
	return refuse(c,
		      r == -ENOENT			   ? PERR_NOT_FOUND
		      : r == -EISDIR || r == -ENOTDIR	   ? PERR_BAD_PATH
		      : r == -ELOOP || r == -EXDEV	   ? PERR_BAD_PATH
		      : r == -EINVAL || r == -ENAMETOOLONG ? PERR_BAD_PATH
		      : r == -EACCES || r == -EPERM	   ? PERR_PERMISSION
							   : PERR_IO,
		      "'%s': %s", esc,
		      r == -EISDIR		   ? "is a directory (use -r)"
		      : r == -ELOOP || r == -EXDEV ? "symlink or escape refused"
						   : strerror(-r));
}

/*
 * fsglob_expand within the module's 'max files per session': at most
 * max_matches matches, and directory reading bounded by the same limit.
 * Refuses (the ERROR sent) when the pattern is bad or matches too much.
 */
static int expand_pattern(struct conn *c, const struct policy_grant *gr, int rootfd,
			  const char *pattern, const char *esc, uint64_t max_matches,
			  struct fsglob *ret)
{
	int r =
	    fsglob_expand(rootfd, pattern, max_matches, (uint64_t)gr->max_files * 4 + 4096, ret);

	if (r == -E2BIG) {
		return refuse(c, PERR_PERMISSION,
			      "'%s' matches or reads more entries than module '%s' allows "
			      "('max files per session' is %u)",
			      esc, gr->m->name, gr->max_files);
	}
	if (r < 0) {
		return refuse(c, r == -ENOMEM ? PERR_INTERNAL : PERR_BAD_PATH, "bad pattern '%s'",
			      esc);
	}
	return r;
}

/*
 * A GET path with wildcards: each match beneath the module (fsglob.h: no
 * symlink followed, no dotfile matched by a wildcard) is queued under its own
 * name, as a shell would have expanded it. Directories need -r; matching
 * nothing is NOT_FOUND. The matches count against 'max files per session'
 * before they are queued, and so does the reading of the directories.
 */
static int expand_glob(struct conn *c, int rootfd, const char *pattern, const char *esc,
		       bool recursive, struct get_source *g, char *const *seen_paths,
		       char *const *seen_names, size_t nseen)
{
	const struct policy_grant *gr = g->gr;
	uint64_t left = gr->max_files - MIN((uint64_t)gr->max_files, g->queued);
	struct fsglob gl = { 0 };
	size_t added = 0, dirs = 0;
	int r;

	if (left == 0) {
		return refuse(c, PERR_PERMISSION,
			      "more than %u files in one session: module '%s' allows no more "
			      "('max files per session')",
			      gr->max_files, gr->m->name);
	}
	r = expand_pattern(c, gr, rootfd, pattern, esc, left, &gl);
	if (r < 0) {
		return r;
	}
	if (gl.n == 0) {
		/* As a shell does: a pattern that matches nothing may be a name ("a[1].img"). */
		const char *slash = strrchr(pattern, '/');

		fsglob_free(&gl);
		r = walk_add_root(g->w, rootfd, pattern, slash ? slash + 1 : pattern, recursive);
		if (r == -ENOENT || r == -ENOTDIR) {
			return refuse(c, PERR_NOT_FOUND, "'%s': no match", esc);
		}
		g->queued += r == 0;
		return r < 0 ? refuse_top(c, r, esc) : 0;
	}
	for (size_t i = 0; i < gl.n && r >= 0; i++) {
		const char *slash = strrchr(gl.paths[i], '/');
		const char *name = slash ? slash + 1 : gl.paths[i];

		/* Named already (by a path or another wildcard of this GET): sent once. */
		if (get_path_seen(seen_paths, seen_names, nseen, gl.paths[i], name) ||
		    glob_seen(g, gl.paths[i], name)) {
			added++;
			continue;
		}
		/* A match is a path the client named: the same rules. */
		r = check_path(c, gr, rootfd, gl.paths[i]);
		if (r < 0) {
			break;
		}
		r = walk_add_root_flags(g->w, rootfd, gl.paths[i], name,
					(recursive ? WALK_RECURSIVE : 0) |
					    (gr->devices ? WALK_DEVICES : 0));
		if (r == -EISDIR) {
			/*
			 * Left out, so not "seen": named alone later, it is refused as a
			 * directory. Told to the client as a failed entry, as a push tells
			 * of a directory given without -r (exit 9), never dropped unsaid.
			 */
			dirs++;
			r = walk_add_failed_root(g->w, name, -EISDIR, "is a directory (use -r)");
			free(gl.paths[i]);
			gl.paths[i] = NULL;
		} else if (r == 0) {
			added++;
			g->queued++;
		} else {
			char esc2[PROTO_MAX_PATH * 4 + 1];

			r = refuse_top(c, r, log_escape(gl.paths[i], esc2, sizeof(esc2)));
		}
	}
	if (r >= 0 && glob_keep(g, &gl) < 0) {
		r = refuse(c, PERR_INTERNAL, "out of memory");
	}
	fsglob_free(&gl);
	if (r < 0) {
		return r;
	}
	if (added == 0 && dirs > 0) {
		return refuse(c, PERR_BAD_PATH, "'%s' matches only directories (use -r)", esc);
	}
	if (added == 0) {
		return refuse(c, PERR_NOT_FOUND, "'%s': no match", esc);
	}
	if (dirs > 0) {
		log_notice("%s (%s): '%s': %zu directories left out (no -r)", c->peer, c->id, esc,
			   dirs);
	}
	return 0;
}

/* A pull's GET: a malformed one is answered with ERROR. */
static int recv_request(struct conn *c, struct msg *ret)
{
	int r = chan_recv(&c->chan, ret, (int)c->cfg->idle_timeout_s * 1000);

	if (r < 0) {
		log_notice_errno(r, "%s (%s): waiting for GET: %m", c->peer, c->id);
		if (r != -ECONNRESET && r != -EPIPE) {
			char why[160];

			chan_send_error(&c->chan, chan_err_code(r), "%s",
					r == -ETIMEDOUT
					    ? "idle timeout"
					    : chan_recv_error(&c->chan, r, why, sizeof(why)));
		}
	}
	return r;
}

/*
 * The rules of a FILTER, kept for the OPEN that must follow it: each one
 * checked as the client's own parser checks it.
 */
static int take_filter(struct conn *c, const struct msg_filter *f)
{
	for (size_t i = 0; i < f->count; i++) {
		char esc[PROTO_MAX_PATH * 4 + 1];
		int r = filter_add(&c->filter, f->rules[i].action, f->rules[i].pattern);

		if (r == -ENOMEM) {
			return refuse(c, PERR_INTERNAL, "out of memory");
		}
		if (r < 0) {
			return refuse(c, PERR_PROTOCOL, "FILTER: bad rule '%s': %s",
				      log_escape(f->rules[i].pattern, esc, sizeof(esc)),
				      r == -E2BIG ? "too many rules" : strerror(-r));
		}
	}
	c->have_filter = true;
	log_debug("%s: FILTER: %zu rules for the next OPEN", c->peer, c->filter.n);
	return 0;
}

/*
 * Expand the client's GET beneath the module: every path resolved without
 * following symlinks, named after its last component (as scp does), each
 * distinct one queued once on the walker. Only the top entries are looked
 * at now; what lies below them is listed as it is sent.
 */
static int expand_get(struct conn *c, const struct policy_grant *gr, int rootfd, bool recursive,
		      struct get_source *g)
{
	char *seen_paths[PROTO_MAX_BATCH], *seen_names[PROTO_MAX_BATCH];
	size_t nseen = 0;
	struct msg in;
	int r;

	r = recv_request(c, &in);
	if (r < 0) {
		return r;
	}
	if (in.type != MSG_GET) {
		msg_clear(&in);
		return refuse(c, PERR_PROTOCOL, "expected GET");
	}
	walk_set_max_entries(g->w, gr->max_files);
	static_assert(PROTO_MAX_BATCH <= ARRAY_SIZE(seen_paths), "GET holds PROTO_MAX_BATCH paths");
	for (size_t i = 0; i < in.u.get.count && i < PROTO_MAX_BATCH; i++) {
		const char *rel = NULL;
		_cleanup_free_ char *trimmed = NULL, *path = strdup(in.u.get.paths[i]);
		const char *name;
		char esc[PROTO_MAX_PATH * 4 + 1], lastname[FSPATH_NAME_MAX + 1];
		char why[PROTO_MAX_PATH * 4 + 256];
		uint32_t code;
		bool contents;
		size_t n;

		if (!path) {
			r = -ENOMEM;
			break;
		}
		log_escape(path, esc, sizeof(esc));
		/* DIR/.: the directory's entries, dotfiles too, as cp -r DIR/. DEST; no wildcard. */
		contents = fspath_strip_contents_dot(path);
		if (contents && fsglob_has_magic(path)) {
			r = refuse(c, PERR_BAD_PATH, "'%s': a wildcard and /. together", esc);
			break;
		}
		/* In the OPEN's module, clean, no reserved name, no device unless exported. */
		r = policy_request_path(gr, rootfd, path, &rel, &code, why, sizeof(why));
		if (r < 0) {
			r = refuse(c, code, "%s", why);
			break;
		}
		trimmed = strdup(rel);
		if (!trimmed) {
			r = -ENOMEM;
			break;
		}
		for (n = strlen(trimmed); n > 0 && trimmed[n - 1] == '/'; n--) {
			trimmed[n - 1] = '\0';
		}
		if (n > 0 && fspath_validate(trimmed) < 0) {
			r = refuse(c, PERR_BAD_PATH, "bad path '%s'", esc);
			break;
		}
		/* Named after the last component of the path as the client wrote it. */
		if (fspath_last_component(path, lastname, sizeof(lastname)) < 0) {
			r = refuse(c, PERR_BAD_PATH, "bad path '%s'", esc);
			break;
		}
		name = contents ? "" : lastname;
		if (fsglob_has_magic(trimmed)) {
			r = expand_glob(c, rootfd, trimmed, esc, recursive, g, seen_paths,
					seen_names, nseen);
			if (r < 0) {
				break;
			}
			continue;
		}
		if (get_path_seen(seen_paths, seen_names, nseen, trimmed, name) ||
		    glob_seen(g, trimmed, name)) {
			log_debug("%s: GET names '%s' again: walked once", c->peer, esc);
			continue;
		}
		seen_names[nseen] = strdup(name);
		if (!seen_names[nseen]) {
			r = -ENOMEM;
			break;
		}
		seen_paths[nseen++] = TAKE_PTR(trimmed);
		r = walk_add_root_flags(g->w, rootfd, seen_paths[nseen - 1], name,
					(recursive ? WALK_RECURSIVE : 0) |
					    (gr->devices ? WALK_DEVICES : 0) |
					    (contents ? WALK_CONTENTS : 0));
		g->queued += r == 0;
		if (r < 0) {
			r = refuse(c,
				   r == -ENOENT			? PERR_NOT_FOUND
				   : r == -EISDIR		? PERR_BAD_PATH
				   : r == -ELOOP || r == -EXDEV ? PERR_BAD_PATH
								: PERR_IO,
				   "'%s': %s", esc,
				   r == -EISDIR			? "is a directory (use -r)"
				   : r == -ELOOP || r == -EXDEV ? "symlink or escape refused"
								: strerror(-r));
			break;
		}
	}
	free_strings(seen_paths, nseen);
	free_strings(seen_names, nseen);
	free_strings(g->globbed, g->nglobbed);
	free(g->globbed);
	g->globbed = NULL;
	g->nglobbed = 0;
	msg_clear(&in);
	return r < 0 ? r : 0;
}

/* Dry run of a pull: list what would be sent, in FILES batches, then END. */
/* A dry run tells of an entry it could not send as the transfer would. */
static int plan_entry_failed(struct get_source *g, const struct engine_src *e)
{
	struct msg m = { .type = MSG_ENTRY_FAILED };

	pull_warning(g, e->name, e->why);
	if (!(g->c->peer_caps & PROTO_CAP_ENTRY_FAILED)) {
		return 0;
	}
	m.u.entry_failed.status = PERR_IO;
	snprintf(m.u.entry_failed.name, sizeof(m.u.entry_failed.name), "%s", e->name);
	snprintf(m.u.entry_failed.text, sizeof(m.u.entry_failed.text), "%s", e->why);
	return chan_queue(&g->c->chan, &m);
}

/* Why a listed file has no digest, for SUMS. */
static uint32_t sum_status(int r)
{
	switch (r) {
	case -ESTALE:
		return PERR_SOURCE_CHANGED;
	case -EACCES:
	case -EPERM:
		return PERR_PERMISSION;
	case -ENOENT:
		return PERR_NOT_FOUND;
	default:
		return PERR_IO;
	}
}

/* The digest of a listed regular file, or why there is none. */
static void list_sum(struct get_source *g, const struct engine_src *e, uint32_t id,
		     struct proto_sum *ret)
{
	char esc[1024];
	int r;

	*ret = (struct proto_sum){ .id = id };
	r = filehasher_at(g->fh, e->dirfd, e->path, e->size, ret->hash);
	if (r < 0) {
		memset(ret->hash, 0, sizeof(ret->hash));
		ret->status = sum_status(r);
		log_notice("%s (%s): check: %s: %s", g->c->peer, g->c->id,
			   log_escape_short(e->name, esc, sizeof(esc)), strerror(-r));
	}
}

/*
 * A listed entry as FILES carries it; its owner only where this daemon
 * announces PROTO_CAP_LIST_OWNERS (a pull already tells it, a listing too).
 */
static struct proto_file listed_file(const struct engine_src *e, uint32_t id, bool owners,
				     char *name, char *link)
{
	return (struct proto_file){ .id = id,
				    .ftype = e->ftype,
				    .mode = e->mode,
				    .size = e->size,
				    .mtime_sec = e->mtime.tv_sec,
				    .mtime_nsec = (uint32_t)e->mtime.tv_nsec,
				    .uid = owners ? e->uid : 0,
				    .gid = owners ? e->gid : 0,
				    .name = name,
				    .link = link };
}

/* The attributes of a listed entry, or why they could not be read. */
static void list_attr(struct get_source *g, const struct engine_src *e, uint32_t id,
		      struct proto_entry_attrs *ret)
{
	char esc[1024];
	int r = list_attrs_entry(&g->la, e, id, ret);

	if (r < 0) {
		log_notice("%s (%s): check: %s: attributes: %s", g->c->peer, g->c->id,
			   log_escape_short(e->name, esc, sizeof(esc)), strerror(-r));
	}
}

/* A batch of n entries: FILES, then their LIST_ATTRS, then their regular files' SUMS. */
static int list_batch_send(struct get_source *g, struct proto_file *pf, size_t n,
			   struct proto_sum *sums, size_t nsums)
{
	struct msg m = { .type = MSG_FILES }, ma = { .type = MSG_LIST_ATTRS };
	struct msg ms = { .type = MSG_SUMS };
	int r;

	m.u.files.count = (uint16_t)n;
	m.u.files.files = pf;
	r = chan_queue(&g->c->chan, &m);
	if (r >= 0 && g->attrs) {
		ma.u.list_attrs.fields = g->la.fields;
		ma.u.list_attrs.count = (uint16_t)n;
		ma.u.list_attrs.ents = g->attrs;
		r = chan_queue(&g->c->chan, &ma);
	}
	if (r >= 0 && nsums > 0) {
		ms.u.sums.count = (uint16_t)nsums;
		ms.u.sums.sums = sums;
		r = chan_queue(&g->c->chan, &ms);
	}
	return r < 0 ? r : 1;
}

static int list_plan(struct get_source *g)
{
	struct conn *c = g->c;
	bool owners = hello_local_caps() & PROTO_CAP_LIST_OWNERS;
	struct proto_file pf[PROTO_MAX_BATCH];
	struct proto_sum sums[PROTO_MAX_BATCH];
	char *names[PROTO_MAX_BATCH], *links[PROTO_MAX_BATCH];
	struct msg end = { .type = MSG_END };
	char why[256] = "";
	uint64_t bytes = 0;
	uint32_t id = 0;
	int r;

	do {
		const struct engine_src *e;
		size_t n = 0, nsums = 0;

		/* Copies: the walker reuses an entry's strings for the next one. */
		while (n < PROTO_MAX_BATCH && (r = get_source_next(g, &e, why, sizeof(why))) > 0) {
			if (e->error) {
				r = plan_entry_failed(g, e);
				if (r < 0) {
					break;
				}
				continue;
			}
			if (e->name[0] == '\0') {
				continue; /* a listed directory itself: its entries are the answer */
			}
			bytes += e->size;
			names[n] = strdup(e->name);
			links[n] = e->link ? strdup(e->link) : NULL;
			pf[n] = listed_file(e, ++id, owners, names[n], links[n]);
			n++;
			if (!names[n - 1] || (e->link && !links[n - 1])) {
				r = -ENOMEM;
				break;
			}
			/* Hashed and read now: the entry's path is good until the next one. */
			if (g->fh && e->ftype == PROTO_FT_REG) {
				list_sum(g, e, id, &sums[nsums++]);
			}
			if (g->attrs) {
				list_attr(g, e, id, &g->attrs[n - 1]);
			}
		}
		if (r >= 0 && n > 0) {
			r = list_batch_send(g, pf, n, sums, nsums);
		}
		free_strings(names, n);
		free_strings(links, n);
	} while (r > 0);
	if (r == -EPERM && why[0]) {
		return refuse(c, PERR_PERMISSION, "%s", why);
	}
	if (r < 0) {
		return refuse(c, PERR_IO, "listing the sources: %s", strerror(-r));
	}
	end.u.end.files = id;
	end.u.end.bytes = bytes;
	return chan_send(&c->chan, &end);
}

uint64_t serve_session_memlock(const struct daemon_config *cfg)
{
	return cfg->memory_budget + (uint64_t)cfg->max_connections * POLICY_MEMLOCK_SLACK;
}

/*
 * Run as the module's user from now on (privs.h). A root daemon switches once,
 * at the first OPEN; a later OPEN for a module of another user is refused:
 * there is no way back. A daemon that is not root runs every session as
 * itself and refuses modules that want someone else.
 */
static int become_module_user(struct conn *c, const struct module *m)
{
	uint64_t kept = 0;
	char err[256];
	int r;

	if (c->switched) {
		if (c->uid == m->run_uid && c->gid == m->run_gid) {
			return 0;
		}
		return refuse(c, PERR_PERMISSION,
			      "module '%s' runs as another user than this connection's first "
			      "module: open a new connection for it",
			      m->name);
	}
	if (geteuid() != 0) {
		if (m->run_uid != geteuid() || m->run_gid != getegid()) {
			log_error(
			    "module %s: wants uid %u gid %u, but rdmacpd runs as uid %u gid %u "
			    "and is not root: remove 'uid'/'gid' or run rdmacpd as root",
			    m->name, (unsigned)m->run_uid, (unsigned)m->run_gid,
			    (unsigned)geteuid(), (unsigned)getegid());
			return refuse(c, PERR_PERMISSION, "module '%s' is unavailable", m->name);
		}
	} else {
		r = privs_drop(m->run_uid, m->run_gid, serve_session_memlock(c->cfg), &kept, err,
			       sizeof(err));
		if (r < 0) {
			/* Half switched is no state to serve anyone in: the session ends. */
			log_error("module %s: cannot switch to uid %u gid %u: %s", m->name,
				  (unsigned)m->run_uid, (unsigned)m->run_gid, err);
			refuse(c, PERR_INTERNAL, "module '%s' is unavailable", m->name);
			return r;
		}
		log_debug("%s: session runs as uid %u gid %u, capabilities %#llx", c->peer,
			  (unsigned)m->run_uid, (unsigned)m->run_gid, (unsigned long long)kept);
	}
	c->switched = true;
	c->uid = m->run_uid;
	c->gid = m->run_gid;
	return 0;
}

/*
 * The module directory, resolved with no symlink in the path, and only if it
 * is the directory the configuration was loaded with: whoever can write to a
 * parent could otherwise swap in a link to anywhere (or another directory).
 */
static int open_module_root(struct conn *c, const struct module *m, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	r = fspath_open_root(m->path, &fd);
	if (r < 0) {
		log_error("module %s: cannot open %s: %s", m->name, m->path,
			  r == -ELOOP ? "a symlink in the path (refused)" : strerror(-r));
		return refuse(c, r == -ELOOP ? PERR_PERMISSION : PERR_IO,
			      "module '%s' is unavailable", m->name);
	}
	if (fstat(fd, &st) < 0) {
		r = negerrno();
		log_error_errno(r, "module %s: %s: %m", m->name, m->path);
		return refuse(c, PERR_IO, "module '%s' is unavailable", m->name);
	}
	if (st.st_dev != m->root_dev || st.st_ino != m->root_ino) {
		log_error("module %s: %s is not the directory loaded from the configuration "
			  "(device/inode %llu/%llu, now %llu/%llu): refused; reload rdmacpd if "
			  "it was moved on purpose",
			  m->name, m->path, (unsigned long long)m->root_dev,
			  (unsigned long long)m->root_ino, (unsigned long long)st.st_dev,
			  (unsigned long long)st.st_ino);
		return refuse(c, PERR_PERMISSION, "module '%s' is unavailable", m->name);
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/*
 * Become the module's user, then open its root as that user: only for a
 * request the module policy granted (policy.h). This is the one way into a
 * module's files.
 */
static int enter_module(struct conn *c, const struct policy_grant *gr, int *ret_rootfd)
{
	int r;

	assert(policy_grant_valid(gr) && gr->m);
	r = become_module_user(c, gr->m);
	if (r < 0) {
		return r;
	}
	return open_module_root(c, gr->m, ret_rootfd);
}

/* OPEN's request to the module policy. */
static struct policy_request open_request(const struct msg_open *o)
{
	return (struct policy_request){
		.op = o->direction == PROTO_DIR_PULL ? POLICY_PULL : POLICY_PUSH,
		.path = o->path,
		.flags = o->flags,
	};
}

static int handle_open(struct conn *c, const struct msg_open *o)
{
	char esc[PROTO_MAX_PATH * 4 + 1];
	struct policy_request rq = open_request(o);
	struct policy_grant gr;
	_cleanup_close_ int rootfd = -1;
	struct push_dest dest = { .fd = -1 };
	int r;

	r = decide(c, &rq, &gr);
	if (r < 0) {
		return r;
	}
	log_escape(o->path, esc, sizeof(esc));
	r = enter_module(c, &gr, &rootfd);
	if (r < 0) {
		return r;
	}
	if (o->direction == PROTO_DIR_PULL) {
		struct get_source g = { .c = c, .gr = &gr };
		bool recursive = o->flags & PROTO_OPEN_RECURSIVE;

		r = walk_new(pull_warning, &g, &g.w);
		if (r < 0) {
			return refuse(c, PERR_INTERNAL, "out of memory");
		}
		/* The client's FILTER: every entry the walk makes is matched by its wire name. */
		walk_set_filter(g.w, c->have_filter ? &c->filter : NULL);
		if (proto_open_is_probe(o->flags)) {
			/* The client receives and decides: we offer as for a pull, send nothing. */
			r = accept_dry_run(c);
			if (r >= 0) {
				r = expand_get(c, &gr, rootfd, recursive, &g);
			}
			if (r >= 0) {
				r = run_probe(c, o, &gr, rootfd, NULL, &g);
			}
		} else if (o->flags & PROTO_OPEN_DRY_RUN) {
			r = accept_dry_run(c);
			if (r >= 0) {
				r = expand_get(c, &gr, rootfd, recursive, &g);
			}
			if (r >= 0) {
				r = list_plan(&g);
			}
		} else {
			r = run_transfer(c, o, &gr, rootfd, NULL, &g);
		}
		walk_free(g.w);
		return r;
	}
	/* A partial store holds the receiver's own files: no push goes in there. */
	r = check_path(c, &gr, -1, gr.rel);
	if (r < 0) {
		return r;
	}
	r = resolve_push_dest(rootfd, gr.rel, o->flags & PROTO_OPEN_DEST_IS_DIR,
			      !(o->flags & PROTO_OPEN_DRY_RUN), &dest);
	if (r < 0) {
		return refuse(c, r == -ENOENT ? PERR_NOT_FOUND : PERR_BAD_PATH,
			      "destination '%s': %s", esc,
			      r == -ELOOP || r == -EXDEV ? "symlink or escape refused"
			      : r == -ENOENT		 ? "its parent directory does not exist"
							 : strerror(-r));
	}
	if (o->flags & PROTO_OPEN_DRY_RUN) {
		r = accept_dry_run(c);
		/* A probe: we receive as we would, and create nothing (dest.fd < 0: not there). */
		if (r >= 0 && proto_open_is_probe(o->flags)) {
			r = run_probe(c, o, &gr, dest.fd, dest.rename_to, NULL);
		}
	} else {
		r = run_transfer(c, o, &gr, dest.fd, dest.rename_to, NULL);
	}
	if (dest.fd >= 0) {
		close(dest.fd);
	}
	return r;
}

/* `rdmacp ls HOST`: the modules this peer may use, in MODULES batches, then END. */
static int list_modules(struct conn *c)
{
	struct proto_module pm[PROTO_MAX_BATCH];
	struct msg mm = { .type = MSG_MODULES }, end = { .type = MSG_END };
	struct policy_peer peer = conn_peer(c);
	size_t n = 0;
	uint32_t shown = 0;
	int r = 0;

	/* A module this peer may not use is not named: its existence is not theirs to know. */
	for (size_t i = 0; i < c->cfg->nmodules && r >= 0; i++) {
		const struct module *m = &c->cfg->modules[i];
		uint32_t flags;

		if (!policy_module_visible(&peer, m, &flags)) {
			continue;
		}
		pm[n++] = (struct proto_module){
			.flags = flags,
			.name = (char *)m->name,
			.comment = (char *)m->comment,
		};
		shown++;
		if (n == PROTO_MAX_BATCH) {
			mm.u.modules.count = (uint16_t)n;
			mm.u.modules.mods = pm;
			r = chan_queue(&c->chan, &mm);
			n = 0;
		}
	}
	if (r >= 0 && n > 0) {
		mm.u.modules.count = (uint16_t)n;
		mm.u.modules.mods = pm;
		r = chan_queue(&c->chan, &mm);
	}
	end.u.end.files = shown;
	if (r >= 0) {
		r = chan_send(&c->chan, &end);
	}
	log_info("%s (%s): listed %u modules", c->peer, c->id, (unsigned)shown);
	return r;
}

/* A listing's wildcard: every match queued as a root under its path in the module. */
static int list_glob(struct conn *c, int rootfd, const char *pattern, const char *esc,
		     struct get_source *g)
{
	struct fsglob gl = { 0 };
	int r;

	r = expand_pattern(c, g->gr, rootfd, pattern, esc, g->gr->max_files, &gl);
	if (r < 0) {
		return r;
	}
	if (gl.n == 0) {
		/* As a shell does: a pattern that matches nothing may be a name ("a[1].img"). */
		fsglob_free(&gl);
		r = walk_add_root(g->w, rootfd, pattern, pattern, true);
		if (r == -ENOENT || r == -ENOTDIR) {
			return refuse(c, PERR_NOT_FOUND, "'%s': no match", esc);
		}
		return r < 0 ? refuse_top(c, r, esc) : 0;
	}
	for (size_t i = 0; i < gl.n && r >= 0; i++) {
		/* A match is a path the client named: the same rules. */
		r = check_path(c, g->gr, rootfd, gl.paths[i]);
		if (r < 0) {
			break;
		}
		r = walk_add_root(g->w, rootfd, gl.paths[i], gl.paths[i], true);
		if (r < 0) {
			char esc2[PROTO_MAX_PATH * 4 + 1];

			r = refuse_top(c, r, log_escape(gl.paths[i], esc2, sizeof(esc2)));
		}
	}
	fsglob_free(&gl);
	return r;
}

/*
 * What a check's LIST asks for besides the entries: a hasher for their
 * digests (SUMS), room for their attributes (LIST_ATTRS). Refuses (the
 * ERROR sent) when there is no memory for them.
 */
static int list_extras(struct conn *c, uint32_t flags, struct get_source *g,
		       struct filehasher **ret_fh, struct proto_entry_attrs **ret_attrs)
{
	int r;

	if (flags & PROTO_LIST_SUMS) {
		r = filehasher_new(ret_fh);
		if (r < 0) {
			return refuse(c, PERR_INTERNAL, "hashing: %s", strerror(-r));
		}
		g->fh = *ret_fh;
	}
	if (flags & PROTO_LIST_ATTR_FLAGS) {
		r = list_attrs_init(flags, &g->la);
		*ret_attrs = calloc(PROTO_MAX_BATCH, sizeof(**ret_attrs));
		if (r < 0 || !*ret_attrs) {
			return refuse(c, PERR_INTERNAL, "attributes: %s",
				      strerror(r < 0 ? -r : ENOMEM));
		}
		g->attrs = *ret_attrs;
	}
	return 0;
}

/*
 * `rdmacp ls HOST:MODULE/PATH`: exactly a pull's rules (allow, write only,
 * the module's user, no symlink followed, 'max files per session'), then the
 * pull dry run's FILES batches and END. A directory lists its entries, named
 * relative to it (with -r all below it); anything else lists itself.
 */
static int list_path(struct conn *c, const struct msg_list *l)
{
	struct policy_request rq = { .op = POLICY_LIST, .path = l->path, .flags = l->flags };
	struct policy_grant gr;
	char esc[PROTO_MAX_PATH * 4 + 1], lastname[FSPATH_NAME_MAX + 1] = "";
	_cleanup_close_ int rootfd = -1, dirfd = -1;
	_cleanup_free_ char *trimmed = NULL;
	bool recursive = l->flags & PROTO_LIST_RECURSIVE;
	struct get_source g = { .c = c };
	_cleanup_(filehasher_freep) struct filehasher *fh = NULL;
	_cleanup_free_ struct proto_entry_attrs *attrs = NULL;
	bool magic;
	size_t n;
	int r;

	log_escape(l->path, esc, sizeof(esc));
	/* A pull's rules, and SUMS only to a client that announced it understands them. */
	r = decide(c, &rq, &gr);
	if (r < 0) {
		return r;
	}
	r = enter_module(c, &gr, &rootfd);
	if (r < 0) {
		return r;
	}
	r = check_path(c, &gr, rootfd, gr.rel);
	if (r < 0) {
		return r;
	}
	trimmed = strdup(gr.rel);
	if (!trimmed) {
		return refuse(c, PERR_INTERNAL, "out of memory");
	}
	for (n = strlen(trimmed); n > 0 && trimmed[n - 1] == '/'; n--) {
		trimmed[n - 1] = '\0';
	}
	/* A wildcard lists its matches themselves (with -r, what is beneath them too). */
	magic = fsglob_has_magic(trimmed);
	r = magic ? -ENOTDIR : fspath_open_dir(rootfd, trimmed, &dirfd);
	if (r < 0 && r != -ENOTDIR && r != -ELOOP) {
		return refuse_top(c, r, esc);
	}
	if (r < 0 && fspath_last_component(trimmed, lastname, sizeof(lastname)) < 0) {
		return refuse(c, PERR_BAD_PATH, "bad path '%s'", esc);
	}
	g.gr = &gr;
	r = list_extras(c, l->flags, &g, &fh, &attrs);
	if (r < 0) {
		return r;
	}
	r = walk_new(pull_warning, &g, &g.w);
	if (r < 0) {
		return refuse(c, PERR_INTERNAL, "out of memory");
	}
	/* The listed directory itself is walked but not listed: it does not count. */
	walk_set_max_entries(g.w, (uint64_t)gr.max_files + (lastname[0] == '\0'));
	if (recursive) {
		walk_set_max_depth(g.w, UINT_MAX);
	} else {
		walk_set_max_depth(g.w, lastname[0] ? 0 : 1);
	}
	r = magic ? list_glob(c, rootfd, trimmed, esc, &g)
		  : walk_add_root(g.w, rootfd, trimmed, lastname, true);
	r = r < 0 ? (magic ? r : refuse_top(c, r, esc)) : list_plan(&g);
	if (r >= 0) {
		log_info("%s (%s): listed %s%s%s: %llu entries", c->peer, c->id, esc,
			 fh ? " with digests" : "", attrs ? " with attributes" : "",
			 (unsigned long long)(walk_count(g.w) - (lastname[0] == '\0')));
	}
	walk_free(g.w);
	return r;
}

/*
 * rdmacp finalize: join a split file's parts (ASSEMBLE, src/assemble.h), as
 * the module's user, beneath the module, where a push to a->path would
 * write; the module's rules for a push apply (not read only, owners only
 * where kept, 'max file size'). ASSEMBLED once the file is in place;
 * otherwise ERROR (ASSEMBLY for parts that are missing or not what their
 * digests say) and the session ends.
 */
static int handle_assemble(struct conn *c, const struct msg_assemble *a)
{
	struct policy_request rq = {
		.op = POLICY_ASSEMBLE, .path = a->path, .flags = a->flags, .bytes = a->size
	};
	struct policy_grant gr;
	struct msg done = { .type = MSG_ASSEMBLED };
	char esc[PROTO_MAX_PATH * 4 + 1], why[512], rel[PROTO_MAX_PATH + 1];
	_cleanup_close_ int rootfd = -1, destfd = -1;
	size_t len;
	uint32_t code;
	int r;

	if (!(c->peer_caps & PROTO_CAP_ASSEMBLE)) {
		return refuse(c, PERR_PROTOCOL, "ASSEMBLE from a client without the capability");
	}
	r = decide(c, &rq, &gr);
	if (r < 0) {
		return r;
	}
	log_escape(a->name, esc, sizeof(esc));
	/* The destination, the file's name and the staging directory: each a path it names. */
	r = check_path(c, &gr, -1, gr.rel);
	if (r >= 0) {
		r = check_path(c, &gr, -1, a->name);
	}
	if (r >= 0) {
		r = check_path(c, &gr, -1, a->staging);
	}
	if (r < 0) {
		return r;
	}
	r = enter_module(c, &gr, &rootfd);
	if (r < 0) {
		return r;
	}
	/* MOD/DIR/ names the directory as MOD/DIR does, as for a push. */
	snprintf(rel, sizeof(rel), "%s", gr.rel + strspn(gr.rel, "/"));
	for (len = strlen(rel); len > 0 && rel[len - 1] == '/'; len--) {
		rel[len - 1] = '\0';
	}
	r = fspath_open_dir(rootfd, rel, &destfd);
	if (r < 0) {
		log_escape(a->path, esc, sizeof(esc));
		return refuse(
		    c, r == -ENOENT ? PERR_NOT_FOUND : PERR_BAD_PATH, "destination '%s': %s", esc,
		    r == -ELOOP || r == -EXDEV ? "symlink or escape refused" : strerror(-r));
	}
	/* The module's metadata rule, as for a push (policy.h, meta_policy.h). */
	r = assemble_file(destfd, a, &gr.meta, &code, why, sizeof(why));
	if (r < 0) {
		return refuse(c, code, "assembling '%s': %s", esc, why);
	}
	policy_account(&c->used, &gr, a->size);
	log_info("%s (%s): assembled %s in module %s from %u parts, %llu bytes", c->peer, c->id,
		 esc, gr.m->name, a->count, (unsigned long long)a->size);
	done.u.assembled.size = a->size;
	return chan_send(&c->chan, &done);
}

static int handle_list(struct conn *c, const struct msg_list *l)
{
	return l->path[0] == '\0' ? list_modules(c) : list_path(c, l);
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

int serve_connection(const struct daemon_config *cfg, struct tls_ctx *tls,
		     struct session_table *sessions, int fd, const struct sockaddr *peer,
		     socklen_t peerlen)
{
	struct conn c = { .cfg = cfg, .sessions = sessions };
	struct msg_hello hello;
	int64_t idle_deadline;
	char err[512];
	/* TLS and HELLO together: one absolute deadline (THREATS.md G47). */
	int64_t deadline = now_ms() + (int64_t)cfg->handshake_timeout_s * 1000;
	int r;

	signal(SIGTERM, on_term);
	signal(SIGPIPE, SIG_IGN);
	net_addr_str(peer, peerlen, c.peer, sizeof(c.peer));
	if (peer && peerlen <= sizeof(c.peer_addr)) {
		memcpy(&c.peer_addr, peer, peerlen);
	}
	/* Still root until the first OPEN (become_module_user), but not all of root. */
	if (geteuid() == 0) {
		r = privs_limit_preauth(err, sizeof(err));
		if (r < 0) {
			log_error("%s: %s", c.peer, err);
			close(fd);
			return r;
		}
	}
	c.locallen = sizeof(c.local);
	if (getsockname(fd, (struct sockaddr *)&c.local, &c.locallen) < 0) {
		close(fd);
		return negerrno();
	}
	r = tls_accept(tls, fd, (int)cfg->handshake_timeout_s * 1000, &c.tls);
	if (r < 0) {
		log_notice("%s: TLS handshake failed: %s", c.peer, tls_last_error());
		return r;
	}
	describe_peer(&c);
	r = chan_init(&c.chan, c.tls, (int)cfg->idle_timeout_s * 1000);
	if (r < 0) {
		tls_conn_free(c.tls);
		return r;
	}
	/* A HELLO dripped byte by byte gets no more than what is left either. */
	c.chan.io_timeout_ms = remaining_ms(deadline);
	r = c.chan.io_timeout_ms > 0
		? hello_server(&c.chan, c.chan.io_timeout_ms, &hello, err, sizeof(err))
		: -ETIMEDOUT;
	c.chan.io_timeout_ms = (int)cfg->idle_timeout_s * 1000;
	if (r == -ETIMEDOUT) {
		snprintf(err, sizeof(err), "no HELLO within the handshake timeout (%u s)",
			 cfg->handshake_timeout_s);
	}
	if (r < 0) {
		log_notice("%s (%s): %s", c.peer, c.id, err);
		goto out;
	}
	c.peer_caps = hello.caps;
	/* From here this connection no longer counts against the pre-authentication caps. */
	if (sessions) {
		session_table_set_authenticated(sessions);
	}
	log_info("%s (%s): connected (%s, protocol %d)", c.peer, c.id,
		 log_escape(hello.software, err, sizeof(err)), r);

	/*
	 * Between transfers only a request restarts the idle clock: a client
	 * that just sends PINGs is idle, and goes at the idle timeout.
	 */
	idle_deadline = now_ms() + (int64_t)cfg->idle_timeout_s * 1000;
	for (;;) {
		struct msg m;

		r = chan_recv(&c.chan, &m, remaining_ms(idle_deadline));
		if (r < 0) {
			if (r == -EPIPE) {
				r = 0; /* close_notify between requests: a clean end */
				break;
			}
			log_notice_errno(r, "%s (%s): control channel: %m", c.peer, c.id);
			if (r != -ECONNRESET) {
				char why[160];

				chan_send_error(&c.chan, chan_err_code(r), "%s",
						r == -ETIMEDOUT ? "idle timeout"
								: chan_recv_error(&c.chan, r, why,
										  sizeof(why)));
			}
			goto out;
		}
		/* A FILTER is for the OPEN right after it, nothing else. */
		if (c.have_filter && m.type != MSG_OPEN) {
			log_notice("%s (%s): %s after FILTER", c.peer, c.id,
				   proto_type_name(m.type));
			chan_send_error(&c.chan, PERR_PROTOCOL,
					"FILTER must come right before OPEN");
			msg_clear(&m);
			r = -EBADMSG;
			goto out;
		}
		switch (m.type) {
		case MSG_FILTER:
			r = take_filter(&c, &m.u.filter);
			break;
		case MSG_OPEN:
			r = handle_open(&c, &m.u.open);
			filter_list_free(&c.filter);
			c.have_filter = false;
			idle_deadline = now_ms() + (int64_t)cfg->idle_timeout_s * 1000;
			break;
		case MSG_BENCH:
			r = handle_bench(&c, &m.u.bench);
			idle_deadline = now_ms() + (int64_t)cfg->idle_timeout_s * 1000;
			break;
		case MSG_ASSEMBLE:
			r = handle_assemble(&c, &m.u.assemble);
			idle_deadline = now_ms() + (int64_t)cfg->idle_timeout_s * 1000;
			break;
		case MSG_LIST:
			r = handle_list(&c, &m.u.list);
			idle_deadline = now_ms() + (int64_t)cfg->idle_timeout_s * 1000;
			break;
		case MSG_PING: {
			struct msg pong = { .type = MSG_PONG };
			pong.u.ping.nonce = m.u.ping.nonce;
			r = chan_send(&c.chan, &pong);
			break;
		}
		case MSG_BYE:
			msg_clear(&m);
			r = 0;
			goto out_clean;
		default:
			log_notice("%s (%s): unexpected %s", c.peer, c.id, proto_type_name(m.type));
			chan_send_error(&c.chan, PERR_PROTOCOL, "unexpected %s",
					proto_type_name(m.type));
			r = -EBADMSG;
			break;
		}
		msg_clear(&m);
		if (r < 0 || stop_requested) {
			goto out;
		}
	}
out_clean:
	tls_shutdown(c.tls, 1000);
	goto out_free;
out:
	/*
	 * Whatever ended the session, the client was told why (ERROR) where it
	 * can still hear it; now a TLS close_notify, never a bare EOF (issue 8
	 * item 11). Briefly: a client that won't answer it can't hold us.
	 */
	if (r != -ECONNRESET && r != -EPIPE) {
		tls_shutdown(c.tls, 200);
	}
out_free:
	filter_list_free(&c.filter);
	log_peak_memory(&c);
	chan_done(&c.chan);
	tls_conn_free(c.tls);
	return r;
}
