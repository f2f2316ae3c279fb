/* SPDX-License-Identifier: MIT */
/*
 * engine_run in one process: a sender and a receiver engine on two threads,
 * joined by a real TLS 1.3 pair (certificates from certs_init, over a
 * socketpair) and real tcp lanes on loopback, the receiver writing real files
 * into a temp directory through io_uring. Where the case needs a misbehaving
 * sender, the test thread plays it by hand the way tests/tools/rawpeer.c does
 * against a daemon: control messages through chan, chunks as WRITE +
 * WRITE_WITH_IMM through the xport ops; where it needs a misbehaving
 * receiver, it plays that: a ring registered for the sender's writes, RING
 * and FILES_ACK by hand, credits withheld.
 *
 * Cases: a transfer of every size class, a directory and a symlink; checksum
 * mismatch (the receiver's FLIP_BYTE hook, and a FILE_DONE with a wrong hash);
 * a pull receiver's name_ok refusing a name; duplicate names; FILES ids out
 * of order; FILE_DONE byte counts too high and too low; a sender that dies
 * mid-file; an idle sender; a receiver that answers ERROR, sends a bad RING,
 * or never returns a credit; the stop flag; more directories under -p than
 * the receiver keeps for the end (each one past its cap a reported failure);
 * --partial: a journal made by hand resumed (a gap, everything kept, a
 * flipped byte, records of another chunk size), discarded (another mtime,
 * overlapping records, a record past the size), a name in the store
 * refused, and a RESUME the sender refuses (no capability, not whole chunks);
 * zero extents: a sparse file with holes and a chunk of zeros crosses as
 * ZEROS (holes kept), a receiver without them gets data, and ZEROS refused
 * (no capability, a file not in flight, outside the file, not whole chunks,
 * over held data, described twice, data inside zeros); packed slots: sizes
 * around a pack's bounds, a peer without them, a flipped byte in a pack, a
 * pack by hand with a wrong digest and a sender's failure inside it, and
 * packs refused (a file not in flight, another length, a file twice, a file
 * sent a chunk already, a table that does not add up, no capability), and a
 * packed file sent more after its piece (a chunk, zeros).
 *
 * Every case checks engine_run's return, its protocol error code, the stats,
 * and the destination: nothing under a final name unless it was committed, no
 * temp file (".NAME.rdmacp.XXXXXXXX"), no descriptor left open beneath it
 * (an O_TMPFILE file lives only as one).
 *
 * Only engine.h's public API and the tls/chan/xport APIs are used, so the
 * harness stands while the engine behind them is reorganised.
 */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>

#include "certs.h"
#include "chan.h"
#include "clock.h"
#include "engine.h"
#include "hash.h"
#include "macro.h"
#include "proto/msg.h"
#include "tls.h"
#include "xport.h"

#define CHUNK  (64u * 1024)
#define SLOTS  4u
#define NLANES 2u
#define IO_MS  5000
/* Longest any one engine may take in these cases before the test gives up. */
#define JOIN_MS 8000

static char *certdir;
static struct tls_ctx *server_ctx, *client_ctx;

/* ---- small helpers ------------------------------------------------------ */

static char *path_in(const char *dir, const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

/* Deterministic contents, different for each seed. */
static void fill(uint8_t *buf, size_t len, unsigned seed)
{
	uint32_t x = 0x9e3779b9u * (seed + 1);

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = (uint8_t)x;
	}
}

static void hash_of(const uint8_t *buf, size_t len, uint8_t out[HASH_LEN])
{
	struct file_hash h;

	assert_int_equal(file_hash_init(&h), 0);
	file_hash_update(&h, buf, len);
	file_hash_final(&h, out);
	file_hash_free(&h);
}

static void write_file(const char *dir, const char *name, const uint8_t *buf, size_t len)
{
	char *p = path_in(dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
	free(p);
}

/* The whole of a file, or NULL when it does not exist. */
static uint8_t *read_file(const char *dir, const char *name, size_t *ret_len)
{
	char *p = path_in(dir, name);
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	uint8_t *buf;

	free(p);
	if (fd < 0) {
		return NULL;
	}
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, (size_t)st.st_size + 1), st.st_size);
	close(fd);
	*ret_len = (size_t)st.st_size;
	return buf;
}

static void assert_same_file(const char *src, const char *dst, const char *name)
{
	size_t a_len, b_len;
	uint8_t *a = read_file(src, name, &a_len);
	uint8_t *b = read_file(dst, name, &b_len);

	if (!b) {
		fail_msg("%s was not received", name);
	}
	assert_non_null(a);
	assert_int_equal(a_len, b_len);
	assert_memory_equal(a, b, a_len);
	free(a);
	free(b);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void collect(const char *root, const char *rel, char ***names, size_t *n)
{
	char *path = *rel ? path_in(root, rel) : strdup(root);
	DIR *d = opendir(path);
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d))) {
		char *name;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) {
			continue;
		}
		if (*rel) {
			assert_true(asprintf(&name, "%s/%s", rel, de->d_name) > 0);
		} else {
			name = strdup(de->d_name);
		}
		*names = realloc(*names, (*n + 1) * sizeof(**names));
		assert_non_null(*names);
		(*names)[(*n)++] = name;
		if (de->d_type == DT_DIR) {
			collect(root, name, names, n);
		}
	}
	closedir(d);
	free(path);
}

/* Every name beneath dir, sorted, space-separated: "a sub sub/b". */
static char *tree(const char *dir)
{
	char **names = NULL, *out;
	size_t n = 0, len = 1;

	collect(dir, "", &names, &n);
	if (n) {
		qsort(names, n, sizeof(*names), cmp_str);
	}
	for (size_t i = 0; i < n; i++) {
		len += strlen(names[i]) + 1;
	}
	out = calloc(1, len);
	assert_non_null(out);
	for (size_t i = 0; i < n; i++) {
		if (i) {
			strcat(out, " ");
		}
		strcat(out, names[i]);
		free(names[i]);
	}
	free(names);
	return out;
}

/* No descriptor of this process refers to anything beneath dir (an O_TMPFILE file included). */
static void assert_no_fd_beneath(const char *dir)
{
	DIR *d = opendir("/proc/self/fd");
	size_t dlen = strlen(dir);
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d))) {
		char target[4096];
		ssize_t n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);

		if (n <= 0) {
			continue;
		}
		target[n] = '\0';
		if (!strncmp(target, dir, dlen) && target[dlen] == '/') {
			closedir(d);
			fail_msg("descriptor %s still open on %s", de->d_name, target);
		}
	}
	closedir(d);
}

/* The destination holds exactly these names (sorted, space-separated), and nothing is open in it. */
static void assert_dest(const char *dir, const char *expect)
{
	char *got = tree(dir);

	assert_string_equal(got, expect);
	free(got);
	assert_no_fd_beneath(dir);
}

/* ---- the link: TLS control pair + tcp lanes ---------------------------- */

struct end {
	struct tls_conn *tls;
	struct chan chan;
	bool chan_ok;
	struct xport *x;
};

struct passive {
	int fd;
	struct xport_listener *l;
	struct xport_params xp;
	struct tls_conn *tls;
	int tls_r;
	struct xport *x;
	int x_r;
};

static void *passive_main(void *arg)
{
	struct passive *p = arg;

	p->tls_r = tls_accept(server_ctx, p->fd, IO_MS, &p->tls);
	p->x_r = xport_tcp_ops.accept(p->l, &p->xp, &p->x);
	return NULL;
}

/* Receiver: TLS server and passive lanes (as the daemon of a push); sender: the other side. */
static void link_open(struct end *tx, struct end *rx)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct passive p = { 0 };
	pthread_t th;
	uint16_t port;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	p.fd = sv[0];
	p.xp.nlanes = NLANES;
	xport_params_set_slots(&p.xp, SLOTS);
	p.xp.timeout_ms = IO_MS;
	for (size_t i = 0; i < XPORT_TOKEN_LEN; i++) {
		p.xp.token[i] = (uint8_t)(0xa0 + i);
	}
	assert_int_equal(xport_tcp_ops.listen((struct sockaddr *)&sa, sizeof(sa), &p.l, &port), 0);
	sa.sin_port = htons(port);
	assert_int_equal(pthread_create(&th, NULL, passive_main, &p), 0);

	int tls_r = tls_connect(client_ctx, sv[1], "localhost", IO_MS, &tx->tls);
	int x_r = xport_tcp_ops.connect((struct sockaddr *)&sa, sizeof(sa), &p.xp, &tx->x);

	assert_int_equal(pthread_join(th, NULL), 0);
	xport_tcp_ops.listener_close(p.l);
	rx->tls = p.tls;
	rx->x = p.x;
	if (tls_r < 0 || p.tls_r < 0) {
		fail_msg("TLS: connect %d accept %d: %s", tls_r, p.tls_r, tls_last_error());
	}
	assert_int_equal(x_r, 0);
	assert_int_equal(p.x_r, 0);
	assert_int_equal(chan_init(&tx->chan, tx->tls, IO_MS), 0);
	tx->chan_ok = true;
	assert_int_equal(chan_init(&rx->chan, rx->tls, IO_MS), 0);
	rx->chan_ok = true;
}

/* A side that stops dead: lanes and connection gone, no close_notify. */
static void end_close(struct end *e)
{
	if (e->x) {
		e->x->ops->destroy(e->x);
		e->x = NULL;
	}
	if (e->chan_ok) {
		chan_done(&e->chan);
		e->chan_ok = false;
	}
	if (e->tls) {
		tls_conn_free(e->tls);
		e->tls = NULL;
	}
}

/* ---- an engine on its own thread ---------------------------------------- */

struct events {
	unsigned ok, failed, skipped, notices;
	uint64_t ok_bytes;
	uint32_t first_failed_code;
	bool first_failed_local; /* the failure happened on this side */
};

static void ev_ok(void *ud, const struct engine_entry_ev *e)
{
	struct events *ev = ud;

	/* Only regular files have a checksum. */
	assert_true((e->hash != NULL) == (e->ftype == PROTO_FT_REG));
	ev->ok++;
	ev->ok_bytes += e->bytes;
}

static void ev_failed(void *ud, const char *name, uint8_t ftype, uint32_t code, bool local,
		      const char *text)
{
	struct events *ev = ud;

	(void)name, (void)text, (void)ftype;
	if (!ev->failed++) {
		ev->first_failed_code = code;
		ev->first_failed_local = local;
	}
}

static void ev_skipped(void *ud, const char *name, uint8_t ftype, uint32_t items)
{
	struct events *ev = ud;

	(void)name;
	(void)ftype;
	(void)items;
	ev->skipped++;
}

static void ev_notice(void *ud, const char *name, const char *text)
{
	struct events *ev = ud;

	(void)name, (void)text;
	ev->notices++;
}

struct run {
	struct engine_params p;
	struct events ev;
	struct engine_stats st;
	uint32_t code;
	int r;
	char err[512];
	pthread_t th;
	bool started;
};

static void *run_main(void *arg)
{
	struct run *u = arg;

	u->r = engine_run(&u->p, &u->st, &u->code, u->err, sizeof(u->err));
	return NULL;
}

static void run_init(struct run *u, enum engine_role role, struct end *e)
{
	memset(u, 0, sizeof(*u));
	u->p.role = role;
	u->p.chan = &e->chan;
	u->p.x = e->x;
	u->p.chunk_size = CHUNK;
	u->p.slots = SLOTS;
	u->p.pool_chunks = SLOTS;
	u->p.idle_timeout_ms = IO_MS;
	u->p.base_fd = -1;
	u->p.ev = (struct engine_events){
		.file_ok = ev_ok,
		.file_failed = ev_failed,
		.file_skipped = ev_skipped,
		.notice = ev_notice,
		.ud = &u->ev,
	};
	u->code = UINT32_MAX;
	u->r = 1; /* engine_run never returns this */
}

static void run_start(struct run *u)
{
	assert_int_equal(pthread_create(&u->th, NULL, run_main, u), 0);
	u->started = true;
}

/* Wait for the engine to return, at most JOIN_MS. */
static void run_join(struct run *u)
{
	struct timespec dl;
	int r;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += JOIN_MS / 1000;
	r = pthread_timedjoin_np(u->th, NULL, &dl);
	if (r == ETIMEDOUT) {
		/* Its resources stay: tearing them down under a live engine would crash. */
		fail_msg("engine (%s) did not return within %d ms",
			 u->p.role == ENGINE_SENDER ? "sender" : "receiver", JOIN_MS);
	}
	assert_int_equal(r, 0);
	u->started = false;
}

/* ---- the fixture: directories, the link, the receiver's run ------------ */

struct fx {
	char *dir, *src, *dst;
	int src_fd, dst_fd;
	struct end tx, rx;
	struct run rxr, txr;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->dir = tu_mkdtemp();
	f->src = path_in(f->dir, "src");
	f->dst = path_in(f->dir, "dst");
	assert_int_equal(mkdir(f->src, 0700), 0);
	assert_int_equal(mkdir(f->dst, 0700), 0);
	f->src_fd = open(f->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	f->dst_fd = open(f->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->src_fd >= 0 && f->dst_fd >= 0);
	link_open(&f->tx, &f->rx);
	run_init(&f->rxr, ENGINE_RECEIVER, &f->rx);
	f->rxr.p.base_fd = f->dst_fd;
	run_init(&f->txr, ENGINE_SENDER, &f->tx);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	if (f->rxr.started || f->txr.started) {
		return 0; /* an engine still runs (reported already): leak rather than crash */
	}
	end_close(&f->tx);
	end_close(&f->rx);
	close(f->src_fd);
	close(f->dst_fd);
	tu_rmtree(f->dir);
	free(f->dir);
	free(f->src);
	free(f->dst);
	free(f);
	return 0;
}

/* ---- the sender's entries ------------------------------------------------ */

struct source {
	struct engine_src e[16];
	size_t n, next;
};

static int source_next(void *ud, const struct engine_src **ret, char *why, size_t whylen)
{
	struct source *s = ud;

	(void)why, (void)whylen;
	if (s->next == s->n) {
		return 0;
	}
	*ret = &s->e[s->next++];
	return 1;
}

/* A regular file of size bytes made in the source directory and offered under its name. */
static uint64_t source_file(struct fx *f, struct source *s, const char *name, size_t size)
{
	uint8_t *buf = malloc(size ? size : 1);

	assert_non_null(buf);
	fill(buf, size, (unsigned)s->n);
	write_file(f->src, name, buf, size);
	free(buf);
	s->e[s->n++] = (struct engine_src){ .name = (char *)name,
					    .path = (char *)name,
					    .dirfd = f->src_fd,
					    .ftype = PROTO_FT_REG,
					    .mode = 0644,
					    .size = size };
	return size;
}

static void source_dir(struct fx *f, struct source *s, const char *name)
{
	char *p = path_in(f->src, name);

	assert_int_equal(mkdir(p, 0755), 0);
	free(p);
	s->e[s->n++] = (struct engine_src){ .name = (char *)name,
					    .path = (char *)name,
					    .dirfd = f->src_fd,
					    .ftype = PROTO_FT_DIR,
					    .mode = 0755 };
}

static void source_symlink(struct source *s, const char *name, const char *target)
{
	s->e[s->n++] = (struct engine_src){ .name = (char *)name,
					    .path = (char *)name,
					    .dirfd = AT_FDCWD,
					    .ftype = PROTO_FT_SYMLINK,
					    .mode = 0777,
					    .link = (char *)target };
}

/* Both engines, each on its thread, until both return. */
static void run_both(struct fx *f, struct source *s)
{
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = s };
	run_start(&f->rxr);
	run_start(&f->txr);
	run_join(&f->txr);
	run_join(&f->rxr);
}

static void assert_ok_run(const struct run *u)
{
	if (u->r != 0) {
		fail_msg("%s: engine_run %d code %u: %s",
			 u->p.role == ENGINE_SENDER ? "sender" : "receiver", u->r, u->code, u->err);
	}
	assert_int_equal(u->code, PERR_OK);
	assert_string_equal(u->err, "");
}

/* A session that failed: this negative errno, this code, a reason containing why. */
static void assert_failed_run(const struct run *u, int r, uint32_t code, const char *why)
{
	if (u->r != r || u->code != code || !strstr(u->err, why)) {
		fail_msg("%s: engine_run %d code %s (%s); expected %d with %s (%s)",
			 u->p.role == ENGINE_SENDER ? "sender" : "receiver", u->r,
			 proto_err_name(u->code), u->err, r, proto_err_name(code), why);
	}
}

/* ---- a sender played by hand --------------------------------------------- */

struct raw {
	struct end *end;
	uint8_t *buf; /* one chunk of payload, then a descriptor */
	struct xport_mr *mr;
	struct msg_ring ring;
	uint64_t wr_id, seq;
	unsigned credits;
	/* Played receiver: buf is the ring (SLOTS chunks, then the descriptors). */
	bool receiver;
	unsigned data_imms;
	uint32_t data_slot[64];
	uint32_t data_lane[64]; /* the lane each came on */
};

static void raw_init(struct raw *w, struct end *e)
{
	struct xport *x = e->x;

	memset(w, 0, sizeof(*w));
	w->end = e;
	w->buf = aligned_alloc(4096, CHUNK + 4096);
	assert_non_null(w->buf);
	assert_int_equal(x->ops->reg_mr(x, w->buf, CHUNK + 4096, XPORT_ACCESS_LOCAL, &w->mr), 0);
	/* Receives for the receiver's credits, as the sender engine posts them. */
	for (unsigned l = 0; l < x->nlanes; l++) {
		for (uint32_t k = 0; k < SLOTS; k++) {
			uint64_t id = l;
			assert_int_equal(x->ops->post_recvs(x, l, &id, 1), 0);
		}
	}
}

/*
 * A receiver played by hand: a ring of SLOTS slots registered for the peer's
 * writes, receives posted for its immediates, the RING sent. It never gives a
 * credit back.
 */
static void raw_init_receiver(struct raw *w, struct end *e)
{
	struct xport *x = e->x;
	size_t len = (size_t)SLOTS * CHUNK + 4096;
	struct msg m = { .type = MSG_RING };

	memset(w, 0, sizeof(*w));
	w->end = e;
	w->receiver = true;
	w->buf = aligned_alloc(4096, len);
	assert_non_null(w->buf);
	memset(w->buf, 0, len);
	assert_int_equal(
	    x->ops->reg_mr(x, w->buf, len, XPORT_ACCESS_LOCAL | XPORT_ACCESS_REMOTE_WRITE, &w->mr),
	    0);
	for (unsigned l = 0; l < x->nlanes; l++) {
		for (uint32_t k = 0; k < SLOTS; k++) {
			uint64_t id = l;
			assert_int_equal(x->ops->post_recvs(x, l, &id, 1), 0);
		}
	}
	m.u.ring.addr = w->mr->iova;
	m.u.ring.desc_addr = w->mr->iova + (uint64_t)SLOTS * CHUNK;
	m.u.ring.slots = SLOTS;
	m.u.ring.slot_size = CHUNK;
	m.u.ring.nkeys = (uint8_t)x->nlanes;
	for (unsigned l = 0; l < x->nlanes; l++) {
		m.u.ring.rkey[l] = w->mr->lane_rkey[l];
	}
	assert_int_equal(chan_send(&e->chan, &m), 0);
}

static void raw_free(struct raw *w)
{
	if (w->end->x && w->mr) {
		w->end->x->ops->dereg_mr(w->end->x, w->mr);
	}
	free(w->buf);
}

/* Drain completions: credits counted (and their receive posted again); *done when want_id completes. */
static void raw_drain(struct raw *w, uint64_t want_id, int *done)
{
	struct xport *x = w->end->x;
	struct xport_wc wc[16];
	int n;

	while ((n = x->ops->poll_cq(x, wc, 16)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].opcode == XPORT_WC_RECV_IMM && wc[i].status == XPORT_WC_SUCCESS) {
				uint64_t id = wc[i].lane;
				if (w->receiver) {
					assert_int_equal(wc[i].imm >> PROTO_IMM_KIND_SHIFT,
							 PROTO_IMM_DATA);
					assert_true(w->data_imms < ARRAY_SIZE(w->data_slot));
					w->data_lane[w->data_imms] = wc[i].lane;
					w->data_slot[w->data_imms++] =
					    wc[i].imm & PROTO_IMM_SLOT_MASK;
				} else {
					assert_int_equal(wc[i].imm >> PROTO_IMM_KIND_SHIFT,
							 PROTO_IMM_CREDIT);
					w->credits++;
				}
				(void)x->ops->post_recvs(x, wc[i].lane, &id, 1);
			} else if (done && wc[i].opcode == XPORT_WC_WRITE &&
				   wc[i].wr_id == want_id) {
				*done = wc[i].status == XPORT_WC_SUCCESS ? 1 : -1;
			}
		}
	}
}

/* Payload data of d->len bytes into ring slot, then descriptor d with the immediate. */
static void raw_post(struct raw *w, uint32_t slot, const struct proto_desc *dp, const uint8_t *data)
{
	struct xport *x = w->end->x;
	struct proto_desc d = *dp;
	uint32_t len = d.len;
	uint8_t *desc = w->buf + CHUNK;
	int64_t deadline = now_ms() + IO_MS;
	int done = 0;

	assert_true(len <= CHUNK && slot < w->ring.slots);
	memcpy(w->buf, data, len);
	proto_desc_encode(&d, desc);
	struct xport_wr wr[2] = {
		{ .wr_id = ++w->wr_id,
		  .opcode = XPORT_OP_WRITE,
		  .mr = len ? w->mr : NULL,
		  .buf = len ? w->buf : NULL,
		  .len = len,
		  .remote_addr = w->ring.addr + (uint64_t)slot * w->ring.slot_size,
		  .rkey = w->ring.rkey[0] },
		{ .wr_id = ++w->wr_id,
		  .opcode = XPORT_OP_WRITE_IMM,
		  .flags = XPORT_SEND_SIGNALED,
		  .mr = w->mr,
		  .buf = desc,
		  .len = PROTO_DESC_LEN,
		  .imm = proto_imm(PROTO_IMM_DATA, slot),
		  .remote_addr = w->ring.desc_addr + (uint64_t)slot * PROTO_DESC_LEN,
		  .rkey = w->ring.rkey[0] },
	};
	assert_int_equal(x->ops->post_writes(x, wr, 2), 0);
	while (!done) {
		struct pollfd pfd = { .fd = x->ops->event_fd(x), .events = POLLIN };
		int64_t left = deadline - now_ms();

		raw_drain(w, w->wr_id, &done);
		if (done) {
			break;
		}
		if (left <= 0) {
			fail_msg("chunk for slot %u not placed within %d ms", slot, IO_MS);
		}
		poll(&pfd, 1, (int)left);
	}
	assert_int_equal(done, 1);
}

/* One chunk of file id into ring slot: payload, then its descriptor with the immediate. */
static void raw_chunk(struct raw *w, uint32_t slot, uint32_t id, uint64_t off, const uint8_t *data,
		      uint32_t len)
{
	struct proto_desc d = { .file_id = id, .len = len, .offset = off, .seq = ++w->seq };

	raw_post(w, slot, &d, data);
}

/*
 * A packed slot: n pieces (ids[i], lens[i] bytes of data[i]) back to back,
 * then their table; table_extra bytes of junk between the two (0: none).
 */
static void raw_pack(struct raw *w, uint32_t slot, size_t n, const uint32_t *ids,
		     const uint8_t *const *data, const uint32_t *lens, uint32_t table_extra)
{
	uint8_t *buf = malloc(CHUNK);
	struct proto_desc d = { .seq = ++w->seq, .pieces = (uint32_t)n };

	assert_non_null(buf);
	for (size_t i = 0; i < n; i++) {
		assert_true(d.len + lens[i] <= CHUNK);
		memcpy(buf + d.len, data[i], lens[i]);
		d.len += lens[i];
	}
	memset(buf + d.len, 0x5a, table_extra);
	d.len += table_extra;
	for (size_t i = 0; i < n; i++) {
		struct proto_piece pc = { .id = ids[i], .len = lens[i] };

		proto_piece_encode(&pc, buf + d.len);
		d.len += PROTO_PIECE_LEN;
	}
	raw_post(w, slot, &d, buf);
	free(buf);
}

static void raw_send(struct raw *w, const struct msg *m)
{
	assert_int_equal(chan_send(&w->end->chan, m), 0);
}

/* The next message other than PING/PONG (PINGs are left unanswered), within IO_MS. */
static void raw_next(struct raw *w, struct msg *m)
{
	int64_t deadline = now_ms() + IO_MS;

	for (;;) {
		int64_t left = deadline - now_ms();
		int r;

		if (left <= 0) {
			fail_msg("no message within %d ms", IO_MS);
		}
		raw_drain(w, 0, NULL);
		r = chan_recv(&w->end->chan, m, (int)MIN(left, 100));
		if (r == -ETIMEDOUT) {
			continue;
		}
		if (r < 0) {
			fail_msg("control channel: %s", strerror(-r));
		}
		if (m->type != MSG_PING && m->type != MSG_PONG) {
			return;
		}
		msg_clear(m);
	}
}

/* Expect a message of this type; an ERROR instead fails with its text. Caller clears m. */
static void raw_expect(struct raw *w, uint16_t type, struct msg *m)
{
	raw_next(w, m);
	if (m->type == MSG_ERROR && type != MSG_ERROR) {
		fail_msg("expected %s, got ERROR %s: %s", proto_type_name(type),
			 proto_err_name(m->u.error.code), m->u.error.text);
	}
	if (m->type != type) {
		fail_msg("expected %s, got %s", proto_type_name(type), proto_type_name(m->type));
	}
}

/* The receiver's session ended with ERROR code, its text containing why. */
static void raw_expect_error(struct raw *w, uint32_t code, const char *why)
{
	struct msg m;

	raw_expect(w, MSG_ERROR, &m);
	if (m.u.error.code != code || !strstr(m.u.error.text, why)) {
		fail_msg("ERROR %s: %s; expected %s (%s)", proto_err_name(m.u.error.code),
			 m.u.error.text, proto_err_name(code), why);
	}
	msg_clear(&m);
}

static void raw_ring(struct raw *w)
{
	struct msg m;

	raw_expect(w, MSG_RING, &m);
	assert_int_equal(m.u.ring.slots, SLOTS);
	assert_int_equal(m.u.ring.slot_size, CHUNK);
	assert_int_equal(m.u.ring.nkeys, NLANES);
	w->ring = m.u.ring;
	msg_clear(&m);
}

/* One FILES batch of regular files: ids[i] names[i] sizes[i]. */
static void raw_files(struct raw *w, size_t n, const uint32_t *ids, const char *const *names,
		      const uint64_t *sizes)
{
	struct proto_file pf[8];
	struct msg m = { .type = MSG_FILES };

	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++) {
		pf[i] = (struct proto_file){ .id = ids[i],
					     .ftype = PROTO_FT_REG,
					     .mode = 0644,
					     .size = sizes[i],
					     .name = (char *)names[i] };
	}
	m.u.files.count = (uint16_t)n;
	m.u.files.files = pf;
	raw_send(w, &m);
}

/* FILES_ACK with these statuses, in order. */
static void raw_ack(struct raw *w, size_t n, const uint32_t *ids, const uint32_t *status)
{
	struct msg m;

	raw_expect(w, MSG_FILES_ACK, &m);
	assert_int_equal(m.u.files_ack.count, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(m.u.files_ack.st[i].id, ids[i]);
		if (m.u.files_ack.st[i].status != status[i]) {
			fail_msg("FILES_ACK id %u: %s (%s), expected %s", ids[i],
				 proto_err_name(m.u.files_ack.st[i].status),
				 m.u.files_ack.st[i].text ? m.u.files_ack.st[i].text : "",
				 proto_err_name(status[i]));
		}
	}
	msg_clear(&m);
}

static void raw_done(struct raw *w, uint32_t id, uint64_t bytes, const uint8_t *data, size_t len)
{
	struct msg m = { .type = MSG_FILE_DONE };

	m.u.file_done.id = id;
	m.u.file_done.bytes = bytes;
	hash_of(data, len, m.u.file_done.hash);
	raw_send(w, &m);
}

static void raw_result(struct raw *w, uint32_t id, uint32_t status, const char *why)
{
	struct msg m;

	raw_expect(w, MSG_FILE_RESULT, &m);
	assert_int_equal(m.u.file_result.id, id);
	if (m.u.file_result.status != status || !strstr(m.u.file_result.text, why)) {
		fail_msg("FILE_RESULT %u: %s (%s), expected %s (%s)", id,
			 proto_err_name(m.u.file_result.status), m.u.file_result.text,
			 proto_err_name(status), why);
	}
	msg_clear(&m);
}

/* END from us, END back: the session completed. */
static void raw_end(struct raw *w, uint32_t files)
{
	struct msg m = { .type = MSG_END };

	m.u.end.files = files;
	raw_send(w, &m);
	raw_expect(w, MSG_END, &m);
	msg_clear(&m);
}

static void assert_stats(const struct engine_stats *st, uint64_t ok, uint64_t failed,
			 uint64_t bytes, uint32_t first_error)
{
	assert_int_equal(st->files_ok, ok);
	assert_int_equal(st->files_failed, failed);
	assert_int_equal(st->bytes, bytes);
	if (st->first_error != first_error) {
		fail_msg("first_error %s, expected %s", proto_err_name(st->first_error),
			 proto_err_name(first_error));
	}
}

/* ---- cases: two engines ----------------------------------------------------- */

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

/* A destination file of size bytes (content by seed) with this mtime. */
static void dest_file(struct fx *f, const char *name, size_t size, unsigned seed,
		      struct timespec mtime)
{
	uint8_t *buf = malloc(size ? size : 1);
	struct timespec ts[2] = { mtime, mtime };

	assert_non_null(buf);
	fill(buf, size, seed);
	write_file(f->dst, name, buf, size);
	free(buf);
	assert_int_equal(utimensat(f->dst_fd, name, ts, 0), 0);
}

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

/* ---- cases: a sender played by hand ------------------------------------- */

/* The same name twice, in one batch and in a later one: DUPLICATE each time; the first is kept. */
static void test_duplicate_names(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t data[100];
	static const uint32_t ids[] = { 1, 2 }, ok_dup[] = { PERR_OK, PERR_DUPLICATE };
	static const uint32_t id3[] = { 3 }, dup[] = { PERR_DUPLICATE };
	static const char *const names[] = { "a", "a" };
	static const uint64_t sizes[] = { sizeof(data), sizeof(data) };

	fill(data, sizeof(data), 7);
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 2, ids, names, sizes);
	raw_ack(&w, 2, ids, ok_dup);
	raw_files(&w, 1, id3, names, sizes);
	raw_ack(&w, 1, id3, dup);
	raw_chunk(&w, 0, 1, 0, data, sizeof(data));
	raw_done(&w, 1, sizeof(data), data, sizeof(data));
	raw_result(&w, 1, PERR_OK, "");
	raw_end(&w, 3);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 2, sizeof(data), PERR_DUPLICATE);
	assert_int_equal(f->rxr.ev.failed, 2);
	assert_dest(f->dst, "a");
	size_t len;
	uint8_t *got = read_file(f->dst, "a", &len);
	assert_non_null(got);
	assert_int_equal(len, sizeof(data));
	assert_memory_equal(got, data, sizeof(data));
	free(got);
	raw_free(&w);
}

/*
 * The same name again once its first entry is resolved: accepted, and it
 * replaces what the first one made. The duplicate check holds the entries in
 * flight only, so that its memory does not grow with the tree.
 */
static void test_duplicate_after_resolved(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t d1[100], d2[100];
	static const uint32_t id1[] = { 1 }, id2[] = { 2 }, ok[] = { PERR_OK };
	static const char *const names[] = { "a" };
	static const uint64_t sizes[] = { sizeof(d1) };
	uint8_t *got;
	size_t len;

	fill(d1, sizeof(d1), 7);
	fill(d2, sizeof(d2), 9);
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, id1, names, sizes);
	raw_ack(&w, 1, id1, ok);
	raw_chunk(&w, 0, 1, 0, d1, sizeof(d1));
	raw_done(&w, 1, sizeof(d1), d1, sizeof(d1));
	raw_result(&w, 1, PERR_OK, "");
	raw_files(&w, 1, id2, names, sizes);
	raw_ack(&w, 1, id2, ok);
	raw_chunk(&w, 1, 2, 0, d2, sizeof(d2));
	raw_done(&w, 2, sizeof(d2), d2, sizeof(d2));
	raw_result(&w, 2, PERR_OK, "");
	raw_end(&w, 2);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 2, 0, 2 * sizeof(d1), PERR_OK);
	assert_dest(f->dst, "a");
	got = read_file(f->dst, "a", &len);
	assert_non_null(got);
	assert_int_equal(len, sizeof(d2));
	assert_memory_equal(got, d2, sizeof(d2));
	free(got);
	raw_free(&w);
}

/* FILE_DONE whose hash is not that of the bytes sent (no test hook): INTEGRITY, nothing committed. */
static void test_file_done_wrong_hash(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t data[100], other[100];
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "h" };
	static const uint64_t sizes[] = { sizeof(data) };

	fill(data, sizeof(data), 8);
	memcpy(other, data, sizeof(other));
	other[99] ^= 1;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	raw_chunk(&w, 0, 1, 0, data, sizeof(data));
	raw_done(&w, 1, sizeof(data), other, sizeof(other));
	raw_result(&w, 1, PERR_INTEGRITY, "checksum mismatch");
	raw_end(&w, 1);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 0, 1, 0, PERR_INTEGRITY);
	assert_int_equal(f->rxr.ev.first_failed_code, PERR_INTEGRITY);
	assert_dest(f->dst, "");
	raw_free(&w);
}

/* FILES ids must strictly increase: a lower id ends the session; the open temp file goes. */
static void test_files_out_of_order(void **state)
{
	struct fx *f = *state;
	struct raw w;
	static const uint32_t id5[] = { 5 }, id4[] = { 4 }, ok[] = { PERR_OK };
	static const char *const name_x[] = { "x" }, *const name_y[] = { "y" };
	static const uint64_t sizes[] = { 2 * CHUNK };

	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, id5, name_x, sizes);
	raw_ack(&w, 1, id5, ok);
	raw_files(&w, 1, id4, name_y, sizes);
	raw_expect_error(&w, PERR_PROTOCOL, "out of order");
	run_join(&f->rxr);

	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, "id 4 out of order");
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_accepted, 2 * CHUNK);
	assert_dest(f->dst, "");
	raw_free(&w);
}

/*
 * Skip level checksum, a hostile sender: a file answered SUM_WANTED gets no
 * FILE_DONE before its answer (a protocol error), and a SUMS entry for a
 * file not asked about, or once more after the answer, is refused.
 */
static void sums_hostile(struct fx *f, int round)
{
	static const uint32_t id1[] = { 1 }, want[] = { PERR_SUM_WANTED };
	static const char *const names[] = { "a" };
	static const uint64_t sizes[] = { 100 };
	struct proto_sum ps = { .id = round == 0 ? 2 : 1 };
	struct msg m = { .type = MSG_SUMS, .u.sums = { .count = 1, .sums = &ps } };
	const char *why = round == 2 ? "FILE_DONE" : "SUMS";
	struct raw w;

	dest_file(f, "a", 100, 1, (struct timespec){ 0 });
	f->rxr.p.open_flags = PROTO_OPEN_SKIP_CHECKSUM;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, id1, names, sizes);
	raw_ack(&w, 1, id1, want);
	if (round == 0) {
		raw_send(&w, &m); /* id 2: never offered */
	} else if (round == 1) {
		static const uint32_t ok[] = { PERR_OK };

		/* Another digest (all zero): copied, the second answer for id 1 says so. */
		raw_send(&w, &m);
		raw_ack(&w, 1, id1, ok);
		raw_send(&w, &m); /* the same id again */
	} else {
		uint8_t data[100];

		fill(data, sizeof(data), 1);
		raw_done(&w, 1, sizeof(data), data, sizeof(data));
	}
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, why);
	raw_free(&w);
}

static void test_sums_unasked(void **state)
{
	sums_hostile(*state, 0);
}

static void test_sums_twice(void **state)
{
	sums_hostile(*state, 1);
}

static void test_done_before_sum_answer(void **state)
{
	sums_hostile(*state, 2);
}

/* FILE_DONE claiming more bytes than the file has: a protocol error, nothing committed. */
static void test_file_done_too_many_bytes(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t data[100];
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "f" };
	static const uint64_t sizes[] = { sizeof(data) };

	fill(data, sizeof(data), 3);
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	raw_chunk(&w, 0, 1, 0, data, sizeof(data));
	raw_done(&w, 1, 2 * sizeof(data), data, sizeof(data));
	raw_expect_error(&w, PERR_PROTOCOL, "impossible byte count");
	run_join(&f->rxr);

	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, "FILE_DONE: impossible byte count");
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	assert_dest(f->dst, "");
	raw_free(&w);
}

/* FILE_DONE with fewer bytes than announced (all of them sent): that file fails, the session goes on. */
static void test_file_done_short(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t *data = malloc(2 * CHUNK);
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "f" };
	static const uint64_t sizes[] = { 2 * CHUNK };

	assert_non_null(data);
	fill(data, 2 * CHUNK, 4);
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	raw_chunk(&w, 0, 1, 0, data, CHUNK);
	/* The hash of what was sent: only the count is wrong. */
	raw_done(&w, 1, CHUNK, data, CHUNK);
	raw_result(&w, 1, PERR_PROTOCOL, "size mismatch");
	raw_end(&w, 1);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 0, 1, 0, PERR_PROTOCOL);
	assert_int_equal(f->rxr.ev.first_failed_code, PERR_PROTOCOL);
	assert_dest(f->dst, "");
	free(data);
	raw_free(&w);
}

/* The sender dies after the first of two chunks: the receiver fails cleanly, nothing is left. */
static void test_peer_stops_mid_file(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t *data = malloc(CHUNK);
	static const uint32_t ids[] = { 1, 2 }, ok[] = { PERR_OK, PERR_OK };
	static const char *const names[] = { "done", "half" };
	static const uint64_t sizes[] = { 10, 2 * CHUNK };

	assert_non_null(data);
	fill(data, CHUNK, 5);
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 2, ids, names, sizes);
	raw_ack(&w, 2, ids, ok);
	/* One file committed before the end: it stays. */
	raw_chunk(&w, 0, 1, 0, data, 10);
	raw_done(&w, 1, 10, data, 10);
	raw_result(&w, 1, PERR_OK, "");
	raw_chunk(&w, 1, 2, 0, data, CHUNK);
	/* The lanes may still be sending from w.buf: it is freed once they are torn down. */
	f->tx.x->ops->dereg_mr(f->tx.x, w.mr);
	w.mr = NULL;
	end_close(&f->tx); /* no close_notify, lanes torn down */
	raw_free(&w);
	run_join(&f->rxr);

	/* Which goes first, the control connection or the lanes, is the kernel's choice. */
	assert_true(f->rxr.r == -EPIPE || f->rxr.r == -ECONNRESET || f->rxr.r == -EIO);
	assert_failed_run(&f->rxr, f->rxr.r, PERR_TRANSPORT, "");
	assert_stats(&f->rxr.st, 1, 0, 10, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_accepted, 10 + 2 * CHUNK);
	assert_dest(f->dst, "done");
	free(data);
}

/*
 * A sender that goes silent mid-file: TIMEOUT once idle_timeout_ms pass without
 * progress, the peer told, no temp file. One second: FILES is not progress, so
 * the time from RING to the first chunk must stay under it, even on a loaded
 * machine.
 */
#define IDLE_MS 1000
static void test_idle_timeout(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t *data = malloc(CHUNK);
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "stalled" };
	static const uint64_t sizes[] = { 2 * CHUNK };
	int64_t t0;

	assert_non_null(data);
	fill(data, CHUNK, 6);
	f->rxr.p.idle_timeout_ms = IDLE_MS;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	/* The receiver's last progress is this chunk: not before t0. */
	t0 = now_ms();
	raw_chunk(&w, 0, 1, 0, data, CHUNK);
	/* Silent from here on (PINGs unanswered); the receiver must end it. */
	raw_expect_error(&w, PERR_TIMEOUT, "idle timeout");
	assert_true(now_ms() - t0 >= IDLE_MS);
	run_join(&f->rxr);

	assert_failed_run(&f->rxr, -ETIMEDOUT, PERR_TIMEOUT, "no data progress");
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_accepted, 2 * CHUNK);
	assert_dest(f->dst, "");
	free(data);
	raw_free(&w);
}

/* ---- cases: a receiver played by hand -------------------------------------- */

/* The receiver refuses the session before its ring: the sender ends with the peer's code. */
static void test_sender_peer_error(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct msg m = { .type = MSG_ERROR };

	source_file(f, &s, "a", 10);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	run_start(&f->txr);
	m.u.error.code = PERR_NOSPACE;
	snprintf(m.u.error.text, sizeof(m.u.error.text), "disk full");
	assert_int_equal(chan_send(&f->rx.chan, &m), 0);
	run_join(&f->txr);

	assert_failed_run(&f->txr, -EREMOTEIO, PERR_NOSPACE, "peer: disk full");
	assert_stats(&f->txr.st, 0, 0, 0, PERR_OK);
	assert_no_fd_beneath(f->src);
}

/*
 * A receiver played by hand: DELETED between the sender's END and its own is
 * heard (each removal an event, a failure counted); the same message before
 * the sender's END is a protocol error.
 */
static void test_sender_deleted(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	struct proto_status st = { .status = PERR_OK, .text = (char *)"" };
	struct proto_deleted d[] = {
		{ .what = PROTO_DEL_DELETED, .name = (char *)"t/old", .text = (char *)"" },
		{ .what = PROTO_DEL_WITHHELD, .name = (char *)"t/older", .text = (char *)"" },
		{ .what = PROTO_DEL_FAILED,
		  .code = PERR_PERMISSION,
		  .name = (char *)"t/busy",
		  .text = (char *)"unlink: Operation not permitted" },
	};

	source_dir(f, &s, "t");
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.peer_caps = PROTO_CAP_DELETE;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	st.id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
	raw_send(&w, &m);
	raw_expect(&w, MSG_END, &m);
	msg_clear(&m);
	m = (struct msg){ .type = MSG_DELETED, .u.deleted = { .count = 3, .ents = d } };
	raw_send(&w, &m);
	m = (struct msg){ .type = MSG_DELETED }; /* a keepalive */
	raw_send(&w, &m);
	m = (struct msg){ .type = MSG_END };
	raw_send(&w, &m);
	run_join(&f->txr);
	raw_free(&w);

	assert_ok_run(&f->txr);
	assert_int_equal(f->txr.st.files_deleted, 1);
	assert_int_equal(f->txr.st.delete_withheld, 1);
	assert_int_equal(f->txr.st.files_failed, 1);
	assert_int_equal(f->txr.ev.failed, 1);
	assert_int_equal(f->txr.ev.first_failed_code, PERR_PERMISSION);
	assert_false(f->txr.ev.first_failed_local);
}

static void test_sender_deleted_early(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;

	source_dir(f, &s, "t");
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.peer_caps = PROTO_CAP_DELETE;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	msg_clear(&m);
	m = (struct msg){ .type = MSG_DELETED, .u.deleted.flags = PROTO_DELETED_SUPPRESSED };
	raw_send(&w, &m);
	raw_expect_error(&w, PERR_PROTOCOL, "unexpected DELETED");
	run_join(&f->txr);
	raw_free(&w);

	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, "unexpected DELETED");
	assert_false(f->txr.st.delete_suppressed);
}

/* A ring that is not the one agreed: the sender refuses it and says why. */
static void test_sender_bad_ring(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct msg m = { .type = MSG_RING }, got;
	struct raw w = { .end = &f->rx };

	source_file(f, &s, "a", 10);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	run_start(&f->txr);
	m.u.ring.slots = SLOTS + 1;
	m.u.ring.slot_size = CHUNK;
	m.u.ring.nkeys = NLANES;
	assert_int_equal(chan_send(&f->rx.chan, &m), 0);
	raw_next(&w, &got);
	assert_int_equal(got.type, MSG_ERROR);
	assert_int_equal(got.u.error.code, PERR_PROTOCOL);
	assert_non_null(strstr(got.u.error.text, "bad RING"));
	msg_clear(&got);
	run_join(&f->txr);

	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, "bad RING");
	assert_stats(&f->txr.st, 0, 0, 0, PERR_OK);
}

/*
 * A receiver that takes the first chunks and never gives a credit back: the
 * sender fills every slot with the right bytes, then stalls, and ends the
 * session with TIMEOUT after idle_timeout_ms.
 */
static void test_sender_no_credits(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	struct proto_status st = { .status = PERR_OK, .text = (char *)"" };
	size_t size = 6 * CHUNK, len;
	uint8_t *src;
	int64_t deadline;

	source_file(f, &s, "big", size);
	src = read_file(f->src, "big", &len);
	assert_non_null(src);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.idle_timeout_ms = IDLE_MS;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	assert_int_equal(m.u.files.count, 1);
	assert_string_equal(m.u.files.files[0].name, "big");
	assert_int_equal(m.u.files.files[0].size, size);
	st.id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_FILES_ACK };
	m.u.files_ack.count = 1;
	m.u.files_ack.st = &st;
	raw_send(&w, &m);
	/* Every slot written once, each holding the chunk its descriptor names. */
	deadline = now_ms() + IO_MS;
	while (w.data_imms < SLOTS) {
		struct pollfd pfd = { .fd = f->rx.x->ops->event_fd(f->rx.x), .events = POLLIN };

		if (now_ms() > deadline) {
			fail_msg("%u of %u slots written within %d ms", w.data_imms, SLOTS, IO_MS);
		}
		raw_drain(&w, 0, NULL);
		poll(&pfd, 1, 100);
	}
	for (unsigned i = 0; i < SLOTS; i++) {
		uint32_t slot = w.data_slot[i];
		struct proto_desc d;

		assert_true(slot < SLOTS);
		assert_int_equal(
		    proto_desc_decode(w.buf + (size_t)SLOTS * CHUNK + (size_t)slot * PROTO_DESC_LEN,
				      &d),
		    0);
		assert_int_equal(d.file_id, st.id);
		assert_int_equal(d.len, CHUNK);
		assert_int_equal(d.offset % CHUNK, 0);
		assert_true(d.offset < size);
		assert_memory_equal(w.buf + (size_t)slot * CHUNK, src + d.offset, CHUNK);
	}
	raw_expect_error(&w, PERR_TIMEOUT, "idle timeout");
	run_join(&f->txr);
	/* No slot was written twice: without credits there is nowhere else to go. */
	assert_int_equal(w.data_imms, SLOTS);

	assert_failed_run(&f->txr, -ETIMEDOUT, PERR_TIMEOUT, "no data progress");
	assert_stats(&f->txr.st, 0, 0, 0, PERR_OK);
	assert_no_fd_beneath(f->src);
	free(src);
	raw_free(&w);
}

/* A source of n empty regular files, f00000 onwards, made in the source directory. */
struct gen_source {
	struct engine_src cur;
	char name[PROTO_MAX_PATH + 1];
	size_t n, next;
	size_t name_len; /* 0: short names, f00000...; else names this long */
};

static int gen_next(void *ud, const struct engine_src **ret, char *why, size_t whylen)
{
	struct gen_source *g = ud;

	(void)why, (void)whylen;
	if (g->next == g->n) {
		return 0;
	}
	if (g->name_len) {
		/* Components of 200 bytes; no such file: each fails when it is opened. */
		for (size_t i = 0; i < g->name_len; i++) {
			g->name[i] = i % 201 == 200 ? '/' : 'n';
		}
		snprintf(g->name + g->name_len - 6, 7, "%06zu", g->next++);
	} else {
		snprintf(g->name, sizeof(g->name), "f%05zu", g->next++);
	}
	g->cur.name = g->cur.path = g->name; /* the engine copies both */
	*ret = &g->cur;
	return 1;
}

/* n empty files in the source directory, named as gen_next names them. */
static void make_empty_files(struct fx *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char name[32];
		int fd;

		snprintf(name, sizeof(name), "f%05zu", i);
		fd = openat(f->src_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		close(fd);
	}
}

/*
 * g's files offered to a raw receiver that resolves none of them: it accepts
 * every file, or with refuse_rest the first only, refusing the others (which
 * resolves those at once). Runs until the sender gives up at the idle
 * timeout; returns the last id offered, in *ret_offered how many, and in
 * *ret_before_done how many had been offered when the first FILE_DONE came.
 */
static uint32_t offer_unresolved(struct fx *f, struct gen_source *g, uint64_t caps,
				 bool refuse_rest, uint32_t *ret_offered, uint32_t *ret_before_done)
{
	struct raw w;
	uint32_t offered = 0, last = 0, before_done = 0;

	g->cur = (struct engine_src){ .dirfd = f->src_fd, .ftype = PROTO_FT_REG, .mode = 0644 };
	f->txr.p.source = (struct engine_source){ .next = gen_next, .ud = g };
	f->txr.p.peer_caps = caps;
	f->txr.p.idle_timeout_ms = IDLE_MS;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	for (;;) {
		struct msg m;

		raw_next(&w, &m);
		if (m.type == MSG_ERROR) {
			assert_int_equal(m.u.error.code, PERR_TIMEOUT);
			msg_clear(&m);
			break;
		}
		if (m.type == MSG_FILES) {
			struct proto_status st[PROTO_MAX_BATCH];
			struct msg a = { .type = MSG_FILES_ACK };

			for (size_t i = 0; i < m.u.files.count; i++) {
				/* Ids strictly increase from 1. */
				assert_int_equal(m.u.files.files[i].id, last + 1);
				last = m.u.files.files[i].id;
				if (g->name_len) {
					assert_int_equal(strlen(m.u.files.files[i].name),
							 g->name_len);
				}
				st[i] = (struct proto_status){ .id = last,
							       .status = refuse_rest && last != 1
									     ? PERR_PERMISSION
									     : PERR_OK,
							       .text = (char *)"" };
			}
			offered += m.u.files.count;
			a.u.files_ack.count = m.u.files.count;
			a.u.files_ack.st = st;
			raw_send(&w, &a);
		} else {
			/* An empty file is done at once, a missing one fails at its open. */
			assert_int_equal(m.type, MSG_FILE_DONE);
			before_done = before_done ? before_done : offered;
			if (refuse_rest) {
				assert_int_equal(m.u.file_done.id, 1);
			}
		}
		msg_clear(&m);
	}
	run_join(&f->txr);
	assert_failed_run(&f->txr, -ETIMEDOUT, PERR_TIMEOUT, "");
	raw_free(&w);
	if (ret_offered) {
		*ret_offered = offered;
	}
	if (ret_before_done) {
		*ret_before_done = before_done;
	}
	return last;
}

/*
 * The file window: a receiver that accepts every file and resolves none.
 * The sender offers exactly as many as the receiver announced it holds
 * (PROTO_CAP_WIDER_WINDOW: PROTO_FILES_WIDER; PROTO_CAP_WIDE_WINDOW:
 * PROTO_FILES_WIDE; else PROTO_FILES_NARROW, what a receiver with the old
 * 1,024-entry table takes), then waits; no more come until it gives up at
 * the idle timeout.
 */
static void files_window(void **state, uint64_t caps, uint32_t want)
{
	struct fx *f = *state;
	struct gen_source g = { .n = want + 200 };
	uint32_t offered;

	make_empty_files(f, g.n);
	offer_unresolved(f, &g, caps, false, &offered, NULL);
	assert_int_equal(offered, want);
}

static void test_window_narrow(void **state)
{
	files_window(state, 0, PROTO_FILES_NARROW);
}

static void test_window_wide(void **state)
{
	files_window(state, PROTO_CAP_WIDE_WINDOW, PROTO_FILES_WIDE);
}

static void test_window_wider(void **state)
{
	files_window(state, PROTO_CAP_WIDE_WINDOW | PROTO_CAP_WIDER_WINDOW, PROTO_FILES_WIDER);
}

/*
 * The sender reads while it offers: one FILES batch per loop turn, so the
 * first accepted file is read and done (empty files: FILE_DONE at once)
 * long before the wider window is full. A sender that offered the whole
 * window before reading (6,144 stats of its walk) sends no FILE_DONE until
 * all 6,144 are offered.
 */
static void test_offer_interleaved(void **state)
{
	struct fx *f = *state;
	struct gen_source g = { .n = PROTO_FILES_WIDER + 200 };
	uint32_t offered, before_done;

	make_empty_files(f, g.n);
	offer_unresolved(f, &g, PROTO_CAP_WIDE_WINDOW | PROTO_CAP_WIDER_WINDOW, false, &offered,
			 &before_done);
	assert_int_equal(offered, PROTO_FILES_WIDER);
	assert_true(before_done > 0);
	assert_true(before_done < PROTO_FILES_WIDER);
	printf("offered before the first FILE_DONE: %u of %u\n", before_done, offered);
}

/*
 * Long names: a receiver with the wider window that accepts every file and
 * resolves none. The sender stops offering once its files' names and source
 * paths take ENGINE_NAMES_IN_FLIGHT_MAX bytes, well before the window.
 */
static void test_window_long_names(void **state)
{
	struct fx *f = *state;
	const size_t len = 4000, per = 2 * (len + 1);
	const uint32_t want = (uint32_t)((ENGINE_NAMES_IN_FLIGHT_MAX + per - 1) / per);
	struct gen_source *g = calloc(1, sizeof(*g));
	uint32_t offered;

	assert_non_null(g);
	assert_true(want < PROTO_FILES_WIDER);
	g->n = want + 100;
	g->name_len = len;
	offer_unresolved(f, g, PROTO_CAP_WIDE_WINDOW | PROTO_CAP_WIDER_WINDOW, false, &offered,
			 NULL);
	assert_int_equal(offered, want);
	free(g);
}

/*
 * The span of ids: a receiver that accepts the first file, never resolves
 * it, and refuses every other (resolved at once). The sender offers ids up
 * to the first plus the receiver's span less one (a receiver with a smaller
 * table than ours takes a file by its id modulo its own table), then no
 * more until it gives up at the idle timeout.
 */
static void files_span(void **state, uint64_t caps, uint32_t span)
{
	struct fx *f = *state;
	struct gen_source g = { .n = span + 200 };

	make_empty_files(f, g.n);
	assert_int_equal(offer_unresolved(f, &g, caps, true, NULL, NULL), span);
}

static void test_span_narrow(void **state)
{
	files_span(state, 0, PROTO_SPAN_NARROW);
}

static void test_span_wide(void **state)
{
	files_span(state, PROTO_CAP_WIDE_WINDOW, PROTO_SPAN_WIDE);
}

static void test_span_wider(void **state)
{
	files_span(state, PROTO_CAP_WIDE_WINDOW | PROTO_CAP_WIDER_WINDOW, PROTO_SPAN_WIDER);
}

/*
 * Skip level checksum: a receiver that answers SUM_WANTED and then never
 * decides. The sender sends its digest, then waits beyond the idle timeout
 * for as long as the receiver could take to read the file at 50 MB/s, then
 * fails with TIMEOUT all the same.
 */
static void test_sum_answer_never_comes(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	struct proto_status st = { .status = PERR_SUM_WANTED, .text = (char *)"" };
	size_t size = 50u << 20; /* 1 s at 50 MB/s */
	int64_t t0;

	source_file(f, &s, "big", size);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.idle_timeout_ms = IDLE_MS;
	f->txr.p.peer_caps = PROTO_CAP_SKIP | PROTO_CAP_CHECK;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	st.id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
	raw_send(&w, &m);
	t0 = now_ms();
	raw_expect(&w, MSG_SUMS, &m);
	assert_int_equal(m.u.sums.count, 1);
	assert_int_equal(m.u.sums.sums[0].id, st.id);
	assert_int_equal(m.u.sums.sums[0].status, PERR_OK);
	msg_clear(&m);
	raw_expect_error(&w, PERR_TIMEOUT, "idle timeout");
	assert_true(now_ms() - t0 >= IDLE_MS + 900);
	run_join(&f->txr);
	assert_failed_run(&f->txr, -ETIMEDOUT, PERR_TIMEOUT, "no data progress");
	assert_no_fd_beneath(f->src);
	raw_free(&w);
}

/* ---- cases: --partial ------------------------------------------------------ */

#define PART_SIZE (5 * CHUNK + 17)

struct prange {
	uint64_t off, len;
};

static void put_be(uint8_t **p, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++) {
		(*p)[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
	}
	*p += bytes;
}

/*
 * A partial as a cut run leaves it (the format of docs/ARCHITECTURE.md):
 * dst/.rdmacp-partial/<hex xxh128 of leaf>.data holding data, and .jnl with
 * the header (magic "RDPT", version 1, size, mtime, leaf) and a record
 * (offset, len, XXH3-128 of those bytes of data) per range.
 */
static void make_partial(struct fx *f, const char *leaf, const uint8_t *data, size_t size,
			 int64_t mtime_sec, const struct prange *r, size_t n)
{
	char *store = path_in(f->dst, ENGINE_PARTIAL_DIR), dname[64], jname[64], hex[33];
	uint8_t h[HASH_LEN], jnl[512], *p = jnl;
	XXH128_canonical_t c;

	assert_int_equal(mkdir(store, 0700), 0);
	XXH128_canonicalFromHash(&c, XXH3_128bits(leaf, strlen(leaf)));
	memcpy(h, c.digest, HASH_LEN);
	hash_to_hex(h, hex);
	snprintf(dname, sizeof(dname), "%s.data", hex);
	snprintf(jname, sizeof(jname), "%s.jnl", hex);
	write_file(store, dname, data, size);
	put_be(&p, 0x52445054u, 4);
	put_be(&p, 1, 4);
	put_be(&p, size, 8);
	put_be(&p, (uint64_t)mtime_sec, 8);
	put_be(&p, 0, 4);
	put_be(&p, strlen(leaf), 2);
	memcpy(p, leaf, strlen(leaf));
	p += strlen(leaf);
	for (size_t i = 0; i < n; i++) {
		assert_true((size_t)(p - jnl) + 32 <= sizeof(jnl));
		put_be(&p, r[i].off, 8);
		put_be(&p, r[i].len, 8);
		/* The digest of the source's bytes: what the receiver wrote there. */
		XXH128_canonicalFromHash(&c, XXH3_128bits(data + r[i].off, r[i].len));
		memcpy(p, c.digest, HASH_LEN);
		p += HASH_LEN;
	}
	write_file(store, jname, jnl, (size_t)(p - jnl));
	free(store);
}

/*
 * A --partial transfer of PART_SIZE bytes over the partial make_partial
 * leaves with these ranges (flip: a byte of the data file changed at that
 * offset, unless negative); kept bytes must be kept, the rest sent, and the
 * file committed whole and right, the store gone.
 */
static void resume_case(void **state, int64_t mtime_sec, const struct prange *r, size_t n,
			int64_t flip, uint64_t kept, unsigned faults)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint8_t *src, *part;
	size_t len;

	source_file(f, &s, "big", PART_SIZE);
	src = read_file(f->src, "big", &len);
	assert_non_null(src);
	part = malloc(len);
	assert_non_null(part);
	memcpy(part, src, len);
	make_partial(f, "big", part, len, mtime_sec, r, n);
	if (flip >= 0) {
		char *store = path_in(f->dst, ENGINE_PARTIAL_DIR);
		DIR *d = opendir(store);
		struct dirent *de;

		part[flip] ^= 0x40;
		while ((de = readdir(d))) {
			if (strstr(de->d_name, ".data")) {
				write_file(store, de->d_name, part, len);
			}
		}
		closedir(d);
		free(store);
	}
	f->rxr.p.open_flags = PROTO_OPEN_PARTIAL;
	f->rxr.p.faults = faults;
	f->rxr.p.peer_caps = PROTO_CAP_PARTIAL;
	f->txr.p.peer_caps = PROTO_CAP_PARTIAL;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, PART_SIZE - kept, PERR_OK);
	assert_stats(&f->txr.st, 1, 0, PART_SIZE - kept, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_resumed, kept);
	assert_int_equal(f->txr.st.bytes_resumed, kept);
	assert_int_equal(f->txr.st.files_resumed, kept ? 1 : 0);
	assert_int_equal(f->txr.ev.ok_bytes, PART_SIZE - kept);
	assert_same_file(f->src, f->dst, "big");
	assert_dest(f->dst, "big");
	free(src);
	free(part);
}

/* Chunks 0-3 and 5 journaled (4 missing): the first four kept, the rest sent. */
static void test_partial_resume(void **state)
{
	const struct prange r[] = { { 0, CHUNK },
				    { 2 * CHUNK, CHUNK },
				    { CHUNK, CHUNK },
				    { 3 * CHUNK, CHUNK },
				    { 5 * CHUNK, 17 } };

	resume_case(state, 0, r, ARRAY_SIZE(r), -1, 4 * CHUNK, 0);
}

/* Everything journaled: nothing sent, the file still verified whole. */
static void test_partial_complete(void **state)
{
	const struct prange r[] = { { 0, 3 * CHUNK }, { 3 * CHUNK, 2 * CHUNK + 17 } };

	resume_case(state, 0, r, ARRAY_SIZE(r), -1, PART_SIZE, 0);
}

/* A byte flipped in chunk 2 of the kept data: kept up to it, the rest re-sent. */
static void test_partial_flipped(void **state)
{
	const struct prange r[] = {
		{ 0, CHUNK }, { CHUNK, CHUNK }, { 2 * CHUNK, CHUNK }, { 3 * CHUNK, CHUNK }
	};

	resume_case(state, 0, r, ARRAY_SIZE(r), 2 * CHUNK + 100, 2 * CHUNK, 0);
}

/* Records of another chunk size: kept in whole chunks of this session's. */
static void test_partial_other_chunks(void **state)
{
	const struct prange r[] = { { 0, CHUNK / 2 },
				    { CHUNK / 2, CHUNK / 2 },
				    { CHUNK, CHUNK / 2 },
				    { 3 * CHUNK / 2, CHUNK / 4 } };

	resume_case(state, 0, r, ARRAY_SIZE(r), -1, CHUNK, 0);
}

/* No time left to re-read kept data (the peer would time out): nothing kept, all sent. */
static void test_partial_no_time(void **state)
{
	const struct prange r[] = { { 0, CHUNK }, { CHUNK, CHUNK } };

	resume_case(state, 0, r, ARRAY_SIZE(r), -1, 0, ENGINE_FAULT_NO_VERIFY_TIME);
}

/* Another source (its mtime), overlapping records, a record past the size: all sent. */
static void test_partial_discarded(void **state)
{
	const struct prange r[] = { { 0, CHUNK }, { CHUNK, CHUNK } };

	resume_case(state, 1, r, ARRAY_SIZE(r), -1, 0, 0);
}

static void test_partial_overlap(void **state)
{
	const struct prange r[] = { { 0, CHUNK }, { CHUNK, CHUNK }, { CHUNK / 2, CHUNK } };

	resume_case(state, 0, r, ARRAY_SIZE(r), -1, 0, 0);
}

static void test_partial_past_size(void **state)
{
	const struct prange r[] = { { 0, CHUNK }, { PART_SIZE - 10, 20 } };

	resume_case(state, 0, r, ARRAY_SIZE(r), -1, 0, 0);
}

/* A name in a partial store, from a peer: refused (BAD_PATH), nothing written there. */
static void test_partial_store_name_refused(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint64_t bytes = source_file(f, &s, "ok", 3000);

	source_dir(f, &s, ENGINE_PARTIAL_DIR);
	source_file(f, &s, ENGINE_PARTIAL_DIR "/x.data", 2000);

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 2, bytes, PERR_BAD_PATH);
	assert_dest(f->dst, "ok");
}

/*
 * A receiver's RESUME the sender must refuse: one from a peer that did not
 * say it knows RESUME, or ranges that are not whole chunks of the file.
 */
static void resume_refused(void **state, bool cap, struct proto_range g, const char *why)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	uint32_t id;

	source_file(f, &s, "big", PART_SIZE);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.peer_caps = cap ? PROTO_CAP_PARTIAL : 0;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_RESUME };
	m.u.resume.id = id;
	m.u.resume.count = 1;
	m.u.resume.r[0] = g;
	raw_send(&w, &m);
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->txr);

	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, why);
	assert_stats(&f->txr.st, 0, 0, 0, PERR_OK);
	raw_free(&w);
}

static void test_resume_without_cap(void **state)
{
	resume_refused(state, false, (struct proto_range){ 0, CHUNK }, "out of place");
}

static void test_resume_not_chunks(void **state)
{
	resume_refused(state, true, (struct proto_range){ 0, CHUNK / 2 }, "not whole chunks");
}

static void test_resume_past_size(void **state)
{
	resume_refused(state, true, (struct proto_range){ 5 * CHUNK, CHUNK }, "not whole chunks");
}

/* ---- cases: --delta (DELTA) ------------------------------------------------ */

#define DELTA_SIZE (3 * (uint64_t)CHUNK + 10)

static void raw_same(struct raw *w, uint32_t id, uint64_t off, uint64_t len)
{
	struct msg m = { .type = MSG_DELTA };

	m.u.delta.id = id;
	m.u.delta.kind = PROTO_DELTA_SAME;
	m.u.delta.count = 1;
	m.u.delta.r[0] = (struct proto_range){ .offset = off, .len = len };
	raw_send(w, &m);
}

/*
 * A hand-played sender to a --delta receiver that has the file, one chunk
 * of it changed since: the receiver's SUMS are the old file's chunks; the
 * unchanged chunks go as SAME, the changed one as data; the file is
 * replaced by the new contents, verified, and the stats say what crossed.
 */
static void test_delta_by_hand(void **state)
{
	struct fx *f = *state;
	struct raw w;
	struct msg m;
	uint8_t *old = malloc(DELTA_SIZE), *now = malloc(DELTA_SIZE), h[HASH_LEN];
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "d" };
	static const uint64_t sizes[] = { DELTA_SIZE };
	size_t got;
	uint8_t *out;

	assert_non_null(old);
	assert_non_null(now);
	fill(old, DELTA_SIZE, 3);
	memcpy(now, old, DELTA_SIZE);
	fill(now + CHUNK, CHUNK, 4);
	write_file(f->dst, "d", old, DELTA_SIZE);
	f->rxr.p.peer_caps = PROTO_CAP_DELTA;
	f->rxr.p.open_flags = PROTO_OPEN_DELTA;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_expect(&w, MSG_DELTA, &m);
	assert_int_equal(m.u.delta.id, 1);
	assert_int_equal(m.u.delta.kind, PROTO_DELTA_SUMS);
	assert_true(m.u.delta.first == 0);
	assert_int_equal(m.u.delta.count, 4);
	for (uint64_t i = 0; i < 4; i++) {
		hash_of(old + i * CHUNK, MIN((uint64_t)CHUNK, DELTA_SIZE - i * CHUNK), h);
		assert_memory_equal(m.u.delta.sums[i], h, HASH_LEN);
	}
	raw_ack(&w, 1, ids, ok);
	raw_same(&w, 1, 0, CHUNK);
	raw_chunk(&w, 0, 1, CHUNK, now + CHUNK, CHUNK);
	raw_same(&w, 1, 2 * CHUNK, CHUNK + 10);
	raw_done(&w, 1, CHUNK, now, DELTA_SIZE);
	raw_result(&w, 1, PERR_OK, "");
	raw_end(&w, 1);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, CHUNK, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_unchanged, 2 * CHUNK + 10);
	out = read_file(f->dst, "d", &got);
	assert_int_equal(got, DELTA_SIZE);
	assert_memory_equal(out, now, DELTA_SIZE);
	free(out);
	free(old);
	free(now);
	raw_free(&w);
}

/* Both engines: 1 chunk of 4 changed crosses, the rest is taken from the old file. */
static void test_delta_transfer(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint8_t *old;
	size_t got;
	uint8_t *now, *out;

	source_file(f, &s, "d", DELTA_SIZE);
	now = read_file(f->src, "d", &got);
	assert_int_equal(got, DELTA_SIZE);
	old = malloc(DELTA_SIZE);
	assert_non_null(old);
	memcpy(old, now, DELTA_SIZE);
	fill(old + 2 * CHUNK, 100, 8);
	write_file(f->dst, "d", old, DELTA_SIZE);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_DELTA;
	f->txr.p.open_flags = f->rxr.p.open_flags = PROTO_OPEN_DELTA;
	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, CHUNK, PERR_OK);
	assert_stats(&f->txr.st, 1, 0, CHUNK, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_unchanged, 2 * CHUNK + 10);
	assert_int_equal(f->txr.st.bytes_unchanged, 2 * CHUNK + 10);
	out = read_file(f->dst, "d", &got);
	assert_int_equal(got, DELTA_SIZE);
	assert_memory_equal(out, now, DELTA_SIZE);
	free(out);
	free(now);
	free(old);
}

/* A SAME the receiver refuses: the session ends PROTOCOL, nothing committed. */
static void same_refused(void **state, bool have_old, uint64_t caps, uint64_t off, uint64_t len,
			 const char *why)
{
	struct fx *f = *state;
	struct raw w;
	struct msg m;
	uint8_t *old = malloc(DELTA_SIZE);
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "d" };
	static const uint64_t sizes[] = { DELTA_SIZE };

	assert_non_null(old);
	fill(old, DELTA_SIZE, 3);
	if (have_old) {
		write_file(f->dst, "d", old, DELTA_SIZE);
	}
	f->rxr.p.peer_caps = caps;
	f->rxr.p.open_flags = PROTO_OPEN_DELTA;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	if (have_old && caps) {
		raw_expect(&w, MSG_DELTA, &m);
		msg_clear(&m);
	}
	raw_ack(&w, 1, ids, ok);
	raw_same(&w, 1, off, len);
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, why);
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	free(old);
	raw_free(&w);
}

static void test_delta_same_refused(void **state)
{
	/* No old file (no SUMS were sent); a peer without DELTA. */
	same_refused(state, false, PROTO_CAP_DELTA, 0, CHUNK, "out of place");
	fx_teardown(state);
	fx_setup(state);
	same_refused(state, true, 0, 0, CHUNK, "out of place");
	fx_teardown(state);
	fx_setup(state);
	/* Not whole chunks, past the end. */
	same_refused(state, true, PROTO_CAP_DELTA, 0, CHUNK / 2, "not whole chunks");
	fx_teardown(state);
	fx_setup(state);
	same_refused(state, true, PROTO_CAP_DELTA, 3 * CHUNK, CHUNK, "not whole chunks");
	fx_teardown(state);
	fx_setup(state);
	same_refused(state, true, PROTO_CAP_DELTA, 100, CHUNK, "not whole chunks");
}

/* SUMS the sender refuses: out of order, more than the file's chunks, from a peer without DELTA. */
static void sums_refused(void **state, uint64_t caps, uint64_t first, uint16_t count,
			 const char *why)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	uint32_t id;

	source_file(f, &s, "d", DELTA_SIZE);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.peer_caps = caps;
	f->txr.p.open_flags = PROTO_OPEN_DELTA;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_DELTA };
	m.u.delta.id = id;
	m.u.delta.kind = PROTO_DELTA_SUMS;
	m.u.delta.first = first;
	m.u.delta.count = count;
	raw_send(&w, &m);
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->txr);
	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, why);
	assert_stats(&f->txr.st, 0, 0, 0, PERR_OK);
	raw_free(&w);
}

static void test_delta_sums_refused(void **state)
{
	sums_refused(state, 0, 0, 1, "out of place");
	fx_teardown(state);
	fx_setup(state);
	sums_refused(state, PROTO_CAP_DELTA, 1, 1, "out of place");
	fx_teardown(state);
	fx_setup(state);
	sums_refused(state, PROTO_CAP_DELTA, 0, 5, "the file has 4");
}

/* ---- cases: zero extents (ZEROS) ----------------------------------------- */

/* Where data starts at or after off (SEEK_DATA), or the size when none does. */
static uint64_t data_at(int dirfd, const char *name, uint64_t off)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	struct stat st;
	off_t d;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	d = lseek(fd, (off_t)off, SEEK_DATA);
	close(fd);
	return d < 0 ? (uint64_t)st.st_size : (uint64_t)d;
}

static uint64_t hole_at(int dirfd, const char *name, uint64_t off)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	off_t h;

	assert_true(fd >= 0);
	h = lseek(fd, (off_t)off, SEEK_HOLE);
	close(fd);
	assert_true(h >= 0);
	return (uint64_t)h;
}

/*
 * A sparse file of 10 chunks and a tail: holes at [0, 2), [3, 6) and from 8
 * to the end, data in chunks 2 and 7, and chunk 6 written with zeros. Both
 * ends announce ZEROS: only chunks 2 and 7 cross, the rest is described,
 * the copy is byte-identical and its holes are where the source has holes
 * or zeros.
 */
static void test_zeros_transfer(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	const uint64_t size = 10 * (uint64_t)CHUNK + 123;
	uint8_t *data = malloc(CHUNK);
	char *path = path_in(f->src, "sparse");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_non_null(data);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	fill(data, CHUNK, 7);
	assert_int_equal(pwrite(fd, data, CHUNK, 2 * CHUNK), CHUNK);
	assert_int_equal(pwrite(fd, data, CHUNK, 7 * CHUNK), CHUNK);
	memset(data, 0, CHUNK);
	assert_int_equal(pwrite(fd, data, CHUNK, 6 * CHUNK), CHUNK);
	close(fd);
	s.e[s.n++] = (struct engine_src){ .name = (char *)"sparse",
					  .path = (char *)"sparse",
					  .dirfd = f->src_fd,
					  .ftype = PROTO_FT_REG,
					  .mode = 0644,
					  .size = size };
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_ZEROS;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, 2 * CHUNK, PERR_OK);
	assert_stats(&f->txr.st, 1, 0, 2 * CHUNK, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_zero, size - 2 * CHUNK);
	assert_int_equal(f->txr.st.bytes_zero, size - 2 * CHUNK);
	assert_int_equal(f->rxr.ev.ok_bytes, 2 * CHUNK);
	assert_same_file(f->src, f->dst, "sparse");
	/* Where the file system has holes, the copy has them too (chunk 6 included). */
	if (data_at(f->src_fd, "sparse", 0) == 2 * CHUNK) {
		assert_int_equal(data_at(f->dst_fd, "sparse", 0), 2 * CHUNK);
		assert_int_equal(hole_at(f->dst_fd, "sparse", 2 * CHUNK), 3 * CHUNK);
		assert_int_equal(data_at(f->dst_fd, "sparse", 3 * CHUNK), 7 * CHUNK);
		assert_int_equal(hole_at(f->dst_fd, "sparse", 7 * CHUNK), 8 * CHUNK);
		assert_int_equal(data_at(f->dst_fd, "sparse", 8 * CHUNK), size);
	}
	free(data);
	free(path);
}

/* The same file to a receiver without ZEROS: all of it crosses, nothing is described. */
static void test_zeros_without_cap(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	uint64_t size = source_file(f, &s, "dense", 3 * CHUNK);
	char *path = path_in(f->src, "dense");
	int fd = open(path, O_RDWR | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0); /* all a hole now */
	close(fd);
	f->txr.p.peer_caps = 0;
	f->rxr.p.peer_caps = PROTO_CAP_ZEROS;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, size, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_zero, 0);
	assert_same_file(f->src, f->dst, "dense");
	free(path);
}

/*
 * A chunk and a ZEROS over it travel on different connections: which the
 * receiver takes first is not ours to say (a sleep makes one order likely).
 * Either way the session ends PROTOCOL, with one of the two reasons.
 */
static void raw_expect_either(struct raw *w, struct run *u, const char *why1, const char *why2)
{
	struct msg m;
	const char *why;

	raw_expect(w, MSG_ERROR, &m);
	why = strstr(m.u.error.text, why1) ? why1 : why2;
	if (m.u.error.code != PERR_PROTOCOL || !strstr(m.u.error.text, why)) {
		fail_msg("ERROR %s: %s; expected PROTOCOL (%s or %s)",
			 proto_err_name(m.u.error.code), m.u.error.text, why1, why2);
	}
	msg_clear(&m);
	run_join(u);
	assert_failed_run(u, -EBADMSG, PERR_PROTOCOL, why);
}

static void raw_zeros(struct raw *w, uint32_t id, uint64_t off, uint64_t len)
{
	struct msg m = { .type = MSG_ZEROS };

	m.u.zeros.id = id;
	m.u.zeros.count = 1;
	m.u.zeros.r[0] = (struct proto_range){ .offset = off, .len = len };
	raw_send(w, &m);
}

/* A hand-played sender: zeros, a chunk, zeros to the short end; verified and committed. */
static void test_zeros_by_hand(void **state)
{
	struct fx *f = *state;
	struct raw w;
	const uint64_t size = 3 * (uint64_t)CHUNK + 10;
	uint8_t *whole = calloc(1, size);
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "z" };
	const uint64_t sizes[] = { size };

	assert_non_null(whole);
	fill(whole + CHUNK, CHUNK, 9);
	f->rxr.p.peer_caps = PROTO_CAP_ZEROS;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	/* The chunk first, its zeros after: it waits for them to be hashed in order. */
	raw_chunk(&w, 0, 1, CHUNK, whole + CHUNK, CHUNK);
	raw_zeros(&w, 1, 0, CHUNK);
	raw_zeros(&w, 1, 2 * CHUNK, CHUNK + 10);
	raw_done(&w, 1, CHUNK, whole, size);
	raw_result(&w, 1, PERR_OK, "");
	raw_end(&w, 1);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 1, 0, CHUNK, PERR_OK);
	assert_int_equal(f->rxr.st.bytes_zero, 2 * CHUNK + 10);
	{
		size_t got;
		uint8_t *out = read_file(f->dst, "z", &got);

		assert_int_equal(got, size);
		assert_memory_equal(out, whole, size);
		free(out);
	}
	free(whole);
	raw_free(&w);
}

/*
 * A ZEROS the receiver refuses, after FILES (and, with data, one chunk at
 * offset CHUNK held, waiting for offset 0): the session ends PROTOCOL.
 */
static void zeros_refused(void **state, uint64_t caps, bool data, uint32_t id, uint64_t off,
			  uint64_t len, const char *why)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t buf[CHUNK];
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "z" };
	static const uint64_t sizes[] = { 4 * (uint64_t)CHUNK };

	fill(buf, sizeof(buf), 5);
	f->rxr.p.peer_caps = caps;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	if (data) {
		raw_chunk(&w, 0, 1, CHUNK, buf, CHUNK);
		usleep(200 * 1000); /* held, most likely, before the ZEROS comes */
	}
	raw_zeros(&w, id, off, len);
	if (data) {
		/* Taken after the zeros, the chunk is behind the hash already: a bad chunk. */
		raw_expect_either(&w, &f->rxr, why, "bad chunk");
	} else {
		raw_expect_error(&w, PERR_PROTOCOL, why);
		run_join(&f->rxr);
		assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, why);
	}
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	assert_dest(f->dst, "");
	raw_free(&w);
}

static void test_zeros_refused(void **state)
{
	/* From a peer that did not announce ZEROS; for a file not in flight. */
	zeros_refused(state, 0, false, 1, 0, CHUNK, "out of place");
	fx_teardown(state);
	fx_setup(state);
	zeros_refused(state, PROTO_CAP_ZEROS, false, 2, 0, CHUNK, "out of place");
	fx_teardown(state);
	fx_setup(state);
	/* Outside the file, past its end, not on a chunk, not whole chunks. */
	zeros_refused(state, PROTO_CAP_ZEROS, false, 1, 4 * CHUNK, CHUNK, "not whole chunks");
	fx_teardown(state);
	fx_setup(state);
	zeros_refused(state, PROTO_CAP_ZEROS, false, 1, 3 * CHUNK, 2 * CHUNK, "not whole chunks");
	fx_teardown(state);
	fx_setup(state);
	zeros_refused(state, PROTO_CAP_ZEROS, false, 1, 100, CHUNK, "not whole chunks");
	fx_teardown(state);
	fx_setup(state);
	zeros_refused(state, PROTO_CAP_ZEROS, false, 1, 0, CHUNK / 2, "not whole chunks");
	fx_teardown(state);
	fx_setup(state);
	/* Over a chunk of data held for the file. */
	zeros_refused(state, PROTO_CAP_ZEROS, true, 1, 0, 2 * CHUNK, "overlaps data");
}

/* More ranges ahead of the hash than a ring of chunks could separate: refused. */
static void test_zeros_too_many(void **state)
{
	struct fx *f = *state;
	struct raw w;
	struct msg m = { .type = MSG_ZEROS };
	static const uint32_t ids[] = { 1 }, ok[] = { PERR_OK };
	static const char *const names[] = { "z" };
	static const uint64_t sizes[] = { 4 * (uint64_t)SLOTS * CHUNK };

	f->rxr.p.peer_caps = PROTO_CAP_ZEROS;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 1, ids, names, sizes);
	raw_ack(&w, 1, ids, ok);
	/* Nothing at offset 0 ever comes: every range waits. SLOTS + 1 may, one more may not. */
	m.u.zeros.id = 1;
	m.u.zeros.count = SLOTS + 2;
	for (uint16_t i = 0; i < m.u.zeros.count; i++) {
		m.u.zeros.r[i] =
		    (struct proto_range){ .offset = (2 * i + 1) * (uint64_t)CHUNK, .len = CHUNK };
	}
	raw_send(&w, &m);
	raw_expect_error(&w, PERR_PROTOCOL, "too many ranges");
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, "too many ranges");
	assert_dest(f->dst, "");
	raw_free(&w);
}

/* Zeros described twice, and data inside zeros: both refused. */
static void test_zeros_overlap(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint8_t buf[CHUNK];
	static const uint32_t ids[] = { 1, 2 }, ok[] = { PERR_OK, PERR_OK };
	static const char *const names[] = { "a", "b" };
	static const uint64_t sizes[] = { 4 * (uint64_t)CHUNK, 4 * (uint64_t)CHUNK };

	fill(buf, sizeof(buf), 6);
	f->rxr.p.peer_caps = PROTO_CAP_ZEROS;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 2, ids, names, sizes);
	raw_ack(&w, 2, ids, ok);
	raw_zeros(&w, 1, CHUNK, 2 * CHUNK);
	raw_zeros(&w, 1, 2 * CHUNK, CHUNK);
	raw_expect_error(&w, PERR_PROTOCOL, "overlapping");
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, "overlapping");
	raw_free(&w);
	assert_dest(f->dst, "");

	fx_teardown(state);
	fx_setup(state);
	f = *state;
	f->rxr.p.peer_caps = PROTO_CAP_ZEROS;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 2, ids, names, sizes);
	raw_ack(&w, 2, ids, ok);
	raw_zeros(&w, 2, CHUNK, 2 * CHUNK);
	usleep(200 * 1000); /* the ZEROS taken, most likely, before the chunk comes */
	raw_chunk(&w, 0, 2, 2 * CHUNK, buf, CHUNK);
	raw_expect_either(&w, &f->rxr, "inside its zeros", "overlaps data");
	assert_dest(f->dst, "");
	raw_free(&w);
}

/* ---- cases: stopping ------------------------------------------------------ */

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

/* ---- main ------------------------------------------------------------------ */

static struct tls_ctx *make_ctx(bool server, const char *name)
{
	return tu_tls_ctx(certdir, server, name);
}

static int group_setup(void **state)
{
	char *base;

	(void)state;
	/* The receiver writes through io_uring: without it (a seccomp filter, an old kernel) skip. */
	struct io_uring ring;
	int r = io_uring_queue_init(8, &ring, 0);
	if (r < 0) {
		tu_skip("io_uring_queue_init: %s", strerror(-r));
	}
	io_uring_queue_exit(&ring);
	signal(SIGPIPE, SIG_IGN);
	base = tu_mkdtemp();
	certdir = path_in(base, "certs");
	free(base);
	if (certs_init(certdir, NULL, 0) != 0) {
		return -1;
	}
	server_ctx = make_ctx(true, "server");
	client_ctx = make_ctx(false, "client");
	return server_ctx && client_ctx ? 0 : -1;
}

static int group_teardown(void **state)
{
	char *base = strdup(certdir);

	(void)state;
	tls_ctx_free(server_ctx);
	tls_ctx_free(client_ctx);
	*strrchr(base, '/') = '\0';
	tu_rmtree(base);
	free(base);
	free(certdir);
	return 0;
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

/* ---- packed slots (PROTO_CAP_PACK) ---------------------------------------- */

/*
 * Sizes around a pack's bounds with packing on (a quarter chunk is the most
 * a packed file may have; one byte more goes alone, as does a file filling a
 * chunk exactly or spanning several), an empty file, a directory between:
 * byte-exact, both sides count the packed files and slots.
 */
static void test_pack_transfer(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	static const char *const regs[] = { "empty", "one",  "small",  "quarter", "over",
					    "exact", "span", "d/tail", NULL };
	uint64_t bytes = 0;

	bytes += source_file(f, &s, "empty", 0);
	bytes += source_file(f, &s, "one", 1);
	bytes += source_file(f, &s, "small", 100);
	bytes += source_file(f, &s, "quarter", CHUNK / 4);
	bytes += source_file(f, &s, "over", CHUNK / 4 + 1);
	bytes += source_file(f, &s, "exact", CHUNK);
	bytes += source_file(f, &s, "span", 2 * CHUNK + 5);
	source_dir(f, &s, "d");
	bytes += source_file(f, &s, "d/tail", 3000);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 9, 0, bytes, PERR_OK);
	assert_stats(&f->txr.st, 9, 0, bytes, PERR_OK);
	/* one, small, quarter, d/tail: no other file may be packed */
	assert_int_equal(f->txr.st.files_packed, 4);
	assert_int_equal(f->rxr.st.files_packed, 4);
	assert_true(f->rxr.st.packed_slots >= 1 && f->rxr.st.packed_slots <= 4);
	assert_int_equal(f->rxr.st.packed_slots, f->txr.st.packed_slots);
	assert_dest(f->dst, "d d/tail empty exact one over quarter small span");
	for (size_t i = 0; regs[i]; i++) {
		assert_same_file(f->src, f->dst, regs[i]);
	}
	assert_no_fd_beneath(f->src);
}

/*
 * A pack filled to within one table entry of its chunk (three quarter-chunk
 * files and one that leaves less room than an entry needs): the next small
 * file goes into a new pack. It once joined the full one (the room left,
 * computed unsigned, wrapped), whose reads then ran past its chunk.
 */
static void test_pack_nearly_full(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	static const char *const regs[] = { "a", "b", "c", "d", "e", NULL };
	uint64_t bytes = 0;

	bytes += source_file(f, &s, "a", CHUNK / 4);
	bytes += source_file(f, &s, "b", CHUNK / 4);
	bytes += source_file(f, &s, "c", CHUNK / 4);
	/* 4 entries now; a fifth would need more room than the one byte left. */
	bytes += source_file(f, &s, "d", CHUNK / 4 - 4 * PROTO_PIECE_LEN - 1);
	bytes += source_file(f, &s, "e", 100);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 5, 0, bytes, PERR_OK);
	assert_int_equal(f->txr.st.files_packed, 5);
	assert_int_equal(f->rxr.st.packed_slots, 2);
	for (size_t i = 0; regs[i]; i++) {
		assert_same_file(f->src, f->dst, regs[i]);
	}
}

/* Packing only when both ends announced it: a peer without it gets a chunk per file. */
static void test_pack_without_cap(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "a", 10);
	source_file(f, &s, "b", 20);
	/* The receiver's HELLO lacked it (the sender's had it): one chunk per file. */
	f->rxr.p.peer_caps = PROTO_CAP_PACK;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 2, 0, 30, PERR_OK);
	assert_int_equal(f->txr.st.files_packed, 0);
	assert_int_equal(f->rxr.st.files_packed, 0);
	assert_same_file(f->src, f->dst, "a");
	assert_same_file(f->src, f->dst, "b");
}

/* The flipped byte (receiver's hook) lands in a pack's first file: that file alone fails. */
static void test_pack_checksum_mismatch(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "a", 100);
	source_file(f, &s, "b", 200);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK;
	f->rxr.p.faults = ENGINE_FAULT_FLIP_BYTE;

	run_both(f, &s);

	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_packed, 2);
	assert_int_equal(f->rxr.st.packed_slots, 1);
	assert_stats(&f->rxr.st, 1, 1, 200, PERR_INTEGRITY);
	assert_stats(&f->txr.st, 1, 1, 200, PERR_INTEGRITY);
	assert_dest(f->dst, "b");
	assert_same_file(f->src, f->dst, "b");
}

/* ---- sealed slots (verbs' encryption, run here over tcp) ---------------- */

static void seal_both(struct fx *f, uint8_t rx_key_byte)
{
	f->txr.p.seal_slots = f->rxr.p.seal_slots = true;
	memset(f->txr.p.seal_secret, 0x5a, sizeof(f->txr.p.seal_secret));
	memset(f->rxr.p.seal_secret, rx_key_byte, sizeof(f->rxr.p.seal_secret));
}

/* ---- rails: a lane lost mid-transfer (PROTO_CAP_RAILS) ------------------ */

/*
 * A big file of many chunks, small packed files, a tail of whole chunks:
 * killer (the sender or the receiver) takes kill lanes down
 * (ENGINE_FAULT_KILL_LANE), sealed slots or clear.
 */
static void rails_transfer(struct fx *f, struct run *killer, unsigned kill, bool seal)
{
	struct source s = { 0 };
	static const char *const regs[] = { "big", "p1", "p2", "p3", "tail", NULL };
	uint64_t bytes = 0;

	bytes += source_file(f, &s, "big", 40 * CHUNK + 99);
	bytes += source_file(f, &s, "p1", 100);
	bytes += source_file(f, &s, "p2", 3000);
	bytes += source_file(f, &s, "p3", 7);
	bytes += source_file(f, &s, "tail", 3 * CHUNK);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK | PROTO_CAP_RAILS;
	if (seal) {
		seal_both(f, 0x5a);
	}
	killer->p.faults |= ENGINE_FAULT_KILL_LANE;
	killer->p.test_kill_lanes = kill;

	run_both(f, &s);

	if (kill >= NLANES) {
		/* The last lane lost: the session fails as before, nothing committed. */
		assert_int_not_equal(f->txr.r, 0);
		assert_int_not_equal(f->rxr.r, 0);
		assert_non_null(strstr(killer->err, "every data lane is down"));
		assert_dest(f->dst, "");
		return;
	}
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_stats(&f->rxr.st, 5, 0, bytes, PERR_OK);
	assert_dest(f->dst, "big p1 p2 p3 tail");
	for (size_t i = 0; regs[i]; i++) {
		assert_same_file(f->src, f->dst, regs[i]);
	}
}

/* Sealed slots (verbs' encryption): a slot sealed for the lost lane is sealed again for another. */
static void test_rails_sealed_sender_kills(void **state)
{
	struct fx *f = *state;

	rails_transfer(f, &f->txr, 1, true);
}

static void test_rails_clear_sender_kills(void **state)
{
	struct fx *f = *state;

	rails_transfer(f, &f->txr, 1, false);
}

/* The receiver's credits in flight on the lost lane go again on the other. */
static void test_rails_sealed_receiver_kills(void **state)
{
	struct fx *f = *state;

	rails_transfer(f, &f->rxr, 1, true);
}

static void test_rails_all_lanes(void **state)
{
	struct fx *f = *state;

	rails_transfer(f, &f->txr, NLANES, true);
}

/*
 * Without rails (a peer that does not announce them; t_rails.sh runs real
 * programs without the capability): a lost lane fails the session as it
 * always did.
 */
static void test_rails_peer_without(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };

	source_file(f, &s, "big", 40 * CHUNK);
	f->txr.p.faults = ENGINE_FAULT_KILL_LANE;
	f->txr.p.test_kill_lanes = 1;

	run_both(f, &s);

	/* Whichever end saw it first says so; the other has it from its ERROR. */
	assert_int_equal(f->txr.code, PERR_TRANSPORT);
	assert_int_equal(f->rxr.code, PERR_TRANSPORT);
	assert_non_null(strstr(f->txr.err, "data transport"));
	assert_null(strstr(f->txr.err, "every data lane"));
	assert_dest(f->dst, "");
}

/*
 * A receiver that lies in its LANE_DOWN (it took more than went on the lane,
 * or fewer than the sender saw completed): the sender fails the session and
 * posts nothing again.
 */
static void rails_lying_receiver(struct fx *f, uint64_t count, const char *why)
{
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	struct proto_status st = { .status = PERR_OK, .text = (char *)"" };
	int64_t deadline;

	source_file(f, &s, "big", 6 * CHUNK);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.peer_caps = PROTO_CAP_RAILS;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	st.id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
	raw_send(&w, &m);
	deadline = now_ms() + IO_MS;
	while (w.data_imms < SLOTS) {
		struct pollfd pfd = { .fd = f->rx.x->ops->event_fd(f->rx.x), .events = POLLIN };

		if (now_ms() > deadline) {
			fail_msg("%u of %u slots written within %d ms", w.data_imms, SLOTS, IO_MS);
		}
		raw_drain(&w, 0, NULL);
		poll(&pfd, 1, 100);
	}
	/* The sender has its write completions by now. */
	usleep(200 * 1000);
	m = (struct msg){ .type = MSG_LANE_DOWN, .u.lane_down = { .lane = 0, .count = count } };
	raw_send(&w, &m);
	/* Its own LANE_DOWN (its count of credits: none), then its ERROR. */
	raw_expect(&w, MSG_LANE_DOWN, &m);
	assert_int_equal(m.u.lane_down.lane, 0);
	assert_true(m.u.lane_down.count == 0);
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->txr);
	raw_free(&w);

	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, why);
}

static void test_rails_receiver_claims_too_many(void **state)
{
	rails_lying_receiver(*state, 1000, "LANE_DOWN: the peer took 1000 slots on lane 0");
}

static void test_rails_receiver_claims_too_few(void **state)
{
	rails_lying_receiver(*state, 0, "LANE_DOWN: the peer took 0 slots on lane 0");
}

/* A played receiver: wait until want data immediates came. */
static void raw_wait_data(struct raw *w, unsigned want)
{
	int64_t deadline = now_ms() + IO_MS;

	while (w->data_imms < want) {
		struct pollfd pfd = { .fd = w->end->x->ops->event_fd(w->end->x), .events = POLLIN };

		if (now_ms() > deadline) {
			fail_msg("%u of %u slots written within %d ms", w->data_imms, want, IO_MS);
		}
		raw_drain(w, 0, NULL);
		poll(&pfd, 1, 100);
	}
}

/*
 * Lanes by load: a receiver that credits only the slots that came on lane 0
 * leaves lane 1 with two slots outstanding, so the sender's next slots all
 * go on lane 0 (round robin would put every other one on lane 1).
 */
static void test_rails_least_loaded(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	struct proto_status st = { .status = PERR_OK, .text = (char *)"" };
	struct xport *x = f->rx.x;
	unsigned on0 = 0;

	source_file(f, &s, "big", 12 * CHUNK);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	st.id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
	raw_send(&w, &m);
	raw_wait_data(&w, SLOTS);
	for (unsigned i = 0; i < SLOTS; i++) {
		if (w.data_lane[i] != 0) {
			continue;
		}
		struct xport_wr wr = { .wr_id = ++w.wr_id,
				       .opcode = XPORT_OP_WRITE_IMM,
				       .flags = XPORT_SEND_SIGNALED,
				       .imm = proto_imm(PROTO_IMM_CREDIT, w.data_slot[i]),
				       .lane = 0 };

		assert_int_equal(x->ops->post_writes(x, &wr, 1), 0);
		on0++;
	}
	/* Equal loads take turns: the first slots went half on each lane. */
	assert_int_equal(on0, SLOTS / NLANES);
	raw_wait_data(&w, SLOTS + on0);
	for (unsigned i = SLOTS; i < SLOTS + on0; i++) {
		assert_int_equal(w.data_lane[i], 0);
	}
	m = (struct msg){ .type = MSG_ERROR, .u.error = { .code = PERR_SHUTDOWN } };
	snprintf(m.u.error.text, sizeof(m.u.error.text), "enough");
	raw_send(&w, &m);
	run_join(&f->txr);
	raw_free(&w);

	assert_failed_run(&f->txr, -EREMOTEIO, PERR_SHUTDOWN, "enough");
}

/* LANE_DOWN from a peer that never said it has rails: refused. */
static void test_rails_unexpected_lane_down(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;

	source_file(f, &s, "big", 6 * CHUNK);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	msg_clear(&m);
	m = (struct msg){ .type = MSG_LANE_DOWN, .u.lane_down = { .lane = 1, .count = 0 } };
	raw_send(&w, &m);
	raw_expect_error(&w, PERR_PROTOCOL, "unexpected LANE_DOWN");
	run_join(&f->txr);
	raw_free(&w);

	assert_failed_run(&f->txr, -EBADMSG, PERR_PROTOCOL, "unexpected LANE_DOWN");
}

/* The sender's posts, looked at: how many payload writes carry bytes of spy_plain. */
static const struct xport_ops *spy_orig;
static uint8_t *spy_plain;
static size_t spy_len, spy_writes, spy_hits;

static int spy_post_writes(struct xport *x, const struct xport_wr *wrs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (wrs[i].opcode == XPORT_OP_WRITE && wrs[i].len >= 32) {
			spy_writes++;
			spy_hits += memmem(spy_plain, spy_len, wrs[i].buf, 32) != NULL;
		}
	}
	return spy_orig->post_writes(x, wrs, n);
}

/*
 * Every kind of slot, sealed or not: chunks, the last short one, packs,
 * many rounds of credits. Returns the payload writes that showed plaintext.
 */
static size_t spied_transfer(struct fx *f, bool seal)
{
	struct source s = { 0 };
	static const char *const regs[] = {
		"empty", "one", "small", "exact", "span", "d/tail", NULL
	};
	static struct xport_ops spy;
	uint64_t bytes = 0;

	bytes += source_file(f, &s, "empty", 0);
	bytes += source_file(f, &s, "one", 1);
	bytes += source_file(f, &s, "small", 100);
	bytes += source_file(f, &s, "exact", CHUNK);
	bytes += source_file(f, &s, "span", 5 * CHUNK + 17);
	source_dir(f, &s, "d");
	bytes += source_file(f, &s, "d/tail", 3000);
	f->txr.p.peer_caps = f->rxr.p.peer_caps = PROTO_CAP_PACK;
	if (seal) {
		seal_both(f, 0x5a);
	}
	/* "span" is the source's fifth entry: its contents come from seed 4. */
	spy_len = 5 * CHUNK + 17;
	spy_plain = malloc(spy_len);
	assert_non_null(spy_plain);
	fill(spy_plain, spy_len, 4);
	spy_writes = spy_hits = 0;
	spy_orig = f->tx.x->ops;
	spy = *spy_orig;
	spy.post_writes = spy_post_writes;
	f->tx.x->ops = &spy;

	run_both(f, &s);

	f->tx.x->ops = spy_orig;
	free(spy_plain);
	assert_ok_run(&f->txr);
	assert_ok_run(&f->rxr);
	assert_true(spy_writes >= 6);
	assert_stats(&f->rxr.st, 7, 0, bytes, PERR_OK);
	assert_true(f->rxr.st.files_packed >= 2);
	assert_dest(f->dst, "d d/tail empty exact one small span");
	for (size_t i = 0; regs[i]; i++) {
		assert_same_file(f->src, f->dst, regs[i]);
	}
	return spy_hits;
}

/* The spy sees the file's bytes in clear slots (so it can see them)... */
static void test_clear_slots_seen(void **state)
{
	/* span's five whole chunks (its last, 17 bytes, is too short to look at) */
	assert_int_equal(spied_transfer(*state, false), 5);
}

/* ...and none in sealed ones, which arrive whole all the same. */
static void test_sealed_transfer(void **state)
{
	assert_int_equal(spied_transfer(*state, true), 0);
}

/*
 * A slot that does not open fails the session at its first slot, before a
 * byte of it is written: nothing is committed. tamper: the sender's test
 * hook (0: the receiver holds another key).
 */
static void sealed_refused(struct fx *f, unsigned tamper)
{
	struct source s = { 0 };

	source_file(f, &s, "a", 3 * CHUNK + 5);
	source_file(f, &s, "b", 2 * CHUNK);
	seal_both(f, tamper ? 0x5a : 0xa5);
	f->txr.p.seal_tamper = tamper;

	run_both(f, &s);

	assert_failed_run(&f->rxr, -EBADMSG, PERR_TRANSPORT, "fails authentication");
	assert_int_not_equal(f->txr.r, 0);
	assert_dest(f->dst, "");
}

static void test_sealed_wrong_key(void **state)
{
	sealed_refused(*state, XPORT_TEST_TAMPER_NONE);
}

static void test_sealed_flip(void **state)
{
	sealed_refused(*state, XPORT_TEST_TAMPER_FLIP);
}

static void test_sealed_replay(void **state)
{
	sealed_refused(*state, XPORT_TEST_TAMPER_REPLAY);
}

static void test_sealed_move(void **state)
{
	sealed_refused(*state, XPORT_TEST_TAMPER_MOVE);
}

static void test_sealed_truncate(void **state)
{
	sealed_refused(*state, XPORT_TEST_TAMPER_TRUNCATE);
}

/* n FILE_RESULTs, in any order: ids[i] gets status[i]. */
static void raw_results(struct raw *w, size_t n, const uint32_t *ids, const uint32_t *status)
{
	bool seen[8] = { false };

	assert_true(n <= 8);
	for (size_t k = 0; k < n; k++) {
		struct msg m;
		size_t i;

		raw_expect(w, MSG_FILE_RESULT, &m);
		for (i = 0; i < n && (ids[i] != m.u.file_result.id || seen[i]); i++) {
		}
		if (i == n) {
			fail_msg("FILE_RESULT for id %u unexpected", m.u.file_result.id);
		}
		if (m.u.file_result.status != status[i]) {
			fail_msg("FILE_RESULT %u: %s (%s), expected %s", ids[i],
				 proto_err_name(m.u.file_result.status), m.u.file_result.text,
				 proto_err_name(status[i]));
		}
		seen[i] = true;
		msg_clear(&m);
	}
}

/*
 * A pack made by hand: four files in one slot (the last one filling it to
 * the byte with the table), an empty file beside them; the second's
 * FILE_DONE carries a wrong digest, the third's the sender's own failure:
 * those two fail, the others are committed, nothing else is left.
 */
static void test_pack_by_hand(void **state)
{
	struct fx *f = *state;
	struct raw w;
	static const uint32_t ids[] = { 1, 2, 3, 4, 5 };
	static const uint32_t ok5[] = { PERR_OK, PERR_OK, PERR_OK, PERR_OK, PERR_OK };
	static const char *const names[] = { "a", "b", "c", "d", "e" };
	const uint32_t last = CHUNK - 1000 - 10 - 1 - 4 * PROTO_PIECE_LEN;
	const uint64_t sizes[] = { 1000, 10, 1, last, 0 };
	const uint32_t lens[] = { 1000, 10, 1, last };
	uint8_t *data[4];
	static const uint32_t want[] = { PERR_OK, PERR_INTEGRITY, PERR_IO, PERR_OK, PERR_OK };
	struct msg m = { .type = MSG_FILE_DONE };

	for (size_t i = 0; i < 4; i++) {
		data[i] = malloc(lens[i]);
		assert_non_null(data[i]);
		fill(data[i], lens[i], (unsigned)i + 20);
	}
	f->rxr.p.peer_caps = PROTO_CAP_PACK;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 5, ids, names, sizes);
	raw_ack(&w, 5, ids, ok5);
	raw_pack(&w, 0, 4, ids, (const uint8_t *const *)data, lens, 0);
	raw_done(&w, 1, 1000, data[0], 1000);
	raw_done(&w, 2, 10, data[0], 10); /* another file's bytes: the wrong digest */
	m.u.file_done.id = 3;
	m.u.file_done.status = PERR_IO;
	m.u.file_done.bytes = 1;
	snprintf(m.u.file_done.text, sizeof(m.u.file_done.text), "read: gone");
	raw_send(&w, &m);
	raw_done(&w, 4, last, data[3], last);
	raw_done(&w, 5, 0, data[0], 0);
	raw_results(&w, 5, ids, want);
	raw_end(&w, 5);
	run_join(&f->rxr);

	assert_ok_run(&f->rxr);
	assert_int_equal(f->rxr.st.files_packed, 4);
	assert_int_equal(f->rxr.st.packed_slots, 1);
	/* Which of the two failures resolves first depends on when the writes complete. */
	assert_stats(&f->rxr.st, 3, 2, 1000 + last,
		     f->rxr.st.first_error == PERR_IO ? PERR_IO : PERR_INTEGRITY);
	assert_dest(f->dst, "a d e");
	for (size_t i = 0; i < 4; i++) {
		size_t len;
		uint8_t *got;

		if (i == 1 || i == 2) {
			continue;
		}
		got = read_file(f->dst, names[i], &len);
		assert_non_null(got);
		assert_int_equal(len, lens[i]);
		assert_memory_equal(got, data[i], lens[i]);
		free(got);
	}
	for (size_t i = 0; i < 4; i++) {
		free(data[i]);
	}
	raw_free(&w);
}

enum pack_bad { PB_UNKNOWN, PB_SIZE, PB_TWICE, PB_SENT, PB_TABLE, PB_NO_CAP, PB_AFTER, PB_ZEROS };

/*
 * A hostile pack ends the session, nothing committed: a file not in flight,
 * a piece outside its file (another length), a file twice, a piece for a
 * file already sent a chunk, a table that does not account for the bytes
 * before it, a pack to a receiver whose peer never announced packing.
 */
static void pack_refused(struct fx *f, enum pack_bad bad, const char *why)
{
	struct raw w;
	static const uint32_t ids[] = { 1, 2 }, ok[] = { PERR_OK, PERR_OK };
	static const char *const names[] = { "a", "b" };
	static const uint64_t sizes[] = { 100, 200 };
	uint8_t a[200], b[200];
	const uint8_t *data[] = { a, b };
	uint32_t pids[] = { 1, 2 }, lens[] = { 100, 200 };
	uint32_t extra = 0;

	fill(a, sizeof(a), 1);
	fill(b, sizeof(b), 2);
	switch (bad) {
	case PB_UNKNOWN:
		pids[1] = 7;
		break;
	case PB_SIZE:
		lens[0] = 150;
		break;
	case PB_TWICE:
		pids[1] = 1, lens[1] = 100;
		break;
	case PB_TABLE:
		extra = 3;
		break;
	default:
		break;
	}
	f->rxr.p.peer_caps = bad == PB_NO_CAP ? 0 : PROTO_CAP_PACK;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	raw_files(&w, 2, ids, names, sizes);
	raw_ack(&w, 2, ids, ok);
	if (bad == PB_SENT) {
		raw_chunk(&w, 1, 2, 0, b, 200);
	}
	raw_pack(&w, 0, 2, pids, data, lens, extra);
	if (bad == PB_AFTER) {
		raw_chunk(&w, 1, 1, 0, a, 100); /* the packed file's bytes again, streamed */
	} else if (bad == PB_ZEROS) {
		raw_zeros(&w, 2, 0, 200);
	}
	raw_expect_error(&w, PERR_PROTOCOL, why);
	run_join(&f->rxr);

	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL, why);
	assert_stats(&f->rxr.st, 0, 0, 0, PERR_OK);
	assert_dest(f->dst, "");
	raw_free(&w);
}

static void test_pack_refused(void **state)
{
	struct fx *f = *state;

	pack_refused(f, PB_UNKNOWN, "file id 7 (200 bytes) not one in flight");
}

static void test_pack_refused_size(void **state)
{
	pack_refused(*state, PB_SIZE, "file id 1 (150 bytes) not one in flight");
}

static void test_pack_refused_twice(void **state)
{
	pack_refused(*state, PB_TWICE, "file id 1 (100 bytes) not one in flight");
}

static void test_pack_refused_sent(void **state)
{
	pack_refused(*state, PB_SENT, "file id 2 (200 bytes) not one in flight");
}

static void test_pack_refused_table(void **state)
{
	pack_refused(*state, PB_TABLE, "bad table of 2 files");
}

static void test_pack_refused_no_cap(void **state)
{
	pack_refused(*state, PB_NO_CAP, "bad packed slot");
}

/* A file that came packed is whole: nothing more of it may stream after its piece. */
static void test_pack_refused_after(void **state)
{
	pack_refused(*state, PB_AFTER, "bad chunk for a: offset 0 len 100 (size 100)");
}

static void test_pack_refused_zeros(void **state)
{
	pack_refused(*state, PB_ZEROS, "ZEROS for id 2 out of place");
}

int main(void)
{
	/* clang-format off */
	const struct CMUnitTest tests[] = {
		T(test_transfer),
		T(test_window),
		T(test_checksum_mismatch),
		T(test_event_fd_hangup),
	T(test_dir_meta_cap),
		T(test_hardlinks),
		T(test_hardlink_target_failed),
		T(test_pull_name_refused),
		T(test_skip_quick),
		T(test_skip_without_cap),
		T(test_delete),
		T(test_delete_max),
		T(test_delete_suppressed),
		T(test_delete_many),
		T(test_delete_untold),
		T(test_sender_deleted),
		T(test_sender_deleted_early),
		T(test_skip_checksum),
		T(test_skip_checksum_without_cap),
		T(test_probe),
		T(test_probe_delete_max),
		T(test_probe_checksum),
		T(test_probe_no_dest),
		T(test_probe_needs_dry_run),
		T(test_sums_unasked),
		T(test_sums_twice),
		T(test_done_before_sum_answer),
		T(test_duplicate_names),
		T(test_duplicate_after_resolved),
		T(test_pack_transfer),
		T(test_clear_slots_seen),
		T(test_rails_sealed_sender_kills),
		T(test_rails_clear_sender_kills),
		T(test_rails_sealed_receiver_kills),
		T(test_rails_all_lanes),
		T(test_rails_peer_without),
		T(test_rails_receiver_claims_too_many),
		T(test_rails_receiver_claims_too_few),
		T(test_rails_unexpected_lane_down),
		T(test_rails_least_loaded),
		T(test_sealed_transfer),
		T(test_sealed_wrong_key),
		T(test_sealed_flip),
		T(test_sealed_replay),
		T(test_sealed_move),
		T(test_sealed_truncate),
		T(test_pack_without_cap),
		T(test_pack_checksum_mismatch),
		T(test_pack_by_hand),
		T(test_pack_nearly_full),
		T(test_pack_refused),
		T(test_pack_refused_size),
		T(test_pack_refused_twice),
		T(test_pack_refused_sent),
		T(test_pack_refused_table),
		T(test_pack_refused_no_cap),
		T(test_pack_refused_after),
		T(test_pack_refused_zeros),
		T(test_file_done_wrong_hash),
		T(test_files_out_of_order),
		T(test_file_done_too_many_bytes),
		T(test_file_done_short),
		T(test_peer_stops_mid_file),
		T(test_idle_timeout),
		T(test_sender_peer_error),
		T(test_sender_bad_ring),
		T(test_sender_no_credits),
		T(test_window_narrow),
		T(test_window_wide),
		T(test_window_wider),
		T(test_offer_interleaved),
		T(test_window_long_names),
		T(test_span_narrow),
		T(test_span_wide),
		T(test_span_wider),
		T(test_sum_answer_never_comes),
		T(test_stop_requested),
		T(test_partial_resume),
		T(test_partial_complete),
		T(test_partial_flipped),
		T(test_partial_other_chunks),
		T(test_partial_discarded),
		T(test_partial_overlap),
		T(test_partial_past_size),
		T(test_partial_store_name_refused),
		T(test_partial_no_time),
		T(test_resume_without_cap),
		T(test_resume_not_chunks),
		T(test_resume_past_size),
		T(test_zeros_transfer),
		T(test_zeros_without_cap),
		T(test_zeros_by_hand),
		T(test_zeros_refused),
		T(test_zeros_overlap),
		T(test_zeros_too_many),
		T(test_delta_by_hand),
		T(test_delta_transfer),
		T(test_delta_same_refused),
		T(test_delta_sums_refused),
	};
	/* clang-format on */

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
