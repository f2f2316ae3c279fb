/* SPDX-License-Identifier: MIT */
/*
 * rdmacp finalize PLAN [--delete] (migrate.h): every entry's outcome
 * checked in the merged journals (split files changed meanwhile marked to
 * send again), the journals' word proven at the destination
 * (migrate_verify.c), the split files assembled (migrate_assemble.c), then
 * the directories and symlinks made again, or with --delete the tree pushed
 * again with the daemon mirroring; in finalize's own journal.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "client.h"
#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "migrate.h"
#include "plan.h"

/*
 * finalize_load's pass: each entry's outcome merged, and the directories
 * and symlinks listed (dirs; NULL with --delete, whose mirror makes them)
 * for finalize_dirs, once the proof holds: no second pass of the plan.
 */
struct load_pass {
	struct merged *m;
	FILE *dirs; /* the names, each ended by a NUL */
};

static int load_entry(void *ud, const struct plan_entry *e)
{
	struct load_pass *lp = ud;
	int rc = merged_entry(lp->m, e);

	if (rc == 0 && lp->dirs && (e->ftype == PROTO_FT_DIR || e->ftype == PROTO_FT_SYMLINK)) {
		fputs(e->name, lp->dirs);
		fputc('\0', lp->dirs);
	}
	return rc;
}

/* --delete: the whole tree pushed again with -r and a skip level, the daemon mirroring. */
static int mirror_push(struct client_opts *o, const struct plan_header *h, const char *dest,
		       const char *top)
{
	_cleanup_free_ char *src = NULL;
	char *args[2];
	unsigned line;
	int r;

	if (asprintf(&src, "%s/%s", h->base, top) < 0) {
		return EXIT_LOCAL_IO;
	}
	o->recursive = true;
	o->mirror = true;
	o->files_from[0] = '\0';
	/* What was copied stays: at least the plan's skip level, quick with -p, else exists. */
	if (!o->skip) {
		o->skip = h->preserve ? PROTO_OPEN_SKIP_QUICK : PROTO_OPEN_SKIP_EXISTS;
	}
	if (h->filters) {
		r = filter_add_text(&o->filters, h->filters, strlen(h->filters), &line);
		if (r < 0) {
			log_error("the plan's filters, rule %u: %s", line, strerror(-r));
			return EXIT_BAD_PLAN;
		}
	}
	/* The staging directory of split files' parts is no extra to delete (nor counted). */
	r = filter_add_text(&o->filters, "- " PLAN_STAGING_PREFIX "*\n",
			    strlen("- " PLAN_STAGING_PREFIX "*\n"), &line);
	if (r < 0) {
		return EXIT_LOCAL_IO;
	}
	args[0] = src;
	args[1] = (char *)dest;
	return cmd_copy(o, args, 2);
}

/* A split file some of whose ranges were kept, others sent: the kept ones to send again. */
struct mixed_marks {
	struct merged *m;
	struct journal_marks jm;
	bool in; /* the pass is in the ranges of such a file */
};

static int mixed_entry(void *ud, const struct plan_entry *e)
{
	struct mixed_marks *mm = ud;
	const struct nameset_slot *s;
	char esc[1024];

	if (e->ranges) {
		s = nameset_get(&mm->m->final, e->name);
		mm->in = !(s && journal_state_done(s->state)) &&
			 split_kind(&mm->m->ns, e, NULL) == SPLIT_MIXED;
		if (mm->in) {
			log_error(
			    "%s: changed during the migration (some of its ranges were sent, "
			    "others kept as unchanged): the kept ones are marked to send again",
			    log_escape_short(e->name, esc, sizeof(esc)));
		}
	} else if (e->ftype == PLAN_FT_RANGE && mm->in) {
		s = nameset_get_range(&mm->m->ns, e->name, e->range);
		if (s && s->state == JOURNAL_SKIPPED) {
			marks_put(&mm->jm, e->shard, e->name, e->range, "CHANGED");
		}
	}
	return 0;
}

static int finalize_mixed(struct merged *m, const char *plan)
{
	struct mixed_marks mm = { .m = m };
	char shards[256];
	int rc;

	if (marks_init(&mm.jm, plan, m->h) < 0) {
		return EXIT_LOCAL_IO;
	}
	rc = plan_pass(m->r, mixed_entry, &mm);
	marks_close_all(&mm.jm);
	if (rc == 0) {
		if (marks_shards(&mm.jm, shards, sizeof(shards)) == 0) {
			snprintf(shards, sizeof(shards), "that hold them (running now)");
		}
		log_error("not finished: %" PRIu64 " split files changed during the migration: run "
			  "shards %s again, then finalize",
			  m->split_mixed, shards);
		rc = EXIT_PARTIAL;
	}
	marks_free(&mm.jm);
	return rc;
}

/*
 * Whether every entry has its outcome: done, or a split file ready to
 * assemble or to keep, or a name the source lost that may stay lost (with
 * --delete, which removes its copy, or --missing-ok, given to finalize,
 * to the plan or to the runs). 0, or EXIT_PARTIAL said why.
 */
static int finalize_ready(struct merged *m, const struct client_opts *o, const char *plan,
			  bool mirror)
{
	uint64_t pending = m->by_state[0] - m->split_ready;

	if (m->split_mixed > 0) {
		return finalize_mixed(m, plan);
	}
	if (m->vanished > m->vanished_accepted && !mirror && !o->missing_ok && !m->h->missing_ok &&
	    pending == 0 && m->by_state[JOURNAL_FAILED] == 0) {
		log_error("%" PRIu64 " entries vanished from the source since the plan (rdmacp "
			  "report lists them): finalize --delete removes their copies, "
			  "--missing-ok leaves the destination as it is; or make a new plan",
			  m->vanished);
		return EXIT_PARTIAL;
	}
	if (merged_done(m) + m->split_ready + m->vanished != m->h->entries) {
		merged_summary(m, o, false);
		log_error("not finished: %" PRIu64 " of %" PRIu64
			  " entries have no outcome, %" PRIu64
			  " failed: run the shards above again (their journals keep what is done), "
			  "then finalize",
			  pending, m->h->entries, m->by_state[JOURNAL_FAILED]);
		return EXIT_PARTIAL;
	}
	return 0;
}

static int first_entry(void *ud, const struct plan_entry *e)
{
	char *top = ud;

	if (!top[0]) {
		snprintf(top, PROTO_MAX_PATH + 1, "%s", e->name);
	}
	return 0;
}

/*
 * The plan and its journals merged, every entry's outcome there, and
 * --delete given a plan of one tree. 0 or an exit code (said why).
 */
static int finalize_load(struct merged *m, struct client_opts *o, const char *plan, bool mirror,
			 FILE *dirs)
{
	struct load_pass lp = { .m = m, .dirs = mirror ? NULL : dirs };
	int rc = merged_load(m, plan);

	if (rc == 0) {
		rc = plan_pass(m->r, load_entry, &lp);
	}
	if (rc == 0) {
		rc = merged_foreign(m, plan);
	}
	if (rc == 0) {
		rc = finalize_ready(m, o, plan, mirror);
	}
	if (rc == 0 && mirror && (!m->h->recursive || m->h->files_from)) {
		log_error("finalize --delete needs a plan of one tree (-r, without --files-from)");
		rc = EXIT_USAGE;
	}
	return rc;
}

/* --delete: the tree pushed again from its top, with finalize's --max-delete. */
static int finalize_mirror(struct merged *m, struct client_opts *o, const char *dest,
			   uint64_t max_delete, bool have_max)
{
	char top[PROTO_MAX_PATH + 1] = "";
	int rc;

	o->max_delete = max_delete;
	o->have_max_delete = have_max;
	rc = plan_pass(m->r, first_entry, top);
	if (rc == 0) {
		rc = mirror_push(o, m->h, dest, top);
	}
	return rc;
}

/*
 * Without --delete: the directories and symlinks again (no journal's word
 * is taken for them: they cost no data to make again, and with -p the
 * directories get their modes and times now their contents are in), read
 * back from the list finalize_load made, in pushes of RUN_BATCH names.
 */
static int finalize_dirs(struct runner *ru, FILE *dirs)
{
	_cleanup_free_ char *name = NULL;
	size_t cap = 0;
	int rc = 0;

	if (fflush(dirs) != 0 || fseek(dirs, 0, SEEK_SET) < 0 ||
	    batch_open(&ru->list, ru->jpath, "list") < 0) {
		rc = EXIT_LOCAL_IO;
	}
	while (rc == 0 && !ru->stop && getdelim(&name, &cap, '\0', dirs) > 0) {
		batch_add(&ru->list, name);
		if (ru->list.n >= RUN_BATCH) {
			run_result(ru, run_push(ru, &ru->list));
		}
	}
	if (rc == 0 && ferror(dirs)) {
		rc = EXIT_LOCAL_IO;
	}
	if (rc == 0 && !ru->stop && ru->list.n > 0) {
		run_result(ru, run_push(ru, &ru->list));
	}
	rc = rc ? rc : ru->rc;
	if (ru->list.f) {
		fclose(ru->list.f);
		unlink(ru->list.path);
	}
	return rc;
}

/*
 * The journals' word checked at every destination first (the plan's first
 * host, or with --every-host each): nothing changes unless it holds at all
 * of them. Then the split files: assembling them changes their
 * directories' times. Then the directories and symlinks again (one push:
 * a fan-out with several destinations), or --delete's mirror at each.
 */
static int finalize_at(struct merged *m, struct client_opts *o, struct journal_writer *j,
		       struct runner *ru, FILE *dirs, const char *plan, bool mirror,
		       uint64_t max_delete, bool have_max)
{
	int rc = 0;

	for (size_t k = 0; k < ru->ndests && (rc == 0 || rc == EXIT_DIFFERENT); k++) {
		int q = verify_all(m, o, j, plan, ru->jpath, ru->dests[k]);

		rc = rc ? rc : q;
	}
	for (size_t k = 0; k < ru->ndests && rc == 0 && m->split_ready > 0; k++) {
		rc = assemble_all(m, o, j, plan, ru->dests[k]);
	}
	copy_set_observer(journal_observe, j);
	if (rc != 0) {
		/* Nothing more: a failed assembly is said, its parts kept for another try. */
	} else if (mirror) {
		for (size_t k = 0; k < ru->ndests && rc == 0; k++) {
			rc = finalize_mirror(m, o, ru->dests[k], max_delete, have_max);
			apply_plan_options(o, m->h);
		}
	} else {
		rc = finalize_dirs(ru, dirs);
	}
	copy_set_observer(NULL, NULL);
	return rc;
}

/*
 * Once finalized: its own journal read again and the outcomes merged again
 * for the summary (the shards' journals, which a finalize that succeeds
 * does not write, as loaded).
 */
static int finalize_summary(struct merged *m, struct client_opts *o, const char *plan)
{
	int rc = merged_final_again(m, plan);

	if (rc == 0) {
		merged_summary(m, o, o->json);
	}
	return rc;
}

/*
 * The list of directories and symlinks: a file next to the journal, its
 * name unlinked at once (a finalize started beside this one, refused by
 * journal_begin, touches nothing of it). 0 or -errno.
 */
static int dirs_list_open(const char *jpath, FILE **ret)
{
	char path[JOURNAL_PATH_MAX + 16];
	int fd;
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s.dirs.XXXXXX", jpath) >= sizeof(path)) {
		return -ENAMETOOLONG;
	}
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0) {
		return -errno;
	}
	unlink(path);
	f = fdopen(fd, "w+");
	if (!f) {
		int r = -errno;

		close(fd);
		return r;
	}
	*ret = f;
	return 0;
}

/*
 * Once the plan is loaded and ready: finalize's work in its own journal,
 * then (when it succeeded) the summary. One finalize at a time.
 */
static int finalize_journaled(struct merged *m, struct client_opts *o, struct runner *ru,
			      FILE *dirs, const char *plan, bool mirror, uint64_t max_delete,
			      bool have_max)
{
	struct journal_writer j = { 0 };
	struct nameset ignored = { 0 };
	double t0 = now_seconds();
	int rc;

	ru->h = m->h;
	rc = journal_begin(ru->jpath, "finalize", m->h, -1, &ignored, &j);
	nameset_free(&ignored);
	if (rc != 0) {
		return rc;
	}
	apply_plan_options(o, m->h);
	rc = runner_dests(ru, 0);
	if (rc == 0) {
		rc = finalize_at(m, o, &j, ru, dirs, plan, mirror, max_delete, have_max);
	}
	runner_dests_free(ru);
	if (journal_end(&j, rc, now_seconds() - t0) < 0 && rc == 0) {
		rc = EXIT_LOCAL_IO;
	}
	if (rc == 0 && o->verbose >= 0) {
		rc = finalize_summary(m, o, plan);
	}
	return rc;
}

int cmd_finalize(struct client_opts *o, char **args, int nargs)
{
	struct merged m = { .o = o };
	struct runner ru = { .o = o };
	_cleanup_fclose_ FILE *dirs = NULL;
	bool mirror = o->mirror, have_max = o->have_max_delete;
	uint64_t max_delete = o->max_delete;
	char esc[1024];
	int rc;

	if (nargs != 1) {
		log_error("usage: rdmacp finalize PLAN [--jobs N] [--delete [--max-delete N]]");
		return EXIT_USAGE;
	}
	if (have_max && !mirror) {
		log_error("--max-delete needs --delete");
		return EXIT_USAGE;
	}
	if (journal_path(args[0], UINT32_MAX, ru.jpath, sizeof(ru.jpath)) < 0) {
		log_error("%s: the plan's path is too long for its journal's",
			  log_escape_short(args[0], esc, sizeof(esc)));
		return EXIT_USAGE;
	}
	rc = dirs_list_open(ru.jpath, &dirs);
	if (rc < 0) {
		log_error_errno(rc, "%s: a list next to it: %m",
				log_escape_short(ru.jpath, esc, sizeof(esc)));
		return EXIT_LOCAL_IO;
	}
	rc = finalize_load(&m, o, args[0], mirror, dirs);
	if (rc == 0) {
		rc = finalize_journaled(&m, o, &ru, dirs, args[0], mirror, max_delete, have_max);
	}
	merged_free(&m);
	return rc;
}
