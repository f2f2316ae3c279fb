/* SPDX-License-Identifier: MIT */
/*
 * relay_rx (engine_params.relay_feed, src/engine_relay_rx.c): a receiver
 * engine tells what it receives on a real SOCK_SEQPACKET feed, read here by
 * a thread playing the relay child. Every regular file comes as an ENTRY
 * with a descriptor to its data, RANGEs that only grow up to its size, and
 * a DONE with the source's digest; directories and symlinks as ENTRY and
 * DONE; END last. A child that is gone before or during the copy does not
 * fail the receiver (relay_feed_lost says so).
 */
#include "engine_harness.h"

#include "relay_feed.h"

#include <sys/xattr.h>

#define MAX_RECS 4096

struct child {
	int sock;
	bool close_early;  /* the child's end closed before the receiver starts */
	bool close_midway; /* ... after its first RANGE */
	pthread_t th;
	size_t n;
	struct relay_feed_msg m[MAX_RECS];
	int fd[MAX_RECS];
	/* A directory's user.d as its ENTRY's descriptor read it when the ENTRY came (-X). */
	char dattr[MAX_RECS][16];
	bool eof;
};

static void *child_main(void *arg)
{
	struct child *c = arg;

	while (c->sock >= 0 && c->n < MAX_RECS) {
		struct pollfd p = { .fd = c->sock, .events = POLLIN };
		int r;

		if (poll(&p, 1, JOIN_MS) <= 0) {
			break;
		}
		r = relay_feed_recv(c->sock, &c->m[c->n], &c->fd[c->n]);
		if (r == -EAGAIN) {
			continue;
		}
		if (r <= 0) {
			c->eof = r == 0;
			break;
		}
		if (c->m[c->n].type == RELAY_FEED_ENTRY && c->fd[c->n] >= 0 &&
		    c->m[c->n].u.entry.ftype == PROTO_FT_DIR) {
			fgetxattr(c->fd[c->n], "user.d", c->dattr[c->n], sizeof(c->dattr[0]) - 1);
		}
		c->n++;
		if (c->close_midway && c->m[c->n - 1].type == RELAY_FEED_RANGE) {
			close(c->sock);
			c->sock = -1;
			break;
		}
		if (c->m[c->n - 1].type == RELAY_FEED_END ||
		    c->m[c->n - 1].type == RELAY_FEED_ABORT) {
			break;
		}
	}
	return NULL;
}

/* The receiver gets one end of a fresh feed; the child thread reads the other. */
static void child_start(struct fx *f, struct child *c)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	f->rxr.p.relay_feed = sv[0];
	c->sock = sv[1];
	if (c->close_early) {
		close(c->sock); /* gone before the first record */
		c->sock = -1;
	}
	assert_int_equal(pthread_create(&c->th, NULL, child_main, c), 0);
}

static void child_end(struct fx *f, struct child *c)
{
	assert_int_equal(pthread_join(c->th, NULL), 0);
	close(f->rxr.p.relay_feed);
	if (c->sock >= 0) {
		close(c->sock);
	}
}

static void child_free(struct child *c)
{
	for (size_t i = 0; i < c->n; i++) {
		if (c->fd[i] >= 0) {
			close(c->fd[i]);
		}
		relay_feed_msg_free(&c->m[i]);
	}
	free(c);
}

static const struct relay_feed_entry *entry_named(struct child *c, const char *name, int *ret_fd)
{
	for (size_t i = 0; i < c->n; i++) {
		if (c->m[i].type == RELAY_FEED_ENTRY && !strcmp(c->m[i].u.entry.name, name)) {
			*ret_fd = c->fd[i];
			return &c->m[i].u.entry;
		}
	}
	fail_msg("no ENTRY for %s", name);
	return NULL;
}

/*
 * Entry id's records after its ENTRY: RANGEs grow and end at size, one DONE
 * last (ok, with digest when known); returns the index of its DONE.
 */
/*
 * The digest a hop sends for a file of len bytes (buf), and its kind: under
 * RDMACP_TEST_FILE_TREE (the _tree variant) a file of more than one chunk
 * is checked by its chunk tree (made here with libxxhash's one-shot calls).
 */
static uint32_t digest_of(const uint8_t *buf, size_t len, uint8_t out[HASH_LEN])
{
	XXH128_canonical_t c;
	XXH3_state_t *st;

	if (!getenv("RDMACP_TEST_FILE_TREE") || len <= CHUNK) {
		hash_of(buf, len, out);
		return 0;
	}
	st = XXH3_createState();
	assert_non_null(st);
	XXH3_128bits_reset(st);
	for (size_t at = 0; at < len; at += CHUNK) {
		XXH128_canonicalFromHash(&c, XXH3_128bits(buf + at, MIN((size_t)CHUNK, len - at)));
		XXH3_128bits_update(st, c.digest, HASH_LEN);
	}
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
	memcpy(out, c.digest, HASH_LEN);
	XXH3_freeState(st);
	return CHUNK;
}

static size_t check_records(struct child *c, uint32_t id, uint64_t size, const uint8_t *digest)
{
	uint64_t upto = 0;
	size_t done = SIZE_MAX;

	for (size_t i = 0; i < c->n; i++) {
		const struct relay_feed_msg *m = &c->m[i];

		if (m->type == RELAY_FEED_RANGE && m->u.range.id == id) {
			assert_true(done == SIZE_MAX);
			assert_true(m->u.range.upto > upto && m->u.range.upto <= size);
			upto = m->u.range.upto;
		} else if (m->type == RELAY_FEED_DONE && m->u.done.id == id) {
			assert_true(done == SIZE_MAX);
			done = i;
			assert_true(m->u.done.ok);
			if (digest) {
				assert_memory_equal(m->u.done.digest, digest, HASH_LEN);
			}
		}
	}
	assert_true(done != SIZE_MAX);
	assert_true(upto == size);
	return done;
}

static void check_file(struct fx *f, struct child *c, const char *name)
{
	int fd = -1;
	const struct relay_feed_entry *en = entry_named(c, name, &fd);
	size_t len;
	uint8_t *src = read_file(f->src, name, &len), *got = malloc(len + 1), h[HASH_LEN];

	assert_non_null(got);
	assert_int_equal(en->ftype, PROTO_FT_REG);
	assert_true(en->digest_known);
	assert_true(en->size == len);
	assert_true(fd >= 0);
	/* What the descriptor reads is the file the receiver committed. */
	assert_int_equal(pread(fd, got, len + 1, 0), (ssize_t)len);
	assert_memory_equal(got, src, len);
	assert_int_equal(en->digest_tree, digest_of(src, len, h));
	check_records(c, en->id, len, h);
	free(src);
	free(got);
}

static void test_feed(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct child *c = calloc(1, sizeof(*c));
	const struct relay_feed_entry *en;
	int fd;

	assert_non_null(c);
	source_file(f, &s, "empty", 0);
	source_file(f, &s, "multi", 5 * CHUNK + 17);
	source_dir(f, &s, "sub");
	source_file(f, &s, "sub/inner", 5000);
	source_symlink(&s, "link", "multi");
	child_start(f, c);
	run_both(f, &s);
	child_end(f, c);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.relay_feed_lost, 0);
	assert_true(c->n > 0 && c->m[c->n - 1].type == RELAY_FEED_END);
	check_file(f, c, "empty");
	check_file(f, c, "multi");
	check_file(f, c, "sub/inner");
	en = entry_named(c, "sub", &fd);
	assert_int_equal(en->ftype, PROTO_FT_DIR);
	assert_int_equal(fd, -1);
	check_records(c, en->id, 0, NULL);
	en = entry_named(c, "link", &fd);
	assert_int_equal(en->ftype, PROTO_FT_SYMLINK);
	assert_string_equal(en->link, "multi");
	check_records(c, en->id, 0, NULL);
	child_free(c);
}

/*
 * -X: a directory's ENTRY comes with its descriptor only once the hop has
 * set its attributes (so the child never reads a half-made directory's),
 * and a file's DONE after its attributes are on it.
 */
static void test_feed_xattrs(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct child *c = calloc(1, sizeof(*c));
	char path[PATH_MAX], v[16] = "";
	const struct relay_feed_entry *en;
	int fd;

	assert_non_null(c);
	source_dir(f, &s, "sub");
	source_file(f, &s, "sub/inner", 3 * CHUNK + 5);
	snprintf(path, sizeof(path), "%s/sub", f->src);
	if (setxattr(path, "user.d", "dirval", 6, 0) < 0) {
		free(c);
		skip(); /* no user.* attributes where the test's files are */
	}
	snprintf(path, sizeof(path), "%s/sub/inner", f->src);
	assert_int_equal(setxattr(path, "user.f", "fileval", 7, 0), 0);
	f->txr.p.open_flags |= PROTO_OPEN_XATTRS;
	f->rxr.p.open_flags |= PROTO_OPEN_XATTRS;
	child_start(f, c);
	run_both(f, &s);
	child_end(f, c);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	en = entry_named(c, "sub", &fd);
	assert_int_equal(en->ftype, PROTO_FT_DIR);
	assert_true(fd >= 0);
	for (size_t i = 0; i < c->n; i++) {
		if (c->m[i].type == RELAY_FEED_ENTRY && c->m[i].u.entry.id == en->id) {
			assert_string_equal(c->dattr[i], "dirval");
		}
	}
	check_records(c, en->id, 0, NULL);
	check_file(f, c, "sub/inner");
	entry_named(c, "sub/inner", &fd);
	assert_int_equal(fgetxattr(fd, "user.f", v, sizeof(v) - 1), 7);
	assert_string_equal(v, "fileval");
	child_free(c);
}

/* The child gone: the copy completes here, the loss counted. */
static void test_child_gone(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct child *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	c->close_early = true;
	source_file(f, &s, "a", 3 * CHUNK + 1);
	source_file(f, &s, "b", 7 * CHUNK);
	source_file(f, &s, "c", 100);
	child_start(f, c);
	run_both(f, &s);
	child_end(f, c);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 3, 0, 3 * CHUNK + 1 + 7 * CHUNK + 100, PERR_OK);
	assert_int_equal(f->rxr.st.relay_feed_lost, 1);
	assert_same_file(f->src, f->dst, "a");
	assert_same_file(f->src, f->dst, "b");
	assert_same_file(f->src, f->dst, "c");
	child_free(c);
}

/* The child gone in the middle of a file: the receiver carries on and commits everything. */
static void test_child_gone_midway(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct child *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	c->close_midway = true;
	source_file(f, &s, "a", 12 * CHUNK + 1);
	source_file(f, &s, "b", 100);
	child_start(f, c);
	run_both(f, &s);
	child_end(f, c);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 2, 0, 12 * CHUNK + 1 + 100, PERR_OK);
	assert_same_file(f->src, f->dst, "a");
	assert_same_file(f->src, f->dst, "b");
	child_free(c);
}

/* The hop's session fails: the child hears ABORT with the reason, last. */
static void test_hop_fails(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct child *c = calloc(1, sizeof(*c));
	static volatile sig_atomic_t stop = 1;
	const struct relay_feed_msg *last;

	assert_non_null(c);
	source_file(f, &s, "a", 3 * CHUNK);
	f->rxr.p.stop = &stop;
	child_start(f, c);
	run_both(f, &s);
	child_end(f, c);
	assert_int_equal(f->rxr.code, PERR_SHUTDOWN);
	assert_true(c->n > 0);
	last = &c->m[c->n - 1];
	assert_int_equal(last->type, RELAY_FEED_ABORT);
	assert_int_equal(last->u.abort.code, PERR_SHUTDOWN);
	assert_non_null(strstr(last->u.abort.text, "interrupted"));
	assert_int_equal(f->rxr.st.relay_feed_lost, 0);
	child_free(c);
}

/* ---- follow: a relay child's sender -------------------------------------- */

/*
 * The next hop: a second fixture, its sender following feed end sock (no
 * source of its own), its receiver writing into its own directory.
 */
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

/*
 * A whole chain in one process: a sender pushes to a receiver whose relay
 * feed drives a follow sender pushing to a third engine. Every entry
 * arrives there byte-exact, committed under the source's digest.
 */
static void test_chain(void **state)
{
	struct fx *f = *state, *g;
	struct source s = { 0 };
	static const char *const regs[] = { "empty", "one", "exact", "multi", "sub/inner", NULL };
	int sv[2];
	char target[16];

	source_file(f, &s, "empty", 0);
	source_file(f, &s, "one", 1);
	source_file(f, &s, "exact", CHUNK);
	source_file(f, &s, "multi", 9 * CHUNK + 17);
	source_dir(f, &s, "sub");
	source_file(f, &s, "sub/inner", 5000);
	source_symlink(&s, "link", "one");
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	f->rxr.p.relay_feed = sv[0];
	g = next_hop(sv[1]);
	run_start(&g->rxr);
	run_start(&g->txr);
	run_both(f, &s);
	close(sv[0]); /* the hop's session is over: the child has had its END */
	run_join(&g->txr);
	run_join(&g->rxr);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_ok_run(&g->txr);
	assert_ok_run(&g->rxr);
	assert_int_equal(f->rxr.st.relay_feed_lost, 0);
	assert_stats(&g->rxr.st, 7, 0, f->rxr.st.bytes, PERR_OK);
	assert_dest(g->dst, "empty exact link multi one sub sub/inner");
	for (size_t i = 0; regs[i]; i++) {
		assert_same_file(f->src, g->dst, regs[i]);
	}
	assert_int_equal(readlinkat(g->dst_fd, "link", target, sizeof(target)), 3);
	close(sv[1]);
	next_hop_end(g);
}

/*
 * A sparse image down the chain with ZEROS on every link: the hop tells its
 * holes as there (zeros), the follow sender finds them as holes again below
 * the prefix and describes them, and the last copy is byte-exact with
 * little of it crossing as payload.
 */
static void test_chain_sparse(void **state)
{
	struct fx *f = *state, *g;
	struct source s = { 0 };
	const uint64_t size = 10 * (uint64_t)CHUNK + 123;
	uint8_t *data = malloc(CHUNK);
	char *path = path_in(f->src, "sparse");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), sv[2];

	assert_non_null(data);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	fill(data, CHUNK, 7);
	assert_int_equal(pwrite(fd, data, CHUNK, 2 * CHUNK), CHUNK);
	assert_int_equal(pwrite(fd, data, CHUNK, 7 * CHUNK), CHUNK);
	close(fd);
	s.e[s.n++] = (struct engine_src){ .name = (char *)"sparse",
					  .path = (char *)"sparse",
					  .dirfd = f->src_fd,
					  .ftype = PROTO_FT_REG,
					  .mode = 0644,
					  .size = size };
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	f->rxr.p.relay_feed = sv[0];
	g = next_hop(sv[1]);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_ZEROS;
	g->txr.p.peer_caps = g->rxr.p.peer_caps = PROTO_CAP_ZEROS;
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
	assert_stats(&f->rxr.st, 1, 0, 2 * CHUNK, PERR_OK);
	assert_same_file(f->src, g->dst, "sparse");
	/* Where the hop's file system keeps holes, the next hop gets them as zeros, not payload. */
	{
		int hop = openat(f->dst_fd, "sparse", O_RDONLY | O_CLOEXEC);
		off_t d = lseek(hop, 0, SEEK_DATA);

		assert_true(hop >= 0);
		close(hop);
		if (d == 2 * CHUNK) {
			assert_int_equal(g->rxr.st.bytes, 2 * CHUNK);
			assert_int_equal(g->rxr.st.bytes_zero, size - 2 * CHUNK);
		} else {
			print_message("the hop's file system keeps no holes: zeros not checked\n");
		}
	}
	close(sv[1]);
	next_hop_end(g);
	free(data);
	free(path);
}

/* ---- a hop played by hand ------------------------------------------------- */

struct hop {
	int sock;  /* the hop's end of the feed */
	int child; /* the child's end */
	int fd;	   /* its copy of the one file */
	char *path;
};

static void hop_send(struct hop *h, struct relay_feed_msg *m, int fd)
{
	assert_int_equal(relay_feed_send(h->sock, m, fd), 0);
}

/* ENTRY of "f" (size bytes) with h's copy, whose bytes are garbage so far. */
static void hop_entry(struct fx *g, struct hop *h, uint64_t size)
{
	struct relay_feed_msg m = { .type = RELAY_FEED_ENTRY };
	uint8_t *junk = malloc(size + 1);

	assert_non_null(junk);
	memset(junk, 0xee, size);
	h->path = path_in(g->dir, "hopcopy");
	h->fd = open(h->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(h->fd >= 0);
	assert_int_equal(pwrite(h->fd, junk, size, 0), (ssize_t)size);
	free(junk);
	m.u.entry = (struct relay_feed_entry){
		.id = 5,
		.ftype = PROTO_FT_REG,
		.mode = 0644,
		.size = size,
		.mtime_sec = 1700000000,
		.name = (char[]){ "f" },
		.digest_known = true,
		.digest_tree = getenv("RDMACP_TEST_FILE_TREE") && size > CHUNK ? CHUNK : 0
	};
	hop_send(h, &m, h->fd);
}

static void hop_range(struct hop *h, uint64_t upto)
{
	struct relay_feed_msg m = { .type = RELAY_FEED_RANGE, .u.range = { 5, upto } };

	hop_send(h, &m, -1);
}

static void hop_done(struct hop *h, uint32_t code, const uint8_t *digest)
{
	struct relay_feed_msg m = { .type = RELAY_FEED_DONE,
				    .u.done = { .id = 5, .ok = code == PERR_OK, .code = code } };

	if (digest) {
		memcpy(m.u.done.digest, digest, HASH_LEN);
	}
	hop_send(h, &m, -1);
}

static void hop_end(struct hop *h)
{
	struct relay_feed_msg m = { .type = RELAY_FEED_END };

	hop_send(h, &m, -1);
}

static struct fx *hop_start(struct hop *h)
{
	int sv[2];
	struct fx *g;

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	h->sock = sv[0];
	h->child = sv[1];
	g = next_hop(sv[1]);
	run_start(&g->rxr);
	run_start(&g->txr);
	return g;
}

static void hop_finish(struct fx *g, struct hop *h)
{
	run_join(&g->txr);
	run_join(&g->rxr);
	close(h->sock);
	close(h->child);
	close(h->fd);
	unlink(h->path);
	free(h->path);
}

/*
 * The hop's copy grows a chunk at a time behind its RANGEs, its bytes past
 * them garbage until then: a sender that read past a RANGE would send
 * garbage, and its own digest would not be the source's.
 */
static void test_read_behind_prefix(void **state)
{
	struct fx *unused = *state, *g;
	struct hop h = { 0 };
	size_t size = 6 * CHUNK + 100;
	uint8_t *data = malloc(size), d[HASH_LEN];

	(void)unused;
	assert_non_null(data);
	fill(data, size, 7);
	digest_of(data, size, d);
	g = hop_start(&h);
	hop_entry(g, &h, size);
	for (size_t off = 0; off < size; off += CHUNK / 2) {
		size_t n = MIN((size_t)CHUNK / 2, size - off);

		usleep(20000); /* the sender waits: nothing past the prefix is read */
		assert_int_equal(pwrite(h.fd, data + off, n, (off_t)off), (ssize_t)n);
		hop_range(&h, off + n);
	}
	hop_done(&h, PERR_OK, d);
	hop_end(&h);
	hop_finish(g, &h);
	assert_ok_run(&g->txr);
	assert_ok_run(&g->rxr);
	assert_stats(&g->rxr.st, 1, 0, size, PERR_OK);
	{
		size_t len;
		uint8_t *got = read_file(g->dst, "f", &len);

		assert_true(len == size);
		assert_memory_equal(got, data, size);
		free(got);
	}
	free(data);
	next_hop_end(g);
}

/*
 * A byte spoiled in the hop's copy after the hop verified it: the next hop
 * fails the file (the follow sender's own reading is not the source's
 * digest, which is what it must send); the session goes on.
 */
static void test_corrupt_at_hop(void **state)
{
	struct fx *unused = *state, *g;
	struct hop h = { 0 };
	size_t size = 3 * CHUNK + 5;
	uint8_t *data = malloc(size), d[HASH_LEN];

	(void)unused;
	assert_non_null(data);
	fill(data, size, 9);
	digest_of(data, size, d);
	g = hop_start(&h);
	hop_entry(g, &h, size);
	data[CHUNK + 3] ^= 0x40; /* what the hop's disk holds */
	assert_int_equal(pwrite(h.fd, data, size, 0), (ssize_t)size);
	hop_range(&h, size);
	hop_done(&h, PERR_OK, d);
	hop_end(&h);
	hop_finish(g, &h);
	assert_ok_run(&g->txr);
	assert_ok_run(&g->rxr);
	assert_int_equal(g->rxr.st.files_ok, 0);
	assert_int_equal(g->rxr.st.files_failed, 1);
	assert_int_equal(g->txr.ev.failed, 1);
	assert_int_equal(g->txr.ev.first_failed_code, PERR_IO);
	assert_true(g->txr.ev.first_failed_local);
	assert_dest(g->dst, "");
	free(data);
	next_hop_end(g);
}

/* The hop failed the file: so does the next one, and nothing is committed there. */
static void test_done_failed(void **state)
{
	struct fx *unused = *state, *g;
	struct hop h = { 0 };
	size_t size = 4 * CHUNK;
	uint8_t *data = malloc(size);

	(void)unused;
	assert_non_null(data);
	fill(data, size, 3);
	g = hop_start(&h);
	hop_entry(g, &h, size);
	assert_int_equal(pwrite(h.fd, data, CHUNK, 0), (ssize_t)CHUNK);
	hop_range(&h, CHUNK);
	usleep(50000);
	hop_done(&h, PERR_INTEGRITY, NULL);
	hop_end(&h);
	hop_finish(g, &h);
	assert_ok_run(&g->txr);
	assert_ok_run(&g->rxr);
	assert_int_equal(g->rxr.st.files_ok, 0);
	assert_int_equal(g->rxr.st.files_failed, 1);
	assert_int_equal(g->txr.ev.first_failed_code, PERR_INTEGRITY);
	assert_dest(g->dst, "");
	free(data);
	next_hop_end(g);
}

/*
 * The book outlives a run: a second run (to the hop after one cut out)
 * replays every entry from the first, from the descriptors kept for it,
 * with the source's digest from the DONE the first run followed.
 */
static void test_replay(void **state)
{
	struct fx *unused = *state, *g, *g2;
	struct hop h = { 0 };
	size_t size = 5 * CHUNK + 33, len;
	uint8_t *data = malloc(size), d[HASH_LEN], *got;
	void *st = NULL;
	int sv[2];

	(void)unused;
	assert_non_null(data);
	fill(data, size, 11);
	digest_of(data, size, d);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	h.sock = sv[0];
	h.child = sv[1];
	g = next_hop(sv[1]);
	follow_book_keep(g->txr.p.follow, true);
	run_start(&g->rxr);
	run_start(&g->txr);
	hop_entry(g, &h, size);
	assert_int_equal(pwrite(h.fd, data, size, 0), (ssize_t)size);
	hop_range(&h, size);
	hop_done(&h, PERR_OK, d);
	hop_end(&h);
	run_join(&g->txr);
	run_join(&g->rxr);
	assert_ok_run(&g->txr);
	assert_ok_run(&g->rxr);
	assert_true(follow_book_replayable(g->txr.p.follow));
	/* The hop's own name goes: only the kept descriptor can read it now. */
	unlink(h.path);
	assert_int_equal(fx_setup(&st), 0);
	g2 = st;
	g2->txr.p.follow = TAKE_PTR(g->txr.p.follow);
	run_start(&g2->rxr);
	run_start(&g2->txr);
	run_join(&g2->txr);
	run_join(&g2->rxr);
	assert_ok_run(&g2->txr);
	assert_ok_run(&g2->rxr);
	assert_stats(&g2->rxr.st, 1, 0, size, PERR_OK);
	got = read_file(g2->dst, "f", &len);
	assert_true(len == size);
	assert_memory_equal(got, data, size);
	free(got);
	close(h.sock);
	close(h.child);
	close(h.fd);
	free(h.path);
	free(data);
	next_hop_end(g2);
	next_hop_end(g);
}

/* The hop's session failed: the next one's fails with its reason. */
static void test_abort(void **state)
{
	struct fx *unused = *state, *g;
	struct hop h = { 0 };
	struct relay_feed_msg m = { .type = RELAY_FEED_ABORT, .u.abort = { .code = PERR_NOSPACE } };

	(void)unused;
	snprintf(m.u.abort.text, sizeof(m.u.abort.text), "no space left");
	g = hop_start(&h);
	hop_entry(g, &h, 2 * CHUNK);
	hop_send(&h, &m, -1);
	hop_finish(g, &h);
	assert_failed_run(&g->txr, -ECONNABORTED, PERR_NOSPACE, "upstream: no space left");
	/* Nothing to replay to another hop: the feed failed upstream. */
	assert_false(follow_book_replayable(g->txr.p.follow));
	assert_dest(g->dst, "");
	next_hop_end(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_feed),
		T(test_feed_xattrs),
		T(test_child_gone),
		T(test_child_gone_midway),
		T(test_hop_fails),
		T(test_replay),
		T(test_chain),
		T(test_chain_sparse),
		T(test_read_behind_prefix),
		T(test_corrupt_at_hop),
		T(test_done_failed),
		T(test_abort),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
