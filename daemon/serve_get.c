/* SPDX-License-Identifier: MIT */
/*
 * A pull's GET (serve_internal.h): each path the client names resolved
 * beneath the module without following symlinks, named after its last
 * component (as scp does), a wildcard expanded as a shell would have, each
 * distinct one queued once on the walker that the engine (or a dry run's
 * listing) reads, within the module's 'max files per session'.
 */
#include "serve_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsglob.h"
#include "fspath.h"
#include "log.h"
#include "macro.h"
#include "walk.h"

/* The paths a GET named, with the names they are sent under. */
struct get_seen {
	char *paths[PROTO_MAX_BATCH], *names[PROTO_MAX_BATCH];
	size_t n;
};

void serve_pull_warning(void *ud, const char *path, const char *why)
{
	struct get_source *g = ud;
	char esc[1024];

	log_notice("%s (%s): pull: %s: %s", g->c->peer, g->c->id,
		   log_escape_short(path, esc, sizeof(esc)), why);
}

int serve_get_next(void *ud, const struct engine_src **ret, char *why, size_t whylen)
{
	struct get_source *g = ud;
	int r = walk_next(g->w, ret);

	if (r == -E2BIG) {
		snprintf(why, whylen,
			 "more than %u files in one session: module '%s' allows no more "
			 "('max files per session')",
			 g->gr->max_files, g->gr->m->name);
		return -EPERM;
	}
	return r;
}

void serve_get_engine_source(struct get_source *g, struct engine_source *ret)
{
	*ret = (struct engine_source){ .next = serve_get_next, .ud = g };
}

/*
 * Has this GET named (path, name) already? The same path twice would only
 * send the same entries twice, which the client refuses as duplicates: it
 * is walked once. A path inside another one (data/a and data/a/b with -r)
 * is a different request, as with cp -r: its entries have other names and
 * other destinations, so it is kept; the per-session file cap bounds what
 * such overlaps can cost.
 */
static bool get_path_seen(const struct get_seen *s, const char *path, const char *name)
{
	for (size_t i = 0; i < s->n; i++) {
		if (!strcmp(s->paths[i], path) && !strcmp(s->names[i], name)) {
			return true;
		}
	}
	return false;
}

void serve_free_strings(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i]);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Was (path, name) queued by a wildcard of this GET already? Its name is its last component. */
static bool glob_seen(const struct get_source *g, const char *path, const char *name)
{
	const char *slash = strrchr(path, '/');

	return g->nglobbed > 0 && !strcmp(slash ? slash + 1 : path, name) &&
	       bsearch(&path, g->globbed, g->nglobbed, sizeof(*g->globbed), cmp_str);
}

/* Keep a pattern's queued matches (taken from gl; the others are NULL) for glob_seen. */
static int glob_keep(struct get_source *g, struct fsglob *gl)
{
	size_t n = 0;
	char **v;

	for (size_t i = 0; i < gl->n; i++) {
		if (gl->paths[i]) {
			gl->paths[n++] = gl->paths[i];
		}
	}
	gl->n = n;
	if (gl->n == 0) {
		return 0;
	}
	v = reallocarray(g->globbed, g->nglobbed + gl->n, sizeof(*v));
	if (!v) {
		return -ENOMEM;
	}
	memcpy(v + g->nglobbed, gl->paths, gl->n * sizeof(*v));
	g->globbed = v;
	g->nglobbed += gl->n;
	gl->n = 0;
	if (g->nglobbed > 1) {
		qsort(g->globbed, g->nglobbed, sizeof(*g->globbed), cmp_str);
	}
	return 0;
}

int serve_refuse_top(struct conn *c, int r, const char *esc)
{
	return serve_refuse(c,
			    r == -ENOENT			 ? PERR_NOT_FOUND
			    : r == -EISDIR || r == -ENOTDIR	 ? PERR_BAD_PATH
			    : r == -ELOOP || r == -EXDEV	 ? PERR_BAD_PATH
			    : r == -EINVAL || r == -ENAMETOOLONG ? PERR_BAD_PATH
			    : r == -EACCES || r == -EPERM	 ? PERR_PERMISSION
								 : PERR_IO,
			    "'%s': %s", esc,
			    r == -EISDIR		 ? "is a directory (use -r)"
			    : r == -ELOOP || r == -EXDEV ? "symlink or escape refused"
							 : strerror(-r));
}

/* A GET path's refusal by the walker (fewer kinds told apart than serve_refuse_top). */
static int refuse_get_root(struct conn *c, int r, const char *esc)
{
	return serve_refuse(c,
			    r == -ENOENT		 ? PERR_NOT_FOUND
			    : r == -EISDIR		 ? PERR_BAD_PATH
			    : r == -ELOOP || r == -EXDEV ? PERR_BAD_PATH
							 : PERR_IO,
			    "'%s': %s", esc,
			    r == -EISDIR		 ? "is a directory (use -r)"
			    : r == -ELOOP || r == -EXDEV ? "symlink or escape refused"
							 : strerror(-r));
}

/*
 * fsglob_expand within the module's 'max files per session': at most
 * max_matches matches, and directory reading bounded by the same limit.
 * Refuses (the ERROR sent) when the pattern is bad or matches too much.
 */
int serve_expand_pattern(struct conn *c, const struct policy_grant *gr, int rootfd,
			 const char *pattern, const char *esc, uint64_t max_matches,
			 struct fsglob *ret)
{
	int r =
	    fsglob_expand(rootfd, pattern, max_matches, (uint64_t)gr->max_files * 4 + 4096, ret);

	if (r == -E2BIG) {
		return serve_refuse(c, PERR_PERMISSION,
				    "'%s' matches or reads more entries than module '%s' allows "
				    "('max files per session' is %u)",
				    esc, gr->m->name, gr->max_files);
	}
	if (r < 0) {
		return serve_refuse(c, r == -ENOMEM ? PERR_INTERNAL : PERR_BAD_PATH,
				    "bad pattern '%s'", esc);
	}
	return r;
}

/* As a shell does: a pattern that matches nothing may be a name ("a[1].img"). */
static int glob_as_name(struct conn *c, int rootfd, const char *pattern, const char *esc,
			bool recursive, struct get_source *g)
{
	const char *slash = strrchr(pattern, '/');
	int r = walk_add_root(g->w, rootfd, pattern, slash ? slash + 1 : pattern, recursive);

	if (r == -ENOENT || r == -ENOTDIR) {
		return serve_refuse(c, PERR_NOT_FOUND, "'%s': no match", esc);
	}
	g->queued += r == 0;
	return r < 0 ? serve_refuse_top(c, r, esc) : 0;
}

/*
 * Match i of a GET's wildcard, queued under its own name unless named
 * already (*added counts both). A directory without -r is left out (*dirs)
 * and dropped from gl.
 */
static int glob_queue_match(struct conn *c, int rootfd, struct fsglob *gl, size_t i, bool recursive,
			    struct get_source *g, const struct get_seen *seen, size_t *added,
			    size_t *dirs)
{
	const struct policy_grant *gr = g->gr;
	const char *slash = strrchr(gl->paths[i], '/');
	const char *name = slash ? slash + 1 : gl->paths[i];
	int r;

	/* Named already (by a path or another wildcard of this GET): sent once. */
	if (get_path_seen(seen, gl->paths[i], name) || glob_seen(g, gl->paths[i], name)) {
		(*added)++;
		return 0;
	}
	/* A match is a path the client named: the same rules. */
	r = serve_check_path(c, gr, rootfd, gl->paths[i]);
	if (r < 0) {
		return r;
	}
	r = walk_add_root_flags(g->w, rootfd, gl->paths[i], name,
				(recursive ? WALK_RECURSIVE : 0) |
				    (gr->devices ? WALK_DEVICES : 0));
	if (r == -EISDIR) {
		/*
		 * Left out, so not "seen": named alone later, it is refused as a
		 * directory. Told to the client as a failed entry, as a push tells
		 * of a directory given without -r (exit 9), never dropped unsaid.
		 */
		(*dirs)++;
		r = walk_add_failed_root(g->w, name, -EISDIR, "is a directory (use -r)");
		free(gl->paths[i]);
		gl->paths[i] = NULL;
	} else if (r == 0) {
		(*added)++;
		g->queued++;
	} else {
		char esc2[PROTO_MAX_PATH * 4 + 1];

		r = serve_refuse_top(c, r, log_escape(gl->paths[i], esc2, sizeof(esc2)));
	}
	return r;
}

/* What a wildcard came to: nothing, only directories (no -r), or matches. */
static int glob_outcome(struct conn *c, const char *esc, size_t added, size_t dirs)
{
	if (added == 0 && dirs > 0) {
		return serve_refuse(c, PERR_BAD_PATH, "'%s' matches only directories (use -r)",
				    esc);
	}
	if (added == 0) {
		return serve_refuse(c, PERR_NOT_FOUND, "'%s': no match", esc);
	}
	if (dirs > 0) {
		log_notice("%s (%s): '%s': %zu directories left out (no -r)", c->peer, c->id, esc,
			   dirs);
	}
	return 0;
}

/*
 * A GET path with wildcards: each match beneath the module (fsglob.h: no
 * symlink followed, no dotfile matched by a wildcard) is queued under its own
 * name, as a shell would have expanded it. Directories need -r; matching
 * nothing is NOT_FOUND. The matches count against 'max files per session'
 * before they are queued, and so does the reading of the directories.
 */
static int expand_glob(struct conn *c, int rootfd, const char *pattern, const char *esc,
		       bool recursive, struct get_source *g, const struct get_seen *seen)
{
	const struct policy_grant *gr = g->gr;
	uint64_t left = gr->max_files - MIN((uint64_t)gr->max_files, g->queued);
	struct fsglob gl = { 0 };
	size_t added = 0, dirs = 0;
	int r;

	if (left == 0) {
		return serve_refuse(c, PERR_PERMISSION,
				    "more than %u files in one session: module '%s' allows no more "
				    "('max files per session')",
				    gr->max_files, gr->m->name);
	}
	r = serve_expand_pattern(c, gr, rootfd, pattern, esc, left, &gl);
	if (r < 0) {
		return r;
	}
	if (gl.n == 0) {
		fsglob_free(&gl);
		return glob_as_name(c, rootfd, pattern, esc, recursive, g);
	}
	for (size_t i = 0; i < gl.n && r >= 0; i++) {
		r = glob_queue_match(c, rootfd, &gl, i, recursive, g, seen, &added, &dirs);
	}
	if (r >= 0 && glob_keep(g, &gl) < 0) {
		r = serve_refuse(c, PERR_INTERNAL, "out of memory");
	}
	fsglob_free(&gl);
	if (r < 0) {
		return r;
	}
	return glob_outcome(c, esc, added, dirs);
}

/* A pull's GET: a malformed one is answered with ERROR. */
static int recv_request(struct conn *c, struct msg *ret)
{
	int r = chan_recv(&c->chan, ret, (int)c->cfg->idle_timeout_s * 1000);

	if (r < 0) {
		log_notice_errno(r, "%s (%s): waiting for GET: %m", c->peer, c->id);
		if (r != -ECONNRESET && r != -EPIPE) {
			char why[160];

			chan_send_error(&c->chan, chan_err_code(r), "%s",
					r == -ETIMEDOUT
					    ? "idle timeout"
					    : chan_recv_error(&c->chan, r, why, sizeof(why)));
		}
	}
	return r;
}

/*
 * A GET path beneath the module (*ret_trimmed, no trailing slash): in the
 * OPEN's module, clean, no reserved name, no device unless exported.
 */
static int get_path_resolve(struct conn *c, const struct policy_grant *gr, int rootfd,
			    const char *path, const char *esc, char **ret_trimmed)
{
	const char *rel = NULL;
	char why[PROTO_MAX_PATH * 4 + 256];
	uint32_t code;
	char *trimmed;
	size_t n;
	int r;

	r = policy_request_path(gr, rootfd, path, &rel, &code, why, sizeof(why));
	if (r < 0) {
		return serve_refuse(c, code, "%s", why);
	}
	trimmed = strdup(rel);
	if (!trimmed) {
		return -ENOMEM;
	}
	for (n = strlen(trimmed); n > 0 && trimmed[n - 1] == '/'; n--) {
		trimmed[n - 1] = '\0';
	}
	if (n > 0 && fspath_validate(trimmed) < 0) {
		free(trimmed);
		return serve_refuse(c, PERR_BAD_PATH, "bad path '%s'", esc);
	}
	*ret_trimmed = trimmed;
	return 0;
}

/* One path of a GET, as the client wrote it: queued on the walker once. */
static int get_path(struct conn *c, const struct policy_grant *gr, int rootfd, bool recursive,
		    struct get_source *g, struct get_seen *seen, const char *wire_path)
{
	_cleanup_free_ char *trimmed = NULL, *path = strdup(wire_path);
	char esc[PROTO_MAX_PATH * 4 + 1], lastname[FSPATH_NAME_MAX + 1];
	const char *name;
	bool contents;
	int r;

	if (!path) {
		return -ENOMEM;
	}
	log_escape(path, esc, sizeof(esc));
	/* DIR/.: the directory's entries, dotfiles too, as cp -r DIR/. DEST; no wildcard. */
	contents = fspath_strip_contents_dot(path);
	if (contents && fsglob_has_magic(path)) {
		return serve_refuse(c, PERR_BAD_PATH, "'%s': a wildcard and /. together", esc);
	}
	r = get_path_resolve(c, gr, rootfd, path, esc, &trimmed);
	if (r < 0) {
		return r;
	}
	/* Named after the last component of the path as the client wrote it. */
	if (fspath_last_component(path, lastname, sizeof(lastname)) < 0) {
		return serve_refuse(c, PERR_BAD_PATH, "bad path '%s'", esc);
	}
	name = contents ? "" : lastname;
	if (fsglob_has_magic(trimmed)) {
		return expand_glob(c, rootfd, trimmed, esc, recursive, g, seen);
	}
	if (get_path_seen(seen, trimmed, name) || glob_seen(g, trimmed, name)) {
		log_debug("%s: GET names '%s' again: walked once", c->peer, esc);
		return 0;
	}
	seen->names[seen->n] = strdup(name);
	if (!seen->names[seen->n]) {
		return -ENOMEM;
	}
	seen->paths[seen->n++] = TAKE_PTR(trimmed);
	r = walk_add_root_flags(g->w, rootfd, seen->paths[seen->n - 1], name,
				(recursive ? WALK_RECURSIVE : 0) |
				    (gr->devices ? WALK_DEVICES : 0) |
				    (contents ? WALK_CONTENTS : 0));
	g->queued += r == 0;
	return r < 0 ? refuse_get_root(c, r, esc) : 0;
}

/*
 * Expand the client's GET beneath the module: every path resolved without
 * following symlinks, named after its last component (as scp does), each
 * distinct one queued once on the walker. Only the top entries are looked
 * at now; what lies below them is listed as it is sent.
 */
int serve_expand_get(struct conn *c, const struct policy_grant *gr, int rootfd, bool recursive,
		     struct get_source *g)
{
	struct get_seen seen;
	struct msg in;
	int r;

	seen.n = 0;
	r = recv_request(c, &in);
	if (r < 0) {
		return r;
	}
	if (in.type != MSG_GET) {
		msg_clear(&in);
		return serve_refuse(c, PERR_PROTOCOL, "expected GET");
	}
	walk_set_max_entries(g->w, gr->max_files);
	static_assert(PROTO_MAX_BATCH <= ARRAY_SIZE(seen.paths), "GET holds PROTO_MAX_BATCH paths");
	for (size_t i = 0; i < in.u.get.count && i < PROTO_MAX_BATCH; i++) {
		r = get_path(c, gr, rootfd, recursive, g, &seen, in.u.get.paths[i]);
		if (r < 0) {
			break;
		}
	}
	serve_free_strings(seen.paths, seen.n);
	serve_free_strings(seen.names, seen.n);
	serve_free_strings(g->globbed, g->nglobbed);
	free(g->globbed);
	g->globbed = NULL;
	g->nglobbed = 0;
	msg_clear(&in);
	return r < 0 ? r : 0;
}
