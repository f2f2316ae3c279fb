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
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fspath.h"
#include "log.h"
#include "macro.h"
#include "privs.h"

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
		return serve_refuse(c, PERR_PERMISSION, "module '%s' is unavailable", m->name);
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
			serve_refuse(c, PERR_INTERNAL, "module '%s' is unavailable", m->name);
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
 * is the directory the configuration was loaded with: whoever can write to a
 * parent could otherwise swap in a link to anywhere (or another directory).
 */
static int open_module_root(struct conn *c, const struct module *m, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	r = fspath_open_root(m->path, &fd);
	if (r < 0) {
		log_error("module %s: cannot open %s: %s", m->name, m->path,
			  r == -ELOOP ? "a symlink in the path (refused)" : strerror(-r));
		return serve_refuse(c, r == -ELOOP ? PERR_PERMISSION : PERR_IO,
				    "module '%s' is unavailable", m->name);
	}
	if (fstat(fd, &st) < 0) {
		r = negerrno();
		log_error_errno(r, "module %s: %s: %m", m->name, m->path);
		return serve_refuse(c, PERR_IO, "module '%s' is unavailable", m->name);
	}
	if (st.st_dev != m->root_dev || st.st_ino != m->root_ino) {
		log_error("module %s: %s is not the directory loaded from the configuration "
			  "(device/inode %llu/%llu, now %llu/%llu): refused; reload rdmacpd if "
			  "it was moved on purpose",
			  m->name, m->path, (unsigned long long)m->root_dev,
			  (unsigned long long)m->root_ino, (unsigned long long)st.st_dev,
			  (unsigned long long)st.st_ino);
		return serve_refuse(c, PERR_PERMISSION, "module '%s' is unavailable", m->name);
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int serve_enter_module(struct conn *c, const struct policy_grant *gr, int *ret_rootfd)
{
	int r;

	assert(policy_grant_valid(gr) && gr->m);
	r = become_module_user(c, gr->m);
	if (r < 0) {
		return r;
	}
	return open_module_root(c, gr->m, ret_rootfd);
}
