/* SPDX-License-Identifier: MIT */
/*
 * The window a link needs (linkwin.h): slots from the rate and the hold
 * time, queue pairs and chunk size from the rate.
 */
#include "linkwin.h"

#include <assert.h>

#include "macro.h"

uint32_t linkwin_slots(uint64_t rate_mbps, uint32_t hold_us, uint32_t chunk_size, unsigned lanes)
{
	/* Bytes in flight: rate (Mbit/s) x hold (us) / 8 bits. */
	uint64_t floor, cap, need;

	assert(chunk_size > 0);
	floor = MIN((uint64_t)LINKWIN_MIN_SLOTS, (LINKWIN_MIN_BYTES + chunk_size - 1) / chunk_size);
	floor = MAX(MAX(floor, (uint64_t)lanes * LINKWIN_SLOTS_PER_LANE), 2u);
	if (rate_mbps == 0) {
		return LINKWIN_MIN_SLOTS;
	}
	/* 4 Pb/s and 100 s: beyond any link, and the product stays far from overflow. */
	rate_mbps = MIN(rate_mbps, (uint64_t)1 << 32);
	hold_us = MIN(hold_us, 100000000u);
	need = (rate_mbps * hold_us / 8 + chunk_size - 1) / chunk_size;
	cap = MAX(floor, MIN((uint64_t)LINKWIN_MAX_SLOTS, LINKWIN_MAX_BYTES / chunk_size));
	return (uint32_t)MIN(MAX(need, floor), cap);
}

unsigned linkwin_port_lanes(uint64_t rate_mbps)
{
	return rate_mbps >= LINKWIN_WIDE_MBPS ? LINKWIN_WIDE_LANES : 1;
}

uint32_t linkwin_chunk(uint64_t rate_mbps, uint32_t dflt)
{
	return rate_mbps >= LINKWIN_BIG_CHUNK_MBPS ? MAX(dflt, LINKWIN_BIG_CHUNK) : dflt;
}

uint64_t linkwin_fit(const uint64_t *port_mbps, unsigned n, unsigned max_lanes,
		     struct linkwin_ask *ask)
{
	uint64_t total = 0, fastest = 0;
	unsigned lanes = 0;

	for (unsigned i = 0; i < n; i++) {
		total += port_mbps[i];
		fastest = MAX(fastest, port_mbps[i]);
		lanes += port_mbps[i] ? linkwin_port_lanes(port_mbps[i]) : 0;
	}
	if (total == 0) {
		return 0;
	}
	if (!ask->lanes_set) {
		ask->lanes = MIN(MAX(ask->lanes, lanes), max_lanes);
	}
	if (!ask->chunk_set) {
		ask->chunk_size = linkwin_chunk(fastest, ask->chunk_size);
	}
	if (!ask->slots_set) {
		ask->slots = linkwin_slots(total, LINKWIN_HOLD_US, ask->chunk_size, ask->lanes);
	}
	return total;
}
