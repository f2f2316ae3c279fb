/* SPDX-License-Identifier: MIT */
/*
 * The engine's per-entry state: a chunk of the sender's pool, a slot of the
 * receiver's ring, and an entry of the file table (struct efile), with the
 * sets and records they hold. Included by engine-internal.h only, where it
 * stands (the constants above it there are its own). struct efile is the
 * core's part of an entry: a feature's own per-file fields are in its block
 * after it (engine_feature.file_size, engine_file_state).
 */
#pragma once

enum chunk_state { CH_FREE = 0, CH_READING, CH_READY, CH_POSTED };
enum slot_state { SL_FREE = 0, SL_HELD };

struct chunk {
	uint8_t state;
	bool zero;   /* all zeros (a hole, not read; or read and found so): no payload */
	bool same;   /* --delta, a tree file: chunks the pre-pass found unchanged, not read */
	bool hashed; /* a tree file's: fed into its digest (tx_tree_feed) */
	/*
	 * Its own digest made on a worker: once read (tx_chunk_read), folded into
	 * its file's tree when posted; or as it is sealed (posted, it waits in
	 * its file's queue, tx_fold_queue, to fold in file order once back,
	 * tx_seal_digested; fold_next: the next of that queue, index + 1, 0 none).
	 */
	bool digested;
	uint32_t fold_next;
	uint8_t chash[HASH_LEN];
	/* With a hashing thread (engine_workers.c); sent: its lane is done with it too. */
	bool hashing, sent;
	uint32_t fidx; /* file table index */
	uint64_t off;
	uint32_t len;  /* payload bytes */
	uint32_t done; /* bytes read so far */
	uint32_t slot; /* receiver slot once posted */
	/* A pack: whole files (fidx + 1 in a list through engine_pack.c's pk_next), then their table. */
	bool packed, closed;
	uint32_t npieces, fill, reads_out;
	uint32_t first, last;
	/*
	 * Posted: its descriptor, the lane it went on, the payload bytes posted
	 * and (sealed) the lane's count it was sealed under, so that rails can
	 * post it again on another lane (engine_rails.c).
	 */
	struct proto_desc desc;
	uint8_t lane;
	uint32_t post_len;
	uint64_t seal_count;
};

struct rslot {
	uint8_t state;
	bool hashed, written;
	bool hashing;  /* with a worker thread, feeding its file's digest (engine_workers.c) */
	bool copying;  /* a worker copies (or opens) it into its private copy, or digests it */
	bool digested; /* chash is made (where it was opened) */
	uint32_t fidx;
	uint64_t off;
	uint32_t len;
	uint32_t wdone; /* bytes written so far */
	uint32_t lane;
	bool packed;		 /* whole files (engine_pack.c): fidx means nothing */
	uint32_t pieces_left;	 /* packed: writes of its files not done yet */
	uint8_t chash[HASH_LEN]; /* --partial: the chunk's own hash, for the journal */
};

/* Receiver: a ring slot (engine_rx_slots.c): a descriptor came for it, its credit not sent. */
struct rring {
	bool busy;
	uint32_t lane; /* the descriptor's: its credit goes back on it */
};

/*
 * A set of 64-bit keys, 0 never one (engine_names.c): names kept as their
 * hashes, 8 bytes a name. A hash collision answers yes for a name never added.
 */
struct name_set {
	uint64_t *h; /* open addressing; 0 marks an empty slot */
	size_t n, cap;
};

/* A directory whose mode and time are set last (rx_finish_dirs). */
struct dir_meta {
	char *name;
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	uint32_t mode;
	bool created;	/* by us: takes the sender's mode (an existing one only with -p) */
	uint32_t items; /* an existing one: what differs (PROTO_ITEM_PERMS: its mode is set) */
};

struct efile {
	bool used;
	uint32_t id;
	char *name;
	uint8_t ftype;
	uint64_t size;
	uint32_t name_bytes; /* sender: what its names count in names_in_flight */
	uint64_t name_key;   /* receiver: its destination's key in e->inflight; 0: none */
	struct timespec t0;
	struct file_hash hash;
	bool hash_live;
	bool failed;
	uint32_t fail_code;
	bool fail_peer;	 /* the failure is the peer's (it said so, or sent what we refuse) */
	char *fail_text; /* its reason (file_fail_text), allocated when there is one */
	/* sender */
	char *src_path; /* what to open, relative to src_dirfd */
	int src_dirfd;
	bool src_device;   /* a block device, read as a file of its size (engine_src.device) */
	bool src_nonblock; /* fd is O_NONBLOCK still (DISKIO_NONBLOCK; tx_read_again) */
	/* engine_src.window: where the file's bytes start in the source, and its whole size. */
	bool src_window;
	uint64_t src_base, src_whole;
	bool acked, started, finished, done_sent;
	int fd, dfd;
	struct dio_align dio;
	uint64_t read_off, send_off;
	uint32_t chunks_out; /* chunks of this file not yet posted */
	/* The receiver's RESUME: ranges it keeps, read and hashed but not sent. */
	struct proto_range *resume;
	uint16_t nresume;
	uint64_t resumed; /* bytes of it the sender has passed over */
	/* Zero extents: where the source's data starts and ends next (SEEK_DATA/HOLE). */
	uint64_t next_data, next_hole;
	/* Receiver: of its bytes described as zeros, those left unwritten on its device. */
	uint64_t zero_assumed;
	/* Receiver: a device's zero ranges being written on the worker (engine_sums.c). */
	uint32_t zeros_out;
	/*
	 * Receiver: ranges without payload (ZEROS, --delta's SAME) a feature
	 * noted and has not taken into the digest yet (rx_range, in file order).
	 */
	uint32_t nranges;
	/*
	 * --delta checked by chunk digests (DELTA SUMS' TREE: a device target
	 * and a peer with PROTO_CAP_DELTA_TREE): the file's digest is the
	 * XXH3-128 of its chunks' XXH3-128, in order (what each end keeps
	 * for it: struct delta_file).
	 */
	bool tree;
	const struct engine_digest *dg; /* NULL: the stream of its bytes (the roles' own) */
	/* receiver */
	int dir; /* dir cache index, -1 none */
	/* What was under its name when it was accepted: the st_mode, 0 for nothing. */
	bool old_seen;
	uint32_t old_mode;
	/*
	 * What differs from the entry there (PROTO_ITEM_*): decided by the
	 * receiver when it takes the entry, told to a sender with
	 * PROTO_CAP_ITEMIZE in the FILES_ACK.
	 */
	uint32_t items;
	/* The unnamed temp file was made with its final mode (no fchmod at commit). */
	bool tmode_set;
	uint32_t tmode;
	char *leaf;
	/* A named temp file's name (or a link's, a symlink's on its way): NULL or "" none. */
	char *tmpname;
	int tfd;
	uint64_t hash_off, recv_bytes, written;
	uint32_t hash_jobs; /* chunks with a hashing thread (engine_workers.c) */
	/* Sender: its posted chunks whose digests fold once back, in file order (index + 1, 0: none). */
	uint32_t fold_head, fold_tail;
	bool done_wait; /* sender: FILE_DONE waits for those */
	uint32_t writes_out, held;
	bool got_done, fsyncing, renamed;
	bool linking;		  /* its name is being made by io_uring (rx_link_done) */
	bool link_batch;	  /* ... as one of a syncfs batch (its dir's links_out) */
	uint64_t dir_sync_needed; /* renamed: durable once the dir's completed >= this */
	uint32_t done_status;
	uint64_t done_bytes;
	uint8_t done_hash[HASH_LEN];
	struct proto_file meta;
	/*
	 * A kept regular file whose answer a feature held (PROTO_ITEM_WAIT,
	 * rx_kept): the receiver answers again once it has what it waits for;
	 * the sender has sent it (its XATTRS) and waits for that answer.
	 */
	bool kept_wait;
	/* Kept by a skip level (rx_keep_file): the file there, its device, inode and link count. */
	uint64_t kept_dev, kept_ino;
	uint64_t kept_nlink;
	/*
	 * A block device target (engine_device.c): tfd is the device itself,
	 * written in place; dev_verify: its read-back digest is being made.
	 */
	bool device, dev_verify;
	/* A new temp file allocated over its whole chunks up front (rx_prealloc). */
	bool prealloc;
	/*
	 * --partial (engine_partial.c): tfd is the store's data file, [0, kept)
	 * verified. The roles and the features that write to it test these.
	 */
	bool partial;
	uint64_t kept;
};

/* -H on the sender: a file's first name, by (device, inode). */
struct hl_ent {
	uint64_t dev, ino;
	char *name;
};
