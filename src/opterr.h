/* SPDX-License-Identifier: MIT */
/*
 * What went wrong on a command line that getopt_long() refused, in words:
 * the one line rdmacp and rdmacpd print for a usage error, and the long
 * option a misspelt one was probably meant to be. Both programs print the
 * same shape (the error, "did you mean", "Try 'PROG --help'") from here.
 */
#pragma once

#include <getopt.h>
#include <stddef.h>

struct opterr_msg {
	char what[384];	   /* "unrecognized option '--prot'" */
	char suggest[128]; /* "--port", or "" when nothing is close */
};

/*
 * getopt_long() returned c ('?' or ':', with opterr 0 and a ':' leading the
 * short options) after argv[optind_now - 1]; optopt_now is getopt's optopt.
 * Fills ret with the error and, for an unknown long option, the closest of
 * longs (NULL-name terminated) if one is close enough.
 */
void opterr_explain(int c, int optopt_now, int optind_now, char *const *argv,
		    const struct option *longs, struct opterr_msg *ret);

/*
 * The long option name in longs closest to typed (edit distance, a swap of
 * two neighbours counting one), or NULL when none is within
 * OPTERR_MAX_DISTANCE and a third of typed's length: a guess that far off
 * would mislead more than help.
 */
#define OPTERR_MAX_DISTANCE 2
const char *opterr_closest(const char *typed, const struct option *longs);
