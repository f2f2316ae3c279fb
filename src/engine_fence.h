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
