/* SPDX-License-Identifier: MIT */
/*
 * Migration plans and shard journals (rdmacp plan / run / finalize /
 * report), as NDJSON files (ndjson.h); a plan may be zstd-compressed
 * (zfile.h: read through it either way), a journal is always plain.
 *
 * A plan: one header line (format, id, source, destination, options, shard
 * count, entry count, bytes, and a digest over the entries), then one line
 * per entry numbered from 1 ("n"), each with its shard. The reader checks
 * every line as it comes (a line cut short, a number out of sequence, a
 * shard beyond the count: an error naming the line) and the digest and the
 * count at the end, so a plan edited by hand is refused; the header's
 * source and destination may be edited (a host moved), its id, shard and
 * entry counts may not.
 *
 * A split file (plan --split-size): its entry ("ranges": K) and right
 * after it K range entries (type "range", the file's name, "range" 0..K-1,
 * "offset", "size"), contiguous from 0 and adding up to the file's size,
 * each in a shard of its own choosing; the reader checks that they do.
 *
 * A journal: one per shard, next to the plan (PLAN.journal.I), appended by
 * each run of that shard: a header line naming the plan id and the shard,
 * then run start/end lines and one line per entry outcome (a range's with
 * its number and the XXH3-128 its sender computed; a range "skipped" was not
 * sent, the destination having the whole file unchanged, and has none).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <xxhash.h>

#include "ndjson.h"
#include "proto/msg.h"

#define PLAN_FORMAT	     1
#define PLAN_MAX_SHARDS	     65536
#define PLAN_ID_LEN	     32		  /* hex digits */
#define PLAN_ENTRY_COST	     (256 * 1024) /* bytes one entry weighs in the balance */
#define PLAN_MAX_FILTERS_LEN (256 * 1024)
#define PLAN_MAX_RANGES	     PROTO_MAX_PARTS /* ranges of one split file */
#define PLAN_FT_RANGE	     0x80	     /* plan_entry.ftype of a range entry */
/* plan --every-host: the hosts one fan-out reaches (the first and its relay chain) */
#define PLAN_MAX_EVERY_HOST (PROTO_MAX_RELAY_HOPS + 1)
/* The directory a split file's parts wait in, under the destination: this and 16 id digits. */
#define PLAN_STAGING_PREFIX ".rdmacp-split."

struct plan_header {
	char id[PLAN_ID_LEN + 1];
	char source[PROTO_MAX_PATH + 1]; /* as typed */
	char base[PROTO_MAX_PATH + 1];	 /* the directory the names are relative to */
	char hosts[1024];		 /* destination daemons, comma-separated */
	char path[PROTO_MAX_PATH + 1];	 /* MODULE/PATH at each of them */
	uint16_t port;
	uint32_t shards;
	uint64_t entries, bytes;
	bool recursive, preserve, owner, hardlinks, xattrs, acls, files_from;
	/* --delta, --assume-zero-target: written only when set; absent (older plans): false */
	bool delta, assume_zero;
	/* --missing-ok: a name the source loses after the plan does not hold finalize up */
	bool missing_ok;
	/* --every-host: each shard goes to every host (a fan-out), not host shard mod n */
	bool every_host;
	char skip[16];	/* none, exists, quick, checksum */
	char *filters;	/* "+ PAT\n- PAT\n..." or NULL (heap) */
	uint64_t split; /* --split-size: files larger are split in ranges of this; 0: none */
	char digest[2 * 16 + 1];
};

struct plan_entry {
	uint64_t n;
	uint32_t shard;
	uint8_t ftype; /* PROTO_FT_REG, _DIR, _SYMLINK, _HARDLINK, or PLAN_FT_RANGE */
	uint64_t size;
	int64_t mtime;
	uint32_t mtime_ns;
	uint32_t mode;
	uint64_t links;	 /* a file with other names (-H): how many in all; else 0 */
	uint32_t ranges; /* a split file: in how many ranges (2..PLAN_MAX_RANGES); else 0 */
	uint32_t range;	 /* a range: its number (0..ranges-1) */
	uint64_t offset; /* a range: where it starts in the file (size: its length) */
	char name[PROTO_MAX_PATH + 1];
	char link[PROTO_MAX_PATH + 1]; /* PROTO_FT_HARDLINK: the name it is a link to */
};

const char *plan_ftype_name(uint8_t ftype);

/* A new random plan id. 0 or -EIO. */
int plan_new_id(char id[PLAN_ID_LEN + 1]);
/* One entry line (with its newline) to f. */
void plan_put_entry(FILE *f, const struct plan_entry *e);
/* The header line; digest and counts as set in h. */
void plan_put_header(FILE *f, const struct plan_header *h);
/* How many hosts the header names (comma-separated). */
uint32_t plan_host_count(const struct plan_header *h);
/* The staging directory of a plan's split files: PLAN_STAGING_PREFIX and 16 id digits. */
void plan_staging_dir(const struct plan_header *h, char out[64]);
/* The digest of a plan: XXH3-128 over the entry lines, then id, shards and entries. */
void plan_digest_final(XXH3_state_t *st, const struct plan_header *h, char out[33]);

struct plan_reader;
/*
 * Open a plan and read its header. On a bad plan: -EBADMSG with
 * "PLAN:LINE: problem" in err; else -errno (err says what).
 */
int plan_open(const char *path, struct plan_reader **ret, char *err, size_t errlen);
const struct plan_header *plan_reader_header(const struct plan_reader *r);
/* The next entry: 1, 0 at the end (count and digest checked), or -EBADMSG / -errno (err set). */
int plan_next(struct plan_reader *r, struct plan_entry *e, char *err, size_t errlen);
/* Back to the first entry (a second pass). 0 or -errno. */
int plan_rewind(struct plan_reader *r);
void plan_close(struct plan_reader *r);

/* ---- balancing --------------------------------------------------------------- */

/* Each new entry to the shard with the least weight so far (bytes + PLAN_ENTRY_COST a entry). */
struct plan_balancer {
	uint32_t n;
	uint64_t *load;
	uint32_t *heap; /* shard numbers, a min-heap by (load, number) */
};
int plan_balancer_init(struct plan_balancer *b, uint32_t shards);
uint32_t plan_balancer_pick(struct plan_balancer *b, uint64_t bytes);
/* Add weight to a given shard (a hard link going where its file went). */
void plan_balancer_add(struct plan_balancer *b, uint32_t shard, uint64_t bytes);
void plan_balancer_free(struct plan_balancer *b);

/* ---- journals ---------------------------------------------------------------- */

enum journal_state {
	JOURNAL_NONE = 0,
	JOURNAL_COPIED,
	JOURNAL_SKIPPED,
	JOURNAL_RESUMED,
	JOURNAL_FAILED,
	JOURNAL_DELETED,
	JOURNAL_VANISHED, /* the source lost the name since the plan: no copy, no failure */
};

const char *journal_state_name(int state);
int journal_state_parse(const char *s);
static inline bool journal_state_done(int state)
{
	return state == JOURNAL_COPIED || state == JOURNAL_SKIPPED || state == JOURNAL_RESUMED;
}

/* PLAN.journal.I, or PLAN.journal.final for shard UINT32_MAX. */
int journal_path(const char *plan, uint32_t shard, char *buf, size_t len);

/* What a journal line says. */
struct journal_line {
	enum { JL_HEADER, JL_RUN_START, JL_RUN_END, JL_ENTRY, JL_DEST } kind;
	char plan_id[PLAN_ID_LEN + 1];
	int64_t shard; /* header: -1 for the final journal */
	uint32_t shards;
	double t;
	int exit_code;
	uint64_t bytes;
	double seconds;
	int state;
	char code[32];
	int64_t range; /* an entry: the range of a split file, -1 for a whole entry */
	bool has_hash;
	uint8_t hash[16];	       /* a range's XXH3-128, when has_hash */
	char name[PROTO_MAX_PATH + 1]; /* JL_DEST: the destination, HOST:PATH */
};
/* Parse one journal line (without newline). 0 or -EBADMSG (why set). */
int journal_parse(const char *line, size_t len, struct ndjson_obj *obj, struct journal_line *ret,
		  const char **why);
/*
 * Each whole line of the journal open at fd (read from its start, through a
 * dup: fd's offset is its own), parsed, to each with its number; each
 * returns 0 to go on, anything else ends the reading and is returned. A
 * last line without its newline is no record: a run killed while it wrote,
 * or a crash before the data reached the disk (NUL bytes, often); it is left
 * out and *ret_good_end (may be NULL) is where it starts. A whole line with a
 * NUL byte in it, longer than NDJSON_MAX_LINE or not a journal line is no
 * torn write but a damaged or edited journal: -EBADMSG with "PATH:LINE: why"
 * in err. Else 0 or -errno.
 */
int journal_read(int fd, const char *path,
		 int (*each)(void *ud, uint64_t line, const struct journal_line *jl), void *ud,
		 off_t *ret_good_end, char *err, size_t errlen);
void journal_put_header(FILE *f, const char *plan_id, int64_t shard, uint32_t shards);
void journal_put_run(FILE *f, bool start, double t, int exit_code, uint64_t bytes, double secs);
void journal_put_entry(FILE *f, const char *name, int state, uint64_t bytes, const char *code);
/*
 * plan --every-host: one destination's outcome of a push (a fan-out):
 * state JOURNAL_COPIED or JOURNAL_FAILED, status as rdmacp --json says it.
 */
void journal_put_dest(FILE *f, const char *dest, int state, const char *status, uint64_t files,
		      uint64_t bytes, int exit_code, const char *error);
/* A range of a split file: its number, and the XXH3-128 of its bytes when done (else NULL). */
void journal_put_range(FILE *f, const char *name, uint32_t range, int state, uint64_t bytes,
		       const char *code, const uint8_t hash[16]);

/* ---- a set of names -------------------------------------------------------- */

/* Names by their XXH3-128 (16 bytes each, not the names): the latest state wins. */
struct nameset_slot {
	uint64_t lo, hi;
	uint8_t state; /* enum journal_state; 0: empty slot */
	uint8_t marks; /* NAMESET_* bits, kept when the state changes */
	char code[22];
};
enum {
	NAMESET_PLANNED = 1 << 0, /* the plan has an entry of this name (range) */
	NAMESET_PROVEN = 1 << 1,  /* finalize found it at the destination */
};
struct nameset {
	struct nameset_slot *v;
	size_t cap, n;
};
int nameset_put(struct nameset *s, const char *name, int state, const char *code);
const struct nameset_slot *nameset_get(const struct nameset *s, const char *name);
/* The same for range r of a split file (keyed apart from every name: names hold no NUL). */
int nameset_put_range(struct nameset *s, const char *name, uint32_t r, int state, const char *code);
const struct nameset_slot *nameset_get_range(const struct nameset *s, const char *name, uint32_t r);
/* Add marks to a name's (or range r's) slot: false when the set has no such name. */
bool nameset_mark(struct nameset *s, const char *name, uint8_t marks);
bool nameset_mark_range(struct nameset *s, const char *name, uint32_t r, uint8_t marks);
/* How many names lack some of marks. */
size_t nameset_count_unmarked(const struct nameset *s, uint8_t marks);
/* marks taken off every name (a proof made again, at another destination). */
void nameset_unmark_all(struct nameset *s, uint8_t marks);
void nameset_free(struct nameset *s);

/* The digests of ranges (few: huge files only), by file name and range number. */
struct rangeset {
	struct rangeset_slot {
		uint64_t lo, hi;
		bool used;
		uint8_t hash[16];
	} * v;
	size_t cap, n;
};
int rangeset_put(struct rangeset *s, const char *name, uint32_t r, const uint8_t hash[16]);
/* The digest, or NULL. */
const uint8_t *rangeset_get(const struct rangeset *s, const char *name, uint32_t r);
void rangeset_free(struct rangeset *s);
