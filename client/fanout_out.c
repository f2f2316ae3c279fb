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

#include "exitcodes.h"
#include "fanout.h"
#include "log.h"

void fanout_free(struct fanout *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->dests[i].ticket);
	}
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

/* The first destination's outcome: rc its push's exit code, t its totals (NULL: none). */
static void record_first(struct fanout *f, const struct output_totals *t, int rc)
{
	struct fanout_dest *d = &f->dests[f->first];

	d->exit_code = (uint8_t)rc;
	d->status = rc == EXIT_OK		  ? PROTO_RELAY_COPIED
		    : rc == EXIT_PARTIAL	  ? PROTO_RELAY_PARTIAL
		    : f->connecting && !f->opened ? PROTO_RELAY_UNREACHED
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
}

bool fanout_bypass(struct fanout *f, int rc)
{
	if (rc == EXIT_OK || rc == EXIT_INTERRUPTED || !f->connecting || f->opened ||
	    f->first + 1 >= f->n) {
		return false;
	}
	record_first(f, NULL, rc);
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
	record_first(f, t, rc);
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
