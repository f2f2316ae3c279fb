/* SPDX-License-Identifier: MIT */
/*
 * --include / --exclude rules, matched as rsync matches its common patterns
 * (a pure module: no I/O but filter_add_file's reading of a list).
 *
 * Names are the entries' names as they go on the wire, relative to the
 * transfer root: the directory that holds each source operand (a push of
 * `src` names `src/a/b`, a pull of `mod/d/src` names `src/...`, the names of
 * --files-from are relative to its source directory). Each rule:
 * - `*` matches within one component, `**` across `/`, `?` one character
 *   but `/`, `[..]` a class (`[!..]` or `[^..]` negated, ranges), `\x` x;
 * - a leading `/` anchors the pattern at the transfer root;
 * - a trailing `/` matches directories only;
 * - a pattern with no other `/` and no `**` matches the last component of
 *   the name, at any depth; one with an inner `/` or `**` matches the whole
 *   name, or any tail of it that starts after a `/` (rsync's unanchored
 *   match), unless anchored;
 * - a trailing `/` + three asterisks matches the directory and everything
 *   below it.
 * The first rule that matches decides; no rule matching means included.
 * An excluded directory is not descended into (the walker's job): nothing
 * below it is sent, whatever the later rules say.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/msg.h"

/* One list fits one FILTER message. */
#define FILTER_MAX_RULES PROTO_MAX_FILTERS	/* rules in one list */
#define FILTER_MAX_BYTES PROTO_MAX_FILTER_BYTES /* all patterns together */

/* The same numbers as FILTER's on the wire. */
enum filter_action {
	FILTER_INCLUDE = PROTO_FILTER_INCLUDE,
	FILTER_EXCLUDE = PROTO_FILTER_EXCLUDE,
};

struct filter_rule {
	uint8_t action; /* enum filter_action */
	char *text;	/* the pattern as given, for the wire and messages */
	char *pat;	/* what is matched: without the leading and trailing / */
	bool anchored;	/* leading / */
	bool dir_only;	/* trailing / */
	bool full_path; /* an inner / or **: matched against the whole name */
	bool and_below; /* ended in / and three asterisks: the directory and its contents */
};

struct filter_list {
	struct filter_rule *rules;
	size_t n, cap;
	size_t bytes; /* sum of the patterns' lengths */
};

/*
 * Append one rule (pattern as typed). Returns 0, -EINVAL (empty, a NUL, or
 * just "/"), -ENAMETOOLONG (over PROTO_MAX_PATH bytes), -E2BIG (over
 * FILTER_MAX_RULES or FILTER_MAX_BYTES), -ENOMEM. Checked before anything is
 * allocated; on failure l is unchanged.
 */
int filter_add(struct filter_list *l, enum filter_action action, const char *pattern);

/*
 * Append the rules of an --exclude-from list: one pattern a line; blank
 * lines and lines starting with # or ; are ignored; "+ PAT" includes and
 * "- PAT" excludes, any other line excludes. A trailing CR is dropped.
 * path "-" reads standard input. 0 or -errno; *ret_line is the line at
 * fault (0 for an error of the file itself).
 */
int filter_add_file(struct filter_list *l, const char *path, unsigned *ret_line);

/* The same from a buffer (one list's text, not NUL-terminated). */
int filter_add_text(struct filter_list *l, const char *text, size_t len, unsigned *ret_line);

void filter_list_free(struct filter_list *l);

static inline bool filter_empty(const struct filter_list *l)
{
	return !l || l->n == 0;
}

/*
 * Is `name` (a wire name: components separated by one /, no leading /)
 * included? is_dir: the entry is a directory. l may be NULL (no rules).
 */
bool filter_included(const struct filter_list *l, const char *name, bool is_dir);

/*
 * --delete's keep hook (engine_params.delete_keep) for the filter list ud:
 * an entry the rules exclude is protected from deletion, as with rsync
 * (which needs --delete-excluded to remove it).
 */
bool filter_protects(void *ud, const char *name, bool is_dir);

/* The rule that decides `name`, or NULL when none matches (included). */
const struct filter_rule *filter_match(const struct filter_list *l, const char *name, bool is_dir);

/*
 * rsync's wildcard match of a whole string: `*` stops at /, `**` does not,
 * `?` and classes never match /, backslash quotes. Exposed for tests.
 */
bool filter_wildmatch(const char *pattern, const char *text);
