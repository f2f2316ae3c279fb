/* SPDX-License-Identifier: MIT */
/*
 * rdmacp doctor's RDMA devices (doctor.h): each device's transport and
 * verbs path, its ports' state, link layer and MTU, their GIDs, and what
 * keeps verbs from using them. Without verbs in the build: a warning.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_VERBS
#include <infiniband/verbs.h>

#include "verbs_wr.h"
#endif

#include "doctor.h"
#include "sysfile.h"
#include "xport.h"

#ifdef HAVE_VERBS
static const char *link_layer_name(uint8_t ll)
{
	switch (ll) {
	case IBV_LINK_LAYER_INFINIBAND:
		return "InfiniBand";
	case IBV_LINK_LAYER_ETHERNET:
		return "Ethernet";
	default:
		return "unknown";
	}
}

static unsigned mtu_bytes(enum ibv_mtu mtu)
{
	/* IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5 */
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0;
}

/* ibv_port_state_str says "active"; the tools (ibstat, rdma link) say ACTIVE. */
static const char *port_state_name(enum ibv_port_state st)
{
	switch (st) {
	case IBV_PORT_DOWN:
		return "DOWN";
	case IBV_PORT_INIT:
		return "INIT";
	case IBV_PORT_ARMED:
		return "ARMED";
	case IBV_PORT_ACTIVE:
		return "ACTIVE";
	case IBV_PORT_ACTIVE_DEFER:
		return "ACTIVE_DEFER";
	default:
		return "NOP";
	}
}

static const char *gid_type_name(uint32_t type)
{
	switch (type) {
	case IBV_GID_TYPE_IB:
		return "IB";
	case IBV_GID_TYPE_ROCE_V1:
		return "RoCE v1";
	case IBV_GID_TYPE_ROCE_V2:
		return "RoCE v2";
	default:
		return "?";
	}
}

static bool gid_is_zero(const union ibv_gid *g)
{
	static const uint8_t zero[16];

	return memcmp(g->raw, zero, sizeof(zero)) == 0;
}

/* ::ffff:a.b.c.d: the entry RoCE v2 over IPv4 (rdma_cm with an IPv4 address) uses. */
static bool gid_is_ipv4_mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

static void gid_store(struct doctor_port *pt, unsigned index, const union ibv_gid *g,
		      const char *type, const char *netdev)
{
	struct doctor_gid *out;

	if (pt->ngids == DOCTOR_MAX_GIDS) {
		return;
	}
	out = &pt->gids[pt->ngids++];
	out->index = index;
	out->ipv4_mapped = gid_is_ipv4_mapped(g);
	/* inet_ntop writes a mapped address as ::ffff:a.b.c.d already. */
	inet_ntop(AF_INET6, g->raw, out->addr, sizeof(out->addr));
	snprintf(out->type, sizeof(out->type), "%s", type);
	snprintf(out->netdev, sizeof(out->netdev), "%s", netdev);
}

/*
 * Non-zero GIDs of one port with their types. ibv_query_gid_ex knows the type
 * and the netdev; where the kernel or rdma-core lacks it, ibv_query_gid plus
 * the type from sysfs (gid_attrs/types/<idx>) says the same.
 */
static void port_gids(struct ibv_context *ctx, const char *dev, struct doctor_port *pt)
{
	unsigned n = MIN(pt->gid_tbl_len, (unsigned)DOCTOR_GID_SCAN);
	bool legacy = false;

	for (unsigned i = 0; i < n; i++) {
		struct ibv_gid_entry e;
		union ibv_gid g;
		char path[256], type[32], netdev[IF_NAMESIZE] = "";
		int r;

		if (!legacy) {
			r = ibv_query_gid_ex(ctx, pt->num, i, &e, 0);
			if (r == 0) {
				if (!gid_is_zero(&e.gid)) {
					if (e.ndev_ifindex) {
						(void)if_indextoname(e.ndev_ifindex, netdev);
					}
					gid_store(pt, i, &e.gid, gid_type_name(e.gid_type), netdev);
				}
				continue;
			}
			if (r == ENODATA || r == EINVAL || r == ENOENT) {
				continue; /* an empty slot */
			}
			legacy = true;
		}
		if (ibv_query_gid(ctx, (uint8_t)pt->num, (int)i, &g) != 0 || gid_is_zero(&g)) {
			continue;
		}
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%u",
			 dev, pt->num, i);
		if (sysfile_read_line(path, type, sizeof(type)) < 0) {
			snprintf(type, sizeof(type), "?");
		} else if (!strcmp(type, "IB/RoCE v1")) {
			snprintf(type, sizeof(type), "%s",
				 pt->link_layer[0] == 'E' ? "RoCE v1" : "IB");
		}
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%u/gid_attrs/ndevs/%u",
			 dev, pt->num, i);
		if (sysfile_read_line(path, netdev, sizeof(netdev)) < 0) {
			netdev[0] = '\0';
		}
		gid_store(pt, i, &g, type, netdev);
	}
}

static bool port_has_roce_v2_ipv4(const struct doctor_port *pt)
{
	for (unsigned i = 0; i < pt->ngids; i++) {
		if (pt->gids[i].ipv4_mapped && !strcmp(pt->gids[i].type, "RoCE v2")) {
			return true;
		}
	}
	return false;
}

static void port_problems(struct doctor *d, const struct doctor_device *dev,
			  const struct doctor_port *pt)
{
	if (strcmp(pt->state, "ACTIVE") != 0) {
		doctor_problem(
		    d, false,
		    "bring the link up: check the cable/switch, 'ip link set NETDEV up' for "
		    "RoCE, a running subnet manager (opensm) for InfiniBand",
		    "%s port %u is %s, not ACTIVE: verbs cannot use it", dev->name, pt->num,
		    pt->state);
	}
	if (!strcmp(pt->link_layer, "Ethernet") && !port_has_roce_v2_ipv4(pt)) {
		doctor_problem(
		    d, false,
		    "give the port's network interface an IPv4 address ('ip addr add ADDR/LEN "
		    "dev NETDEV'); rdmacp connects with RoCE v2 over IP",
		    "%s port %u has no RoCE v2 GID for an IPv4 address: rdma_cm cannot reach "
		    "it by IPv4",
		    dev->name, pt->num);
	}
}

static void device_scan(struct ibv_device *ibdev, struct doctor *d, struct doctor_device *out)
{
	struct ibv_context *ctx;
	struct ibv_device_attr da;

	const char *force = getenv("RDMACP_TEST_WRITE_SEND");

	snprintf(out->name, sizeof(out->name), "%s", ibv_get_device_name(ibdev));
	/* What the copy's lanes on it would be (xport_verbs_path): iWARP has no immediates. */
	snprintf(out->transport, sizeof(out->transport), "%s",
		 verbs_transport_name(ibdev->transport_type));
	out->path = verbs_transport_path(ibdev->transport_type, force && *force);
	if (out->path < 0) {
		doctor_problem(
		    d, false, "use another device, or --transport tcp",
		    "%s: the %s transport has no RC RDMA WRITE: verbs lanes cannot use it",
		    out->name, out->transport);
	}
	ctx = ibv_open_device(ibdev);
	if (!ctx) {
		snprintf(out->error, sizeof(out->error), "ibv_open_device: %s", strerror(errno));
		doctor_problem(
		    d, false,
		    "check /dev/infiniband/uverbs* permissions and that the provider library "
		    "(ibverbs-providers) matches the kernel driver",
		    "%s: cannot open the device (%s)", out->name, strerror(errno));
		return;
	}
	if (ibv_query_device(ctx, &da) != 0) {
		snprintf(out->error, sizeof(out->error), "ibv_query_device failed");
		ibv_close_device(ctx);
		return;
	}
	out->nports = MIN((unsigned)da.phys_port_cnt, (unsigned)DOCTOR_MAX_PORTS);
	for (unsigned p = 0; p < out->nports; p++) {
		struct doctor_port *pt = &out->ports[p];
		struct ibv_port_attr pa;

		pt->num = p + 1;
		if (ibv_query_port(ctx, (uint8_t)pt->num, &pa) != 0) {
			snprintf(pt->state, sizeof(pt->state), "?");
			continue;
		}
		snprintf(pt->state, sizeof(pt->state), "%s", port_state_name(pa.state));
		snprintf(pt->link_layer, sizeof(pt->link_layer), "%s",
			 link_layer_name(pa.link_layer));
		pt->active_mtu = mtu_bytes(pa.active_mtu);
		pt->gid_tbl_len = (unsigned)MAX(pa.gid_tbl_len, 0);
		port_gids(ctx, out->name, pt);
		port_problems(d, out, pt);
	}
	ibv_close_device(ctx);
}
#endif

void doctor_check_devices(struct doctor *d)
{
#ifdef HAVE_VERBS
	struct ibv_device **list;
	int n = 0;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list || n <= 0) {
		if (!list) {
			snprintf(d->verbs_why, sizeof(d->verbs_why), "ibv_get_device_list: %s",
				 strerror(errno ? errno : ENODEV));
		} else {
			snprintf(d->verbs_why, sizeof(d->verbs_why),
				 "ibv_get_device_list found none");
			ibv_free_device_list(list);
		}
		doctor_problem(
		    d, false,
		    "load the driver (modprobe mlx5_ib, or rdma_rxe for Soft-RoCE: 'rdma link "
		    "add rxe0 type rxe netdev ETH'), or use --transport tcp",
		    "no RDMA devices (%s): the verbs transport is unavailable, tcp works",
		    d->verbs_why);
		return;
	}
	d->devices = calloc((size_t)n, sizeof(*d->devices));
	if (!d->devices) {
		ibv_free_device_list(list);
		snprintf(d->verbs_why, sizeof(d->verbs_why), "out of memory");
		return;
	}
	d->ndevices = (size_t)n;
	for (int i = 0; i < n; i++) {
		device_scan(list[i], d, &d->devices[i]);
	}
	ibv_free_device_list(list);
	for (size_t i = 0; i < d->ndevices; i++) {
		for (unsigned p = 0; p < d->devices[i].nports; p++) {
			d->verbs_ok |= !strcmp(d->devices[i].ports[p].state, "ACTIVE");
		}
	}
	if (!d->verbs_ok) {
		snprintf(d->verbs_why, sizeof(d->verbs_why), "no port is ACTIVE");
	}
#else
	snprintf(d->verbs_why, sizeof(d->verbs_why), "this build has no verbs transport");
	doctor_problem(d, false,
		       "rebuild with -DENABLE_VERBS=ON (libibverbs-dev, librdmacm-dev), or "
		       "use --transport tcp",
		       "no RDMA devices (this build has no verbs transport): tcp works");
#endif
}
