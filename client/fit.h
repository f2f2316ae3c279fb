/* SPDX-License-Identifier: MIT */
/* Fitting the client's pool to --bwlimit and RLIMIT_MEMLOCK (fit.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"

/* What client_fit chose. */
struct client_fit {
	uint64_t limit; /* RLIMIT_MEMLOCK (soft) */
	bool unlimited; /* no limit, or CAP_IPC_LOCK */
	bool fitted;	/* the pool was made smaller to fit the limit */
	uint64_t pool;	/* bytes the client pins */
	uint32_t chunk;
	uint32_t chunks; /* pool chunks (push) or ring slots (pull) */
};

/*
 * Fit o's chunk_size, slots and pool_chunks to --bwlimit and to the locked
 * memory this user may pin, for a transfer in direction (PROTO_DIR_*) on
 * *transport (0: auto, which may become tcp when verbs would not fit).
 * Returns 0, or an exit code with the error printed.
 */
int client_fit(struct client_opts *o, uint8_t direction, uint8_t *transport,
	       struct client_fit *ret);

struct daemon_conn;
/*
 * The lanes, chunk size and slots the user left unset (client_opts' *_set),
 * sized for the rate of this host's RDMA ports (fit_link.c) when the
 * transfer may go over verbs (transport: what OPEN asks for, 0 auto), the
 * defaults on tcp. Said with -v. Run again for each OPEN: it starts from the
 * defaults, not from what an earlier fit left.
 */
void client_fit_link(struct daemon_conn *s, uint8_t transport);
