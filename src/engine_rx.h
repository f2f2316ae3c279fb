/* SPDX-License-Identifier: MIT */
/*
 * What the receiver's files (src/engine_rx*.c) offer each other, and the
 * features that work on its entries (zeros, seal, sums) offer it: nothing
 * else includes this.
 */
#pragma once

#include "engine-internal.h"
#include "engine_fence.h"

/* engine_rx_open.c: one entry looked at, a regular file's temp file; a probe's answers. */
uint32_t rx_keep_file(struct engine *e, struct efile *f, const struct stat *st, char *text,
		      size_t textlen);
uint32_t rx_open_file(struct engine *e, struct efile *f, char *text, size_t textlen);
uint32_t rx_open_temp(struct engine *e, struct efile *f, char *text, size_t textlen);
uint32_t rx_probe_copy(struct engine *e, struct efile *f, char *text, size_t textlen);
uint32_t rx_probe_dir(struct engine *e, struct efile *f, char *text, size_t textlen);
uint32_t rx_probe_symlink(struct engine *e, struct efile *f, const char *pf_link, char *text,
			  size_t textlen);

/* engine_rx_files.c: FILES, ENTRY_FAILED, SUMS, FILE_DONE. */
int rx_entry_failed(struct engine *e, const struct msg_entry_failed *ef);
int rx_file_done(struct engine *e, const struct msg_file_done *d);
int rx_files(struct engine *e, struct msg_files *mf);
int rx_sums(struct engine *e, const struct msg_sums *ms);
int rx_sum_done(struct engine *e, struct efile *f, int r, const uint8_t hash[HASH_LEN]);
/*
 * A regular file about to be answered SKIPPED: true when a feature holds
 * the answer (rx_kept; PROTO_ITEM_WAIT goes instead) and gives it later
 * with engine_rx_kept_answer: SKIPPED with items (what differed) added,
 * then counted and let go (it was settled kept when held). 0 or -errno.
 * The answers of a turn go in one FILES_ACK (engine_rx_kept_flush, from
 * rx_step, or when PROTO_MAX_BATCH of them wait).
 */
bool engine_rx_kept(struct engine *e, struct efile *f);
int engine_rx_kept_answer(struct engine *e, struct efile *f, uint32_t items);
int engine_rx_kept_flush(struct engine *e);

/*
 * engine_sums.c: the answers f (SUM_WANTED) waits for, its own digest and
 * the peer's, in the sums feature's per-file block: 1 when both are here.
 * sums_match: both good and the same.
 */
int sums_own(struct engine *e, struct efile *f, int r, const uint8_t hash[HASH_LEN]);
int sums_peer(struct engine *e, struct efile *f, uint32_t status, const uint8_t hash[HASH_LEN]);
bool sums_match(const struct engine *e, const struct efile *f);

/* engine_rx_slots.c: ring slots, held chunks and their private copies. */
int rx_slots_setup(struct engine *e);
void rx_slots_free(struct engine *e);
int rx_ring_take(struct engine *e, uint32_t slot, uint32_t lane);
int rx_ring_credit(struct engine *e, uint32_t slot, uint32_t len);
int rx_credit_flush(struct engine *e);
int rx_copy_credit(struct engine *e, uint32_t h, uint32_t len);
bool rx_copy_get(struct engine *e, uint32_t slot, uint32_t *ret_h);
bool rx_copy_next(struct engine *e, uint32_t *ret_slot, uint32_t *ret_h);
uint32_t rx_held_find(struct engine *e, const struct efile *f, uint64_t off);
void rx_held_add(struct engine *e, struct efile *f, uint32_t h);

/*
 * engine_rx.c: a descriptor d (opened or decoded) for ring slot `slot`,
 * held as h, taken: a chunk of a file (or a pack) checked, held, written.
 * chash: the chunk's own digest, made where it was opened (NULL: none).
 */
int rx_desc_take(struct engine *e, uint32_t h, uint32_t slot, uint32_t lane,
		 const struct proto_desc *d, const uint8_t *chash);
