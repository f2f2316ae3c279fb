/* SPDX-License-Identifier: MIT */
/*
 * finalize's split files (migrate.h): each whose ranges are all sent
 * assembled by the daemon from its parts (ASSEMBLE, the parts' digests
 * checked there), each whose ranges were all kept pushed whole at the keep
 * level; the outcome in finalize's journal, the ranges of one that could
 * not be assembled marked to send again.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "daemon_conn.h"
#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "migrate.h"
#include "output.h"
#include "plan.h"

/* finalize: each split file whose ranges are all done, assembled by the daemon (ASSEMBLE). */
struct assembler {
	struct merged *m;
	struct client_opts *o;
	struct journal_writer *j;
	struct remote rem;
	struct daemon_conn s;
	bool open;
	struct msg req; /* the file being gathered: u.assemble, parts for PLAN_MAX_RANGES */
	char name[PROTO_MAX_PATH + 1], staging[64];
	uint64_t n;	    /* its entry number (the parts are named N.R) */
	uint32_t *shard_of; /* each range's shard (PLAN_MAX_RANGES) */
	const char *plan;
	uint32_t ranges;
	bool active;  /* gathering its ranges */
	bool discard; /* of a file that vanished: its parts to remove (PROTO_ASM_DISCARD) */
	bool said_no_discard;
	uint64_t done, failed, kept, discarded;
	struct batch keep; /* split files kept by their shards, for keep_push */
	int rc;
};

static int assembler_connect(struct assembler *as)
{
	int rc;

	if (as->open) {
		return 0;
	}
	as->s = (struct daemon_conn){ .o = as->o, .rem = &as->rem };
	rc = daemon_conn_open_waiting(&as->s, NULL, NULL, NULL);
	if (rc != 0) {
		daemon_conn_close(&as->s, false);
		return rc;
	}
	if (!(as->s.hello.caps & PROTO_CAP_ASSEMBLE)) {
		log_error(
		    "%s: the daemon is too old for split files (it can't assemble their parts): "
		    "upgrade it, or plan without --split-size",
		    as->rem.host);
		daemon_conn_close(&as->s, true);
		return EXIT_VERSION;
	}
	as->open = true;
	return 0;
}

/*
 * The parts of a file that could not be assembled are no longer done: each
 * range marked failed in its shard's journal, so that a run of the shard
 * sends it again.
 */
static void unmark_ranges(struct assembler *as)
{
	const struct msg_assemble *a = &as->req.u.assemble;
	struct journal_marks jm;
	char esc[1024];

	if (marks_init(&jm, as->plan, as->m->h) < 0) {
		log_warning("%s: out of memory marking its ranges to send again",
			    log_escape_short(a->name, esc, sizeof(esc)));
		return;
	}
	for (uint32_t i = 0; i < a->count; i++) {
		marks_put(&jm, as->shard_of[i], a->name, i, "ASSEMBLY");
	}
	marks_free(&jm);
}

/* A file the daemon did not assemble: said, journaled failed, the session ended. An exit code. */
static int assemble_refused(struct assembler *as, struct msg *reply, const char *esc)
{
	struct msg_assemble *a = &as->req.u.assemble;
	char text[4 * PROTO_MAX_TEXT + 1];
	int rc;

	if (reply->type == MSG_ERROR) {
		log_error("%s: %s not assembled: %s", as->rem.host, esc,
			  log_escape(reply->u.error.text, text, sizeof(text)));
		rc = exit_for_perr(reply->u.error.code);
		journal_put_entry(as->j->f, a->name, JOURNAL_FAILED, 0,
				  proto_err_name(reply->u.error.code));
		if (reply->u.error.code == PERR_ASSEMBLY) {
			unmark_ranges(as);
			log_error("%s: its ranges are marked to send again: run their shards, then "
				  "finalize",
				  esc);
		}
	} else {
		log_error("%s: assembling %s: unexpected %s", as->rem.host, esc,
			  proto_type_name(reply->type));
		rc = EXIT_PROTOCOL;
	}
	journal_sync(as->j);
	as->failed++;
	msg_clear(reply);
	/* After an ERROR the daemon ends the session: a new one for the next file. */
	daemon_conn_close(&as->s, false);
	as->open = false;
	return rc;
}

/* One ASSEMBLE and its answer; the outcome journaled. 0, or an exit code for the run. */
static int assemble_one(struct assembler *as)
{
	struct msg_assemble *a = &as->req.u.assemble;
	char esc[1024];
	struct msg reply;
	/* Long enough to read a big file twice at 100 MB/s on a slow disk. */
	int timeout_ms = (int)MIN((uint64_t)INT32_MAX, 60000 + a->size / 50000);
	int rc = assembler_connect(as), r;

	if (rc != 0) {
		return rc;
	}
	log_escape_short(a->name, esc, sizeof(esc));
	if (chan_send(&as->s.chan, &as->req) < 0) {
		log_error("%s: control channel write failed", as->rem.host);
		daemon_conn_close(&as->s, false);
		as->open = false;
		return EXIT_CONNECT;
	}
	r = chan_recv(&as->s.chan, &reply, timeout_ms);
	if (r < 0) {
		log_error("%s: assembling %s: control channel: %s", as->rem.host, esc,
			  strerror(-r));
		daemon_conn_close(&as->s, false);
		as->open = false;
		return EXIT_TRANSPORT;
	}
	if (reply.type != MSG_ASSEMBLED || reply.u.assembled.size != a->size) {
		return assemble_refused(as, &reply, esc);
	}
	journal_put_entry(as->j->f, a->name, JOURNAL_COPIED, a->size, NULL);
	journal_sync(as->j);
	as->done++;
	if (as->o->verbose > 0) {
		fprintf(stderr, "assembled %s: %u parts, %" PRIu64 " bytes\n", esc, a->count,
			a->size);
	}
	msg_clear(&reply);
	return 0;
}

/*
 * The parts a file that vanished from the source left in staging, removed
 * by the daemon (PROTO_ASM_DISCARD); one that can't is said once, and
 * leaves them. Never a failure of finalize: its tree is whole without
 * them. 0, or an exit code when no daemon could be reached.
 */
static int discard_one(struct assembler *as)
{
	struct msg_assemble *a = &as->req.u.assemble;
	char esc[1024], text[4 * PROTO_MAX_TEXT + 1];
	struct msg reply;
	int rc = assembler_connect(as), r;

	if (rc != 0) {
		return rc;
	}
	log_escape_short(a->name, esc, sizeof(esc));
	if (!(as->s.hello.caps & PROTO_CAP_ASM_DISCARD)) {
		if (!as->said_no_discard) {
			log_warning("%s: the daemon can't remove the parts of split files that "
				    "vanished from the source (too old): they stay in its staging "
				    "directory",
				    as->rem.host);
		}
		as->said_no_discard = true;
		return 0;
	}
	r = chan_send(&as->s.chan, &as->req);
	if (r == 0) {
		r = chan_recv(&as->s.chan, &reply, 60000);
	}
	if (r < 0 || reply.type != MSG_ASSEMBLED || reply.u.assembled.size != 0) {
		log_warning("%s: the parts of %s (vanished from the source) not removed: %s",
			    as->rem.host, esc,
			    r < 0 ? strerror(-r)
			    : reply.type == MSG_ERROR
				? log_escape(reply.u.error.text, text, sizeof(text))
				: proto_type_name(reply.type));
		if (r == 0) {
			msg_clear(&reply);
		}
		daemon_conn_close(&as->s, false);
		as->open = false;
		return 0;
	}
	as->discarded++;
	if (as->o->verbose > 0) {
		fprintf(stderr, "removed the parts of %s: it vanished from the source\n", esc);
	}
	msg_clear(&reply);
	return 0;
}

/*
 * A split file's entry: the ASSEMBLE request begun, unless it is done, or
 * kept by its shards (listed for keep_push instead), or lost by the source.
 */
static void assemble_begin(struct assembler *as, const struct plan_entry *e)
{
	struct msg_assemble *a = &as->req.u.assemble;
	const struct plan_header *h = as->m->h;
	const struct nameset_slot *f = nameset_get(&as->m->final, e->name);
	struct stat st;
	char esc[1024];
	int r;

	as->active = !(f && journal_state_done(f->state));
	if (as->active && nameset_get(&as->m->kept, e->name)) {
		as->active = false;
		batch_add(&as->keep, e->name);
	}
	if (!as->active) {
		return;
	}
	as->ranges = e->ranges;
	snprintf(as->name, sizeof(as->name), "%s", e->name);
	as->n = e->n;
	a->name = as->name;
	a->size = e->size;
	a->count = 0;
	as->discard = split_kind(&as->m->ns, e, NULL) == SPLIT_VANISHED;
	if (as->discard) {
		/* Nothing is made: its parts are all the daemon looks at. */
		*a = (struct msg_assemble){ .flags = PROTO_ASM_DISCARD,
					    .path = a->path,
					    .name = a->name,
					    .staging = a->staging,
					    .size = e->size,
					    .parts = a->parts };
		return;
	}
	/* Without -p, as a push without it: the mode less group and other write, now. */
	a->mode = h->preserve ? e->mode : e->mode & 0755;
	a->mtime_sec = h->preserve ? e->mtime : (int64_t)time(NULL);
	a->mtime_nsec = h->preserve ? e->mtime_ns : 0;
	a->flags = 0;
	if (!h->owner) {
		return;
	}
	/* The plan has no owners: the source's, as a push would send them. */
	r = source_lstat(h->base, e->name, &st);
	if (r < 0) {
		log_error("%s: its owner: %s (not assembled)",
			  log_escape_short(e->name, esc, sizeof(esc)), strerror(-r));
		as->active = false;
		as->failed++;
		as->rc = as->rc ? as->rc : EXIT_LOCAL_IO;
		return;
	}
	a->flags = PROTO_ASM_OWNER;
	a->uid = st.st_uid;
	a->gid = st.st_gid;
}

static int assemble_entry(void *ud, const struct plan_entry *e)
{
	struct assembler *as = ud;
	struct msg_assemble *a = &as->req.u.assemble;

	if (e->ranges) {
		assemble_begin(as, e);
		return 0;
	}
	if (e->ftype != PLAN_FT_RANGE || !as->active) {
		return 0;
	}
	{
		struct proto_part *p = &a->parts[a->count++];
		const uint8_t *hash = rangeset_get(&as->m->digests, e->name, e->range);

		snprintf(p->name, sizeof(p->name), "%" PRIu64 ".%" PRIu32, as->n, e->range);
		as->shard_of[a->count - 1] = e->shard;
		p->offset = e->offset;
		p->len = e->size;
		if (!hash && as->discard) {
			memset(p->hash, 0, PROTO_HASH_LEN);
		} else if (!hash) {
			char esc[1024];

			log_error("%s: range %" PRIu32 " has no digest in its journal",
				  log_escape_short(e->name, esc, sizeof(esc)), e->range);
			as->active = false;
			as->failed++;
			as->rc = as->rc ? as->rc : EXIT_BAD_PLAN;
			return 0;
		} else {
			memcpy(p->hash, hash, PROTO_HASH_LEN);
		}
	}
	if (a->count == as->ranges) {
		int rc;

		as->active = false;
		rc = as->discard ? discard_one(as) : assemble_one(as);
		as->rc = as->rc ? as->rc : rc;
		/* No daemon to ask, or one that can't: the other files would fare the same. */
		if (rc == EXIT_VERSION || rc == EXIT_CONNECT || rc == EXIT_AUTH ||
		    rc == EXIT_CONFIG) {
			return rc;
		}
	}
	return 0;
}

/*
 * The split files whose shards kept every range (the destination had them
 * unchanged), already proven by verify_all: pushed whole at the keep level,
 * so that the daemon keeps their data and brings their metadata in line as
 * for any file a re-run skips. One the source changed since is sent whole
 * (verified as any push). The outcome in finalize's journal.
 */
static int keep_push(struct assembler *as, const char *dest)
{
	struct runner ru = { .o = as->o, .h = as->m->h };
	int rc;

	ru.dests[0] = (char *)dest;
	ru.ndests = 1;
	as->kept += as->keep.n;
	as->o->skip = split_keep_level(as->m->h);
	copy_set_observer(journal_observe, as->j);
	rc = run_push(&ru, &as->keep);
	copy_set_observer(NULL, NULL);
	apply_plan_options(as->o, as->m->h);
	journal_sync(as->j);
	return rc;
}

/* Every split file whose ranges are done and that is not assembled yet. 0 or an exit code. */
int assemble_all(struct merged *m, struct client_opts *o, struct journal_writer *j,
		 const char *plan, const char *dest)
{
	struct assembler as = { .m = m, .o = o, .j = j, .req.type = MSG_ASSEMBLE, .plan = plan };
	_cleanup_free_ uint32_t *shard_of = calloc(PLAN_MAX_RANGES, sizeof(uint32_t));
	char jpath[JOURNAL_PATH_MAX];
	int rc;

	if (parse_remote(dest, &as.rem) != 1) {
		return EXIT_USAGE;
	}
	as.shard_of = shard_of;
	as.req.u.assemble.parts = calloc(PLAN_MAX_RANGES, sizeof(struct proto_part));
	if (!as.req.u.assemble.parts || !shard_of ||
	    journal_path(plan, UINT32_MAX, jpath, sizeof(jpath)) < 0 ||
	    batch_open(&as.keep, jpath, "keep") < 0) {
		free(as.req.u.assemble.parts);
		return EXIT_LOCAL_IO;
	}
	plan_staging_dir(m->h, as.staging);
	as.req.u.assemble.path = (char *)m->h->path;
	as.req.u.assemble.staging = as.staging;
	rc = plan_pass(m->r, assemble_entry, &as);
	if (as.open) {
		daemon_conn_close(&as.s, true);
	}
	free(as.req.u.assemble.parts);
	if (rc == 0 && as.keep.n > 0) {
		rc = keep_push(&as, dest);
	}
	fclose(as.keep.f);
	unlink(as.keep.path);
	if (o->verbose >= 0 && !o->json && (as.done || as.failed || as.kept || as.discarded)) {
		fprintf(stderr,
			"split files: %" PRIu64 " assembled, %" PRIu64 " kept (unchanged), %" PRIu64
			" failed, %" PRIu64 " vanished (parts removed)\n",
			as.done, as.kept, as.failed, as.discarded);
	}
	return rc ? rc : as.rc;
}
