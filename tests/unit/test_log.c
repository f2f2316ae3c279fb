/* SPDX-License-Identifier: MIT */
/*
 * log_escape, the one escaper for peer-supplied text (SECURITY.md G46), and
 * log lines themselves: one line whatever their arguments hold.
 */
#include "log.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static void expect_escape(const char *in, const char *want)
{
	char out[256];

	assert_string_equal(log_escape(in, out, sizeof(out)), want);
}

static void test_escape(void **state)
{
	(void)state;
	expect_escape("plain name.txt", "plain name.txt");
	expect_escape("a\n<0>FORGED", "a\\x0a<0>FORGED");
	expect_escape("\x1b[2J\r\t\x7f", "\\x1b[2J\\x0d\\x09\\x7f");
	expect_escape("back\\slash", "back\\x5cslash");
	/* Printable UTF-8 stays readable. */
	expect_escape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
		      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	/* C1 controls, as UTF-8 (U+009B CSI) and as a lone byte. */
	expect_escape("\xc2\x9b"
		      "2J",
		      "\\xc2\\x9b2J");
	expect_escape("\x9b"
		      "31m",
		      "\\x9b31m");
	/* Not UTF-8: truncated, overlong, surrogate, out of range. */
	expect_escape("x\xc3", "x\\xc3");
	expect_escape("\xc0\xaf", "\\xc0\\xaf");
	expect_escape("\xed\xa0\x80", "\\xed\\xa0\\x80");
	expect_escape("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");
	/* Line separators and direction overrides ("Trojan Source"). */
	expect_escape("a\xe2\x80\xa8"
		      "b\xe2\x80\xae"
		      "c",
		      "a\\xe2\\x80\\xa8b\\xe2\\x80\\xaec");
}

static void test_escape_truncates(void **state)
{
	char out[8];

	(void)state;
	/* Never half an escape, always terminated. */
	assert_string_equal(log_escape("ab\ncd", out, 6), "ab");
	assert_string_equal(log_escape("abcdefghij", out, sizeof(out)), "abcdefg");
	assert_string_equal(log_escape("x", out, 0), "");
}

/*
 * Too long for its buffer: start and end kept around "...", never half an
 * escape or half a UTF-8 sequence, and the end (a path's last components)
 * always there.
 */
static void test_escape_short(void **state)
{
	char in[5000], out[64];
	size_t n;

	(void)state;
	assert_string_equal(log_escape_short("fits\n", out, sizeof(out)), "fits\\x0a");
	/* 3000 newlines: escaped 12000 bytes; both halves whole escapes. */
	memset(in, '\n', 3000);
	strcpy(in + 3000, "/leaf");
	log_escape_short(in, out, sizeof(out));
	n = strlen(out);
	assert_true(n < sizeof(out));
	assert_non_null(strstr(out, "..."));
	assert_memory_equal(out, "\\x0a\\x0a", 8);
	assert_string_equal(out + n - 5, "/leaf");
	for (const char *p = out; *p; p++) {
		if (*p == '\\') {
			assert_memory_equal(p, "\\x0a", 4);
			p += 3;
		}
	}
	/* UTF-8 (3 bytes each): no sequence cut. */
	in[0] = '\0';
	for (int i = 0; i < 1000; i++) {
		strcat(in, "\xe5\x90\x8d");
	}
	log_escape_short(in, out, sizeof(out));
	n = strlen(out);
	assert_non_null(strstr(out, "..."));
	for (size_t i = 0; i < n; i += (out[i] == '.') ? 1 : 3) {
		if (out[i] != '.') {
			assert_memory_equal(out + i, "\xe5\x90\x8d", 3);
		}
	}
}

/* A log line carrying a raw newline and ESC comes out as one line. */
static void test_log_line_is_one_line(void **state)
{
	char path[] = "/tmp/rdmacp-test-log.XXXXXX", buf[512];
	int fd = mkstemp(path), saved = dup(2);
	FILE *f;
	size_t n;

	(void)state;
	assert_true(fd >= 0 && saved >= 0);
	fflush(stderr);
	assert_true(dup2(fd, 2) == 2);
	log_set_prefix_mode(true, "test");
	log_notice("name %s done", "x\n<0>FORGED\x1b[2J\\x0a");
	fflush(stderr);
	assert_true(dup2(saved, 2) == 2);
	close(saved);
	f = fdopen(fd, "r");
	assert_non_null(f);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	/* Backslashes already there stay as they are: escaped text reads the same. */
	assert_string_equal(buf, "<5>name x\\x0a<0>FORGED\\x1b[2J\\x0a done\n");
}

/* One log_notice() with stderr on a fresh file; journal_stream: set JOURNAL_STREAM to it. */
static void log_daemon_line(int journal, char *buf, size_t size)
{
	char path[] = "/tmp/rdmacp-test-log.XXXXXX", env[64];
	int fd = mkstemp(path), saved = dup(2);
	struct stat st;
	FILE *f;
	size_t n;

	assert_true(fd >= 0 && saved >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	if (journal == 1) {
		snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino);
		assert_int_equal(setenv("JOURNAL_STREAM", env, 1), 0);
	} else if (journal == 2) {
		/* Inherited from a journal-run parent, but stderr went elsewhere since. */
		snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino + 1);
		assert_int_equal(setenv("JOURNAL_STREAM", env, 1), 0);
	} else {
		assert_int_equal(unsetenv("JOURNAL_STREAM"), 0);
	}
	fflush(stderr);
	assert_true(dup2(fd, 2) == 2);
	log_set_daemon_mode("rdmacpd");
	log_notice("session %s done", "x");
	fflush(stderr);
	assert_true(dup2(saved, 2) == 2);
	close(saved);
	unsetenv("JOURNAL_STREAM");
	log_set_prefix_mode(false, "test");
	f = fdopen(fd, "r");
	assert_non_null(f);
	rewind(f);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
}

static void expect_match(const char *text, const char *pattern)
{
	regex_t re;

	assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
	if (regexec(&re, text, 0, NULL, 0) != 0) {
		regfree(&re);
		fail_msg("\"%s\" does not match /%s/", text, pattern);
	}
	regfree(&re);
}

/* Issue 15 item 12: the daemon's lines carry a time unless the journal adds one. */
static void test_daemon_timestamps(void **state)
{
	char buf[512], want[256];

	(void)state;
	snprintf(want, sizeof(want),
		 "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}[+-][0-9]{2}:[0-"
		 "9]{2} "
		 "rdmacpd\\[%ld\\] notice: session x done\n$",
		 (long)getpid());
	log_daemon_line(0, buf, sizeof(buf));
	expect_match(buf, want);
	log_daemon_line(2, buf, sizeof(buf));
	expect_match(buf, want);
	log_daemon_line(1, buf, sizeof(buf));
	assert_string_equal(buf, "<5>session x done\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_escape_truncates),
		cmocka_unit_test(test_escape_short),
		cmocka_unit_test(test_log_line_is_one_line),
		cmocka_unit_test(test_daemon_timestamps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
