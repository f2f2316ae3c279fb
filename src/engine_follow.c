/* SPDX-License-Identifier: MIT */
/*
 * follow (engine_params.follow set, sender): a relay child's sender,
 * whose entries and their readable bytes come from the relay feed
 * (relay_feed.h) of the hop it runs beside, while that hop still receives
 * them. The feed's descriptor is watched by the loop; each record read
 * here: ENTRY adds an entry (its descriptor, from SCM_RIGHTS, is the
 * source: the sender opens "/proc/self/fd/N", so it gets a descriptor of
 * its own and its O_DIRECT one), RANGE grows what may be read of it, DONE
 * settles it, END ends the source, ABORT fails the session. A hard link the
 * hop made (-H: an ENTRY of type HARDLINK naming its file, after that
 * file's) is offered as a hard link (tx_offer), so the next hop makes the
 * same link. The book finds an entry by the hop's id and by descriptor in
 * O(1) (idmap.h), whatever the number of entries.
 *
 * The sender asks here for its next entry (tx_source: "none yet" until one
 * comes), how much of a file it may read (tx_avail: reads and the hole
 * search stop there, a chunk read only once whole or to the end), whether
 * its FILE_DONE may go (after the hop's DONE) and with which digest: the
 * source's, from DONE, never one of this reading; this reading's own must
 * match it, else the file fails here as a local read error (a byte spoiled
 * at this hop fails this hop, not the one before). A DONE not ok fails the
 * file toward the receiver, as a source that vanished does.
 *
 * What the feed told lives in the relay child's book (struct follow_book),
 * not in the run: when the hop a run sends to dies mid-copy, the child cuts
 * it out and a new run to the hop after it replays the book from its first
 * entry, then goes on following the feed. A run's own view (which entries
 * it took, which it is done with) is its state here, begun afresh each run.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "engine-internal.h"
#include "idmap.h"
#include "relay_feed.h"

extern const struct engine_feature engine_feature_follow;

struct follow_ent {
	uint32_t hid; /* the hop's id */
	int fd;	      /* the hop's descriptor (-1: none, or closed once done with) */
	struct engine_src src;
	char path[32]; /* "/proc/self/fd/N" */
	uint64_t avail;
	bool done, ok, digest_known;
	uint32_t digest_tree; /* the source's digest's kind (engine_digest_tree's) */
	bool held;	      /* its descriptor kept for a replay (follow_book_keep) */
	bool given, released; /* this run: taken by the sender, done with */
	uint32_t idx;	      /* its index in the book's ents */
	uint32_t fid;	      /* this run: the id of the file it went as (fol_of), 0 before */
	uint32_t code;
	uint8_t digest[HASH_LEN];
};

struct follow_book {
	int sock;
	bool ended;	    /* END came */
	bool eof;	    /* ... and the feed closed after it */
	bool upstream_lost; /* ABORT came, or the feed closed before END */
	bool keep;	    /* settled descriptors stay open (follow_book_keep) */
	bool dropped;	    /* one had to go all the same: no replay */
	size_t kept, keep_max;
	struct follow_ent **ents; /* each its own allocation: the sender holds &src */
	size_t n, cap;
	/*
	 * Its entries by the hop's id (RANGE and DONE name them) and by
	 * descriptor (a file's source path names it): index + 1 in ents. A
	 * descriptor the kernel gave again maps to its newest entry.
	 */
	struct idmap by_hid, by_fd;
	uint64_t records;
};

/* One run's view of the book. */
struct follow_state {
	struct follow_book *b;
	size_t next; /* the next entry the sender takes */
};

struct follow_file {
	uint32_t ent; /* index + 1 in ents; 0: not looked up yet */
};

static struct follow_state *fol(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_follow);
}

/* The book's entry of that hop id, or NULL. */
static struct follow_ent *fol_by_hid(const struct follow_book *b, uint32_t hid)
{
	uint32_t i = idmap_get(&b->by_hid, hid);

	return i ? b->ents[i - 1] : NULL;
}

/*
 * The entry a source path names ("/proc/self/fd/N"): one this run took and
 * is not done with, its descriptor still open; else NULL.
 */
static struct follow_ent *fol_by_path(const struct follow_book *b, const char *path)
{
	static const char pre[] = "/proc/self/fd/";
	struct follow_ent *x;
	unsigned long fd;
	char *end;
	uint32_t i;

	if (!path || strncmp(path, pre, sizeof(pre) - 1) != 0) {
		return NULL;
	}
	fd = strtoul(path + sizeof(pre) - 1, &end, 10);
	if (*end || fd > INT32_MAX) {
		return NULL;
	}
	i = idmap_get(&b->by_fd, (uint32_t)fd);
	x = i ? b->ents[i - 1] : NULL;
	if (!x || x->fd != (int)fd || !x->given || x->released || strcmp(x->path, path) != 0) {
		return NULL;
	}
	return x;
}

/* f's entry: found by its source path once, then remembered (both ways). */
static struct follow_ent *fol_of(const struct engine *e, const struct efile *f)
{
	struct follow_book *b = fol(e)->b;
	struct follow_file *ff = engine_file_state(e, &engine_feature_follow, f);

	if (!ff->ent && f->ftype == PROTO_FT_REG) {
		struct follow_ent *x = fol_by_path(b, f->src_path);

		if (x) {
			ff->ent = x->idx + 1;
			x->fid = f->id;
		}
	}
	return ff->ent ? b->ents[ff->ent - 1] : NULL;
}

/* ---- the feed's records ----------------------------------------------- */

static int fol_entry(struct engine *e, struct relay_feed_entry *en, int fd)
{
	struct follow_book *s = fol(e)->b;
	struct follow_ent *x;
	struct stat st;

	if (fol_by_hid(s, en->id) || s->ended) {
		close(fd);
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "relay feed: entry %u twice",
				   en->id);
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct follow_ent **n = realloc(s->ents, cap * sizeof(*n));

		if (!n) {
			close(fd);
			return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
		s->ents = n;
		s->cap = cap;
	}
	x = malloc(sizeof(*x));
	if (!x) {
		close(fd);
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	*x = (struct follow_ent){ .hid = en->id,
				  .fd = fd,
				  .idx = (uint32_t)s->n,
				  .digest_known = en->digest_known,
				  .digest_tree = en->digest_tree };
	s->ents[s->n++] = x;
	x->src =
	    (struct engine_src){ .name = TAKE_PTR(en->name),
				 .path = x->path,
				 .dirfd = AT_FDCWD,
				 .ftype = en->ftype,
				 .mode = en->mode,
				 .size = en->ftype == PROTO_FT_REG ? en->size : 0,
				 .mtime = { .tv_sec = en->mtime_sec, .tv_nsec = en->mtime_nsec },
				 .uid = en->uid,
				 .gid = en->gid,
				 .link = TAKE_PTR(en->link) };
	if (fd >= 0) {
		snprintf(x->path, sizeof(x->path), "/proc/self/fd/%d", fd);
		x->src.device = fstat(fd, &st) == 0 && S_ISBLK(st.st_mode);
	} else {
		snprintf(x->path, sizeof(x->path), "%s", "/nonexistent");
	}
	if (idmap_set(&s->by_hid, en->id, x->idx + 1) < 0 ||
	    (fd >= 0 && idmap_set(&s->by_fd, (uint32_t)fd, x->idx + 1) < 0)) {
		s->dropped = true; /* the book is not whole: no replay from it */
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	return 0;
}

/*
 * x is settled upstream: its file here (if it is in flight) fails when x
 * failed, and its FILE_DONE held back for it goes now.
 */
static int fol_wake(struct engine *e, const struct follow_ent *x)
{
	struct efile *f = x->given && x->fid ? file_by_id(e, x->fid) : NULL;

	if (!f || fol_of(e, f) != x) {
		return 0; /* not in flight, or not looked up yet: it sees x settled when it is */
	}
	if (!x->ok && !f->failed) {
		file_fail(f, x->code, "failed upstream");
	}
	if (f->done_wait && f->hash_jobs == 0) {
		f->done_wait = false;
		return tx_send_done(e, f);
	}
	return 0;
}

static int fol_done(struct engine *e, const struct relay_feed_done *d)
{
	struct follow_ent *x = fol_by_hid(fol(e)->b, d->id);

	if (!x) {
		return 0; /* an entry not forwarded (relay_rx dropped it) */
	}
	x->done = true;
	x->ok = d->ok;
	x->code = d->code;
	memcpy(x->digest, d->digest, HASH_LEN);
	if (x->ok) {
		x->avail = x->src.size;
	}
	return fol_wake(e, x);
}

static int fol_record(struct engine *e, struct relay_feed_msg *m, int fd)
{
	struct follow_book *s = fol(e)->b;
	struct follow_ent *x;

	s->records++;
	switch (m->type) {
	case RELAY_FEED_ENTRY:
		return fol_entry(e, &m->u.entry, fd);
	case RELAY_FEED_RANGE:
		x = fol_by_hid(s, m->u.range.id);
		if (x && !x->done) {
			x->avail = MAX(x->avail, MIN(m->u.range.upto, x->src.size));
		}
		return 0;
	case RELAY_FEED_DONE:
		return fol_done(e, &m->u.done);
	case RELAY_FEED_END:
		s->ended = true;
		return 0;
	case RELAY_FEED_ABORT:
		s->upstream_lost = true;
		return engine_fail(e, m->u.abort.code, -ECONNABORTED, "upstream: %s",
				   m->u.abort.text);
	default:
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "relay feed: record %u out of place",
				   m->type);
	}
}

/* The feed is readable: every record there taken. */
static int fol_ready(struct engine *e)
{
	struct follow_book *s = fol(e)->b;

	for (;;) {
		struct relay_feed_msg m;
		int fd = -1, r = relay_feed_recv(s->sock, &m, &fd);

		if (r == -EAGAIN) {
			return 0;
		}
		if (r == 0 && !s->ended) {
			s->upstream_lost = true;
			return engine_fail(e, PERR_PROTOCOL, -EPIPE,
					   "relay feed: closed before its end");
		}
		if (r <= 0) {
			s->eof = r == 0;
			engine_watch_del(e, s->sock);
			return r < 0 ? engine_fail(e, PERR_PROTOCOL, r, "relay feed: %s",
						   strerror(-r))
				     : 0;
		}
		r = fol_record(e, &m, fd);
		relay_feed_msg_free(&m);
		if (r < 0) {
			return r;
		}
	}
}

/* ---- the sender's hooks ------------------------------------------------- */

static int fol_source(struct engine *e, const struct engine_src **ret, char *why, size_t whylen)
{
	struct follow_state *s = fol(e);
	struct follow_ent *x;

	(void)why;
	(void)whylen;
	if (s->next == s->b->n) {
		return s->b->ended ? 0 : -EAGAIN;
	}
	x = s->b->ents[s->next];
	/*
	 * -X/-A where the next hop may keep a file (SKIPPED) at once: its
	 * attributes are read then, so a file is offered only once settled here.
	 */
	if (x->src.ftype == PROTO_FT_REG && !x->done &&
	    (e->p->open_flags & (PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS)) &&
	    (e->p->open_flags & (PROTO_OPEN_SKIP_LEVELS | PROTO_OPEN_DELTA))) {
		return -EAGAIN;
	}
	s->next++;
	x->given = true;
	x->src.path = x->path;
	*ret = &x->src;
	return ENGINE_TX_TAKEN;
}

static uint64_t fol_avail(const struct engine *e, const struct efile *f)
{
	const struct follow_ent *x = fol_of(e, f);

	return x ? x->avail : UINT64_MAX;
}

/* A file that failed upstream before it was opened here fails at once. */
static int fol_opened(struct engine *e, struct efile *f, int fd, char *text, size_t textlen)
{
	const struct follow_ent *x = fol_of(e, f);

	(void)fd;
	if (x && x->done && !x->ok) {
		snprintf(text, textlen, "failed upstream");
		return (int)x->code;
	}
	return 0;
}

static bool fol_done_ready(struct engine *e, struct efile *f)
{
	const struct follow_ent *x = fol_of(e, f);

	if (x && x->done && !x->ok && !f->failed) {
		file_fail(f, x->code, "failed upstream");
	}
	return !x || x->done;
}

static uint32_t fol_digest(struct engine *e, struct efile *f, uint8_t *hash, char *text,
			   size_t textlen)
{
	const struct follow_ent *x = fol_of(e, f);

	/* The source's digest is of one kind: a file checked by another kind here makes its own. */
	if (!x || !x->digest_known || x->digest_tree != engine_digest_tree(e, f)) {
		return PERR_OK;
	}
	if (CRYPTO_memcmp(hash, x->digest, HASH_LEN) != 0) {
		snprintf(text, textlen, "read here differs from the source (digest mismatch)");
		return PERR_IO;
	}
	memcpy(hash, x->digest, HASH_LEN);
	return PERR_OK;
}

/* ---- the session -------------------------------------------------------- */

static bool fol_enable(struct engine *e)
{
	return e->p->role == ENGINE_SENDER && e->p->follow != NULL;
}

/* A run begins at the book's first entry: none taken or done with yet. */
static int fol_setup(struct engine *e)
{
	struct follow_state *s = fol(e);

	s->b = e->p->follow;
	for (size_t i = 0; i < s->b->n; i++) {
		s->b->ents[i]->given = s->b->ents[i]->released = false;
		s->b->ents[i]->fid = 0;
	}
	if (s->b->upstream_lost) {
		return engine_fail(e, PERR_PROTOCOL, -ECONNABORTED, "relay feed: failed upstream");
	}
	return s->b->eof ? 0 : engine_watch_add(e, s->b->sock, fol_ready, 0);
}

/* x's descriptor is done with in this run: kept for a replay (follow_book_keep), or closed. */
static void fol_let_go(struct follow_book *b, struct follow_ent *x)
{
	x->released = true;
	if (x->fd >= 0 && !x->held && b->keep && b->kept < b->keep_max) {
		x->held = true;
		b->kept++;
	} else if (x->fd >= 0 && !x->held) {
		b->dropped = true;
		close(x->fd);
		x->fd = -1;
	}
}

/*
 * Files just offered are matched with their entries (a DONE finds its file
 * by them, fol_wake). Directories just offered have had their attributes
 * read (-X/-A: the xattrs feature, before this one, on the hop's
 * descriptor): it goes.
 */
static int fol_offered(struct engine *e, const struct proto_file *pf, uint32_t n)
{
	struct follow_book *b = fol(e)->b;

	for (uint32_t i = 0; i < n; i++) {
		const struct efile *f = file_by_id(e, pf[i].id);
		struct follow_ent *x;

		if (f && pf[i].ftype == PROTO_FT_REG) {
			fol_of(e, f);
		}
		if (pf[i].ftype != PROTO_FT_DIR || !f) {
			continue;
		}
		x = fol_by_path(b, f->src_path);
		if (x && x->src.ftype == PROTO_FT_DIR) {
			fol_let_go(b, x);
		}
	}
	return 0;
}

/* An entry the hop made as a hard link (-H) goes as one, to the name of its file there. */
static int fol_offer(struct engine *e, const struct engine_src *src, const char **ret_first)
{
	(void)e;
	if (src->ftype != PROTO_FT_HARDLINK || !src->link) {
		return 0;
	}
	*ret_first = src->link;
	return 1;
}

/*
 * f is done with in this run: the hop's descriptor goes (the sender has its
 * own) unless the book keeps it for a replay.
 */
static void fol_file_release(struct engine *e, struct efile *f)
{
	struct follow_ent *x = fol_of(e, f);

	if (x && !x->released) {
		fol_let_go(fol(e)->b, x);
	}
}

static uint64_t fol_progress(const struct engine *e)
{
	return fol(e)->b->records;
}

static size_t fol_file_size(const struct engine *e)
{
	(void)e;
	return sizeof(struct follow_file);
}

/* ---- the book ----------------------------------------------------------- */

int follow_book_new(int sock, struct follow_book **ret)
{
	struct follow_book *b = calloc(1, sizeof(*b));
	struct rlimit rl;

	if (!b) {
		return -ENOMEM;
	}
	b->sock = sock;
	/* Half the descriptors this process may open, for files kept for a replay. */
	b->keep_max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
			  ? (size_t)rl.rlim_cur / 2
			  : 4096;
	*ret = b;
	return 0;
}

void follow_book_keep(struct follow_book *b, bool keep)
{
	b->keep = keep;
}

bool follow_book_replayable(const struct follow_book *b)
{
	return !b->upstream_lost && !b->dropped;
}

void follow_book_free(struct follow_book *b)
{
	if (!b) {
		return;
	}
	for (size_t i = 0; i < b->n; i++) {
		if (b->ents[i]->fd >= 0) {
			close(b->ents[i]->fd);
		}
		free(b->ents[i]->src.name);
		free(b->ents[i]->src.link);
		free(b->ents[i]);
	}
	free(b->ents);
	idmap_free(&b->by_hid);
	idmap_free(&b->by_fd);
	free(b);
}

const struct engine_feature engine_feature_follow = {
	.name = "follow",
	.enable = fol_enable,
	.setup = fol_setup,
	.progress = fol_progress,
	.file_size = fol_file_size,
	.file_release = fol_file_release,
	.state_size = sizeof(struct follow_state),
	.tx_opened = fol_opened,
	.tx_offer = fol_offer,
	.tx_offered = fol_offered,
	.tx_source = fol_source,
	.tx_avail = fol_avail,
	.tx_done_ready = fol_done_ready,
	.tx_digest = fol_digest,
};
