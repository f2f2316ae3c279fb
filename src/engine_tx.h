/* SPDX-License-Identifier: MIT */
/*
 * What the sender's files (src/engine_tx*.c) offer each other: nothing
 * outside the sender includes this.
 */
#pragma once

#include "engine-internal.h"
#include "engine_fence.h"

/* engine_tx_offer.c: entries offered and opened. */
int tx_offer(struct engine *e);
void tx_oldest_advance(struct engine *e);
int tx_open(struct engine *e, struct efile *f);

/* engine_tx_read.c: chunks filled from the disk. */
void tx_chunk_drop(struct engine *e, uint32_t ci);
int tx_file_sent(struct engine *e, struct efile *f);
int tx_fill(struct engine *e);

/* engine_tx_post.c: ready chunks posted in file order. */
int tx_post_ready(struct engine *e);
