/* SPDX-License-Identifier: MIT */
/*
 * rdmacpd.conf reader (see config.h). libinih splits lines into sections,
 * keys and values and strips comments; everything else is ours:
 *
 *  - The file is read whole, once, into memory (conffile_read), and only
 *    if it is a regular file within CONFFILE_MAX_SIZE: the config is named on
 *    the command line and read again on every SIGHUP, and a device, a FIFO
 *    or a file that keeps growing must not hang or exhaust the daemon.
 *  - inih r55 (as Debian builds it) hands the handler neither the line number
 *    nor the start of a section, and truncates section names to 49 bytes. So
 *    we feed inih through our own line reader over that memory, which counts
 *    lines, enforces the line-length cap and tracks the current section
 *    itself. inih calls the reader and the handler strictly in turn, so when
 *    the handler runs, the reader's counter is the key's line.
 *  - Only the first error is kept; after it nothing more is interpreted.
 *  - Files named in the config (certificates, module paths) are checked at
 *    load, so a mistake is reported at startup or on SIGHUP with its line,
 *    not at the first client connection.
 */
#include "config.h"

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <ini.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "conffile.h"
#include "engine.h"
#include "fspath.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "tls.h"

#define CONFIG_MIN_POOL (UINT64_C(1) << 20)

enum section_kind {
	SECTION_NONE,
	SECTION_GLOBAL,
	SECTION_MODULE,
};

struct parse_state {
	const char *text; /* the whole file (conffile_read) */
	size_t text_len;
	size_t pos;    /* start of the next line in text */
	unsigned line; /* number of the line inih is working on */
	struct daemon_config *cfg;
	size_t modules_cap;

	enum section_kind section;
	unsigned section_line; /* line of the current section header */
	uint32_t seen;	       /* single-valued keys seen in this section (bit per key) */
	bool have_global;
	unsigned global_line;
	bool ro_set, wo_set; /* explicit "read only" / "write only" in this module */
	unsigned owner_line; /* "preserve owner" in this module, 0 if absent */

	/* Lines of keys that are checked against each other after the parse. */
	unsigned max_conn_line, per_host_line, budget_line, pool_line;
	unsigned unauth_line, unauth_per_host_line;
	/* Line of each module's 'path', for the overlap check after the parse. */
	unsigned path_line[DAEMON_MAX_MODULES];

	const char *file;
	char *err;
	size_t errlen;
	bool failed;
	unsigned fail_line;
};

DEFINE_TRIVIAL_CLEANUP_FUNC(struct daemon_config *, daemon_config_free);

_printf_(3, 4) static int fail_at(struct parse_state *ps, unsigned line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (ps->failed) {
		return -EINVAL;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(ps->err, ps->errlen, "%s:%u: %s", ps->file, line, msg);
	ps->failed = true;
	ps->fail_line = line;
	return -EINVAL;
}

#define fail(ps, ...) fail_at((ps), (ps)->line, __VA_ARGS__)

/* Values are quoted in messages; escape them so a hostile byte can't forge log lines. */
#define ESC(v) log_escape((v), (char[256]){ 0 }, 256)

/* ---- value parsers: return 0 or a negative errno, never log (numbers: parse.h) ---- */

/*
 * An allow name: what a certificate's CN, DNS name or IP address can be and
 * 'allow' can match. Quotes, '#', '=' and the like are refused: they are
 * a mistake in the file (a quoted list, a comment after the value), never a
 * name a client has, and taking them as names would lock that client out.
 */
static bool allow_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= sizeof(((struct allow_rule *)0)->name)) {
		return false;
	}
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_:@+") ==
	       n;
}

/*
 * List values ('allow', 'listen'): entries separated by commas, blanks or
 * both, as rsyncd reads its lists ("alice, bob", "alice,bob", "alice bob").
 * An empty entry (",,", or a comma at either end) is refused, not skipped:
 * it is usually a name that went missing. fn gets each entry; the first
 * failure stops the walk.
 */
static int for_each_list_entry(struct parse_state *ps, const char *key, const char *value,
			       int (*fn)(struct parse_state *ps, const char *key,
					 const char *entry))
{
	static const char blanks[] = " \t";
	const char *p = value + strspn(value, blanks);

	if (*p == '\0') {
		return fail(ps, "'%s' is empty", key);
	}
	for (;;) {
		size_t n;
		_cleanup_free_ char *entry = NULL;
		int r;

		if (*p == ',') {
			return fail(ps, "empty entry in '%s' (a comma with nothing before it)",
				    key);
		}
		n = strcspn(p, ", \t");
		entry = strndup(p, n);
		if (!entry) {
			return fail(ps, "out of memory");
		}
		r = fn(ps, key, entry);
		if (r < 0) {
			return r;
		}
		p += n;
		p += strspn(p, blanks);
		if (*p == ',') {
			p++;
			p += strspn(p, blanks);
			if (*p == '\0') {
				return fail(ps, "'%s' ends with a comma (an entry is missing)",
					    key);
			}
		}
		if (*p == '\0') {
			return 0;
		}
	}
}

static bool module_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= sizeof(((struct module *)0)->name)) {
		return false;
	}
	/* "." and ".." would read like path components in "host::module/path". */
	if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
		return false;
	}
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

/*
 * Returns -EINVAL for bad syntax, -ERANGE for a bad port, -EADDRNOTAVAIL when
 * the host does not resolve. Host names are resolved once, here: the daemon
 * binds what they meant at load time.
 */
int parse_listen_addr(const char *text, struct listen_addr *ret)
{
	char host[256];
	const char *port_text = NULL;
	uint16_t port = DAEMON_DEFAULT_PORT;
	char portbuf[8];
	struct addrinfo hints = {
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV,
	};
	struct addrinfo *ai = NULL;
	const char *colon;
	struct listen_addr la = { 0 };
	int r;

	if (text[0] == '[') {
		const char *close = strchr(text, ']');

		if (!close || (size_t)(close - text - 1) >= sizeof(host) || close == text + 1) {
			return -EINVAL;
		}
		memcpy(host, text + 1, (size_t)(close - text - 1));
		host[close - text - 1] = '\0';
		if (close[1] == ':') {
			port_text = close + 2;
		} else if (close[1] != '\0') {
			return -EINVAL;
		}
		/* Brackets are for IPv6 literals only. */
		hints.ai_family = AF_INET6;
		hints.ai_flags |= AI_NUMERICHOST;
	} else if ((colon = strchr(text, ':')) && strchr(colon + 1, ':')) {
		/* Two or more colons and no brackets: a bare IPv6 literal, default port. */
		if (strlen(text) >= sizeof(host)) {
			return -EINVAL;
		}
		strcpy(host, text);
		hints.ai_family = AF_INET6;
		hints.ai_flags |= AI_NUMERICHOST;
	} else {
		size_t hl = colon ? (size_t)(colon - text) : strlen(text);

		if (hl >= sizeof(host)) {
			return -EINVAL;
		}
		memcpy(host, text, hl);
		host[hl] = '\0';
		if (colon) {
			port_text = colon + 1;
		}
		/* "", "*": every IPv4 address, like the default listen address. */
		if (host[0] == '\0' || strcmp(host, "*") == 0) {
			strcpy(host, "0.0.0.0");
		}
		hints.ai_family = AF_UNSPEC;
	}
	if (port_text) {
		if (parse_port(port_text, &port) < 0) {
			return -ERANGE;
		}
	}
	if (host[0] == '\0') {
		return -EINVAL;
	}

	snprintf(portbuf, sizeof(portbuf), "%u", port);
	r = getaddrinfo(host, portbuf, &hints, &ai);
	if (r != 0) {
		return (hints.ai_flags & AI_NUMERICHOST) ? -EINVAL : -EADDRNOTAVAIL;
	}
	if (ai->ai_addrlen > sizeof(la.ss)) {
		freeaddrinfo(ai);
		return -EINVAL;
	}
	memcpy(&la.ss, ai->ai_addr, ai->ai_addrlen);
	la.len = ai->ai_addrlen;
	freeaddrinfo(ai);

	/* Keep the text as written when it fits, else the numeric form. */
	if (strlen(text) < sizeof(la.text)) {
		strcpy(la.text, text);
	} else {
		char num[NI_MAXHOST];

		if (getnameinfo((struct sockaddr *)&la.ss, la.len, num, sizeof(num), NULL, 0,
				NI_NUMERICHOST) != 0) {
			return -EINVAL;
		}
		snprintf(la.text, sizeof(la.text),
			 la.ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", num, port);
	}
	*ret = la;
	return 0;
}

/* The user's uid and primary group, by name (name) or by number (name NULL). */
static int lookup_user(const char *name, uid_t uid, uid_t *ret_uid, gid_t *ret_gid)
{
	struct passwd pw, *res = NULL;
	_cleanup_free_ char *buf = NULL;
	size_t len = 16384;
	int r;

	for (;;) {
		buf = malloc(len);
		if (!buf) {
			return -ENOMEM;
		}
		r = name ? getpwnam_r(name, &pw, buf, len, &res)
			 : getpwuid_r(uid, &pw, buf, len, &res);
		if (r != ERANGE || len >= (1u << 20)) {
			break;
		}
		free(TAKE_PTR(buf));
		len *= 4;
	}
	if (r != 0) {
		return -r;
	}
	if (!res) {
		return -ESRCH;
	}
	*ret_uid = pw.pw_uid;
	*ret_gid = pw.pw_gid;
	return 0;
}

/* A numeric uid or gid; -1 means "no change" to chown() and setresuid(), so never that. */
static int parse_id(const char *s, uint32_t *ret)
{
	uint64_t v;
	int r = parse_uint(s, 0, UINT32_MAX - 1, &v);

	if (r < 0) {
		return r;
	}
	*ret = (uint32_t)v;
	return 0;
}

static int resolve_user(const char *s, uid_t *ret)
{
	gid_t gid;

	if (isdigit((unsigned char)s[0])) {
		return parse_id(s, ret);
	}
	return lookup_user(s, 0, ret, &gid);
}

static int resolve_group(const char *s, gid_t *ret)
{
	struct group gr, *res = NULL;
	_cleanup_free_ char *buf = NULL;
	size_t len = 16384;
	int r;

	if (isdigit((unsigned char)s[0])) {
		return parse_id(s, ret);
	}
	for (;;) {
		buf = malloc(len);
		if (!buf) {
			return -ENOMEM;
		}
		r = getgrnam_r(s, &gr, buf, len, &res);
		if (r != ERANGE || len >= (1u << 20)) {
			break;
		}
		free(TAKE_PTR(buf));
		len *= 4;
	}
	if (r != 0) {
		return -r;
	}
	if (!res) {
		return -ESRCH;
	}
	*ret = gr.gr_gid;
	return 0;
}

/* A readable regular file, checked by opening it as the daemon will. */
static int check_readable_file(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;

	if (fd < 0) {
		return negerrno();
	}
	if (fstat(fd, &st) < 0) {
		return negerrno();
	}
	if (!S_ISREG(st.st_mode)) {
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	return 0;
}

/* ---- [global] keys ---- */

static int set_path_key(struct parse_state *ps, const char *key, const char *value, char *dst,
			size_t dstlen)
{
	int r;

	if (value[0] == '\0') {
		return fail(ps, "'%s' is empty", key);
	}
	if (strlen(value) >= dstlen) {
		return fail(ps, "'%s' path is too long", key);
	}
	r = check_readable_file(value);
	if (r < 0) {
		return fail(ps, "cannot read '%s' file %s: %s", key, ESC(value), strerror(-r));
	}
	strcpy(dst, value);
	return 0;
}

static int add_listen(struct parse_state *ps, const char *key, const char *value)
{
	struct daemon_config *c = ps->cfg;
	struct listen_addr la;
	int r;

	if (c->nlisten >= DAEMON_MAX_LISTEN) {
		return fail(ps, "too many '%s' addresses (at most %d)", key, DAEMON_MAX_LISTEN);
	}
	r = parse_listen_addr(value, &la);
	if (r == -ERANGE) {
		return fail(ps, "bad port in '%s' address '%s' (must be 1..65535)", key,
			    ESC(value));
	}
	if (r == -EADDRNOTAVAIL) {
		return fail(ps, "cannot resolve host in '%s' address '%s'", key, ESC(value));
	}
	if (r < 0) {
		return fail(ps, "bad '%s' address '%s' (expected host, host:port or [v6]:port)",
			    key, ESC(value));
	}
	for (size_t i = 0; i < c->nlisten; i++) {
		if (c->listen[i].len == la.len && memcmp(&c->listen[i].ss, &la.ss, la.len) == 0) {
			return fail(ps, "duplicate '%s' address '%s'", key, ESC(value));
		}
	}
	c->listen[c->nlisten++] = la;
	return 0;
}

/* One or more addresses per line, and the key may repeat. */
static int g_listen(struct parse_state *ps, const char *key, const char *value)
{
	return for_each_list_entry(ps, key, value, add_listen);
}

static int g_cert(struct parse_state *ps, const char *key, const char *value)
{
	return set_path_key(ps, key, value, ps->cfg->cert, sizeof(ps->cfg->cert));
}

static int g_key(struct parse_state *ps, const char *key, const char *value)
{
	return set_path_key(ps, key, value, ps->cfg->key, sizeof(ps->cfg->key));
}

static int g_ca(struct parse_state *ps, const char *key, const char *value)
{
	return set_path_key(ps, key, value, ps->cfg->ca, sizeof(ps->cfg->ca));
}

static int set_uint_key(struct parse_state *ps, const char *key, const char *value, uint64_t min,
			uint64_t max, unsigned *dst)
{
	uint64_t v;

	if (parse_uint(value, min, max, &v) < 0) {
		return fail(ps, "bad '%s' value '%s' (must be %" PRIu64 "..%" PRIu64 ")", key,
			    ESC(value), min, max);
	}
	*dst = (unsigned)v;
	return 0;
}

static int g_max_conn(struct parse_state *ps, const char *key, const char *value)
{
	ps->max_conn_line = ps->line;
	return set_uint_key(ps, key, value, 1, 65536, &ps->cfg->max_connections);
}

static int g_per_host(struct parse_state *ps, const char *key, const char *value)
{
	/* Checked against "max connections" after the parse: it may come later. */
	ps->per_host_line = ps->line;
	return set_uint_key(ps, key, value, 1, 65536, &ps->cfg->max_per_host);
}

static int g_max_unauth(struct parse_state *ps, const char *key, const char *value)
{
	ps->unauth_line = ps->line;
	return set_uint_key(ps, key, value, 1, 65536, &ps->cfg->max_unauth);
}

static int g_max_unauth_per_host(struct parse_state *ps, const char *key, const char *value)
{
	ps->unauth_per_host_line = ps->line;
	return set_uint_key(ps, key, value, 1, 65536, &ps->cfg->max_unauth_per_host);
}

static int g_handshake(struct parse_state *ps, const char *key, const char *value)
{
	return set_uint_key(ps, key, value, 1, 300, &ps->cfg->handshake_timeout_s);
}

static int g_idle(struct parse_state *ps, const char *key, const char *value)
{
	return set_uint_key(ps, key, value, 1, 86400, &ps->cfg->idle_timeout_s);
}

static int g_hash_threads(struct parse_state *ps, const char *key, const char *value)
{
	unsigned n = 0;
	int r;

	if (!strcmp(value, "auto")) {
		ps->cfg->hash_threads = -1;
		return 0;
	}
	r = set_uint_key(ps, key, value, 0, ENGINE_HASH_THREADS_MAX, &n);
	if (r >= 0) {
		ps->cfg->hash_threads = (int)n;
	}
	return r;
}

/* "tos = N": 0..255, the IP TOS byte (DSCP << 2 | ECN) of the daemon's RDMA lanes. */
static int parse_tos(struct parse_state *ps, const char *key, const char *value, int *dst)
{
	unsigned v = 0;
	int r = set_uint_key(ps, key, value, 0, 255, &v);

	if (r == 0) {
		*dst = (int)v;
	}
	return r;
}

static int g_tos(struct parse_state *ps, const char *key, const char *value)
{
	return parse_tos(ps, key, value, &ps->cfg->tos);
}

static int g_partial_max_age(struct parse_state *ps, const char *key, const char *value)
{
	/* 0: kept until resumed; at most ten years. */
	return set_uint_key(ps, key, value, 0, 10u * 366 * 86400, &ps->cfg->partial_max_age_s);
}

static int set_size_key(struct parse_state *ps, const char *key, const char *value, uint64_t *dst)
{
	uint64_t v;

	if (parse_size(value, &v) < 0) {
		return fail(ps, "bad size '%s' for '%s' (a number with optional K, M, G or T)",
			    ESC(value), key);
	}
	if (v < CONFIG_MIN_POOL) {
		return fail(ps, "'%s' %s is below the minimum of 1M", key, ESC(value));
	}
	*dst = v;
	return 0;
}

static int g_budget(struct parse_state *ps, const char *key, const char *value)
{
	ps->budget_line = ps->line;
	return set_size_key(ps, key, value, &ps->cfg->memory_budget);
}

static int g_pool(struct parse_state *ps, const char *key, const char *value)
{
	ps->pool_line = ps->line;
	return set_size_key(ps, key, value, &ps->cfg->pool_size);
}

static int g_log_level(struct parse_state *ps, const char *key, const char *value)
{
	static const struct {
		const char *name;
		int level;
	} levels[] = {
		{ "error", LOG_ERR }, { "warning", LOG_WARNING }, { "notice", LOG_NOTICE },
		{ "info", LOG_INFO }, { "debug", LOG_DEBUG },
	};

	for (size_t i = 0; i < ARRAY_SIZE(levels); i++) {
		if (strcasecmp(value, levels[i].name) == 0) {
			ps->cfg->log_level = levels[i].level;
			return 0;
		}
	}
	return fail(ps, "bad '%s' '%s' (error, warning, notice, info or debug)", key, ESC(value));
}

static int parse_encryption(struct parse_state *ps, const char *key, const char *value, int *ret)
{
	if (strcasecmp(value, "required") == 0) {
		*ret = ENCRYPTION_REQUIRED;
	} else if (strcasecmp(value, "allowed") == 0) {
		*ret = ENCRYPTION_ALLOWED;
	} else if (strcasecmp(value, "off") == 0) {
		*ret = ENCRYPTION_OFF;
	} else {
		return fail(ps, "bad '%s' '%s' (required, allowed or off)", key, ESC(value));
	}
	return 0;
}

static int g_encryption(struct parse_state *ps, const char *key, const char *value)
{
	return parse_encryption(ps, key, value, &ps->cfg->encryption);
}

/* ---- module keys ---- */

static struct module *cur_module(struct parse_state *ps)
{
	assert(ps->section == SECTION_MODULE && ps->cfg->nmodules > 0);
	return &ps->cfg->modules[ps->cfg->nmodules - 1];
}

static int m_path(struct parse_state *ps, const char *key, const char *value)
{
	struct module *m = cur_module(ps);
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	if (value[0] != '/') {
		return fail(ps, "'%s' must be an absolute path, not '%s'", key, ESC(value));
	}
	if (strlen(value) >= sizeof(m->path)) {
		return fail(ps, "'%s' is too long", key);
	}
	/*
	 * Resolved as every OPEN will resolve it (no symlink anywhere), and its
	 * identity kept: a directory swapped in later is refused (serve.c).
	 */
	r = fspath_open_root(value, &fd);
	if (r == -ELOOP) {
		return fail(ps, "module path %s has a symlink in it (write the real path)",
			    ESC(value));
	}
	if (r == -ENOTDIR) {
		return fail(ps, "module path %s is not a directory", ESC(value));
	}
	if (r < 0) {
		return fail(ps, "module path %s: %s", ESC(value), strerror(-r));
	}
	if (fstat(fd, &st) < 0) {
		return fail(ps, "module path %s: %s", ESC(value), strerror(errno));
	}
	strcpy(m->path, value);
	m->root_dev = st.st_dev;
	m->root_ino = st.st_ino;
	ps->path_line[ps->cfg->nmodules - 1] = ps->line;
	return 0;
}

static int set_bool_key(struct parse_state *ps, const char *key, const char *value, bool *dst)
{
	if (parse_bool(value, dst) < 0) {
		return fail(ps, "bad boolean '%s' for '%s' (yes, no, true, false, 1 or 0)",
			    ESC(value), key);
	}
	return 0;
}

static int g_lanes_any_source(struct parse_state *ps, const char *key, const char *value)
{
	return set_bool_key(ps, key, value, &ps->cfg->lanes_any_source);
}

/*
 * Daemon rails: one IP address (no port, no name) that is this host's: a
 * UDP socket can bind it. Which RDMA device owns it is found per session.
 */
static int add_rail(struct parse_state *ps, const char *key, const char *value)
{
	struct daemon_config *c = ps->cfg;
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	socklen_t len;
	_cleanup_close_ int fd = -1;

	if (c->nrails >= DAEMON_MAX_RAILS) {
		return fail(ps, "too many '%s' addresses (at most %d)", key, DAEMON_MAX_RAILS);
	}
	if (inet_pton(AF_INET, value, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		len = sizeof(*s4);
	} else if (inet_pton(AF_INET6, value, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		len = sizeof(*s6);
	} else {
		return fail(ps, "bad '%s' address '%s' (expected an IPv4 or IPv6 address, no port)",
			    key, ESC(value));
	}
	fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0) {
		return fail(ps, "'%s' address '%s' is not an address of this host: %s", key,
			    ESC(value), strerror(errno));
	}
	for (size_t i = 0; i < c->nrails; i++) {
		if (memcmp(&c->rails[i], &ss, sizeof(ss)) == 0) {
			return fail(ps, "duplicate '%s' address '%s'", key, ESC(value));
		}
	}
	c->rails[c->nrails++] = ss;
	return 0;
}

/* One or more addresses per line, and the key may repeat. */
static int g_rails(struct parse_state *ps, const char *key, const char *value)
{
	return for_each_list_entry(ps, key, value, add_rail);
}

static int check_ro_wo(struct parse_state *ps)
{
	const struct module *m = cur_module(ps);

	/* Both would make a module nobody can use: surely a typo. */
	if (m->read_only && m->write_only) {
		return fail(ps, "'read only' and 'write only' are both set in [%s]", m->name);
	}
	return 0;
}

static int m_read_only(struct parse_state *ps, const char *key, const char *value)
{
	int r = set_bool_key(ps, key, value, &cur_module(ps)->read_only);

	return r < 0 ? r : check_ro_wo(ps);
}

static int m_write_only(struct parse_state *ps, const char *key, const char *value)
{
	int r = set_bool_key(ps, key, value, &cur_module(ps)->write_only);

	return r < 0 ? r : check_ro_wo(ps);
}

/* One allow rule into rules (*n of them so far, at most DAEMON_MAX_ALLOW); where: the section. */
static int add_allow_rule(struct parse_state *ps, const char *key, const char *tok,
			  struct allow_rule *rules, size_t *n, const char *where)
{
	struct allow_rule rule = { 0 };

	if (*n >= DAEMON_MAX_ALLOW) {
		return fail(ps, "too many '%s' rules in [%s] (at most %d)", key, where,
			    DAEMON_MAX_ALLOW);
	}
	if (strcmp(tok, "*") == 0) {
		rule.kind = ALLOW_ANY;
	} else if (strncasecmp(tok, "sha256:", 7) == 0) {
		rule.kind = ALLOW_FINGERPRINT;
		if (tls_parse_fingerprint(tok, rule.fp) < 0) {
			return fail(ps,
				    "bad fingerprint '%s' in '%s' (sha256: and 64 hex digits, "
				    "with or without ':' between pairs)",
				    ESC(tok), key);
		}
	} else if (tls_parse_fingerprint(tok, rule.fp) == 0) {
		/* 64 hex digits, or 32 pairs with ':': no CN, DNS name or address looks so. */
		rule.kind = ALLOW_FINGERPRINT;
	} else {
		rule.kind = ALLOW_NAME;
		if (!allow_name_valid(tok)) {
			return fail(ps,
				    "bad entry '%s' in '%s' (a certificate name: letters, digits "
				    "and . - _ : @ +; sha256:FINGERPRINT; or *)",
				    ESC(tok), key);
		}
		strcpy(rule.name, tok);
	}
	rules[(*n)++] = rule;
	return 0;
}

static int add_allow(struct parse_state *ps, const char *key, const char *tok)
{
	struct module *m = cur_module(ps);

	return add_allow_rule(ps, key, tok, m->allow, &m->nallow, m->name);
}

/* 'allow bench' in [global]: who may run rdmacp bench (same entries as a module's 'allow'). */
static int add_bench_allow(struct parse_state *ps, const char *key, const char *tok)
{
	return add_allow_rule(ps, key, tok, ps->cfg->bench_allow, &ps->cfg->nbench_allow, "global");
}

static int g_allow_bench(struct parse_state *ps, const char *key, const char *value)
{
	return for_each_list_entry(ps, key, value, add_bench_allow);
}

static int m_allow(struct parse_state *ps, const char *key, const char *value)
{
	return for_each_list_entry(ps, key, value, add_allow);
}

static int m_uid(struct parse_state *ps, const char *key, const char *value)
{
	struct module *m = cur_module(ps);
	int r = resolve_user(value, &m->uid);

	if (r < 0) {
		return fail(ps, "bad '%s' '%s': %s", key, ESC(value),
			    r == -ESRCH ? "no such user" : strerror(-r));
	}
	m->have_uid = true;
	return 0;
}

static int m_gid(struct parse_state *ps, const char *key, const char *value)
{
	struct module *m = cur_module(ps);
	int r = resolve_group(value, &m->gid);

	if (r < 0) {
		return fail(ps, "bad '%s' '%s': %s", key, ESC(value),
			    r == -ESRCH ? "no such group" : strerror(-r));
	}
	m->have_gid = true;
	return 0;
}

static int m_keep_setid(struct parse_state *ps, const char *key, const char *value)
{
	return set_bool_key(ps, key, value, &cur_module(ps)->keep_setid);
}

static int m_preserve_owner(struct parse_state *ps, const char *key, const char *value)
{
	ps->owner_line = ps->line;
	return set_bool_key(ps, key, value, &cur_module(ps)->preserve_owner);
}

static int m_devices(struct parse_state *ps, const char *key, const char *value)
{
	return set_bool_key(ps, key, value, &cur_module(ps)->devices);
}

/* A module's limit on what a push may store: any size, 0 included (only empty files). */
static int set_limit_key(struct parse_state *ps, const char *key, const char *value, uint64_t *dst)
{
	if (parse_size(value, dst) < 0) {
		return fail(ps, "bad size '%s' for '%s' (a number with optional K, M, G or T)",
			    ESC(value), key);
	}
	return 0;
}

static int m_max_file_size(struct parse_state *ps, const char *key, const char *value)
{
	return set_limit_key(ps, key, value, &cur_module(ps)->max_file_size);
}

static int m_max_session_bytes(struct parse_state *ps, const char *key, const char *value)
{
	return set_limit_key(ps, key, value, &cur_module(ps)->max_session_bytes);
}

static int m_max_files(struct parse_state *ps, const char *key, const char *value)
{
	return set_uint_key(ps, key, value, 1, UINT32_MAX, &cur_module(ps)->max_files);
}

static int m_encryption(struct parse_state *ps, const char *key, const char *value)
{
	return parse_encryption(ps, key, value, &cur_module(ps)->encryption);
}

static int m_tos(struct parse_state *ps, const char *key, const char *value)
{
	return parse_tos(ps, key, value, &cur_module(ps)->tos);
}

/* Shown to the clients the module allows, in `rdmacp ls HOST`. */
static int m_comment(struct parse_state *ps, const char *key, const char *value)
{
	struct module *m = cur_module(ps);

	if (strlen(value) >= sizeof(m->comment)) {
		return fail(ps, "'%s' is too long (at most %zu bytes)", key,
			    sizeof(m->comment) - 1);
	}
	snprintf(m->comment, sizeof(m->comment), "%s", value);
	return 0;
}

struct key_handler {
	const char *name;
	bool repeat;
	int (*set)(struct parse_state *ps, const char *key, const char *value);
};

static const struct key_handler global_keys[] = {
	{ "listen", true, g_listen },
	{ "cert", false, g_cert },
	{ "key", false, g_key },
	{ "ca", false, g_ca },
	{ "max connections", false, g_max_conn },
	{ "max connections per host", false, g_per_host },
	{ "max unauthenticated", false, g_max_unauth },
	{ "max unauthenticated per host", false, g_max_unauth_per_host },
	{ "handshake timeout", false, g_handshake },
	{ "idle timeout", false, g_idle },
	{ "hash threads", false, g_hash_threads },
	{ "partial max age", false, g_partial_max_age },
	{ "memory budget", false, g_budget },
	{ "pool size", false, g_pool },
	{ "log level", false, g_log_level },
	{ "allow bench", true, g_allow_bench },
	{ "encryption", false, g_encryption },
	{ "lanes from other addresses", false, g_lanes_any_source },
	{ "tos", false, g_tos },
	{ "rails", true, g_rails },
};

static const struct key_handler module_keys[] = {
	{ "path", false, m_path },
	{ "read only", false, m_read_only },
	{ "write only", false, m_write_only },
	{ "allow", true, m_allow },
	{ "uid", false, m_uid },
	{ "gid", false, m_gid },
	{ "keep setid", false, m_keep_setid },
	{ "preserve owner", false, m_preserve_owner },
	{ "comment", false, m_comment },
	{ "max file size", false, m_max_file_size },
	{ "max session bytes", false, m_max_session_bytes },
	{ "max files per session", false, m_max_files },
	{ "devices", false, m_devices },
	{ "encryption", false, m_encryption },
	{ "tos", false, m_tos },
};

_Static_assert(ARRAY_SIZE(global_keys) <= 32 && ARRAY_SIZE(module_keys) <= 32,
	       "'seen' is a 32-bit mask");

static int ini_handler_cb(void *user, const char *section, const char *name, const char *value)
{
	struct parse_state *ps = user;
	const struct key_handler *keys;
	size_t nkeys;

	(void)section; /* inih truncates long names; ps->section is authoritative */
	if (ps->failed) {
		return 1;
	}
	switch (ps->section) {
	case SECTION_NONE:
		fail(ps, "key '%s' outside any section (put it under [global])", ESC(name));
		return 0;
	case SECTION_GLOBAL:
		keys = global_keys;
		nkeys = ARRAY_SIZE(global_keys);
		break;
	case SECTION_MODULE:
	default:
		keys = module_keys;
		nkeys = ARRAY_SIZE(module_keys);
		break;
	}
	for (size_t i = 0; i < nkeys; i++) {
		if (strcasecmp(name, keys[i].name) != 0) {
			continue;
		}
		if (!keys[i].repeat) {
			if (ps->seen & (UINT32_C(1) << i)) {
				fail(ps, "duplicate key '%s'", keys[i].name);
				return 0;
			}
			ps->seen |= UINT32_C(1) << i;
		}
		return keys[i].set(ps, keys[i].name, value) < 0 ? 0 : 1;
	}
	if (ps->section == SECTION_GLOBAL) {
		fail(ps, "unknown key '%s' in [global]", ESC(name));
	} else {
		fail(ps, "unknown key '%s' in module [%s]", ESC(name), cur_module(ps)->name);
	}
	return 0;
}

/* ---- sections, tracked by the line reader ---- */

/*
 * Who the module's sessions run as (rsyncd's model): 'uid'/'gid' as
 * written; a missing 'gid' is the user's primary group; no 'uid' is the
 * unprivileged DAEMON_DEFAULT_USER, never root. A daemon that is not root
 * cannot switch: its sessions run as itself, and serve.c refuses a module
 * that asks for someone else.
 */
static int module_identity(struct parse_state *ps)
{
	struct module *m = cur_module(ps);
	uid_t uid;
	gid_t gid;
	int r;

	if (geteuid() != 0) {
		m->run_uid = m->have_uid ? m->uid : geteuid();
		m->run_gid = m->have_gid ? m->gid : getegid();
	} else if (m->have_uid) {
		m->run_uid = m->uid;
		r = lookup_user(NULL, m->uid, &uid, &gid);
		if (r < 0 && !m->have_gid) {
			return fail_at(ps, ps->section_line,
				       "module [%s]: uid %u has no user entry to take a group "
				       "from: set 'gid' too",
				       m->name, (unsigned)m->uid);
		}
		m->run_gid = m->have_gid ? m->gid : gid;
	} else {
		r = lookup_user(DAEMON_DEFAULT_USER, 0, &uid, &gid);
		if (r < 0) {
			return fail_at(
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
		return fail_at(ps, ps->owner_line,
			       "'preserve owner' in [%s] needs 'uid = root' (a session that is "
			       "not root cannot give files away)",
			       m->name);
	}
	return 0;
}

/* Checks that need the whole section. */
static int finish_section(struct parse_state *ps)
{
	if (ps->section == SECTION_MODULE && cur_module(ps)->path[0] == '\0') {
		return fail_at(ps, ps->section_line, "module [%s] has no 'path'",
			       cur_module(ps)->name);
	}
	if (ps->section == SECTION_MODULE) {
		return module_identity(ps);
	}
	return 0;
}

static int add_module(struct parse_state *ps, const char *name)
{
	struct daemon_config *c = ps->cfg;
	struct module *m;

	if (!module_name_valid(name)) {
		return fail(ps,
			    "bad section name [%s] (a module name is 1-63 of A-Z a-z 0-9 . _ -)",
			    ESC(name));
	}
	if (daemon_config_module(c, name)) {
		return fail(ps, "duplicate module [%s]", name);
	}
	if (c->nmodules >= DAEMON_MAX_MODULES) {
		return fail(ps, "too many modules (at most %d)", DAEMON_MAX_MODULES);
	}
	if (c->nmodules == ps->modules_cap) {
		size_t cap = ps->modules_cap ? ps->modules_cap * 2 : 8;
		struct module *mods = reallocarray(c->modules, cap, sizeof(*mods));

		if (!mods) {
			return fail(ps, "out of memory");
		}
		c->modules = mods;
		ps->modules_cap = cap;
	}
	m = &c->modules[c->nmodules++];
	memset(m, 0, sizeof(*m));
	strcpy(m->name, name);
	m->max_file_size = m->max_session_bytes = UINT64_MAX; /* not set: no limit */
	m->max_files = DAEMON_DEFAULT_MAX_FILES;
	m->tos = MODULE_TOS_INHERIT;
	return 0;
}

/* line is a section header "[...]" with leading blanks stripped. */
static int start_section(struct parse_state *ps, char *line)
{
	char *close = strchr(line, ']');
	char *rest;

	if (finish_section(ps) < 0) {
		return -EINVAL;
	}
	if (!close) {
		return fail(ps, "unterminated section header");
	}
	rest = close + 1;
	rest += strspn(rest, " \t\r\n");
	if (*rest && *rest != ';' && *rest != '#') {
		return fail(ps, "text after section header");
	}
	*close = '\0';
	line++;

	ps->section_line = ps->line;
	ps->seen = 0;
	ps->owner_line = 0;
	if (strcmp(line, "global") == 0) {
		if (ps->have_global) {
			return fail(ps, "duplicate section [global]");
		}
		ps->have_global = true;
		ps->global_line = ps->line;
		ps->section = SECTION_GLOBAL;
		return 0;
	}
	if (strcasecmp(line, "global") == 0) {
		return fail(ps, "unknown section [%s] (did you mean [global]?)", ESC(line));
	}
	ps->section = SECTION_MODULE;
	return add_module(ps, line);
}

/*
 * inih's line source: one whole line of the file in memory per call. Lines
 * we reject are handed on as empty lines so inih's own error (if any) can't
 * mask ours.
 */
static char *config_reader(char *str, int num, void *user)
{
	struct parse_state *ps = user;
	const char *start;
	size_t len;
	char why[128];
	char *p;

	if (!conffile_next_line(ps->text, ps->text_len, &ps->pos, &start, &len)) {
		return NULL;
	}
	ps->line++;
	if (conffile_line_check(start, len, why, sizeof(why)) < 0) {
		fail(ps, "%s", why);
		goto blank;
	}
	/* ini_setup() makes inih's buffer hold the longest line conffile allows. */
	assert(num > 0 && len + 2 <= (size_t)num);
	if (ps->failed) {
		goto blank;
	}
	memcpy(str, start, len);
	str[len] = '\n';
	str[len + 1] = '\0';
	p = str;
	/* The first line may carry a UTF-8 BOM, which inih skips too. */
	if (ps->line == 1 && len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
		p += 3;
	}
	p += strspn(p, " \t\v\f");
	if (*p == '[') {
		start_section(ps, p);
		goto blank;
	}
	return str;
blank:
	/* Sections are ours; inih sees no header, so its section name stays "". */
	str[0] = '\n';
	str[1] = '\0';
	return str;
}

/*
 * Lexically canonical form of an absolute path: no empty or "." components,
 * no trailing slash ("/" stays "/"). ".." is kept as written; realpath()
 * below catches what it means on disk.
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
 * THREATS.md G42: a module inside another (or the same directory twice)
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
		return fail_at(ps, ps->line, "out of memory");
	}
	for (size_t i = 0; i < c->nmodules; i++) {
		_cleanup_free_ char *rp = realpath(c->modules[i].path, NULL);

		canonical_path(c->modules[i].path, canon + i * plen, plen);
		/* Unresolvable now: m_path checked it at load, so a race; the lexical check stands. */
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
			return fail_at(
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
 * THREATS.md G47: connections that have not finished TLS and HELLO get at
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
		return fail_at(ps, ps->unauth_line,
			       "'max unauthenticated' (%u) must be below 'max connections' (%u): "
			       "the difference is reserved for authenticated sessions",
			       c->max_unauth, c->max_connections);
	}
	if (!ps->unauth_per_host_line) {
		/* One host may run several clients at once: as many as it may connect. */
		c->max_unauth_per_host = MIN(c->max_per_host, c->max_unauth);
	} else if (c->max_unauth_per_host > c->max_unauth) {
		return fail_at(ps, ps->unauth_per_host_line,
			       "'max unauthenticated per host' (%u) exceeds "
			       "'max unauthenticated' (%u)",
			       c->max_unauth_per_host, c->max_unauth);
	}
	return 0;
}

/* Cross-key checks and required keys, once the whole file is read. */
static int finish_config(struct parse_state *ps)
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

	if (finish_section(ps) < 0) {
		return -EINVAL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(required); i++) {
		if (((const char *)c + required[i].off)[0] == '\0') {
			return fail_at(ps, gline, "missing required key '%s' in [global]",
				       required[i].key);
		}
	}
	if (c->max_per_host > c->max_connections) {
		/* The default per-host cap follows a smaller global cap. */
		if (!ps->per_host_line) {
			c->max_per_host = c->max_connections;
		} else {
			return fail_at(ps, ps->per_host_line,
				       "'max connections per host' (%u) exceeds "
				       "'max connections' (%u)",
				       c->max_per_host, c->max_connections);
		}
	}
	if (c->pool_size > c->memory_budget) {
		return fail_at(ps, ps->pool_line ? ps->pool_line : ps->budget_line,
			       "'pool size' (%" PRIu64 " MiB) exceeds 'memory budget' (%" PRIu64
			       " MiB)",
			       c->pool_size >> 20, c->memory_budget >> 20);
	}
	if (check_unauth_limits(ps) < 0) {
		return -EINVAL;
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

static void config_defaults(struct daemon_config *c)
{
	c->max_connections = 64;
	c->max_per_host = 8;
	c->handshake_timeout_s = 5;
	c->idle_timeout_s = 300;
	c->hash_threads = -1;
	c->partial_max_age_s = 7 * 86400;
	c->memory_budget = UINT64_C(4) << 30;
	c->pool_size = UINT64_C(64) << 20;
	c->log_level = LOG_INFO;
	c->encryption = ENCRYPTION_ALLOWED;
	c->tos = -1;
}

/*
 * inih's knobs are process globals in Debian's build (libinih r55, without
 * INI_HANDLER_LINENO). Set them on every parse: a heap line buffer just above
 * conffile's line cap (ini.h asks 3 bytes more), so inih never truncates a
 * line, as conffile_line_check() refuses a longer one first; no continuation
 * lines (an indented key must not silently extend the previous value), no
 * keys without '='.
 */
static void ini_setup(void)
{
	ini_use_stack = false;
	ini_allow_realloc = false;
	ini_max_line = CONFFILE_MAX_LINE + 3;
	ini_initial_alloc = CONFFILE_MAX_LINE + 3;
	ini_allow_multiline = false;
	ini_allow_no_value = false;
	ini_allow_inline_comments = true;
	ini_stop_on_first_error = false;
}

int daemon_config_load(const char *file, struct daemon_config **ret, char *err, size_t errlen)
{
	_cleanup_(daemon_config_freep) struct daemon_config *c = NULL;
	_cleanup_free_ char *text = NULL;
	size_t text_len = 0;
	struct parse_state ps = { 0 };
	int r;

	assert(file && ret && err && errlen > 0);
	err[0] = '\0';

	r = conffile_read(file, &text, &text_len, err, errlen);
	if (r < 0) {
		return r;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "%s: out of memory", file);
		return -ENOMEM;
	}
	if (strlen(file) >= sizeof(c->path)) {
		snprintf(err, errlen, "%.200s...: config path too long", file);
		return -ENAMETOOLONG;
	}
	strcpy(c->path, file);
	config_defaults(c);

	ps.text = text;
	ps.text_len = text_len;
	ps.cfg = c;
	ps.file = file;
	ps.err = err;
	ps.errlen = errlen;

	ini_setup();
	r = ini_parse_stream(config_reader, &ps, ini_handler_cb, &ps);
	if (r == -2) {
		fail_at(&ps, ps.line, "out of memory");
	} else if (r > 0 && (!ps.failed || (unsigned)r < ps.fail_line)) {
		/* inih's own complaint, a line it could not split, came first. */
		ps.failed = false;
		fail_at(&ps, (unsigned)r, "syntax error (expected 'key = value' or '[section]')");
	}
	if (!ps.failed) {
		finish_config(&ps);
	}
	if (ps.failed) {
		return -EINVAL;
	}
	*ret = TAKE_PTR(c);
	return 0;
}

void daemon_config_free(struct daemon_config *c)
{
	if (!c) {
		return;
	}
	free(c->modules);
	free(c);
}

const struct module *daemon_config_module(const struct daemon_config *c, const char *name)
{
	for (size_t i = 0; i < c->nmodules; i++) {
		if (strcmp(c->modules[i].name, name) == 0) {
			return &c->modules[i];
		}
	}
	return NULL;
}
