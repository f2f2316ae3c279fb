/* SPDX-License-Identifier: MIT */
/*
 * The error and per-file status codes of the wire protocol: ERROR's code,
 * a FILES_ACK entry's and a FILE_RESULT's status. Included by msg.h.
 */
#pragma once

/* Error and per-file status codes (ERROR.code, FILES_ACK/FILE_RESULT.status). */
enum proto_err {
	PERR_OK = 0,
	PERR_PROTOCOL = 1, /* malformed or unexpected message */
	PERR_VERSION = 2,  /* VERSION_MISMATCH */
	PERR_AUTH = 3,	   /* peer not allowed */
	PERR_NO_MODULE = 4,
	PERR_PERMISSION = 5, /* module read-only / not allowed for this peer */
	PERR_BAD_PATH = 6,   /* invalid or escaping path, symlink in the way */
	PERR_IO = 7,
	PERR_NOSPACE = 8,
	PERR_INTEGRITY = 9,  /* checksum mismatch */
	PERR_BUSY = 10,	     /* limits reached, try later */
	PERR_TRANSPORT = 11, /* data connection setup or failure */
	PERR_SHUTDOWN = 12,
	PERR_TIMEOUT = 13,
	PERR_SOURCE_CHANGED = 14,
	PERR_NOT_FOUND = 15,
	PERR_INTERNAL = 16,
	PERR_DUPLICATE = 17, /* same destination twice in one session */
	/*
	 * FILES_ACK only, not a failure: the receiver keeps the file it has
	 * (OPEN skip level); the sender neither reads nor sends it.
	 */
	PERR_SKIPPED = 18,
	/*
	 * FILES_ACK only, not a failure (skip level checksum): the receiver
	 * has a regular file of that name and size and is hashing it; the
	 * sender hashes its source and sends SUMS, and a second FILES_ACK
	 * entry for the id follows (OK, SKIPPED or a failure).
	 */
	PERR_SUM_WANTED = 20,
	/*
	 * Block devices (PROTO_CAP_DEVICES; sent only to a peer with it):
	 * a device the receiver may not write or the sender may not read
	 * ('devices = no', no --write-devices), or a special file that is no
	 * block device where data should go; a target mounted or held by
	 * another opener (O_EXCL); a target smaller than the source.
	 */
	PERR_DEVICE_REFUSED = 22,
	PERR_DEVICE_BUSY = 23,
	PERR_DEVICE_SMALL = 24,
	/* Lane encryption: the client's wish and the module's "encryption" disagree */
	PERR_ENCRYPTION = 26,
	/* ASSEMBLE: a part missing, of another size, or not what its digest says (only with the cap) */
	PERR_ASSEMBLY = 27,
	/*
	 * The module is configured but cannot be served now: its directory is
	 * missing or not the one loaded (a file system not mounted yet). Sent
	 * only to a peer with PROTO_CAP_UNAVAILABLE; IO to others.
	 */
	PERR_UNAVAILABLE = 28,
	PERR_MAX = PERR_UNAVAILABLE,
};
