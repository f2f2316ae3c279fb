/* SPDX-License-Identifier: MIT */
/*
 * The -X/-A feature's two halves: engine_xattr.c (the feature and the
 * receiver) calls these of engine_xattr_tx.c (the sender's, and the rules
 * both ends use). Nothing else includes this.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct engine;
struct efile;
struct proto_file;

/* engine_xattr_tx.c. Is name one this session carries (-X: user, security, trusted; -A: the two ACLs)? */
bool xattr_wanted(const struct engine *e, const char *name);
/* Entries there already are brought in line (both ends know it; never in a probe). */
bool xattr_sync_on(const struct engine *e);

/* engine_xattr_tx.c, the sender's. */
/*
 * The attributes of the entry open as fd, for id, in one XATTRS message
 * (none: nothing sent). Returns 0, PERR_* > 0 for a failure of that entry
 * (text says why), or -errno when the session fails.
 */
int xattr_tx_send(struct engine *e, uint32_t id, int fd, bool always, char *text, size_t textlen);
/*
 * The attributes of the directories of a FILES batch just sent (pf, n),
 * each opened again from its entry. A directory that can't be read is a
 * failure here (it was offered already: the receiver has it without them).
 */
int xattr_tx_dirs(struct engine *e, const struct proto_file *pf, uint32_t n);
/*
 * A regular file the receiver kept (SKIPPED): its attributes, none too, so
 * that the receiver brings the file's in line. One that can't be read is a
 * failure of its own (the file is kept, its attributes as they were).
 */
int xattr_tx_kept(struct engine *e, struct efile *f);
