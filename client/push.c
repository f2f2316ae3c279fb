/* SPDX-License-Identifier: MIT */
/*
 * A push (transfer.h): local operands, a --files-from list or the entries
 * rdmacp run gives, walked and sent to one remote destination; the daemon
 * receives.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exitcodes.h"
#include "fanout.h"
#include "fileslist.h"
#include "fspath.h"
#include "hello.h"
#include "log.h"
#include "transfer.h"
#include "walk.h"

/* rdmacp run: where push tells each entry's outcome (copy_set_observer). */
static void (*observe_fn)(void *ud, const char *name, const char *action, uint64_t bytes,
			  const char *code, const uint8_t *hash);
static void *observe_ud;

void copy_set_observer(void (*fn)(void *ud, const char *name, const char *action, uint64_t bytes,
				  const char *code, const uint8_t *hash),
		       void *ud)
{
	observe_fn = fn;
	observe_ud = ud;
	/*
	 * Its journal keeps each file's digest for ASSEMBLE, which the
	 * destination checks against the XXH3-128 of the part's bytes: those
	 * pushes are checked by that stream, never by a chunk tree.
	 */
	hello_withhold(PROTO_CAP_FILE_TREE, fn != NULL);
}

/* rdmacp run: a push of these entries instead of its operands (copy_set_sources). */
static struct {
	const struct engine_src *v;
	size_t n, next;
} given;

void copy_set_sources(const struct engine_src *v, size_t n)
{
	given.v = v;
	given.n = n;
	given.next = 0;
}

static int given_next(void *ud, const struct engine_src **ret, char *why, size_t whylen)
{
	(void)ud, (void)why, (void)whylen;
	if (given.next == given.n) {
		return 0;
	}
	*ret = &given.v[given.next++];
	return 1;
}

/* Keep fd open with the list: its entries are relative to it. */
static int src_list_hold(struct src_list *l, int fd)
{
	int *v = reallocarray(l->held, l->nheld + 1, sizeof(*v));

	if (!v) {
		return -ENOMEM;
	}
	l->held = v;
	l->held[l->nheld++] = fd;
	return 0;
}

/* One --files-from name that can't be sent: a failure, or with --missing-ok a note. */
static void files_from_failed(struct xfer *x, const char *srcdir, const char *name, int r,
			      uint64_t *local_failures)
{
	_cleanup_free_ char *path = NULL;
	char esc[1024];

	if ((r == -ENOENT || r == -ENOTDIR) && x->o->missing_ok) {
		output_missing(&x->out, name);
		if (x->o->verbose > 0 && !x->out.observe) {
			log_info("%s: missing (--missing-ok)",
				 log_escape_short(name, esc, sizeof(esc)));
		}
		return;
	}
	if (asprintf(&path, "%s/%s", srcdir, name) < 0) {
		path = NULL;
	}
	output_local_error(&x->out, name, 0, path ? path : name,
			   r == -ENOENT || r == -ENOTDIR		? "NOT_FOUND"
			   : r == -EINVAL || r == -ELOOP || r == -EXDEV ? "BAD_PATH"
									: "LOCAL_IO",
			   r == -ENOENT || r == -ENOTDIR ? "listed in --files-from, not found"
			   : r == -EINVAL ? "not a name beneath the source directory (absolute, "
					    "or with . or .. in it)"
			   : r == -ELOOP || r == -EXDEV ? "a symlink in its path (not followed)"
							: strerror(-r));
	(*local_failures)++;
}

/*
 * --files-from: each listed name beneath the one source directory, sent
 * under that name (its path kept, as rsync's --relative); a directory with
 * its contents only under -r. 0 or an exit code (the error printed).
 */
static int add_files_from(struct xfer *x, const char *srcdir, struct src_list *srcs,
			  uint64_t *local_failures)
{
	struct client_opts *o = x->o;
	struct files_list fl = { 0 };
	char esc[1024];
	size_t entry;
	int fd, r;

	r = files_list_read(o->files_from, o->from0, &fl, &entry);
	if (r < 0) {
		log_escape_short(o->files_from, esc, sizeof(esc));
		if (entry > 0) {
			log_error("--files-from %s: name %zu: %s", esc, entry,
				  r == -ENAMETOOLONG ? "longer than 4096 bytes"
				  : r == -E2BIG	     ? "too many names"
				  : r == -EINVAL     ? "a NUL in a line (use -0)"
						     : strerror(-r));
			return EXIT_USAGE;
		}
		log_error("--files-from %s: %s", esc, strerror(-r));
		return EXIT_LOCAL_IO;
	}
	r = files_list_prune(&fl, o->recursive);
	if (r < 0) {
		files_list_free(&fl);
		return EXIT_LOCAL_IO;
	}
	/* The source directory as typed (its own symlink followed, as any operand's). */
	fd = open(srcdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || src_list_hold(srcs, fd) < 0) {
		r = fd < 0 ? negerrno() : -ENOMEM;
		if (fd >= 0) {
			close(fd);
		}
		files_list_free(&fl);
		log_error("%s: %s (--files-from names are relative to one source directory)",
			  log_escape_short(srcdir, esc, sizeof(esc)), strerror(-r));
		return EXIT_LOCAL_IO;
	}
	/* One entry a name at least (a directory under -r grows it as it goes). */
	if (src_list_reserve(srcs, fl.n) < 0) {
		files_list_free(&fl);
		return EXIT_LOCAL_IO;
	}
	for (size_t i = 0; i < fl.n; i++) {
		const char *name = fl.names[i];

		r = fspath_validate(name);
		if (r == 0) {
			r = walk_add_flags(srcs, fd, name, name,
					   (o->recursive ? WALK_RECURSIVE : 0) | WALK_DIR_ALONE,
					   transfer_walk_warning, NULL);
		}
		if (r == -ENOMEM) {
			files_list_free(&fl);
			return EXIT_LOCAL_IO;
		}
		if (r < 0) {
			files_from_failed(x, srcdir, name, r, local_failures);
		}
	}
	files_list_free(&fl);
	return 0;
}

/*
 * A push's entries: given (rdmacp run), or its operands' or --files-from's,
 * walked as they are sent (walk: the memory does not grow with the tree)
 * or listed first (list: where the total must be known first, a progress
 * display with a percentage, and a --files-from list, each name checked).
 */
struct push_sources {
	struct src_list list;
	struct walk *walk;
	bool contents; /* a DIR/. operand: its entries go into the destination */
};

static void push_sources_free(struct push_sources *ps)
{
	walk_free(ps->walk);
	src_list_free(&ps->list);
}

static void push_output_init(struct xfer *x, struct client_opts *o)
{
	output_init(&x->out, o->json, o->progress, o->verbose);
	x->out.dry_run = o->dry_run;
	x->out.observe = observe_fn;
	x->out.observe_ud = observe_ud;
}

/*
 * --files-from: its names beneath the one source directory args[0].
 * Returns 0 or an exit code (said).
 */
static int push_files_from(struct xfer *x, char **args, int nargs, struct push_sources *ps,
			   uint64_t *local_failures)
{
	struct client_opts *o = x->o;
	int rc;

	if (nargs != 1) {
		log_error("--files-from takes one source directory (the names are relative "
			  "to it)");
		return EXIT_USAGE;
	}
	if (!strcmp(o->files_from, "-") && o->filters_from_stdin) {
		log_error("--files-from - and --exclude-from - both want standard input");
		return EXIT_USAGE;
	}
	rc = add_files_from(x, args[0], &ps->list, local_failures);
	if (rc != 0) {
		return rc;
	}
	/* Where a failure is: the source directory and the name under it. */
	x->local_dir = args[0];
	return 0;
}

/*
 * The operands, each under its last component (DIR/.: its entries as they
 * are). One that can't be read is a failure of its own (said); returns 0 or
 * EXIT_LOCAL_IO when nothing can go on.
 */
static int push_operands(struct xfer *x, char **args, int nargs, struct push_sources *ps,
			 uint64_t *local_failures)
{
	for (int i = 0; i < nargs; i++) {
		_cleanup_free_ char *name = transfer_source_name(args[i]);
		unsigned wflags;
		int r;

		if (!name) {
			return EXIT_LOCAL_IO;
		}
		/* A block device named here is read whole, as an image (rdmacp /dev/sdb h:m/x.img). */
		wflags = (x->o->recursive ? WALK_RECURSIVE : 0) | WALK_DEVICES |
			 (name[0] ? 0 : WALK_CONTENTS);
		ps->contents |= !name[0];
		r = ps->walk ? walk_add_root_flags(ps->walk, AT_FDCWD, args[i], name, wflags)
			     : walk_add_flags(&ps->list, AT_FDCWD, args[i], name, wflags,
					      transfer_walk_warning, NULL);
		if (r == -ENOMEM) {
			return EXIT_LOCAL_IO;
		}
		if (r < 0) {
			output_local_error(&x->out, name, 0, args[i],
					   r == -EISDIR ? "IS_DIRECTORY" : "LOCAL_IO",
					   r == -EISDIR ? "is a directory (use -r)" : strerror(-r));
			(*local_failures)++;
		}
	}
	return 0;
}

/*
 * The entries to send, in ps (said: a usage error, a --files-from list that
 * can't be read, an operand that can't). *nargs: 0 where no operand is
 * walked. Returns 0, or an exit code; *ret_summary: the exit code goes in
 * the summary.
 */
static int push_collect(struct xfer *x, char **args, int *nargs, struct push_sources *ps,
			uint64_t *local_failures, bool *ret_summary)
{
	struct client_opts *o = x->o;
	int rc;

	*ret_summary = true;
	ps->list.filter = filter_empty(&o->filters) ? NULL : &o->filters;
	if (given.n > 0) {
		/* The entries are given (byte ranges of files): no operand is walked. */
		*nargs = 0;
		o->files_from[0] = '\0';
		for (size_t i = 0; i < given.n; i++) {
			ps->list.total_bytes += given.v[i].size;
		}
	} else if (!o->files_from[0] && !x->out.progress) {
		if (walk_new(transfer_walk_warning, NULL, &ps->walk) < 0) {
			return EXIT_LOCAL_IO;
		}
		walk_set_filter(ps->walk, ps->list.filter);
	}
	if (o->files_from[0]) {
		rc = push_files_from(x, args, *nargs, ps, local_failures);
		if (rc != 0) {
			*ret_summary = false;
			return rc;
		}
		*nargs = 0;
	}
	return push_operands(x, args, *nargs, ps, local_failures);
}

/* Where the entries come from: given, walked as they go, or listed. */
/* The entries' source, each one handed to the engine told to the progress line too. */
struct told_source {
	struct engine_source inner;
	struct output *out;
};

static int told_next(void *ud, const struct engine_src **ret, char *why, size_t whylen)
{
	struct told_source *t = ud;
	int r = t->inner.next(t->inner.ud, ret, why, whylen);

	/* Regular files: the ones the line waits on (a directory is done after its contents). */
	if (r > 0 && t->out->progress && (*ret)->ftype == PROTO_FT_REG) {
		output_entry_offered(t->out, (*ret)->name);
	}
	return r;
}

static void push_source(struct push_sources *ps, struct told_source *told, struct output *out,
			struct engine_source *ret)
{
	if (given.n) {
		told->inner = (struct engine_source){ .next = given_next };
	} else if (ps->walk) {
		walk_source(ps->walk, &told->inner);
	} else {
		src_list_source(&ps->list, &told->inner);
	}
	told->out = out;
	*ret = (struct engine_source){ .next = told_next, .ud = told };
}

/* The OPEN flags of a push: the daemon is the receiver (skip level, partials, zeros, mirror). */
static uint32_t push_open_flags(const struct client_opts *o, int nargs, bool contents,
				const struct remote *rem, uint64_t local_failures)
{
	uint32_t flags = transfer_open_flags(o) | o->skip | (o->partial ? PROTO_OPEN_PARTIAL : 0) |
			 (o->assume_zero ? PROTO_OPEN_ASSUME_ZERO : 0);

	if (nargs > 1 || contents || o->files_from[0] || given.n || rem->path[0] == '\0' ||
	    rem->path[strlen(rem->path) - 1] == '/') {
		flags |= PROTO_OPEN_DEST_IS_DIR;
	}
	/* The daemon mirrors; a source that failed here already means nothing is deleted. */
	if (o->mirror && local_failures == 0) {
		flags |= PROTO_OPEN_DELETE;
	}
	return flags;
}

/* --dry-run without a look at the destination: what would be sent, listed here. */
static int push_plan(struct xfer *x, struct engine_source *source, uint64_t *local_failures)
{
	const struct engine_src *e;
	char why[256];
	int r;

	while ((r = source->next(source->ud, &e, why, sizeof(why))) > 0) {
		if (e->error) {
			output_error(&x->out, e->name, e->ftype, "LOCAL_IO", e->why);
			(*local_failures)++;
			continue;
		}
		output_plan(&x->out, e->name, e->ftype, e->size);
		x->planned++;
	}
	if (r < 0) {
		log_error("%s", why);
		return EXIT_LOCAL_IO;
	}
	return 0;
}

/* Once OPEN is answered: a probe, a dry run's list, or the engine sends. */
static int push_send(struct daemon_conn *s, struct xfer *x, struct engine_source *source,
		     uint32_t flags, const struct msg *reply, struct engine_stats *st,
		     uint64_t *local_failures)
{
	struct engine_params ep = { .role = ENGINE_SENDER, ENGINE_NO_FEEDS };

	if (proto_open_is_probe(flags)) {
		/* The daemon looks at its side: what it would skip, take, delete. */
		ep.source = *source;
		ep.open_flags = flags;
		return transfer_run_engine(s, x, &ep, NULL, st);
	}
	if (x->o->dry_run) {
		return push_plan(x, source, local_failures);
	}
	ep.source = *source;
	ep.bwlimit = x->o->bwlimit;
	ep.open_flags = flags;
	/* A relay child: the entries, and how much of each is there, come from the feed. */
	if (x->fanout && x->fanout->relay_mode) {
		ep.follow = x->fanout->book;
		ep.slowhop = fanout_slowhop(x->fanout);
	}
	x->transport = transfer_transport_name(reply->u.open_ok.transport);
	return transfer_run_engine(s, x, &ep, &reply->u.open_ok, st);
}

uint32_t transfer_push_open_flags(const struct client_opts *o, int nargs, char **args,
				  const struct remote *rem)
{
	bool contents = false;

	for (int i = 0; i < nargs; i++) {
		contents |= transfer_names_contents(args[i]);
	}
	return push_open_flags(o, nargs, contents, rem, 0);
}

/*
 * The entries to send: collected from the operands (said when none can
 * go), or a relay child's from its feed. Returns 0, or the exit code to end
 * with (*ret_summary: after a summary).
 */
static int push_prepare(struct xfer *x, char **args, int *nargs, struct push_sources *ps,
			uint64_t *local_failures, bool *ret_summary)
{
	struct client_opts *o = x->o;
	size_t nsrcs;
	int rc;

	if (x->fanout && x->fanout->relay_mode) {
		*nargs = 0;
		return 0;
	}
	rc = push_collect(x, args, nargs, ps, local_failures, ret_summary);
	if (rc != 0) {
		return rc;
	}
	/* Every root queued comes out of the walk as an entry of its own. */
	nsrcs = given.n ? given.n : ps->walk ? walk_nroots(ps->walk) : ps->list.n;
	if (nsrcs == 0 && (*local_failures > 0 || (ps->list.filter == NULL && !o->files_from[0]))) {
		/* A --files-from list with nothing there is a partial run (exit 9), as rsync's. */
		return o->files_from[0] ? EXIT_PARTIAL : EXIT_LOCAL_IO;
	}
	return 0;
}

/* Connect and OPEN (a fan-out: with its chain), then send. Returns 0 or an exit code. */
static int push_connect_send(struct daemon_conn *s, struct xfer *x, struct engine_source *source,
			     uint32_t flags, struct engine_stats *st, uint64_t *local_failures)
{
	struct msg reply = { 0 };
	int rc;

	if (x->fanout) {
		x->fanout->connecting = true;
	}
	rc = transfer_connect_open(s, PROTO_DIR_PUSH, flags, s->rem->path, &reply);
	if (rc != 0) {
		return rc;
	}
	if (x->fanout) {
		x->fanout->opened = true;
	}
	rc = push_send(s, x, source, flags, &reply, st, local_failures);
	/* The chain's results come after END, before BYE. */
	if (rc == 0 && x->fanout) {
		fanout_read_results(s, x->fanout);
	}
	return rc;
}

static int push_run(struct client_opts *o, char **args, int nargs, const struct remote *rem,
		    struct fanout *f)
{
	struct daemon_conn s = { .o = o, .rem = rem, .fanout = f };
	struct xfer x = { .o = o, .fanout = f };
	struct push_sources ps = { 0 };
	struct engine_source source = { 0 };
	struct told_source told = { 0 };
	struct engine_stats st = { 0 };
	uint64_t local_failures = 0;
	uint32_t flags;
	bool summary;
	int rc;

	push_output_init(&x, o);
	rc = push_prepare(&x, args, &nargs, &ps, &local_failures, &summary);
	if (rc != 0) {
		push_sources_free(&ps);
		return summary ? transfer_finish(&x, &st, local_failures, rc) : rc;
	}
	x.args = args;
	x.nargs = nargs;
	x.out.total_bytes = ps.list.total_bytes; /* 0 (unknown) while walking */
	x.out.files_total = given.n ? given.n : ps.walk ? 0 : ps.list.n;
	push_source(&ps, &told, &x.out, &source);
	flags = push_open_flags(o, nargs, ps.contents, rem, local_failures);
	rc = push_connect_send(&s, &x, &source, flags, &st, &local_failures);
	daemon_conn_close(&s, rc == 0);
	push_sources_free(&ps);
	if (rc != 0) {
		return transfer_finish(&x, &st, local_failures, rc);
	}
	return transfer_done(&x, &st, local_failures, proto_open_is_probe(flags));
}

int transfer_push(struct client_opts *o, char **args, int nargs, const struct remote *rem)
{
	return push_run(o, args, nargs, rem, NULL);
}

int transfer_push_fanout(struct client_opts *o, char **args, int nargs, struct fanout *f)
{
	return push_run(o, args, nargs, &f->dests[f->first].rem, f);
}
