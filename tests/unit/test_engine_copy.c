/* SPDX-License-Identifier: MIT */
/*
 * Two engines, plain copies: a transfer of every size class, a directory and
 * a symlink; windows of one file (each sent as a file of its own);
 * directories past the receiver's cap (-p); hard links; a checksum mismatch
 * (the receiver's FLIP_BYTE hook); an event fd that hangs up; a pull
 * receiver's name_ok refusing a name; the stop flag; memory windows asked of
 * lanes without them.
 */
#include "engine_harness.h"

/* Several files of every size class, a directory and a symlink: byte-exact, stats on both sides. */
static void test_transfer(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	static const char *const regs[] = { "empty", "one",	  "below", "exact",
					    "multi", "sub/inner", NULL };
	uint64_t bytes = 0;
	char target[16];

	bytes += source_file(f, &s, "empty", 0);
	bytes += source_file(f, &s, "one", 1);
	bytes += source_file(f, &s, "below", CHUNK - 1);
	bytes += source_file(f, &s, "exact", CHUNK);
	/* More chunks than slots and than the sender's pool: credits come round. */
	bytes += source_file(f, &s, "multi", 5 * CHUNK + 17);
	source_dir(f, &s, "sub");
	bytes += source_file(f, &s, "sub/inner", 5000);
	source_symlink(&s, "link", "one");

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 8, 0, bytes, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_accepted, bytes);
	assert_stats(&f->txr.st, 8, 0, bytes, PERR_OK);
	assert_int_equal(f->rxr.ev.ok, 8);
	assert_int_equal(f->rxr.ev.ok_bytes, bytes);
	assert_int_equal(f->rxr.ev.failed, 0);
	assert_int_equal(f->txr.ev.ok, 8);
	assert_int_equal(f->txr.ev.ok_bytes, bytes);
	assert_dest(f->dst, "below empty exact link multi one sub sub/inner");
	for (size_t i = 0; regs[i]; i++) {
		assert_same_file(f->src, f->dst, regs[i]);
	}
	assert_int_equal(readlinkat(f->dst_fd, "link", target, sizeof(target)), 3);
	assert_memory_equal(target, "one", 3);
	assert_no_fd_beneath(f->src);
}

/* A source offered as windows of itself (engine_src.window): its byte ranges as files. */
static void source_window(struct fx *f, struct source *s, const char *name, const char *path,
			  uint64_t off, uint64_t len, uint64_t whole)
{
	s->e[s->n++] = (struct engine_src){ .name = (char *)name,
					    .path = (char *)path,
					    .dirfd = f->src_fd,
					    .ftype = PROTO_FT_REG,
					    .mode = 0600,
					    .size = len,
					    .window = true,
					    .window_off = off,
					    .window_whole = whole };
}

/*
 * Windows of one file: each arrives as a file of its own holding exactly
 * those bytes (the first, a middle one across chunk edges, the tail); one
 * whose file no longer has the size it was planned with fails (changed),
 * the others don't.
 */
static void test_window(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	const uint64_t whole = 5 * CHUNK + 17;
	static const struct {
		const char *name;
		uint64_t off, len;
	} w[] = { { "w0", 0, 2 * CHUNK },
		  { "w1", 2 * CHUNK, CHUNK + 100 },
		  { "w2", 3 * CHUNK + 100, 2 * CHUNK - 83 } };
	uint8_t *all;
	size_t len;

	source_file(f, &s, "big", whole);
	for (size_t i = 0; i < ARRAY_SIZE(w); i++) {
		source_window(f, &s, w[i].name, "big", w[i].off, w[i].len, whole);
	}
	source_window(f, &s, "stale", "big", 0, CHUNK, whole + 1);
	run_both(f, &s);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.ev.ok, 4);
	assert_int_equal(f->rxr.ev.failed, 1);
	assert_int_equal(f->txr.ev.first_failed_code, PERR_SOURCE_CHANGED);
	all = read_file(f->src, "big", &len);
	assert_int_equal(len, whole);
	for (size_t i = 0; i < ARRAY_SIZE(w); i++) {
		size_t plen;
		uint8_t *part = read_file(f->dst, w[i].name, &plen);

		assert_int_equal(plen, w[i].len);
		assert_memory_equal(part, all + w[i].off, plen);
		free(part);
	}
	free(all);
	assert_dest(f->dst, "big w0 w1 w2");
	assert_no_fd_beneath(f->src);
}

/*
 * -p over more directories than the receiver keeps for the end (its
 * FEW_DIRS hook: 8, standing for DIR_META_MAX): the first 8 get their times,
 * each one past the cap is a reported failure (BUSY), none is left wrong
 * in silence.
 */
static void test_dir_meta_cap(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	static const char *const names[] = { "d00", "d01", "d02", "d03", "d04", "d05",
					     "d06", "d07", "d08", "d09", "d10", "d11" };

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		source_dir(f, &s, names[i]);
		s.e[i].mtime = (struct timespec){ .tv_sec = 1000000 + (time_t)i, .tv_nsec = 7 };
	}
	f->rxr.p.open_flags = PROTO_OPEN_PRESERVE;
	f->rxr.p.faults = ENGINE_FAULT_FEW_DIRS;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 8, 4, 0, PERR_BUSY);
	assert_stats(&f->txr.st, 8, 4, 0, PERR_BUSY);
	assert_int_equal(f->rxr.ev.failed, 4);
	assert_int_equal(f->txr.ev.failed, 4);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		struct stat st;

		assert_int_equal(fstatat(f->dst_fd, names[i], &st, AT_SYMLINK_NOFOLLOW), 0);
		assert_true(S_ISDIR(st.st_mode));
		if (i < 8) {
			assert_int_equal(st.st_mtim.tv_sec, 1000000 + (time_t)i);
			assert_int_equal(st.st_mtim.tv_nsec, 7);
			assert_int_equal(st.st_mode & 07777, 0755);
		}
	}
}

/* Name i of source s: another name of the file at path (device 1, inode ino, nlink links). */
static void source_link(struct source *s, const char *name, const char *path, int dirfd,
			uint64_t ino, uint64_t nlink, uint64_t size)
{
	s->e[s->n++] = (struct engine_src){ .name = (char *)name,
					    .path = (char *)path,
					    .dirfd = dirfd,
					    .ftype = PROTO_FT_REG,
					    .mode = 0644,
					    .size = size,
					    .dev = 1,
					    .ino = ino,
					    .nlink = nlink };
}

static ino_t ino_of(int dirfd, const char *name, nlink_t *ret_nlink)
{
	struct stat st;

	assert_int_equal(fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
	*ret_nlink = st.st_nlink;
	return st.st_ino;
}

/*
 * -H with a table of 2 files (the FEW_LINKS hook, for HARDLINK_MAX): the
 * names of the first two linked files arrive as links, the third's as
 * separate copies, and the sender says so once.
 */
static void test_hardlinks(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	nlink_t n;
	ino_t a;

	source_file(f, &s, "a", CHUNK + 7);
	s.n--;
	source_link(&s, "a", "a", f->src_fd, 10, 3, CHUNK + 7);
	source_link(&s, "b", "a", f->src_fd, 10, 3, CHUNK + 7);
	source_file(f, &s, "d", 100);
	s.n--;
	source_link(&s, "d", "d", f->src_fd, 20, 2, 100);
	source_link(&s, "c", "a", f->src_fd, 10, 3, CHUNK + 7);
	source_link(&s, "e", "d", f->src_fd, 20, 2, 100);
	source_file(f, &s, "g", 50);
	s.n--;
	source_link(&s, "g", "g", f->src_fd, 30, 2, 50);
	source_link(&s, "h", "g", f->src_fd, 30, 2, 50);
	f->rxr.p.open_flags = PROTO_OPEN_HARDLINKS;
	f->txr.p.open_flags = PROTO_OPEN_HARDLINKS;
	f->txr.p.faults = ENGINE_FAULT_FEW_LINKS;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 7, 0, CHUNK + 7 + 100 + 2 * 50, PERR_OK);
	assert_int_equal(f->txr.st.files_ok, 7);
	assert_int_equal(f->txr.ev.notices, 1);
	a = ino_of(f->dst_fd, "a", &n);
	assert_int_equal(n, 3);
	assert_true(ino_of(f->dst_fd, "b", &n) == a && ino_of(f->dst_fd, "c", &n) == a);
	assert_true(ino_of(f->dst_fd, "d", &n) == ino_of(f->dst_fd, "e", &n));
	assert_int_equal(n, 2);
	assert_true(ino_of(f->dst_fd, "g", &n) != ino_of(f->dst_fd, "h", &n));
	assert_int_equal(n, 1);
	assert_same_file(f->src, f->dst, "a");
	assert_same_file(f->src, f->dst, "g");
	assert_dest(f->dst, "a b c d e g h");
}

/* A link whose file fails (can't be opened on the sender) fails too; nothing is made. */
static void test_hardlink_target_failed(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_link(&s, "a", "missing", f->src_fd, 10, 2, 100);
	source_link(&s, "b", "missing", f->src_fd, 10, 2, 100);
	f->rxr.p.open_flags = PROTO_OPEN_HARDLINKS;
	f->txr.p.open_flags = PROTO_OPEN_HARDLINKS;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_failed, 2);
	assert_int_equal(f->txr.st.files_failed, 2);
	assert_int_equal(f->rxr.st.files_ok, 0);
	assert_dest(f->dst, "");
}

/*
 * -H over a destination that holds the files already (skip level quick:
 * each one kept, so settled before the next entry comes), the receiver
 * remembering at most 2 names (the FEW_TARGETS hook, for LINK_TARGETS_MAX):
 * three files without other names, then "a" with two, then its link "b".
 * caps: both ends' (PROTO_CAP_LINKED_FILES or not). Returns how many failed.
 */
static uint64_t kept_targets_run(struct fx *f, uint64_t caps)
{
	const struct timespec t = { .tv_sec = 1700000000, .tv_nsec = 5 };
	static const char *const names[] = { "p1", "p2", "p3", "a" };
	struct source s = { 0 };

	for (size_t i = 0; i < 4; i++) {
		/* Not there to read: only a skip keeps this run clean. */
		s.e[s.n++] = (struct engine_src){ .name = (char *)names[i],
						  .path = (char *)"no-such-source",
						  .dirfd = f->src_fd,
						  .ftype = PROTO_FT_REG,
						  .mode = 0644,
						  .size = 300,
						  .mtime = t,
						  .dev = 1,
						  .ino = 10 + i,
						  .nlink = i == 3 ? 2 : 1 };
		dest_file(f, names[i], 300, 7, t);
	}
	s.e[s.n] = s.e[3];
	s.e[s.n++].name = (char *)"b";
	f->rxr.p.open_flags = PROTO_OPEN_HARDLINKS | PROTO_OPEN_SKIP_QUICK | PROTO_OPEN_PRESERVE;
	f->txr.p.open_flags = PROTO_OPEN_HARDLINKS;
	f->rxr.p.faults = ENGINE_FAULT_FEW_TARGETS;
	f->rxr.p.peer_caps = caps;
	f->txr.p.peer_caps = caps | PROTO_CAP_SKIP;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_skipped, 4);
	return f->rxr.st.files_failed;
}

/*
 * The sender marks "a" linked (PROTO_CAP_LINKED_FILES on both ends): the
 * receiver remembers it alone, however many files came before, and links "b".
 */
static void test_hardlink_targets_marked(void **state)
{
	struct fx *f = *state;
	nlink_t n;

	assert_int_equal(kept_targets_run(f, PROTO_CAP_LINKED_FILES), 0);
	assert_true(ino_of(f->dst_fd, "b", &n) == ino_of(f->dst_fd, "a", &n));
	assert_int_equal(n, 2);
}

/* Without the marks every file is remembered: past the cap, "a" is not, and "b" fails. */
static void test_hardlink_targets_unmarked(void **state)
{
	struct fx *f = *state;

	assert_int_equal(kept_targets_run(f, 0), 1);
	assert_int_equal(f->rxr.st.first_error, PERR_NOT_FOUND);
	assert_dest(f->dst, "a p1 p2 p3");
}

/* A byte flipped on arrival (the receiver's test hook): INTEGRITY per file, nothing committed. */
static void test_checksum_mismatch(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "big", 2 * CHUNK + 5);
	source_file(f, &s, "small", 100);
	source_file(f, &s, "empty", 0); /* no chunk, nothing to flip */
	f->rxr.p.faults = ENGINE_FAULT_FLIP_BYTE;

	run_both(f, &s);

	/* Per-file failures: the exchange itself completes. */
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 2, 0, PERR_INTEGRITY);
	assert_stats(&f->txr.st, 1, 2, 0, PERR_INTEGRITY);
	assert_int_equal(f->rxr.ev.failed, 2);
	assert_int_equal(f->rxr.ev.first_failed_code, PERR_INTEGRITY);
	assert_int_equal(f->txr.ev.failed, 2);
	assert_dest(f->dst, "empty");
}

/* The sender's transport, with an event fd that reports a hang-up (a device gone). */
static int hup_fd = -1;

static int hup_event_fd(struct xport *x)
{
	(void)x;
	return hup_fd;
}

/*
 * A transport descriptor that reports POLLHUP (as a detached device's
 * channel reports POLLERR): the engine fails the session at once with a
 * named cause instead of spinning on a descriptor that wakes poll()
 * forever until the idle timeout. The receiver is told; nothing is committed.
 */
static void test_event_fd_hangup(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	static struct xport_ops broken;
	const struct xport_ops *orig = f->tx.x->ops;
	struct timespec t0, t1;
	int pfd[2];

	source_file(f, &s, "big", 3 * CHUNK);
	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	close(pfd[1]);
	hup_fd = pfd[0];
	broken = *orig;
	broken.event_fd = hup_event_fd;
	f->tx.x->ops = &broken;
	clock_gettime(CLOCK_MONOTONIC, &t0);

	run_both(f, &s);

	clock_gettime(CLOCK_MONOTONIC, &t1);
	f->tx.x->ops = orig;
	close(pfd[0]);
	hup_fd = -1;
	assert_true(f->txr.r < 0);
	assert_int_equal(f->txr.code, PERR_TRANSPORT);
	assert_non_null(strstr(f->txr.err, "hang-up"));
	assert_true(f->rxr.r < 0);
	/* Well within the idle timeout, which would have ended it too, as TIMEOUT. */
	assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 <
		    IO_MS / 2);
	assert_dest(f->dst, "");
}

static bool only_wanted(void *ud, const char *name)
{
	(void)ud;
	return !strcmp(name, "wanted");
}

/* A pull: the receiver asked for "wanted"; the sender also offers "extra", which is refused. */
static void test_pull_name_refused(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint64_t bytes = source_file(f, &s, "wanted", 3000);

	source_file(f, &s, "extra", 2000);
	f->rxr.p.name_ok = only_wanted;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 1, bytes, PERR_BAD_PATH);
	assert_int_equal(f->rxr.st.bytes_accepted, bytes);
	assert_stats(&f->txr.st, 1, 1, bytes, PERR_BAD_PATH);
	assert_int_equal(f->txr.ev.first_failed_code, PERR_BAD_PATH);
	/* The sender hears of a refusal by its peer, the receiver of a name its peer sent. */
	assert_false(f->txr.ev.first_failed_local);
	assert_false(f->rxr.ev.first_failed_local);
	assert_dest(f->dst, "wanted");
	assert_same_file(f->src, f->dst, "wanted");
}

/* A stop requested (the signal handler's flag): SHUTDOWN on both sides, nothing committed. */
static void test_stop_requested(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	static volatile sig_atomic_t stop = 1;

	source_file(f, &s, "a", 3 * CHUNK);
	f->txr.p.stop = &stop;

	run_both(f, &s);

	assert_failed_run(&f->txr, -EINTR, PERR_SHUTDOWN, "interrupted");
	assert_failed_run(&f->rxr, -EREMOTEIO, PERR_SHUTDOWN, "peer: interrupted");
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	assert_dest(f->dst, "");
}

/*
 * Memory windows asked of lanes that have none (tcp): the receiver refuses before its
 * ring is offered (PERR_INTERNAL), never registers its ring for windows the transport
 * cannot open, and nothing is committed.
 */
static void test_windows_without_transport(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "a", 3 * CHUNK);
	f->rxr.p.windows = true;

	run_both(f, &s);

	assert_failed_run(&f->rxr, -EINVAL, PERR_INTERNAL, "memory windows on lanes without them");
	assert_true(f->txr.r < 0);
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	assert_dest(f->dst, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_transfer),
		T(test_window),
		T(test_checksum_mismatch),
		T(test_event_fd_hangup),
		T(test_dir_meta_cap),
		T(test_hardlinks),
		T(test_hardlink_target_failed),
		T(test_hardlink_targets_marked),
		T(test_hardlink_targets_unmarked),
		T(test_pull_name_refused),
		T(test_stop_requested),
		T(test_windows_without_transport),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
