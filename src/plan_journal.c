/* SPDX-License-Identifier: MIT */
/*
 * Shard journals (plan.h): their states, paths and lines as written, one
 * line parsed, and a whole journal read line by line (a torn last line left
 * out, a damaged one refused).
 */
#include "plan.h"
#include "plan-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fspath.h"
#include "log.h"
#include "macro.h"

static const char *const state_names[] = {
	[JOURNAL_COPIED] = "copied", [JOURNAL_SKIPPED] = "skipped", [JOURNAL_RESUMED] = "resumed",
	[JOURNAL_FAILED] = "failed", [JOURNAL_DELETED] = "deleted", [JOURNAL_VANISHED] = "vanished",
};

const char *journal_state_name(int state)
{
	if (state > 0 && (size_t)state < ARRAY_SIZE(state_names)) {
		return state_names[state];
	}
	return "pending";
}

int journal_state_parse(const char *s)
{
	for (size_t i = 1; i < ARRAY_SIZE(state_names); i++) {
		if (!strcmp(s, state_names[i])) {
			return (int)i;
		}
	}
	return -EINVAL;
}

int journal_path(const char *plan, uint32_t shard, char *buf, size_t len)
{
	int n = shard == UINT32_MAX ? snprintf(buf, len, "%s.journal.final", plan)
				    : snprintf(buf, len, "%s.journal.%" PRIu32, plan, shard);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

void journal_put_header(FILE *f, const char *plan_id, int64_t shard, uint32_t shards)
{
	fprintf(f,
		"{\"rdmacp_journal\":%d,\"plan\":\"%s\",\"shard\":%" PRId64 ",\"shards\":%" PRIu32
		"}\n",
		PLAN_FORMAT, plan_id, shard, shards);
}

void journal_put_run(FILE *f, bool start, double t, int exit_code, uint64_t bytes, double secs)
{
	if (start) {
		fprintf(f, "{\"run\":\"start\",\"t\":%" PRId64 "}\n", (int64_t)(t * 1000));
	} else {
		fprintf(f,
			"{\"run\":\"end\",\"t\":%" PRId64 ",\"exit\":%d,\"bytes\":%" PRIu64
			",\"ms\":%" PRId64 "}\n",
			(int64_t)(t * 1000), exit_code, bytes, (int64_t)(secs * 1000));
	}
}

void journal_put_entry(FILE *f, const char *name, int state, uint64_t bytes, const char *code)
{
	fputc('{', f);
	/* ndjson_put_name writes a leading comma: the state goes first. */
	fprintf(f, "\"state\":\"%s\"", journal_state_name(state));
	ndjson_put_name(f, "name", name);
	if (bytes) {
		fprintf(f, ",\"bytes\":%" PRIu64, bytes);
	}
	if (code && *code) {
		plan_put_str(f, "code", code);
	}
	fputs("}\n", f);
}

void journal_put_dest(FILE *f, const char *dest, int state, const char *status, uint64_t files,
		      uint64_t bytes, int exit_code, const char *error)
{
	fputs("{\"dest\":", f);
	ndjson_put_string(f, dest);
	fprintf(f, ",\"state\":\"%s\"", journal_state_name(state));
	plan_put_str(f, "status", status);
	fprintf(f, ",\"files\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"exit\":%d", files, bytes,
		exit_code);
	if (error && *error) {
		plan_put_str(f, "error", error);
	}
	fputs("}\n", f);
}

static void put_hex(FILE *f, const char *key, const uint8_t *b, size_t n)
{
	fprintf(f, ",\"%s\":\"", key);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%02x", b[i]);
	}
	fputc('"', f);
}

void journal_put_range(FILE *f, const char *name, uint32_t range, int state, uint64_t bytes,
		       const char *code, const uint8_t hash[16])
{
	fprintf(f, "{\"state\":\"%s\"", journal_state_name(state));
	ndjson_put_name(f, "name", name);
	fprintf(f, ",\"range\":%" PRIu32, range);
	if (bytes) {
		fprintf(f, ",\"bytes\":%" PRIu64, bytes);
	}
	if (hash) {
		put_hex(f, "xxh128", hash, 16);
	}
	if (code && *code) {
		plan_put_str(f, "code", code);
	}
	fputs("}\n", f);
}

static int hex_bytes(const char *s, uint8_t *out, size_t n)
{
	if (strlen(s) != 2 * n) {
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		if (!strchr("0123456789abcdef", s[2 * i]) ||
		    !strchr("0123456789abcdef", s[2 * i + 1]) ||
		    sscanf(s + 2 * i, "%2x", &v) != 1) {
			return -EINVAL;
		}
		out[i] = (uint8_t)v;
	}
	return 0;
}

/* A journal's header: the plan id, the shard, the shard count. */
static int parse_header_line(struct ndjson_obj *obj, struct journal_line *ret, const char **why)
{
	const char *s;
	uint64_t v;

	ret->kind = JL_HEADER;
	if (ndjson_get_str(obj, "plan", &s) < 0 || strlen(s) != PLAN_ID_LEN ||
	    ndjson_get_i64(obj, "shard", &ret->shard) < 0 ||
	    ndjson_get_u64(obj, "shards", &v) < 0 || v == 0 || v > PLAN_MAX_SHARDS) {
		*why = "a journal header without plan id, shard or shard count";
		return -EBADMSG;
	}
	memcpy(ret->plan_id, s, PLAN_ID_LEN + 1);
	ret->shards = (uint32_t)v;
	return 0;
}

/* A run's start (its time) or end (its time, exit code, bytes and duration). */
static int parse_run_line(struct ndjson_obj *obj, const char *s, struct journal_line *ret,
			  const char **why)
{
	uint64_t v;
	int64_t i;

	ret->kind = strcmp(s, "start") ? JL_RUN_END : JL_RUN_START;
	if (ndjson_get_i64(obj, "t", &i) < 0) {
		*why = "a run line without its time";
		return -EBADMSG;
	}
	ret->t = (double)i / 1000;
	if (ret->kind == JL_RUN_END) {
		int64_t ms = 0, ex = 0;

		if (ndjson_get_i64(obj, "exit", &ex) < 0 || ndjson_get_u64(obj, "bytes", &v) < 0 ||
		    ndjson_get_i64(obj, "ms", &ms) < 0) {
			*why = "a run end without exit, bytes or ms";
			return -EBADMSG;
		}
		ret->exit_code = (int)ex;
		ret->bytes = v;
		ret->seconds = (double)ms / 1000;
	}
	return 0;
}

/* A range's number and digest: a range copied has one. */
static int parse_entry_range(struct ndjson_obj *obj, struct journal_line *ret, const char **why)
{
	const char *s;
	uint64_t v;

	if (ndjson_get(obj, "range")) {
		if (ndjson_get_u64(obj, "range", &v) < 0 || v >= PLAN_MAX_RANGES) {
			*why = "a range number out of range";
			return -EBADMSG;
		}
		ret->range = (int64_t)v;
	}
	if (ndjson_get(obj, "xxh128")) {
		if (ret->range < 0 || ndjson_get_str(obj, "xxh128", &s) < 0 ||
		    hex_bytes(s, ret->hash, sizeof(ret->hash)) < 0) {
			*why = "an xxh128 that is not 32 hex digits of a range";
			return -EBADMSG;
		}
		ret->has_hash = true;
	}
	/* A range skipped was not sent (the whole file unchanged): no part, no digest. */
	if (ret->range >= 0 && journal_state_done(ret->state) && ret->state != JOURNAL_SKIPPED &&
	    !ret->has_hash) {
		*why = "a range copied without its xxh128";
		return -EBADMSG;
	}
	return 0;
}

/* An entry's outcome: its state, its name, bytes and code, a range's number and digest. */
static int parse_entry_line(struct ndjson_obj *obj, struct journal_line *ret, const char **why)
{
	const char *s;
	uint64_t v;

	ret->kind = JL_ENTRY;
	if (ndjson_get_str(obj, "state", &s) < 0 || (ret->state = journal_state_parse(s)) < 0) {
		*why = "an entry without a known state";
		return -EBADMSG;
	}
	/* Only a key here, but a name no plan can have is no outcome of this one's. */
	if (ndjson_get_name(obj, "name", ret->name, sizeof(ret->name)) < 0 ||
	    fspath_validate(ret->name) < 0) {
		*why = "an entry without a valid name";
		return -EBADMSG;
	}
	if (ndjson_get_u64(obj, "bytes", &v) == 0) {
		ret->bytes = v;
	}
	if (ndjson_get_str(obj, "code", &s) == 0) {
		snprintf(ret->code, sizeof(ret->code), "%s", s);
	}
	return parse_entry_range(obj, ret, why);
}

/*
 * A fan-out destination's outcome of one push: its HOST:PATH (no name of
 * the plan: not checked as one), copied or failed, how it ended.
 */
static int parse_dest_line(struct ndjson_obj *obj, const char *dest, struct journal_line *ret,
			   const char **why)
{
	const char *s;
	int64_t ex;

	ret->kind = JL_DEST;
	if (strlen(dest) >= sizeof(ret->name) || ndjson_get_str(obj, "state", &s) < 0 ||
	    (ret->state = journal_state_parse(s)) < 0 ||
	    (ret->state != JOURNAL_COPIED && ret->state != JOURNAL_FAILED) ||
	    ndjson_get_str(obj, "status", &s) < 0 || strlen(s) >= sizeof(ret->code) ||
	    ndjson_get_u64(obj, "bytes", &ret->bytes) < 0 || ndjson_get_i64(obj, "exit", &ex) < 0) {
		*why = "a destination's line without its state, status, bytes or exit";
		return -EBADMSG;
	}
	snprintf(ret->code, sizeof(ret->code), "%s", s);
	snprintf(ret->name, sizeof(ret->name), "%s", dest);
	ret->exit_code = (int)ex;
	return 0;
}

int journal_parse(const char *line, size_t len, struct ndjson_obj *obj, struct journal_line *ret,
		  const char **why)
{
	const char *s;

	memset(ret, 0, offsetof(struct journal_line, name));
	ret->name[0] = '\0';
	ret->range = -1;
	if (ndjson_parse(line, len, obj, why) < 0) {
		return -EBADMSG;
	}
	if (ndjson_get(obj, "rdmacp_journal")) {
		return parse_header_line(obj, ret, why);
	}
	if (ndjson_get_str(obj, "run", &s) == 0) {
		return parse_run_line(obj, s, ret, why);
	}
	if (ndjson_get_str(obj, "dest", &s) == 0) {
		return parse_dest_line(obj, s, ret, why);
	}
	return parse_entry_line(obj, ret, why);
}

/* One line of f into buf (cap bytes), NUL bytes and its newline kept: its length, 0 at the end. */
static int read_raw_line(FILE *f, char *buf, size_t cap, size_t *ret_len)
{
	size_t n = 0;
	int c;

	while ((c = getc_unlocked(f)) != EOF) {
		if (n + 1 >= cap) {
			return -E2BIG;
		}
		buf[n++] = (char)c;
		if (c == '\n') {
			break;
		}
	}
	if (ferror(f)) {
		return -EIO;
	}
	buf[n] = '\0';
	*ret_len = n;
	return 0;
}

/* fd's file from its start, through a dup (fd's offset is its own). */
static int open_from_start(int fd, const char *esc, FILE **ret_f, char *err, size_t errlen)
{
	FILE *f = NULL;
	int nfd, r;

	nfd = dup(fd);
	if (nfd < 0 || lseek(nfd, 0, SEEK_SET) < 0 || !(f = fdopen(nfd, "r"))) {
		r = -errno;
		if (nfd >= 0) {
			close(nfd);
		}
		snprintf(err, errlen, "%s: %s", esc, strerror(-r));
		return r;
	}
	*ret_f = f;
	return 0;
}

/*
 * The next record, line *line, into jl: 1, *end moved past it (its offset
 * counted, not asked: ftello is a syscall a line); 0 at the end or at a
 * torn last line (no record); -EBADMSG for a damaged line or -errno (err set).
 */
static int next_record(FILE *f, const char *esc, uint64_t *line, off_t *end, char *buf,
		       struct ndjson_obj *obj, struct journal_line *jl, char *err, size_t errlen)
{
	const char *why;
	size_t len;
	int r = read_raw_line(f, buf, NDJSON_MAX_LINE + 2, &len);

	(*line)++;
	if (r == -E2BIG) {
		snprintf(err, errlen, "%s:%" PRIu64 ": a line longer than 64 KiB", esc, *line);
		return -EBADMSG;
	}
	if (r < 0) {
		snprintf(err, errlen, "%s: %s", esc, strerror(-r));
		return r;
	}
	if (len == 0 || buf[len - 1] != '\n') {
		return 0; /* the end, or a torn last line: not a record */
	}
	*end += (off_t)len;
	buf[--len] = '\0';
	if (memchr(buf, '\0', len)) {
		snprintf(err, errlen, "%s:%" PRIu64 ": a NUL byte in the line (damaged?)", esc,
			 *line);
		return -EBADMSG;
	}
	if (journal_parse(buf, len, obj, jl, &why) < 0) {
		snprintf(err, errlen, "%s:%" PRIu64 ": %s", esc, *line, why);
		return -EBADMSG;
	}
	return 1;
}

int journal_read(int fd, const char *path,
		 int (*each)(void *ud, uint64_t line, const struct journal_line *jl), void *ud,
		 off_t *ret_good_end, char *err, size_t errlen)
{
	_cleanup_free_ char *buf = malloc(NDJSON_MAX_LINE + 2);
	_cleanup_free_ struct ndjson_obj *obj = malloc(sizeof(*obj));
	_cleanup_free_ struct journal_line *jl = malloc(sizeof(*jl));
	char esc[1024];
	uint64_t line = 0;
	off_t end = 0, good = 0;
	FILE *f = NULL;
	int r;

	if (!buf || !obj || !jl) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	log_escape_short(path, esc, sizeof(esc));
	r = open_from_start(fd, esc, &f, err, errlen);
	if (r < 0) {
		return r;
	}
	while (r == 0) {
		r = next_record(f, esc, &line, &end, buf, obj, jl, err, errlen);
		if (r <= 0) {
			break;
		}
		r = each ? each(ud, line, jl) : 0;
		good = end;
	}
	fclose(f);
	if (r == 0 && ret_good_end) {
		*ret_good_end = good;
	}
	return r;
}
