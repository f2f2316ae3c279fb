/* SPDX-License-Identifier: MIT */
/* What a client may do in a module (policy.h). */
#include "policy.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"
#include "fspath.h"
#include "log.h"
#include "macro.h"
#include "policy_peer.h"
#include "proto/msg.h"
#include "tls.h"

#define POLICY_SEAL 0x706f6c69u /* "poli": policy_decide made this grant */

/*
 * One row per request type: what it does to a module. A request that reads
 * is refused in a 'write only' module; one that writes in a 'read only'
 * one. wo_flags: the flags that would show a 'write only' module's content
 * to the client (each refused there, with its own reason).
 */
struct op_rule {
	const char *verb;
	bool reads, writes;
	uint32_t wo_flags;
};

static const struct op_rule op_rules[] = {
	[POLICY_PUSH] = { "push", false, true,
			  PROTO_OPEN_DELETE | PROTO_OPEN_SKIP_LEVELS | PROTO_OPEN_PARTIAL |
			      PROTO_OPEN_DELTA },
	[POLICY_PULL] = { "pull", true, false, 0 },
	[POLICY_LIST] = { "listing", true, false, 0 },
	/* It opens files already in the module (its parts): a read as much as a write. */
	[POLICY_ASSEMBLE] = { "assemble", true, true, 0 },
};

struct verdict {
	uint32_t code;
	char *why;
	size_t whylen;
};

static int no(struct verdict *v, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int no(struct verdict *v, uint32_t code, const char *fmt, ...)
{
	va_list ap;

	v->code = code;
	va_start(ap, fmt);
	vsnprintf(v->why, v->whylen, fmt, ap);
	va_end(ap);
	return -EPERM;
}

/* Does whom the request is about (policy_subject) match one of these rules? */
static bool peer_matches(const struct policy_peer *peer, const struct allow_rule *rules, size_t n)
{
	struct policy_ident id = policy_subject(peer);

	return policy_ident_matches(&id, rules, n);
}

bool policy_peer_denied(const struct daemon_config *cfg, const struct module *m,
			const struct policy_peer *peer)
{
	return (cfg && peer_matches(peer, cfg->deny, cfg->ndeny)) ||
	       (m && peer_matches(peer, m->deny, m->ndeny));
}

bool policy_module_visible(const struct policy_peer *peer, const struct module *m,
			   uint32_t *ret_flags)
{
	/* [global]'s 'deny' refused the connection already. */
	if (policy_peer_denied(NULL, m, peer) || !peer_matches(peer, m->allow, m->nallow)) {
		return false;
	}
	*ret_flags =
	    (m->read_only ? PROTO_MOD_READ_ONLY : 0) | (m->write_only ? PROTO_MOD_WRITE_ONLY : 0);
	return true;
}

bool policy_module_takes_pushes(const struct module *m)
{
	return !m->read_only;
}

/*
 * "MODULE/REL" names a module and a path in it (REL may be empty). "/ABS/PATH"
 * is accepted too when it lies inside a module's path, so scp habits work:
 * the module with the longest matching path wins.
 */
static const struct module *resolve_module(const struct daemon_config *cfg, const char *path,
					   const char **ret_rel)
{
	const struct module *best = NULL;
	size_t best_len = 0;

	if (path[0] != '/') {
		char mod[64];
		const char *slash = strchr(path, '/');
		size_t n = slash ? (size_t)(slash - path) : strlen(path);

		if (n == 0 || n >= sizeof(mod)) {
			return NULL;
		}
		memcpy(mod, path, n);
		mod[n] = '\0';
		for (path += n; *path == '/'; path++) {
		}
		*ret_rel = path;
		return daemon_config_module(cfg, mod);
	}
	for (size_t i = 0; i < cfg->nmodules; i++) {
		const struct module *m = &cfg->modules[i];
		size_t n = strlen(m->path);

		while (n > 1 && m->path[n - 1] == '/') {
			n--;
		}
		if (n > best_len && !strncmp(path, m->path, n) && (path[n] == '/' || !path[n])) {
			best = m;
			best_len = n;
		}
	}
	if (!best) {
		return NULL;
	}
	for (path += best_len; *path == '/'; path++) {
	}
	*ret_rel = path;
	return best;
}

/* An OPEN's flags, each only from a peer that announced what it needs. */
static int open_caps(const struct policy_peer *peer, uint32_t flags, struct verdict *v)
{
	static const struct {
		uint32_t flag;
		uint64_t cap;
		const char *what;
	} needs[] = {
		{ PROTO_OPEN_SKIP_CHECKSUM, PROTO_CAP_CHECK,
		  "skip level checksum from a client without the check capability" },
		{ PROTO_OPEN_ENCRYPT, PROTO_CAP_ENCRYPT,
		  "lane encryption from a client without the encrypt capability" },
		{ PROTO_OPEN_ASSUME_ZERO, PROTO_CAP_ASSUME_ZERO,
		  "assume-zero-target from a client without the assume-zero capability" },
		{ PROTO_OPEN_WRITE_SEND, PROTO_CAP_WRITE_SEND,
		  "the WRITE + SEND verbs path from a client without its capability" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(needs); i++) {
		if ((flags & needs[i].flag) && !(peer->caps & needs[i].cap)) {
			return no(v, PERR_PROTOCOL, "%s", needs[i].what);
		}
	}
	/* A probe's engine exchange goes only to a peer that announced it. */
	if (proto_open_is_probe(flags) && !(peer->caps & PROTO_CAP_PROBE)) {
		return no(v, PERR_PROTOCOL,
			  "a dry run with a skip level or delete from a client without the probe "
			  "capability");
	}
	return 0;
}

/* Why each flag of a push is refused in a 'write only' module: what it would show. */
static const char *write_only_reason(uint32_t flag)
{
	switch (flag) {
	case PROTO_OPEN_DELETE:
		return "--delete would show what it holds";
	case PROTO_OPEN_PARTIAL:
		return "--partial would show what it holds";
	case PROTO_OPEN_DELTA:
		return "--delta would show what it holds";
	default:
		return "--skip would show what it holds";
	}
}

/* A module's 'read only' and 'write only', for what this request does. */
static int access_rules(const struct module *m, const struct policy_request *rq, struct verdict *v)
{
	const struct op_rule *op = &op_rules[rq->op];
	uint32_t shown = rq->flags & op->wo_flags;

	if (op->writes && m->read_only) {
		return no(v, PERR_PERMISSION, "module '%s' is read only", m->name);
	}
	if (!m->write_only) {
		return 0;
	}
	if (op->reads) {
		return no(
		    v, PERR_PERMISSION, "module '%s' is write only%s", m->name,
		    rq->op == POLICY_ASSEMBLE
			? ": split files cannot be assembled there (plan without --split-size)"
			: "");
	}
	/* In this order, which older daemons answered too. */
	static const uint32_t order[] = { PROTO_OPEN_DELETE, PROTO_OPEN_SKIP_LEVELS,
					  PROTO_OPEN_PARTIAL, PROTO_OPEN_DELTA };

	for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
		if (shown & order[i]) {
			return no(v, PERR_PERMISSION, "module '%s' is write only: %s", m->name,
				  write_only_reason(order[i]));
		}
	}
	return 0;
}

/* Owners are set only where the module keeps them, and only by root. */
static bool wants_owner(const struct policy_request *rq)
{
	return (rq->op == POLICY_PUSH && (rq->flags & PROTO_OPEN_OWNER)) ||
	       (rq->op == POLICY_ASSEMBLE && (rq->flags & PROTO_ASM_OWNER));
}

static bool keeps_owners(const struct module *m)
{
	return m->preserve_owner && m->run_uid == 0;
}

/* What a request may store: the module's caps, less what the session stored already. */
static int byte_rules(const struct module *m, const struct policy_session *s,
		      const struct policy_request *rq, struct policy_grant *g, struct verdict *v)
{
	g->max_file_size = m->max_file_size;
	g->session_bytes_left = m->max_session_bytes - MIN(m->max_session_bytes, s->bytes);
	if (rq->op != POLICY_ASSEMBLE) {
		return 0;
	}
	if (rq->bytes > m->max_file_size) {
		return no(
		    v, PERR_PERMISSION, "%llu bytes is over module '%s''s max file size (%llu)",
		    (unsigned long long)rq->bytes, m->name, (unsigned long long)m->max_file_size);
	}
	if (rq->bytes > g->session_bytes_left) {
		return no(v, PERR_PERMISSION,
			  "%llu bytes would pass module '%s''s max session bytes (%llu; %llu "
			  "left on this connection)",
			  (unsigned long long)rq->bytes, m->name,
			  (unsigned long long)m->max_session_bytes,
			  (unsigned long long)g->session_bytes_left);
	}
	/* Each ASSEMBLE makes one file: a connection makes at most 'max files' of them. */
	if (s->assembles >= m->max_files) {
		return no(v, PERR_PERMISSION,
			  "more than %u files assembled on one connection: module '%s' allows no "
			  "more ('max files per session')",
			  m->max_files, m->name);
	}
	return 0;
}

static void grant_module(const struct module *m, const struct policy_request *rq,
			 struct policy_grant *g)
{
	g->m = m;
	g->max_files = m->max_files;
	g->devices = m->devices;
	g->encryption = m->encryption;
	g->tos = m->tos;
	g->conceal = m->write_only;
	g->meta = (struct meta_policy){
		/* ASSEMBLE's mode and mtime are the client's, as with -p (it applies its own rule). */
		.preserve = rq->op == POLICY_ASSEMBLE || (rq->flags & PROTO_OPEN_PRESERVE),
		.owner = wants_owner(rq),
		.keep_setid = m->keep_setid,
		/* Without -p new entries lose the daemon's umask (systemd UMask=, 0022), as rsyncd's do. */
		.umask = fspath_umask(),
	};
}

/*
 * A relayed push (the peer acts on behalf of its ticket's client): only a
 * push, and only from a relaying daemon the module's 'relay from' trusts
 * and no 'deny' refuses; a chain only with a push.
 */
static int relay_rules(const struct daemon_config *cfg, const struct module *m,
		       const struct policy_peer *peer, const struct policy_request *rq,
		       struct verdict *v)
{
	struct policy_ident relay = policy_tls_ident(peer);
	char name[256];

	if (peer->behalf) {
		policy_ident_name(&relay, name, sizeof(name));
		if (rq->op != POLICY_PUSH) {
			return no(v, PERR_PROTOCOL, "only a push may be relayed");
		}
		/* As for a client: a denied relay is an authentication refusal, one not let in a permission one. */
		if (policy_ident_matches(&relay, m->deny, m->ndeny)) {
			return no(v, PERR_AUTH, "%s may not relay into module %s", name, m->name);
		}
		if (!policy_ident_matches(&relay, m->relay_from, m->nrelay_from)) {
			return no(v, PERR_PERMISSION, "%s may not relay into module %s", name,
				  m->name);
		}
	}
	if (rq->relay && rq->op != POLICY_PUSH) {
		return no(v, PERR_PROTOCOL, "only a push goes on to further destinations");
	}
	return 0;
}

/* A push with a chain, once the client may push here at all: policy_relay_chain. */
static int chain_rules(const struct daemon_config *cfg, const struct module *m,
		       const struct policy_request *rq, struct verdict *v)
{
	if (rq->relay && policy_relay_chain(cfg, m, rq->relay, &v->code, v->why, v->whylen) < 0) {
		return -EPERM;
	}
	return 0;
}

static int decide_module(const struct daemon_config *cfg, const struct policy_peer *peer,
			 const struct policy_session *s, const struct policy_request *rq,
			 struct policy_grant *g, struct verdict *v)
{
	char esc[PROTO_MAX_PATH * 4 + 1];
	const struct module *m;
	int r;

	m = resolve_module(cfg, rq->path, &g->rel);
	if (!m) {
		return no(v, PERR_NO_MODULE, "no module for '%s'",
			  log_escape(rq->path, esc, sizeof(esc)));
	}
	r = relay_rules(cfg, m, peer, rq, v);
	if (r < 0) {
		return r;
	}
	if (policy_peer_denied(cfg, m, peer)) {
		return no(v, PERR_AUTH,
			  "module '%s': this client's certificate is denied by the daemon's deny "
			  "list",
			  m->name);
	}
	if (!peer_matches(peer, m->allow, m->nallow)) {
		return no(v, PERR_PERMISSION, "module '%s' does not allow this client", m->name);
	}
	r = access_rules(m, rq, v);
	if (r < 0) {
		return r;
	}
	if ((rq->op == POLICY_PUSH || rq->op == POLICY_PULL) && open_caps(peer, rq->flags, v) < 0) {
		return -EPERM;
	}
	if (rq->op == POLICY_LIST && (rq->flags & PROTO_LIST_SUMS) &&
	    !(peer->caps & PROTO_CAP_CHECK)) {
		return no(v, PERR_PROTOCOL,
			  "LIST with sums from a client without the check capability");
	}
	if (rq->op == POLICY_LIST && (rq->flags & PROTO_LIST_ATTR_FLAGS) &&
	    !(peer->caps & PROTO_CAP_LIST_ATTRS)) {
		return no(v, PERR_PROTOCOL,
			  "LIST with attributes from a client without the listing-attributes "
			  "capability");
	}
	if (wants_owner(rq) && !keeps_owners(m)) {
		return no(v, PERR_PERMISSION,
			  "module '%s' does not keep owners%s (needs 'preserve owner = yes' and "
			  "'uid = root')",
			  m->name, rq->op == POLICY_PUSH ? ": push without --owner" : "");
	}
	r = byte_rules(m, s, rq, g, v);
	if (r < 0) {
		return r;
	}
	r = chain_rules(cfg, m, rq, v);
	if (r < 0) {
		return r;
	}
	grant_module(m, rq, g);
	return 0;
}

int policy_decide(const struct daemon_config *cfg, const struct policy_peer *peer,
		  const struct policy_session *s, const struct policy_request *rq,
		  struct policy_grant *ret, uint32_t *ret_code, char *why, size_t whylen)
{
	struct verdict v = { .code = PERR_OK, .why = why, .whylen = whylen };
	struct policy_grant g = { .op = rq->op, .cfg = cfg, .path = rq->path, .tos = -1 };
	int r;

	why[0] = '\0';
	if (rq->op == POLICY_BENCH && peer->behalf) {
		r = no(&v, PERR_PROTOCOL, "only a push may be relayed");
	} else if (rq->op == POLICY_BENCH) {
		if (!peer_matches(peer, cfg->bench_allow, cfg->nbench_allow)) {
			r = no(
			    &v, PERR_PERMISSION,
			    "bench is not allowed for this client ('allow bench' in rdmacpd.conf)");
		} else {
			g.encryption = cfg->encryption;
			g.tos = cfg->tos;
			r = 0;
		}
	} else if (rq->op < POLICY_PUSH || rq->op >= (int)ARRAY_SIZE(op_rules) || !rq->path) {
		r = no(&v, PERR_INTERNAL, "no rule for this request");
	} else {
		r = decide_module(cfg, peer, s, rq, &g, &v);
	}
	*ret_code = v.code;
	if (r < 0) {
		return r;
	}
	g.seal_ = POLICY_SEAL;
	*ret = g;
	return 0;
}

bool policy_grant_valid(const struct policy_grant *g)
{
	return g && g->seal_ == POLICY_SEAL && (g->m || g->op == POLICY_BENCH);
}

/* Is rel, beneath rootfd (no symlinks followed), a block device? */
static bool is_block_device(int rootfd, const char *rel)
{
	_cleanup_close_ int parentfd = -1;
	const char *leaf = rel;
	struct stat st;

	if (rel[0] == '\0' || fspath_open_parent(rootfd, rel, false, &parentfd, &leaf) < 0) {
		return false;
	}
	return fstatat(parentfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISBLK(st.st_mode);
}

/* policy_path's rules for rel; a refusal quotes shown, the path as the client wrote it. */
static int path_rules(const struct policy_grant *g, int rootfd, const char *rel, const char *shown,
		      uint32_t *ret_code, char *why, size_t whylen)
{
	struct verdict v = { .code = PERR_OK, .why = why, .whylen = whylen };
	char esc[PROTO_MAX_PATH * 4 + 1];
	_cleanup_free_ char *trimmed = strdup(rel);
	size_t n;
	int r = 0;

	if (!policy_grant_valid(g) || !g->m) {
		r = no(&v, PERR_INTERNAL, "no grant for a path");
	} else if (!trimmed) {
		r = no(&v, PERR_INTERNAL, "out of memory");
	} else {
		for (n = strlen(trimmed); n > 0 && trimmed[n - 1] == '/'; n--) {
			trimmed[n - 1] = '\0';
		}
		log_escape(shown, esc, sizeof(esc));
		if (n > 0 && fspath_validate(trimmed) < 0) {
			r = no(&v, PERR_BAD_PATH, "bad path '%s'", esc);
		} else if (engine_name_reserved(trimmed)) {
			/* The receiver's store of cut pushes: another client's, never listed nor sent. */
			r = no(&v, PERR_BAD_PATH, "'%s': a name reserved for rdmacpd's own files",
			       esc);
		} else if (op_rules[g->op].reads && g->op != POLICY_ASSEMBLE && !g->devices &&
			   rootfd >= 0 && is_block_device(rootfd, trimmed)) {
			r = no(&v, PERR_DEVICE_REFUSED,
			       "'%s': a block device: module '%s' does not export devices "
			       "('devices = no')",
			       esc, g->m->name);
		}
	}
	*ret_code = v.code;
	return r;
}

int policy_path(const struct policy_grant *g, int rootfd, const char *rel, uint32_t *ret_code,
		char *why, size_t whylen)
{
	/* The request's own path is quoted whole, module and all. */
	return path_rules(g, rootfd, rel, g && rel == g->rel ? g->path : rel, ret_code, why,
			  whylen);
}

int policy_request_path(const struct policy_grant *g, int rootfd, const char *path,
			const char **ret_rel, uint32_t *ret_code, char *why, size_t whylen)
{
	char esc[PROTO_MAX_PATH * 4 + 1];
	const char *rel = NULL;

	if (!policy_grant_valid(g) || !g->m || resolve_module(g->cfg, path, &rel) != g->m) {
		*ret_code = PERR_BAD_PATH;
		snprintf(why, whylen, "'%s' is not in module '%s'",
			 log_escape(path, esc, sizeof(esc)), g && g->m ? g->m->name : "?");
		return -EPERM;
	}
	*ret_rel = rel;
	return path_rules(g, rootfd, rel, path, ret_code, why, whylen);
}

void policy_account(struct policy_session *s, const struct policy_grant *g, uint64_t bytes)
{
	s->bytes = bytes > UINT64_MAX - s->bytes ? UINT64_MAX : s->bytes + bytes;
	if (g->op == POLICY_ASSEMBLE) {
		s->assembles++;
	}
}
