/* SPDX-License-Identifier: MIT */
/*
 * A migration's pushes (migrate.h): one push of a list and what its exit
 * code does to a run's, and their destinations: the plan's host shard mod
 * n, or with plan --every-host every host, one push reaching them all as a
 * fan-out (fanout.h). A fan-out push journals one line per
 * destination (its outcome of that push); when one of them did not copy,
 * every outcome the push journaled done is followed by a failed one, so
 * that the shard's next run sends it again, to all of them (a destination
 * that has it keeps it at the plan's skip level).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "exitcodes.h"
#include "fanout.h"
#include "macro.h"
#include "migrate.h"
#include "ndjson.h"
#include "plan.h"

/* HOST:PATH/ of the plan's host k (a v6 address in brackets). 0 or -ENOMEM. */
static int host_dest(const struct plan_header *h, uint32_t k, char **ret)
{
	const char *p = h->hosts;
	size_t hl;
	bool v6;

	for (; k > 0; k--) {
		p = strchr(p, ',') + 1;
	}
	hl = strcspn(p, ",");
	v6 = memchr(p, ':', hl) != NULL;
	if (asprintf(ret, "%s%.*s%s:%s%s", v6 ? "[" : "", (int)hl, p, v6 ? "]" : "", h->path,
		     h->path[strlen(h->path) - 1] == '/' ? "" : "/") < 0) {
		*ret = NULL;
		return -ENOMEM;
	}
	return 0;
}

void runner_dests_free(struct runner *ru)
{
	for (size_t i = 0; i < ru->ndests; i++) {
		free(ru->dests[i]);
	}
	ru->ndests = 0;
}

int runner_dests(struct runner *ru, uint32_t shard)
{
	uint32_t n = plan_host_count(ru->h);
	uint32_t first = ru->h->every_host ? 0 : shard % n,
		 last = ru->h->every_host ? n : first + 1;

	runner_dests_free(ru);
	if (last - first > ARRAY_SIZE(ru->dests)) {
		return EXIT_BAD_PLAN; /* the reader refuses such a plan: not reached */
	}
	for (uint32_t k = first; k < last; k++) {
		if (host_dest(ru->h, k, &ru->dests[ru->ndests]) < 0) {
			return EXIT_LOCAL_IO;
		}
		ru->ndests++;
	}
	return 0;
}

/* fanout_set_observer's fn: a destination's outcome of this push, a journal line. */
static void dest_observe(void *ud, const struct fanout_dest *d)
{
	struct runner *ru = ud;
	bool copied = d->status == PROTO_RELAY_COPIED;
	char name[PROTO_MAX_HOST + PROTO_MAX_PATH + 8];

	snprintf(name, sizeof(name), "%s%s%s:%s", strchr(d->rem.host, ':') ? "[" : "", d->rem.host,
		 strchr(d->rem.host, ':') ? "]" : "", d->rem.path);
	journal_put_dest(ru->j->f, name, copied ? JOURNAL_COPIED : JOURNAL_FAILED,
			 fanout_status_name(d->status), d->files_ok, d->bytes, d->exit_code,
			 d->text);
	ru->fan_failed |= !copied;
}

/* The journal's size now, every line written out: where a push's lines will begin. */
static off_t journal_mark(struct journal_writer *j)
{
	struct stat st;

	if (fflush(j->f) != 0 || fstat(j->fd, &st) < 0) {
		return -1;
	}
	return st.st_size;
}

/* One line of the push's: a done outcome, a failed one after it. */
static void fail_line(struct journal_writer *j, char *line, size_t len, struct ndjson_obj *obj,
		      struct journal_line *jl, FILE *out)
{
	const char *why;

	if (len == 0 || line[len - 1] != '\n') {
		return;
	}
	line[--len] = '\0';
	if (journal_parse(line, len, obj, jl, &why) < 0 || jl->kind != JL_ENTRY ||
	    !journal_state_done(jl->state)) {
		return;
	}
	if (jl->range < 0) {
		journal_put_entry(out, jl->name, JOURNAL_FAILED, 0, "DEST_FAILED");
	} else {
		journal_put_range(out, jl->name, (uint32_t)jl->range, JOURNAL_FAILED, 0,
				  "DEST_FAILED", NULL);
	}
	j->failed++;
}

/*
 * Each outcome done that the journal got between from and to, followed by
 * a failed one (code DEST_FAILED): written to a scratch file first, then
 * appended, so that the journal is never read while it grows.
 */
static int journal_fail_since(struct journal_writer *j, off_t from, off_t to)
{
	_cleanup_free_ struct ndjson_obj *obj = malloc(sizeof(*obj));
	_cleanup_free_ struct journal_line *jl = malloc(sizeof(*jl));
	_cleanup_fclose_ FILE *in = NULL, *out = tmpfile();
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	off_t at = from;
	int fd = dup(j->fd);
	char buf[65536];
	size_t got;

	if (fd < 0 || !obj || !jl || !out || !(in = fdopen(fd, "r"))) {
		if (fd >= 0 && !in) {
			close(fd);
		}
		return -ENOMEM;
	}
	if (fseeko(in, from, SEEK_SET) < 0) {
		return -errno;
	}
	while (at < to && (len = getline(&line, &cap, in)) > 0) {
		at += len;
		fail_line(j, line, (size_t)len, obj, jl, out);
	}
	rewind(out);
	while ((got = fread(buf, 1, sizeof(buf), out)) > 0) {
		if (fwrite(buf, 1, got, j->f) != got) {
			return -EIO;
		}
	}
	journal_sync(j);
	return 0;
}

int runner_copy(struct runner *ru, const char *src)
{
	char *args[ARRAY_SIZE(ru->dests) + 1];
	bool fan = ru->ndests > 1 && ru->j;
	off_t from = fan ? journal_mark(ru->j) : 0;
	int nargs = 1, rc;

	args[0] = (char *)src;
	for (size_t i = 0; i < ru->ndests; i++) {
		args[nargs++] = ru->dests[i];
	}
	ru->fan_failed = false;
	if (fan) {
		fanout_set_observer(dest_observe, ru);
	}
	rc = cmd_copy(ru->o, args, nargs);
	fanout_set_observer(NULL, NULL);
	if (fan && ru->fan_failed) {
		off_t to = journal_mark(ru->j);

		if (from < 0 || to < 0 || journal_fail_since(ru->j, from, to) < 0) {
			rc = EXIT_LOCAL_IO;
		}
	}
	return rc;
}

int run_push_outcome(const struct runner *ru, uint64_t failed, uint64_t vanished, int rc)
{
	/* Entries that failed only because the source lost them: no failure of the run. */
	if ((rc == EXIT_PARTIAL || rc == EXIT_LOCAL_IO) && ru->j && ru->j->failed == failed &&
	    ru->j->vanished > vanished) {
		return 0;
	}
	return rc;
}

/* One push of a list of names: the plan's options, --partial, the shard's destination. */
int run_push(struct runner *ru, struct batch *b)
{
	struct client_opts *o = ru->o;
	uint64_t failed = ru->j ? ru->j->failed : 0, vanished = ru->j ? ru->j->vanished : 0;
	int rc;

	if (fflush(b->f) != 0) {
		return EXIT_LOCAL_IO;
	}
	snprintf(o->files_from, sizeof(o->files_from), "%s", b->path);
	o->from0 = true;
	rc = run_push_outcome(ru, failed, vanished, runner_copy(ru, ru->h->base));
	if (ftruncate(fileno(b->f), 0) < 0 || fseek(b->f, 0, SEEK_SET) < 0) {
		return EXIT_LOCAL_IO;
	}
	b->n = 0;
	return rc;
}

void run_result(struct runner *ru, int rc)
{
	if (rc != 0 && ru->rc == 0) {
		ru->rc = rc;
	}
	if (rc == EXIT_INTERRUPTED || copy_interrupted()) {
		ru->rc = EXIT_INTERRUPTED;
		ru->stop = true;
	} else if (rc == EXIT_DAEMON_STOPPING) {
		/* The next batch would find no daemon: stop, and say why. */
		ru->rc = EXIT_DAEMON_STOPPING;
		ru->stop = true;
	}
}
