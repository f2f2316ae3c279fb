/* SPDX-License-Identifier: MIT */
/*
 * What the engine's commit, digest and feature files (src/engine_commit.c,
 * engine_digest.c, engine_sums.c, engine_names.c, engine_links.c, engine_xattr*.c,
 * engine_meta.c, engine_bench.c, engine_delta*.c) offer the core and the roles.
 * Included by engine-internal.h only, after the types they use.
 */
#pragma once

/* engine_commit.c */
int rx_maybe_finish(struct engine *e, struct efile *f);
int rx_resolve(struct engine *e, struct efile *f);
int rx_sync_step(struct engine *e);
/* Registers the completion handlers of the commit path's io_uring kinds. */
void rx_commit_handlers(struct engine *e);
void rx_fsync_done(struct engine *e, struct efile *f, int res);
void rx_link_done(struct engine *e, struct efile *f, int res);
int rx_commit_batch(struct engine *e);
void rx_dirsync_done(struct engine *e, uint32_t di, int res);
void rx_discard(struct engine *e, struct efile *f);
/* f's data is durable; r: 0, it has its name now, or why not (-errno). */
void rx_named(struct engine *e, struct efile *f, int r);

/* engine_digest.c: a file's end-to-end digest, chosen once a session. */
void engine_digest_choose(struct engine *e);
/* The chunk size of the tree a file of size bytes is checked by; 0: the stream of its bytes. */
uint32_t engine_digest_chunk(const struct engine *e, uint64_t size);
/* What f's end-to-end digest is: its chunk tree's chunk size (--delta's too), 0 the stream. */
uint32_t engine_digest_tree(const struct engine *e, const struct efile *f);
/* f->hash started the way engine_digest_chunk says: 0, or -ENOMEM. */
int engine_hash_start(const struct engine *e, struct efile *f);
/* f's tree is folded from chunk digests made apart, in file order (file_hash_chunk). */
bool engine_digest_folds(const struct engine *e, const struct efile *f);
/* Sender: chunk c's own digest is made in its seal job (one pass), not apart. */
struct chunk;
bool engine_digest_in_seal(const struct engine *e, const struct efile *f, const struct chunk *c);
/* The chunk d names may be a tree file's, at tree_chunk (0: none is): thread-safe. */
bool engine_digest_may_fold(const struct proto_desc *d, uint32_t tree_chunk);

/* engine_sums.c */
struct sum_job;
/* f's digest on the worker: done (sum_done_fn) once made. */
int sums_queue(struct engine *e, struct efile *f, int fd, sum_done_fn done);
/*
 * A device's zero range, written on the worker (blk_zero_range may take
 * long); done (r: 0 or -errno) once written, in the order queued.
 */
typedef int (*zero_done_fn)(struct engine *e, struct efile *f, int r, uint64_t off, uint64_t len);
int sums_queue_zeros(struct engine *e, struct efile *f, uint64_t off, uint64_t len,
		     zero_done_fn done);
/*
 * The skip level checksum's state (the sums feature's, NULL when the
 * session has no skip level checksum: a receiver without it, a sender to a
 * peer without PROTO_CAP_CHECK): who takes the digest of a file at its
 * name (the receiver's role); the sender's SUMS entries waiting to go out
 * (out: PROTO_MAX_BATCH, made with the first one) and the files the
 * receiver asked about (wanted: a bit per file-table entry, FILE_TABLE of
 * them, made at the first SUM_WANTED; a receiver's are in its block).
 */
struct sums_state {
	sum_done_fn own_done;
	struct proto_sum *out;
	uint16_t nout;
	uint64_t *wanted;
};
struct sums_state *sums_state(const struct engine *e);
/*
 * f waits for the digests of the skip level checksum (SUM_WANTED asked or
 * answered): no data, ZEROS or FILE_DONE of it is taken meanwhile. false
 * in a session without the level.
 */
bool sums_wanted(const struct engine *e, const struct efile *f);
/* Sets or clears it: -EBADMSG, a session without the level; -ENOMEM. */
int sums_want(struct engine *e, struct efile *f, bool on);
/* Receiver: f waits for both digests now, its own queued on the worker (fd: its file, taken). */
int sums_ask(struct engine *e, struct efile *f, int fd);
int tx_sum_done(struct engine *e, struct efile *f, int r, const uint8_t hash[HASH_LEN]);
int tx_sums_flush(struct engine *e);

/* engine_names.c */
uint32_t rx_locate(struct engine *e, struct efile *f, char *text, size_t textlen);
void rx_dir_cache_offer(struct engine *e, const char *path, int *fd);
uint32_t rx_check_name(struct engine *e, struct efile *f, char *text, size_t textlen,
		       bool *ret_peer);
bool rx_seen(const struct engine *e, const char *name);
/* Whether an entry in the table may have this destination (no: none has). */
bool rx_name_in_table(const struct engine *e, const char *name);
int rx_fresh_add(struct engine *e, const char *dir);
int rx_timed_add(struct engine *e, const char *dir);
void rx_dir_named(struct dirent_cache *d);
void rx_dir_keep_time(struct dirent_cache *d);
bool rx_dir_parent_keeps_time(const struct engine *e, const char *name);
void rx_dir_sweep(struct engine *e, int idx);
bool hash_set_has(const struct name_set *s, uint64_t key);
int hash_set_add(struct name_set *s, uint64_t key);
void hash_set_del(struct name_set *s, uint64_t key);

/* engine_links.c */
int rx_map_name(struct engine *e, const char *name, char **ret);
/*
 * Receiver with -H: the name hard link f links to (mapped as names are),
 * once its FILES entry was taken; NULL when f is no hard link.
 */
const char *engine_link_target(const struct engine *e, const struct efile *f);
/*
 * Sender: whether source entry s, offered as ftype, goes marked linked
 * (PROTO_FILE_LINKED): -H, both ends with PROTO_CAP_LINKED_FILES, a
 * regular file with other names, the ones tx_link_check remembers.
 */
bool engine_tx_linked(const struct engine *e, const struct engine_src *s, uint8_t ftype);
/* engine_xattr.c */
int rx_xattr_dir_note(struct engine *e, const struct efile *f, bool created);
/*
 * engine_xattr_tx.c: may a kept entry of type ftype be answered with a wait
 * (PROTO_ITEM_WAIT), its attributes compared first (-X/-A, the peer's caps)?
 */
bool xattr_kept_waits(const struct engine *e, uint8_t ftype);
/* engine_meta.c */
/* -A: a new entry keeps no inherited ACL (the sender's come in XATTRS). */
void rx_acl_clear(struct engine *e, int fd, bool dir);
void rx_apply_meta(struct engine *e, struct efile *f);
/* The receiver's metadata rule (meta_policy.h) for this session's options. */
struct meta_policy rx_meta_policy(const struct engine *e);
mode_t rx_create_mode(struct engine *e, struct efile *f);
uint32_t rx_make_dir(struct engine *e, struct efile *f, char *text, size_t textlen);
uint32_t rx_make_symlink(struct engine *e, struct efile *f, const char *target, char *text,
			 size_t textlen);
void rx_finish_dirs(struct engine *e);
struct meta_sent rx_meta_sent(const struct efile *f, mode_t type);
uint32_t rx_kept_code(const struct engine *e);
bool rx_symlink_same(struct engine *e, struct efile *f, const char *target, struct stat *st);
uint32_t rx_meta_keep(struct engine *e, struct efile *f, int dirfd, const char *leaf,
		      const struct stat *st, char *text, size_t textlen);

/* engine_bench.c */
void bench_free(struct engine *e);

/* engine_delta.c, engine_delta_tree.c */
void zero_digest(struct engine *e, uint64_t len, uint8_t out[HASH_LEN]);
extern const struct engine_digest delta_tree_digest;
/* A tree file's read back (fd, the device) queued on the worker: done gets its digest. */
int delta_tree_read_back(struct engine *e, struct efile *f, int fd, sum_done_fn done);
/* A tree's read back on the worker: verify gets the job's copies of rd, rdisk. */
typedef int (*tree_verify_fn)(int fd, uint64_t size, uint32_t cs, uint8_t (*rd)[HASH_LEN],
			      const uint8_t *rdisk, uint8_t out[HASH_LEN]);
int sums_queue_tree(struct engine *e, struct efile *f, int fd, const uint8_t (*rd)[HASH_LEN],
		    const uint8_t *rdisk, tree_verify_fn verify, sum_done_fn done);
