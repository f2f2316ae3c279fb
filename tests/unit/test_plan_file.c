/* SPDX-License-Identifier: MIT */
/*
 * Plan files (src/plan.c, plan_read.c, plan_balance.c): entries balanced over
 * shards, a plan written and read back, its optional header keys, split
 * files' ranges and the names of a plan edited by hand, each bad line refused
 * naming it.
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

#include "plan.h"
#include "plan_harness.h"

static void test_plan_round_trip(void **state)
{
	char path[] = "/tmp/test_plan.XXXXXX", err[8192];
	struct plan_header h;
	struct plan_reader *r;
	struct plan_entry e;
	unsigned n = 0;
	int fd = mkstemp(path), q;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	write_plan(path, &h, 50);
	assert_int_equal(plan_open(path, &r, err, sizeof(err)), 0);
	assert_string_equal(plan_reader_header(r)->id, h.id);
	assert_string_equal(plan_reader_header(r)->hosts, "a,b");
	assert_int_equal(plan_reader_header(r)->shards, 3);
	for (int pass = 0; pass < 2; pass++) {
		n = 0;
		assert_int_equal(plan_rewind(r), 0);
		while ((q = plan_next(r, &e, err, sizeof(err))) > 0) {
			n++;
			assert_int_equal(e.n, n);
			assert_int_equal(e.shard, n % 3);
			assert_int_equal(e.mtime, -5);
			assert_int_equal(e.mode, 0640);
		}
		assert_int_equal(q, 0);
		assert_int_equal(n, 50);
	}
	plan_close(r);
	unlink(path);
}

static void test_balancer(void **state)
{
	struct plan_balancer b;
	uint64_t count[4] = { 0 };

	(void)state;
	assert_int_equal(plan_balancer_init(&b, 4), 0);
	/* One huge file and many small ones: the small ones spread over the other shards. */
	uint32_t huge = plan_balancer_pick(&b, 1ull << 30);

	count[huge]++;
	for (int i = 0; i < 3000; i++) {
		count[plan_balancer_pick(&b, 1000)]++;
	}
	assert_int_equal(count[huge], 1);
	for (int i = 0; i < 4; i++) {
		assert_true(i == (int)huge || (count[i] >= 999 && count[i] <= 1001));
	}
	plan_balancer_free(&b);
	assert_int_equal(plan_balancer_init(&b, 3), 0);
	for (int i = 0; i < 300; i++) {
		plan_balancer_pick(&b, 0);
	}
	assert_true(b.load[0] == b.load[1] && b.load[1] == b.load[2]);
	plan_balancer_free(&b);
}

/* The plan at path with its header's "files_from":false followed by extra. */
static void header_add(const char *path, const char *extra)
{
	char *buf = calloc(1, 1 << 20), *at, *rest;
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(buf);
	assert_non_null(f);
	n = fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	at = strstr(buf, "\"files_from\":false");
	assert_non_null(at);
	rest = at + strlen("\"files_from\":false");
	f = fopen(path, "w");
	assert_non_null(f);
	fwrite(buf, 1, (size_t)(rest - buf), f);
	fputs(extra, f);
	fwrite(rest, 1, n - (size_t)(rest - buf), f);
	fclose(f);
	free(buf);
}

/* --delta and --assume-zero-target in a plan: optional keys, false when absent. */
static void test_plan_copy_options(void **state)
{
	char path[] = "/tmp/test_plan.XXXXXX", err[8192];
	struct plan_header h;
	struct plan_reader *r;
	char *line = NULL;
	size_t cap = 0;
	FILE *f;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	write_plan(path, &h, 5);
	assert_int_equal(plan_open(path, &r, err, sizeof(err)), 0);
	assert_false(plan_reader_header(r)->delta);
	assert_false(plan_reader_header(r)->assume_zero);
	plan_close(r);

	/* Written only when set, and read back. */
	h.delta = h.assume_zero = true;
	f = open_memstream(&line, &cap);
	plan_put_header(f, &h);
	fclose(f);
	assert_non_null(strstr(line, "\"delta\":true"));
	assert_non_null(strstr(line, "\"assume_zero_target\":true"));
	free(line);
	header_add(path, ",\"delta\":true,\"assume_zero_target\":true");
	assert_int_equal(plan_open(path, &r, err, sizeof(err)), 0);
	assert_true(plan_reader_header(r)->delta);
	assert_true(plan_reader_header(r)->assume_zero);
	plan_close(r);

	/* Not a boolean: a bad plan, naming the key. */
	write_plan(path, &h, 5);
	header_add(path, ",\"delta\":1");
	assert_int_equal(plan_open(path, &r, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "\"delta\""));
	unlink(path);
}

/*
 * A plan of these entry lines (each without its newline), header and digest
 * made to fit; files_from: names of a list (any names beneath the base), else
 * of one tree (the first entry its top).
 */
static void write_plan_lines_from(const char *path, const char *const *lines, size_t n,
				  bool files_from)
{
	XXH3_state_t *st = XXH3_createState();
	struct plan_header h;
	FILE *f;

	memset(&h, 0, sizeof(h));
	assert_int_equal(plan_new_id(h.id), 0);
	strcpy(h.source, "src");
	strcpy(h.base, "/base");
	strcpy(h.hosts, "a");
	strcpy(h.path, "mod/dst");
	strcpy(h.skip, "none");
	h.port = 7471;
	h.shards = 3;
	h.split = 4096;
	h.files_from = files_from;
	h.entries = n;
	XXH3_128bits_reset(st);
	for (size_t i = 0; i < n; i++) {
		XXH3_128bits_update(st, lines[i], strlen(lines[i]));
		XXH3_128bits_update(st, "\n", 1);
	}
	plan_digest_final(st, &h, h.digest);
	f = fopen(path, "w");
	assert_non_null(f);
	plan_put_header(f, &h);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s\n", lines[i]);
	}
	fclose(f);
	XXH3_freeState(st);
}

static void write_plan_lines(const char *path, const char *const *lines, size_t n)
{
	write_plan_lines_from(path, lines, n, true);
}

/* Read a plan through: 0 at its end, or -EBADMSG with err holding want. */
static int read_through(const char *path, const char *want, struct plan_entry *last)
{
	char err[8192];
	struct plan_reader *r;
	int q;

	assert_int_equal(plan_open(path, &r, err, sizeof(err)), 0);
	while ((q = plan_next(r, last, err, sizeof(err))) > 0) {
	}
	plan_close(r);
	if (q < 0 && want && !strstr(err, want)) {
		fail_msg("error '%s', wanted '%s'", err, want);
	}
	return q;
}

#define F(n, name, size, extra)                                                             \
	"{\"n\":" #n ",\"shard\":0,\"type\":\"file\",\"name\":\"" name "\",\"size\":" #size \
	",\"mtime\":1,\"mtime_ns\":0,\"mode\":420" extra "}"
#define R(n, shard, name, r, off, size)                                               \
	"{\"n\":" #n ",\"shard\":" #shard ",\"type\":\"range\",\"name\":\"" name      \
	"\",\"size\":" #size ",\"mtime\":1,\"mtime_ns\":0,\"mode\":420,\"range\":" #r \
	",\"offset\":" #off "}"

/*
 * Split files: the ranges right after their file, in order, contiguous,
 * adding up to its size; anything else is refused naming the line.
 */
static void test_plan_split(void **state)
{
	char path[] = "/tmp/test_plan.XXXXXX";
	struct plan_entry e;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	{
		const char *good[] = { F(1, "a", 10000, ",\"ranges\":3"), R(2, 1, "a", 0, 0, 4096),
				       R(3, 2, "a", 1, 4096, 4096), R(4, 0, "a", 2, 8192, 1808),
				       F(5, "b", 5, "") };
		struct plan_reader *r;
		char err[8192];
		unsigned ranges = 0;

		write_plan_lines(path, good, 5);
		assert_int_equal(plan_open(path, &r, err, sizeof(err)), 0);
		assert_int_equal(plan_reader_header(r)->split, 4096);
		while (plan_next(r, &e, err, sizeof(err)) > 0) {
			if (e.n == 1) {
				assert_int_equal(e.ranges, 3);
			}
			if (e.ftype == PLAN_FT_RANGE) {
				assert_int_equal(e.range, ranges);
				assert_int_equal(e.offset, 4096u * ranges);
				ranges++;
			}
		}
		assert_int_equal(ranges, 3);
		assert_int_equal(e.n, 5);
		plan_close(r);
	}
	static const struct {
		const char *lines[4];
		size_t n;
		const char *why;
	} bad[] = {
		{ { F(1, "a", 8192, ",\"ranges\":2"), R(2, 0, "a", 0, 0, 4096), F(3, "b", 1, "") },
		  3,
		  ":4: range 1 of the split file at line 2 is due here" },
		{ { F(1, "a", 8192, ",\"ranges\":2"), R(2, 0, "a", 0, 0, 4096) },
		  2,
		  "ends before the 2 ranges of the split file at line 2" },
		{ { R(1, 0, "a", 0, 0, 4096) }, 1, ":2: a range with no split file before it" },
		{ { F(1, "a", 8192, ",\"ranges\":2"), R(2, 0, "a", 0, 0, 4096),
		    R(3, 0, "a", 1, 4097, 4095) },
		  3,
		  ":4: range 1 starts at 4097, where the one before ended at 4096" },
		{ { F(1, "a", 8192, ",\"ranges\":2"), R(2, 0, "a", 0, 0, 4096),
		    R(3, 0, "a", 1, 4096, 4000) },
		  3,
		  ":4: range 1 (4000 bytes at 4096) does not fit" },
		{ { F(1, "a", 8192, ",\"ranges\":2"), R(2, 0, "a", 0, 0, 4096),
		    R(3, 0, "a", 2, 4096, 4096) },
		  3,
		  ":4: range number 2 where 1 was due" },
		{ { F(1, "a", 8192, ",\"ranges\":2"), R(2, 0, "b", 0, 0, 4096) },
		  2,
		  ":3: a range of another name" },
		{ { F(1, "a", 8192, ",\"ranges\":1"), R(2, 0, "a", 0, 0, 8192) },
		  2,
		  ":2: a split file in 1 ranges" },
		{ { F(1, "a", 8192, ",\"ranges\":2000"), R(2, 0, "a", 0, 0, 8192) },
		  2,
		  ":2: a split file in 2000 ranges" },
		{ { F(1, "a", 8192, ",\"ranges\":2"), R(2, 0, "a", 0, 0, 0),
		    R(3, 0, "a", 1, 0, 8192) },
		  3,
		  ":3: range 0 (0 bytes at 0) does not fit" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_plan_lines(path, bad[i].lines, bad[i].n);
		assert_int_equal(read_through(path, bad[i].why, &e), -EBADMSG);
	}
	unlink(path);
}

#define D(n, name)                                                                     \
	"{\"n\":" #n ",\"shard\":0,\"type\":\"dir\",\"name\":\"" name "\",\"size\":0," \
	"\"mtime\":1,\"mtime_ns\":0,\"mode\":493}"
#define L(n, name, link)                                                                         \
	"{\"n\":" #n ",\"shard\":0,\"type\":\"hardlink\",\"name\":\"" name "\",\"link\":\"" link \
	"\",\"size\":0,\"mtime\":1,\"mtime_ns\":0,\"mode\":420}"

/*
 * The names of a plan edited by hand (its digest made again, as anyone can):
 * beneath the source and the destination, never absolute or with . or ..;
 * in a plan of one tree beneath its first entry, the top, itself one name.
 */
static void test_plan_names(void **state)
{
	char path[] = "/tmp/test_plan.XXXXXX";
	struct plan_entry e;
	int fd = mkstemp(path);
	static const struct {
		const char *lines[3];
		size_t n;
		bool files_from;
		const char *why; /* NULL: a good plan */
	} cases[] = {
		{ { D(1, "t"), F(2, "t/a", 1, ""), L(3, "t/b", "t/a") }, 3, false, NULL },
		{ { F(1, "a", 1, ""), F(2, "b", 1, ""), L(3, "c/d", "a") }, 3, true, NULL },
		{ { D(1, "t"), F(2, "../x", 1, "") },
		  2,
		  false,
		  ":3: the entry's name '../x' is not" },
		{ { F(1, "a", 1, ""), F(2, "a/../../x", 1, "") }, 2, true, ":3: the entry's name" },
		{ { F(1, "/etc/passwd", 1, "") }, 1, true, ":2: the entry's name '/etc/passwd'" },
		{ { F(1, "a/./b", 1, "") }, 1, true, ":2: the entry's name" },
		{ { F(1, "a//b", 1, "") }, 1, true, ":2: the entry's name" },
		{ { F(1, "a/", 1, "") }, 1, true, ":2: the entry's name" },
		{ { D(1, "t"), L(2, "t/a", "../x") }, 2, false, ":3: the entry's link '../x'" },
		{ { D(1, "t"), F(2, "u/a", 1, "") },
		  2,
		  false,
		  "'u/a' is not beneath the plan's top" },
		{ { D(1, "t"), F(2, "tt/a", 1, "") }, 2, false, "'tt/a' is not beneath" },
		{ { D(1, "t"), F(2, "t", 1, "") }, 2, false, "'t' is not beneath" },
		{ { D(1, "t"), L(2, "t/a", "u") }, 2, false, "link 'u' is not beneath" },
		{ { D(1, "t/a"), F(2, "t/a/b", 1, "") }, 2, false, ":2: the first entry 't/a'" },
	};

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		write_plan_lines_from(path, cases[i].lines, cases[i].n, cases[i].files_from);
		assert_int_equal(read_through(path, cases[i].why, &e), cases[i].why ? -EBADMSG : 0);
	}
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_round_trip),	  cmocka_unit_test(test_balancer),
		cmocka_unit_test(test_plan_copy_options), cmocka_unit_test(test_plan_split),
		cmocka_unit_test(test_plan_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
