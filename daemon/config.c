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
 *
 * This file is the loader: the line reader, sections, the dispatch of each
 * key to its handler. The handlers are config_global.c's and
 * config_module.c's, the values they parse config_values.c's, the checks
 * after a section and after the file config_check.c's (config_parse.h).
 */
#include "config_parse.h"

#include <assert.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include "conffile.h"
#include "slowhop.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct daemon_config *, daemon_config_free);

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
		keys = config_global_keys;
		nkeys = config_nglobal_keys;
		break;
	case SECTION_MODULE:
	default:
		keys = config_module_keys;
		nkeys = config_nmodule_keys;
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
		fail(ps, "unknown key '%s' in module [%s]", ESC(name), config_cur_module(ps)->name);
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
	m->max_connections = UINT_MAX; /* not set: the daemon's 'max connections' only */
	m->tos = MODULE_TOS_INHERIT;
	return 0;
}

/* line is a section header "[...]" with leading blanks stripped. */
static int start_section(struct parse_state *ps, char *line)
{
	char *close = strchr(line, ']');
	char *rest;

	if (config_finish_section(ps) < 0) {
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

static void config_defaults(struct daemon_config *c)
{
	c->max_connections = 64;
	c->max_per_host = 8;
	c->handshake_timeout_s = 5;
	c->idle_timeout_s = 300;
	c->drain_timeout_ms = 20 * 1000;
	c->hash_threads = -1;
	c->partial_max_age_s = 7 * 86400;
	c->memory_budget = UINT64_C(4) << 30;
	c->pool_size = UINT64_C(64) << 20;
	c->max_slots = DAEMON_DEFAULT_MAX_SLOTS;
	c->log_level = LOG_INFO;
	c->cert_warn_days = DAEMON_DEFAULT_CERT_WARN_DAYS;
	c->relay_slow_s = SLOWHOP_DEFAULT_S;
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
		config_fail_at(&ps, ps.line, "out of memory");
	} else if (r > 0 && (!ps.failed || (unsigned)r < ps.fail_line)) {
		/* inih's own complaint, a line it could not split, came first. */
		ps.failed = false;
		config_fail_at(&ps, (unsigned)r,
			       "syntax error (expected 'key = value' or '[section]')");
	}
	if (!ps.failed) {
		config_finish(&ps);
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
