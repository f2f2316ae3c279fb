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
 * Receiver: RECV_IMM -> descriptor -> checks -> hash (in file order) ->
 * io_uring WRITE_FIXED into the temp file -> credit back. FILE_DONE from the
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

struct xport;

enum engine_role {
	ENGINE_SENDER = 1,
	ENGINE_RECEIVER = 2,
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
	uint64_t bytes;	      /* payload bytes of committed files */
	uint32_t first_error; /* enum proto_err of the first per-file failure */
};

struct engine_events {
	/* A file committed by the receiver (both roles hear about it). */
	void (*file_ok)(void *ud, const char *name, uint64_t bytes, double seconds,
			const uint8_t hash[16]);
	void (*file_failed)(void *ud, const char *name, uint32_t code, const char *text);
	void (*progress)(void *ud, uint64_t bytes);
	void *ud;
};

/* Test hook on the receiver: flip one byte of the first chunk before hashing. */
#define ENGINE_FAULT_FLIP_BYTE (1u << 0)

struct engine_params {
	enum engine_role role;
	struct chan *chan;
	struct xport *x;
	uint32_t chunk_size;  /* == receiver slot size */
	uint32_t slots;	      /* receiver ring slots */
	uint32_t pool_chunks; /* sender: chunks in its pool */
	int idle_timeout_ms;
	bool busy_poll; /* --poll: spin on completions instead of sleeping in poll() */
	/* sender */
	struct engine_source source;
	uint64_t bwlimit; /* bytes per second on the data path, 0 = none */
	/* receiver */
	int base_fd;	       /* destination directory (borrowed) */
	const char *rename_to; /* store the single top-level entry under this name */
	uint32_t open_flags;   /* PROTO_OPEN_* (PRESERVE, OWNER) */
	bool have_uid, have_gid;
	uid_t uid;
	gid_t gid;
	unsigned faults; /* ENGINE_FAULT_* */
	/* Receiver: refuse names the caller did not ask for (pull); NULL = all. */
	bool (*name_ok)(void *ud, const char *name);
	void *name_ok_ud;
	struct engine_events ev;
	volatile sig_atomic_t *stop; /* set by a signal handler: abort cleanly */
};

/*
 * Run one transfer to its end. Returns 0 when the exchange completed (files
 * may still have failed: see stats), or a negative errno when the session
 * failed; then err holds the reason and *ret_code the protocol error code.
 * Every temp file is gone on return unless it was committed.
 */
int engine_run(const struct engine_params *p, struct engine_stats *ret_stats, uint32_t *ret_code,
	       char *err, size_t errlen);
