/* SPDX-License-Identifier: MIT */
/*
 * Usage errors in words (src/opterr.c): the suggestion for a misspelt long
 * option, and the one line for each way getopt_long() refuses a command line.
 */
#include <getopt.h>
#include <string.h>

#include "testutil.h"

#include "opterr.h"

static const struct option longs[] = {
	{ "port", required_argument, NULL, 'P' },
	{ "pin", required_argument, NULL, 0x101 },
	{ "recursive", no_argument, NULL, 'r' },
	{ "dry-run", no_argument, NULL, 'n' },
	{ "chunk-size", required_argument, NULL, 0x102 },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static void test_closest(void **state)
{
	(void)state;
	assert_string_equal(opterr_closest("prot", longs), "port");	     /* swap */
	assert_string_equal(opterr_closest("recusive", longs), "recursive"); /* a letter lost */
	assert_string_equal(opterr_closest("dryrun", longs), "dry-run");
	assert_string_equal(opterr_closest("chunksize=4M", longs), "chunk-size");
	/* Too far, or too short to guess from. */
	assert_null(opterr_closest("xyzzy", longs));
	assert_null(opterr_closest("x", longs));
	assert_null(opterr_closest("", longs));
	assert_null(
	    opterr_closest("recursive-and-a-lot-more-than-any-option-name-is-long-enough", longs));
}

/* What getopt_long() says about argv (opterr 0, ':' leading the short options). */
static void explain(const char *a1, const char *a2, struct opterr_msg *m)
{
	char *argv[] = { (char *)"prog", (char *)a1, (char *)a2, NULL };
	int argc = a2 ? 3 : 2, c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":P:rnh", longs, NULL)) != -1) {
		if (c == '?' || c == ':') {
			opterr_explain(c, optopt, optind, argv, longs, m);
			return;
		}
	}
	fail_msg("getopt took %s", a1);
}

static void test_explain(void **state)
{
	struct opterr_msg m;

	(void)state;
	explain("--prot=1", NULL, &m);
	assert_string_equal(m.what, "unrecognized option '--prot'");
	assert_string_equal(m.suggest, "--port");
	explain("--xyzzy", NULL, &m);
	assert_string_equal(m.what, "unrecognized option '--xyzzy'");
	assert_string_equal(m.suggest, "");
	explain("-r", "--port", &m);
	assert_string_equal(m.what, "option '--port' requires an argument");
	explain("-P", NULL, &m);
	assert_string_equal(m.what, "option requires an argument -- 'P'");
	explain("-rZ", NULL, &m);
	assert_string_equal(m.what, "invalid option -- 'Z'");
	explain("--help=yes", NULL, &m);
	assert_string_equal(m.what, "option '--help' doesn't allow an argument");
	explain("--p", NULL, &m);
	assert_string_equal(m.what, "option '--p' is ambiguous; possibilities: '--port' '--pin'");
	/* A control character typed is shown escaped, never raw. */
	explain("--a\x1b[2Jb", NULL, &m);
	assert_null(strchr(m.what, '\x1b'));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_closest),
		cmocka_unit_test(test_explain),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
