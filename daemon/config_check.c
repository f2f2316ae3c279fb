/* SPDX-License-Identifier: MIT */
/*
 * rdmacpd.conf's checks that need more than one key (config_parse.h): a
 * module's path and the identity its sessions take, once its section is
 * read; the required keys, the limits against each other, the modules'
 * defaults from [global] and their paths against each other, once the file is.
 */
#include "config_parse.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Who the module's sessions run as (rsyncd's model): 'uid'/'gid' as
 * written; a missing 'gid' is the user's primary group; no 'uid' is the
 * unprivileged DAEMON_DEFAULT_USER, never root. A daemon that is not root
 * cannot switch: its sessions run as itself, and serve.c refuses a module
 * that asks for someone else.
 */
static int module_identity(struct parse_state *ps)
{
	struct module *m = config_cur_module(ps);
	uid_t uid;
	gid_t gid;
	int r;

	if (geteuid() != 0) {
		m->run_uid = m->have_uid ? m->uid : geteuid();
		m->run_gid = m->have_gid ? m->gid : getegid();
	} else if (m->have_uid) {
		m->run_uid = m->uid;
		r = config_lookup_user(NULL, m->uid, &uid, &gid);
		if (r < 0 && !m->have_gid) {
			return config_fail_at(
			    ps, ps->section_line,
			    "module [%s]: uid %u has no user entry to take a group "
			    "from: set 'gid' too",
			    m->name, (unsigned)m->uid);
		}
		m->run_gid = m->have_gid ? m->gid : gid;
	} else {
		r = config_lookup_user(DAEMON_DEFAULT_USER, 0, &uid, &gid);
		if (r < 0) {
			return config_fail_at(
			    ps, ps->section_line,
			    "module [%s] has no 'uid' and the default user '%s' %s: "
			    "create it (systemd-sysusers, or useradd --system %s), or set "
			    "'uid' (and 'gid')",
			    m->name, DAEMON_DEFAULT_USER,
			    r == -ESRCH ? "does not exist" : strerror(-r), DAEMON_DEFAULT_USER);
		}
		m->run_uid = uid;
		m->run_gid = m->have_gid ? m->gid : gid;
	}
	if (m->preserve_owner && m->run_uid != 0) {
		return config_fail_at(
		    ps, ps->owner_line,
		    "'preserve owner' in [%s] needs 'uid = root' (a session that is "
		    "not root cannot give files away)",
		    m->name);
	}
	return 0;
}

/* Checks that need the whole section. */
int config_finish_section(struct parse_state *ps)
{
	if (ps->section == SECTION_MODULE && config_cur_module(ps)->path[0] == '\0') {
		return config_fail_at(ps, ps->section_line, "module [%s] has no 'path'",
				      config_cur_module(ps)->name);
	}
	if (ps->section == SECTION_MODULE) {
		return module_identity(ps);
	}
	return 0;
}

/*
 * Lexically canonical form of an absolute path: no empty or "." components,
 * ".." taking the component before it away, no trailing slash ("/" stays
 * "/"). A module path may hold no symlink (modroot_pin), so ".." means on
 * disk what it means here, whether the path exists yet or not (a module
 * whose path is missing at load may appear later: its overlap is known now).
 */
static void canonical_path(const char *in, char *out, size_t outlen)
{
	size_t o = 0;

	assert(outlen > 1);
	out[o++] = '/';
	while (*in) {
		size_t n;

		in += strspn(in, "/");
		n = strcspn(in, "/");
		if (n == 0 || (n == 1 && in[0] == '.')) {
			in += n;
			continue;
		}
		if (n == 2 && in[0] == '.' && in[1] == '.') {
			while (o > 1 && out[--o] != '/') {
			}
			o = MAX(o, (size_t)1);
			in += n;
			continue;
		}
		if (o > 1 && o < outlen - 1) {
			out[o++] = '/';
		}
		n = MIN(n, outlen - 1 - o);
		memcpy(out + o, in, n);
		o += n;
		in += n;
	}
	out[o] = '\0';
}

/* Is a the same directory as b, or above it? Both canonical. */
static bool path_contains(const char *a, const char *b)
{
	size_t n = strlen(a);

	if (strcmp(a, "/") == 0) {
		return true;
	}
	return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

static bool paths_overlap(const char *a, const char *b)
{
	return path_contains(a, b) || path_contains(b, a);
}

/*
 * SECURITY.md G42: a module inside another (or the same directory twice)
 * would let a client reach the inner module's files under the outer
 * module's rules (allow, read only, uid). Compared as written (made
 * canonical) and, where the paths resolve, by their real paths too, so
 * symlinks and ".." can't hide an overlap.
 */
static int check_module_overlap(struct parse_state *ps)
{
	const struct daemon_config *c = ps->cfg;
	const size_t plen = sizeof(c->modules[0].path);
	_cleanup_free_ char *canon = calloc(c->nmodules, plen);
	_cleanup_free_ char *real = calloc(c->nmodules, plen);

	if (c->nmodules == 0) {
		return 0;
	}
	if (!canon || !real) {
		return config_fail_at(ps, ps->line, "out of memory");
	}
	for (size_t i = 0; i < c->nmodules; i++) {
		_cleanup_free_ char *rp = realpath(c->modules[i].path, NULL);

		canonical_path(c->modules[i].path, canon + i * plen, plen);
		/* Unresolvable now (missing: the module waits for it): the lexical check stands. */
		if (rp && strlen(rp) < plen) {
			strcpy(real + i * plen, rp);
		}
	}
	for (size_t j = 1; j < c->nmodules; j++) {
		for (size_t i = 0; i < j; i++) {
			const struct module *a = &c->modules[i], *b = &c->modules[j];
			const char *ra = real + i * plen, *rb = real + j * plen;

			if (!paths_overlap(canon + i * plen, canon + j * plen) &&
			    !(ra[0] && rb[0] && paths_overlap(ra, rb))) {
				continue;
			}
			return config_fail_at(
			    ps, ps->path_line[j],
			    "module [%s] path %s overlaps module [%s] path %s (line %u): "
			    "a module must not contain another, or a client could reach "
			    "one module's files under the other's rules",
			    b->name, ESC(b->path), a->name, ESC(a->path), ps->path_line[i]);
		}
	}
	return 0;
}

/*
 * SECURITY.md G47: connections that have not finished TLS and HELLO get at
 * most "max unauthenticated" of the "max connections" slots, so the rest
 * stays free for clients that authenticate. Defaults follow "max
 * connections"; values written out are checked against it.
 */
static int check_unauth_limits(struct parse_state *ps)
{
	struct daemon_config *c = ps->cfg;
	unsigned most = c->max_connections > 1 ? c->max_connections - 1 : 1;

	if (!ps->unauth_line) {
		c->max_unauth = MAX(c->max_connections / 2, 1u);
	} else if (c->max_unauth > most) {
		return config_fail_at(
		    ps, ps->unauth_line,
		    "'max unauthenticated' (%u) must be below 'max connections' (%u): "
		    "the difference is reserved for authenticated sessions",
		    c->max_unauth, c->max_connections);
	}
	if (!ps->unauth_per_host_line) {
		/* One host may run several clients at once: as many as it may connect. */
		c->max_unauth_per_host = MIN(c->max_per_host, c->max_unauth);
	} else if (c->max_unauth_per_host > c->max_unauth) {
		return config_fail_at(ps, ps->unauth_per_host_line,
				      "'max unauthenticated per host' (%u) exceeds "
				      "'max unauthenticated' (%u)",
				      c->max_unauth_per_host, c->max_unauth);
	}
	return 0;
}

/* Cross-key checks and required keys, once the whole file is read. */
int config_finish(struct parse_state *ps)
{
	struct daemon_config *c = ps->cfg;
	unsigned eof_line = MAX(ps->line, 1u);
	unsigned gline = ps->have_global ? ps->global_line : eof_line;
	static const struct {
		const char *key;
		size_t off;
	} required[] = {
		{ "cert", offsetof(struct daemon_config, cert) },
		{ "key", offsetof(struct daemon_config, key) },
		{ "ca", offsetof(struct daemon_config, ca) },
	};

	if (config_finish_section(ps) < 0) {
		return -EINVAL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(required); i++) {
		if (((const char *)c + required[i].off)[0] == '\0') {
			return config_fail_at(ps, gline, "missing required key '%s' in [global]",
					      required[i].key);
		}
	}
	if (c->max_per_host > c->max_connections) {
		/* The default per-host cap follows a smaller global cap. */
		if (!ps->per_host_line) {
			c->max_per_host = c->max_connections;
		} else {
			return config_fail_at(ps, ps->per_host_line,
					      "'max connections per host' (%u) exceeds "
					      "'max connections' (%u)",
					      c->max_per_host, c->max_connections);
		}
	}
	if (c->pool_size > c->memory_budget) {
		return config_fail_at(ps, ps->pool_line ? ps->pool_line : ps->budget_line,
				      "'pool size' (%" PRIu64
				      " MiB) exceeds 'memory budget' (%" PRIu64 " MiB)",
				      c->pool_size >> 20, c->memory_budget >> 20);
	}
	if (ps->max_slots_line && (uint64_t)c->max_slots * DAEMON_MIN_CHUNK > c->pool_size) {
		/* A count no session could reach: "pool size" holds fewer even of the smallest. */
		return config_fail_at(ps, ps->max_slots_line,
				      "'max slots' (%u) is more than 'pool size' (%" PRIu64
				      " MiB) can ever hold: %" PRIu64
				      " slots of the smallest chunk (%u KiB); raise 'pool size' "
				      "or lower 'max slots'",
				      c->max_slots, c->pool_size >> 20,
				      c->pool_size / DAEMON_MIN_CHUNK, DAEMON_MIN_CHUNK >> 10);
	}
	if (check_unauth_limits(ps) < 0) {
		return -EINVAL;
	}
	/* A certificate without its key (or the other way) would present nobody to the next hop. */
	if ((c->relay_cert[0] == '\0') != (c->relay_key[0] == '\0')) {
		return config_fail_at(ps, gline, "'%s' is set without '%s' in [global]",
				      c->relay_cert[0] ? "relay certificate" : "relay key",
				      c->relay_cert[0] ? "relay key" : "relay certificate");
	}
	/* [global] may come after a module: its default is known only now. */
	for (size_t i = 0; i < c->nmodules; i++) {
		if (c->modules[i].encryption == ENCRYPTION_INHERIT) {
			c->modules[i].encryption = c->encryption;
		}
		if (c->modules[i].tos == MODULE_TOS_INHERIT) {
			c->modules[i].tos = c->tos;
		}
	}
	return check_module_overlap(ps);
}
