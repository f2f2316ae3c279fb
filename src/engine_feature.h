/* SPDX-License-Identifier: MIT */
/*
 * What the engine's core offers the parts above it, and how a feature plugs
 * in (engine_features.c holds the list). The core (the loop, io_uring, the
 * file table, lanes, failure reporting) names no role and no feature: it
 * polls the descriptors registered with it, dispatches io_uring completions
 * through the handlers registered for their kind, and calls each feature
 * that is on at the points below.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct engine;
struct efile;
struct file_hash;
struct msg;
struct proto_desc;
struct proto_file;
struct wjob;
struct xport_wc;
struct xport_wr;
struct msg_ring;

/*
 * A file's bytes that came or went without payload (engine_file_unsent):
 * zeroed, described as zeros (ZEROS); skipped, unchanged at the receiver
 * (--delta's SAME, a tree's ranges).
 */
struct engine_unsent {
	uint64_t zeroed, skipped;
};

/* A hook's answer: not this feature's business. */
#define ENGINE_DECLINED 1

/*
 * A descriptor the loop watches for whoever registered it (sd-event's I/O
 * source): on_ready runs when it is readable. Sources are looked at in the
 * order they were added, after io_uring's and before the control channel.
 * ENGINE_WATCH_ALWAYS: it runs even once the session has failed (it reaps
 * a thread's answer that teardown would otherwise wait for).
 * ENGINE_WATCH_OUT: on_ready runs when it is writable (or broken) instead.
 */
#define ENGINE_WATCH_MAX    8
#define ENGINE_WATCH_ALWAYS 1u
#define ENGINE_WATCH_OUT    2u

typedef int (*engine_ready_fn)(struct engine *e);

struct engine_watch {
	int fd;
	unsigned flags;
	engine_ready_fn on_ready;
};

/* Adds fd (>= 0) to what the loop polls; -ENOSPC: the table is full. */
int engine_watch_add(struct engine *e, int fd, engine_ready_fn on_ready, unsigned flags);
/* Takes fd off the table (before it is closed); nothing when it is not there. */
void engine_watch_del(struct engine *e, int fd);

/*
 * io_uring completions by kind (UD_KIND of the user data): the part that
 * submits a kind registers what handles its completions, once, at set-up.
 * idx is UD_IDX of the user data; res the completion's result.
 */
#define ENGINE_UD_KINDS 16
typedef void (*engine_uring_fn)(struct engine *e, uint32_t idx, int res);
void engine_uring_handle(struct engine *e, unsigned kind, engine_uring_fn fn);

/* Role bits of a feature or a message row: 1u << enum engine_role. */
#define ENGINE_ROLE_BIT(r) (1u << (r))
#define ENGINE_ROLES_ALL                                                     \
	(ENGINE_ROLE_BIT(ENGINE_SENDER) | ENGINE_ROLE_BIT(ENGINE_RECEIVER) | \
	 ENGINE_ROLE_BIT(ENGINE_BENCH_SENDER) | ENGINE_ROLE_BIT(ENGINE_BENCH_RECEIVER))

/*
 * A control message a feature takes: its type, the roles that take it, and
 * its handler. ENGINE_MSG_ANYTIME: taken even when the role takes no more
 * messages (a receiver after the peer's END).
 */
#define ENGINE_MSG_ANYTIME 1u

struct engine_msg_row {
	uint8_t type;
	uint8_t roles;
	uint8_t flags;
	int (*handle)(struct engine *e, struct msg *m);
};

/*
 * A feature: an option or a capability with state of its own. Every member
 * but name may be NULL. The core calls the features that are on, in the
 * order of the list, at these points:
 *   enable     before set-up: is it on for this session (the options, the
 *              peer's capabilities, the role)? It may record its own flags.
 *   setup      after the common set-up (pool, lanes), before the role's.
 *   step       each turn of the loop, before the role's step; late_step
 *              after it.
 *   on_end     the peer's END reached the receiver: > 0, work started that
 *              ends later (the role waits for it: see engine_busy).
 *   busy       work of its own still to do: the session does not end, and
 *              the loop does not sleep.
 *   holds      work that waits on a descriptor it watches: the session does
 *              not end, and the loop sleeps until one is ready.
 *   progress   what it has done that counts as progress (the idle timeout).
 *   file_size  its per-file state's size this session (0: none): a block
 *              of that many bytes is laid out after the core's struct efile
 *              in every entry of the file table, zeroed with the entry, and
 *              reached through engine_file_state. Asked once, when the
 *              features are chosen; NULL: none.
 *   file_init  an entry is taken, its blocks zeroed: what is not 0 at the
 *              start (a descriptor's -1).
 *   file_release  an entry leaves the file table (done, failed, or at
 *              teardown), before the core closes and frees what it holds.
 *   file_unsent  what of f's bytes it accounted for without payload (in
 *              its per-file block), added to *u: described as zeros
 *              (ZEROS), or unchanged at the receiver (--delta's SAME).
 *   file_waits  f waits on a pass over a whole file at the peer (a digest
 *              asked for): its size adds to the idle timeout's allowance.
 *   lane_error a data lane's completion failed: ENGINE_DECLINED when it is
 *              not the feature's to handle (the session then fails).
 *   stop       at teardown, first: its threads end, their jobs dropped.
 *   release    at teardown, last: what its session state holds freed.
 * msgs: the control messages it takes, ended by a row of type 0.
 * state_size: bytes of session state of its own, allocated (zeroed) when it
 * is on, right after enable, and freed after release; the feature finds it
 * with engine_feature_state (nginx's module context). A plain copy pays
 * for no feature that is off.
 *
 * And the receiver's points in an entry's life (engine_rx*.c,
 * engine_commit.c), each called for the features that are on:
 *   rx_batch    a FILES message's entries come next.
 *   rx_attrs    the attributes XATTRS brought for entry id (a directory, or
 *               a file kept as it is) are set on it here.
 *   rx_accept   a FILES entry of a type the feature makes (a hard link):
 *               *code is its answer; ENGINE_DECLINED: not its type.
 *   rx_target   what is at a regular file's name, before a temp file is
 *               made: a refusal (PERR_*), or PERR_OK; a feature that takes
 *               the name (a block device, written in place) says so in f.
 *   rx_probe_target  the same for a probe: a look only; *ret_taken: the
 *               feature would take it (no space is needed).
 *   rx_dir      a directory entry is there (made, or one there already):
 *               a refusal (PERR_*), or PERR_OK.
 *   rx_store    a regular file (or a device) about to be opened: a feature
 *               that keeps its data resumable opens it (the --partial
 *               store, f->tfd; a device's journal): 0, ENGINE_DECLINED (not
 *               kept so: a plain temp file), or -ENOMEM.
 *   rx_opened   its data file is open (temp file, store or device).
 *   rx_range    ranges consumed in order: f's digest has every byte
 *               before f->hash_off (the hashing threads too), and f has
 *               ranges without payload noted (f->nranges): the feature
 *               whose range starts there takes it into the digest, and
 *               answers its length (the core moves hash_off past it); 0:
 *               none of its.
 *   rx_range_holds  a chunk of f at off came: what kind of the feature's
 *               ranges not taken yet holds off ("zeros"), or NULL.
 *   rx_written  [off, off + len) of its data is there on the disk, the one
 *               call for every way bytes land: written, zeros, unchanged
 *               (--delta's SAME, a tree's range); d: its digest when the
 *               file is journaled (--partial), else NULL. Ranges may come
 *               out of order.
 *   rx_named    it has its final name (the data durable under it).
 *   rx_answered its FILES_ACK entry goes next: what the feature sends first.
 *   rx_kept     a regular file or directory is about to be answered SKIPPED: true when
 *               the feature holds the answer (PROTO_ITEM_WAIT) and gives it
 *               later (engine_rx_kept_answer, engine_rx.h).
 *   rx_complete its bytes are all there and verified, before its metadata,
 *               fsync and name (attributes go on here).
 *   rx_settled  the entry is resolved: ENGINE_RX_DONE (committed),
 *               ENGINE_RX_KEPT (kept as it is), ENGINE_RX_FAILED, or
 *               ENGINE_RX_PLANNED (a probe's).
 *   rx_durable  its data are verified and fsynced, not yet named:
 *               ENGINE_DECLINED, or the feature commits it itself (a
 *               device's read back) and answers for it.
 *   rx_slot     a descriptor that names no file (file id 0): ENGINE_DECLINED,
 *               or the feature takes the slot (a pack).
 *   rx_open     a descriptor came for ring slot `slot`, held as h:
 *               ENGINE_DECLINED (a plain one, decoded where it lies), or the
 *               feature opens it into h and takes it (sealed slots).
 *   rx_unseal   ring slot `slot` from lane, for a role that keeps nothing
 *               (the bench), opened where it lies: with j NULL into dst
 *               now, *d its descriptor; with j, j made a worker's open of
 *               it (engine_workers.h's WJOB_OPEN). ENGINE_DECLINED: slots
 *               are clear (decoded from the descriptor area); 0; -errno,
 *               the session failed.
 */
/*
 * And the slot fence's (engine_fence.h), taken by the feature that fences
 * slots itself (memory windows); ENGINE_DECLINED: the core's way (the
 * transport's fence, or the private copy):
 *   ring        receiver: the RING about to go (the feature may name other
 *               keys in it); sender: the RING taken (the feature may take
 *               back the slots, to hand them out with their credits).
 *   rx_landed   a descriptor's receive for ring slot `slot` (wc): 0 when the
 *               feature accepts it as fenced, -errno when it refuses it.
 *   rx_fence    ring slot `slot` held (on) or let go (off): 0 when the
 *               feature fences it.
 *   rx_credit   the credit of `slot` goes in wr on wr->lane: 0, with what the
 *               feature adds (the key of the window it opened there).
 *   tx_credit   a credit for `slot` came (wc): 0 when the feature took its
 *               word (a window's key), -errno when it refuses it.
 *   tx_window   `slot` goes out: the feature may move it to *io_lane and
 *               name its keys in the payload's write and the descriptor's.
 * With rails (engine_rails.c), a lost lane's part in it:
 *   lane_closing a data lane stopped being up (lost, or stopped for the
 *               peer): nothing new may go on it.
 *   rx_reopen   receiver, a lost lane resolved: the slots to credit again
 *               on the lanes up (*io_n of them at slots; the feature may
 *               answer the whole list, up to cap).
 *   tx_resolved sender, a lost lane resolved: the n chunks that go again
 *               (each into its slot).
 *   tx_ready    sender: may `slot` take its chunk again now (true), or
 *               must it wait (a fresh credit)?
 *   tx_take     sender: the next slot is to go on `lane` (lane_pick's): the
 *               feature may put a free slot of its choice last in free_slots.
 *   credit_on_slot_lane  a slot's credit comes back only on the lane the
 *               slot went on (a window's): rails' watchdog counts a lane's
 *               slots not credited back as work out on it (rails_watch).
 */
enum engine_rx_end { ENGINE_RX_DONE, ENGINE_RX_KEPT, ENGINE_RX_FAILED, ENGINE_RX_PLANNED };

/*
 * And the sender's (engine_tx*.c):
 *   tx_offer    a source entry before it is offered: 1 with *ret_first the
 *               name it goes as a hard link to, 0 as itself, -errno.
 *   tx_offered  n FILES records (pf) went out: what follows them.
 *   tx_skipped  the receiver keeps f as it is (SKIPPED), or waits for what
 *               the feature sends of it first (PROTO_ITEM_WAIT: f->kept_wait, not
 *               f->acked): 0, -errno, or in a wait a failure of f (PERR_* >
 *               0, its text by file_fail) when nothing could be sent.
 *   tx_opened   f's source is open as fd, before its first read: 0, a
 *               failure of f (PERR_* > 0, text says why), or -errno.
 *   tx_whole    the feature reads and hashes f whole itself (a pack): f
 *               needs no digest state and no O_DIRECT.
 *   tx_read     f's first read: ENGINE_DECLINED, or the feature reads it:
 *               ENGINE_TX_TAKEN, ENGINE_TX_FULL (no room now), -errno.
 *   tx_read_end a pass over the files to read is over (a pack goes).
 *   tx_filling  the feature fills a chunk of its own that takes more (a
 *               pack): files are read on without a free pool chunk.
 *   tx_claim    a ready chunk next in its file, before it is posted:
 *               READY_NONE (not the feature's), READY_WAIT (after what the
 *               hashing threads have), READY_TAKEN, or -errno.
 *   tx_post     a chunk of the feature's own (c->packed): READY_*.
 *   tx_same     [off, off + len) of f, next in file order, is unchanged at
 *               the receiver: the feature that sends SAME ranges notes it.
 *   tx_zero     [off, off + len) of f, next in file order, reads as zeros
 *               (len 0: none): the feature that sends ZEROS notes it; now:
 *               what it noted goes out at once (a big hole: the receiver
 *               hashes its zeros while the sender does).
 *   tx_flush    the ranges it noted go out now: before FILE_DONE, and
 *               before ranges of another kind (one order for all: a
 *               feature noting a range flushes the others' first,
 *               engine_tx_flush_others).
 *   tx_seal     chunk ci goes to slot on lane (its descriptor encoded in
 *               stage): the feature may change its bytes in place (sealed
 *               slots) and *io_len, the payload bytes posted, after feeding
 *               them to *hash (when not NULL: then it sets it to NULL). 0:
 *               post it now; ENGINE_TX_LATER: the feature pushes it itself
 *               (tx_post_push) once done off the loop, in its lane's order.
 *   tx_repost   chunk ci, posted on a lane now lost, goes again: its bytes
 *               back to what tx_seal was given.
 *   tx_source   the sender's next entry comes from the feature, not from
 *               engine_params.source: ENGINE_DECLINED (not the feature's),
 *               ENGINE_TX_TAKEN with *ret (valid until the next call), 0:
 *               no more, -EAGAIN: none yet (the feature wakes the loop
 *               when one comes), -errno (why says why).
 *   tx_avail    bytes [0, n) of f's source are there to read now (a file
 *               still being written: its size is checked at its end only,
 *               and neither reads nor the hole search pass n); UINT64_MAX:
 *               all of it (not the feature's file).
 *   tx_settled  f's FILE_DONE goes next (every tx_done_ready said yes), its
 *               source open as fd (-1: no longer): what goes ahead of it (attributes
 *               of a source still being written, settled only now): 0, a
 *               failure of f (PERR_* > 0, text says why), or -errno.
 *   tx_done_ready  f's FILE_DONE may go now; false: it waits (done_wait),
 *               and the feature sends it later (tx_send_done).
 *   tx_digest   f's own stream digest, before its FILE_DONE: the feature
 *               may put the digest it goes with in its place; 0, or a
 *               failure of f (PERR_* > 0, text says why).
 */
#define ENGINE_TX_TAKEN 2
#define ENGINE_TX_FULL	3
#define ENGINE_TX_LATER 4
struct engine_src;

/* What a ready chunk came to: nothing yet, taken (progress), or stop posting this turn. */
enum { READY_NONE = 0, READY_TAKEN = 1, READY_STOP = 2, READY_WAIT = 3 };

struct engine_feature {
	const char *name;
	bool (*enable)(struct engine *e);
	int (*setup)(struct engine *e);
	int (*step)(struct engine *e);
	int (*late_step)(struct engine *e);
	int (*on_end)(struct engine *e);
	bool (*busy)(const struct engine *e);
	/*
	 * What it has queued must still go before the session ends, but it can
	 * do nothing now (a full socket it watches with ENGINE_WATCH_OUT): the
	 * session does not end, and the loop sleeps until a descriptor is ready.
	 */
	bool (*holds)(const struct engine *e);
	uint64_t (*progress)(const struct engine *e);
	size_t (*file_size)(const struct engine *e);
	void (*file_init)(struct engine *e, struct efile *f);
	void (*file_release)(struct engine *e, struct efile *f);
	void (*file_unsent)(const struct engine *e, const struct efile *f, struct engine_unsent *u);
	bool (*file_waits)(const struct engine *e, const struct efile *f);
	int (*lane_error)(struct engine *e, const struct xport_wc *wc);
	void (*stop)(struct engine *e);
	void (*release)(struct engine *e);
	const struct engine_msg_row *msgs;
	size_t state_size;

	void (*rx_batch)(struct engine *e);
	void (*rx_attrs)(struct engine *e, uint32_t id);
	int (*rx_accept)(struct engine *e, struct efile *f, const struct proto_file *pf,
			 uint32_t *code, char *text, size_t textlen, bool *ret_peer);
	uint32_t (*rx_target)(struct engine *e, struct efile *f, char *text, size_t textlen);
	uint32_t (*rx_probe_target)(struct engine *e, struct efile *f, bool *ret_taken, char *text,
				    size_t textlen);
	uint32_t (*rx_dir)(struct engine *e, const struct efile *f, char *text, size_t textlen);
	int (*rx_store)(struct engine *e, struct efile *f);
	void (*rx_opened)(struct engine *e, struct efile *f);
	uint64_t (*rx_range)(struct engine *e, struct efile *f);
	const char *(*rx_range_holds)(const struct engine *e, const struct efile *f, uint64_t off);
	void (*rx_written)(struct engine *e, struct efile *f, uint64_t off, uint32_t len,
			   const uint8_t *d);
	void (*rx_named)(struct engine *e, struct efile *f);
	int (*rx_answered)(struct engine *e, struct efile *f);
	bool (*rx_kept)(struct engine *e, struct efile *f);
	void (*rx_complete)(struct engine *e, struct efile *f);
	void (*rx_settled)(struct engine *e, const struct efile *f, enum engine_rx_end how);
	int (*rx_durable)(struct engine *e, struct efile *f);
	int (*rx_slot)(struct engine *e, uint32_t slot, uint32_t lane, const struct proto_desc *d);
	int (*rx_open)(struct engine *e, uint32_t h, uint32_t slot, uint32_t lane);
	int (*rx_unseal)(struct engine *e, uint32_t slot, uint32_t lane, uint8_t *dst,
			 struct proto_desc *d, struct wjob *j);
	int (*ring)(struct engine *e, struct msg_ring *ring);
	int (*rx_landed)(struct engine *e, const struct xport_wc *wc, uint32_t slot);
	int (*rx_fence)(struct engine *e, uint32_t slot, bool on);
	int (*rx_credit)(struct engine *e, uint32_t slot, struct xport_wr *wr);
	int (*tx_credit)(struct engine *e, const struct xport_wc *wc, uint32_t slot);
	int (*tx_window)(struct engine *e, uint32_t slot, unsigned *io_lane, struct xport_wr *data,
			 struct xport_wr *desc);
	void (*lane_closing)(struct engine *e, unsigned lane);
	int (*rx_reopen)(struct engine *e, unsigned lane, uint32_t *slots, uint32_t cap,
			 uint32_t *io_n);
	int (*tx_resolved)(struct engine *e, unsigned lane, const uint32_t *chunks, uint32_t n);
	int (*tx_ready)(struct engine *e, uint32_t slot);
	void (*tx_take)(struct engine *e, unsigned lane);
	bool credit_on_slot_lane;

	int (*tx_offer)(struct engine *e, const struct engine_src *s, const char **ret_first);
	int (*tx_offered)(struct engine *e, const struct proto_file *pf, uint32_t n);
	int (*tx_skipped)(struct engine *e, struct efile *f);
	int (*tx_opened)(struct engine *e, struct efile *f, int fd, char *text, size_t textlen);
	bool (*tx_whole)(const struct engine *e, const struct efile *f);
	int (*tx_read)(struct engine *e, struct efile *f);
	void (*tx_read_end)(struct engine *e);
	bool (*tx_filling)(const struct engine *e);
	int (*tx_claim)(struct engine *e, uint32_t ci, struct efile *f, bool wait);
	int (*tx_post)(struct engine *e, uint32_t ci);
	int (*tx_same)(struct engine *e, struct efile *f, uint64_t off, uint64_t len);
	int (*tx_zero)(struct engine *e, struct efile *f, uint64_t off, uint64_t len, bool now);
	int (*tx_flush)(struct engine *e);
	int (*tx_seal)(struct engine *e, uint32_t ci, unsigned lane, uint32_t slot, uint8_t *stage,
		       uint32_t *io_len, struct file_hash **hash);
	int (*tx_repost)(struct engine *e, uint32_t ci);
	int (*tx_source)(struct engine *e, const struct engine_src **ret, char *why, size_t whylen);
	uint64_t (*tx_avail)(const struct engine *e, const struct efile *f);
	bool (*tx_done_ready)(struct engine *e, struct efile *f);
	int (*tx_settled)(struct engine *e, struct efile *f, int fd, char *text, size_t textlen);
	uint32_t (*tx_digest)(struct engine *e, struct efile *f, uint8_t *hash, char *text,
			      size_t textlen);
};

/* engine_features.c: the features, in the order the core calls them. */
extern const struct engine_feature *const engine_features[];
extern const unsigned engine_nfeatures;
#define ENGINE_FEATURES_MAX 20

/* A feature's per-file block (file_size, engine_file_state): every block starts at a multiple of this; a feature's struct needs no more. */
#define ENGINE_FILE_ALIGN 8

/* ft's session state (its state_size bytes); NULL when ft is off or keeps none. */
void *engine_feature_state(const struct engine *e, const struct engine_feature *ft);
