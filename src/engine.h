/* SPDX-License-Identifier: MIT */
/*
 * The data engine of one transfer, sender or receiver, on top of the
 * transport interface. Same code for push and pull: only the role differs.
 *
 * Sender: io_uring READ_FIXED fills pool chunks from disk (O_DIRECT where the
 * file system allows and the chunk is aligned), hashes them in file order
 * and writes each into a free receiver slot: WRITE of the payload, then a
 * WRITE_WITH_IMM of its 32-byte descriptor into the descriptor array (same
 * lane, so the descriptor lands after the payload); the immediate names the
 * slot. Credits (zero-length WRITE_WITH_IMM from the receiver) free slots.
 * Receiver: RECV_IMM -> descriptor -> checks -> slot held (fenced by the
 * transport, or copied out of the peer's reach) -> hash (in file order) and
 * io_uring WRITE_FIXED into the temp file, both from the held bytes -> credit
 * back. FILE_DONE from the
 * sender carries the hash; on a match: fsync, renameat, fsync(dir), result.
 * Metadata goes in FILES batches over the control channel; many files are
 * in flight at once.
 */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "chan.h"
#include "lane_seal.h"

struct xport;
struct xport_ops;

enum engine_role {
	ENGINE_SENDER = 1,
	ENGINE_RECEIVER = 2,
	/* rdmacp bench (engine_bench.c): memory to memory, no files, no disk. */
	ENGINE_BENCH_SENDER = 3,
	ENGINE_BENCH_RECEIVER = 4,
};

/* One entry the sender offers. */
struct engine_src {
	char *name;    /* relative name on the wire */
	char *path;    /* what to open, relative to dirfd */
	int dirfd;     /* AT_FDCWD, or a module root (opened beneath it) */
	uint8_t ftype; /* enum proto_ftype */
	uint32_t mode;
	uint64_t size;
	struct timespec mtime;
	uint32_t uid, gid;
	char *link; /* symlink target */
	/* Regular files: who they are, for -H (PROTO_OPEN_HARDLINKS). */
	uint64_t dev, ino;
	uint64_t nlink;
	/*
	 * A block device named as a root (see WALK_DEVICES), offered as a
	 * regular file of the device's size and read as one.
	 */
	bool device;
	/*
	 * A byte range of a regular file (rdmacp run of a split file's range):
	 * its bytes [window_off, window_off + size) are sent as a file of size
	 * bytes, and the source must still be window_whole bytes long (checked
	 * as a whole file's size is). Not packed, not offered to --skip
	 * checksum (no SUMS digest of a part of a file).
	 */
	bool window;
	uint64_t window_off, window_whole;
	/*
	 * < 0 (-errno): an entry that can't be sent (unreadable, a name too
	 * long for the wire); name says which (shortened in the middle when
	 * over PROTO_MAX_PATH), why says why. The engine counts it as a failed
	 * file and tells the receiver (ENTRY_FAILED).
	 */
	int error;
	char *why;
};

/*
 * Where the sender's entries come from, one at a time, so that a tree of
 * any size is offered without being held whole. next() returns 1 with *ret
 * valid until its following call, 0 when there are no more, or -errno: the
 * session fails and the peer is told why (the text next() wrote into why,
 * else strerror). The engine copies what it keeps of an entry.
 */
struct engine_source {
	int (*next)(void *ud, const struct engine_src **ret, char *why, size_t whylen);
	void *ud;
};

struct engine_stats {
	uint64_t files_ok;
	uint64_t files_failed;
	uint64_t bytes;	     /* payload bytes of committed files */
	uint64_t bytes_zero; /* zero bytes of committed files described without payload */
	/* --delta: bytes of committed files unchanged at the destination, not sent. */
	uint64_t bytes_unchanged;
	uint32_t first_error;	/* enum proto_err of the first per-file failure */
	bool first_error_local; /* it happened on this side (our disk), not the peer's */
	/* Receiver: the declared sizes of the regular files accepted. */
	uint64_t bytes_accepted;
	/*
	 * Entries the receiver kept as they were (a skip level; directories and
	 * symlinks there already, with PROTO_CAP_ITEMIZE): not failures. And
	 * those kept whose metadata alone was brought in line (updated).
	 */
	uint64_t files_skipped;
	uint64_t files_updated;
	/* --delete: entries removed, entries --max-delete kept (both roles hear them). */
	uint64_t files_deleted;
	uint64_t delete_withheld;
	/* --delete: nothing was looked at because entries of the run failed. */
	bool delete_suppressed;
	/* --partial: files committed with bytes kept from a cut run, and those bytes (not sent). */
	uint64_t files_resumed;
	uint64_t bytes_resumed;
	/* A probe (engine_params.x NULL): entries the receiver would copy, and their bytes. */
	uint64_t files_planned;
	uint64_t bytes_planned;
	/* Packed slots (both roles): regular files that travelled whole in shared slots, and those slots. */
	uint64_t files_packed;
	uint64_t packed_slots;
	/*
	 * Chunk digests made on worker threads (a tree file's chunks, --partial's
	 * journal), and which workers made them (bit i: the i-th).
	 */
	uint64_t worker_digests;
	uint32_t worker_digest_mask;
	/*
	 * Of those, the digests made in the same pass over the chunk's bytes as
	 * its copy, its open (a receiver's sealed slot) or its seal (a sender's).
	 */
	uint64_t fused_digests;
	/* Times io_uring's completion queue was full and the kernel held the rest (uring_on_ready). */
	uint64_t uring_overflows;
	/*
	 * Receiver with a relay feed (engine_params.relay_feed): the relay
	 * child's end went away (EPIPE, ECONNRESET) and the feed stopped; not a
	 * failure of this session. 0 or 1.
	 */
	uint64_t relay_feed_lost;
	/*
	 * Bench roles: bytes per lane (posted by the sender, verified by the
	 * receiver), and the seconds from the first chunk posted (received) to
	 * the last one credited (verified). bytes holds the total.
	 */
	uint64_t lane_bytes[16];
	double data_seconds;
};

/* An entry committed by the receiver, as engine_events.file_ok tells it. */
struct engine_entry_ev {
	const char *name;
	uint8_t ftype;	     /* enum proto_ftype */
	uint64_t bytes;	     /* payload bytes of a regular file; 0 for anything else */
	uint64_t zero_bytes; /* bytes of it described as zeros (no payload) */
	/* --delta: bytes of it unchanged at the destination, taken from the old file. */
	uint64_t skipped_bytes;
	double seconds;	     /* since the entry was offered (sender) or taken (receiver) */
	const uint8_t *hash; /* its verified XXH3-128: regular files only, else NULL */
	/* hash is its chunk tree's at this many bytes a chunk (PROTOCOL.md); 0: of its bytes. */
	uint32_t tree_chunk;
	uint32_t items; /* what differed there (PROTO_ITEM_*); 0 when not known */
};

struct engine_events {
	/* An entry committed by the receiver (both roles hear about it). */
	void (*file_ok)(void *ud, const struct engine_entry_ev *ev);
	/*
	 * An entry failed. ftype: enum proto_ftype, 0 when unknown (an entry
	 * the sender could not offer). local: on this side (a source we could
	 * not read, a destination we could not write); else the peer refused
	 * it or failed.
	 */
	void (*file_failed)(void *ud, const char *name, uint8_t ftype, uint32_t code, bool local,
			    const char *text);
	void (*progress)(void *ud, uint64_t bytes);
	/*
	 * An entry the receiver kept (a skip level; a directory or symlink
	 * there already): items 0 unchanged, else the metadata brought in line
	 * (PROTO_ITEMS_META); may be NULL.
	 */
	void (*file_skipped)(void *ud, const char *name, uint8_t ftype, uint32_t items);
	/*
	 * Something the user should know that is not a failure (a limit that
	 * makes later entries go another way); may be NULL.
	 */
	void (*notice)(void *ud, const char *name, const char *text);
	/*
	 * --delete (both roles): an entry removed, or one --max-delete kept;
	 * may be NULL. One that could not be removed is a file_failed.
	 */
	void (*deleted)(void *ud, const char *name, uint8_t ftype);
	void (*delete_withheld)(void *ud, const char *name, uint8_t ftype);
	/*
	 * A file committed with kept bytes of a cut run (--partial): sent bytes
	 * crossed now, kept did not, zero was described as zeros (no payload);
	 * items, what differed there (PROTO_ITEM_*; 0 when not known);
	 * tree_chunk as engine_entry_ev's. NULL: reported through file_ok (sent).
	 */
	void (*file_resumed)(void *ud, const char *name, uint64_t sent, uint64_t kept,
			     uint64_t zero, uint64_t skipped, double seconds,
			     const uint8_t hash[16], uint32_t tree_chunk, uint32_t items);
	/*
	 * A probe (both roles): an entry the receiver would copy (make, for a
	 * directory or a link), with its size; may be NULL. In a probe, skipped
	 * is "would skip" and deleted "would delete".
	 */
	void (*planned)(void *ud, const char *name, uint8_t ftype, uint64_t bytes);
	void *ud;
};

/*
 * Receiver: what a peer may store. A regular file declared larger than
 * max_file_size is refused; so is one that would take the declared sizes of
 * the files accepted past max_session_bytes. Refusals are per file
 * (PERR_PERMISSION with the limit in the text); the session goes on.
 */
struct engine_limits {
	uint64_t max_file_size;
	uint64_t max_session_bytes;
};

/*
 * A sender offers files while the receiver's window has room and the names
 * of the files it has in flight (each file's name and source path) take
 * less than this: a window of long names stays within the session's memory.
 */
#define ENGINE_NAMES_IN_FLIGHT_MAX (4u << 20)

/* Test hook on the receiver: flip one byte of the first chunk before hashing. */
#define ENGINE_FAULT_FLIP_BYTE (1u << 0)
/* Test hook on the receiver: hold slots by copying them (the verbs way) on any transport. */
#define ENGINE_FAULT_COPY_SLOTS (1u << 1)
/* Test hook on the receiver: keep at most 8 directories' modes and times for the end. */
#define ENGINE_FAULT_FEW_DIRS (1u << 2)
/* Test hook on the sender: remember at most 2 files with hard links (-H). */
#define ENGINE_FAULT_FEW_LINKS (1u << 3)
/* Test hook on the receiver: remember at most 2 files a hard link may name (-H). */
#define ENGINE_FAULT_FEW_TARGETS (1u << 14)
/* Test hook on the receiver: no time to re-verify kept partial data (--partial). */
#define ENGINE_FAULT_NO_VERIFY_TIME (1u << 4)
/* Test hook on the bench sender: the second chunk carries the first one's bytes. */
#define ENGINE_FAULT_BENCH_MISPLACE (1u << 5)
/*
 * Test hook on the receiver, a slow disk: each job of the hashing thread (a
 * device's zero writer, its read back, a skip level digest) waits 4 s first;
 * the --delta digest pass 1 s before each read.
 */
#define ENGINE_FAULT_SLOW_DISK (1u << 6)
/*
 * Test hook on the sender: a read's completion on an fd still O_NONBLOCK
 * (DISKIO_NONBLOCK) is taken as -EAGAIN, as a file system that cannot read
 * without waiting answers (ext4 and most others wait on io_uring's worker).
 */
#define ENGINE_FAULT_READ_EAGAIN (1u << 7)
/* Test hook: a receive consumed is not posted again (the peer's writes then meet RNR). */
#define ENGINE_FAULT_NO_REPOST (1u << 8)
/*
 * Test hook, either role: take test_kill_lanes data lanes down mid-transfer
 * (the transport's lane_down: the connection cut as if lost), lane 0 once 4
 * slots went (sender) or came (receiver), lane 1 at 8, and so on.
 */
#define ENGINE_FAULT_KILL_LANE (1u << 9)
/* Tests: each job of a hashing thread (hash_threads) waits 20 ms first. */
#define ENGINE_FAULT_SLOW_HASH (1u << 11)
/* Test hook, either role: an io_uring of 8 entries, so that its completion queue overflows. */
#define ENGINE_FAULT_SMALL_RING (1u << 12)
/*
 * Sender with memory windows: its second slot's payload goes into its
 * first slot through the key the first slot's descriptor closed (a peer
 * rewriting a fenced slot): the receiver's NIC refuses it.
 */
#define ENGINE_FAULT_MW_REWRITE (1u << 13)

struct follow_book;
struct slowhop;

struct engine_params {
	enum engine_role role;
	struct chan *chan;
	/*
	 * The data path. NULL: a probe (a dry run that looks at the destination;
	 * open_flags must hold PROTO_OPEN_DRY_RUN): no transport, no pool, no
	 * RING; only the control channel. The receiver answers each FILES entry
	 * as a real run would (names, limits, the skip level, checksums hashed
	 * on both sides) but creates nothing, and a regular file answered OK is
	 * resolved by that answer ("would copy": no data, no FILE_DONE, no
	 * FILE_RESULT). After END its --delete pass walks as a real one would and
	 * reports each entry it would remove (DELETED, what 1) instead of
	 * removing it. chunk_size, slots and pool_chunks are ignored.
	 */
	struct xport *x;
	uint32_t chunk_size;  /* == receiver slot size */
	uint32_t slots;	      /* receiver ring slots */
	uint32_t pool_chunks; /* sender: chunks in its pool */
	int idle_timeout_ms;
	bool busy_poll;	    /* --poll: spin on completions instead of sleeping in poll() */
	uint64_t peer_caps; /* the peer's HELLO caps (PROTO_CAP_*) */
	/* sender */
	struct engine_source source;
	/*
	 * Bytes per second on the data path, 0 = none; averaged from the first
	 * chunk with no burst allowance. A receiver holds credits back instead.
	 */
	uint64_t bwlimit;
	/*
	 * Bench roles: the stream's length and the seed of its pattern (see
	 * engine_bench_fill); no source, no destination, no files.
	 */
	uint64_t bench_bytes;
	uint64_t bench_seed;
	/* receiver */
	int base_fd;	       /* destination directory (borrowed) */
	const char *rename_to; /* store the single top-level entry under this name */
	/*
	 * Both roles: HARDLINKS (the sender sends a regular file's later names
	 * as hard links; the receiver makes them), XATTRS and ACLS.
	 * Receiver: PROTO_OPEN_* (PRESERVE, OWNER, and the skip level: SKIP_EXISTS keeps
	 * a regular file that is there by that name, SKIP_QUICK one of the same
	 * size and mtime; never through a symlink, never a directory).
	 */
	uint32_t open_flags;
	/*
	 * Receiver in a 'write only' module: its answers show nothing of what
	 * is there: no items (PROTO_ITEM_*) and no entry answered kept (a
	 * directory or symlink there already is answered OK, as a new one).
	 */
	bool conceal;
	/*
	 * Receiver: said after the text of a file refused for permission
	 * (PERR_PERMISSION), in parentheses: whose side and identity could not
	 * write there (a daemon: its module, directory and user). NULL: nothing.
	 */
	const char *perm_where;
	/*
	 * Create set-user-ID, set-group-ID and sticky bits as the sender sent
	 * them (with PRESERVE); false: never, on files and directories alike.
	 */
	bool keep_setid;
	/*
	 * Receiver without PRESERVE: entries it creates get the sender's
	 * permission bits less these (the receiving process's umask, as cp,
	 * scp and rsync do); never set-id or sticky bits. A file or directory
	 * that is there already keeps its own mode.
	 */
	mode_t umask;
	unsigned faults;	  /* ENGINE_FAULT_* */
	unsigned test_kill_lanes; /* ENGINE_FAULT_KILL_LANE: how many */
	/*
	 * Worker threads (engine_workers.c): the per-byte work off the engine's
	 * thread (the end-to-end hash of the data chunks, a file's chunks on
	 * one of them in order; a receiver's private copies of its slots and
	 * the opening of sealed ones; a bench receiver's check); 0: all of it
	 * on the engine's thread.
	 */
	unsigned hash_threads;
#define ENGINE_HASH_THREADS_MAX 16
	/*
	 * The zero-copy fence (memory windows; both ends agreed it, mwfence_agreed,
	 * and x was made with xport_params.windows): the receiver keeps no
	 * private copy, opens each slot's window before it credits the slot
	 * and takes a slot only through xport_wc_closed_window; the sender
	 * writes a slot through the key its credit carried (engine_windows.c).
	 */
	bool windows;
	/*
	 * Sealed slots, for transports that do not seal their frames (verbs;
	 * tcp seals each frame itself, xport_params.seal): the sender seals
	 * each slot's descriptor and payload with the AEAD seal_suite names
	 * (0: AES-256-GCM, what every peer has) under a key per lane from
	 * seal_secret (slot_seal_init_suite), the receiver opens them before
	 * it uses a byte. Both ends must agree on both: the suite is the one
	 * OPEN_OK's lanes byte names, never each side's own pick (PROTOCOL.md
	 * "Sealed slots"); ends that disagree fail the first slot's tag. The
	 * caller wipes seal_secret once the engine has run.
	 */
	bool seal_slots;
	enum lane_seal_suite seal_suite;
	uint8_t seal_secret[LANE_SEAL_SECRET_LEN];
	/* Tests, sender: XPORT_TEST_TAMPER_* spoils one sealed slot on lane 0. */
	unsigned seal_tamper;
	/*
	 * Receiver: partials (see ENGINE_PARTIAL_DIR) not written for this
	 * many seconds are removed from each destination directory the session
	 * opens; 0 = never.
	 */
	uint64_t partial_max_age_s;
	/* Receiver: what the peer may store; NULL: no limits. */
	const struct engine_limits *limits;
	/*
	 * Receiver: an existing block device by a regular file's destination
	 * name is written in place (engine_device.c); false: refused
	 * (PERR_DEVICE_REFUSED), as any special file there always is.
	 */
	bool write_devices;
	/* Receiver: refuse names the caller did not ask for (pull); NULL = all. */
	bool (*name_ok)(void *ud, const char *name);
	void *name_ok_ud;
	/*
	 * Receiver with PROTO_OPEN_DELETE in open_flags (see engine_delete.c):
	 * after the sender's END, when no entry failed, remove what the sender
	 * did not send under each top-level directory received; at most
	 * max_delete entries (PROTO_NO_MAX_DELETE: no limit), the others
	 * withheld. delete_tell_peer: name them to the peer (a push's daemon);
	 * else it hears only that the pass goes on. delete_keep (NULL: none):
	 * an entry to keep (filters), given its destination-relative name; a
	 * directory kept is not looked into.
	 */
	uint64_t max_delete;
	bool delete_tell_peer;
	bool (*delete_keep)(void *ud, const char *name, bool is_dir);
	void *delete_keep_ud;
	/*
	 * Receiver: >= 0, a SOCK_SEQPACKET socket (borrowed) to a relay child:
	 * what this session receives is told on it as it lands (relay_feed.h,
	 * engine_relay_rx.c). -1: none. Every initializer of engine_params says
	 * -1 for both feeds (ENGINE_NO_FEEDS): 0 is a descriptor.
	 */
	int relay_feed;
	/*
	 * Sender: the relay child's book of that socket's other end (borrowed,
	 * follow_book_new): the entries and their readable bytes come from it,
	 * not from source (engine_follow.c). It outlives the run: a run after
	 * it (the next hop, when this one was cut out) replays its entries
	 * from the first. NULL: none.
	 */
	struct follow_book *follow;
	/*
	 * Sender with follow: the slow-hop rule's state (slowhop.h, borrowed;
	 * engine_slowhop.c), its verdict read after the run. NULL: the hop is
	 * never judged slow.
	 */
	struct slowhop *slowhop;
	struct engine_events ev;
	volatile sig_atomic_t *stop; /* set by a signal handler: abort cleanly */
};

/* In every initializer of struct engine_params: no relay feed either way. */
#define ENGINE_NO_FEEDS .relay_feed = -1, .follow = NULL

/*
 * A relay child's follow book (engine_follow.c): the feed's socket (borrowed)
 * and every entry it told, with its descriptor, readable prefix and the
 * hop's DONE, kept across engine runs. 0 or -ENOMEM.
 */
int follow_book_new(int sock, struct follow_book **ret);
void follow_book_free(struct follow_book *b);
/*
 * keep: a settled file's descriptor stays open after a run sent it (a hop
 * may still be cut out and its entries replayed to the next); else it goes
 * once sent, as when no hop follows.
 */
void follow_book_keep(struct follow_book *b, bool keep);
/*
 * Whether a run after this one can replay every entry the feed told: the
 * feed did not fail upstream (ABORT, closed before END) and no descriptor
 * had to go for want of room.
 */
bool follow_book_replayable(const struct follow_book *b);

/*
 * --partial (OPEN flag PARTIAL, with a peer that has PROTO_CAP_PARTIAL): a
 * receiver writes each regular file larger than one chunk into this hidden
 * directory (mode 0700) of its destination directory, as "<h>.data" with
 * its journal "<h>.jnl" (h: hex XXH3-128 of the leaf name), and keeps them
 * when the session is cut. Nothing else lives there; --delete and listings
 * leave it alone.
 */
#define ENGINE_PARTIAL_DIR ".rdmacp-partial"

/*
 * Remove the partials in parent's store not written for max_age_s seconds
 * (0: none), and the store once empty. Returns how many files went, or -errno.
 */
int engine_partial_sweep(int parent, uint64_t max_age_s);
/*
 * What parent's store keeps for leaf (a cut run's data and journal) removed,
 * unless a live session writes it, and the store once empty. 0 or -errno.
 */
int engine_partial_forget(int parent, const char *leaf);

/* Does the relative name have an ENGINE_PARTIAL_DIR component? Nothing is written there. */
bool engine_name_reserved(const char *name);

/*
 * Does a receiver on this transport copy each slot it holds into a private
 * buffer (the transport cannot fence slots: verbs)? Its pool is then
 * slots × chunk_size bigger than the ring, and pins that much more.
 */
bool engine_rx_copies_slots(const struct xport_ops *ops);

/*
 * Bytes of memory engine_run maps and pins (registered with io_uring and the
 * transport) for p's role, chunk_size, slots and pool_chunks on a transport
 * with these ops: the receiver's ring (plus its slot copies where ops cannot
 * fence) or the sender's pool, its descriptor chunks, rounded up to whole
 * 2 MiB pages from 2 MiB on. The one place that size is computed: a caller
 * reserves exactly this against its memory budget before engine_run.
 */
uint64_t engine_pinned_bytes(const struct engine_params *p, const struct xport_ops *ops);

/*
 * rdmacp bench's data for `len` bytes at stream offset `offset` (a multiple
 * of ENGINE_BENCH_BLOCK) of the pattern seeded by seed: in each block, the
 * first 8 bytes name the block's offset in the stream, the others hold
 * seed + (their word's index in the chunk) × an odd constant, little-endian.
 * A chunk from another offset, a block moved inside a chunk, or any byte
 * changed does not check. fill writes it all; stamp only the block heads
 * (buf holds a fill already, of any offset). check returns 0 when buf holds
 * exactly that, else -EBADMSG with the offset in buf of the first difference
 * in *ret_at.
 */
#define ENGINE_BENCH_BLOCK 4096
void engine_bench_fill(uint8_t *buf, uint32_t len, uint64_t offset, uint64_t seed);
void engine_bench_stamp(uint8_t *buf, uint32_t len, uint64_t offset, uint64_t seed);
int engine_bench_check(const uint8_t *buf, uint32_t len, uint64_t offset, uint64_t seed,
		       uint32_t *ret_at);

/*
 * The status code (PERR_*) a -errno of a file operation is reported as:
 * no space, permission, not found, a bad path, else an I/O error.
 */
uint32_t errno_to_perr(int r);

/*
 * Run one transfer to its end. Returns 0 when the exchange completed (files
 * may still have failed: see stats), or a negative errno when the session
 * failed; then err holds the reason and *ret_code the protocol error code;
 * -EREMOTEIO: the peer ended the session with its ERROR (else it failed here).
 * Every temp file is gone on return unless it was committed.
 */
/*
 * hash_threads for a setting (--hash-threads, "hash threads"): 0..16 as it
 * is, -1 (auto) half the online CPUs (at most 16) on verbs, none on tcp.
 */
unsigned engine_hash_threads(int setting, bool verbs);

int engine_run(const struct engine_params *p, struct engine_stats *ret_stats, uint32_t *ret_code,
	       char *err, size_t errlen);
