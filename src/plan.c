/* SPDX-License-Identifier: MIT */
/*
 * Plan lines as written (plan.h): the header and entry lines, a new plan's
 * id, its staging directory and the digest over its entries. Reading a
 * plan back is plan_read.c; journals plan_journal.c; the shard balancer
 * plan_balance.c; sets of names plan_nameset.c.
 */
#include "plan.h"
#include "plan-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <openssl/rand.h>

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

void plan_put_str(FILE *f, const char *key, const char *v)
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
	plan_put_str(f, "id", h->id);
	ndjson_put_name(f, "source", h->source);
	ndjson_put_name(f, "base", h->base);
	plan_put_str(f, "hosts", h->hosts);
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
	if (h->every_host) {
		put_bool(f, "every_host", true);
	}
	plan_put_str(f, "skip", h->skip);
	if (h->filters) {
		plan_put_str(f, "filters", h->filters);
	}
	if (h->split) {
		fprintf(f, ",\"split\":%" PRIu64, h->split);
	}
	plan_put_str(f, "digest", h->digest);
	fputs("}\n", f);
}

uint32_t plan_host_count(const struct plan_header *h)
{
	uint32_t n = 1;

	for (const char *c = h->hosts; *c; c++) {
		n += *c == ',';
	}
	return n;
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
