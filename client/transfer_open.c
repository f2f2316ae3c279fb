/* SPDX-License-Identifier: MIT */
/*
 * Opening a transfer (transfer.h): the transport to ask for, what the
 * daemon must be able to do for the options given, OPEN and its answer,
 * then the data lanes OPEN_OK offers, sealed with keys from the TLS session.
 * Every failure maps to one exit code (src/exitcodes.h) and one line.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan.h"
#include "exitcodes.h"
#include "fanout.h"
#include "fit.h"
#include "hello.h"
#include "lane_seal.h"
#include "log.h"
#include "mwfence.h"
#include "net.h"
#include "rdmadev.h"
#include "tls.h"
#include "transfer.h"
#include "units.h"
#include "xport.h"

const char *transfer_transport_name(int kind)
{
	return kind == XPORT_KIND_VERBS ? "verbs" : "tcp";
}

uint32_t transfer_open_flags(const struct client_opts *o)
{
	return (o->recursive ? PROTO_OPEN_RECURSIVE : 0) | (o->preserve ? PROTO_OPEN_PRESERVE : 0) |
	       (o->owner ? PROTO_OPEN_OWNER : 0) | (o->dry_run ? PROTO_OPEN_DRY_RUN : 0) |
	       (o->hardlinks ? PROTO_OPEN_HARDLINKS : 0) | (o->xattrs ? PROTO_OPEN_XATTRS : 0) |
	       (o->acls ? PROTO_OPEN_ACLS : 0) | (o->delta ? PROTO_OPEN_DELTA : 0);
}

/*
 * The verbs path this host's lanes need (the --devices, else the device of
 * the control connection's own address), and whether the daemon can meet
 * it: 0 with s->write_send set for WRITE + SEND; 1 when verbs can't go here
 * (why says it; auto then asks for tcp); or an exit code (said). with_send:
 * the request can say WRITE + SEND (OPEN can, BENCH can't).
 */
static int pick_verbs_path(struct daemon_conn *s, bool with_send, char *why, size_t whylen)
{
	const char *force = getenv("RDMACP_TEST_WRITE_SEND");
	bool forced = force && *force;
	const char *devs[XPORT_MAX_LANES];
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	char dev[256];
	int path;

	for (unsigned i = 0; i < s->o->ndevices && i < XPORT_MAX_LANES; i++) {
		devs[i] = s->o->devices[i];
	}
	if (!s->tls || getsockname(tls_fd(s->tls), (struct sockaddr *)&local, &len) < 0) {
		local.ss_family = AF_UNSPEC;
	}
	path = xport_verbs_path((struct sockaddr *)&local, devs,
				MIN(s->o->ndevices, (unsigned)XPORT_MAX_LANES), forced, dev,
				sizeof(dev));
	/*
	 * No device found for our address (or rdma_cm could not say): as
	 * before, rdma_cm finds the route when the lanes connect.
	 */
	if (path < 0 && path != -EOPNOTSUPP && s->o->ndevices == 0) {
		path = forced ? XPORT_PATH_WRITE_SEND : XPORT_PATH_WRITE_IMM;
	}
	if (path < 0) {
		snprintf(why, whylen, "%.200s", dev);
		if (s->o->transport == XPORT_KIND_VERBS) {
			log_error("%s; use --transport tcp", why);
			return EXIT_NO_DEVICE;
		}
		return 1;
	}
	if (path == XPORT_PATH_WRITE_IMM) {
		return 0;
	}
	if (with_send && (s->hello.caps & PROTO_CAP_WRITE_SEND)) {
		s->write_send = true;
		return 0;
	}
	if (snprintf(why, whylen,
		     with_send
			 ? "%.100s: the daemon is too old for the WRITE + SEND verbs path "
			   "that this host's RDMA device needs (%.200s)"
			 : "%.100s: bench's verbs lanes need RDMA WRITE WITH IMMEDIATE, which "
			   "this host's RDMA device lacks (%.200s)",
		     s->rem->host, dev) < 0) {
		why[0] = '\0';
	}
	if (s->o->transport == XPORT_KIND_VERBS) {
		log_error("%s: %s", why,
			  with_send ? "upgrade it, or use --transport tcp" : "use --transport tcp");
		return with_send ? EXIT_VERSION : EXIT_NO_DEVICE;
	}
	return 1;
}

/*
 * -v: the transport auto chose, said once a run however many connections ask
 * (--wait-busy, a split file's parts), in words (plain); -vv: the detail
 * behind it (ibv_get_device_list's errno).
 */
static void say_auto_tcp(const struct client_opts *o, const char *plain, const char *detail)
{
	static bool said;

	log_debug("transport auto: tcp: %s", detail);
	if (o->verbose > 0 && !said) {
		log_info("transport: tcp (%s)", plain);
		said = true;
	}
}

/*
 * Which transport to ask for: verbs needs a device here that the daemon can
 * meet (else exit 13, or 12 for a daemon too old for its path); auto asks
 * the daemon to choose only when there is one, else tcp.
 */
static int pick_transport_for(struct daemon_conn *s, bool with_send, uint8_t *ret)
{
	char why[512];
	int n;

	s->write_send = false;
	if (s->o->transport == XPORT_KIND_TCP) {
		*ret = XPORT_KIND_TCP;
		return 0;
	}
	n = xport_verbs_probe(why, sizeof(why));
	if (n > 0) {
		for (unsigned i = 0; i < s->o->ndevices; i++) {
			if (rdmadev_spec_check(RDMADEV_SYSFS, s->o->devices[i], s->o->gid_index,
					       why, sizeof(why)) < 0) {
				log_error("%s", why);
				return EXIT_NO_DEVICE;
			}
		}
		n = pick_verbs_path(s, with_send, why, sizeof(why));
		if (n != 1) {
			*ret = (uint8_t)s->o->transport;
			return n;
		}
		say_auto_tcp(s->o, why, why);
		*ret = XPORT_KIND_TCP;
		return 0;
	}
	if (s->o->transport == XPORT_KIND_VERBS) {
		log_error("no RDMA device (%s); use --transport tcp", why);
		return EXIT_NO_DEVICE;
	}
	say_auto_tcp(s->o, n == -EOPNOTSUPP ? why : "no RDMA device on this host", why);
	*ret = XPORT_KIND_TCP;
	return 0;
}

/*
 * A pull's rules, as one FILTER right before its OPEN (the daemon's walk
 * applies them); open_transfer made sure the daemon knows FILTER.
 */
static int queue_filter(struct daemon_conn *s)
{
	const struct filter_list *f = &s->o->filters;
	_cleanup_free_ struct proto_filter_rule *rules = calloc(f->n, sizeof(*rules));
	struct msg m = { .type = MSG_FILTER };

	if (!rules) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < f->n; i++) {
		rules[i] = (struct proto_filter_rule){ .action = f->rules[i].action,
						       .pattern = f->rules[i].text };
	}
	m.u.filter.count = (uint16_t)f->n;
	m.u.filter.rules = rules;
	return chan_queue(&s->chan, &m);
}

int transfer_send_get(struct daemon_conn *s, char **paths, size_t n)
{
	struct msg m = { .type = MSG_GET };

	m.u.get.count = (uint16_t)n;
	m.u.get.paths = paths;
	return chan_send(&s->chan, &m);
}

/*
 * Never a full copy in silence: a daemon without skip levels would
 * overwrite (or refuse). Returns 0 or EXIT_VERSION (said).
 */
static int check_skip_level(const struct daemon_conn *s)
{
	if ((s->o->skip && !(s->hello.caps & PROTO_CAP_SKIP)) ||
	    ((s->o->skip & PROTO_OPEN_SKIP_CHECKSUM) && !(s->hello.caps & PROTO_CAP_CHECK))) {
		log_error("%s: the daemon is too old for --skip %s (it has no such skip level): "
			  "upgrade it, or copy without it",
			  s->rem->host,
			  s->o->skip & PROTO_OPEN_SKIP_CHECKSUM ? "checksum"
			  : s->o->skip & PROTO_OPEN_SKIP_QUICK	? "quick"
								: "exists");
		return EXIT_VERSION;
	}
	return 0;
}

/* The capabilities this OPEN needs of the daemon (besides the skip level's). */
static uint64_t caps_needed(const struct client_opts *o, uint8_t direction, uint32_t flags)
{
	bool filters = (direction == PROTO_DIR_PULL || o->mirror) && !filter_empty(&o->filters);

	return (flags & PROTO_OPEN_HARDLINKS ? PROTO_CAP_HARDLINKS : 0) |
	       (flags & (PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS) ? PROTO_CAP_XATTRS : 0) |
	       (filters ? PROTO_CAP_FILTER : 0) |
	       (proto_open_is_probe(flags) ? PROTO_CAP_PROBE : 0) |
	       (o->mirror ? PROTO_CAP_DELETE : 0) | (o->partial ? PROTO_CAP_PARTIAL : 0) |
	       (o->delta ? PROTO_CAP_DELTA : 0) |
	       (flags & PROTO_OPEN_ASSUME_ZERO ? PROTO_CAP_ASSUME_ZERO : 0);
}

/* What the daemon lacks, in the order they are checked: "HOST: the daemon is too old for ...". */
static const struct {
	uint64_t cap;
	const char *too_old_for;
} open_caps[] = {
	{ PROTO_CAP_HARDLINKS, "-H (it can't make hard links): upgrade it, or copy without -H" },
	{ PROTO_CAP_XATTRS, "-X and -A (it can't copy extended attributes or ACLs): upgrade it, "
			    "or copy without them" },
	/* Never more than asked for in silence: a daemon without FILTER would send everything. */
	{ PROTO_CAP_FILTER, "--include/--exclude on a pull or with --delete (it has no filters): "
			    "upgrade it, or copy without them" },
	/* A dry run that looks at the destination runs the engine with no data path. */
	{ PROTO_CAP_PROBE, "--dry-run with --skip or --delete (it can't say what a run would skip "
			   "or delete): upgrade it, or run without --dry-run" },
	/* A pull needs it too: the daemon hears our pass go on (DELETED) while it waits. */
	{ PROTO_CAP_DELETE, "--delete: upgrade it, or copy without --delete" },
	{ PROTO_CAP_PARTIAL,
	  "--partial (it cannot resume): upgrade it, or copy without --partial" },
	{ PROTO_CAP_DELTA, "--delta (it cannot send or take only changed chunks): upgrade it, or "
			   "copy without --delta" },
	/* An older daemon would write the zeros: slower, but the user asked for it not to. */
	{ PROTO_CAP_ASSUME_ZERO, "--assume-zero-target (it writes every zero extent): upgrade "
				 "it, or copy without --assume-zero-target" },
};

/* Whether the daemon can do what the options ask. Returns 0 or EXIT_VERSION (said). */
static int check_daemon_caps(const struct daemon_conn *s, uint8_t direction, uint32_t flags)
{
	uint64_t needed = caps_needed(s->o, direction, flags);
	int r = check_skip_level(s);

	if (r != 0) {
		return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(open_caps); i++) {
		if ((needed & open_caps[i].cap) && !(s->hello.caps & open_caps[i].cap)) {
			log_error("%s: the daemon is too old for %s", s->rem->host,
				  open_caps[i].too_old_for);
			return EXIT_VERSION;
		}
	}
	return 0;
}

/*
 * What OPEN asks for the lanes: the transport (and its verbs path), whether
 * sealed, and (a real run) the pool fitted to the memory limits. Returns 0
 * or an exit code (said).
 */
static int choose_lanes(struct daemon_conn *s, uint8_t direction, uint32_t *flags,
			uint8_t *transport)
{
	int r = pick_transport_for(s, true, transport);

	if (r == 0 && s->write_send) {
		*flags |= PROTO_OPEN_WRITE_SEND;
	}
	if (r == 0) {
		r = daemon_conn_encryption_wish(s, PROTO_CAP_ENCRYPT, transport);
		if (s->encrypt_wish) {
			*flags |= PROTO_OPEN_ENCRYPT;
		}
	}
	if (r != 0) {
		return r;
	}
	client_fit_link(s, *transport);
	if (!(*flags & PROTO_OPEN_DRY_RUN)) {
		r = client_fit(s->o, direction, transport, &s->fit);
		if (r != 0) {
			return r;
		}
		s->have_fit = true;
	}
	return 0;
}

static void fill_open(const struct daemon_conn *s, uint8_t direction, uint32_t flags,
		      const char *path, struct msg_open *open)
{
	open->direction = direction;
	open->lanes = (uint8_t)s->o->lanes;
	open->flags = flags;
	open->chunk_size = s->o->chunk_size;
	open->slots = s->o->slots;
	open->max_delete = s->o->max_delete;
	open->encrypt = s->encrypt_wish;
	snprintf(open->path, sizeof(open->path), "%s", path);
	log_debug("OPEN %s %s: transport %s, %u lanes, chunk %u, %u slots, flags %#x",
		  direction == PROTO_DIR_PUSH ? "push to" : "pull from", path,
		  open->transport ? transfer_transport_name(open->transport) : "auto", open->lanes,
		  open->chunk_size, open->slots, flags);
}

/* OPEN (a pull's FILTER before it) and its answer in ret. Returns 0 or an exit code (said). */
static int send_open(struct daemon_conn *s, uint8_t direction, const struct msg *m, struct msg *ret)
{
	int r = 0;

	/* A push's rules go too when the daemon mirrors: what they exclude it must keep. */
	if ((direction == PROTO_DIR_PULL || s->o->mirror) && !filter_empty(&s->o->filters)) {
		r = queue_filter(s);
	}
	/* A relayed push: the chain right before OPEN (its own exit code, said). */
	if (r >= 0 && s->fanout) {
		int rc = fanout_send_relay(s, s->fanout);

		if (rc != 0) {
			return rc;
		}
	}
	if (r >= 0) {
		r = chan_send(&s->chan, m);
	}
	if (r >= 0) {
		r = chan_recv(&s->chan, ret, s->o->idle_timeout_s * 1000);
	}
	if (r < 0) {
		log_error("%s: control channel: %s", s->rem->host,
			  r == -EPIPE || r == -ECONNRESET ? "connection closed" : strerror(-r));
		return r == -EPIPE || r == -ECONNRESET ? EXIT_CONNECT : EXIT_PROTOCOL;
	}
	return 0;
}

/*
 * The daemon has no module for the path asked (text: its words): which one,
 * and where the list of them is, as "rdmacp ls HOST" shows it.
 */
static int no_module(const struct daemon_conn *s, const char *text)
{
	const char *host = s->rem->host;
	bool v6 = strchr(host, ':') != NULL;
	char esc[1024], hesc[600], mesc[300];

	log_escape(host, hesc, sizeof(hesc));
	if (s->rem->path[0] == '\0') {
		log_error("%s: no module given: name one, as in %s%s%s:MODULE/PATH", hesc,
			  v6 ? "[" : "", hesc, v6 ? "]" : "");
	} else {
		char module[sizeof(s->rem->path)];

		/* Its first component: no module is a prefix of the path (nested ones included). */
		snprintf(module, sizeof(module), "%.*s", (int)strcspn(s->rem->path, "/"),
			 s->rem->path);
		log_debug("%s: %s", hesc, log_escape(text, esc, sizeof(esc)));
		log_error("%s: no module '%s' (for '%s')", hesc,
			  log_escape_short(module, mesc, sizeof(mesc)),
			  log_escape_short(s->rem->path, esc, sizeof(esc)));
	}
	log_error("'rdmacp ls %s%s%s' lists the modules this daemon offers you", v6 ? "[" : "",
		  hesc, v6 ? "]" : "");
	return exit_for_perr(PERR_NO_MODULE);
}

/*
 * The answer to OPEN: OPEN_OK (END for a dry run), else the exit code for
 * the daemon's ERROR (said; a busy one kept quiet with --wait-busy).
 * transport: what OPEN asked for.
 */
static int open_reply(struct daemon_conn *s, uint32_t flags, uint8_t transport, struct msg *ret)
{
	char esc[1024];
	int r;

	if (ret->type == MSG_ERROR && ret->u.error.code == PERR_BUSY) {
		/* The memory budget in use: --wait-busy asks again. */
		daemon_conn_busy(s, "%s: %s", s->rem->host,
				 log_escape(ret->u.error.text, esc, sizeof(esc)));
		msg_clear(ret);
		return exit_for_perr(PERR_BUSY);
	}
	if (ret->type == MSG_ERROR && ret->u.error.code == PERR_NO_MODULE) {
		return no_module(s, ret->u.error.text);
	}
	if (ret->type == MSG_ERROR) {
		log_error("%s: %s", s->rem->host, log_escape(ret->u.error.text, esc, sizeof(esc)));
		if (ret->u.error.code == PERR_TRANSPORT && transport == XPORT_KIND_VERBS) {
			return EXIT_NO_DEVICE;
		}
		return exit_for_perr(ret->u.error.code);
	}
	/* A dry run is answered with END (accepted, nothing to connect). */
	if (ret->type == (flags & PROTO_OPEN_DRY_RUN ? MSG_END : MSG_OPEN_OK)) {
		if (ret->type == MSG_OPEN_OK) {
			log_debug(
			    "OPEN_OK: transport %s, %u lanes, chunk %u, %u slots, data port %u",
			    transfer_transport_name(ret->u.open_ok.transport), ret->u.open_ok.lanes,
			    ret->u.open_ok.chunk_size, ret->u.open_ok.slots,
			    ret->u.open_ok.data_port);
			r = daemon_conn_check_lanes(s, &ret->u.open_ok);
			if (r != 0) {
				msg_clear(ret);
			}
			return r;
		}
		return 0;
	}
	log_error("%s: protocol error: unexpected %s", s->rem->host, proto_type_name(ret->type));
	msg_clear(ret);
	return EXIT_PROTOCOL;
}

static int open_transfer(struct daemon_conn *s, uint8_t direction, uint32_t flags, const char *path,
			 struct msg *ret)
{
	struct msg m = { .type = MSG_OPEN };
	int r = check_daemon_caps(s, direction, flags);

	if (r == 0) {
		r = choose_lanes(s, direction, &flags, &m.u.open.transport);
	}
	if (r != 0) {
		return r;
	}
	fill_open(s, direction, flags, path, &m.u.open);
	r = send_open(s, direction, &m, ret);
	if (r != 0) {
		return r;
	}
	return open_reply(s, flags, m.u.open.transport, ret);
}

/* OPEN as a step of daemon_conn_open_waiting: a busy answer is asked again. */
struct open_args {
	uint8_t direction;
	uint32_t flags;
	const char *path;
	struct msg *reply;
};

static int open_step(struct daemon_conn *s, void *ud)
{
	struct open_args *a = ud;

	return open_transfer(s, a->direction, a->flags, a->path, a->reply);
}

int transfer_connect_open(struct daemon_conn *s, uint8_t direction, uint32_t flags,
			  const char *path, struct msg *reply)
{
	struct open_args a = { direction, flags, path, reply };

	return daemon_conn_open_waiting(s, open_step, &a, &transfer_interrupted);
}

/*
 * The keys of sealed lanes, from the TLS session and bound to this transfer
 * (purpose, OPEN_OK's token): frames (the tcp transport) or slots (ep).
 */
static int seal_keys(struct daemon_conn *s, const struct msg_open_ok *ok,
		     enum lane_seal_purpose purpose, uint8_t secret[LANE_SEAL_SECRET_LEN])
{
	int r = lane_seal_export(s->tls, hello_local_caps() & s->hello.caps, purpose, ok->token,
				 sizeof(ok->token), &s->sealed_transfers, secret);

	if (r == -EKEYREJECTED) {
		/* rdmacp opens a connection per transfer: this guards a change that reuses one. */
		log_error("%s: the daemon is too old for a second encrypted transfer on one "
			  "connection (its lane keys would repeat): upgrade it",
			  s->rem->host);
		return EXIT_VERSION;
	}
	if (r < 0) {
		log_error_errno(r, "lane keys from the TLS session: %m");
		return EXIT_TRANSPORT;
	}
	return 0;
}

/* The lanes' count, slots, timeout and token (OPEN_OK's), and the tests' hooks. */
static void lane_params(const struct daemon_conn *s, const struct msg_open_ok *ok,
			struct xport_params *xp)
{
	xp->nlanes = ok->lanes;
	xp->write_send = ok->transport == XPORT_KIND_VERBS && s->write_send;
	xport_params_set_slots(xp, ok->slots);
	xp->timeout_ms = s->o->connect_timeout_s * 1000;
	memcpy(xp->token, ok->token, sizeof(xp->token));
	xport_test_hooks(xp, "RDMACP_TEST_LANE_TAMPER", "RDMACP_TEST_LANE_TEE");
	if (getenv("RDMACP_TEST_QP_FATAL")) {
		xp->test_qp_fatal = 1 + (unsigned)strtoul(getenv("RDMACP_TEST_QP_FATAL"), NULL, 10);
	}
}

/* Where the lanes go and how: the devices here, the daemon's rails, polling, traffic class. */
static void lane_routes(const struct daemon_conn *s, const struct msg_open_ok *ok,
			struct xport_params *xp)
{
	for (unsigned i = 0; i < s->o->ndevices; i++) {
		xp->devices[xp->ndevices++] = s->o->devices[i];
	}
	/* Daemon rails (checked in daemon_conn_check_lanes): lane i to address i % (1 + n). */
	for (unsigned i = 0; i < ok->nrails && i < PROTO_MAX_RAILS; i++) {
		net_rail_addr(&ok->rails[i], &xp->rails[xp->nrails++]);
	}
	xp->rails_only = xp->nrails && (ok->rails_flags & PROTO_RAILS_UNREACHED);
	if (xp->nrails && s->o->verbose > 0) {
		log_info("daemon rails: lanes over %u daemon addresses%s",
			 xp->nrails + !xp->rails_only,
			 xp->rails_only ? ", none on the address reached" : "");
	}
	xp->gid_index_set = s->o->gid_index >= 0;
	xp->gid_index = (uint16_t)MAX(s->o->gid_index, 0);
	xp->roce_version = (uint8_t)s->o->roce_version;
	xp->busy_poll = s->o->busy_poll;
	xp->tos_set = s->o->tos >= 0;
	xp->tos = (uint8_t)MAX(s->o->tos, 0);
	xp->ack_timeout_set = s->o->ack_timeout >= 0;
	xp->ack_timeout = (uint8_t)MAX(s->o->ack_timeout, 0);
}

/*
 * Sealed lanes take their keys from the TLS session: the tcp transport
 * seals its frames (xp), on verbs the engine seals each slot (ep).
 */
static int lane_sealing(struct daemon_conn *s, const struct msg_open_ok *ok,
			enum lane_seal_purpose purpose, struct xport_params *xp,
			struct engine_params *ep)
{
	bool frames = ok->transport == XPORT_KIND_TCP;
	int r;

	if (!proto_lanes_sealed(ok->lanes_sealed)) {
		return 0;
	}
	xp->seal = frames;
	/* The suite OPEN_OK names (daemon_conn_check_lanes let it through): frames' or slots'. */
	xp->seal_suite = (uint8_t)lane_seal_lanes_suite(ok->lanes_sealed);
	ep->seal_slots = !frames;
	ep->seal_suite = frames ? 0 : lane_seal_lanes_suite(ok->lanes_sealed);
	ep->seal_tamper = frames ? 0 : xp->test_tamper;
	r = seal_keys(s, ok, purpose, frames ? xp->seal_secret : ep->seal_secret);
	if (r != 0) {
		explicit_bzero(ep->seal_secret, sizeof(ep->seal_secret));
	}
	return r;
}

/*
 * -v: the ring the daemon granted, and why when it is smaller than asked:
 * its "max slots", or its "pool size" over the chunk size.
 */
static void say_ring(const struct daemon_conn *s, const struct msg_open_ok *ok)
{
	char chunk[32];

	if (s->o->verbose <= 0) {
		return;
	}
	units_format_bytes(ok->chunk_size, chunk, sizeof(chunk));
	if (ok->slots < s->o->slots) {
		log_info("ring: %u slots of %s (asked for %u: the daemon's 'max slots' or 'pool "
			 "size' allows %u)",
			 ok->slots, chunk, s->o->slots, ok->slots);
	} else {
		log_info("ring: %u slots of %s", ok->slots, chunk);
	}
}

/* The data lanes OPEN_OK offers, sealed where it says so. */
static int connect_data(struct daemon_conn *s, const struct msg_open_ok *ok,
			enum lane_seal_purpose purpose, struct engine_params *ep,
			struct xport **ret)
{
	const struct xport_ops *ops = xport_ops_by_kind(ok->transport);
	struct xport_params xp = { 0 };
	char why[256] = "";
	struct sockaddr_storage addr = s->peer;
	int r;

	if (!ops) {
		log_error("daemon chose a transport this build lacks");
		return EXIT_TRANSPORT;
	}
	if (ok->lanes > s->o->lanes || ok->chunk_size > s->o->chunk_size ||
	    ok->slots > s->o->slots) {
		log_error("daemon offered parameters beyond what we asked for");
		return EXIT_PROTOCOL;
	}
	say_ring(s, ok);
	lane_params(s, ok, &xp);
	r = lane_sealing(s, ok, purpose, &xp, ep);
	if (r != 0) {
		return r;
	}
	lane_routes(s, ok, &xp);
	/* The zero-copy fence, where both ends announced it (a copy's lanes, not bench's). */
	xp.windows = purpose != LANE_SEAL_BENCH &&
		     mwfence_agreed(hello_local_caps(), s->hello.caps, ops->kind, ep->seal_slots);
	ep->windows = s->windows = xp.windows;
	net_set_port(&addr, ok->data_port);
	xp.error_buf = why;
	xp.error_len = sizeof(why);
	r = ops->connect((struct sockaddr *)&addr, s->peerlen, &xp, ret);
	explicit_bzero(xp.token, sizeof(xp.token));
	explicit_bzero(xp.seal_secret, sizeof(xp.seal_secret));
	if (r < 0) {
		explicit_bzero(ep->seal_secret, sizeof(ep->seal_secret));
		log_error_errno(r, "data connection (%s, %u lanes, port %u): %m%s%s", ops->name,
				xp.nlanes, ok->data_port, why[0] ? ": " : "", why);
		return EXIT_TRANSPORT;
	}
	if (ops->kind == XPORT_KIND_VERBS && (*ret)->max_inline == 0) {
		log_notice("%s", XPORT_NO_INLINE_NOTE);
	}
	return 0;
}

/* For the other subcommands that open a data path (bench.c). */
int daemon_conn_pick_transport(struct daemon_conn *s, uint8_t *ret)
{
	return pick_transport_for(s, false, ret);
}

int daemon_conn_connect_data(struct daemon_conn *s, const struct msg_open_ok *ok,
			     enum lane_seal_purpose purpose, struct engine_params *ep,
			     struct xport **ret)
{
	return connect_data(s, ok, purpose, ep, ret);
}
