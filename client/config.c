/* SPDX-License-Identifier: MIT */
/*
 * Client defaults from ~/.config/rdmacp/config, an INI file with a
 * [client] section. Unknown keys are errors, reported with file and line.
 */
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client.h"
#include "macro.h"
#include "proto/msg.h"
#include "xport.h"

void client_opts_defaults(struct client_opts *o)
{
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	char dir[3000];

	memset(o, 0, sizeof(*o));
	if (xdg && *xdg) {
		snprintf(dir, sizeof(dir), "%s/rdmacp", xdg);
	} else {
		snprintf(dir, sizeof(dir), "%s/.config/rdmacp", home ? home : "");
	}
	snprintf(o->cert, sizeof(o->cert), "%s/client.crt", dir);
	snprintf(o->key, sizeof(o->key), "%s/client.key", dir);
	snprintf(o->ca, sizeof(o->ca), "%s/ca.crt", dir);
	o->port = CLIENT_DEFAULT_PORT;
	o->transport = 0; /* auto */
	o->lanes = 2;
	o->chunk_size = 1u << 20;
	o->slots = 32;
	o->pool_chunks = 64;
	o->connect_timeout_s = 10;
	o->idle_timeout_s = 60;
	o->progress = -1;
}

int parse_size(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !*s || *s == '-') {
		return -EINVAL;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s) {
		return -EINVAL;
	}
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1] != '\0' && strcasecmp(end + 1, "ib") != 0 &&
	    strcasecmp(end + 1, "b") != 0) {
		return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift)) {
		return -ERANGE;
	}
	*ret = (uint64_t)v << shift;
	return 0;
}

int parse_bwlimit(const char *s, uint64_t *ret)
{
	uint64_t v;
	size_t n = s ? strlen(s) : 0;
	int r = parse_size(s, &v);

	if (r < 0) {
		return r;
	}
	/* rsync's rule: without a suffix the number counts KiB per second. */
	if (n > 0 && s[n - 1] >= '0' && s[n - 1] <= '9') {
		if (v > (UINT64_MAX >> 10)) {
			return -ERANGE;
		}
		v <<= 10;
	}
	*ret = v;
	return 0;
}

struct parse_state {
	struct client_opts *o;
	const char *file;
	FILE *f;
	unsigned line;
	char *err;
	size_t errlen;
	bool failed;
};

/* Feed inih one line at a time so that the handler knows the line number. */
static char *reader(char *str, int num, void *user)
{
	struct parse_state *ps = user;
	char *r = fgets(str, num, ps->f);

	if (r) {
		ps->line++;
	}
	return r;
}

static int bad(struct parse_state *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(struct parse_state *ps, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!ps->failed) {
		snprintf(ps->err, ps->errlen, "%s:%u: %s", ps->file, ps->line, msg);
		ps->failed = true;
	}
	return 0;
}

static int set_str(char *dst, size_t len, const char *v)
{
	if (strlen(v) >= len || !*v) {
		return -EINVAL;
	}
	snprintf(dst, len, "%s", v);
	return 0;
}

static int parse_uint(const char *v, unsigned long min, unsigned long max, unsigned long *ret)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || end == v || *end || *v == '-' || x < min || x > max) {
		return -EINVAL;
	}
	*ret = x;
	return 0;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct parse_state *ps = user;
	struct client_opts *o = ps->o;
	unsigned long u;
	uint64_t sz;

	if (ps->failed) {
		return 0;
	}
	if (strcmp(section, "client") != 0) {
		return bad(ps, "unknown section [%s]", section);
	}
	if (!strcmp(name, "cert")) {
		if (set_str(o->cert, sizeof(o->cert), value) < 0) {
			return bad(ps, "bad %s", name);
		}
	} else if (!strcmp(name, "key")) {
		if (set_str(o->key, sizeof(o->key), value) < 0) {
			return bad(ps, "bad %s", name);
		}
	} else if (!strcmp(name, "ca")) {
		if (set_str(o->ca, sizeof(o->ca), value) < 0) {
			return bad(ps, "bad %s", name);
		}
	} else if (!strcmp(name, "pin")) {
		if (tls_parse_fingerprint(value, o->pin) < 0) {
			return bad(ps,
				   "bad pin '%s': expected sha256:<64 hex digits, ':' between "
				   "pairs allowed>",
				   value);
		}
		o->have_pin = true;
	} else if (!strcmp(name, "port")) {
		if (parse_uint(value, 1, 65535, &u) < 0) {
			return bad(ps, "bad port '%s'", value);
		}
		o->port = (uint16_t)u;
	} else if (!strcmp(name, "transport")) {
		if (!strcmp(value, "tcp")) {
			o->transport = XPORT_KIND_TCP;
		} else if (!strcmp(value, "verbs")) {
			o->transport = XPORT_KIND_VERBS;
		} else if (!strcmp(value, "auto")) {
			o->transport = 0;
		} else {
			return bad(ps, "bad transport '%s': auto, tcp or verbs", value);
		}
	} else if (!strcmp(name, "lanes")) {
		if (parse_uint(value, 1, PROTO_MAX_LANES, &u) < 0) {
			return bad(ps, "bad lanes '%s'", value);
		}
		o->lanes = (unsigned)u;
	} else if (!strcmp(name, "chunk size")) {
		if (parse_size(value, &sz) < 0 || sz < PROTO_MIN_CHUNK || sz > PROTO_MAX_CHUNK ||
		    (sz & (sz - 1))) {
			return bad(ps, "bad chunk size '%s': a power of two, 4K..64M", value);
		}
		o->chunk_size = (uint32_t)sz;
	} else if (!strcmp(name, "connect timeout")) {
		if (parse_uint(value, 1, 3600, &u) < 0) {
			return bad(ps, "bad connect timeout '%s'", value);
		}
		o->connect_timeout_s = (int)u;
	} else {
		return bad(ps, "unknown key '%s' in [%s]", name, section);
	}
	return 1;
}

int client_config_load(struct client_opts *o, const char *file, bool must_exist, char *err,
		       size_t errlen)
{
	struct parse_state ps = { .o = o, .file = file, .err = err, .errlen = errlen };
	int r;

	ps.f = fopen(file, "re");
	if (!ps.f) {
		if (errno == ENOENT && !must_exist) {
			return 0;
		}
		snprintf(err, errlen, "%s: %s", file, strerror(errno));
		return -errno;
	}
	r = ini_parse_stream(reader, &ps, handler, &ps);
	fclose(ps.f);
	if (ps.failed) {
		return -EINVAL;
	}
	if (r != 0) {
		snprintf(err, errlen, "%s:%d: syntax error", file, r > 0 ? r : (int)ps.line);
		return -EINVAL;
	}
	return 0;
}

int parse_remote(const char *arg, struct remote *ret)
{
	const char *colon, *host = arg;
	size_t hl;

	if (arg[0] == '[') {
		const char *close = strchr(arg, ']');
		if (!close || close[1] != ':') {
			return -EINVAL;
		}
		host = arg + 1;
		hl = (size_t)(close - host);
		colon = close + 1;
	} else {
		colon = strchr(arg, ':');
		const char *slash = strchr(arg, '/');
		/* scp's rule: a colon after a slash is part of a local name. */
		if (!colon || (slash && slash < colon)) {
			return 0;
		}
		hl = (size_t)(colon - arg);
	}
	if (hl == 0 || hl >= sizeof(ret->host) || strlen(colon + 1) >= sizeof(ret->path)) {
		return -EINVAL;
	}
	memcpy(ret->host, host, hl);
	ret->host[hl] = '\0';
	snprintf(ret->path, sizeof(ret->path), "%s", colon + 1);
	return 1;
}
