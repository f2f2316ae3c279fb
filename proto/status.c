/* SPDX-License-Identifier: MIT */
/*
 * Status codes and what they say to people (see msg.h): each code's name,
 * a code as an older peer understands it, and rsync -i's change strings.
 */
#include <string.h>

#include "msg.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static const char *const err_names[] = {
	[PERR_OK] = "OK",
	[PERR_PROTOCOL] = "PROTOCOL",
	[PERR_VERSION] = "VERSION_MISMATCH",
	[PERR_AUTH] = "AUTH",
	[PERR_NO_MODULE] = "NO_MODULE",
	[PERR_PERMISSION] = "PERMISSION",
	[PERR_BAD_PATH] = "BAD_PATH",
	[PERR_IO] = "IO",
	[PERR_NOSPACE] = "NOSPACE",
	[PERR_INTEGRITY] = "INTEGRITY",
	[PERR_BUSY] = "BUSY",
	[PERR_TRANSPORT] = "TRANSPORT",
	[PERR_SHUTDOWN] = "SHUTDOWN",
	[PERR_TIMEOUT] = "TIMEOUT",
	[PERR_SOURCE_CHANGED] = "SOURCE_CHANGED",
	[PERR_NOT_FOUND] = "NOT_FOUND",
	[PERR_INTERNAL] = "INTERNAL",
	[PERR_DUPLICATE] = "DUPLICATE",
	[PERR_SKIPPED] = "SKIPPED",
	[PERR_SUM_WANTED] = "SUM_WANTED",
	[PERR_DEVICE_REFUSED] = "DEVICE_REFUSED",
	[PERR_DEVICE_BUSY] = "DEVICE_BUSY",
	[PERR_DEVICE_SMALL] = "DEVICE_SMALL",
	[PERR_ENCRYPTION] = "ENCRYPTION",
	[PERR_ASSEMBLY] = "ASSEMBLY",
	[PERR_UNAVAILABLE] = "UNAVAILABLE",
};

const char *proto_err_name(uint32_t code)
{
	if (code < ARRAY_LEN(err_names) && err_names[code]) {
		return err_names[code];
	}
	return "UNKNOWN";
}

uint32_t proto_err_for_peer(uint32_t code, uint64_t peer_caps)
{
	if (code == PERR_ASSEMBLY && !(peer_caps & PROTO_CAP_ASSEMBLE)) {
		return PERR_INTEGRITY;
	}
	if (code == PERR_UNAVAILABLE && !(peer_caps & PROTO_CAP_UNAVAILABLE)) {
		return PERR_IO; /* what such a peer heard before */
	}
	if (peer_caps & PROTO_CAP_DEVICES) {
		return code;
	}
	switch (code) {
	case PERR_DEVICE_REFUSED:
		return PERR_PERMISSION;
	case PERR_DEVICE_BUSY:
		return PERR_BUSY;
	case PERR_DEVICE_SMALL:
		return PERR_NOSPACE;
	default:
		return code;
	}
}

void proto_itemize(char out[12], char y, uint8_t ftype, uint32_t items)
{
	bool link = ftype == PROTO_FT_SYMLINK;

	out[0] = y;
	out[1] = ftype == PROTO_FT_DIR ? 'd' : link ? 'L' : 'f';
	if (items & PROTO_ITEM_NEW) {
		memcpy(out + 2, "+++++++++", 10);
		return;
	}
	memcpy(out + 2, ".........", 10);
	if ((items & PROTO_ITEM_CHECKSUM) || (link && (items & PROTO_ITEM_CONTENT))) {
		out[2] = 'c';
	}
	out[3] = (items & PROTO_ITEM_SIZE) ? 's' : '.';
	out[4] = (items & PROTO_ITEM_TIME) ? 't' : '.';
	out[5] = (items & PROTO_ITEM_PERMS) ? 'p' : '.';
	out[6] = (items & PROTO_ITEM_OWNER) ? 'o' : '.';
	out[7] = (items & PROTO_ITEM_GROUP) ? 'g' : '.';
	out[9] = (items & PROTO_ITEM_ACLS) ? 'a' : '.';
	out[10] = (items & PROTO_ITEM_XATTRS) ? 'x' : '.';
}
