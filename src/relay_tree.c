/* SPDX-License-Identifier: MIT */
/*
 * The layout of a relay tree (relay_tree.h): a list split into its next
 * hops' groups, and how deep a tree of a given size and fan-out goes.
 */
#include "relay_tree.h"

#include <errno.h>

int relay_tree_split(size_t n, unsigned fanout, struct relay_tree_group *ret)
{
	size_t groups, base, extra, at = 0;

	if (n == 0 || n > PROTO_MAX_RELAY_HOPS || fanout > PROTO_MAX_RELAY_FANOUT) {
		return -EINVAL;
	}
	groups = fanout <= 1 ? 1 : fanout < n ? fanout : n;
	base = n / groups;
	extra = n % groups;
	for (size_t g = 0; g < groups; g++) {
		size_t count = base + (g < extra ? 1 : 0);

		ret[g] = (struct relay_tree_group){ .first = (uint8_t)at, .count = (uint8_t)count };
		at += count;
	}
	return (int)groups;
}

/* How deep below a hop its list of n goes (0: no list). */
static unsigned list_depth(size_t n, unsigned fanout)
{
	struct relay_tree_group g[PROTO_MAX_RELAY_FANOUT];
	unsigned deepest = 0;
	int ng;

	if (n == 0) {
		return 0;
	}
	ng = relay_tree_split(n, fanout, g);
	for (int i = 0; i < ng; i++) {
		unsigned d = 1 + list_depth(g[i].count - 1u, fanout);

		deepest = d > deepest ? d : deepest;
	}
	return deepest;
}

unsigned relay_tree_depth(size_t n, unsigned fanout)
{
	if (n == 0 || n > PROTO_MAX_RELAY_HOPS + 1 || fanout > PROTO_MAX_RELAY_FANOUT) {
		return 0;
	}
	return 1 + list_depth(n - 1, fanout);
}
