/* SPDX-License-Identifier: MIT */
/*
 * rdmacpd.conf's values (config_parse.h): each parser sets its field or
 * keeps the first error with the key's line; numbers, sizes, booleans and
 * names from a set are src/parse.h's grammars. Also the listen address
 * grammar (config.h) and the users and groups a module runs as.
 */
#include "config_parse.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <netdb.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parse.h"
#include "tls.h"

#define CONFIG_MIN_POOL (UINT64_C(1) << 20)

_printf_(3, 4) int config_fail_at(struct parse_state *ps, unsigned line, const char *fmt, ...)
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

struct module *config_cur_module(struct parse_state *ps)
{
	assert(ps->section == SECTION_MODULE && ps->cfg->nmodules > 0);
	return &ps->cfg->modules[ps->cfg->nmodules - 1];
}

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
int config_for_each_entry(struct parse_state *ps, const char *key, const char *value,
			  int (*fn)(struct parse_state *ps, const char *key, const char *entry))
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

/*
 * Returns -EINVAL for bad syntax, -ERANGE for a bad port, -EADDRNOTAVAIL when
 * the host does not resolve. Host names are resolved once, here: the daemon
 * binds what they meant at load time.
 */
/*
 * A listen address's host and port text: "[v6]:port", a bare IPv6 literal,
 * or "host[:port]" ("" and "*": every IPv4 address); hints say which
 * family and whether numeric. host holds hostlen bytes (256).
 */
static int split_listen_addr(const char *text, char *host, size_t hostlen,
			     const char **ret_port_text, struct addrinfo *hints)
{
	const char *port_text = NULL;
	const char *colon;

	if (text[0] == '[') {
		const char *close = strchr(text, ']');

		if (!close || (size_t)(close - text - 1) >= hostlen || close == text + 1) {
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
		hints->ai_family = AF_INET6;
		hints->ai_flags |= AI_NUMERICHOST;
	} else if ((colon = strchr(text, ':')) && strchr(colon + 1, ':')) {
		/* Two or more colons and no brackets: a bare IPv6 literal, default port. */
		if (strlen(text) >= hostlen) {
			return -EINVAL;
		}
		strcpy(host, text);
		hints->ai_family = AF_INET6;
		hints->ai_flags |= AI_NUMERICHOST;
	} else {
		size_t hl = colon ? (size_t)(colon - text) : strlen(text);

		if (hl >= hostlen) {
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
		hints->ai_family = AF_UNSPEC;
	}
	*ret_port_text = port_text;
	return 0;
}

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
	struct listen_addr la = { 0 };
	int r = split_listen_addr(text, host, sizeof(host), &port_text, &hints);

	if (r < 0) {
		return r;
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
int config_lookup_user(const char *name, uid_t uid, uid_t *ret_uid, gid_t *ret_gid)
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

int config_resolve_user(const char *s, uid_t *ret)
{
	gid_t gid;

	if (isdigit((unsigned char)s[0])) {
		return parse_id(s, ret);
	}
	return config_lookup_user(s, 0, ret, &gid);
}

int config_resolve_group(const char *s, gid_t *ret)
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

int config_set_path(struct parse_state *ps, const char *key, const char *value, char *dst,
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

int config_set_uint(struct parse_state *ps, const char *key, const char *value, uint64_t min,
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

int config_set_size(struct parse_state *ps, const char *key, const char *value, uint64_t *dst)
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

/* A module's limit on what a push may store: any size, 0 included (only empty files). */
int config_set_limit(struct parse_state *ps, const char *key, const char *value, uint64_t *dst)
{
	if (parse_size(value, dst) < 0) {
		return fail(ps, "bad size '%s' for '%s' (a number with optional K, M, G or T)",
			    ESC(value), key);
	}
	return 0;
}

int config_set_bool(struct parse_state *ps, const char *key, const char *value, bool *dst)
{
	if (parse_bool(value, dst) < 0) {
		return fail(ps, "bad boolean '%s' for '%s' (yes, no, true, false, 1 or 0)",
			    ESC(value), key);
	}
	return 0;
}

/* "tos = N": 0..255, the IP TOS byte (DSCP << 2 | ECN) of the daemon's RDMA lanes. */
int config_set_tos(struct parse_state *ps, const char *key, const char *value, int *dst)
{
	unsigned v = 0;
	int r = config_set_uint(ps, key, value, 0, 255, &v);

	if (r == 0) {
		*dst = (int)v;
	}
	return r;
}

int config_set_encryption(struct parse_state *ps, const char *key, const char *value, int *ret)
{
	static const struct parse_enum_name names[] = {
		{ "required", ENCRYPTION_REQUIRED },
		{ "allowed", ENCRYPTION_ALLOWED },
		{ "off", ENCRYPTION_OFF },
	};

	if (parse_enum(value, names, ARRAY_SIZE(names), true, ret) < 0) {
		return fail(ps, "bad '%s' '%s' (required, allowed or off)", key, ESC(value));
	}
	return 0;
}

/* One allow rule into rules (*n of them so far, at most DAEMON_MAX_ALLOW); where: the section. */
int config_add_allow_rule(struct parse_state *ps, const char *key, const char *tok,
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

/* A host pattern: a name or address with fnmatch's * ? [ ] ! (no '/', no blanks). */
static bool host_pattern_valid(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= DAEMON_MAX_HOST_PATTERN &&
	       strspn(s,
		      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_:*?[]!") ==
		   n;
}

int config_add_host_pattern(struct parse_state *ps, const char *key, const char *tok,
			    char (*pats)[DAEMON_MAX_HOST_PATTERN + 1], size_t *n, const char *where)
{
	if (*n >= DAEMON_MAX_RELAY_TO) {
		return fail(ps, "too many '%s' patterns in [%s] (at most %d)", key, where,
			    DAEMON_MAX_RELAY_TO);
	}
	if (!host_pattern_valid(tok)) {
		return fail(ps,
			    "bad host pattern '%s' in '%s' (a host name or address as clients "
			    "write it, at most %d bytes, with * ? [ ] as wildcards)",
			    ESC(tok), key, DAEMON_MAX_HOST_PATTERN);
	}
	strcpy(pats[(*n)++], tok);
	return 0;
}
