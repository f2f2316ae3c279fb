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

#define MAX_RECS 4096

struct child {
	int sock;
	bool close_early; /* the child's end closed before the receiver starts */
	pthread_t th;
	size_t n;
	struct relay_feed_msg m[MAX_RECS];
	int fd[MAX_RECS];
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
		c->n++;
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
	hash_of(src, len, h);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_feed),
		T(test_child_gone),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
