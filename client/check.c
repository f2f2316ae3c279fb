/* SPDX-License-Identifier: MIT */
/*
 * rdmacp check: compare a local tree with one on a daemon, without copying.
 * Each side lists and (at --level checksum) hashes its own files: the
 * daemon answers a LIST with the sums flag (FILES batches, each followed by
 * the SUMS of its regular files), while a thread here walks and hashes the
 * local side; only metadata and digests cross the network. Both lists are
 * then sorted by name and merged: what only the source has is missing, what
 * only the destination has is extra, and an entry on both sides differs in
 * the attributes named: with -X and -A digests of its extended attributes
 * and ACLs, with -H the names it shares its inode with (src/listattrs.h
 * makes both sides' alike; the daemon's come in LIST_ATTRS after each FILES
 * batch). Nothing the daemon sends is trusted: names are
 * checked as paths, duplicates and stray digests are protocol errors, and
 * what is held is capped.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "client.h"
#include "clock.h"
#include "daemon_conn.h"
#include "exitcodes.h"
#include "filehash.h"
#include "fspath.h"
#include "listattrs.h"
#include "log.h"
#include "macro.h"
#include "output.h"
#include "walk.h"

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct check_entry *)a)->name, ((const struct check_entry *)b)->name);
}

/* ---- the local side ------------------------------------------------------ */

struct local_scan {
	const char *path; /* as typed */
	const char *name; /* the top entry's name: "" for a directory */
	bool recursive, checksum;
	struct list_attrs la; /* -X, -A, -H: what each entry's record carries */
	struct check_list list;
	uint64_t errors; /* entries that could not be read or hashed */
	int r;		 /* 0 or an exit code */
	char err[512];
};

static void local_warning(void *ud, const char *path, const char *why)
{
	char esc[1024];

	(void)ud;
	log_warning("%s: %s", log_escape_short(path, esc, sizeof(esc)), why);
}

static void local_failed(struct local_scan *ls, const char *name, const char *why)
{
	char esc[1024];

	ls->errors++;
	log_error("%s: %s (local)", log_escape_short(name[0] ? name : ls->path, esc, sizeof(esc)),
		  why);
}

/* One walked entry into the list, hashed at the checksum level. */
static int local_add(struct local_scan *ls, struct filehasher *fh, const struct engine_src *e)
{
	struct check_entry *ce;
	int r;

	r = check_list_add(&ls->list, e->name, e->link, &ce);
	if (r < 0) {
		return r;
	}
	ce->ftype = e->ftype;
	ce->mode = e->mode;
	ce->size = e->size;
	ce->mtime_sec = e->mtime.tv_sec;
	ce->mtime_nsec = (uint32_t)e->mtime.tv_nsec;
	ce->uid = e->uid;
	ce->gid = e->gid;
	if (ls->la.fields) {
		struct proto_entry_attrs pea;

		r = list_attrs_entry(&ls->la, e, 0, &pea);
		ce->attr_status = pea.status;
		memcpy(ce->attr_digest, pea.digest, sizeof(ce->attr_digest));
		ce->link_group = pea.link_group;
		if (r < 0) {
			char why[128];

			snprintf(why, sizeof(why), "attributes: %s", strerror(-r));
			local_failed(ls, e->name, why);
		}
	}
	if (ls->checksum && e->ftype == PROTO_FT_REG) {
		r = filehasher_at(fh, e->dirfd, e->path, e->size, ce->hash);
		ce->summed = true;
		ce->sum_status = r < 0 ? PERR_IO : PERR_OK;
		if (r < 0) {
			local_failed(ls, e->name,
				     r == -ESTALE ? "changed while it was hashed" : strerror(-r));
		}
	}
	return 0;
}

static void *local_scan_run(void *arg)
{
	struct local_scan *ls = arg;
	struct filehasher *fh = NULL;
	struct walk *w = NULL;
	const struct engine_src *e;
	int r;

	r = walk_new(local_warning, ls, &w);
	if (r == 0 && ls->checksum) {
		r = filehasher_new(&fh);
	}
	if (r < 0) {
		snprintf(ls->err, sizeof(ls->err), "%s", strerror(-r));
		ls->r = EXIT_LOCAL_IO;
		goto out;
	}
	walk_set_max_depth(w, ls->recursive ? UINT_MAX : (ls->name[0] ? 0 : 1));
	r = walk_add_root(w, AT_FDCWD, ls->path, ls->name, true);
	if (r < 0) {
		snprintf(ls->err, sizeof(ls->err), "%s", strerror(-r));
		ls->r = EXIT_LOCAL_IO;
		goto out;
	}
	while ((r = walk_next(w, &e)) > 0) {
		if (e->error) {
			local_failed(ls, e->name, e->why ? e->why : strerror(-e->error));
			continue;
		}
		if (e->name[0] == '\0') {
			continue; /* the compared directory itself */
		}
		r = local_add(ls, fh, e);
		if (r < 0) {
			break;
		}
	}
	if (r < 0) {
		snprintf(ls->err, sizeof(ls->err), "%s",
			 r == -E2BIG ? "more entries than check compares" : strerror(-r));
		ls->r = EXIT_LOCAL_IO;
	}
out:
	filehasher_free(fh);
	walk_free(w);
	return NULL;
}

/* ---- the comparison ------------------------------------------------------ */

struct check_counts {
	uint64_t compared, missing, extra, differs, errors;
};

/* One attribute in which the two sides differ, and each side's value as text. */
struct attr_diff {
	const char *attr;
	char src[40], dst[40];		 /* "" where no value is shown (content) */
	const char *src_text, *dst_text; /* symlink targets, raw: escaped when printed */
};

/* type or (size or content or target), mtime, mode, owner, group, xattrs, acl, links */
#define CHECK_MAX_DIFFS 8

struct entry_diffs {
	struct attr_diff v[CHECK_MAX_DIFFS];
	size_t n;
};

static struct attr_diff *diff_add(struct entry_diffs *d, const char *attr)
{
	assert(d->n < CHECK_MAX_DIFFS);
	d->v[d->n] = (struct attr_diff){ .attr = attr };
	return &d->v[d->n++];
}

static void diff_num(struct entry_diffs *d, const char *attr, uint64_t a, uint64_t b, bool octal)
{
	struct attr_diff *x = diff_add(d, attr);

	snprintf(x->src, sizeof(x->src), octal ? "%04" PRIo64 : "%" PRIu64, a);
	snprintf(x->dst, sizeof(x->dst), octal ? "%04" PRIo64 : "%" PRIu64, b);
}

static void diff_text(struct entry_diffs *d, const char *attr, const char *a, const char *b)
{
	struct attr_diff *x = diff_add(d, attr);

	x->src_text = a;
	x->dst_text = b;
}

static const char *attr_src(const struct attr_diff *x)
{
	return x->src_text ? x->src_text : x->src;
}

static const char *attr_dst(const struct attr_diff *x)
{
	return x->dst_text ? x->dst_text : x->dst;
}

static const char *ftype_word(uint8_t ftype)
{
	switch (ftype) {
	case PROTO_FT_REG:
		return "file";
	case PROTO_FT_DIR:
		return "directory";
	case PROTO_FT_SYMLINK:
		return "symlink";
	default:
		return "other";
	}
}

/* What an entry holds: a regular file's size then digest, a symlink's target. */
static void content_differences(bool checksum, const struct check_entry *a,
				const struct check_entry *b, struct entry_diffs *d)
{
	if (a->ftype == PROTO_FT_REG) {
		if (a->size != b->size) {
			diff_num(d, "size", a->size, b->size, false);
		} else if (checksum && a->sum_status == PERR_OK && b->sum_status == PERR_OK &&
			   memcmp(a->hash, b->hash, HASH_LEN) != 0) {
			/* A digest that failed is reported as an error already. */
			diff_add(d, "content");
		}
	} else if (a->ftype == PROTO_FT_SYMLINK && strcmp(a->link, b->link) != 0) {
		diff_text(d, "target", a->link, b->link);
	}
}

static bool digest_differs(uint8_t fields, unsigned k, const struct check_entry *a,
			   const struct check_entry *b)
{
	return (fields & (1u << k)) && memcmp(a->attr_digest[k], b->attr_digest[k], HASH_LEN);
}

/*
 * -X, -A (fields: the digests both sides made) of files and directories,
 * whose attributes could be read on both sides (else an error is counted
 * already); -H of every name (check_links).
 */
static void attr_differences(uint8_t fields, const struct check_entry *a,
			     const struct check_entry *b, struct entry_diffs *d)
{
	bool readable = a->attr_status == PERR_OK && b->attr_status == PERR_OK &&
			(a->ftype == PROTO_FT_REG || a->ftype == PROTO_FT_DIR);

	if (readable && (digest_differs(fields, PROTO_LATTR_DIGEST_XATTRS, a, b) ||
			 digest_differs(fields, PROTO_LATTR_DIGEST_PRIVILEGED, a, b))) {
		diff_add(d, "xattrs");
	}
	if (readable && digest_differs(fields, PROTO_LATTR_DIGEST_ACLS, a, b)) {
		diff_add(d, "acl");
	}
	if ((fields & PROTO_LATTR_LINKS) && a->links_differ) {
		diff_num(d, "links", a->links_here, a->links_there, false);
	}
}

/*
 * The attributes in which src (a) and dst (b) differ, into d (n 0: the
 * same); fields: the LIST_ATTRS fields both sides have.
 */
static void differences(const struct client_opts *o, uint8_t fields, const struct check_entry *a,
			const struct check_entry *b, struct entry_diffs *d)
{
	bool checksum = o->check_level == CHECK_LEVEL_CHECKSUM;
	struct attr_diff *x;

	d->n = 0;
	if (a->ftype != b->ftype) {
		diff_text(d, "type", ftype_word(a->ftype), ftype_word(b->ftype));
		return;
	}
	content_differences(checksum, a, b, d);
	/*
	 * The quick level is rsync's quick check: a file's mtime is part of
	 * it. Other times, and modes, only matter where -p keeps them; owners
	 * where --owner does, of every type of entry.
	 */
	if (((a->ftype == PROTO_FT_REG && !checksum) || o->preserve) &&
	    (a->mtime_sec != b->mtime_sec || a->mtime_nsec != b->mtime_nsec)) {
		x = diff_add(d, "mtime");
		snprintf(x->src, sizeof(x->src), "%" PRId64 ".%09" PRIu32, a->mtime_sec,
			 a->mtime_nsec);
		snprintf(x->dst, sizeof(x->dst), "%" PRId64 ".%09" PRIu32, b->mtime_sec,
			 b->mtime_nsec);
	}
	/* A symlink's mode is always 0777 on Linux: nothing to keep. */
	if (a->ftype != PROTO_FT_SYMLINK && o->preserve && a->mode != b->mode) {
		diff_num(d, "mode", a->mode, b->mode, true);
	}
	if (o->owner && a->uid != b->uid) {
		diff_num(d, "owner", a->uid, b->uid, false);
	}
	if (o->owner && a->gid != b->gid) {
		diff_num(d, "group", a->gid, b->gid, false);
	}
	attr_differences(fields, a, b, d);
}

static void report_json(const char *kind, const char *name, const struct entry_diffs *d)
{
	printf("{\"event\":\"check\",\"name\":");
	output_json_string(stdout, name);
	printf(",\"difference\":\"%s\"", kind);
	if (d) {
		printf(",\"attributes\":[");
		for (size_t i = 0; i < d->n; i++) {
			printf("%s\"%s\"", i ? "," : "", d->v[i].attr);
		}
		/* Each side's value, source first: {"mode":{"source":"0644",...}} */
		printf("],\"values\":{");
		for (size_t i = 0, shown = 0; i < d->n; i++) {
			if (!attr_src(&d->v[i])[0]) {
				continue;
			}
			printf("%s\"%s\":{\"source\":", shown++ ? "," : "", d->v[i].attr);
			output_json_string(stdout, attr_src(&d->v[i]));
			printf(",\"destination\":");
			output_json_string(stdout, attr_dst(&d->v[i]));
			printf("}");
		}
		printf("}");
	}
	printf("}\n");
}

/* "differs  NAME (mode 0644 -> 0600, content)": the source's value first. */
static void report(const struct output *out, const char *kind, const char *name,
		   const struct entry_diffs *d)
{
	char esc[4 * PROTO_MAX_PATH + 1], a[1024], b[1024];

	if (out->json) {
		report_json(kind, name, d);
		return;
	}
	printf("%-8s %s", kind, log_escape(name, esc, sizeof(esc)));
	for (size_t i = 0; d && i < d->n; i++) {
		const struct attr_diff *x = &d->v[i];

		printf("%s%s", i ? ", " : " (", x->attr);
		if (attr_src(x)[0]) {
			printf(" %s -> %s", log_escape_short(attr_src(x), a, sizeof(a)),
			       log_escape_short(attr_dst(x), b, sizeof(b)));
		}
	}
	printf("%s\n", d && d->n ? ")" : "");
}

static void compare(const struct client_opts *o, uint8_t fields, const struct output *out,
		    struct check_list *src, struct check_list *dst, struct check_counts *c)
{
	size_t i = 0, k = 0;
	struct entry_diffs diffs;

	while (i < src->n || k < dst->n) {
		int d = i == src->n ? 1 : k == dst->n ? -1 : strcmp(src->v[i].name, dst->v[k].name);

		c->compared++;
		if (d < 0) {
			c->missing++;
			report(out, "missing", src->v[i++].name, NULL);
			continue;
		}
		if (d > 0) {
			c->extra++;
			report(out, "extra", dst->v[k++].name, NULL);
			continue;
		}
		differences(o, fields, &src->v[i], &dst->v[k], &diffs);
		if (diffs.n > 0) {
			c->differs++;
			report(out, "differs", src->v[i].name, &diffs);
		}
		i++;
		k++;
	}
}

/* Sort by name; the same name twice in the daemon's answer is a protocol error. */
static int sort_list(struct check_list *l, const char *host)
{
	char esc[4 * PROTO_MAX_PATH + 1];

	if (l->n > 1) {
		qsort(l->v, l->n, sizeof(*l->v), cmp_name);
	}
	for (size_t i = 1; i < l->n; i++) {
		if (!strcmp(l->v[i - 1].name, l->v[i].name)) {
			log_error("%s: protocol error: '%s' listed twice", host ? host : "local",
				  log_escape(l->v[i].name, esc, sizeof(esc)));
			return EXIT_PROTOCOL;
		}
	}
	return EXIT_OK;
}

/* Every regular file the daemon listed has its digest (checksum level). */
static int all_summed(const struct check_list *l, const char *host)
{
	char esc[4 * PROTO_MAX_PATH + 1];

	for (size_t i = 0; i < l->n; i++) {
		if (l->v[i].ftype == PROTO_FT_REG && !l->v[i].summed) {
			log_error("%s: protocol error: no digest for '%s'", host,
				  log_escape(l->v[i].name, esc, sizeof(esc)));
			return EXIT_PROTOCOL;
		}
	}
	return EXIT_OK;
}

static void print_summary(const struct client_opts *o, const struct output *out,
			  const struct check_counts *c, double t0)
{
	bool same = !c->missing && !c->extra && !c->differs && !c->errors;
	const char *level = o->check_level == CHECK_LEVEL_CHECKSUM ? "checksum" : "quick";

	if (out->json) {
		printf("{\"event\":\"summary\",\"command\":\"check\",\"level\":\"%s\",\"entries\":"
		       "%" PRIu64 ",\"missing\":%" PRIu64 ",\"extra\":%" PRIu64
		       ",\"differs\":%" PRIu64 ",\"errors\":%" PRIu64
		       ",\"identical\":%s,\"seconds\":%.6f}\n",
		       level, c->compared, c->missing, c->extra, c->differs, c->errors,
		       same ? "true" : "false", now_seconds() - t0);
	} else if (o->verbose >= 0) {
		fprintf(stderr,
			"%" PRIu64 " entries compared (%s): %" PRIu64 " missing, %" PRIu64
			" extra, %" PRIu64 " differ, %" PRIu64 " errors%s\n",
			c->compared, level, c->missing, c->extra, c->differs, c->errors,
			same ? ": identical" : "");
	}
	fflush(stdout);
}

static int parse_check_args(char **args, int nargs, struct remote *rem, const char **local,
			    bool *ret_pull)
{
	struct remote other;

	if (nargs != 2) {
		return -EINVAL;
	}
	if (parse_remote(args[0], rem) == 1 && parse_remote(args[1], &other) == 0) {
		*local = args[1];
		*ret_pull = true;
		return 0;
	}
	if (parse_remote(args[0], &other) == 0 && parse_remote(args[1], rem) == 1) {
		*local = args[0];
		*ret_pull = false;
		return 0;
	}
	return -EINVAL;
}

/* LIST's flags for these options: -r, the checksum level, -X, -A, -H. */
static uint32_t list_flags(const struct client_opts *o)
{
	return (o->recursive ? PROTO_LIST_RECURSIVE : 0) |
	       (o->check_level == CHECK_LEVEL_CHECKSUM ? PROTO_LIST_SUMS : 0) |
	       (o->xattrs ? PROTO_LIST_XATTRS : 0) | (o->acls ? PROTO_LIST_ACLS : 0) |
	       (o->hardlinks ? PROTO_LIST_HARDLINKS : 0);
}

/* A daemon that can't answer what these options ask: said, and EXIT_VERSION. */
static int daemon_too_old(const struct daemon_conn *s)
{
	const struct client_opts *o = s->o;

	/* An older daemon would refuse the sums flag as a malformed LIST. */
	if (!(s->hello.caps & PROTO_CAP_CHECK)) {
		log_error("%s: this rdmacpd is too old for check (it has no check capability): "
			  "upgrade it",
			  s->rem->host);
		return EXIT_VERSION;
	}
	/* An older daemon lists every owner as 0: --owner would compare nothing true. */
	if (o->owner && !(s->hello.caps & PROTO_CAP_LIST_OWNERS)) {
		log_error("%s: this rdmacpd is too old for check --owner (its listings carry no "
			  "owners): upgrade it",
			  s->rem->host);
		return EXIT_VERSION;
	}
	/* ... and would refuse the attribute flags as a malformed LIST. */
	if ((o->xattrs || o->acls || o->hardlinks) && !(s->hello.caps & PROTO_CAP_LIST_ATTRS)) {
		log_error("%s: this rdmacpd is too old for check %s (its listings carry no "
			  "attributes or hard links): upgrade it",
			  s->rem->host,
			  o->xattrs ? "-X"
			  : o->acls ? "-A"
				    : "-H");
		return EXIT_VERSION;
	}
	return EXIT_OK;
}

/* The daemon: LIST (with sums at the checksum level, attributes with -X -A -H), its answer. */
static int list_remote(struct daemon_conn *s, struct remote_list *rl)
{
	struct msg m = { .type = MSG_LIST };
	const struct client_opts *o = s->o;
	int rc = daemon_too_old(s);

	if (rc != EXIT_OK) {
		return rc;
	}
	m.u.list.flags = list_flags(o);
	rl->want = (o->xattrs ? PROTO_LATTR_XATTRS : 0) | (o->acls ? PROTO_LATTR_ACLS : 0) |
		   (o->hardlinks ? PROTO_LATTR_LINKS : 0);
	snprintf(m.u.list.path, sizeof(m.u.list.path), "%s", s->rem->path);
	if (chan_send(&s->chan, &m) < 0) {
		log_error("%s: control channel write failed", s->rem->host);
		return EXIT_CONNECT;
	}
	rc = check_receive_remote(s, rl);
	if (rc == EXIT_OK && o->check_level == CHECK_LEVEL_CHECKSUM) {
		rc = all_summed(&rl->list, s->rem->host);
	}
	return rc;
}

/* The local operand's top entry name: "" for a directory, else the remote's last component. */
static int local_top_name(const char *local, const struct remote *rem, char *out, size_t outlen)
{
	struct stat st;
	char trimmed[sizeof(rem->path)];
	size_t n;

	if (stat(local, &st) < 0) {
		return negerrno();
	}
	out[0] = '\0';
	if (S_ISDIR(st.st_mode)) {
		return 0;
	}
	/* The daemon lists a file under its own last component: the local one is named alike. */
	snprintf(trimmed, sizeof(trimmed), "%s", rem->path);
	for (n = strlen(trimmed); n > 0 && trimmed[n - 1] == '/'; n--) {
		trimmed[n - 1] = '\0';
	}
	return fspath_last_component(trimmed, out, outlen);
}

/* Both sides listed and sorted: the differences, the summary, the exit code. */
static int compare_sides(const struct client_opts *o, const struct output *out,
			 struct local_scan *ls, struct remote_list *rl, bool pull, double t0)
{
	struct check_list *src = pull ? &rl->list : &ls->list;
	struct check_list *dst = pull ? &ls->list : &rl->list;
	/* The digests both sides made: security.* and trusted.* only where both could. */
	uint8_t fields = ls->la.fields & rl->fields;
	struct check_counts c = { .errors = ls->errors + rl->errors };

	if ((fields & PROTO_LATTR_LINKS) && check_links(src, dst) < 0) {
		log_error("out of memory comparing hard links");
		return EXIT_LOCAL_IO;
	}
	compare(o, fields, out, src, dst, &c);
	print_summary(o, out, &c, t0);
	/* A difference found is certain; entries that could not be compared are not. */
	return c.missing || c.extra || c.differs ? EXIT_DIFFERENT
	       : c.errors			 ? EXIT_PARTIAL
						 : EXIT_OK;
}

int cmd_check(struct client_opts *o, char **args, int nargs)
{
	struct remote rem = { 0 };
	struct daemon_conn s = { .o = o, .rem = &rem };
	struct remote_list rl = { 0 };
	struct local_scan ls = { 0 };
	struct output out;
	char top[FSPATH_NAME_MAX + 1];
	double t0 = now_seconds();
	pthread_t th;
	bool pull;
	int rc, r;

	if (parse_check_args(args, nargs, &rem, &ls.path, &pull) < 0) {
		log_error(
		    "usage: rdmacp check [-r] [-p] [--owner] [-X] [-A] [-H] "
		    "[--level quick|checksum] [--json] SRC HOST:MODULE/PATH (or HOST:MODULE/PATH "
		    "DEST)");
		return EXIT_USAGE;
	}
	r = local_top_name(ls.path, &rem, top, sizeof(top));
	if (r >= 0) {
		r = list_attrs_init(list_flags(o), &ls.la);
	}
	if (r < 0) {
		log_error("%s: %s", ls.path, strerror(-r));
		return EXIT_LOCAL_IO;
	}
	ls.name = top;
	ls.recursive = o->recursive;
	ls.checksum = o->check_level == CHECK_LEVEL_CHECKSUM;
	output_init(&out, o->json, 0, o->verbose);
	rc = daemon_conn_open_waiting(&s, NULL, NULL, NULL);
	if (rc != 0) {
		daemon_conn_close(&s, false);
		return rc;
	}
	/* The local side is walked and hashed while the daemon does its own. */
	if (pthread_create(&th, NULL, local_scan_run, &ls) != 0) {
		log_error("cannot start the local scan");
		daemon_conn_close(&s, false);
		return EXIT_LOCAL_IO;
	}
	rc = list_remote(&s, &rl);
	pthread_join(th, NULL);
	daemon_conn_close(&s, rc == EXIT_OK);
	if (rc == EXIT_OK && ls.r != 0) {
		log_error("%s: %s", ls.path, ls.err);
		rc = ls.r;
	}
	if (rc == EXIT_OK) {
		rc = sort_list(&rl.list, rem.host);
	}
	if (rc == EXIT_OK) {
		sort_list(&ls.list, NULL);
		rc = compare_sides(o, &out, &ls, &rl, pull, t0);
	}
	check_list_free(&ls.list);
	check_list_free(&rl.list);
	return rc;
}
