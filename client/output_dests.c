/* SPDX-License-Identifier: MIT */
/*
 * A fan-out's destinations in the summary (output.h): one line each on
 * stderr after the text summary, and the --json summary's "destinations"
 * array. Host, path and error text came from the network: escaped.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "output.h"

void output_destinations(struct output *out, const struct output_dest *v, size_t n)
{
	out->dests = v;
	out->ndests = n;
}

void output_dests_json(const struct output *out)
{
	if (out->ndests == 0) {
		return;
	}
	printf(",\"destinations\":[");
	for (size_t i = 0; i < out->ndests; i++) {
		const struct output_dest *d = &out->dests[i];

		printf("%s{\"host\":", i ? "," : "");
		output_json_string(stdout, d->host);
		printf(",\"path\":");
		output_json_string(stdout, d->path);
		printf(",\"status\":\"%s\",\"files_ok\":%" PRIu64 ",\"files_failed\":%" PRIu64
		       ",\"bytes\":%" PRIu64 ",\"exit\":%d,\"error\":",
		       d->status, d->files_ok, d->files_failed, d->bytes, d->exit_code);
		output_json_string(stdout, d->error);
		printf("}");
	}
	printf("]");
}

/* "HOST:PATH" as typed ([v6] in brackets), escaped. */
static const char *dest_name(const struct output_dest *d, char *buf, size_t len)
{
	char h[1100], p[4200];
	bool v6 = strchr(d->host, ':') != NULL;

	log_escape(d->host, h, sizeof(h));
	log_escape_short(d->path, p, sizeof(p));
	snprintf(buf, len, "%s%s%s:%s", v6 ? "[" : "", h, v6 ? "]" : "", p);
	return buf;
}

void output_dests_lines(const struct output *out)
{
	for (size_t i = 0; i < out->ndests; i++) {
		const struct output_dest *d = &out->dests[i];
		char name[5400], size[32], esc[4200];

		dest_name(d, name, sizeof(name));
		output_human_bytes(d->bytes, size, sizeof(size));
		if (d->copied) {
			/* -q: errors alone. */
			if (out->verbose >= 0) {
				fprintf(stderr, "%s: copied, %" PRIu64 " files, %s\n", name,
					d->files_ok, size);
			}
			continue;
		}
		log_escape_short(d->error, esc, sizeof(esc));
		if (d->files_ok > 0 || d->files_failed > 0) {
			fprintf(stderr,
				"%s: %s: %s (exit %d; %" PRIu64 " files copied, %" PRIu64
				" failed, %s)\n",
				name, d->status, esc[0] ? esc : "no reason given", d->exit_code,
				d->files_ok, d->files_failed, size);
		} else {
			fprintf(stderr, "%s: %s: %s (exit %d)\n", name, d->status,
				esc[0] ? esc : "no reason given", d->exit_code);
		}
	}
}
