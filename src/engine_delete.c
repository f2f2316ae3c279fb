/* SPDX-License-Identifier: MIT */
/*
 * --delete: the receiver's mirror pass, after the sender's END and before
 * its own. Only when every entry of the run succeeded (skipped files are
 * fine): each top-level directory received (its name after rename_to) is
 * walked, and every entry in it that the sender did not send is removed,
 * contents before their directory. What the sender sent is known by the
 * hashes of the names received (engine_names.c, "seen"): a hash collision
 * can only make an entry look sent, and keep it, never remove one that was.
 *
 * A probe (engine_probe) walks the same way and removes nothing: each entry
 * it would remove is reported as removed (a directory after its contents,
 * as if they were gone), --max-delete withholds as it would.
 *
 * The walk goes from held directory fds one component at a time, opened
 * O_NOFOLLOW (a symlink is removed itself, never followed), never into
 * another file system or any mount point (a bind mount too), and keeps the project's temp files and the partial
 * store (.rdmacp-partial) wherever they are. It holds one open directory per
 * level (at most DEL_MAX_DEPTH), so its memory does not grow with the tree;
 * it runs DEL_STEP_ENTRIES entries per turn of the engine's loop, and tells
 * a peer that has PROTO_CAP_DELETE what it did (DELETED batches; an empty
 * one at least every second, so the sender's idle timer does not fire).
 */
#include "engine-internal.h"

#include <sys/sysmacros.h>

#include "dirread.h"
#include "walk.h"

#define DEL_MAX_DEPTH	 256   /* levels below a top-level directory */
#define DEL_ROOTS_MAX	 65536 /* top-level directories remembered */
#define DEL_STEP_ENTRIES 256   /* entries looked at per turn of the loop */
#define DEL_KEEPALIVE_S	 1.0
#define PARTIAL_STORE	 ".rdmacp-partial" /* the --partial store: never ours to delete */

/* Why an extra directory stays: the strongest reason among its entries'. */
enum del_hold {
	HOLD_NONE = 0,
	HOLD_KEPT = 1,	   /* kept on purpose (filter, temp file, other file system) */
	HOLD_FAILED = 2,   /* could not be removed (reported) */
	HOLD_WITHHELD = 3, /* --max-delete reached (reported) */
	DEL_PUSHED = 4,	   /* not a reason: the directory is walked now */
};

struct del_frame {
	struct dir_reader *d;
	size_t plen;  /* length of this directory's name in path */
	bool doomed;  /* not sent: everything in it goes, then itself */
	uint8_t hold; /* enum del_hold: why it can't go */
};

struct del_state {
	size_t next_root;
	dev_t dev; /* the top-level directory's file system */
	struct del_frame stack[DEL_MAX_DEPTH + 1];
	unsigned depth;
	char *path; /* destination-relative name of what is looked at */
	size_t len, cap;
	uint8_t ftype; /* ... and its type (enum proto_ftype, 0: something else) */
	/* The DELETED batch being filled (names and texts owned). */
	struct proto_deleted ents[PROTO_MAX_BATCH];
	size_t nents, bytes;
	struct timespec last_sent;
};

/*
 * The session state of the delete feature (on for every copy: its rx_dir
 * and on_end look at --delete themselves). del: the pass, while it runs.
 */
struct delete_state {
	/* Receiver, --delete: top-level directories received (rx_delete_note_dir). */
	char **del_roots;
	size_t ndel_roots, del_roots_cap;
	struct del_state *del;
	bool del_active; /* the pass runs: our END waits for it */
	uint64_t del_examined;
	uint64_t del_heard; /* sender: DELETED batches (the receiver's pass is progress) */
};

extern const struct engine_feature engine_feature_delete;

static struct delete_state *delete_of(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_delete);
}

static bool del_tells_peer(const struct engine *e)
{
	return e->p->peer_caps & PROTO_CAP_DELETE;
}

/*
 * A top-level directory received (f->name has no '/'): remembered for the
 * pass. Past DEL_ROOTS_MAX the entry is refused, so the run has a failure
 * and nothing is deleted: never a directory left out of the mirror silently.
 */
static uint32_t rx_delete_note_dir(struct engine *e, const struct efile *f, char *text,
				   size_t textlen)
{
	struct delete_state *dl = delete_of(e);
	char *name;

	if (!(e->p->open_flags & PROTO_OPEN_DELETE) || strchr(f->name, '/')) {
		return PERR_OK;
	}
	if (dl->ndel_roots >= DEL_ROOTS_MAX) {
		snprintf(text, textlen, "more than %d top-level directories with --delete",
			 DEL_ROOTS_MAX);
		return PERR_BUSY;
	}
	if (dl->ndel_roots == dl->del_roots_cap) {
		size_t cap = dl->del_roots_cap ? dl->del_roots_cap * 2 : 16;
		char **t = reallocarray(dl->del_roots, cap, sizeof(*t));

		if (!t) {
			return PERR_INTERNAL;
		}
		dl->del_roots = t;
		dl->del_roots_cap = cap;
	}
	name = strdup(f->name);
	if (!name) {
		return PERR_INTERNAL;
	}
	dl->del_roots[dl->ndel_roots++] = name;
	return PERR_OK;
}

static void del_batch_clear(struct del_state *ds)
{
	for (size_t i = 0; i < ds->nents; i++) {
		free(ds->ents[i].name);
		free(ds->ents[i].text);
	}
	ds->nents = 0;
	ds->bytes = 0;
}

/* The batch so far (maybe empty: a keepalive), or SUPPRESSED alone. */
static int del_flush(struct engine *e, uint8_t flags)
{
	struct delete_state *dl = delete_of(e);
	struct del_state *ds = dl->del;
	struct msg m = { .type = MSG_DELETED };
	int r = 0;

	if (del_tells_peer(e)) {
		m.u.deleted.flags = flags;
		m.u.deleted.count = ds ? (uint16_t)ds->nents : 0;
		m.u.deleted.ents = ds ? ds->ents : NULL;
		r = chan_queue(e->p->chan, &m);
	}
	if (ds) {
		del_batch_clear(ds);
		ts_now(&ds->last_sent);
	}
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* One entry for the peer's batch (only a push's daemon sends names). */
static int del_queue(struct engine *e, uint8_t what, uint8_t ftype, uint32_t code, const char *name,
		     const char *text)
{
	struct delete_state *dl = delete_of(e);
	struct del_state *ds = dl->del;
	struct proto_deleted *d;

	if (!del_tells_peer(e) || !e->p->delete_tell_peer) {
		return 0;
	}
	d = &ds->ents[ds->nents];
	*d = (struct proto_deleted){ .what = what, .ftype = ftype, .code = code };
	d->name = walk_name_for_people(name);
	d->text = strndup(text, PROTO_MAX_TEXT);
	if (!d->name || !d->text) {
		free(d->name);
		free(d->text);
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	ds->nents++;
	ds->bytes += 1 + 1 + 4 + 2 + strlen(d->name) + 2 + strlen(d->text);
	if (ds->nents == PROTO_MAX_BATCH || ds->bytes >= PROTO_DELETED_FILL) {
		return del_flush(e, 0);
	}
	return 0;
}

/* Tell of an entry: here (events, stats), and the peer. */
static int del_report(struct engine *e, uint8_t what, uint32_t code, const char *text)
{
	struct delete_state *dl = delete_of(e);
	const char *name = dl->del->path;
	uint8_t ftype = dl->del->ftype;

	switch (what) {
	case PROTO_DEL_DELETED:
		e->st.files_deleted++;
		if (e->p->ev.deleted) {
			e->p->ev.deleted(e->p->ev.ud, name, ftype);
		}
		break;
	case PROTO_DEL_WITHHELD:
		e->st.delete_withheld++;
		if (e->p->ev.delete_withheld) {
			e->p->ev.delete_withheld(e->p->ev.ud, name, ftype);
		}
		break;
	default:
		file_note_failure(e, name, ftype, code, true, text);
		break;
	}
	return del_queue(e, what, ftype, code, name, text);
}

static int del_fail(struct engine *e, int r, const char *what)
{
	char text[256];

	snprintf(text, sizeof(text), "%s: %s", what, strerror(-r));
	return del_report(e, PROTO_DEL_FAILED, errno_to_perr(r), text);
}

/* path += "/" + name. */
static int path_push(struct del_state *ds, const char *name)
{
	size_t n = strlen(name), need = ds->len + 1 + n + 1;

	if (need > ds->cap) {
		size_t cap = MAX(need, ds->cap * 2);
		char *p = realloc(ds->path, cap);

		if (!p) {
			return -ENOMEM;
		}
		ds->path = p;
		ds->cap = cap;
	}
	if (ds->len > 0) {
		ds->path[ds->len++] = '/';
	}
	memcpy(ds->path + ds->len, name, n + 1);
	ds->len += n;
	return 0;
}

static void path_cut(struct del_state *ds, size_t len)
{
	ds->len = len;
	if (ds->path) {
		ds->path[len] = '\0';
	}
}

static void hold(struct del_frame *fr, enum del_hold h)
{
	fr->hold = (uint8_t)MAX(fr->hold, (uint8_t)h);
}

/*
 * Remove path (leaf in dfd), or withhold it when --max-delete is reached.
 * Returns why it stays (HOLD_NONE: gone), or -errno when the session fails.
 */
static int del_act(struct engine *e, int dfd, const char *leaf, bool is_dir)
{
	int r;

	if (e->st.files_deleted >= e->p->max_delete) {
		r = del_report(e, PROTO_DEL_WITHHELD, PERR_OK, "");
		return r < 0 ? r : HOLD_WITHHELD;
	}
	/* A probe says what it would remove, and walks on as if it had. */
	if (!engine_probe(e) && unlinkat(dfd, leaf, is_dir ? AT_REMOVEDIR : 0) < 0) {
		if (errno == ENOENT) {
			return HOLD_NONE; /* gone meanwhile */
		}
		r = del_fail(e, negerrno(), is_dir ? "rmdir" : "unlink");
		return r < 0 ? r : HOLD_FAILED;
	}
	r = del_report(e, PROTO_DEL_DELETED, PERR_OK, "");
	return r < 0 ? r : HOLD_NONE;
}

/*
 * Descend into directory path (leaf in parentfd): a sent one to compare its
 * entries, a doomed one to empty it. Returns DEL_PUSHED, why it can't be
 * walked, or -errno.
 */
static int del_push(struct engine *e, int parentfd, const char *leaf, bool doomed)
{
	struct delete_state *dl = delete_of(e);
	struct del_state *ds = dl->del;
	struct stat st;
	struct dir_reader *d;
	int fd, r;

	if (ds->depth > DEL_MAX_DEPTH) {
		r = del_report(e, PROTO_DEL_FAILED, PERR_BAD_PATH,
			       "more levels deep than --delete walks");
		return r < 0 ? r : HOLD_FAILED;
	}
	fd = openat(parentfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT) {
			return HOLD_NONE;
		}
		r = del_fail(e, negerrno(), "open directory");
		return r < 0 ? r : HOLD_FAILED;
	}
	/* Replaced since it was looked at: by a mount point, say. Not ours. */
	if (fstat(fd, &st) < 0 || st.st_dev != ds->dev) {
		close(fd);
		return HOLD_KEPT;
	}
	r = dir_reader_open(fd, &d);
	if (r < 0) {
		close(fd);
		r = del_fail(e, r, "open directory");
		return r < 0 ? r : HOLD_FAILED;
	}
	ds->stack[ds->depth++] = (struct del_frame){ .d = d, .plen = ds->len, .doomed = doomed };
	return DEL_PUSHED;
}

/*
 * What an entry is, never following it: its type, and whether it is on the
 * walk's own mount: on the top directory's file system and not the root of a
 * mount (a bind mount of a directory on the same file system included).
 */
static int del_look(const struct del_state *ds, int dfd, const char *leaf, uint8_t *ret_ftype,
		    bool *ret_ours, bool *ret_blk)
{
	struct statx stx;

	if (statx(dfd, leaf, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE, &stx) < 0) {
		return negerrno();
	}
	*ret_ftype = S_ISDIR(stx.stx_mode)   ? PROTO_FT_DIR
		     : S_ISREG(stx.stx_mode) ? PROTO_FT_REG
		     : S_ISLNK(stx.stx_mode) ? PROTO_FT_SYMLINK
					     : 0;
	*ret_blk = S_ISBLK(stx.stx_mode);
	*ret_ours = makedev(stx.stx_dev_major, stx.stx_dev_minor) == ds->dev &&
		    !(stx.stx_attributes_mask & stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
	return 0;
}

/*
 * One entry of the directory on top (path holds its name). Returns why it
 * stays (HOLD_NONE: sent, or gone), DEL_PUSHED, or -errno.
 */
static int del_entry(struct engine *e, struct del_frame *fr, const char *leaf)
{
	struct delete_state *dl = delete_of(e);
	struct del_state *ds = dl->del;
	int dfd = dir_reader_fd(fr->d), r;
	bool is_dir, ours, blk = false;
	uint8_t ftype = 0;

	/* Transfers in flight (this one's, or another session's), and the partial store. */
	if (fspath_is_temp_name(leaf) || !strcmp(leaf, PARTIAL_STORE)) {
		return HOLD_KEPT;
	}
	ds->ftype = 0;
	r = del_look(ds, dfd, leaf, &ftype, &ours, &blk);
	ds->ftype = ftype;
	is_dir = ftype == PROTO_FT_DIR;
	if (r < 0) {
		if (r == -ENOENT) {
			return HOLD_NONE; /* gone meanwhile */
		}
		r = del_fail(e, r, "stat");
		return r < 0 ? r : HOLD_FAILED;
	}
	/*
	 * Another file system, or any mount, in the tree is never walked or
	 * touched; nor is a block device where devices are written (a module's
	 * 'devices = yes'): its node is the administrator's, and no peer can make
	 * it again.
	 */
	if (!ours || (blk && e->p->write_devices)) {
		return HOLD_KEPT;
	}
	if (!fr->doomed && rx_seen(e, ds->path)) {
		return is_dir ? del_push(e, dfd, leaf, false) : HOLD_NONE;
	}
	/* Filters: an entry they protect is kept, a directory not even looked into. */
	if (e->p->delete_keep && e->p->delete_keep(e->p->delete_keep_ud, ds->path, is_dir)) {
		return HOLD_KEPT;
	}
	if (is_dir) {
		return del_push(e, dfd, leaf, true);
	}
	return del_act(e, dfd, leaf, false);
}

/* The directory on top is listed: close it; a doomed one goes now (or says why not). */
static int del_pop(struct engine *e)
{
	struct delete_state *dl = delete_of(e);
	struct del_state *ds = dl->del;
	struct del_frame fr = ds->stack[--ds->depth];
	int h = HOLD_NONE;

	dir_reader_close(fr.d);
	ds->ftype = PROTO_FT_DIR;
	if (fr.doomed) {
		struct del_frame *parent = &ds->stack[ds->depth - 1];
		const char *leaf = strrchr(ds->path, '/') + 1;

		if (fr.hold == HOLD_WITHHELD) {
			int r = del_report(e, PROTO_DEL_WITHHELD, PERR_OK, "");
			h = r < 0 ? r : HOLD_WITHHELD;
		} else if (fr.hold != HOLD_NONE) {
			h = fr.hold;
		} else {
			h = del_act(e, dir_reader_fd(parent->d), leaf, true);
		}
		if (h < 0) {
			return h;
		}
		hold(parent, (enum del_hold)h);
	}
	path_cut(ds, ds->depth > 0 ? ds->stack[ds->depth - 1].plen : 0);
	return 0;
}

/* The next top-level directory, opened beneath the destination without following a symlink. */
static int del_open_root(struct engine *e, const char *name)
{
	struct delete_state *dl = delete_of(e);
	struct del_state *ds = dl->del;
	struct stat st;
	struct dir_reader *d;
	int fd, r;

	path_cut(ds, 0);
	r = path_push(ds, name);
	if (r < 0) {
		return engine_fail(e, PERR_INTERNAL, r, "out of memory");
	}
	ds->ftype = PROTO_FT_DIR;
	r = e->p->base_fd < 0 ? -ENOENT : fspath_open_dir(e->p->base_fd, name, &fd);
	if (r >= 0 && fstat(fd, &st) < 0) {
		r = negerrno();
		close(fd);
	}
	if (r == -ENOENT && engine_probe(e)) {
		return 0; /* a probe: a real run would make it, empty of extras */
	}
	if (r < 0) {
		return del_fail(e, r, "open directory");
	}
	r = dir_reader_open(fd, &d);
	if (r < 0) {
		close(fd);
		return del_fail(e, r, "open directory");
	}
	ds->dev = st.st_dev;
	ds->stack[0] = (struct del_frame){ .d = d, .plen = ds->len };
	ds->depth = 1;
	return 0;
}

/* One entry (or the end) of the directory on top. */
static int del_next(struct engine *e)
{
	struct delete_state *dl = delete_of(e);
	struct del_state *ds = dl->del;
	struct del_frame *fr = &ds->stack[ds->depth - 1];
	const struct dirent64 *de;
	size_t base = ds->len;
	int r;

	r = dir_reader_next(fr->d, &de);
	if (r <= 0) {
		ds->ftype = PROTO_FT_DIR;
		if (r < 0) {
			/* Not all of it was seen: it can't go, nor can what holds it. */
			r = del_fail(e, r, "list directory");
			if (r < 0) {
				return r;
			}
			hold(fr, HOLD_FAILED);
		}
		return del_pop(e);
	}
	r = path_push(ds, de->d_name);
	if (r < 0) {
		return engine_fail(e, PERR_INTERNAL, r, "out of memory");
	}
	r = del_entry(e, fr, de->d_name);
	if (r < 0 || r == DEL_PUSHED) {
		return r < 0 ? r : 0; /* a directory pushed keeps its name in path */
	}
	hold(fr, (enum del_hold)r);
	path_cut(ds, base);
	return 0;
}

/*
 * At the sender's END: start the pass, or say why there is none (an entry
 * failed: SUPPRESSED). Returns 1 when the pass has work to do.
 */
static int rx_delete_start(struct engine *e)
{
	struct delete_state *dl = delete_of(e);
	if (!(e->p->open_flags & PROTO_OPEN_DELETE)) {
		return 0;
	}
	if (e->st.files_failed > 0) {
		e->st.delete_suppressed = true;
		return del_flush(e, PROTO_DELETED_SUPPRESSED);
	}
	dl->del = calloc(1, sizeof(*dl->del));
	if (!dl->del) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	ts_now(&dl->del->last_sent);
	dl->del_active = true;
	return 1;
}

/* A share of the pass, from rx_step. Clears del_active when the pass is over. */
static int rx_delete_step(struct engine *e)
{
	struct delete_state *dl = delete_of(e);
	struct del_state *ds = dl->del;
	int r = 0;

	for (unsigned n = 0; n < DEL_STEP_ENTRIES && r >= 0; n++) {
		if (ds->depth == 0) {
			if (ds->next_root == dl->ndel_roots) {
				r = del_flush(e, 0);
				dl->del_active = false;
				return r;
			}
			r = del_open_root(e, dl->del_roots[ds->next_root++]);
			continue;
		}
		dl->del_examined++;
		r = del_next(e);
	}
	/* What there is now, or an empty batch as a sign of life: the sender waits for our END. */
	if (r >= 0 && ts_since(&ds->last_sent) >= DEL_KEEPALIVE_S) {
		r = del_flush(e, 0);
	}
	return r;
}

static void rx_delete_free(struct engine *e)
{
	struct delete_state *dl = delete_of(e);
	struct del_state *ds = dl->del;

	if (ds) {
		while (ds->depth > 0) {
			dir_reader_close(ds->stack[--ds->depth].d);
		}
		del_batch_clear(ds);
		free(ds->path);
		free(ds);
		dl->del = NULL;
	}
	for (size_t i = 0; i < dl->ndel_roots; i++) {
		free(dl->del_roots[i]);
	}
	free(dl->del_roots);
	dl->del_roots = NULL;
	dl->ndel_roots = dl->del_roots_cap = 0;
}

/* Sender: the receiver's DELETED, heard between our END and its own. */
static int tx_deleted(struct engine *e, const struct msg_deleted *md)
{
	struct delete_state *dl = delete_of(e);
	dl->del_heard++;
	if (md->flags & PROTO_DELETED_SUPPRESSED) {
		e->st.delete_suppressed = true;
	}
	for (size_t i = 0; i < md->count; i++) {
		const struct proto_deleted *d = &md->ents[i];

		switch (d->what) {
		case PROTO_DEL_DELETED:
			e->st.files_deleted++;
			if (e->p->ev.deleted) {
				e->p->ev.deleted(e->p->ev.ud, d->name, d->ftype);
			}
			break;
		case PROTO_DEL_WITHHELD:
			e->st.delete_withheld++;
			if (e->p->ev.delete_withheld) {
				e->p->ev.delete_withheld(e->p->ev.ud, d->name, d->ftype);
			}
			break;
		default:
			file_note_failure(e, d->name, d->ftype, d->code, false, d->text);
			break;
		}
	}
	return 0;
}

/*
 * The feature: a receiver's pass after the sender's END (PROTO_OPEN_DELETE),
 * and a sender's hearing of it.
 */
static bool delete_enable(struct engine *e)
{
	return e->p->role == ENGINE_SENDER || e->p->role == ENGINE_RECEIVER;
}

/* A share of the pass each turn; when it ends, the directories' times are set (rx_finish_dirs). */
static int delete_step(struct engine *e)
{
	struct delete_state *dl = delete_of(e);
	int r;

	if (!dl->del_active) {
		return 0;
	}
	r = rx_delete_step(e);
	if (r >= 0 && !dl->del_active) {
		rx_finish_dirs(e);
	}
	return r;
}

static bool delete_busy(const struct engine *e)
{
	struct delete_state *dl = delete_of(e);
	return dl->del_active;
}

/* What the pass examined (receiver) or heard of it (sender) is progress. */
static uint64_t delete_progress(const struct engine *e)
{
	struct delete_state *dl = delete_of(e);
	return dl->del_examined + dl->del_heard;
}

/* Between our END and the receiver's, from a peer that can. */
static int delete_on_deleted(struct engine *e, struct msg *m)
{
	if (e->sent_end && !e->got_end && (e->p->peer_caps & PROTO_CAP_DELETE)) {
		return tx_deleted(e, &m->u.deleted);
	}
	return engine_msg_unexpected(e, m);
}

static const struct engine_msg_row delete_msgs[] = {
	{ MSG_DELETED, ENGINE_ROLE_BIT(ENGINE_SENDER), 0, delete_on_deleted },
	{ 0 },
};

const struct engine_feature engine_feature_delete = {
	.name = "delete",
	.enable = delete_enable,
	.state_size = sizeof(struct delete_state),
	.step = delete_step,
	.on_end = rx_delete_start,
	.busy = delete_busy,
	.progress = delete_progress,
	.release = rx_delete_free,
	.msgs = delete_msgs,
	.rx_dir = rx_delete_note_dir,
};
