/* SPDX-License-Identifier: MIT */
/*
 * The capability bits a peer announces in HELLO (PROTO_CAP_*), and the mask
 * of those this version knows. Each bit names what it lets the peers use;
 * docs/PROTOCOL.md has the table. Included by proto/msg.h.
 */
#pragma once

/* Capability bits in HELLO. */
enum {
	PROTO_CAP_TCP = 1u << 0,   /* can use the tcp transport */
	PROTO_CAP_VERBS = 1u << 1, /* can use the verbs transport */
	PROTO_CAP_PULL = 1u << 2,
	PROTO_CAP_TREES = 1u << 3,	  /* directories, symlinks in FILES */
	PROTO_CAP_LIST = 1u << 4,	  /* LIST and MODULES */
	PROTO_CAP_ENTRY_FAILED = 1u << 5, /* understands ENTRY_FAILED */
	PROTO_CAP_SKIP = 1u << 6,	  /* OPEN skip levels, PERR_SKIPPED in FILES_ACK */
	PROTO_CAP_FILTER = 1u << 7,	  /* FILTER before a pull's OPEN */
	PROTO_CAP_PARTIAL = 1u << 8,	  /* OPEN PARTIAL, RESUME */
	PROTO_CAP_DELETE = 1u << 9,	  /* OPEN DELETE, DELETED */
	/* LIST with PROTO_LIST_SUMS, SUMS, OPEN's SKIP_CHECKSUM, PERR_SUM_WANTED */
	PROTO_CAP_CHECK = 1u << 10,
	PROTO_CAP_HARDLINKS = 1u << 11, /* OPEN HARDLINKS, FILES entries of type 4 */
	PROTO_CAP_XATTRS = 1u << 12,	/* OPEN XATTRS and ACLS, XATTRS messages */
	/* Dry-run probes: OPEN DRY_RUN with a skip level or DELETE runs the engine, no data path */
	PROTO_CAP_PROBE = 1u << 13,
	PROTO_CAP_ZEROS = 1u << 14, /* ZEROS: zero extents of a file sent without payload */
	/* Block devices: status codes DEVICE_REFUSED, DEVICE_BUSY, DEVICE_SMALL (22..24) */
	PROTO_CAP_DEVICES = 1u << 15,
	PROTO_CAP_BENCH = 1u << 16, /* BENCH: memory-to-memory runs (rdmacp bench) */
	/* OPEN ENCRYPT and its wish byte, OPEN_OK's lanes byte: sealed tcp lanes */
	PROTO_CAP_ENCRYPT = 1u << 17,
	PROTO_CAP_DELTA = 1u << 18, /* OPEN DELTA, DELTA messages */
	PROTO_CAP_PACK = 1u << 19,  /* packed slots: whole small files, a piece table */
	/* OPEN ASSUME_ZERO: a push's device targets read as zeros, zero extents not written */
	PROTO_CAP_ASSUME_ZERO = 1u << 20,
	PROTO_CAP_BENCH_SEAL = 1u << 21, /* BENCH's encrypt byte: sealed bench lanes */
	/* Sealed slots: verbs lanes encrypted (--encrypt, or a module's encryption = required) */
	PROTO_CAP_VERBS_SEAL = 1u << 22,
	PROTO_CAP_ASSEMBLE = 1u << 23, /* ASSEMBLE, ASSEMBLED, status ASSEMBLY (27) */
	/* DELTA SUMS' TREE flag: a device's delta checked by its chunks' digests */
	PROTO_CAP_DELTA_TREE = 1u << 24,
	/* OPEN WRITE_SEND: verbs lanes as RDMA WRITE + SEND, no immediates (iWARP) */
	PROTO_CAP_WRITE_SEND = 1u << 25,
	/* Rails: LANE_DOWN; a lane lost mid-transfer has its slots re-posted on the others */
	PROTO_CAP_RAILS = 1u << 26,
	/* Daemon rails: OPEN_OK's rails, more daemon addresses for the verbs lanes */
	PROTO_CAP_DAEMON_RAILS = 1u << 27,
	/*
	 * Wide file window: as a receiver this end holds PROTO_FILES_WIDE
	 * files offered and not yet resolved (PROTO_FILES_NARROW otherwise).
	 */
	PROTO_CAP_WIDE_WINDOW = 1u << 28,
	/*
	 * Wider file window: as a receiver this end holds PROTO_FILES_WIDER
	 * files offered and not yet resolved, their ids within PROTO_SPAN_WIDER.
	 */
	PROTO_CAP_WIDER_WINDOW = 1u << 29,
	/*
	 * Transfer keys: a sealed transfer's lane secret is exported with its
	 * kind and OPEN_OK's token as context (lane_seal_export), so several
	 * sealed transfers on one connection never share keys and nonces.
	 */
	PROTO_CAP_TRANSFER_KEYS = 1u << 30,
};
/*
 * Itemized changes: a FILES_ACK entry carries what differs at the receiver
 * (PROTO_ITEM_*, in its status word's upper 16 bits), and a directory or a
 * symlink that is there already may be answered SKIPPED (kept, its
 * metadata brought in line where items says so).
 */
#define PROTO_CAP_ITEMIZE (1ull << 31)
/*
 * Listing owners: the FILES entries of a listing (LIST, a pull's dry run)
 * carry each entry's uid and gid; without it they are zero and mean nothing.
 * Past bit 31, so a define: an enum constant is an int.
 */
#define PROTO_CAP_LIST_OWNERS (1ull << 32)
/*
 * Listing attributes: LIST's XATTRS, ACLS and HARDLINKS flags, LIST_ATTRS
 * after each FILES batch (rdmacp check -X, -A, -H).
 */
#define PROTO_CAP_LIST_ATTRS (1ull << 33)
/*
 * Unavailable modules: status UNAVAILABLE (28), and the MODULES flag
 * PROTO_MOD_UNAVAILABLE on a module a listing names that cannot be served now.
 */
#define PROTO_CAP_UNAVAILABLE (1ull << 34)
/*
 * Seal suites: OPEN_OK's lanes byte may name a sealed tcp transfer's AEAD
 * (PROTO_LANES_SEALED_AES128, PROTO_LANES_SEALED_CHACHA); without it the
 * lanes are AES-256-GCM (PROTO_LANES_SEALED).
 */
#define PROTO_CAP_SEAL_SUITES (1ull << 35)
/*
 * The zero-copy fence (memory windows): announced by an end whose verbs lane
 * devices all bind type-2 windows (mwfence_offer). With both ends' bit, a
 * verbs session of unsealed slots takes the WRITE + SEND path with windows:
 * the receiver opens each slot's window under a fresh key before it credits
 * the slot, the credit carries that key, the descriptor's SEND closes it
 * (SEND_WITH_INV), and the receiver keeps no private copy (mwfence_agreed).
 */
#define PROTO_CAP_MW_FENCE (1ull << 36)
/*
 * Slot suites: with PROTO_CAP_SEAL_SUITES too, the lanes byte's suite also
 * seals verbs slots (the engine's); without it verbs slots are AES-256-GCM
 * and the byte says 2 (a client of before would refuse 3 or 4 on verbs).
 */
#define PROTO_CAP_SLOT_SUITES (1ull << 37)
/*
 * Rails only: OPEN_OK's rails flags byte (PROTO_RAILS_UNREACHED: the
 * address the client reached takes no lanes, a management address).
 */
#define PROTO_CAP_RAILS_ONLY (1ull << 38)
/*
 * Relays: MSG_RELAY before a push's OPEN (the chain of destinations after
 * this daemon, with the original client's tickets) and MSG_RELAY_RESULT,
 * one per destination, after that push's END. Announced by a daemon that
 * relays (its session runs the relay child), never by a client.
 */
#define PROTO_CAP_RELAY (1ull << 39)
/*
 * ASSEMBLE's PROTO_ASM_DISCARD: finalize asks for the parts of a split file
 * that vanished from the source to be removed from staging.
 */
#define PROTO_CAP_ASM_DISCARD (1ull << 40)
/*
 * The chunk tree as a file's end-to-end digest: where both ends announce
 * it, a regular file of more than one chunk is checked by the XXH3-128 of
 * its chunks' XXH3-128 (PROTOCOL.md, "File digests"), not by the stream of
 * its bytes.
 */
#define PROTO_CAP_FILE_TREE (1ull << 41)
/*
 * Seeded parts: ASSEMBLE's PROTO_ASM_SEED (a --delta run of a split file's
 * ranges asks for old copies of its parts, made from the file the
 * destination has).
 */
#define PROTO_CAP_ASM_SEED (1ull << 45)
/*
 * Relay trees: MSG_RELAY's tree trailer (a fan-out 2..16; the hops laid
 * out as src/relay_tree.h says). Announced by a daemon that relays.
 */
#define PROTO_CAP_RELAY_TREE (1ull << 43)
/*
 * Kept files' attribute changes itemized: under -X/-A a kept regular file
 * is answered SKIPPED with PROTO_ITEM_WAIT; the receiver takes its XATTRS
 * first and answers again with what differed (PROTO_ITEM_XATTRS,
 * PROTO_ITEM_ACLS).
 */
#define PROTO_CAP_KEPT_ITEMS (1ull << 47)
/*
 * Kept directories' attribute changes itemized: under -X/-A the sender
 * sends every directory's XATTRS, an unread one (PROTO_XATTRS_UNREAD) when
 * it can read none, and the receiver answers a kept directory as a kept
 * file of PROTO_CAP_KEPT_ITEMS (PROTO_ITEM_WAIT, then what differed).
 */
#define PROTO_CAP_DIR_ITEMS (1ull << 48)
/*
 * Linked files (-H): a regular file with other names at the sender is
 * marked in FILES (PROTO_FILE_LINKED), and only such a file may be the
 * target of a later HARDLINK entry: the receiver remembers those names
 * alone, not every file of the session. Announced where this end, as a
 * sender, marks every such file (a relay child does not: it withholds it).
 */
#define PROTO_CAP_LINKED_FILES (1ull << 49)
#define PROTO_CAPS_KNOWN                                                                           \
	(0xffffffffull | PROTO_CAP_LIST_OWNERS | PROTO_CAP_LIST_ATTRS | PROTO_CAP_UNAVAILABLE |    \
	 PROTO_CAP_SEAL_SUITES | PROTO_CAP_MW_FENCE | PROTO_CAP_SLOT_SUITES |                      \
	 PROTO_CAP_RAILS_ONLY | PROTO_CAP_RELAY | PROTO_CAP_ASM_DISCARD | PROTO_CAP_ASM_SEED |     \
	 PROTO_CAP_KEPT_ITEMS | PROTO_CAP_RELAY_TREE | PROTO_CAP_FILE_TREE | PROTO_CAP_DIR_ITEMS | \
	 PROTO_CAP_LINKED_FILES)
