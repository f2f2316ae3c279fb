/* SPDX-License-Identifier: MIT */
/*
 * rdmacp report PLAN (migrate.h): the plan and its journals merged
 * (migrate_merge.c), each entry and split file listed (text, --json or
 * --csv), then the totals and the shards; --watch: the totals again until
 * nothing is pending. finalize prints the same summary (merged_summary).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "exitcodes.h"
#include "log.h"
#include "migrate.h"
#include "ndjson.h"
#include "plan.h"

static void csv_field(const char *s)
{
	bool quote = strpbrk(s, ",\"\r\n") != NULL;

	if (quote) {
		putchar('"');
	}
	for (; *s; s++) {
		if (*s == '"') {
			putchar('"');
		}
		putchar(*s);
	}
	if (quote) {
		putchar('"');
	}
}

static void entry_out(struct merged *m, const struct plan_entry *e, int state, const char *code)
{
	char esc[1024];

	if (m->o->csv) {
		csv_field(e->name);
		printf(",%s,%" PRIu32 ",%s,%" PRIu64 ",", plan_ftype_name(e->ftype), e->shard,
		       journal_state_name(state), e->size);
		csv_field(code);
		putchar('\n');
	} else if (m->o->json) {
		printf("{\"event\":\"entry\"");
		ndjson_put_name(stdout, "name", e->name);
		printf(",\"type\":\"%s\",\"shard\":%" PRIu32 ",\"state\":\"%s\",\"size\":%" PRIu64,
		       plan_ftype_name(e->ftype), e->shard, journal_state_name(state), e->size);
		if (*code) {
			printf(",\"code\":");
			ndjson_put_string(stdout, code);
		}
		printf("}\n");
	} else if (state == JOURNAL_FAILED || (state == 0 && m->o->verbose > 0)) {
		if (state == 0 || m->shown_failed++ < 100 || m->o->verbose > 0) {
			printf("  %s: %s%s%s%s (shard %" PRIu32 ")\n", journal_state_name(state),
			       log_escape_short(e->name, esc, sizeof(esc)), *code ? " (" : "", code,
			       *code ? ")" : "", e->shard);
		}
	}
}

/* A split file's line once its ranges are counted: --json an event, else with -v or when some are missing. */
static void split_out(struct merged *m, const char *name, bool assembled)
{
	bool unchanged = m->split.kind == SPLIT_UNCHANGED;
	char esc[1024];

	if (m->o->csv) {
		return;
	}
	if (m->o->json) {
		printf("{\"event\":\"split\"");
		ndjson_put_name(stdout, "name", name);
		printf(",\"ranges\":%" PRIu32 ",\"done\":%" PRIu32
		       ",\"assembled\":%s,\"unchanged\":%s}\n",
		       m->split.ranges, m->split.done, assembled ? "true" : "false",
		       unchanged ? "true" : "false");
	} else if (!assembled || m->o->verbose > 0) {
		printf("  split: %s: %" PRIu32 "/%" PRIu32 " ranges done, %s\n",
		       log_escape_short(name, esc, sizeof(esc)), m->split.done, m->split.ranges,
		       assembled && unchanged	      ? "in place, unchanged (no range sent)"
		       : assembled		      ? "assembled"
		       : m->split.kind == SPLIT_MIXED ? "changed meanwhile (ranges sent and kept)"
		       : m->split.kind == SPLIT_VANISHED  ? "vanished from the source"
		       : unchanged			  ? "unchanged, for finalize to keep"
		       : m->split.done == m->split.ranges ? "to be assembled by finalize"
							  : "not assembled");
	}
}

static double shard_rate(const struct shard_stats *s)
{
	return s->seconds > 0 ? (double)s->ended_sent / s->seconds : 0.0;
}

/* The shards' runs added up: the rate is of the runs that ended, over their own seconds. */
static struct shard_stats shards_total(const struct merged *m)
{
	struct shard_stats t = { 0 };

	for (uint32_t i = 0; i < m->h->shards; i++) {
		t.sent += m->shards[i].sent;
		t.runs += m->shards[i].runs;
		t.ended += m->shards[i].ended;
		t.ended_sent += m->shards[i].ended_sent;
		t.seconds += m->shards[i].seconds;
	}
	return t;
}

static void summary_json(const struct merged *m)
{
	const struct plan_header *h = m->h;
	struct shard_stats t = shards_total(m);

	printf("{\"event\":\"report\",\"plan\":\"%s\",\"shards\":%" PRIu32 ",\"entries\":%" PRIu64
	       ",\"bytes\":%" PRIu64 ",\"copied\":%" PRIu64 ",\"skipped\":%" PRIu64
	       ",\"resumed\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"pending\":%" PRIu64
	       ",\"deleted\":%" PRIu64 ",\"vanished\":%" PRIu64 ",\"runs\":%" PRIu64
	       ",\"ended\":%" PRIu64 ",\"sent\":%" PRIu64 ",\"seconds\":%.3f,\"rate\":%.0f"
	       ",\"complete\":%s}\n",
	       h->id, h->shards, h->entries, h->bytes, m->by_state[JOURNAL_COPIED],
	       m->by_state[JOURNAL_SKIPPED], m->by_state[JOURNAL_RESUMED],
	       m->by_state[JOURNAL_FAILED], m->by_state[0], m->deleted, m->vanished, t.runs,
	       t.ended, t.sent, t.seconds, shard_rate(&t),
	       merged_done(m) + m->vanished == h->entries ? "true" : "false");
	for (uint32_t i = 0; i < h->shards; i++) {
		const struct shard_stats *s = &m->shards[i];

		printf("{\"event\":\"shard\",\"shard\":%" PRIu32 ",\"entries\":%" PRIu64
		       ",\"bytes\":%" PRIu64 ",\"done\":%" PRIu64 ",\"failed\":%" PRIu64
		       ",\"pending\":%" PRIu64 ",\"runs\":%" PRIu64 ",\"ended\":%" PRIu64
		       ",\"sent\":%" PRIu64 ",\"seconds\":%.3f,\"rate\":%.0f,\"last_exit\":%d}\n",
		       i, s->entries, s->bytes, s->done, s->failed,
		       s->entries - s->done - s->failed, s->runs, s->ended, s->sent, s->seconds,
		       shard_rate(s), s->last_exit);
	}
	for (size_t i = 0; i < PLAN_MAX_EVERY_HOST && m->dests[i].name[0]; i++) {
		const struct dest_tally *d = &m->dests[i];

		printf("{\"event\":\"destination\",\"dest\":");
		ndjson_put_string(stdout, d->name);
		printf(",\"pushes_copied\":%" PRIu64 ",\"pushes_failed\":%" PRIu64
		       ",\"bytes\":%" PRIu64 ",\"last_failure\":",
		       d->copied, d->failed, d->bytes);
		ndjson_put_string(stdout, d->last_status);
		printf(",\"last_exit\":%d}\n", d->last_exit);
	}
	if (m->assembly.entries > 0) {
		const struct shard_stats *a = &m->assembly;

		printf("{\"event\":\"assembly\",\"entries\":%" PRIu64 ",\"done\":%" PRIu64
		       ",\"failed\":%" PRIu64 ",\"pending\":%" PRIu64 "}\n",
		       a->entries, a->done, a->failed, a->entries - a->done - a->failed);
	}
}

/* "N bytes sent in R runs ...": what a shard's runs did, said as far as it is known. */
static void runs_text(const struct shard_stats *s, char *buf, size_t len)
{
	uint64_t cut = s->runs > s->ended ? s->runs - s->ended : 0;

	if (!s->journal) {
		/* Its directories may be done all the same: other shards make them as parents. */
		snprintf(buf, len,
			 s->done == s->entries ? "no run of its own: other shards' runs made its "
						 "entries"
			 : s->done > 0	       ? "never run (other shards' runs made some of it)"
					       : "never run");
		return;
	}
	snprintf(buf, len,
		 "%" PRIu64 " bytes sent in %" PRIu64 " run%s%s; %.1f s, %.1f MiB/s in the %" PRIu64
		 " that ended",
		 s->sent, s->runs, s->runs == 1 ? "" : "s",
		 cut ? " (some cut short, or running)" : "", s->seconds, shard_rate(s) / 1048576,
		 s->ended);
}

static void summary_text(const struct merged *m, FILE *f, bool all_shards)
{
	const struct plan_header *h = m->h;
	struct shard_stats t = shards_total(m);
	const struct shard_stats *a = &m->assembly;
	char runs[160];

	fprintf(f,
		"plan %s: %" PRIu64 " entries, %" PRIu64 " bytes, %" PRIu32
		" shards\n  copied %" PRIu64 ", skipped %" PRIu64 ", resumed %" PRIu64
		", failed %" PRIu64 ", pending %" PRIu64 ", deleted %" PRIu64 ", vanished %" PRIu64
		"\n",
		h->id, h->entries, h->bytes, h->shards, m->by_state[JOURNAL_COPIED],
		m->by_state[JOURNAL_SKIPPED], m->by_state[JOURNAL_RESUMED],
		m->by_state[JOURNAL_FAILED], m->by_state[0], m->deleted, m->vanished);
	t.journal = true;
	runs_text(&t, runs, sizeof(runs));
	fprintf(f, "  all shards: %s\n", runs);
	for (uint32_t i = 0; i < h->shards; i++) {
		const struct shard_stats *s = &m->shards[i];

		if (!all_shards && s->done == s->entries) {
			continue; /* finalize names the shards to run again */
		}
		runs_text(s, runs, sizeof(runs));
		fprintf(f,
			"  shard %" PRIu32 ": %" PRIu64 " entries, %" PRIu64 " done, %" PRIu64
			" failed, %" PRIu64 " pending; %s\n",
			i, s->entries, s->done, s->failed, s->entries - s->done - s->failed, runs);
	}
	for (size_t i = 0; i < PLAN_MAX_EVERY_HOST && m->dests[i].name[0]; i++) {
		const struct dest_tally *d = &m->dests[i];
		char esc[1024];

		fprintf(f, "  destination %s: %" PRIu64 " pushes copied, %" PRIu64 " not",
			log_escape_short(d->name, esc, sizeof(esc)), d->copied, d->failed);
		if (d->failed) {
			fprintf(f, " (the last %s, exit %d)", d->last_status, d->last_exit);
		}
		fprintf(f, "; %" PRIu64 " bytes received\n", d->bytes);
	}
	if (a->entries > 0 && (all_shards || a->done < a->entries)) {
		fprintf(f,
			"  split files (finalize assembles them): %" PRIu64 " entries, %" PRIu64
			" done, %" PRIu64 " failed, %" PRIu64 " pending\n",
			a->entries, a->done, a->failed, a->entries - a->done - a->failed);
	}
}

void merged_summary(const struct merged *m, const struct client_opts *o, bool to_stdout)
{
	if (o->csv) {
		return;
	}
	if (o->json) {
		summary_json(m);
		fflush(stdout);
		return;
	}
	summary_text(m, to_stdout ? stdout : stderr, to_stdout);
}

/* report --watch: the totals and shards again every few seconds, until nothing is pending. */
#define REPORT_WATCH_S 5

int cmd_report(struct client_opts *o, char **args, int nargs)
{
	int rc;

	if (nargs != 1) {
		log_error("usage: rdmacp report PLAN [--json|--csv] [--watch]");
		return EXIT_USAGE;
	}
	if (o->json && o->csv) {
		log_error("--json or --csv, not both");
		return EXIT_USAGE;
	}
	if (o->watch && o->csv) {
		log_error("--watch prints totals, not --csv rows");
		return EXIT_USAGE;
	}
	for (;;) {
		/* Watching, each round is the totals and the shards, not every entry. */
		struct merged m = { .o = o,
				    .on_entry = o->watch ? NULL : entry_out,
				    .on_split = o->watch ? NULL : split_out };
		uint64_t pending = 0;

		rc = merged_load(&m, args[0]);
		if (rc == 0 && o->csv) {
			printf("name,type,shard,state,size,code\n");
		}
		if (rc == 0) {
			rc = plan_pass(m.r, merged_entry, &m);
		}
		if (rc == 0) {
			rc = merged_foreign(&m, args[0]);
		}
		if (rc == 0) {
			merged_summary(&m, o, true);
			fflush(stdout);
			/* A split file whose ranges are in waits for finalize, not for shards. */
			pending = m.by_state[0] - m.split_ready;
		}
		merged_free(&m);
		if (rc != 0 || !o->watch || pending == 0) {
			return rc;
		}
		sleep(REPORT_WATCH_S);
	}
}
