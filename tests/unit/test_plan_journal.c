/* SPDX-License-Identifier: MIT */
/*
 * The ndjson lines plans and journals are written in (src/ndjson.c), and
 * journals (src/plan_journal.c, plan_nameset.c): values, names and bad lines;
 * journal lines written and parsed, range lines, a journal read back with its
 * torn or hostile last lines; the name and range sets a resume keeps.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ndjson.h"
#include "plan.h"

static struct ndjson_obj obj;

static int parse(const char *line, const char **why)
{
	return ndjson_parse(line, strlen(line), &obj, why);
}

static void test_ndjson_values(void **state)
{
	const char *why, *s;
	int64_t i;
	uint64_t u;
	bool b;

	(void)state;
	assert_int_equal(
	    parse("{\"a\":\"x\\ny\\u00e9\\ud83d\\ude00\",\"n\":-12,\"u\":18446744073709551615,"
		  "\"t\":true,\"z\":null}",
		  &why),
	    -EINVAL); /* u is beyond int64 */
	assert_int_equal(
	    parse(" {\"a\":\"x\\ny\\u00e9\\ud83d\\ude00\", \"n\":-12,\"t\":true,\"z\":null} ",
		  &why),
	    0);
	assert_int_equal(ndjson_get_str(&obj, "a", &s), 0);
	assert_string_equal(s, "x\ny\xc3\xa9\xf0\x9f\x98\x80");
	assert_int_equal(ndjson_get_i64(&obj, "n", &i), 0);
	assert_int_equal(i, -12);
	assert_int_equal(ndjson_get_u64(&obj, "n", &u), -EINVAL);
	assert_int_equal(ndjson_get_bool(&obj, "t", &b), 0);
	assert_true(b);
	assert_int_equal(ndjson_get_str(&obj, "n", &s), -EINVAL);
	assert_int_equal(ndjson_get_str(&obj, "missing", &s), -ENOENT);
	assert_int_equal(parse("{}", &why), 0);

	/* Keys alike in their first byte, each found as its own. */
	assert_int_equal(parse("{\"mode\":1,\"mtime\":2,\"m\":3,\"mtime_ns\":4}", &why), 0);
	assert_int_equal(ndjson_get_i64(&obj, "m", &i), 0);
	assert_int_equal(i, 3);
	assert_int_equal(ndjson_get_i64(&obj, "mtime", &i), 0);
	assert_int_equal(i, 2);
	assert_int_equal(ndjson_get_i64(&obj, "mtime_ns", &i), 0);
	assert_int_equal(i, 4);
	assert_int_equal(ndjson_get_i64(&obj, "mt", &i), -ENOENT);
	assert_int_equal(parse("{\"mode\":1,\"m\":2,\"mode\":3}", &why), -EINVAL);
}

/* A string as long as a line may be, plain and with an escape inside; one byte more. */
static void test_ndjson_room(void **state)
{
	const size_t frame = strlen("{\"a\":\"\"}");
	char *line = malloc(NDJSON_MAX_LINE + 2);
	const char *why, *s;

	(void)state;
	assert_non_null(line);
	for (int over = 0; over <= 1; over++) {
		for (int esc = 0; esc <= 1; esc++) {
			size_t body = NDJSON_MAX_LINE - frame + (size_t)over, n = 6;

			memcpy(line, "{\"a\":\"", 6);
			memset(line + n, 'x', body);
			if (esc) {
				memcpy(line + n + body / 2, "\\n", 2);
			}
			n += body;
			memcpy(line + n, "\"}", 3);
			why = NULL;
			if (over) {
				assert_int_equal(parse(line, &why), -E2BIG);
				continue;
			}
			assert_int_equal(parse(line, &why), 0);
			assert_int_equal(ndjson_get_str(&obj, "a", &s), 0);
			assert_int_equal(strlen(s), body - (size_t)esc);
			assert_int_equal(s[body / 2], esc ? '\n' : 'x');
			assert_int_equal(s[body - 1 - (size_t)esc], 'x');
		}
	}
	free(line);
}

static void test_ndjson_bad(void **state)
{
	static const char *const bad[] = {
		"",
		"[1]",
		"{\"a\":1",
		"{\"a\":1,}",
		"{\"a\":1} x",
		"{\"a\":\"\\x\"}",
		"{\"a\":\"\\u12\"}",
		"{\"a\":\"\\u0000\"}",
		"{\"a\":\"\\udc00\"}",
		"{\"a\":\"\\ud800x\"}",
		"{\"a\":{\"b\":1}}",
		"{\"a\":1.5}",
		"{\"a\":01}",
		"{\"a\":1,\"a\":2}",
		"{\"a\":\"tab\there\"}",
		"{\"a\":\"unterminated",
		"{\"a\":\"ends in an escape\\",
		"{\"a\":tru}",
		"{a:1}",
	};
	const char *why;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		assert_int_not_equal(parse(bad[i], &why), 0);
		assert_non_null(why);
	}
}

static void test_ndjson_names(void **state)
{
	static const char *const names[] = { "plain",		"new\nline \"q\" \\",
					     "bad\xff",		"\x01\x7f",
					     "\xc0\x80",	"\xed\xa0\x80",
					     "\xf0\x9f\x98\x80" };
	char buf[256], out[64];
	const char *why;

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		FILE *f = fmemopen(buf, sizeof(buf), "w");

		assert_non_null(f);
		fputs("{\"x\":1", f);
		ndjson_put_name(f, "name", names[i]);
		fputs("}", f);
		fclose(f);
		assert_int_equal(parse(buf, &why), 0);
		assert_int_equal(ndjson_get_name(&obj, "name", out, sizeof(out)), 0);
		assert_string_equal(out, names[i]);
	}
	assert_int_equal(parse("{\"name_hex\":\"6100\"}", &why), 0);
	assert_int_equal(ndjson_get_name(&obj, "name", out, sizeof(out)), -EINVAL);
	assert_int_equal(parse("{\"name_hex\":\"6\"}", &why), 0);
	assert_int_equal(ndjson_get_name(&obj, "name", out, sizeof(out)), -EINVAL);
	assert_int_equal(parse("{\"name\":\"abcdef\"}", &why), 0);
	assert_int_equal(ndjson_get_name(&obj, "name", out, 4), -ENAMETOOLONG);
}

static void test_journal_lines(void **state)
{
	char buf[1024];
	struct journal_line jl;
	const char *why;
	FILE *f;

	(void)state;
	f = fmemopen(buf, sizeof(buf), "w");
	journal_put_entry(f, "a\nb", JOURNAL_FAILED, 0, "NOT_FOUND");
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	assert_int_equal(journal_parse(buf, strlen(buf), &obj, &jl, &why), 0);
	assert_int_equal(jl.kind, JL_ENTRY);
	assert_int_equal(jl.state, JOURNAL_FAILED);
	assert_string_equal(jl.name, "a\nb");
	assert_string_equal(jl.code, "NOT_FOUND");
	strcpy(buf, "{\"state\":\"eaten\",\"name\":\"x\"}");
	assert_int_equal(journal_parse(buf, strlen(buf), &obj, &jl, &why), -EBADMSG);
	strcpy(buf, "{\"rdmacp_journal\":1,\"plan\":\"short\",\"shard\":0,\"shards\":2}");
	assert_int_equal(journal_parse(buf, strlen(buf), &obj, &jl, &why), -EBADMSG);
}

/* plan --every-host: a destination's outcome of a push; a malformed one refused. */
static void test_journal_dests(void **state)
{
	static const char *const bad[] = {
		"{\"dest\":\"h:m/\",\"status\":\"copied\",\"bytes\":1,\"exit\":0}",
		"{\"dest\":\"h:m/\",\"state\":\"skipped\",\"status\":\"copied\",\"bytes\":1,"
		"\"exit\":0}",
		"{\"dest\":\"h:m/\",\"state\":\"copied\",\"bytes\":1,\"exit\":0}",
		"{\"dest\":\"h:m/\",\"state\":\"copied\",\"status\":\"copied\",\"exit\":0}",
		"{\"dest\":\"h:m/\",\"state\":\"copied\",\"status\":\"copied\",\"bytes\":1}",
		"{\"dest\":\"h:m/\",\"state\":\"failed\",\"status\":"
		"\"a status far longer than any status is\",\"bytes\":1,\"exit\":0}",
		"{\"dest\":7,\"state\":\"copied\",\"status\":\"copied\",\"bytes\":1,\"exit\":0}",
	};
	struct journal_line jl;
	char buf[1024];
	const char *why;
	FILE *f;

	(void)state;
	f = fmemopen(buf, sizeof(buf), "w");
	journal_put_dest(f, "[::1]:m/p/", JOURNAL_FAILED, "unreached", 0, 0, 11, "down\n");
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	assert_int_equal(journal_parse(buf, strlen(buf), &obj, &jl, &why), 0);
	assert_int_equal(jl.kind, JL_DEST);
	assert_int_equal(jl.state, JOURNAL_FAILED);
	assert_int_equal(jl.exit_code, 11);
	assert_string_equal(jl.name, "[::1]:m/p/");
	assert_string_equal(jl.code, "unreached");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (journal_parse(bad[i], strlen(bad[i]), &obj, &jl, &why) != -EBADMSG) {
			fail_msg("accepted: %s", bad[i]);
		}
	}
}

static void test_nameset(void **state)
{
	struct nameset s = { 0 };
	char name[32];

	(void)state;
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		assert_int_equal(nameset_put(&s, name, JOURNAL_FAILED, "IO"), 0);
	}
	assert_int_equal(nameset_put(&s, "n7", JOURNAL_COPIED, NULL), 0);
	assert_int_equal(s.n, 5000);
	assert_int_equal(nameset_get(&s, "n7")->state, JOURNAL_COPIED);
	assert_int_equal(nameset_get(&s, "n4999")->state, JOURNAL_FAILED);
	assert_string_equal(nameset_get(&s, "n8")->code, "IO");
	assert_null(nameset_get(&s, "n5000"));
	nameset_free(&s);
}

/* Range lines in journals: their number and digest; names and ranges keyed apart. */
static void test_journal_ranges(void **state)
{
	static const uint8_t hash[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0xff };
	struct journal_line jl;
	struct nameset ns = { 0 };
	struct rangeset rs = { 0 };
	char *buf = NULL;
	size_t len = 0;
	const char *why;
	FILE *m = open_memstream(&buf, &len);

	(void)state;
	journal_put_range(m, "dir/big", 7, JOURNAL_COPIED, 4096, NULL, hash);
	fclose(m);
	buf[len - 1] = '\0';
	assert_int_equal(journal_parse(buf, len - 1, &obj, &jl, &why), 0);
	assert_int_equal(jl.kind, JL_ENTRY);
	assert_int_equal(jl.range, 7);
	assert_true(jl.has_hash);
	assert_memory_equal(jl.hash, hash, 16);
	assert_string_equal(jl.name, "dir/big");
	free(buf);
	static const char *const bad[] = {
		"{\"state\":\"copied\",\"name\":\"a\",\"range\":1}",
		"{\"state\":\"copied\",\"name\":\"a\",\"range\":1,\"xxh128\":\"00\"}",
		"{\"state\":\"copied\",\"name\":\"a\",\"range\":5000,\"xxh128\":"
		"\"000102030405060708090a0b0c0d0e0f\"}",
		"{\"state\":\"copied\",\"name\":\"a\",\"xxh128\":"
		"\"000102030405060708090a0b0c0d0e0f\"}",
		"{\"state\":\"copied\",\"name\":\"a\",\"range\":1,\"xxh128\":"
		"\"000102030405060708090a0b0c0d0e0g\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (journal_parse(bad[i], strlen(bad[i]), &obj, &jl, &why) != -EBADMSG) {
			fail_msg("accepted: %s", bad[i]);
		}
	}
	assert_int_equal(
	    journal_parse("{\"state\":\"failed\",\"name\":\"a\",\"range\":1}", 39, &obj, &jl, &why),
	    0);
	assert_int_equal(jl.range, 1);
	/* A range kept (its file unchanged at the destination) has no part and no digest. */
	const char *line;

	line = "{\"state\":\"skipped\",\"name\":\"a\",\"range\":2}";
	assert_int_equal(journal_parse(line, strlen(line), &obj, &jl, &why), 0);
	assert_int_equal(jl.state, JOURNAL_SKIPPED);
	assert_false(jl.has_hash);
	line = "{\"state\":\"resumed\",\"name\":\"a\",\"range\":2}";
	assert_int_equal(journal_parse(line, strlen(line), &obj, &jl, &why), -EBADMSG);
	line = "{\"state\":\"vanished\",\"name\":\"a\",\"code\":\"MISSING_OK\"}";
	assert_int_equal(journal_parse(line, strlen(line), &obj, &jl, &why), 0);
	assert_int_equal(jl.state, JOURNAL_VANISHED);
	assert_string_equal(jl.code, "MISSING_OK");
	assert_int_equal(nameset_put(&ns, "a", JOURNAL_COPIED, NULL), 0);
	assert_int_equal(nameset_put_range(&ns, "a", 0, JOURNAL_FAILED, "X"), 0);
	assert_int_equal(nameset_get(&ns, "a")->state, JOURNAL_COPIED);
	assert_int_equal(nameset_get_range(&ns, "a", 0)->state, JOURNAL_FAILED);
	assert_null(nameset_get_range(&ns, "a", 1));
	for (uint32_t r = 0; r < 300; r++) {
		uint8_t h[16] = { (uint8_t)r, (uint8_t)(r >> 8) };

		assert_int_equal(rangeset_put(&rs, "file", r, h), 0);
	}
	assert_int_equal(rangeset_get(&rs, "file", 299)[0], 299 & 0xff);
	assert_int_equal(rangeset_get(&rs, "file", 299)[1], 1);
	assert_null(rangeset_get(&rs, "other", 0));
	nameset_free(&ns);
	rangeset_free(&rs);
}

static int last_line(void *ud, uint64_t line, const struct journal_line *jl)
{
	(void)jl;
	*(uint64_t *)ud = line;
	return 0;
}

/*
 * A journal read back: a last line without its newline (a kill, or a crash's
 * NUL bytes) is no record and is left out; a whole line with a NUL byte in
 * it, too long, or not a journal line is refused naming it.
 */
static void test_journal_read(void **state)
{
	static const char head[] = "{\"rdmacp_journal\":1,\"plan\":\"0123456789abcdef0123456789"
				   "abcdef\",\"shard\":0,\"shards\":1}\n"
				   "{\"state\":\"copied\",\"name\":\"t/a\"}\n";
	static char nuls[4096], longline[70000];
	static const struct {
		const char *tail;
		size_t len;
		int want;
		const char *why;
	} cases[] = {
#define TAIL(lit) lit, sizeof(lit) - 1
		{ TAIL(""), 0, NULL },
		{ TAIL("{\"state\":\"cop"), 0, NULL },
		{ nuls, sizeof(nuls), 0, NULL },
		{ TAIL("{\"state\":\"copied\",\"name\":\"t/b\"}\0\n"), -EBADMSG, ":3: a NUL byte" },
		{ TAIL("\0\n"), -EBADMSG, ":3: a NUL byte" },
		{ TAIL("garbage\n"), -EBADMSG, ":3: " },
		{ longline, sizeof(longline), -EBADMSG, ":3: a line longer than 64 KiB" },
		{ TAIL("{\"state\":\"copied\",\"name\":\"../x\"}\n"), -EBADMSG,
		  ":3: an entry without" },
#undef TAIL
	};
	char path[] = "/tmp/test_journal.XXXXXX", err[8192];
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	memset(longline, 'x', sizeof(longline));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t last = 0;
		off_t good = -1;
		int r;

		assert_int_equal(ftruncate(fd, 0), 0);
		assert_int_equal(pwrite(fd, head, sizeof(head) - 1, 0), (ssize_t)sizeof(head) - 1);
		assert_int_equal(pwrite(fd, cases[i].tail, cases[i].len, sizeof(head) - 1),
				 (ssize_t)cases[i].len);
		r = journal_read(fd, path, last_line, &last, &good, err, sizeof(err));
		assert_int_equal(r, cases[i].want);
		if (r == 0) {
			assert_int_equal(last, 2);
			assert_int_equal(good, sizeof(head) - 1);
		} else if (!strstr(err, cases[i].why)) {
			fail_msg("case %zu: error '%s', wanted '%s'", i, err, cases[i].why);
		}
	}
	close(fd);
	unlink(path);
}

/* Marks on names: kept when a later outcome replaces the state, counted where missing. */
static void test_nameset_marks(void **state)
{
	struct nameset s = { 0 };

	(void)state;
	assert_false(nameset_mark(&s, "a", NAMESET_PLANNED));
	assert_int_equal(nameset_put(&s, "a", JOURNAL_COPIED, NULL), 0);
	assert_int_equal(nameset_put_range(&s, "a", 3, JOURNAL_COPIED, NULL), 0);
	assert_int_equal(nameset_put(&s, "b", JOURNAL_FAILED, "IO"), 0);
	assert_int_equal(nameset_count_unmarked(&s, NAMESET_PLANNED), 3);
	assert_true(nameset_mark(&s, "a", NAMESET_PLANNED));
	assert_false(nameset_mark(&s, "c", NAMESET_PLANNED));
	assert_false(nameset_mark_range(&s, "a", 2, NAMESET_PLANNED));
	assert_true(nameset_mark_range(&s, "a", 3, NAMESET_PLANNED));
	assert_int_equal(nameset_count_unmarked(&s, NAMESET_PLANNED), 1);
	assert_int_equal(nameset_put(&s, "a", JOURNAL_FAILED, "X"), 0);
	assert_int_equal(nameset_get(&s, "a")->marks, NAMESET_PLANNED);
	assert_int_equal(nameset_count_unmarked(&s, NAMESET_PLANNED | NAMESET_PROVEN), 3);
	/* A proof made again (at another destination): only the marks asked for go. */
	assert_true(nameset_mark(&s, "a", NAMESET_PROVEN));
	nameset_unmark_all(&s, NAMESET_PROVEN);
	assert_int_equal(nameset_get(&s, "a")->marks, NAMESET_PLANNED);
	assert_int_equal(nameset_get(&s, "a")->state, JOURNAL_FAILED);
	nameset_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ndjson_values),  cmocka_unit_test(test_ndjson_bad),
		cmocka_unit_test(test_ndjson_room),    cmocka_unit_test(test_ndjson_names),
		cmocka_unit_test(test_journal_lines),  cmocka_unit_test(test_nameset),
		cmocka_unit_test(test_journal_ranges), cmocka_unit_test(test_journal_dests),
		cmocka_unit_test(test_journal_read),   cmocka_unit_test(test_nameset_marks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
