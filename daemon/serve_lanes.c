/* SPDX-License-Identifier: MIT */
/*
 * A session's data path, set up the same way for a copy and a bench
 * (serve_internal.h): the transport (verbs where the address's device can
 * take the client's path, tcp otherwise), its listener and daemon rails,
 * sealed or clear lanes and their keys, the ring within "pool size" and the
 * memory budget, then OPEN_OK and the lanes connected.
 */
#include "serve_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "hello.h"
#include "log.h"
#include "macro.h"
#include "mwfence.h"
#include "net.h"
#include "session_table.h"

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
		return serve_refuse(c, PERR_TRANSPORT, "%s; use --transport tcp", why);
	}
	return 0;
}

/*
 * A dual-stack listener (socket activation) sees an IPv4 client as
 * ::ffff:a.b.c.d; rdma_cm binds IPv4 addresses, so the device is found from
 * the plain IPv4 one (in v4).
 */
static const struct sockaddr *rdma_bind_addr(const struct sockaddr_storage *addr, socklen_t len,
					     struct sockaddr_storage *v4, socklen_t *ret_len)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)addr;
	struct sockaddr_in *s4 = (struct sockaddr_in *)v4;

	*ret_len = len;
	if (addr->ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		return (const struct sockaddr *)addr;
	}
	s4->sin_family = AF_INET;
	s4->sin_port = s6->sin6_port;
	memcpy(&s4->sin_addr, &s6->sin6_addr.s6_addr[12], 4);
	*ret_len = sizeof(*s4);
	return (const struct sockaddr *)v4;
}

/*
 * The verbs listener, where this address's RDMA device can take the
 * client's path, its listening ids with our class (tos, -1: none; iWARP
 * lanes take it from them). 1: listening; 0: not here (why says so); <0:
 * refused (said).
 */
static int listen_verbs(struct conn *c, unsigned want, bool client_send, int tos,
			const struct sockaddr_storage *addr, socklen_t addrlen,
			struct xport_listener **ret_l, uint16_t *ret_port, bool *ret_send,
			char *why, size_t whylen)
{
	const struct xport_ops *verbs = xport_ops_by_kind(XPORT_KIND_VERBS);
	struct sockaddr_storage v4 = { 0 };
	const struct sockaddr *bind;
	socklen_t bindlen;
	int r;

	if (!verbs) {
		snprintf(why, whylen, "built without the verbs transport");
		return 0;
	}
	if (xport_verbs_probe(why, whylen) <= 0) {
		return 0;
	}
	bind = rdma_bind_addr(addr, addrlen, &v4, &bindlen);
	r = verbs_path_check(c, want, client_send, bind, ret_send, why, whylen);
	if (r < 0) {
		return r;
	}
	r = r > 0 ? verbs->listen(bind, bindlen, tos, ret_l, ret_port) : -EOPNOTSUPP;
	if (r == 0) {
		return 1;
	}
	*ret_send = false;
	if (r != -EOPNOTSUPP) {
		snprintf(why, whylen, "rdma_cm listen on this address: %s", strerror(-r));
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
/* The address family of the lanes: the reached address's, IPv4 for a v4-mapped one. */
static int lanes_family(const struct sockaddr_storage *reached)
{
	const struct sockaddr_in6 *r6 = (const struct sockaddr_in6 *)reached;

	return reached->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&r6->sin6_addr)
		   ? AF_INET
		   : reached->ss_family;
}

/*
 * Rails only: the address the client reached cannot take verbs lanes (no
 * RDMA device there: a management address), so the first rail that can
 * takes the listener, for a client that knows lanes may skip the address
 * it reached. 1: listening there (ln->primary); 0: no; <0: refused (said).
 */
static int listen_rails_only(struct conn *c, const struct lanes_want *w, struct lanes *ln,
			     char *why, size_t whylen)
{
	int family = lanes_family(&c->local);

	if (!w->rails || c->cfg->nrails == 0 || !(c->peer_caps & PROTO_CAP_DAEMON_RAILS) ||
	    !(c->peer_caps & PROTO_CAP_RAILS_ONLY)) {
		return 0;
	}
	for (size_t i = 0; i < c->cfg->nrails; i++) {
		struct sockaddr_storage a = c->cfg->rails[i];
		char railwhy[256] = "";
		int r;

		if (a.ss_family != family) {
			continue;
		}
		net_set_port(&a, 0);
		r = listen_verbs(c, w->transport, w->write_send, w->tos, &a,
				 family == AF_INET ? sizeof(struct sockaddr_in)
						   : sizeof(struct sockaddr_in6),
				 &ln->l, &ln->port, &ln->xp.write_send, railwhy, sizeof(railwhy));
		if (r != 0) {
			if (r > 0) {
				ln->primary = a;
				log_info("%s (%s): no verbs lanes on the address reached (%s): "
					 "on the rails only",
					 c->peer, c->id, why);
			}
			return r;
		}
	}
	return 0;
}

static int transport_listen(struct conn *c, const struct lanes_want *w,
			    struct sockaddr_storage *addr, struct lanes *ln)
{
	unsigned want = w->transport;
	char why[512] = "";
	int r;

	ln->xp.write_send = false;
	if (want == XPORT_KIND_VERBS || want == 0) {
		r = listen_verbs(c, want, w->write_send, w->tos, addr, c->locallen, &ln->l,
				 &ln->port, &ln->xp.write_send, why, sizeof(why));
		if (r == 0) {
			r = listen_rails_only(c, w, ln, why, sizeof(why));
		}
		if (r < 0) {
			return r;
		}
		if (r > 0) {
			ln->ops = xport_ops_by_kind(XPORT_KIND_VERBS);
			return 0;
		}
		if (want == XPORT_KIND_VERBS) {
			return serve_refuse(c, PERR_TRANSPORT,
					    "no RDMA device on the daemon (%s); use "
					    "--transport tcp",
					    why);
		}
		log_debug("%s: auto transport: tcp (%s)", c->peer, why);
	}
	r = xport_tcp_ops.listen((struct sockaddr *)addr, c->locallen, w->tos, &ln->l, &ln->port);
	if (r < 0) {
		return serve_refuse(c, PERR_TRANSPORT, "cannot listen for data lanes: %s",
				    strerror(-r));
	}
	ln->ops = &xport_tcp_ops;
	return 0;
}

/* A rail's address and port as OPEN_OK carries it. */
static void rail_entry(const struct sockaddr_storage *a, int family, uint16_t port,
		       struct proto_rail *rl)
{
	memset(rl, 0, sizeof(*rl));
	if (family == AF_INET) {
		rl->family = PROTO_RAIL_INET;
		memcpy(rl->addr, &((const struct sockaddr_in *)a)->sin_addr, 4);
	} else {
		rl->family = PROTO_RAIL_INET6;
		memcpy(rl->addr, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	}
	rl->port = port;
}

/*
 * Daemon rails ('rails' addresses): verbs lanes are taken on those too, for
 * a client that announced PROTO_CAP_DAEMON_RAILS; ok lists them. Only
 * addresses of the lanes' family, other than the one the client reached;
 * one rdma_cm cannot listen on (no RDMA device there) is left out. Rails
 * only (ln->primary set): the listener's own rail comes first, and OPEN_OK
 * says that no lane goes to the address reached.
 */
static void offer_rails(const struct conn *c, const struct lanes *ln, struct msg_open_ok *ok)
{
	const struct sockaddr_storage *reached = &c->local, *primary = &ln->primary;
	const struct xport_ops *ops = ln->ops;
	int family = lanes_family(reached);

	if (ops->kind != XPORT_KIND_VERBS || !ops->listen_rail ||
	    !(c->peer_caps & PROTO_CAP_DAEMON_RAILS) || c->cfg->nrails == 0) {
		return;
	}
	if (primary->ss_family != AF_UNSPEC) {
		rail_entry(primary, family, ln->port, &ok->rails[ok->nrails++]);
		ok->rails_flags = PROTO_RAILS_UNREACHED;
	}
	for (size_t i = 0; i < c->cfg->nrails && ok->nrails < PROTO_MAX_RAILS; i++) {
		const struct sockaddr_storage *a = &c->cfg->rails[i];
		char text[INET6_ADDRSTRLEN + 8];
		uint16_t port = 0;
		int r;

		if (a->ss_family != family ||
		    xport_same_ip((const struct sockaddr *)a, (const struct sockaddr *)reached) ||
		    (primary->ss_family != AF_UNSPEC &&
		     xport_same_ip((const struct sockaddr *)a, (const struct sockaddr *)primary))) {
			continue;
		}
		(void)net_addr_str((const struct sockaddr *)a, sizeof(*a), text, sizeof(text));
		r = ops->listen_rail(ln->l, (const struct sockaddr *)a,
				     family == AF_INET ? sizeof(struct sockaddr_in)
						       : sizeof(struct sockaddr_in6),
				     &port);
		if (r < 0) {
			log_notice_errno(r, "%s (%s): rail %s left out: rdma_cm listen: %m",
					 c->peer, c->id, text);
			continue;
		}
		rail_entry(a, family, port, &ok->rails[ok->nrails]);
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
		if (r >= 0 && ops->kind == XPORT_KIND_VERBS && (*ret)->max_inline == 0) {
			log_notice("%s (%s): %s", c->peer, c->id, XPORT_NO_INLINE_NOTE);
		}
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
static int decide_sealing(struct conn *c, uint8_t wish, int encryption, const char *who,
			  const struct xport_ops *ops, bool *ret_seal)
{
	*ret_seal = false;
	if (encryption == ENCRYPTION_OFF) {
		if (wish == PROTO_ENCRYPT_REQUIRE) {
			return serve_refuse(c, PERR_ENCRYPTION,
					    "%s does not encrypt data lanes (encryption = off): "
					    "copy with --no-encrypt",
					    who);
		}
		return 0;
	}
	if (!wish) {
		if (encryption == ENCRYPTION_REQUIRED) {
			return serve_refuse(c, PERR_ENCRYPTION,
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
			return serve_refuse(c, PERR_ENCRYPTION,
					    "%s: this client cannot encrypt verbs data lanes: "
					    "upgrade it, or copy with --transport tcp",
					    who);
		}
	}
	*ret_seal = true;
	return 0;
}

/*
 * The AEAD of sealed tcp lanes: a client with PROTO_CAP_SEAL_SUITES gets
 * "cipher" (auto: the fastest here, measured once at start), others
 * AES-256-GCM. OPEN_OK names it, under TLS: the client cannot be talked
 * into another, and each suite's keys are its own. The same suite seals
 * tcp frames (the transport) and, with PROTO_CAP_SLOT_SUITES on both ends,
 * verbs slots (the engine).
 */
static enum lane_seal_suite seal_suite(const struct conn *c, enum xport_kind kind)
{
	uint64_t need =
	    PROTO_CAP_SEAL_SUITES | (kind == XPORT_KIND_VERBS ? PROTO_CAP_SLOT_SUITES : 0);

	if ((hello_local_caps() & c->peer_caps & need) != need) {
		return LANE_SEAL_AES256_GCM;
	}
	return c->cfg->seal_suite ? (enum lane_seal_suite)c->cfg->seal_suite
				  : lane_seal_suite_fastest();
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

	/* OPEN_OK's lanes byte names xp->seal_suite (lanes_offer), whoever seals. */
	xp->seal_suite = (uint8_t)seal_suite(c, ops->kind);
	if (ops->kind == XPORT_KIND_TCP) {
		xp->seal = true;
	} else {
		ep->seal_slots = true;
		ep->seal_suite = (enum lane_seal_suite)xp->seal_suite;
		ep->seal_tamper = xp->test_tamper;
	}
	r = lane_seal_export(c->tls, hello_local_caps() & c->peer_caps, purpose, xp->token,
			     sizeof(xp->token), &c->sealed_transfers, secret);
	if (r == -EKEYREJECTED) {
		return serve_refuse(c, PERR_ENCRYPTION,
				    "this client cannot encrypt a second transfer on one "
				    "connection (its lane keys would repeat): upgrade it, or "
				    "reconnect");
	}
	if (r < 0) {
		return serve_refuse(c, PERR_INTERNAL, "no lane keys from the TLS session");
	}
	return 0;
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

_Static_assert(POLICY_MIN_CHUNK == DAEMON_MIN_CHUNK, "'max slots' is checked against it");

/*
 * The ring a client asked for, within "max slots" and "pool size" over the
 * chunk size (two slots at least); OPEN_OK tells the client what it got.
 */
void serve_lanes_size(const struct daemon_config *cfg, uint32_t chunk_size, uint32_t slots,
		      struct engine_params *ep)
{
	uint64_t cap;

	ep->chunk_size = MIN(MAX(chunk_size, POLICY_MIN_CHUNK), POLICY_MAX_CHUNK);
	cap = MIN((uint64_t)cfg->max_slots, cfg->pool_size / ep->chunk_size);
	ep->slots = (uint32_t)MAX(MIN((uint64_t)slots, cap), 2u);
	if (ep->slots < slots) {
		log_debug("ring: %u slots of %u KiB, not the %u asked for ('%s')", ep->slots,
			  ep->chunk_size >> 10, slots,
			  cfg->max_slots <= cfg->pool_size / ep->chunk_size ? "max slots"
									    : "pool size");
	}
}

/* A data path given up before its lanes: the listener closed, its keys wiped. */
static void lanes_abandon(struct lanes *ln, struct engine_params *ep)
{
	ln->ops->listener_close(ln->l);
	explicit_bzero(ln->xp.seal_secret, sizeof(ln->xp.seal_secret));
	explicit_bzero(ep->seal_secret, sizeof(ep->seal_secret));
}

/* A session token, the listener, and sealed lanes' keys where the lanes are sealed. */
static int lanes_listen(struct conn *c, const struct lanes_want *w, struct engine_params *ep,
			struct lanes *ln)
{
	struct sockaddr_storage bind_addr = c->local;
	int r;

	if (RAND_bytes(ln->xp.token, sizeof(ln->xp.token)) != 1) {
		return serve_refuse(c, PERR_INTERNAL, "no randomness for a session token");
	}
	net_set_port(&bind_addr, 0);
	r = transport_listen(c, w, &bind_addr, ln);
	if (r < 0) {
		return r;
	}
	if (w->test_hooks) {
		xport_test_hooks(&ln->xp, "RDMACPD_TEST_LANE_TAMPER", "RDMACPD_TEST_LANE_TEE");
	}
	if (w->hash_threads) {
		ep->hash_threads =
		    engine_hash_threads(c->cfg->hash_threads, ln->ops->kind == XPORT_KIND_VERBS);
	}
	r = decide_sealing(c, w->encrypt, w->encryption, w->who, ln->ops, &ln->sealed);
	if (r >= 0 && ln->sealed) {
		r = seal_keys(c, ln->ops, &ln->xp, ep, w->purpose);
	}
	if (r < 0) {
		lanes_abandon(ln, ep);
		return r;
	}
	return 0;
}

/*
 * Busy for the memory budget. The client is told each time; the log says
 * the first refusal, and of its repeats (a client retrying under
 * --wait-busy) at most one line per REFUSE_LOG_INTERVAL_MS with their count
 * (here, or by the supervisor once the interval is over).
 */
static int refuse_busy(struct conn *c)
{
	static const char why[] = "busy: memory budget in use, try again later";
	unsigned counted = 0;

	if (session_table_note_busy(c->sessions, SESSION_BUSY_MEMORY, (uint64_t)now_ms(),
				    &counted)) {
		if (counted > 0) {
			log_notice("refused %u more transfer%s since the last such line: busy: "
				   "memory budget in use",
				   counted, counted == 1 ? "" : "s");
		}
		return serve_refuse(c, PERR_BUSY, "%s", why);
	}
	log_debug("%s (%s): refused: %s (repeated: counted)", c->peer, c->id, why);
	chan_send_error(&c->chan, proto_err_for_peer(PERR_BUSY, c->peer_caps), "%s", why);
	return -EPERM;
}

/*
 * The ring sized for the transport, the lanes' parameters, and the pinned
 * memory reserved against the daemon-wide budget: over it, "busy".
 */
static int lanes_reserve(struct conn *c, const struct lanes_want *w, struct engine_params *ep,
			 struct lanes *ln)
{
	/* What the engine pins depends on the transport (slot copies where it cannot fence). */
	fit_pool_size(ep, ln->ops, c->cfg->pool_size);
	ln->xp.nlanes = MIN(w->lanes, POLICY_MAX_LANES);
	xport_params_set_slots(&ln->xp, ep->slots);
	ln->xp.timeout_ms = (int)c->cfg->handshake_timeout_s * 1000;
	lanes_from_peer(c, &ln->xp);
	lanes_tos(w->tos, &ln->xp);
	/* Reserved exactly as the engine will size it, for either role. */
	if (c->sessions &&
	    session_table_reserve(c->sessions, engine_pinned_bytes(ep, ln->ops)) < 0) {
		lanes_abandon(ln, ep);
		return refuse_busy(c);
	}
	return 0;
}

/* OPEN_OK with what was set up, then the client's lanes. */
static int lanes_offer(struct conn *c, const struct lanes_want *w, struct engine_params *ep,
		       struct lanes *ln, struct xport **ret_x)
{
	struct msg ok = { .type = MSG_OPEN_OK };
	struct msg_open_ok *k = &ok.u.open_ok;
	int r;

	k->transport = (uint8_t)ln->ops->kind;
	k->lanes = (uint8_t)ln->xp.nlanes;
	k->data_port = ln->port;
	k->chunk_size = ep->chunk_size;
	k->slots = ep->slots;
	memcpy(k->token, ln->xp.token, sizeof(ln->xp.token));
	if (w->encrypt_asked) {
		k->lanes_sealed = !ln->sealed	      ? PROTO_LANES_CLEAR
				  : ln->xp.seal_suite ? lane_seal_suite_lanes(ln->xp.seal_suite)
						      : PROTO_LANES_SEALED;
	}
	if (w->rails) {
		offer_rails(c, ln, k);
	}
	/* The zero-copy fence, where both ends announced it (a copy's lanes, not bench's). */
	ln->xp.windows =
	    w->purpose != LANE_SEAL_BENCH &&
	    mwfence_agreed(hello_local_caps(), c->peer_caps, ln->ops->kind, ep->seal_slots);
	ep->windows = ln->xp.windows;
	r = offer_lanes(c, &ok, ln->ops, ln->l, &ln->xp, ret_x, w->what);
	if (r < 0) {
		explicit_bzero(ep->seal_secret, sizeof(ep->seal_secret));
	}
	return r;
}

const char *serve_lanes_cipher(const struct lanes *ln)
{
	return lane_seal_suite_title(ln->xp.seal_suite ? ln->xp.seal_suite : LANE_SEAL_AES256_GCM);
}

int serve_lanes_open(struct conn *c, const struct lanes_want *w, struct engine_params *ep,
		     struct lanes *ret, struct xport **ret_x)
{
	int r;

	*ret = (struct lanes){ 0 };
	r = lanes_listen(c, w, ep, ret);
	if (r >= 0) {
		r = lanes_reserve(c, w, ep, ret);
	}
	if (r >= 0) {
		r = lanes_offer(c, w, ep, ret, ret_x);
	}
	return r;
}
