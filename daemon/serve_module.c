/* SPDX-License-Identifier: MIT */
/*
 * A connection's way to a module (serve_internal.h): the refusal the client
 * hears, the module policy's word on a request and a path (policy.h), and
 * the one way into a module's files, as its user, beneath its held root.
 */
#include "serve.h"
#include "serve_internal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "macro.h"
#include "modroot.h"
#include "privs.h"
#include "session_table.h"

/* Per connection, above the memory budget: a pool's rounding to 2 MiB pages and the like. */
#define POLICY_MEMLOCK_SLACK (4u << 20)

int serve_refuse(struct conn *c, uint32_t code, const char *fmt, ...)
{
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	log_notice("%s (%s): refused: %s", c->peer, c->id, text);
	chan_send_error(&c->chan, proto_err_for_peer(code, c->peer_caps), "%s", text);
	return -EPERM;
}

struct policy_peer serve_conn_peer(const struct conn *c)
{
	return (struct policy_peer){ .tls = c->tls, .fp = c->fp, .caps = c->peer_caps };
}

int serve_decide(struct conn *c, const struct policy_request *rq, struct policy_grant *ret)
{
	struct policy_peer peer = serve_conn_peer(c);
	uint32_t code;
	char why[512];

	/* A relayed push (its checked ticket's client): every rule is matched against it. */
	if (c->on_behalf && policy_peer_on_behalf(&peer, c->on_behalf) < 0) {
		return serve_refuse(c, PERR_INTERNAL, "out of memory");
	}
	if (policy_decide(c->cfg, &peer, &c->used, rq, ret, &code, why, sizeof(why)) < 0) {
		return serve_refuse(c, code, "%s", why);
	}
	return 0;
}

int serve_check_path(struct conn *c, const struct policy_grant *g, int rootfd, const char *rel)
{
	uint32_t code;
	char why[PROTO_MAX_PATH * 4 + 256];

	if (policy_path(g, rootfd, rel, &code, why, sizeof(why)) < 0) {
		return serve_refuse(c, code, "%s", why);
	}
	return 0;
}

uint64_t serve_session_memlock(const struct daemon_config *cfg)
{
	return cfg->memory_budget + (uint64_t)cfg->max_connections * POLICY_MEMLOCK_SLACK;
}

/* A daemon that is not root runs a module only as itself. */
static int check_module_user(struct conn *c, const struct module *m)
{
	if (m->run_uid != geteuid() || m->run_gid != getegid()) {
		log_error("module %s: wants uid %u gid %u, but rdmacpd runs as uid %u gid %u "
			  "and is not root: remove 'uid'/'gid' or run rdmacpd as root",
			  m->name, (unsigned)m->run_uid, (unsigned)m->run_gid, (unsigned)geteuid(),
			  (unsigned)getegid());
		return serve_refuse(c, PERR_UNAVAILABLE, "module '%s' is unavailable", m->name);
	}
	return 0;
}

/*
 * Run as the module's user from now on (privs.h). A root daemon switches once,
 * at the first OPEN; a later OPEN for a module of another user is refused:
 * there is no way back. A daemon that is not root runs every session as
 * itself and refuses modules that want someone else.
 */
static int become_module_user(struct conn *c, const struct module *m)
{
	uint64_t kept = 0;
	char err[256];
	int r;

	if (c->switched) {
		if (c->uid == m->run_uid && c->gid == m->run_gid) {
			return 0;
		}
		return serve_refuse(c, PERR_PERMISSION,
				    "module '%s' runs as another user than this connection's first "
				    "module: open a new connection for it",
				    m->name);
	}
	if (geteuid() != 0) {
		r = check_module_user(c, m);
		if (r < 0) {
			return r;
		}
	} else {
		r = privs_drop(m->run_uid, m->run_gid, serve_session_memlock(c->cfg), &kept, err,
			       sizeof(err));
		if (r < 0) {
			/* Half switched is no state to serve anyone in: the session ends. */
			log_error("module %s: cannot switch to uid %u gid %u: %s", m->name,
				  (unsigned)m->run_uid, (unsigned)m->run_gid, err);
			serve_refuse(c, PERR_UNAVAILABLE, "module '%s' is unavailable", m->name);
			return r;
		}
		log_debug("%s: session runs as uid %u gid %u, capabilities %#llx", c->peer,
			  (unsigned)m->run_uid, (unsigned)m->run_gid, (unsigned long long)kept);
	}
	c->switched = true;
	c->uid = m->run_uid;
	c->gid = m->run_gid;
	return 0;
}

/*
 * The module directory, resolved with no symlink in the path, and only if it
 * is the directory the configuration was loaded with (modroot.c): whoever
 * can write to a parent could otherwise swap in a link to anywhere (or
 * another directory). A module that is not there is unavailable: the client
 * hears that, the log says why.
 */
static int open_module_root(struct conn *c, const struct module *m, int *ret_fd)
{
	char why[sizeof(m->path) * 2 + 256];
	int r;

	r = modroot_open(m, ret_fd, why, sizeof(why));
	if (r < 0) {
		log_error("module %s: %s", m->name, why);
		return serve_refuse(c, PERR_UNAVAILABLE, "module '%s' is unavailable", m->name);
	}
	return 0;
}

/*
 * The module's "max connections" (rsyncd's): this session counts in the
 * module from its first request there until it ends. At the limit it is
 * refused busy, as a daemon at its own limits: --wait-busy asks again. The
 * log says the first refusal and then the count, once per interval.
 */
static int enter_module_limit(struct conn *c, const struct module *m)
{
	unsigned counted = 0;
	int r;

	r = session_table_enter_module(c->sessions, m->name, m->max_connections);
	if (r != -EBUSY) {
		return r < 0 ? serve_refuse(c, PERR_INTERNAL, "session table: %s", strerror(-r))
			     : 0;
	}
	if (session_table_note_busy(c->sessions, SESSION_BUSY_MODULE, (uint64_t)now_ms(),
				    &counted)) {
		if (counted > 0) {
			log_notice("refused %u more session%s since the last such line: busy: a "
				   "module's max connections reached",
				   counted, counted == 1 ? "" : "s");
		}
		return serve_refuse(c, PERR_BUSY,
				    "busy: module '%s' has its max connections (%u), try again "
				    "later",
				    m->name, m->max_connections);
	}
	log_debug("%s (%s): refused: module %s: max connections (%u) (repeated: counted)", c->peer,
		  c->id, m->name, m->max_connections);
	chan_send_error(&c->chan, proto_err_for_peer(PERR_BUSY, c->peer_caps),
			"busy: module '%s' has its max connections (%u), try again later", m->name,
			m->max_connections);
	return -EPERM;
}

/* c->side, while the user database is still at hand (before the switch). */
static void describe_side(struct conn *c, const struct module *m)
{
	struct passwd *pw = getpwuid(m->run_uid);

	snprintf(c->side, sizeof(c->side),
		 "daemon side: module '%s' (%s), user %s%s%s(uid %u, gid %u)", m->name, m->path,
		 pw ? "'" : "", pw ? pw->pw_name : "", pw ? "' " : "", (unsigned)m->run_uid,
		 (unsigned)m->run_gid);
}

int serve_check_writable(struct conn *c, const struct policy_grant *gr, int dirfd, const char *rel,
			 bool parent)
{
	char dir[PROTO_MAX_PATH + 1], esc[PROTO_MAX_PATH * 4 + 1];
	size_t n = strlen(rel);
	int r;

	if (faccessat(dirfd, ".", W_OK | X_OK, AT_EACCESS) == 0) {
		return 0;
	}
	r = negerrno();
	/* The directory as the client named it: rel, or its parent for a renamed file. */
	while (n > 0 && rel[n - 1] == '/') {
		n--;
	}
	while (parent && n > 0 && rel[n - 1] != '/') {
		n--;
	}
	while (n > 0 && rel[n - 1] == '/') {
		n--;
	}
	snprintf(dir, sizeof(dir), "%.*s", (int)MIN(n, sizeof(dir) - 1), rel);
	log_escape(dir, esc, sizeof(esc));
	/* serve_refuse logs it too: the side names the module's directory and user. */
	return serve_refuse(c, PERR_PERMISSION, "cannot write in directory '%s%s%s': %s (%s)",
			    gr->m->name, n ? "/" : "", esc, strerror(-r), c->side);
}

int serve_enter_module(struct conn *c, const struct policy_grant *gr, int *ret_rootfd)
{
	int r;

	assert(policy_grant_valid(gr) && gr->m);
	r = enter_module_limit(c, gr->m);
	if (r < 0) {
		return r;
	}
	describe_side(c, gr->m);
	r = become_module_user(c, gr->m);
	if (r < 0) {
		return r;
	}
	return open_module_root(c, gr->m, ret_rootfd);
}
