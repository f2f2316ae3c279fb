/* SPDX-License-Identifier: MIT */
/*
 * The relay feed's records (src/relay_feed.c) over a real SOCK_SEQPACKET
 * socketpair: every type round trips, a regular file's descriptor rides
 * with its ENTRY, a full or empty socket answers -EAGAIN, records past the
 * caps and malformed ones are refused (and the descriptors that came with
 * them closed), and the other end's close reads as end of file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "proto/wire.h"
#include "relay_feed.h"

struct pair {
	int a, b;
};

static int setup(void **state)
{
	struct pair *p = calloc(1, sizeof(*p));
	int sv[2];

	assert_non_null(p);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	p->a = sv[0];
	p->b = sv[1];
	*state = p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;

	if (p->a >= 0) {
		close(p->a);
	}
	if (p->b >= 0) {
		close(p->b);
	}
	free(p);
	return 0;
}

/* Sends m, takes it back: the decoded record in *ret, its descriptor returned. */
static int round_trip(struct pair *p, const struct relay_feed_msg *m, int fd,
		      struct relay_feed_msg *ret)
{
	int got = -2;

	assert_int_equal(relay_feed_send(p->a, m, fd), 0);
	assert_int_equal(relay_feed_recv(p->b, ret, &got), 1);
	assert_int_equal(ret->type, m->type);
	return got;
}

static void test_start(void **state)
{
	struct pair *p = *state;
	uint8_t t1[300], t2[5] = { 1, 2, 3, 4, 5 }, cert[700];
	struct proto_relay_hop hops[2] = {
		{ .host = (char[]){ "h2.example" },
		  .port = 7878,
		  .path = (char[]){ "mod/dir" },
		  .ticket = t1,
		  .ticket_len = sizeof(t1) },
		{ .host = (char[]){ "127.0.0.3" },
		  .port = 1,
		  .path = (char[]){ "m" },
		  .ticket = t2,
		  .ticket_len = 5 },
	};
	struct relay_feed_msg m = { .type = RELAY_FEED_START }, got;

	memset(t1, 0xa5, sizeof(t1));
	memset(cert, 0x30, sizeof(cert));
	m.u.start = (struct relay_feed_start){
		.count = 2, .hops = hops, .client_cert = cert, .client_cert_len = sizeof(cert)
	};
	assert_int_equal(round_trip(p, &m, -1, &got), -1);
	assert_int_equal(got.u.start.count, 2);
	for (unsigned i = 0; i < 2; i++) {
		assert_string_equal(got.u.start.hops[i].host, hops[i].host);
		assert_int_equal(got.u.start.hops[i].port, hops[i].port);
		assert_string_equal(got.u.start.hops[i].path, hops[i].path);
		assert_int_equal(got.u.start.hops[i].ticket_len, hops[i].ticket_len);
		assert_memory_equal(got.u.start.hops[i].ticket, hops[i].ticket, hops[i].ticket_len);
	}
	assert_int_equal(got.u.start.client_cert_len, sizeof(cert));
	assert_memory_equal(got.u.start.client_cert, cert, sizeof(cert));
	assert_int_equal(got.u.start.fanout, 1); /* 0: a chain */
	relay_feed_msg_free(&got);
	assert_int_equal(got.type, 0);

	/* A tree's fan-out, 1..PROTO_MAX_RELAY_FANOUT. */
	m.u.start.fanout = PROTO_MAX_RELAY_FANOUT;
	assert_int_equal(round_trip(p, &m, -1, &got), -1);
	assert_int_equal(got.u.start.fanout, PROTO_MAX_RELAY_FANOUT);
	relay_feed_msg_free(&got);
	m.u.start.fanout = PROTO_MAX_RELAY_FANOUT + 1;
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EINVAL);
	m.u.start.fanout = 2;

	/* No certificate is allowed (the logs then say less); no hop is not. */
	m.u.start.client_cert = NULL;
	m.u.start.client_cert_len = 0;
	assert_int_equal(round_trip(p, &m, -1, &got), -1);
	assert_null(got.u.start.client_cert);
	relay_feed_msg_free(&got);
	m.u.start.count = 0;
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EINVAL);
	m.u.start.count = PROTO_MAX_RELAY_HOPS + 1;
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EINVAL);
	m.u.start.count = 2;
	hops[1].port = 0;
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EINVAL);
	hops[1].port = 1;
	hops[1].ticket_len = PROTO_MAX_RELAY_TICKET + 1;
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EINVAL);
}

/* A chain whose tickets take more than a record is refused as too long, not cut. */
static void test_start_too_long(void **state)
{
	struct pair *p = *state;
	uint8_t *t = calloc(1, PROTO_MAX_RELAY_TICKET);
	struct proto_relay_hop hops[PROTO_MAX_RELAY_HOPS];
	struct relay_feed_msg m = { .type = RELAY_FEED_START };
	char host[] = "h", path[] = "m/p";
	int fd = -1;

	assert_non_null(t);
	for (unsigned i = 0; i < PROTO_MAX_RELAY_HOPS; i++) {
		hops[i] = (struct proto_relay_hop){ .host = host,
						    .port = 9,
						    .path = path,
						    .ticket = t,
						    .ticket_len = PROTO_MAX_RELAY_TICKET };
	}
	m.u.start = (struct relay_feed_start){ .count = PROTO_MAX_RELAY_HOPS, .hops = hops };
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EMSGSIZE);
	assert_int_equal(relay_feed_recv(p->b, &m, &fd), -EAGAIN); /* nothing went */
	free(t);
}

static void test_entry_fd(void **state)
{
	struct pair *p = *state;
	char path[] = "/tmp/relay_feed_XXXXXX", buf[8] = { 0 };
	int src = mkstemp(path), got;
	struct stat a, b;
	struct relay_feed_msg m = { .type = RELAY_FEED_ENTRY }, r;

	assert_true(src >= 0);
	unlink(path);
	assert_int_equal(pwrite(src, "payload", 7, 0), 7);
	m.u.entry = (struct relay_feed_entry){ .id = 42,
					       .ftype = PROTO_FT_REG,
					       .mode = 0640,
					       .size = 7,
					       .mtime_sec = -5,
					       .mtime_nsec = 999999999,
					       .uid = 1000,
					       .gid = 1001,
					       .name = (char[]){ "dir/file" },
					       .digest_known = true };
	got = round_trip(p, &m, src, &r);
	assert_true(got >= 0 && got != src);
	assert_int_equal(fstat(src, &a), 0);
	assert_int_equal(fstat(got, &b), 0);
	assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	assert_int_equal(pread(got, buf, 7, 0), 7);
	assert_string_equal(buf, "payload");
	assert_true(fcntl(got, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(r.u.entry.id, 42);
	assert_int_equal(r.u.entry.mode, 0640);
	assert_true(r.u.entry.size == 7 && r.u.entry.mtime_sec == -5);
	assert_int_equal(r.u.entry.mtime_nsec, 999999999);
	assert_true(r.u.entry.uid == 1000 && r.u.entry.gid == 1001);
	assert_string_equal(r.u.entry.name, "dir/file");
	assert_null(r.u.entry.link);
	assert_true(r.u.entry.digest_known);
	assert_int_equal(r.u.entry.digest_tree, 0);
	relay_feed_msg_free(&r);
	close(got);

	/* A chunk tree's digest carries its chunk size; one not a slot size is refused. */
	m.u.entry.digest_tree = 1u << 20;
	got = round_trip(p, &m, src, &r);
	assert_true(got >= 0);
	assert_true(r.u.entry.digest_known);
	assert_int_equal(r.u.entry.digest_tree, 1u << 20);
	relay_feed_msg_free(&r);
	close(got);
	m.u.entry.digest_tree = 3u << 20;
	assert_int_equal(relay_feed_send(p->a, &m, src), -EINVAL);
	m.u.entry.digest_tree = 0;

	/*
	 * A regular file goes with its descriptor; a directory with one (-X/-A:
	 * its attributes are read from it) or none; nothing else takes one.
	 */
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EINVAL);
	m.u.entry.ftype = PROTO_FT_DIR;
	m.u.entry.digest_known = false;
	assert_int_equal(round_trip(p, &m, -1, &r), -1);
	assert_int_equal(r.u.entry.ftype, PROTO_FT_DIR);
	assert_false(r.u.entry.digest_known);
	relay_feed_msg_free(&r);
	int dfd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	assert_true(dfd >= 0);
	got = round_trip(p, &m, dfd, &r);
	assert_true(got >= 0 && got != dfd);
	assert_int_equal(fstat(dfd, &a), 0);
	assert_int_equal(fstat(got, &b), 0);
	assert_true(S_ISDIR(b.st_mode) && a.st_ino == b.st_ino);
	relay_feed_msg_free(&r);
	close(got);

	m.u.entry.ftype = PROTO_FT_SYMLINK;
	m.u.entry.link = (char[]){ "../target" };
	assert_int_equal(relay_feed_send(p->a, &m, dfd), -EINVAL); /* a link takes none */
	close(dfd);
	m.u.entry.link = NULL;
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EINVAL); /* a link needs its target */
	m.u.entry.link = (char[]){ "../target" };
	assert_int_equal(round_trip(p, &m, -1, &r), -1);
	assert_string_equal(r.u.entry.link, "../target");
	relay_feed_msg_free(&r);
	m.u.entry.name = (char[]){ "" };
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EINVAL);
	/* A hard link (-H) names its file, and takes no descriptor. */
	m.u.entry.ftype = PROTO_FT_HARDLINK;
	m.u.entry.name = (char[]){ "x" };
	m.u.entry.link = (char[]){ "d/first" };
	assert_int_equal(round_trip(p, &m, -1, &r), -1);
	assert_int_equal(r.u.entry.ftype, PROTO_FT_HARDLINK);
	assert_string_equal(r.u.entry.link, "d/first");
	relay_feed_msg_free(&r);
	assert_int_equal(relay_feed_send(p->a, &m, src), -EINVAL);
	m.u.entry.link = NULL;
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EINVAL); /* ... and needs it */
	close(src);
}

static void test_small_records(void **state)
{
	struct pair *p = *state;
	struct relay_feed_msg m, r;

	m = (struct relay_feed_msg){ .type = RELAY_FEED_RANGE,
				     .u.range = { .id = 7, .upto = UINT64_MAX - 1 } };
	assert_int_equal(round_trip(p, &m, -1, &r), -1);
	assert_true(r.u.range.id == 7 && r.u.range.upto == UINT64_MAX - 1);

	m = (struct relay_feed_msg){ .type = RELAY_FEED_DONE, .u.done = { .id = 9, .ok = true } };
	memset(m.u.done.digest, 0x77, 16);
	assert_int_equal(round_trip(p, &m, -1, &r), -1);
	assert_true(r.u.done.ok && r.u.done.id == 9 && r.u.done.code == PERR_OK);
	assert_memory_equal(r.u.done.digest, m.u.done.digest, 16);
	m.u.done.ok = false;
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EINVAL); /* failed needs its code */
	m.u.done.code = PERR_INTEGRITY;
	assert_int_equal(round_trip(p, &m, -1, &r), -1);
	assert_true(!r.u.done.ok && r.u.done.code == PERR_INTEGRITY);

	m = (struct relay_feed_msg){ .type = RELAY_FEED_END };
	assert_int_equal(round_trip(p, &m, -1, &r), -1);

	m = (struct relay_feed_msg){ .type = RELAY_FEED_ABORT, .u.abort = { .code = PERR_IO } };
	snprintf(m.u.abort.text, sizeof(m.u.abort.text), "disk on fire");
	assert_int_equal(round_trip(p, &m, -1, &r), -1);
	assert_int_equal(r.u.abort.code, PERR_IO);
	assert_string_equal(r.u.abort.text, "disk on fire");

	m = (struct relay_feed_msg){ .type = RELAY_FEED_RESULT,
				     .u.result = { .index = 2,
						   .status = 2,
						   .exit_code = 3,
						   .files_ok = 10,
						   .files_failed = 1,
						   .bytes = 1u << 30 } };
	snprintf(m.u.result.host, sizeof(m.u.result.host), "127.0.0.4");
	snprintf(m.u.result.text, sizeof(m.u.result.text), "one file failed");
	assert_int_equal(round_trip(p, &m, -1, &r), -1);
	assert_true(r.u.result.index == 2 && r.u.result.status == 2 && r.u.result.exit_code == 3);
	assert_true(r.u.result.files_ok == 10 && r.u.result.files_failed == 1);
	assert_true(r.u.result.bytes == 1u << 30);
	assert_string_equal(r.u.result.host, "127.0.0.4");
	assert_string_equal(r.u.result.text, "one file failed");
	m.u.result.status = 5;
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EINVAL);
	m = (struct relay_feed_msg){ .type = 99 };
	assert_int_equal(relay_feed_send(p->a, &m, -1), -EINVAL);
}

static void test_eagain(void **state)
{
	struct pair *p = *state;
	struct relay_feed_msg m = { .type = RELAY_FEED_RANGE }, r = { 0 };
	int fd = -5, size = 4096, n = 0, rr;

	assert_int_equal(relay_feed_recv(p->b, &r, &fd), -EAGAIN);
	assert_int_equal(fd, -5); /* untouched */
	assert_int_equal(setsockopt(p->a, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)), 0);
	while ((rr = relay_feed_send(p->a, &m, -1)) == 0) {
		m.u.range.upto = ++n;
		assert_true(n < 1000000);
	}
	assert_int_equal(rr, -EAGAIN);
	assert_true(n > 0);
	/* Each record sent comes whole and in order. */
	for (int i = 0; i < n; i++) {
		assert_int_equal(relay_feed_recv(p->b, &r, &fd), 1);
		assert_true(r.type == RELAY_FEED_RANGE && r.u.range.upto == (uint64_t)i);
	}
	assert_int_equal(relay_feed_recv(p->b, &r, &fd), -EAGAIN);
}

/* A raw record: the header, then body bytes, sent with fd (or not). */
static void send_raw(int sock, uint32_t magic, uint8_t version, uint8_t type, uint16_t rsvd,
		     const void *body, size_t len, int fd)
{
	uint8_t buf[RELAY_FEED_MAX + 64];
	struct wbuf w;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	wbuf_init(&w, buf, sizeof(buf));
	wbuf_put_u32(&w, magic);
	wbuf_put_u8(&w, version);
	wbuf_put_u8(&w, type);
	wbuf_put_u16(&w, rsvd);
	wbuf_put_bytes(&w, body, len);
	assert_false(w.overflow);
	iov = (struct iovec){ .iov_base = buf, .iov_len = w.len };
	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.b;
		mh.msg_controllen = sizeof(ctl.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	assert_int_equal(sendmsg(sock, &mh, 0), (ssize_t)w.len);
}

static int expect_recv(int sock)
{
	struct relay_feed_msg m;
	int fd = -7, r = relay_feed_recv(sock, &m, &fd);

	assert_int_equal(fd, r == 1 ? -1 : -7); /* untouched when refused */
	if (r == 1) {
		relay_feed_msg_free(&m);
	}
	return r;
}

#define MAGIC 0x52464431u

/* How many descriptors this process has open. */
static int open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++) {
		n += fcntl(fd, F_GETFD) >= 0;
	}
	return n;
}

static void test_malformed(void **state)
{
	struct pair *p = *state;
	const uint8_t range[12] = { 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5 };
	/* ENTRY: id, REG, known 1, mode, size, mtime, nsec, uid, gid, name "a\0" */
	uint8_t entry[42] = { 0, 0, 0, 1, PROTO_FT_REG, 1, 0, 0, 1, 0xa4 };
	int before, fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	entry[38] = 0;
	entry[39] = 2;
	entry[40] = 'a';
	entry[41] = 0; /* a NUL in the name */
	assert_true(fd >= 0);
	send_raw(p->a, MAGIC, 1, RELAY_FEED_RANGE, 0, range, sizeof(range), -1);
	assert_int_equal(expect_recv(p->b) == 1, 1); /* the well-formed one, for contrast */
	send_raw(p->a, MAGIC ^ 1, 1, RELAY_FEED_RANGE, 0, range, sizeof(range), -1);
	assert_int_equal(expect_recv(p->b), -EBADMSG);
	send_raw(p->a, MAGIC, 2, RELAY_FEED_RANGE, 0, range, sizeof(range), -1);
	assert_int_equal(expect_recv(p->b), -EBADMSG);
	send_raw(p->a, MAGIC, 1, RELAY_FEED_RANGE, 1, range, sizeof(range), -1);
	assert_int_equal(expect_recv(p->b), -EBADMSG);
	send_raw(p->a, MAGIC, 1, 0, 0, range, 0, -1);
	assert_int_equal(expect_recv(p->b), -EBADMSG);
	send_raw(p->a, MAGIC, 1, RELAY_FEED_RESULT + 1, 0, range, 0, -1);
	assert_int_equal(expect_recv(p->b), -EBADMSG);
	send_raw(p->a, MAGIC, 1, RELAY_FEED_RANGE, 0, range, sizeof(range) - 1, -1);
	assert_int_equal(expect_recv(p->b), -EBADMSG); /* short */
	send_raw(p->a, MAGIC, 1, RELAY_FEED_END, 0, range, 1, -1);
	assert_int_equal(expect_recv(p->b), -EBADMSG); /* bytes left over */
	send_raw(p->a, MAGIC, 1, RELAY_FEED_ENTRY, 0, entry, sizeof(entry), fd);
	assert_int_equal(expect_recv(p->b), -EBADMSG);
	entry[41] = 'b';
	entry[39] = 0; /* an empty name */
	send_raw(p->a, MAGIC, 1, RELAY_FEED_ENTRY, 0, entry, 40, fd);
	assert_int_equal(expect_recv(p->b), -EBADMSG);
	entry[39] = 2;
	entry[5] = 2; /* digest_known neither 0 nor 1 */
	send_raw(p->a, MAGIC, 1, RELAY_FEED_ENTRY, 0, entry, sizeof(entry), fd);
	assert_int_equal(expect_recv(p->b), -EBADMSG);
	entry[5] = 11; /* a tree of 2 KiB chunks: below a slot */
	send_raw(p->a, MAGIC, 1, RELAY_FEED_ENTRY, 0, entry, sizeof(entry), fd);
	assert_int_equal(expect_recv(p->b), -EBADMSG);
	entry[5] = 27; /* 128 MiB: above one */
	send_raw(p->a, MAGIC, 1, RELAY_FEED_ENTRY, 0, entry, sizeof(entry), fd);
	assert_int_equal(expect_recv(p->b), -EBADMSG);
	entry[5] = 1;

	/* Descriptors where none belongs, or none where one must come: refused, closed. */
	before = open_fds();
	send_raw(p->a, MAGIC, 1, RELAY_FEED_RANGE, 0, range, sizeof(range), fd);
	assert_int_equal(expect_recv(p->b), -EBADMSG);
	send_raw(p->a, MAGIC, 1, RELAY_FEED_ENTRY, 0, entry, sizeof(entry), -1);
	assert_int_equal(expect_recv(p->b), -EBADMSG);
	{
		/* A symlink's ENTRY (target "xy") takes no descriptor. */
		uint8_t lnk[sizeof(entry) + 4];

		memcpy(lnk, entry, sizeof(entry));
		lnk[4] = PROTO_FT_SYMLINK;
		lnk[5] = 0;
		memcpy(lnk + sizeof(entry), "\0\2xy", 4);
		send_raw(p->a, MAGIC, 1, RELAY_FEED_ENTRY, 0, lnk, sizeof(lnk), -1);
		assert_int_equal(expect_recv(p->b), 1); /* well formed without one */
		send_raw(p->a, MAGIC, 1, RELAY_FEED_ENTRY, 0, lnk, sizeof(lnk), fd);
		assert_int_equal(expect_recv(p->b), -EBADMSG);
	}
	assert_int_equal(open_fds(), before);
	{
		struct relay_feed_msg m;
		int got = -1;

		send_raw(p->a, MAGIC, 1, RELAY_FEED_ENTRY, 0, entry, sizeof(entry), fd);
		assert_int_equal(relay_feed_recv(p->b, &m, &got), 1);
		assert_true(got >= 0);
		assert_string_equal(m.u.entry.name, "ab");
		relay_feed_msg_free(&m);
		close(got);
	}
	close(fd);
}

static void test_oversize_and_eof(void **state)
{
	struct pair *p = *state;
	static uint8_t big[RELAY_FEED_MAX];
	int before = open_fds(), fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	send_raw(p->a, MAGIC, 1, RELAY_FEED_END, 0, big, sizeof(big), fd);
	assert_int_equal(expect_recv(p->b), -EMSGSIZE);
	close(fd);
	assert_int_equal(open_fds(), before);
	/* The record after it is read as itself. */
	send_raw(p->a, MAGIC, 1, RELAY_FEED_END, 0, big, 0, -1);
	assert_int_equal(expect_recv(p->b), 1);
	close(p->a);
	p->a = -1;
	assert_int_equal(expect_recv(p->b), 0);
	assert_int_equal(expect_recv(p->b), 0);
	/* And the sending side sees its peer gone. */
	{
		struct relay_feed_msg m = { .type = RELAY_FEED_END };

		assert_int_equal(relay_feed_send(p->b, &m, -1), -EPIPE);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_start, setup, teardown),
		cmocka_unit_test_setup_teardown(test_start_too_long, setup, teardown),
		cmocka_unit_test_setup_teardown(test_entry_fd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_small_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eagain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oversize_and_eof, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
