/* SPDX-License-Identifier: MIT */
/* rdmacp's user-facing output (see output.h). */
#include "output.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "hash.h"
#include "lane_seal.h"
#include "log.h"

static void clear_progress(struct output *out)
{
	if (out->drawn) {
		fputs("\r\033[K", stderr);
		out->drawn = false;
	}
}

void output_init(struct output *out, bool json, int progress, int verbose)
{
	memset(out, 0, sizeof(*out));
	out->json = json;
	out->verbose = verbose;
	/* Default: on for a terminal, off otherwise, off with -q or --json. */
	out->progress = progress > 0 || (progress < 0 && !json && verbose >= 0 && isatty(2));
	out->t0 = now_seconds();
}

/*
 * A name's --json line ended: out with those before it when a second has
 * passed since the last flush (stdout is a pipe or a file, fully
 * buffered), so that a tree's names cost a write per buffer, not one
 * each. A crash loses the lines since the last flush, as the journal's
 * rule does its own (journal_outcome: its lines are its own, never read
 * from stdout); every other event (start, failures, the summary) goes
 * out at once, and with it what is buffered.
 */
static void json_name_end(struct output *out)
{
	struct timespec ts;
	double now;

	/* Looked at once a name: the coarse clock (a tick's resolution) is plenty for a second. */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;

	if (now - out->json_flushed >= 1.0) {
		fflush(stdout);
		out->json_flushed = now;
	}
}

void output_memory(struct output *out, uint64_t limit, uint64_t pool, uint32_t chunk,
		   uint32_t chunks, bool fitted)
{
	out->mem_limit = limit;
	out->mem_pool = pool;
	out->mem_chunk = chunk;
	out->mem_chunks = chunks;
	out->mem_fitted = fitted;
}

static void json_memory(const struct output *out)
{
	if (out->mem_pool == 0) {
		return;
	}
	printf(",\"memlock_limit\":");
	if (out->mem_limit) {
		printf("%" PRIu64, out->mem_limit);
	} else {
		printf("null");
	}
	printf(",\"pool_bytes\":%" PRIu64 ",\"chunk_size\":%" PRIu32 ",\"pool_chunks\":%" PRIu32
	       ",\"pool_fitted\":%s",
	       out->mem_pool, out->mem_chunk, out->mem_chunks, out->mem_fitted ? "true" : "false");
}

void output_start(struct output *out, const char *direction, const char *host,
		  const char *transport, const char *verbs_path, unsigned lanes, int seal_suite,
		  const char *clear_why)
{
	if (out->json) {
		printf("{\"event\":\"start\",\"direction\":\"%s\",\"host\":", direction);
		output_json_string(stdout, host);
		printf(",\"transport\":\"%s\",\"lanes\":%u", transport, lanes);
		if (out->ring_slots) {
			printf(",\"slots\":%" PRIu32, out->ring_slots);
		}
		if (verbs_path) {
			printf(",\"verbs_path\":\"%s\"", verbs_path);
		}
		if (out->fence) {
			printf(",\"fence\":\"%s\"", out->fence);
		}
		printf(",\"encryption\":\"%s\"",
		       seal_suite ? lane_seal_suite_name(seal_suite) : "none");
		json_memory(out);
		printf("}\n");
		fflush(stdout);
	} else if (out->verbose > 0) {
		fprintf(stderr, "%s %s %s over %s%s%s%s (%u lanes)\n", direction,
			!strcmp(direction, "push") ? "to" : "from", host, transport,
			verbs_path ? " (" : "", verbs_path ? verbs_path : "", verbs_path ? ")" : "",
			lanes);
		if (out->fence) {
			fprintf(stderr, "held slots fenced by %s\n",
				!strcmp(out->fence, "windows") ? "memory windows (no copy)"
							       : "a private copy");
		}
		if (seal_suite) {
			fprintf(stderr, "data lanes encrypted (%s)\n",
				lane_seal_suite_title(seal_suite));
		} else {
			fprintf(stderr, "data lanes not encrypted (%s)\n", clear_why);
		}
		if (out->mem_fitted) {
			char lim[32], pool[32], chunk[32];

			output_human_bytes(out->mem_limit, lim, sizeof(lim));
			output_human_bytes(out->mem_pool, pool, sizeof(pool));
			output_human_bytes(out->mem_chunk, chunk, sizeof(chunk));
			fprintf(
			    stderr,
			    "locked memory limit (RLIMIT_MEMLOCK) %s: buffer pool fitted to %s, "
			    "%" PRIu32 " chunks of %s\n",
			    lim, pool, out->mem_chunks, chunk);
		}
	}
}

/* "file", "dir", "symlink", "hardlink"; NULL when unknown (0). */
static const char *type_name(uint8_t ftype)
{
	switch (ftype) {
	case PROTO_FT_REG:
		return "file";
	case PROTO_FT_DIR:
		return "dir";
	case PROTO_FT_SYMLINK:
		return "symlink";
	case PROTO_FT_HARDLINK:
		return "hardlink";
	default:
		return NULL;
	}
}

/* ,"type":"..." when the type is known. */
static void json_type(uint8_t ftype)
{
	const char *t = type_name(ftype);

	if (t) {
		fputs(",\"type\":\"", stdout);
		fputs(t, stdout);
		putchar('"');
	}
}

/* ,"changes":[...]: what differed at the destination (PROTO_ITEM_*), when known. */
static void json_changes(uint32_t items)
{
	static const char *const names[] = { "new",   "content", "size",  "checksum", "times",
					     "perms", "owner",	 "group", "xattrs",   "acls" };
	const char *sep = "";

	if (!items) {
		return;
	}
	printf(",\"changes\":[");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (items & (1u << i)) {
			printf("%s\"%s\"", sep, names[i]);
			sep = ",";
		}
	}
	printf("]");
}

/* The -v line's itemized change: '<' sent, '>' received, 'c' made, 'h' linked, '.' kept. */
static void item_string(const struct output *out, uint8_t ftype, uint32_t items, char buf[12])
{
	bool made = items & (PROTO_ITEM_NEW | PROTO_ITEM_CONTENT);
	char y = '.';

	if (ftype == PROTO_FT_HARDLINK) {
		y = 'h';
	} else if (made && ftype == PROTO_FT_REG) {
		y = out->pull ? '>' : '<';
	} else if (made) {
		y = 'c';
	}
	proto_itemize(buf, y, ftype, items);
}

/*
 * A file's verified digest: "xxh128" the XXH3-128 of its bytes (what
 * xxhsum -H2 prints), "xxh128-tree" (--json: "xxh128_tree" and its
 * "tree_chunk") the XXH3-128 of its chunks' XXH3-128 (PROTOCOL.md).
 */
static const char *digest_label(uint32_t tree)
{
	return tree ? "xxh128-tree" : "xxh128";
}

static void json_digest(const char *hex, uint32_t tree)
{
	if (tree) {
		printf(",\"xxh128_tree\":\"%s\",\"tree_chunk\":%" PRIu32, hex, tree);
	} else {
		printf(",\"xxh128\":\"%s\"", hex);
	}
}

void output_file(struct output *out, const char *name, uint8_t ftype, uint64_t bytes, uint64_t zero,
		 uint64_t skipped, double secs, const uint8_t *hash, uint32_t tree, uint32_t items)
{
	char hex[33] = "", esc[4200], item[12];

	output_entry_done(out, name);
	if (out->observe) {
		out->observe(out->observe_ud, name, "copied", bytes, NULL, hash);
	}
	if (hash) {
		hash_to_hex(hash, hex);
	}
	if (out->json) {
		printf("{\"event\":\"file\",\"name\":");
		output_json_string(stdout, name);
		json_type(ftype);
		printf(",\"action\":\"copied\",\"bytes\":%" PRIu64 ",\"seconds\":%.6f", bytes,
		       secs);
		json_changes(items);
		if (ftype == PROTO_FT_REG) {
			/*
			 * What crossed the data path, what went as zeros without
			 * payload, and what --delta found unchanged there.
			 */
			printf(",\"data_bytes\":%" PRIu64 ",\"zero_bytes\":%" PRIu64
			       ",\"skipped_bytes\":%" PRIu64,
			       bytes, zero, skipped);
		}
		if (hash) {
			json_digest(hex, tree);
		}
		printf("}\n");
		json_name_end(out);
	} else if (out->verbose > 0) {
		clear_progress(out);
		log_escape(name, esc, sizeof(esc));
		/* An entry made before the receiver told what differed: made, no more is known. */
		item_string(out, ftype, items ? items : PROTO_ITEM_CONTENT, item);
		if (ftype == PROTO_FT_REG) {
			/* rsync -i: what changed; then what was verified. */
			fprintf(stderr, "%s %s  %" PRIu64 " bytes, %s %s\n", item, esc, bytes,
				digest_label(tree), hex);
		} else {
			fprintf(stderr, "%s %s%s\n", item, esc, ftype == PROTO_FT_DIR ? "/" : "");
		}
	}
}

void output_resumed(struct output *out, const char *name, uint64_t sent, uint64_t kept,
		    uint64_t zero, uint64_t skipped, double secs, const uint8_t hash[16],
		    uint32_t tree, uint32_t items)
{
	char hex[33], esc[4200], item[12];

	output_entry_done(out, name);
	if (out->observe) {
		out->observe(out->observe_ud, name, "resumed", sent, NULL, hash);
	}
	out->resumed_bytes += kept;
	hash_to_hex(hash, hex);
	if (out->json) {
		printf("{\"event\":\"file\",\"name\":");
		output_json_string(stdout, name);
		printf(",\"type\":\"file\",\"action\":\"resumed\",\"bytes\":%" PRIu64
		       ",\"resumed_bytes\":%" PRIu64 ",\"data_bytes\":%" PRIu64
		       ",\"zero_bytes\":%" PRIu64 ",\"skipped_bytes\":%" PRIu64 ",\"seconds\":%.6f",
		       sent, kept, sent, zero, skipped, secs);
		json_digest(hex, tree);
		printf("}\n");
		json_name_end(out);
	} else if (out->verbose > 0) {
		clear_progress(out);
		/* As a copied file's line, with what a cut run had left (not sent again). */
		item_string(out, PROTO_FT_REG, items ? items : PROTO_ITEM_CONTENT, item);
		fprintf(stderr, "%s %s  %" PRIu64 " bytes, %" PRIu64 " kept (resumed), %s %s\n",
			item, log_escape(name, esc, sizeof(esc)), sent, kept, digest_label(tree),
			hex);
	}
}

void output_skipped(struct output *out, const char *name, uint8_t ftype, uint32_t items)
{
	char esc[4200], item[12];

	/* A journal's entry is done either way. */
	output_entry_done(out, name);
	if (out->observe) {
		out->observe(out->observe_ud, name, "skipped", 0, NULL, NULL);
	}
	if (out->json) {
		/* As the text's: an unchanged entry with -vv only; the summary counts it. */
		if (!items && out->verbose < 2) {
			return;
		}
		fputs("{\"event\":\"file\",\"name\":", stdout);
		output_json_string(stdout, name);
		json_type(ftype);
		fputs(items ? ",\"action\":\"updated\"" : ",\"action\":\"skipped\"", stdout);
		json_changes(items);
		fputs("}\n", stdout);
		json_name_end(out);
	} else if (out->verbose > (items ? 0 : 1)) {
		/* rsync -i: '.', the data is not sent; what was brought in line (-vv: all). */
		clear_progress(out);
		item_string(out, ftype, items, item);
		if (!items) {
			/* rsync -ii's unchanged entry: its type, then blanks. */
			memset(item + 2, ' ', 9);
		}
		fprintf(stderr, "%s %s%s\n", item, log_escape(name, esc, sizeof(esc)),
			ftype == PROTO_FT_DIR ? "/" : "");
	}
}

void output_missing(struct output *out, const char *name)
{
	/* rdmacp run journals it as vanished: the plan had it, the source lost it since. */
	if (out->observe) {
		out->observe(out->observe_ud, name, "missing", 0, NULL, NULL);
	}
}

static void json_file_action(struct output *out, const char *name, uint8_t ftype,
			     const char *action)
{
	printf("{\"event\":\"file\",\"name\":");
	output_json_string(stdout, name);
	json_type(ftype);
	printf(",\"action\":\"%s\"}\n", action);
	json_name_end(out);
}

void output_deleted(struct output *out, const char *name, uint8_t ftype)
{
	char esc[4200];

	if (out->observe) {
		out->observe(out->observe_ud, name, "deleted", 0, NULL, NULL);
	}
	if (out->json) {
		json_file_action(out, name, ftype, "deleted");
	} else if (out->verbose > 0) {
		clear_progress(out);
		fprintf(stderr, "deleting %s\n", log_escape(name, esc, sizeof(esc)));
	}
}

void output_delete_withheld(struct output *out, const char *name, uint8_t ftype)
{
	char esc[4200];

	if (out->json) {
		json_file_action(out, name, ftype, "withheld");
	} else if (out->verbose > 0) {
		clear_progress(out);
		fprintf(stderr, "not deleting %s (--max-delete)\n",
			log_escape(name, esc, sizeof(esc)));
	}
}

void output_mirror(struct output *out, uint64_t deleted, uint64_t withheld, bool suppressed,
		   uint64_t failures, uint64_t max_delete)
{
	out->mirror = true;
	out->deleted = deleted;
	out->delete_withheld = withheld;
	out->delete_suppressed = suppressed;
	clear_progress(out);
	if (suppressed) {
		const char *what = out->dry_run ? "nothing would be deleted" : "nothing deleted";

		if (failures) {
			log_warning("--delete: %" PRIu64 " failure%s: %s", failures,
				    failures == 1 ? "" : "s", what);
		} else {
			log_warning("--delete: entries failed at the receiver: %s", what);
		}
	}
	if (withheld && out->dry_run) {
		/* Listed already, as every entry of a dry run is. */
		log_warning("--delete: --max-delete %" PRIu64 " would be reached: %" PRIu64
			    " would not be deleted",
			    max_delete, withheld);
	} else if (withheld) {
		log_warning("--delete: --max-delete %" PRIu64 " reached: %" PRIu64 " not deleted%s",
			    max_delete, withheld,
			    out->verbose > 0 || out->json ? "" : " (-v lists them)");
	}
}

static void json_failed(const char *name, uint8_t ftype, const char *path, const char *code,
			const char *text)
{
	printf("{\"event\":\"file\",\"name\":");
	output_json_string(stdout, name);
	json_type(ftype);
	printf(",\"action\":\"failed\"");
	if (path) {
		printf(",\"path\":");
		output_json_string(stdout, path);
		printf(",\"local\":true");
	}
	printf(",\"code\":\"%s\",\"message\":", code);
	output_json_string(stdout, text);
	printf("}\n");
	fflush(stdout);
}

void output_error(struct output *out, const char *name, uint8_t ftype, const char *code,
		  const char *text)
{
	char esc[4200], esc2[2100];

	output_entry_done(out, name);
	if (out->observe) {
		out->observe(out->observe_ud, name, "failed", 0, code, NULL);
	}
	out->files_failed++;
	if (out->json) {
		json_failed(name, ftype, NULL, code, text);
	}
	clear_progress(out);
	/* Both shortened in the middle: a log line holds 2048 bytes. */
	log_error("%s: %s (%s)", log_escape_short(name, esc, 1200),
		  log_escape_short(text, esc2, 700), code);
}

void output_local_error(struct output *out, const char *name, uint8_t ftype, const char *path,
			const char *code, const char *text)
{
	char esc[1024], esc2[768];

	output_entry_done(out, name);
	if (out->observe) {
		out->observe(out->observe_ud, name, "failed", 0, code, NULL);
	}
	out->files_failed++;
	if (out->json) {
		json_failed(name, ftype, path, code, text);
	}
	clear_progress(out);
	/* Shortened in the middle: the reason after the path must survive the line. */
	log_error("%s: %s (%s)", log_escape_short(path, esc, sizeof(esc)),
		  log_escape_short(text, esc2, sizeof(esc2)), code);
}

void output_summary(struct output *out, const struct output_totals *t, const char *transport,
		    int exit_code)
{
	double secs = now_seconds() - out->t0;
	double rate = secs > 0 ? (double)t->bytes / secs : 0;

	if (out->summarized) {
		return;
	}
	out->summarized = true;
	clear_progress(out);
	if (out->json) {
		/* "failures" is the name "failed" had before; kept for older scripts. */
		printf("{\"event\":\"summary\",\"files\":%" PRIu64 ",\"bytes\":%" PRIu64
		       ",\"seconds\":%.6f,\"rate\":%.0f,\"failed\":%" PRIu64
		       ",\"failures\":%" PRIu64 ",\"skipped\":%" PRIu64 ",\"updated\":%" PRIu64
		       ",\"deleted\":%" PRIu64 ",\"resumed_bytes\":%" PRIu64
		       ",\"data_bytes\":%" PRIu64 ",\"zero_bytes\":%" PRIu64
		       ",\"skipped_bytes\":%" PRIu64 ",\"packed_files\":%" PRIu64
		       ",\"packed_slots\":%" PRIu64 ",\"dry_run\":%s",
		       t->files, t->bytes, secs, rate, t->failed, t->failed, t->skipped, t->updated,
		       t->deleted, t->resumed_bytes, t->bytes, t->zero_bytes, t->skipped_bytes,
		       t->packed_files, t->packed_slots, t->dry_run ? "true" : "false");
		if (out->mirror) {
			printf(",\"delete_withheld\":%" PRIu64 ",\"delete_suppressed\":%s",
			       out->delete_withheld, out->delete_suppressed ? "true" : "false");
		}
		printf(",\"transport\":");
		if (transport) {
			printf("\"%s\"", transport);
		} else {
			printf("null");
		}
		output_dests_json(out);
		printf(",\"exit\":%d}\n", exit_code);
		fflush(stdout);
	} else if (out->verbose >= 0 && t->completed && !t->dry_run) {
		char r[32], extra[128] = "";
		size_t n = 0;

		/* The progress line's units (binary, as --bwlimit's), so the two agree. */
		output_human_bytes((uint64_t)rate, r, sizeof(r));
		/* Each said only when there are some: a plain copy's line stays as it was. */
		if (t->updated) {
			n += (size_t)snprintf(extra + n, sizeof(extra) - n, ", %" PRIu64 " updated",
					      t->updated);
		}
		if (t->skipped && n < sizeof(extra)) {
			n += (size_t)snprintf(extra + n, sizeof(extra) - n, ", %" PRIu64 " skipped",
					      t->skipped);
		}
		if ((t->deleted || out->mirror) && n < sizeof(extra)) {
			n += (size_t)snprintf(extra + n, sizeof(extra) - n, ", %" PRIu64 " deleted",
					      t->deleted);
		}
		if (t->resumed_bytes && n < sizeof(extra)) {
			n += (size_t)snprintf(extra + n, sizeof(extra) - n,
					      ", %" PRIu64 " bytes resumed", t->resumed_bytes);
		}
		if (t->zero_bytes && n < sizeof(extra)) {
			n += (size_t)snprintf(extra + n, sizeof(extra) - n,
					      ", %" PRIu64 " bytes as zeros", t->zero_bytes);
		}
		if (t->skipped_bytes && n < sizeof(extra)) {
			snprintf(extra + n, sizeof(extra) - n, ", %" PRIu64 " bytes unchanged",
				 t->skipped_bytes);
		}
		fprintf(stderr,
			"%" PRIu64 " files, %" PRIu64 " bytes in %.2f s (%s/s), %" PRIu64
			" failed%s, over %s\n",
			t->files, t->bytes, secs, r, t->failed, extra, transport ? transport : "-");
	}
	if (!out->json) {
		output_dests_lines(out);
	}
}

void output_plan(struct output *out, const char *name, uint8_t ftype, uint64_t bytes)
{
	char esc[4200];

	/* rdmacp finalize proves files with a probe: one it would copy is not done. */
	if (out->observe) {
		out->observe(out->observe_ud, name, "would_copy", bytes, NULL, NULL);
	}

	if (out->json) {
		printf("{\"event\":\"plan\",\"name\":");
		output_json_string(stdout, name);
		json_type(ftype);
		printf(",\"action\":\"copy\",\"bytes\":%" PRIu64 "}\n", bytes);
	} else if (out->verbose >= 0) {
		printf("would copy %s (%" PRIu64 " bytes)\n", log_escape(name, esc, sizeof(esc)),
		       bytes);
	}
}

void output_plan_skip(struct output *out, const char *name, uint8_t ftype, uint32_t items)
{
	char esc[4200], item[12];

	if (out->observe) {
		out->observe(out->observe_ud, name, "would_skip", 0, NULL, NULL);
	}

	if (out->json) {
		/* As the text's: an unchanged entry only where its line would be. */
		if (!items && out->verbose <= (ftype == PROTO_FT_REG ? 0 : 1)) {
			return;
		}
		printf("{\"event\":\"plan\",\"name\":");
		output_json_string(stdout, name);
		json_type(ftype);
		printf(",\"action\":\"%s\"", items ? "update" : "skip");
		json_changes(items);
		printf("}\n");
	} else if (out->verbose >= 0 && items) {
		item_string(out, ftype, items, item);
		printf("would update %s (%s)\n", log_escape(name, esc, sizeof(esc)), item);
	} else if (out->verbose > (ftype == PROTO_FT_REG ? 0 : 1)) {
		/* Unchanged: a file with -v, directories and links with -vv (rsync -n lists changes). */
		printf("would skip %s\n", log_escape(name, esc, sizeof(esc)));
	}
}

void output_plan_delete(struct output *out, const char *name, uint8_t ftype, bool withheld)
{
	char esc[4200];

	if (out->json) {
		printf("{\"event\":\"plan\",\"name\":");
		output_json_string(stdout, name);
		json_type(ftype);
		printf(",\"action\":\"%s\"}\n", withheld ? "withheld" : "delete");
	} else if (out->verbose >= 0) {
		printf("%s %s%s\n", withheld ? "would not delete" : "would delete",
		       log_escape(name, esc, sizeof(esc)), withheld ? " (--max-delete)" : "");
	}
}

/*
 * `rdmacp ls HOST`: one module, with its access and comment (rsync's
 * `host::`), and "(unavailable)" before the comment when the daemon can't
 * serve it now (its directory missing: a file system not mounted yet).
 */
void output_module(struct output *out, const char *name, const char *access, bool available,
		   const char *comment)
{
	const char *mark = available ? "" : comment[0] ? "(unavailable) " : "(unavailable)";
	char esc[512], esc2[4200];

	if (out->json) {
		printf("{\"event\":\"module\",\"name\":");
		output_json_string(stdout, name);
		printf(",\"access\":\"%s\",\"available\":%s,\"comment\":", access,
		       available ? "true" : "false");
		output_json_string(stdout, comment);
		printf("}\n");
	} else {
		log_escape(name, esc, sizeof(esc));
		if (comment[0] || !available) {
			printf("%-15s %-10s %s%s\n", esc, access, mark,
			       log_escape(comment, esc2, sizeof(esc2)));
		} else {
			printf("%-15s %s\n", esc, access);
		}
	}
}

static const char *ftype_name(uint8_t ftype)
{
	return ftype == PROTO_FT_DIR ? "dir" : ftype == PROTO_FT_SYMLINK ? "symlink" : "file";
}

/* "drwxr-xr-x", as ls -l writes a mode. */
static void mode_string(uint8_t ftype, uint32_t mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";

	out[0] = ftype == PROTO_FT_DIR ? 'd' : ftype == PROTO_FT_SYMLINK ? 'l' : '-';
	for (int i = 0; i < 9; i++) {
		out[1 + i] = mode & (0400u >> i) ? rwx[i] : '-';
	}
	if (mode & 04000) {
		out[3] = out[3] == 'x' ? 's' : 'S';
	}
	if (mode & 02000) {
		out[6] = out[6] == 'x' ? 's' : 'S';
	}
	if (mode & 01000) {
		out[9] = out[9] == 'x' ? 't' : 'T';
	}
	out[10] = '\0';
}

/* `rdmacp ls HOST:MODULE/PATH`: one entry; -l as ls -l (numeric owners), --json whole. */
/* The size ls shows: a symlink's is the length of its target, as lstat gives it. */
static uint64_t entry_size(const struct proto_file *f)
{
	return f->ftype == PROTO_FT_SYMLINK && f->link ? strlen(f->link) : f->size;
}

static void entry_json(const struct proto_file *f, bool owners)
{
	printf("{\"event\":\"entry\",\"name\":");
	output_json_string(stdout, f->name);
	printf(",\"type\":\"%s\",\"mode\":\"%04o\",\"size\":%" PRIu64 ",\"mtime\":%" PRId64
	       ",\"mtime_nsec\":%u",
	       ftype_name(f->ftype), f->mode, entry_size(f), f->mtime_sec, f->mtime_nsec);
	/* A daemon from before PROTO_CAP_LIST_OWNERS sends zeros: unknown, not root. */
	if (owners) {
		printf(",\"uid\":%u,\"gid\":%u", f->uid, f->gid);
	} else {
		printf(",\"uid\":null,\"gid\":null");
	}
	if (f->link) {
		printf(",\"link\":");
		output_json_string(stdout, f->link);
	}
	printf("}\n");
}

void output_entry(struct output *out, const struct proto_file *f, unsigned flags)
{
	char esc[4 * PROTO_MAX_PATH + 1], esc2[4 * PROTO_MAX_PATH + 1], when[32], mode[11];
	char uid[16] = "?", gid[16] = "?";
	time_t t = (time_t)f->mtime_sec;
	struct tm tm;

	if (out->json) {
		entry_json(f, flags & OUTPUT_ENTRY_OWNERS);
		return;
	}
	log_escape(f->name, esc, sizeof(esc));
	if (!(flags & OUTPUT_ENTRY_LONG)) {
		printf("%s\n", esc);
		return;
	}
	mode_string(f->ftype, f->mode, mode);
	if (!localtime_r(&t, &tm) || strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm) == 0) {
		snprintf(when, sizeof(when), "%" PRId64, f->mtime_sec);
	}
	if (flags & OUTPUT_ENTRY_OWNERS) {
		snprintf(uid, sizeof(uid), "%u", f->uid);
		snprintf(gid, sizeof(gid), "%u", f->gid);
	}
	printf("%s %6s %6s %15" PRIu64 " %s %s%s%s\n", mode, uid, gid, entry_size(f), when, esc,
	       f->link ? " -> " : "", f->link ? log_escape(f->link, esc2, sizeof(esc2)) : "");
}
