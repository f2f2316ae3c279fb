/* SPDX-License-Identifier: MIT */
/*
 * Turning what a sender was asked to send into engine entries: files,
 * directories (with -r, contents after the directory itself) and symlinks
 * (sent as symlinks, never followed inside a tree). Special files are
 * skipped with a warning, as rsync does; an entry that can't be read (a
 * directory that can't be listed, one too deep, a name longer than the wire
 * carries) comes out as a failure entry (engine_src.error) for the engine to
 * count and report. Directories are listed from their parent's fd, so the
 * length of the local path above the walked root is no limit.
 *
 * The walker streams: it holds the roots it was given and a stack of open
 * directory streams (bounded by the depth limit), and makes each entry when
 * it is asked for the next one, so its memory does not grow with the size
 * of the tree. src_list collects a whole walk into an array, for callers
 * that want the total before they start.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "filter.h"

typedef void (*walk_warn_fn)(void *ud, const char *path, const char *why);

struct walk;

int walk_new(walk_warn_fn warn, void *ud, struct walk **ret);
void walk_free(struct walk *w);

/*
 * Queue `path` under the wire name `name`; its entries come out of
 * walk_next() after those of the roots queued before it.
 * - rootfd == AT_FDCWD: a local path as the user typed it; a symlink given
 *   on the command line is followed (like cp and scp), symlinks inside are not.
 * - otherwise path is relative to rootfd (borrowed: it must stay open while
 *   the walk runs) and is resolved beneath it without following any symlink
 *   ("" is the root itself).
 * The top entry is looked at now: directories need `recursive` (else
 * -EISDIR). Returns 0 or -errno for the top entry itself; below it, special
 * files go to warn and are skipped, entries that can't be read come out of
 * walk_next() as failure entries. A local directory (AT_FDCWD) is opened
 * now and held until walk_free: its entries are relative to that fd.
 */
int walk_add_root(struct walk *w, int rootfd, const char *path, const char *name, bool recursive);

/*
 * walk_add_root() with flags: WALK_RECURSIVE as `recursive`; WALK_DIR_ALONE
 * takes a directory without -r as an entry of its own, without what it
 * holds (a directory named in a --files-from list); WALK_DEVICES takes a
 * root that is a block device as a regular file of the device's size
 * (engine_src.device), read whole. Without it, and always below a root, a
 * block device is skipped with a warning like any special file.
 * WALK_CONTENTS (with WALK_RECURSIVE, for `cp -r DIR/. DEST`): a directory
 * root's entries, dotfiles included, without the directory itself; give it
 * the name "" so that they are named relative to it.
 */
enum {
	WALK_RECURSIVE = 1u << 0,
	WALK_DIR_ALONE = 1u << 1,
	WALK_DEVICES = 1u << 2,
	WALK_CONTENTS = 1u << 3,
};
int walk_add_root_flags(struct walk *w, int rootfd, const char *path, const char *name,
			unsigned flags);

/*
 * Queue a root that can't be sent: it comes out of walk_next() in its turn as
 * a failure entry (error -errno, named name, why the reason), for the engine
 * to report (a directory a pull's wildcard matched without -r). 0 or -ENOMEM.
 */
int walk_add_failed_root(struct walk *w, const char *name, int error, const char *why);

/*
 * Apply these rules (borrowed: they must outlive the walk) to every entry
 * by its wire name, roots included: an excluded entry is left out without
 * a word, and an excluded directory is not read at all. NULL: none.
 */
void walk_set_filter(struct walk *w, const struct filter_list *filter);

/*
 * At most `max` entries in all (0: no limit); asking for one more fails
 * with -E2BIG.
 */
void walk_set_max_entries(struct walk *w, uint64_t max);

/*
 * Descend into directories only above this depth (a root is depth 0):
 * 0 hands out the roots alone, 1 a directory root's own entries too and no
 * deeper. Default: no limit but the walker's own.
 */
void walk_set_max_depth(struct walk *w, unsigned depth);

/* Entries handed out so far (failure entries not counted). */
uint64_t walk_count(const struct walk *w);

/* Roots queued (walk_add_root calls that were not skipped). */
size_t walk_nroots(const struct walk *w);

/*
 * An engine source that hands out w's entries as walk_next() makes them
 * (w is borrowed): the tree is walked while it is sent, never held whole.
 */
void walk_source(struct walk *w, struct engine_source *ret);

/*
 * The next entry, in order: each root, and under a directory root its
 * contents depth first, each directory before what it holds. Returns 1 with
 * *ret valid until the next call (or walk_free), 0 at the end, or -errno
 * (-ENOMEM, -E2BIG) after which the walk is over.
 */
int walk_next(struct walk *w, const struct engine_src **ret);

/*
 * A copy of name, shortened in the middle (at a UTF-8 boundary) when over
 * PROTO_MAX_PATH: for people, never a path to resolve. NULL: no memory.
 */
char *walk_name_for_people(const char *name);

/*
 * The directory above the last name a list took beneath a root, kept open:
 * a list's names come in order, most beside the one before, and resolving
 * the same directory again costs an openat2 and a close per name. Empty
 * while dir is NULL (a zeroed one is empty).
 */
struct walk_parent {
	int rootfd;
	int fd;
	char *dir; /* relative to rootfd, no trailing slash; "" for the root itself */
};

/*
 * Resolve the parents of w's roots given beneath a directory fd through p:
 * the one open there is used when it is the same directory, else the new
 * one replaces it (p outlives w; walk_parent_clear() closes it). The root
 * fds stay open while p holds a directory beneath one: p knows a root by
 * its number (src_list holds its roots until src_list_free()).
 */
void walk_set_parent_cache(struct walk *w, struct walk_parent *p);
void walk_parent_clear(struct walk_parent *p);

/* A whole walk kept in memory. */
struct src_list {
	struct engine_src *v;
	size_t n, cap;
	size_t next; /* cursor of src_list_source() */
	uint64_t total_bytes;
	int *held; /* directories the entries are relative to */
	size_t nheld;
	const struct filter_list *filter; /* set by the caller: applied by walk_add */
	struct walk_parent parent;	  /* kept by walk_add: closed by src_list_free */
};

/* walk_add_root() of one path, collected into l (see walk_add_root). */
int walk_add(struct src_list *l, int rootfd, const char *path, const char *name, bool recursive,
	     walk_warn_fn warn, void *ud);
/* The same with walk_add_root_flags' flags. */
int walk_add_flags(struct src_list *l, int rootfd, const char *path, const char *name,
		   unsigned flags, walk_warn_fn warn, void *ud);
/*
 * Room for n more entries at once (a --files-from list knows its length):
 * one allocation where growing by doubling copies the list ~log2(n) times.
 * 0 or -ENOMEM; the list is unchanged on failure.
 */
int src_list_reserve(struct src_list *l, size_t n);
void src_list_free(struct src_list *l);

/* An engine source that hands out l's entries in order (l is borrowed). */
void src_list_source(struct src_list *l, struct engine_source *ret);
