/* SPDX-License-Identifier: MIT */
/*
 * The pushes a migration makes through cmd_copy (migrate.h): the plan's
 * options for them and its skip level by name, the list files of names
 * they take, and a source entry's status resolved as a push resolves it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "exitcodes.h"
#include "fspath.h"
#include "macro.h"
#include "migrate.h"
#include "plan.h"

const char *skip_name(uint32_t skip)
{
	return skip & PROTO_OPEN_SKIP_CHECKSUM ? "checksum"
	       : skip & PROTO_OPEN_SKIP_QUICK  ? "quick"
	       : skip & PROTO_OPEN_SKIP_EXISTS ? "exists"
					       : "none";
}

uint32_t skip_parse(const char *s)
{
	return !strcmp(s, "checksum") ? PROTO_OPEN_SKIP_CHECKSUM
	       : !strcmp(s, "quick")  ? PROTO_OPEN_SKIP_QUICK
	       : !strcmp(s, "exists") ? PROTO_OPEN_SKIP_EXISTS
				      : 0;
}

/*
 * The level at which a split file the destination has already is left as it
 * is, as a whole file of the plan would be: the plan's skip level; under
 * --delta without one, the content (a delta would send none of it). 0: its
 * ranges always go.
 */
uint32_t split_keep_level(const struct plan_header *h)
{
	uint32_t skip = skip_parse(h->skip);

	return skip ? skip : h->delta ? PROTO_OPEN_SKIP_CHECKSUM : 0;
}

/* The plan's options for the pushes of a shard or of finalize. */
void apply_plan_options(struct client_opts *o, const struct plan_header *h)
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

int batch_open(struct batch *b, const char *jpath, const char *what)
{
	snprintf(b->path, sizeof(b->path), "%s.%s", jpath, what);
	b->f = fopen(b->path, "we");
	b->n = 0;
	return b->f ? 0 : -errno;
}

void batch_add(struct batch *b, const char *name)
{
	fputs(name, b->f);
	fputc('\0', b->f);
	b->n++;
}

int batch_append(struct batch *b, struct batch *from)
{
	_cleanup_fclose_ FILE *in = NULL;
	char buf[65536];
	size_t got;

	if (fflush(from->f) != 0 || fseek(from->f, 0, SEEK_SET) < 0) {
		return -errno;
	}
	/* The list file is open for writing only: read back through a stream of its own. */
	in = fopen(from->path, "re");
	if (!in) {
		return -errno;
	}
	while ((got = fread(buf, 1, sizeof(buf), in)) > 0) {
		if (fwrite(buf, 1, got, b->f) != got) {
			return -EIO;
		}
	}
	if (ferror(in) || ftruncate(fileno(from->f), 0) < 0) {
		return -EIO;
	}
	b->n += from->n;
	from->n = 0;
	return 0;
}

/*
 * A source entry's status, its name resolved beneath the base as a push
 * resolves it: no symlink followed on the way (a name through one, in a
 * plan edited by hand, would tell the owner of a file outside the source).
 */
int source_lstat(const char *base, const char *name, struct stat *ret)
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
