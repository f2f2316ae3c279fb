/* SPDX-License-Identifier: MIT */
/* The zero-copy fence's agreement and its credits' word (see mwfence.h). */
#include "mwfence.h"

#include <errno.h>

#include "proto/msg.h"

uint64_t mwfence_offer(int windows)
{
	return windows == 1 ? PROTO_CAP_MW_FENCE : 0;
}

bool mwfence_agreed(uint64_t local_caps, uint64_t peer_caps, enum xport_kind kind,
		    bool sealed_slots)
{
	uint64_t both = local_caps & peer_caps;

	return (both & PROTO_CAP_MW_FENCE) && kind == XPORT_KIND_VERBS && !sealed_slots;
}

int mwfence_credit_key(bool windows, uint32_t word, uint32_t *ret_key)
{
	/* A credit without a key would let the sender write a slot it has no window for. */
	if (windows ? word == 0 : word != 0) {
		return -EBADMSG;
	}
	*ret_key = word;
	return 0;
}
