/* SPDX-License-Identifier: MIT */
/*
 * Migrations beyond one client (plan.h): `rdmacp plan` walks the source once
 * and writes a plan of shards; `rdmacp run PLAN --shard I/N|auto` copies one
 * shard with the push engine (a --files-from list of its entries, --partial)
 * and journals every outcome; `rdmacp finalize PLAN` checks that every entry
 * is done, then sets directory times and mirrors deletions; `rdmacp report
 * PLAN` merges the journals. Each of them streams the plan: memory follows
 * the largest batch and the journals' outcomes (16 bytes a name), not the
 * plan.
 *
 * What their files share, each file below calling only those above it:
 *   migrate_push.c     the pushes through cmd_copy: the plan's options, list
 *                      files
 *   migrate_merge.c    reading a plan with its journals, and the merged
 *                      outcome of every entry (report's and finalize's)
 *   migrate_journal.c  writing journals: a run's or finalize's own, and
 *                      finalize's failed lines in the shards' journals
 *   migrate_fanout.c   one push of a list, to a shard's destinations: one
 *                      host, or every host as a fan-out (plan --every-host)
 *   migrate_plan.c     rdmacp plan
 *   migrate_ranges.c   a run's ranges of split files
 *   migrate_run.c      rdmacp run
 *   migrate_report.c   rdmacp report, and the summary finalize prints too
 *   migrate_verify.c   finalize's proof at the destination
 *   migrate_assemble.c finalize's split files, assembled by the daemon
 *   migrate_finalize.c rdmacp finalize
 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "client.h"
#include "plan.h"

#define RUN_BATCH	   100000 /* names a push of a shard takes at a time */
#define JOURNAL_SYNC_EVERY 256	  /* outcomes between fsyncs of a journal, at least */
#define JOURNAL_SYNC_SECS  1.0	  /* seconds between them, at least (journal_outcome) */
/* A journal's path leaves room for the suffixes of its list files. */
#define JOURNAL_PATH_MAX 4000

/* ---- migrate_push.c: the pushes ------------------------------------------------ */

/* The plan header's skip level by name ("none", "exists", "quick", "checksum"), and back. */
const char *skip_name(uint32_t skip);
uint32_t skip_parse(const char *s);
/* The level at which a split file the destination has already is left as it is; 0: never. */
uint32_t split_keep_level(const struct plan_header *h);
/* The plan's options for the pushes of a shard or of finalize. */
void apply_plan_options(struct client_opts *o, const struct plan_header *h);
/* A source entry's lstat, its name resolved beneath base as a push resolves it. */
int source_lstat(const char *base, const char *name, struct stat *ret);

/* The list files of a shard's run: NUL-ended names, rdmacp --files-from -0. */
struct batch {
	char path[PATH_MAX];
	FILE *f;
	size_t n;
};

int batch_open(struct batch *b, const char *jpath, const char *what);
void batch_add(struct batch *b, const char *name);
/* The names of from added to b, and from emptied. 0 or -errno. */
int batch_append(struct batch *b, struct batch *from);

struct journal_writer {
	FILE *f;
	int fd;
	bool fresh; /* no header yet */
	unsigned unsynced;
	double synced_at; /* now_seconds() of the last sync */
	uint64_t bytes;
	int err;
	/* A run's: where the source is, whether its vanished names are accepted, and counts. */
	const char *base;
	bool missing_ok, quiet;
	uint64_t vanished, failed;
};

/* A shard's ranges of split files: each pushed as a file of its own, its bytes read in place. */
struct windows {
	struct engine_src *v; /* v[0]: the staging directory, then a range each */
	struct window_of {
		char *file;
		uint32_t range;
	} * of; /* of[i] for v[i], i >= 1 */
	size_t n, cap;
	int basefd;
	char staging[64];
	struct timespec now;
};

struct runner {
	struct client_opts *o;
	const struct plan_header *h;
	uint32_t shard;
	struct journal_writer *j;
	struct windows win;
	uint64_t split_n, split_size; /* the split file whose ranges come */
	struct nameset *done;	      /* the journal's outcomes */
	struct nameset skeleton;      /* directories to make first */
	struct batch list, links;
	/*
	 * A run's one reading of the plan (migrate_run.c): the plan's directories
	 * in its order (NUL-ended names), then its entries to send, each name
	 * followed by the run's counts (todo, already) so far.
	 */
	struct plan_dirs {
		char *v;
		size_t len, cap;
	} dirs;
	struct batch entries;
	int open_err;  /* the list files not opened: -errno */
	bool scan_cut; /* an entry not taken (windows_add): the entries end before it */
	char jpath[JOURNAL_PATH_MAX];
	/* HOST:PATH/ of each destination of its pushes: one, or every host (--every-host) */
	char *dests[PLAN_MAX_EVERY_HOST];
	size_t ndests;
	bool fan_failed; /* a fan-out push: some destination did not copy */
	int rc;
	uint64_t todo, already;
	uint64_t kept; /* ranges not sent: their files unchanged at the destination */
	bool stop;
};

/* ---- migrate_merge.c: reading a plan with its journals -------------------------- */

/* The plan opened, its header checked; 0 or an exit code (said why). */
int open_plan(const char *path, struct plan_reader **ret);
/* Read the plan through once, each (NULL: none) seeing every entry. 0 or an exit code. */
int plan_pass(struct plan_reader *r, int (*each)(void *ud, const struct plan_entry *e), void *ud);

/* plan --every-host: one destination's outcomes over every push of every shard. */
struct dest_tally {
	char name[PROTO_MAX_PATH + 1]; /* HOST:PATH/; "": a slot free */
	uint64_t copied, failed;       /* pushes that reached it, or not */
	uint64_t bytes;		       /* what it received in them */
	int last_exit;		       /* of its last push not copied */
	char last_status[32];	       /* ... and how it ended: failed, partial, unreached */
};

struct shard_stats {
	struct dest_tally *dests; /* PLAN_MAX_EVERY_HOST of them (the merged's), or NULL */
	uint64_t entries, bytes;
	uint64_t done, failed;
	uint64_t sent, runs; /* every run's: those cut short (killed) have no end line */
	uint64_t ended, ended_sent;
	double seconds; /* of the runs that ended: a cut run's time is not known */
	int last_exit;
	bool journal;
};

/* One journal into ns and rs (NULL: only checked), checked as this plan's shard's. */
int journal_load(int fd, const char *jpath, const char *plan_id, int64_t shard, uint32_t shards,
		 struct nameset *ns, struct rangeset *rs, struct shard_stats *st,
		 off_t *ret_good_end);
/* A shard journal's line for anything ns has not marked PLANNED refused, naming it. */
int journal_foreign(struct nameset *ns, int fd, const char *jpath);

/* What the outcomes of a split file's ranges make of it (split_kind). */
enum split_kind { SPLIT_PENDING, SPLIT_PARTS, SPLIT_UNCHANGED, SPLIT_MIXED, SPLIT_VANISHED };

struct merged {
	struct plan_reader *r;
	const struct plan_header *h;
	struct nameset ns;
	struct nameset final;	 /* finalize's own outcomes: deletions, split files assembled */
	struct rangeset digests; /* each range done: the XXH3-128 its sender computed */
	/* Split files whose ranges were all kept (not sent): the destination's file unchanged. */
	struct nameset kept;
	/* The split file whose ranges the pass is in: how many, how many done, what they make. */
	struct {
		uint32_t ranges, done;
		uint64_t n;
		int kind;
	} split;
	uint64_t split_files, split_ready; /* split files; not assembled, every range done */
	uint64_t split_mixed;		   /* ... some ranges sent, some kept: changed meanwhile */
	uint64_t vanished, vanished_accepted; /* entries the source lost; of them, --missing-ok */
	struct shard_stats *shards;
	struct dest_tally dests[PLAN_MAX_EVERY_HOST]; /* --every-host: each destination's */
	struct shard_stats assembly;		      /* the split files: finalize's, no shard's */
	uint64_t by_state[JOURNAL_VANISHED + 1];      /* [0]: pending */
	uint64_t deleted;
	struct client_opts *o;
	/* report: each entry and each split file printed as the pass meets them (NULL: not) */
	void (*on_entry)(struct merged *m, const struct plan_entry *e, int state, const char *code);
	void (*on_split)(struct merged *m, const char *name, bool assembled);
	uint64_t shown_failed;
};

/* The plan and every journal next to it; EXIT_BAD_PLAN for one that doesn't belong. */
int merged_load(struct merged *m, const char *plan);
/*
 * After finalize wrote its own journal: that journal read again and the
 * outcomes merged and counted again (a pass of merged_entry); the shards'
 * journals, which finalize leaves as they are when it succeeds, as loaded.
 * 0 or an exit code.
 */
int merged_final_again(struct merged *m, const char *plan);
/* plan_pass's each: an entry's outcome merged and counted. */
int merged_entry(void *ud, const struct plan_entry *e);
/* After a pass of merged_entry: a shard journal's line for no entry of the plan refused. */
int merged_foreign(struct merged *m, const char *plan);
void merged_free(struct merged *m);
/* Entries done: copied, skipped or resumed. */
uint64_t merged_done(const struct merged *m);
/* What the ranges' outcomes in ns make of split file e (ret_accepted may be NULL). */
int split_kind(const struct nameset *ns, const struct plan_entry *e, bool *ret_accepted);

/* ---- migrate_journal.c: writing journals ---------------------------------------- */

void journal_sync(struct journal_writer *j);
/* An outcome written: the journal synced when enough of them wait (JOURNAL_SYNC_*). */
void journal_outcome(struct journal_writer *j);
/* An outcome the source lost since the plan: JOURNAL_VANISHED; else action's state. */
int vanished_state(struct journal_writer *j, const char *name, const char *action, const char *code,
		   const char **ret_code);
/* copy_set_observer's fn for a journal_writer: each outcome a line. */
void journal_observe(void *ud, const char *name, const char *action, uint64_t bytes,
		     const char *code, const uint8_t *hash);
/* Lock, check and load a journal, cut a torn last line. */
int journal_open(const char *jpath, const char *what, const struct plan_header *h, int64_t shard,
		 struct nameset *done, struct journal_writer *j);
/* After journal_open: the header of a new journal, and this run's start. */
int journal_start(const struct plan_header *h, int64_t shard, struct journal_writer *j);
/* journal_open, then journal_start. */
int journal_begin(const char *jpath, const char *what, const struct plan_header *h, int64_t shard,
		  struct nameset *done, struct journal_writer *j);
/* The run's end line; the journal closed. 0 or -errno of a write that failed. */
int journal_end(struct journal_writer *j, int rc, double secs);

/*
 * Outcomes a shard's journal says are done that finalize found are not: a
 * "failed" line for each in that journal, so that the shard's next run
 * sends it again. A journal is locked while it is held: one whose shard
 * runs now is said and left alone (finalize again after it). Its torn last
 * line, if any, is cut first: a line appended to it would make one garbled
 * line of both.
 */
struct journal_marks {
	const char *plan;
	const struct plan_header *h;
	struct marked {
		FILE *f;
		bool refused, used;
	} * v; /* by shard */
	uint32_t nopen;
};

int marks_init(struct journal_marks *jm, const char *plan, const struct plan_header *h);
void marks_close_all(struct journal_marks *jm);
void marks_free(struct journal_marks *jm);
/* A failed line for an entry (range < 0) or a range of a split file, in its shard's journal. */
void marks_put(struct journal_marks *jm, uint32_t shard, const char *name, int64_t range,
	       const char *code);
/* The shards marked, as "3, 17, 40" (the first few, then how many more); how many. */
size_t marks_shards(const struct journal_marks *jm, char *buf, size_t len);

/* ---- migrate_fanout.c: one push of a list, to its destinations ------------------- */

/*
 * ru->dests for shard: the plan's host shard mod n, or every host with
 * --every-host. 0 or an exit code.
 */
int runner_dests(struct runner *ru, uint32_t shard);
void runner_dests_free(struct runner *ru);
/*
 * cmd_copy from src to ru's destinations: several make a fan-out, each
 * one's outcome journaled, and the push's outcomes failed again when one
 * of them did not copy. Returns cmd_copy's exit code.
 */
int runner_copy(struct runner *ru, const char *src);
/* One push of a list of names: the plan's options, --partial, the shard's destination. */
/*
 * A push's exit code rc, with entries that failed only because the source
 * lost them since the plan (journaled vanished, counted past vanished while
 * the failures stayed at failed) no failure of the run.
 */
int run_push_outcome(const struct runner *ru, uint64_t failed, uint64_t vanished, int rc);
int run_push(struct runner *ru, struct batch *b);
/* A push's exit code into the run's; an interruption stops it. */
void run_result(struct runner *ru, int rc);

/* ---- migrate_ranges.c: a run's ranges of split files ---------------------------- */

/* A range of ours: the staging directory first, then it, read from the plan's base. */
int windows_add(struct runner *ru, const struct plan_entry *e);
void windows_free(struct windows *w);
/* The ranges: those of files the destination has unchanged left out, the others pushed. */
int run_windows(struct runner *ru);

/* ---- migrate_report.c: what report prints --------------------------------------- */

/* The totals and the shards: --json events, else text (to stdout or stderr); --csv nothing. */
void merged_summary(const struct merged *m, const struct client_opts *o, bool to_stdout);

/* ---- finalize's steps (migrate_verify.c, migrate_assemble.c) -------------------- */

/* Every file the journals say done found at the destination: 0, EXIT_DIFFERENT, or a probe's. */
int verify_all(struct merged *m, struct client_opts *o, struct journal_writer *j, const char *plan,
	       const char *jpath, const char *dest);
/* Every split file whose ranges are done and that is not assembled yet. 0 or an exit code. */
int assemble_all(struct merged *m, struct client_opts *o, struct journal_writer *j,
		 const char *plan, const char *dest);
