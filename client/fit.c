/* SPDX-License-Identifier: MIT */
/*
 * What a transfer asks for and pins: the chunk size and ring slots sent in
 * OPEN and the pool the client registers, fitted to --bwlimit (no burst
 * bigger than about an eighth of a second at the limit) and to the locked
 * memory this user may pin (src/memfit.h). On tcp a small RLIMIT_MEMLOCK
 * means a smaller pool; verbs keeps its pool and says how to raise the limit.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "fit.h"
#include "engine.h"
#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "memfit.h"
#include "pool.h"
#include "proto/msg.h"
#include "units.h"
#include "xport.h"

#define FIT_RAISE_MEMLOCK                                                           \
	"'ulimit -l unlimited', a 'memlock' line in /etc/security/limits.conf, or " \
	"LimitMEMLOCK=infinity in a systemd unit"

static uint32_t pow2_floor(uint64_t v)
{
	uint32_t p = 1;

	while ((uint64_t)p * 2 <= v && p < (1u << 31)) {
		p *= 2;
	}
	return p;
}

/*
 * --bwlimit: chunks (and, receiving, the whole ring the peer may fill before
 * its first credit) of at most an eighth of a second's worth, so the limit
 * holds from the first byte.
 */
static void fit_bwlimit(struct engine_params *ep, uint64_t rate)
{
	uint64_t burst = MAX(rate / 8, 2 * (uint64_t)MEMFIT_MIN_CHUNK);

	ep->chunk_size = MIN(ep->chunk_size, MAX(pow2_floor(rate / 8), MEMFIT_MIN_CHUNK));
	if (ep->role == ENGINE_RECEIVER) {
		ep->slots = (uint32_t)MIN((uint64_t)ep->slots, MAX(burst / ep->chunk_size, 2u));
	}
}

/* need: the pool's bytes; the limit it takes is that plus the headroom memfit keeps. */
static void fit_advice_error(const char *what, uint64_t need, uint64_t limit)
{
	char advice[512];

	pool_memlock_advice(memfit_limit_for(need), limit, false, advice, sizeof(advice));
	log_error("%s: %s", what, advice);
}

/*
 * tcp: shrink to the budget and try to register that much. io_uring charges
 * the user, not the process: when the user's other processes hold part of the
 * limit the kernel says no; then measure what is left, shrink to it (less
 * the engine's own io_uring rings, which are charged too) and retry once.
 */
static int fit_tcp(struct engine_params *ep, const struct xport_ops *ops, uint64_t limit,
		   uint64_t budget)
{
	uint64_t first, left;
	char lim[32];
	int r = memfit_engine(ep, ops, budget);

	if (r < 0) {
		struct engine_params min = *ep;

		min.chunk_size = MEMFIT_MIN_CHUNK;
		min.slots = min.pool_chunks = 2;
		fit_advice_error("not enough locked memory for the smallest buffer pool",
				 engine_pinned_bytes(&min, ops), limit);
		return EXIT_LOCAL_IO;
	}
	if (budget == UINT64_MAX) {
		return 0;
	}
	first = engine_pinned_bytes(ep, ops);
	r = memfit_probe(first, ep->chunk_size);
	if (r != -ENOMEM) {
		/* Other failures (io_uring unavailable, ...) are the engine's to report. */
		return 0;
	}
	left = memfit_probe_max(first);
	log_debug("registering %" PRIu64 " bytes refused, %" PRIu64 " left: retrying once", first,
		  left);
	left = left > MEMFIT_RING_BYTES ? left - MEMFIT_RING_BYTES : 0;
	if (memfit_engine(ep, ops, left) >= 0) {
		r = memfit_probe(engine_pinned_bytes(ep, ops), ep->chunk_size);
	}
	if (r == -ENOMEM || left == 0) {
		units_format_bytes(limit, lim, sizeof(lim));
		log_error("not enough locked memory for a buffer pool: this user's other "
			  "processes hold most of RLIMIT_MEMLOCK (%s; io_uring counts them "
			  "together): raise it with %s",
			  lim, FIT_RAISE_MEMLOCK);
		return EXIT_LOCAL_IO;
	}
	return 0;
}

/* -v: a receiving ring smaller than asked, and what made it so. */
static void say_ring_fit(const struct client_opts *o, const struct engine_params *ep)
{
	if (o->verbose <= 0 || ep->role != ENGINE_RECEIVER || ep->slots >= o->slots) {
		return;
	}
	log_info("ring: %u slots of %" PRIu32 " KiB, not the %u asked for: %s", ep->slots,
		 ep->chunk_size >> 10, o->slots,
		 o->bwlimit && ep->slots <= MAX(o->bwlimit / 8 / ep->chunk_size, 2u)
		     ? "--bwlimit allows no larger burst"
		     : "the locked memory limit (RLIMIT_MEMLOCK) holds no more");
}

int client_fit(struct client_opts *o, uint8_t direction, uint8_t *transport, struct client_fit *ret)
{
	struct engine_params ep = {
		.role = direction == PROTO_DIR_PUSH ? ENGINE_SENDER : ENGINE_RECEIVER,
		.chunk_size = o->chunk_size,
		.slots = o->slots,
		.pool_chunks = MAX(o->pool_chunks, 2u),
	};
	const struct xport_ops *ops;
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	uint64_t budget, asked;
	bool cap = pool_has_cap_ipc_lock() > 0;
	int r;

	if (o->bwlimit) {
		fit_bwlimit(&ep, o->bwlimit);
	}
	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
		rl.rlim_cur = 0; /* unknown: the strict answer, as pool_memlock_check */
	}
	budget = memfit_budget(rl.rlim_cur, cap);
#ifdef HAVE_VERBS
	if (*transport != XPORT_KIND_TCP) {
		/*
		 * Verbs pins its pool for each device and for io_uring, all
		 * against the one limit (memfit_verbs_need): no fitting there.
		 */
		uint64_t need =
		    memfit_verbs_need(engine_pinned_bytes(&ep, &xport_verbs_ops), o->ndevices);

		if (need > budget && *transport == XPORT_KIND_VERBS) {
			char what[128];

			snprintf(what, sizeof(what),
				 "--transport verbs (its pool pinned %u times: io_uring and %u "
				 "device%s)",
				 MAX(o->ndevices, 1u) + 1, MAX(o->ndevices, 1u),
				 o->ndevices > 1 ? "s" : "");
			fit_advice_error(what, need, rl.rlim_cur);
			return EXIT_LOCAL_IO;
		}
		if (need > budget) {
			char lim[32];

			units_format_bytes(rl.rlim_cur, lim, sizeof(lim));
			if (o->verbose > 0) {
				log_info("transport auto: tcp (RLIMIT_MEMLOCK %s is too small for "
					 "verbs; raise it to use RDMA)",
					 lim);
			}
			*transport = XPORT_KIND_TCP;
		}
	}
#endif
	ops = xport_ops_by_kind(*transport ? (enum xport_kind) * transport : XPORT_KIND_TCP);
	if (!ops) {
		ops = &xport_tcp_ops;
	}
	asked = engine_pinned_bytes(&ep, ops);
	if (ops == &xport_tcp_ops) {
		uint32_t chunk0 = ep.chunk_size;

		r = fit_tcp(&ep, ops, rl.rlim_cur, budget);
		if (r != 0) {
			return r;
		}
		/* A push's smaller chunks: as many more daemon slots, the same bytes in flight. */
		if (ep.role == ENGINE_SENDER && ep.chunk_size < chunk0) {
			ep.slots = (uint32_t)MIN((uint64_t)ep.slots * (chunk0 / ep.chunk_size),
						 (uint64_t)PROTO_MAX_SLOTS);
		}
	}
	*ret = (struct client_fit){
		.limit = rl.rlim_cur,
		.unlimited = budget == UINT64_MAX,
		.pool = engine_pinned_bytes(&ep, ops),
		.chunk = ep.chunk_size,
		.chunks = ep.role == ENGINE_SENDER ? ep.pool_chunks : ep.slots,
	};
	ret->fitted = ret->pool < asked;
	say_ring_fit(o, &ep);
	o->chunk_size = ep.chunk_size;
	o->slots = ep.slots;
	o->pool_chunks = ep.pool_chunks;
	return 0;
}
