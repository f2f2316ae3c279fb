/* SPDX-License-Identifier: MIT */
/*
 * Two engines over a destination that already holds files: skipped by size
 * and time or by checksum (and a peer without either capability), --delete
 * (its cap, many, untold, suppressed), and the dry-run probe (planned
 * entries, nothing written).
 */
#include "engine_harness.h"

/*
 * A receiver with skip level quick: a regular file there with the entry's
 * size and mtime is kept (SKIPPED: the sender never opens it, here a source
 * path that does not exist); one byte of size or one nanosecond of mtime
 * off, a missing file, a symlink to a matching file, all are copied; a
 * directory there is taken as always.
 */
static void test_skip_quick(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	const struct timespec t = { .tv_sec = 1700000000, .tv_nsec = 123456789 };
	const struct timespec t1 = { .tv_sec = 1700000000, .tv_nsec = 123456788 };
	static const char *const copied[] = { "newsize", "newtime", "absent", "lnk", NULL };
	uint64_t bytes = 0;
	uint8_t *got;
	size_t len;

	/* "same": the sender would fail to open it; only a skip makes this run clean. */
	s.e[s.n++] = (struct engine_src){ .name = (char *)"same",
					  .path = (char *)"no-such-source",
					  .dirfd = f->src_fd,
					  .ftype = PROTO_FT_REG,
					  .mode = 0644,
					  .size = 3000,
					  .mtime = t };
	dest_file(f, "same", 3000, 99, t);
	bytes += source_file(f, &s, "newsize", 3000);
	dest_file(f, "newsize", 2999, 99, t);
	bytes += source_file(f, &s, "newtime", 3000);
	dest_file(f, "newtime", 3000, 99, t1);
	bytes += source_file(f, &s, "absent", 4000);
	bytes += source_file(f, &s, "lnk", 3000);
	dest_file(f, "victim", 3000, 99, t);
	assert_int_equal(symlinkat("victim", f->dst_fd, "lnk"), 0);
	source_dir(f, &s, "sub");
	assert_int_equal(mkdirat(f->dst_fd, "sub", 0755), 0);
	for (size_t i = 1; i < s.n; i++) {
		s.e[i].mtime = t;
	}
	f->rxr.p.open_flags = PROTO_OPEN_SKIP_QUICK | PROTO_OPEN_PRESERVE;
	f->txr.p.peer_caps = PROTO_CAP_SKIP;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 5, 0, bytes, PERR_OK);
	assert_stats(&f->txr.st, 5, 0, bytes, PERR_OK);
	assert_int_equal(f->rxr.st.files_skipped, 1);
	assert_int_equal(f->txr.st.files_skipped, 1);
	assert_int_equal(f->rxr.ev.skipped, 1);
	assert_int_equal(f->txr.ev.skipped, 1);
	/* A skipped file counts against no limit. */
	assert_int_equal(f->rxr.st.bytes_accepted, bytes);
	for (size_t i = 0; copied[i]; i++) {
		assert_same_file(f->src, f->dst, copied[i]);
	}
	/* The kept file is untouched; the symlink was replaced, its target not. */
	got = read_file(f->dst, "same", &len);
	assert_non_null(got);
	assert_int_equal(len, 3000);
	{
		uint8_t want[3000];

		fill(want, sizeof(want), 99);
		assert_memory_equal(got, want, sizeof(want));
	}
	free(got);
	assert_dest(f->dst, "absent lnk newsize newtime same sub victim");
	{
		struct stat st;

		assert_int_equal(fstatat(f->dst_fd, "lnk", &st, AT_SYMLINK_NOFOLLOW), 0);
		assert_true(S_ISREG(st.st_mode));
	}
	assert_no_fd_beneath(f->src);
}

/* A sender told SKIPPED by a peer that never announced skip levels: a protocol error. */
static void test_skip_without_cap(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "a", 100);
	dest_file(f, "a", 100, 1, (struct timespec){ 0 });
	f->rxr.p.open_flags = PROTO_OPEN_SKIP_EXISTS;

	run_both(f, &s);

	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, "SKIPPED");
}

/* --delete's filter hook: the names it was asked about; it keeps names ending in "keep". */
struct keep_log {
	char asked[512];
};

static bool keep_hook(void *ud, const char *name, bool is_dir)
{
	struct keep_log *k = ud;
	size_t n = strlen(name);

	snprintf(k->asked + strlen(k->asked), sizeof(k->asked) - strlen(k->asked), "%s%s ", name,
		 is_dir ? "/" : "");
	return n >= 4 && !strcmp(name + n - 4, "keep");
}

/* A destination with extras, and the tree the sender sends ("t": a, sub/b). */
static void delete_case(struct fx *f, struct source *s)
{
	static const char *const dirs[] = { "t",	 "t/sub",	 "t/gone", "t/gone/deep",
					    "t/dirkeep", "t/dirkeep/in", NULL };

	source_dir(f, s, "t");
	source_file(f, s, "t/a", 100);
	source_dir(f, s, "t/sub");
	source_file(f, s, "t/sub/b", 200);
	for (size_t i = 0; dirs[i]; i++) {
		assert_int_equal(mkdirat(f->dst_fd, dirs[i], 0755), 0);
	}
	dest_file(f, "t/a", 10, 1, (struct timespec){ 0 });
	dest_file(f, "t/x", 10, 1, (struct timespec){ 0 });
	dest_file(f, "t/filekeep", 10, 1, (struct timespec){ 0 });
	dest_file(f, "t/sub/c", 10, 1, (struct timespec){ 0 });
	dest_file(f, "t/gone/deep/z", 10, 1, (struct timespec){ 0 });
	dest_file(f, "t/dirkeep/in/y", 10, 1, (struct timespec){ 0 });
	/* A transfer's temp file (another session's) and the partial store stay. */
	dest_file(f, "t/.x.rdmacp.AbCd1234", 10, 1, (struct timespec){ .tv_nsec = UTIME_NOW });
	assert_int_equal(mkdirat(f->dst_fd, "t/.rdmacp-partial", 0700), 0);
	dest_file(f, "t/.rdmacp-partial/p", 10, 1, (struct timespec){ 0 });
	/* A symlink to a directory outside: removed itself, what it points to stays. */
	assert_int_equal(symlinkat(f->src, f->dst_fd, "t/sub/out"), 0);
	/* Beside the mirrored directory: never looked at. */
	dest_file(f, "beside", 10, 1, (struct timespec){ 0 });
	f->rxr.p.open_flags = PROTO_OPEN_RECURSIVE | PROTO_OPEN_DELETE;
	f->rxr.p.max_delete = PROTO_NO_MAX_DELETE;
	f->rxr.p.delete_tell_peer = true;
	f->txr.p.peer_caps = PROTO_CAP_DELETE;
	f->rxr.p.peer_caps = PROTO_CAP_DELETE;
}

/*
 * --delete: extras go (files, a symlink, a tree, contents first), what the
 * sender sent stays, and so do what the filter hook keeps (a directory kept
 * is not looked into), temp files and the partial store; both sides count
 * the removals.
 */
static void test_delete(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct keep_log k = { 0 };

	delete_case(f, &s);
	f->rxr.p.delete_keep = keep_hook;
	f->rxr.p.delete_keep_ud = &k;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	/* x, sub/c, sub/out, gone, gone/deep, gone/deep/z */
	assert_int_equal(f->rxr.st.files_deleted, 6);
	assert_int_equal(f->txr.st.files_deleted, 6);
	assert_int_equal(f->rxr.st.delete_withheld, 0);
	assert_false(f->rxr.st.delete_suppressed);
	assert_dest(f->dst, "beside t t/.rdmacp-partial t/.rdmacp-partial/p t/.x.rdmacp.AbCd1234 "
			    "t/a t/dirkeep t/dirkeep/in t/dirkeep/in/y t/filekeep t/sub t/sub/b");
	assert_same_file(f->src, f->dst, "t/a");
	/* Asked about each extra (not about what was sent, nor inside a kept directory). */
	assert_non_null(strstr(k.asked, "t/dirkeep/ "));
	assert_non_null(strstr(k.asked, "t/filekeep "));
	assert_non_null(strstr(k.asked, "t/x "));
	assert_null(strstr(k.asked, "t/dirkeep/in"));
	assert_null(strstr(k.asked, "t/a "));
	assert_null(strstr(k.asked, "t/.rdmacp-partial"));
	assert_null(strstr(k.asked, "beside"));
	assert_no_fd_beneath(f->src);
}

/* --max-delete: exactly N removed, the others withheld (both sides hear it), none with 0. */
static void test_delete_max(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	delete_case(f, &s);
	f->rxr.p.max_delete = 2;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_deleted, 2);
	assert_int_equal(f->txr.st.files_deleted, 2);
	/* 8 extras without a filter (filekeep, dirkeep, dirkeep/in, dirkeep/in/y too), 2 gone. */
	assert_int_equal(f->rxr.st.files_deleted + f->rxr.st.delete_withheld, 10);
	assert_int_equal(f->txr.st.delete_withheld, f->rxr.st.delete_withheld);
}

/*
 * Many extras: the pass runs over several turns of the loop and its DELETED
 * batches fill up; the sender hears every removal. With delete_tell_peer off
 * (a pull's client) it hears none, and the pass still runs.
 */
static void test_delete_many(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	char name[64];
	const unsigned n = 700;

	delete_case(f, &s);
	assert_int_equal(mkdirat(f->dst_fd, "t/many", 0755), 0);
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "t/many/extra-file-with-a-longish-name-%u", i);
		dest_file(f, name, 1, 1, (struct timespec){ 0 });
	}

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	/* 10 extras of delete_case, the files and their directory. */
	assert_int_equal(f->rxr.st.files_deleted, 10 + n + 1);
	assert_int_equal(f->txr.st.files_deleted, 10 + n + 1);
}

static void test_delete_untold(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	delete_case(f, &s);
	f->rxr.p.delete_tell_peer = false;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_deleted, 10);
	assert_int_equal(f->txr.st.files_deleted, 0);
}

/* An entry that failed: nothing deleted, SUPPRESSED heard by the sender. */
static void test_delete_suppressed(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct engine_limits lim = { .max_file_size = 150, .max_session_bytes = UINT64_MAX };

	delete_case(f, &s);
	f->rxr.p.limits = &lim; /* t/sub/b (200 bytes) is refused */

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_failed, 1);
	assert_int_equal(f->rxr.st.files_deleted, 0);
	assert_true(f->rxr.st.delete_suppressed);
	assert_true(f->txr.st.delete_suppressed);
	assert_int_equal(faccessat(f->dst_fd, "t/x", F_OK, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(faccessat(f->dst_fd, "t/gone/deep/z", F_OK, AT_SYMLINK_NOFOLLOW), 0);
}

/*
 * A receiver with skip level checksum: a regular file there with the
 * entry's size and the same contents is kept (both sides hash: SUM_WANTED,
 * SUMS, then SKIPPED), several MiB ones and empty ones too; other contents
 * of the same size, another size, a missing file and a symlink to a
 * matching file are copied.
 */
static void test_skip_checksum(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	static const char *const copied[] = { "diff", "size", "absent", "lnk", NULL };
	uint64_t bytes = 0;
	size_t big = ((size_t)5 << 20) + 12345;

	source_file(f, &s, "same", 3000);
	dest_file(f, "same", 3000, (unsigned)s.n - 1, (struct timespec){ 0 });
	source_file(f, &s, "big", big);
	dest_file(f, "big", big, (unsigned)s.n - 1, (struct timespec){ 0 });
	source_file(f, &s, "empty", 0);
	dest_file(f, "empty", 0, 0, (struct timespec){ 0 });
	bytes += source_file(f, &s, "diff", big);
	dest_file(f, "diff", big, 99, (struct timespec){ 0 });
	bytes += source_file(f, &s, "size", 3000);
	dest_file(f, "size", 2999, (unsigned)s.n - 1, (struct timespec){ 0 });
	bytes += source_file(f, &s, "absent", 4000);
	bytes += source_file(f, &s, "lnk", 3000);
	dest_file(f, "victim", 3000, (unsigned)s.n - 1, (struct timespec){ 0 });
	assert_int_equal(symlinkat("victim", f->dst_fd, "lnk"), 0);
	f->rxr.p.open_flags = PROTO_OPEN_SKIP_CHECKSUM;
	f->rxr.p.peer_caps = f->txr.p.peer_caps = PROTO_CAP_SKIP | PROTO_CAP_CHECK;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 4, 0, bytes, PERR_OK);
	assert_stats(&f->txr.st, 4, 0, bytes, PERR_OK);
	assert_int_equal(f->rxr.st.files_skipped, 3);
	assert_int_equal(f->txr.st.files_skipped, 3);
	for (size_t i = 0; copied[i]; i++) {
		assert_same_file(f->src, f->dst, copied[i]);
	}
	assert_same_file(f->src, f->dst, "same");
	assert_same_file(f->src, f->dst, "big");
	assert_dest(f->dst, "absent big diff empty lnk same size victim");
	assert_no_fd_beneath(f->src);
	assert_no_fd_beneath(f->dst);
}

/* Every entry beneath f's destination with its size, mtime and mode: what a probe must not change. */
static char *dest_state(struct fx *f)
{
	char **names = NULL, *out = NULL;
	size_t n = 0, len = 0;
	FILE *m = open_memstream(&out, &len);

	assert_non_null(m);
	collect(f->dst, "", &names, &n);
	if (n) {
		qsort(names, n, sizeof(*names), cmp_str);
	}
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		assert_int_equal(fstatat(f->dst_fd, names[i], &st, AT_SYMLINK_NOFOLLOW), 0);
		fprintf(m, "%s %lld %lld.%09ld %o\n", names[i], (long long)st.st_size,
			(long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, (unsigned)st.st_mode);
		free(names[i]);
	}
	free(names);
	fclose(m);
	return out;
}

static void ev_planned(void *ud, const char *name, uint8_t ftype, uint64_t bytes)
{
	struct events *ev = ud;

	(void)name, (void)ftype;
	ev->ok++;
	ev->ok_bytes += bytes;
}

/* Both engines as a probe: no transport, a dry run with these receiver flags. */
static void probe_setup(struct fx *f, uint32_t rx_flags)
{
	f->rxr.p.x = f->txr.p.x = NULL;
	f->rxr.p.open_flags = rx_flags | PROTO_OPEN_DRY_RUN;
	f->txr.p.open_flags = PROTO_OPEN_DRY_RUN;
	f->rxr.p.ev.planned = f->txr.p.ev.planned = ev_planned;
	f->rxr.p.ev.file_ok = f->txr.p.ev.file_ok = NULL;
}

/*
 * A probe (engine_params.x NULL): the receiver answers as a real run with
 * --skip quick and --delete would (a file kept, extras found, filters, temp
 * files and the partial store spared), both sides hear the same, and nothing
 * beneath the destination changes: no directory made (t/newdir), no temp
 * file, no removal, an old temp file not swept. The sender opens nothing (a
 * source that does not exist is "would copy").
 */
static void test_probe(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct keep_log k = { 0 };
	const struct timespec t = { .tv_sec = 1700000000, .tv_nsec = 5 };
	char *before, *after;

	delete_case(f, &s);
	source_file(f, &s, "t/same", 300);
	s.e[s.n - 1].mtime = t;
	dest_file(f, "t/same", 300, 42, t);
	source_dir(f, &s, "t/newdir");
	source_file(f, &s, "t/newdir/n", 10);
	s.e[s.n++] = (struct engine_src){ .name = (char *)"t/ghost",
					  .path = (char *)"no-such-source",
					  .dirfd = f->src_fd,
					  .ftype = PROTO_FT_REG,
					  .mode = 0644,
					  .size = 77 };
	source_symlink(&s, "t/lnk", "a");
	dest_file(f, "t/sub/.b.rdmacp.Old12345", 10, 1, (struct timespec){ 0 });
	probe_setup(f, PROTO_OPEN_RECURSIVE | PROTO_OPEN_DELETE | PROTO_OPEN_SKIP_QUICK);
	f->rxr.p.delete_keep = keep_hook;
	f->rxr.p.delete_keep_ud = &k;
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_DELETE | PROTO_CAP_SKIP;
	before = dest_state(f);

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	/* t, t/a, t/sub, t/sub/b, t/newdir, t/newdir/n, t/ghost, t/lnk; t/same kept */
	for (int i = 0; i < 2; i++) {
		const struct run *u = i ? &f->txr : &f->rxr;

		assert_stats(&u->st, 0, 0, 0, PERR_OK);
		assert_int_equal(u->st.files_planned, 8);
		assert_int_equal(u->st.bytes_planned, 100 + 200 + 10 + 77);
		assert_int_equal(u->ev.ok, 8);
		assert_int_equal(u->st.files_skipped, 1);
		/* x, sub/c, sub/out, gone, gone/deep, gone/deep/z: as test_delete removes */
		assert_int_equal(u->st.files_deleted, 6);
		assert_int_equal(u->st.delete_withheld, 0);
	}
	assert_non_null(strstr(k.asked, "t/filekeep "));
	after = dest_state(f);
	assert_string_equal(before, after);
	free(before);
	free(after);
	assert_no_fd_beneath(f->dst);
}

/* A probe's --max-delete: the walk as a real one, N would go, the rest withheld. */
static void test_probe_delete_max(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	char *before, *after;

	delete_case(f, &s);
	probe_setup(f, PROTO_OPEN_RECURSIVE | PROTO_OPEN_DELETE);
	f->rxr.p.max_delete = 2;
	before = dest_state(f);

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_deleted, 2);
	assert_int_equal(f->txr.st.files_deleted, 2);
	/* the other 6 due (no filter here: filekeep, dirkeep, dirkeep/in, dirkeep/in/y too) */
	assert_int_equal(f->rxr.st.delete_withheld, f->txr.st.delete_withheld);
	assert_true(f->rxr.st.delete_withheld > 0);
	after = dest_state(f);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

/*
 * A probe with --skip checksum: both sides hash; the same contents are kept,
 * a change of the same size would be copied; nothing is written. Into a
 * destination a real run would make (base_fd -1), everything would be copied.
 */
static void test_probe_checksum(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	char *before, *after;

	source_file(f, &s, "same", 3000);
	dest_file(f, "same", 3000, (unsigned)s.n - 1, (struct timespec){ 0 });
	source_file(f, &s, "diff", 3000);
	dest_file(f, "diff", 3000, 99, (struct timespec){ 0 });
	source_file(f, &s, "absent", 10);
	probe_setup(f, PROTO_OPEN_SKIP_CHECKSUM);
	f->rxr.p.peer_caps = f->txr.p.peer_caps = PROTO_CAP_SKIP | PROTO_CAP_CHECK;
	before = dest_state(f);

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_skipped, 1);
	assert_int_equal(f->txr.st.files_skipped, 1);
	assert_int_equal(f->rxr.st.files_planned, 2);
	assert_int_equal(f->txr.st.files_planned, 2);
	after = dest_state(f);
	assert_string_equal(before, after);
	free(before);
	free(after);
	assert_no_fd_beneath(f->dst);
}

/* A probe into a destination that is not there: everything would be copied. */
static void test_probe_no_dest(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_dir(f, &s, "d");
	source_file(f, &s, "d/a", 10);
	source_symlink(&s, "d/l", "a");
	probe_setup(f, PROTO_OPEN_RECURSIVE | PROTO_OPEN_DELETE | PROTO_OPEN_SKIP_EXISTS);
	f->rxr.p.base_fd = -1;
	f->rxr.p.peer_caps = f->txr.p.peer_caps = PROTO_CAP_SKIP | PROTO_CAP_DELETE;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_planned, 3);
	assert_int_equal(f->txr.st.files_planned, 3);
	assert_int_equal(f->rxr.st.files_deleted, 0);
	{
		char *tr = tree(f->dst);

		assert_string_equal(tr, "");
		free(tr);
	}
}

/* A transport-less engine that is not a dry run is refused: only a probe goes without. */
static void test_probe_needs_dry_run(void **state)
{
	struct fx *f = *state;

	f->rxr.p.x = NULL;
	f->rxr.r = engine_run(&f->rxr.p, &f->rxr.st, &f->rxr.code, f->rxr.err, sizeof(f->rxr.err));
	assert_int_equal(f->rxr.r, -EINVAL);
	assert_int_equal(f->rxr.code, PERR_INTERNAL);
}

/* A sender asked for a digest by a peer that never announced the check capability. */
static void test_skip_checksum_without_cap(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "a", 100);
	dest_file(f, "a", 100, 1, (struct timespec){ 0 });
	f->rxr.p.open_flags = PROTO_OPEN_SKIP_CHECKSUM;
	f->txr.p.peer_caps = PROTO_CAP_SKIP;

	run_both(f, &s);

	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, "SUM_WANTED");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_skip_quick),
		T(test_skip_without_cap),
		T(test_delete),
		T(test_delete_max),
		T(test_delete_suppressed),
		T(test_delete_many),
		T(test_delete_untold),
		T(test_skip_checksum),
		T(test_skip_checksum_without_cap),
		T(test_probe),
		T(test_probe_delete_max),
		T(test_probe_checksum),
		T(test_probe_no_dest),
		T(test_probe_needs_dry_run),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
