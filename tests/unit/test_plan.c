/* SPDX-License-Identifier: MIT */
/* Plans and journals (src/plan*.c, src/ndjson.c): round trips and bad lines. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ndjson.h"
#include "plan.h"
#include "zfile.h"

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

/* Write a plan of n entries in 3 shards to path; its header in h. */
static void write_plan(const char *path, struct plan_header *h, unsigned n)
{
	XXH3_state_t *st = XXH3_createState();
	char *body = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&body, &len), *f;

	memset(h, 0, sizeof(*h));
	assert_int_equal(plan_new_id(h->id), 0);
	strcpy(h->source, "src");
	strcpy(h->base, "/base");
	strcpy(h->hosts, "a,b");
	strcpy(h->path, "mod/dst");
	strcpy(h->skip, "quick");
	h->port = 7471;
	h->shards = 3;
	for (unsigned i = 1; i <= n; i++) {
		struct plan_entry e = { .n = i,
					.shard = i % 3,
					.ftype = PROTO_FT_REG,
					.size = i,
					.mtime = -5,
					.mtime_ns = 7,
					.mode = 0640 };

		/* A plan of one tree: its top first, every other name beneath it. */
		if (i == 1) {
			e.ftype = PROTO_FT_DIR;
			snprintf(e.name, sizeof(e.name), "d");
		} else {
			snprintf(e.name, sizeof(e.name), "d/f%u", i);
		}
		plan_put_entry(m, &e);
		h->entries++;
		h->bytes += i;
	}
	fclose(m);
	XXH3_128bits_reset(st);
	XXH3_128bits_update(st, body, len);
	plan_digest_final(st, h, h->digest);
	f = fopen(path, "w");
	assert_non_null(f);
	plan_put_header(f, h);
	fwrite(body, 1, len, f);
	fclose(f);
	free(body);
	XXH3_freeState(st);
}

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

/* path (a plain file) as a zstd frame into zpath; only the first keep bytes of it when keep. */
static void compress_file(const char *path, const char *zpath, size_t keep)
{
	struct zwriter *w;
	char buf[4096];
	size_t n;
	FILE *in = fopen(path, "r");
	int fd = open(zpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_non_null(in);
	assert_true(fd >= 0);
	assert_int_equal(zwriter_new(fd, true, &w), 0);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
		assert_int_equal(zwriter_write(w, buf, n), 0);
	}
	assert_int_equal(zwriter_finish(w), 0);
	zwriter_free(w);
	if (keep) {
		assert_int_equal(ftruncate(fd, (off_t)keep), 0);
	}
	close(fd);
	fclose(in);
}

/* A zstd plan reads as its plain self, passes twice; cut short or corrupt it names the line. */
static void test_plan_zstd(void **state)
{
	char path[] = "/tmp/test_plan.XXXXXX", zpath[64], err[8192];
	struct plan_header h;
	struct plan_reader *r;
	struct plan_entry e;
	struct stat st;
	unsigned n;
	int fd = mkstemp(path), q;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	snprintf(zpath, sizeof(zpath), "%s.zst", path);
	write_plan(path, &h, 20000);
	compress_file(path, zpath, 0);
	assert_int_equal(plan_open(zpath, &r, err, sizeof(err)), 0);
	assert_string_equal(plan_reader_header(r)->id, h.id);
	for (int pass = 0; pass < 2; pass++) {
		n = 0;
		assert_int_equal(plan_rewind(r), 0);
		while ((q = plan_next(r, &e, err, sizeof(err))) > 0) {
			n++;
			assert_int_equal(e.n, n);
		}
		assert_int_equal(q, 0);
		assert_int_equal(n, 20000);
	}
	plan_close(r);

	/* Cut in the middle of the frame: an error naming a line past the header. */
	assert_int_equal(stat(zpath, &st), 0);
	compress_file(path, zpath, (size_t)st.st_size / 2);
	assert_int_equal(plan_open(zpath, &r, err, sizeof(err)), 0);
	n = 0;
	while ((q = plan_next(r, &e, err, sizeof(err))) > 0) {
		n++;
	}
	assert_int_equal(q, -EBADMSG);
	assert_non_null(strstr(err, "the zstd stream ends inside a frame"));
	{
		char want[128];

		snprintf(want, sizeof(want), "%s:%u: ", zpath, n + 2);
		assert_non_null(strstr(err, want));
	}
	plan_close(r);
	unlink(zpath);
	unlink(path);
}

/* zreader: fgets-like lines, capped; tell and seek, plain and zstd alike. */
static void test_zreader(void **state)
{
	char path[] = "/tmp/test_zfile.XXXXXX", zpath[64], buf[16];
	const char *files[2] = { path, zpath };
	int fd = mkstemp(path);
	size_t len;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "one\ntwo-and-more\nthree", 23), 23);
	close(fd);
	snprintf(zpath, sizeof(zpath), "%s.zst", path);
	compress_file(path, zpath, 0);
	for (int i = 0; i < 2; i++) {
		struct zreader *r;
		uint64_t at;

		assert_int_equal(zreader_open(files[i], &r), 0);
		assert_int_equal(zreader_compressed(r), i == 1);
		assert_int_equal(zreader_gets(r, buf, sizeof(buf), &len), 1);
		assert_string_equal(buf, "one\n");
		at = zreader_tell(r);
		assert_int_equal(at, 4);
		/* A line longer than the buffer: cap - 1 bytes, no newline. */
		assert_int_equal(zreader_gets(r, buf, 8, &len), 1);
		assert_string_equal(buf, "two-and");
		assert_int_equal(zreader_gets(r, buf, sizeof(buf), &len), 1);
		assert_string_equal(buf, "-more\n");
		assert_int_equal(zreader_gets(r, buf, sizeof(buf), &len), 1);
		assert_string_equal(buf, "three");
		assert_int_equal(zreader_gets(r, buf, sizeof(buf), &len), 0);
		assert_int_equal(zreader_seek(r, at), 0);
		assert_int_equal(zreader_gets(r, buf, sizeof(buf), &len), 1);
		assert_string_equal(buf, "two-and-more\n");
		zreader_close(r);
	}
	unlink(zpath);
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
	nameset_free(&s);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ndjson_values), cmocka_unit_test(test_ndjson_bad),
		cmocka_unit_test(test_ndjson_names),  cmocka_unit_test(test_plan_round_trip),
		cmocka_unit_test(test_balancer),      cmocka_unit_test(test_journal_lines),
		cmocka_unit_test(test_nameset),	      cmocka_unit_test(test_plan_copy_options),
		cmocka_unit_test(test_plan_zstd),     cmocka_unit_test(test_zreader),
		cmocka_unit_test(test_plan_split),    cmocka_unit_test(test_journal_ranges),
		cmocka_unit_test(test_plan_names),    cmocka_unit_test(test_journal_read),
		cmocka_unit_test(test_nameset_marks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
