/* SPDX-License-Identifier: MIT */
/*
 * Hard links (-H) down a relay chain, and the relay child's book at scale
 * (src/engine_relay_rx.c, src/engine_follow.c):
 *   - a sender pushes a tree with a file of three names (two directories)
 *     and a file of one to a receiver whose relay feed drives a follow
 *     sender pushing to a third engine: the hop forwards each link once made
 *     (an ENTRY of type HARDLINK naming its file), and the third engine
 *     ends with one inode of three names, byte-exact;
 *   - the same with the destination holding the tree already and --skip
 *     quick: links kept at the hop are forwarded too, and the third engine
 *     keeps its own links;
 *   - a book of 100,000 entries told by hand behind a file the sender
 *     waits for, every DONE after every ENTRY, the oldest first, then an
 *     ABORT: the book takes every record (by id, in O(1)) and the run ends
 *     with the upstream's reason in a second (a book that looked its
 *     entries up by a scan, 10^10 steps here, took minutes).
 */
#include "engine_harness.h"

#include "relay_feed.h"

/* The next hop: a fixture whose sender follows feed end sock. */
static struct fx *next_hop(int sock)
{
	void *st = NULL;
	struct fx *g;

	assert_int_equal(fx_setup(&st), 0);
	g = st;
	assert_int_equal(follow_book_new(sock, &g->txr.p.follow), 0);
	return g;
}

static void next_hop_end(struct fx *g)
{
	void *st = g;

	follow_book_free(g->txr.p.follow);
	g->txr.p.follow = NULL;
	fx_teardown(&st);
}

/* Source entry k is the file at path (relative to the source): its device, inode, links. */
static void source_ident(struct fx *f, struct source *s, size_t k)
{
	struct stat st;

	assert_int_equal(fstatat(f->src_fd, s->e[k].path, &st, 0), 0);
	s->e[k].dev = st.st_dev;
	s->e[k].ino = st.st_ino;
	s->e[k].nlink = st.st_nlink;
}

/* name, another name of the source's file first (offered as a regular file, as a walk does). */
static void source_link(struct fx *f, struct source *s, const char *name, const char *first)
{
	assert_int_equal(linkat(f->src_fd, first, f->src_fd, name, 0), 0);
	s->e[s->n++] = (struct engine_src){ .name = (char *)name,
					    .path = (char *)name,
					    .dirfd = f->src_fd,
					    .ftype = PROTO_FT_REG,
					    .mode = 0644 };
}

/* The tree: a (names a, sub/b, c), solo; every regular entry's identity read after. */
static void links_tree(struct fx *f, struct source *s)
{
	source_file(f, s, "a", 3 * CHUNK + 7);
	source_dir(f, s, "sub");
	source_link(f, s, "sub/b", "a");
	source_link(f, s, "c", "a");
	source_file(f, s, "solo", 1000);
	for (size_t k = 0; k < s->n; k++) {
		if (s->e[k].ftype == PROTO_FT_REG) {
			source_ident(f, s, k);
			s->e[k].size = (uint64_t)(k == 4 ? 1000 : 3 * CHUNK + 7);
		}
	}
}

static void with_links(struct fx *f)
{
	f->txr.p.open_flags |= PROTO_OPEN_HARDLINKS;
	f->rxr.p.open_flags |= PROTO_OPEN_HARDLINKS;
}

/* dir's a, sub/b and c: one inode of three names, a's bytes; solo alone. */
static void assert_linked(int dirfd)
{
	struct stat a, b, c, solo;

	assert_int_equal(fstatat(dirfd, "a", &a, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(fstatat(dirfd, "sub/b", &b, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(fstatat(dirfd, "c", &c, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(fstatat(dirfd, "solo", &solo, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(a.st_ino == b.st_ino && a.st_ino == c.st_ino);
	assert_int_equal(a.st_nlink, 3);
	assert_int_equal(solo.st_nlink, 1);
	assert_true(solo.st_ino != a.st_ino);
}

/* The chain f -> f's receiver (its feed) -> g's follow sender -> g's receiver. */
static void run_chain(struct fx *f, struct source *s, struct fx **ret_g, int sv[2])
{
	struct fx *g;

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	f->rxr.p.relay_feed = sv[0];
	g = next_hop(sv[1]);
	with_links(g);
	run_start(&g->rxr);
	run_start(&g->txr);
	run_both(f, s);
	close(sv[0]);
	run_join(&g->txr);
	run_join(&g->rxr);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_ok_run(&g->txr);
	assert_ok_run(&g->rxr);
	assert_int_equal(f->rxr.st.relay_feed_lost, 0);
	*ret_g = g;
}

static void test_chain_links(void **state)
{
	struct fx *f = *state, *g;
	struct source s = { 0 };
	int sv[2];

	links_tree(f, &s);
	with_links(f);
	run_chain(f, &s, &g, sv);
	assert_linked(f->dst_fd);
	assert_linked(g->dst_fd);
	assert_stats(&g->rxr.st, 5, 0, f->rxr.st.bytes, PERR_OK);
	assert_dest(g->dst, "a c solo sub sub/b");
	assert_same_file(f->src, g->dst, "a");
	assert_same_file(f->src, g->dst, "solo");
	close(sv[1]);
	next_hop_end(g);
}

/* dir (a destination) holds the tree as it is, mtimes the source's (0); c linked to a, or a copy. */
static void dest_tree(const char *src, const char *dir, int dirfd, bool link_c)
{
	static const char *const files[] = { "a", "solo" };
	const struct timespec t[2] = { { 0, 0 }, { 0, 0 } };
	size_t len;

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		uint8_t *buf = read_file(src, files[i], &len);

		write_file(dir, files[i], buf, len);
		if (!link_c && i == 0) {
			write_file(dir, "c", buf, len);
			assert_int_equal(utimensat(dirfd, "c", t, 0), 0);
		}
		assert_int_equal(utimensat(dirfd, files[i], t, 0), 0);
		free(buf);
	}
	assert_int_equal(mkdirat(dirfd, "sub", 0755), 0);
	assert_int_equal(linkat(dirfd, "a", dirfd, "sub/b", 0), 0);
	if (link_c) {
		assert_int_equal(linkat(dirfd, "a", dirfd, "c", 0), 0);
	}
}

/*
 * --skip quick, the hop holding the tree as it is (links kept there) and the
 * next one with c a copy of its own: the kept links are forwarded, and the
 * next hop makes c a name of a again.
 */
static void test_chain_links_kept(void **state)
{
	struct fx *f = *state, *g;
	struct source s = { 0 };
	int sv[2];

	links_tree(f, &s);
	with_links(f);
	f->txr.p.open_flags |= PROTO_OPEN_SKIP_QUICK;
	f->rxr.p.open_flags |= PROTO_OPEN_SKIP_QUICK;
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_SKIP;
	dest_tree(f->src, f->dst, f->dst_fd, true);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	f->rxr.p.relay_feed = sv[0];
	g = next_hop(sv[1]);
	with_links(g);
	g->txr.p.open_flags |= PROTO_OPEN_SKIP_QUICK;
	g->rxr.p.open_flags |= PROTO_OPEN_SKIP_QUICK;
	g->txr.p.peer_caps = g->rxr.p.peer_caps = PROTO_CAP_SKIP;
	dest_tree(f->src, g->dst, g->dst_fd, false);
	run_start(&g->rxr);
	run_start(&g->txr);
	run_both(f, &s);
	close(sv[0]);
	run_join(&g->txr);
	run_join(&g->rxr);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_ok_run(&g->txr);
	assert_ok_run(&g->rxr);
	assert_int_equal(f->rxr.st.bytes, 0); /* every file kept at the hop */
	assert_int_equal(f->rxr.st.files_failed, 0);
	assert_int_equal(g->rxr.st.files_failed, 0);
	assert_linked(f->dst_fd);
	assert_linked(g->dst_fd);
	close(sv[1]);
	next_hop_end(g);
}

/* ---- the book at scale -------------------------------------------------- */

/* m on the feed, waiting while it is full (the follow sender drains it). */
static void feed_put(int sock, struct relay_feed_msg *m)
{
	for (;;) {
		struct pollfd p = { .fd = sock, .events = POLLOUT };
		int r = relay_feed_send(sock, m, -1);

		if (r != -EAGAIN) {
			assert_int_equal(r, 0);
			return;
		}
		assert_true(poll(&p, 1, 60000) == 1);
	}
}

static void test_book_scale(void **state)
{
	enum { N = 100000 };
	struct fx *unused = *state, *g;
	struct relay_feed_msg m;
	char name[32], *path;
	int sv[2], fd;

	(void)unused;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	g = next_hop(sv[1]);
	/*
	 * -X with --skip: follow offers a regular file only once the hop settled
	 * it, and the first entry, a file, never is: nothing is offered, and
	 * the run's time is the book's.
	 */
	g->txr.p.open_flags = g->rxr.p.open_flags = PROTO_OPEN_XATTRS | PROTO_OPEN_SKIP_QUICK;
	g->txr.p.peer_caps = g->rxr.p.peer_caps = PROTO_CAP_XATTRS | PROTO_CAP_SKIP;
	/* The receiver hears nothing meanwhile: on a busy machine that may take more than IO_MS. */
	g->txr.p.idle_timeout_ms = g->rxr.p.idle_timeout_ms = 60000;
	run_start(&g->rxr);
	run_start(&g->txr);
	path = path_in(g->dir, "held");
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	m = (struct relay_feed_msg){ .type = RELAY_FEED_ENTRY };
	m.u.entry = (struct relay_feed_entry){
		.id = 1, .ftype = PROTO_FT_REG, .mode = 0644, .size = 1, .name = (char[]){ "held" }
	};
	assert_int_equal(relay_feed_send(sv[0], &m, fd), 0);
	for (uint32_t i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "l%06u", i);
		m = (struct relay_feed_msg){ .type = RELAY_FEED_ENTRY };
		m.u.entry = (struct relay_feed_entry){ .id = 1000 + 7 * i,
						       .ftype = PROTO_FT_SYMLINK,
						       .mode = 0777,
						       .mtime_sec = 1700000000,
						       .name = name,
						       .link = (char[]){ "t" } };
		feed_put(sv[0], &m);
	}
	for (uint32_t i = 0; i < N; i++) {
		m = (struct relay_feed_msg){ .type = RELAY_FEED_DONE,
					     .u.done = { .id = 1000 + 7 * i, .ok = true } };
		feed_put(sv[0], &m);
	}
	/* The book took every record before this one. */
	m = (struct relay_feed_msg){ .type = RELAY_FEED_ABORT, .u.abort = { .code = PERR_IO } };
	snprintf(m.u.abort.text, sizeof(m.u.abort.text), "enough");
	feed_put(sv[0], &m);
	close(sv[0]);
	run_join(&g->txr);
	run_join(&g->rxr);
	assert_failed_run(&g->txr, -ECONNABORTED, PERR_IO, "upstream: enough");
	assert_int_equal(g->rxr.st.files_ok, 0);
	assert_false(follow_book_replayable(g->txr.p.follow));
	close(sv[1]);
	close(fd);
	unlink(path);
	free(path);
	next_hop_end(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_chain_links),
		T(test_chain_links_kept),
		T(test_book_scale),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
