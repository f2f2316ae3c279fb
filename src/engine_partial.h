/* SPDX-License-Identifier: MIT */
/*
 * The --partial store's journal (engine_partial.c writes it,
 * engine_partial_jnl.c reads and verifies it): its format and the calls the
 * two files share; and the store's names and directory
 * (engine_partial_store.c). Private to the partial feature.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <xxhash.h>

#include "filehash.h"
#include "hash.h"

struct efile;
struct engine;

#define JNL_MAGIC	0x52445054u /* "RDPT" */
#define JNL_VERSION	1
#define JNL_HDR_MAX	(4 + 4 + 8 + 8 + 4 + 2 + FSPATH_NAME_MAX)
#define JNL_REC_LEN	32   /* offset u64, len u64, XXH3-128 */
#define JNL_PENDING_MAX 8192 /* records ahead of the verified prefix, held to sort them */
/* Verified records carried into the fresh journal (32 MiB of them); past it, kept no further. */
#define JNL_KEEP_MAX ((size_t)1 << 20)
#define VERIFY_BUF   ((size_t)4 << 20)

struct jrec {
	uint64_t off, len;
	uint8_t hash[HASH_LEN];
};

/* The journal's header for f (its source's size, mtime and leaf) in buf: its length, 0 too long. */
size_t jnl_header(const struct efile *f, uint8_t *buf, size_t cap);
/* A record as it is on disk. */
void jnl_record(const struct jrec *j, uint8_t out[JNL_REC_LEN]);
/*
 * Hash len bytes of fd at off into rec (the range's own hash) and file (the
 * file's, in order; may be NULL). -EIO when the file ends before them,
 * -ETIMEDOUT past the deadline (ts_now's clock; 0: none).
 */
int hash_range(int fd, uint64_t off, uint64_t len, uint8_t *buf, XXH3_state_t *rec,
	       struct file_hash *file, double deadline);
/*
 * Read the journal jfd: 0 with *ret_prefix = the bytes from 0 that its
 * records cover and the data verifies (f->hash fed with them) before the
 * deadline, and those records in order in *ret_recs, *ret_n (the caller
 * frees them); -EBADMSG for a journal of another source or one that does not
 * parse; -errno.
 */
int jnl_verify(struct efile *f, int jfd, double deadline, uint64_t *ret_prefix,
	       struct jrec **ret_recs, size_t *ret_n);

/* engine_partial_store.c: a directory's store, opened (created with create) never through a symlink. */
int partial_store_open(int dirfd, bool create, int *ret_fd);
/* A leaf's name in the store: "<32 hex of XXH3-128(leaf)><suffix>". */
void partial_name(const char *leaf, const char *suffix, char *out, size_t outlen);

/* engine_partial.c, for the features that end or commit a resumable file. */
struct engine;
/* f is kept resumable and its journal takes records. */
bool rx_partial_journaled(const struct engine *e, const struct efile *f);
/* f's journal takes no more records: only less of it can be resumed. */
void rx_partial_stop(struct engine *e, struct efile *f);
void rx_partial_committed(struct engine *e, struct efile *f);
