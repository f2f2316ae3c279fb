/* SPDX-License-Identifier: MIT */
/*
 * The sender's entries: taken from the source, offered (FILES) within
 * the receiver's window, opened; ZEROS gathered, and FILE_DONE.
 */
#include "engine_tx.h"

/*
 * Take the next entry from the source unless one is waiting already. False
 * when there is none: the source is done, or failed (then the peer is told).
 */
static bool tx_have_src(struct engine *e)
{
	const struct engine_source *src = &e->p->source;
	char why[256] = "";
	int r;

	if (e->next_src || e->src_done || e->failed) {
		return e->next_src != NULL;
	}
	r = engine_tx_source(e, &e->next_src, why, sizeof(why));
	if (r == -EAGAIN) {
		e->next_src = NULL;
		return false; /* none yet: the feature wakes the loop when one comes */
	}
	if (r == ENGINE_DECLINED) {
		r = src->next ? src->next(src->ud, &e->next_src, why, sizeof(why)) : 0;
	}
	r = r == ENGINE_TX_TAKEN ? 1 : r;
	if (r > 0 && e->offered == UINT32_MAX) {
		r = -E2BIG; /* ids and END's count are 32-bit */
	}
	if (r <= 0) {
		e->next_src = NULL;
		e->src_done = true;
	}
	if (r < 0) {
		if (!why[0]) {
			snprintf(why, sizeof(why), "listing the sources: %s", strerror(-r));
		}
		chan_send_error(e->p->chan, errno_to_perr(r), "%s", why);
		engine_fail(e, errno_to_perr(r), r, "%s", why);
	}
	return e->next_src != NULL;
}

/*
 * An entry the source could not make (s->error): a failed file here, and
 * the receiver is told so it counts it too (a peer from before
 * ENTRY_FAILED only sees the session's failure count fall short).
 */
static int tx_entry_failed(struct engine *e, const struct engine_src *s)
{
	struct msg m = { .type = MSG_ENTRY_FAILED };
	uint32_t code = errno_to_perr(s->error);
	int r;

	file_note_failure(e, s->name, s->ftype, code, true, s->why);
	if (!(e->p->peer_caps & PROTO_CAP_ENTRY_FAILED)) {
		return 0;
	}
	m.u.entry_failed.status = code;
	snprintf(m.u.entry_failed.name, sizeof(m.u.entry_failed.name), "%s", s->name);
	snprintf(m.u.entry_failed.text, sizeof(m.u.entry_failed.text), "%s", s->why);
	r = chan_queue(e->p->chan, &m);
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* Room for one more file in flight: the receiver's window, and our memory for names. */
static bool tx_room(const struct engine *e)
{
	return e->offered_unresolved < e->files_window &&
	       (e->names_in_flight < ENGINE_NAMES_IN_FLIGHT_MAX || e->offered_unresolved == 0);
}

/* oldest_id: the lowest id still in flight, or next_id + 1 when none is. */
void tx_oldest_advance(struct engine *e)
{
	while (e->oldest_id <= e->next_id && !file_by_id(e, e->oldest_id)) {
		e->oldest_id++;
	}
}

/* Where f's bytes come from: the source's name, its directory, a window of a bigger file. */
static int tx_file_source(struct engine *e, struct efile *f, const struct engine_src *s,
			  uint8_t ftype)
{
	f->name = strdup(s->name);
	f->src_path = strdup(s->path);
	f->src_dirfd = s->dirfd;
	f->src_device = s->device;
	f->ftype = ftype;
	f->size = ftype == PROTO_FT_REG ? s->size : 0;
	f->src_whole = f->size;
	if (s->window && ftype == PROTO_FT_REG) {
		if (s->window_off > s->window_whole || s->size > s->window_whole - s->window_off) {
			return engine_fail(e, PERR_INTERNAL, -EINVAL, "a window beyond its file");
		}
		f->src_window = true;
		f->src_base = s->window_off;
		f->src_whole = s->window_whole;
	}
	ts_now(&f->t0);
	return 0;
}

/*
 * Source entry s as file id: its place in the file table and its FILES
 * record. 1: taken; 0: its place is still in use (offer it later); -errno.
 * *ret_link is the record's own copy of the symlink target (the source may
 * reuse s); on failure nothing is left to free.
 */
static int tx_file_new(struct engine *e, const struct engine_src *s, uint32_t id,
		       struct proto_file *ret_pf, char **ret_link)
{
	struct efile *f = file_at(e, id % FILE_TABLE);
	const char *first = NULL;
	uint8_t ftype = s->ftype;
	int r;

	/* The receiver's table may be smaller than ours: its span is the bound. */
	tx_oldest_advance(e);
	if (f->used || id - e->oldest_id >= e->files_span) {
		return 0;
	}
	r = engine_tx_offer(e, s, &first);
	if (r < 0) {
		return engine_fail(e, PERR_INTERNAL, r, "out of memory");
	}
	if (r > 0) {
		ftype = PROTO_FT_HARDLINK;
	}
	file_take(e, f, id);
	r = tx_file_source(e, f, s, ftype);
	if (r < 0) {
		return r;
	}
	if (first) {
		*ret_link = strdup(first);
	} else {
		*ret_link = s->link ? strdup(s->link) : NULL;
	}
	if (!f->name || !f->src_path || ((s->link || first) && !*ret_link)) {
		free(*ret_link);
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	f->name_bytes = (uint32_t)(strlen(f->name) + strlen(f->src_path) + 2);
	e->names_in_flight += f->name_bytes;
	*ret_pf = (struct proto_file){
		.id = id,
		.ftype = ftype,
		.mode = s->mode & 07777,
		.size = f->size,
		.mtime_sec = s->mtime.tv_sec,
		.mtime_nsec = (uint32_t)s->mtime.tv_nsec,
		.uid = s->uid,
		.gid = s->gid,
		.name = f->name,
		.link = *ret_link,
		.linked = engine_tx_linked(e, s, ftype),
	};
	return 1;
}

/* One FILES batch of n records on its way; the links are freed either way. */
static int tx_send_files(struct engine *e, struct proto_file *pf, char **links, uint32_t n)
{
	struct msg m = { .type = MSG_FILES };
	int r;

	m.u.files.count = (uint16_t)n;
	m.u.files.files = pf;
	r = chan_queue(e->p->chan, &m);
	for (uint32_t i = 0; i < n; i++) {
		free(links[i]);
	}
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/*
 * One FILES batch taken from the source and offered, per loop turn. The
 * walk is the slow part (a stat per entry): offering the whole window at
 * once would keep the data path idle while it runs (6,144 entries, about
 * 70 ms here, before the first read). One batch, then the loop reads and
 * sends what the receiver has accepted, and comes back without sleeping.
 * Returns 1 when there is room and source for another batch.
 */
int tx_offer(struct engine *e)
{
	struct proto_file pf[PROTO_MAX_BATCH];
	char *links[PROTO_MAX_BATCH];
	uint32_t n = 0;
	int r;

	while (n < PROTO_MAX_BATCH && tx_room(e) && tx_have_src(e)) {
		const struct engine_src *s = e->next_src;

		if (s->error) {
			e->next_src = NULL;
			if (tx_entry_failed(e, s) < 0) {
				break;
			}
			continue;
		}
		r = tx_file_new(e, s, e->next_id + 1, &pf[n], &links[n]);
		if (r < 0) {
			for (uint32_t i = 0; i < n; i++) {
				free(links[i]);
			}
			return r;
		}
		if (r == 0) {
			break;
		}
		e->next_id++;
		n++;
		e->next_src = NULL;
		e->offered++;
		e->offered_unresolved++;
	}
	if (n == 0 || e->failed) {
		for (uint32_t i = 0; i < n; i++) {
			free(links[i]);
		}
		return e->failed ? e->fail_r : 0;
	}
	r = tx_send_files(e, pf, links, n);
	/* A probe reads nothing but names: no attributes either. */
	if (r >= 0 && !engine_probe(e)) {
		r = engine_tx_offered(e, pf, n);
	}
	if (r < 0) {
		return r;
	}
	return e->failed ? e->fail_r : tx_room(e) && tx_have_src(e);
}

/* f's digest for its FILE_DONE: its stream's, or what a feature puts there (or f fails). */
static void tx_done_digest(struct engine *e, struct efile *f, uint8_t *hash)
{
	char text[PROTO_MAX_TEXT + 1] = "";
	uint32_t code;

	if (f->dg && f->dg->tx_final) {
		f->dg->tx_final(e, f, hash);
	} else {
		file_hash_final(&f->hash, hash);
	}
	code = engine_tx_digest(e, f, hash, text, sizeof(text));
	if (code != PERR_OK) {
		file_fail(f, code, "%s", text);
	}
}

int tx_send_done(struct engine *e, struct efile *f)
{
	/* Its digest is not whole before its hashing thread is done with it (tx_hashed). */
	if (f->hash_jobs > 0 || !engine_tx_done_ready(e, f)) {
		f->done_wait = true;
		return 0;
	}
	struct msg m = { .type = MSG_FILE_DONE };
	char text[256] = "";
	/* Its zero and unchanged ranges go first: the receiver refuses them after FILE_DONE. */
	int zr = engine_tx_flush(e);

	/* What a source still being written settles only now (its attributes) goes first too. */
	if (zr == 0 && !f->failed) {
		zr = engine_tx_settled(e, f, f->fd, text, sizeof(text));
		if (zr > 0) {
			file_fail(f, (uint32_t)zr, "%s", text);
			zr = 0;
		}
	}

	if (zr < 0) {
		return zr;
	}
	m.u.file_done.id = f->id;
	/* put on the data path: neither kept by the receiver nor zeros */
	m.u.file_done.bytes = f->send_off - f->resumed - engine_file_unsent_bytes(e, f);
	if (!f->failed) {
		tx_done_digest(e, f, m.u.file_done.hash);
	}
	if (f->failed) {
		m.u.file_done.status = f->fail_code;
		snprintf(m.u.file_done.text, sizeof(m.u.file_done.text), "%s", file_fail_text(f));
	} else {
		memcpy(f->done_hash, m.u.file_done.hash, HASH_LEN);
	}
	if (f->started && !f->done_sent) {
		e->tx_unfinished--;
	}
	f->done_sent = true;
	if (f->fd >= 0) {
		close(f->fd);
		f->fd = -1;
		e->open_fds--;
	}
	if (f->dfd >= 0) {
		close(f->dfd);
		f->dfd = -1;
	}
	int r = chan_queue(e->p->chan, &m);
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* Open an accepted source; O_DIRECT on a second descriptor where it applies. */
int tx_open(struct engine *e, struct efile *f)
{
	struct stat st;
	char proc[64], text[256];
	int fd;

	/* Beneath dirfd without following symlinks, unless dirfd is AT_FDCWD. */
	int r = diskio_open_read_flags(f->src_dirfd, f->src_path, 0,
				       DISKIO_NONBLOCK | (f->src_device ? DISKIO_BLOCK : 0), &fd,
				       NULL, &st);
	if (r < 0) {
		file_fail(f, errno_to_perr(r), "open: %s", strerror(-r));
		return 0;
	}
	f->fd = fd;
	f->src_nonblock = true;
	e->open_fds++;
	/* A file still being written (engine_tx_avail) has its size checked at its end. */
	if ((uint64_t)st.st_size != f->src_whole && engine_tx_avail(e, f) == UINT64_MAX) {
		file_fail(f, PERR_SOURCE_CHANGED, "changed size before it was read (%llu -> %llu)",
			  (unsigned long long)f->src_whole, (unsigned long long)st.st_size);
		return 0;
	}
	/* -X, -A: its attributes go ahead of its FILE_DONE. */
	r = engine_tx_opened(e, f, fd, text, sizeof(text));
	if (r < 0) {
		return r;
	}
	if (r > 0) {
		file_fail(f, (uint32_t)r, "%s", text);
		return 0;
	}
	/* A file that travels packed is hashed whole in one call: no state. */
	if (engine_tx_whole(e, f)) {
		return 0;
	}
	/*
	 * O_DIRECT keeps a big copy from flushing the page cache. Files under a
	 * chunk are read in one buffered request, and a file that is already in
	 * the page cache is read from there: fetching it again from the disk
	 * would only be slower.
	 */
	if (f->size >= e->p->chunk_size && !diskio_mostly_cached(fd, f->size) &&
	    diskio_dio_align(fd, &f->dio) == 0 && f->dio.mem && f->dio.offset &&
	    e->p->chunk_size % f->dio.offset == 0 && 4096 % f->dio.mem == 0) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		f->dfd = open(proc, O_RDONLY | O_CLOEXEC | O_DIRECT);
	}
	return engine_hash_start(e, f) < 0 ? engine_fail(e, PERR_INTERNAL, -ENOMEM, "oom")
					   : (f->hash_live = true, 0);
}
