/* SPDX-License-Identifier: MIT */
/*
 * The slot fence's points (engine_feature.h): how a held slot is kept out
 * of the peer's reach. Each asks the features that are on, in the list's
 * order, and answers ENGINE_DECLINED where none takes it: the core then
 * fences the way it always did (the transport's fence, or the private copy).
 * A feature that fences slots itself (memory windows, engine_windows.c)
 * answers them all.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct engine;
struct msg_ring;
struct xport_wc;
struct xport_wr;

int engine_fence_ring(struct engine *e, struct msg_ring *ring);
int engine_rx_landed(struct engine *e, const struct xport_wc *wc, uint32_t slot);
int engine_rx_fence(struct engine *e, uint32_t slot, bool on);
int engine_rx_credit(struct engine *e, uint32_t slot, struct xport_wr *wr);
int engine_tx_credit(struct engine *e, const struct xport_wc *wc, uint32_t slot);
int engine_tx_window(struct engine *e, uint32_t slot, unsigned *io_lane, struct xport_wr *data,
		     struct xport_wr *desc);

/* tx_credit's answer when the feature keeps the slot (its chunk goes again, or a key is stale). */
#define ENGINE_FENCE_KEPT 2

/*
 * Rails' points (engine_rails.c, the one caller): a lane left the lanes up;
 * a lost lane resolved (the receiver's slots to credit again, the sender's
 * chunks that go again); may a slot take its chunk again now (1) or not (0).
 */
void engine_lane_closing(struct engine *e, unsigned lane);
int engine_rx_reopen(struct engine *e, unsigned lane, uint32_t *slots, uint32_t cap,
		     uint32_t *io_n);
int engine_tx_resolved(struct engine *e, unsigned lane, const uint32_t *chunks, uint32_t n);
int engine_tx_ready(struct engine *e, uint32_t slot);

/* The sender's next slot is to go on lane: the feature may put one of its free slots last. */
void engine_tx_take(struct engine *e, unsigned lane);

/* Does a slot's credit come back only on the lane the slot went on (memory windows)? */
bool engine_credit_on_slot_lane(const struct engine *e);
