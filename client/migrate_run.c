/* SPDX-License-Identifier: MIT */
/*
 * rdmacp run PLAN --shard I/N|auto (migrate.h): the shard resolved (given,
 * or from the launcher's environment), its journal locked and checked
 * against the plan (read once: run_scan), then its skeleton of directories, its entries in
 * batches of RUN_BATCH names, the names of a file with other names in one
 * push, and its ranges of split files (migrate_ranges.c), each outcome
 * journaled.
 */
#include <errno.h>
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

static int parse_index(const char *s, uint64_t max, uint32_t *ret)
{
	char *end;
	unsigned long long v;

	if (!s || *s < '0' || *s > '9') {
		return -EINVAL;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max) {
		return -EINVAL;
	}
	*ret = (uint32_t)v;
	return 0;
}

/*
 * --shard auto: I and N from the launcher. Slurm array tasks, srun tasks, Open
 * MPI and PMI ranks, a Kubernetes Indexed Job's index (its count: --shards, or
 * the plan's). --shards, when given, is the count for all of them, and a Slurm
 * task's ID is then its shard as it is: an array of some indexes of the plan
 * (sbatch --array=17,230, a retry) runs those shards. Without it the array is
 * the plan's, whole: the task's place in it (its ID less SLURM_ARRAY_TASK_MIN)
 * is its shard, so --array=1-8 runs shards 0..7.
 */
static int shard_from_env(const struct client_opts *o, uint32_t plan_shards, uint32_t *ri,
			  uint32_t *rn, const char **ret_from, const char **ret_count_from)
{
	static const char *const pairs[][2] = {
		{ "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT" },
		{ "SLURM_PROCID", "SLURM_NTASKS" },
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "PMI_RANK", "PMI_SIZE" },
		{ "JOB_COMPLETION_INDEX", NULL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(pairs); i++) {
		const char *idx = getenv(pairs[i][0]);
		const char *cnt = pairs[i][1] ? getenv(pairs[i][1]) : NULL;
		uint32_t n = o->shards ? o->shards : plan_shards, min = 0;

		if (!idx || !*idx) {
			continue;
		}
		*ret_from = pairs[i][0];
		*ret_count_from = o->shards ? "--shards" : pairs[i][1] ? pairs[i][1] : "the plan";
		/* --shards wins: one task of an array run again alone (sbatch --array=I) counts 1. */
		if (pairs[i][1] && !o->shards &&
		    (!cnt || parse_index(cnt, PLAN_MAX_SHARDS, &n) < 0 || n == 0)) {
			log_error("--shard auto: %s is set but %s is not a count", pairs[i][0],
				  pairs[i][1]);
			return EXIT_USAGE;
		}
		if (i == 0 && !o->shards && getenv("SLURM_ARRAY_TASK_MIN") &&
		    parse_index(getenv("SLURM_ARRAY_TASK_MIN"), UINT32_MAX, &min) < 0) {
			log_error("--shard auto: SLURM_ARRAY_TASK_MIN is not a number");
			return EXIT_USAGE;
		}
		if (parse_index(idx, UINT32_MAX, ri) < 0 || *ri < min) {
			log_error("--shard auto: %s is not an index", pairs[i][0]);
			return EXIT_USAGE;
		}
		*ri -= min;
		*rn = n;
		return 0;
	}
	log_error("--shard auto: no launcher's index in the environment (SLURM_ARRAY_TASK_ID, "
		  "SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK or JOB_COMPLETION_INDEX)");
	return EXIT_USAGE;
}

static int resolve_shard(const struct client_opts *o, uint32_t plan_shards, uint32_t *ri,
			 uint32_t *rn)
{
	const char *from = "--shard", *count_from = "--shard";
	int rc;

	if (!o->shard_spec[0]) {
		log_error("rdmacp run needs --shard I/N or --shard auto");
		return EXIT_USAGE;
	}
	if (!strcmp(o->shard_spec, "auto")) {
		rc = shard_from_env(o, plan_shards, ri, rn, &from, &count_from);
		if (rc != 0) {
			return rc;
		}
	} else {
		char buf[64], *slash;

		snprintf(buf, sizeof(buf), "%s", o->shard_spec);
		slash = strchr(buf, '/');
		if (!slash) {
			log_error("bad --shard '%s': I/N (0 <= I < N) or auto", o->shard_spec);
			return EXIT_USAGE;
		}
		*slash = '\0';
		if (parse_index(buf, UINT32_MAX, ri) < 0 ||
		    parse_index(slash + 1, UINT32_MAX, rn) < 0 || *rn == 0) {
			log_error("bad --shard '%s': I/N (0 <= I < N) or auto", o->shard_spec);
			return EXIT_USAGE;
		}
	}
	/* A count given is a usage error, not a bad plan: the plan says what it is. */
	if (*rn != plan_shards) {
		log_error("%s: %" PRIu32 " shards, but the plan has %" PRIu32 ": expected %" PRIu32
			  " (--shard I/%" PRIu32 ", or --shard auto with --shards %" PRIu32 ")",
			  count_from, *rn, plan_shards, plan_shards, plan_shards, plan_shards);
		return EXIT_USAGE;
	}
	if (*ri >= *rn) {
		log_error("%s: shard %" PRIu32 " of %" PRIu32 " (shards are 0..%" PRIu32 ")", from,
			  *ri, *rn, *rn - 1);
		return EXIT_USAGE;
	}
	return 0;
}

/*
 * An entry to send, in the entries file: its name, then the run's counts
 * with it, so that a run stopped at a push counts what it had reached.
 */
static void entries_add(struct runner *ru, const char *name)
{
	uint64_t at[2] = { ru->todo, ru->already };

	batch_add(&ru->entries, name);
	fwrite(at, sizeof(at), 1, ru->entries.f);
}

/* An entry of the shard, counted and taken to send (entries file, links, ranges). */
static int run_entry(struct runner *ru, const struct plan_entry *e)
{
	bool linked = ru->h->hardlinks && (e->links > 1 || e->ftype == PROTO_FT_HARDLINK);
	const struct nameset_slot *s;

	if (e->ranges) {
		/* Not sent whole: its ranges are, by their shards; finalize joins them. */
		ru->split_n = e->n;
		ru->split_size = e->size;
		return 0;
	}
	if (e->shard != ru->shard || e->ftype == PROTO_FT_DIR) {
		return 0; /* directories go with the skeleton */
	}
	if (e->ftype == PLAN_FT_RANGE) {
		s = nameset_get_range(ru->done, e->name, e->range);
		if (s && journal_state_done(s->state)) {
			ru->already++;
			return 0;
		}
		ru->todo++;
		return windows_add(ru, e) < 0 ? EXIT_LOCAL_IO : 0;
	}
	if (nameset_get(ru->done, e->name) &&
	    journal_state_done(nameset_get(ru->done, e->name)->state)) {
		ru->already++;
		return 0;
	}
	ru->todo++;
	if (linked) {
		/* The names of one file go in one push, so -H makes them one file again. */
		batch_add(&ru->links, e->name);
		if (e->ftype == PROTO_FT_HARDLINK) {
			batch_add(&ru->links, e->link);
		}
		return 0;
	}
	entries_add(ru, e->name);
	return 0;
}

/*
 * The skeleton of a shard: its own directories and those above its
 * entries, made in a push of their own before any file, in plan order
 * (parents first). A directory another shard made first as a mere parent
 * would keep the daemon's default mode (the engine gives modes to the
 * directories it creates as entries): made as entries here, each gets its
 * own, whichever shard comes first.
 */
static int skeleton_mark(struct runner *ru, const struct plan_entry *e)
{
	char name[PROTO_MAX_PATH + 1];
	char *slash;

	/* Outcomes of this plan's entries (of any shard: the skeleton's directories are theirs). */
	if (e->ftype == PLAN_FT_RANGE) {
		nameset_mark_range(ru->done, e->name, e->range, NAMESET_PLANNED);
	} else if (!e->ranges) {
		nameset_mark(ru->done, e->name, NAMESET_PLANNED);
	}
	if (e->shard != ru->shard) {
		return 0;
	}
	snprintf(name, sizeof(name), "%s", e->name);
	if (e->ftype != PROTO_FT_DIR) {
		slash = strrchr(name, '/');
		if (!slash) {
			return 0;
		}
		*slash = '\0';
	}
	for (;;) {
		if (nameset_get(&ru->skeleton, name)) {
			return 0; /* and so are its parents */
		}
		if (nameset_put(&ru->skeleton, name, JOURNAL_COPIED, NULL) < 0) {
			return EXIT_LOCAL_IO;
		}
		slash = strrchr(name, '/');
		if (!slash) {
			return 0;
		}
		*slash = '\0';
	}
}

/* A directory of the plan kept, in plan order: which are the skeleton's is known at the end. */
static int plan_dirs_add(struct plan_dirs *d, const char *name)
{
	size_t n = strlen(name) + 1;

	if (d->len + n > d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 65536;
		char *v;

		while (cap < d->len + n) {
			cap *= 2;
		}
		v = realloc(d->v, cap);
		if (!v) {
			return -ENOMEM;
		}
		d->v = v;
		d->cap = cap;
	}
	memcpy(d->v + d->len, name, n);
	d->len += n;
	return 0;
}

/*
 * The run's one reading of the plan: its entries' outcomes marked, the
 * skeleton gathered, the plan's directories kept, and the shard's entries
 * counted and taken (when the list files are open). Nothing is sent yet:
 * the journal is checked against the whole plan first.
 */
static int run_scan(void *ud, const struct plan_entry *e)
{
	struct runner *ru = ud;
	int rc = skeleton_mark(ru, e);

	if (rc != 0 || ru->open_err) {
		return rc;
	}
	if (e->ftype == PROTO_FT_DIR && plan_dirs_add(&ru->dirs, e->name) < 0) {
		log_error("the plan's directories: %s", strerror(ENOMEM));
		return EXIT_LOCAL_IO;
	}
	/* An entry not taken ends the entries: those before it are sent, then the run fails. */
	if (!ru->scan_cut && run_entry(ru, e) != 0) {
		ru->scan_cut = true;
	}
	return 0;
}

/* The skeleton's directories, in plan order, at the head of the list. */
static void run_skeleton(struct runner *ru)
{
	const struct plan_dirs *d = &ru->dirs;

	for (size_t at = 0; at < d->len; at += strlen(d->v + at) + 1) {
		if (!nameset_get(&ru->skeleton, d->v + at)) {
			continue;
		}
		batch_add(&ru->list, d->v + at);
		if (ru->list.n >= RUN_BATCH && !ru->stop) {
			run_result(ru, run_push(ru, &ru->list));
		}
	}
}

/*
 * The entries after the skeleton, in pushes of RUN_BATCH names. A run
 * stopped at a push counts the entries it had reached. 0 or an exit code.
 */
static int run_entries(struct runner *ru)
{
	_cleanup_fclose_ FILE *in = NULL;
	_cleanup_free_ char *name = NULL;
	size_t cap = 0;
	uint64_t at[2];

	if (fflush(ru->entries.f) != 0 || !(in = fopen(ru->entries.path, "re"))) {
		return EXIT_LOCAL_IO;
	}
	while (!ru->stop && getdelim(&name, &cap, '\0', in) > 0) {
		if (fread(at, sizeof(at), 1, in) != 1) {
			return EXIT_LOCAL_IO;
		}
		batch_add(&ru->list, name);
		if (ru->list.n < RUN_BATCH) {
			continue;
		}
		run_result(ru, run_push(ru, &ru->list));
		if (ru->stop) {
			ru->todo = at[0];
			ru->already = at[1];
		}
	}
	return ferror(in) ? EXIT_LOCAL_IO : 0;
}

/* The last line of a shard's run; --json: a "run" event, whatever -q says. */
static void run_summary(const struct runner *ru, const char *what, int rc)
{
	const struct journal_writer *j = ru->j;

	if (ru->o->json) {
		printf("{\"event\":\"run\",\"shard\":%" PRIu32 ",\"shards\":%" PRIu32
		       ",\"done_before\":%" PRIu64 ",\"this_run\":%" PRIu64 ",\"bytes\":%" PRIu64
		       ",\"ranges_kept\":%" PRIu64 ",\"vanished\":%" PRIu64 ",\"exit\":%d}\n",
		       ru->shard, ru->h->shards, ru->already, ru->todo, j->bytes, ru->kept,
		       j->vanished, rc);
		fflush(stdout);
		return;
	}
	if (ru->o->verbose < 0) {
		return;
	}
	fprintf(stderr, "%s: %" PRIu64 " entries done before, %" PRIu64 " this run", what,
		ru->already, ru->todo);
	if (ru->kept) {
		fprintf(stderr, ", %" PRIu64 " ranges kept (their files unchanged)", ru->kept);
	}
	if (j->vanished) {
		fprintf(stderr, ", %" PRIu64 " vanished since the plan", j->vanished);
	}
	fprintf(stderr, ", exit %d\n", rc);
}

/*
 * All of it checked before anything is copied: the shard, its journal
 * locked and loaded, the plan read through once (run_scan), the journal
 * against it; then the run's start in the journal. what: the shard, in words. 0 or an exit code.
 */
static int run_prepare(struct runner *ru, struct plan_reader *r, const char *plan,
		       struct journal_writer *j, char *what, size_t what_len)
{
	int rc = resolve_shard(ru->o, ru->h->shards, &ru->shard, &(uint32_t){ 0 });

	if (rc == 0 && journal_path(plan, ru->shard, ru->jpath, sizeof(ru->jpath)) < 0) {
		rc = EXIT_USAGE;
	}
	snprintf(what, what_len, "shard %" PRIu32 " of %" PRIu32, ru->shard, ru->h->shards);
	if (rc == 0) {
		rc = journal_open(ru->jpath, what, ru->h, ru->shard, ru->done, j);
	}
	if (rc != 0) {
		return rc;
	}
	if (batch_open(&ru->list, ru->jpath, "list") < 0 ||
	    batch_open(&ru->links, ru->jpath, "links") < 0 ||
	    batch_open(&ru->entries, ru->jpath, "entries") < 0) {
		ru->open_err = -errno; /* said when the pushes would start, as a run's failure */
	}
	rc = plan_pass(r, run_scan, ru);
	if (rc == 0 && nameset_count_unmarked(ru->done, NAMESET_PLANNED) > 0) {
		rc = journal_foreign(ru->done, j->fd, ru->jpath);
	}
	if (rc != 0) {
		close(j->fd);
		return rc;
	}
	return journal_start(ru->h, ru->shard, j);
}

/*
 * The pushes of a shard: its skeleton, its entries and the names of linked
 * files, in one push when they fit in one (a session costs a connection,
 * a handshake and a sync at the daemon), else in batches with the linked
 * names in a push of their own; then its ranges.
 */
static int run_pushes(struct runner *ru)
{
	char esc[1024];
	int rc = 0;

	if (ru->open_err) {
		log_error("%s.list: %s", log_escape_short(ru->jpath, esc, sizeof(esc)),
			  strerror(-ru->open_err));
		rc = EXIT_LOCAL_IO;
	}
	/* The skeleton heads the list: its directories go before any file of the push. */
	if (rc == 0) {
		run_skeleton(ru);
	}
	if (rc == 0 && ru->stop) {
		ru->todo = ru->already = 0; /* no entry reached */
	}
	if (rc == 0 && !ru->stop) {
		rc = run_entries(ru);
	}
	if (rc == 0 && !ru->stop && ru->scan_cut) {
		rc = EXIT_LOCAL_IO;
	}
	if (rc == 0 && !ru->stop && ru->links.n > 0 && ru->list.n + ru->links.n <= RUN_BATCH &&
	    batch_append(&ru->list, &ru->links) < 0) {
		rc = EXIT_LOCAL_IO;
	}
	if (rc == 0 && !ru->stop && ru->list.n > 0) {
		run_result(ru, run_push(ru, &ru->list));
	}
	if (rc == 0 && !ru->stop && ru->links.n > 0) {
		run_result(ru, run_push(ru, &ru->links));
	}
	if (rc == 0 && !ru->stop && ru->win.n > 1) {
		run_result(ru, run_windows(ru));
	}
	windows_free(&ru->win);
	return rc == 0 ? ru->rc : rc;
}

/* The list files of a run, closed and gone. */
static void run_batches_close(struct runner *ru)
{
	struct batch *const all[] = { &ru->list, &ru->links, &ru->entries };

	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		if (all[i]->f) {
			fclose(all[i]->f);
			all[i]->f = NULL;
			unlink(all[i]->path);
		}
	}
}

/* The shard's run, once prepared: its pushes journaled, the run's end, its summary. */
static int run_shard(struct runner *ru, const char *what, double t0)
{
	struct client_opts *o = ru->o;
	struct journal_writer *j = ru->j;
	char esc[1024];
	int rc;

	j->base = ru->h->base;
	j->missing_ok = o->missing_ok || ru->h->missing_ok;
	j->quiet = o->verbose < 0;
	apply_plan_options(o, ru->h);
	copy_set_observer(journal_observe, j);
	rc = runner_dests(ru, ru->shard);
	if (rc == 0) {
		rc = run_pushes(ru);
	}
	runner_dests_free(ru);
	copy_set_observer(NULL, NULL);
	run_batches_close(ru);
	if (journal_end(j, rc, now_seconds() - t0) < 0) {
		log_error("%s: journal not written: %s",
			  log_escape_short(ru->jpath, esc, sizeof(esc)), strerror(EIO));
		rc = rc ? rc : EXIT_LOCAL_IO;
	}
	run_summary(ru, what, rc);
	return rc;
}

int cmd_run(struct client_opts *o, char **args, int nargs)
{
	struct plan_reader *r = NULL;
	struct runner ru = { .o = o, .win.basefd = -1 };
	struct nameset done = { 0 };
	struct journal_writer j = { 0 };
	char what[64];
	double t0 = now_seconds();
	int rc;

	if (nargs != 1) {
		log_error("usage: rdmacp run PLAN --shard I/N|auto");
		return EXIT_USAGE;
	}
	rc = open_plan(args[0], &r);
	if (rc != 0) {
		return rc;
	}
	ru.h = plan_reader_header(r);
	ru.done = &done;
	rc = run_prepare(&ru, r, args[0], &j, what, sizeof(what));
	if (rc == 0) {
		ru.j = &j;
		rc = run_shard(&ru, what, t0);
	}
	run_batches_close(&ru);
	free(ru.dirs.v);
	nameset_free(&done);
	nameset_free(&ru.skeleton);
	plan_close(r);
	return rc;
}
