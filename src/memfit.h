/* SPDX-License-Identifier: MIT */
/*
 * Fitting what a transfer pins to the locked memory it may pin. io_uring
 * charges registered buffers to RLIMIT_MEMLOCK (per user, across all of the
 * user's processes) unless the process holds CAP_IPC_LOCK; a client run by an
 * ordinary user (8 MiB by default) takes a smaller pool and, if need be,
 * smaller chunks instead of failing. Sizes come from engine_pinned_bytes,
 * the one place they are computed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* The smallest chunk rdmacpd accepts (it raises smaller proposals, which a client refuses). */
#define MEMFIT_MIN_CHUNK (64u << 10)
/* Fewer data chunks than this: halve the chunk size rather than shrink the count further. */
#define MEMFIT_MIN_DEPTH 8u
/* A bigger count never comes from fitting: smaller chunks get at most this many. */
#define MEMFIT_MAX_COUNT 256u

/*
 * What a limit leaves for one pool: the limit less headroom for the user's
 * other locked memory (io_uring accounts per user), an eighth and at least
 * 384 KiB (io_uring charges its rings too: MEMFIT_RING_BYTES). UINT64_MAX for no limit (RLIM_INFINITY or CAP_IPC_LOCK).
 */
uint64_t memfit_budget(uint64_t limit, bool cap_ipc_lock);
/* The smallest RLIMIT_MEMLOCK whose memfit_budget is at least budget (for advice). */
uint64_t memfit_limit_for(uint64_t budget);

/*
 * What verbs pins of one pool of pool bytes, against RLIMIT_MEMLOCK: the
 * pool once for each device's memory registration (rails: ndevices of them,
 * 0 meaning one) and once for io_uring's. The kernel checks each
 * registration's pages added to the process's pinned_vm against the limit
 * (ib_umem_get), and io_uring adds its own registered buffers to the same
 * count: whichever comes second needs room for all of them.
 */
uint64_t memfit_verbs_need(uint64_t pool, unsigned ndevices);

/*
 * Shrink p's data chunks (pool_chunks for a sender, slots for a receiver) and,
 * below MEMFIT_MIN_DEPTH of them, its chunk_size (halving, down to
 * MEMFIT_MIN_CHUNK; the count then grows to keep the bytes in flight, up to
 * MEMFIT_MAX_COUNT) until engine_pinned_bytes(p, ops) <= budget. Returns 1 when
 * p was changed, 0 when it fitted already, -ENOMEM when not even two chunks of
 * MEMFIT_MIN_CHUNK fit (p untouched).
 */
int memfit_engine(struct engine_params *p, const struct xport_ops *ops, uint64_t budget);

/*
 * What io_uring charges for the engine's own rings (2048 entries: about
 * 244 KiB measured on Linux 6.18), rounded up: a pool fitted to what is left
 * of a limit leaves this much.
 */
#define MEMFIT_RING_BYTES (320u << 10)

/*
 * Try to register `bytes` (chunks of chunk_size) with a throw-away io_uring as
 * the engine will: 0 when the kernel lets us pin that much now, -ENOMEM when
 * the user's locked memory is used up, another -errno otherwise.
 */
int memfit_probe(size_t bytes, size_t chunk_size);
/*
 * The most bytes (a multiple of MEMFIT_MIN_CHUNK, at most max) that
 * memfit_probe can register now: a binary search of registrations. 0 if none.
 */
uint64_t memfit_probe_max(uint64_t max);
