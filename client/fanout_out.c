/* SPDX-License-Identifier: MIT */
/*
 * Each fan-out destination's outcome (fanout.h): the push's own, recorded
 * when it ends; the chain's, from the results (fanout_wire.c) or failed
 * for want of them; their lines and --json entries (output_dests.c); and
 * the one exit code for them all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "exitcodes.h"
#include "fanout.h"
#include "log.h"
#include "macro.h"

void fanout_free(struct fanout *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->dests[i].ticket);
	}
	follow_book_free(f->book);
	f->book = NULL;
	free(f->dests);
	f->dests = NULL;
	f->n = 0;
}

const char *fanout_status_name(uint8_t status)
{
	switch (status) {
	case PROTO_RELAY_COPIED:
		return "copied";
	case PROTO_RELAY_PARTIAL:
		return "partial";
	case PROTO_RELAY_UNREACHED:
		return "unreached";
	default:
		return "failed";
	}
}

int fanout_exit_code(const struct fanout *f)
{
	size_t copied = 0;
	int first_failed = 0;

	for (size_t i = 0; i < f->n; i++) {
		const struct fanout_dest *d = &f->dests[i];

		if (d->status == PROTO_RELAY_COPIED) {
			copied++;
		} else if (first_failed == 0) {
			first_failed = d->exit_code ? d->exit_code : EXIT_PROTOCOL;
		}
	}
	if (copied == f->n) {
		return EXIT_OK;
	}
	return copied > 0 ? EXIT_FANOUT_PARTIAL : first_failed;
}

static void on_error_line(void *ud, int level, const char *text)
{
	struct fanout *f = ud;

	(void)level;
	snprintf(f->last_error, sizeof(f->last_error), "%s", text);
}

void fanout_watch_errors(struct fanout *f)
{
	log_set_observer(LOG_ERR, on_error_line, f);
}

/* A push after its OPEN ended for its session's sake: the connection or the daemon lost. */
static bool lost_mid_copy(int rc)
{
	switch (rc) {
	case EXIT_TRANSPORT:
	case EXIT_PROTOCOL:
	case EXIT_CONNECT:
	case EXIT_REMOTE_IO:
	case EXIT_DAEMON_STOPPING:
		return true;
	default:
		return false;
	}
}

/*
 * The push to the first destination, after its OPEN, ended (rc) for that
 * destination's sake: its session lost, or the hop too slow (the slow-hop
 * rule's verdict, slowhop.h). The one test of a hop cut out mid-copy.
 */
static bool cut_mid_copy(const struct fanout *f, int rc)
{
	return f->opened && rc != EXIT_OK && (lost_mid_copy(rc) || f->slow.cut);
}

/* note at the end of d's text, what comes before cut short to make room. */
static void append(struct fanout_dest *d, const char *note)
{
	size_t len = strlen(note), room = sizeof(d->text) - 1 - MIN(len, sizeof(d->text) - 1);

	d->text[MIN(strlen(d->text), room)] = '\0';
	strncat(d->text, note, sizeof(d->text) - 1 - strlen(d->text));
}

/*
 * The first destination's outcome: rc its push's exit code, t its totals
 * (NULL: none); cut: it is cut out of the chain. One whose session was
 * lost mid-copy with --partial keeps what it had: a resumable partial.
 */
static void record_first(struct fanout *f, const struct output_totals *t, int rc, bool cut)
{
	struct fanout_dest *d = &f->dests[f->first];
	bool died = cut_mid_copy(f, rc);

	d->exit_code = (uint8_t)rc;
	d->status = rc == EXIT_OK				 ? PROTO_RELAY_COPIED
		    : rc == EXIT_PARTIAL || (died && f->partial) ? PROTO_RELAY_PARTIAL
		    : f->connecting && !f->opened		 ? PROTO_RELAY_UNREACHED
								 : PROTO_RELAY_FAILED;
	if (t) {
		d->files_ok = t->files;
		d->files_failed = t->failed;
		d->bytes = t->bytes;
	}
	snprintf(d->text, sizeof(d->text), "%s", rc == EXIT_OK ? "" : f->last_error);
	if (rc != EXIT_OK && !d->text[0]) {
		snprintf(d->text, sizeof(d->text), "failed with exit code %d", rc);
	}
	if (cut) {
		append(d, "; cut out of the chain mid-copy");
	}
	if (died && f->partial) {
		append(d, ", its partial kept for a --partial re-run");
	}
}

struct slowhop *fanout_slowhop(struct fanout *f)
{
	slowhop_restart(&f->slow);
	return f->slow.window_ms > 0 && f->first + 1 < f->n ? &f->slow : NULL;
}

bool fanout_hop_died(const struct fanout *f, int rc)
{
	return cut_mid_copy(f, rc) && (!f->book || follow_book_replayable(f->book));
}

bool fanout_bypass(struct fanout *f, const struct output_totals *t, int rc)
{
	if (rc == EXIT_OK || rc == EXIT_INTERRUPTED || !f->connecting || f->first + 1 >= f->n) {
		return false;
	}
	if (f->opened && !fanout_hop_died(f, rc)) {
		return false;
	}
	record_first(f, f->opened ? t : NULL, rc, f->opened);
	return true;
}

/* The chain's destinations no result came for: failed with the push that carried them. */
static void fail_unreported(struct fanout *f, int rc)
{
	const char *via = f->dests[f->first].rem.host;

	for (size_t i = f->first + 1; i < f->n; i++) {
		struct fanout_dest *d = &f->dests[i];

		if (d->status != 0) {
			continue;
		}
		d->status = PROTO_RELAY_FAILED;
		d->exit_code = (uint8_t)(rc != EXIT_OK ? rc : EXIT_PROTOCOL);
		if (rc != EXIT_OK) {
			snprintf(d->text, sizeof(d->text), "upstream %s failed", via);
		} else {
			snprintf(d->text, sizeof(d->text), "no result from %s", via);
		}
	}
}

int fanout_conclude(struct fanout *f, struct output *out, const struct output_totals *t, int rc)
{
	record_first(f, t, rc, false);
	fail_unreported(f, rc);
	for (size_t i = 0; i < f->n; i++) {
		const struct fanout_dest *d = &f->dests[i];

		f->out[i] = (struct output_dest){
			.host = d->rem.host,
			.path = d->rem.path,
			.status = fanout_status_name(d->status),
			.copied = d->status == PROTO_RELAY_COPIED,
			.exit_code = d->exit_code,
			.files_ok = d->files_ok,
			.files_failed = d->files_failed,
			.bytes = d->bytes,
			.error = d->text,
		};
	}
	output_destinations(out, f->out, f->n);
	return fanout_exit_code(f);
}
