/* SPDX-License-Identifier: MIT */
/*
 * Running a transfer (transfer.h): the engine over the lanes, each event it
 * reports told to the user (output.c), the summary, and the one exit code
 * (src/exitcodes.h) for what committed and what failed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exitcodes.h"
#include "fanout.h"
#include "fspath.h"
#include "lane_seal.h"
#include "log.h"
#include "transfer.h"
#include "xport.h"

/* What a failed engine_run says. */
#define ENGINE_ERR_LEN 1200

int transfer_finish(struct xfer *x, const struct engine_stats *st, uint64_t local_failures, int rc)
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

	if (x->fanout && fanout_bypass(x->fanout, &t, rc)) {
		/* Said already; the next destination is tried, and its summary tells of all. */
		output_release(&x->out);
		return rc;
	}
	if (x->fanout) {
		rc = fanout_conclude(x->fanout, &x->out, &t, rc);
	}
	output_summary(&x->out, &t, x->transport, rc);
	output_release(&x->out);
	return rc;
}

static void ev_ok(void *ud, const struct engine_entry_ev *ev)
{
	struct xfer *x = ud;

	output_file(&x->out, ev->name, ev->ftype, ev->bytes, ev->zero_bytes, ev->skipped_bytes,
		    ev->seconds, ev->hash, ev->tree_chunk, ev->items);
}

static void ev_resumed(void *ud, const char *name, uint64_t sent, uint64_t kept, uint64_t zero,
		       uint64_t skipped, double secs, const uint8_t h[16], uint32_t tree,
		       uint32_t items)
{
	struct xfer *x = ud;

	output_resumed(&x->out, name, sent, kept, zero, skipped, secs, h, tree, items);
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

static char *last_component(const char *path)
{
	char buf[PROTO_MAX_PATH + 1];

	return fspath_last_component(path, buf, sizeof(buf)) < 0 ? NULL : strdup(buf);
}

bool transfer_names_contents(const char *path)
{
	_cleanup_free_ char *copy = strdup(path);

	return copy && fspath_strip_contents_dot(copy);
}

char *transfer_source_name(const char *path)
{
	return transfer_names_contents(path) ? strdup("") : last_component(path);
}

/* The local path of a wire name: the source it came from, or where it would land. */
static char *local_path(const struct xfer *x, const char *name)
{
	char *p;

	/*
	 * A push: the operand the entry came from, as typed, and the rest of the
	 * wire name under it (entries in a tree are opened from their
	 * directory's fd, so the walk holds no full path for them).
	 */
	for (int i = 0; i < x->nargs; i++) {
		_cleanup_free_ char *top = transfer_source_name(x->args[i]);
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

void transfer_walk_warning(void *ud, const char *path, const char *why)
{
	char esc[1024];

	(void)ud;
	/* Shortened in the middle: the reason after it must survive the line. */
	log_warning("%s: %s", log_escape_short(path, esc, sizeof(esc)), why);
}

static void ev_notice(void *ud, const char *name, const char *text)
{
	transfer_walk_warning(ud, name, text);
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

/* ok NULL: a probe (a dry run with --skip or --delete), on the control channel alone. */

/* The engine's events, told to the user (output.c). */
static const struct engine_events transfer_events = {
	.file_ok = ev_ok,
	.file_failed = ev_failed,
	.progress = ev_progress,
	.file_skipped = ev_skipped,
	.notice = ev_notice,
	.deleted = ev_deleted,
	.delete_withheld = ev_delete_withheld,
	.file_resumed = ev_resumed,
	.planned = ev_planned,
};

/* What the engine takes from the options, OPEN_OK (ok; NULL: a probe) and the tests. */
static void engine_setup(struct daemon_conn *s, struct xfer *x, struct engine_params *ep,
			 const struct msg_open_ok *ok, struct xport *xp)
{
	const struct client_opts *o = s->o;

	ep->chan = &s->chan;
	ep->x = xp;
	ep->chunk_size = ok ? ok->chunk_size : o->chunk_size;
	ep->slots = ok ? ok->slots : o->slots;
	ep->pool_chunks = MAX(o->pool_chunks, 2u);
	ep->idle_timeout_ms = o->idle_timeout_s * 1000;
	ep->faults = getenv("RDMACP_TEST_SLOW_DISK") ? ENGINE_FAULT_SLOW_DISK : 0;
	ep->faults |= getenv("RDMACP_TEST_SLOW_HASH") ? ENGINE_FAULT_SLOW_HASH : 0;
	ep->faults |= getenv("RDMACP_TEST_READ_EAGAIN") ? ENGINE_FAULT_READ_EAGAIN : 0;
	ep->faults |= getenv("RDMACP_TEST_SMALL_RING") ? ENGINE_FAULT_SMALL_RING : 0;
	ep->faults |= getenv("RDMACP_TEST_MW_REWRITE") ? ENGINE_FAULT_MW_REWRITE : 0;
	/* Tests: a pull's receiver changes a byte of each file's first chunk (t_file_tree). */
	ep->faults |= getenv("RDMACP_TEST_FLIP_BYTE") ? ENGINE_FAULT_FLIP_BYTE : 0;
	/* Tests: take this many data lanes down mid-transfer. */
	if (getenv("RDMACP_TEST_KILL_LANES")) {
		ep->faults |= ENGINE_FAULT_KILL_LANE;
		ep->test_kill_lanes = (unsigned)strtoul(getenv("RDMACP_TEST_KILL_LANES"), NULL, 10);
	}
	ep->busy_poll = o->busy_poll;
	ep->hash_threads =
	    engine_hash_threads(o->hash_threads, xp && xp->ops->kind == XPORT_KIND_VERBS);
	if (ep->hash_threads > 0) {
		log_debug("%u hashing threads", ep->hash_threads);
	}
	ep->peer_caps = s->hello.caps;
	ep->ev = transfer_events;
	ep->ev.ud = x;
	ep->stop = &transfer_interrupted;
}

/* The start of a run for the user: the pool fitted, the lanes (none in a probe). */
static void tell_start(const struct daemon_conn *s, struct xfer *x, enum engine_role role,
		       const struct msg_open_ok *ok)
{
	if (s->have_fit) {
		output_memory(&x->out, s->fit.unlimited ? 0 : s->fit.limit, s->fit.pool,
			      s->fit.chunk, s->fit.chunks, s->fit.fitted);
	}
	if (ok) {
		x->out.ring_slots = ok->slots;
		x->out.fence = ok->transport != XPORT_KIND_VERBS ? NULL
			       : s->windows			 ? "windows"
								 : "copy";
		output_start(&x->out, role == ENGINE_SENDER ? "push" : "pull", s->rem->host,
			     transfer_transport_name(ok->transport),
			     ok->transport == XPORT_KIND_VERBS
				 ? xport_path_name(s->write_send ? XPORT_PATH_WRITE_SEND
								 : XPORT_PATH_WRITE_IMM)
				 : NULL,
			     ok->lanes, (int)lane_seal_lanes_suite(ok->lanes_sealed), s->clear_why);
	}
}

/*
 * The daemon ended the transfer because it is going away (SIGTERM: a stop or
 * a restart, its drain over): not our Ctrl-C, and worth another try.
 */
static int daemon_stopping(const struct daemon_conn *s)
{
	log_error("transfer failed: the daemon on %s is shutting down (stopped or restarting)",
		  s->rem->host);
	if (s->o->partial) {
		log_error("run the same command again once it is back: --partial resumes where "
			  "this one stopped");
	} else {
		log_error("run the command again once it is back (with --partial a cut copy "
			  "resumes where it stopped)");
	}
	return EXIT_DAEMON_STOPPING;
}

/* The exit code of an engine that failed (r < 0): code is its PERR_*, err what it said. */
static int exit_for_engine(const struct daemon_conn *s, int r, uint32_t code, const char *err)
{
	char esc[4 * ENGINE_ERR_LEN];

	if (r == -EREMOTEIO && code == PERR_SHUTDOWN && !transfer_interrupted) {
		return daemon_stopping(s);
	}
	/* err may quote the daemon's ERROR text or a name. */
	log_error("transfer failed: %s", log_escape(err, esc, sizeof(esc)));
	if (transfer_interrupted) {
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

int transfer_run_engine(struct daemon_conn *s, struct xfer *x, struct engine_params *ep,
			const struct msg_open_ok *ok, struct engine_stats *st)
{
	/* A push's lane keys are never a pull's (lane_seal_export). */
	enum lane_seal_purpose purpose =
	    ep->role == ENGINE_SENDER ? LANE_SEAL_PUSH : LANE_SEAL_PULL;
	struct xport *xp = NULL;
	uint32_t code = 0;
	char err[ENGINE_ERR_LEN];
	int rc, r;

	rc = ok ? daemon_conn_connect_data(s, ok, purpose, ep, &xp) : 0;
	if (rc != 0) {
		return rc;
	}
	if (x->nget && transfer_send_get(s, x->get_paths, x->nget) < 0) {
		if (xp) {
			xp->ops->destroy(xp);
		}
		log_error("control channel write failed");
		return EXIT_CONNECT;
	}
	tell_start(s, x, ep->role, ok);
	engine_setup(s, x, ep, ok, xp);
	/* The rate counts the transfer, not a busy daemon's wait or the set-up before. */
	output_clock_start(&x->out);
	r = engine_run(ep, st, &code, err, sizeof(err));
	explicit_bzero(ep->seal_secret, sizeof(ep->seal_secret));
	if (xp) {
		xp->ops->destroy(xp);
	}
	return r < 0 ? exit_for_engine(s, r, code, err) : 0;
}

int transfer_done(struct xfer *x, const struct engine_stats *st, uint64_t local_failures,
		  bool probe)
{
	const struct client_opts *o = x->o;

	x->completed = true;
	if (o->mirror) {
		output_mirror(&x->out, st->files_deleted, st->delete_withheld,
			      st->delete_suppressed || local_failures > 0,
			      st->files_failed + local_failures, o->max_delete);
	}
	if (o->dry_run) {
		return transfer_finish(x, st, local_failures,
				       probe ? exit_for_probe(st, local_failures)
					     : exit_for_stats(st, local_failures));
	}
	return transfer_finish(x, st, local_failures,
			       exit_for_mirror(st, exit_for_stats(st, local_failures)));
}
