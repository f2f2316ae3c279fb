/* SPDX-License-Identifier: MIT */
/*
 * rdmacp check's lists (check_list.c): each side's entries, sorted by name
 * (check.c); the daemon's side as it arrives (check_remote.c), and the
 * comparison of their hard-link groups (check_links.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "proto/msg.h"

struct check_entry {
	char *name;
	char *link; /* symlink target */
	uint8_t ftype;
	uint32_t mode;
	uint64_t size;
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	uint32_t uid, gid;
	uint32_t id;	     /* remote: the FILES id its SUMS entry names */
	bool summed;	     /* a SUMS entry (or the local hash) came */
	uint32_t sum_status; /* PERR_OK: hash is the XXH3-128 */
	uint8_t hash[HASH_LEN];
	/* -X, -A, -H (a LIST_ATTRS record, or src/listattrs.h here) */
	uint32_t attr_status; /* PERR_OK: the digests are good */
	uint8_t attr_digest[PROTO_LATTR_DIGESTS][HASH_LEN];
	uint64_t link_group; /* 0: no other name */
	/* Filled by check_links: names that share its inode, itself included, on each side. */
	uint32_t links_here, links_there;
	bool links_differ;
};

struct check_list {
	struct check_entry *v;
	size_t n, cap;
};

/* Entries held per side: past this the comparison stops with an error. */
#define CHECK_MAX_ENTRIES 4000000u

/* Append an entry (its strings copied); -E2BIG past CHECK_MAX_ENTRIES. */
int check_list_add(struct check_list *l, const char *name, const char *link,
		   struct check_entry **ret);
/* Its entries and their strings; the list left empty. */
void check_list_free(struct check_list *l);

struct remote_list {
	struct check_list list;
	size_t batch_start; /* the last FILES batch: what a SUMS may name */
	uint64_t errors;    /* entries the daemon could not read or hash */
	uint8_t want;	    /* -X, -A, -H: the LIST_ATTRS fields asked for (PRIVILEGED aside) */
	uint8_t fields;	    /* those the first LIST_ATTRS carried: every one the same */
	bool attrs_due;	    /* a FILES batch waits for its LIST_ATTRS */
};

struct daemon_conn;
/*
 * The daemon's answer to LIST into rl: FILES batches, each followed by its
 * LIST_ATTRS (when rl->want) and SUMS, ENTRY_FAILED, then END or ERROR.
 * Returns an exit code (EXIT_OK, EXIT_PROTOCOL, ...), the error said.
 */
int check_receive_remote(struct daemon_conn *s, struct remote_list *rl);

/*
 * -H: for every name on both sides (src and dst sorted by name, without
 * duplicates), whether the names that share its inode are the same set on
 * both sides; sets the links_* fields of src's entries. 0 or -ENOMEM.
 */
int check_links(struct check_list *src, const struct check_list *dst);
