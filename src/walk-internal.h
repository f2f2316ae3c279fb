/* SPDX-License-Identifier: MIT */
/* The walk's state, shared by walk.c and walk_list.c (a whole walk kept in memory). */
#ifndef RDMACP_WALK_INTERNAL_H
#define RDMACP_WALK_INTERNAL_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "walk.h"

#define WALK_MAX_DEPTH 128

/* A directory being listed: one per level, so at most WALK_MAX_DEPTH + 1. */
struct walk_frame {
	struct dir_reader *d;
	char *path; /* relative to the root's fd */
	char *name; /* on the wire */
	unsigned depth;
	bool broken; /* reading it failed: reported, nothing more from it */
};

struct walk_root {
	struct engine_src top; /* made when the root was queued */
	bool recursive;
	bool alone;    /* a directory without its contents (WALK_DIR_ALONE) */
	bool contents; /* its contents without the directory (WALK_CONTENTS) */
	char *shown;   /* a held local directory: its path as given, for warnings */
};

struct walk {
	walk_warn_fn warn;
	void *ud;
	struct walk_root *roots;
	size_t nroots, roots_cap, next_root;
	int rootfd;  /* of the root being walked */
	char *shown; /* its walk_root.shown */
	struct walk_frame stack[WALK_MAX_DEPTH + 1];
	size_t nstack;
	struct engine_src cur; /* the entry handed out last */
	uint64_t count, max;
	unsigned max_depth; /* descend above it; UINT_MAX: no limit */
	bool over;
	bool cur_alone;	   /* w->cur is a root taken alone: not descended */
	bool cur_contents; /* w->cur is a root whose contents alone are wanted */
	bool cur_hidden;   /* w->cur is such a root, descended: not handed out */
	const struct filter_list *filter;
	/* Directories given as local paths, held open: the walk goes on from them. */
	int *held;
	size_t nheld, held_cap;
	struct walk_parent *parent; /* walk_set_parent_cache(): borrowed */
};

/* Free an entry's strings and zero it. */
void walk_src_clear(struct engine_src *e);

#endif
