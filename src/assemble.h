/* SPDX-License-Identifier: MIT */
/*
 * Joining the parts of a split file (rdmacp finalize, ASSEMBLE): each part
 * a file in a staging directory holding one byte range of the file, sent
 * and verified on its own by a shard's run. Everything is resolved beneath
 * the destination directory (no symlink, no escape); the parts' sizes are
 * checked, their bytes copied into an unnamed file beside the final name
 * (copy_file_range), which is read back and each range's XXH3-128 compared
 * with the digest the sender computed; then fsync, mode, owner and mtime,
 * an atomic link into place, a directory fsync, and only then are the parts
 * and the staging directory (once empty) removed. A failure leaves no file
 * under the final name and the parts where they were.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "meta_policy.h"
#include "proto/msg.h"

/*
 * Assemble a->name beneath destfd from a's parts in a->staging (beneath
 * destfd too). mp: the metadata rule of the destination (meta_policy.h),
 * applied to a's mode, owner and mtime as it is to a pushed file's: no
 * set-id bit unless kept, a's uid and gid only where mp->owner. Each part
 * is a distinct file (by name and by inode), so no byte is counted twice;
 * an existing special file under the name is never replaced
 * (fspath_replace_rule). 0, or -errno with *ret_code a PERR_* code
 * (PERR_ASSEMBLY: a part missing, of another size, twice, or not what its
 * digest says) and why.
 */
int assemble_file(int destfd, const struct msg_assemble *a, const struct meta_policy *mp,
		  uint32_t *ret_code, char *why, size_t whylen);
/*
 * A vanished file's parts (PROTO_ASM_DISCARD): each of a's parts removed
 * from a->staging beneath destfd where it is there, then staging itself
 * once empty. Nothing else is touched; a missing staging directory or
 * part is no error. 0, or -errno with *ret_code and why.
 */
int assemble_discard(int destfd, const struct msg_assemble *a, uint32_t *ret_code, char *why,
		     size_t whylen);
/*
 * A --delta run's old copies (PROTO_ASM_SEED): each of a's parts not in
 * a->staging yet (made, 0700, if missing) made there from the same range of
 * the regular file a->name beneath destfd, where that file holds it; parts
 * there already are left. No file at name (or not a regular one) is no
 * error. Nothing is fsynced: a part lost in a crash only has its range sent
 * whole, and assembling checks every part against the sender's digest.
 * 0 with *ret_bytes the bytes made, or -errno with *ret_code and why.
 */
int assemble_seed(int destfd, const struct msg_assemble *a, uint64_t *ret_bytes, uint32_t *ret_code,
		  char *why, size_t whylen);
