/* SPDX-License-Identifier: MIT */
/*
 * A run's ranges of split files (migrate.h): each range pushed as a file of
 * its own under the staging directory, its bytes read in place from the
 * source file, its outcome journaled with the digest its sender computed;
 * first, at the plan's keep level, a probe of the whole files, whose ranges
 * are journaled kept where the destination has the file unchanged.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "daemon_conn.h"
#include "engine.h"
#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "migrate.h"
#include "plan.h"

void windows_free(struct windows *w)
{
	for (size_t i = 1; i < w->n; i++) {
		free(w->v[i].name);
		free(w->v[i].path);
		free(w->of[i].file);
	}
	free(w->v);
	free(w->of);
	if (w->basefd >= 0) {
		close(w->basefd);
	}
	*w = (struct windows){ .basefd = -1 };
}

/* Room for another range, and the staging directory before the first. */
static int windows_grow(struct windows *w)
{
	size_t cap = w->cap ? 2 * w->cap : 64;
	struct engine_src *v = realloc(w->v, cap * sizeof(*v));
	struct window_of *of = v ? realloc(w->of, cap * sizeof(*of)) : NULL;

	if (v) {
		w->v = v;
	}
	if (!of) {
		return -ENOMEM;
	}
	w->of = of;
	w->cap = cap;
	return 0;
}

/* A range of ours: the staging directory first, then it, read from the plan's base. */
int windows_add(struct runner *ru, const struct plan_entry *e)
{
	struct windows *w = &ru->win;
	struct engine_src *s;

	if (w->n == 0) {
		w->basefd = open(ru->h->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (w->basefd < 0) {
			return -errno;
		}
		plan_staging_dir(ru->h, w->staging);
		clock_gettime(CLOCK_REALTIME, &w->now);
	}
	if (w->n + 2 > w->cap && windows_grow(w) < 0) {
		return -ENOMEM;
	}
	if (w->n == 0) {
		/* Private to the migration: the parts are no one's files yet. */
		w->v[0] = (struct engine_src){ .name = w->staging,
					       .path = (char *)".",
					       .dirfd = w->basefd,
					       .ftype = PROTO_FT_DIR,
					       .mode = 0700,
					       .mtime = w->now };
		w->of[0] = (struct window_of){ 0 };
		w->n = 1;
	}
	s = &w->v[w->n];
	*s = (struct engine_src){ .dirfd = w->basefd,
				  .ftype = PROTO_FT_REG,
				  .mode = 0600,
				  .size = e->size,
				  .mtime = { .tv_sec = e->mtime, .tv_nsec = e->mtime_ns },
				  .window = true,
				  .window_off = e->offset,
				  .window_whole = ru->split_size };
	if (asprintf(&s->name, "%s/%" PRIu64 ".%" PRIu32, w->staging, ru->split_n, e->range) < 0) {
		s->name = NULL;
		return -ENOMEM;
	}
	s->path = strdup(e->name);
	w->of[w->n] = (struct window_of){ .file = strdup(e->name), .range = e->range };
	if (!s->path || !w->of[w->n].file) {
		free(s->name);
		free(s->path);
		free(w->of[w->n].file);
		return -ENOMEM;
	}
	w->n++;
	return 0;
}

/* What a range push tells of each part: a journal line for its range, with the sender's digest. */
static void window_observe(void *ud, const char *name, const char *action, uint64_t bytes,
			   const char *code, const uint8_t *hash)
{
	struct runner *ru = ud;
	struct journal_writer *j = ru->j;
	int state;

	for (size_t i = 1; i < ru->win.n; i++) {
		if (strcmp(ru->win.v[i].name, name)) {
			continue;
		}
		state = vanished_state(j, ru->win.of[i].file, action, code, &code);
		if (state < 0) {
			return;
		}
		if (journal_state_done(state) && !hash) {
			state = JOURNAL_FAILED; /* never done without the digest finalize checks */
			code = "NO_DIGEST";
		}
		journal_put_range(j->f, ru->win.of[i].file, ru->win.of[i].range, state, bytes, code,
				  journal_state_done(state) ? hash : NULL);
		j->failed += state == JOURNAL_FAILED;
		j->bytes += bytes;
		journal_outcome(j);
		return;
	}
}

static void keep_observe(void *ud, const char *name, const char *action, uint64_t bytes,
			 const char *code, const uint8_t *hash)
{
	(void)bytes;
	(void)code;
	(void)hash;
	/* Out of memory: not kept, its ranges sent (the safe way to be wrong). */
	if (!strcmp(action, "would_skip")) {
		(void)nameset_put(ud, name, JOURNAL_SKIPPED, NULL);
	}
}

/*
 * A probe (a dry run at the keep level) of the whole files whose ranges this
 * shard holds, at their final names; same: those the destination has as
 * the source has them. 0 or the probe's exit code.
 */
static int keep_probe(struct runner *ru, struct nameset *same)
{
	struct client_opts *o = ru->o;
	int verbose = o->verbose, progress = o->progress, rc;
	bool json = o->json;
	struct batch b;
	const char *last = "";

	if (batch_open(&b, ru->jpath, "keep") < 0) {
		return EXIT_LOCAL_IO;
	}
	for (size_t i = 1; i < ru->win.n; i++) {
		if (strcmp(ru->win.of[i].file, last)) {
			last = ru->win.of[i].file;
			batch_add(&b, last);
		}
	}
	o->dry_run = true;
	o->skip = split_keep_level(ru->h);
	o->hardlinks = o->xattrs = o->acls = o->owner = false;
	o->delta = o->assume_zero = o->partial = false;
	o->verbose = -1;
	o->json = false;
	o->progress = 0;
	copy_set_observer(keep_observe, same);
	rc = run_push(ru, &b);
	copy_set_observer(journal_observe, ru->j);
	o->verbose = verbose;
	o->json = json;
	o->progress = progress;
	apply_plan_options(o, ru->h);
	fclose(b.f);
	unlink(b.path);
	return rc;
}

/* The ranges of files the destination has unchanged: journaled skipped (no part, no digest). */
static void windows_keep(struct runner *ru, const struct nameset *same)
{
	struct windows *w = &ru->win;
	size_t k = 1;

	for (size_t i = 1; i < w->n; i++) {
		if (!nameset_get(same, w->of[i].file)) {
			w->v[k] = w->v[i];
			w->of[k++] = w->of[i];
			continue;
		}
		journal_put_range(ru->j->f, w->of[i].file, w->of[i].range, JOURNAL_SKIPPED, 0, NULL,
				  NULL);
		ru->kept++;
		free(w->v[i].name);
		free(w->v[i].path);
		free(w->of[i].file);
	}
	w->n = k;
	journal_sync(ru->j);
}

/* One ASSEMBLE SEED and its answer: 0, or -errno with the daemon's reason in why. */
static int seed_one(struct daemon_conn *s, struct msg *req, uint64_t *bytes, char *why,
		    size_t whylen)
{
	struct msg reply;
	int r = chan_send(&s->chan, req);

	/* Long enough to copy the ranges once on a slow disk. */
	r = r < 0 ? r
		  : chan_recv(&s->chan, &reply,
			      60000 + (int)MIN(req->u.assemble.size / 50000, 1u << 30));
	if (r < 0) {
		snprintf(why, whylen, "%s", strerror(-r));
		return r;
	}
	if (reply.type != MSG_ASSEMBLED) {
		if (reply.type == MSG_ERROR) {
			log_escape(reply.u.error.text, why, whylen);
		} else {
			snprintf(why, whylen, "unexpected %s", proto_type_name(reply.type));
		}
		msg_clear(&reply);
		return -EPROTO;
	}
	*bytes += reply.u.assembled.size;
	msg_clear(&reply);
	return 0;
}

/* The next request of ranges [*i, ...) of one file, at most PROTO_MAX_PARTS of them. */
static void seed_gather(const struct windows *w, size_t *i, struct msg_assemble *a)
{
	const char *file = w->of[*i].file;

	a->name = (char *)file;
	a->size = w->v[*i].window_whole;
	for (a->count = 0; *i < w->n && a->count < PROTO_MAX_PARTS && !strcmp(w->of[*i].file, file);
	     (*i)++) {
		struct proto_part *p = &a->parts[a->count++];
		const char *slash = strrchr(w->v[*i].name, '/');

		snprintf(p->name, sizeof(p->name), "%s", slash ? slash + 1 : w->v[*i].name);
		p->offset = w->v[*i].window_off;
		p->len = w->v[*i].size;
	}
}

/*
 * --delta: the daemon asked to make each part from the same range of the
 * file it has (ASSEMBLE SEED), so that each range's push sends only its
 * changed chunks against that old copy. Best effort: a daemon that can't
 * (too old, or an error) leaves the ranges to go whole, said once.
 */
static void windows_seed_at(struct runner *ru, const char *dest)
{
	struct remote rem;
	struct daemon_conn s = { .o = ru->o, .rem = &rem };
	struct msg req = { .type = MSG_ASSEMBLE };
	_cleanup_free_ struct proto_part *parts = calloc(PROTO_MAX_PARTS, sizeof(*parts));
	uint64_t bytes = 0;
	char why[4 * PROTO_MAX_TEXT + 1] = "", esc[1024];
	int r = 0;

	if (!parts || parse_remote(dest, &rem) != 1 ||
	    daemon_conn_open_waiting(&s, NULL, NULL, NULL) != 0) {
		daemon_conn_close(&s, false);
		return;
	}
	if (!(s.hello.caps & PROTO_CAP_ASM_SEED)) {
		log_warning(
		    "%s: the daemon can't make old copies of split files' ranges (too old): "
		    "--delta sends them whole",
		    rem.host);
		daemon_conn_close(&s, true);
		return;
	}
	req.u.assemble = (struct msg_assemble){ .flags = PROTO_ASM_SEED,
						.path = (char *)ru->h->path,
						.staging = ru->win.staging,
						.parts = parts };
	for (size_t i = 1; i < ru->win.n && r == 0;) {
		seed_gather(&ru->win, &i, &req.u.assemble);
		r = seed_one(&s, &req, &bytes, why, sizeof(why));
	}
	if (r < 0) {
		log_warning("%s: old copies of %s's ranges not made (--delta sends them whole): %s",
			    rem.host, log_escape_short(req.u.assemble.name, esc, sizeof(esc)), why);
	} else if (ru->o->verbose > 0) {
		fprintf(stderr, "old copies of ranges for --delta: %" PRIu64 " bytes\n", bytes);
	}
	daemon_conn_close(&s, r == 0);
}

/* windows_seed_at for each destination of the shard (every host's own old copies). */
static void windows_seed(struct runner *ru)
{
	for (size_t i = 0; i < ru->ndests; i++) {
		windows_seed_at(ru, ru->dests[i]);
	}
}

/*
 * The ranges: those of files the destination has unchanged left out; the
 * others in one push, as files under the staging directory, no skip level
 * (a part is new; the level was the whole file's).
 */
int run_windows(struct runner *ru)
{
	struct client_opts *o = ru->o;
	uint64_t failed, vanished;
	int rc;

	/* A fan-out makes no dry run: every host gets the ranges (MIGRATION.md, "Every host"). */
	if (split_keep_level(ru->h) && ru->ndests == 1) {
		struct nameset same = { 0 };

		rc = keep_probe(ru, &same);
		if (rc == EXIT_INTERRUPTED || copy_interrupted()) {
			nameset_free(&same);
			return EXIT_INTERRUPTED;
		}
		if (rc == EXIT_DAEMON_STOPPING) {
			nameset_free(&same);
			return rc;
		}
		windows_keep(ru, &same);
		nameset_free(&same);
		if (ru->win.n <= 1) {
			return 0;
		}
	}
	if (o->delta) {
		windows_seed(ru);
	}
	o->skip = 0;
	o->hardlinks = false;
	o->xattrs = false;
	o->acls = false;
	o->owner = false;
	copy_set_sources(ru->win.v, ru->win.n);
	copy_set_observer(window_observe, ru);
	failed = ru->j ? ru->j->failed : 0;
	vanished = ru->j ? ru->j->vanished : 0;
	rc = run_push_outcome(ru, failed, vanished, runner_copy(ru, ru->h->base));
	copy_set_sources(NULL, 0);
	copy_set_observer(journal_observe, ru->j);
	return rc;
}
