/* SPDX-License-Identifier: MIT */
/*
 * The receiver's names: rename_to mapping, one destination once per
 * session, and where an entry goes (its parent directory, held in a cache
 * of directory fds beneath the destination).
 */
#include "engine-internal.h"
#include "memhint.h"

/* Is key (never 0) in s? */
bool hash_set_has(const struct name_set *s, uint64_t key)
{
	if (s->cap == 0) {
		return false;
	}
	for (size_t k = key & (s->cap - 1);; k = (k + 1) & (s->cap - 1)) {
		if (s->h[k] == key) {
			return true;
		}
		if (!s->h[k]) {
			return false;
		}
	}
}

/* Add key (never 0) to s: 1 added, 0 there already, -ENOMEM. */
int hash_set_add(struct name_set *s, uint64_t key)
{
	size_t k;

	if ((s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		uint64_t *t = calloc(cap, sizeof(*t));

		if (!t) {
			return -ENOMEM;
		}
		mem_hint_huge(t, cap * sizeof(*t));
		for (size_t i = 0; i < s->cap; i++) {
			if (s->h[i]) {
				for (k = s->h[i] & (cap - 1); t[k]; k = (k + 1) & (cap - 1)) {
				}
				t[k] = s->h[i];
			}
		}
		free(s->h);
		s->h = t;
		s->cap = cap;
	}
	for (k = key & (s->cap - 1); s->h[k]; k = (k + 1) & (s->cap - 1)) {
		if (s->h[k] == key) {
			return 0;
		}
	}
	s->h[k] = key;
	s->n++;
	return 1;
}

/*
 * Remove key from s, if there. Linear probing without tombstones: each entry
 * after the hole that would be looked for at or before the hole moves into
 * it, until an empty slot ends the run (Knuth's algorithm R).
 */
void hash_set_del(struct name_set *s, uint64_t key)
{
	size_t mask, i, j;

	if (s->cap == 0) {
		return;
	}
	mask = s->cap - 1;
	for (i = key & mask; s->h[i] != key; i = (i + 1) & mask) {
		if (!s->h[i]) {
			return;
		}
	}
	for (j = i;;) {
		size_t home;

		j = (j + 1) & mask;
		if (!s->h[j]) {
			break;
		}
		home = s->h[j] & mask;
		/* The entry at j stays where it is if its home lies cyclically in (i, j]. */
		if (i <= j ? (i < home && home <= j) : (i < home || home <= j)) {
			continue;
		}
		s->h[i] = s->h[j];
		i = j;
	}
	s->h[i] = 0;
	s->n--;
}

/* The key the first len bytes of a name are kept by: never 0, which marks an empty slot. */
static uint64_t name_hash_n(const char *name, size_t len)
{
	return XXH3_64bits(name, len) | 1;
}

static uint64_t name_hash(const char *name)
{
	return name_hash_n(name, strlen(name));
}

static bool name_set_has(const struct name_set *s, const char *name)
{
	return hash_set_has(s, name_hash(name));
}

static int name_set_add(struct name_set *s, const char *name)
{
	return hash_set_add(s, name_hash(name));
}

/*
 * path held in the cache already: a reference more, its index. Else -1,
 * with *ret_free a slot to hold it in (-1: none; every one is in use).
 */
static int dir_cached(struct engine *e, const char *path, int *ret_free)
{
	int free_idx = -1;

	if (e->dir_last < e->dirs_hw && e->dirs[e->dir_last].path &&
	    strcmp(e->dirs[e->dir_last].path, path) == 0) {
		e->dirs[e->dir_last].refs++;
		return e->dir_last;
	}
	for (int i = 0; i < e->dirs_hw; i++) {
		if (e->dirs[i].path && strcmp(e->dirs[i].path, path) == 0) {
			e->dirs[i].refs++;
			return e->dir_last = i;
		}
		if (free_idx < 0 &&
		    (!e->dirs[i].path ||
		     (e->dirs[i].refs == 0 && !e->dirs[i].dirty && !e->dirs[i].syncing))) {
			free_idx = i;
		}
	}
	if (free_idx < 0 && e->dirs_hw < DIR_CACHE) {
		free_idx = e->dirs_hw; /* never used: zero */
	}
	*ret_free = free_idx;
	return -1;
}

/* The directory path beneath the destination, opened (made, but by a probe). */
static int dir_open(struct engine *e, const char *path, int *ret_fd)
{
	int r, fd;

	if (engine_probe(e) && e->p->base_fd < 0) {
		r = -ENOENT; /* a probe into a destination that a real run would make */
	} else if (path[0] == '\0') {
		fd = fcntl(e->p->base_fd, F_DUPFD_CLOEXEC, 3);
		r = fd < 0 ? negerrno() : 0;
	} else if (engine_probe(e)) {
		/* Looked at, never made: a directory that is not there has nothing in it. */
		r = fspath_open_dir(e->p->base_fd, path, &fd);
	} else {
		r = fspath_open_or_create_dir(e->p->base_fd, path, &fd);
	}
	if (r < 0) {
		return r;
	}
	*ret_fd = fd;
	return 0;
}

/*
 * A directory seen the first time: fresh when this session made it
 * (rx_fresh_add): nothing is there that it did not put there. Its stale
 * temps wait for rx_dir_sweep.
 */
static bool dir_first_look(struct engine *e, const char *path)
{
	return !engine_probe(e) && name_set_has(&e->fresh, path);
}

/*
 * Before the first file this session writes in directory idx: temp files
 * of writers that died here earlier go, and partials of cut runs nobody
 * resumed (bounded: only the directories a session writes, once each).
 * A directory it only looks at (a re-run that keeps its files) is not
 * read: a stale temp is a dead writer's, and its file's next writer
 * sweeps it. A directory found empty is fresh from now on, as one this
 * session made is: what this session puts there has names sent once
 * (rx_fresh_add). A probe sweeps nothing: it only looks.
 */
void rx_dir_sweep(struct engine *e, int idx)
{
	struct dirent_cache *d = &e->dirs[idx];
	bool empty = false;

	if (d->swept || d->fresh || engine_probe(e)) {
		return;
	}
	d->swept = true;
	if (fspath_sweep_stale(d->fd, STALE_TEMP_AGE_S, &empty) >= 0 && empty &&
	    rx_fresh_add(e, d->path) == 0) {
		d->fresh = true;
	}
	engine_partial_sweep(d->fd, e->p->partial_max_age_s);
}

/*
 * Slot idx holds fd (its path set), one reference, nothing written in it
 * yet. A directory sent with its time (rx_timed_add) keeps the mtime it has
 * now while this session writes in it (rx_dir_keep_time).
 */
static void dir_hold(struct engine *e, int idx, int fd, bool fresh)
{
	bool seen;
	struct stat st;

	seen = fstat(fd, &st) == 0;
	e->dirs[idx].fd = fd;
	e->dirs[idx].dev = seen ? (uint64_t)st.st_dev : UINT64_MAX;
	e->dirs[idx].keep_time =
	    seen && !engine_probe(e) && name_set_has(&e->timed, e->dirs[idx].path);
	e->dirs[idx].mtime = seen ? st.st_mtim : (struct timespec){ 0 };
	e->dirs[idx].by_syncfs = false;
	e->dirs[idx].fresh = fresh;
	e->dirs[idx].swept = false;
	e->dirs[idx].acl_default = -1;
	e->dirs[idx].refs = 1;
	e->dirs[idx].dirty = false;
	e->dirs[idx].syncing = false;
	e->dirs[idx].links_out = 0;
	e->dirs[idx].submitted = e->dirs[idx].completed = 0;
	e->dirs_hw = MAX(e->dirs_hw, idx + 1);
}

/* Slot idx (free) holds path, open as fd, from now on: what it held before goes. 0 or -ENOMEM. */
static int dir_fill(struct engine *e, int idx, const char *path, int fd)
{
	char *copy = strdup(path);

	if (!copy) {
		return -ENOMEM;
	}
	if (e->dirs[idx].path) {
		free(e->dirs[idx].path);
		close(e->dirs[idx].fd);
	}
	e->dirs[idx].path = copy;
	dir_hold(e, idx, fd, dir_first_look(e, path));
	return 0;
}

/* The directory path held in the cache (a reference more): its index. */
static int dir_get(struct engine *e, const char *path, int *ret_idx)
{
	int free_idx = -1, r, fd, i = dir_cached(e, path, &free_idx);

	if (i >= 0) {
		*ret_idx = i;
		return 0;
	}
	if (free_idx < 0) {
		return -EBUSY;
	}
	r = dir_open(e, path, &fd);
	if (r < 0) {
		return r;
	}
	r = dir_fill(e, free_idx, path, fd);
	if (r < 0) {
		close(fd);
		return r;
	}
	*ret_idx = e->dir_last = free_idx;
	return 0;
}

/*
 * Directory path is open as fd already (rx_make_dir looked at it): held in
 * the cache, unreferenced, for the entries in it that come next, so it is
 * not resolved again. *fd is taken (-1) when it is; else the caller keeps
 * it (the path is cached already, or no entry is free).
 */
void rx_dir_cache_offer(struct engine *e, const char *path, int *fd)
{
	int free_idx = -1, i = dir_cached(e, path, &free_idx);

	if (i >= 0) {
		e->dirs[i].refs--; /* looked at, not taken */
		return;
	}
	if (free_idx < 0 || dir_fill(e, free_idx, path, *fd) < 0) {
		return;
	}
	e->dirs[free_idx].refs = 0;
	*fd = -1;
}

/*
 * Where a received entry goes: its final name (after rename_to), its leaf,
 * and its parent directory held in the cache (created as needed, beneath the
 * destination, never through a symlink).
 */
uint32_t rx_locate(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	_cleanup_free_ char *dirpath = NULL;
	const char *slash;
	int r;

	slash = strrchr(f->name, '/');
	dirpath = slash ? strndup(f->name, (size_t)(slash - f->name)) : strdup("");
	f->leaf = strdup(slash ? slash + 1 : f->name);
	if (!dirpath || !f->leaf) {
		return PERR_INTERNAL;
	}
	r = dir_get(e, dirpath, &f->dir);
	/* A probe: a file where a directory goes is one a real run replaces (rx_dir_replace). */
	if (r == -ENOTDIR && engine_probe(e)) {
		r = -ENOENT;
	}
	if (r < 0) {
		snprintf(text, textlen, "destination directory: %s", strerror(-r));
		return errno_to_perr(r);
	}
	return PERR_OK;
}

/*
 * A directory this session made, or found empty when it first opened it
 * (names after rename_to). Nothing was in it then, and each name comes once
 * a session, so a file received into it has nothing under its name to look
 * at (engine_device.c). Returns 0 or -ENOMEM.
 */
int rx_fresh_add(struct engine *e, const char *dir)
{
	int r = name_set_add(&e->fresh, dir);

	return r < 0 ? r : 0;
}

/*
 * A directory sent with its time (-p): rx_finish_dirs sets it at the end,
 * and until then the names this session makes in it leave it as it was
 * (rx_dir_keep_time), so that another session looking at it meanwhile (a
 * shard of the same migration) finds no change that is only ours. Returns 0
 * or -ENOMEM.
 */
int rx_timed_add(struct engine *e, const char *dir)
{
	int r = name_set_add(&e->timed, dir);

	return r < 0 ? r : 0;
}

/*
 * A directory sent with its time (dir_hold noted the mtime it had then) gets
 * that mtime back: a write of ours is not a change another session sees.
 * Best effort: its final time is set at the end (rx_finish_dirs), which says
 * any failure.
 */
void rx_dir_keep_time(struct dirent_cache *d)
{
	struct timespec ts[2] = { { .tv_sec = 0, .tv_nsec = UTIME_OMIT }, d->mtime };

	if (d->keep_time) {
		(void)futimens(d->fd, ts);
	}
}

/*
 * A name was made in d: it waits for d's sync, which sets a kept time back
 * (rx_commit_batch, rx_sync_dirs_by_syncfs). In a directory that was there
 * before this session (not fresh), where a re-run writes a few files and
 * other sessions may look, the time goes back at once; a fresh one, which
 * takes many names, waits for its sync.
 */
void rx_dir_named(struct dirent_cache *d)
{
	d->dirty = true;
	if (!d->fresh) {
		rx_dir_keep_time(d);
	}
}

/*
 * Whether the parent of directory name, about to be made there, keeps its
 * time while this session makes names in it (rx_dir_named): one that was
 * there before this session and was sent with its time. The caller sets
 * back the time it had before, whether the cache still holds it or not.
 */
bool rx_dir_parent_keeps_time(const struct engine *e, const char *name)
{
	const char *slash = strrchr(name, '/');
	/* The parent's key in the sets: its path is name's first part. */
	uint64_t key = name_hash_n(name, slash ? (size_t)(slash - name) : 0);

	return !engine_probe(e) && hash_set_has(&e->timed, key) && !hash_set_has(&e->fresh, key);
}

bool engine_name_reserved(const char *name)
{
	size_t n = strlen(ENGINE_PARTIAL_DIR);

	for (const char *p = name; p; p = strchr(p, '/') ? strchr(p, '/') + 1 : NULL) {
		if (!strncmp(p, ENGINE_PARTIAL_DIR, n) && (p[n] == '/' || p[n] == '\0')) {
			return true;
		}
	}
	return false;
}

/*
 * Was name received this session (--delete keeps it)? By its hash: a
 * collision answers yes for a name never sent, which can only keep an
 * entry, never remove one that was sent.
 */
bool rx_seen(const struct engine *e, const char *name)
{
	return name_set_has(&e->seen, name);
}

/* name with rename_to applied to its top-level component, freshly allocated. */
int rx_map_name(struct engine *e, const char *name, char **ret)
{
	const char *rest;

	if (!e->p->rename_to) {
		*ret = strdup(name);
		return *ret ? 0 : -ENOMEM;
	}
	rest = strchr(name, '/');
	if (asprintf(ret, "%s%s", e->p->rename_to, rest ? rest : "") < 0) {
		*ret = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int rx_map_entry(struct engine *e, struct efile *f)
{
	char *mapped;

	if (!e->p->rename_to) {
		return 0;
	}
	if (rx_map_name(e, f->name, &mapped) < 0) {
		return -ENOMEM;
	}
	free(f->name);
	f->name = mapped;
	return 0;
}

/* One the caller asked for (a pull), and valid. */
static uint32_t rx_name_valid(struct engine *e, struct efile *f, char *text, size_t textlen,
			      bool *ret_peer)
{
	if (e->p->name_ok && !e->p->name_ok(e->p->name_ok_ud, f->name)) {
		*ret_peer = true;
		snprintf(text, textlen, "not a name that was asked for");
		return PERR_BAD_PATH;
	}
	if (fspath_validate(f->name) < 0) {
		*ret_peer = true;
		snprintf(text, textlen, "invalid name");
		return PERR_BAD_PATH;
	}
	return PERR_OK;
}

/*
 * rename_to stores the one top-level entry under its name: a second
 * top-level name would land on the same destination (with OPEN
 * "mod/target", "a", "b" and a symlink "c" would all be "target"). The first one is that entry; another is refused.
 */
static uint32_t rx_name_one_root(struct engine *e, struct efile *f, char *text, size_t textlen,
				 bool *ret_peer)
{
	if (e->p->rename_to) {
		size_t top = strcspn(f->name, "/");

		if (!e->rename_root) {
			e->rename_root = strndup(f->name, top);
			if (!e->rename_root) {
				return PERR_INTERNAL;
			}
		} else if (strlen(e->rename_root) != top ||
			   memcmp(e->rename_root, f->name, top) != 0) {
			*ret_peer = true;
			snprintf(text, textlen, "same destination twice in one session");
			return PERR_DUPLICATE;
		}
	}
	return PERR_OK;
}

/*
 * Never two writers on one name: a destination that an entry in the
 * table has already is refused. The set holds the table's entries only,
 * so it does not grow with the tree; an entry resolved earlier is gone
 * from it, and the same name again replaces what it made, as a second
 * session would. The sender's own walk never sends a name twice.
 */
static uint32_t rx_name_inflight(struct engine *e, struct efile *f, char *text, size_t textlen,
				 bool *ret_peer)
{
	uint64_t key = name_hash(f->name);
	int dup = hash_set_add(&e->inflight, key);

	if (dup <= 0) {
		*ret_peer = dup == 0;
		snprintf(text, textlen, "%s",
			 dup < 0 ? "out of memory" : "same destination twice in one session");
		return dup < 0 ? PERR_INTERNAL : PERR_DUPLICATE;
	}
	f->name_key = key;
	/* --delete keeps what was sent: every name, for the whole session (as rsync's list). */
	if ((e->p->open_flags & PROTO_OPEN_DELETE) && hash_set_add(&e->seen, key) < 0) {
		snprintf(text, textlen, "out of memory");
		return PERR_INTERNAL;
	}
	return PERR_OK;
}

/*
 * Whether an entry in the table has this destination: a key of the set
 * above, so a false yes now and then (a collision), never a false no.
 */
bool rx_name_in_table(const struct engine *e, const char *name)
{
	return name_set_has(&e->inflight, name);
}

/*
 * The name policy of an entry the peer sent: one the caller asked for (a
 * pull), valid, mapped by rename_to (one top-level name only), and not the
 * destination of an entry in the table. *ret_peer: a refusal for what the
 * peer sent.
 */
uint32_t rx_check_name(struct engine *e, struct efile *f, char *text, size_t textlen,
		       bool *ret_peer)
{
	uint32_t code;

	if (!f->name) {
		return PERR_INTERNAL;
	}
	code = rx_name_valid(e, f, text, textlen, ret_peer);
	if (code == PERR_OK) {
		code = rx_name_one_root(e, f, text, textlen, ret_peer);
	}
	if (code != PERR_OK) {
		return code;
	}
	if (rx_map_entry(e, f) < 0) {
		return PERR_INTERNAL;
	}
	/* The partial store is the receiver's own: nothing a peer sends goes in there. */
	if (engine_name_reserved(f->name)) {
		*ret_peer = true;
		snprintf(text, textlen, "%s is reserved for --partial", ENGINE_PARTIAL_DIR);
		return PERR_BAD_PATH;
	}
	return rx_name_inflight(e, f, text, textlen, ret_peer);
}
