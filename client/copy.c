/* SPDX-License-Identifier: MIT */
/*
 * rdmacp's transfers: connect, authenticate, negotiate, run the engine.
 * Every failure maps to one exit code (src/exitcodes.h) and one line.
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <libgen.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "clock.h"
#include "client.h"
#include "daemon_conn.h"
#include "engine.h"
#include "fit.h"
#include "exitcodes.h"
#include "fileslist.h"
#include "fsglob.h"
#include "fspath.h"
#include "hash.h"
#include "log.h"
#include "net.h"
#include "hello.h"
#include "lane_seal.h"
#include "output.h"
#include "rdmadev.h"
#include "tls.h"
#include "walk.h"
#include "xport.h"

static volatile sig_atomic_t interrupted;

/* rdmacp run: where push tells each entry's outcome (copy_set_observer). */
static void (*observe_fn)(void *ud, const char *name, const char *action, uint64_t bytes,
			  const char *code, const uint8_t *hash);
static void *observe_ud;

void copy_set_observer(void (*fn)(void *ud, const char *name, const char *action, uint64_t bytes,
				  const char *code, const uint8_t *hash),
		       void *ud)
{
	observe_fn = fn;
	observe_ud = ud;
}

/* rdmacp run: a push of these entries instead of its operands (copy_set_sources). */
static struct {
	const struct engine_src *v;
	size_t n, next;
} given;

void copy_set_sources(const struct engine_src *v, size_t n)
{
	given.v = v;
	given.n = n;
	given.next = 0;
}

static int given_next(void *ud, const struct engine_src **ret, char *why, size_t whylen)
{
	(void)ud, (void)why, (void)whylen;
	if (given.next == given.n) {
		return 0;
	}
	*ret = &given.v[given.next++];
	return 1;
}

bool copy_interrupted(void)
{
	return interrupted != 0;
}

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

int cmd_ping(struct client_opts *o, char **args, int nargs)
{
	struct remote rem = { 0 };
	struct daemon_conn s = { .o = o, .rem = &rem };
	double t0, t1;
	uint8_t fp[TLS_FINGERPRINT_LEN];
	char fph[65], esc[256], cn[1024];
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
	t0 = now_seconds();
	r = daemon_conn_open(&s);
	if (r == 0) {
		t1 = now_seconds();
		tls_peer_fingerprint(s.tls, fp);
		tls_format_fingerprint(fp, fph);
		printf(
		    "%s: %s, protocol %d, TLS 1.3, server certificate CN=%s sha256:%s, %.1f ms\n",
		    rem.host, log_escape(s.hello.software, esc, sizeof(esc)), s.version,
		    log_escape(tls_peer_cn(s.tls), cn, sizeof(cn)), fph, (t1 - t0) * 1e3);
	}
	daemon_conn_close(&s, r == 0);
	return r;
}

/* ---- transfers ----------------------------------------------------------- */

struct xfer {
	struct client_opts *o;
	struct output out;
	/* pull: the names the client asked for (their last components) */
	char **wanted;
	size_t nwanted;
	/* pull: the remote paths, sent once the data connection is up */
	char **get_paths;
	size_t nget;
	/* where a local failure is: push: the operands; pull: the directory names land in */
	char **args;
	int nargs;
	const char *local_dir;
	/* for the summary */
	uint64_t planned; /* dry run: entries listed */
	const char *transport;
	bool completed;
};

/* Every run ends with a summary (--json: even a failed one, with its exit code). */
static int finish(struct xfer *x, const struct engine_stats *st, uint64_t local_failures, int rc)
{
	struct output_totals t = {
		.files = x->o->dry_run ? x->planned : st->files_ok,
		.bytes = st->bytes,
		.failed = st->files_failed + local_failures,
		.skipped = st->files_skipped,
		.updated = st->files_updated,
		.deleted = st->files_deleted,
		.resumed_bytes = st->bytes_resumed,
		.zero_bytes = st->bytes_zero,
		.skipped_bytes = st->bytes_unchanged,
		.packed_files = st->files_packed,
		.packed_slots = st->packed_slots,
		.dry_run = x->o->dry_run,
		.completed = x->completed,
	};

	output_summary(&x->out, &t, x->transport, rc);
	return rc;
}

static void ev_ok(void *ud, const struct engine_entry_ev *ev)
{
	struct xfer *x = ud;

	output_file(&x->out, ev->name, ev->ftype, ev->bytes, ev->zero_bytes, ev->skipped_bytes,
		    ev->seconds, ev->hash, ev->items);
}

static void ev_resumed(void *ud, const char *name, uint64_t sent, uint64_t kept, uint64_t zero,
		       uint64_t skipped, double secs, const uint8_t h[16])
{
	struct xfer *x = ud;

	output_resumed(&x->out, name, sent, kept, zero, skipped, secs, h);
}

/* In a dry run (a probe) skipped, deleted and withheld are what a real run would do. */
static void ev_skipped(void *ud, const char *name, uint8_t ftype, uint32_t items)
{
	struct xfer *x = ud;

	if (x->o->dry_run) {
		output_plan_skip(&x->out, name, ftype, items);
	} else {
		output_skipped(&x->out, name, ftype, items);
	}
}

static void ev_deleted(void *ud, const char *name, uint8_t ftype)
{
	struct xfer *x = ud;

	if (x->o->dry_run) {
		output_plan_delete(&x->out, name, ftype, false);
	} else {
		output_deleted(&x->out, name, ftype);
	}
}

static void ev_delete_withheld(void *ud, const char *name, uint8_t ftype)
{
	struct xfer *x = ud;

	if (x->o->dry_run) {
		output_plan_delete(&x->out, name, ftype, true);
	} else {
		output_delete_withheld(&x->out, name, ftype);
	}
}

/* A probe: an entry the receiver would copy. */
static void ev_planned(void *ud, const char *name, uint8_t ftype, uint64_t bytes)
{
	struct xfer *x = ud;

	output_plan(&x->out, name, ftype, bytes);
	x->planned++;
}

/* The local path of a wire name: the source it came from, or where it would land. */
static char *last_component(const char *path);
static char *source_name(const char *path);

static char *local_path(const struct xfer *x, const char *name)
{
	char *p;

	/*
	 * A push: the operand the entry came from, as typed, and the rest of the
	 * wire name under it (entries in a tree are opened from their
	 * directory's fd, so the walk holds no full path for them).
	 */
	for (int i = 0; i < x->nargs; i++) {
		_cleanup_free_ char *top = source_name(x->args[i]);
		size_t n = top ? strlen(top) : 0;

		if (top && n == 0) {
			/* DIR/.: any name may be under it; the first such operand is a fair guess. */
			return asprintf(&p, "%s/%s", x->args[i], name) < 0 ? NULL : p;
		}
		if (top && !strncmp(top, name, n) && (name[n] == '\0' || name[n] == '/')) {
			return asprintf(&p, "%s%s", x->args[i], name + n) < 0 ? NULL : p;
		}
	}
	if (x->local_dir && !x->local_dir[0]) {
		return strdup(name);
	}
	if (x->local_dir) {
		size_t n = strlen(x->local_dir);
		bool slash = n > 0 && x->local_dir[n - 1] == '/';
		return asprintf(&p, "%s%s%s", x->local_dir, slash ? "" : "/", name) < 0 ? NULL : p;
	}
	return NULL;
}

static void ev_failed(void *ud, const char *name, uint8_t ftype, uint32_t code, bool local,
		      const char *text)
{
	struct xfer *x = ud;
	_cleanup_free_ char *path = local ? local_path(x, name) : NULL;

	if (path) {
		output_local_error(&x->out, name, ftype, path, proto_err_name(code), text);
	} else {
		output_error(&x->out, name, ftype, proto_err_name(code), text);
	}
}

static void ev_progress(void *ud, uint64_t bytes)
{
	struct xfer *x = ud;

	output_progress(&x->out, bytes);
}

static void walk_warning(void *ud, const char *path, const char *why)
{
	char esc[1024];

	(void)ud;
	/* Shortened in the middle: the reason after it must survive the line. */
	log_warning("%s: %s", log_escape_short(path, esc, sizeof(esc)), why);
}

static void ev_notice(void *ud, const char *name, const char *text)
{
	walk_warning(ud, name, text);
}

static const char *transport_name(int kind)
{
	return kind == XPORT_KIND_VERBS ? "verbs" : "tcp";
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
			if (rdmadev_exists(RDMADEV_SYSFS, s->o->devices[i]) < 0) {
				log_error("no RDMA device named %s", s->o->devices[i]);
				return EXIT_NO_DEVICE;
			}
		}
		n = pick_verbs_path(s, with_send, why, sizeof(why));
		if (n != 1) {
			*ret = (uint8_t)s->o->transport;
			return n;
		}
		if (s->o->verbose > 0) {
			log_info("transport auto: tcp (%s)", why);
		}
		*ret = XPORT_KIND_TCP;
		return 0;
	}
	if (s->o->transport == XPORT_KIND_VERBS) {
		log_error("no RDMA device (%s); use --transport tcp", why);
		return EXIT_NO_DEVICE;
	}
	if (s->o->verbose > 0) {
		log_info("transport auto: tcp (%s)", why);
	}
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

static int open_transfer(struct daemon_conn *s, uint8_t direction, uint32_t flags, const char *path,
			 struct msg *ret)
{
	struct msg m = { .type = MSG_OPEN };
	char esc[1024];
	int r;

	/* Never a full copy in silence: a daemon without skip levels would overwrite (or refuse). */
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
	if ((flags & PROTO_OPEN_HARDLINKS) && !(s->hello.caps & PROTO_CAP_HARDLINKS)) {
		log_error("%s: the daemon is too old for -H (it can't make hard links): upgrade "
			  "it, or copy without -H",
			  s->rem->host);
		return EXIT_VERSION;
	}
	if ((flags & (PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS)) &&
	    !(s->hello.caps & PROTO_CAP_XATTRS)) {
		log_error("%s: the daemon is too old for -X and -A (it can't copy extended "
			  "attributes or ACLs): upgrade it, or copy without them",
			  s->rem->host);
		return EXIT_VERSION;
	}
	/* Never more than asked for in silence: a daemon without FILTER would send everything. */
	if ((direction == PROTO_DIR_PULL || s->o->mirror) && !filter_empty(&s->o->filters) &&
	    !(s->hello.caps & PROTO_CAP_FILTER)) {
		log_error("%s: the daemon is too old for --include/--exclude on a pull or with "
			  "--delete (it has no filters): upgrade it, or copy without them",
			  s->rem->host);
		return EXIT_VERSION;
	}
	/* A dry run that looks at the destination runs the engine with no data path. */
	if (proto_open_is_probe(flags) && !(s->hello.caps & PROTO_CAP_PROBE)) {
		log_error("%s: the daemon is too old for --dry-run with --skip or --delete (it "
			  "can't say what a run would skip or delete): upgrade it, or run without "
			  "--dry-run",
			  s->rem->host);
		return EXIT_VERSION;
	}
	/* A pull needs it too: the daemon hears our pass go on (DELETED) while it waits. */
	if (s->o->mirror && !(s->hello.caps & PROTO_CAP_DELETE)) {
		log_error("%s: the daemon is too old for --delete: upgrade it, or copy without "
			  "--delete",
			  s->rem->host);
		return EXIT_VERSION;
	}
	if (s->o->partial && !(s->hello.caps & PROTO_CAP_PARTIAL)) {
		log_error("%s: the daemon is too old for --partial (it cannot resume): upgrade it, "
			  "or copy without --partial",
			  s->rem->host);
		return EXIT_VERSION;
	}
	if (s->o->delta && !(s->hello.caps & PROTO_CAP_DELTA)) {
		log_error("%s: the daemon is too old for --delta (it cannot send or take only "
			  "changed chunks): upgrade it, or copy without --delta",
			  s->rem->host);
		return EXIT_VERSION;
	}
	/* An older daemon would write the zeros: slower, but the user asked for it not to. */
	if ((flags & PROTO_OPEN_ASSUME_ZERO) && !(s->hello.caps & PROTO_CAP_ASSUME_ZERO)) {
		log_error("%s: the daemon is too old for --assume-zero-target (it writes every "
			  "zero extent): upgrade it, or copy without --assume-zero-target",
			  s->rem->host);
		return EXIT_VERSION;
	}
	r = pick_transport_for(s, true, &m.u.open.transport);
	if (r == 0 && s->write_send) {
		flags |= PROTO_OPEN_WRITE_SEND;
	}
	if (r == 0) {
		r = daemon_conn_encryption_wish(s, PROTO_CAP_ENCRYPT, &m.u.open.transport);
		if (s->encrypt_wish) {
			flags |= PROTO_OPEN_ENCRYPT;
		}
	}
	if (r != 0) {
		return r;
	}
	if (!(flags & PROTO_OPEN_DRY_RUN)) {
		r = client_fit(s->o, direction, &m.u.open.transport, &s->fit);
		if (r != 0) {
			return r;
		}
		s->have_fit = true;
	}

	m.u.open.direction = direction;
	m.u.open.lanes = (uint8_t)s->o->lanes;
	m.u.open.flags = flags;
	m.u.open.chunk_size = s->o->chunk_size;
	m.u.open.slots = s->o->slots;
	m.u.open.max_delete = s->o->max_delete;
	m.u.open.encrypt = s->encrypt_wish;
	snprintf(m.u.open.path, sizeof(m.u.open.path), "%s", path);
	log_debug("OPEN %s %s: transport %s, %u lanes, chunk %u, %u slots, flags %#x",
		  direction == PROTO_DIR_PUSH ? "push to" : "pull from", path,
		  m.u.open.transport ? transport_name(m.u.open.transport) : "auto", m.u.open.lanes,
		  m.u.open.chunk_size, m.u.open.slots, flags);
	r = 0;
	/* A push's rules go too when the daemon mirrors: what they exclude it must keep. */
	if ((direction == PROTO_DIR_PULL || s->o->mirror) && !filter_empty(&s->o->filters)) {
		r = queue_filter(s);
	}
	if (r >= 0) {
		r = chan_send(&s->chan, &m);
	}
	if (r >= 0) {
		r = chan_recv(&s->chan, ret, s->o->idle_timeout_s * 1000);
	}
	if (r < 0) {
		log_error("%s: control channel: %s", s->rem->host,
			  r == -EPIPE || r == -ECONNRESET ? "connection closed" : strerror(-r));
		return r == -EPIPE || r == -ECONNRESET ? EXIT_CONNECT : EXIT_PROTOCOL;
	}
	if (ret->type == MSG_ERROR && ret->u.error.code == PERR_BUSY) {
		/* The memory budget in use: --wait-busy asks again. */
		daemon_conn_busy(s, "%s: %s", s->rem->host,
				 log_escape(ret->u.error.text, esc, sizeof(esc)));
		msg_clear(ret);
		return exit_for_perr(PERR_BUSY);
	}
	if (ret->type == MSG_ERROR) {
		log_error("%s: %s", s->rem->host, log_escape(ret->u.error.text, esc, sizeof(esc)));
		if (ret->u.error.code == PERR_TRANSPORT && m.u.open.transport == XPORT_KIND_VERBS) {
			return EXIT_NO_DEVICE;
		}
		return exit_for_perr(ret->u.error.code);
	}
	/* A dry run is answered with END (accepted, nothing to connect). */
	if (ret->type == (flags & PROTO_OPEN_DRY_RUN ? MSG_END : MSG_OPEN_OK)) {
		if (ret->type == MSG_OPEN_OK) {
			log_debug(
			    "OPEN_OK: transport %s, %u lanes, chunk %u, %u slots, data port %u",
			    transport_name(ret->u.open_ok.transport), ret->u.open_ok.lanes,
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

static int connect_open(struct daemon_conn *s, uint8_t direction, uint32_t flags, const char *path,
			struct msg *reply)
{
	struct open_args a = { direction, flags, path, reply };

	return daemon_conn_open_waiting(s, open_step, &a, &interrupted);
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

/*
 * The data lanes OPEN_OK offers. Sealed lanes take their keys from the TLS
 * session: the tcp transport seals its frames, on verbs the engine seals
 * each slot (ep).
 */
static int connect_data(struct daemon_conn *s, const struct msg_open_ok *ok,
			enum lane_seal_purpose purpose, struct engine_params *ep,
			struct xport **ret)
{
	const struct xport_ops *ops = xport_ops_by_kind(ok->transport);
	struct xport_params xp = { 0 };
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
	xp.nlanes = ok->lanes;
	xp.write_send = ok->transport == XPORT_KIND_VERBS && s->write_send;
	xport_params_set_slots(&xp, ok->slots);
	xp.timeout_ms = s->o->connect_timeout_s * 1000;
	memcpy(xp.token, ok->token, sizeof(xp.token));
	xport_test_hooks(&xp, "RDMACP_TEST_LANE_TAMPER", "RDMACP_TEST_LANE_TEE");
	if (getenv("RDMACP_TEST_QP_FATAL")) {
		xp.test_qp_fatal = 1 + (unsigned)strtoul(getenv("RDMACP_TEST_QP_FATAL"), NULL, 10);
	}
	if (ok->lanes_sealed == PROTO_LANES_SEALED) {
		bool frames = ok->transport == XPORT_KIND_TCP;

		xp.seal = frames;
		ep->seal_slots = !frames;
		ep->seal_tamper = frames ? 0 : xp.test_tamper;
		r = seal_keys(s, ok, purpose, frames ? xp.seal_secret : ep->seal_secret);
		if (r != 0) {
			explicit_bzero(ep->seal_secret, sizeof(ep->seal_secret));
			return r;
		}
	}
	for (unsigned i = 0; i < s->o->ndevices; i++) {
		xp.devices[xp.ndevices++] = s->o->devices[i];
	}
	/* Daemon rails (checked in daemon_conn_check_lanes): lane i to address i % (1 + n). */
	for (unsigned i = 0; i < ok->nrails && i < PROTO_MAX_RAILS; i++) {
		net_rail_addr(&ok->rails[i], &xp.rails[xp.nrails++]);
	}
	if (xp.nrails && s->o->verbose > 0) {
		log_info("daemon rails: lanes over %u daemon addresses", 1 + xp.nrails);
	}
	xp.busy_poll = s->o->busy_poll;
	xp.tos_set = s->o->tos >= 0;
	xp.tos = (uint8_t)MAX(s->o->tos, 0);
	xp.ack_timeout_set = s->o->ack_timeout >= 0;
	xp.ack_timeout = (uint8_t)MAX(s->o->ack_timeout, 0);
	net_set_port(&addr, ok->data_port);
	r = ops->connect((struct sockaddr *)&addr, s->peerlen, &xp, ret);
	explicit_bzero(xp.token, sizeof(xp.token));
	explicit_bzero(xp.seal_secret, sizeof(xp.seal_secret));
	if (r < 0) {
		explicit_bzero(ep->seal_secret, sizeof(ep->seal_secret));
		log_error_errno(r, "data connection (%s, %u lanes, port %u): %m", ops->name,
				xp.nlanes, ok->data_port);
		return EXIT_TRANSPORT;
	}
	return 0;
}

/*
 * A failure on this side: a source we could not read, a destination we
 * could not write is local I/O (6), whatever errno it was; what says
 * something about the peer or the data keeps its own code.
 */
static int exit_for_local_perr(uint32_t code)
{
	switch (code) {
	case PERR_PERMISSION:
	case PERR_NOT_FOUND:
	case PERR_BAD_PATH:
	case PERR_NOSPACE:
	case PERR_IO:
	case PERR_SOURCE_CHANGED:
	case PERR_INTERNAL: /* set-up failures here: io_uring, memory */
		return EXIT_LOCAL_IO;
	default:
		return exit_for_perr(code);
	}
}

/* Exit code for a finished exchange, from what committed and what failed. */
static int exit_for_stats(const struct engine_stats *st, uint64_t local_failures)
{
	if (st->files_failed == 0 && local_failures == 0) {
		return EXIT_OK;
	}
	if (st->files_ok > 0 || (local_failures > 0 && st->files_failed == 0)) {
		return EXIT_PARTIAL;
	}
	return st->first_error_local ? exit_for_local_perr(st->first_error)
				     : exit_for_perr(st->first_error);
}

/*
 * A probe's exit code: as a real run's, with what it would copy counted as
 * committed (an entry that would fail: 9 when others would go); --max-delete
 * reached is listed, not an exit code: nothing was deleted.
 */
static int exit_for_probe(const struct engine_stats *st, uint64_t local_failures)
{
	struct engine_stats as_run = *st;

	as_run.files_ok = st->files_planned;
	return exit_for_stats(&as_run, local_failures);
}

/* A run that is otherwise fine ends with EXIT_MAX_DELETE when --max-delete kept entries. */
static int exit_for_mirror(const struct engine_stats *st, int rc)
{
	return rc == EXIT_OK && st->delete_withheld > 0 ? EXIT_MAX_DELETE : rc;
}

static int send_get(struct daemon_conn *s, char **paths, size_t n);

/* ok NULL: a probe (a dry run with --skip or --delete), on the control channel alone. */
static int run_engine(struct daemon_conn *s, struct xfer *x, struct engine_params *ep,
		      const struct msg_open_ok *ok, struct engine_stats *st)
{
	/* A push's lane keys are never a pull's (lane_seal_export). */
	enum lane_seal_purpose purpose =
	    ep->role == ENGINE_SENDER ? LANE_SEAL_PUSH : LANE_SEAL_PULL;
	struct xport *xp = NULL;
	uint32_t code = 0;
	char err[1200];
	int rc, r;

	rc = ok ? connect_data(s, ok, purpose, ep, &xp) : 0;
	if (rc != 0) {
		return rc;
	}
	if (x->nget && send_get(s, x->get_paths, x->nget) < 0) {
		if (xp) {
			xp->ops->destroy(xp);
		}
		log_error("control channel write failed");
		return EXIT_CONNECT;
	}
	if (s->have_fit) {
		output_memory(&x->out, s->fit.unlimited ? 0 : s->fit.limit, s->fit.pool,
			      s->fit.chunk, s->fit.chunks, s->fit.fitted);
	}
	if (ok) {
		output_start(&x->out, ep->role == ENGINE_SENDER ? "push" : "pull", s->rem->host,
			     transport_name(ok->transport),
			     ok->transport == XPORT_KIND_VERBS
				 ? xport_path_name(s->write_send ? XPORT_PATH_WRITE_SEND
								 : XPORT_PATH_WRITE_IMM)
				 : NULL,
			     ok->lanes, ok->lanes_sealed == PROTO_LANES_SEALED, s->clear_why);
	}
	ep->chan = &s->chan;
	ep->x = xp;
	ep->chunk_size = ok ? ok->chunk_size : s->o->chunk_size;
	ep->slots = ok ? ok->slots : s->o->slots;
	ep->pool_chunks = MAX(s->o->pool_chunks, 2u);
	ep->idle_timeout_ms = s->o->idle_timeout_s * 1000;
	ep->faults = getenv("RDMACP_TEST_SLOW_DISK") ? ENGINE_FAULT_SLOW_DISK : 0;
	ep->faults |= getenv("RDMACP_TEST_SLOW_HASH") ? ENGINE_FAULT_SLOW_HASH : 0;
	ep->faults |= getenv("RDMACP_TEST_READ_EAGAIN") ? ENGINE_FAULT_READ_EAGAIN : 0;
	ep->faults |= getenv("RDMACP_TEST_SMALL_RING") ? ENGINE_FAULT_SMALL_RING : 0;
	/* Tests: take this many data lanes down mid-transfer. */
	if (getenv("RDMACP_TEST_KILL_LANES")) {
		ep->faults |= ENGINE_FAULT_KILL_LANE;
		ep->test_kill_lanes = (unsigned)strtoul(getenv("RDMACP_TEST_KILL_LANES"), NULL, 10);
	}
	ep->busy_poll = s->o->busy_poll;
	ep->hash_threads =
	    engine_hash_threads(s->o->hash_threads, xp && xp->ops->kind == XPORT_KIND_VERBS);
	if (ep->hash_threads > 0 && !ep->seal_slots) {
		log_debug("%u hashing threads", ep->hash_threads);
	}
	ep->peer_caps = s->hello.caps;
	ep->ev = (struct engine_events){
		.file_ok = ev_ok,
		.file_failed = ev_failed,
		.progress = ev_progress,
		.file_skipped = ev_skipped,
		.notice = ev_notice,
		.deleted = ev_deleted,
		.delete_withheld = ev_delete_withheld,
		.file_resumed = ev_resumed,
		.planned = ev_planned,
		.ud = x,
	};
	ep->stop = &interrupted;
	r = engine_run(ep, st, &code, err, sizeof(err));
	explicit_bzero(ep->seal_secret, sizeof(ep->seal_secret));
	if (xp) {
		xp->ops->destroy(xp);
	}
	if (r < 0) {
		char esc[4 * sizeof(err)];

		/* err may quote the daemon's ERROR text or a name. */
		log_error("transfer failed: %s", log_escape(err, esc, sizeof(esc)));
		if (interrupted) {
			return EXIT_INTERRUPTED;
		}
		/* -EREMOTEIO: the peer ended it with its ERROR; else it failed here. */
		if (r == -EREMOTEIO) {
			return exit_for_perr(code);
		}
		if (r == -ECONNRESET || r == -EPIPE) {
			return EXIT_TRANSPORT; /* the connection was lost mid-transfer */
		}
		return exit_for_local_perr(code);
	}
	return 0;
}

static uint32_t open_flags(const struct client_opts *o)
{
	return (o->recursive ? PROTO_OPEN_RECURSIVE : 0) | (o->preserve ? PROTO_OPEN_PRESERVE : 0) |
	       (o->owner ? PROTO_OPEN_OWNER : 0) | (o->dry_run ? PROTO_OPEN_DRY_RUN : 0) |
	       (o->hardlinks ? PROTO_OPEN_HARDLINKS : 0) | (o->xattrs ? PROTO_OPEN_XATTRS : 0) |
	       (o->acls ? PROTO_OPEN_ACLS : 0) | (o->delta ? PROTO_OPEN_DELTA : 0);
}

static char *last_component(const char *path)
{
	char buf[PROTO_MAX_PATH + 1];

	return fspath_last_component(path, buf, sizeof(buf)) < 0 ? NULL : strdup(buf);
}

/* DIR/. (or .): the directory's contents, dotfiles too, as cp -r DIR/. DEST copies them. */
static bool names_contents(const char *path)
{
	_cleanup_free_ char *copy = strdup(path);

	return copy && fspath_strip_contents_dot(copy);
}

/* The wire name a push operand's entries go under: "" for DIR/. (its entries as they are). */
static char *source_name(const char *path)
{
	return names_contents(path) ? strdup("") : last_component(path);
}

/* Keep fd open with the list: its entries are relative to it. */
static int src_list_hold(struct src_list *l, int fd)
{
	int *v = reallocarray(l->held, l->nheld + 1, sizeof(*v));

	if (!v) {
		return -ENOMEM;
	}
	l->held = v;
	l->held[l->nheld++] = fd;
	return 0;
}

/* One --files-from name that can't be sent: a failure, or with --missing-ok a note. */
static void files_from_failed(struct xfer *x, const char *srcdir, const char *name, int r,
			      uint64_t *local_failures)
{
	_cleanup_free_ char *path = NULL;
	char esc[1024];

	if ((r == -ENOENT || r == -ENOTDIR) && x->o->missing_ok) {
		output_missing(&x->out, name);
		if (x->o->verbose > 0 && !x->out.observe) {
			log_info("%s: missing (--missing-ok)",
				 log_escape_short(name, esc, sizeof(esc)));
		}
		return;
	}
	if (asprintf(&path, "%s/%s", srcdir, name) < 0) {
		path = NULL;
	}
	output_local_error(&x->out, name, 0, path ? path : name,
			   r == -ENOENT || r == -ENOTDIR		? "NOT_FOUND"
			   : r == -EINVAL || r == -ELOOP || r == -EXDEV ? "BAD_PATH"
									: "LOCAL_IO",
			   r == -ENOENT || r == -ENOTDIR ? "listed in --files-from, not found"
			   : r == -EINVAL ? "not a name beneath the source directory (absolute, "
					    "or with . or .. in it)"
			   : r == -ELOOP || r == -EXDEV ? "a symlink in its path (not followed)"
							: strerror(-r));
	(*local_failures)++;
}

/*
 * --files-from: each listed name beneath the one source directory, sent
 * under that name (its path kept, as rsync's --relative); a directory with
 * its contents only under -r. 0 or an exit code (the error printed).
 */
static int add_files_from(struct xfer *x, const char *srcdir, struct src_list *srcs,
			  uint64_t *local_failures)
{
	struct client_opts *o = x->o;
	struct files_list fl = { 0 };
	char esc[1024];
	size_t entry;
	int fd, r;

	r = files_list_read(o->files_from, o->from0, &fl, &entry);
	if (r < 0) {
		log_escape_short(o->files_from, esc, sizeof(esc));
		if (entry > 0) {
			log_error("--files-from %s: name %zu: %s", esc, entry,
				  r == -ENAMETOOLONG ? "longer than 4096 bytes"
				  : r == -E2BIG	     ? "too many names"
				  : r == -EINVAL     ? "a NUL in a line (use -0)"
						     : strerror(-r));
			return EXIT_USAGE;
		}
		log_error("--files-from %s: %s", esc, strerror(-r));
		return EXIT_LOCAL_IO;
	}
	r = files_list_prune(&fl, o->recursive);
	if (r < 0) {
		files_list_free(&fl);
		return EXIT_LOCAL_IO;
	}
	/* The source directory as typed (its own symlink followed, as any operand's). */
	fd = open(srcdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || src_list_hold(srcs, fd) < 0) {
		r = fd < 0 ? negerrno() : -ENOMEM;
		if (fd >= 0) {
			close(fd);
		}
		files_list_free(&fl);
		log_error("%s: %s (--files-from names are relative to one source directory)",
			  log_escape_short(srcdir, esc, sizeof(esc)), strerror(-r));
		return EXIT_LOCAL_IO;
	}
	for (size_t i = 0; i < fl.n; i++) {
		const char *name = fl.names[i];

		r = fspath_validate(name);
		if (r == 0) {
			r = walk_add_flags(srcs, fd, name, name,
					   (o->recursive ? WALK_RECURSIVE : 0) | WALK_DIR_ALONE,
					   walk_warning, NULL);
		}
		if (r == -ENOMEM) {
			files_list_free(&fl);
			return EXIT_LOCAL_IO;
		}
		if (r < 0) {
			files_from_failed(x, srcdir, name, r, local_failures);
		}
	}
	files_list_free(&fl);
	return 0;
}

static int push(struct client_opts *o, char **args, int nargs, const struct remote *rem)
{
	struct daemon_conn s = { .o = o, .rem = rem };
	struct xfer x = { .o = o };
	struct src_list srcs = { 0 };
	/*
	 * The tree is walked while it is sent (its memory does not grow with
	 * it), except where the total must be known first: a progress display
	 * with a percentage, and a --files-from list (each name checked first).
	 */
	struct walk *walk = NULL;
	struct engine_source source = { 0 };
	size_t nsrcs;
	struct engine_params ep = { .role = ENGINE_SENDER };
	struct engine_stats st = { 0 };
	struct msg reply = { 0 };
	uint64_t local_failures = 0;
	bool contents = false; /* a DIR/. operand: its entries go into the destination */
	/* The daemon is the receiver: it applies the skip level, keeps partials, assumes zeros. */
	uint32_t flags = open_flags(o) | o->skip | (o->partial ? PROTO_OPEN_PARTIAL : 0) |
			 (o->assume_zero ? PROTO_OPEN_ASSUME_ZERO : 0);
	int rc;

	output_init(&x.out, o->json, o->progress, o->verbose);
	x.out.dry_run = o->dry_run;
	x.out.observe = observe_fn;
	x.out.observe_ud = observe_ud;
	srcs.filter = filter_empty(&o->filters) ? NULL : &o->filters;
	if (given.n > 0) {
		/* The entries are given (byte ranges of files): no operand is walked. */
		nargs = 0;
		o->files_from[0] = '\0';
		for (size_t i = 0; i < given.n; i++) {
			srcs.total_bytes += given.v[i].size;
		}
	} else if (!o->files_from[0] && !x.out.progress) {
		if (walk_new(walk_warning, NULL, &walk) < 0) {
			return finish(&x, &st, local_failures, EXIT_LOCAL_IO);
		}
		walk_set_filter(walk, srcs.filter);
	}
	if (o->files_from[0]) {
		if (nargs != 1) {
			log_error("--files-from takes one source directory (the names are relative "
				  "to it)");
			return EXIT_USAGE;
		}
		if (!strcmp(o->files_from, "-") && o->filters_from_stdin) {
			log_error("--files-from - and --exclude-from - both want standard input");
			return EXIT_USAGE;
		}
		rc = add_files_from(&x, args[0], &srcs, &local_failures);
		if (rc != 0) {
			src_list_free(&srcs);
			return rc;
		}
		/* Where a failure is: the source directory and the name under it. */
		x.local_dir = args[0];
		nargs = 0;
	}
	for (int i = 0; i < nargs; i++) {
		_cleanup_free_ char *name = source_name(args[i]);
		char esc[4200];
		unsigned wflags;
		int r;

		if (!name) {
			walk_free(walk);
			src_list_free(&srcs);
			return finish(&x, &st, local_failures, EXIT_LOCAL_IO);
		}
		/* A block device named here is read whole, as an image (rdmacp /dev/sdb h:m/x.img). */
		wflags = (o->recursive ? WALK_RECURSIVE : 0) | WALK_DEVICES |
			 (name[0] ? 0 : WALK_CONTENTS);
		contents |= !name[0];
		r = walk ? walk_add_root_flags(walk, AT_FDCWD, args[i], name, wflags)
			 : walk_add_flags(&srcs, AT_FDCWD, args[i], name, wflags, walk_warning,
					  NULL);
		if (r == -ENOMEM) {
			walk_free(walk);
			src_list_free(&srcs);
			return finish(&x, &st, local_failures, EXIT_LOCAL_IO);
		}
		if (r < 0) {
			output_local_error(&x.out, name, 0, args[i],
					   r == -EISDIR ? "IS_DIRECTORY" : "LOCAL_IO",
					   r == -EISDIR ? "is a directory (use -r)" : strerror(-r));
			(void)esc;
			local_failures++;
		}
	}
	x.args = args;
	x.nargs = nargs;
	/* Every root queued comes out of the walk as an entry of its own. */
	nsrcs = given.n ? given.n : walk ? walk_nroots(walk) : srcs.n;
	if (nsrcs == 0 && (local_failures > 0 || (srcs.filter == NULL && !o->files_from[0]))) {
		walk_free(walk);
		src_list_free(&srcs);
		/* A --files-from list with nothing there is a partial run (exit 9), as rsync's. */
		return finish(&x, &st, local_failures,
			      o->files_from[0] ? EXIT_PARTIAL : EXIT_LOCAL_IO);
	}
	x.out.total_bytes = srcs.total_bytes; /* 0 (unknown) while walking */
	if (given.n) {
		source = (struct engine_source){ .next = given_next };
	} else if (walk) {
		walk_source(walk, &source);
	} else {
		src_list_source(&srcs, &source);
	}
	if (nargs > 1 || contents || o->files_from[0] || given.n || rem->path[0] == '\0' ||
	    rem->path[strlen(rem->path) - 1] == '/') {
		flags |= PROTO_OPEN_DEST_IS_DIR;
	}
	/* The daemon mirrors; a source that failed here already means nothing is deleted. */
	if (o->mirror && local_failures == 0) {
		flags |= PROTO_OPEN_DELETE;
	}
	rc = connect_open(&s, PROTO_DIR_PUSH, flags, rem->path, &reply);
	if (rc == 0 && proto_open_is_probe(flags)) {
		/* The daemon looks at its side: what it would skip, take, delete. */
		ep.source = source;
		ep.open_flags = flags;
		rc = run_engine(&s, &x, &ep, NULL, &st);
	} else if (rc == 0 && o->dry_run) {
		const struct engine_src *e;
		char why[256];
		int r;

		while ((r = source.next(source.ud, &e, why, sizeof(why))) > 0) {
			if (e->error) {
				output_error(&x.out, e->name, e->ftype, "LOCAL_IO", e->why);
				local_failures++;
				continue;
			}
			output_plan(&x.out, e->name, e->ftype, e->size);
			x.planned++;
		}
		if (r < 0) {
			log_error("%s", why);
			rc = EXIT_LOCAL_IO;
		}
	} else if (rc == 0) {
		ep.source = source;
		ep.bwlimit = o->bwlimit;
		ep.open_flags = flags;
		x.transport = transport_name(reply.u.open_ok.transport);
		rc = run_engine(&s, &x, &ep, &reply.u.open_ok, &st);
	}
	daemon_conn_close(&s, rc == 0);
	walk_free(walk);
	src_list_free(&srcs);
	if (rc != 0) {
		return finish(&x, &st, local_failures, rc);
	}
	x.completed = true;
	if (o->mirror) {
		output_mirror(&x.out, st.files_deleted, st.delete_withheld,
			      st.delete_suppressed || local_failures > 0,
			      st.files_failed + local_failures, o->max_delete);
	}
	if (o->dry_run) {
		return finish(&x, &st, local_failures,
			      proto_open_is_probe(flags) ? exit_for_probe(&st, local_failures)
							 : exit_for_stats(&st, local_failures));
	}
	return finish(&x, &st, local_failures,
		      exit_for_mirror(&st, exit_for_stats(&st, local_failures)));
}

/*
 * Pull: accept only entries named after what we asked for (and, with -r, below
 * them); for a wildcard, names its last component matches (as the daemon does,
 * without matching a leading dot), never "." or "..".
 */
static bool pull_name_ok(void *ud, const char *name)
{
	struct xfer *x = ud;
	const char *slash = strchr(name, '/');
	size_t top = slash ? (size_t)(slash - name) : strlen(name);
	char topname[FSPATH_NAME_MAX + 1];

	if (slash && !x->o->recursive) {
		return false;
	}
	if (top == 0 || top >= sizeof(topname)) {
		return false;
	}
	memcpy(topname, name, top);
	topname[top] = '\0';
	if (!strcmp(topname, ".") || !strcmp(topname, "..")) {
		return false;
	}
	for (size_t i = 0; i < x->nwanted; i++) {
		/* DIR/.: what the directory holds, under any name of its own. */
		if (x->wanted[i][0] == '\0') {
			return true;
		}
		/*
		 * A wildcard we sent: the daemon expanded it, each match under its own
		 * name, or found none and took it as a name.
		 */
		if (!strcmp(x->wanted[i], topname) ||
		    (fsglob_has_magic(x->wanted[i]) &&
		     fnmatch(x->wanted[i], topname, FNM_PERIOD) == 0)) {
			return true;
		}
	}
	return false;
}

/* Open directory DST (with extra open flags) and name it in *ret_dir. */
static int open_dest_dir(const char *dst, int flags, char **ret_dir, int *ret_fd)
{
	_cleanup_close_ int fd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC | flags);
	char *dir;

	if (fd < 0) {
		return negerrno();
	}
	dir = strdup(dst);
	if (!dir) {
		return -ENOMEM;
	}
	*ret_dir = dir;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/*
 * Where pulled entries land: into DST if it is a directory, else DST renames
 * the one source (cp -r: a directory arrives under the new name). *ret_dir
 * is the local directory the entries' names are relative to ("" for ".");
 * *ret_made: DST was made here (removed again if the copy stores nothing).
 * Without create (a dry run) a DST that would be made is not: *ret_fd is -1.
 */
static int pull_dest(const char *dst, int nsrcs, bool create, int *ret_fd, char **ret_rename,
		     char **ret_dir, bool *ret_made, char *why, size_t whylen)
{
	_cleanup_free_ char *copy = strdup(dst);
	struct stat st;
	char *slash;
	int fd;

	if (!copy) {
		return -ENOMEM;
	}
	*ret_rename = NULL;
	why[0] = '\0';
	*ret_made = false;
	if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
		return open_dest_dir(dst, 0, ret_dir, ret_fd);
	}
	if (nsrcs > 1 || dst[strlen(dst) - 1] == '/') {
		/*
		 * Several sources, or DST/: they go into directory DST, made
		 * here when it is missing (its parent must exist), as a push
		 * makes the daemon's.
		 */
		if (lstat(dst, &st) == 0) {
			snprintf(why, whylen, "not a directory");
			return -ENOTDIR;
		}
		if (!create) {
			/* Its parent must be there for mkdir to work; nothing is made. */
			_cleanup_free_ char *parent = strdup(dst);
			size_t n = parent ? strlen(parent) : 0;

			while (n > 1 && parent[n - 1] == '/') {
				parent[--n] = '\0';
			}
			if (!parent || stat(dirname(parent), &st) < 0 || !S_ISDIR(st.st_mode)) {
				snprintf(why, whylen, "directory %s does not exist", dirname(copy));
				return -ENOENT;
			}
			*ret_dir = strdup(dst);
			*ret_fd = -1;
			return *ret_dir ? 0 : -ENOMEM;
		}
		if (mkdir(dst, 0777) < 0) {
			int r = negerrno();
			if (r == -ENOENT) {
				snprintf(why, whylen, "directory %s does not exist", dirname(copy));
			}
			return r;
		}
		*ret_made = true;
		return open_dest_dir(dst, O_NOFOLLOW, ret_dir, ret_fd);
	}
	slash = strrchr(copy, '/');
	if (slash) {
		*slash = '\0';
	}
	fd = open(slash ? (copy[0] ? copy : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int r = negerrno();
		if (r == -ENOENT) {
			snprintf(why, whylen, "directory %s does not exist", copy[0] ? copy : "/");
		}
		return r;
	}
	*ret_rename = strdup(slash ? slash + 1 : copy);
	*ret_dir = strdup(slash ? (copy[0] ? copy : "/") : "");
	if (!*ret_rename || !*ret_dir || fspath_validate(*ret_rename) < 0) {
		close(fd);
		free(*ret_rename);
		free(*ret_dir);
		*ret_rename = *ret_dir = NULL;
		return -EINVAL;
	}
	*ret_fd = fd;
	return 0;
}

static int send_get(struct daemon_conn *s, char **paths, size_t n)
{
	struct msg m = { .type = MSG_GET };

	m.u.get.count = (uint16_t)n;
	m.u.get.paths = paths;
	return chan_send(&s->chan, &m);
}

/* --dry-run of a pull: the daemon lists what it would send, then END. */
static int pull_plan(struct daemon_conn *s, struct xfer *x)
{
	uint64_t failed = 0;

	for (;;) {
		struct msg m;
		int r = chan_recv(&s->chan, &m, s->o->idle_timeout_s * 1000);
		if (r < 0) {
			log_error_errno(r, "control channel: %m");
			return EXIT_PROTOCOL;
		}
		if (m.type == MSG_END) {
			return failed ? EXIT_PARTIAL : 0;
		}
		if (m.type == MSG_ENTRY_FAILED) {
			/* What the daemon could not send: a failure, not a silent gap. */
			output_error(&x->out, m.u.entry_failed.name, 0,
				     proto_err_name(m.u.entry_failed.status),
				     m.u.entry_failed.text);
			failed++;
			continue;
		}
		if (m.type == MSG_ERROR) {
			char esc[4 * sizeof(m.u.error.text)];

			log_error("%s: %s", s->rem->host,
				  log_escape(m.u.error.text, esc, sizeof(esc)));
			return exit_for_perr(m.u.error.code);
		}
		if (m.type != MSG_FILES) {
			msg_clear(&m);
			return EXIT_PROTOCOL;
		}
		for (size_t i = 0; i < m.u.files.count; i++) {
			if (!pull_name_ok(x, m.u.files.files[i].name)) {
				msg_clear(&m);
				log_error("daemon listed a name that was not asked for");
				return EXIT_PROTOCOL;
			}
			output_plan(&x->out, m.u.files.files[i].name, m.u.files.files[i].ftype,
				    m.u.files.files[i].size);
			x->planned++;
		}
		msg_clear(&m);
	}
}

/* dst resolved when it is a block device (its symlinks followed), else NULL. */
static char *device_dest(const char *dst)
{
	struct stat st;

	if (stat(dst, &st) < 0 || !S_ISBLK(st.st_mode)) {
		return NULL;
	}
	return realpath(dst, NULL);
}

static int pull(struct client_opts *o, char **args, int nargs, const char *dst)
{
	struct remote rems[PROTO_MAX_BATCH];
	struct daemon_conn s = { .o = o, .rem = &rems[0] };
	struct xfer x = { .o = o };
	struct engine_params ep = { .role = ENGINE_RECEIVER };
	struct engine_stats st = { 0 };
	struct msg reply = { 0 };
	char *paths[PROTO_MAX_BATCH], *wanted[PROTO_MAX_BATCH];
	char *rename_to = NULL, *local_dir = NULL;
	char why[PROTO_MAX_PATH + 64];
	bool made_dest = false;
	uint32_t flags = open_flags(o);
	int basefd = -1, rc, r, nglob = 0, ncontents = 0;

	if (nargs > PROTO_MAX_BATCH) {
		log_error("at most %d remote sources at once", PROTO_MAX_BATCH);
		return EXIT_USAGE;
	}
	if (o->files_from[0]) {
		log_error("--files-from is for a push (the names are of a local directory); for a "
			  "pull, name the remote sources (HOST:MODULE/PATH...) instead");
		return EXIT_USAGE;
	}
	if (o->assume_zero && !o->write_devices) {
		log_error("--assume-zero-target is for block device targets: a pull writes a local "
			  "device only with --write-devices");
		return EXIT_USAGE;
	}
	output_init(&x.out, o->json, o->progress, o->verbose);
	x.out.dry_run = o->dry_run;
	x.out.pull = true;
	for (int i = 0; i < nargs; i++) {
		if (parse_remote(args[i], &rems[i]) != 1 || strcmp(rems[i].host, rems[0].host)) {
			log_error("all sources of a pull must be on one host: %s", args[i]);
			return EXIT_USAGE;
		}
		paths[i] = rems[i].path;
		nglob += fsglob_has_magic(rems[i].path);
		/* DIR/.: its entries, any name; the daemon strips the dot (an older one refuses). */
		ncontents += names_contents(rems[i].path);
		wanted[i] = source_name(rems[i].path);
		if (!wanted[i] || (wanted[i][0] && fspath_validate(wanted[i]) < 0)) {
			log_error("bad remote path '%s'", args[i]);
			for (int k = 0; k <= i; k++) {
				free(wanted[k]);
			}
			return EXIT_USAGE;
		}
	}
	x.wanted = wanted;
	x.nwanted = (size_t)nargs;
	rc = 0;
	/* A dry run with --skip or --delete looks at the destination: a probe, we receive. */
	if (o->dry_run && (o->skip || o->mirror)) {
		flags |= o->skip | (o->mirror ? PROTO_OPEN_DELETE : 0);
	}
	/* --write-devices: a device named through a symlink (/dev/vg0/lv) is written, not the link. */
	_cleanup_free_ char *dev_dst = o->write_devices ? device_dest(dst) : NULL;
	if (dev_dst) {
		dst = dev_dst;
	}
	if (!o->dry_run || proto_open_is_probe(flags)) {
		/* A wildcard may match several: the destination is a directory, as for cp. */
		r = pull_dest(dst, nglob || ncontents ? 2 : nargs, !o->dry_run, &basefd, &rename_to,
			      &local_dir, &made_dest, why, sizeof(why));
		if (r < 0) {
			log_error("destination %s: %s", dst, why[0] ? why : strerror(-r));
			rc = EXIT_LOCAL_IO;
		}
		x.local_dir = local_dir;
	}
	if (rc == 0) {
		rc = connect_open(&s, PROTO_DIR_PULL, flags, rems[0].path, &reply);
	}
	if (rc == 0 && o->dry_run && !proto_open_is_probe(flags)) {
		rc = send_get(&s, paths, (size_t)nargs) < 0 ? EXIT_PROTOCOL : pull_plan(&s, &x);
	} else if (rc == 0) {
		x.transport = o->dry_run ? NULL : transport_name(reply.u.open_ok.transport);
		/* The lanes first (the daemon waits for them), then what we want. */
		ep.base_fd = basefd;
		ep.rename_to = rename_to;
		/* We are the receiver: the skip level is ours to apply, not the daemon's. */
		ep.open_flags = open_flags(o) | o->skip | (o->partial ? PROTO_OPEN_PARTIAL : 0);
		ep.partial_max_age_s = CLIENT_PARTIAL_MAX_AGE_S;
		/*
		 * As root, a daemon's set-id bits would be root's own: kept only
		 * when asked for with --owner (as a user, cp -p keeps them too).
		 */
		ep.keep_setid = o->owner || geteuid() != 0;
		ep.bwlimit = o->bwlimit;
		ep.umask = fspath_umask(); /* without -p: cp's rule */
		ep.write_devices = o->write_devices;
		/* Our own device targets: the daemon, the sender, need not know. */
		ep.open_flags |= o->assume_zero ? PROTO_OPEN_ASSUME_ZERO : 0;
		ep.name_ok = pull_name_ok;
		ep.name_ok_ud = &x;
		/* --delete: we mirror, here; the daemon hears only that the pass goes on. */
		if (o->mirror) {
			ep.open_flags |= PROTO_OPEN_DELETE;
			ep.max_delete = o->max_delete;
			/* What our rules exclude is kept, as rsync keeps it. */
			ep.delete_keep = filter_protects;
			ep.delete_keep_ud = &o->filters;
		}
		x.get_paths = paths;
		x.nget = (size_t)nargs;
		/* A probe: END answered the OPEN, there is no data path. */
		rc = run_engine(&s, &x, &ep, o->dry_run ? NULL : &reply.u.open_ok, &st);
	}
	daemon_conn_close(&s, rc == 0);
	for (int i = 0; i < nargs; i++) {
		free(wanted[i]);
	}
	free(rename_to);
	free(local_dir);
	if (basefd >= 0) {
		close(basefd);
	}
	if (made_dest && st.files_ok == 0) {
		(void)rmdir(dst); /* only if still empty */
	}
	if (rc != 0 || (o->dry_run && !proto_open_is_probe(flags))) {
		return finish(&x, &st, 0, rc);
	}
	x.completed = true;
	if (o->mirror) {
		output_mirror(&x.out, st.files_deleted, st.delete_withheld, st.delete_suppressed,
			      st.files_failed, o->max_delete);
	}
	if (o->dry_run) {
		return finish(&x, &st, 0, exit_for_probe(&st, 0));
	}
	return finish(&x, &st, 0, exit_for_mirror(&st, exit_for_stats(&st, 0)));
}

int cmd_copy(struct client_opts *o, char **args, int nargs)
{
	struct remote dst;
	struct sigaction sa = { .sa_handler = on_signal };
	int r, nremote = 0;

	if (nargs < 2) {
		log_error("usage: rdmacp [OPTIONS] SRC... DST (see rdmacp --help)");
		return EXIT_USAGE;
	}
	if (o->have_max_delete && !o->mirror) {
		log_error("--max-delete needs --delete");
		return EXIT_USAGE;
	}
	if (o->mirror && !o->recursive) {
		log_error("--delete needs -r (it mirrors directories)");
		return EXIT_USAGE;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < nargs - 1; i++) {
		struct remote tmp;
		r = parse_remote(args[i], &tmp);
		if (r < 0) {
			log_error("bad remote '%s': expected HOST:MODULE/PATH", args[i]);
			return EXIT_USAGE;
		}
		nremote += r;
	}
	r = parse_remote(args[nargs - 1], &dst);
	if (r < 0) {
		log_error("bad remote '%s': expected HOST:MODULE/PATH", args[nargs - 1]);
		return EXIT_USAGE;
	}
	if (r == 1 && nremote == 0) {
		return push(o, args, nargs - 1, &dst);
	}
	if (r == 0 && nremote == nargs - 1) {
		return pull(o, args, nargs - 1, args[nargs - 1]);
	}
	log_error("copy either local files to one remote destination, or remote files to a local "
		  "destination");
	return EXIT_USAGE;
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
