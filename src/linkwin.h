/* SPDX-License-Identifier: MIT */
/*
 * The window a link needs: how many ring slots, queue pairs and how large a
 * chunk a transfer asks for when the user did not say, from the port's rate
 * (rdmadev_port_rate: the speed times the width that ibv_query_port reports)
 * and how long a receiver holds a slot. Pure arithmetic, no I/O: the client
 * calls it with what sysfs says; the tests with a table of rates.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/*
 * How long a receiver holds a slot, from the write landing to its credit
 * back at the sender: its chunk written to disk and hashed, then the credit's
 * way over the wire. About a millisecond for a 1 MiB chunk on an NVMe disk;
 * the wire's own round trip (10 us) is small beside it.
 */
#define LINKWIN_HOLD_US 1000u
/*
 * The ring of every release so far: the slots for a link whose rate is
 * unknown (tcp, or no device found), and the fewest sized for a link, or
 * for larger chunks as many as hold as many bytes (32 MiB).
 */
#define LINKWIN_MIN_SLOTS 32u
#define LINKWIN_MIN_BYTES (32ull << 20)
/* Each queue pair keeps at least this many writes in flight. */
#define LINKWIN_SLOTS_PER_LANE 4u
/* The most an auto-sized ring holds: in slots, and in bytes. */
#define LINKWIN_MAX_SLOTS 1024u
#define LINKWIN_MAX_BYTES (256ull << 20)
/*
 * A port this fast gets this many queue pairs at least: each QP is one flow
 * on one of the NIC's send engines, and on RoCE one ECMP path.
 */
#define LINKWIN_WIDE_MBPS  200000u
#define LINKWIN_WIDE_LANES 4u
/* A port this fast takes chunks of this size: a quarter of the work requests per byte. */
#define LINKWIN_BIG_CHUNK_MBPS 400000u
#define LINKWIN_BIG_CHUNK      (4u << 20)

/*
 * The slots that keep rate_mbps (megabits per second; 0: unknown) busy while
 * each is held hold_us: ceil(rate x hold / chunk_size), at least
 * LINKWIN_MIN_SLOTS (fewer of chunks above 1 MiB: LINKWIN_MIN_BYTES of them)
 * and LINKWIN_SLOTS_PER_LANE per lane, at most LINKWIN_MAX_SLOTS and
 * LINKWIN_MAX_BYTES (never below the floor). Unknown rate:
 * LINKWIN_MIN_SLOTS. chunk_size > 0.
 */
uint32_t linkwin_slots(uint64_t rate_mbps, uint32_t hold_us, uint32_t chunk_size, unsigned lanes);
/* The queue pairs one port of rate_mbps wants: LINKWIN_WIDE_LANES when wide, else 1. */
unsigned linkwin_port_lanes(uint64_t rate_mbps);
/* The chunk size for a port of rate_mbps when the user gave none: dflt, or the big one. */
uint32_t linkwin_chunk(uint64_t rate_mbps, uint32_t dflt);

/* What a transfer asks for; a field the user set (its *_set) is kept as it is. */
struct linkwin_ask {
	unsigned lanes;
	bool lanes_set;
	uint32_t chunk_size;
	bool chunk_set;
	uint32_t slots;
	bool slots_set;
};

/*
 * Size what the user left unset for the ports the lanes leave from (their
 * rates port_mbps[0..n), one per device; 0: unknown, skipped): at least
 * linkwin_port_lanes queue pairs per port (at most max_lanes in all), the
 * chunk for the fastest port, and the slots for all of them together (the
 * ring is shared by every lane) with the hold time LINKWIN_HOLD_US.
 * Returns the total rate sized for (0: none known, ask untouched).
 */
uint64_t linkwin_fit(const uint64_t *port_mbps, unsigned n, unsigned max_lanes,
		     struct linkwin_ask *ask);
