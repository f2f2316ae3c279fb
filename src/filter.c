/* SPDX-License-Identifier: MIT */
/* --include / --exclude rules and their matching, as rsync does it (see filter.h). */
#include "filter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

/* ---- the wildcard match ---- */

enum { WM_NOMATCH = 0, WM_MATCH = 1, WM_ABORT_ALL = -1, WM_ABORT_TO_STARSTAR = -2 };

/*
 * A bracket class at p (just after the '['): *ret_p is the pattern after
 * the ']'. 1 match, 0 no match, WM_ABORT_ALL for an unterminated class.
 */
static int match_class(const char *p, char c, const char **ret_p)
{
	bool negated = false, matched = false;
	unsigned char prev = 0;
	bool have_prev = false;

	if (*p == '!' || *p == '^') {
		negated = true;
		p++;
	}
	for (bool first = true;; first = false) {
		unsigned char pc = (unsigned char)*p;

		if (pc == '\0') {
			return WM_ABORT_ALL;
		}
		if (pc == ']' && !first) {
			p++;
			break;
		}
		if (pc == '\\' && p[1]) {
			pc = (unsigned char)*++p;
		} else if (pc == '-' && have_prev && p[1] && p[1] != ']') {
			unsigned char hi = (unsigned char)p[1];

			p++;
			if (hi == '\\' && p[1]) {
				hi = (unsigned char)*++p;
			}
			if ((unsigned char)c >= prev && (unsigned char)c <= hi) {
				matched = true;
			}
			have_prev = false;
			p++;
			continue;
		}
		if ((unsigned char)c == pc) {
			matched = true;
		}
		prev = pc;
		have_prev = true;
		p++;
	}
	*ret_p = p;
	/* A class never matches a slash, negated or not. */
	return matched != negated && c != '/';
}

/*
 * rsync's dowild: the ABORT results stop the backtracking of the stars
 * before it (a `*` can't reach past a /, so trying further is useless),
 * which keeps the match linear-ish for patterns full of stars.
 */
static int dowild(const char *p, const char *t)
{
	for (; *p; p++, t++) {
		char pc = *p;
		int r;

		if (*t == '\0' && pc != '*') {
			return WM_ABORT_ALL;
		}
		switch (pc) {
		case '\\':
			pc = *++p;
			if (pc == '\0') {
				return WM_NOMATCH; /* a lone backslash at the end matches nothing */
			}
			if (*t != pc) {
				return WM_NOMATCH;
			}
			break;
		case '?':
			if (*t == '/') {
				return WM_NOMATCH;
			}
			break;
		case '[':
			r = match_class(p + 1, *t, &p);
			if (r != 1) {
				return r;
			}
			p--; /* the loop steps past the class's ']' */
			break;
		case '*': {
			bool special = false;

			if (p[1] == '*') {
				while (p[1] == '*') {
					p++;
				}
				special = true;
			}
			p++;
			if (*p == '\0') {
				/* Trailing ** matches everything, trailing * only without a /. */
				return special || !strchr(t, '/') ? WM_MATCH : WM_NOMATCH;
			}
			for (; *t; t++) {
				r = dowild(p, t);
				if (r != WM_NOMATCH) {
					if (!special || r != WM_ABORT_TO_STARSTAR) {
						return r;
					}
				} else if (!special && *t == '/') {
					return WM_ABORT_TO_STARSTAR;
				}
			}
			return WM_ABORT_ALL;
		}
		default:
			if (*t != pc) {
				return WM_NOMATCH;
			}
			break;
		}
	}
	return *t == '\0' ? WM_MATCH : WM_NOMATCH;
}

bool filter_wildmatch(const char *pattern, const char *text)
{
	return dowild(pattern, text) == WM_MATCH;
}

/* ---- rules ---- */

static void rule_clear(struct filter_rule *r)
{
	free(r->text);
	free(r->pat);
	memset(r, 0, sizeof(*r));
}

void filter_list_free(struct filter_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		rule_clear(&l->rules[i]);
	}
	free(l->rules);
	memset(l, 0, sizeof(*l));
}

int filter_add(struct filter_list *l, enum filter_action action, const char *pattern)
{
	struct filter_rule r = { .action = (uint8_t)action };
	size_t len = strnlen(pattern, PROTO_MAX_PATH + 1), start = 0, end;

	if (action != FILTER_INCLUDE && action != FILTER_EXCLUDE) {
		return -EINVAL;
	}
	if (len > PROTO_MAX_PATH) {
		return -ENAMETOOLONG;
	}
	if (l->n >= FILTER_MAX_RULES || l->bytes + len > FILTER_MAX_BYTES) {
		return -E2BIG;
	}
	end = len;
	if (end > 0 && pattern[0] == '/') {
		r.anchored = true;
		start = 1;
	}
	while (end > start && pattern[end - 1] == '/') {
		r.dir_only = true;
		end--;
	}
	if (end == start) {
		return -EINVAL; /* "", "/" or "//": nothing to match */
	}
	if (end - start >= 4 && !memcmp(pattern + end - 4, "/***", 4) && !r.dir_only) {
		/* dir/ and three asterisks: the directory itself and all below it. */
		r.and_below = true;
		end -= 4;
		if (end == start) {
			return -EINVAL;
		}
	}
	r.pat = strndup(pattern + start, end - start);
	if (!r.pat) {
		return -ENOMEM;
	}
	r.full_path = r.and_below || memchr(r.pat, '/', end - start) || strstr(r.pat, "**") != NULL;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct filter_rule *v = reallocarray(l->rules, cap, sizeof(*v));

		if (!v) {
			free(r.pat);
			return -ENOMEM;
		}
		l->rules = v;
		l->cap = cap;
	}
	r.text = strdup(pattern);
	if (!r.pat || !r.text) {
		rule_clear(&r);
		return -ENOMEM;
	}
	l->rules[l->n++] = r;
	l->bytes += len;
	return 0;
}

/* One line of an --exclude-from list (no newline): 0 or -errno. */
static int add_line(struct filter_list *l, const char *line, size_t len)
{
	char buf[PROTO_MAX_PATH + 3];
	enum filter_action action = FILTER_EXCLUDE;

	if (len > 0 && line[len - 1] == '\r') {
		len--;
	}
	if (len == 0 || line[0] == '#' || line[0] == ';') {
		return 0;
	}
	if (len >= 2 && (line[0] == '+' || line[0] == '-') && line[1] == ' ') {
		action = line[0] == '+' ? FILTER_INCLUDE : FILTER_EXCLUDE;
		line += 2;
		len -= 2;
	}
	if (len > PROTO_MAX_PATH) {
		return -ENAMETOOLONG;
	}
	if (memchr(line, '\0', len)) {
		return -EINVAL;
	}
	memcpy(buf, line, len);
	buf[len] = '\0';
	return filter_add(l, action, buf);
}

int filter_add_text(struct filter_list *l, const char *text, size_t len, unsigned *ret_line)
{
	unsigned lineno = 0;

	*ret_line = 0;
	while (len > 0) {
		const char *nl = memchr(text, '\n', len);
		size_t n = nl ? (size_t)(nl - text) : len;
		int r;

		lineno++;
		r = add_line(l, text, n);
		if (r < 0) {
			*ret_line = lineno;
			return r;
		}
		text += n + (nl != NULL);
		len -= n + (nl != NULL);
	}
	return 0;
}

int filter_add_file(struct filter_list *l, const char *path, unsigned *ret_line)
{
	_cleanup_fclose_ FILE *owned = NULL;
	char line[PROTO_MAX_PATH + 4];
	unsigned lineno = 0;
	FILE *f;

	*ret_line = 0;
	if (!strcmp(path, "-")) {
		f = stdin;
	} else {
		owned = fopen(path, "re");
		if (!owned) {
			return negerrno();
		}
		f = owned;
	}
	for (;;) {
		size_t n = 0;
		bool over = false, comment;
		int c, r;

		while ((c = getc(f)) != EOF && c != '\n') {
			if (n < sizeof(line)) {
				line[n++] = (char)c;
			} else {
				over = true; /* read on to the line's end: a long comment is fine */
			}
		}
		if (c == EOF && n == 0 && !over) {
			break;
		}
		lineno++;
		comment = n > 0 && (line[0] == '#' || line[0] == ';');
		if (over && !comment) {
			*ret_line = lineno;
			return -ENAMETOOLONG;
		}
		r = comment ? 0 : add_line(l, line, n);
		if (r < 0) {
			*ret_line = lineno;
			return r;
		}
		if (c == EOF) {
			break;
		}
	}
	if (ferror(f)) {
		return -EIO;
	}
	return 0;
}

/* ---- matching ---- */

static bool rule_matches_text(const struct filter_rule *r, const char *c, bool is_dir)
{
	if (r->and_below) {
		/* The directory itself, or anything below it. */
		if (is_dir && filter_wildmatch(r->pat, c)) {
			return true;
		}
		for (const char *s = strchr(c, '/'); s; s = strchr(s + 1, '/')) {
			_cleanup_free_ char *head = strndup(c, (size_t)(s - c));

			if (head && filter_wildmatch(r->pat, head)) {
				return true;
			}
		}
		return false;
	}
	return filter_wildmatch(r->pat, c);
}

static bool rule_matches(const struct filter_rule *r, const char *name, bool is_dir)
{
	if (r->dir_only && !is_dir) {
		return false;
	}
	if (r->anchored) {
		return rule_matches_text(r, name, is_dir);
	}
	if (!r->full_path) {
		const char *slash = strrchr(name, '/');

		return rule_matches_text(r, slash ? slash + 1 : name, is_dir);
	}
	/* Unanchored with a /: the whole name, or a tail of it after any /. */
	for (const char *c = name; c; c = strchr(c, '/')) {
		if (*c == '/') {
			c++;
		}
		if (rule_matches_text(r, c, is_dir)) {
			return true;
		}
	}
	return false;
}

const struct filter_rule *filter_match(const struct filter_list *l, const char *name, bool is_dir)
{
	if (!l) {
		return NULL;
	}
	for (size_t i = 0; i < l->n; i++) {
		if (rule_matches(&l->rules[i], name, is_dir)) {
			return &l->rules[i];
		}
	}
	return NULL;
}

bool filter_included(const struct filter_list *l, const char *name, bool is_dir)
{
	const struct filter_rule *r = filter_match(l, name, is_dir);

	return !r || r->action == FILTER_INCLUDE;
}

bool filter_protects(void *ud, const char *name, bool is_dir)
{
	return !filter_included(ud, name, is_dir);
}
