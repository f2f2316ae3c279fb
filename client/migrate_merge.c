/* SPDX-License-Identifier: MIT */
/*
 * Reading a plan with its journals (migrate.h): the plan streamed through
 * once a pass, a journal loaded and checked against the plan (its lines for
 * no entry of the plan refused), and the merged load of the plan and every
 * journal next to it that report and finalize share: each entry's latest
 * outcome, what a split file's ranges make of it, counts by state and by
 * shard.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "migrate.h"
#include "plan.h"

int open_plan(const char *path, struct plan_reader **ret)
{
	char err[8192];
	int r = plan_open(path, ret, err, sizeof(err));

	if (r < 0) {
		log_error("%s", err);
		return r == -EBADMSG ? EXIT_BAD_PLAN : EXIT_LOCAL_IO;
	}
	return 0;
}

/*
 * Read the plan through once: every line checked, the digest at the end.
 * each (NULL: none) sees every entry. 0 or an exit code.
 */
int plan_pass(struct plan_reader *r, int (*each)(void *ud, const struct plan_entry *e), void *ud)
{
	_cleanup_free_ struct plan_entry *e = malloc(sizeof(*e));
	char err[8192];
	int q, rc;

	if (!e || plan_rewind(r) < 0) {
		return EXIT_LOCAL_IO;
	}
	while ((q = plan_next(r, e, err, sizeof(err))) > 0) {
		if (each && (rc = each(ud, e)) != 0) {
			return rc;
		}
	}
	if (q < 0) {
		log_error("%s", err);
		return q == -EBADMSG ? EXIT_BAD_PLAN : EXIT_LOCAL_IO;
	}
	return 0;
}

/* What journal_load takes a journal's lines into, and checks them against. */
struct journal_into {
	const char *esc; /* the journal's path, escaped */
	const char *plan_id;
	int64_t shard;
	uint32_t shards;
	struct nameset *ns; /* NULL: lines checked, not kept */
	struct rangeset *rs;
	struct shard_stats *st;
};

/* A fan-out destination's outcome of a push, added to its tally (a new one in a free slot). */
static void dest_tally_add(struct dest_tally *v, const struct journal_line *jl)
{
	for (size_t i = 0; i < PLAN_MAX_EVERY_HOST; i++) {
		struct dest_tally *d = &v[i];

		if (d->name[0] && strcmp(d->name, jl->name)) {
			continue;
		}
		snprintf(d->name, sizeof(d->name), "%s", jl->name);
		d->bytes += jl->bytes;
		if (jl->state == JOURNAL_COPIED) {
			d->copied++;
			return;
		}
		d->failed++;
		d->last_exit = jl->exit_code;
		snprintf(d->last_status, sizeof(d->last_status), "%s", jl->code);
		return;
	}
	/* More destinations than a plan can name (hosts edited in its header): not tallied. */
}

static int load_line(void *ud, uint64_t line, const struct journal_line *jl)
{
	struct journal_into *in = ud;
	int q = 0;

	if (line == 1 && jl->kind != JL_HEADER) {
		log_error("%s:1: not a journal (no journal header)", in->esc);
		return EXIT_BAD_PLAN;
	}
	if (jl->kind == JL_HEADER && (line != 1 || strcmp(jl->plan_id, in->plan_id) ||
				      jl->shard != in->shard || jl->shards != in->shards)) {
		if (strcmp(jl->plan_id, in->plan_id)) {
			log_error("%s:%" PRIu64 ": the journal of another plan (id %s, this "
				  "plan's is %s): remove it, or use its own plan",
				  in->esc, line, jl->plan_id, in->plan_id);
		} else {
			log_error("%s:%" PRIu64 ": the journal of shard %" PRId64 " of %" PRIu32
				  ", not of shard %" PRId64 " of %" PRIu32,
				  in->esc, line, jl->shard, jl->shards, in->shard, in->shards);
		}
		return EXIT_BAD_PLAN;
	}
	if (jl->kind == JL_ENTRY && in->ns) {
		q = jl->range < 0 ? nameset_put(in->ns, jl->name, jl->state, jl->code)
				  : nameset_put_range(in->ns, jl->name, (uint32_t)jl->range,
						      jl->state, jl->code);
		if (q == 0 && in->rs && jl->range >= 0 && jl->has_hash) {
			q = rangeset_put(in->rs, jl->name, (uint32_t)jl->range, jl->hash);
		}
	}
	if (jl->kind == JL_DEST && in->st && in->st->dests) {
		dest_tally_add(in->st->dests, jl);
	} else if (jl->kind == JL_ENTRY && in->st) {
		in->st->sent += jl->bytes;
	} else if (jl->kind == JL_RUN_START && in->st) {
		in->st->runs++;
	} else if (jl->kind == JL_RUN_END && in->st) {
		in->st->ended++;
		in->st->ended_sent += jl->bytes;
		in->st->seconds += jl->seconds > 0 ? jl->seconds : 0;
		in->st->last_exit = jl->exit_code;
	}
	return q < 0 ? EXIT_LOCAL_IO : 0;
}

/* A journal_read result as an exit code, its error said. */
static int journal_read_rc(int r, const char *err)
{
	if (r < 0) {
		log_error("%s", err);
		return r == -EBADMSG ? EXIT_BAD_PLAN : EXIT_LOCAL_IO;
	}
	return r;
}

/*
 * One journal into ns (the latest outcome of each name wins; NULL: only
 * checked). Checks that it is this plan's, for this shard; a last line cut
 * short is left out (journal_read). fd: the journal, open; ret_good_end:
 * the offset after its last whole line. 0, or an exit code (said why).
 */
int journal_load(int fd, const char *jpath, const char *plan_id, int64_t shard, uint32_t shards,
		 struct nameset *ns, struct rangeset *rs, struct shard_stats *st,
		 off_t *ret_good_end)
{
	char esc[1024], err[8192];
	struct journal_into in = { .esc = log_escape_short(jpath, esc, sizeof(esc)),
				   .plan_id = plan_id,
				   .shard = shard,
				   .shards = shards,
				   .ns = ns,
				   .rs = rs,
				   .st = st };

	return journal_read_rc(
	    journal_read(fd, jpath, load_line, &in, ret_good_end, err, sizeof(err)), err);
}

/* The first line of a journal whose name (or range) ns has without the PLANNED mark. */
struct foreign_find {
	const char *esc;
	struct nameset *ns;
};

static int foreign_line(void *ud, uint64_t line, const struct journal_line *jl)
{
	struct foreign_find *ff = ud;
	const struct nameset_slot *s;
	char esc[1024];

	if (jl->kind != JL_ENTRY) {
		return 0;
	}
	s = jl->range < 0 ? nameset_get(ff->ns, jl->name)
			  : nameset_get_range(ff->ns, jl->name, (uint32_t)jl->range);
	if (!s || (s->marks & NAMESET_PLANNED)) {
		return 0;
	}
	log_escape_short(jl->name, esc, sizeof(esc));
	if (jl->range < 0) {
		log_error("%s:%" PRIu64 ": '%s' is no entry of this plan that a shard copies: a "
			  "line of another plan's journal, or edited",
			  ff->esc, line, esc);
	} else {
		log_error("%s:%" PRIu64 ": range %" PRId64
			  " of '%s' is no entry of this plan: a line of another plan's "
			  "journal, or edited",
			  ff->esc, line, jl->range, esc);
	}
	return EXIT_BAD_PLAN;
}

/*
 * After a pass that marked each entry's outcome PLANNED: a shard journal's
 * line for anything else is refused, naming it. A journal line is only
 * ever a key (never a path), but one that belongs to no entry is not this
 * plan's record, and a journal with such lines is not to be trusted with
 * the others. fd: the journal; called when ns has some unmarked (a second
 * read, to name the line). 0 or EXIT_BAD_PLAN.
 */
int journal_foreign(struct nameset *ns, int fd, const char *jpath)
{
	char esc[1024], err[8192];
	struct foreign_find ff = { .esc = log_escape_short(jpath, esc, sizeof(esc)), .ns = ns };

	return journal_read_rc(journal_read(fd, jpath, foreign_line, &ff, NULL, err, sizeof(err)),
			       err);
}

/* finalize's own journal (fd, open) into m->final, its deletions counted. */
static int merged_load_final(struct merged *m, int fd, const char *jpath)
{
	int rc = journal_load(fd, jpath, m->h->id, -1, m->h->shards, &m->final, NULL, NULL, NULL);

	for (size_t k = 0; k < m->final.cap; k++) {
		m->deleted += m->final.v[k].state == JOURNAL_DELETED;
	}
	return rc;
}

/* The plan and every journal next to it; EXIT_BAD_PLAN for one that doesn't belong. */
int merged_load(struct merged *m, const char *plan)
{
	char jpath[PATH_MAX];
	int rc = open_plan(plan, &m->r);

	if (rc != 0) {
		return rc;
	}
	m->h = plan_reader_header(m->r);
	m->shards = calloc(m->h->shards, sizeof(*m->shards));
	if (!m->shards) {
		return EXIT_LOCAL_IO;
	}
	for (uint32_t i = 0; i <= m->h->shards && rc == 0; i++) {
		bool final = i == m->h->shards;
		int fd;

		if (journal_path(plan, final ? UINT32_MAX : i, jpath, sizeof(jpath)) < 0) {
			rc = EXIT_USAGE;
			break;
		}
		fd = open(jpath, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			if (errno != ENOENT) {
				rc = EXIT_LOCAL_IO;
			}
			continue;
		}
		if (final) {
			rc = merged_load_final(m, fd, jpath);
		} else {
			m->shards[i].journal = true;
			m->shards[i].dests = m->dests;
			rc = journal_load(fd, jpath, m->h->id, i, m->h->shards, &m->ns, &m->digests,
					  &m->shards[i], NULL);
		}
		close(fd);
	}
	return rc;
}

/* After a pass of merged_entry: a shard journal's line for no entry of the plan refused. */
int merged_foreign(struct merged *m, const char *plan)
{
	char jpath[PATH_MAX];
	int rc = 0;

	if (nameset_count_unmarked(&m->ns, NAMESET_PLANNED) == 0) {
		return 0;
	}
	for (uint32_t i = 0; i < m->h->shards && rc == 0; i++) {
		int fd;

		if (journal_path(plan, i, jpath, sizeof(jpath)) < 0) {
			rc = EXIT_USAGE;
			break;
		}
		fd = open(jpath, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			continue;
		}
		rc = journal_foreign(&m->ns, fd, jpath);
		close(fd);
	}
	return rc;
}

void merged_free(struct merged *m)
{
	nameset_free(&m->ns);
	nameset_free(&m->final);
	nameset_free(&m->kept);
	rangeset_free(&m->digests);
	free(m->shards);
	plan_close(m->r);
}

/*
 * What the outcomes of a split file's ranges (in ns) make of it: every
 * range sent (parts to assemble), every one kept (the destination's file
 * unchanged: nothing to assemble), some of each (the file changed between
 * the shards' looks), one the source lost, or not all done yet.
 * ret_accepted (may be NULL): every vanished range with MISSING_OK.
 */
int split_kind(const struct nameset *ns, const struct plan_entry *e, bool *ret_accepted)
{
	uint32_t kept = 0, sent = 0, vanished = 0, accepted = 0;

	for (uint32_t i = 0; i < e->ranges; i++) {
		const struct nameset_slot *s = nameset_get_range(ns, e->name, i);

		if (s && s->state == JOURNAL_VANISHED) {
			vanished++;
			accepted += !strcmp(s->code, "MISSING_OK");
		} else if (s && s->state == JOURNAL_SKIPPED) {
			kept++;
		} else if (s && journal_state_done(s->state)) {
			sent++;
		}
	}
	if (ret_accepted) {
		*ret_accepted = vanished > 0 && accepted == vanished;
	}
	if (vanished) {
		return SPLIT_VANISHED;
	}
	if (kept + sent < e->ranges) {
		return SPLIT_PENDING;
	}
	return !kept ? SPLIT_PARTS : !sent ? SPLIT_UNCHANGED : SPLIT_MIXED;
}

/* A split file's entry: what its ranges make of it; one kept unchanged remembered, one the source lost counted. */
static int merged_split(struct merged *m, const struct plan_entry *e, int *state)
{
	bool accepted;

	m->split = (typeof(m->split)){ .ranges = e->ranges,
				       .n = e->n,
				       .kind = split_kind(&m->ns, e, &accepted) };
	m->split_files++;
	if (m->split.kind == SPLIT_UNCHANGED && *state != JOURNAL_SKIPPED &&
	    *state != JOURNAL_COPIED && nameset_put(&m->kept, e->name, JOURNAL_SKIPPED, NULL) < 0) {
		return EXIT_LOCAL_IO;
	}
	if (m->split.kind == SPLIT_VANISHED && !journal_state_done(*state)) {
		*state = JOURNAL_VANISHED;
		m->vanished_accepted += accepted;
	}
	return 0;
}

int merged_entry(void *ud, const struct plan_entry *e)
{
	struct merged *m = ud;
	const struct nameset_slot *s = e->ftype == PLAN_FT_RANGE
					   ? nameset_get_range(&m->ns, e->name, e->range)
				       : e->ranges ? nameset_get(&m->final, e->name)
						   : nameset_get(&m->ns, e->name);
	int state = s ? s->state : 0;
	struct shard_stats *st = e->ranges ? &m->assembly : &m->shards[e->shard];

	/* What is left unmarked in the shards' journals names no entry (merged_foreign). */
	if (e->ftype == PLAN_FT_RANGE) {
		nameset_mark_range(&m->ns, e->name, e->range, NAMESET_PLANNED);
	} else if (!e->ranges) {
		nameset_mark(&m->ns, e->name, NAMESET_PLANNED);
	}

	/* Done once finalize assembled it (or kept it); its ranges are counted as they come. */
	if (e->ranges && merged_split(m, e, &state) != 0) {
		return EXIT_LOCAL_IO;
	}
	if (e->ftype == PLAN_FT_RANGE) {
		m->split.done += journal_state_done(state);
	}
	if (state == JOURNAL_VANISHED) {
		m->vanished++;
		m->vanished_accepted += !e->ranges && !strcmp(s->code, "MISSING_OK");
	}
	/* A deleted name (the last word of a run without --delete can't be that) counts as pending. */
	if (state == JOURNAL_DELETED) {
		state = 0;
	}
	m->by_state[state]++;
	/* A split file is finalize's to assemble, not its shard's; its bytes are its ranges'. */
	st->entries++;
	st->bytes += e->ranges ? 0 : e->size;
	/* A name the source lost is no work left for its shard (finalize judges it). */
	st->done += journal_state_done(state) || state == JOURNAL_VANISHED;
	st->failed += state == JOURNAL_FAILED;
	if (m->on_entry) {
		m->on_entry(m, e, state, s && state ? s->code : "");
	}
	if (e->ftype == PLAN_FT_RANGE && e->range + 1 == m->split.ranges) {
		const struct nameset_slot *f = nameset_get(&m->final, e->name);
		bool assembled = f && journal_state_done(f->state);

		bool mixed = m->split.kind == SPLIT_MIXED;

		m->split_ready += !assembled && !mixed && m->split.done == m->split.ranges;
		m->split_mixed += !assembled && mixed;
		if (m->on_split) {
			m->on_split(m, e->name, assembled);
		}
	}
	return 0;
}

int merged_final_again(struct merged *m, const char *plan)
{
	char jpath[PATH_MAX];
	int fd, rc;

	/* What merged_entry counts, from nothing again; what journal_load counted, kept. */
	nameset_free(&m->final);
	nameset_free(&m->kept);
	m->split_files = m->split_ready = m->split_mixed = 0;
	m->vanished = m->vanished_accepted = m->deleted = 0;
	m->assembly = (struct shard_stats){ 0 };
	memset(m->by_state, 0, sizeof(m->by_state));
	for (uint32_t i = 0; i < m->h->shards; i++) {
		struct shard_stats *st = &m->shards[i];

		st->entries = st->bytes = st->done = st->failed = 0;
	}
	if (journal_path(plan, UINT32_MAX, jpath, sizeof(jpath)) < 0) {
		return EXIT_USAGE;
	}
	fd = open(jpath, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return errno == ENOENT ? plan_pass(m->r, merged_entry, m) : EXIT_LOCAL_IO;
	}
	rc = merged_load_final(m, fd, jpath);
	close(fd);
	return rc ? rc : plan_pass(m->r, merged_entry, m);
}

uint64_t merged_done(const struct merged *m)
{
	return m->by_state[JOURNAL_COPIED] + m->by_state[JOURNAL_SKIPPED] +
	       m->by_state[JOURNAL_RESUMED];
}
