/* SPDX-License-Identifier: MIT */
/*
 * The rdmacp control protocol (spec: docs/PROTOCOL.md).
 *
 * Every frame is a 16-byte header followed by `length` payload bytes:
 *   magic u32 | version u8 | reserved u8 | type u16 | flags u16 | reserved u16 | length u32
 * all big-endian. Reserved fields and undefined flag bits must be zero.
 * Payloads are encoded field by field through proto/wire.h; every length and
 * count has a hard cap that is checked before anything is allocated.
 * Framing and dispatch: msg.c; each message's encoder and decoder: the
 * msg_*.c files msg_codec.h lists; status code names: status.c.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_MAGIC	       0x52444d43u /* "RDMC" */
#define PROTO_VERSION	       1
#define PROTO_VERSION_MIN      1
#define PROTO_HDR_LEN	       16
#define PROTO_MAX_PAYLOAD      (1u << 20) /* 1 MiB, for any message */
#define PROTO_MAX_PATH	       4096	  /* bytes in a path */
#define PROTO_MAX_TEXT	       1024	  /* bytes in an error text or name */
#define PROTO_MAX_BATCH	       256	  /* entries in FILES / FILES_ACK / GET / MODULES */
#define PROTO_MAX_MODNAME      63	  /* bytes in a module name */
#define PROTO_MAX_LANES	       16
#define PROTO_MAX_SLOTS	       4096
#define PROTO_MIN_CHUNK	       (4u << 10)
#define PROTO_MAX_CHUNK	       (64u << 20)
#define PROTO_TOKEN_LEN	       32
#define PROTO_HASH_LEN	       16
#define PROTO_MAX_FILTERS      1024	    /* rules in FILTER */
#define PROTO_MAX_FILTER_BYTES (256u << 10) /* FILTER's patterns together */

enum proto_type {
	MSG_HELLO = 1,
	MSG_ERROR = 2,
	MSG_OPEN = 3,
	MSG_OPEN_OK = 4,
	MSG_RING = 5,
	MSG_FILES = 6,
	MSG_FILES_ACK = 7,
	MSG_FILE_DONE = 8,
	MSG_FILE_RESULT = 9,
	MSG_GET = 10,
	MSG_END = 11,
	MSG_PING = 12,
	MSG_PONG = 13,
	MSG_BYE = 14,
	MSG_LIST = 15,	       /* client -> daemon: list a path, or the modules */
	MSG_MODULES = 16,      /* daemon -> client: modules this client may use */
	MSG_ENTRY_FAILED = 17, /* sender -> receiver, only to a peer with PROTO_CAP_ENTRY_FAILED */
	MSG_FILTER = 18,       /* client -> daemon before OPEN: a pull's rules (PROTO_CAP_FILTER) */
	MSG_RESUME = 19,  /* receiver -> sender: byte ranges it has verified (PROTO_CAP_PARTIAL) */
	MSG_DELETED = 20, /* receiver -> sender (--delete), only to a peer with PROTO_CAP_DELETE */
	/* Digests: daemon -> client after FILES (LIST with PROTO_LIST_SUMS), or
	 * sender -> receiver (PERR_SUM_WANTED, skip level checksum) */
	MSG_SUMS = 21,
	/* Attribute digests and link groups: daemon -> client after FILES (LIST with attrs) */
	MSG_LIST_ATTRS = 22,
	MSG_XATTRS = 23, /* sender -> receiver, only with OPEN XATTRS or ACLS */
	MSG_ZEROS = 24,	 /* sender -> receiver: ranges of zeros, no payload (PROTO_CAP_ZEROS) */
	/* client -> daemon: a memory-to-memory run (PROTO_CAP_BENCH); 27 is reserved for it */
	MSG_BENCH = 26,
	/* --delta: receiver -> sender chunk digests, sender -> receiver unchanged ranges */
	MSG_DELTA = 28,
	/* rdmacp finalize: client -> daemon, join a split file's parts (PROTO_CAP_ASSEMBLE) */
	MSG_ASSEMBLE = 29,
	MSG_ASSEMBLED = 30, /* daemon -> client: the file is in place */
	/* Rails: a data lane is down, with this side's count on it (PROTO_CAP_RAILS) */
	MSG_LANE_DOWN = 31,
	MSG_RELAY = 32, /* client -> daemon right before a push's OPEN (PROTO_CAP_RELAY) */
	MSG_RELAY_RESULT =
	    33, /* daemon -> client after a relayed push's END, one per destination */
	MSG_TYPE_MAX = MSG_RELAY_RESULT,
};

/* Header flags: none are defined in version 1; every bit is reserved. */
#define PROTO_FLAGS_KNOWN 0x0000u

/* Capability bits in HELLO: proto/msg_caps.h. */
#include "msg_caps.h"

/*
 * What differs between an entry offered and the one at the receiver, as
 * rsync -i itemizes it. NEW: nothing (or another type) was there. CONTENT:
 * its data (a symlink's target) is sent again; SIZE, CHECKSUM: why. The
 * rest is metadata the options keep (-p: TIME, PERMS; --owner: OWNER,
 * GROUP), brought in line on a kept entry (SKIPPED) without its data.
 */
enum proto_item {
	PROTO_ITEM_NEW = 1u << 0,
	PROTO_ITEM_CONTENT = 1u << 1,
	PROTO_ITEM_SIZE = 1u << 2,
	PROTO_ITEM_CHECKSUM = 1u << 3,
	PROTO_ITEM_TIME = 1u << 4,
	PROTO_ITEM_PERMS = 1u << 5,
	PROTO_ITEM_OWNER = 1u << 6,
	PROTO_ITEM_GROUP = 1u << 7,
	/* -X, -A (PROTO_CAP_KEPT_ITEMS): extended attributes, ACLs differed. */
	PROTO_ITEM_XATTRS = 1u << 8,
	PROTO_ITEM_ACLS = 1u << 9,
	/*
	 * With SKIPPED, for a regular file (PROTO_CAP_KEPT_ITEMS, -X/-A): not the
	 * final answer; the sender sends the file's XATTRS (none too) and a
	 * second FILES_ACK entry for the id follows, with what differed.
	 */
	PROTO_ITEM_WAIT = 1u << 10,
};
#define PROTO_ITEMS_KNOWN 0x7ffu
/* The items that are metadata alone: a kept entry with any of them was updated. */
#define PROTO_ITEMS_META                                                            \
	(PROTO_ITEM_TIME | PROTO_ITEM_PERMS | PROTO_ITEM_OWNER | PROTO_ITEM_GROUP | \
	 PROTO_ITEM_XATTRS | PROTO_ITEM_ACLS)
/*
 * Files a sender may have offered and not yet resolved: PROTO_FILES_WIDER
 * to a receiver that announced PROTO_CAP_WIDER_WINDOW, PROTO_FILES_WIDE to
 * one that announced PROTO_CAP_WIDE_WINDOW, PROTO_FILES_NARROW to others.
 */
#define PROTO_FILES_NARROW 768
#define PROTO_FILES_WIDE   1536
#define PROTO_FILES_WIDER  6144
/*
 * And the span of their ids: the newest offered minus the oldest not yet
 * resolved is less than this (a receiver's table takes a file by its id
 * modulo the span).
 */
#define PROTO_SPAN_NARROW 1024
#define PROTO_SPAN_WIDE	  2048
#define PROTO_SPAN_WIDER  8192

#include "msg_status.h"

enum proto_dir {
	PROTO_DIR_PUSH = 1, /* client sends, daemon receives */
	PROTO_DIR_PULL = 2, /* daemon sends, client receives */
};

/* OPEN flags. */
enum {
	PROTO_OPEN_RECURSIVE = 1u << 0,
	PROTO_OPEN_PRESERVE = 1u << 1, /* mode and mtime */
	PROTO_OPEN_OWNER = 1u << 2,    /* uid/gid */
	PROTO_OPEN_DRY_RUN = 1u << 3,
	PROTO_OPEN_DEST_IS_DIR = 1u << 4, /* push: destination must be a directory */
	/* Skip levels (at most one; only to a peer with PROTO_CAP_SKIP). */
	PROTO_OPEN_SKIP_EXISTS = 1u << 5, /* a regular file is there by that name */
	PROTO_OPEN_SKIP_QUICK = 1u << 6,  /* ... and has the same size and mtime */
	/* ... the same size and XXH3-128 (only to a peer with PROTO_CAP_CHECK too) */
	PROTO_OPEN_SKIP_CHECKSUM = 1u << 7,
	/* Keep cut files for a later run, resume them (only to a peer with PROTO_CAP_PARTIAL). */
	PROTO_OPEN_PARTIAL = 1u << 8,
	/*
	 * With RECURSIVE, only to a peer with PROTO_CAP_DELETE: mirror (remove
	 * what the sender lacks); OPEN then carries max_delete. A push's, or a
	 * pull's with DRY_RUN (a probe, see proto_open_is_probe).
	 */
	PROTO_OPEN_DELETE = 1u << 9,
	/* Metadata (only to a peer with PROTO_CAP_HARDLINKS / PROTO_CAP_XATTRS). */
	PROTO_OPEN_HARDLINKS = 1u << 10, /* -H: later names of a file as FILES type 4 */
	PROTO_OPEN_XATTRS = 1u << 11,	 /* -X: extended attributes in XATTRS */
	PROTO_OPEN_ACLS = 1u << 12,	 /* -A: POSIX ACLs (system.posix_acl_*) in XATTRS */
	/*
	 * Only to a peer with PROTO_CAP_ENCRYPT: the client wants sealed lanes;
	 * OPEN then carries the wish byte and OPEN_OK the lanes byte.
	 */
	PROTO_OPEN_ENCRYPT = 1u << 15,
	/* Only to a peer with PROTO_CAP_DELTA: send only chunks the receiver's file lacks (DELTA). */
	PROTO_OPEN_DELTA = 1u << 16,
	/*
	 * A push's only, to a peer with PROTO_CAP_ASSUME_ZERO (--assume-zero-target):
	 * block device targets already read as zeros; zero extents are not written
	 * on them (the device's read-back check still covers them).
	 */
	PROTO_OPEN_ASSUME_ZERO = 1u << 17,
	/*
	 * Only to a peer with PROTO_CAP_WRITE_SEND: verbs lanes carry each
	 * immediate as a SEND after the RDMA WRITE (the client's device has no
	 * immediate data: iWARP). The daemon's verbs lanes then do the same.
	 */
	PROTO_OPEN_WRITE_SEND = 1u << 18,
};
#define PROTO_OPEN_FLAGS_KNOWN 0x79fffu

/* OPEN's wish byte (with PROTO_OPEN_ENCRYPT). */
enum proto_encrypt_wish {
	PROTO_ENCRYPT_PREFER =
	    1, /* sealed where the transport can (tcp), unless the module is off */
	PROTO_ENCRYPT_REQUIRE = 2, /* --encrypt: sealed or refused */
};

/* OPEN_OK's lanes byte (only when OPEN had PROTO_OPEN_ENCRYPT; 0 = absent). */
enum proto_lanes {
	PROTO_LANES_CLEAR = 1,
	PROTO_LANES_SEALED = 2, /* AES-256-GCM */
	/* Only to a client with PROTO_CAP_SEAL_SUITES, only for tcp lanes: */
	PROTO_LANES_SEALED_AES128 = 3, /* AES-128-GCM */
	PROTO_LANES_SEALED_CHACHA = 4, /* ChaCha20-Poly1305 */
	PROTO_LANES_MAX = PROTO_LANES_SEALED_CHACHA,
};
/* A lanes byte that says sealed, under whichever suite. */
static inline bool proto_lanes_sealed(uint8_t lanes)
{
	return lanes >= PROTO_LANES_SEALED && lanes <= PROTO_LANES_MAX;
}
#define PROTO_OPEN_SKIP_LEVELS \
	(PROTO_OPEN_SKIP_EXISTS | PROTO_OPEN_SKIP_QUICK | PROTO_OPEN_SKIP_CHECKSUM)

/*
 * A dry run that looks at the destination (PROTO_CAP_PROBE): the engine runs
 * on the control channel alone, the receiver answers FILES as it would and
 * creates, writes and deletes nothing. See docs/PROTOCOL.md "Dry-run probes".
 */
static inline bool proto_open_is_probe(uint32_t flags)
{
	return (flags & PROTO_OPEN_DRY_RUN) &&
	       (flags & (PROTO_OPEN_SKIP_LEVELS | PROTO_OPEN_DELETE));
}

/* LIST flags. */
enum {
	PROTO_LIST_RECURSIVE = 1u << 0,
	/* SUMS after each FILES batch (only to a peer with PROTO_CAP_CHECK) */
	PROTO_LIST_SUMS = 1u << 1,
	/* LIST_ATTRS after each FILES batch (only to a peer with PROTO_CAP_LIST_ATTRS): */
	PROTO_LIST_XATTRS = 1u << 2,	/* digests of user.* (and security.*, trusted.*) */
	PROTO_LIST_ACLS = 1u << 3,	/* digests of system.posix_acl_access/default */
	PROTO_LIST_HARDLINKS = 1u << 4, /* link groups of regular files */
};
#define PROTO_LIST_ATTR_FLAGS  (PROTO_LIST_XATTRS | PROTO_LIST_ACLS | PROTO_LIST_HARDLINKS)
#define PROTO_LIST_FLAGS_KNOWN 0x1fu

/* MODULES entry flags. */
enum {
	PROTO_MOD_READ_ONLY = 1u << 0,
	PROTO_MOD_WRITE_ONLY = 1u << 1,
	/* Cannot be served now (PERR_UNAVAILABLE); only to a peer with PROTO_CAP_UNAVAILABLE */
	PROTO_MOD_UNAVAILABLE = 1u << 2,
};
#define PROTO_MOD_FLAGS_KNOWN 0x7u

/* File entry types in FILES. */
enum proto_ftype {
	PROTO_FT_REG = 1,
	PROTO_FT_DIR = 2,
	PROTO_FT_SYMLINK = 3,
	/* Another name of a regular file sent earlier this session (link: its wire name). */
	PROTO_FT_HARDLINK = 4,
};

struct proto_hdr {
	uint8_t version;
	uint16_t type;
	uint16_t flags;
	uint32_t length;
};

struct msg_hello {
	uint16_t min_version;
	uint16_t max_version;
	uint64_t caps;
	char software[PROTO_MAX_TEXT + 1];
};

struct msg_error {
	uint32_t code;
	char text[PROTO_MAX_TEXT + 1];
};

struct msg_open {
	uint8_t direction;	       /* enum proto_dir */
	uint8_t transport;	       /* enum xport_kind, 0 = daemon's choice */
	uint8_t lanes;		       /* proposed, 1..PROTO_MAX_LANES */
	uint32_t flags;		       /* PROTO_OPEN_* */
	uint32_t chunk_size;	       /* proposed slot/chunk size */
	uint32_t slots;		       /* proposed ring slots */
	char path[PROTO_MAX_PATH + 1]; /* push: destination MODULE/REL; pull: MODULE */
	/* Only with PROTO_OPEN_DELETE: deletions allowed, PROTO_NO_MAX_DELETE = no limit. */
	uint64_t max_delete;
	/* Only with PROTO_OPEN_ENCRYPT: enum proto_encrypt_wish. */
	uint8_t encrypt;
};
#define PROTO_NO_MAX_DELETE UINT64_MAX

/* One more daemon address for data lanes (OPEN_OK, daemon rails). */
#define PROTO_MAX_RAILS (PROTO_MAX_LANES - 1)
struct proto_rail {
	uint8_t family;	  /* PROTO_RAIL_INET or PROTO_RAIL_INET6 */
	uint8_t addr[16]; /* 4 bytes for INET */
	uint16_t port;	  /* non-zero */
};
enum {
	PROTO_RAIL_INET = 4,
	PROTO_RAIL_INET6 = 6,
};
/* OPEN_OK's rails flags (PROTO_CAP_RAILS_ONLY). */
enum {
	/* The address the client reached takes no lanes: lane i to rails[i % nrails]. */
	PROTO_RAILS_UNREACHED = 1u << 0,
};

struct msg_open_ok {
	uint8_t transport;
	uint8_t lanes;
	uint16_t data_port; /* where to connect the data lanes / RDMA CM */
	uint32_t chunk_size;
	uint32_t slots;
	uint8_t token[PROTO_TOKEN_LEN];
	/*
	 * enum proto_lanes; 0: not sent (an OPEN without PROTO_OPEN_ENCRYPT and
	 * no rails). With rails it is always sent (CLEAR when not asked).
	 */
	uint8_t lanes_sealed;
	/*
	 * Daemon rails (PROTO_CAP_DAEMON_RAILS, verbs): more daemon addresses;
	 * lane i connects to address i % (1 + nrails), address 0 the one the
	 * client reached. 0: not sent.
	 */
	uint8_t nrails; /* 0..PROTO_MAX_RAILS */
	struct proto_rail rails[PROTO_MAX_RAILS];
	/*
	 * PROTO_RAILS_*, after the rails, sent only when not 0 (to a client
	 * with PROTO_CAP_RAILS_ONLY). With PROTO_RAILS_UNREACHED, rails lists
	 * every address that takes lanes.
	 */
	uint8_t rails_flags;
};

/* The receiver's ring, sent once the data connection is up. */
struct msg_ring {
	uint64_t addr;	    /* base of the data slots */
	uint64_t desc_addr; /* base of the descriptor array (PROTO_DESC_LEN each) */
	uint32_t slots;
	uint32_t slot_size;
	uint8_t nkeys; /* 1..PROTO_MAX_LANES: one rkey per lane (rails: a device each) */
	uint32_t rkey[PROTO_MAX_LANES];
};

struct proto_file {
	uint32_t id;
	uint8_t ftype; /* enum proto_ftype */
	uint32_t mode; /* permission bits only (07777) */
	uint64_t size;
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	uint32_t uid, gid;
	char *name; /* relative path, allocated by decode (<= PROTO_MAX_PATH) */
	char *link; /* symlink target, hard link's first name, or NULL */
	/*
	 * A regular file with other names at the sender (PROTO_CAP_LINKED_FILES,
	 * -H): later entries of type HARDLINK may name it. On the wire, the mode
	 * word's PROTO_FILE_LINKED bit.
	 */
	bool linked;
};

/* FILES: the mode word's bit of proto_file.linked (only on a regular file). */
#define PROTO_FILE_LINKED 0x10000u

struct msg_files {
	uint16_t count;
	struct proto_file *files; /* count entries, allocated by decode */
};

struct proto_status {
	uint32_t id;
	uint32_t status; /* enum proto_err */
	/*
	 * FILES_ACK, to a peer with PROTO_CAP_ITEMIZE only: PROTO_ITEM_*, sent
	 * in the status word's upper 16 bits (0 to others).
	 */
	uint32_t items;
	char *text; /* allocated by decode, may be "" */
};

struct msg_files_ack {
	uint16_t count;
	struct proto_status *st;
};

struct msg_file_done {
	uint32_t id;
	uint32_t status; /* PERR_OK: bytes and hash are final */
	uint64_t bytes;	 /* bytes the sender sent on the data path */
	uint8_t hash[PROTO_HASH_LEN];
	char text[PROTO_MAX_TEXT + 1];
};

struct msg_file_result {
	uint32_t id;
	uint32_t status;
	char text[PROTO_MAX_TEXT + 1];
};

struct msg_get {
	uint16_t count;
	char **paths; /* MODULE/REL/PATH each, allocated by decode */
};

/*
 * Listing: an empty path asks for the modules (MODULES batches, then END);
 * MODULE/PATH for the entries of a directory, or the entry itself (FILES
 * batches, then END).
 */
struct msg_list {
	uint32_t flags;		       /* PROTO_LIST_* */
	char path[PROTO_MAX_PATH + 1]; /* "" or MODULE/REL or an absolute path in a module */
};

/*
 * The XXH3-128 of a listed regular file, hashed by the daemon (LIST with
 * PROTO_LIST_SUMS): status PERR_OK and the digest, or why there is none
 * (the hash is then all zero).
 */
struct proto_sum {
	uint32_t id; /* the FILES entry's id */
	uint32_t status;
	uint8_t hash[PROTO_HASH_LEN];
};

struct msg_sums {
	uint16_t count;		/* <= PROTO_MAX_BATCH */
	struct proto_sum *sums; /* count entries, allocated by decode */
};

/*
 * LIST_ATTRS: what each entry of the FILES batch just before it has, one
 * record per entry in the batch's order. fields says which parts every
 * record carries: the XXH3-128 of the entry's sorted (name, value) list of
 * user.* attributes (XATTRS), of security.* and trusted.* (PRIVILEGED: only
 * from a side that reads them with privilege, see src/listattrs.h), of its
 * two ACL attributes (ACLS); its link group (LINKS: 0, or a number the
 * regular files of one inode with more than one link share in this
 * listing). Digests are all zero unless status is PERR_OK.
 */
enum {
	PROTO_LATTR_XATTRS = 1u << 0,
	PROTO_LATTR_PRIVILEGED = 1u << 1,
	PROTO_LATTR_ACLS = 1u << 2,
	PROTO_LATTR_LINKS = 1u << 3,
};
#define PROTO_LATTR_KNOWN 0xfu
enum {
	PROTO_LATTR_DIGEST_XATTRS,
	PROTO_LATTR_DIGEST_PRIVILEGED,
	PROTO_LATTR_DIGEST_ACLS,
	PROTO_LATTR_DIGESTS,
};
struct proto_entry_attrs {
	uint32_t id;	 /* the FILES entry's */
	uint32_t status; /* enum proto_err: the attributes could not be read */
	uint8_t digest[PROTO_LATTR_DIGESTS][PROTO_HASH_LEN];
	uint64_t link_group;
};

struct msg_list_attrs {
	uint8_t fields;			/* PROTO_LATTR_*, not 0 */
	uint16_t count;			/* <= PROTO_MAX_BATCH */
	struct proto_entry_attrs *ents; /* allocated by decode */
};

struct proto_module {
	uint8_t flags; /* PROTO_MOD_* */
	char *name;    /* 1..PROTO_MAX_MODNAME bytes, allocated by decode */
	char *comment; /* <= PROTO_MAX_TEXT bytes, allocated by decode, may be "" */
};

struct msg_modules {
	uint16_t count;
	struct proto_module *mods; /* count entries, allocated by decode */
};

struct msg_end {
	uint32_t files; /* files the sender offered in total */
	uint64_t bytes;
};

/*
 * An entry of the sender's that can't be offered (unreadable, a name too
 * long for the wire): a failure the receiver counts and reports. name is for
 * people only (shortened in the middle when longer than PROTO_MAX_PATH,
 * never resolved as a path).
 */
struct msg_entry_failed {
	uint32_t status; /* enum proto_err, not PERR_OK */
	char name[PROTO_MAX_PATH + 1];
	char text[PROTO_MAX_TEXT + 1];
};

/*
 * --delete: what the receiver removed (or would have removed) after the
 * sender's END and before its own, in batches; a batch may be empty (the
 * receiver is still looking: it keeps the sender's idle timer from firing).
 */
enum {
	PROTO_DEL_DELETED = 1,	/* removed */
	PROTO_DEL_WITHHELD = 2, /* extra, kept because --max-delete was reached */
	PROTO_DEL_FAILED = 3,	/* extra, could not be removed (code, text) */
};
/* DELETED flags: nothing was looked at because entries of the run failed. */
#define PROTO_DELETED_SUPPRESSED  0x1u
#define PROTO_DELETED_FLAGS_KNOWN 0x1u
/* Payload bytes a sender fills a DELETED with at most (names are up to PROTO_MAX_PATH each). */
#define PROTO_DELETED_FILL (256u << 10)

struct proto_deleted {
	uint8_t what;  /* PROTO_DEL_* */
	uint8_t ftype; /* enum proto_ftype of what was there (1..3), 0: anything else (a FIFO...) */
	uint32_t code; /* enum proto_err: PERR_OK unless FAILED, never PERR_OK then */
	char *name;    /* destination-relative, 1..PROTO_MAX_PATH bytes, allocated by decode */
	char *text;    /* <= PROTO_MAX_TEXT bytes, "" unless FAILED, allocated by decode */
};

struct msg_deleted {
	uint8_t flags; /* PROTO_DELETED_* */
	uint16_t count;
	struct proto_deleted *ents; /* count entries (<= PROTO_MAX_BATCH), allocated by decode */
};

struct msg_ping {
	uint64_t nonce;
};

/*
 * rdmacp bench: the client sends `bytes` of a pattern seeded by `seed` from
 * memory to the daemon's memory, which checks every chunk and drops it.
 * Answered like OPEN (OPEN_OK, or ERROR); the client is the sender.
 */
#define PROTO_BENCH_MAX_BYTES (1ull << 50) /* 1 PiB */
struct msg_bench {
	uint8_t transport; /* enum xport_kind, 0 = daemon's choice */
	uint8_t lanes;	   /* proposed, 1..PROTO_MAX_LANES */
	/* 0, or the lanes wish (PROTO_ENCRYPT_*: with PROTO_CAP_BENCH_SEAL only) */
	uint8_t encrypt;
	uint32_t chunk_size; /* proposed slot size */
	uint32_t slots;	     /* proposed ring slots */
	uint64_t bytes;	     /* 1..PROTO_BENCH_MAX_BYTES */
	uint64_t seed;
};

/* FILTER rule actions. */
enum {
	PROTO_FILTER_INCLUDE = 1,
	PROTO_FILTER_EXCLUDE = 2,
};

struct proto_filter_rule {
	uint8_t action; /* PROTO_FILTER_* */
	char *pattern;	/* 1..PROTO_MAX_PATH bytes, allocated by decode */
};

/*
 * A pull's --include/--exclude rules, in order (src/filter.h says what
 * they match): 1..PROTO_MAX_FILTERS rules, PROTO_MAX_FILTER_BYTES of
 * patterns at most.
 */
struct msg_filter {
	uint16_t count;
	struct proto_filter_rule *rules;
};

/*
 * Extended attributes of entry id (OPEN XATTRS / ACLS): for a regular file
 * before its FILE_DONE, for a directory right after the FILES batch that
 * offered it. Names are user.*, security.*, trusted.*, or exactly
 * system.posix_acl_access / system.posix_acl_default (the kernel's raw
 * ACL format); at most PROTO_MAX_XATTR_NAME bytes each, values at most
 * PROTO_MAX_XATTR_VALUE bytes; the whole within one frame.
 */
#define PROTO_MAX_XATTRS      4096
#define PROTO_MAX_XATTR_NAME  255
#define PROTO_MAX_XATTR_VALUE (64u << 10)
struct proto_xattr {
	char *name;	/* allocated by decode */
	uint8_t *value; /* allocated by decode (len bytes, at least 1 allocated) */
	uint32_t len;
};

struct msg_xattrs {
	uint32_t id;
	uint16_t count;
	/*
	 * PROTO_CAP_DIR_ITEMS: the sender could read none of a directory's
	 * (count 0); on the wire count PROTO_XATTRS_UNREAD and nothing after.
	 */
	bool unread;
	struct proto_xattr *x; /* count entries, allocated by decode */
};
#define PROTO_XATTRS_UNREAD 0xffffu

/* Is name one XATTRS may carry (see msg_xattrs)? */
bool proto_xattr_name_ok(const char *name);

/*
 * Receiver -> sender, before the FILES_ACK of file id (--partial): the byte
 * ranges of it the receiver has kept and verified; the sender reads and
 * hashes them but does not send them. Ranges ascending, not overlapping,
 * not empty; the sender checks them against the file's size and its chunks.
 */
#define PROTO_MAX_RESUME_RANGES 64
struct proto_range {
	uint64_t offset;
	uint64_t len;
};

struct msg_resume {
	uint32_t id;
	uint16_t count;
	struct proto_range r[PROTO_MAX_RESUME_RANGES];
};

/*
 * Sender -> receiver, before the FILE_DONE of file id: ranges of the file
 * that are all zeros (holes, or data that reads as zeros) and cross no data
 * path; the receiver makes them zeros and hashes them as such. The same
 * layout and decoder checks as RESUME; the receiver checks them against the
 * file (whole chunks, inside it, overlapping nothing described or sent).
 */
#define PROTO_MAX_ZERO_RANGES PROTO_MAX_RESUME_RANGES

/*
 * --delta (OPEN DELTA). Kind SUMS, receiver -> sender before the FILES_ACK
 * of file id: the XXH3-128 of chunks first .. first + count - 1 of the file
 * it has under that name (same size; the last chunk may be short), in
 * order, from chunk 0 on, at most all the file's chunks. Kind SAME, sender
 * -> receiver before the FILE_DONE of id: ranges (whole chunks, ascending,
 * inside the file) whose digest matched; they cross no data path and the
 * receiver takes them from its old file. The sender checks SUMS against the
 * file's chunk count, the receiver SAME like ZEROS. flags: only in SUMS,
 * the same in all of a file's: TREE (PROTO_CAP_DELTA_TREE), the file's
 * digest (FILE_DONE) is the XXH3-128 of its chunks' XXH3-128 in order.
 */
#define PROTO_MAX_DELTA_SUMS 256
/* Files of more chunks than this are copied whole. */
#define PROTO_MAX_DELTA_CHUNKS (1u << 22)
enum {
	PROTO_DELTA_SUMS = 1,
	PROTO_DELTA_SAME = 2,
};
#define PROTO_DELTA_TREE	0x1u
#define PROTO_DELTA_FLAGS_KNOWN 0x1u
struct msg_delta {
	uint32_t id;
	uint8_t kind;	/* PROTO_DELTA_* */
	uint8_t flags;	/* SUMS: PROTO_DELTA_TREE */
	uint16_t count; /* 1 .. PROTO_MAX_DELTA_SUMS (SUMS) or PROTO_MAX_RESUME_RANGES (SAME) */
	uint64_t first; /* SUMS: index of the first chunk */
	uint8_t sums[PROTO_MAX_DELTA_SUMS][PROTO_HASH_LEN];
	struct proto_range r[PROTO_MAX_RESUME_RANGES]; /* SAME */
};

/* ASSEMBLE and ASSEMBLED (rdmacp finalize's split files): proto/msg_assemble.h. */
#include "msg_assemble.h"

/*
 * Rails (PROTO_CAP_RAILS): data lane `lane` is down for this side, which
 * takes nothing more from it. count: the receiver's, the slot descriptors
 * it has taken on that lane; the sender's, the credits it has taken there.
 */
struct msg_lane_down {
	uint8_t lane; /* < PROTO_MAX_LANES */
	uint64_t count;
};

/* RELAY and RELAY_RESULT: proto/msg_relay.h. */
#include "msg_relay.h"

/*
 * One decoded message. Decoders allocate only after caps are checked;
 * msg_clear frees what a decode allocated.
 */
struct msg {
	uint16_t type;
	union {
		struct msg_hello hello;
		struct msg_error error;
		struct msg_open open;
		struct msg_open_ok open_ok;
		struct msg_ring ring;
		struct msg_files files;
		struct msg_files_ack files_ack;
		struct msg_file_done file_done;
		struct msg_file_result file_result;
		struct msg_get get;
		struct msg_end end;
		struct msg_ping ping;
		struct msg_bench bench;
		struct msg_entry_failed entry_failed;
		struct msg_resume resume;
		struct msg_resume zeros; /* MSG_ZEROS */
		struct msg_list list;
		struct msg_modules modules;
		struct msg_xattrs xattrs;
		struct msg_filter filter;
		struct msg_deleted deleted;
		struct msg_sums sums;
		struct msg_list_attrs list_attrs;
		struct msg_delta delta;
		struct msg_assemble assemble;
		struct msg_assembled assembled;
		struct msg_lane_down lane_down;
		struct msg_relay relay;
		struct msg_relay_result relay_result;
	} u;
};

/*
 * Slot descriptor written into the receiver's descriptor array. A packed
 * slot (PROTO_CAP_PACK) has file id 0, offset 0 and pieces > 0: its len
 * bytes are whole files back to back, then a table of pieces entries of
 * PROTO_PIECE_LEN bytes (file id u32, length u32) in the same order.
 */
#define PROTO_DESC_LEN	 32
#define PROTO_PIECE_LEN	 8
#define PROTO_MAX_PIECES 1024 /* pieces in one packed slot */
struct proto_desc {
	uint32_t file_id;
	uint32_t len;
	uint64_t offset;
	uint64_t seq;	 /* sender's chunk sequence number, for diagnostics */
	uint32_t pieces; /* a packed slot's file count; 0 otherwise */
};
void proto_desc_encode(const struct proto_desc *d, uint8_t out[PROTO_DESC_LEN]);
int proto_desc_decode(const uint8_t in[PROTO_DESC_LEN], struct proto_desc *ret);

struct proto_piece {
	uint32_t id;
	uint32_t len;
	uint32_t at; /* where its bytes start in the slot (decoded, not on the wire) */
};
/*
 * The piece table of a packed slot whose descriptor is d: its d->pieces
 * entries (ids non-zero, each at least one byte) must account for exactly
 * the bytes before the table. out has room for d->pieces entries.
 */
int proto_pieces_decode(const uint8_t *slot, const struct proto_desc *d, struct proto_piece *out);
void proto_piece_encode(const struct proto_piece *pc, uint8_t out[PROTO_PIECE_LEN]);

/* Immediate values on the data path. */
#define PROTO_IMM_KIND_SHIFT 24
#define PROTO_IMM_SLOT_MASK  0x00ffffffu
enum {
	PROTO_IMM_DATA = 1,   /* sender -> receiver: slot N holds a chunk */
	PROTO_IMM_CREDIT = 2, /* receiver -> sender: slot N is free again */
};
static inline uint32_t proto_imm(unsigned kind, uint32_t slot)
{
	return ((uint32_t)kind << PROTO_IMM_KIND_SHIFT) | (slot & PROTO_IMM_SLOT_MASK);
}

const char *proto_type_name(uint16_t type);
const char *proto_err_name(uint32_t code);
/*
 * An entry's change as rsync -i writes it: 11 characters and a NUL in out,
 * "YXcstpoguax". y: '<' sent, '>' received (a regular file whose data
 * crossed), else 'c' made or changed here, 'h' a hard link, '.' kept (its
 * metadata maybe brought in line). X: f, d, L. Then "+++++++++" for a new
 * entry, else a letter for each of PROTO_ITEM_CHECKSUM (or a symlink's
 * CONTENT), SIZE, TIME, PERMS, OWNER, GROUP, ACLS, XATTRS that is set, '.'
 * for the rest.
 */
void proto_itemize(char out[12], char y, uint8_t ftype, uint32_t items);

/*
 * code as a peer with these HELLO caps understands it: the device codes
 * (22..24) become PERMISSION, BUSY and NOSPACE for one without
 * PROTO_CAP_DEVICES; every other code is itself.
 */
uint32_t proto_err_for_peer(uint32_t code, uint64_t peer_caps);

/* Header: encode into 16 bytes; decode checks magic, version, reserved, flags, cap. */
void proto_hdr_encode(uint16_t type, uint32_t length, uint8_t out[PROTO_HDR_LEN]);
/*
 * Returns 0, or -EBADMSG (bad magic / reserved / flags), -EPROTONOSUPPORT
 * (unknown version), -EMSGSIZE (length over PROTO_MAX_PAYLOAD), -ENOMSG
 * (unknown type).
 */
int proto_hdr_decode(const uint8_t in[PROTO_HDR_LEN], struct proto_hdr *ret);

/*
 * Encode a whole frame (header + payload) into buf. Returns the frame length
 * or -EMSGSIZE if it does not fit / breaks a cap, -EINVAL for an unknown type.
 * Field values are the caller's to get right: the peer's decoder checks them.
 */
int msg_encode(const struct msg *m, uint8_t *buf, size_t cap);
/*
 * Decode a payload of the given type. Returns 0 or -EBADMSG (malformed,
 * trailing bytes, cap exceeded), -ENOMEM. On failure nothing stays allocated.
 */
int msg_decode(uint16_t type, const uint8_t *payload, size_t len, struct msg *ret);
void msg_clear(struct msg *m);
