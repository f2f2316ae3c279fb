/* SPDX-License-Identifier: MIT */
/*
 * rdmacp plan (migrate.h): the source walked once, each entry given to the
 * shard that weighs least (a file with other names under -H to its first
 * name's, a file over --split-size in ranges of their own), the entries
 * written to a scratch file, then the plan: its header with their digest
 * first, zstd-compressed when asked, renamed into place.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "exitcodes.h"
#include "fileslist.h"
#include "fspath.h"
#include "log.h"
#include "macro.h"
#include "migrate.h"
#include "plan.h"
#include "walk.h"
#include "zfile.h"

static void xxh3_state_freep(XXH3_state_t **p)
{
	if (*p) {
		XXH3_freeState(*p);
	}
}

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

/* --files-from: each name listed a root of its own beneath the source. 0 or an exit code. */
static int plan_roots_listed(struct planner *p, struct walk *w, const char *src,
			     const char *srcreal, int *ret_basefd)
{
	struct client_opts *o = p->o;
	struct files_list fl = { 0 };
	size_t entry;
	char esc[1024];
	int basefd, rc = 0, r;

	basefd = *ret_basefd = open(srcreal, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = basefd < 0 ? -errno : files_list_read(o->files_from, o->from0, &fl, &entry);
	if (r == 0) {
		r = files_list_prune(&fl, o->recursive);
	}
	if (r < 0) {
		log_error("--files-from %s with %s: %s",
			  log_escape_short(o->files_from, esc, sizeof(esc)), src, strerror(-r));
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
				  log_escape_short(fl.names[i], esc, sizeof(esc)), strerror(-r));
			p->failures++;
		}
	}
	files_list_free(&fl);
	return rc;
}

/* The source as one root, named by its last component. 0 or an exit code. */
static int plan_root(struct planner *p, struct walk *w, const char *src, const char *srcreal)
{
	char buf[PATH_MAX], esc[1024];
	const char *top;
	int r;

	snprintf(buf, sizeof(buf), "%s", srcreal);
	top = basename(buf);
	r = walk_add_root(w, AT_FDCWD, srcreal, top, p->o->recursive);
	if (r < 0) {
		log_error("%s: %s", log_escape_short(src, esc, sizeof(esc)),
			  r == -EISDIR ? "is a directory (use -r)" : strerror(-r));
		return r == -EISDIR ? EXIT_USAGE : EXIT_LOCAL_IO;
	}
	return 0;
}

/* The walk: each root, its entries through plan_one. 0 or an exit code. */
static int plan_walk(struct planner *p, const char *src, const char *srcreal)
{
	struct client_opts *o = p->o;
	struct walk *w = NULL;
	const struct engine_src *e;
	char esc[1024];
	int basefd = -1, rc, r;

	r = walk_new(plan_warning, NULL, &w);
	if (r < 0) {
		return EXIT_LOCAL_IO;
	}
	walk_set_filter(w, filter_empty(&o->filters) ? NULL : &o->filters);
	if (o->files_from[0]) {
		rc = plan_roots_listed(p, w, src, srcreal, &basefd);
	} else {
		rc = plan_root(p, w, src, srcreal);
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

/*
 * --every-host: each shard a fan-out to all the hosts, so what a fan-out
 * cannot do is refused here, not in every run. 0 or EXIT_USAGE.
 */
static int plan_check_every_host(const struct client_opts *o, const struct remote *rem)
{
	uint32_t n = 1;

	for (const char *c = rem->host; *c; c++) {
		n += *c == ',';
	}
	if (n > PLAN_MAX_EVERY_HOST) {
		log_error("--every-host: %" PRIu32 " hosts, at most %d", n, PLAN_MAX_EVERY_HOST);
		return EXIT_USAGE;
	}
	return 0;
}

/*
 * The operands and what goes with them: the destination well formed, the
 * source resolved (ret_srcreal), standard input wanted once, the
 * directories above -o made. 0 or an exit code (said why).
 */
static int plan_check_args(const struct client_opts *o, char **args, int nargs,
			   struct remote *ret_rem, char ret_srcreal[PATH_MAX])
{
	char esc[1024];
	int rc;

	if (nargs != 2 || !o->plan_out[0]) {
		log_error("usage: rdmacp plan SRC HOST[,HOST...]:MODULE/PATH -o PLAN [--shards N] "
			  "[-r] [-a] [-H] [--skip L] [--every-host] [filters] [--files-from FILE]");
		return EXIT_USAGE;
	}
	rc = plan_check_dest(args[1], ret_rem);
	if (rc == 0 && o->every_host) {
		rc = plan_check_every_host(o, ret_rem);
	}
	if (rc != 0) {
		return rc;
	}
	if (!realpath(args[0], ret_srcreal)) {
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
	return 0;
}

/* The plan's header from the options and the operands; its counts come with the walk. */
static int plan_header_init(struct planner *p, const char *src, const char *srcreal,
			    const struct remote *rem)
{
	const struct client_opts *o = p->o;

	p->h.shards = o->shards ? o->shards : 1;
	if (plan_new_id(p->h.id) < 0) {
		return EXIT_LOCAL_IO;
	}
	snprintf(p->h.source, sizeof(p->h.source), "%s", src);
	if (o->files_from[0]) {
		snprintf(p->h.base, sizeof(p->h.base), "%s", srcreal);
	} else {
		char buf[PATH_MAX];

		snprintf(buf, sizeof(buf), "%s", srcreal);
		snprintf(p->h.base, sizeof(p->h.base), "%s", dirname(buf));
	}
	snprintf(p->h.hosts, sizeof(p->h.hosts), "%s", rem->host);
	snprintf(p->h.path, sizeof(p->h.path), "%s", rem->path);
	p->h.port = o->port;
	p->h.recursive = o->recursive;
	p->h.preserve = o->preserve;
	p->h.owner = o->owner;
	p->h.hardlinks = o->hardlinks;
	p->h.xattrs = o->xattrs;
	p->h.acls = o->acls;
	p->h.files_from = o->files_from[0] != '\0';
	p->h.delta = o->delta;
	p->h.assume_zero = o->assume_zero;
	p->h.missing_ok = o->missing_ok;
	p->h.every_host = o->every_host;
	p->h.split = o->split_size;
	snprintf(p->h.skip, sizeof(p->h.skip), "%s", skip_name(o->skip));
	if (filters_text(&o->filters, &p->h.filters) < 0) {
		log_error("a filter with a newline in it can't be kept in a plan");
		return EXIT_USAGE;
	}
	return 0;
}

/* The counts by shard, the balance, and the scratch file the entry lines wait in. */
static int planner_init(struct planner *p)
{
	_cleanup_free_ char *tmpl = NULL;
	char esc[1024];
	int fd;

	p->shard_entries = calloc(p->h.shards, sizeof(uint64_t));
	p->shard_bytes = calloc(p->h.shards, sizeof(uint64_t));
	if (!p->shard_entries || !p->shard_bytes || plan_balancer_init(&p->bal, p->h.shards) < 0 ||
	    asprintf(&tmpl, "%s.entries.XXXXXX", p->o->plan_out) < 0) {
		tmpl = NULL;
		return EXIT_LOCAL_IO;
	}
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd < 0 || !(p->entries = fdopen(fd, "w+"))) {
		log_error("%s: %s", log_escape_short(p->o->plan_out, esc, sizeof(esc)),
			  strerror(errno));
		if (fd >= 0) {
			close(fd);
		}
		return EXIT_LOCAL_IO;
	}
	unlink(tmpl); /* a scratch file: gone with the process, however it ends */
	return 0;
}

static void planner_free(struct planner *p)
{
	if (p->entries) {
		fclose(p->entries);
	}
	free(p->h.filters);
	free(p->shard_entries);
	free(p->shard_bytes);
	plan_balancer_free(&p->bal);
	inode_map_free(&p->links);
}

/* What was planned: --json an event, else a line (and with -v one a shard). */
static void plan_said(const struct planner *p)
{
	const struct client_opts *o = p->o;
	char esc[1024];

	if (o->json) {
		printf("{\"event\":\"planned\",\"id\":\"%s\",\"entries\":%" PRIu64
		       ",\"bytes\":%" PRIu64 ",\"shards\":%" PRIu32 ",\"failed\":%" PRIu64
		       ",\"split\":%" PRIu64 "}\n",
		       p->h.id, p->h.entries, p->h.bytes, p->h.shards, p->failures, p->split_files);
	} else if (o->verbose >= 0) {
		fprintf(stderr,
			"plan %s: %" PRIu64 " entries, %" PRIu64 " bytes in %" PRIu32
			" shards (id %s)",
			log_escape_short(o->plan_out, esc, sizeof(esc)), p->h.entries, p->h.bytes,
			p->h.shards, p->h.id);
		if (p->split_files) {
			fprintf(stderr, ", %" PRIu64 " files split in ranges", p->split_files);
		}
		fputc('\n', stderr);
	}
	for (uint32_t i = 0; o->verbose > 0 && i < p->h.shards; i++) {
		fprintf(stderr, "  shard %" PRIu32 ": %" PRIu64 " entries, %" PRIu64 " bytes\n", i,
			p->shard_entries[i], p->shard_bytes[i]);
	}
}

int cmd_plan(struct client_opts *o, char **args, int nargs)
{
	struct planner p = { .o = o };
	struct remote rem;
	char srcreal[PATH_MAX], esc[1024];
	int rc, r;

	rc = plan_check_args(o, args, nargs, &rem, srcreal);
	if (rc != 0) {
		return rc;
	}
	rc = plan_header_init(&p, args[0], srcreal, &rem);
	if (rc == 0) {
		rc = planner_init(&p);
	}
	if (rc == 0) {
		rc = plan_walk(&p, args[0], srcreal);
	}
	if (rc == 0) {
		r = plan_write(&p, o->plan_out, plan_compressed(o));
		if (r < 0) {
			log_error("%s: %s", log_escape_short(o->plan_out, esc, sizeof(esc)),
				  strerror(-r));
			rc = EXIT_LOCAL_IO;
		}
	}
	if (rc == 0) {
		plan_said(&p);
		/* What could not be planned is not in it: said, and not a success. */
		rc = p.failures ? EXIT_PARTIAL : EXIT_OK;
	}
	planner_free(&p);
	return rc;
}
