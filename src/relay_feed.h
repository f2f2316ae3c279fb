/* SPDX-License-Identifier: MIT */
/*
 * The relay feed: what a hop's receiver tells its relay child (the client
 * that forwards to the next hop), and the child's results back. Local only:
 * one SOCK_SEQPACKET socketpair between a daemon session and the child it
 * started, one record per message, each encoded with proto/wire.h (magic,
 * version, type, flags, fields; never a C struct), at most RELAY_FEED_MAX
 * bytes; a regular file's (or a device's) descriptor rides with its ENTRY in
 * SCM_RIGHTS, and a directory's may (-X/-A: the child reads its attributes). Nothing here blocks: both calls use MSG_DONTWAIT.
 *
 * Order on the feed: START once (daemon -> child, before any other), then
 * ENTRY, RANGE and DONE records as the hop's receiver takes and settles its
 * entries (a RANGE or DONE always after its ENTRY), then END or ABORT; RESULT
 * goes the other way, one per destination after the child's own hop.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "proto/msg.h"

/* A record's bytes at most. A START whose chain does not fit is refused (-EMSGSIZE). */
#define RELAY_FEED_MAX (64u << 10)
/* The original client's certificate (DER) in START, at most. */
#define RELAY_FEED_MAX_CERT (8u << 10)

enum relay_feed_type {
	RELAY_FEED_START = 1, /* daemon -> child, once, before any other: the chain */
	RELAY_FEED_ENTRY,     /* an entry to forward (fd with a file or device; a directory may) */
	RELAY_FEED_RANGE,     /* bytes [0, upto) of entry id are on this hop's disk */
	RELAY_FEED_DONE,      /* entry id settled here: ok + the source's digest, or failed */
	RELAY_FEED_END,	      /* no more entries: the upstream END came and every entry settled */
	RELAY_FEED_ABORT,     /* this hop's session failed: code + text */
	RELAY_FEED_RESULT,    /* child -> daemon: one destination's outcome */
};

struct relay_feed_start {
	/*
	 * 1..PROTO_MAX_RELAY_HOPS: hops[0] is the child's destination (its
	 * ticket is the self ticket of the child's MSG_RELAY), hops[1..] the
	 * chain the child passes on.
	 */
	uint8_t count;
	struct proto_relay_hop *hops; /* MSG_RELAY's hop, and its codec (proto_relay_hop_enc) */
	uint8_t *client_cert;	      /* the original client's certificate, DER (for the logs) */
	uint32_t client_cert_len;     /* 0..RELAY_FEED_MAX_CERT */
	/*
	 * 1..PROTO_MAX_RELAY_FANOUT: the hops are a tree of that fan-out below
	 * this hop (src/relay_tree.h); 1: a chain. Encoded 0 is refused.
	 */
	uint8_t fanout;
};

struct relay_feed_entry {
	uint32_t id; /* the hop's entry sequence: RANGE and DONE name it */
	/*
	 * PROTO_FT_REG, _DIR, _SYMLINK, or _HARDLINK: a hard link (-H) made or
	 * kept at the hop, sent once it settled there, after its file's ENTRY.
	 */
	uint8_t ftype;
	uint32_t mode; /* permission bits (07777) */
	uint64_t size;
	int64_t mtime_sec;
	uint32_t mtime_nsec; /* < 1e9 */
	uint32_t uid, gid;
	char *name; /* wire name, 1..PROTO_MAX_PATH bytes */
	/*
	 * A symlink's target, a hard link's file (its name as the hop names
	 * it; 1..PROTO_MAX_PATH bytes), else NULL.
	 */
	char *link;
	/*
	 * The hop's DONE carries the source's digest for it: 0 for an entry the
	 * hop kept (the child then uses its own stream digest).
	 * digest_tree: that digest is the chunk tree's at this many bytes a
	 * chunk (a power of two, PROTO_MIN_CHUNK..PROTO_MAX_CHUNK); 0: the
	 * stream of its bytes. On the wire one byte: 0 not known, 1 the
	 * stream, else the tree's chunk size's log2.
	 */
	bool digest_known;
	uint32_t digest_tree;
};

struct relay_feed_range {
	uint32_t id;
	uint64_t upto; /* bytes [0, upto) are there; never shrinks */
};

struct relay_feed_done {
	uint32_t id;
	bool ok;
	uint32_t code;	    /* enum proto_err (PERR_*) when not ok, PERR_OK when ok */
	uint8_t digest[16]; /* the source's XXH3-128 when ok and digest_known, else zeros */
};

struct relay_feed_abort {
	uint32_t code; /* enum proto_err, not PERR_OK */
	char text[PROTO_MAX_TEXT + 1];
};

/* msg_relay_result's fields. */
struct relay_feed_result {
	uint8_t index;	   /* 1..PROTO_MAX_RELAY_HOPS: 1 = the child's own destination */
	uint8_t status;	   /* enum proto_relay_status: 1..PROTO_RELAY_STATUS_MAX */
	uint8_t exit_code; /* the relay client's exit code for it */
	uint64_t files_ok, files_failed, bytes;
	char host[PROTO_MAX_HOST + 1];
	char text[PROTO_MAX_TEXT + 1]; /* "" when copied */
};

struct relay_feed_msg {
	uint8_t type; /* enum relay_feed_type */
	union {
		struct relay_feed_start start;
		struct relay_feed_entry entry;
		struct relay_feed_range range;
		struct relay_feed_done done;
		struct relay_feed_abort abort;
		struct relay_feed_result result;
	} u;
};

/*
 * Sends m on sock with fd (>= 0: only with an ENTRY of a regular file, which
 * must have one, or of a directory; -1: none) in SCM_RIGHTS; fd stays the caller's. 0; -EAGAIN: the socket is
 * full, try later; -EMSGSIZE: it does not fit RELAY_FEED_MAX; -EINVAL: m is
 * not a valid record (a field past its cap); -EPIPE/-ECONNRESET: the other
 * end is gone; else -errno.
 */
int relay_feed_send(int sock, const struct relay_feed_msg *m, int fd);

/*
 * Takes one record from sock into *m (owning what it allocated: free it with
 * relay_feed_msg_free) and *ret_fd (the descriptor that came with it,
 * O_CLOEXEC, the caller's; -1: none). 1: a record; 0: end of file (the
 * other end closed; nothing in *m); -EAGAIN: nothing yet; -EBADMSG: a
 * malformed record (a bad magic, version, type, field or reserved byte,
 * bytes left over, a descriptor where none belongs or missing where one
 * must come: whatever came with it is closed); -EMSGSIZE: longer than
 * RELAY_FEED_MAX; else -errno. *m and *ret_fd are untouched on failure.
 */
int relay_feed_recv(int sock, struct relay_feed_msg *m, int *ret_fd);

/* Frees what decode allocated in m (START's chain, ENTRY's names); m may be zeroed. */
void relay_feed_msg_free(struct relay_feed_msg *m);
