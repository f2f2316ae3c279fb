/* SPDX-License-Identifier: MIT */
/*
 * Reading a plan back (plan.h): its header, then each entry checked as it
 * comes (number, shard, type, names beneath the source, a split file's
 * ranges), and at the end its entry count and digest. Every problem names
 * the plan and the line.
 */
#include "plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fspath.h"
#include "log.h"
#include "macro.h"
#include "zfile.h"

struct plan_reader {
	struct zreader *zr; /* the plan, plain or zstd */
	char *path;
	uint64_t line;
	uint64_t first_entry; /* text offset of the first entry line */
	struct plan_header h;
	XXH3_state_t *st;
	char *buf; /* NDJSON_MAX_LINE + 2 */
	struct ndjson_obj obj;
	char top[FSPATH_NAME_MAX + 1]; /* a plan of one tree: its first entry's name */
	/* The split file whose ranges come next: how many are left, where the next starts. */
	struct {
		uint64_t line, size, next_off;
		uint32_t ranges, next;
		char name[PROTO_MAX_PATH + 1];
	} split;
};

static int ftype_parse(const char *s)
{
	for (uint8_t t = PROTO_FT_REG; t <= PROTO_FT_HARDLINK; t++) {
		if (!strcmp(s, plan_ftype_name(t))) {
			return t;
		}
	}
	return strcmp(s, "range") ? -EINVAL : PLAN_FT_RANGE;
}

static int bad(struct plan_reader *r, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int bad(struct plan_reader *r, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "%s:%" PRIu64 ": ", r->path, r->line);

	if (n >= 0 && (size_t)n < errlen) {
		va_start(ap, fmt);
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EBADMSG;
}

/* The next line into r->buf (without its newline): 1, 0 at EOF, or an error. */
static int read_line(struct plan_reader *r, size_t *ret_len, char *err, size_t errlen)
{
	size_t len;
	int q = zreader_gets(r->zr, r->buf, NDJSON_MAX_LINE + 2, &len);

	if (q == -EBADMSG) {
		/* Named by the line it was reading: the lines before it were whole. */
		r->line++;
		return bad(r, err, errlen, "%s", zreader_error(r->zr));
	}
	if (q < 0) {
		snprintf(err, errlen, "%s: %s", r->path, strerror(-q));
		return q;
	}
	if (q == 0) {
		return 0;
	}
	r->line++;
	if (r->buf[len - 1] != '\n') {
		if (len > NDJSON_MAX_LINE) {
			return bad(r, err, errlen, "a line longer than 64 KiB");
		}
		return bad(r, err, errlen, "the last line is cut short (no newline at its end)");
	}
	r->buf[--len] = '\0';
	*ret_len = len;
	return 1;
}

static int get_field_str(struct plan_reader *r, const char *key, char *dst, size_t cap, char *err,
			 size_t errlen)
{
	const char *s;
	int q = ndjson_get_str(&r->obj, key, &s);

	if (q < 0 || strlen(s) >= cap) {
		return bad(r, err, errlen, "the header's \"%s\" is %s", key,
			   q == -ENOENT ? "missing" : "not a valid string");
	}
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

static int get_field_name(struct plan_reader *r, const char *key, char *dst, size_t cap, char *err,
			  size_t errlen)
{
	int q = ndjson_get_name(&r->obj, key, dst, cap);

	if (q < 0 || !*dst) {
		return bad(r, err, errlen, "\"%s\" is %s", key,
			   q == -ENOENT ? "missing" : "not a valid name");
	}
	return 0;
}

/* "rdmacp_plan": this format. */
static int header_format(struct plan_reader *r, char *err, size_t errlen)
{
	uint64_t v;

	if (ndjson_get_u64(&r->obj, "rdmacp_plan", &v) < 0) {
		return bad(r, err, errlen, "not an rdmacp plan (no \"rdmacp_plan\" in its header)");
	}
	if (v != PLAN_FORMAT) {
		return bad(r, err, errlen, "plan format %" PRIu64 ", this rdmacp reads %d", v,
			   PLAN_FORMAT);
	}
	return 0;
}

/* The id, names, hosts, skip and digest: strings, each within its field. */
static int header_strings(struct plan_reader *r, struct plan_header *h, char *err, size_t errlen)
{
	if (get_field_str(r, "id", h->id, sizeof(h->id), err, errlen) < 0 ||
	    get_field_name(r, "source", h->source, sizeof(h->source), err, errlen) < 0 ||
	    get_field_name(r, "base", h->base, sizeof(h->base), err, errlen) < 0 ||
	    get_field_str(r, "hosts", h->hosts, sizeof(h->hosts), err, errlen) < 0 ||
	    get_field_name(r, "path", h->path, sizeof(h->path), err, errlen) < 0 ||
	    get_field_str(r, "skip", h->skip, sizeof(h->skip), err, errlen) < 0 ||
	    get_field_str(r, "digest", h->digest, sizeof(h->digest), err, errlen) < 0) {
		return -EBADMSG;
	}
	if (strlen(h->id) != PLAN_ID_LEN || strspn(h->id, "0123456789abcdef") != PLAN_ID_LEN) {
		return bad(r, err, errlen, "the header's \"id\" is not %d hex digits", PLAN_ID_LEN);
	}
	if (!h->hosts[0]) {
		return bad(r, err, errlen, "the header names no host");
	}
	return 0;
}

/* Port, shard count, entry count and bytes. */
static int header_counts(struct plan_reader *r, struct plan_header *h, char *err, size_t errlen)
{
	uint64_t v;

	if (ndjson_get_u64(&r->obj, "port", &v) < 0 || v == 0 || v > 65535) {
		return bad(r, err, errlen, "the header's \"port\" is not 1..65535");
	}
	h->port = (uint16_t)v;
	if (ndjson_get_u64(&r->obj, "shards", &v) < 0 || v == 0 || v > PLAN_MAX_SHARDS) {
		return bad(r, err, errlen, "the header's \"shards\" is not 1..%d", PLAN_MAX_SHARDS);
	}
	h->shards = (uint32_t)v;
	if (ndjson_get_u64(&r->obj, "entries", &h->entries) < 0 ||
	    ndjson_get_u64(&r->obj, "bytes", &h->bytes) < 0) {
		return bad(r, err, errlen, "the header's \"entries\" or \"bytes\" is missing");
	}
	return 0;
}

/* The options: true or false each, the later ones optional. */
static int header_flags(struct plan_reader *r, struct plan_header *h, char *err, size_t errlen)
{
	static const struct {
		const char *key;
		size_t off;
	} flags[] = {
		{ "recursive", offsetof(struct plan_header, recursive) },
		{ "preserve", offsetof(struct plan_header, preserve) },
		{ "owner", offsetof(struct plan_header, owner) },
		{ "hardlinks", offsetof(struct plan_header, hardlinks) },
		{ "xattrs", offsetof(struct plan_header, xattrs) },
		{ "acls", offsetof(struct plan_header, acls) },
		{ "files_from", offsetof(struct plan_header, files_from) },
	};
	int q;

	/* --delta and --assume-zero-target: optional (plans from before them have neither). */
	if (((q = ndjson_get_bool(&r->obj, "delta", &h->delta)) < 0 && q != -ENOENT) ||
	    ((q = ndjson_get_bool(&r->obj, "assume_zero_target", &h->assume_zero)) < 0 &&
	     q != -ENOENT) ||
	    ((q = ndjson_get_bool(&r->obj, "missing_ok", &h->missing_ok)) < 0 && q != -ENOENT) ||
	    ((q = ndjson_get_bool(&r->obj, "every_host", &h->every_host)) < 0 && q != -ENOENT)) {
		return bad(r, err, errlen,
			   "the header's \"delta\", \"assume_zero_target\", \"missing_ok\" or "
			   "\"every_host\" is not true or false");
	}
	if (h->every_host && plan_host_count(h) > PLAN_MAX_EVERY_HOST) {
		return bad(r, err, errlen, "\"every_host\" with more than %d hosts",
			   PLAN_MAX_EVERY_HOST);
	}
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
		if (ndjson_get_bool(&r->obj, flags[i].key, (bool *)((char *)h + flags[i].off)) <
		    0) {
			return bad(r, err, errlen, "the header's \"%s\" is not true or false",
				   flags[i].key);
		}
	}
	return 0;
}

/* How files are skipped, the filters (optional) and the split size (optional). */
static int header_selection(struct plan_reader *r, struct plan_header *h, char *err, size_t errlen)
{
	const char *s;
	int q;

	if (strcmp(h->skip, "none") && strcmp(h->skip, "exists") && strcmp(h->skip, "quick") &&
	    strcmp(h->skip, "checksum")) {
		return bad(r, err, errlen,
			   "the header's \"skip\" is not none, exists, quick or checksum");
	}
	q = ndjson_get_str(&r->obj, "filters", &s);
	if (q == 0) {
		if (strlen(s) > PLAN_MAX_FILTERS_LEN) {
			return bad(r, err, errlen, "the header's \"filters\" is too long");
		}
		h->filters = strdup(s);
		if (!h->filters) {
			return -ENOMEM;
		}
	} else if (q != -ENOENT) {
		return bad(r, err, errlen, "the header's \"filters\" is not a string");
	}
	if (ndjson_get_u64(&r->obj, "split", &h->split) == -EINVAL) {
		return bad(r, err, errlen, "the header's \"split\" is not a size");
	}
	return 0;
}

static int parse_header(struct plan_reader *r, char *err, size_t errlen)
{
	struct plan_header *h = &r->h;
	int q = header_format(r, err, errlen);

	if (q >= 0) {
		q = header_strings(r, h, err, errlen);
	}
	if (q >= 0) {
		q = header_counts(r, h, err, errlen);
	}
	if (q >= 0) {
		q = header_flags(r, h, err, errlen);
	}
	if (q >= 0) {
		q = header_selection(r, h, err, errlen);
	}
	return q;
}

int plan_open(const char *path, struct plan_reader **ret, char *err, size_t errlen)
{
	struct plan_reader *r = calloc(1, sizeof(*r));
	const char *why;
	size_t len;
	int q;

	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->path = strdup(path);
	r->buf = malloc(NDJSON_MAX_LINE + 2);
	r->st = XXH3_createState();
	if (!r->path || !r->buf || !r->st) {
		plan_close(r);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	q = zreader_open(path, &r->zr);
	if (q < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-q));
		plan_close(r);
		return q;
	}
	q = read_line(r, &len, err, errlen);
	if (q == 0) {
		r->line = 1;
		q = bad(r, err, errlen, "empty: no header");
	}
	if (q > 0) {
		q = ndjson_parse(r->buf, len, &r->obj, &why);
		if (q < 0) {
			q = bad(r, err, errlen, "the header is not a JSON object: %s", why);
		}
	}
	if (q >= 0) {
		q = parse_header(r, err, errlen);
	}
	if (q < 0) {
		plan_close(r);
		return q;
	}
	r->first_entry = zreader_tell(r->zr);
	XXH3_128bits_reset(r->st);
	*ret = r;
	return 0;
}

const struct plan_header *plan_reader_header(const struct plan_reader *r)
{
	return &r->h;
}

int plan_rewind(struct plan_reader *r)
{
	int q = zreader_seek(r->zr, r->first_entry);

	if (q < 0) {
		return q;
	}
	r->line = 1;
	r->split.ranges = 0;
	XXH3_128bits_reset(r->st);
	return 0;
}

/* A file split in v ranges: they come next. */
static int split_begin(struct plan_reader *r, struct plan_entry *e, uint64_t v, char *err,
		       size_t errlen)
{
	if (v < 2 || v > PLAN_MAX_RANGES || e->size < v) {
		return bad(r, err, errlen,
			   "a split file in %" PRIu64 " ranges (2..%d, no more than its bytes)", v,
			   PLAN_MAX_RANGES);
	}
	e->ranges = (uint32_t)v;
	r->split.line = r->line;
	r->split.size = e->size;
	r->split.next_off = 0;
	r->split.ranges = (uint32_t)v;
	r->split.next = 0;
	memcpy(r->split.name, e->name, strlen(e->name) + 1);
	return 0;
}

/* A range: of the file before it, the one due, where the one before ended, fitting the file. */
static int split_range(struct plan_reader *r, struct plan_entry *e, char *err, size_t errlen)
{
	uint64_t v = 0;

	if (!r->split.ranges) {
		return bad(r, err, errlen, "a range with no split file before it");
	}
	if (strcmp(e->name, r->split.name)) {
		return bad(r, err, errlen,
			   "a range of another name than its file's (line %" PRIu64 ")",
			   r->split.line);
	}
	if (ndjson_get_u64(&r->obj, "range", &v) < 0 || v != r->split.next) {
		return bad(r, err, errlen, "range number %" PRIu64 " where %" PRIu32 " was due", v,
			   r->split.next);
	}
	e->range = (uint32_t)v;
	if (ndjson_get_u64(&r->obj, "offset", &e->offset) < 0 || e->offset != r->split.next_off) {
		return bad(r, err, errlen,
			   "range %" PRIu32 " starts at %" PRIu64
			   ", where the one before ended at %" PRIu64,
			   e->range, e->offset, r->split.next_off);
	}
	if (e->size == 0 || e->size > r->split.size - e->offset ||
	    (e->range + 1 == r->split.ranges && e->offset + e->size != r->split.size)) {
		return bad(r, err, errlen,
			   "range %" PRIu32 " (%" PRIu64 " bytes at %" PRIu64
			   ") does not fit its file of %" PRIu64 " bytes in %" PRIu32 " ranges",
			   e->range, e->size, e->offset, r->split.size, r->split.ranges);
	}
	r->split.next_off += e->size;
	if (++r->split.next == r->split.ranges) {
		r->split.ranges = 0;
	}
	return 0;
}

/*
 * A split file's entry and its ranges: right after it, numbered in order,
 * contiguous from 0, not empty, adding up to its size; nothing else in
 * between, no range anywhere else.
 */
static int parse_split(struct plan_reader *r, struct plan_entry *e, char *err, size_t errlen)
{
	uint64_t v = 0;
	int q = ndjson_get_u64(&r->obj, "ranges", &v);

	if (q == -EINVAL || (q == 0 && e->ftype != PROTO_FT_REG)) {
		return bad(r, err, errlen, "\"ranges\" on an entry that is not a file");
	}
	if (r->split.ranges && e->ftype != PLAN_FT_RANGE) {
		return bad(r, err, errlen,
			   "range %" PRIu32 " of the split file at line %" PRIu64
			   " is due here (its %" PRIu32 " ranges come right after it)",
			   r->split.next, r->split.line, r->split.ranges);
	}
	if (e->ftype == PROTO_FT_REG && q == 0) {
		return split_begin(r, e, v, err, errlen);
	}
	if (e->ftype != PLAN_FT_RANGE) {
		return 0;
	}
	return split_range(r, e, err, errlen);
}

/*
 * A name of the plan is read beneath the source's base and written beneath
 * the destination: never absolute, never with . or .. (a plan edited by
 * hand says what it likes, and its digest is no signature: anyone can
 * compute it again). In a plan of one tree (not --files-from) the first
 * entry is the tree's top, one name, and every other name is beneath it:
 * a name beside it would read what the base directory holds beside the
 * planned source (another plan's tree, say). The first entry: top set.
 */
static int check_name(struct plan_reader *r, const char *what, const char *name, bool first,
		      char *err, size_t errlen)
{
	char esc[1024], tesc[1024];
	size_t tl;

	if (fspath_validate(name) < 0) {
		return bad(
		    r, err, errlen,
		    "the entry's %s '%s' is not a name beneath the source (absolute, or with "
		    ". or .. in it, or too long)",
		    what, log_escape_short(name, esc, sizeof(esc)));
	}
	if (r->h.files_from) {
		return 0; /* names beneath the base, the directory --files-from named them in */
	}
	if (first) {
		if (strchr(name, '/')) {
			return bad(
			    r, err, errlen,
			    "the first entry '%s' is not one name: a plan of one tree starts "
			    "with its top",
			    log_escape_short(name, esc, sizeof(esc)));
		}
		memcpy(r->top, name, strlen(name) + 1);
		return 0;
	}
	tl = strlen(r->top);
	if (strncmp(name, r->top, tl) != 0 || name[tl] != '/') {
		return bad(r, err, errlen,
			   "the entry's %s '%s' is not beneath the plan's top entry '%s' (a name "
			   "from another plan?)",
			   what, log_escape_short(name, esc, sizeof(esc)),
			   log_escape_short(r->top, tesc, sizeof(tesc)));
	}
	return 0;
}

/* The entry's number (the one due), shard (of the plan's) and type. */
static int entry_place(struct plan_reader *r, struct plan_entry *e, char *err, size_t errlen)
{
	const char *s;
	uint64_t v;
	int t;

	if (ndjson_get_u64(&r->obj, "n", &e->n) < 0) {
		return bad(r, err, errlen, "the entry has no number (\"n\")");
	}
	if (e->n != r->line - 1) {
		return bad(r, err, errlen,
			   "entry number %" PRIu64 " where %" PRIu64
			   " was due: entries out of order, or some left out",
			   e->n, r->line - 1);
	}
	if (ndjson_get_u64(&r->obj, "shard", &v) < 0) {
		return bad(r, err, errlen, "the entry has no shard");
	}
	if (v >= r->h.shards) {
		return bad(r, err, errlen,
			   "shard %" PRIu64 ", but the plan has %" PRIu32 " shards (0..%" PRIu32
			   ")",
			   v, r->h.shards, r->h.shards - 1);
	}
	e->shard = (uint32_t)v;
	if (ndjson_get_str(&r->obj, "type", &s) < 0 || (t = ftype_parse(s)) < 0) {
		return bad(r, err, errlen,
			   "the entry's \"type\" is not file, dir, symlink or hardlink");
	}
	e->ftype = (uint8_t)t;
	return 0;
}

/* Its name, and a hard link's target: valid names beneath the source. */
static int entry_names(struct plan_reader *r, struct plan_entry *e, char *err, size_t errlen)
{
	if (get_field_name(r, "name", e->name, sizeof(e->name), err, errlen) < 0) {
		return -EBADMSG;
	}
	if (e->ftype == PROTO_FT_HARDLINK &&
	    get_field_name(r, "link", e->link, sizeof(e->link), err, errlen) < 0) {
		return -EBADMSG;
	}
	/* A range is named as its file, checked just before it (parse_split). */
	if (e->ftype != PLAN_FT_RANGE &&
	    check_name(r, "name", e->name, e->n == 1, err, errlen) < 0) {
		return -EBADMSG;
	}
	if (e->ftype == PROTO_FT_HARDLINK &&
	    check_name(r, "link", e->link, false, err, errlen) < 0) {
		return -EBADMSG;
	}
	return 0;
}

/* Size, mtime, mode and link count. */
static int entry_attrs(struct plan_reader *r, struct plan_entry *e, char *err, size_t errlen)
{
	uint64_t v;
	int64_t m;

	if (ndjson_get_u64(&r->obj, "size", &e->size) < 0 ||
	    ndjson_get_i64(&r->obj, "mtime", &m) < 0 ||
	    ndjson_get_u64(&r->obj, "mtime_ns", &v) < 0 || v >= 1000000000) {
		return bad(r, err, errlen, "the entry's size or mtime is missing or out of range");
	}
	e->mtime = m;
	e->mtime_ns = (uint32_t)v;
	if (ndjson_get_u64(&r->obj, "mode", &v) < 0 || v > 07777) {
		return bad(r, err, errlen, "the entry's mode is missing or out of range");
	}
	e->mode = (uint32_t)v;
	if (ndjson_get_u64(&r->obj, "links", &e->links) == -EINVAL) {
		return bad(r, err, errlen, "the entry's \"links\" is not a number");
	}
	return 0;
}

static int parse_entry(struct plan_reader *r, struct plan_entry *e, char *err, size_t errlen)
{
	int q;

	memset(e, 0, offsetof(struct plan_entry, name));
	e->name[0] = e->link[0] = '\0';
	q = entry_place(r, e, err, errlen);
	if (q >= 0) {
		q = entry_names(r, e, err, errlen);
	}
	if (q >= 0) {
		q = entry_attrs(r, e, err, errlen);
	}
	if (q < 0) {
		return q;
	}
	return parse_split(r, e, err, errlen);
}

int plan_next(struct plan_reader *r, struct plan_entry *e, char *err, size_t errlen)
{
	const char *why;
	size_t len;
	int q = read_line(r, &len, err, errlen);

	if (q == 0) {
		char digest[33];

		if (r->split.ranges) {
			r->line++;
			return bad(r, err, errlen,
				   "the plan ends before the %" PRIu32
				   " ranges of the split file at line %" PRIu64 " (cut short?)",
				   r->split.ranges, r->split.line);
		}
		if (r->line - 1 != r->h.entries) {
			r->line++;
			return bad(r, err, errlen,
				   "the plan ends after %" PRIu64
				   " entries, its header says %" PRIu64 " (cut short?)",
				   r->line - 2, r->h.entries);
		}
		plan_digest_final(r->st, &r->h, digest);
		if (strcmp(digest, r->h.digest)) {
			snprintf(err, errlen,
				 "%s: the plan's digest does not match its entries and shard count "
				 "(edited by hand? make a new plan)",
				 r->path);
			return -EBADMSG;
		}
		return 0;
	}
	if (q < 0) {
		return q;
	}
	/* The digest covers each entry line as written, newline included. */
	r->buf[len] = '\n';
	XXH3_128bits_update(r->st, r->buf, len + 1);
	r->buf[len] = '\0';
	if (r->line - 1 > r->h.entries) {
		return bad(r, err, errlen, "more entries than the header's %" PRIu64, r->h.entries);
	}
	q = ndjson_parse(r->buf, len, &r->obj, &why);
	if (q < 0) {
		return bad(r, err, errlen, "not a valid entry: %s", why);
	}
	q = parse_entry(r, e, err, errlen);
	return q < 0 ? q : 1;
}

void plan_close(struct plan_reader *r)
{
	if (!r) {
		return;
	}
	zreader_close(r->zr);
	if (r->st) {
		XXH3_freeState(r->st);
	}
	free(r->h.filters);
	free(r->buf);
	free(r->path);
	free(r);
}
