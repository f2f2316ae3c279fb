/* SPDX-License-Identifier: MIT */
/*
 * A pull (transfer.h): remote sources on one host received into a local
 * destination (a directory, a new name for the one source, or with
 * --write-devices a block device); this side is the receiver and checks
 * every name the daemon sends against what was asked for.
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exitcodes.h"
#include "fsglob.h"
#include "fspath.h"
#include "log.h"
#include "transfer.h"

/*
 * Pull: accept only entries named after what we asked for (and, with -r, below
 * them); for a wildcard, names its last component matches (as the daemon does,
 * without matching a leading dot), never "." or "..".
 */
static bool pull_name_ok(void *ud, const char *name)
{
	struct xfer *x = ud;
	const char *slash = strchr(name, '/');
	size_t top = slash ? (size_t)(slash - name) : strlen(name);
	char topname[FSPATH_NAME_MAX + 1];

	if (slash && !x->o->recursive) {
		return false;
	}
	if (top == 0 || top >= sizeof(topname)) {
		return false;
	}
	memcpy(topname, name, top);
	topname[top] = '\0';
	if (!strcmp(topname, ".") || !strcmp(topname, "..")) {
		return false;
	}
	for (size_t i = 0; i < x->nwanted; i++) {
		/* DIR/.: what the directory holds, under any name of its own. */
		if (x->wanted[i][0] == '\0') {
			return true;
		}
		/*
		 * A wildcard we sent: the daemon expanded it, each match under its own
		 * name, or found none and took it as a name.
		 */
		if (!strcmp(x->wanted[i], topname) ||
		    (fsglob_has_magic(x->wanted[i]) &&
		     fnmatch(x->wanted[i], topname, FNM_PERIOD) == 0)) {
			return true;
		}
	}
	return false;
}

/* Open directory DST (with extra open flags) and name it in *ret_dir. */
static int open_dest_dir(const char *dst, int flags, char **ret_dir, int *ret_fd)
{
	_cleanup_close_ int fd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC | flags);
	char *dir;

	if (fd < 0) {
		return negerrno();
	}
	dir = strdup(dst);
	if (!dir) {
		return -ENOMEM;
	}
	*ret_dir = dir;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Several sources, or DST/: DST would be made (a dry run), if its parent is there. */
static int pull_dest_would_make(const char *dst, char *copy, int *ret_fd, char **ret_dir, char *why,
				size_t whylen)
{
	/* Its parent must be there for mkdir to work; nothing is made. */
	_cleanup_free_ char *parent = strdup(dst);
	size_t n = parent ? strlen(parent) : 0;
	struct stat st;

	while (n > 1 && parent[n - 1] == '/') {
		parent[--n] = '\0';
	}
	if (!parent || stat(dirname(parent), &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(why, whylen, "directory %s does not exist", dirname(copy));
		return -ENOENT;
	}
	*ret_dir = strdup(dst);
	*ret_fd = -1;
	return *ret_dir ? 0 : -ENOMEM;
}

/*
 * Several sources, or DST/: they go into directory DST, made here when it
 * is missing (its parent must exist), as a push makes the daemon's.
 */
static int pull_dest_dir(const char *dst, char *copy, bool create, int *ret_fd, char **ret_dir,
			 bool *ret_made, char *why, size_t whylen)
{
	struct stat st;

	if (lstat(dst, &st) == 0) {
		snprintf(why, whylen, "not a directory");
		return -ENOTDIR;
	}
	if (!create) {
		return pull_dest_would_make(dst, copy, ret_fd, ret_dir, why, whylen);
	}
	if (mkdir(dst, 0777) < 0) {
		int r = negerrno();
		if (r == -ENOENT) {
			snprintf(why, whylen, "directory %s does not exist", dirname(copy));
		}
		return r;
	}
	*ret_made = true;
	return open_dest_dir(dst, O_NOFOLLOW, ret_dir, ret_fd);
}

/* One source under a new name: DST's last component, in its directory. */
static int pull_dest_rename(char *copy, int *ret_fd, char **ret_rename, char **ret_dir, char *why,
			    size_t whylen)
{
	char *slash = strrchr(copy, '/');
	int fd;

	if (slash) {
		*slash = '\0';
	}
	fd = open(slash ? (copy[0] ? copy : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int r = negerrno();
		if (r == -ENOENT) {
			snprintf(why, whylen, "directory %s does not exist", copy[0] ? copy : "/");
		}
		return r;
	}
	*ret_rename = strdup(slash ? slash + 1 : copy);
	*ret_dir = strdup(slash ? (copy[0] ? copy : "/") : "");
	if (!*ret_rename || !*ret_dir || fspath_validate(*ret_rename) < 0) {
		close(fd);
		free(*ret_rename);
		free(*ret_dir);
		*ret_rename = *ret_dir = NULL;
		return -EINVAL;
	}
	*ret_fd = fd;
	return 0;
}

/*
 * Where pulled entries land: into DST if it is a directory, else DST renames
 * the one source (cp -r: a directory arrives under the new name). *ret_dir
 * is the local directory the entries' names are relative to ("" for ".");
 * *ret_made: DST was made here (removed again if the copy stores nothing).
 * Without create (a dry run) a DST that would be made is not: *ret_fd is -1.
 */
static int pull_dest(const char *dst, int nsrcs, bool create, int *ret_fd, char **ret_rename,
		     char **ret_dir, bool *ret_made, char *why, size_t whylen)
{
	_cleanup_free_ char *copy = strdup(dst);
	struct stat st;

	if (!copy) {
		return -ENOMEM;
	}
	*ret_rename = NULL;
	why[0] = '\0';
	*ret_made = false;
	if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
		return open_dest_dir(dst, 0, ret_dir, ret_fd);
	}
	if (nsrcs > 1 || dst[strlen(dst) - 1] == '/') {
		return pull_dest_dir(dst, copy, create, ret_fd, ret_dir, ret_made, why, whylen);
	}
	return pull_dest_rename(copy, ret_fd, ret_rename, ret_dir, why, whylen);
}

/* --dry-run of a pull: the daemon lists what it would send, then END. */
static int pull_plan(struct daemon_conn *s, struct xfer *x)
{
	uint64_t failed = 0;

	for (;;) {
		struct msg m;
		int r = chan_recv(&s->chan, &m, s->o->idle_timeout_s * 1000);
		if (r < 0) {
			log_error_errno(r, "control channel: %m");
			return EXIT_PROTOCOL;
		}
		if (m.type == MSG_END) {
			return failed ? EXIT_PARTIAL : 0;
		}
		if (m.type == MSG_ENTRY_FAILED) {
			/* What the daemon could not send: a failure, not a silent gap. */
			output_error(&x->out, m.u.entry_failed.name, 0,
				     proto_err_name(m.u.entry_failed.status),
				     m.u.entry_failed.text);
			failed++;
			continue;
		}
		if (m.type == MSG_ERROR) {
			char esc[4 * sizeof(m.u.error.text)];

			log_error("%s: %s", s->rem->host,
				  log_escape(m.u.error.text, esc, sizeof(esc)));
			return exit_for_perr(m.u.error.code);
		}
		if (m.type != MSG_FILES) {
			msg_clear(&m);
			return EXIT_PROTOCOL;
		}
		for (size_t i = 0; i < m.u.files.count; i++) {
			if (!pull_name_ok(x, m.u.files.files[i].name)) {
				msg_clear(&m);
				log_error("daemon listed a name that was not asked for");
				return EXIT_PROTOCOL;
			}
			output_plan(&x->out, m.u.files.files[i].name, m.u.files.files[i].ftype,
				    m.u.files.files[i].size);
			x->planned++;
		}
		msg_clear(&m);
	}
}

/* dst resolved when it is a block device (its symlinks followed), else NULL. */
static char *device_dest(const char *dst)
{
	struct stat st;

	if (stat(dst, &st) < 0 || !S_ISBLK(st.st_mode)) {
		return NULL;
	}
	return realpath(dst, NULL);
}

/* What a pull can't take. Returns 0 or EXIT_USAGE (said). */
static int pull_usage(const struct client_opts *o, int nargs)
{
	if (nargs > PROTO_MAX_BATCH) {
		log_error("at most %d remote sources at once", PROTO_MAX_BATCH);
		return EXIT_USAGE;
	}
	if (o->files_from[0]) {
		log_error("--files-from is for a push (the names are of a local directory); for a "
			  "pull, name the remote sources (HOST:MODULE/PATH...) instead");
		return EXIT_USAGE;
	}
	if (o->assume_zero && !o->write_devices) {
		log_error("--assume-zero-target is for block device targets: a pull writes a local "
			  "device only with --write-devices");
		return EXIT_USAGE;
	}
	return 0;
}

/* A pull's operands and what they ask for. */
struct pull_sources {
	struct remote rems[PROTO_MAX_BATCH];
	char *paths[PROTO_MAX_BATCH];  /* the remote paths (GET) */
	char *wanted[PROTO_MAX_BATCH]; /* their last components (pull_name_ok) */
	int n;
	int nglob, ncontents; /* wildcards, DIR/. operands */
};

static void pull_sources_free(struct pull_sources *ps)
{
	for (int i = 0; i < ps->n; i++) {
		free(ps->wanted[i]);
	}
	ps->n = 0;
}

/* The remote sources, all on one host. Returns 0 or EXIT_USAGE (said). */
static int pull_operands(char **args, int nargs, struct pull_sources *ps)
{
	for (int i = 0; i < nargs; i++) {
		struct remote *rem = &ps->rems[i];

		if (parse_remote(args[i], rem) != 1 || strcmp(rem->host, ps->rems[0].host)) {
			log_error("all sources of a pull must be on one host: %s", args[i]);
			return EXIT_USAGE;
		}
		ps->paths[i] = rem->path;
		ps->nglob += fsglob_has_magic(rem->path);
		/* DIR/.: its entries, any name; the daemon strips the dot (an older one refuses). */
		ps->ncontents += transfer_names_contents(rem->path);
		ps->wanted[i] = transfer_source_name(rem->path);
		ps->n = i + 1;
		if (!ps->wanted[i] || (ps->wanted[i][0] && fspath_validate(ps->wanted[i]) < 0)) {
			log_error("bad remote path '%s'", args[i]);
			return EXIT_USAGE;
		}
	}
	return 0;
}

/* Where the entries land (pull_dest), and whether it was made here. */
struct pull_target {
	const char *dst;
	int basefd;
	char *rename_to, *local_dir;
	bool made;
};

static void pull_target_free(struct pull_target *t)
{
	free(t->rename_to);
	free(t->local_dir);
	if (t->basefd >= 0) {
		close(t->basefd);
	}
}

/* The receiver's parameters: the skip level, partials, modes, devices, the mirror pass. */
static void pull_engine_params(struct client_opts *o, struct xfer *x, const struct pull_target *t,
			       struct engine_params *ep)
{
	ep->base_fd = t->basefd;
	ep->rename_to = t->rename_to;
	/* We are the receiver: the skip level is ours to apply, not the daemon's. */
	ep->open_flags = transfer_open_flags(o) | o->skip | (o->partial ? PROTO_OPEN_PARTIAL : 0);
	ep->partial_max_age_s = CLIENT_PARTIAL_MAX_AGE_S;
	/*
	 * As root, a daemon's set-id bits would be root's own: kept only
	 * when asked for with --owner (as a user, cp -p keeps them too).
	 */
	ep->keep_setid = o->owner || geteuid() != 0;
	ep->bwlimit = o->bwlimit;
	ep->umask = fspath_umask(); /* without -p: cp's rule */
	ep->write_devices = o->write_devices;
	/* Our own device targets: the daemon, the sender, need not know. */
	ep->open_flags |= o->assume_zero ? PROTO_OPEN_ASSUME_ZERO : 0;
	ep->name_ok = pull_name_ok;
	ep->name_ok_ud = x;
	/* --delete: we mirror, here; the daemon hears only that the pass goes on. */
	if (o->mirror) {
		ep->open_flags |= PROTO_OPEN_DELETE;
		ep->max_delete = o->max_delete;
		/* What our rules exclude is kept, as rsync keeps it. */
		ep->delete_keep = filter_protects;
		ep->delete_keep_ud = &o->filters;
	}
}

/* Once OPEN is answered: a dry run's list, or the engine receives (a probe: no lanes). */
static int pull_receive(struct daemon_conn *s, struct xfer *x, uint32_t flags,
			const struct msg *reply, struct pull_sources *ps,
			const struct pull_target *t, struct engine_stats *st)
{
	struct client_opts *o = x->o;
	struct engine_params ep = { .role = ENGINE_RECEIVER, ENGINE_NO_FEEDS };

	if (o->dry_run && !proto_open_is_probe(flags)) {
		return transfer_send_get(s, ps->paths, (size_t)ps->n) < 0 ? EXIT_PROTOCOL
									  : pull_plan(s, x);
	}
	x->transport = o->dry_run ? NULL : transfer_transport_name(reply->u.open_ok.transport);
	/* The lanes first (the daemon waits for them), then what we want. */
	pull_engine_params(o, x, t, &ep);
	x->get_paths = ps->paths;
	x->nget = (size_t)ps->n;
	/* A probe: END answered the OPEN, there is no data path. */
	return transfer_run_engine(s, x, &ep, o->dry_run ? NULL : &reply->u.open_ok, st);
}

/*
 * The destination, unless a dry run that does not look at it. Returns 0 or
 * EXIT_LOCAL_IO (said).
 */
static int pull_prepare_dest(const struct client_opts *o, uint32_t flags,
			     const struct pull_sources *ps, struct pull_target *t)
{
	char why[PROTO_MAX_PATH + 64];
	int r;

	if (o->dry_run && !proto_open_is_probe(flags)) {
		return 0;
	}
	/* A wildcard may match several: the destination is a directory, as for cp. */
	r = pull_dest(t->dst, ps->nglob || ps->ncontents ? 2 : ps->n, !o->dry_run, &t->basefd,
		      &t->rename_to, &t->local_dir, &t->made, why, sizeof(why));
	if (r < 0) {
		log_error("destination %s: %s", t->dst, why[0] ? why : strerror(-r));
		return EXIT_LOCAL_IO;
	}
	return 0;
}

int transfer_pull(struct client_opts *o, char **args, int nargs, const char *dst)
{
	struct pull_sources ps = { 0 };
	struct pull_target t = { .dst = dst, .basefd = -1 };
	struct daemon_conn s = { .o = o, .rem = &ps.rems[0] };
	struct xfer x = { .o = o };
	struct engine_stats st = { 0 };
	struct msg reply = { 0 };
	uint32_t flags = transfer_open_flags(o);
	int rc = pull_usage(o, nargs);

	if (rc != 0) {
		return rc;
	}
	output_init(&x.out, o->json, o->progress, o->verbose);
	x.out.dry_run = o->dry_run;
	x.out.pull = true;
	rc = pull_operands(args, nargs, &ps);
	if (rc != 0) {
		pull_sources_free(&ps);
		return rc;
	}
	x.wanted = ps.wanted;
	x.nwanted = (size_t)nargs;
	/* A dry run with --skip or --delete looks at the destination: a probe, we receive. */
	if (o->dry_run && (o->skip || o->mirror)) {
		flags |= o->skip | (o->mirror ? PROTO_OPEN_DELETE : 0);
	}
	/* --write-devices: a device named through a symlink (/dev/vg0/lv) is written, not the link. */
	_cleanup_free_ char *dev_dst = o->write_devices ? device_dest(dst) : NULL;
	if (dev_dst) {
		t.dst = dev_dst;
	}
	rc = pull_prepare_dest(o, flags, &ps, &t);
	x.local_dir = t.local_dir;
	if (rc == 0) {
		rc = transfer_connect_open(&s, PROTO_DIR_PULL, flags, ps.rems[0].path, &reply);
	}
	if (rc == 0) {
		rc = pull_receive(&s, &x, flags, &reply, &ps, &t, &st);
	}
	daemon_conn_close(&s, rc == 0);
	pull_sources_free(&ps);
	pull_target_free(&t);
	if (t.made && st.files_ok == 0) {
		(void)rmdir(t.dst); /* only if still empty */
	}
	if (rc != 0 || (o->dry_run && !proto_open_is_probe(flags))) {
		return transfer_finish(&x, &st, 0, rc);
	}
	return transfer_done(&x, &st, 0, proto_open_is_probe(flags));
}
