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
	uint64_t files_total; /* entries the run will send, 0 = unknown (a walk, a pull) */
	uint64_t files_done;  /* entries done so far: copied, kept or failed */
	char last_name[256];  /* the entry last done, for the progress line (cut) */
	/* a push's entries offered and not done yet, oldest first (output_entry_offered) */
#define OUTPUT_INFLIGHT_MAX 1024
	char *inflight[OUTPUT_INFLIGHT_MAX];
	size_t ninflight;
	double t0; /* the transfer's start (output_clock_start), for the rate */
	double last_draw;
	bool drawn;
	uint64_t files_failed;
	bool pull; /* itemized lines: '>' received here, else '<' sent */
	bool summarized;
	uint64_t resumed_bytes; /* kept from cut runs, not sent (--partial) */
	/* output_memory: the pinned pool, shown in start (mem_pool 0: not set) */
	uint64_t mem_limit; /* 0: no limit */
	uint64_t mem_pool;
	uint32_t mem_chunk, mem_chunks;
	bool mem_fitted;
	uint32_t ring_slots; /* the receiving ring OPEN_OK granted, shown in start (0: none) */
	/*
	 * How the receiver fences a held slot on verbs, shown in start:
	 * "windows" (memory windows, no copy) or "copy" (its private copy);
	 * NULL: not said (tcp fences in the transport).
	 */
	const char *fence;
	/* --delete: the summary tells of the mirror pass (output_mirror) */
	bool mirror;
	uint64_t deleted, delete_withheld;
	bool delete_suppressed;
	bool dry_run; /* every entry is listed (plan events) */
	/*
	 * rdmacp run and finalize: each entry's outcome told to this too (a
	 * shard's journal): copied, resumed, skipped, deleted, failed; in a
	 * probe would_copy and would_skip. NULL: none.
	 */
	void (*observe)(void *ud, const char *name, const char *action, uint64_t bytes,
			const char *code, const uint8_t *hash /* XXH3-128 of a file, or NULL */);
	void *observe_ud;
	/* fan-out: each destination's outcome, in the summary (output_destinations); 0: none */
	const struct output_dest *dests;
	size_t ndests;
	double json_flushed; /* when the last name's --json line went out (output_json_name_end) */
};

/* One destination of a fan-out (client/fanout.h), for the summary. */
struct output_dest {
	const char *host, *path;
	const char *status; /* "copied", "partial", "failed", "unreached" */
	bool copied;
	int exit_code;
	uint64_t files_ok, files_failed, bytes;
	const char *error; /* "" when copied */
};

/*
 * s as a JSON string literal on f, valid whatever s holds: controls, line
 * separators and direction overrides escaped, bytes that are not UTF-8 as
 * \ufffd. Every JSON string rdmacp prints goes through here.
 */
void output_json_string(FILE *f, const char *s);

void output_init(struct output *out, bool json, int progress, int verbose);
/*
 * seal_suite: the AEAD that seals the data lanes (enum lane_seal_suite); 0:
 * they are clear, and clear_why says why.
 * verbs_path: "write_imm" or "write_send" on verbs, NULL on tcp.
 */
void output_start(struct output *out, const char *direction, const char *host,
		  const char *transport, const char *verbs_path, unsigned lanes, int seal_suite,
		  const char *clear_why);
/*
 * The buffer pool chosen (before output_start): limit is RLIMIT_MEMLOCK, 0
 * for none; fitted when the pool was made smaller for it (said once with -v).
 */
void output_memory(struct output *out, uint64_t limit, uint64_t pool, uint32_t chunk,
		   uint32_t chunks, bool fitted);
/*
 * An entry committed at the destination (ftype: enum proto_ftype; hash:
 * its verified XXH3-128, NULL for entries that have none; tree: hash is
 * its chunk tree's at that chunk size, 0 its bytes'; items: what
 * differed, PROTO_ITEM_*, 0 when the peer did not say). -v prints rsync
 * -i's itemized line ("<f+++++++++ NAME" sent, ">f.st...... NAME"
 * received, "cd+++++++++ NAME/", "cL+++++++++ NAME"); --json a file event
 * with "type", "action":"copied" and "changes".
 */
void output_file(struct output *out, const char *name, uint8_t ftype, uint64_t bytes, uint64_t zero,
		 uint64_t skipped, double secs, const uint8_t *hash, uint32_t tree, uint32_t items);
/*
 * An entry kept at the destination (--skip, or a directory or symlink there
 * already): items 0 unchanged (-vv ".f NAME", --json "action":"skipped"),
 * else its metadata was brought in line (-v ".f..tp..... NAME", --json
 * "action":"updated" with "changes").
 */
void output_skipped(struct output *out, const char *name, uint8_t ftype, uint32_t items);
/* A listed name the source does not have, kept from failing (--missing-ok): told to the observer. */
void output_missing(struct output *out, const char *name);
/*
 * --delete: an entry removed (-v "deleting NAME", --json "action":"deleted"),
 * or one --max-delete kept (-v "not deleting NAME (--max-delete)", --json
 * "action":"withheld").
 */
void output_deleted(struct output *out, const char *name, uint8_t ftype);
void output_delete_withheld(struct output *out, const char *name, uint8_t ftype);
/*
 * --delete, after the run: what the pass did, for the summary, and the
 * lines that say why less was deleted than was due (failures, --max-delete).
 */
void output_mirror(struct output *out, uint64_t deleted, uint64_t withheld, bool suppressed,
		   uint64_t failures, uint64_t max_delete);
/*
 * An entry that failed (ftype 0: unknown): an error line on stderr, and a
 * --json file event with "action":"failed", its code and message.
 */
void output_error(struct output *out, const char *name, uint8_t ftype, const char *code,
		  const char *text);
/*
 * A failure on this side (a source that can't be read, a destination that
 * can't be written): "PATH: TEXT (CODE)", named as scp names it; --json adds the
 * local path and "local": true to the event.
 */
void output_local_error(struct output *out, const char *name, uint8_t ftype, const char *path,
			const char *code, const char *text);
/*
 * The --progress line: bytes, percent, rate and ETA, entries done (of how
 * many, when known) and the name of the entry last done, cut to the
 * terminal's width.
 */
void output_progress(struct output *out, uint64_t bytes);
/*
 * The transfer starts now (its data lanes up): the rate and the summary's
 * seconds count from here, not from a --wait-busy wait or the walk before.
 */
void output_clock_start(struct output *out);
/* A push offered this entry: the progress line names it while it is the oldest not done. */
void output_entry_offered(struct output *out, const char *name);
/* An entry is done (copied, kept, failed): counted for the progress line (output.c calls it). */
void output_entry_done(struct output *out, const char *name);
/* What the progress line holds on the heap; every run ends with it (transfer_finish). */
void output_release(struct output *out);
/* b bytes in binary units, "12.3 MiB" (the progress line's and the summary's). */
void output_human_bytes(uint64_t b, char *buf, size_t len);
/*
 * A file completed from a cut run's partial: sent bytes crossed now, kept did
 * not; items, what differed (its -v line is itemized as a copied file's).
 */
void output_resumed(struct output *out, const char *name, uint64_t sent, uint64_t kept,
		    uint64_t zero, uint64_t skipped, double secs, const uint8_t hash[16],
		    uint32_t tree, uint32_t items);

/* What a run did, for its summary. */
struct output_totals {
	uint64_t files;		/* entries committed (a dry run: entries it would copy) */
	uint64_t bytes;		/* payload bytes sent over the data path (a dry run: 0) */
	uint64_t failed;	/* entries that failed, on either side */
	uint64_t skipped;	/* entries kept as they were (--skip; directories, symlinks) */
	uint64_t updated;	/* entries kept whose metadata alone was brought in line */
	uint64_t deleted;	/* entries removed at the destination (--delete) */
	uint64_t resumed_bytes; /* bytes a partial held and that were not sent again */
	uint64_t zero_bytes;	/* bytes described as zeros, no payload (ZEROS) */
	uint64_t skipped_bytes; /* --delta: bytes unchanged at the destination, not sent */
	uint64_t packed_files;	/* regular files that travelled whole in shared slots */
	uint64_t packed_slots;	/* ... and those slots */
	bool dry_run;
	bool completed; /* the exchange ran to its end (files may have failed) */
};

/*
 * The last line of a run: the text summary on stderr when the exchange
 * completed (not with -q, not for a dry run), or the --json summary event,
 * always, a failed run's too ("exit" is its exit code). Once per run.
 */
void output_summary(struct output *out, const struct output_totals *t, const char *transport,
		    int exit_code);
/*
 * Fan-out: the destinations (v[0..n), kept by the caller until the summary)
 * the summary tells of: a line each after the text summary ("HOST:PATH:
 * copied, N files, SIZE", "HOST:PATH: failed: TEXT (exit N)"), and the
 * --json summary's "destinations" array (output_dests.c).
 */
void output_destinations(struct output *out, const struct output_dest *v, size_t n);
/* The summary's parts for them: the JSON array (after a comma), and the lines. */
void output_dests_json(const struct output *out);
void output_dests_lines(const struct output *out);
/* --dry-run: one entry that would be copied. */
void output_plan(struct output *out, const char *name, uint8_t ftype, uint64_t bytes);
/*
 * --dry-run with --skip or --delete (a probe): a regular file that would be
 * kept as it is; an entry --delete would remove (withheld: one --max-delete
 * would keep).
 */
void output_plan_skip(struct output *out, const char *name, uint8_t ftype, uint32_t items);
void output_plan_delete(struct output *out, const char *name, uint8_t ftype, bool withheld);
/*
 * ls: a module ("read only", "write only" or "read/write"; available: the
 * daemon can serve it now) and an entry.
 */
void output_module(struct output *out, const char *name, const char *access, bool available,
		   const char *comment);
/*
 * OUTPUT_ENTRY_LONG: ls -l's columns. OUTPUT_ENTRY_OWNERS: the daemon sends
 * owners (PROTO_CAP_LIST_OWNERS); without it they show as unknown.
 */
enum {
	OUTPUT_ENTRY_LONG = 1u << 0,
	OUTPUT_ENTRY_OWNERS = 1u << 1,
};
void output_entry(struct output *out, const struct proto_file *f, unsigned flags);
