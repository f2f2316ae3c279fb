/* SPDX-License-Identifier: MIT */
/*
 * The passive side's class of service (the daemon's "tos") on each fabric.
 * iWARP: the lanes are TCP connections the NIC accepts; iw_cm gives them
 * the TOS of the listening id (the kernel's cma_iw_listen copies it when
 * rdma_listen runs), so it is set on every listening id before then.
 * RoCE: the accepted QP's address vector follows the connection request,
 * the client's class; accept.c replaces its traffic class, and here is the
 * service level (the Ethernet priority) that goes with ours: the one the
 * kernel derives from a TOS for this network device (iboe_tos_to_sl: its
 * VLAN egress map or its priority-to-traffic-class map), learned the only
 * way that reads those maps as the kernel does: resolving a route to our
 * own address with the class set. InfiniBand: rdma_cm sends the class as
 * the path query's QoS class and the subnet manager picks the SL from its
 * QoS policy for the active side; the passive side takes the path of the
 * request, so it is left alone here.
 */
#include <errno.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "verbs-internal.h"

/* How long the route to our own address may take: it is local, a millisecond. */
#define VERBS_CLASS_PROBE_MS 1000

int verbs_listen_id_tos(struct rdma_cm_id *id, int tos)
{
	uint8_t t = (uint8_t)tos;

	if (tos < 0) {
		return 0;
	}
	return rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &t, sizeof(t)) == 0
		   ? 0
		   : negerrno();
}

/* Is the port a listening id is bound to RoCE (InfiniBand transport, Ethernet link)? */
static bool id_on_roce(const struct rdma_cm_id *id)
{
	struct ibv_port_attr pa;

	return id->verbs && id->verbs->device->transport_type == IBV_TRANSPORT_IB &&
	       ibv_query_port(id->verbs, id->port_num, &pa) == 0 &&
	       pa.link_layer == IBV_LINK_LAYER_ETHERNET;
}

/* The SL rdma_cm's route to addr takes with class tos, or -1. */
static int route_sl(struct rdma_event_channel *ec, struct rdma_cm_id *id,
		    const struct sockaddr *addr, uint8_t tos)
{
	struct sockaddr_storage dst = { 0 };
	int64_t deadline = now_ms() + VERBS_CLASS_PROBE_MS;

	memcpy(&dst, addr,
	       addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
					  : sizeof(struct sockaddr_in6));
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)) != 0 ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, VERBS_CLASS_PROBE_MS) != 0 ||
	    verbs_cm_wait(ec, id, RDMA_CM_EVENT_ADDR_RESOLVED, deadline) != 0 ||
	    rdma_resolve_route(id, VERBS_CLASS_PROBE_MS) != 0 ||
	    verbs_cm_wait(ec, id, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline) != 0 ||
	    id->route.num_paths < 1 || !id->route.path_rec) {
		return -1;
	}
	return id->route.path_rec[0].sl;
}

int verbs_class_sl(const struct rdma_cm_id *listen_id, const struct sockaddr *addr, int tos)
{
	struct rdma_event_channel *ec;
	struct rdma_cm_id *id = NULL;
	int sl = -1;

	if (tos < 0 || !id_on_roce(listen_id)) {
		return -1;
	}
	ec = rdma_create_event_channel();
	if (!ec) {
		return -1;
	}
	if (verbs_set_nonblock(ec->fd) == 0 && rdma_create_id(ec, &id, NULL, RDMA_PS_TCP) == 0) {
		sl = route_sl(ec, id, addr, (uint8_t)tos);
		(void)rdma_destroy_id(id);
	}
	rdma_destroy_event_channel(ec);
	/* Without it the lanes keep the request's SL: the client's class's priority. */
	log_debug("verbs: class %d on this address: service level %d%s", tos, sl,
		  sl < 0 ? " (unknown: the request's is kept)" : "");
	return sl;
}
