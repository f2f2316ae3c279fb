/* SPDX-License-Identifier: MIT */
/*
 * What rdmacp check -X, -A and -H compare of a listed entry, made the same
 * way on both ends: the daemon for its LIST_ATTRS records, the client for
 * its own side. An entry's extended attributes are read from the entry
 * itself (regular files and directories: the copy carries none on
 * symlinks), the names the copy carries (proto_xattr_name_ok) split into
 * three classes, each summed as the XXH3-128 of its (name, value) pairs in
 * name order: user.* (-X), security.* and trusted.* (-X, only where this
 * process reads and sets them with privilege: CAP_SYS_ADMIN, which
 * rdmacpd's sessions never keep), and the two ACL attributes (-A, the
 * kernel's raw format). A regular file with more than one link gets a link
 * group: a keyed hash of its (device, inode), the same for all its names in
 * one listing and meaningless outside it.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "hash.h"
#include "proto/msg.h"

struct list_attrs {
	uint8_t fields; /* PROTO_LATTR_*: what this side's records carry */
	uint64_t seed;	/* link groups: this listing's key */
};

/*
 * The fields for a LIST's flags (PROTO_LIST_XATTRS, _ACLS, _HARDLINKS):
 * PRIVILEGED with XATTRS only where this process holds CAP_SYS_ADMIN.
 * ret->fields is 0 when the flags ask for none. 0 or -errno.
 */
int list_attrs_init(uint32_t list_flags, struct list_attrs *ret);

/* Which digest (PROTO_LATTR_DIGEST_*) name counts in, or -1: a name no copy carries. */
int list_attrs_class(const char *name);

/*
 * The digests of the classes in fields (PROTO_LATTR_XATTRS, _PRIVILEGED,
 * _ACLS) of the attributes of the file open as fd; the others are left
 * zero. A file system without extended attributes has none. 0 or -errno.
 */
int list_attrs_digest_fd(int fd, uint8_t fields, uint8_t ret[PROTO_LATTR_DIGESTS][HASH_LEN]);

/*
 * The record of entry e (listed as id): its digests and link group as
 * la->fields says. Returns 0, or -errno when its attributes could not be
 * read (ret->status then says why, its digests are zero).
 */
int list_attrs_entry(const struct list_attrs *la, const struct engine_src *e, uint32_t id,
		     struct proto_entry_attrs *ret);
