/* SPDX-License-Identifier: MIT */
/*
 * -H, hard links. The sender remembers each regular file with more than
 * one link by (device, inode): its first name is sent as a file, every
 * later one as a FILES entry of type HARDLINK naming the first. The
 * receiver links such an entry to a regular file it committed (or kept by
 * a skip level) under that name in this session, never to anything else:
 * at once when the file is done, else when it is (the link waits in the
 * file table, which bounds what waits); a link whose file failed fails.
 * The link is made under a temp name and renamed over the entry's name.
 */
#include "engine-internal.h"
#include "hello.h"

/*
 * The session state of -H (allocated only with it). Sender: its files with
 * more than one link, by (device, inode), open addressing over hl (index + 1,
 * 0 = empty). Receiver: the names a hard link may point at (hashes; see
 * LINK_TARGETS_MAX), and the links waiting for theirs.
 */
struct links_state {
	uint32_t *hl_slots;
	size_t hl_cap;
	struct hl_ent *hl;
	size_t hl_n, hl_vcap, hl_bytes;
	bool hl_full; /* told the user once */
	struct name_set lt;
	bool lt_full;
	/* Of those, the kept ones with other names there already, with their files (lt_kept_add). */
	struct name_set kept;
	uint32_t links_waiting; /* hard links waiting for their first name */
	uint32_t links_ready;	/* hard links whose first name is resolved */
	/* The ids (+ 1) that links wait for; waited_full: not all there (no memory), look always. */
	struct name_set waited;
	bool waited_full;
	/* PROTO_CAP_LINKED_FILES on both ends (links_setup): linked files are marked. */
	bool marked;
};

extern const struct engine_feature engine_feature_links;

static struct links_state *links_of(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_links);
}

/*
 * A receiver's hard link (-H): the name it links to, waiting for that file
 * (its id). A regular file: whether the sender marked it linked.
 */
struct links_file {
	char *link_target;
	uint32_t link_wait;
	bool link_waiting, link_ready, link_target_ok;
	bool linked;
};

/* f's links state: only a receiver with -H has it. */
static struct links_file *links_file(const struct engine *e, const struct efile *f)
{
	return engine_file_state(e, &engine_feature_links, f);
}

/*
 * PROTO_CAP_LINKED_FILES on both ends: the sender marks each regular file
 * with other names, and the receiver remembers only those as targets.
 */
static bool links_marked(const struct engine *e)
{
	return links_of(e)->marked;
}

/* ---- sender ---- */

/* The files tx_link_check remembers as first names (and those past its cap). */
static bool tx_link_candidate(const struct engine *e, const struct engine_src *s)
{
	return (e->p->open_flags & PROTO_OPEN_HARDLINKS) && s->ftype == PROTO_FT_REG &&
	       s->nlink >= 2;
}

bool engine_tx_linked(const struct engine *e, const struct engine_src *s, uint8_t ftype)
{
	return ftype == PROTO_FT_REG && tx_link_candidate(e, s) && links_marked(e);
}

static size_t hl_hash(uint64_t dev, uint64_t ino)
{
	uint64_t k[2] = { dev, ino };

	return (size_t)XXH3_64bits(k, sizeof(k));
}

static int hl_grow(struct engine *e)
{
	struct links_state *lk = links_of(e);
	size_t cap = lk->hl_cap ? lk->hl_cap * 2 : 1024;
	uint32_t *t = calloc(cap, sizeof(*t));

	if (!t) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < lk->hl_n; i++) {
		size_t k = hl_hash(lk->hl[i].dev, lk->hl[i].ino) & (cap - 1);

		while (t[k]) {
			k = (k + 1) & (cap - 1);
		}
		t[k] = (uint32_t)(i + 1);
	}
	free(lk->hl_slots);
	lk->hl_slots = t;
	lk->hl_cap = cap;
	return 0;
}

/* Tell the user once that later names of files go as copies. */
static void hl_note_full(struct engine *e, const char *name)
{
	struct links_state *lk = links_of(e);
	char text[256];

	if (lk->hl_full) {
		return;
	}
	lk->hl_full = true;
	snprintf(text, sizeof(text),
		 "more than %u files with hard links (or %zu MiB of their names): this one and "
		 "later ones are sent as separate copies, not as links",
		 HARDLINK_MAX, HARDLINK_BYTES_MAX >> 20);
	if (e->p->ev.notice) {
		e->p->ev.notice(e->p->ev.ud, name, text);
	}
}

/*
 * Source entry s under -H: 1 with *ret_first its file's first name (send
 * s as a hard link), 0 to send it as itself (its first name, now
 * remembered, or one past the table's cap), -ENOMEM.
 */
static int tx_link_check(struct engine *e, const struct engine_src *s, const char **ret_first)
{
	struct links_state *lk = links_of(e);
	size_t bytes = sizeof(struct hl_ent) + 2 * sizeof(uint32_t) + strlen(s->name) + 1;
	struct hl_ent *h;
	size_t k;

	if (!tx_link_candidate(e, s)) {
		return 0;
	}
	if (lk->hl_cap) {
		for (k = hl_hash(s->dev, s->ino) & (lk->hl_cap - 1); lk->hl_slots[k];
		     k = (k + 1) & (lk->hl_cap - 1)) {
			h = &lk->hl[lk->hl_slots[k] - 1];
			if (h->dev == s->dev && h->ino == s->ino) {
				*ret_first = h->name;
				return 1;
			}
		}
	}
	size_t max = (e->p->faults & ENGINE_FAULT_FEW_LINKS) ? 2 : HARDLINK_MAX;

	if (lk->hl_n >= max || lk->hl_bytes + bytes > HARDLINK_BYTES_MAX) {
		hl_note_full(e, s->name);
		return 0;
	}
	if ((lk->hl_n + 1) * 2 > lk->hl_cap && hl_grow(e) < 0) {
		return -ENOMEM;
	}
	if (lk->hl_n == lk->hl_vcap) {
		size_t cap = lk->hl_vcap ? lk->hl_vcap * 2 : 256;
		struct hl_ent *v = reallocarray(lk->hl, cap, sizeof(*v));

		if (!v) {
			return -ENOMEM;
		}
		lk->hl = v;
		lk->hl_vcap = cap;
	}
	h = &lk->hl[lk->hl_n];
	*h = (struct hl_ent){ .dev = s->dev, .ino = s->ino, .name = strdup(s->name) };
	if (!h->name) {
		return -ENOMEM;
	}
	for (k = hl_hash(s->dev, s->ino) & (lk->hl_cap - 1); lk->hl_slots[k];
	     k = (k + 1) & (lk->hl_cap - 1)) {
	}
	lk->hl_slots[k] = (uint32_t)(++lk->hl_n);
	lk->hl_bytes += bytes;
	return 0;
}

static void tx_links_free(struct engine *e)
{
	struct links_state *lk = links_of(e);
	for (size_t i = 0; i < lk->hl_n; i++) {
		free(lk->hl[i].name);
	}
	free(lk->hl);
	free(lk->hl_slots);
	lk->hl = NULL;
	lk->hl_slots = NULL;
	lk->hl_n = lk->hl_cap = lk->hl_vcap = 0;
}

/* ---- receiver ---- */

static uint64_t lt_hash(const char *name)
{
	return XXH3_64bits(name, strlen(name)) | 1; /* 0 marks an empty slot */
}

/*
 * A probe also remembers, in the same table under a second hash, the
 * targets it would copy: a real run replaces those, so a link to one is
 * made, never kept as the same file.
 */
static uint64_t lt_hash_planned(const char *name)
{
	return XXH3_64bits_withSeed(name, strlen(name), 1) | 1;
}

static bool lt_has_hash(const struct engine *e, uint64_t h)
{
	struct links_state *lk = links_of(e);
	return hash_set_has(&lk->lt, h);
}

/* Remember a name a link may point at; past LINK_TARGETS_MAX it is not (lt_full). */
static int lt_add_hash(struct engine *e, uint64_t h)
{
	struct links_state *lk = links_of(e);
	size_t max = (e->p->faults & ENGINE_FAULT_FEW_TARGETS) ? 2 : LINK_TARGETS_MAX;

	if (lk->lt.n >= max) {
		lk->lt_full = true;
		return 0;
	}
	return hash_set_add(&lk->lt, h) < 0 ? -ENOMEM : 0;
}

/*
 * A target kept by a skip level that has other names at the destination
 * already is remembered with its file there, as one key of (its name's
 * key, device, inode): a link to it is kept when its own name is that file
 * (one stat of its own, rx_link_kept), without resolving the target's
 * directory again. A key not there (another target, a file of its own, no
 * memory, past LINK_TARGETS_MAX) has the target looked at as before.
 */
static uint64_t lt_kept_key(uint64_t name_key, uint64_t dev, uint64_t ino)
{
	uint64_t k[3] = { name_key, dev, ino };

	return XXH3_64bits(k, sizeof(k)) | 1;
}

static void lt_kept_add(struct links_state *lk, uint64_t name_key, uint64_t dev, uint64_t ino)
{
	if (lk->kept.n < LINK_TARGETS_MAX) {
		(void)hash_set_add(&lk->kept, lt_kept_key(name_key, dev, ino));
	}
}

static int lt_add(struct engine *e, const char *name)
{
	return lt_add_hash(e, lt_hash(name));
}

/*
 * May a hard link name t? A regular file of this session; where the sender
 * marks linked files (links_marked), only one it marked: no other name is
 * remembered, so a session of any number of files keeps every target it
 * needs (the sender's own table is smaller than LINK_TARGETS_MAX).
 */
static bool rx_link_target_ok(const struct engine *e, const struct efile *t)
{
	const struct links_file *lf = links_file(e, t);

	return t->ftype == PROTO_FT_REG && (!links_marked(e) || (lf && lf->linked));
}

/* A probe's regular file t would be copied: it may be linked to, never kept as the same file. */
static void rx_link_target_done(struct engine *e, const struct efile *t, bool ok);

static void rx_link_target_planned(struct engine *e, const struct efile *t)
{
	struct links_state *lk = links_of(e);
	if ((e->p->open_flags & PROTO_OPEN_HARDLINKS) && rx_link_target_ok(e, t) &&
	    lt_add_hash(e, lt_hash_planned(t->name)) < 0) {
		lk->lt_full = true;
	}
	rx_link_target_done(e, t, true);
}

static void rx_links_free(struct engine *e)
{
	struct links_state *lk = links_of(e);
	free(lk->lt.h);
	lk->lt = (struct name_set){ 0 };
	free(lk->waited.h);
	lk->waited = (struct name_set){ 0 };
	free(lk->kept.h);
	lk->kept = (struct name_set){ 0 };
}

/*
 * Make hard link f to its target (already a name committed this session):
 * the target must be a regular file, found beneath the destination without
 * following a symlink; linked under a temp name, renamed over f's name.
 * On success f waits, like a renamed file, for its directory's fsync.
 */
static uint32_t rx_link_make(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	struct links_file *lf = links_file(e, f);
	_cleanup_close_ int tdir = -1;
	struct dirent_cache *d = &e->dirs[f->dir];
	struct stat st, old;
	const char *tleaf;
	int r;

	r = fspath_open_parent(e->p->base_fd, lf->link_target, false, &tdir, &tleaf);
	if (r >= 0 && fstatat(tdir, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		r = negerrno();
	}
	if (r >= 0 && !S_ISREG(st.st_mode)) {
		r = -EINVAL;
	}
	if (r < 0) {
		snprintf(text, textlen, "hard link to %.200s: %s", lf->link_target,
			 r == -EINVAL ? "not a regular file" : strerror(-r));
		return errno_to_perr(r == -EINVAL ? -ENOENT : r);
	}
	/* The same file by that name already: nothing to change. */
	if (fstatat(d->fd, f->leaf, &old, AT_SYMLINK_NOFOLLOW) < 0 || old.st_dev != st.st_dev ||
	    old.st_ino != st.st_ino) {
		for (int tries = 0; tries < 16; tries++) {
			r = file_tmpname(f)
				? fspath_temp_name(f->leaf, f->tmpname, FILE_TMPNAME_LEN)
				: -ENOMEM;
			if (r < 0) {
				break;
			}
			r = linkat(tdir, tleaf, d->fd, f->tmpname, 0) == 0 ? 0 : negerrno();
			if (r != -EEXIST) {
				break;
			}
		}
		if (r >= 0 && renameat(d->fd, f->tmpname, d->fd, f->leaf) < 0) {
			r = negerrno();
		}
		/* Gone after a rename, unless the name was the same file already (a no-op). */
		if (f->tmpname && f->tmpname[0]) {
			unlinkat(d->fd, f->tmpname, 0);
			f->tmpname[0] = '\0';
		}
		if (r < 0) {
			snprintf(text, textlen, "hard link to %.200s: %s", lf->link_target,
				 strerror(-r));
			return errno_to_perr(r);
		}
	}
	f->renamed = true;
	rx_dir_named(d);
	f->dir_sync_needed = d->submitted + 1;
	e->commit_batch[e->ncommit++] = file_index(e, f);
	return PERR_OK;
}

/*
 * Link f (its directory held) is the file by its target's name already (the
 * name's key: target_key, its lt_hash), a regular file: kept. A target kept
 * with other names is known with its file from its keeping (lt_kept_add);
 * else the target is looked at beneath the destination.
 */
static bool rx_link_kept(struct engine *e, const struct efile *f, const char *target,
			 uint64_t target_key)
{
	_cleanup_close_ int tdir = -1;
	const char *tleaf;
	struct stat a, b;

	if (f->dir < 0 || fstatat(e->dirs[f->dir].fd, f->leaf, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(b.st_mode)) {
		return false;
	}
	if (hash_set_has(&links_of(e)->kept,
			 lt_kept_key(target_key, (uint64_t)b.st_dev, (uint64_t)b.st_ino))) {
		return true;
	}
	return fspath_open_parent(e->p->base_fd, target, false, &tdir, &tleaf) >= 0 &&
	       fstatat(tdir, tleaf, &a, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/*
 * A FILES entry of type HARDLINK, its own name checked already: where it
 * goes, what it links to (the target's name mapped as names are), and then
 * made at once, or left waiting for a target still in flight (not one
 * kept whose answer is held, kept_wait: that one is settled, in lt).
 */
static uint32_t rx_link_accept(struct engine *e, struct efile *f, const char *link, char *text,
			       size_t textlen, bool *ret_peer)
{
	struct links_state *lk = links_of(e);
	uint32_t level = e->p->open_flags & (PROTO_OPEN_SKIP_EXISTS | PROTO_OPEN_SKIP_QUICK);
	struct links_file *lf = links_file(e, f);
	uint64_t target_key;
	uint32_t code;
	bool in_table;

	if (rx_map_name(e, link, &lf->link_target) < 0) {
		return PERR_INTERNAL;
	}
	if (fspath_validate(lf->link_target) < 0 || strcmp(lf->link_target, f->name) == 0) {
		*ret_peer = true;
		snprintf(text, textlen, "invalid hard link target");
		return PERR_BAD_PATH;
	}
	code =
	    engine_probe(e) ? rx_probe_locate(e, f, text, textlen) : rx_locate(e, f, text, textlen);
	if (code != PERR_OK) {
		return code;
	}
	/* Its target among the entries in the table: looked for only where the set says it may be. */
	in_table = rx_name_in_table(e, lf->link_target);
	for (size_t i = 0; in_table && i < e->files_hw; i++) {
		struct efile *t = file_at(e, i);

		if (t->used && t != f && rx_link_target_ok(e, t) && t->name && !t->kept_wait &&
		    strcmp(t->name, lf->link_target) == 0) {
			if (engine_probe(e)) {
				return PERR_OK; /* its file waits for digests: the link would be made */
			}
			lf->link_wait = t->id;
			lf->link_waiting = true;
			lk->links_waiting++;
			if (hash_set_add(&lk->waited, (uint64_t)t->id + 1) < 0) {
				lk->waited_full = true;
			}
			return PERR_OK;
		}
	}
	target_key = lt_hash(lf->link_target);
	if (!lt_has_hash(e, target_key)) {
		snprintf(text, textlen,
			 "hard link to %.200s: that file was not copied in this session%s",
			 lf->link_target,
			 lk->lt_full ? " (or is past the receiver's limit of names it remembers)"
				     : "");
		return PERR_NOT_FOUND;
	}
	/* A probe: a target it would copy is replaced by then, the link made. */
	if (level && !(engine_probe(e) && lt_has_hash(e, lt_hash_planned(lf->link_target))) &&
	    rx_link_kept(e, f, lf->link_target, target_key)) {
		return PERR_SKIPPED;
	}
	return engine_probe(e) ? PERR_OK : rx_link_make(e, f, text, textlen);
}

/*
 * Regular file t is resolved (ok: committed or kept; else failed): it may
 * be linked to from now on, and the links that wait for it go on.
 */
static void rx_link_target_done(struct engine *e, const struct efile *t, bool ok)
{
	struct links_state *lk = links_of(e);
	if (!(e->p->open_flags & PROTO_OPEN_HARDLINKS) || t->ftype != PROTO_FT_REG) {
		return;
	}
	if (ok && rx_link_target_ok(e, t) && lt_add(e, t->name) < 0) {
		lk->lt_full = true;
	}
	/* The table is looked through only when a link waits for t. */
	if (lk->links_waiting == 0 ||
	    (!lk->waited_full && !hash_set_has(&lk->waited, (uint64_t)t->id + 1))) {
		return;
	}
	hash_set_del(&lk->waited, (uint64_t)t->id + 1);
	for (size_t i = 0; lk->links_waiting > 0 && i < e->files_hw; i++) {
		struct efile *f = file_at(e, i);
		struct links_file *lf = links_file(e, f);

		if (f->used && lf->link_waiting && lf->link_wait == t->id) {
			lf->link_waiting = false;
			lk->links_waiting--;
			lf->link_ready = true;
			lf->link_target_ok = ok;
			lk->links_ready++;
		}
	}
}

const char *engine_link_target(const struct engine *e, const struct efile *f)
{
	const struct links_file *lf;

	if (e->p->role != ENGINE_RECEIVER || !(e->p->open_flags & PROTO_OPEN_HARDLINKS) ||
	    f->ftype != PROTO_FT_HARDLINK) {
		return NULL;
	}
	lf = links_file(e, f);
	return lf ? lf->link_target : NULL;
}

/* The links whose target is resolved: made now, or failed with it. */
static int rx_links_step(struct engine *e)
{
	struct links_state *lk = links_of(e);
	for (size_t i = 0; lk->links_ready > 0 && i < e->files_hw; i++) {
		struct efile *f = file_at(e, i);
		struct links_file *lf = links_file(e, f);
		char text[256] = "";
		uint32_t code;

		if (!f->used || !lf->link_ready) {
			continue;
		}
		lf->link_ready = false;
		lk->links_ready--;
		if (lf->link_target_ok) {
			code = rx_link_make(e, f, text, sizeof(text));
		} else {
			code = PERR_NOT_FOUND;
			snprintf(text, sizeof(text), "hard link to %.200s: that file failed",
				 lf->link_target);
		}
		if (code != PERR_OK) {
			file_fail(f, code, "%s", text);
			int r = rx_resolve(e, f);

			if (r < 0) {
				return r;
			}
		}
	}
	return 0;
}

/* -H: the sender's first names by inode, the receiver's links waiting for their targets. */
static int links_step(struct engine *e)
{
	return e->p->role == ENGINE_RECEIVER ? rx_links_step(e) : 0;
}

static void links_release(struct engine *e)
{
	tx_links_free(e);
	rx_links_free(e);
}

static size_t links_file_size(const struct engine *e)
{
	return e->p->role == ENGINE_RECEIVER && (e->p->open_flags & PROTO_OPEN_HARDLINKS)
		   ? sizeof(struct links_file)
		   : 0;
}

static void links_file_release(struct engine *e, struct efile *f)
{
	struct links_file *lf = links_file(e, f);

	if (lf) {
		free(lf->link_target);
	}
}

static int links_rx_accept(struct engine *e, struct efile *f, const struct proto_file *pf,
			   uint32_t *code, char *text, size_t textlen, bool *ret_peer)
{
	if (pf->ftype != PROTO_FT_HARDLINK) {
		links_file(e, f)->linked = pf->linked;
		return ENGINE_DECLINED;
	}
	*code = rx_link_accept(e, f, pf->link, text, textlen, ret_peer);
	return 0;
}

static void links_rx_settled(struct engine *e, const struct efile *f, enum engine_rx_end how)
{
	if (how == ENGINE_RX_PLANNED) {
		rx_link_target_planned(e, f);
	} else {
		if (how == ENGINE_RX_KEPT && f->kept_nlink > 1 && f->ftype == PROTO_FT_REG &&
		    !f->device) {
			lt_kept_add(links_of(e), lt_hash(f->name), f->kept_dev, f->kept_ino);
		}
		/* A device is never given a second name (-H): links to it fail. */
		rx_link_target_done(e, f,
				    (how == ENGINE_RX_DONE || how == ENGINE_RX_KEPT) && !f->device);
	}
}

/* Once a session: our capabilities are not looked up for each file. */
static int links_setup(struct engine *e)
{
	links_of(e)->marked = (e->p->peer_caps & hello_local_caps() & PROTO_CAP_LINKED_FILES) != 0;
	return 0;
}

/* On with -H (a hard link in a session without it is the peer's fault: rx_files). */
static bool links_enable(struct engine *e)
{
	return (e->p->open_flags & PROTO_OPEN_HARDLINKS) != 0;
}

const struct engine_feature engine_feature_links = {
	.name = "links",
	.enable = links_enable,
	.setup = links_setup,
	.state_size = sizeof(struct links_state),
	.step = links_step,
	.release = links_release,
	.file_size = links_file_size,
	.file_release = links_file_release,
	.tx_offer = tx_link_check,
	.rx_accept = links_rx_accept,
	.rx_settled = links_rx_settled,
};
