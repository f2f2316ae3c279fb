/* SPDX-License-Identifier: MIT */
/*
 * The receiver's commit path: a file complete is verified, made durable
 * (fsync through io_uring, or one syncfs on a thread for a batch of small
 * files), linked or renamed under its name, and reported once an fsync of
 * its directory covers the rename (shared by the files renamed meanwhile),
 * or the next batch's syncfs, which then serves both.
 */
#include "engine-internal.h"

static int rx_submit_fsync(struct engine *e, struct efile *f);
static int rx_link_submit(struct engine *e, struct efile *f);

static int send_result(struct engine *e, struct efile *f, uint32_t status, const char *text)
{
	struct msg m = { .type = MSG_FILE_RESULT };

	m.u.file_result.id = f->id;
	m.u.file_result.status = proto_err_for_peer(status, e->p->peer_caps);
	snprintf(m.u.file_result.text, sizeof(m.u.file_result.text), "%s", text);
	return chan_queue(e->p->chan, &m);
}

/* Receiver: the file is resolved one way or the other; report and free it. */
int rx_resolve(struct engine *e, struct efile *f)
{
	int r;

	engine_rx_settled(e, f, f->failed ? ENGINE_RX_FAILED : ENGINE_RX_DONE);
	if (f->failed) {
		if (f->tfd >= 0 && f->dir >= 0 && !f->renamed) {
			rx_discard(e, f);
		}
		if (f->device && file_fail_buf(f)) {
			size_t n = strlen(f->fail_text);

			snprintf(f->fail_text + n, FILE_FAIL_TEXT_LEN - n,
				 "; the device is incomplete");
		}
		file_note_failure(e, f->name, f->ftype, f->fail_code, !f->fail_peer,
				  file_fail_text(f));
		r = send_result(e, f, f->fail_code, file_fail_text(f));
	} else {
		/* Reported only after verify, fsync, rename and the directory fsync. */
		uint64_t unsent = engine_file_unsent_bytes(e, f);

		if (f->kept > 0) {
			file_note_resumed(e, f, f->size - f->kept - unsent, f->kept, f->done_hash);
		} else {
			file_note_committed(e, f, f->size - unsent,
					    f->ftype == PROTO_FT_REG ? f->done_hash : NULL);
		}
		r = send_result(e, f, PERR_OK, "");
	}
	file_release(e, f);
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* The sender's own failure, or sizes that do not add up: f fails. */
static void rx_finish_sizes(const struct engine *e, struct efile *f)
{
	struct engine_unsent u = engine_file_unsent(e, f);
	uint64_t unsent = u.zeroed + u.skipped;

	if (f->done_status != PERR_OK && !f->failed) {
		/* Its reason is in fail_text already (rx_file_done). */
		f->failed = true;
		f->fail_code = f->done_status;
		f->fail_peer = true; /* the sender's own failure */
	} else if (f->done_bytes + f->kept + unsent != f->size ||
		   f->written + f->kept + unsent != f->size || f->hash_off != f->size) {
		file_fail(f, PERR_PROTOCOL,
			  "size mismatch: announced %llu, sent %llu, kept %llu, zeros %llu",
			  (unsigned long long)f->size, (unsigned long long)f->done_bytes,
			  (unsigned long long)f->kept, (unsigned long long)u.zeroed);
	}
}

/* Is f's digest (its tree's, or its bytes') the sender's? Else f fails. */
static bool rx_finish_verified(struct engine *e, struct efile *f)
{
	uint8_t h[HASH_LEN];

	if (f->dg && f->dg->rx_final) {
		f->dg->rx_final(e, f, h);
	} else {
		file_hash_final(&f->hash, h);
	}
	if (CRYPTO_memcmp(h, f->done_hash, HASH_LEN) != 0) {
		char a[33], b[33];
		hash_to_hex(f->done_hash, a);
		hash_to_hex(h, b);
		file_fail(f, PERR_INTEGRITY, "checksum mismatch: sender xxh128 %s, received %s", a,
			  b);
		return false;
	}
	return true;
}

/* Receiver: everything the sender sent has arrived and is on disk? */
int rx_maybe_finish(struct engine *e, struct efile *f)
{
	if (!f->got_done || f->fsyncing || f->linking || f->writes_out || f->held || f->hash_jobs ||
	    f->zeros_out || f->recv_bytes < f->done_bytes) {
		return 0;
	}
	rx_finish_sizes(e, f);
	if (f->failed || !rx_finish_verified(e, f)) {
		return rx_resolve(e, f);
	}
	/* Zeros at the end are a hole that only the size makes (a device keeps its size). */
	if (engine_file_unsent(e, f).zeroed > 0) {
		int r = sparse_grow_to(f->tfd, f->size);

		if (r < 0) {
			file_fail(f, errno_to_perr(r), "size %s: %s", f->name, strerror(-r));
			return rx_resolve(e, f);
		}
	}
	engine_rx_complete(e, f);
	/* A device keeps its own node: no mode or times from the source. */
	if (!f->failed && !f->device) {
		rx_apply_meta(e, f);
	}
	if (f->failed) {
		return rx_resolve(e, f);
	}
	f->fsyncing = true;
	if (f->size < SYNC_BATCH_FILE_MAX && !f->device) {
		/* Maybe together with others: rx_sync_step decides. */
		e->sync_wait[e->nsync_wait++] = file_index(e, f);
		return 0;
	}
	return rx_submit_fsync(e, f);
}

/* fsync through io_uring so many files sync at once. */
static int rx_submit_fsync(struct engine *e, struct efile *f)
{
	struct io_uring_sqe *sqe = uring_sqe(e);

	if (!sqe) {
		return engine_fail(e, PERR_IO, -EBUSY, "io_uring queue full");
	}
	io_uring_prep_fsync(sqe, f->tfd, 0);
	io_uring_sqe_set_data64(sqe, UD(UD_FSYNC, file_index(e, f)));
	return 0;
}

/*
 * The sync: a queue of its own in the worker pool (engine_jobs.h), so a
 * syncfs, which blocks, never holds up other work. One batch at a time
 * (sync_running): the loop fills sync_fds, the job syncs each, its answer
 * comes back even once the session has failed (the files it holds go on).
 */
struct sync_job {
	struct engine_job job;
	const int *fds;
	size_t n;
	int r;
};

static void rx_sync_done(struct engine *e, int res);

static void sync_job_run(struct engine_job *job, void *local)
{
	struct sync_job *j = container_of(job, struct sync_job, job);

	(void)local;
	for (size_t i = 0; i < j->n; i++) {
		if (syncfs(j->fds[i]) < 0 && j->r == 0) {
			j->r = negerrno();
		}
	}
}

static int sync_job_done(struct engine *e, struct engine_job *job)
{
	struct sync_job *j = container_of(job, struct sync_job, job);
	int r = j->r;

	free(j);
	rx_sync_done(e, r);
	return 0;
}

static void sync_job_drop(struct engine *e, struct engine_job *job)
{
	(void)e;
	free(container_of(job, struct sync_job, job));
}

static const struct engine_job_ops sync_job_ops = {
	.run = sync_job_run,
	.done = sync_job_done,
	.drop = sync_job_drop,
};

static const struct engine_jobq_ops sync_queue_ops = {
	.flags = ENGINE_JOBQ_ALWAYS,
};

/* Hand the batch in sync_fds to the sync's queue (made the first time). */
static int rx_sync_submit(struct engine *e)
{
	struct sync_job *j;

	if (e->sync_q < 0) {
		int q = engine_jobs_queue(e, &sync_queue_ops, NULL);

		if (q < 0) {
			return q;
		}
		e->sync_q = q;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		return -ENOMEM;
	}
	*j = (struct sync_job){ .job.ops = &sync_job_ops, .fds = e->sync_fds, .n = e->nsync_fds };
	engine_jobs_submit(e, (unsigned)e->sync_q, &j->job);
	return 0;
}

/* Names made and waiting for their directory's fsync (rx_commit_batch would start one)? */
static bool rx_names_wait(const struct engine *e)
{
	for (int i = 0; i < e->dirs_hw; i++) {
		const struct dirent_cache *d = &e->dirs[i];

		if (d->path && d->dirty && !d->syncing && !d->links_out) {
			return true;
		}
	}
	return false;
}

/* The n files of list (indexes into the table) fsynced each on its own. */
static int rx_fsync_each(struct engine *e, const uint32_t *list, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		int r = rx_submit_fsync(e, file_at(e, list[i]));

		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* The waiting files' directories, one per file system: enough for syncfs. */
static void rx_sync_pick_fds(struct engine *e)
{
	e->nsync_fds = 0;
	for (uint32_t i = 0; i < e->nsync_wait; i++) {
		struct efile *f = file_at(e, e->sync_wait[i]);
		const struct dirent_cache *d = &e->dirs[f->dir];
		bool dup = false;

		for (size_t k = 0; k < e->nsync_fds && !dup; k++) {
			dup = e->sync_devs[k] == d->dev;
		}
		if (!dup && e->nsync_fds < ARRAY_SIZE(e->sync_fds)) {
			e->sync_devs[e->nsync_fds] = d->dev;
			e->sync_fds[e->nsync_fds++] = d->fd;
		}
	}
}

/*
 * The syncfs also makes durable the names linked before it started:
 * it is their directory's sync, in place of an fsync of its own (one
 * journal commit where there would be two).
 */
static void rx_sync_dirs_by_syncfs(struct engine *e)
{
	for (int i = 0; i < e->dirs_hw; i++) {
		struct dirent_cache *d = &e->dirs[i];

		if (!d->path || !d->dirty || d->syncing || d->dev == UINT64_MAX) {
			continue;
		}
		for (size_t k = 0; k < e->nsync_fds; k++) {
			if (e->sync_devs[k] == d->dev) {
				d->syncing = d->by_syncfs = true;
				d->dirty = false;
				rx_dir_keep_time(d);
				d->submitted++;
				break;
			}
		}
	}
}

/*
 * Small files waiting to be durable: many → one syncfs per file system, on
 * a thread (syncfs blocks and io_uring has no such operation); few → fsync
 * each, unless names wait for a directory fsync too: one syncfs then serves
 * both (one journal commit where there would be several). Files that finish
 * while a syncfs runs wait for the next one.
 */
int rx_sync_step(struct engine *e)
{
	int r;

	if (e->sync_running || e->nsync_wait == 0) {
		return 0;
	}
	if (e->nsync_wait < SYNC_BATCH_MIN && !rx_names_wait(e)) {
		r = rx_fsync_each(e, e->sync_wait, e->nsync_wait);
		if (r < 0) {
			return r;
		}
		e->nsync_wait = 0;
		return 0;
	}
	rx_sync_pick_fds(e);
	memcpy(e->sync_run, e->sync_wait, e->nsync_wait * sizeof(*e->sync_wait));
	e->nsync_run = e->nsync_wait;
	e->nsync_wait = 0;
	if (rx_sync_submit(e) < 0) {
		/* No sync queue (no thread, no memory): fsync each instead. */
		r = rx_fsync_each(e, e->sync_run, e->nsync_run);
		if (r < 0) {
			return r;
		}
		e->nsync_run = 0;
		return 0;
	}
	e->sync_running = true;
	rx_sync_dirs_by_syncfs(e);
	return 0;
}

/* The batch's syncfs finished: each of its files goes on as if fsynced alone. */
static void rx_sync_done(struct engine *e, int res)
{
	if (!e->sync_running) {
		return;
	}
	e->sync_running = false;
	for (int i = 0; i < e->dirs_hw; i++) {
		if (e->dirs[i].by_syncfs) {
			e->dirs[i].by_syncfs = false;
			rx_dirsync_done(e, (uint32_t)i, res);
		}
	}
	e->link_chain = NULL;
	e->link_chaining = true;
	for (uint32_t i = 0; i < e->nsync_run; i++) {
		rx_fsync_done(e, file_at(e, e->sync_run[i]), res);
	}
	e->link_chaining = false;
	e->link_chain = NULL;
	e->nsync_run = 0;
}

void rx_fsync_done(struct engine *e, struct efile *f, int res)
{
	struct dirent_cache *d = &e->dirs[f->dir];

	f->fsyncing = false;
	if (res < 0) {
		/* Never retried: the page cache may have dropped the data (fsyncgate). */
		file_fail(f, errno_to_perr(res), "fsync: %s", strerror(-res));
		rx_resolve(e, f);
		return;
	}
	int r;

	if (engine_rx_durable(e, f) != ENGINE_DECLINED) {
		return; /* the feature names it (the --partial store), or there is none (a device) */
	}
	if (f->tmpname && f->tmpname[0]) {
		r = renameat(d->fd, f->tmpname, d->fd, f->leaf) < 0 ? negerrno() : 0;
	} else if (rx_link_submit(e, f) == 0) {
		return; /* rx_link_done */
	} else {
		r = fspath_link_anon(d->fd, f->tfd, f->leaf);
	}
	rx_named(e, f, r);
}

/*
 * An unnamed file's name, made off the loop: io_uring runs linkat on a
 * worker thread. The name is a single component (rx_locate), made in the
 * held directory fd, and linkat never follows or replaces what is there; any
 * failure (the name taken, AT_EMPTY_PATH not allowed here, no LINKAT in this
 * kernel) goes to fspath_link_anon, which settles it. f stays open and in
 * the table until the completion (f->linking), and teardown drains io_uring
 * before it closes files, so the fd number is this file's when the worker
 * uses it. Returns 0 when submitted.
 */
static int rx_link_submit(struct engine *e, struct efile *f)
{
	struct io_uring_sqe *sqe;

	if (!f->leaf || strchr(f->leaf, '/')) {
		return -EINVAL;
	}
	sqe = uring_sqe(e);
	if (!sqe) {
		return -EBUSY;
	}
	io_uring_prep_linkat(sqe, f->tfd, "", e->dirs[f->dir].fd, f->leaf, AT_EMPTY_PATH);
	io_uring_sqe_set_data64(sqe, UD(UD_LINK, file_index(e, f)));
	if (e->link_chaining) {
		if (e->link_chain) {
			e->link_chain->flags |= IOSQE_IO_HARDLINK;
		}
		e->link_chain = sqe;
		f->link_batch = true;
		e->dirs[f->dir].links_out++;
	}
	f->linking = true;
	return 0;
}

void rx_link_done(struct engine *e, struct efile *f, int res)
{
	f->linking = false;
	if (f->link_batch) {
		f->link_batch = false;
		e->dirs[f->dir].links_out--;
	}
	if (res < 0) {
		res = fspath_link_anon(e->dirs[f->dir].fd, f->tfd, f->leaf);
	}
	rx_named(e, f, res);
}

/* f's data is durable and r says whether it has its name now (0) or why not. */
void rx_named(struct engine *e, struct efile *f, int r)
{
	struct dirent_cache *d = &e->dirs[f->dir];

	if (r == 0) {
		engine_rx_named(e, f);
	}
	if (r < 0) {
		file_fail(f, errno_to_perr(r), "commit under its name: %s", strerror(-r));
		rx_resolve(e, f);
		return;
	}
	f->renamed = true;
	rx_dir_named(d);
	/* Only a directory fsync that starts after this rename covers it. */
	f->dir_sync_needed = d->submitted + 1;
	e->commit_batch[e->ncommit++] = file_index(e, f);
}

/*
 * Start a directory fsync wherever renames wait and none is running;
 * unless a syncfs runs or is about to start (rx_sync_step): the next one
 * covers them. A syncfs batch's names are all made first, so that one
 * fsync (one journal commit) covers the batch, not its first few names.
 */
int rx_commit_batch(struct engine *e)
{
	if (e->sync_running || e->nsync_wait > 0) {
		return 0;
	}
	for (int i = 0; i < e->dirs_hw; i++) {
		struct dirent_cache *d = &e->dirs[i];
		struct io_uring_sqe *sqe;

		if (!d->path || !d->dirty || d->syncing || d->links_out) {
			continue;
		}
		sqe = uring_sqe(e);
		if (!sqe) {
			return engine_fail(e, PERR_IO, -EBUSY, "io_uring queue full");
		}
		rx_dir_keep_time(d);
		io_uring_prep_fsync(sqe, d->fd, 0);
		io_uring_sqe_set_data64(sqe, UD(UD_DIRSYNC, i));
		d->syncing = true;
		d->dirty = false;
		d->submitted++;
	}
	return 0;
}

/* A directory fsync finished: report every file whose rename it covers. */
void rx_dirsync_done(struct engine *e, uint32_t di, int res)
{
	struct dirent_cache *d = &e->dirs[di];
	uint32_t kept = 0;

	d->syncing = false;
	d->completed = d->submitted;
	d->sync_error = res < 0 ? res : 0;
	for (uint32_t i = 0; i < e->ncommit; i++) {
		struct efile *f = file_at(e, e->commit_batch[i]);

		if (f->dir != (int)di || f->dir_sync_needed > d->completed) {
			e->commit_batch[kept++] = e->commit_batch[i];
			continue;
		}
		if (res < 0) {
			file_fail(f, PERR_IO, "fsync of directory: %s", strerror(-res));
		}
		rx_resolve(e, f);
	}
	e->ncommit = kept;
}

/* Remove an uncommitted temp file. An unnamed one (O_TMPFILE) goes with its fd. */
void rx_discard(struct engine *e, struct efile *f)
{
	/* A partial stays for a later run (see rx_resolve for the ones that don't). */
	if (f->tmpname && f->tmpname[0] != '\0' && f->dir >= 0 && !f->partial) {
		fspath_discard(e->dirs[f->dir].fd, f->tmpname);
	}
}

static void rx_fsync_cqe(struct engine *e, uint32_t idx, int res)
{
	rx_fsync_done(e, file_at(e, idx), res);
}

static void rx_link_cqe(struct engine *e, uint32_t idx, int res)
{
	rx_link_done(e, file_at(e, idx), res);
}

/* The completions of what the commit path submits: fsyncs, directory fsyncs, links. */
void rx_commit_handlers(struct engine *e)
{
	engine_uring_handle(e, UD_FSYNC, rx_fsync_cqe);
	engine_uring_handle(e, UD_DIRSYNC, rx_dirsync_done);
	engine_uring_handle(e, UD_LINK, rx_link_cqe);
}
