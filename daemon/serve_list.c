/* SPDX-License-Identifier: MIT */
/*
 * LIST (serve_internal.h): `rdmacp ls HOST` lists the modules this peer may
 * use; `rdmacp ls HOST:MODULE/PATH` and `rdmacp check` list a path under a
 * pull's rules, with digests (SUMS) and attributes (LIST_ATTRS) where asked.
 * The FILES batches and END are the same a pull's dry run sends.
 */
#include "serve_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filehash.h"
#include "fsglob.h"
#include "fspath.h"
#include "hello.h"
#include "log.h"
#include "macro.h"
#include "modroot.h"
#include "walk.h"

/* One FILES batch being filled, with its SUMS; the names and links are copies. */
struct list_batch {
	struct proto_file pf[PROTO_MAX_BATCH];
	struct proto_sum sums[PROTO_MAX_BATCH];
	char *names[PROTO_MAX_BATCH], *links[PROTO_MAX_BATCH];
	size_t n, nsums;
};

/* A dry run tells of an entry it could not send as the transfer would. */
static int plan_entry_failed(struct get_source *g, const struct engine_src *e)
{
	struct msg m = { .type = MSG_ENTRY_FAILED };

	serve_pull_warning(g, e->name, e->why);
	if (!(g->c->peer_caps & PROTO_CAP_ENTRY_FAILED)) {
		return 0;
	}
	m.u.entry_failed.status = PERR_IO;
	snprintf(m.u.entry_failed.name, sizeof(m.u.entry_failed.name), "%s", e->name);
	snprintf(m.u.entry_failed.text, sizeof(m.u.entry_failed.text), "%s", e->why);
	return chan_queue(&g->c->chan, &m);
}

/* Why a listed file has no digest, for SUMS. */
static uint32_t sum_status(int r)
{
	switch (r) {
	case -ESTALE:
		return PERR_SOURCE_CHANGED;
	case -EACCES:
	case -EPERM:
		return PERR_PERMISSION;
	case -ENOENT:
		return PERR_NOT_FOUND;
	default:
		return PERR_IO;
	}
}

/* The digest of a listed regular file, or why there is none. */
static void list_sum(struct get_source *g, const struct engine_src *e, uint32_t id,
		     struct proto_sum *ret)
{
	char esc[1024];
	int r;

	*ret = (struct proto_sum){ .id = id };
	r = filehasher_at(g->fh, e->dirfd, e->path, e->size, ret->hash);
	if (r < 0) {
		memset(ret->hash, 0, sizeof(ret->hash));
		ret->status = sum_status(r);
		log_notice("%s (%s): check: %s: %s", g->c->peer, g->c->id,
			   log_escape_short(e->name, esc, sizeof(esc)), strerror(-r));
	}
}

/*
 * A listed entry as FILES carries it; its owner only where this daemon
 * announces PROTO_CAP_LIST_OWNERS (a pull already tells it, a listing too).
 */
static struct proto_file listed_file(const struct engine_src *e, uint32_t id, bool owners,
				     char *name, char *link)
{
	return (struct proto_file){ .id = id,
				    .ftype = e->ftype,
				    .mode = e->mode,
				    .size = e->size,
				    .mtime_sec = e->mtime.tv_sec,
				    .mtime_nsec = (uint32_t)e->mtime.tv_nsec,
				    .uid = owners ? e->uid : 0,
				    .gid = owners ? e->gid : 0,
				    .name = name,
				    .link = link };
}

/* The attributes of a listed entry, or why they could not be read. */
static void list_attr(struct get_source *g, const struct engine_src *e, uint32_t id,
		      struct proto_entry_attrs *ret)
{
	char esc[1024];
	int r = list_attrs_entry(&g->la, e, id, ret);

	if (r < 0) {
		log_notice("%s (%s): check: %s: attributes: %s", g->c->peer, g->c->id,
			   log_escape_short(e->name, esc, sizeof(esc)), strerror(-r));
	}
}

/* A batch of n entries: FILES, then their LIST_ATTRS, then their regular files' SUMS. */
static int list_batch_send(struct get_source *g, struct proto_file *pf, size_t n,
			   struct proto_sum *sums, size_t nsums)
{
	struct msg m = { .type = MSG_FILES }, ma = { .type = MSG_LIST_ATTRS };
	struct msg ms = { .type = MSG_SUMS };
	int r;

	m.u.files.count = (uint16_t)n;
	m.u.files.files = pf;
	r = chan_queue(&g->c->chan, &m);
	if (r >= 0 && g->attrs) {
		ma.u.list_attrs.fields = g->la.fields;
		ma.u.list_attrs.count = (uint16_t)n;
		ma.u.list_attrs.ents = g->attrs;
		r = chan_queue(&g->c->chan, &ma);
	}
	if (r >= 0 && nsums > 0) {
		ms.u.sums.count = (uint16_t)nsums;
		ms.u.sums.sums = sums;
		r = chan_queue(&g->c->chan, &ms);
	}
	return r < 0 ? r : 1;
}

/*
 * Up to a batch of the walk's next entries into b (ids from *id on, their
 * sizes added to *bytes); an entry that failed is told at once. Returns the
 * walk's last word: > 0 more may follow, 0 the end, < 0 an error.
 */
static int list_batch_fill(struct get_source *g, bool owners, struct list_batch *b, uint32_t *id,
			   uint64_t *bytes, char *why, size_t whylen)
{
	const struct engine_src *e;
	int r = 0;

	/* Copies: the walker reuses an entry's strings for the next one. */
	while (b->n < PROTO_MAX_BATCH && (r = serve_get_next(g, &e, why, whylen)) > 0) {
		size_t n = b->n;

		if (e->error) {
			r = plan_entry_failed(g, e);
			if (r < 0) {
				break;
			}
			continue;
		}
		if (e->name[0] == '\0') {
			continue; /* a listed directory itself: its entries are the answer */
		}
		*bytes += e->size;
		b->names[n] = strdup(e->name);
		b->links[n] = e->link ? strdup(e->link) : NULL;
		b->pf[n] = listed_file(e, ++*id, owners, b->names[n], b->links[n]);
		b->n++;
		if (!b->names[n] || (e->link && !b->links[n])) {
			r = -ENOMEM;
			break;
		}
		/* Hashed and read now: the entry's path is good until the next one. */
		if (g->fh && e->ftype == PROTO_FT_REG) {
			list_sum(g, e, *id, &b->sums[b->nsums++]);
		}
		if (g->attrs) {
			list_attr(g, e, *id, &g->attrs[n]);
		}
	}
	return r;
}

int serve_list_plan(struct get_source *g)
{
	struct conn *c = g->c;
	bool owners = hello_local_caps() & PROTO_CAP_LIST_OWNERS;
	struct list_batch b;
	struct msg end = { .type = MSG_END };
	char why[256] = "";
	uint64_t bytes = 0;
	uint32_t id = 0;
	int r;

	do {
		b.n = 0;
		b.nsums = 0;
		r = list_batch_fill(g, owners, &b, &id, &bytes, why, sizeof(why));
		if (r >= 0 && b.n > 0) {
			r = list_batch_send(g, b.pf, b.n, b.sums, b.nsums);
		}
		serve_free_strings(b.names, b.n);
		serve_free_strings(b.links, b.n);
	} while (r > 0);
	if (r == -EPERM && why[0]) {
		return serve_refuse(c, PERR_PERMISSION, "%s", why);
	}
	if (r < 0) {
		return serve_refuse(c, PERR_IO, "listing the sources: %s", strerror(-r));
	}
	end.u.end.files = id;
	end.u.end.bytes = bytes;
	return chan_send(&c->chan, &end);
}

/* `rdmacp ls HOST`: the modules this peer may use, in MODULES batches, then END. */
static int list_modules(struct conn *c)
{
	struct proto_module pm[PROTO_MAX_BATCH];
	struct msg mm = { .type = MSG_MODULES }, end = { .type = MSG_END };
	struct policy_peer peer = serve_conn_peer(c);
	size_t n = 0;
	uint32_t shown = 0;
	int r = 0;

	/* A module this peer may not use is not named: its existence is not theirs to know. */
	for (size_t i = 0; i < c->cfg->nmodules && r >= 0; i++) {
		const struct module *m = &c->cfg->modules[i];
		uint32_t flags;

		if (!policy_module_visible(&peer, m, &flags)) {
			continue;
		}
		/* Listed as it is, as rsyncd lists a module it can't serve now. */
		if ((c->peer_caps & PROTO_CAP_UNAVAILABLE) && !modroot_available(m)) {
			flags |= PROTO_MOD_UNAVAILABLE;
		}
		pm[n++] = (struct proto_module){
			.flags = flags,
			.name = (char *)m->name,
			.comment = (char *)m->comment,
		};
		shown++;
		if (n == PROTO_MAX_BATCH) {
			mm.u.modules.count = (uint16_t)n;
			mm.u.modules.mods = pm;
			r = chan_queue(&c->chan, &mm);
			n = 0;
		}
	}
	if (r >= 0 && n > 0) {
		mm.u.modules.count = (uint16_t)n;
		mm.u.modules.mods = pm;
		r = chan_queue(&c->chan, &mm);
	}
	end.u.end.files = shown;
	if (r >= 0) {
		r = chan_send(&c->chan, &end);
	}
	log_info("%s (%s): listed %u modules", c->peer, c->id, (unsigned)shown);
	return r;
}

/* A listing's wildcard: every match queued as a root under its path in the module. */
static int list_glob(struct conn *c, int rootfd, const char *pattern, const char *esc,
		     struct get_source *g)
{
	struct fsglob gl = { 0 };
	int r;

	r = serve_expand_pattern(c, g->gr, rootfd, pattern, esc, g->gr->max_files, &gl);
	if (r < 0) {
		return r;
	}
	if (gl.n == 0) {
		/* As a shell does: a pattern that matches nothing may be a name ("a[1].img"). */
		fsglob_free(&gl);
		r = walk_add_root(g->w, rootfd, pattern, pattern, true);
		if (r == -ENOENT || r == -ENOTDIR) {
			return serve_refuse(c, PERR_NOT_FOUND, "'%s': no match", esc);
		}
		return r < 0 ? serve_refuse_top(c, r, esc) : 0;
	}
	for (size_t i = 0; i < gl.n && r >= 0; i++) {
		/* A match is a path the client named: the same rules. */
		r = serve_check_path(c, g->gr, rootfd, gl.paths[i]);
		if (r < 0) {
			break;
		}
		r = walk_add_root(g->w, rootfd, gl.paths[i], gl.paths[i], true);
		if (r < 0) {
			char esc2[PROTO_MAX_PATH * 4 + 1];

			r = serve_refuse_top(c, r, log_escape(gl.paths[i], esc2, sizeof(esc2)));
		}
	}
	fsglob_free(&gl);
	return r;
}

/*
 * What a check's LIST asks for besides the entries: a hasher for their
 * digests (SUMS), room for their attributes (LIST_ATTRS). Refuses (the
 * ERROR sent) when there is no memory for them.
 */
static int list_extras(struct conn *c, uint32_t flags, struct get_source *g,
		       struct filehasher **ret_fh, struct proto_entry_attrs **ret_attrs)
{
	int r;

	if (flags & PROTO_LIST_SUMS) {
		r = filehasher_new(ret_fh);
		if (r < 0) {
			return serve_refuse(c, PERR_INTERNAL, "hashing: %s", strerror(-r));
		}
		g->fh = *ret_fh;
	}
	if (flags & PROTO_LIST_ATTR_FLAGS) {
		r = list_attrs_init(flags, &g->la);
		*ret_attrs = calloc(PROTO_MAX_BATCH, sizeof(**ret_attrs));
		if (r < 0 || !*ret_attrs) {
			return serve_refuse(c, PERR_INTERNAL, "attributes: %s",
					    strerror(r < 0 ? -r : ENOMEM));
		}
		g->attrs = *ret_attrs;
	}
	return 0;
}

/*
 * The walk of a listed path (trimmed, beneath rootfd): a directory's entries
 * (lastname empty), or the entry itself (lastname its name), or a wildcard's
 * matches; then FILES and END.
 */
static int list_walk(struct conn *c, const struct msg_list *l, const struct policy_grant *gr,
		     int rootfd, const char *trimmed, const char *lastname, bool magic,
		     const char *esc)
{
	bool recursive = l->flags & PROTO_LIST_RECURSIVE;
	struct get_source g = { .c = c, .gr = gr };
	_cleanup_(filehasher_freep) struct filehasher *fh = NULL;
	_cleanup_free_ struct proto_entry_attrs *attrs = NULL;
	int r;

	r = list_extras(c, l->flags, &g, &fh, &attrs);
	if (r < 0) {
		return r;
	}
	r = walk_new(serve_pull_warning, &g, &g.w);
	if (r < 0) {
		return serve_refuse(c, PERR_INTERNAL, "out of memory");
	}
	/* The listed directory itself is walked but not listed: it does not count. */
	walk_set_max_entries(g.w, (uint64_t)gr->max_files + (lastname[0] == '\0'));
	if (recursive) {
		walk_set_max_depth(g.w, UINT_MAX);
	} else {
		walk_set_max_depth(g.w, lastname[0] ? 0 : 1);
	}
	r = magic ? list_glob(c, rootfd, trimmed, esc, &g)
		  : walk_add_root(g.w, rootfd, trimmed, lastname, true);
	r = r < 0 ? (magic ? r : serve_refuse_top(c, r, esc)) : serve_list_plan(&g);
	if (r >= 0) {
		log_info("%s (%s): listed %s%s%s: %llu entries", c->peer, c->id, esc,
			 fh ? " with digests" : "", attrs ? " with attributes" : "",
			 (unsigned long long)(walk_count(g.w) - (lastname[0] == '\0')));
	}
	walk_free(g.w);
	return r;
}

/*
 * The granted path in the module: a directory lists its entries, a
 * wildcard its matches; anything else lists itself, by its last component.
 */
static int list_granted(struct conn *c, const struct msg_list *l, const struct policy_grant *gr,
			int rootfd, const char *esc)
{
	char lastname[FSPATH_NAME_MAX + 1] = "";
	_cleanup_close_ int dirfd = -1;
	_cleanup_free_ char *trimmed = NULL;
	bool magic;
	size_t n;
	int r;

	trimmed = strdup(gr->rel);
	if (!trimmed) {
		return serve_refuse(c, PERR_INTERNAL, "out of memory");
	}
	for (n = strlen(trimmed); n > 0 && trimmed[n - 1] == '/'; n--) {
		trimmed[n - 1] = '\0';
	}
	/* A wildcard lists its matches themselves (with -r, what is beneath them too). */
	magic = fsglob_has_magic(trimmed);
	r = magic ? -ENOTDIR : fspath_open_dir(rootfd, trimmed, &dirfd);
	if (r < 0 && r != -ENOTDIR && r != -ELOOP) {
		return serve_refuse_top(c, r, esc);
	}
	if (r < 0 && fspath_last_component(trimmed, lastname, sizeof(lastname)) < 0) {
		return serve_refuse(c, PERR_BAD_PATH, "bad path '%s'", esc);
	}
	return list_walk(c, l, gr, rootfd, trimmed, lastname, magic, esc);
}

/*
 * `rdmacp ls HOST:MODULE/PATH`: exactly a pull's rules (allow, write only,
 * the module's user, no symlink followed, 'max files per session'), then the
 * pull dry run's FILES batches and END. A directory lists its entries, named
 * relative to it (with -r all below it); anything else lists itself.
 */
static int list_path(struct conn *c, const struct msg_list *l)
{
	struct policy_request rq = { .op = POLICY_LIST, .path = l->path, .flags = l->flags };
	struct policy_grant gr;
	char esc[PROTO_MAX_PATH * 4 + 1];
	_cleanup_close_ int rootfd = -1;
	int r;

	log_escape(l->path, esc, sizeof(esc));
	/* A pull's rules, and SUMS only to a client that announced it understands them. */
	r = serve_decide(c, &rq, &gr);
	if (r < 0) {
		return r;
	}
	r = serve_enter_module(c, &gr, &rootfd);
	if (r < 0) {
		return r;
	}
	r = serve_check_path(c, &gr, rootfd, gr.rel);
	if (r < 0) {
		return r;
	}
	return list_granted(c, l, &gr, rootfd, esc);
}

int serve_list(struct conn *c, const struct msg *m)
{
	const struct msg_list *l = &m->u.list;

	return l->path[0] == '\0' ? list_modules(c) : list_path(c, l);
}
