/* SPDX-License-Identifier: MIT */
/*
 * Split files (PROTO_CAP_ASSEMBLE): ASSEMBLE, finalize's request to join a
 * file's parts (or, with DISCARD, to remove those of a file that vanished),
 * and ASSEMBLED, its answer. Encoders and decoders: proto/msg_assemble.c.
 * Included by msg.h.
 */
#pragma once

#include <stdint.h>

/*
 * rdmacp finalize (PROTO_CAP_ASSEMBLE): join the parts of a split file.
 * path is the destination directory (MODULE/REL, as OPEN's), name the
 * file's name beneath it, staging the parts' directory beneath it; each
 * part a single name in staging holding bytes [offset, offset + len) of the
 * file, with their XXH3-128. Parts in order, contiguous from 0, not empty,
 * adding up to size. The daemon answers ASSEMBLED, or ERROR (ASSEMBLY for
 * a part that is missing, short or not its digest).
 */
#define PROTO_MAX_PARTS	    1024
#define PROTO_MAX_PART_NAME 255
#define PROTO_ASM_OWNER	    0x1u /* set uid and gid */
/*
 * The file vanished from the source (PROTO_CAP_ASM_DISCARD): its parts are
 * removed from staging (those there: none may be), nothing is made or
 * changed at name; digests and metadata are not looked at.
 */
#define PROTO_ASM_DISCARD 0x2u
/*
 * A --delta run's old copies (PROTO_CAP_ASM_SEED): each part not in
 * staging yet is made there from bytes [offset, offset + len) of the file
 * at name, where that is a regular file holding them, so that the range's
 * push finds an old copy to send only its changed chunks against. Parts
 * ascending and apart, within size, not necessarily all of them; digests,
 * mode, owner and times are not looked at; ASSEMBLED says the bytes made.
 */
#define PROTO_ASM_SEED	      0x4u
#define PROTO_ASM_FLAGS_KNOWN 0x7u
struct proto_part {
	char name[PROTO_MAX_PART_NAME + 1];
	uint64_t offset, len;
	uint8_t hash[PROTO_HASH_LEN];
};

struct msg_assemble {
	uint32_t flags;		     /* PROTO_ASM_* */
	char *path, *name, *staging; /* allocated by decode, each <= PROTO_MAX_PATH bytes */
	uint32_t mode;		     /* 07777 bits */
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	uint32_t uid, gid;
	uint64_t size;
	uint16_t count;		  /* 1..PROTO_MAX_PARTS */
	struct proto_part *parts; /* allocated by decode */
};

struct msg_assembled {
	uint64_t size;
};
