/* SPDX-License-Identifier: MIT */
/*
 * A copy over a session's data path (serve_internal.h): the daemon receives
 * a push into its ring or sends a pull from its pool, under the module's
 * grant (its caps, metadata rule, --delete's keep rules); a probe runs the
 * same engine on the control channel alone. What the engine tells is logged
 * here, and its totals in the "done" line.
 */
#include "serve_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "log.h"
#include "macro.h"
#include "session_table.h"

static void ev_file_ok(void *ud, const struct engine_entry_ev *ev)
{
	struct conn *c = ud;
	char esc[512], hex[33] = "none";

	if (log_get_max_level() >= LOG_DEBUG) {
		if (ev->hash) {
			hash_to_hex(ev->hash, hex);
		}
		log_debug("%s: committed %s (%llu bytes, %.3f s, xxh128%s %s)", c->peer,
			  log_escape(ev->name, esc, sizeof(esc)), (unsigned long long)ev->bytes,
			  ev->seconds, ev->tree_chunk ? "-tree" : "", hex);
	}
}

static void ev_file_resumed(void *ud, const char *name, uint64_t sent, uint64_t kept, uint64_t zero,
			    uint64_t skipped, double secs, const uint8_t h[16], uint32_t tree,
			    uint32_t items)
{
	struct conn *c = ud;
	char esc[512], hex[33];

	if (log_get_max_level() >= LOG_DEBUG) {
		hash_to_hex(h, hex);
		log_debug("%s: committed %s, resumed (%llu bytes sent, %llu kept, %llu zeros, %llu "
			  "unchanged, %.3f s, xxh128%s %s)",
			  c->peer, log_escape(name, esc, sizeof(esc)), (unsigned long long)sent,
			  (unsigned long long)kept, (unsigned long long)zero,
			  (unsigned long long)skipped, secs, tree ? "-tree" : "", hex);
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

/*
 * The engine's parameters for this copy, beside the sizes and test faults
 * already in ep: its role, the connection, the module's rules and limits.
 */
static void session_engine_params(struct conn *c, const struct msg_open *o,
				  const struct policy_grant *gr, int basefd, const char *rename_to,
				  struct get_source *pull_srcs, struct xport *x,
				  struct engine_limits *limits, struct engine_params *ep)
{
	ep->role = pull_srcs ? ENGINE_SENDER : ENGINE_RECEIVER;
	if (pull_srcs) {
		serve_get_engine_source(pull_srcs, &ep->source);
	}
	ep->chan = &c->chan;
	ep->x = x;
	ep->idle_timeout_ms = (int)c->cfg->idle_timeout_s * 1000;
	ep->peer_caps = c->peer_caps;
	ep->base_fd = basefd;
	ep->rename_to = rename_to && *rename_to ? rename_to : NULL;
	ep->open_flags = o->flags;
	/*
	 * --delete (a push's; a pull's probe carries the flag for the client's
	 * own pass, which a sender ignores); the client hears each removal.
	 */
	ep->max_delete = o->max_delete;
	ep->delete_tell_peer = true;
	/* The client's rules (its FILTER before this OPEN): what they exclude is kept. */
	if (c->have_filter) {
		ep->delete_keep = filter_protects;
		ep->delete_keep_ud = &c->filter;
	}
	ep->partial_max_age_s = c->cfg->partial_max_age_s;
	/* The module's metadata rule (policy.h): files belong to whoever the session runs as. */
	ep->keep_setid = gr->meta.keep_setid;
	ep->conceal = gr->conceal;
	ep->perm_where = c->side[0] ? c->side : NULL;
	ep->umask = gr->meta.umask;
	/* 'devices = yes': an existing block device by its name is written in place. */
	ep->write_devices = gr->devices;
	/* The module's limits count every push of this connection together. */
	limits->max_file_size = gr->max_file_size;
	limits->max_session_bytes = gr->session_bytes_left;
	ep->limits = limits;
	ep->ev = (struct engine_events){ .file_ok = ev_file_ok,
					 .file_failed = ev_file_failed,
					 .progress = ev_progress,
					 .file_skipped = ev_file_skipped,
					 .notice = ev_notice,
					 .deleted = ev_deleted,
					 .file_resumed = ev_file_resumed,
					 .planned = ev_planned,
					 .ud = c };
	ep->stop = c->stop;
	/* A relayed push: what lands is told to the relay child (serve_relay.c). */
	ep->relay_feed = serve_relay_feed(c);
}

/* ", N updated, N unchanged" and --delete's tally, for the "done" line. */
static void format_kept(const struct msg_open *o, const struct engine_stats *st, char *buf,
			size_t len)
{
	if (st->files_skipped || st->files_updated) {
		snprintf(buf, len, ", %llu updated, %llu unchanged",
			 (unsigned long long)st->files_updated,
			 (unsigned long long)st->files_skipped);
	}
	if (o->flags & PROTO_OPEN_DELETE) {
		size_t n = strlen(buf);

		snprintf(buf + n, len - n, ", %llu deleted%s",
			 (unsigned long long)st->files_deleted,
			 st->delete_suppressed ? " (failures: nothing deleted)"
			 : st->delete_withheld ? " (--max-delete reached)"
					       : "");
	}
}

/* What was not sent: resumed, zeros, unchanged blocks (--delta), for the "done" line. */
static void format_resumed(const struct engine_stats *st, char *buf, size_t len)
{
	if (st->files_resumed) {
		snprintf(buf, len, ", %llu resumed (%llu bytes kept, not sent)",
			 (unsigned long long)st->files_resumed,
			 (unsigned long long)st->bytes_resumed);
	}
	if (st->bytes_zero) {
		size_t n = strlen(buf);

		snprintf(buf + n, len - n, ", %llu bytes as zeros",
			 (unsigned long long)st->bytes_zero);
	}
	if (st->bytes_unchanged) {
		size_t n = strlen(buf);

		snprintf(buf + n, len - n, ", %llu bytes unchanged (--delta)",
			 (unsigned long long)st->bytes_unchanged);
	}
}

/* The copy's totals: a dry run's plan, or what was moved. */
static void log_transfer_done(const struct conn *c, const struct msg_open *o,
			      const struct policy_grant *gr, bool pull, bool dry_run,
			      const struct engine_stats *st)
{
	char skipped[120] = "", resumed[256] = "";

	format_kept(o, st, skipped, sizeof(skipped));
	if (dry_run) {
		log_info("%s (%s): dry run of a %s %s: %llu would be copied, %llu failed%s",
			 c->peer, c->id, pull ? "pull from" : "push to", gr->m->name,
			 (unsigned long long)st->files_planned,
			 (unsigned long long)st->files_failed, skipped);
		return;
	}
	format_resumed(st, resumed, sizeof(resumed));
	if (st->packed_slots) {
		log_debug("%s: %llu files travelled packed in %llu slots", c->peer,
			  (unsigned long long)st->files_packed,
			  (unsigned long long)st->packed_slots);
	}
	if (st->uring_overflows) {
		log_debug("%s: io_uring's completion queue was full %llu times", c->peer,
			  (unsigned long long)st->uring_overflows);
	}
	if (st->worker_digests) {
		log_debug("%s: %llu chunk digests made on workers (mask 0x%x), %llu in the pass "
			  "that copied, opened or sealed the chunk",
			  c->peer, (unsigned long long)st->worker_digests, st->worker_digest_mask,
			  (unsigned long long)st->fused_digests);
	}
	log_info("%s (%s): %s %s done: %llu files, %llu bytes, %llu failed%s%s%s", c->peer, c->id,
		 pull ? "pull from" : "push to", gr->m->name, (unsigned long long)st->files_ok,
		 (unsigned long long)st->bytes, (unsigned long long)st->files_failed, skipped,
		 resumed, serve_relay_note(c));
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
	struct engine_params ep = *ep_in;
	struct engine_limits limits = { 0 };
	struct engine_stats st;
	uint32_t code = 0;
	char err[512];
	int r;

	session_engine_params(c, o, gr, basefd, rename_to, pull_srcs, x, &limits, &ep);
	c->last_progress = 0;
	r = engine_run(&ep, &st, &code, err, sizeof(err));
	explicit_bzero(ep.seal_secret, sizeof(ep.seal_secret));
	if (x) {
		policy_account(&c->used, gr, st.bytes_accepted);
		x->ops->destroy(x);
	}
	if (r < 0) {
		char esc[4 * sizeof(err)];

		/* err may quote the peer's ERROR text or a file name (SECURITY.md G46). */
		log_notice("%s (%s): transfer failed: %s: %s", c->peer, c->id, proto_err_name(code),
			   log_escape(err, esc, sizeof(esc)));
		return r;
	}
	log_transfer_done(c, o, gr, pull_srcs != NULL, x == NULL, &st);
	return 0;
}

/* The engine's test faults, from the environment the tests start rdmacpd with. */
static void test_faults(struct engine_params *ep)
{
	ep->faults = getenv("RDMACPD_TEST_FLIP_BYTE") ? ENGINE_FAULT_FLIP_BYTE : 0;
	ep->faults |= getenv("RDMACPD_TEST_COPY_SLOTS") ? ENGINE_FAULT_COPY_SLOTS : 0;
	ep->faults |= getenv("RDMACPD_TEST_SLOW_DISK") ? ENGINE_FAULT_SLOW_DISK : 0;
	ep->faults |= getenv("RDMACPD_TEST_NO_REPOST") ? ENGINE_FAULT_NO_REPOST : 0;
	ep->faults |= getenv("RDMACPD_TEST_SLOW_HASH") ? ENGINE_FAULT_SLOW_HASH : 0;
	ep->faults |= getenv("RDMACPD_TEST_READ_EAGAIN") ? ENGINE_FAULT_READ_EAGAIN : 0;
	ep->faults |= getenv("RDMACPD_TEST_SMALL_RING") ? ENGINE_FAULT_SMALL_RING : 0;
	if (getenv("RDMACPD_TEST_KILL_LANES")) {
		ep->faults |= ENGINE_FAULT_KILL_LANE;
		ep->test_kill_lanes =
		    (unsigned)strtoul(getenv("RDMACPD_TEST_KILL_LANES"), NULL, 10);
	}
}

/* Set up the data connection the client asked for, then run the engine. */
static int run_transfer_pinned(struct conn *c, const struct msg_open *o,
			       const struct policy_grant *gr, int basefd, const char *rename_to,
			       struct get_source *pull_srcs)
{
	char who[128];
	struct lanes_want w = {
		.transport = o->transport,
		.write_send = o->flags & PROTO_OPEN_WRITE_SEND,
		.encrypt = o->flags & PROTO_OPEN_ENCRYPT ? o->encrypt : 0,
		.encrypt_asked = o->flags & PROTO_OPEN_ENCRYPT,
		.encryption = gr->encryption,
		.who = who,
		.purpose = pull_srcs ? LANE_SEAL_PULL : LANE_SEAL_PUSH,
		.lanes = o->lanes,
		.tos = gr->tos,
		.hash_threads = true,
		.test_hooks = true,
		.rails = true,
		.what = "data",
	};
	struct engine_params ep = { ENGINE_NO_FEEDS };
	struct xport *x = NULL;
	struct lanes ln;
	int r;

	snprintf(who, sizeof(who), "module '%s'", gr->m->name);
	/* The daemon sends a pull from its own pool and receives a push into its ring. */
	ep.role = pull_srcs ? ENGINE_SENDER : ENGINE_RECEIVER;
	serve_lanes_size(c->cfg, o->chunk_size, o->slots, &ep);
	if (pull_srcs) {
		ep.pool_chunks = (uint32_t)MAX(c->cfg->pool_size / ep.chunk_size / 2, 2);
	}
	test_faults(&ep);
	r = serve_lanes_open(c, &w, &ep, &ln, &x);
	if (r < 0) {
		return r;
	}
	log_info("%s (%s): %s %s: %u %s lanes%s%s, %s%s%s", c->peer, c->id,
		 pull_srcs ? "pull from" : "push to", gr->m->name, ln.xp.nlanes, ln.ops->name,
		 ln.xp.write_send ? " (WRITE + SEND)" : "",
		 ln.xp.windows ? " (fenced by memory windows)" : "",
		 ln.sealed ? "encrypted (" : "in clear", ln.sealed ? serve_lanes_cipher(&ln) : "",
		 ln.sealed ? ")" : "");
	if (ep.hash_threads > 0) {
		log_debug("%s: %u hashing threads", c->peer, ep.hash_threads);
	}
	if (pull_srcs) {
		/* The client names what it wants once the lanes are up. */
		r = serve_expand_get(c, gr, basefd, o->flags & PROTO_OPEN_RECURSIVE, pull_srcs);
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

int serve_transfer(struct conn *c, const struct msg_open *o, const struct policy_grant *gr,
		   int basefd, const char *rename_to, struct get_source *pull_srcs)
{
	int r = run_transfer_pinned(c, o, gr, basefd, rename_to, pull_srcs);

	if (c->sessions) {
		session_table_release(c->sessions);
	}
	return r;
}

/*
 * A probe (proto_open_is_probe), after its END: the engine on the control
 * channel alone. It pins and reserves nothing.
 */
int serve_probe(struct conn *c, const struct msg_open *o, const struct policy_grant *gr, int basefd,
		const char *rename_to, struct get_source *pull_srcs)
{
	struct engine_params ep = { ENGINE_NO_FEEDS };

	return run_session_engine(c, o, gr, basefd, rename_to, pull_srcs, NULL, &ep);
}
