/* SPDX-License-Identifier: MIT */
/*
 * relay_rx (engine_params.relay_feed >= 0, receiver): what this hop receives
 * is told to its relay child on the feed (relay_feed.h) as it lands, so the
 * child forwards each file while it still arrives. ENTRY when a regular
 * file's data file is open (its descriptor passed when the record goes), a
 * directory or a symlink is made or kept, a file is kept (its final name
 * opened read-only), a hard link (-H) is made or kept (naming its file); RANGE as the contiguous prefix of what is on the
 * disk grows (rx_written: written, zeros, unchanged; ranges may land out of
 * order, so each file keeps a small sorted list of what is there beyond
 * its prefix); DONE when it settles, with the source's digest from
 * FILE_DONE; END after the peer's END; ABORT when the session fails.
 *
 * It never blocks the loop: records wait in an outbox, flushed each turn,
 * and the session waits (busy) until the child has them. A child that went
 * away (EPIPE, ECONNRESET) stops the feed; that is no failure of this hop
 * (engine_stats.relay_feed_lost). An ENTRY's descriptor is the data file's
 * own, looked up when the record goes; a file that settles before its
 * ENTRY went is opened by its final name, read-only, beneath its directory,
 * then held with the record.
 *
 * -X/-A: a directory's ENTRY goes with its descriptor, and it (or a kept
 * file's ENTRY) waits, with all after it, until the hop has set the
 * attributes XATTRS brings after the entry (rx_attrs), the next FILES
 * batch, or the END: the child reads none from a half-made entry.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine-internal.h"
#include "log.h"
#include "relay_feed.h"

extern const struct engine_feature engine_feature_relay_rx;

struct rrx_rec {
	struct relay_feed_msg m;
	int fd; /* a settled file's (a directory's) descriptor, else -1: the data file's, when sent */
	bool dropped;
	/*
	 * -X/-A: its entry's attributes are not set here yet (a directory's, a
	 * kept file's come in XATTRS after it): it and all after it wait.
	 */
	bool wait;
};

struct rrx_state {
	int sock;
	bool lost, ended;
	bool attrs;	   /* -X/-A: entries wait for their attributes (rrx_rec.wait) */
	bool blocked;	   /* the socket was full: watched until writable */
	struct rrx_rec *q; /* the outbox: q[head, n) wait */
	size_t head, n, cap;
};

struct rrx_iv {
	uint64_t lo, hi;
};

struct rrx_file {
	bool entered; /* its ENTRY is queued (RANGE and DONE follow it) */
	uint64_t prefix;
	struct rrx_iv *iv; /* what is there past the prefix, sorted, apart */
	uint32_t niv, cap;
};

static struct rrx_state *rrx(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_relay_rx);
}

static struct rrx_file *rrx_file(const struct engine *e, const struct efile *f)
{
	return engine_file_state(e, &engine_feature_relay_rx, f);
}

/* The outbox emptied, its held descriptors closed. */
static void rrx_clear(struct rrx_state *s)
{
	for (size_t i = s->head; i < s->n; i++) {
		if (s->q[i].fd >= 0) {
			close(s->q[i].fd);
		}
		relay_feed_msg_free(&s->q[i].m);
	}
	s->head = s->n = 0;
}

static void rrx_lost(struct engine *e, struct rrx_state *s, int r)
{
	log_debug("relay feed: the relay child is gone (%s): no more records", strerror(-r));
	s->lost = true;
	e->st.relay_feed_lost = 1;
	if (s->blocked) {
		engine_watch_del(e, s->sock);
		s->blocked = false;
	}
	rrx_clear(s);
}

/* Queues m (taking what it holds); a full memory loses the feed, never the session. */
static void rrx_queue(struct engine *e, struct relay_feed_msg *m, int fd)
{
	struct rrx_state *s = rrx(e);

	if (s->lost) {
		relay_feed_msg_free(m);
		if (fd >= 0) {
			close(fd);
		}
		return;
	}
	if (s->head == s->n) {
		s->head = s->n = 0;
	}
	/* A file's prefix that grew again while its last RANGE waits: that record says it. */
	if (m->type == RELAY_FEED_RANGE && s->n > s->head &&
	    s->q[s->n - 1].m.type == RELAY_FEED_RANGE &&
	    s->q[s->n - 1].m.u.range.id == m->u.range.id) {
		s->q[s->n - 1].m.u.range.upto = m->u.range.upto;
		return;
	}
	if (s->n == s->cap && s->head > s->cap / 2) {
		memmove(s->q, s->q + s->head, (s->n - s->head) * sizeof(*s->q));
		s->n -= s->head;
		s->head = 0;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct rrx_rec *q = realloc(s->q, cap * sizeof(*q));

		if (!q) {
			relay_feed_msg_free(m);
			rrx_lost(e, s, -ENOMEM);
			return;
		}
		s->q = q;
		s->cap = cap;
	}
	s->q[s->n++] = (struct rrx_rec){ .m = *m, .fd = fd };
	memset(m, 0, sizeof(*m));
}

/* The descriptor an ENTRY goes with: the one it holds, else its data file's, if still open. */
static int rrx_entry_fd(struct engine *e, const struct rrx_rec *q)
{
	struct efile *f;

	if (q->fd >= 0 || q->m.type != RELAY_FEED_ENTRY || q->m.u.entry.ftype != PROTO_FT_REG) {
		return q->fd;
	}
	f = file_by_id(e, q->m.u.entry.id);
	return f && f->tfd >= 0 ? f->tfd : -1;
}

static void rrx_drop(struct rrx_state *s, uint32_t id);

/* Sends what waits, until the socket is full. */
static int rrx_flush(struct engine *e);

/* The child's socket writable again (or broken): the outbox goes on. */
static int rrx_writable(struct engine *e)
{
	struct rrx_state *s = rrx(e);

	engine_watch_del(e, s->sock);
	s->blocked = false;
	return rrx_flush(e);
}

/* A full socket: the loop sleeps until it takes more (ENGINE_WATCH_OUT), never spins. */
static int rrx_block(struct engine *e, struct rrx_state *s)
{
	int r;

	if (s->blocked) {
		return 0;
	}
	r = engine_watch_add(e, s->sock, rrx_writable, ENGINE_WATCH_OUT);
	if (r < 0) {
		return engine_fail(e, PERR_INTERNAL, r, "relay feed: no watch left: %s",
				   strerror(-r));
	}
	s->blocked = true;
	return 0;
}

static int rrx_flush(struct engine *e)
{
	struct rrx_state *s = rrx(e);

	while (!s->lost && s->head < s->n && !s->q[s->head].wait) {
		struct rrx_rec *q = &s->q[s->head];
		int r = 0;

		if (!q->dropped && q->m.type == RELAY_FEED_ENTRY &&
		    q->m.u.entry.ftype == PROTO_FT_REG && rrx_entry_fd(e, q) < 0) {
			/* Its data file is gone unnamed: the child never hears of it. */
			rrx_drop(s, q->m.u.entry.id);
		}
		if (!q->dropped) {
			r = relay_feed_send(s->sock, &q->m, rrx_entry_fd(e, q));
		}
		if (r == -EAGAIN) {
			return rrx_block(e, s);
		}
		if (r < 0) {
			rrx_lost(e, s, r);
			return 0;
		}
		if (q->fd >= 0) {
			close(q->fd);
		}
		relay_feed_msg_free(&q->m);
		s->head++;
	}
	return 0;
}

/* ---- records ------------------------------------------------------------ */

static int rrx_entry(struct engine *e, struct efile *f, uint8_t ftype, const char *link, bool known,
		     int fd, uint64_t size)
{
	struct relay_feed_msg m = { .type = RELAY_FEED_ENTRY };
	struct rrx_file *rf = rrx_file(e, f);

	m.u.entry = (struct relay_feed_entry){ .id = f->id,
					       .ftype = ftype,
					       .mode = f->meta.mode & 07777,
					       .size = size,
					       .mtime_sec = f->meta.mtime_sec,
					       .mtime_nsec = f->meta.mtime_nsec,
					       .uid = f->meta.uid,
					       .gid = f->meta.gid,
					       .name = strdup(f->name),
					       .link = link ? strdup(link) : NULL,
					       .digest_known = known };
	m.u.entry.digest_tree = known ? engine_digest_tree(e, f) : 0; /* its kind */
	if (!m.u.entry.name || (link && !m.u.entry.link)) {
		relay_feed_msg_free(&m);
		if (fd >= 0) {
			close(fd);
		}
		rrx_lost(e, rrx(e), -ENOMEM);
		return -ENOMEM;
	}
	rf->entered = true;
	rrx_queue(e, &m, fd);
	return 0;
}

static void rrx_range(struct engine *e, const struct efile *f, uint64_t upto)
{
	struct relay_feed_msg m = { .type = RELAY_FEED_RANGE, .u.range = { f->id, upto } };

	rrx_queue(e, &m, -1);
}

static void rrx_done(struct engine *e, const struct efile *f, bool ok, uint32_t code,
		     const uint8_t *digest)
{
	struct relay_feed_msg m = { .type = RELAY_FEED_DONE };

	m.u.done.id = f->id;
	m.u.done.ok = ok;
	m.u.done.code = ok ? PERR_OK : code ? code : PERR_IO;
	if (ok && digest) {
		memcpy(m.u.done.digest, digest, sizeof(m.u.done.digest));
	}
	rrx_queue(e, &m, -1);
}

/* An ENTRY of f still waiting: its records dropped (it failed), or its final name held. */
static struct rrx_rec *rrx_waiting_entry(struct rrx_state *s, uint32_t id)
{
	for (size_t i = s->head; i < s->n; i++) {
		if (s->q[i].m.type == RELAY_FEED_ENTRY && s->q[i].m.u.entry.id == id) {
			return &s->q[i];
		}
	}
	return NULL;
}

static void rrx_drop(struct rrx_state *s, uint32_t id)
{
	for (size_t i = s->head; i < s->n; i++) {
		uint8_t t = s->q[i].m.type;

		if ((t == RELAY_FEED_ENTRY && s->q[i].m.u.entry.id == id) ||
		    (t == RELAY_FEED_RANGE && s->q[i].m.u.range.id == id) ||
		    (t == RELAY_FEED_DONE && s->q[i].m.u.done.id == id)) {
			s->q[i].dropped = true;
		}
	}
}

/* f's final name, read-only, never through a symlink; -1 when it can't be opened. */
static int rrx_open_final(struct engine *e, const struct efile *f)
{
	if (f->dir < 0 || !f->leaf) {
		return -1;
	}
	return openat(e->dirs[f->dir].fd, f->leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
}

/* ---- the receiver's hooks ----------------------------------------------- */

/* A data file open: its ENTRY; what --partial kept of a cut run is there already. */
static void rrx_opened(struct engine *e, struct efile *f)
{
	if (rrx_entry(e, f, PROTO_FT_REG, NULL, f->dg == NULL, -1, f->size) == 0 && f->kept) {
		rrx_file(e, f)->prefix = MIN(f->kept, f->size);
		rrx_range(e, f, rrx_file(e, f)->prefix);
	}
}

/* [off, off + len) is there: the prefix grows over it and every range it meets. */
static void rrx_written(struct engine *e, struct efile *f, uint64_t off, uint32_t len,
			const uint8_t *d)
{
	struct rrx_file *rf = rrx_file(e, f);
	uint64_t was = rf->prefix, hi = off + len;
	uint32_t i = 0, j;

	(void)d;
	if (!rf->entered || !len || hi <= rf->prefix) {
		return;
	}
	if (off <= rf->prefix) {
		rf->prefix = hi;
	} else {
		/* Past the prefix: merged into the sorted list (one slot more at most). */
		if (rf->niv == rf->cap) {
			uint32_t cap = rf->cap ? rf->cap * 2 : 8;
			struct rrx_iv *iv = realloc(rf->iv, cap * sizeof(*iv));

			if (!iv) {
				return; /* told later, at DONE */
			}
			rf->iv = iv;
			rf->cap = cap;
		}
		while (i < rf->niv && rf->iv[i].hi < off) {
			i++;
		}
		for (j = i; j < rf->niv && rf->iv[j].lo <= hi; j++) {
			off = MIN(off, rf->iv[j].lo);
			hi = MAX(hi, rf->iv[j].hi);
		}
		memmove(&rf->iv[i + 1], &rf->iv[j], (rf->niv - j) * sizeof(*rf->iv));
		rf->niv = rf->niv - (j - i) + 1;
		rf->iv[i] = (struct rrx_iv){ off, hi };
	}
	while (rf->niv && rf->iv[0].lo <= rf->prefix) {
		rf->prefix = MAX(rf->prefix, rf->iv[0].hi);
		memmove(&rf->iv[0], &rf->iv[1], (rf->niv - 1) * sizeof(*rf->iv));
		rf->niv--;
	}
	if (rf->prefix > was) {
		rrx_range(e, f, MIN(rf->prefix, f->size));
	}
}

/*
 * The last record queued, when it is entry id's, waits for its attributes
 * (-X/-A): until XATTRS set them here (rrx_attrs), the next FILES batch (a
 * directory's come right after its batch), or the END.
 */
static void rrx_wait_attrs(struct rrx_state *s, uint32_t id)
{
	const struct relay_feed_msg *m = s->n > s->head ? &s->q[s->n - 1].m : NULL;

	if (s->attrs && !s->lost && m &&
	    ((m->type == RELAY_FEED_ENTRY && m->u.entry.id == id) ||
	     (m->type == RELAY_FEED_DONE && m->u.done.id == id))) {
		s->q[s->n - 1].wait = true;
	}
}

/*
 * A directory's ENTRY: with -X/-A its descriptor goes with it (the child
 * reads its attributes from it), once they are set here.
 */
static void rrx_dir_entry(struct engine *e, struct efile *f)
{
	struct rrx_state *s = rrx(e);
	int fd = -1;

	if (s->attrs && fspath_open_dir(e->p->base_fd, f->name, &fd) < 0) {
		fd = -1; /* forwarded all the same: the child fails to read its attributes */
	}
	if (rrx_entry(e, f, PROTO_FT_DIR, NULL, false, fd, 0) == 0 && fd >= 0) {
		rrx_wait_attrs(s, f->id);
	}
}

static uint32_t rrx_dir(struct engine *e, const struct efile *f, char *text, size_t textlen)
{
	(void)text;
	(void)textlen;
	if (!engine_probe(e)) {
		rrx_dir_entry(e, (struct efile *)f);
	}
	return PERR_OK;
}

/* Records of id (or, id 0, of every directory; all: every one) waiting for attributes go on. */
static void rrx_settle(struct rrx_state *s, uint32_t id, bool all)
{
	for (size_t i = s->head; i < s->n; i++) {
		const struct relay_feed_msg *m = &s->q[i].m;
		bool dir = m->type == RELAY_FEED_ENTRY && m->u.entry.ftype == PROTO_FT_DIR;
		uint32_t mid = m->type == RELAY_FEED_ENTRY  ? m->u.entry.id
			       : m->type == RELAY_FEED_DONE ? m->u.done.id
							    : 0;

		if (all || (id ? mid == id : dir)) {
			s->q[i].wait = false;
		}
	}
}

/* XATTRS set entry id's attributes here: it goes on. */
static void rrx_attrs(struct engine *e, uint32_t id)
{
	rrx_settle(rrx(e), id, false);
}

/* A new FILES batch: the directories of the one before have their attributes. */
static void rrx_batch(struct engine *e)
{
	rrx_settle(rrx(e), 0, false);
}

/* A symlink made or kept: its ENTRY and DONE at once, its target as it is here. */
static void rrx_symlink(struct engine *e, struct efile *f)
{
	char target[PROTO_MAX_PATH + 1];
	ssize_t n;

	if (f->dir < 0 || engine_probe(e)) {
		return;
	}
	n = readlinkat(e->dirs[f->dir].fd, f->leaf, target, sizeof(target) - 1);
	if (n <= 0) {
		return; /* not forwarded: the child never hears of it */
	}
	target[n] = '\0';
	if (rrx_entry(e, f, PROTO_FT_SYMLINK, target, false, -1, 0) == 0) {
		rrx_done(e, f, true, PERR_OK, NULL);
	}
}

/*
 * A hard link made or kept here (-H): its ENTRY, naming its file as this
 * hop names it, and DONE at once. It settles after its file (it waits for
 * it), so its file's ENTRY went before it and the next hop links to it.
 */
static void rrx_hardlink(struct engine *e, struct efile *f)
{
	const char *target = engine_link_target(e, f);

	if (!target || engine_probe(e)) {
		return;
	}
	if (rrx_entry(e, f, PROTO_FT_HARDLINK, target, false, -1, 0) == 0) {
		rrx_done(e, f, true, PERR_OK, NULL);
	}
}

/* A directory made is done; a symlink made now is forwarded. */
static int rrx_answered(struct engine *e, struct efile *f)
{
	if (f->ftype == PROTO_FT_DIR && rrx_file(e, f)->entered) {
		rrx_done(e, f, true, PERR_OK, NULL);
		return 0;
	}
	if (f->ftype == PROTO_FT_SYMLINK) {
		rrx_symlink(e, f);
	}
	return 0;
}

/* A regular file kept as it is: forwarded from its final name, its own digest unknown. */
static void rrx_kept(struct engine *e, struct efile *f)
{
	struct stat st;
	int fd;

	if (f->ftype == PROTO_FT_DIR) {
		if (!rrx_file(e, f)->entered) {
			rrx_dir_entry(e, f);
		}
		rrx_done(e, f, true, PERR_OK, NULL);
		return;
	}
	if (f->ftype == PROTO_FT_SYMLINK) {
		/* Kept only when its target is the source's: the next hop needs it too. */
		rrx_symlink(e, f);
		return;
	}
	if (f->ftype != PROTO_FT_REG) {
		return;
	}
	fd = rrx_open_final(e, f);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0) {
			close(fd);
		}
		return;
	}
	if (rrx_entry(e, f, PROTO_FT_REG, NULL, false, fd, (uint64_t)st.st_size) == 0) {
		/* Its attributes, brought in line, come after (xattrs_rx_settled). */
		rrx_wait_attrs(rrx(e), f->id);
		rrx_range(e, f, (uint64_t)st.st_size);
		rrx_done(e, f, true, PERR_OK, NULL);
	}
}

static void rrx_settled(struct engine *e, const struct efile *cf, enum engine_rx_end how)
{
	struct efile *f = (struct efile *)cf;
	struct rrx_file *rf = rrx_file(e, f);
	struct rrx_state *s = rrx(e);
	struct rrx_rec *q;

	if (how == ENGINE_RX_PLANNED || s->lost) {
		return;
	}
	if (f->ftype == PROTO_FT_HARDLINK) {
		if (how != ENGINE_RX_FAILED) {
			rrx_hardlink(e, f); /* a failed one is not there: nothing to forward */
		}
		return;
	}
	if (how == ENGINE_RX_KEPT) {
		rrx_kept(e, f);
		return;
	}
	if (!rf->entered) {
		return;
	}
	q = f->ftype == PROTO_FT_REG ? rrx_waiting_entry(s, f->id) : NULL;
	if (how == ENGINE_RX_FAILED && q) {
		rrx_drop(s, f->id); /* the child never heard of it: nothing to tell */
		return;
	}
	if (how == ENGINE_RX_DONE && q && q->fd < 0) {
		q->fd = rrx_open_final(e, f);
		if (q->fd < 0) {
			rrx_drop(s, f->id);
			return;
		}
	}
	if (how == ENGINE_RX_DONE && f->ftype == PROTO_FT_REG && rf->prefix < f->size) {
		rrx_range(e, f, f->size); /* all of it is there, told or not */
	}
	rrx_done(e, f, how == ENGINE_RX_DONE, f->fail_code,
		 f->ftype == PROTO_FT_REG && !f->dg ? f->done_hash : NULL);
}

/* ---- the session -------------------------------------------------------- */

static bool rrx_enable(struct engine *e)
{
	return e->p->role == ENGINE_RECEIVER && e->p->relay_feed >= 0;
}

static int rrx_setup(struct engine *e)
{
	rrx(e)->sock = e->p->relay_feed;
	rrx(e)->attrs =
	    (e->p->open_flags & (PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS)) && !engine_probe(e);
	return 0;
}

static int rrx_on_end(struct engine *e)
{
	struct relay_feed_msg m = { .type = RELAY_FEED_END };

	rrx(e)->ended = true;
	rrx_settle(rrx(e), 0, true);
	rrx_queue(e, &m, -1);
	rrx_flush(e);
	return 0;
}

/* Records to send: now (busy), or once the child takes more (holds). */
static bool rrx_busy(const struct engine *e)
{
	const struct rrx_state *s = rrx(e);

	return !s->lost && s->head < s->n && !e->failed && !s->blocked && !s->q[s->head].wait;
}

static bool rrx_holds(const struct engine *e)
{
	const struct rrx_state *s = rrx(e);

	return !s->lost && s->head < s->n && !e->failed && s->blocked;
}

static void rrx_file_release(struct engine *e, struct efile *f)
{
	struct rrx_file *rf = rrx_file(e, f);

	free(rf->iv);
	memset(rf, 0, sizeof(*rf));
}

static size_t rrx_file_size(const struct engine *e)
{
	(void)e;
	return sizeof(struct rrx_file);
}

/* A failed session: what waits is dropped, the child told why (if it can take it now). */
static void rrx_release(struct engine *e)
{
	struct rrx_state *s = rrx(e);

	if (e->failed && !s->lost) {
		struct relay_feed_msg m = { .type = RELAY_FEED_ABORT };

		rrx_clear(s);
		m.u.abort.code = e->err_code ? e->err_code : PERR_INTERNAL;
		snprintf(m.u.abort.text, sizeof(m.u.abort.text), "%s", e->err ? e->err : "");
		relay_feed_send(s->sock, &m, -1);
	}
	rrx_clear(s);
	free(s->q);
}

const struct engine_feature engine_feature_relay_rx = {
	.name = "relay_rx",
	.enable = rrx_enable,
	.setup = rrx_setup,
	.step = rrx_flush,
	.late_step = rrx_flush,
	.on_end = rrx_on_end,
	.busy = rrx_busy,
	.holds = rrx_holds,
	.file_size = rrx_file_size,
	.file_release = rrx_file_release,
	.release = rrx_release,
	.state_size = sizeof(struct rrx_state),
	.rx_batch = rrx_batch,
	.rx_attrs = rrx_attrs,
	.rx_opened = rrx_opened,
	.rx_written = rrx_written,
	.rx_dir = rrx_dir,
	.rx_answered = rrx_answered,
	.rx_settled = rrx_settled,
};
