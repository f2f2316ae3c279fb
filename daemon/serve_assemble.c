/* SPDX-License-Identifier: MIT */
/*
 * ASSEMBLE (serve_internal.h): rdmacp finalize's join of a split file's
 * parts (src/assemble.h), as the module's user, beneath the module, under
 * the module's rules for a push.
 */
#include "serve_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "assemble.h"
#include "fspath.h"
#include "log.h"
#include "macro.h"

/* Where a push to a->path would write: MOD/DIR/ names the directory as MOD/DIR does. */
static int assemble_dest(struct conn *c, const struct msg_assemble *a,
			 const struct policy_grant *gr, int rootfd, int *ret_fd)
{
	char esc[PROTO_MAX_PATH * 4 + 1], rel[PROTO_MAX_PATH + 1];
	size_t len;
	int r;

	snprintf(rel, sizeof(rel), "%s", gr->rel + strspn(gr->rel, "/"));
	for (len = strlen(rel); len > 0 && rel[len - 1] == '/'; len--) {
		rel[len - 1] = '\0';
	}
	r = fspath_open_dir(rootfd, rel, ret_fd);
	if (r < 0) {
		log_escape(a->path, esc, sizeof(esc));
		return serve_refuse(
		    c, r == -ENOENT ? PERR_NOT_FOUND : PERR_BAD_PATH, "destination '%s': %s", esc,
		    r == -ELOOP || r == -EXDEV ? "symlink or escape refused" : strerror(-r));
	}
	return 0;
}

/* A vanished file's parts removed from staging (PROTO_ASM_DISCARD); ASSEMBLED of size 0. */
static int serve_discard(struct conn *c, const struct msg_assemble *a,
			 const struct policy_grant *gr, int destfd, const char *esc)
{
	struct msg done = { .type = MSG_ASSEMBLED };
	char why[512];
	uint32_t code;
	int r = assemble_discard(destfd, a, &code, why, sizeof(why));

	if (r < 0) {
		return serve_refuse(c, code, "removing the parts of '%s': %s", esc, why);
	}
	log_info("%s (%s): removed the parts of %s in module %s (vanished from the source)",
		 c->peer, c->id, esc, gr->m->name);
	done.u.assembled.size = 0;
	return chan_send(&c->chan, &done);
}

/* A --delta run's old copies of its parts (PROTO_ASM_SEED); ASSEMBLED of the bytes made. */
static int serve_seed(struct conn *c, const struct msg_assemble *a, const struct policy_grant *gr,
		      int destfd, const char *esc)
{
	struct msg done = { .type = MSG_ASSEMBLED };
	char why[512];
	uint64_t bytes;
	uint32_t code;
	int r = assemble_seed(destfd, a, &bytes, &code, why, sizeof(why));

	if (r < 0) {
		return serve_refuse(c, code, "old copies of the parts of '%s': %s", esc, why);
	}
	log_debug("%s (%s): %llu bytes of old copies of the parts of %s in module %s (--delta)",
		  c->peer, c->id, (unsigned long long)bytes, esc, gr->m->name);
	done.u.assembled.size = bytes;
	return chan_send(&c->chan, &done);
}

/*
 * rdmacp finalize: join a split file's parts (ASSEMBLE, src/assemble.h), as
 * the module's user, beneath the module, where a push to a->path would
 * write; the module's rules for a push apply (not read only, owners only
 * where kept, 'max file size'). ASSEMBLED once the file is in place;
 * otherwise ERROR (ASSEMBLY for parts that are missing or not what their
 * digests say) and the session ends. With PROTO_ASM_DISCARD, only the
 * parts are removed (serve_discard); with PROTO_ASM_SEED (a shard's run
 * under --delta), old copies of the parts made (serve_seed).
 */
int serve_assemble(struct conn *c, const struct msg *m)
{
	const struct msg_assemble *a = &m->u.assemble;
	bool discard = a->flags & PROTO_ASM_DISCARD, seed = a->flags & PROTO_ASM_SEED;
	struct policy_request rq = { .op = POLICY_ASSEMBLE,
				     .path = a->path,
				     .flags = a->flags & ~(PROTO_ASM_DISCARD | PROTO_ASM_SEED),
				     .bytes = discard || seed ? 0 : a->size };
	struct policy_grant gr;
	struct msg done = { .type = MSG_ASSEMBLED };
	char esc[PROTO_MAX_PATH * 4 + 1], why[512];
	_cleanup_close_ int rootfd = -1, destfd = -1;
	uint32_t code;
	int r;

	if (!(c->peer_caps & PROTO_CAP_ASSEMBLE)) {
		return serve_refuse(c, PERR_PROTOCOL,
				    "ASSEMBLE from a client without the capability");
	}
	if (discard && !(c->peer_caps & PROTO_CAP_ASM_DISCARD)) {
		return serve_refuse(c, PERR_PROTOCOL,
				    "ASSEMBLE DISCARD from a client without the capability");
	}
	if (seed && !(c->peer_caps & PROTO_CAP_ASM_SEED)) {
		return serve_refuse(c, PERR_PROTOCOL,
				    "ASSEMBLE SEED from a client without the capability");
	}
	r = serve_decide(c, &rq, &gr);
	if (r < 0) {
		return r;
	}
	log_escape(a->name, esc, sizeof(esc));
	/* The destination, the file's name and the staging directory: each a path it names. */
	r = serve_check_path(c, &gr, -1, gr.rel);
	if (r >= 0) {
		r = serve_check_path(c, &gr, -1, a->name);
	}
	if (r >= 0) {
		r = serve_check_path(c, &gr, -1, a->staging);
	}
	if (r < 0) {
		return r;
	}
	r = serve_enter_module(c, &gr, &rootfd);
	if (r < 0) {
		return r;
	}
	r = assemble_dest(c, a, &gr, rootfd, &destfd);
	if (r < 0) {
		return r;
	}
	if (discard) {
		return serve_discard(c, a, &gr, destfd, esc);
	}
	if (seed) {
		return serve_seed(c, a, &gr, destfd, esc);
	}
	/* The module's metadata rule, as for a push (policy.h, meta_policy.h). */
	r = assemble_file(destfd, a, &gr.meta, &code, why, sizeof(why));
	if (r < 0) {
		return serve_refuse(c, code, "assembling '%s': %s", esc, why);
	}
	policy_account(&c->used, &gr, a->size);
	log_info("%s (%s): assembled %s in module %s from %u parts, %llu bytes", c->peer, c->id,
		 esc, gr.m->name, a->count, (unsigned long long)a->size);
	done.u.assembled.size = a->size;
	return chan_send(&c->chan, &done);
}
