/* SPDX-License-Identifier: MIT */
/*
 * What rdmacp tells the user: one-line errors, -v per-file lines, the
 * --progress line, and --json NDJSON events on stdout (start, file, error,
 * summary). Control characters in names are escaped everywhere.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "proto/msg.h"

struct output {
	bool json;
	bool progress;	      /* updating line on stderr */
	int verbose;	      /* -1 quiet */
	uint64_t total_bytes; /* 0 = unknown */
	double t0;
	double last_draw;
	bool drawn;
	uint64_t files_failed;
	uint64_t resumed_bytes; /* kept from cut runs, not sent (--partial) */
	/* output_memory: the pinned pool, shown in start (mem_pool 0: not set) */
	uint64_t mem_limit; /* 0: no limit */
	uint64_t mem_pool;
	uint32_t mem_chunk, mem_chunks;
	bool mem_fitted;
};

/*
 * s as a JSON string literal on f, valid whatever s holds: controls, line
 * separators and direction overrides escaped, bytes that are not UTF-8 as
 * \ufffd. Every JSON string rdmacp prints goes through here.
 */
void output_json_string(FILE *f, const char *s);

void output_init(struct output *out, bool json, int progress, int verbose);
void output_start(struct output *out, const char *direction, const char *host,
		  const char *transport, unsigned lanes);
/*
 * The buffer pool chosen (before output_start): limit is RLIMIT_MEMLOCK, 0
 * for none; fitted when the pool was made smaller for it (said once with -v).
 */
void output_memory(struct output *out, uint64_t limit, uint64_t pool, uint32_t chunk,
		   uint32_t chunks, bool fitted);
void output_file(struct output *out, const char *name, uint64_t bytes, double secs,
		 const uint8_t hash[16]);
/* A file kept as it was at the destination (--skip): -v "skipped NAME", --json "action":"skipped". */
void output_skipped(struct output *out, const char *name);
void output_error(struct output *out, const char *name, const char *code, const char *text);
/*
 * A failure on this side (a source that can't be read, a destination that
 * can't be written): "PATH: TEXT (CODE)", named as scp names it; --json adds the
 * local path and "local": true to the error event.
 */
void output_local_error(struct output *out, const char *name, const char *path, const char *code,
			const char *text);
void output_progress(struct output *out, uint64_t bytes);
/* A file completed from a cut run's partial: sent bytes crossed now, kept did not. */
void output_resumed(struct output *out, const char *name, uint64_t sent, uint64_t kept, double secs,
		    const uint8_t hash[16]);
void output_summary(struct output *out, uint64_t files, uint64_t bytes, uint64_t failures,
		    uint64_t skipped, const char *transport);
/* --dry-run: one entry that would be copied. */
void output_plan(struct output *out, const char *name, uint64_t bytes);
/* ls: a module ("read only", "write only" or "read/write") and an entry. */
void output_module(struct output *out, const char *name, const char *access, const char *comment);
void output_entry(struct output *out, const struct proto_file *f, bool long_format);
