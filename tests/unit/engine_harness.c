/* SPDX-License-Identifier: MIT */
/*
 * The engine tests' harness (engine_harness.h): files and trees compared, the
 * link (a TLS control pair and tcp lanes), an engine on its own thread, the
 * per-case fixture, the sender's entries, and the group set-up every
 * unit/test_engine_*.c runs under.
 */
#include "engine_harness.h"

static char *certdir;
static struct tls_ctx *server_ctx, *client_ctx;

/* ---- small helpers ------------------------------------------------------ */

char *path_in(const char *dir, const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

/* Deterministic contents, different for each seed. */
void fill(uint8_t *buf, size_t len, unsigned seed)
{
	uint32_t x = 0x9e3779b9u * (seed + 1);

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		buf[i] = (uint8_t)x;
	}
}

void hash_of(const uint8_t *buf, size_t len, uint8_t out[HASH_LEN])
{
	struct file_hash h;

	assert_int_equal(file_hash_init(&h), 0);
	file_hash_update(&h, buf, len);
	file_hash_final(&h, out);
	file_hash_free(&h);
}

void write_file(const char *dir, const char *name, const uint8_t *buf, size_t len)
{
	char *p = path_in(dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
	free(p);
}

/* The whole of a file, or NULL when it does not exist. */
uint8_t *read_file(const char *dir, const char *name, size_t *ret_len)
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

void assert_same_file(const char *src, const char *dst, const char *name)
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

int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void collect(const char *root, const char *rel, char ***names, size_t *n)
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
char *tree(const char *dir)
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
void assert_no_fd_beneath(const char *dir)
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
void assert_dest(const char *dir, const char *expect)
{
	char *got = tree(dir);

	assert_string_equal(got, expect);
	free(got);
	assert_no_fd_beneath(dir);
}

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
	assert_int_equal(xport_tcp_ops.listen((struct sockaddr *)&sa, sizeof(sa), -1, &p.l, &port),
			 0);
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
void end_close(struct end *e)
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

static void ev_ok(void *ud, const struct engine_entry_ev *e)
{
	struct events *ev = ud;

	/* Only regular files have a checksum. */
	assert_true((e->hash != NULL) == (e->ftype == PROTO_FT_REG));
	if (e->hash) {
		memcpy(ev->last_hash, e->hash, HASH_LEN);
		ev->last_tree = e->tree_chunk;
	}
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
	u->p.relay_feed = -1;
	u->p.follow = NULL;
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

void run_start(struct run *u)
{
	/*
	 * RDMACP_TEST_FILE_TREE (the _tree variants in tests/CMakeLists.txt):
	 * the cases again with both engines' peers announcing the chunk tree.
	 */
	if (getenv("RDMACP_TEST_FILE_TREE")) {
		u->p.peer_caps |= PROTO_CAP_FILE_TREE;
	}
	assert_int_equal(pthread_create(&u->th, NULL, run_main, u), 0);
	u->started = true;
}

/* Wait for the engine to return, at most JOIN_MS. */
void run_join(struct run *u)
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

int fx_setup(void **state)
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

int fx_teardown(void **state)
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

int source_next(void *ud, const struct engine_src **ret, char *why, size_t whylen)
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
uint64_t source_file(struct fx *f, struct source *s, const char *name, size_t size)
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

void source_dir(struct fx *f, struct source *s, const char *name)
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

void source_symlink(struct source *s, const char *name, const char *target)
{
	s->e[s->n++] = (struct engine_src){ .name = (char *)name,
					    .path = (char *)name,
					    .dirfd = AT_FDCWD,
					    .ftype = PROTO_FT_SYMLINK,
					    .mode = 0777,
					    .link = (char *)target };
}

/* Both engines, each on its thread, until both return. */
void run_both(struct fx *f, struct source *s)
{
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = s };
	run_start(&f->rxr);
	run_start(&f->txr);
	run_join(&f->txr);
	run_join(&f->rxr);
}

void assert_ok_run(const struct run *u)
{
	if (u->r != 0) {
		fail_msg("%s: engine_run %d code %u: %s",
			 u->p.role == ENGINE_SENDER ? "sender" : "receiver", u->r, u->code, u->err);
	}
	assert_int_equal(u->code, PERR_OK);
	assert_string_equal(u->err, "");
}

/* A session that failed: this negative errno, this code, a reason containing why. */
void assert_failed_run(const struct run *u, int r, uint32_t code, const char *why)
{
	if (u->r != r || u->code != code || !strstr(u->err, why)) {
		fail_msg("%s: engine_run %d code %s (%s); expected %d with %s (%s)",
			 u->p.role == ENGINE_SENDER ? "sender" : "receiver", u->r,
			 proto_err_name(u->code), u->err, r, proto_err_name(code), why);
	}
}

/* A destination file of size bytes (content by seed) with this mtime. */
void dest_file(struct fx *f, const char *name, size_t size, unsigned seed, struct timespec mtime)
{
	uint8_t *buf = malloc(size ? size : 1);
	struct timespec ts[2] = { mtime, mtime };

	assert_non_null(buf);
	fill(buf, size, seed);
	write_file(f->dst, name, buf, size);
	free(buf);
	assert_int_equal(utimensat(f->dst_fd, name, ts, 0), 0);
}

static struct tls_ctx *make_ctx(bool server, const char *name)
{
	return tu_tls_ctx(certdir, server, name);
}

int group_setup(void **state)
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

int group_teardown(void **state)
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

void seal_both(struct fx *f, uint8_t rx_key_byte)
{
	f->txr.p.seal_slots = f->rxr.p.seal_slots = true;
	memset(f->txr.p.seal_secret, 0x5a, sizeof(f->txr.p.seal_secret));
	memset(f->rxr.p.seal_secret, rx_key_byte, sizeof(f->rxr.p.seal_secret));
}

/* The tree of buf, independently: the XXH3-128 of each CHUNK of it, canonical, in order. */
void tree_ref(const uint8_t *buf, size_t len, uint8_t out[HASH_LEN])
{
	size_t n = (len + CHUNK - 1) / CHUNK;
	uint8_t *d = malloc(n * HASH_LEN + 1);
	XXH128_canonical_t c;

	assert_non_null(d);
	for (size_t i = 0; i < n; i++) {
		size_t at = i * CHUNK, k = len - at < CHUNK ? len - at : CHUNK;

		XXH128_canonicalFromHash(&c, XXH3_128bits(buf + at, k));
		memcpy(d + i * HASH_LEN, c.digest, HASH_LEN);
	}
	XXH128_canonicalFromHash(&c, XXH3_128bits(d, n * HASH_LEN));
	memcpy(out, c.digest, HASH_LEN);
	free(d);
}
