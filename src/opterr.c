/* SPDX-License-Identifier: MIT */
/*
 * Usage errors in words (opterr.h): which option getopt_long() refused and
 * why, and the long option a misspelt one was meant to be.
 */
#include "opterr.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "macro.h"

/* Longest name compared; longer ones are no option's and get no suggestion. */
#define NAME_MAX_CMP 64

/* Optimal string alignment distance: insert, delete, substitute, swap neighbours. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
	size_t d[NAME_MAX_CMP + 1][NAME_MAX_CMP + 1];

	for (size_t i = 0; i <= la; i++) {
		d[i][0] = i;
	}
	for (size_t j = 0; j <= lb; j++) {
		d[0][j] = j;
	}
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] != b[j - 1];
			size_t best = d[i - 1][j - 1] + cost;

			if (d[i - 1][j] + 1 < best) {
				best = d[i - 1][j] + 1;
			}
			if (d[i][j - 1] + 1 < best) {
				best = d[i][j - 1] + 1;
			}
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best) {
				best = d[i - 2][j - 2] + 1;
			}
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

/* typed's name: after "--", up to any "=". */
static size_t name_len(const char *typed)
{
	return strcspn(typed, "=");
}

const char *opterr_closest(const char *typed, const struct option *longs)
{
	size_t lt = name_len(typed), best = OPTERR_MAX_DISTANCE + 1;
	const char *found = NULL;

	if (lt == 0 || lt > NAME_MAX_CMP) {
		return NULL;
	}
	for (const struct option *o = longs; o->name; o++) {
		size_t lo = strlen(o->name), d;

		if (lo > NAME_MAX_CMP) {
			continue;
		}
		d = edit_distance(typed, lt, o->name, lo);
		/* A third of what was typed may be wrong, at most: "--x" is no "--key". */
		if (d < best && d * 3 <= lt) {
			best = d;
			found = o->name;
		}
	}
	return found;
}

static const struct option *long_by_val(const struct option *longs, int val)
{
	for (const struct option *o = longs; o->name; o++) {
		if (!o->flag && o->val == val) {
			return o;
		}
	}
	return NULL;
}

/* "possibilities: '--pin' '--port'" for an ambiguous abbreviation, cut to fit. */
static size_t ambiguous(const char *typed, const struct option *longs, char *out, size_t len)
{
	size_t lt = name_len(typed), n = 0, used = 0;

	out[0] = '\0';
	for (const struct option *o = longs; o->name; o++) {
		if (strncmp(o->name, typed, lt) != 0) {
			continue;
		}
		if (o->name[lt] == '\0') {
			return 0; /* an exact name is never ambiguous */
		}
		if (used < len) {
			int w = snprintf(out + used, len - used, " '--%s'", o->name);

			used += w > 0 ? (size_t)w : 0;
		}
		n++;
	}
	return n;
}

/* An error about a long option, typed as "--NAME[=VALUE]"; known: the option getopt found. */
static void explain_long(int c, const char *name, const struct option *known,
			 const struct option *longs, struct opterr_msg *ret)
{
	char esc[160], names[160];
	const char *close;

	log_escape_short(name, esc, sizeof(esc));
	esc[strcspn(esc, "=")] = '\0';
	if (c == ':') {
		snprintf(ret->what, sizeof(ret->what), "option '--%s' requires an argument",
			 known ? known->name : esc);
	} else if (known) {
		snprintf(ret->what, sizeof(ret->what), "option '--%s' doesn't allow an argument",
			 known->name);
	} else if (ambiguous(name, longs, names, sizeof(names)) > 1) {
		snprintf(ret->what, sizeof(ret->what),
			 "option '--%s' is ambiguous; possibilities:%s", esc, names);
	} else {
		snprintf(ret->what, sizeof(ret->what), "unrecognized option '--%s'", esc);
		close = opterr_closest(name, longs);
		if (close) {
			snprintf(ret->suggest, sizeof(ret->suggest), "--%s", close);
		}
	}
}

/* Whether getopt's complaint is about typed, a long option (else a short one). */
static bool is_long(const char *typed, int optopt_now, const struct option *longs,
		    const struct option **ret_known)
{
	const struct option *known = NULL;

	*ret_known = NULL;
	if (strncmp(typed, "--", 2) != 0 || typed[2] == '\0') {
		return false;
	}
	if (optopt_now == 0) {
		return true;
	}
	/* optopt is the option's val: the typed name must be (an abbreviation of) its name. */
	known = long_by_val(longs, optopt_now);
	if (!known || strncmp(known->name, typed + 2, name_len(typed + 2)) != 0) {
		return false;
	}
	*ret_known = known;
	return true;
}

void opterr_explain(int c, int optopt_now, int optind_now, char *const *argv,
		    const struct option *longs, struct opterr_msg *ret)
{
	const char *typed = optind_now > 0 ? argv[optind_now - 1] : "";
	const struct option *known;
	char esc[16], ch[2] = { (char)optopt_now, '\0' };

	memset(ret, 0, sizeof(*ret));
	if (is_long(typed, optopt_now, longs, &known)) {
		explain_long(c, typed + 2, known, longs, ret);
		return;
	}
	log_escape_short(ch, esc, sizeof(esc));
	if (c == ':') {
		snprintf(ret->what, sizeof(ret->what), "option requires an argument -- '%s'", esc);
	} else {
		snprintf(ret->what, sizeof(ret->what), "invalid option -- '%s'", esc);
	}
}
