/* SPDX-License-Identifier: MIT */
/* Exit codes of rdmacp and rdmacpd (documented in README.md and rdmacp(1)). */
#pragma once

enum rdmacp_exit {
	EXIT_OK = 0,
	EXIT_USAGE = 1,	       /* bad command line */
	EXIT_CONFIG = 2,       /* bad or unreadable config / certificate files */
	EXIT_AUTH = 3,	       /* TLS or certificate authentication failed */
	EXIT_PROTOCOL = 4,     /* protocol error */
	EXIT_REFUSED = 5,      /* remote refused: no module, no permission, bad path, busy */
	EXIT_LOCAL_IO = 6,     /* local I/O error: a source or destination on this side */
	EXIT_INTEGRITY = 7,    /* checksum mismatch */
	EXIT_TRANSPORT = 8,    /* transport set-up failed, or a connection was lost mid-transfer */
	EXIT_PARTIAL = 9,      /* some files failed, the others are committed */
	EXIT_INTERRUPTED = 10, /* SIGINT/SIGTERM: this process was stopped */
	EXIT_CONNECT = 11,     /* could not reach the daemon */
	EXIT_VERSION = 12,     /* protocol version mismatch */
	EXIT_NO_DEVICE = 13,   /* --transport verbs and no usable RDMA device */
	EXIT_REMOTE_IO = 14,   /* the daemon could not store or read a file, or its set-up failed */
	EXIT_DIFFERENT = 15,   /* check: the trees differ */
	EXIT_MAX_DELETE = 16,  /* --delete: --max-delete kept entries that were due for removal */
	EXIT_DEVICE = 17,      /* a block device refused (not allowed, busy, too small) */
	EXIT_SHARD_TAKEN = 18, /* rdmacp run: another process runs that shard (or finalize) */
	EXIT_BAD_PLAN = 19,    /* a plan or journal malformed, edited, or not of this plan */
	EXIT_ENCRYPTION = 20,  /* lane encryption: --encrypt or the module's policy refused */
	EXIT_ASSEMBLY = 21,    /* finalize: a split file's parts missing or not their digests */
	EXIT_DAEMON_STOPPING = 22,    /* the daemon is shutting down (stopped or restarting) */
	EXIT_MODULE_UNAVAILABLE = 23, /* the module is configured but cannot be served now */
	EXIT_REVOKED = 24,	      /* our certificate is revoked: the daemon's CRL lists it */
	EXIT_FANOUT_PARTIAL = 25,     /* fan-out: some destinations copied, others failed */
};
