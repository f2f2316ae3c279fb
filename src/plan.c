/* SPDX-License-Identifier: MIT */
/* Migration plans and shard journals (plan.h). */
#include "plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "fspath.h"
#include "log.h"
#include "macro.h"
#include "zfile.h"

const char *plan_ftype_name(uint8_t ftype)
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
	case PLAN_FT_RANGE:
		return "range";
	default:
		return "?";
	}
}

static int ftype_parse(const char *s)
{
	for (uint8_t t = PROTO_FT_REG; t <= PROTO_FT_HARDLINK; t++) {
		if (!strcmp(s, plan_ftype_name(t))) {
			return t;
		}
	}
	return strcmp(s, "range") ? -EINVAL : PLAN_FT_RANGE;
}

void plan_staging_dir(const struct plan_header *h, char out[64])
{
	snprintf(out, 64, "%s%.16s", PLAN_STAGING_PREFIX, h->id);
}

int plan_new_id(char id[PLAN_ID_LEN + 1])
{
	uint8_t raw[PLAN_ID_LEN / 2];

	if (RAND_bytes(raw, sizeof(raw)) != 1) {
		return -EIO;
	}
	for (size_t i = 0; i < sizeof(raw); i++) {
		snprintf(id + 2 * i, 3, "%02x", raw[i]);
	}
	return 0;
}

void plan_put_entry(FILE *f, const struct plan_entry *e)
{
	fprintf(f, "{\"n\":%" PRIu64 ",\"shard\":%" PRIu32 ",\"type\":\"%s\"", e->n, e->shard,
		plan_ftype_name(e->ftype));
	ndjson_put_name(f, "name", e->name);
	if (e->ftype == PROTO_FT_HARDLINK) {
		ndjson_put_name(f, "link", e->link);
	}
	fprintf(f,
		",\"size\":%" PRIu64 ",\"mtime\":%" PRId64 ",\"mtime_ns\":%" PRIu32
		",\"mode\":%" PRIu32,
		e->size, e->mtime, e->mtime_ns, e->mode);
	if (e->links) {
		fprintf(f, ",\"links\":%" PRIu64, e->links);
	}
	if (e->ranges) {
		fprintf(f, ",\"ranges\":%" PRIu32, e->ranges);
	}
	if (e->ftype == PLAN_FT_RANGE) {
		fprintf(f, ",\"range\":%" PRIu32 ",\"offset\":%" PRIu64, e->range, e->offset);
	}
	fputs("}\n", f);
}

static void put_str(FILE *f, const char *key, const char *v)
{
	fprintf(f, ",\"%s\":", key);
	ndjson_put_string(f, v);
}

static void put_bool(FILE *f, const char *key, bool v)
{
	fprintf(f, ",\"%s\":%s", key, v ? "true" : "false");
}

void plan_put_header(FILE *f, const struct plan_header *h)
{
	fprintf(f, "{\"rdmacp_plan\":%d", PLAN_FORMAT);
	put_str(f, "id", h->id);
	ndjson_put_name(f, "source", h->source);
	ndjson_put_name(f, "base", h->base);
	put_str(f, "hosts", h->hosts);
	ndjson_put_name(f, "path", h->path);
	fprintf(f, ",\"port\":%u,\"shards\":%" PRIu32 ",\"entries\":%" PRIu64 ",\"bytes\":%" PRIu64,
		h->port, h->shards, h->entries, h->bytes);
	put_bool(f, "recursive", h->recursive);
	put_bool(f, "preserve", h->preserve);
	put_bool(f, "owner", h->owner);
	put_bool(f, "hardlinks", h->hardlinks);
	put_bool(f, "xattrs", h->xattrs);
	put_bool(f, "acls", h->acls);
	put_bool(f, "files_from", h->files_from);
	if (h->delta) {
		put_bool(f, "delta", true);
	}
	if (h->assume_zero) {
		put_bool(f, "assume_zero_target", true);
	}
	if (h->missing_ok) {
		put_bool(f, "missing_ok", true);
	}
	put_str(f, "skip", h->skip);
	if (h->filters) {
		put_str(f, "filters", h->filters);
	}
	if (h->split) {
		fprintf(f, ",\"split\":%" PRIu64, h->split);
	}
	put_str(f, "digest", h->digest);
	fputs("}\n", f);
}

void plan_digest_final(XXH3_state_t *st, const struct plan_header *h, char out[33])
{
	char tail[128];
	XXH128_canonical_t c;

	snprintf(tail, sizeof(tail), "\n%s\n%" PRIu32 "\n%" PRIu64 "\n", h->id, h->shards,
		 h->entries);
	XXH3_128bits_update(st, tail, strlen(tail));
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
	for (size_t i = 0; i < sizeof(c.digest); i++) {
		snprintf(out + 2 * i, 3, "%02x", c.digest[i]);
	}
}

/* ---- reading ------------------------------------------------------------------- */

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

static int parse_header(struct plan_reader *r, char *err, size_t errlen)
{
	struct plan_header *h = &r->h;
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
	uint64_t v;
	const char *s;
	int q;

	if (ndjson_get_u64(&r->obj, "rdmacp_plan", &v) < 0) {
		return bad(r, err, errlen, "not an rdmacp plan (no \"rdmacp_plan\" in its header)");
	}
	if (v != PLAN_FORMAT) {
		return bad(r, err, errlen, "plan format %" PRIu64 ", this rdmacp reads %d", v,
			   PLAN_FORMAT);
	}
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
	/* --delta and --assume-zero-target: optional (plans from before them have neither). */
	if (((q = ndjson_get_bool(&r->obj, "delta", &h->delta)) < 0 && q != -ENOENT) ||
	    ((q = ndjson_get_bool(&r->obj, "assume_zero_target", &h->assume_zero)) < 0 &&
	     q != -ENOENT) ||
	    ((q = ndjson_get_bool(&r->obj, "missing_ok", &h->missing_ok)) < 0 && q != -ENOENT)) {
		return bad(
		    r, err, errlen,
		    "the header's \"delta\", \"assume_zero_target\" or \"missing_ok\" is not "
		    "true or false");
	}
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
		if (ndjson_get_bool(&r->obj, flags[i].key, (bool *)((char *)h + flags[i].off)) <
		    0) {
			return bad(r, err, errlen, "the header's \"%s\" is not true or false",
				   flags[i].key);
		}
	}
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
		if (v < 2 || v > PLAN_MAX_RANGES || e->size < v) {
			return bad(r, err, errlen,
				   "a split file in %" PRIu64
				   " ranges (2..%d, no more than its bytes)",
				   v, PLAN_MAX_RANGES);
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
	if (e->ftype != PLAN_FT_RANGE) {
		return 0;
	}
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

static int parse_entry(struct plan_reader *r, struct plan_entry *e, char *err, size_t errlen)
{
	const char *s;
	uint64_t v;
	int64_t m;
	int t;

	memset(e, 0, offsetof(struct plan_entry, name));
	e->name[0] = e->link[0] = '\0';
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

/* ---- balancing --------------------------------------------------------------- */

static bool lighter(const struct plan_balancer *b, uint32_t x, uint32_t y)
{
	return b->load[x] < b->load[y] || (b->load[x] == b->load[y] && x < y);
}

static void sift_down(struct plan_balancer *b, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < b->n && lighter(b, b->heap[l], b->heap[m])) {
			m = l;
		}
		if (r < b->n && lighter(b, b->heap[r], b->heap[m])) {
			m = r;
		}
		if (m == i) {
			return;
		}
		uint32_t t = b->heap[i];
		b->heap[i] = b->heap[m];
		b->heap[m] = t;
		i = m;
	}
}

int plan_balancer_init(struct plan_balancer *b, uint32_t shards)
{
	b->n = shards;
	b->load = calloc(shards, sizeof(*b->load));
	b->heap = calloc(shards, sizeof(*b->heap));
	if (!b->load || !b->heap) {
		plan_balancer_free(b);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < shards; i++) {
		b->heap[i] = i;
	}
	return 0;
}

uint32_t plan_balancer_pick(struct plan_balancer *b, uint64_t bytes)
{
	uint32_t s = b->heap[0];

	b->load[s] += bytes + PLAN_ENTRY_COST;
	sift_down(b, 0);
	return s;
}

void plan_balancer_add(struct plan_balancer *b, uint32_t shard, uint64_t bytes)
{
	/* Heavier only: find it and sift it down. */
	b->load[shard] += bytes + PLAN_ENTRY_COST;
	for (uint32_t i = 0; i < b->n; i++) {
		if (b->heap[i] == shard) {
			sift_down(b, i);
			return;
		}
	}
}

void plan_balancer_free(struct plan_balancer *b)
{
	free(b->load);
	free(b->heap);
	b->load = NULL;
	b->heap = NULL;
}

/* ---- journals ---------------------------------------------------------------- */

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
		put_str(f, "code", code);
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
		put_str(f, "code", code);
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

int journal_parse(const char *line, size_t len, struct ndjson_obj *obj, struct journal_line *ret,
		  const char **why)
{
	const char *s;
	uint64_t v;
	int64_t i;

	memset(ret, 0, offsetof(struct journal_line, name));
	ret->name[0] = '\0';
	ret->range = -1;
	if (ndjson_parse(line, len, obj, why) < 0) {
		return -EBADMSG;
	}
	if (ndjson_get(obj, "rdmacp_journal")) {
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
	if (ndjson_get_str(obj, "run", &s) == 0) {
		ret->kind = strcmp(s, "start") ? JL_RUN_END : JL_RUN_START;
		if (ndjson_get_i64(obj, "t", &i) < 0) {
			*why = "a run line without its time";
			return -EBADMSG;
		}
		ret->t = (double)i / 1000;
		if (ret->kind == JL_RUN_END) {
			int64_t ms = 0, ex = 0;

			if (ndjson_get_i64(obj, "exit", &ex) < 0 ||
			    ndjson_get_u64(obj, "bytes", &v) < 0 ||
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

int journal_read(int fd, const char *path,
		 int (*each)(void *ud, uint64_t line, const struct journal_line *jl), void *ud,
		 off_t *ret_good_end, char *err, size_t errlen)
{
	_cleanup_free_ char *buf = malloc(NDJSON_MAX_LINE + 2);
	_cleanup_free_ struct ndjson_obj *obj = malloc(sizeof(*obj));
	_cleanup_free_ struct journal_line *jl = malloc(sizeof(*jl));
	char esc[1024];
	uint64_t line = 0;
	off_t good = 0;
	FILE *f = NULL;
	int nfd, r = 0;

	if (!buf || !obj || !jl) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	log_escape_short(path, esc, sizeof(esc));
	nfd = dup(fd);
	if (nfd < 0 || lseek(nfd, 0, SEEK_SET) < 0 || !(f = fdopen(nfd, "r"))) {
		r = -errno;
		if (nfd >= 0) {
			close(nfd);
		}
		snprintf(err, errlen, "%s: %s", esc, strerror(-r));
		return r;
	}
	while (r == 0) {
		const char *why;
		size_t len;

		r = read_raw_line(f, buf, NDJSON_MAX_LINE + 2, &len);
		line++;
		if (r == -E2BIG) {
			snprintf(err, errlen, "%s:%" PRIu64 ": a line longer than 64 KiB", esc,
				 line);
			r = -EBADMSG;
			break;
		}
		if (r < 0) {
			snprintf(err, errlen, "%s: %s", esc, strerror(-r));
			break;
		}
		if (len == 0 || buf[len - 1] != '\n') {
			break; /* the end, or a torn last line: not a record */
		}
		buf[--len] = '\0';
		if (memchr(buf, '\0', len)) {
			snprintf(err, errlen, "%s:%" PRIu64 ": a NUL byte in the line (damaged?)",
				 esc, line);
			r = -EBADMSG;
			break;
		}
		if (journal_parse(buf, len, obj, jl, &why) < 0) {
			snprintf(err, errlen, "%s:%" PRIu64 ": %s", esc, line, why);
			r = -EBADMSG;
			break;
		}
		r = each ? each(ud, line, jl) : 0;
		good = ftello(f);
	}
	fclose(f);
	if (r == 0 && ret_good_end) {
		*ret_good_end = good;
	}
	return r;
}

/* ---- a set of names ---------------------------------------------------------- */

static int nameset_grow(struct nameset *s)
{
	size_t cap = s->cap ? s->cap * 2 : 1024;
	struct nameset_slot *v = calloc(cap, sizeof(*v));

	if (!v) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->cap; i++) {
		if (s->v[i].state) {
			size_t j = s->v[i].lo & (cap - 1);

			while (v[j].state) {
				j = (j + 1) & (cap - 1);
			}
			v[j] = s->v[i];
		}
	}
	free(s->v);
	s->v = v;
	s->cap = cap;
	return 0;
}

static struct nameset_slot *nameset_find(const struct nameset *s, XXH128_hash_t h)
{
	if (!s->cap) {
		return NULL;
	}
	for (size_t j = h.low64 & (s->cap - 1);; j = (j + 1) & (s->cap - 1)) {
		if (!s->v[j].state || (s->v[j].lo == h.low64 && s->v[j].hi == h.high64)) {
			return &s->v[j];
		}
	}
}

/* A range's key: the name, a NUL (no name has one), the range number. */
static XXH128_hash_t range_key(const char *name, uint32_t r)
{
	char key[PROTO_MAX_PATH + 1 + 5];
	size_t n = strnlen(name, PROTO_MAX_PATH);

	memcpy(key, name, n);
	key[n] = '\0';
	key[n + 1] = (char)(r >> 24);
	key[n + 2] = (char)(r >> 16);
	key[n + 3] = (char)(r >> 8);
	key[n + 4] = (char)r;
	return XXH3_128bits(key, n + 5);
}

static int nameset_put_hash(struct nameset *s, XXH128_hash_t h, int state, const char *code)
{
	struct nameset_slot *slot;

	if ((s->n + 1) * 4 > s->cap * 3) {
		int r = nameset_grow(s);
		if (r < 0) {
			return r;
		}
	}
	slot = nameset_find(s, h);
	if (!slot->state) {
		s->n++;
	}
	slot->lo = h.low64;
	slot->hi = h.high64;
	slot->state = (uint8_t)state;
	snprintf(slot->code, sizeof(slot->code), "%s", code ? code : "");
	return 0;
}

int nameset_put(struct nameset *s, const char *name, int state, const char *code)
{
	return nameset_put_hash(s, XXH3_128bits(name, strlen(name)), state, code);
}

int nameset_put_range(struct nameset *s, const char *name, uint32_t r, int state, const char *code)
{
	return nameset_put_hash(s, range_key(name, r), state, code);
}

const struct nameset_slot *nameset_get(const struct nameset *s, const char *name)
{
	const struct nameset_slot *slot = nameset_find(s, XXH3_128bits(name, strlen(name)));

	return slot && slot->state ? slot : NULL;
}

const struct nameset_slot *nameset_get_range(const struct nameset *s, const char *name, uint32_t r)
{
	const struct nameset_slot *slot = nameset_find(s, range_key(name, r));

	return slot && slot->state ? slot : NULL;
}

bool nameset_mark(struct nameset *s, const char *name, uint8_t marks)
{
	struct nameset_slot *slot = nameset_find(s, XXH3_128bits(name, strlen(name)));

	if (!slot || !slot->state) {
		return false;
	}
	slot->marks |= marks;
	return true;
}

bool nameset_mark_range(struct nameset *s, const char *name, uint32_t r, uint8_t marks)
{
	struct nameset_slot *slot = nameset_find(s, range_key(name, r));

	if (!slot || !slot->state) {
		return false;
	}
	slot->marks |= marks;
	return true;
}

size_t nameset_count_unmarked(const struct nameset *s, uint8_t marks)
{
	size_t n = 0;

	for (size_t i = 0; i < s->cap; i++) {
		n += s->v[i].state && (s->v[i].marks & marks) != marks;
	}
	return n;
}

void nameset_free(struct nameset *s)
{
	free(s->v);
	*s = (struct nameset){ 0 };
}

/* ---- range digests ------------------------------------------------------------- */

static struct rangeset_slot *rangeset_find(struct rangeset_slot *v, size_t cap, XXH128_hash_t h)
{
	for (size_t j = h.low64 & (cap - 1);; j = (j + 1) & (cap - 1)) {
		if (!v[j].used || (v[j].lo == h.low64 && v[j].hi == h.high64)) {
			return &v[j];
		}
	}
}

int rangeset_put(struct rangeset *s, const char *name, uint32_t r, const uint8_t hash[16])
{
	XXH128_hash_t h = range_key(name, r);
	struct rangeset_slot *slot;

	if ((s->n + 1) * 4 > s->cap * 3) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct rangeset_slot *v = calloc(cap, sizeof(*v));

		if (!v) {
			return -ENOMEM;
		}
		for (size_t i = 0; i < s->cap; i++) {
			if (s->v[i].used) {
				*rangeset_find(v, cap,
					       (XXH128_hash_t){ .low64 = s->v[i].lo,
								.high64 = s->v[i].hi }) = s->v[i];
			}
		}
		free(s->v);
		s->v = v;
		s->cap = cap;
	}
	slot = rangeset_find(s->v, s->cap, h);
	if (!slot->used) {
		s->n++;
	}
	*slot = (struct rangeset_slot){ .lo = h.low64, .hi = h.high64, .used = true };
	memcpy(slot->hash, hash, 16);
	return 0;
}

const uint8_t *rangeset_get(const struct rangeset *s, const char *name, uint32_t r)
{
	const struct rangeset_slot *slot;

	if (!s->cap) {
		return NULL;
	}
	slot = rangeset_find(s->v, s->cap, range_key(name, r));
	return slot->used ? slot->hash : NULL;
}

void rangeset_free(struct rangeset *s)
{
	free(s->v);
	*s = (struct rangeset){ 0 };
}
