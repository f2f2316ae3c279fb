/* SPDX-License-Identifier: MIT */
/*
 * The engine's private parts, shared by its files (src/engine*.c): the
 * file table, the state of one transfer, and the helpers each file offers
 * the others. Nothing outside the engine includes this.
 */
#pragma once

#include "clock.h"
#include "meta_policy.h"

#include "engine.h"
#include "engine_feature.h"
#include "engine_jobs.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <liburing.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "diskio.h"
#include "fspath.h"
#include "hash.h"
#include "macro.h"
#include "pool.h"
#include "sparse.h"
#include "tls.h"
#include "xport.h"

_Static_assert(PROTO_MAX_LANES == XPORT_MAX_LANES, "RING carries one rkey per lane");

/*
 * Files in flight (a power of two), taken by id modulo the table. A
 * receiver takes up to PROTO_FILES_WIDER from a sender, their ids within
 * PROTO_SPAN_WIDER; a sender offers what the receiver announced it holds
 * (files_window, files_span: older peers' tables hold 2,048 or 1,024).
 * Entries are set up when taken, so what a session touches is what it had
 * in flight at most.
 */
#define FILE_TABLE 8192
_Static_assert(FILE_TABLE == PROTO_SPAN_WIDER && PROTO_FILES_WIDER < PROTO_SPAN_WIDER,
	       "the table holds a receiver's widest window");
#define OPEN_FILES_MAX 64 /* sender: source files open at once */
/*
 * Every file in flight holds its directory, so the cache is larger than the
 * file table: a free entry always exists.
 */
#define DIR_CACHE	 (FILE_TABLE + 64)
#define STALE_TEMP_AGE_S 2 /* younger temp files may not be locked yet */
/*
 * Directories whose mode (and with -p mtime) the receiver sets last, at END:
 * all of them, in a table that grows (a name and 32 bytes each). A push has
 * no other bound on the number of entries, so the table is capped: at
 * DIR_META_MAX directories and DIR_META_BYTES_MAX bytes of entries and names
 * (1,000,000 directories of /usr-like names, 40 bytes on average, take about
 * 72 MB). A session that creates more has each directory past the cap
 * refused (a reported failure), never one left with a wrong mode or time.
 * A pull's daemon sends at most its 'max files per session'.
 */
#define DIR_META_MAX	   1000000
#define DIR_META_BYTES_MAX ((size_t)256 << 20)
/*
 * -H. Sender: the regular files with more than one link seen so far, by
 * (device, inode), with their first name: at most HARDLINK_MAX of them and
 * HARDLINK_BYTES_MAX bytes; past that a file's later names go as copies
 * (and the user is told, once). Receiver: the names of the regular files
 * committed (or kept by a skip level) this session, as 64-bit hashes, the
 * only ones a hard link may point at: at most LINK_TARGETS_MAX.
 */
#define HARDLINK_MAX	   1000000
#define HARDLINK_BYTES_MAX ((size_t)128 << 20)
#define LINK_TARGETS_MAX   2000000
/* -X/-A: bytes of attributes the receiver holds for its files in flight. */
#define XATTR_HELD_MAX	   ((size_t)64 << 20)
#define URING_ENTRIES	   2048
#define IOWQ_BOUND_WORKERS 64
/*
 * Small files finishing in a stream are made durable together: one syncfs(2)
 * of their file system instead of one fsync each, once at least
 * SYNC_BATCH_MIN of them wait. Fewer (or bigger files) are fsynced alone, so
 * a lone file never flushes other writers' data.
 */
#define SYNC_BATCH_FILE_MAX ((uint64_t)1 << 20)
#define SYNC_BATCH_MIN	    8
#define HUGE_2M		    ((size_t)2 << 20)
/* --partial: journal records a file buffers before it appends them. */
#define ENGINE_JNL_BATCH 64
/*
 * --partial: the time one FILES batch may spend re-reading kept data: a
 * quarter of the idle timeout, at most this. The peer waits for the batch's
 * FILES_ACK meanwhile with no progress to see, and its own idle timeout
 * (a client's: 60 s by default) is not known here.
 */
#define VERIFY_BUDGET_MAX_S 10.0
/*
 * Zero extents (PROTO_CAP_ZEROS): a hole the sender finds is taken as one
 * pool chunk of at most this many bytes (whole chunks), never read.
 */
#define ZERO_CHUNK_MAX ((uint64_t)1 << 30)
/* A zero chunk at least this long goes out (ZEROS) before the sender hashes it. */
#define ZERO_EARLY_FLUSH ((uint32_t)8 << 20)
/*
 * Copies, hashes and opens of a slot go in blocks this big (engine_workers.c):
 * each block is still in L1/L2 when it is hashed or opened after its copy.
 */
#define ENGINE_BLOCK ((uint32_t)64 << 10)
/* Sender: fill-and-pass rounds in one turn of the loop before it looks at its events. */
#define TX_PASS_TURNS 16

enum {
	UD_READ = 1,
	UD_WRITE = 2,
	UD_FSYNC = 3,
	UD_DIRSYNC = 4,
	UD_PREAD = 5,
	UD_PWRITE = 6,
	UD_LINK = 7,
	UD_KINDS
};
_Static_assert(UD_KINDS <= ENGINE_UD_KINDS, "the completion table holds every kind");
/*
 * Packed slots (PROTO_CAP_PACK, engine_pack.c): a regular file of at most
 * this many bytes, and at most a quarter of the chunk, travels whole in a
 * slot shared with others.
 */
#define PACK_FILE_MAX		      ((uint64_t)256 << 10)
#define PACK_FILE_MAX_FOR(chunk_size) MIN(PACK_FILE_MAX, (uint64_t)(chunk_size) / 4)
/*
 * Receiver: files from this size on (and bigger than a packed one) are
 * written with O_DIRECT but for their last, partial page (rx_open_direct).
 */
#define RX_DIRECT_MIN ((uint64_t)64 << 10)
#define RX_PAGE	      4096u
#define UD(kind, idx) (((uint64_t)(kind) << 56) | (uint64_t)(idx))
#define UD_KIND(ud)   ((unsigned)((ud) >> 56))
#define UD_IDX(ud)    ((uint32_t)(ud))

#include "engine_file.h"

struct lane_ent {
	uint64_t wr_id;
	int32_t chunk; /* sender chunk released on completion, -1 none */
	/*
	 * A counted post (a slot's descriptor, a credit): its index among the
	 * lane's counted posts + 1, and its slot; idx 0: not counted.
	 */
	uint64_t idx;
	uint32_t slot;
};

/*
 * Rails (engine_rails.c): a lane is up; closing (stopped by us: nothing new
 * goes on it, its completions count until its first error); or dead (its
 * count final, nothing more taken from it).
 */
enum lane_state { LANE_UP = 0, LANE_CLOSING, LANE_DEAD };

struct lane {
	struct lane_ent *fifo;
	unsigned head, len, cap;
	unsigned unsignaled;
	unsigned batch_last;   /* index in the pending batch of this lane's last WR, +1 */
	struct lane_seal seal; /* sealed slots: the sender's to seal, the receiver's to open */
	uint8_t state;	       /* enum lane_state */
	bool told, heard;      /* our LANE_DOWN sent; the peer's taken (peer_count) */
	uint64_t peer_count;
	/* Counted posts (descriptors, credits) and receives (the other kind) on it. */
	uint64_t posted, taken;
	uint32_t load; /* sender: slots posted on it not credited yet */
	/*
	 * Rails' watchdog: since when it has had work out with no completion
	 * (now_ms(); 0 while nothing is out); sender: its last credit, or its
	 * first slot out while it held none (now_ms()). See rails_watch.
	 */
	int64_t busy_since;
	int64_t credit_since;
};

/*
 * A destination directory. Renames into it become durable with an fsync of
 * the directory; one runs at a time per directory, and every rename made
 * while it runs waits for the next one, so a stream of small files shares
 * each directory fsync instead of paying one apiece.
 */
struct dirent_cache {
	char *path;
	int fd;
	unsigned refs;
	bool dirty;	    /* renames wait for a directory fsync */
	bool syncing;	    /* a directory fsync is in flight */
	uint32_t links_out; /* a syncfs batch's names being made in it (LINKAT) */
	uint64_t submitted; /* directory fsyncs submitted */
	uint64_t completed; /* ... and completed (in order: one at a time) */
	int sync_error;	    /* of the last completed one */
	uint64_t dev;	    /* its file system (st_dev) */
	bool by_syncfs;	    /* the running syncfs is its directory sync */
	bool fresh;	    /* made by this session (rx_make_dir) */
	bool swept;	    /* its stale temps and partials looked for (rx_dir_sweep) */
	int8_t acl_default; /* it has a default ACL: 1, none 0, not looked at -1 */
	/* Sent with its time (-p): the mtime it had when held, kept while we write in it. */
	bool keep_time;
	struct timespec mtime;
};

/*
 * What differs between the roles, the way struct xport_ops separates the
 * transports: engine_sender_ops (engine_tx.c), engine_receiver_ops
 * (engine_rx.c). The loop, the control channel and the transport's
 * completions are shared (engine.c, engine_lane.c) and call in here.
 */
struct engine;

/*
 * A file's end-to-end digest where a feature chose another way than the
 * stream of its bytes in file order (the roles' own, f->dg NULL): --delta's
 * tree of chunk digests, or the stream with unchanged ranges read back from
 * the old file. A NULL member: the stream's way.
 */
struct engine_digest {
	/* Receiver, in file order: an unchanged range (DELTA SAME), zeros, a chunk with digest d. */
	void (*rx_same)(struct engine *e, struct efile *f, const struct proto_range *g);
	void (*rx_zeros)(struct engine *e, struct efile *f, uint64_t off, uint64_t len);
	void (*rx_chunk)(struct engine *e, struct efile *f, uint64_t off,
			 const uint8_t d[HASH_LEN]);
	/* Receiver: the digest of what is in place, every range taken. */
	void (*rx_final)(struct engine *e, struct efile *f, uint8_t out[HASH_LEN]);
	/* Sender: from read_off, bytes the receiver has unchanged (not read); 0: read. */
	uint64_t (*tx_same_at)(const struct engine *e, const struct efile *f, bool holes);
	/* Sender: chunk c (buf its bytes) into the digest; true: the receiver has it (SAME). */
	bool (*tx_feed)(struct engine *e, struct efile *f, const struct chunk *c, const void *buf);
	/* Sender: FILE_DONE's digest, every chunk fed. */
	void (*tx_final)(struct engine *e, struct efile *f, uint8_t out[HASH_LEN]);
};

/*
 * A digest made on the sums worker (engine_sums.c; r < 0: none, and why),
 * for f if it still wants it: each done function checks that (sum_wanted,
 * dev_verify).
 */
typedef int (*sum_done_fn)(struct engine *e, struct efile *f, int r, const uint8_t hash[HASH_LEN]);

struct engine_role_ops {
	/* Chunks of the pool that carry data: the sender's pool, the receiver's slots. */
	uint32_t (*data_chunks)(const struct engine_params *p);
	/* The peer writes into our memory (the receiver's ring): registered for it. */
	bool peer_writes;
	/* After the common set-up: the role's own tables, then the RING exchange. */
	int (*setup)(struct engine *e);
	/* A control message other than PING, PONG and ERROR. */
	int (*on_message)(struct engine *e, struct msg *m);
	/* A receive completed on a lane: the peer's immediate (data or credit). */
	int (*on_receive)(struct engine *e, const struct xport_wc *wc);
	/* Once per turn of the loop, before the queues are flushed. */
	int (*step)(struct engine *e);
	/*
	 * Its features' messages are taken now (a receiver takes none after the
	 * peer's END); NULL: always.
	 */
	bool (*takes_messages)(const struct engine *e);
	/* At teardown: its threads end (before files close); NULL: none. */
	void (*stop)(struct engine *e);
	/* An entry leaves the file table: the role's own hold on it goes first; NULL: none. */
	void (*file_release)(struct engine *e, struct efile *f);
	/* At teardown, an entry still in the table (not done): before it is released. */
	void (*abandon)(struct engine *e, struct efile *f);
};

extern const struct engine_role_ops engine_sender_ops;
extern const struct engine_role_ops engine_receiver_ops;
extern const struct engine_role_ops engine_bench_sender_ops;
extern const struct engine_role_ops engine_bench_receiver_ops;

struct engine {
	const struct engine_params *p;
	const struct engine_role_ops *role;
	struct engine_stats st;
	uint32_t err_code;
	char *err;
	size_t errlen;
	bool failed;
	bool error_sent; /* the peer has been told why (ERROR) */
	int fail_r;	 /* the -errno of the failure: -EREMOTEIO when the peer sent ERROR */
	/*
	 * The session runs as root: it may give owners, and set security.* and
	 * trusted.* attributes. Looked at once (engine_new): a session's
	 * identity is set before its engine runs and never changes in it.
	 */
	bool euid_root;

	/* The core's dispatch tables (engine_feature.h). */
	struct engine_watch watches[ENGINE_WATCH_MAX];
	unsigned nwatches;
	engine_uring_fn uring_fn[ENGINE_UD_KINDS];
	struct engine_jobs *jobs; /* the worker pool (engine_jobs.h), started at its first queue */
	const struct engine_feature *feat[ENGINE_FEATURES_MAX]; /* the features on */
	void *sstate[ENGINE_FEATURES_MAX]; /* feat[i]'s session state (engine_feature_state) */
	unsigned nfeat;

	struct io_uring ring;
	bool ring_ok;
	int uring_efd;
	unsigned uring_pending; /* SQEs prepared, not submitted */
	unsigned uring_inflight;

	struct pool *pool;
	bool pool_pinned; /* registered with io_uring (engine_pin_pool) */
	struct xport_mr *mr;
	uint8_t *desc_area; /* receiver: descriptor array; sender: staging */
	uint32_t desc_len;  /* a slot's descriptor: PROTO_DESC_LEN, + the tag when sealed */
	bool sealed;	    /* sealed slots (the seal feature is on: engine_seal.c) */

	/*
	 * FILE_TABLE entries in a mapping of their own (mem_map_thp): 2 MiB
	 * pages where the kernel gives them, so a table that fills touches
	 * three pages instead of 1,500 (engine.c, file_populate). Entries at
	 * files_hw and above were never used: still zero, and never touched.
	 * Scans of the table stop at files_hw.
	 */
	struct efile *files;
	size_t files_len; /* bytes mapped, for munmap */
	/*
	 * An entry is the core's struct efile, then the blocks of the features
	 * on that keep per-file state (file_size), each at its offset:
	 * file_at and file_index know the stride (engine_features_layout).
	 */
	size_t file_stride;
	struct {
		const struct engine_feature *ft;
		uint32_t off;
	} fstate[ENGINE_FEATURES_MAX];
	unsigned nfstate;
	uint32_t files_hw;
	uint32_t files_ready; /* entries below this one have their pages (file_populate) */
	uint32_t next_id;     /* sender: next id to assign; receiver: last id seen */
	uint32_t files_open;  /* entries used */

	/* sender */
	/* Taken from the source and not offered yet; the source has no more; offered in all. */
	const struct engine_src *next_src;
	bool src_done;
	uint32_t offered;

	uint32_t oldest_id, fill_id; /* none below in flight; none below to read (tx_fill) */
	uint32_t offered_unresolved;
	uint32_t files_window;	/* the most offered_unresolved may be (PROTO_CAP_WIDE_WINDOW) */
	uint32_t files_span;	/* sender: a new id minus oldest_id stays below it */
	size_t names_in_flight; /* sender: bytes of its files' names (ENGINE_NAMES_IN_FLIGHT_MAX) */
	uint32_t tx_unfinished; /* files started whose FILE_DONE is not sent yet */
	uint32_t open_fds;
	struct chunk *chunks;
	uint32_t *free_slots;
	uint32_t nfree_slots;
	uint32_t *free_pos; /* per ring slot: its place in free_slots (tx_free_push) */
	uint64_t rring_addr, rdesc_addr;
	uint32_t rkey[XPORT_MAX_LANES]; /* the receiver's, per lane (rails: per device) */
	bool have_ring;
	bool sent_end;
	uint64_t seq;
	size_t rr_lane;
	uint8_t *slot_lane; /* sender: the lane each slot was last posted on */

	/* receiver */
	/*
	 * Held chunks, by hold index (engine_rx_slots.c): the ring slot when
	 * fenced, the private copy when copied (rx_copy). held_map finds them
	 * by (file, offset): open addressing, index + 1, 0 empty.
	 */
	struct rslot *rslots;
	struct rring *rring; /* per ring slot */
	uint32_t *held_map, held_mask;
	/* Copy mode: free copies (a stack); the ring slot each copy came from, not credited yet. */
	uint32_t *copy_free, ncopy_free;
	uint32_t *copy_ring;
	bool *copy_owes;
	/* Ring slots whose descriptor came while no copy was free, in order (a ring). */
	uint32_t *copy_wait, copy_wait_head, ncopy_wait;
	/* Ring slots whose credit --bwlimit holds back, in order (a ring), and their lengths. */
	uint32_t *credit_q, credit_head, *credit_len;
	uint32_t ncredit_due;
	/*
	 * No transport fences (verbs), or sealed slots: each held slot is copied
	 * (opened) into a private copy and hashed and written from it, which the
	 * peer cannot reach: pool chunk copy_base + h (engine_rx_slots.c).
	 */
	bool rx_copy;
	uint32_t copy_base;
	/*
	 * Entries at dirs_hw and above were never used (zero: never faulted
	 * in); scans stop there. dir_last: the entry dir_get returned last,
	 * looked at first (files come directory by directory).
	 */
	struct dirent_cache dirs[DIR_CACHE];
	int dirs_hw, dir_last;
	uint32_t *commit_batch; /* file indexes renamed, awaiting their dir fsync */
	uint32_t ncommit;
	/* batched durability (see SYNC_BATCH_MIN) */
	uint32_t *sync_wait; /* small files verified, waiting to be made durable */
	uint32_t nsync_wait;
	uint32_t *sync_run; /* the batch whose syncfs runs now */
	uint32_t nsync_run;
	bool sync_running;
	/* The sync's queue in the worker pool (one batch at a time), -1 until the first batch. */
	int sync_q;
	int sync_fds[DIR_CACHE]; /* one directory per file system in the batch */
	uint64_t sync_devs[DIR_CACHE];
	size_t nsync_fds;
	/* rx_sync_done: its batch's LINKATs run one after another (the last one so far). */
	bool link_chaining;
	struct io_uring_sqe *link_chain;
	struct name_set seen;	    /* --delete: names received this session */
	struct name_set inflight;   /* destinations of the entries in the table (name_key) */
	char *rename_root;	    /* rename_to: the one top-level name it renames */
	struct name_set fresh;	    /* directories made or found empty (rx_fresh_add) */
	struct name_set timed;	    /* directories sent with their times, -p (rx_timed_add) */
	struct dir_meta *dirs_meta; /* in arrival order: parents before children */
	/* An entry kept had its metadata brought in line: one syncfs before END. */
	bool meta_updated;
	uint16_t nkept_acks; /* held kept answers given this turn, one FILES_ACK (rx_step) */
	struct proto_status *kept_acks; /* PROTO_MAX_BATCH, made at the first one */
	size_t ndirs_meta, dirs_meta_cap;
	size_t dirs_meta_bytes; /* entries and names, against DIR_META_BYTES_MAX */

	/* Skip level checksum: its queue in the worker pool (engine_sums.c), -1 until needed. */
	int sum_q;
	/* Files of more than this many bytes are checked by their chunk tree (engine_digest.c); 0: none. */
	uint32_t tree_chunk;
	/* The worker threads (engine_workers.c), NULL: none. */
	struct hashers *hashers;
	uint32_t sums_inflight;
	/* After the worker's answers are taken: the role's (the sender's SUMS batch); NULL none. */
	int (*sums_answered)(struct engine *e);

	/* both */
	bool got_end;	       /* the peer's END */
	struct timespec bw_t0; /* --bwlimit: since the first chunk, */
	uint64_t bw_sent;      /* bytes posted (sender) or credited back (receiver) */
	struct lane lanes[XPORT_MAX_LANES];
	/* Rails (PROTO_CAP_RAILS on both ends): a lost lane's slots go on the others. */
	bool rails;
	struct xport_wr *batch;
	size_t nbatch, batch_cap;
	uint64_t wr_seq;
	uint64_t bytes_progress;
	uint64_t credits;	       /* returned (receiver) or received (sender) */
	struct timespec last_activity; /* the last data progress (see progress_mark) */
	struct timespec last_ping;
	/* rdmacp bench (engine_bench.c) */
	struct bench_state *bench;
	bool zeros;	  /* see engine_zeros */
	bool assume_zero; /* receiver: OPEN_ASSUME_ZERO (device targets read as zeros) */
	/* Sender: chunks passed over without a slot (zeros, kept); the step goes on while they are. */
	uint64_t passes;
	bool again; /* work left that needs no event: the loop does not sleep */
};

/* ZEROS may flow on this transfer: a data path, and both ends announced them. */
static inline bool engine_zeros(const struct engine *e)
{
	return e->zeros;
}

/*
 * Receiver in copy mode: its private copies, a pool of their own behind the
 * registered chunks (engine_pinned_bytes counts them), as many as the ring
 * has slots: a held chunk waits for the disk in its copy while the ring
 * slot it came in is written again.
 */
static inline uint32_t engine_rx_copies(const struct engine_params *p)
{
	return p->slots;
}

/* A probe (engine.h): a dry run on the control channel alone, nothing created. */
static inline bool engine_probe(const struct engine *e)
{
	return e->p->x == NULL;
}

static inline double ts_now(struct timespec *ret)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	if (ret) {
		*ret = t;
	}
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline double ts_since(const struct timespec *t0)
{
	return ts_now(NULL) - ((double)t0->tv_sec + (double)t0->tv_nsec / 1e9);
}

/*
 * engine_features.c: the features that are on, called at their points
 * (engine_feature.h); choosing them lays out the file table's entries.
 */
int engine_features_choose(struct engine *e);
/* At teardown, after the features' release hooks: their session state freed. */
void engine_features_free(struct engine *e);
int engine_features_setup(struct engine *e);
/* The steps before the role's (late: false) or after it. */
int engine_features_step(struct engine *e, bool late);
/* engine_loop.c: the session's loop, until its end or its failure. */
int engine_loop(struct engine *e);

/* engine.c */
/* The peer's END reached the receiver: the features' on_end; 1: work started that ends later. */
int engine_features_end(struct engine *e);
/* A feature has work of its own left (engine_feature.busy). */
bool engine_busy(const struct engine *e);
/* A feature that is on holds the session's end back (its holds hook). */
bool engine_holds(const struct engine *e);
/* The features' file_init and file_release hooks (engine_feature.h). */
void engine_features_file_init(struct engine *e, struct efile *f);
void engine_features_file_release(struct engine *e, struct efile *f);
/* A failed data-lane completion offered to the features; ENGINE_DECLINED: none took it. */
int engine_features_lane_error(struct engine *e, const struct xport_wc *wc);
/* The receiver's hooks (engine_feature.h), called for the features that are on. */
void engine_rx_batch(struct engine *e);
void engine_rx_attrs(struct engine *e, uint32_t id);
int engine_rx_accept(struct engine *e, struct efile *f, const struct proto_file *pf, uint32_t *code,
		     char *text, size_t textlen, bool *ret_peer);
uint32_t engine_rx_target(struct engine *e, struct efile *f, char *text, size_t textlen);
uint32_t engine_rx_probe_target(struct engine *e, struct efile *f, bool *ret_taken, char *text,
				size_t textlen);
uint32_t engine_rx_dir(struct engine *e, const struct efile *f, char *text, size_t textlen);
int engine_rx_store(struct engine *e, struct efile *f);
void engine_rx_opened(struct engine *e, struct efile *f);
uint64_t engine_rx_range(struct engine *e, struct efile *f);
const char *engine_rx_range_holds(const struct engine *e, const struct efile *f, uint64_t off);
void engine_rx_written(struct engine *e, struct efile *f, uint64_t off, uint32_t len,
		       const uint8_t *d);
void engine_rx_named(struct engine *e, struct efile *f);
int engine_rx_answered(struct engine *e, struct efile *f);
void engine_rx_complete(struct engine *e, struct efile *f);
void engine_rx_settled(struct engine *e, const struct efile *f, enum engine_rx_end how);
int engine_rx_durable(struct engine *e, struct efile *f);
int engine_rx_slot(struct engine *e, uint32_t slot, uint32_t lane, const struct proto_desc *d);
int engine_rx_open(struct engine *e, uint32_t h, uint32_t slot, uint32_t lane);
/* The sender's hooks. */
int engine_tx_offer(struct engine *e, const struct engine_src *s, const char **ret_first);
int engine_tx_offered(struct engine *e, const struct proto_file *pf, uint32_t n);
int engine_tx_skipped(struct engine *e, struct efile *f);
int engine_tx_opened(struct engine *e, struct efile *f, int fd, char *text, size_t textlen);
int engine_tx_settled(struct engine *e, struct efile *f, int fd, char *text, size_t textlen);
bool engine_tx_whole(const struct engine *e, const struct efile *f);
int engine_tx_read(struct engine *e, struct efile *f);
void engine_tx_read_end(struct engine *e);
bool engine_tx_filling(const struct engine *e);
int engine_tx_claim(struct engine *e, uint32_t ci, struct efile *f, bool wait);
int engine_tx_post(struct engine *e, uint32_t ci);
int engine_tx_same(struct engine *e, struct efile *f, uint64_t off, uint64_t len);
int engine_tx_zero(struct engine *e, struct efile *f, uint64_t off, uint64_t len, bool now);
int engine_tx_flush(struct engine *e);
/* A feature about to note a range: the others' noted ranges go first. */
int engine_tx_flush_others(struct engine *e, const struct engine_feature *self);
int engine_tx_source(struct engine *e, const struct engine_src **ret, char *why, size_t whylen);
uint64_t engine_tx_avail(const struct engine *e, const struct efile *f);
bool engine_tx_done_ready(struct engine *e, struct efile *f);
uint32_t engine_tx_digest(struct engine *e, struct efile *f, uint8_t *hash, char *text,
			  size_t textlen);
int engine_tx_seal(struct engine *e, uint32_t ci, unsigned lane, uint32_t slot, uint8_t *stage,
		   uint32_t *io_len, struct file_hash **hash);
int engine_tx_repost(struct engine *e, uint32_t ci);
/* engine_tx_post.c: for the features' claims. */
bool tx_kept(const struct efile *f, uint64_t off, uint32_t len);
/* Chunk ci, next in its file, hashed and passed over (not posted); f sent when it was the last. */
int tx_chunk_passed(struct engine *e, uint32_t ci);
/* The same for a chunk the receiver has unchanged: noted for a SAME range (tx_same hook). */
int tx_chunk_same(struct engine *e, uint32_t ci);
int engine_fail(struct engine *e, uint32_t code, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* engine_device.c: block device targets. */
/*
 * A probe's look at the same: the refusals a real run would make but
 * DEVICE_BUSY; *ret_blk: a block device would be written (no file system
 * space taken).
 */
int rx_device_verified(struct engine *e, struct efile *f, int r, const uint8_t hash[HASH_LEN]);
int engine_msg_unexpected(struct engine *e, const struct msg *m);
void file_fail(struct efile *f, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void file_note_failure(struct engine *e, const char *name, uint8_t ftype, uint32_t code, bool local,
		       const char *text);
void file_note_committed(struct engine *e, const struct efile *f, uint64_t bytes,
			 const uint8_t *hash);
void file_note_kept(struct engine *e, const struct efile *f);
void file_note_resumed(struct engine *e, const struct efile *f, uint64_t sent, uint64_t kept,
		       const uint8_t *hash);
void file_note_planned(struct engine *e, const char *name, uint8_t ftype, uint64_t bytes);
struct efile *file_by_id(struct engine *e, uint32_t id);
uint32_t file_index(const struct engine *e, const struct efile *f);

/* The file table's entry idx: entries are file_stride bytes apart. */
static inline struct efile *file_at(const struct engine *e, uint32_t idx)
{
	return (void *)((char *)e->files + (size_t)idx * e->file_stride);
}

/*
 * Feature ft's per-file block in the entry f (engine_feature.file_size),
 * NULL when it has none this session.
 */
static inline void *engine_file_state(const struct engine *e, const struct engine_feature *ft,
				      const struct efile *f)
{
	for (unsigned i = 0; i < e->nfstate; i++) {
		if (e->fstate[i].ft == ft) {
			return (char *)f + e->fstate[i].off;
		}
	}
	return NULL;
}

/* f's bytes without payload, as the features with per-file blocks count them (file_unsent). */
static inline struct engine_unsent engine_file_unsent(const struct engine *e, const struct efile *f)
{
	struct engine_unsent u = { 0, 0 };

	for (unsigned i = 0; i < e->nfstate; i++) {
		if (e->fstate[i].ft->file_unsent) {
			e->fstate[i].ft->file_unsent(e, f, &u);
		}
	}
	return u;
}

/* Their sum: what of f is neither payload nor kept. */
static inline uint64_t engine_file_unsent_bytes(const struct engine *e, const struct efile *f)
{
	struct engine_unsent u = engine_file_unsent(e, f);

	return u.zeroed + u.skipped;
}

/*
 * f waits on a pass over a whole file at the peer (file_waits), as any
 * feature on says: one may keep that in its session state (the sender's
 * sums), not in a per-file block.
 */
static inline bool engine_file_waits(const struct engine *e, const struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->file_waits && e->feat[i]->file_waits(e, f)) {
			return true;
		}
	}
	return false;
}
/* A free entry of the file table, cleared and taken for file id (files_hw follows it). */
void file_take(struct engine *e, struct efile *f, uint32_t id);
void file_release(struct engine *e, struct efile *f);
/*
 * f's failure text: the buffer (FILE_FAIL_TEXT_LEN bytes, allocated the first
 * time; NULL: no memory), and what it says ("" when there is none).
 */
#define FILE_FAIL_TEXT_LEN 256
char *file_fail_buf(struct efile *f);
const char *file_fail_text(const struct efile *f);

/* f->tmpname, allocated the first time (FILE_TMPNAME_LEN bytes), "" ; NULL: no memory. */
#define FILE_TMPNAME_LEN (FSPATH_NAME_MAX + 1)
char *file_tmpname(struct efile *f);

/*
 * engine_tx_post.c: pool chunk ci (len bytes of file_id at off) into the receiver's
 * next free slot on lane: the payload WRITE, then the descriptor's WRITE_WITH_IMM
 * behind it (tx_post_push). hash: as engine_tx_seal's. Returns the slot, or -errno.
 */
int tx_post_slot(struct engine *e, uint32_t ci, unsigned lane, uint32_t file_id, uint64_t off,
		 uint32_t len, uint32_t pieces, struct file_hash **hash);
int tx_post_push(struct engine *e, uint32_t ci);
/* The same for a chunk posted before on a lane now lost: its slot and descriptor again. */
int tx_post_again(struct engine *e, uint32_t ci, unsigned lane);
int tx_send_done(struct engine *e, struct efile *f);

/* engine_pack.c */
void tx_pread_done(struct engine *e, uint32_t fidx, int res);
void rx_pwrite_done(struct engine *e, uint32_t fidx, int res);

/* engine.c: register the pool with io_uring before its first fixed read or write. */
int engine_pin_pool(struct engine *e);
/* The sender's: chunk ci registered with io_uring, the first time it is read into. */
int engine_pin_chunk(struct engine *e, uint32_t ci);
void hash_zeros(struct file_hash *h, uint64_t len);

/* engine_uring.c */
struct io_uring_sqe *uring_sqe(struct engine *e);
bool uring_ready(struct engine *e);
int uring_flush(struct engine *e);
int uring_on_ready(struct engine *e);

/* engine_lane.c */
bool lane_room(struct engine *e, unsigned lane, unsigned n);
bool lane_is_up(const struct engine *e, unsigned lane);
/* The least-loaded lane that is up with room for n WRs, or -1. */
int lane_pick(struct engine *e, unsigned n);
/* Sender: slot went out on lane; came back (credited); goes on lane instead (its window's). */
void lane_slot_posted(struct engine *e, uint32_t slot, unsigned lane);
void lane_slot_credited(struct engine *e, uint32_t slot);
void lane_slot_moved(struct engine *e, uint32_t slot, unsigned lane);
int tx_slot_free(struct engine *e, uint32_t slot);
/*
 * Sender: the free slots, a stack (free_slots, nfree_slots) that knows
 * each slot's place in it (free_pos; TX_FREE_NONE: not free). These are its
 * only ways in and out (engine_lane.c), so that a slot of a feature's choice
 * goes on top in O(1) (tx_take).
 */
#define TX_FREE_NONE UINT32_MAX
/* The stack for e->p->slots slots, empty (both arrays; freed at teardown): 0 or -ENOMEM. */
int tx_free_alloc(struct engine *e);
void tx_free_push(struct engine *e, uint32_t slot);
uint32_t tx_free_pop(struct engine *e);
bool tx_free_has(const struct engine *e, uint32_t slot);
void tx_free_to_top(struct engine *e, uint32_t slot);
void tx_free_clear(struct engine *e);
int rx_credit_post(struct engine *e, uint32_t slot, unsigned lane);
int lane_push(struct engine *e, struct xport_wr *wr, int32_t chunk);
/* lane_push of a counted post (a descriptor or a credit) for slot. */
int lane_push_slot(struct engine *e, struct xport_wr *wr, int32_t chunk, uint32_t slot);
/* The session's failure for a failed completion (what the transport and the peer say). */
int engine_fail_lane(struct engine *e, const struct xport_wc *wc);

int lane_batch_flush(struct engine *e);
bool lane_bw_allows(struct engine *e, uint32_t len);
int lane_on_xport(struct engine *e);
int lane_imm_unexpected(struct engine *e, const struct xport_wc *wc);
/* Sealed slots: the additional data of slot's AES-GCM message (its number, u32 BE). */
void slot_aad(uint32_t slot, uint8_t aad[4]);
/*
 * Receiver: a sealed slot opened with key s at count, from sealed (the
 * slot's descriptor): thread-safe (workers). In two steps: its descriptor
 * (not authenticated yet, bounded), then its payload, each opened block fed
 * to hash (NULL: none) in the same pass, nothing used before the tag checks.
 */
int slot_open_desc(struct lane_seal *s, uint32_t slot, uint64_t count,
		   const uint8_t sealed[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN], uint32_t max_len,
		   struct proto_desc *d);
int slot_open_payload(struct lane_seal *s, const uint8_t *src, uint8_t *dst, uint32_t len,
		      uint8_t tag[LANE_SEAL_TAG_LEN], struct file_hash *hash);
int slot_open_copy(struct lane_seal *s, uint32_t slot, uint64_t count,
		   uint8_t sealed[PROTO_DESC_LEN + LANE_SEAL_TAG_LEN], const uint8_t *src,
		   uint8_t *dst, uint32_t max_len, struct proto_desc *d);
/*
 * Lane's slot key under the session's suite (engine_params.seal_suite): the
 * sender's (encrypt) and the receiver's, on the loop or a worker alike.
 */
int slot_key_init(const struct engine_params *p, struct lane_seal *s, unsigned lane, bool encrypt);
/* A sealed slot that did not open (r): the session fails. */
int engine_fail_sealed(struct engine *e, uint32_t slot, unsigned lane, int r);
/* The rx_unseal hook (engine_feature.h); ENGINE_DECLINED: slots are clear. */
int engine_rx_unseal(struct engine *e, uint32_t slot, uint32_t lane, uint8_t *dst,
		     struct proto_desc *d, struct wjob *j);

/* engine_tx.c */
int tx_read_again(struct engine *e, struct efile *f, int *res);
void tx_read_done(struct engine *e, uint32_t ci, int res);
int tx_wait_ring(struct engine *e);
int tx_on_credit(struct engine *e, const struct xport_wc *wc);

/* engine_rx.c */
void rx_write_done(struct engine *e, uint32_t slot, int res);
/* engine_rx_slots.c: held chunk h's bytes; held (fenced or copied); let go (credited). */
uint8_t *rx_slot_buf(struct engine *e, uint32_t h);
int rx_slot_hold(struct engine *e, uint32_t h, uint32_t len, bool need_bytes);
int rx_credit(struct engine *e, uint32_t h);
int rx_offer_ring(struct engine *e);
void rx_zeros_journal(struct engine *e, struct efile *f, uint64_t off, uint64_t end);
/*
 * A ZEROS (same: false) or DELTA SAME range of f, checked and noted: hashed
 * at its turn in file order; zeros are written now (engine_zeros.c).
 */
int rx_range_take(struct engine *e, struct efile *f, const struct proto_range *g, bool same);
/* engine_rx.c: f's bytes (and ranges) hashed in file order as far as they are ready. */
void rx_hash_ready(struct engine *e, struct efile *f);

uint32_t rx_probe_locate(struct engine *e, struct efile *f, char *text, size_t textlen);

/* The commit path, the digest choice and the features' entry points. */
#include "engine_parts.h"

/* engine_workers.c: the per-byte jobs on the pool's worker queues. */
#include "engine_workers.h"
