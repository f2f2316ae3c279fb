/* SPDX-License-Identifier: MIT */
/*
 * The inside of the rdmacpd.conf reader (config.h), shared by its files:
 * the parse state, the one error it keeps (config_fail_at), the value
 * parsers that report with the key's line (config_values.c), the key
 * tables of [global] (config_global.c) and of a module (config_module.c),
 * and the checks that need a whole section or the whole file
 * (config_check.c). The loader, config.c, feeds inih and dispatches keys.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "log.h"
#include "macro.h"

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
	unsigned max_conn_line, per_host_line, budget_line, pool_line, max_slots_line;
	unsigned unauth_line, unauth_per_host_line;
	/* Line of each module's 'path', for the overlap check after the parse. */
	unsigned path_line[DAEMON_MAX_MODULES];

	const char *file;
	char *err;
	size_t errlen;
	bool failed;
	unsigned fail_line;
};

/* "FILE:LINE: problem" in ps->err, the first only; returns -EINVAL. */
_printf_(3, 4) int config_fail_at(struct parse_state *ps, unsigned line, const char *fmt, ...);
#define fail(ps, ...) config_fail_at((ps), (ps)->line, __VA_ARGS__)

/* Values are quoted in messages; escape them so a hostile byte can't forge log lines. */
#define ESC(v) log_escape((v), (char[256]){ 0 }, 256)

/* The module whose section is being read. */
struct module *config_cur_module(struct parse_state *ps);

/* ---- config_values.c: each sets *dst, or fails with the key's line ---- */

/*
 * List values ('allow', 'listen', 'rails'): fn gets each entry of value,
 * separated by commas, blanks or both; the first failure stops the walk.
 */
int config_for_each_entry(struct parse_state *ps, const char *key, const char *value,
			  int (*fn)(struct parse_state *ps, const char *key, const char *entry));
/* A readable regular file's path. */
int config_set_path(struct parse_state *ps, const char *key, const char *value, char *dst,
		    size_t dstlen);
int config_set_uint(struct parse_state *ps, const char *key, const char *value, uint64_t min,
		    uint64_t max, unsigned *dst);
/* A memory size, at least 1M. */
int config_set_size(struct parse_state *ps, const char *key, const char *value, uint64_t *dst);
/* A module's limit on what a push may store: any size, 0 included. */
int config_set_limit(struct parse_state *ps, const char *key, const char *value, uint64_t *dst);
int config_set_bool(struct parse_state *ps, const char *key, const char *value, bool *dst);
/* "tos = N", 0..255. */
int config_set_tos(struct parse_state *ps, const char *key, const char *value, int *dst);
/* "encryption = required | allowed | off". */
int config_set_encryption(struct parse_state *ps, const char *key, const char *value, int *ret);
/* One allow rule into rules (*n of them so far, at most DAEMON_MAX_ALLOW); where: the section. */
int config_add_allow_rule(struct parse_state *ps, const char *key, const char *tok,
			  struct allow_rule *rules, size_t *n, const char *where);
/* One 'relay to' host pattern into pats (*n of them so far, at most DAEMON_MAX_RELAY_TO). */
int config_add_host_pattern(struct parse_state *ps, const char *key, const char *tok,
			    char (*pats)[DAEMON_MAX_HOST_PATTERN + 1], size_t *n,
			    const char *where);
/* A user or group by name or number. Return 0, -ESRCH (none such) or -errno; log nothing. */
int config_resolve_user(const char *s, uid_t *ret);
int config_resolve_group(const char *s, gid_t *ret);
/* The user's uid and primary group, by name (name) or by number (name NULL). */
int config_lookup_user(const char *name, uid_t uid, uid_t *ret_uid, gid_t *ret_gid);

/* ---- config_global.c, config_module.c: the keys of each section ---- */

struct key_handler {
	const char *name;
	bool repeat;
	int (*set)(struct parse_state *ps, const char *key, const char *value);
};

extern const struct key_handler config_global_keys[];
extern const size_t config_nglobal_keys;
extern const struct key_handler config_module_keys[];
extern const size_t config_nmodule_keys;

/* ---- config_check.c ---- */

/* Checks that need the whole section just read (a module's path and identity). */
int config_finish_section(struct parse_state *ps);
/* Cross-key checks and required keys, once the whole file is read. */
int config_finish(struct parse_state *ps);
