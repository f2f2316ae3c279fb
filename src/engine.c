/* SPDX-License-Identifier: MIT */
/*
 * The transfer engine (see engine.h for the shape): engine_run, the set-up
 * of a session (io_uring, the pool and its registration, lanes, the
 * features, the role) and its tear-down. The loop is engine_loop.c, the
 * file table engine_files.c, the features' list engine_features.c.
 */
#include "engine-internal.h"

#include <sys/mman.h>

#include "log.h"
#include "rdmadev.h"

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
	       ((engine_rx_copies_slots(ops) && !p->windows) || p->seal_slots ||
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
	uint64_t copies = engine_copies_slots(p, ops) ? engine_rx_copies(p) : 0;
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

/*
 * What the peer may do with our registration: nothing (a sender), write it
 * (a receiver), or write it only through the windows the receiver opens
 * over its slots (memory windows: the registration's own key writes
 * nothing; the descriptors get a registration of their own,
 * engine_windows.c).
 */
static unsigned engine_ring_access(const struct engine_params *p, bool peer_writes)
{
	if (!peer_writes) {
		return XPORT_ACCESS_LOCAL;
	}
	return XPORT_ACCESS_LOCAL |
	       (p->windows && !p->seal_slots ? XPORT_ACCESS_WINDOWS : XPORT_ACCESS_REMOTE_WRITE);
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

	if (p->windows && !x->windows) {
		return engine_fail(e, PERR_INTERNAL, -EINVAL,
				   "memory windows on lanes without them");
	}
	e->rx_copy = engine_copies_slots(p, x->ops);
	e->copy_base = (uint32_t)engine_registered_chunks(p);
	r = pool_create(bytes, p->chunk_size, &e->pool);
	if (r < 0) {
		return engine_fail(e, PERR_INTERNAL, r, "buffer pool of %zu MiB: %s", bytes >> 20,
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
	 * disk read or write (engine_pin_chunk: the chunks read into; engine_pin_pool), so a run that moves no data (a
	 * re-run that skips everything) never faults in the pool.
	 */
	r = x->ops->reg_mr(x, e->pool->base, e->role->peer_writes ? reg_bytes : e->pool->size,
			   engine_ring_access(p, e->role->peer_writes), &e->mr);
	if (r < 0) {
		return engine_fail(e, PERR_TRANSPORT, r, "register memory with the transport: %s",
				   strerror(-r));
	}
	return 0;
}

static int engine_pin_failed(struct engine *e, int r)
{
	char advice[512];

	pool_memlock_check(e->pool->size, advice, sizeof(advice));
	return engine_fail(e, PERR_INTERNAL, r, "register buffers with io_uring: %s (%s)",
			   strerror(-r), advice);
}

int engine_pin_pool(struct engine *e)
{
	int r = 0;

	if (!e->pool_pinned) {
		r = pool_register_uring(e->pool, &e->ring);
	} else if (e->pool->chunk_pinned) {
		/* Registered chunk by chunk so far: the rest of it now. */
		for (uint32_t i = 0; i < e->pool->nchunks && r >= 0; i++) {
			r = pool_pin_chunk(e->pool, i);
		}
	}
	if (r < 0) {
		return engine_pin_failed(e, r);
	}
	e->pool_pinned = true;
	return 0;
}

/*
 * The sender's one rule for what its pool costs: a chunk is registered with
 * io_uring (faulted in, zeroed by the kernel, pinned) when it is first read
 * into, so a push that reads little pays for the few chunks it used, not for
 * the pool's size. The free list hands out the lowest chunks first, keeping
 * that set as small as the reads in flight. The whole pool goes in at once
 * when it is too big for io_uring's table, and under a locked-memory limit:
 * there the pool was fitted to what the limit left (memfit), and pinning it
 * whole holds that, where chunk by chunk the user's other processes could
 * take it and refuse a later chunk mid-transfer.
 */
int engine_pin_chunk(struct engine *e, uint32_t ci)
{
	int r = 0;

	if (!e->pool_pinned) {
		r = pool_memlock_unbounded() > 0 ? pool_register_uring_lazy(e->pool, &e->ring)
						 : -E2BIG;
		if (r == -E2BIG) {
			r = pool_register_uring(e->pool, &e->ring);
		}
		if (r < 0) {
			return engine_pin_failed(e, r);
		}
		e->pool_pinned = true;
	}
	r = pool_pin_chunk(e->pool, ci);
	return r < 0 ? engine_pin_failed(e, r) : 0;
}

static int setup_uring(struct engine *e)
{
	struct io_uring_params up = { 0 };
	unsigned entries = e->p->faults & ENGINE_FAULT_SMALL_RING ? 8 : URING_ENTRIES;
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
		return engine_fail(e, PERR_INTERNAL, r, "io_uring: %s", strerror(-r));
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
		return engine_fail(e, PERR_INTERNAL, -EIO, "io_uring eventfd");
	}
	return 0;
}

/* Each lane's queue of work requests, its receives posted. */
static int setup_lanes(struct engine *e)
{
	const struct engine_params *p = e->p;
	struct xport *x = p->x;
	int r;

	e->slot_lane = calloc(p->slots, sizeof(*e->slot_lane));
	if (!e->slot_lane) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < x->nlanes; i++) {
		e->lanes[i].cap = x->sq_depth;
		e->lanes[i].fifo = calloc(x->sq_depth, sizeof(struct lane_ent));
		if (!e->lanes[i].fifo) {
			return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
		/* Receives for the peer's immediates: at most one per slot in flight. */
		for (uint32_t k = 0; k < p->slots; k++) {
			uint64_t id = i;
			r = x->ops->post_recvs(x, i, &id, 1);
			if (r < 0) {
				return engine_fail(e, PERR_TRANSPORT, r, "post receives: %s",
						   strerror(-r));
			}
		}
	}
	return 0;
}

/* io_uring, then (a data path) the pool and lanes, then the features, then the role. */
static int setup(struct engine *e)
{
	int r = setup_uring(e);

	/* A probe has no data path: no pool, no lanes, no RING. */
	if (r >= 0 && e->p->x) {
		r = setup_memory(e);
		if (r >= 0) {
			r = setup_lanes(e);
		}
	}
	if (r >= 0) {
		r = engine_features_setup(e);
	}
	return r < 0 ? r : e->role->setup(e);
}

/*
 * Drain what the kernel still owns before files close and buffers go:
 * a linkat in flight names its file by fd number (rx_link_submit).
 * Completions the kernel dropped (uring_on_ready) are of operations done.
 */
static void teardown_uring_drain(struct engine *e)
{
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
}

/* Every entry released; a receiver's temp files not committed go. */
static void teardown_files(struct engine *e)
{
	for (size_t i = 0; i < e->files_hw; i++) {
		struct efile *f = file_at(e, i);
		if (!f->used) {
			continue;
		}
		if (e->role->abandon) {
			e->role->abandon(e, f);
		}
		file_release(e, f);
	}
}

/*
 * Revoke remote access before the memory can be reused or freed; the
 * lanes stopped first, so that no write in flight meets a freed
 * registration (verbs: QPs to error, flush awaited).
 */
static void teardown_memory(struct engine *e)
{
	struct xport *x = e->p->x;

	if (e->mr) {
		if (x->ops->quiesce) {
			(void)x->ops->quiesce(x);
		}
		x->ops->dereg_mr(x, e->mr);
		e->mr = NULL;
	}
	if (e->pool) {
		log_debug("io_uring registered %zu of the pool's %zu bytes", e->pool->pinned_bytes,
			  e->pool->size);
	}
	pool_destroy(e->pool);
}

static void teardown(struct engine *e)
{
	/*
	 * Threads first: their jobs hold file descriptors, files' hash states,
	 * slots and directory fds, all of which go below. The worker pool's
	 * before the features' own.
	 */
	engine_jobs_stop(e);
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->stop) {
			e->feat[i]->stop(e);
		}
	}
	if (e->role->stop) {
		e->role->stop(e);
	}
	teardown_uring_drain(e);
	teardown_files(e);
	teardown_memory(e);
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
	}
	free(e->slot_lane);
	free(e->chunks);
	free(e->free_slots);
	free(e->free_pos);
	free(e->rslots);
	free(e->commit_batch);
	free(e->batch);
	free(e->seen.h);
	free(e->inflight.h);
	free(e->rename_root);
	free(e->fresh.h);
	free(e->timed.h);
	for (size_t i = 0; i < e->ndirs_meta; i++) {
		free(e->dirs_meta[i].name);
	}
	free(e->dirs_meta);
	free(e->kept_acks);
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->release) {
			e->feat[i]->release(e);
		}
	}
	engine_features_free(e);
}

/*
 * A session that fails here tells the peer why before the caller closes the
 * connection: ERROR with the failure's code and reason, so a protocol
 * violation is never answered by a bare EOF. Not when the peer
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

/* No transport: a probe, which only a dry run may be. */
static bool engine_params_ok(const struct engine_params *p)
{
	return p->chan && engine_role(p->role) && (p->x || (p->open_flags & PROTO_OPEN_DRY_RUN)) &&
	       (!p->x ||
		(p->slots > 0 && p->slots <= PROTO_MAX_SLOTS && p->chunk_size >= PROTO_MIN_CHUNK &&
		 p->x->nlanes > 0 && p->x->sq_depth >= 4));
}

/* A session's state, its file table mapped; NULL: no memory. */
static struct engine *engine_new(const struct engine_params *p, char *err, size_t errlen)
{
	struct engine *e = calloc(1, sizeof(*e));

	if (!e) {
		return NULL;
	}
	e->p = p;
	e->role = engine_role(p->role);
	e->err = err;
	e->errlen = errlen;
	e->uring_efd = -1;
	e->sync_q = -1;
	e->sum_q = -1;
	e->oldest_id = 1;
	e->euid_root = geteuid() == 0;
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
	err[0] = '\0';
	engine_digest_choose(e);
	if (engine_features_choose(e) < 0) {
		engine_features_free(e);
		free(e);
		return NULL;
	}
	e->files = mem_map_thp(FILE_TABLE * e->file_stride, &e->files_len);
	if (!e->files) {
		engine_features_free(e);
		free(e);
		return NULL;
	}
	return e;
}

int engine_run(const struct engine_params *p, struct engine_stats *ret_stats, uint32_t *ret_code,
	       char *err, size_t errlen)
{
	struct engine *e;
	int r;

	if (!engine_params_ok(p)) {
		snprintf(err, errlen, "bad engine parameters");
		*ret_code = PERR_INTERNAL;
		return -EINVAL;
	}
	e = engine_new(p, err, errlen);
	if (!e) {
		return -ENOMEM;
	}

	r = setup(e);
	if (r >= 0) {
		r = engine_loop(e);
	}
	if (r < 0 && !e->failed) {
		/* Every failure is recorded where it happens; one that was not still counts. */
		engine_fail(e, PERR_INTERNAL, r, "%s", strerror(-r));
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
