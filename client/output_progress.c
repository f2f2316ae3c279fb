/* SPDX-License-Identifier: MIT */
/*
 * The --progress line (output.h): bytes, rate, ETA, entries done, and the
 * entry being sent: the oldest a push has offered and not yet seen done (the
 * sender reads its files in the order it offers them), else the one last
 * done (a pull hears of its entries only as they end).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "macro.h"
#include "output.h"

/* b bytes as a person reads them: "512 B", "1.5 MiB". */
void output_human_bytes(uint64_t b, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	unsigned u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

void output_clock_start(struct output *out)
{
	out->t0 = now_seconds();
}

void output_entry_offered(struct output *out, const char *name)
{
	char *copy;

	/* A window past the cap is only less precise: the line names an older entry. */
	if (out->ninflight == OUTPUT_INFLIGHT_MAX || !(copy = strdup(name))) {
		return;
	}
	out->inflight[out->ninflight++] = copy;
}

void output_entry_done(struct output *out, const char *name)
{
	out->files_done++;
	if (!out->progress) {
		return; /* the names are the progress line's: nothing else reads them */
	}
	snprintf(out->last_name, sizeof(out->last_name), "%s", name);
	for (size_t i = 0; i < out->ninflight; i++) {
		if (strcmp(out->inflight[i], name) == 0) {
			free(out->inflight[i]);
			memmove(&out->inflight[i], &out->inflight[i + 1],
				(out->ninflight - i - 1) * sizeof(out->inflight[0]));
			out->ninflight--;
			break;
		}
	}
}

void output_release(struct output *out)
{
	for (size_t i = 0; i < out->ninflight; i++) {
		free(out->inflight[i]);
	}
	out->ninflight = 0;
}

/* Columns of the terminal the progress line is drawn on (80 when it won't say). */
static size_t term_columns(void)
{
	struct winsize ws;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40) {
		return ws.ws_col;
	}
	return 80;
}

/* " 17/120 NAME" (or " 17 files NAME") after the line so far, cut to the width. */
static void progress_entries(const struct output *out, char *line, size_t len)
{
	size_t used = strlen(line), width = term_columns() - 1;
	char esc[sizeof(out->last_name) * 4];
	const char *name;

	if (out->files_total > 0) {
		snprintf(line + used, len - used, " %" PRIu64 "/%" PRIu64, out->files_done,
			 out->files_total);
	} else {
		snprintf(line + used, len - used, " %" PRIu64 " files", out->files_done);
	}
	used = strlen(line);
	/* The name, shortened in the middle so its end (the file's own name) stays. */
	name = out->ninflight ? out->inflight[0] : out->last_name;
	if (name[0] && used + 10 < width && width - used <= sizeof(esc)) {
		log_escape_short(name, esc, width - used);
		snprintf(line + used, len - used, " %s", esc);
	}
}

void output_progress(struct output *out, uint64_t bytes)
{
	double now = now_seconds(), el = now - out->t0, rate;
	char b[32], r[32], line[1200];

	if (!out->progress || now - out->last_draw < 0.2) {
		return;
	}
	out->last_draw = now;
	rate = el > 0 ? (double)bytes / el : 0;
	output_human_bytes(bytes, b, sizeof(b));
	output_human_bytes((uint64_t)rate, r, sizeof(r));
	if (out->total_bytes > 0) {
		double pct = 100.0 * (double)bytes / (double)out->total_bytes;
		double eta =
		    rate > 0 ? (double)(out->total_bytes - MIN(bytes, out->total_bytes)) / rate : 0;
		snprintf(line, sizeof(line), "%12s %3.0f%% %10s/s %d:%02d:%02d ETA", b,
			 pct > 100 ? 100 : pct, r, (int)eta / 3600, (int)eta / 60 % 60,
			 (int)eta % 60);
	} else {
		snprintf(line, sizeof(line), "%12s %10s/s", b, r);
	}
	progress_entries(out, line, sizeof(line));
	fprintf(stderr, "\r%s\033[K", line);
	out->drawn = true;
}
