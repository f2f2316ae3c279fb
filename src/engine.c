/* SPDX-License-Identifier: MIT */
/*
 * The transfer engine (see engine.h for the shape). One thread, one event
 * loop over four sources: the TLS control channel, the transport's
 * completion fd, io_uring's eventfd and the sync thread's eventfd. Here:
 * engine_run, set-up and tear-down, the loop, the control messages, the
 * failure bookkeeping and the file table.
 */
#include "engine-internal.h"

#include <sys/mman.h>

#include "rdmadev.h"

#include "hello.h"

static uint64_t progress_mark(const struct engine *e);
static bool finished(struct engine *e);
int engine_run(const struct engine_params *p, struct engine_stats *ret_stats, uint32_t *ret_code,
	       char *err, size_t errlen);

/* Record the session failure (the first one wins) and return r. */
int fail(struct engine *e, uint32_t code, int r, const char *fmt, ...)
{
	va_list ap;

	if (!e->failed) {
		e->failed = true;
		e->err_code = code;
		e->fail_r = r;
		va_start(ap, fmt);
		vsnprintf(e->err, e->errlen, fmt, ap);
		va_end(ap);
	}
	return r;
}

uint32_t errno_to_perr(int r)
{
	switch (r) {
	case -ENOSPC:
	case -EDQUOT:
		return PERR_NOSPACE;
	case -EACCES:
	case -EPERM:
	case -EROFS:
		return PERR_PERMISSION;
	case -ENOENT:
		return PERR_NOT_FOUND;
	case -ELOOP:
	case -EXDEV:
	case -ENOTDIR:
	case -EISDIR:
	case -EINVAL:
	case -ENAMETOOLONG:
		return PERR_BAD_PATH;
	default:
		return PERR_IO;
	}
}

void file_fail(struct efile *f, uint32_t code, const char *fmt, ...)
{
	va_list ap;

	if (f->failed) {
		return;
	}
	f->failed = true;
	f->fail_code = code;
	if (file_fail_buf(f)) {
		va_start(ap, fmt);
		vsnprintf(f->fail_text, FILE_FAIL_TEXT_LEN, fmt, ap);
		va_end(ap);
	}
}

/*
 * Few files fail, and a file table entry is touched once per session at
 * least: the text lives apart, so that entries stay small.
 */
char *file_fail_buf(struct efile *f)
{
	if (!f->fail_text) {
		f->fail_text = calloc(1, FILE_FAIL_TEXT_LEN);
	}
	return f->fail_text;
}

const char *file_fail_text(const struct efile *f)
{
	return f->fail_text ? f->fail_text : "";
}

/* Count a failed file: the first failure's code and side are kept for the exit code. */
void note_failure(struct engine *e, const char *name, uint8_t ftype, uint32_t code, bool local,
		  const char *text)
{
	e->st.files_failed++;
	if (!e->st.first_error) {
		e->st.first_error = code;
		e->st.first_error_local = local;
	}
	if (e->p->ev.file_failed) {
		e->p->ev.file_failed(e->p->ev.ud, name, ftype, code, local, text);
	}
}

/*
 * Count a committed file: bytes of payload (0 for a directory or a symlink,
 * which have no hash: NULL).
 */
void note_committed(struct engine *e, const struct efile *f, uint64_t bytes, const uint8_t *hash)
{
	e->st.files_ok++;
	e->st.bytes += bytes;
	e->st.bytes_zero += f->zeroed;
	e->st.bytes_unchanged += f->skipped;
	if (e->p->ev.file_ok) {
		struct engine_entry_ev ev = {
			.name = f->name,
			.ftype = f->ftype,
			.bytes = bytes,
			.zero_bytes = f->zeroed,
			.skipped_bytes = f->skipped,
			.seconds = ts_since(&f->t0),
			.hash = f->ftype == PROTO_FT_REG ? hash : NULL,
			.items = f->items,
		};

		e->p->ev.file_ok(e->p->ev.ud, &ev);
	}
}

/*
 * Count a committed file of which the receiver had kept bytes from a cut
 * run (--partial): sent is the payload that crossed now.
 */
void note_resumed(struct engine *e, const struct efile *f, uint64_t sent, uint64_t kept,
		  const uint8_t *hash)
{
	e->st.files_ok++;
	e->st.files_resumed++;
	e->st.bytes += sent;
	e->st.bytes_resumed += kept;
	e->st.bytes_zero += f->zeroed;
	e->st.bytes_unchanged += f->skipped;
	if (e->p->ev.file_resumed) {
		e->p->ev.file_resumed(e->p->ev.ud, f->name, sent, kept, f->zeroed, f->skipped,
				      ts_since(&f->t0), hash);
	} else if (e->p->ev.file_ok) {
		struct engine_entry_ev ev = {
			.name = f->name,
			.ftype = f->ftype,
			.bytes = sent,
			.zero_bytes = f->zeroed,
			.skipped_bytes = f->skipped,
			.seconds = ts_since(&f->t0),
			.hash = hash,
		};

		e->p->ev.file_ok(e->p->ev.ud, &ev);
	}
}

/* Feed len zero bytes to h: a ZEROS range, hashed as the bytes it stands for. */
void hash_zeros(struct file_hash *h, uint64_t len)
{
	size_t zlen;
	const uint8_t *z = sparse_zero_buf(&zlen);

	while (len > 0) {
		size_t n = (size_t)MIN(len, (uint64_t)zlen);

		file_hash_update(h, z, n);
		len -= n;
	}
}

/* A probe: an entry the receiver would copy (or make). */
void note_planned(struct engine *e, const char *name, uint8_t ftype, uint64_t bytes)
{
	e->st.files_planned++;
	e->st.bytes_planned += bytes;
	if (e->p->ev.planned) {
		e->p->ev.planned(e->p->ev.ud, name, ftype, bytes);
	}
}

/*
 * Count an entry the receiver kept (a skip level, or a directory or symlink
 * there already): unchanged, or updated when its metadata alone was brought
 * in line (f->items). Not a failure.
 */
void note_kept(struct engine *e, const struct efile *f)
{
	uint32_t items = f->items & PROTO_ITEMS_META;

	if (items) {
		e->st.files_updated++;
	} else {
		e->st.files_skipped++;
	}
	if (e->p->ev.file_skipped) {
		e->p->ev.file_skipped(e->p->ev.ud, f->name, f->ftype, items);
	}
}

struct efile *file_by_id(struct engine *e, uint32_t id)
{
	struct efile *f = &e->files[id % FILE_TABLE];

	return f->used && f->id == id ? f : NULL;
}

uint32_t file_index(struct engine *e, struct efile *f)
{
	return (uint32_t)(f - e->files);
}

/*
 * Entries are taken in id order, so the table's untouched pages are
 * reached one after another, and each would trap on its first write. Some
 * hypervisors make that trap cost tens of microseconds (measured in one
 * guest: 19 us a 4 KiB page; 0.7 us populated in bulk, but then 13 us more
 * at the first touch, where the hypervisor maps it; 2 MiB pages: 0.5 ms for
 * all three). With 4 KiB pages that is about 1,500 pages a session on each
 * end. The table's mapping asks for 2 MiB pages (mem_map_thp); where the
 * kernel has none, the pages of the next FILE_POPULATE_STEP entries are
 * populated in one call, ahead of use. A kernel without MADV_POPULATE_WRITE
 * (before 5.14) says EINVAL and is not asked again.
 */
#define FILE_POPULATE_STEP 512

static void file_populate(struct engine *e, uint32_t idx)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uint32_t end = MIN(idx + FILE_POPULATE_STEP, (uint32_t)FILE_TABLE);
	uintptr_t a = (uintptr_t)&e->files[e->files_ready] & ~(page - 1);
	uintptr_t b = (uintptr_t)&e->files[end] & ~(page - 1);

	e->files_ready = end;
	if (b > a && madvise((void *)a, b - a, MADV_POPULATE_WRITE) < 0 && errno == EINVAL) {
		e->files_ready = FILE_TABLE;
	}
}

void file_take(struct engine *e, struct efile *f, uint32_t id)
{
	if (file_index(e, f) >= e->files_ready) {
		file_populate(e, file_index(e, f));
	}
	memset(f, 0, sizeof(*f));
	f->used = true;
	f->id = id;
	f->fd = f->dfd = f->tfd = f->dir = f->jfd = f->part_store = f->oldfd = f->pfd = -1;
	e->files_open++;
	e->files_hw = MAX(e->files_hw, file_index(e, f) + 1);
}

char *file_tmpname(struct efile *f)
{
	if (!f->tmpname) {
		f->tmpname = malloc(FILE_TMPNAME_LEN);
		if (!f->tmpname) {
			return NULL;
		}
	}
	f->tmpname[0] = '\0';
	return f->tmpname;
}

void file_release(struct engine *e, struct efile *f)
{
	if (f->name_key) {
		hash_set_del(&e->inflight, f->name_key);
	}
	if (f->hash_live) {
		file_hash_free(&f->hash);
	}
	if (f->fd >= 0) {
		close(f->fd);
		e->open_fds--;
	}
	if (f->dfd >= 0) {
		close(f->dfd);
	}
	if (f->tfd >= 0) {
		close(f->tfd);
	}
	if (f->jfd >= 0) {
		rx_partial_flush(f); /* a cut file keeps every record it has */
		close(f->jfd);
	}
	if (f->part_store >= 0) {
		close(f->part_store);
	}
	if (f->dir >= 0) {
		e->dirs[f->dir].refs--;
	}
	free(f->jbuf);
	free(f->fail_text);
	free(f->tmpname);
	free(f->resume);
	free(f->zr);
	e->zr_total -= f->nzr + f->nsr;
	free(f->sr);
	free(f->dsum);
	free(f->dzero);
	free(f->rd);
	free(f->rdisk);
	free(f->mine);
	XXH3_freeState(f->tst);
	if (f->oldfd >= 0) {
		close(f->oldfd);
	}
	if (f->pfd >= 0) {
		close(f->pfd);
	}
	e->names_in_flight -= f->name_bytes;
	free(f->name);
	free(f->leaf);
	free(f->src_path);
	free(f->link_target);
	rx_xattrs_release(e, f);
	memset(f, 0, sizeof(*f));
	f->fd = f->dfd = f->tfd = f->dir = f->jfd = f->part_store = f->oldfd = f->pfd = -1;
	e->files_open--;
}

/* The loop's own descriptors (control, transport, io_uring), before the sources. */
#define LOOP_FIXED_FDS 3

int engine_watch_add(struct engine *e, int fd, engine_ready_fn on_ready, unsigned flags)
{
	assert(fd >= 0 && on_ready);
	if (e->nwatches == ENGINE_WATCH_MAX) {
		return -ENOSPC;
	}
	e->watches[e->nwatches++] = (struct engine_watch){ fd, flags, on_ready };
	return 0;
}

void engine_watch_del(struct engine *e, int fd)
{
	for (unsigned i = 0; i < e->nwatches; i++) {
		if (e->watches[i].fd == fd) {
			memmove(&e->watches[i], &e->watches[i + 1],
				(e->nwatches - i - 1) * sizeof(e->watches[0]));
			e->nwatches--;
			return;
		}
	}
}

static const struct engine_watch *engine_watch_find(const struct engine *e, int fd)
{
	for (unsigned i = 0; i < e->nwatches; i++) {
		if (e->watches[i].fd == fd) {
			return &e->watches[i];
		}
	}
	return NULL;
}

/* Which features are on for this session: they alone are called from here on. */
static void features_choose(struct engine *e)
{
	for (unsigned i = 0; i < engine_nfeatures; i++) {
		const struct engine_feature *ft = engine_features[i];

		assert(e->nfeat < ENGINE_FEATURES_MAX);
		if (!ft->enable || ft->enable(e)) {
			e->feat[e->nfeat++] = ft;
		}
	}
}

static int features_setup(struct engine *e)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->setup ? e->feat[i]->setup(e) : 0;

		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* The features' steps: before the role's (late: false) or after it. */
static int features_step(struct engine *e, bool late)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int (*step)(struct engine *) = late ? e->feat[i]->late_step : e->feat[i]->step;
		int r = step ? step(e) : 0;

		if (r < 0) {
			return r;
		}
	}
	return 0;
}

int engine_features_end(struct engine *e)
{
	int started = 0;

	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->on_end ? e->feat[i]->on_end(e) : 0;

		if (r < 0) {
			return r;
		}
		started |= r > 0;
	}
	return started;
}

bool engine_busy(const struct engine *e)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->busy && e->feat[i]->busy(e)) {
			return true;
		}
	}
	return false;
}

/* A message this role does not take now: the session fails. */
int msg_unexpected(struct engine *e, const struct msg *m)
{
	return fail(e, PERR_PROTOCOL, -EBADMSG, "unexpected %s during transfer",
		    proto_type_name(m->type));
}

/* The messages both roles take; the rest are the role's. */
static int on_message(struct engine *e, struct msg *m)
{
	switch (m->type) {
	case MSG_PING: {
		struct msg pong = { .type = MSG_PONG };
		int r;

		pong.u.ping.nonce = m->u.ping.nonce;
		r = chan_queue(e->p->chan, &pong);
		return r < 0 ? fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
	}
	case MSG_PONG:
		return 0; /* not progress: see progress_mark */
	case MSG_ERROR:
		return fail(e, m->u.error.code ? m->u.error.code : PERR_PROTOCOL, -EREMOTEIO,
			    "peer: %s", m->u.error.text);
	default:
		break;
	}
	for (unsigned i = 0; i < e->nfeat; i++) {
		for (const struct engine_msg_row *row = e->feat[i]->msgs; row && row->type; row++) {
			if (row->type != m->type || !(row->roles & ENGINE_ROLE_BIT(e->p->role))) {
				continue;
			}
			if (!(row->flags & ENGINE_MSG_ANYTIME) && e->role->takes_messages &&
			    !e->role->takes_messages(e)) {
				return msg_unexpected(e, m);
			}
			return row->handle(e, m);
		}
	}
	return e->role->on_message(e, m);
}

static int on_control(struct engine *e)
{
	do {
		struct msg m;
		int r = chan_recv(e->p->chan, &m, e->p->idle_timeout_ms);

		if (r < 0) {
			if (r == -EPIPE || r == -ECONNRESET) {
				return fail(e, PERR_TRANSPORT, r,
					    "the peer closed the control connection mid-transfer");
			}
			char why[160];

			/* engine_run tells the peer, with this reason. */
			return fail(e, chan_err_code(r), r, "control channel: %s",
				    chan_recv_error(e->p->chan, r, why, sizeof(why)));
		}
		bool batch = m.type == MSG_FILES || m.type == MSG_FILES_ACK;

		r = on_message(e, &m);
		msg_clear(&m);
		if (r < 0) {
			return r;
		}
		/*
		 * A batch answered (or an answer taken) goes out (or is acted
		 * on) before the next batch is read: the peer works on it while
		 * we read on, instead of waiting for all we have buffered.
		 */
		if (batch) {
			break;
		}
		/*
		 * Not past the end: what follows the peer's last END (its BYE, the
		 * next OPEN) is the caller's, however soon it came.
		 */
	} while (!e->failed && !finished(e) && chan_readable_now(e->p->chan));
	return 0;
}

/* The one place a role becomes its ops; NULL: no such role. */
static const struct engine_role_ops *engine_role(enum engine_role role)
{
	switch (role) {
	case ENGINE_SENDER:
		return &engine_sender_ops;
	case ENGINE_RECEIVER:
		return &engine_receiver_ops;
	case ENGINE_BENCH_SENDER:
		return &engine_bench_sender_ops;
	case ENGINE_BENCH_RECEIVER:
		return &engine_bench_receiver_ops;
	default:
		return NULL;
	}
}

static uint32_t engine_data_chunks(const struct engine_params *p)
{
	return engine_role(p->role)->data_chunks(p);
}

bool engine_rx_copies_slots(const struct xport_ops *ops)
{
	return !ops->fence;
}

/*
 * Receiver on a transport that cannot fence slots: one private copy per slot.
 * A bench receiver checks each slot where it lies and keeps nothing.
 */
static bool engine_copies_slots(const struct engine_params *p, const struct xport_ops *ops)
{
	/* Sealed slots open into the copy: what is checked is what stays. */
	return engine_role(p->role)->peer_writes && p->role != ENGINE_BENCH_RECEIVER &&
	       (engine_rx_copies_slots(ops) || p->seal_slots ||
		(p->faults & ENGINE_FAULT_COPY_SLOTS));
}

/* A slot's descriptor: sealed slots carry their tag behind it. */
static uint32_t engine_desc_len(const struct engine_params *p)
{
	return PROTO_DESC_LEN + (p->seal_slots ? LANE_SEAL_TAG_LEN : 0);
}

/* Data chunks and the descriptor chunks behind them: what the transport registers. */
static uint64_t engine_registered_chunks(const struct engine_params *p)
{
	uint64_t data_chunks = engine_data_chunks(p);
	uint64_t desc_bytes = data_chunks * engine_desc_len(p);

	return data_chunks + (desc_bytes + p->chunk_size - 1) / p->chunk_size;
}

uint64_t engine_pinned_bytes(const struct engine_params *p, const struct xport_ops *ops)
{
	uint64_t copies = engine_copies_slots(p, ops) ? p->slots : 0;
	uint64_t bytes = (engine_registered_chunks(p) + copies) * p->chunk_size;

	/* Whole 2 MiB pages, so the pool can be backed by huge pages. */
	if (bytes >= HUGE_2M) {
		bytes = (bytes + HUGE_2M - 1) / HUGE_2M * HUGE_2M;
	}
	return bytes;
}

/*
 * Run on the device's node too: this thread, and the threads it starts
 * later (hashing, syncs), on the CPUs of that node that we may use. A hint
 * like the memory's: nothing changes when the node has none of them.
 */
static void bind_node_cpus(int node)
{
	cpu_set_t want, have, both;

	if (rdmadev_node_cpus(RDMADEV_NODESYSFS, node, &want) < 0 ||
	    sched_getaffinity(0, sizeof(have), &have) < 0) {
		return;
	}
	CPU_AND(&both, &want, &have);
	if (CPU_COUNT(&both) > 0 && !CPU_EQUAL(&both, &have)) {
		(void)sched_setaffinity(0, sizeof(both), &both);
	}
}

static int setup_memory(struct engine *e)
{
	const struct engine_params *p = e->p;
	struct xport *x = p->x;
	uint32_t data_chunks = engine_data_chunks(p);
	/* The peer reaches the slots and descriptors, never the copies behind them. */
	size_t reg_bytes = (size_t)engine_registered_chunks(p) * p->chunk_size;
	/* The size a caller reserved against its budget is the size pinned here. */
	size_t bytes = (size_t)engine_pinned_bytes(p, x->ops);
	int r;

	e->rx_copy = engine_copies_slots(p, x->ops);
	e->copy_base = (uint32_t)engine_registered_chunks(p);
	r = pool_create(bytes, p->chunk_size, &e->pool);
	if (r < 0) {
		return fail(e, PERR_INTERNAL, r, "buffer pool of %zu MiB: %s", bytes >> 20,
			    strerror(-r));
	}
	assert(e->pool->size == bytes);
	/*
	 * Before anything touches the pages again: place them on the device's
	 * node. Only a hint; the copy works the same from any node, so a refusal
	 * (no NUMA in this kernel, a node cpusets forbid) is not a failure.
	 */
	if (x->ops->numa_node) {
		int node = x->ops->numa_node(x);

		if (node >= 0) {
			(void)pool_bind_node(e->pool, node);
			bind_node_cpus(node);
		}
	}
	/* The extra chunks hold descriptors; they never enter the free list. */
	while (pool_get(e->pool) >= 0) {
	}
	for (uint32_t i = data_chunks; i-- > 0;) {
		pool_put(e->pool, i);
	}
	e->desc_area = pool_chunk(e->pool, data_chunks);
	e->desc_len = engine_desc_len(p);
	/*
	 * RDMA pins the pages now (reg_mr); on tcp nothing does until the first
	 * disk read or write (engine_pin_pool), so a run that moves no data (a
	 * re-run that skips everything) never faults in the pool.
	 */
	r = x->ops->reg_mr(x, e->pool->base, e->role->peer_writes ? reg_bytes : e->pool->size,
			   e->role->peer_writes ? XPORT_ACCESS_LOCAL | XPORT_ACCESS_REMOTE_WRITE
						: XPORT_ACCESS_LOCAL,
			   &e->mr);
	if (r < 0) {
		return fail(e, PERR_TRANSPORT, r, "register memory with the transport: %s",
			    strerror(-r));
	}
	return 0;
}

int engine_pin_pool(struct engine *e)
{
	int r;

	if (e->pool_pinned) {
		return 0;
	}
	r = pool_register_uring(e->pool, &e->ring);
	if (r < 0) {
		char advice[512];

		pool_memlock_check(e->pool->size, advice, sizeof(advice));
		return fail(e, PERR_INTERNAL, r, "register buffers with io_uring: %s (%s)",
			    strerror(-r), advice);
	}
	e->pool_pinned = true;
	return 0;
}

static int setup(struct engine *e)
{
	const struct engine_params *p = e->p;
	struct xport *x = p->x;
	struct io_uring_params up = { 0 };
	unsigned entries = p->faults & ENGINE_FAULT_SMALL_RING ? 8 : URING_ENTRIES;
	int r;

	/*
	 * Every completion on io_uring's workers (the writes, fsyncs and links)
	 * is handed to this thread as task work. By default that interrupts the
	 * thread with an IPI wherever it runs; with COOP_TASKRUN the work waits
	 * for the loop's next system call, which is never far off, and
	 * TASKRUN_FLAG tells liburing when a peek must enter the kernel to run
	 * it. Kernels before 5.19 refuse the flags: then without them.
	 */
	up.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
	r = io_uring_queue_init_params(entries, &e->ring, &up);
	if (r == -EINVAL) {
		memset(&up, 0, sizeof(up));
		r = io_uring_queue_init_params(entries, &e->ring, &up);
	}
	if (r < 0) {
		return fail(e, PERR_INTERNAL, r, "io_uring: %s", strerror(-r));
	}
	e->ring_ok = true;
	/*
	 * fsync is a blocking operation that io_uring runs on its bounded
	 * workers, by default 4 per CPU. Many small files finishing together
	 * want many fsyncs in flight: the disk queues them side by side.
	 */
	unsigned workers[2] = { IOWQ_BOUND_WORKERS, 0 };
	io_uring_register_iowq_max_workers(&e->ring, workers);
	e->uring_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->uring_efd < 0 || io_uring_register_eventfd(&e->ring, e->uring_efd) < 0) {
		return fail(e, PERR_INTERNAL, -EIO, "io_uring eventfd");
	}
	/* A probe has no data path: no pool, no lanes, no RING. */
	if (!x) {
		return features_setup(e) < 0 ? e->fail_r : e->role->setup(e);
	}
	r = setup_memory(e);
	if (r < 0) {
		return r;
	}
	for (unsigned i = 0; i < x->nlanes; i++) {
		e->lanes[i].cap = x->sq_depth;
		e->lanes[i].fifo = calloc(x->sq_depth, sizeof(struct lane_ent));
		if (!e->lanes[i].fifo) {
			return fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
		/* Receives for the peer's immediates: at most one per slot in flight. */
		for (uint32_t k = 0; k < p->slots; k++) {
			uint64_t id = i;
			r = x->ops->post_recvs(x, i, &id, 1);
			if (r < 0) {
				return fail(e, PERR_TRANSPORT, r, "post receives: %s",
					    strerror(-r));
			}
		}
	}
	for (unsigned i = 0; p->seal_slots && i < x->nlanes; i++) {
		/* Only the sender seals slots, only the receiver opens them. */
		r = slot_seal_init(&e->lanes[i].seal, p->seal_secret, i, !e->role->peer_writes);
		if (r < 0) {
			return fail(e, PERR_INTERNAL, r, "slot keys: %s", strerror(-r));
		}
	}
	e->sealed = p->seal_slots;
	r = features_setup(e);
	return r < 0 ? r : e->role->setup(e);
}

static void teardown(struct engine *e)
{
	struct xport *x = e->p->x;

	/*
	 * Threads first: their jobs hold file descriptors, files' hash states,
	 * slots and directory fds, all of which go below.
	 */
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->stop) {
			e->feat[i]->stop(e);
		}
	}
	if (e->role->stop) {
		e->role->stop(e);
	}

	/*
	 * Drain what the kernel still owns before files close and buffers go:
	 * a linkat in flight names its file by fd number (rx_link_submit).
	 * Completions the kernel dropped (on_uring) are of operations done.
	 */
	if (e->ring_ok) {
		while (e->uring_inflight > IO_URING_READ_ONCE(*e->ring.cq.koverflow)) {
			struct io_uring_cqe *cqe;
			io_uring_submit(&e->ring);
			if (io_uring_wait_cqe(&e->ring, &cqe) < 0) {
				break;
			}
			io_uring_cqe_seen(&e->ring, cqe);
			e->uring_inflight--;
		}
	}
	/* Receiver: every temp file not committed goes. */
	for (size_t i = 0; i < e->files_hw; i++) {
		struct efile *f = &e->files[i];
		if (!f->used) {
			continue;
		}
		if (f->tfd >= 0 && f->dir >= 0 && !f->renamed) {
			rx_discard(e, f);
		}
		/* A device written in place can't be left as it was: say so. */
		if (f->device && !f->renamed && e->p->ev.notice) {
			e->p->ev.notice(e->p->ev.ud, f->name,
					f->partial ? "the device is incomplete: a --partial run of "
						     "the same source finishes it"
						   : "the device is incomplete: copy it again");
		}
		file_release(e, f);
	}
	/*
	 * Revoke remote access before the memory can be reused or freed; the
	 * lanes stopped first, so that no write in flight meets a freed
	 * registration (verbs: QPs to error, flush awaited).
	 */
	if (e->mr) {
		if (x->ops->quiesce) {
			(void)x->ops->quiesce(x);
		}
		x->ops->dereg_mr(x, e->mr);
		e->mr = NULL;
	}
	pool_destroy(e->pool);
	if (e->ring_ok) {
		io_uring_queue_exit(&e->ring);
	}
	if (e->uring_efd >= 0) {
		close(e->uring_efd);
	}
	for (int i = 0; i < e->dirs_hw; i++) {
		if (e->dirs[i].path) {
			free(e->dirs[i].path);
			close(e->dirs[i].fd);
		}
	}
	for (unsigned i = 0; i < XPORT_MAX_LANES; i++) {
		free(e->lanes[i].fifo);
		lane_seal_fini(&e->lanes[i].seal);
	}
	free(e->chunks);
	free(e->free_slots);
	free(e->rslots);
	free(e->pieces);
	free(e->commit_batch);
	free(e->batch);
	free(e->seen.h);
	free(e->inflight.h);
	free(e->rename_root);
	free(e->fresh.h);
	for (size_t i = 0; i < e->ndirs_meta; i++) {
		free(e->dirs_meta[i].name);
	}
	free(e->dirs_meta);
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->release) {
			e->feat[i]->release(e);
		}
	}
}

static bool finished(struct engine *e)
{
	return e->got_end && !engine_busy(e);
}

/*
 * What keeps a transfer alive: payload bytes moved, credits returned or
 * received, and entries committed. Control chatter (PING, PONG, FILES with
 * refused entries) is not progress: a peer that only answers PINGs is idle,
 * and the session ends after the idle timeout with its temp files removed.
 */
static uint64_t progress_mark(const struct engine *e)
{
	uint64_t mark = e->bytes_progress + e->credits + e->st.files_ok + e->st.files_skipped +
			e->st.files_updated + e->st.files_planned;

	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->progress) {
			mark += e->feat[i]->progress(e);
		}
	}
	return mark;
}

/* Our own disk work in flight (reads, writes, fsyncs): waiting on it is not idling. */
static bool local_io_busy(const struct engine *e)
{
	return e->uring_inflight > 0 || e->sync_running || e->sums_inflight > 0;
}

/* Before the wait: the role's work, then everything queued on its way. 1: finished. */
static int loop_work(struct engine *e)
{
	const struct engine_params *p = e->p;
	int r;

	if (p->stop && *p->stop) {
		chan_send_error(p->chan, PERR_SHUTDOWN, "interrupted");
		e->error_sent = true;
		return fail(e, PERR_SHUTDOWN, -EINTR, "interrupted");
	}
	r = features_step(e, false);
	if (r >= 0) {
		r = e->role->step(e);
	}
	if (r >= 0) {
		r = features_step(e, true);
	}
	if (r >= 0) {
		r = batch_flush(e);
	}
	if (r >= 0) {
		r = uring_flush(e);
	}
	if (r < 0) {
		return r;
	}
	r = chan_flush(p->chan);
	if (r < 0) {
		return fail(e, PERR_IO, r, "control channel write failed: %s", strerror(-r));
	}
	return finished(e) ? 1 : 0;
}

/*
 * After the wait: what the sources have for us. A completion handler that
 * returns nothing (a write, an fsync) records its failure in e: that counts too.
 */
static int loop_dispatch(struct engine *e, const struct pollfd *pfd, unsigned nfds)
{
	int r = 0;

	/* Completions the kernel held past a full queue come with no signal. */
	if ((pfd[2].revents & POLLIN) || uring_ready(e)) {
		r = on_uring(e);
	}
	for (unsigned i = LOOP_FIXED_FDS; i < nfds && r >= 0; i++) {
		const struct engine_watch *s = engine_watch_find(e, pfd[i].fd);

		if (s && (pfd[i].revents & POLLIN) &&
		    (!e->failed || (s->flags & ENGINE_WATCH_ALWAYS))) {
			r = s->on_ready(e);
		}
	}
	if (r >= 0 && !e->failed &&
	    ((pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) || chan_readable_now(e->p->chan))) {
		r = on_control(e);
	}
	/*
	 * A transport whose descriptor reports an error or a hang-up (a device
	 * detached, a channel closed) would wake poll() at once forever and
	 * never have a completion to give: that ends the session, now.
	 */
	if (r >= 0 && !e->failed && !finished(e) &&
	    (pfd[1].revents & (POLLERR | POLLHUP | POLLNVAL))) {
		const char *why =
		    e->p->x->ops->last_error ? e->p->x->ops->last_error(e->p->x) : NULL;

		r = fail(e, PERR_TRANSPORT, -EIO, "transport: its event descriptor reports %s%s%s",
			 (pfd[1].revents & POLLNVAL)  ? "an invalid descriptor"
			 : (pfd[1].revents & POLLERR) ? "an error"
						      : "a hang-up",
			 why ? ": " : "", why ? why : "");
	}
	/* --poll: the completion queue every turn, woken or not. */
	if (r >= 0 && !e->failed && !finished(e) &&
	    ((pfd[1].revents & POLLIN) || (e->p->busy_poll && e->p->x))) {
		r = on_xport(e);
	}
	return r >= 0 && e->failed ? e->fail_r : r;
}

/*
 * Skip level checksum: a file waiting for a digest (ours sent, the peer's
 * answer to come, or the other way round) may keep the peer busy for as
 * long as reading it takes. That much more silence is allowed, at the
 * slowest disk we expect (50 MB/s, the size the peer declared or asked
 * about), so a big file is not cut by the idle timeout and a peer that
 * never answers still is. The same for a sender's file whose FILE_DONE is
 * sent: the receiver's commit reads or writes it whole before it answers
 * (the fsync of a big file, a device's read back, --delta's read back of
 * the unchanged chunks), with nothing to say meanwhile.
 */
#define SUM_WAIT_MIN_RATE 50000000.0

static double sum_wait_allowance_ms(const struct engine *e)
{
	uint64_t max = 0;

	for (size_t i = 0; i < e->files_hw; i++) {
		const struct efile *f = &e->files[i];
		bool committing = e->role == &engine_sender_ops && f->done_sent;

		if (f->used && (f->sum_wanted || committing) && f->size > max) {
			max = f->size;
		}
	}
	return (double)max / SUM_WAIT_MIN_RATE * 1000;
}

/* Progress keeps the session alive; none for idle_ms ends it, a PING every third of that. */
static int loop_idle(struct engine *e, uint64_t mark, uint64_t before, int idle_ms)
{
	const struct engine_params *p = e->p;

	if (progress_mark(e) != mark || local_io_busy(e)) {
		ts_now(&e->last_activity);
		if (p->ev.progress && e->bytes_progress != before) {
			p->ev.progress(p->ev.ud, e->bytes_progress);
		}
	} else if (ts_since(&e->last_activity) * 1000 > idle_ms &&
		   ts_since(&e->last_activity) * 1000 > idle_ms + sum_wait_allowance_ms(e)) {
		chan_send_error(p->chan, PERR_TIMEOUT, "idle timeout: no data progress");
		e->error_sent = true;
		return fail(e, PERR_TIMEOUT, -ETIMEDOUT, "no data progress for %d s",
			    idle_ms / 1000);
	} else if (ts_since(&e->last_activity) * 1000 > idle_ms / 3 &&
		   ts_since(&e->last_ping) * 1000 > idle_ms / 3) {
		/* Tells a peer we are alive; its PONG does not keep us waiting longer. */
		struct msg ping = { .type = MSG_PING };
		int r;

		ts_now(&e->last_ping);
		r = chan_queue(p->chan, &ping);
		if (r < 0) {
			return fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
	}
	return 0;
}

static int loop(struct engine *e)
{
	const struct engine_params *p = e->p;
	struct xport *x = p->x;
	int idle_ms = p->idle_timeout_ms > 0 ? p->idle_timeout_ms : 300000;

	ts_now(&e->last_activity);
	e->last_ping = e->last_activity;
	while (!e->failed) {
		struct pollfd pfd[LOOP_FIXED_FDS + ENGINE_WATCH_MAX] = {
			{ .fd = tls_fd(p->chan->tls), .events = POLLIN },
			{ .fd = x ? x->ops->event_fd(x) : -1,
			  .events = POLLIN }, /* none: a probe */
			{ .fd = e->uring_efd, .events = POLLIN },
		};
		uint64_t before = e->bytes_progress, mark = progress_mark(e);
		unsigned nfds;
		int r, wait_ms;

		r = loop_work(e);
		if (r != 0) {
			return r < 0 ? r : 0;
		}
		/* The sources as they are now: a worker may have started in the step. */
		for (nfds = LOOP_FIXED_FDS; nfds < LOOP_FIXED_FDS + e->nwatches; nfds++) {
			pfd[nfds].fd = e->watches[nfds - LOOP_FIXED_FDS].fd;
			pfd[nfds].events = POLLIN;
		}
		/* Work that is ours to do (a --delete pass) goes on without sleeping. */
		wait_ms = chan_readable_now(p->chan) || p->busy_poll || engine_busy(e) ||
				  e->again || uring_ready(e)
			      ? 0
			      : 1000;
		if (wait_ms && p->bwlimit) {
			wait_ms = 10;
		}
		if (poll(pfd, nfds, wait_ms) < 0 && errno != EINTR) {
			return fail(e, PERR_INTERNAL, negerrno(), "poll: %s", strerror(errno));
		}
		r = loop_dispatch(e, pfd, nfds);
		if (r >= 0) {
			r = loop_idle(e, mark, before, idle_ms);
		}
		if (r < 0) {
			return r;
		}
	}
	return e->fail_r;
}

/*
 * A session that fails here tells the peer why before the caller closes the
 * connection (issue 8 item 11): ERROR with the failure's code and reason, so
 * a protocol violation is never answered by a bare EOF. Not when the peer
 * ended it with its own ERROR, or when it was told already.
 */
static void report_failure(struct engine *e)
{
	if (e->error_sent || e->fail_r == -EREMOTEIO) {
		return;
	}
	/* On a dead channel this fails quietly: nothing more to do then. */
	chan_send_error(e->p->chan, e->err_code ? e->err_code : PERR_INTERNAL, "%s", e->err);
	e->error_sent = true;
}

int engine_run(const struct engine_params *p, struct engine_stats *ret_stats, uint32_t *ret_code,
	       char *err, size_t errlen)
{
	struct engine *e;
	int r;

	/* No transport: a probe, which only a dry run may be. */
	if (!p->chan || !engine_role(p->role) || (!p->x && !(p->open_flags & PROTO_OPEN_DRY_RUN)) ||
	    (p->x &&
	     (p->slots == 0 || p->slots > PROTO_MAX_SLOTS || p->chunk_size < PROTO_MIN_CHUNK ||
	      p->x->nlanes == 0 || p->x->sq_depth < 4))) {
		snprintf(err, errlen, "bad engine parameters");
		*ret_code = PERR_INTERNAL;
		return -EINVAL;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		return -ENOMEM;
	}
	e->files = mem_map_thp(FILE_TABLE * sizeof(*e->files), &e->files_len);
	if (!e->files) {
		free(e);
		return -ENOMEM;
	}
	e->p = p;
	e->role = engine_role(p->role);
	e->err = err;
	e->errlen = errlen;
	e->uring_efd = -1;
	e->sync_efd = -1;
	e->sum_efd = -1;
	e->oldest_id = 1;
	/* Our own caps too: a test plays a peer from before ZEROS (RDMACP_TEST_CAPS_OFF). */
	e->zeros =
	    p->x && (p->peer_caps & PROTO_CAP_ZEROS) && (hello_local_caps() & PROTO_CAP_ZEROS);
	if (p->peer_caps & PROTO_CAP_WIDER_WINDOW) {
		e->files_window = PROTO_FILES_WIDER;
		e->files_span = PROTO_SPAN_WIDER;
	} else if (p->peer_caps & PROTO_CAP_WIDE_WINDOW) {
		e->files_window = PROTO_FILES_WIDE;
		e->files_span = PROTO_SPAN_WIDE;
	} else {
		e->files_window = PROTO_FILES_NARROW;
		e->files_span = PROTO_SPAN_NARROW;
	}
	/* The receiver's own knowledge only: a pull's is the client's option, a push's the OPEN. */
	e->assume_zero = p->role == ENGINE_RECEIVER && (p->open_flags & PROTO_OPEN_ASSUME_ZERO) &&
			 (hello_local_caps() & PROTO_CAP_ASSUME_ZERO);
	err[0] = '\0';
	features_choose(e);

	r = setup(e);
	if (r >= 0) {
		r = loop(e);
	}
	if (r < 0 && !e->failed) {
		/* Every failure is recorded where it happens; one that was not still counts. */
		fail(e, PERR_INTERNAL, r, "%s", strerror(-r));
	}
	if (e->failed) {
		/* The failure's own errno: -EREMOTEIO tells the caller the peer ended it. */
		r = e->fail_r < 0 ? e->fail_r : r < 0 ? r : -EIO;
		report_failure(e);
	}
	teardown(e);
	*ret_stats = e->st;
	*ret_code = e->failed ? e->err_code : PERR_OK;
	munmap(e->files, e->files_len);
	free(e);
	return r < 0 ? r : 0;
}
