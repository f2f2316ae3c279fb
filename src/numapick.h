/* SPDX-License-Identifier: MIT */
/*
 * NUMA choices of the verbs transport, pure so that the tests run them
 * without a device: which completion vector (interrupt) a completion queue
 * asks for, and which node the ring goes on when the rails are on several.
 * src/xport_verbs/device.c passes what the device and sysfs say.
 */
#pragma once

/*
 * Of a device's num_vectors completion vectors, the one for the seq-th
 * completion queue: drivers spread their completion interrupts over the CPUs
 * nearest the device first (mlx5, like most, with cpumask_local_spread:
 * vector i goes to the i-th CPU counting the device's node first), so the
 * first node_cpus vectors are the node's; seq walks round them. node_cpus
 * 0: the node is unknown, any vector. num_vectors <= 0: vector 0.
 */
int numapick_comp_vector(int num_vectors, unsigned node_cpus, unsigned seq);
/*
 * The node for a ring every lane writes: that of the most lanes
 * (lane_node[0..nlanes), -1 unknown), lane 0's on a tie. -1 for no lanes.
 */
int numapick_ring_node(const int *lane_node, unsigned nlanes);
