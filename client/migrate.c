/* SPDX-License-Identifier: MIT */
/*
 * Migrations beyond one client (plan.h): `rdmacp plan` walks the source once
 * and writes a plan of shards; `rdmacp run PLAN --shard I/N|auto` copies one
 * shard with the push engine (a --files-from list of its entries, --partial)
 * and journals every outcome; `rdmacp finalize PLAN` checks that every entry
 * is done, then sets directory times and mirrors deletions; `rdmacp report
 * PLAN` merges the journals. Each of them streams the plan: memory follows
 * the largest batch and the journals' outcomes (16 bytes a name), not the
 * plan.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "client.h"
#include "daemon_conn.h"
#include "exitcodes.h"
#include "fileslist.h"
#include "fspath.h"
#include "log.h"
#include "macro.h"
#include "output.h"
#include "plan.h"
#include "walk.h"
#include "zfile.h"

static void xxh3_state_freep(XXH3_state_t **p)
{
	if (*p) {
		XXH3_freeState(*p);
	}
}

#define RUN_BATCH	   100000 /* names a push of a shard takes at a time */
#define JOURNAL_SYNC_EVERY 256	  /* outcomes between fsyncs of a journal */

static const char *skip_name(uint32_t skip)
{
	return skip & PROTO_OPEN_SKIP_CHECKSUM ? "checksum"
	       : skip & PROTO_OPEN_SKIP_QUICK  ? "quick"
	       : skip & PROTO_OPEN_SKIP_EXISTS ? "exists"
					       : "none";
}

static uint32_t skip_parse(const char *s)
{
	return !strcmp(s, "checksum") ? PROTO_OPEN_SKIP_CHECKSUM
	       : !strcmp(s, "quick")  ? PROTO_OPEN_SKIP_QUICK
	       : !strcmp(s, "exists") ? PROTO_OPEN_SKIP_EXISTS
				      : 0;
}

/* ---- plan ------------------------------------------------------------------- */

/* -H: the shard and first name of each file with other names (by device and inode). */
struct inode_map {
	struct inode_slot {
		uint64_t dev, ino;
		uint32_t shard;
		char *name; /* NULL: empty slot */
	} * v;
	size_t cap, n;
};

static struct inode_slot *inode_find(struct inode_map *m, uint64_t dev, uint64_t ino)
{
	size_t j = (size_t)((ino * 0x9e3779b97f4a7c15ull) ^ dev) & (m->cap - 1);

	while (m->v[j].name && (m->v[j].dev != dev || m->v[j].ino != ino)) {
		j = (j + 1) & (m->cap - 1);
	}
	return &m->v[j];
}

static int inode_map_grow(struct inode_map *m)
{
	struct inode_map g = { .cap = m->cap ? m->cap * 2 : 256 };

	g.v = calloc(g.cap, sizeof(*g.v));
	if (!g.v) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (m->v[i].name) {
			*inode_find(&g, m->v[i].dev, m->v[i].ino) = m->v[i];
		}
	}
	free(m->v);
	m->v = g.v;
	m->cap = g.cap;
	return 0;
}

static void inode_map_free(struct inode_map *m)
{
	for (size_t i = 0; i < m->cap; i++) {
		free(m->v[i].name);
	}
	free(m->v);
}

static void plan_warning(void *ud, const char *path, const char *why)
{
	char esc[1024];

	(void)ud;
	log_warning("%s: %s", log_escape_short(path, esc, sizeof(esc)), why);
}

struct planner {
	struct client_opts *o;
	struct plan_header h;
	struct plan_balancer bal;
	struct inode_map links;
	uint64_t *shard_entries, *shard_bytes;
	uint64_t failures;
	uint64_t split_files;
	FILE *entries; /* the entry lines, before the header is known */
};

/* Bytes a range of a file of size bytes holds: about --split-size, whole chunks, at most 1024 ranges. */
static uint64_t split_range_size(const struct client_opts *o, uint64_t split, uint64_t size)
{
	uint64_t cs = o->chunk_size ? o->chunk_size : (1u << 20);
	uint64_t rs = (split + cs - 1) / cs * cs;

	if ((size + rs - 1) / rs > PLAN_MAX_RANGES) {
		rs = (size + PLAN_MAX_RANGES - 1) / PLAN_MAX_RANGES;
		rs = (rs + cs - 1) / cs * cs;
	}
	return rs;
}

/* A file over --split-size: its entry, then its ranges, each to the shard that weighs least. */
static int plan_split(struct planner *p, struct plan_entry *pe)
{
	uint64_t size = pe->size, rs = split_range_size(p->o, p->h.split, size);
	uint32_t k = (uint32_t)((size + rs - 1) / rs);
	_cleanup_free_ uint32_t *shards = calloc(k, sizeof(*shards));

	if (!shards) {
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < k; i++) {
		uint64_t len = i + 1 == k ? pe->size - (uint64_t)i * rs : rs;

		shards[i] = plan_balancer_pick(&p->bal, len);
		p->shard_entries[shards[i]]++;
		p->shard_bytes[shards[i]] += len;
	}
	pe->ranges = k;
	pe->shard = shards[0];
	plan_put_entry(p->entries, pe);
	p->h.entries++;
	p->h.bytes += pe->size;
	p->shard_entries[pe->shard]++;
	for (uint32_t i = 0; i < k; i++) {
		struct plan_entry *r = pe; /* the same name, mtime and mode */

		r->n = p->h.entries + 1;
		r->ftype = PLAN_FT_RANGE;
		r->ranges = 0;
		r->range = i;
		r->offset = (uint64_t)i * rs;
		r->size = i + 1 == k ? size - r->offset : rs;
		r->shard = shards[i];
		plan_put_entry(p->entries, r);
		p->h.entries++;
	}
	p->split_files++;
	return 0;
}

static int plan_one(struct planner *p, const struct engine_src *e)
{
	struct plan_entry pe = { .n = p->h.entries + 1, .ftype = e->ftype, .size = 0 };
	char esc[1024];

	if (e->error) {
		log_error("%s: %s (not in the plan)", log_escape_short(e->name, esc, sizeof(esc)),
			  e->why ? e->why : strerror(-e->error));
		p->failures++;
		return 0;
	}
	if (strlen(e->name) > PROTO_MAX_PATH) {
		return -ENAMETOOLONG;
	}
	snprintf(pe.name, sizeof(pe.name), "%s", e->name);
	pe.size = e->ftype == PROTO_FT_REG ? e->size : 0;
	pe.mtime = e->mtime.tv_sec;
	pe.mtime_ns = (uint32_t)e->mtime.tv_nsec;
	pe.mode = e->mode & 07777;
	if (p->h.hardlinks && e->ftype == PROTO_FT_REG && e->nlink > 1) {
		struct inode_slot *s;

		if ((p->links.n + 1) * 2 > p->links.cap && inode_map_grow(&p->links) < 0) {
			return -ENOMEM;
		}
		s = inode_find(&p->links, e->dev, e->ino);
		if (s->name) {
			/* Another name of a file planned already: with it, in its shard. */
			pe.ftype = PROTO_FT_HARDLINK;
			pe.size = 0;
			pe.shard = s->shard;
			snprintf(pe.link, sizeof(pe.link), "%s", s->name);
			plan_balancer_add(&p->bal, pe.shard, 0);
		} else {
			s->name = strdup(e->name);
			if (!s->name) {
				return -ENOMEM;
			}
			s->dev = e->dev;
			s->ino = e->ino;
			pe.shard = s->shard = plan_balancer_pick(&p->bal, pe.size);
			pe.links = e->nlink;
			p->links.n++;
		}
	} else if (p->h.split && e->ftype == PROTO_FT_REG && !e->device && pe.size > p->h.split &&
		   pe.size > split_range_size(p->o, p->h.split, pe.size)) {
		/* Not a file with other names under -H: those go whole, with their names. */
		return plan_split(p, &pe);
	} else {
		pe.shard = plan_balancer_pick(&p->bal, pe.size);
	}
	plan_put_entry(p->entries, &pe);
	p->h.entries++;
	p->h.bytes += pe.size;
	p->shard_entries[pe.shard]++;
	p->shard_bytes[pe.shard] += pe.size;
	return 0;
}

/* The filters as "+ PAT\n- PAT\n" for the plan's header (finalize --delete keeps what they exclude). */
static int filters_text(const struct filter_list *f, char **ret)
{
	size_t len = 1;
	char *t, *p;

	*ret = NULL;
	if (filter_empty(f)) {
		return 0;
	}
	for (size_t i = 0; i < f->n; i++) {
		if (strchr(f->rules[i].text, '\n')) {
			return -EINVAL;
		}
		len += strlen(f->rules[i].text) + 3;
	}
	t = p = malloc(len);
	if (!t) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < f->n; i++) {
		p += sprintf(p, "%c %s\n", f->rules[i].action == FILTER_INCLUDE ? '+' : '-',
			     f->rules[i].text);
	}
	*ret = t;
	return 0;
}

/* The walk: each root, its entries through plan_one. 0 or an exit code. */
static int plan_walk(struct planner *p, const char *src, const char *srcreal)
{
	struct client_opts *o = p->o;
	struct walk *w = NULL;
	const struct engine_src *e;
	char esc[1024];
	int basefd = -1, rc = 0, r;

	r = walk_new(plan_warning, NULL, &w);
	if (r < 0) {
		return EXIT_LOCAL_IO;
	}
	walk_set_filter(w, filter_empty(&o->filters) ? NULL : &o->filters);
	if (o->files_from[0]) {
		struct files_list fl = { 0 };
		size_t entry;

		basefd = open(srcreal, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		r = basefd < 0 ? -errno : files_list_read(o->files_from, o->from0, &fl, &entry);
		if (r == 0) {
			r = files_list_prune(&fl, o->recursive);
		}
		if (r < 0) {
			log_error("--files-from %s with %s: %s",
				  log_escape_short(o->files_from, esc, sizeof(esc)), src,
				  strerror(-r));
			rc = EXIT_LOCAL_IO;
		}
		for (size_t i = 0; rc == 0 && i < fl.n; i++) {
			r = fspath_validate(fl.names[i]);
			if (r == 0) {
				r = walk_add_root_flags(w, basefd, fl.names[i], fl.names[i],
							(o->recursive ? WALK_RECURSIVE : 0) |
							    WALK_DIR_ALONE);
			}
			if (r < 0 && !((r == -ENOENT || r == -ENOTDIR) && o->missing_ok)) {
				log_error("%s: %s (listed in --files-from)",
					  log_escape_short(fl.names[i], esc, sizeof(esc)),
					  strerror(-r));
				p->failures++;
			}
		}
		files_list_free(&fl);
	} else {
		char buf[PATH_MAX];
		const char *top;

		snprintf(buf, sizeof(buf), "%s", srcreal);
		top = basename(buf);
		r = walk_add_root(w, AT_FDCWD, srcreal, top, o->recursive);
		if (r < 0) {
			log_error("%s: %s", log_escape_short(src, esc, sizeof(esc)),
				  r == -EISDIR ? "is a directory (use -r)" : strerror(-r));
			rc = r == -EISDIR ? EXIT_USAGE : EXIT_LOCAL_IO;
		}
	}
	while (rc == 0 && (r = walk_next(w, &e)) > 0) {
		r = plan_one(p, e);
		if (r < 0) {
			log_error("planning: %s", strerror(-r));
			rc = EXIT_LOCAL_IO;
		}
	}
	if (rc == 0 && r < 0) {
		log_error("walking %s: %s", log_escape_short(src, esc, sizeof(esc)), strerror(-r));
		rc = EXIT_LOCAL_IO;
	}
	walk_free(w);
	if (basefd >= 0) {
		close(basefd);
	}
	return rc;
}

/* The header line, in memory (a heap string for zwriter_write). */
static int header_text(const struct plan_header *h, char **ret, size_t *ret_len)
{
	FILE *m = open_memstream(ret, ret_len);

	if (!m) {
		return -ENOMEM;
	}
	plan_put_header(m, h);
	return fclose(m) == 0 ? 0 : -ENOMEM;
}

/*
 * The plan file: header then the entry lines, hashed on a first read;
 * zstd-compressed when compress. Written beside it, fsynced, renamed over it.
 */
static int plan_write(struct planner *p, const char *out, bool compress)
{
	_cleanup_free_ char *tmp = NULL, *head = NULL;
	_cleanup_(xxh3_state_freep) XXH3_state_t *st = XXH3_createState();
	struct zwriter *w = NULL;
	char buf[65536];
	size_t n, head_len = 0;
	int fd, r = 0;

	if (!st || asprintf(&tmp, "%s.tmp.XXXXXX", out) < 0) {
		return -ENOMEM;
	}
	if (fflush(p->entries) != 0 || fseek(p->entries, 0, SEEK_SET) < 0) {
		return -EIO;
	}
	XXH3_128bits_reset(st);
	while ((n = fread(buf, 1, sizeof(buf), p->entries)) > 0) {
		XXH3_128bits_update(st, buf, n);
	}
	plan_digest_final(st, &p->h, p->h.digest);
	r = header_text(&p->h, &head, &head_len);
	if (r < 0) {
		return r;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		return -errno;
	}
	fchmod(fd, 0644);
	r = zwriter_new(fd, compress, &w);
	if (r == 0) {
		r = zwriter_write(w, head, head_len);
	}
	rewind(p->entries);
	while (r == 0 && (n = fread(buf, 1, sizeof(buf), p->entries)) > 0) {
		r = zwriter_write(w, buf, n);
	}
	if (r == 0 && ferror(p->entries)) {
		r = -EIO;
	}
	if (r == 0) {
		r = zwriter_finish(w);
	}
	zwriter_free(w);
	if (r == 0 && fsync(fd) < 0) {
		r = -errno;
	}
	if (close(fd) < 0 && r == 0) {
		r = -EIO;
	}
	if (r == 0 && rename(tmp, out) < 0) {
		r = -errno;
	}
	if (r < 0) {
		unlink(tmp);
	}
	return r;
}

/*
 * The directories above -o that are missing, made as mkdir -p makes them
 * (mode 0777 less the umask): a plan is often the first file of a
 * migration's directory. 0, or -errno with the directory that could not be
 * made said.
 */
static int plan_out_parents(const char *out)
{
	_cleanup_free_ char *dir = strdup(out);
	char esc[1024], esc_dir[1024], *p;

	if (!dir) {
		return -ENOMEM;
	}
	p = strrchr(dir, '/');
	if (!p || p == dir) {
		return 0;
	}
	*p = '\0';
	for (p = dir + 1;; p++) {
		char c = *p;

		if (c != '/' && c != '\0') {
			continue;
		}
		*p = '\0';
		if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
			int r = -errno;

			log_error("-o %s: can't make the directory %s: %s",
				  log_escape_short(out, esc, sizeof(esc)),
				  log_escape_short(dir, esc_dir, sizeof(esc_dir)), strerror(-r));
			return r;
		}
		*p = c;
		if (c == '\0') {
			return 0;
		}
	}
}

/* Whether to write the plan zstd-compressed: as --compress says, else by the name (.zst). */
static bool plan_compressed(const struct client_opts *o)
{
	size_t len = strlen(o->plan_out);

	if (o->plan_compress != PLAN_COMPRESS_AUTO) {
		return o->plan_compress == PLAN_COMPRESS_ZSTD;
	}
	return len > 4 && !strcmp(o->plan_out + len - 4, ".zst");
}

static int plan_check_dest(const char *arg, struct remote *rem)
{
	int r = parse_remote(arg, rem);

	if (r != 1) {
		log_error("bad destination '%s': expected HOST[,HOST...]:MODULE/PATH", arg);
		return EXIT_USAGE;
	}
	if (!rem->path[0]) {
		log_error("bad destination '%s': no MODULE/PATH", arg);
		return EXIT_USAGE;
	}
	for (const char *h = rem->host;;) {
		size_t len = strcspn(h, ",");

		if (len == 0) {
			log_error("bad destination '%s': an empty host name", arg);
			return EXIT_USAGE;
		}
		if (!h[len]) {
			break;
		}
		h += len + 1;
	}
	return 0;
}

int cmd_plan(struct client_opts *o, char **args, int nargs)
{
	struct planner p = { .o = o };
	struct remote rem;
	char srcreal[PATH_MAX], esc[1024];
	_cleanup_free_ char *tmpl = NULL;
	int rc = 0, r, fd;

	if (nargs != 2 || !o->plan_out[0]) {
		log_error("usage: rdmacp plan SRC HOST[,HOST...]:MODULE/PATH -o PLAN [--shards N] "
			  "[-r] [-a] [-H] [--skip L] [filters] [--files-from FILE]");
		return EXIT_USAGE;
	}
	rc = plan_check_dest(args[1], &rem);
	if (rc != 0) {
		return rc;
	}
	if (!realpath(args[0], srcreal)) {
		log_error("%s: %s", log_escape_short(args[0], esc, sizeof(esc)), strerror(errno));
		return EXIT_LOCAL_IO;
	}
	if (o->files_from[0] && !strcmp(o->files_from, "-") && o->filters_from_stdin) {
		log_error("--files-from - and --exclude-from - both want standard input");
		return EXIT_USAGE;
	}
	if (plan_out_parents(o->plan_out) < 0) {
		return EXIT_LOCAL_IO;
	}
	p.h.shards = o->shards ? o->shards : 1;
	if (plan_new_id(p.h.id) < 0) {
		return EXIT_LOCAL_IO;
	}
	snprintf(p.h.source, sizeof(p.h.source), "%s", args[0]);
	if (o->files_from[0]) {
		snprintf(p.h.base, sizeof(p.h.base), "%s", srcreal);
	} else {
		char buf[PATH_MAX];

		snprintf(buf, sizeof(buf), "%s", srcreal);
		snprintf(p.h.base, sizeof(p.h.base), "%s", dirname(buf));
	}
	snprintf(p.h.hosts, sizeof(p.h.hosts), "%s", rem.host);
	snprintf(p.h.path, sizeof(p.h.path), "%s", rem.path);
	p.h.port = o->port;
	p.h.recursive = o->recursive;
	p.h.preserve = o->preserve;
	p.h.owner = o->owner;
	p.h.hardlinks = o->hardlinks;
	p.h.xattrs = o->xattrs;
	p.h.acls = o->acls;
	p.h.files_from = o->files_from[0] != '\0';
	p.h.delta = o->delta;
	p.h.assume_zero = o->assume_zero;
	p.h.missing_ok = o->missing_ok;
	p.h.split = o->split_size;
	snprintf(p.h.skip, sizeof(p.h.skip), "%s", skip_name(o->skip));
	r = filters_text(&o->filters, &p.h.filters);
	if (r < 0) {
		log_error("a filter with a newline in it can't be kept in a plan");
		return EXIT_USAGE;
	}
	p.shard_entries = calloc(p.h.shards, sizeof(uint64_t));
	p.shard_bytes = calloc(p.h.shards, sizeof(uint64_t));
	if (!p.shard_entries || !p.shard_bytes || plan_balancer_init(&p.bal, p.h.shards) < 0 ||
	    asprintf(&tmpl, "%s.entries.XXXXXX", o->plan_out) < 0) {
		rc = EXIT_LOCAL_IO;
		tmpl = NULL;
		goto out;
	}
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd < 0 || !(p.entries = fdopen(fd, "w+"))) {
		log_error("%s: %s", log_escape_short(o->plan_out, esc, sizeof(esc)),
			  strerror(errno));
		if (fd >= 0) {
			close(fd);
		}
		rc = EXIT_LOCAL_IO;
		goto out;
	}
	unlink(tmpl); /* a scratch file: gone with the process, however it ends */
	rc = plan_walk(&p, args[0], srcreal);
	if (rc == 0) {
		r = plan_write(&p, o->plan_out, plan_compressed(o));
		if (r < 0) {
			log_error("%s: %s", log_escape_short(o->plan_out, esc, sizeof(esc)),
				  strerror(-r));
			rc = EXIT_LOCAL_IO;
		}
	}
	if (rc == 0) {
		if (o->json) {
			printf("{\"event\":\"planned\",\"id\":\"%s\",\"entries\":%" PRIu64
			       ",\"bytes\":%" PRIu64 ",\"shards\":%" PRIu32 ",\"failed\":%" PRIu64
			       ",\"split\":%" PRIu64 "}\n",
			       p.h.id, p.h.entries, p.h.bytes, p.h.shards, p.failures,
			       p.split_files);
		} else if (o->verbose >= 0) {
			fprintf(stderr,
				"plan %s: %" PRIu64 " entries, %" PRIu64 " bytes in %" PRIu32
				" shards (id %s)",
				log_escape_short(o->plan_out, esc, sizeof(esc)), p.h.entries,
				p.h.bytes, p.h.shards, p.h.id);
			if (p.split_files) {
				fprintf(stderr, ", %" PRIu64 " files split in ranges",
					p.split_files);
			}
			fputc('\n', stderr);
		}
		for (uint32_t i = 0; o->verbose > 0 && i < p.h.shards; i++) {
			fprintf(stderr,
				"  shard %" PRIu32 ": %" PRIu64 " entries, %" PRIu64 " bytes\n", i,
				p.shard_entries[i], p.shard_bytes[i]);
		}
		/* What could not be planned is not in it: said, and not a success. */
		rc = p.failures ? EXIT_PARTIAL : EXIT_OK;
	}
out:
	if (p.entries) {
		fclose(p.entries);
	}
	free(p.h.filters);
	free(p.shard_entries);
	free(p.shard_bytes);
	plan_balancer_free(&p.bal);
	inode_map_free(&p.links);
	return rc;
}

/* ---- reading a plan with its journals ----------------------------------------- */

static int open_plan(const char *path, struct plan_reader **ret)
{
	char err[8192];
	int r = plan_open(path, ret, err, sizeof(err));

	if (r < 0) {
		log_error("%s", err);
		return r == -EBADMSG ? EXIT_BAD_PLAN : EXIT_LOCAL_IO;
	}
	return 0;
}

/*
 * Read the plan through once: every line checked, the digest at the end.
 * each (NULL: none) sees every entry. 0 or an exit code.
 */
static int plan_pass(struct plan_reader *r, int (*each)(void *ud, const struct plan_entry *e),
		     void *ud)
{
	_cleanup_free_ struct plan_entry *e = malloc(sizeof(*e));
	char err[8192];
	int q, rc;

	if (!e || plan_rewind(r) < 0) {
		return EXIT_LOCAL_IO;
	}
	while ((q = plan_next(r, e, err, sizeof(err))) > 0) {
		if (each && (rc = each(ud, e)) != 0) {
			return rc;
		}
	}
	if (q < 0) {
		log_error("%s", err);
		return q == -EBADMSG ? EXIT_BAD_PLAN : EXIT_LOCAL_IO;
	}
	return 0;
}

struct shard_stats {
	uint64_t entries, bytes;
	uint64_t done, failed;
	uint64_t sent, runs; /* every run's: those cut short (killed) have no end line */
	uint64_t ended, ended_sent;
	double seconds; /* of the runs that ended: a cut run's time is not known */
	int last_exit;
	bool journal;
};

/* What journal_load takes a journal's lines into, and checks them against. */
struct journal_into {
	const char *esc; /* the journal's path, escaped */
	const char *plan_id;
	int64_t shard;
	uint32_t shards;
	struct nameset *ns; /* NULL: lines checked, not kept */
	struct rangeset *rs;
	struct shard_stats *st;
};

static int load_line(void *ud, uint64_t line, const struct journal_line *jl)
{
	struct journal_into *in = ud;
	int q = 0;

	if (line == 1 && jl->kind != JL_HEADER) {
		log_error("%s:1: not a journal (no journal header)", in->esc);
		return EXIT_BAD_PLAN;
	}
	if (jl->kind == JL_HEADER && (line != 1 || strcmp(jl->plan_id, in->plan_id) ||
				      jl->shard != in->shard || jl->shards != in->shards)) {
		if (strcmp(jl->plan_id, in->plan_id)) {
			log_error("%s:%" PRIu64 ": the journal of another plan (id %s, this "
				  "plan's is %s): remove it, or use its own plan",
				  in->esc, line, jl->plan_id, in->plan_id);
		} else {
			log_error("%s:%" PRIu64 ": the journal of shard %" PRId64 " of %" PRIu32
				  ", not of shard %" PRId64 " of %" PRIu32,
				  in->esc, line, jl->shard, jl->shards, in->shard, in->shards);
		}
		return EXIT_BAD_PLAN;
	}
	if (jl->kind == JL_ENTRY && in->ns) {
		q = jl->range < 0 ? nameset_put(in->ns, jl->name, jl->state, jl->code)
				  : nameset_put_range(in->ns, jl->name, (uint32_t)jl->range,
						      jl->state, jl->code);
		if (q == 0 && in->rs && jl->range >= 0 && jl->has_hash) {
			q = rangeset_put(in->rs, jl->name, (uint32_t)jl->range, jl->hash);
		}
	}
	if (jl->kind == JL_ENTRY && in->st) {
		in->st->sent += jl->bytes;
	} else if (jl->kind == JL_RUN_START && in->st) {
		in->st->runs++;
	} else if (jl->kind == JL_RUN_END && in->st) {
		in->st->ended++;
		in->st->ended_sent += jl->bytes;
		in->st->seconds += jl->seconds > 0 ? jl->seconds : 0;
		in->st->last_exit = jl->exit_code;
	}
	return q < 0 ? EXIT_LOCAL_IO : 0;
}

/* A journal_read result as an exit code, its error said. */
static int journal_read_rc(int r, const char *err)
{
	if (r < 0) {
		log_error("%s", err);
		return r == -EBADMSG ? EXIT_BAD_PLAN : EXIT_LOCAL_IO;
	}
	return r;
}

/*
 * One journal into ns (the latest outcome of each name wins; NULL: only
 * checked). Checks that it is this plan's, for this shard; a last line cut
 * short is left out (journal_read). fd: the journal, open; ret_good_end:
 * the offset after its last whole line. 0, or an exit code (said why).
 */
static int journal_load(int fd, const char *jpath, const char *plan_id, int64_t shard,
			uint32_t shards, struct nameset *ns, struct rangeset *rs,
			struct shard_stats *st, off_t *ret_good_end)
{
	char esc[1024], err[8192];
	struct journal_into in = { .esc = log_escape_short(jpath, esc, sizeof(esc)),
				   .plan_id = plan_id,
				   .shard = shard,
				   .shards = shards,
				   .ns = ns,
				   .rs = rs,
				   .st = st };

	return journal_read_rc(
	    journal_read(fd, jpath, load_line, &in, ret_good_end, err, sizeof(err)), err);
}

/* The first line of a journal whose name (or range) ns has without the PLANNED mark. */
struct foreign_find {
	const char *esc;
	struct nameset *ns;
};

static int foreign_line(void *ud, uint64_t line, const struct journal_line *jl)
{
	struct foreign_find *ff = ud;
	const struct nameset_slot *s;
	char esc[1024];

	if (jl->kind != JL_ENTRY) {
		return 0;
	}
	s = jl->range < 0 ? nameset_get(ff->ns, jl->name)
			  : nameset_get_range(ff->ns, jl->name, (uint32_t)jl->range);
	if (!s || (s->marks & NAMESET_PLANNED)) {
		return 0;
	}
	log_escape_short(jl->name, esc, sizeof(esc));
	if (jl->range < 0) {
		log_error("%s:%" PRIu64 ": '%s' is no entry of this plan that a shard copies: a "
			  "line of another plan's journal, or edited",
			  ff->esc, line, esc);
	} else {
		log_error("%s:%" PRIu64 ": range %" PRId64
			  " of '%s' is no entry of this plan: a line of another plan's "
			  "journal, or edited",
			  ff->esc, line, jl->range, esc);
	}
	return EXIT_BAD_PLAN;
}

/*
 * After a pass that marked each entry's outcome PLANNED: a shard journal's
 * line for anything else is refused, naming it. A journal line is only
 * ever a key (never a path), but one that belongs to no entry is not this
 * plan's record, and a journal with such lines is not to be trusted with
 * the others. fd: the journal; called when ns has some unmarked (a second
 * read, to name the line). 0 or EXIT_BAD_PLAN.
 */
static int journal_foreign(struct nameset *ns, int fd, const char *jpath)
{
	char esc[1024], err[8192];
	struct foreign_find ff = { .esc = log_escape_short(jpath, esc, sizeof(esc)), .ns = ns };

	return journal_read_rc(journal_read(fd, jpath, foreign_line, &ff, NULL, err, sizeof(err)),
			       err);
}

/* ---- run ----------------------------------------------------------------------- */

static int parse_index(const char *s, uint64_t max, uint32_t *ret)
{
	char *end;
	unsigned long long v;

	if (!s || *s < '0' || *s > '9') {
		return -EINVAL;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max) {
		return -EINVAL;
	}
	*ret = (uint32_t)v;
	return 0;
}

/*
 * --shard auto: I and N from the launcher. Slurm array tasks, srun tasks, Open
 * MPI and PMI ranks, a Kubernetes Indexed Job's index (its count: --shards, or
 * the plan's). --shards, when given, is the count for all of them, and a Slurm
 * task's ID is then its shard as it is: an array of some indexes of the plan
 * (sbatch --array=17,230, a retry) runs those shards. Without it the array is
 * the plan's, whole: the task's place in it (its ID less SLURM_ARRAY_TASK_MIN)
 * is its shard, so --array=1-8 runs shards 0..7.
 */
static int shard_from_env(const struct client_opts *o, uint32_t plan_shards, uint32_t *ri,
			  uint32_t *rn, const char **ret_from, const char **ret_count_from)
{
	static const char *const pairs[][2] = {
		{ "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT" },
		{ "SLURM_PROCID", "SLURM_NTASKS" },
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "PMI_RANK", "PMI_SIZE" },
		{ "JOB_COMPLETION_INDEX", NULL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(pairs); i++) {
		const char *idx = getenv(pairs[i][0]);
		const char *cnt = pairs[i][1] ? getenv(pairs[i][1]) : NULL;
		uint32_t n = o->shards ? o->shards : plan_shards, min = 0;

		if (!idx || !*idx) {
			continue;
		}
		*ret_from = pairs[i][0];
		*ret_count_from = o->shards ? "--shards" : pairs[i][1] ? pairs[i][1] : "the plan";
		/* --shards wins: one task of an array run again alone (sbatch --array=I) counts 1. */
		if (pairs[i][1] && !o->shards &&
		    (!cnt || parse_index(cnt, PLAN_MAX_SHARDS, &n) < 0 || n == 0)) {
			log_error("--shard auto: %s is set but %s is not a count", pairs[i][0],
				  pairs[i][1]);
			return EXIT_USAGE;
		}
		if (i == 0 && !o->shards && getenv("SLURM_ARRAY_TASK_MIN") &&
		    parse_index(getenv("SLURM_ARRAY_TASK_MIN"), UINT32_MAX, &min) < 0) {
			log_error("--shard auto: SLURM_ARRAY_TASK_MIN is not a number");
			return EXIT_USAGE;
		}
		if (parse_index(idx, UINT32_MAX, ri) < 0 || *ri < min) {
			log_error("--shard auto: %s is not an index", pairs[i][0]);
			return EXIT_USAGE;
		}
		*ri -= min;
		*rn = n;
		return 0;
	}
	log_error("--shard auto: no launcher's index in the environment (SLURM_ARRAY_TASK_ID, "
		  "SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK or JOB_COMPLETION_INDEX)");
	return EXIT_USAGE;
}

static int resolve_shard(const struct client_opts *o, uint32_t plan_shards, uint32_t *ri,
			 uint32_t *rn)
{
	const char *from = "--shard", *count_from = "--shard";
	int rc;

	if (!o->shard_spec[0]) {
		log_error("rdmacp run needs --shard I/N or --shard auto");
		return EXIT_USAGE;
	}
	if (!strcmp(o->shard_spec, "auto")) {
		rc = shard_from_env(o, plan_shards, ri, rn, &from, &count_from);
		if (rc != 0) {
			return rc;
		}
	} else {
		char buf[64], *slash;

		snprintf(buf, sizeof(buf), "%s", o->shard_spec);
		slash = strchr(buf, '/');
		if (!slash) {
			log_error("bad --shard '%s': I/N (0 <= I < N) or auto", o->shard_spec);
			return EXIT_USAGE;
		}
		*slash = '\0';
		if (parse_index(buf, UINT32_MAX, ri) < 0 ||
		    parse_index(slash + 1, UINT32_MAX, rn) < 0 || *rn == 0) {
			log_error("bad --shard '%s': I/N (0 <= I < N) or auto", o->shard_spec);
			return EXIT_USAGE;
		}
	}
	/* A count given is a usage error, not a bad plan: the plan says what it is. */
	if (*rn != plan_shards) {
		log_error("%s: %" PRIu32 " shards, but the plan has %" PRIu32 ": expected %" PRIu32
			  " (--shard I/%" PRIu32 ", or --shard auto with --shards %" PRIu32 ")",
			  count_from, *rn, plan_shards, plan_shards, plan_shards, plan_shards);
		return EXIT_USAGE;
	}
	if (*ri >= *rn) {
		log_error("%s: shard %" PRIu32 " of %" PRIu32 " (shards are 0..%" PRIu32 ")", from,
			  *ri, *rn, *rn - 1);
		return EXIT_USAGE;
	}
	return 0;
}

struct journal_writer {
	FILE *f;
	int fd;
	bool fresh; /* no header yet */
	unsigned unsynced;
	uint64_t bytes;
	int err;
	/* A run's: where the source is, whether its vanished names are accepted, and counts. */
	const char *base;
	bool missing_ok, quiet;
	uint64_t vanished, failed;
};

static void journal_sync(struct journal_writer *j)
{
	if (fflush(j->f) != 0 || fdatasync(j->fd) < 0) {
		j->err = j->err ? j->err : -EIO;
	}
	j->unsynced = 0;
}

static int source_lstat(const char *base, const char *name, struct stat *ret);

/*
 * A name the plan has and the source lost since: told by the push (a listed
 * name missing, or one gone before its sender opened it). A live migration
 * expects some; journaled apart, never a failure of the run. Accepted
 * (code MISSING_OK) when the run or the plan has --missing-ok.
 */
static int vanished_state(struct journal_writer *j, const char *name, const char *action,
			  const char *code, const char **ret_code)
{
	struct stat st;
	char esc[1024];

	if (strcmp(action, "missing") != 0 &&
	    !(j->base && !strcmp(action, "failed") && code && !strcmp(code, "NOT_FOUND") &&
	      source_lstat(j->base, name, &st) == -ENOENT)) {
		return journal_state_parse(action);
	}
	j->vanished++;
	*ret_code = j->missing_ok ? "MISSING_OK" : NULL;
	if (!j->missing_ok && !j->quiet) {
		log_warning("%s: vanished from the source since the plan",
			    log_escape_short(name, esc, sizeof(esc)));
	}
	return JOURNAL_VANISHED;
}

static void journal_observe(void *ud, const char *name, const char *action, uint64_t bytes,
			    const char *code, const uint8_t *hash)
{
	struct journal_writer *j = ud;

	(void)hash;
	int state = vanished_state(j, name, action, code, &code);

	if (state < 0) {
		return;
	}
	j->failed += state == JOURNAL_FAILED;
	journal_put_entry(j->f, name, state, bytes, code);
	j->bytes += bytes;
	if (++j->unsynced >= JOURNAL_SYNC_EVERY) {
		journal_sync(j);
	}
}

/* The list files of a shard's run: NUL-ended names, rdmacp --files-from -0. */
/* A journal's path leaves room for the suffixes of its list files. */
#define JOURNAL_PATH_MAX 4000

struct batch {
	char path[PATH_MAX];
	FILE *f;
	size_t n;
};

static int batch_open(struct batch *b, const char *jpath, const char *what)
{
	snprintf(b->path, sizeof(b->path), "%s.%s", jpath, what);
	b->f = fopen(b->path, "we");
	b->n = 0;
	return b->f ? 0 : -errno;
}

static void batch_add(struct batch *b, const char *name)
{
	fputs(name, b->f);
	fputc('\0', b->f);
	b->n++;
}

/* A shard's ranges of split files: each pushed as a file of its own, its bytes read in place. */
struct windows {
	struct engine_src *v; /* v[0]: the staging directory, then a range each */
	struct window_of {
		char *file;
		uint32_t range;
	} * of; /* of[i] for v[i], i >= 1 */
	size_t n, cap;
	int basefd;
	char staging[64];
	struct timespec now;
};

struct runner {
	struct client_opts *o;
	const struct plan_header *h;
	uint32_t shard;
	struct journal_writer *j;
	struct windows win;
	uint64_t split_n, split_size; /* the split file whose ranges come */
	struct nameset *done;	      /* the journal's outcomes */
	struct nameset skeleton;      /* directories to make first */
	struct batch list, links;
	char jpath[JOURNAL_PATH_MAX];
	char dest[8192];
	int rc;
	uint64_t todo, already;
	uint64_t kept; /* ranges not sent: their files unchanged at the destination */
	bool stop;
};

/* One push of a list of names: the plan's options, --partial, the shard's destination. */
static int run_push(struct runner *ru, struct batch *b)
{
	struct client_opts *o = ru->o;
	char *args[2] = { (char *)ru->h->base, ru->dest };
	uint64_t failed = ru->j ? ru->j->failed : 0, vanished = ru->j ? ru->j->vanished : 0;
	int rc;

	if (fflush(b->f) != 0) {
		return EXIT_LOCAL_IO;
	}
	snprintf(o->files_from, sizeof(o->files_from), "%s", b->path);
	o->from0 = true;
	rc = cmd_copy(o, args, 2);
	/* Entries that failed only because the source lost them: no failure of the run. */
	if ((rc == EXIT_PARTIAL || rc == EXIT_LOCAL_IO) && ru->j && ru->j->failed == failed &&
	    ru->j->vanished > vanished) {
		rc = 0;
	}
	if (ftruncate(fileno(b->f), 0) < 0 || fseek(b->f, 0, SEEK_SET) < 0) {
		return EXIT_LOCAL_IO;
	}
	b->n = 0;
	return rc;
}

static void run_result(struct runner *ru, int rc)
{
	if (rc != 0 && ru->rc == 0) {
		ru->rc = rc;
	}
	if (rc == EXIT_INTERRUPTED || copy_interrupted()) {
		ru->rc = EXIT_INTERRUPTED;
		ru->stop = true;
	}
}

static void windows_free(struct windows *w)
{
	for (size_t i = 1; i < w->n; i++) {
		free(w->v[i].name);
		free(w->v[i].path);
		free(w->of[i].file);
	}
	free(w->v);
	free(w->of);
	if (w->basefd >= 0) {
		close(w->basefd);
	}
	*w = (struct windows){ .basefd = -1 };
}

/* A range of ours: the staging directory first, then it, read from the plan's base. */
static int windows_add(struct runner *ru, const struct plan_entry *e)
{
	struct windows *w = &ru->win;
	struct engine_src *s;

	if (w->n == 0) {
		w->basefd = open(ru->h->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (w->basefd < 0) {
			return -errno;
		}
		plan_staging_dir(ru->h, w->staging);
		clock_gettime(CLOCK_REALTIME, &w->now);
	}
	if (w->n + 2 > w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		struct engine_src *v = realloc(w->v, cap * sizeof(*v));
		struct window_of *of = v ? realloc(w->of, cap * sizeof(*of)) : NULL;

		if (v) {
			w->v = v;
		}
		if (!of) {
			return -ENOMEM;
		}
		w->of = of;
		w->cap = cap;
	}
	if (w->n == 0) {
		/* Private to the migration: the parts are no one's files yet. */
		w->v[0] = (struct engine_src){ .name = w->staging,
					       .path = (char *)".",
					       .dirfd = w->basefd,
					       .ftype = PROTO_FT_DIR,
					       .mode = 0700,
					       .mtime = w->now };
		w->of[0] = (struct window_of){ 0 };
		w->n = 1;
	}
	s = &w->v[w->n];
	*s = (struct engine_src){ .dirfd = w->basefd,
				  .ftype = PROTO_FT_REG,
				  .mode = 0600,
				  .size = e->size,
				  .mtime = { .tv_sec = e->mtime, .tv_nsec = e->mtime_ns },
				  .window = true,
				  .window_off = e->offset,
				  .window_whole = ru->split_size };
	if (asprintf(&s->name, "%s/%" PRIu64 ".%" PRIu32, w->staging, ru->split_n, e->range) < 0) {
		s->name = NULL;
		return -ENOMEM;
	}
	s->path = strdup(e->name);
	w->of[w->n] = (struct window_of){ .file = strdup(e->name), .range = e->range };
	if (!s->path || !w->of[w->n].file) {
		free(s->name);
		free(s->path);
		free(w->of[w->n].file);
		return -ENOMEM;
	}
	w->n++;
	return 0;
}

/* What a range push tells of each part: a journal line for its range, with the sender's digest. */
static void window_observe(void *ud, const char *name, const char *action, uint64_t bytes,
			   const char *code, const uint8_t *hash)
{
	struct runner *ru = ud;
	struct journal_writer *j = ru->j;
	int state;

	for (size_t i = 1; i < ru->win.n; i++) {
		if (strcmp(ru->win.v[i].name, name)) {
			continue;
		}
		state = vanished_state(j, ru->win.of[i].file, action, code, &code);
		if (state < 0) {
			return;
		}
		if (journal_state_done(state) && !hash) {
			state = JOURNAL_FAILED; /* never done without the digest finalize checks */
			code = "NO_DIGEST";
		}
		journal_put_range(j->f, ru->win.of[i].file, ru->win.of[i].range, state, bytes, code,
				  journal_state_done(state) ? hash : NULL);
		j->bytes += bytes;
		if (++j->unsynced >= JOURNAL_SYNC_EVERY) {
			journal_sync(j);
		}
		return;
	}
}

/*
 * The level at which a split file the destination has already is left as it
 * is, as a whole file of the plan would be: the plan's skip level; under
 * --delta without one, the content (a delta would send none of it). 0: its
 * ranges always go.
 */
static uint32_t split_keep_level(const struct plan_header *h)
{
	uint32_t skip = skip_parse(h->skip);

	return skip ? skip : h->delta ? PROTO_OPEN_SKIP_CHECKSUM : 0;
}

static void keep_observe(void *ud, const char *name, const char *action, uint64_t bytes,
			 const char *code, const uint8_t *hash)
{
	(void)bytes;
	(void)code;
	(void)hash;
	/* Out of memory: not kept, its ranges sent (the safe way to be wrong). */
	if (!strcmp(action, "would_skip")) {
		(void)nameset_put(ud, name, JOURNAL_SKIPPED, NULL);
	}
}

static void apply_plan_options(struct client_opts *o, const struct plan_header *h);

/*
 * A probe (a dry run at the keep level) of the whole files whose ranges this
 * shard holds, at their final names; same: those the destination has as
 * the source has them. 0 or the probe's exit code.
 */
static int keep_probe(struct runner *ru, struct nameset *same)
{
	struct client_opts *o = ru->o;
	int verbose = o->verbose, progress = o->progress, rc;
	bool json = o->json;
	struct batch b;
	const char *last = "";

	if (batch_open(&b, ru->jpath, "keep") < 0) {
		return EXIT_LOCAL_IO;
	}
	for (size_t i = 1; i < ru->win.n; i++) {
		if (strcmp(ru->win.of[i].file, last)) {
			last = ru->win.of[i].file;
			batch_add(&b, last);
		}
	}
	o->dry_run = true;
	o->skip = split_keep_level(ru->h);
	o->hardlinks = o->xattrs = o->acls = o->owner = false;
	o->delta = o->assume_zero = o->partial = false;
	o->verbose = -1;
	o->json = false;
	o->progress = 0;
	copy_set_observer(keep_observe, same);
	rc = run_push(ru, &b);
	copy_set_observer(journal_observe, ru->j);
	o->verbose = verbose;
	o->json = json;
	o->progress = progress;
	apply_plan_options(o, ru->h);
	fclose(b.f);
	unlink(b.path);
	return rc;
}

/* The ranges of files the destination has unchanged: journaled skipped (no part, no digest). */
static void windows_keep(struct runner *ru, const struct nameset *same)
{
	struct windows *w = &ru->win;
	size_t k = 1;

	for (size_t i = 1; i < w->n; i++) {
		if (!nameset_get(same, w->of[i].file)) {
			w->v[k] = w->v[i];
			w->of[k++] = w->of[i];
			continue;
		}
		journal_put_range(ru->j->f, w->of[i].file, w->of[i].range, JOURNAL_SKIPPED, 0, NULL,
				  NULL);
		ru->kept++;
		free(w->v[i].name);
		free(w->v[i].path);
		free(w->of[i].file);
	}
	w->n = k;
	journal_sync(ru->j);
}

/*
 * The ranges: those of files the destination has unchanged left out; the
 * others in one push, as files under the staging directory, no skip level
 * (a part is new; the level was the whole file's).
 */
static int run_windows(struct runner *ru)
{
	struct client_opts *o = ru->o;
	char *args[2] = { (char *)ru->h->base, ru->dest };
	int rc;

	if (split_keep_level(ru->h)) {
		struct nameset same = { 0 };

		rc = keep_probe(ru, &same);
		if (rc == EXIT_INTERRUPTED || copy_interrupted()) {
			nameset_free(&same);
			return EXIT_INTERRUPTED;
		}
		windows_keep(ru, &same);
		nameset_free(&same);
		if (ru->win.n <= 1) {
			return 0;
		}
	}
	o->skip = 0;
	o->hardlinks = false;
	o->xattrs = false;
	o->acls = false;
	o->owner = false;
	copy_set_sources(ru->win.v, ru->win.n);
	copy_set_observer(window_observe, ru);
	rc = cmd_copy(o, args, 2);
	copy_set_sources(NULL, 0);
	copy_set_observer(journal_observe, ru->j);
	return rc;
}

static int run_entry(void *ud, const struct plan_entry *e)
{
	struct runner *ru = ud;
	bool linked = ru->h->hardlinks && (e->links > 1 || e->ftype == PROTO_FT_HARDLINK);
	const struct nameset_slot *s;

	if (e->ranges) {
		/* Not sent whole: its ranges are, by their shards; finalize joins them. */
		ru->split_n = e->n;
		ru->split_size = e->size;
		return 0;
	}
	if (e->shard != ru->shard || ru->stop || e->ftype == PROTO_FT_DIR) {
		return 0; /* directories went with the skeleton */
	}
	if (e->ftype == PLAN_FT_RANGE) {
		s = nameset_get_range(ru->done, e->name, e->range);
		if (s && journal_state_done(s->state)) {
			ru->already++;
			return 0;
		}
		ru->todo++;
		return windows_add(ru, e) < 0 ? EXIT_LOCAL_IO : 0;
	}
	if (nameset_get(ru->done, e->name) &&
	    journal_state_done(nameset_get(ru->done, e->name)->state)) {
		ru->already++;
		return 0;
	}
	ru->todo++;
	if (linked) {
		/* The names of one file go in one push, so -H makes them one file again. */
		batch_add(&ru->links, e->name);
		if (e->ftype == PROTO_FT_HARDLINK) {
			batch_add(&ru->links, e->link);
		}
		return 0;
	}
	batch_add(&ru->list, e->name);
	if (ru->list.n >= RUN_BATCH) {
		run_result(ru, run_push(ru, &ru->list));
	}
	return 0;
}

/*
 * The skeleton of a shard: its own directories and those above its
 * entries, made in a push of their own before any file, in plan order
 * (parents first). A directory another shard made first as a mere parent
 * would keep the daemon's default mode (the engine gives modes to the
 * directories it creates as entries): made as entries here, each gets its
 * own, whichever shard comes first.
 */
static int skeleton_mark(void *ud, const struct plan_entry *e)
{
	struct runner *ru = ud;
	char name[PROTO_MAX_PATH + 1];
	char *slash;

	/* Outcomes of this plan's entries (of any shard: the skeleton's directories are theirs). */
	if (e->ftype == PLAN_FT_RANGE) {
		nameset_mark_range(ru->done, e->name, e->range, NAMESET_PLANNED);
	} else if (!e->ranges) {
		nameset_mark(ru->done, e->name, NAMESET_PLANNED);
	}
	if (e->shard != ru->shard) {
		return 0;
	}
	snprintf(name, sizeof(name), "%s", e->name);
	if (e->ftype != PROTO_FT_DIR) {
		slash = strrchr(name, '/');
		if (!slash) {
			return 0;
		}
		*slash = '\0';
	}
	for (;;) {
		if (nameset_get(&ru->skeleton, name)) {
			return 0; /* and so are its parents */
		}
		if (nameset_put(&ru->skeleton, name, JOURNAL_COPIED, NULL) < 0) {
			return EXIT_LOCAL_IO;
		}
		slash = strrchr(name, '/');
		if (!slash) {
			return 0;
		}
		*slash = '\0';
	}
}

static int skeleton_list(void *ud, const struct plan_entry *e)
{
	struct runner *ru = ud;

	if (e->ftype == PROTO_FT_DIR && nameset_get(&ru->skeleton, e->name)) {
		batch_add(&ru->list, e->name);
		if (ru->list.n >= RUN_BATCH && !ru->stop) {
			run_result(ru, run_push(ru, &ru->list));
		}
	}
	return 0;
}

/* HOST:PATH/ for shard i: the plan's hosts taken in turn. */
static void shard_dest(const struct plan_header *h, uint32_t shard, char *buf, size_t len)
{
	uint32_t nhosts = 1, k;
	const char *p = h->hosts;
	size_t hl;

	for (const char *c = h->hosts; *c; c++) {
		nhosts += *c == ',';
	}
	for (k = shard % nhosts; k > 0; k--) {
		p = strchr(p, ',') + 1;
	}
	hl = strcspn(p, ",");
	snprintf(buf, len, "%s%.*s%s:%s%s", memchr(p, ':', hl) ? "[" : "", (int)hl, p,
		 memchr(p, ':', hl) ? "]" : "", h->path,
		 h->path[strlen(h->path) - 1] == '/' ? "" : "/");
}

/* The plan's options for the pushes of a shard or of finalize. */
static void apply_plan_options(struct client_opts *o, const struct plan_header *h)
{
	o->port = h->port;
	o->recursive = false;
	o->preserve = h->preserve;
	o->owner = h->owner;
	o->hardlinks = h->hardlinks;
	o->xattrs = h->xattrs;
	o->acls = h->acls;
	o->skip = skip_parse(h->skip);
	o->delta = h->delta;
	o->assume_zero = h->assume_zero;
	o->partial = true;
	o->mirror = false;
	/* A name the source lost since the plan is told (journaled vanished), not failed. */
	o->missing_ok = true;
	o->dry_run = false;
	filter_list_free(&o->filters);
	o->filters = (struct filter_list){ 0 };
}

/* Open and lock a journal: EXIT_SHARD_TAKEN when another run holds it. */
static int journal_lock(const char *jpath, const char *what, int *ret_fd)
{
	char esc[1024];
	int fd = open(jpath, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	if (fd < 0) {
		log_error("%s: %s", log_escape_short(jpath, esc, sizeof(esc)), strerror(errno));
		return EXIT_LOCAL_IO;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		close(fd);
		if (e == EWOULDBLOCK) {
			log_error("%s is running already (its journal %s is locked by another "
				  "process): one process per shard",
				  what, log_escape_short(jpath, esc, sizeof(esc)));
			return EXIT_SHARD_TAKEN;
		}
		log_error("%s: lock: %s", log_escape_short(jpath, esc, sizeof(esc)), strerror(e));
		return EXIT_LOCAL_IO;
	}
	*ret_fd = fd;
	return 0;
}

/* Lock, check and load a journal, cut a torn last line. j->fresh: it has no header yet. */
static int journal_open(const char *jpath, const char *what, const struct plan_header *h,
			int64_t shard, struct nameset *done, struct journal_writer *j)
{
	off_t good = 0;
	struct stat stt;
	int rc = journal_lock(jpath, what, &j->fd);

	if (rc != 0) {
		return rc;
	}
	rc = journal_load(j->fd, jpath, h->id, shard, h->shards, done, NULL, NULL, &good);
	if (rc == 0 && fstat(j->fd, &stt) == 0 && stt.st_size > good &&
	    ftruncate(j->fd, good) < 0) {
		rc = EXIT_LOCAL_IO;
	}
	if (rc != 0) {
		close(j->fd);
		return rc;
	}
	j->fresh = good == 0;
	return 0;
}

/* After journal_open: the header of a new journal, and this run's start. */
static int journal_start(const struct plan_header *h, int64_t shard, struct journal_writer *j)
{
	if (!(j->f = fdopen(j->fd, "a"))) {
		close(j->fd);
		return EXIT_LOCAL_IO;
	}
	if (j->fresh) {
		journal_put_header(j->f, h->id, shard, h->shards);
	}
	journal_put_run(j->f, true, (double)time(NULL), 0, 0, 0);
	journal_sync(j);
	return 0;
}

static int journal_begin(const char *jpath, const char *what, const struct plan_header *h,
			 int64_t shard, struct nameset *done, struct journal_writer *j)
{
	int rc = journal_open(jpath, what, h, shard, done, j);

	return rc != 0 ? rc : journal_start(h, shard, j);
}

static int journal_end(struct journal_writer *j, int rc, double secs)
{
	journal_put_run(j->f, false, (double)time(NULL), rc, j->bytes, secs);
	journal_sync(j);
	if (fclose(j->f) != 0 && j->err == 0) {
		j->err = -EIO;
	}
	return j->err;
}

/* The last line of a shard's run; --json: a "run" event, whatever -q says. */
static void run_summary(const struct runner *ru, const char *what, int rc)
{
	const struct journal_writer *j = ru->j;

	if (ru->o->json) {
		printf("{\"event\":\"run\",\"shard\":%" PRIu32 ",\"shards\":%" PRIu32
		       ",\"done_before\":%" PRIu64 ",\"this_run\":%" PRIu64 ",\"bytes\":%" PRIu64
		       ",\"ranges_kept\":%" PRIu64 ",\"vanished\":%" PRIu64 ",\"exit\":%d}\n",
		       ru->shard, ru->h->shards, ru->already, ru->todo, j->bytes, ru->kept,
		       j->vanished, rc);
		fflush(stdout);
		return;
	}
	if (ru->o->verbose < 0) {
		return;
	}
	fprintf(stderr, "%s: %" PRIu64 " entries done before, %" PRIu64 " this run", what,
		ru->already, ru->todo);
	if (ru->kept) {
		fprintf(stderr, ", %" PRIu64 " ranges kept (their files unchanged)", ru->kept);
	}
	if (j->vanished) {
		fprintf(stderr, ", %" PRIu64 " vanished since the plan", j->vanished);
	}
	fprintf(stderr, ", exit %d\n", rc);
}

int cmd_run(struct client_opts *o, char **args, int nargs)
{
	struct plan_reader *r = NULL;
	struct runner ru = { .o = o, .win.basefd = -1 };
	struct nameset done = { 0 };
	struct journal_writer j = { 0 };
	char what[64], esc[1024];
	double t0 = now_seconds();
	int rc;

	if (nargs != 1) {
		log_error("usage: rdmacp run PLAN --shard I/N|auto");
		return EXIT_USAGE;
	}
	rc = open_plan(args[0], &r);
	if (rc != 0) {
		return rc;
	}
	ru.h = plan_reader_header(r);
	ru.done = &done;
	rc = resolve_shard(o, ru.h->shards, &ru.shard, &(uint32_t){ 0 });
	if (rc == 0 && journal_path(args[0], ru.shard, ru.jpath, sizeof(ru.jpath)) < 0) {
		rc = EXIT_USAGE;
	}
	snprintf(what, sizeof(what), "shard %" PRIu32 " of %" PRIu32, ru.shard, ru.h->shards);
	if (rc == 0) {
		rc = journal_open(ru.jpath, what, ru.h, ru.shard, &done, &j);
	}
	if (rc == 0) {
		/* All of it checked before anything is copied: the plan, the journal against it. */
		rc = plan_pass(r, skeleton_mark, &ru);
		if (rc == 0 && nameset_count_unmarked(&done, NAMESET_PLANNED) > 0) {
			rc = journal_foreign(&done, j.fd, ru.jpath);
		}
		if (rc != 0) {
			close(j.fd);
		} else {
			rc = journal_start(ru.h, ru.shard, &j);
		}
	}
	if (rc != 0) {
		nameset_free(&done);
		nameset_free(&ru.skeleton);
		plan_close(r);
		return rc;
	}
	ru.j = &j;
	j.base = ru.h->base;
	j.missing_ok = o->missing_ok || ru.h->missing_ok;
	j.quiet = o->verbose < 0;
	shard_dest(ru.h, ru.shard, ru.dest, sizeof(ru.dest));
	apply_plan_options(o, ru.h);
	copy_set_observer(journal_observe, &j);
	if (batch_open(&ru.list, ru.jpath, "list") < 0 ||
	    batch_open(&ru.links, ru.jpath, "links") < 0) {
		log_error("%s.list: %s", log_escape_short(ru.jpath, esc, sizeof(esc)),
			  strerror(errno));
		rc = EXIT_LOCAL_IO;
	}
	if (rc == 0) {
		rc = plan_pass(r, skeleton_list, &ru);
	}
	if (rc == 0 && !ru.stop && ru.list.n > 0) {
		run_result(&ru, run_push(&ru, &ru.list));
	}
	if (rc == 0 && !ru.stop) {
		rc = plan_pass(r, run_entry, &ru);
	}
	if (rc == 0 && !ru.stop && ru.list.n > 0) {
		run_result(&ru, run_push(&ru, &ru.list));
	}
	if (rc == 0 && !ru.stop && ru.links.n > 0) {
		run_result(&ru, run_push(&ru, &ru.links));
	}
	if (rc == 0 && !ru.stop && ru.win.n > 1) {
		run_result(&ru, run_windows(&ru));
	}
	windows_free(&ru.win);
	if (rc == 0) {
		rc = ru.rc;
	}
	copy_set_observer(NULL, NULL);
	for (struct batch *b = &ru.list; b <= &ru.links; b++) {
		if (b->f) {
			fclose(b->f);
			unlink(b->path);
		}
	}
	if (journal_end(&j, rc, now_seconds() - t0) < 0) {
		log_error("%s: journal not written: %s",
			  log_escape_short(ru.jpath, esc, sizeof(esc)), strerror(EIO));
		rc = rc ? rc : EXIT_LOCAL_IO;
	}
	run_summary(&ru, what, rc);
	nameset_free(&done);
	nameset_free(&ru.skeleton);
	plan_close(r);
	return rc;
}

/* ---- finalize and report ------------------------------------------------------- */

struct merged {
	struct plan_reader *r;
	const struct plan_header *h;
	struct nameset ns;
	struct nameset final;	 /* finalize's own outcomes: deletions, split files assembled */
	struct rangeset digests; /* each range done: the XXH3-128 its sender computed */
	/* Split files whose ranges were all kept (not sent): the destination's file unchanged. */
	struct nameset kept;
	/* The split file whose ranges the pass is in: how many, how many done, what they make. */
	struct {
		uint32_t ranges, done;
		uint64_t n;
		int kind;
	} split;
	uint64_t split_files, split_ready; /* split files; not assembled, every range done */
	uint64_t split_mixed;		   /* ... some ranges sent, some kept: changed meanwhile */
	uint64_t vanished, vanished_accepted; /* entries the source lost; of them, --missing-ok */
	struct shard_stats *shards;
	struct shard_stats assembly;		 /* the split files: finalize's, no shard's */
	uint64_t by_state[JOURNAL_VANISHED + 1]; /* [0]: pending */
	uint64_t deleted;
	struct client_opts *o;
	bool listing; /* report: each entry printed */
	uint64_t shown_failed;
};

/* The plan and every journal next to it; EXIT_BAD_PLAN for one that doesn't belong. */
static int merged_load(struct merged *m, const char *plan)
{
	char jpath[PATH_MAX];
	int rc = open_plan(plan, &m->r);

	if (rc != 0) {
		return rc;
	}
	m->h = plan_reader_header(m->r);
	m->shards = calloc(m->h->shards, sizeof(*m->shards));
	if (!m->shards) {
		return EXIT_LOCAL_IO;
	}
	for (uint32_t i = 0; i <= m->h->shards && rc == 0; i++) {
		bool final = i == m->h->shards;
		int fd;

		journal_path(plan, final ? UINT32_MAX : i, jpath, sizeof(jpath));
		fd = open(jpath, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			if (errno != ENOENT) {
				rc = EXIT_LOCAL_IO;
			}
			continue;
		}
		if (final) {
			rc = journal_load(fd, jpath, m->h->id, -1, m->h->shards, &m->final, NULL,
					  NULL, NULL);
			for (size_t k = 0; k < m->final.cap; k++) {
				m->deleted += m->final.v[k].state == JOURNAL_DELETED;
			}
		} else {
			m->shards[i].journal = true;
			rc = journal_load(fd, jpath, m->h->id, i, m->h->shards, &m->ns, &m->digests,
					  &m->shards[i], NULL);
		}
		close(fd);
	}
	return rc;
}

/* After a pass of merged_entry: a shard journal's line for no entry of the plan refused. */
static int merged_foreign(struct merged *m, const char *plan)
{
	char jpath[PATH_MAX];
	int rc = 0;

	if (nameset_count_unmarked(&m->ns, NAMESET_PLANNED) == 0) {
		return 0;
	}
	for (uint32_t i = 0; i < m->h->shards && rc == 0; i++) {
		int fd;

		journal_path(plan, i, jpath, sizeof(jpath));
		fd = open(jpath, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			continue;
		}
		rc = journal_foreign(&m->ns, fd, jpath);
		close(fd);
	}
	return rc;
}

static void merged_free(struct merged *m)
{
	nameset_free(&m->ns);
	nameset_free(&m->final);
	nameset_free(&m->kept);
	rangeset_free(&m->digests);
	free(m->shards);
	plan_close(m->r);
}

static void csv_field(const char *s)
{
	bool quote = strpbrk(s, ",\"\r\n") != NULL;

	if (quote) {
		putchar('"');
	}
	for (; *s; s++) {
		if (*s == '"') {
			putchar('"');
		}
		putchar(*s);
	}
	if (quote) {
		putchar('"');
	}
}

static void entry_out(struct merged *m, const struct plan_entry *e, int state, const char *code)
{
	char esc[1024];

	if (m->o->csv) {
		csv_field(e->name);
		printf(",%s,%" PRIu32 ",%s,%" PRIu64 ",", plan_ftype_name(e->ftype), e->shard,
		       journal_state_name(state), e->size);
		csv_field(code);
		putchar('\n');
	} else if (m->o->json) {
		printf("{\"event\":\"entry\"");
		ndjson_put_name(stdout, "name", e->name);
		printf(",\"type\":\"%s\",\"shard\":%" PRIu32 ",\"state\":\"%s\",\"size\":%" PRIu64,
		       plan_ftype_name(e->ftype), e->shard, journal_state_name(state), e->size);
		if (*code) {
			printf(",\"code\":");
			ndjson_put_string(stdout, code);
		}
		printf("}\n");
	} else if (state == JOURNAL_FAILED || (state == 0 && m->o->verbose > 0)) {
		if (state == 0 || m->shown_failed++ < 100 || m->o->verbose > 0) {
			printf("  %s: %s%s%s%s (shard %" PRIu32 ")\n", journal_state_name(state),
			       log_escape_short(e->name, esc, sizeof(esc)), *code ? " (" : "", code,
			       *code ? ")" : "", e->shard);
		}
	}
}

/*
 * What the outcomes of a split file's ranges (in ns) make of it: every
 * range sent (parts to assemble), every one kept (the destination's file
 * unchanged: nothing to assemble), some of each (the file changed between
 * the shards' looks), one the source lost, or not all done yet.
 * ret_accepted (may be NULL): every vanished range with MISSING_OK.
 */
enum split_kind { SPLIT_PENDING, SPLIT_PARTS, SPLIT_UNCHANGED, SPLIT_MIXED, SPLIT_VANISHED };

static int split_kind(const struct nameset *ns, const struct plan_entry *e, bool *ret_accepted)
{
	uint32_t kept = 0, sent = 0, vanished = 0, accepted = 0;

	for (uint32_t i = 0; i < e->ranges; i++) {
		const struct nameset_slot *s = nameset_get_range(ns, e->name, i);

		if (s && s->state == JOURNAL_VANISHED) {
			vanished++;
			accepted += !strcmp(s->code, "MISSING_OK");
		} else if (s && s->state == JOURNAL_SKIPPED) {
			kept++;
		} else if (s && journal_state_done(s->state)) {
			sent++;
		}
	}
	if (ret_accepted) {
		*ret_accepted = vanished > 0 && accepted == vanished;
	}
	if (vanished) {
		return SPLIT_VANISHED;
	}
	if (kept + sent < e->ranges) {
		return SPLIT_PENDING;
	}
	return !kept ? SPLIT_PARTS : !sent ? SPLIT_UNCHANGED : SPLIT_MIXED;
}

/* A split file's line once its ranges are counted: --json an event, else with -v or when some are missing. */
static void split_out(struct merged *m, const char *name, bool assembled)
{
	bool unchanged = m->split.kind == SPLIT_UNCHANGED;
	char esc[1024];

	if (!m->listing || m->o->csv) {
		return;
	}
	if (m->o->json) {
		printf("{\"event\":\"split\"");
		ndjson_put_name(stdout, "name", name);
		printf(",\"ranges\":%" PRIu32 ",\"done\":%" PRIu32
		       ",\"assembled\":%s,\"unchanged\":%s}\n",
		       m->split.ranges, m->split.done, assembled ? "true" : "false",
		       unchanged ? "true" : "false");
	} else if (!assembled || m->o->verbose > 0) {
		printf("  split: %s: %" PRIu32 "/%" PRIu32 " ranges done, %s\n",
		       log_escape_short(name, esc, sizeof(esc)), m->split.done, m->split.ranges,
		       assembled && unchanged	      ? "in place, unchanged (no range sent)"
		       : assembled		      ? "assembled"
		       : m->split.kind == SPLIT_MIXED ? "changed meanwhile (ranges sent and kept)"
		       : m->split.kind == SPLIT_VANISHED  ? "vanished from the source"
		       : unchanged			  ? "unchanged, for finalize to keep"
		       : m->split.done == m->split.ranges ? "to be assembled by finalize"
							  : "not assembled");
	}
}

/* A split file's entry: what its ranges make of it; one kept unchanged remembered, one the source lost counted. */
static int merged_split(struct merged *m, const struct plan_entry *e, int *state)
{
	bool accepted;

	m->split = (typeof(m->split)){ .ranges = e->ranges,
				       .n = e->n,
				       .kind = split_kind(&m->ns, e, &accepted) };
	m->split_files++;
	if (m->split.kind == SPLIT_UNCHANGED && *state != JOURNAL_SKIPPED &&
	    *state != JOURNAL_COPIED && nameset_put(&m->kept, e->name, JOURNAL_SKIPPED, NULL) < 0) {
		return EXIT_LOCAL_IO;
	}
	if (m->split.kind == SPLIT_VANISHED && !journal_state_done(*state)) {
		*state = JOURNAL_VANISHED;
		m->vanished_accepted += accepted;
	}
	return 0;
}

static int merged_entry(void *ud, const struct plan_entry *e)
{
	struct merged *m = ud;
	const struct nameset_slot *s = e->ftype == PLAN_FT_RANGE
					   ? nameset_get_range(&m->ns, e->name, e->range)
				       : e->ranges ? nameset_get(&m->final, e->name)
						   : nameset_get(&m->ns, e->name);
	int state = s ? s->state : 0;
	struct shard_stats *st = e->ranges ? &m->assembly : &m->shards[e->shard];

	/* What is left unmarked in the shards' journals names no entry (merged_foreign). */
	if (e->ftype == PLAN_FT_RANGE) {
		nameset_mark_range(&m->ns, e->name, e->range, NAMESET_PLANNED);
	} else if (!e->ranges) {
		nameset_mark(&m->ns, e->name, NAMESET_PLANNED);
	}

	/* Done once finalize assembled it (or kept it); its ranges are counted as they come. */
	if (e->ranges && merged_split(m, e, &state) != 0) {
		return EXIT_LOCAL_IO;
	}
	if (e->ftype == PLAN_FT_RANGE) {
		m->split.done += journal_state_done(state);
	}
	if (state == JOURNAL_VANISHED) {
		m->vanished++;
		m->vanished_accepted += !e->ranges && !strcmp(s->code, "MISSING_OK");
	}
	/* A deleted name (the last word of a run without --delete can't be that) counts as pending. */
	if (state == JOURNAL_DELETED) {
		state = 0;
	}
	m->by_state[state]++;
	/* A split file is finalize's to assemble, not its shard's; its bytes are its ranges'. */
	st->entries++;
	st->bytes += e->ranges ? 0 : e->size;
	/* A name the source lost is no work left for its shard (finalize judges it). */
	st->done += journal_state_done(state) || state == JOURNAL_VANISHED;
	st->failed += state == JOURNAL_FAILED;
	if (m->listing) {
		entry_out(m, e, state, s && state ? s->code : "");
	}
	if (e->ftype == PLAN_FT_RANGE && e->range + 1 == m->split.ranges) {
		const struct nameset_slot *f = nameset_get(&m->final, e->name);
		bool assembled = f && journal_state_done(f->state);

		bool mixed = m->split.kind == SPLIT_MIXED;

		m->split_ready += !assembled && !mixed && m->split.done == m->split.ranges;
		m->split_mixed += !assembled && mixed;
		split_out(m, e->name, assembled);
	}
	return 0;
}

static uint64_t merged_done(const struct merged *m)
{
	return m->by_state[JOURNAL_COPIED] + m->by_state[JOURNAL_SKIPPED] +
	       m->by_state[JOURNAL_RESUMED];
}

static double shard_rate(const struct shard_stats *s)
{
	return s->seconds > 0 ? (double)s->ended_sent / s->seconds : 0.0;
}

/* The shards' runs added up: the rate is of the runs that ended, over their own seconds. */
static struct shard_stats shards_total(const struct merged *m)
{
	struct shard_stats t = { 0 };

	for (uint32_t i = 0; i < m->h->shards; i++) {
		t.sent += m->shards[i].sent;
		t.runs += m->shards[i].runs;
		t.ended += m->shards[i].ended;
		t.ended_sent += m->shards[i].ended_sent;
		t.seconds += m->shards[i].seconds;
	}
	return t;
}

static void summary_json(const struct merged *m)
{
	const struct plan_header *h = m->h;
	struct shard_stats t = shards_total(m);

	printf("{\"event\":\"report\",\"plan\":\"%s\",\"shards\":%" PRIu32 ",\"entries\":%" PRIu64
	       ",\"bytes\":%" PRIu64 ",\"copied\":%" PRIu64 ",\"skipped\":%" PRIu64
	       ",\"resumed\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"pending\":%" PRIu64
	       ",\"deleted\":%" PRIu64 ",\"vanished\":%" PRIu64 ",\"runs\":%" PRIu64
	       ",\"ended\":%" PRIu64 ",\"sent\":%" PRIu64 ",\"seconds\":%.3f,\"rate\":%.0f"
	       ",\"complete\":%s}\n",
	       h->id, h->shards, h->entries, h->bytes, m->by_state[JOURNAL_COPIED],
	       m->by_state[JOURNAL_SKIPPED], m->by_state[JOURNAL_RESUMED],
	       m->by_state[JOURNAL_FAILED], m->by_state[0], m->deleted, m->vanished, t.runs,
	       t.ended, t.sent, t.seconds, shard_rate(&t),
	       merged_done(m) + m->vanished == h->entries ? "true" : "false");
	for (uint32_t i = 0; i < h->shards; i++) {
		const struct shard_stats *s = &m->shards[i];

		printf("{\"event\":\"shard\",\"shard\":%" PRIu32 ",\"entries\":%" PRIu64
		       ",\"bytes\":%" PRIu64 ",\"done\":%" PRIu64 ",\"failed\":%" PRIu64
		       ",\"pending\":%" PRIu64 ",\"runs\":%" PRIu64 ",\"ended\":%" PRIu64
		       ",\"sent\":%" PRIu64 ",\"seconds\":%.3f,\"rate\":%.0f,\"last_exit\":%d}\n",
		       i, s->entries, s->bytes, s->done, s->failed,
		       s->entries - s->done - s->failed, s->runs, s->ended, s->sent, s->seconds,
		       shard_rate(s), s->last_exit);
	}
	if (m->assembly.entries > 0) {
		const struct shard_stats *a = &m->assembly;

		printf("{\"event\":\"assembly\",\"entries\":%" PRIu64 ",\"done\":%" PRIu64
		       ",\"failed\":%" PRIu64 ",\"pending\":%" PRIu64 "}\n",
		       a->entries, a->done, a->failed, a->entries - a->done - a->failed);
	}
}

/* "N bytes sent in R runs ...": what a shard's runs did, said as far as it is known. */
static void runs_text(const struct shard_stats *s, char *buf, size_t len)
{
	uint64_t cut = s->runs > s->ended ? s->runs - s->ended : 0;

	if (!s->journal) {
		/* Its directories may be done all the same: other shards make them as parents. */
		snprintf(buf, len,
			 s->done == s->entries ? "no run of its own: other shards' runs made its "
						 "entries"
			 : s->done > 0	       ? "never run (other shards' runs made some of it)"
					       : "never run");
		return;
	}
	snprintf(buf, len,
		 "%" PRIu64 " bytes sent in %" PRIu64 " run%s%s; %.1f s, %.1f MiB/s in the %" PRIu64
		 " that ended",
		 s->sent, s->runs, s->runs == 1 ? "" : "s",
		 cut ? " (some cut short, or running)" : "", s->seconds, shard_rate(s) / 1048576,
		 s->ended);
}

static void summary_text(const struct merged *m, FILE *f, bool all_shards)
{
	const struct plan_header *h = m->h;
	struct shard_stats t = shards_total(m);
	const struct shard_stats *a = &m->assembly;
	char runs[160];

	fprintf(f,
		"plan %s: %" PRIu64 " entries, %" PRIu64 " bytes, %" PRIu32
		" shards\n  copied %" PRIu64 ", skipped %" PRIu64 ", resumed %" PRIu64
		", failed %" PRIu64 ", pending %" PRIu64 ", deleted %" PRIu64 ", vanished %" PRIu64
		"\n",
		h->id, h->entries, h->bytes, h->shards, m->by_state[JOURNAL_COPIED],
		m->by_state[JOURNAL_SKIPPED], m->by_state[JOURNAL_RESUMED],
		m->by_state[JOURNAL_FAILED], m->by_state[0], m->deleted, m->vanished);
	t.journal = true;
	runs_text(&t, runs, sizeof(runs));
	fprintf(f, "  all shards: %s\n", runs);
	for (uint32_t i = 0; i < h->shards; i++) {
		const struct shard_stats *s = &m->shards[i];

		if (!all_shards && s->done == s->entries) {
			continue; /* finalize names the shards to run again */
		}
		runs_text(s, runs, sizeof(runs));
		fprintf(f,
			"  shard %" PRIu32 ": %" PRIu64 " entries, %" PRIu64 " done, %" PRIu64
			" failed, %" PRIu64 " pending; %s\n",
			i, s->entries, s->done, s->failed, s->entries - s->done - s->failed, runs);
	}
	if (a->entries > 0 && (all_shards || a->done < a->entries)) {
		fprintf(f,
			"  split files (finalize assembles them): %" PRIu64 " entries, %" PRIu64
			" done, %" PRIu64 " failed, %" PRIu64 " pending\n",
			a->entries, a->done, a->failed, a->entries - a->done - a->failed);
	}
}

static void merged_summary(const struct merged *m, const struct client_opts *o, bool to_stdout)
{
	if (o->csv) {
		return;
	}
	if (o->json) {
		summary_json(m);
		fflush(stdout);
		return;
	}
	summary_text(m, to_stdout ? stdout : stderr, to_stdout);
}

/* report --watch: the totals and shards again every few seconds, until nothing is pending. */
#define REPORT_WATCH_S 5

int cmd_report(struct client_opts *o, char **args, int nargs)
{
	int rc;

	if (nargs != 1) {
		log_error("usage: rdmacp report PLAN [--json|--csv] [--watch]");
		return EXIT_USAGE;
	}
	if (o->json && o->csv) {
		log_error("--json or --csv, not both");
		return EXIT_USAGE;
	}
	if (o->watch && o->csv) {
		log_error("--watch prints totals, not --csv rows");
		return EXIT_USAGE;
	}
	for (;;) {
		/* Watching, each round is the totals and the shards, not every entry. */
		struct merged m = { .o = o, .listing = !o->watch };
		uint64_t pending = 0;

		rc = merged_load(&m, args[0]);
		if (rc == 0 && o->csv) {
			printf("name,type,shard,state,size,code\n");
		}
		if (rc == 0) {
			rc = plan_pass(m.r, merged_entry, &m);
		}
		if (rc == 0) {
			rc = merged_foreign(&m, args[0]);
		}
		if (rc == 0) {
			merged_summary(&m, o, true);
			fflush(stdout);
			/* A split file whose ranges are in waits for finalize, not for shards. */
			pending = m.by_state[0] - m.split_ready;
		}
		merged_free(&m);
		if (rc != 0 || !o->watch || pending == 0) {
			return rc;
		}
		sleep(REPORT_WATCH_S);
	}
}

/*
 * finalize: the directories and symlinks again. No journal's word is taken
 * for them (they cost no data to make again), and with -p the directories
 * get their modes and times now their contents are in.
 */
static int dirs_entry(void *ud, const struct plan_entry *e)
{
	struct runner *ru = ud;

	if ((e->ftype == PROTO_FT_DIR || e->ftype == PROTO_FT_SYMLINK) && !ru->stop) {
		batch_add(&ru->list, e->name);
		if (ru->list.n >= RUN_BATCH) {
			run_result(ru, run_push(ru, &ru->list));
		}
	}
	return 0;
}

/* --delete: the whole tree pushed again with -r and a skip level, the daemon mirroring. */
static int mirror_push(struct client_opts *o, const struct plan_header *h, const char *dest,
		       const char *top)
{
	_cleanup_free_ char *src = NULL;
	char *args[2];
	unsigned line;
	int r;

	if (asprintf(&src, "%s/%s", h->base, top) < 0) {
		return EXIT_LOCAL_IO;
	}
	o->recursive = true;
	o->mirror = true;
	o->files_from[0] = '\0';
	/* What was copied stays: at least the plan's skip level, quick with -p, else exists. */
	if (!o->skip) {
		o->skip = h->preserve ? PROTO_OPEN_SKIP_QUICK : PROTO_OPEN_SKIP_EXISTS;
	}
	if (h->filters) {
		r = filter_add_text(&o->filters, h->filters, strlen(h->filters), &line);
		if (r < 0) {
			log_error("the plan's filters, rule %u: %s", line, strerror(-r));
			return EXIT_BAD_PLAN;
		}
	}
	/* The staging directory of split files' parts is no extra to delete (nor counted). */
	r = filter_add_text(&o->filters, "- " PLAN_STAGING_PREFIX "*\n",
			    strlen("- " PLAN_STAGING_PREFIX "*\n"), &line);
	if (r < 0) {
		return EXIT_LOCAL_IO;
	}
	args[0] = src;
	args[1] = (char *)dest;
	return cmd_copy(o, args, 2);
}

/*
 * A source entry's status, its name resolved beneath the base as a push
 * resolves it: no symlink followed on the way (a name through one, in a
 * plan edited by hand, would tell the owner of a file outside the source).
 */
static int source_lstat(const char *base, const char *name, struct stat *ret)
{
	_cleanup_close_ int basefd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int dirfd = -1;
	const char *leaf;
	int r;

	if (basefd < 0) {
		return -errno;
	}
	r = fspath_open_parent(basefd, name, false, &dirfd, &leaf);
	if (r < 0) {
		return r;
	}
	return fstatat(dirfd, leaf, ret, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* ---- finalize's word in the shards' journals ------------------------------------ */

#define MARKS_OPEN_MAX 256 /* shard journals held open at once */

/*
 * Outcomes a shard's journal says are done that finalize found are not: a
 * "failed" line for each in that journal, so that the shard's next run
 * sends it again. A journal is locked while it is held: one whose shard
 * runs now is said and left alone (finalize again after it). Its torn last
 * line, if any, is cut first: a line appended to it would make one garbled
 * line of both.
 */
struct journal_marks {
	const char *plan;
	const struct plan_header *h;
	struct marked {
		FILE *f;
		bool refused, used;
	} * v; /* by shard */
	uint32_t nopen;
};

static int marks_init(struct journal_marks *jm, const char *plan, const struct plan_header *h)
{
	*jm = (struct journal_marks){ .plan = plan, .h = h };
	jm->v = calloc(h->shards, sizeof(*jm->v));
	return jm->v ? 0 : -ENOMEM;
}

static void marks_close_all(struct journal_marks *jm)
{
	for (uint32_t i = 0; jm->v && i < jm->h->shards; i++) {
		FILE *f = jm->v[i].f;

		if (!f) {
			continue;
		}
		if (fflush(f) != 0 || fdatasync(fileno(f)) < 0) {
			log_warning("the journal of shard %" PRIu32 ": %s", i, strerror(errno));
		}
		fclose(f);
		jm->v[i].f = NULL;
	}
	jm->nopen = 0;
}

static void marks_free(struct journal_marks *jm)
{
	marks_close_all(jm);
	free(jm->v);
	jm->v = NULL;
}

/* Where a journal's last whole line ends: its tail read back (a line is at most 64 KiB). */
static int journal_whole_end(int fd, off_t *ret)
{
	_cleanup_free_ char *buf = malloc(NDJSON_MAX_LINE + 2);
	struct stat st;
	off_t from;
	ssize_t n;
	char *nl;

	if (!buf || fstat(fd, &st) < 0) {
		return buf ? -errno : -ENOMEM;
	}
	from = st.st_size > NDJSON_MAX_LINE + 2 ? st.st_size - (NDJSON_MAX_LINE + 2) : 0;
	n = pread(fd, buf, (size_t)(st.st_size - from), from);
	if (n < 0 || n != st.st_size - from) {
		return n < 0 ? -errno : -EIO;
	}
	nl = memrchr(buf, '\n', (size_t)n);
	if (!nl && from > 0) {
		return -EBADMSG; /* more than a line's worth without a newline: not a torn line */
	}
	*ret = nl ? from + (nl - buf) + 1 : 0;
	return 0;
}

/* The journal of a shard, open for finalize's lines; NULL (said why) when it can't be. */
static FILE *marks_journal(struct journal_marks *jm, uint32_t shard)
{
	struct marked *mk = &jm->v[shard];
	char jpath[PATH_MAX], esc[1024];
	off_t good = 0;
	int fd, r = 0;

	if (mk->f || mk->refused) {
		return mk->f;
	}
	if (jm->nopen == MARKS_OPEN_MAX) {
		marks_close_all(jm);
	}
	journal_path(jm->plan, shard, jpath, sizeof(jpath));
	log_escape_short(jpath, esc, sizeof(esc));
	fd = open(jpath, O_RDWR | O_APPEND | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
		r = -errno;
	}
	if (r == 0) {
		r = journal_whole_end(fd, &good);
	}
	if (r == 0 && ftruncate(fd, good) < 0) {
		r = -errno;
	}
	if (r == 0 && !(mk->f = fdopen(fd, "a"))) {
		r = -errno;
	}
	if (r < 0) {
		log_warning(
		    "%s: can't mark outcomes of shard %" PRIu32 " failed (%s): run finalize "
		    "again once the shard is not running",
		    esc, shard, r == -EWOULDBLOCK ? "its run holds the journal" : strerror(-r));
		if (fd >= 0) {
			close(fd);
		}
		mk->refused = true;
		return NULL;
	}
	if (good == 0) {
		journal_put_header(mk->f, jm->h->id, shard, jm->h->shards);
	}
	jm->nopen++;
	mk->used = true;
	return mk->f;
}

/* A failed line for an entry (range < 0) or a range of a split file, in its shard's journal. */
static void marks_put(struct journal_marks *jm, uint32_t shard, const char *name, int64_t range,
		      const char *code)
{
	FILE *f = marks_journal(jm, shard);

	if (!f) {
		return;
	}
	if (range < 0) {
		journal_put_entry(f, name, JOURNAL_FAILED, 0, code);
	} else {
		journal_put_range(f, name, (uint32_t)range, JOURNAL_FAILED, 0, code, NULL);
	}
}

/* The shards marked, as "3, 17, 40" (the first few, then how many more); how many. */
static size_t marks_shards(const struct journal_marks *jm, char *buf, size_t len)
{
	size_t used = 0, n = 0, shown = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < jm->h->shards; i++) {
		if (!jm->v[i].used) {
			continue;
		}
		n++;
		if (shown < 16 && used < len) {
			int w =
			    snprintf(buf + used, len - used, "%s%" PRIu32, shown ? ", " : "", i);

			used += w > 0 ? (size_t)w : 0;
			shown++;
		}
	}
	if (n > shown && used < len) {
		snprintf(buf + used, len - used, " and %zu more", n - shown);
	}
	return n;
}

/* ---- finalize: the destination, not the journals -------------------------------- */

/*
 * A journal is a record a shard keeps of what it did, on a shared file
 * system, as easy to edit or to damage as any file there. A shard's run
 * believes its own (that is what it is for: it leaves out what is done);
 * finalize does not, for files: it asks the destination. A probe (a dry run
 * that looks at the destination) of every regular file, every other name of
 * one and every split file assembled, at the level at which a run of the
 * plan takes a file as done, must find each one there as the source has it
 * (the daemon would skip it). One it would copy is not done, whatever its
 * journal says: it is marked failed there, and finalize exits 15 having
 * changed nothing. Directories and symlinks finalize makes again itself
 * (dirs_entry).
 */
static uint32_t proof_level(const struct plan_header *h)
{
	uint32_t skip = skip_parse(h->skip);

	if (skip & PROTO_OPEN_SKIP_CHECKSUM) {
		return PROTO_OPEN_SKIP_CHECKSUM; /* the content, as a run compared it */
	}
	/* Without -p a copy's mtime is its own: quick would find every file changed. */
	if ((skip & PROTO_OPEN_SKIP_EXISTS) || !h->preserve) {
		return PROTO_OPEN_SKIP_EXISTS;
	}
	return PROTO_OPEN_SKIP_QUICK;
}

struct verifier {
	struct runner ru; /* the list of names pushed, the destination */
	struct merged *m;
	struct journal_writer *j; /* finalize's own: a split file's "assembled" is its word */
	struct journal_marks marks;
	uint64_t files, unproven, gone;
	/* The split file the pass is in: kept by its shards, not found as the source has it. */
	bool kept_unproven;
};

/* The names a probe proves, and which set holds their outcome. */
static struct nameset *proven_set(struct merged *m, const struct plan_entry *e)
{
	if (e->ranges) {
		const struct nameset_slot *f = nameset_get(&m->final, e->name);

		if (f && journal_state_done(f->state)) {
			return &m->final;
		}
		/* Kept by its shards: proven whole, as any file. Else ASSEMBLE checks every part. */
		return nameset_get(&m->kept, e->name) ? &m->kept : NULL;
	}
	return e->ftype == PROTO_FT_REG || e->ftype == PROTO_FT_HARDLINK ? &m->ns : NULL;
}

static int verify_entry(void *ud, const struct plan_entry *e)
{
	struct verifier *v = ud;

	if (v->ru.stop || !proven_set(v->m, e)) {
		return 0;
	}
	batch_add(&v->ru.list, e->name);
	v->files++;
	if (v->ru.list.n >= RUN_BATCH) {
		run_result(&v->ru, run_push(&v->ru, &v->ru.list));
	}
	return 0;
}

static void verify_observe(void *ud, const char *name, const char *action, uint64_t bytes,
			   const char *code, const uint8_t *hash)
{
	struct verifier *v = ud;
	struct stat st;

	(void)bytes;
	(void)hash;
	if (!strcmp(action, "missing") ||
	    (!strcmp(action, "failed") && code && !strcmp(code, "NOT_FOUND") &&
	     source_lstat(v->ru.h->base, name, &st) == -ENOENT)) {
		/* The source no longer has it: nothing to compare (finalize --delete removes it). */
		v->gone++;
	} else if (strcmp(action, "would_skip") != 0) {
		return;
	}
	if (!nameset_mark(&v->m->ns, name, NAMESET_PROVEN) &&
	    !nameset_mark(&v->m->final, name, NAMESET_PROVEN)) {
		nameset_mark(&v->m->kept, name, NAMESET_PROVEN);
	}
}

/* After the probes: each file not proven named, and marked failed where its outcome is kept. */
static int verify_unproven(void *ud, const struct plan_entry *e)
{
	struct verifier *v = ud;
	struct nameset *ns = proven_set(v->m, e);
	const struct nameset_slot *s = ns ? nameset_get(ns, e->name) : NULL;
	char esc[1024];

	if (e->ftype == PLAN_FT_RANGE) {
		/* A file its shards kept, not found as the source has it: its ranges to send. */
		if (v->kept_unproven) {
			marks_put(&v->marks, e->shard, e->name, e->range, "UNVERIFIED");
		}
		return 0;
	}
	v->kept_unproven = false;
	if (!ns || (s && (s->marks & NAMESET_PROVEN))) {
		return 0;
	}
	if (v->unproven++ < 100 || v->ru.o->verbose > 0) {
		log_error("%s: not at the destination as the source has it (%s), though its "
			  "journal says done",
			  log_escape_short(e->name, esc, sizeof(esc)),
			  skip_name(proof_level(v->m->h)));
	}
	if (ns == &v->m->kept) {
		v->kept_unproven = true;
	} else if (e->ranges) {
		journal_put_entry(v->j->f, e->name, JOURNAL_FAILED, 0, "UNVERIFIED");
	} else {
		marks_put(&v->marks, e->shard, e->name, -1, "UNVERIFIED");
	}
	return 0;
}

/*
 * The probes, then the verdict. The options are the plan's, less what a
 * probe has no use for; it prints nothing of its own (finalize says what
 * it found). 0 when every file is proven, EXIT_DIFFERENT when some are not,
 * or the exit code of a probe that could not be made.
 */
static int verify_all(struct merged *m, struct client_opts *o, struct journal_writer *j,
		      const char *plan, const char *jpath, const char *dest)
{
	struct verifier v = { .ru = { .o = o, .h = m->h }, .m = m, .j = j };
	int verbose = o->verbose, progress = o->progress, rc;
	bool json = o->json;
	char shards[256];
	size_t nshards;

	snprintf(v.ru.dest, sizeof(v.ru.dest), "%s", dest);
	snprintf(v.ru.jpath, sizeof(v.ru.jpath), "%s", jpath);
	if (batch_open(&v.ru.list, v.ru.jpath, "verify") < 0 ||
	    marks_init(&v.marks, plan, m->h) < 0) {
		rc = EXIT_LOCAL_IO;
		goto out;
	}
	o->dry_run = true;
	o->skip = proof_level(m->h);
	o->hardlinks = o->xattrs = o->acls = o->owner = false;
	o->delta = o->assume_zero = o->partial = false;
	o->have_max_delete = false; /* finalize --delete's, for its mirror pass after */
	o->verbose = -1;
	o->json = false;
	o->progress = 0;
	copy_set_observer(verify_observe, &v);
	rc = plan_pass(m->r, verify_entry, &v);
	if (rc == 0 && !v.ru.stop && v.ru.list.n > 0) {
		run_result(&v.ru, run_push(&v.ru, &v.ru.list));
	}
	copy_set_observer(NULL, NULL);
	o->verbose = verbose;
	o->json = json;
	o->progress = progress;
	apply_plan_options(o, m->h);
	/* A probe's 9 is an entry it could not look at: not proven, said below. */
	if (rc == 0 && v.ru.rc != EXIT_PARTIAL) {
		rc = v.ru.rc;
	}
	if (rc == 0) {
		rc = plan_pass(m->r, verify_unproven, &v);
	}
	marks_close_all(&v.marks);
	if (rc == 0 && v.unproven > 0) {
		nshards = marks_shards(&v.marks, shards, sizeof(shards));
		if (nshards == 0) {
			/* Split files (their word is finalize's) or shards running now: said above. */
			snprintf(shards, sizeof(shards), "that hold them");
		}
		log_error("%" PRIu64 " of %" PRIu64
			  " files are not at the destination as the source has them, though "
			  "their journals say done: marked failed in the journal%s of shard%s %s; "
			  "run %s again, then finalize",
			  v.unproven, v.files, nshards == 1 ? "" : "s", nshards == 1 ? "" : "s",
			  shards, nshards == 1 ? "it" : "them");
		rc = EXIT_DIFFERENT;
	} else if (rc == 0 && o->verbose > 0) {
		fprintf(stderr, "finalize: %" PRIu64 " files found at the destination (%s)%s\n",
			v.files - v.gone, skip_name(proof_level(m->h)),
			v.gone ? ", some gone from the source since" : "");
	}
out:
	if (v.ru.list.f) {
		fclose(v.ru.list.f);
		unlink(v.ru.list.path);
	}
	marks_free(&v.marks);
	return rc;
}

/* ---- split files ---------------------------------------------------------------- */

/* finalize: each split file whose ranges are all done, assembled by the daemon (ASSEMBLE). */
struct assembler {
	struct merged *m;
	struct client_opts *o;
	struct journal_writer *j;
	struct remote rem;
	struct daemon_conn s;
	bool open;
	struct msg req; /* the file being gathered: u.assemble, parts for PLAN_MAX_RANGES */
	char name[PROTO_MAX_PATH + 1], staging[64];
	uint64_t n;	    /* its entry number (the parts are named N.R) */
	uint32_t *shard_of; /* each range's shard (PLAN_MAX_RANGES) */
	const char *plan;
	uint32_t ranges;
	bool active; /* gathering its ranges */
	uint64_t done, failed, kept;
	struct batch keep; /* split files kept by their shards, for keep_push */
	int rc;
};

static int assembler_connect(struct assembler *as)
{
	int rc;

	if (as->open) {
		return 0;
	}
	as->s = (struct daemon_conn){ .o = as->o, .rem = &as->rem };
	rc = daemon_conn_open_waiting(&as->s, NULL, NULL, NULL);
	if (rc != 0) {
		daemon_conn_close(&as->s, false);
		return rc;
	}
	if (!(as->s.hello.caps & PROTO_CAP_ASSEMBLE)) {
		log_error(
		    "%s: the daemon is too old for split files (it can't assemble their parts): "
		    "upgrade it, or plan without --split-size",
		    as->rem.host);
		daemon_conn_close(&as->s, true);
		return EXIT_VERSION;
	}
	as->open = true;
	return 0;
}

/*
 * The parts of a file that could not be assembled are no longer done: each
 * range marked failed in its shard's journal, so that a run of the shard
 * sends it again.
 */
static void unmark_ranges(struct assembler *as)
{
	const struct msg_assemble *a = &as->req.u.assemble;
	struct journal_marks jm;

	if (marks_init(&jm, as->plan, as->m->h) < 0) {
		log_warning("%s: out of memory marking its ranges to send again", a->name);
		return;
	}
	for (uint32_t i = 0; i < a->count; i++) {
		marks_put(&jm, as->shard_of[i], a->name, i, "ASSEMBLY");
	}
	marks_free(&jm);
}

/* One ASSEMBLE and its answer; the outcome journaled. 0, or an exit code for the run. */
static int assemble_one(struct assembler *as)
{
	struct msg_assemble *a = &as->req.u.assemble;
	char esc[1024], text[4 * PROTO_MAX_TEXT + 1];
	struct msg reply;
	/* Long enough to read a big file twice at 100 MB/s on a slow disk. */
	int timeout_ms = (int)MIN((uint64_t)INT32_MAX, 60000 + a->size / 50000);
	int rc = assembler_connect(as), r;

	if (rc != 0) {
		return rc;
	}
	log_escape_short(a->name, esc, sizeof(esc));
	if (chan_send(&as->s.chan, &as->req) < 0) {
		log_error("%s: control channel write failed", as->rem.host);
		daemon_conn_close(&as->s, false);
		as->open = false;
		return EXIT_CONNECT;
	}
	r = chan_recv(&as->s.chan, &reply, timeout_ms);
	if (r < 0) {
		log_error("%s: assembling %s: control channel: %s", as->rem.host, esc,
			  strerror(-r));
		daemon_conn_close(&as->s, false);
		as->open = false;
		return EXIT_TRANSPORT;
	}
	if (reply.type == MSG_ASSEMBLED && reply.u.assembled.size == a->size) {
		journal_put_entry(as->j->f, a->name, JOURNAL_COPIED, a->size, NULL);
		journal_sync(as->j);
		as->done++;
		if (as->o->verbose > 0) {
			fprintf(stderr, "assembled %s: %u parts, %" PRIu64 " bytes\n", esc,
				a->count, a->size);
		}
		msg_clear(&reply);
		return 0;
	}
	if (reply.type == MSG_ERROR) {
		log_error("%s: %s not assembled: %s", as->rem.host, esc,
			  log_escape(reply.u.error.text, text, sizeof(text)));
		rc = exit_for_perr(reply.u.error.code);
		journal_put_entry(as->j->f, a->name, JOURNAL_FAILED, 0,
				  proto_err_name(reply.u.error.code));
		if (reply.u.error.code == PERR_ASSEMBLY) {
			unmark_ranges(as);
			log_error("%s: its ranges are marked to send again: run their shards, then "
				  "finalize",
				  esc);
		}
	} else {
		log_error("%s: assembling %s: unexpected %s", as->rem.host, esc,
			  proto_type_name(reply.type));
		rc = EXIT_PROTOCOL;
	}
	journal_sync(as->j);
	as->failed++;
	msg_clear(&reply);
	/* After an ERROR the daemon ends the session: a new one for the next file. */
	daemon_conn_close(&as->s, false);
	as->open = false;
	return rc;
}

/*
 * A split file's entry: the ASSEMBLE request begun, unless it is done, or
 * kept by its shards (listed for keep_push instead), or lost by the source.
 */
static void assemble_begin(struct assembler *as, const struct plan_entry *e)
{
	struct msg_assemble *a = &as->req.u.assemble;
	const struct plan_header *h = as->m->h;
	const struct nameset_slot *f = nameset_get(&as->m->final, e->name);
	struct stat st;
	char esc[1024];
	int r;

	as->active = !(f && journal_state_done(f->state));
	if (as->active && nameset_get(&as->m->kept, e->name)) {
		as->active = false;
		batch_add(&as->keep, e->name);
	}
	if (!as->active || split_kind(&as->m->ns, e, NULL) == SPLIT_VANISHED) {
		as->active = false;
		return;
	}
	as->ranges = e->ranges;
	snprintf(as->name, sizeof(as->name), "%s", e->name);
	as->n = e->n;
	a->name = as->name;
	a->size = e->size;
	a->count = 0;
	/* Without -p, as a push without it: the mode less group and other write, now. */
	a->mode = h->preserve ? e->mode : e->mode & 0755;
	a->mtime_sec = h->preserve ? e->mtime : (int64_t)time(NULL);
	a->mtime_nsec = h->preserve ? e->mtime_ns : 0;
	a->flags = 0;
	if (!h->owner) {
		return;
	}
	/* The plan has no owners: the source's, as a push would send them. */
	r = source_lstat(h->base, e->name, &st);
	if (r < 0) {
		log_error("%s: its owner: %s (not assembled)",
			  log_escape_short(e->name, esc, sizeof(esc)), strerror(-r));
		as->active = false;
		as->failed++;
		as->rc = as->rc ? as->rc : EXIT_LOCAL_IO;
		return;
	}
	a->flags = PROTO_ASM_OWNER;
	a->uid = st.st_uid;
	a->gid = st.st_gid;
}

static int assemble_entry(void *ud, const struct plan_entry *e)
{
	struct assembler *as = ud;
	struct msg_assemble *a = &as->req.u.assemble;

	if (e->ranges) {
		assemble_begin(as, e);
		return 0;
	}
	if (e->ftype != PLAN_FT_RANGE || !as->active) {
		return 0;
	}
	{
		struct proto_part *p = &a->parts[a->count++];
		const uint8_t *hash = rangeset_get(&as->m->digests, e->name, e->range);

		snprintf(p->name, sizeof(p->name), "%" PRIu64 ".%" PRIu32, as->n, e->range);
		as->shard_of[a->count - 1] = e->shard;
		p->offset = e->offset;
		p->len = e->size;
		if (!hash) {
			log_error("%s: range %" PRIu32 " has no digest in its journal", e->name,
				  e->range);
			as->active = false;
			as->failed++;
			as->rc = as->rc ? as->rc : EXIT_BAD_PLAN;
			return 0;
		}
		memcpy(p->hash, hash, PROTO_HASH_LEN);
	}
	if (a->count == as->ranges) {
		int rc;

		as->active = false;
		rc = assemble_one(as);
		as->rc = as->rc ? as->rc : rc;
		/* No daemon to ask, or one that can't: the other files would fare the same. */
		if (rc == EXIT_VERSION || rc == EXIT_CONNECT || rc == EXIT_AUTH ||
		    rc == EXIT_CONFIG) {
			return rc;
		}
	}
	return 0;
}

/*
 * The split files whose shards kept every range (the destination had them
 * unchanged), already proven by verify_all: pushed whole at the keep level,
 * so that the daemon keeps their data and brings their metadata in line as
 * for any file a re-run skips. One the source changed since is sent whole
 * (verified as any push). The outcome in finalize's journal.
 */
static int keep_push(struct assembler *as, const char *dest)
{
	struct runner ru = { .o = as->o, .h = as->m->h };
	int rc;

	snprintf(ru.dest, sizeof(ru.dest), "%s", dest);
	as->kept += as->keep.n;
	as->o->skip = split_keep_level(as->m->h);
	copy_set_observer(journal_observe, as->j);
	rc = run_push(&ru, &as->keep);
	copy_set_observer(NULL, NULL);
	apply_plan_options(as->o, as->m->h);
	journal_sync(as->j);
	return rc;
}

/* Every split file whose ranges are done and that is not assembled yet. 0 or an exit code. */
static int assemble_all(struct merged *m, struct client_opts *o, struct journal_writer *j,
			const char *plan, const char *dest)
{
	struct assembler as = { .m = m, .o = o, .j = j, .req.type = MSG_ASSEMBLE, .plan = plan };
	_cleanup_free_ uint32_t *shard_of = calloc(PLAN_MAX_RANGES, sizeof(uint32_t));
	char jpath[JOURNAL_PATH_MAX];
	int rc;

	if (parse_remote(dest, &as.rem) != 1) {
		return EXIT_USAGE;
	}
	as.shard_of = shard_of;
	as.req.u.assemble.parts = calloc(PLAN_MAX_RANGES, sizeof(struct proto_part));
	if (!as.req.u.assemble.parts || !shard_of ||
	    journal_path(plan, UINT32_MAX, jpath, sizeof(jpath)) < 0 ||
	    batch_open(&as.keep, jpath, "keep") < 0) {
		free(as.req.u.assemble.parts);
		return EXIT_LOCAL_IO;
	}
	plan_staging_dir(m->h, as.staging);
	as.req.u.assemble.path = (char *)m->h->path;
	as.req.u.assemble.staging = as.staging;
	rc = plan_pass(m->r, assemble_entry, &as);
	if (as.open) {
		daemon_conn_close(&as.s, true);
	}
	free(as.req.u.assemble.parts);
	if (rc == 0 && as.keep.n > 0) {
		rc = keep_push(&as, dest);
	}
	fclose(as.keep.f);
	unlink(as.keep.path);
	if (o->verbose >= 0 && !o->json && (as.done || as.failed || as.kept)) {
		fprintf(stderr,
			"split files: %" PRIu64 " assembled, %" PRIu64 " kept (unchanged), %" PRIu64
			" failed\n",
			as.done, as.kept, as.failed);
	}
	return rc ? rc : as.rc;
}

/* A split file some of whose ranges were kept, others sent: the kept ones to send again. */
struct mixed_marks {
	struct merged *m;
	struct journal_marks jm;
	bool in; /* the pass is in the ranges of such a file */
};

static int mixed_entry(void *ud, const struct plan_entry *e)
{
	struct mixed_marks *mm = ud;
	const struct nameset_slot *s;
	char esc[1024];

	if (e->ranges) {
		s = nameset_get(&mm->m->final, e->name);
		mm->in = !(s && journal_state_done(s->state)) &&
			 split_kind(&mm->m->ns, e, NULL) == SPLIT_MIXED;
		if (mm->in) {
			log_error(
			    "%s: changed during the migration (some of its ranges were sent, "
			    "others kept as unchanged): the kept ones are marked to send again",
			    log_escape_short(e->name, esc, sizeof(esc)));
		}
	} else if (e->ftype == PLAN_FT_RANGE && mm->in) {
		s = nameset_get_range(&mm->m->ns, e->name, e->range);
		if (s && s->state == JOURNAL_SKIPPED) {
			marks_put(&mm->jm, e->shard, e->name, e->range, "CHANGED");
		}
	}
	return 0;
}

static int finalize_mixed(struct merged *m, const char *plan)
{
	struct mixed_marks mm = { .m = m };
	char shards[256];
	int rc;

	if (marks_init(&mm.jm, plan, m->h) < 0) {
		return EXIT_LOCAL_IO;
	}
	rc = plan_pass(m->r, mixed_entry, &mm);
	marks_close_all(&mm.jm);
	if (rc == 0) {
		if (marks_shards(&mm.jm, shards, sizeof(shards)) == 0) {
			snprintf(shards, sizeof(shards), "that hold them (running now)");
		}
		log_error("not finished: %" PRIu64 " split files changed during the migration: run "
			  "shards %s again, then finalize",
			  m->split_mixed, shards);
		rc = EXIT_PARTIAL;
	}
	marks_free(&mm.jm);
	return rc;
}

/*
 * Whether every entry has its outcome: done, or a split file ready to
 * assemble or to keep, or a name the source lost that may stay lost (with
 * --delete, which removes its copy, or --missing-ok, given to finalize,
 * to the plan or to the runs). 0, or EXIT_PARTIAL said why.
 */
static int finalize_ready(struct merged *m, const struct client_opts *o, const char *plan,
			  bool mirror)
{
	uint64_t pending = m->by_state[0] - m->split_ready;

	if (m->split_mixed > 0) {
		return finalize_mixed(m, plan);
	}
	if (m->vanished > m->vanished_accepted && !mirror && !o->missing_ok && !m->h->missing_ok &&
	    pending == 0 && m->by_state[JOURNAL_FAILED] == 0) {
		log_error("%" PRIu64 " entries vanished from the source since the plan (rdmacp "
			  "report lists them): finalize --delete removes their copies, "
			  "--missing-ok leaves the destination as it is; or make a new plan",
			  m->vanished);
		return EXIT_PARTIAL;
	}
	if (merged_done(m) + m->split_ready + m->vanished != m->h->entries) {
		merged_summary(m, o, false);
		log_error("not finished: %" PRIu64 " of %" PRIu64
			  " entries have no outcome, %" PRIu64
			  " failed: run the shards above again (their journals keep what is done), "
			  "then finalize",
			  pending, m->h->entries, m->by_state[JOURNAL_FAILED]);
		return EXIT_PARTIAL;
	}
	return 0;
}

static int first_entry(void *ud, const struct plan_entry *e)
{
	char *top = ud;

	if (!top[0]) {
		snprintf(top, PROTO_MAX_PATH + 1, "%s", e->name);
	}
	return 0;
}

int cmd_finalize(struct client_opts *o, char **args, int nargs)
{
	struct merged m = { .o = o };
	struct runner ru = { .o = o };
	struct journal_writer j = { 0 };
	struct nameset ignored = { 0 };
	bool mirror = o->mirror, have_max = o->have_max_delete;
	uint64_t max_delete = o->max_delete;
	double t0 = now_seconds();
	char top[PROTO_MAX_PATH + 1] = "";
	int rc;

	if (nargs != 1) {
		log_error("usage: rdmacp finalize PLAN [--delete [--max-delete N]]");
		return EXIT_USAGE;
	}
	if (have_max && !mirror) {
		log_error("--max-delete needs --delete");
		return EXIT_USAGE;
	}
	rc = merged_load(&m, args[0]);
	if (rc == 0) {
		rc = plan_pass(m.r, merged_entry, &m);
	}
	if (rc == 0) {
		rc = merged_foreign(&m, args[0]);
	}
	if (rc != 0) {
		merged_free(&m);
		return rc;
	}
	rc = finalize_ready(&m, o, args[0], mirror);
	if (rc != 0) {
		merged_free(&m);
		return rc;
	}
	if (mirror && (!m.h->recursive || m.h->files_from)) {
		log_error("finalize --delete needs a plan of one tree (-r, without --files-from)");
		merged_free(&m);
		return EXIT_USAGE;
	}
	/* All shards are done: one finalize at a time, in its own journal. */
	journal_path(args[0], UINT32_MAX, ru.jpath, sizeof(ru.jpath));
	ru.h = m.h;
	rc = journal_begin(ru.jpath, "finalize", m.h, -1, &ignored, &j);
	nameset_free(&ignored);
	if (rc != 0) {
		merged_free(&m);
		return rc;
	}
	shard_dest(m.h, 0, ru.dest, sizeof(ru.dest));
	apply_plan_options(o, m.h);
	/* The journals' word checked at the destination first: nothing changes unless it holds. */
	rc = verify_all(&m, o, &j, args[0], ru.jpath, ru.dest);
	/* Then the split files: assembling them changes their directories' times. */
	if (rc == 0 && m.split_ready > 0) {
		rc = assemble_all(&m, o, &j, args[0], ru.dest);
	}
	copy_set_observer(journal_observe, &j);
	if (rc != 0) {
		/* Nothing more: a failed assembly is said, its parts kept for another try. */
	} else if (mirror) {
		o->max_delete = max_delete;
		o->have_max_delete = have_max;
		rc = plan_pass(m.r, first_entry, top);
		if (rc == 0) {
			rc = mirror_push(o, m.h, ru.dest, top);
		}
	} else {
		if (batch_open(&ru.list, ru.jpath, "list") < 0) {
			rc = EXIT_LOCAL_IO;
		}
		if (rc == 0) {
			rc = plan_pass(m.r, dirs_entry, &ru);
		}
		if (rc == 0 && !ru.stop && ru.list.n > 0) {
			run_result(&ru, run_push(&ru, &ru.list));
		}
		rc = rc ? rc : ru.rc;
		if (ru.list.f) {
			fclose(ru.list.f);
			unlink(ru.list.path);
		}
	}
	copy_set_observer(NULL, NULL);
	if (journal_end(&j, rc, now_seconds() - t0) < 0 && rc == 0) {
		rc = EXIT_LOCAL_IO;
	}
	if (rc == 0 && o->verbose >= 0) {
		merged_free(&m);
		m = (struct merged){ .o = o };
		rc = merged_load(&m, args[0]);
		if (rc == 0) {
			rc = plan_pass(m.r, merged_entry, &m);
		}
		if (rc == 0) {
			merged_summary(&m, o, o->json);
		}
	}
	merged_free(&m);
	return rc;
}
