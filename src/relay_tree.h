/* SPDX-License-Identifier: MIT */
/*
 * The layout of a relay tree (PROTO_CAP_RELAY_TREE): a hop given the list
 * of the destinations below it and a fan-out K splits the list into at
 * most K contiguous groups of near-equal size (the first groups one longer
 * when it does not divide); each group's first destination is a next hop
 * of this one and the rest of the group is that next hop's own list, split
 * again with the same K there. K 1 is the chain: one group, the whole list.
 *
 * So the list and K alone say the whole tree: MSG_RELAY carries no shape,
 * every hop's list is shorter than its parent's (a tree is at most
 * PROTO_MAX_RELAY_HOPS deep, whatever a peer sends), and a next hop cut out
 * is bypassed by giving its group's next destination the rest of the group
 * (the subtree re-splits beneath it).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "proto/msg.h"

struct relay_tree_group {
	uint8_t first; /* index in the list of the group's first destination (a next hop) */
	uint8_t count; /* 1..: that destination and its subtree */
};

/*
 * The groups of a list of n (1..PROTO_MAX_RELAY_HOPS) destinations at
 * fan-out fanout (0 and 1: a chain) into ret (PROTO_MAX_RELAY_FANOUT
 * rows). Returns how many (1..fanout), or -EINVAL.
 */
int relay_tree_split(size_t n, unsigned fanout, struct relay_tree_group *ret);
/*
 * How many hops the farthest of n destinations (1..PROTO_MAX_RELAY_HOPS + 1)
 * is from a client that pushes to the first with the rest as its list
 * (1: one destination). Returns 0 for an n or fanout out of range.
 */
unsigned relay_tree_depth(size_t n, unsigned fanout);
