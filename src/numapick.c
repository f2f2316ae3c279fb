/* SPDX-License-Identifier: MIT */
/* Completion vectors and the ring's node (numapick.h). */
#include "numapick.h"

int numapick_comp_vector(int num_vectors, unsigned node_cpus, unsigned seq)
{
	unsigned local;

	if (num_vectors <= 0) {
		return 0;
	}
	local = (unsigned)num_vectors;
	if (node_cpus > 0 && node_cpus < local) {
		local = node_cpus;
	}
	return (int)(seq % local);
}

int numapick_ring_node(const int *lane_node, unsigned nlanes)
{
	unsigned best_count = 0;
	int best = -1;

	/* Lane 0 first: a later node must have more lanes, not as many, to win. */
	for (unsigned i = 0; i < nlanes; i++) {
		unsigned count = 0;

		for (unsigned k = 0; k < nlanes; k++) {
			count += lane_node[k] == lane_node[i];
		}
		if (count > best_count) {
			best_count = count;
			best = lane_node[i];
		}
	}
	return best;
}
