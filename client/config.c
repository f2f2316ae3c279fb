/* SPDX-License-Identifier: MIT */
/*
 * Client defaults from ~/.config/rdmacp/config, an INI file with a
 * [client] section whose keys are options' (client_options[], option_table.c),
 * and [host PATTERN...] sections with the same keys for the hosts whose name,
 * as typed, matches a pattern (fnmatch, as ssh_config's Host). A host
 * section's value beats [client]'s, and per key the first matching host
 * section wins, as in ssh_config; the command line beats both (options.c).
 * Unknown keys and bad values are errors, reported with file and line, in
 * every section whether it matches or not. The file is read
 * whole through conffile_read(), as the daemon reads its own, so a device,
 * a FIFO, a huge file or a huge line is refused instead of read without end.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "conffile.h"
#include "log.h"
#include "macro.h"
#include "options.h"
#include "slowhop.h"

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
	o->lanes = CLIENT_DEFAULT_LANES;
	o->tos = -1;
	o->ack_timeout = -1;
	o->gid_index = -1;
	o->hash_threads = -1;
	o->chunk_size = CLIENT_DEFAULT_CHUNK;
	o->slots = CLIENT_DEFAULT_SLOTS;
	o->pool_chunks = CLIENT_DEFAULT_POOL_CHUNKS;
	o->connect_timeout_s = 10;
	o->idle_timeout_s = 60;
	o->relay_feed = -1;
	o->fanout = 1;
	o->relay_slow_s = SLOWHOP_DEFAULT_S;
	o->progress = -1;
	o->encrypt = -1;
	o->max_delete = UINT64_MAX; /* PROTO_NO_MAX_DELETE */
	o->bench_size = 10ull << 30;
	o->wait_busy_ms = 60 * 1000;
}

void client_opts_free(struct client_opts *o)
{
	filter_list_free(&o->filters);
}

/* Most host-section values one load keeps for after the file: every key of two sections. */
#define HOST_VALUES_MAX (2 * CLIENT_MAX_OPTIONS)

/* A value from a matching host section, applied once the whole file is read. */
struct host_value {
	const struct client_option *opt;
	char *value;
};

struct parse_state {
	struct client_opts *o;
	struct client_opts *scratch; /* a host section's values are checked on this */
	const char *host;	     /* as typed on the command line; NULL: none */
	struct host_value values[HOST_VALUES_MAX];
	size_t nvalues;
	bool host_set[CLIENT_MAX_OPTIONS]; /* by a matching host section already */
	const char *file;
	const char *text; /* the whole file (conffile_read) */
	size_t text_len;
	size_t pos; /* start of the next line in text */
	unsigned line;
	char *err;
	size_t errlen;
	bool failed;
};

static int bad(struct parse_state *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Feed inih one line at a time so that the handler knows the line number.
 * A line we refuse is handed on empty, so inih's own error can't mask ours.
 */
static char *reader(char *str, int num, void *user)
{
	struct parse_state *ps = user;
	const char *start;
	size_t len;
	char why[128];

	if (!conffile_next_line(ps->text, ps->text_len, &ps->pos, &start, &len)) {
		return NULL;
	}
	ps->line++;
	if (conffile_line_check(start, len, why, sizeof(why)) < 0) {
		bad(ps, "%s", why);
		len = 0;
	}
	/* ini_buffer_setup() makes inih's buffer hold the longest line conffile allows. */
	assert(num > 0 && len + 2 <= (size_t)num);
	memcpy(str, start, len);
	str[len] = '\n';
	str[len + 1] = '\0';
	return str;
}

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

/*
 * Whether section is "host PATTERN..." (ret_host true), and whether one of its
 * patterns matches host, in *ret_match. Returns 0, or -EINVAL for a [host]
 * without a pattern.
 */
static int host_section(const char *section, const char *host, bool *ret_host, bool *ret_match)
{
	char pattern[CONFFILE_MAX_LINE + 1];
	const char *p = section + 4;

	*ret_host =
	    strncmp(section, "host", 4) == 0 && (p[0] == '\0' || isspace((unsigned char)p[0]));
	*ret_match = false;
	if (!*ret_host) {
		return 0;
	}
	p += strspn(p, " \t");
	if (*p == '\0') {
		return -EINVAL;
	}
	while (*p) {
		size_t n = strcspn(p, " \t");

		memcpy(pattern, p, n);
		pattern[n] = '\0';
		/* Host names are not case-sensitive; ssh_config's Host is not either. */
		if (host && fnmatch(pattern, host, FNM_CASEFOLD) == 0) {
			*ret_match = true;
		}
		p += n;
		p += strspn(p, " \t");
	}
	return 0;
}

/* A matching host section's value, kept unless an earlier matching section set the key. */
static int keep_host_value(struct parse_state *ps, const struct client_option *opt,
			   const char *value)
{
	size_t idx = (size_t)(opt - client_options);

	if (ps->host_set[idx]) {
		return 1;
	}
	if (ps->nvalues == HOST_VALUES_MAX) {
		return bad(ps, "too many keys in matching [host] sections (at most %d)",
			   HOST_VALUES_MAX);
	}
	ps->values[ps->nvalues].value = strdup(value);
	if (!ps->values[ps->nvalues].value) {
		return bad(ps, "out of memory");
	}
	ps->values[ps->nvalues++].opt = opt;
	ps->host_set[idx] = true;
	return 1;
}

/* Each key is an option's (option_table.c): the same handler, the same values. */
static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct parse_state *ps = user;
	const struct client_option *opt;
	char esc[256], sesc[256];
	bool is_host, match;

	if (ps->failed) {
		return 0;
	}
	log_escape(section, sesc, sizeof(sesc));
	if (host_section(section, ps->host, &is_host, &match) < 0) {
		return bad(ps, "[host] needs a host name or pattern: [host NAME...]");
	}
	if (!is_host && strcmp(section, "client") != 0) {
		return bad(ps, "unknown section [%s] (expected [client] or [host NAME])", sesc);
	}
	opt = client_option_by_key(name);
	if (!opt) {
		return bad(ps, "unknown key '%s' in [%s]", log_escape(name, esc, sizeof(esc)),
			   sesc);
	}
	/* A host section's values are checked whether or not it matches this run's host. */
	if (opt->set(is_host ? ps->scratch : ps->o, value) < 0) {
		return bad(ps, "bad %s '%s'%s%s%s: %s", opt->config_key,
			   log_escape(value, esc, sizeof(esc)), is_host ? " in [" : "",
			   is_host ? sesc : "", is_host ? "]" : "", opt->expect);
	}
	return match ? keep_host_value(ps, opt, value) : 1;
}

/*
 * The matching host sections' values over [client]'s (apply), or only freed.
 * Each was taken by its handler on scratch already: taking it again can't fail.
 */
static void apply_host_values(struct parse_state *ps, bool apply)
{
	for (size_t i = 0; i < ps->nvalues; i++) {
		if (apply) {
			int r = ps->values[i].opt->set(ps->o, ps->values[i].value);

			assert(r == 0);
			(void)r;
		}
		free(ps->values[i].value);
	}
	ps->nvalues = 0;
}

/*
 * inih's line buffer is a process global in Debian's build (libinih r55):
 * make it just above conffile's line cap (ini.h asks 3 bytes more), so inih
 * never cuts a line in two; its other knobs keep their defaults.
 */
static void ini_buffer_setup(void)
{
	ini_use_stack = false;
	ini_allow_realloc = false;
	ini_max_line = CONFFILE_MAX_LINE + 3;
	ini_initial_alloc = CONFFILE_MAX_LINE + 3;
}

/* The file's text over o: [client], then the host sections matching host. */
static int parse_text(struct client_opts *o, const char *file, const char *text, size_t text_len,
		      const char *host, char *err, size_t errlen)
{
	_cleanup_free_ struct parse_state *ps = calloc(1, sizeof(*ps));
	_cleanup_free_ struct client_opts *scratch = malloc(sizeof(*scratch));
	int r;

	if (!ps || !scratch) {
		snprintf(err, errlen, "%s: out of memory", file);
		return -ENOMEM;
	}
	client_opts_defaults(scratch);
	*ps = (struct parse_state){ .o = o,
				    .scratch = scratch,
				    .host = host,
				    .file = file,
				    .text = text,
				    .text_len = text_len,
				    .err = err,
				    .errlen = errlen };
	ini_buffer_setup();
	r = ini_parse_stream(reader, ps, handler, ps);
	apply_host_values(ps, r == 0 && !ps->failed);
	client_opts_free(scratch);
	if (ps->failed) {
		return -EINVAL;
	}
	if (r == -2) {
		snprintf(err, errlen, "%s: out of memory", file);
		return -ENOMEM;
	}
	if (r != 0) {
		snprintf(err, errlen, "%s:%d: syntax error", file, r > 0 ? r : (int)ps->line);
		return -EINVAL;
	}
	return 0;
}

int client_config_load(struct client_opts *o, const char *file, bool must_exist, const char *host,
		       char *err, size_t errlen)
{
	_cleanup_free_ char *text = NULL;
	size_t text_len = 0;
	int r;

	/*
	 * --config /dev/null is the documented way to read no defaults
	 * (rdmacp(1)), and every test runs with it. It is a character device,
	 * which conffile_read() refuses like any other, so it is named here:
	 * an empty config, nothing opened.
	 */
	if (strcmp(file, "/dev/null") == 0) {
		return 0;
	}
	r = conffile_read(file, &text, &text_len, err, errlen);
	if (r == -ENOENT && !must_exist) {
		return 0;
	}
	if (r < 0) {
		return r;
	}
	return parse_text(o, file, text, text_len, host, err, errlen);
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
