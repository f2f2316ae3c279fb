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

#include "proto/msg.h"

/*
 * Assemble a->name beneath destfd from a's parts in a->staging (beneath
 * destfd too); owner: set a's uid and gid (PROTO_ASM_OWNER, where the
 * module keeps owners). 0, or -errno with *ret_code a PERR_* code
 * (PERR_ASSEMBLY: a part missing, of another size, or not what its digest
 * says) and why.
 */
int assemble_file(int destfd, const struct msg_assemble *a, uint32_t *ret_code, char *why,
		  size_t whylen);
