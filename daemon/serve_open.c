/* SPDX-License-Identifier: MIT */
/*
 * OPEN (serve_internal.h): a push into a module or a pull from it, once the
 * module policy granted it and the session runs as the module's user; a dry
 * run answers END instead of a data path, and a probe then runs the engine
 * on the control channel alone.
 */
#include "serve_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fspath.h"
#include "log.h"
#include "macro.h"
#include "walk.h"

struct push_dest {
	int fd;
	char rename_to[FSPATH_NAME_MAX + 1];
};

/*
 * Where a push lands: REL itself when it is a directory (or must be one);
 * otherwise its parent, with the single source renamed to REL's last
 * component, as cp and scp do.
 */
static int resolve_push_dest(int rootfd, const char *rel, bool dest_is_dir, bool create,
			     struct push_dest *ret)
{
	_cleanup_free_ char *trimmed = strdup(rel);
	const char *leaf;
	size_t n;
	int r;

	if (!trimmed) {
		return -ENOMEM;
	}
	n = strlen(trimmed);
	while (n > 0 && trimmed[n - 1] == '/') {
		trimmed[--n] = '\0';
	}
	ret->rename_to[0] = '\0';
	if (n == 0) {
		return fspath_open_dir(rootfd, "", &ret->fd);
	}
	r = fspath_validate(trimmed);
	if (r < 0) {
		return r;
	}
	r = fspath_open_dir(rootfd, trimmed, &ret->fd);
	/*
	 * Not a directory (or a symlink, which is never followed): the single
	 * source replaces it by name. A symlink higher up still fails below.
	 */
	if (r != -ENOENT && r != -ENOTDIR && !(r == -ELOOP && !dest_is_dir)) {
		return r;
	}
	if (dest_is_dir) {
		if (r == -ENOTDIR) {
			return r;
		}
		if (!create) {
			/* A dry run: it would be created; create nothing now. */
			ret->fd = -1;
			return 0;
		}
		return fspath_open_or_create_dir(rootfd, trimmed, &ret->fd);
	}
	r = fspath_open_parent(rootfd, trimmed, false, &ret->fd, &leaf);
	if (r < 0) {
		return r;
	}
	snprintf(ret->rename_to, sizeof(ret->rename_to), "%s", leaf);
	return 0;
}

/* A dry run gets every check a real transfer would, then END instead of a data path. */
static int accept_dry_run(struct conn *c)
{
	struct msg end = { .type = MSG_END };

	return chan_send(&c->chan, &end);
}

/* OPEN's request to the module policy. */
static struct policy_request open_request(const struct msg_open *o)
{
	return (struct policy_request){
		.op = o->direction == PROTO_DIR_PULL ? POLICY_PULL : POLICY_PUSH,
		.path = o->path,
		.flags = o->flags,
	};
}

/* A pull from the module's root: its GET walked, for a copy, a dry run or a probe. */
static int open_pull(struct conn *c, const struct msg_open *o, const struct policy_grant *gr,
		     int rootfd)
{
	struct get_source g = { .c = c, .gr = gr };
	bool recursive = o->flags & PROTO_OPEN_RECURSIVE;
	int r;

	r = walk_new(serve_pull_warning, &g, &g.w);
	if (r < 0) {
		return serve_refuse(c, PERR_INTERNAL, "out of memory");
	}
	/* The client's FILTER: every entry the walk makes is matched by its wire name. */
	walk_set_filter(g.w, c->have_filter ? &c->filter : NULL);
	if (proto_open_is_probe(o->flags)) {
		/* The client receives and decides: we offer as for a pull, send nothing. */
		r = accept_dry_run(c);
		if (r >= 0) {
			r = serve_expand_get(c, gr, rootfd, recursive, &g);
		}
		if (r >= 0) {
			r = serve_probe(c, o, gr, rootfd, NULL, &g);
		}
	} else if (o->flags & PROTO_OPEN_DRY_RUN) {
		r = accept_dry_run(c);
		if (r >= 0) {
			r = serve_expand_get(c, gr, rootfd, recursive, &g);
		}
		if (r >= 0) {
			r = serve_list_plan(&g);
		}
	} else {
		r = serve_transfer(c, o, gr, rootfd, NULL, &g);
	}
	walk_free(g.w);
	return r;
}

/* A push into the module, where gr->rel says (esc: the path as logged). */
static int open_push(struct conn *c, const struct msg_open *o, const struct policy_grant *gr,
		     int rootfd, const char *esc)
{
	struct push_dest dest = { .fd = -1 };
	int r;

	/* A partial store holds the receiver's own files: no push goes in there. */
	r = serve_check_path(c, gr, -1, gr->rel);
	if (r < 0) {
		return r;
	}
	r = resolve_push_dest(rootfd, gr->rel, o->flags & PROTO_OPEN_DEST_IS_DIR,
			      !(o->flags & PROTO_OPEN_DRY_RUN), &dest);
	if (r < 0) {
		return serve_refuse(c, r == -ENOENT ? PERR_NOT_FOUND : PERR_BAD_PATH,
				    "destination '%s': %s", esc,
				    r == -ELOOP || r == -EXDEV ? "symlink or escape refused"
				    : r == -ENOENT ? "its parent directory does not exist"
						   : strerror(-r));
	}
	/* Said now, naming who and where, not as the first file's "Permission denied". */
	if (dest.fd >= 0) {
		r = serve_check_writable(c, gr, dest.fd, gr->rel, dest.rename_to[0] != '\0');
		if (r < 0) {
			close(dest.fd);
			return r;
		}
	}
	if (o->flags & PROTO_OPEN_DRY_RUN) {
		r = accept_dry_run(c);
		/* A probe: we receive as we would, and create nothing (dest.fd < 0: not there). */
		if (r >= 0 && proto_open_is_probe(o->flags)) {
			r = serve_probe(c, o, gr, dest.fd, dest.rename_to, NULL);
		}
	} else {
		/* A relayed push: its child is up before the client hears OPEN_OK. */
		r = serve_relay_spawn(c, o);
		if (r >= 0) {
			r = serve_relay_finish(
			    c, serve_transfer(c, o, gr, dest.fd, dest.rename_to, NULL));
		}
	}
	if (dest.fd >= 0) {
		close(dest.fd);
	}
	return r;
}

int serve_open(struct conn *c, const struct msg *m)
{
	const struct msg_open *o = &m->u.open;
	char esc[PROTO_MAX_PATH * 4 + 1];
	struct policy_request rq = open_request(o);
	struct policy_grant gr;
	_cleanup_close_ int rootfd = -1;
	int r;

	/* A RELAY before it: its ticket checked, its chain for the policy to decide too. */
	r = serve_relay_open(c, o, &rq);
	if (r < 0) {
		return r;
	}
	r = serve_decide(c, &rq, &gr);
	if (r < 0) {
		return r;
	}
	serve_relay_granted(c);
	log_escape(o->path, esc, sizeof(esc));
	/* Read while the session may still read them: the relay's credentials. */
	r = serve_relay_prepare(c, &gr);
	if (r < 0) {
		return r;
	}
	r = serve_enter_module(c, &gr, &rootfd);
	if (r < 0) {
		return r;
	}
	if (o->direction == PROTO_DIR_PULL) {
		return open_pull(c, o, &gr, rootfd);
	}
	return open_push(c, o, &gr, rootfd, esc);
}
