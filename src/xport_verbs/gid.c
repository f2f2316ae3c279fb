/* SPDX-License-Identifier: MIT */
/*
 * Where an active side's lane leaves from when devices are named
 * (xport_params.devices, NAME or NAME:PORT): an address of the device's
 * port, or the address of the GID asked for (gid_index); and, once the
 * lane is up, whether the GID rdma_cm gave its QP is the one asked for
 * (gid_index, roce_version). The sysfs reading is rdmadev_sel.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rdmadev.h"
#include "verbs-internal.h"

int verbs_lane_src(struct verbs_xport *vx, unsigned lane, const struct xport_params *p,
		   const struct sockaddr *dst, struct rdmadev_spec *ret_spec,
		   struct sockaddr_storage *ret_src)
{
	const char *dev = p->ndevices ? p->devices[lane % p->ndevices] : NULL;
	const char *fam = dst->sa_family == AF_INET ? "IPv4" : "IPv6";
	struct rdmadev_gid g;
	char why[256];
	int r;

	if (!dev) {
		return 0;
	}
	if (rdmadev_spec_parse(dev, ret_spec) < 0) {
		verbs_set_error(vx, "lane %u: '%s' is not an RDMA device NAME[:PORT]", lane, dev);
		return -EINVAL;
	}
	if (!p->gid_index_set) {
		r = rdmadev_src_addr_port(RDMADEV_SYSFS, ret_spec->name, ret_spec->port,
					  dst->sa_family, dst, ret_src);
		if (r < 0) {
			verbs_set_error(vx, "lane %u: no %s address on RDMA device %s: %s", lane,
					fam, dev, strerror(-r));
			return r == -ENOENT ? -EADDRNOTAVAIL : r;
		}
		return 1;
	}
	r = rdmadev_gid_read(RDMADEV_SYSFS, ret_spec->name, ret_spec->port ? ret_spec->port : 1,
			     p->gid_index, &g);
	if (r < 0) {
		verbs_set_error(vx, "lane %u: GID %u of %s: %s", lane, p->gid_index, dev,
				r == -ENOENT ? "not set" : strerror(-r));
		return -EADDRNOTAVAIL;
	}
	r = rdmadev_gid_addr(&g, RDMADEV_NETSYSFS, dst->sa_family, ret_src, why, sizeof(why));
	if (r < 0) {
		verbs_set_error(vx, "lane %u: %s", lane, why);
		return r;
	}
	return 1;
}

int verbs_lane_gid_check(struct verbs_xport *vx, unsigned lane, const struct xport_params *p)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	char why[512];
	int r;

	if ((!p->gid_index_set && p->roce_version == 0) || !ln->id || !ln->id->qp ||
	    ln->id->verbs->device->transport_type != IBV_TRANSPORT_IB) {
		return 0; /* nothing asked, or iWARP: no GID of ours to check */
	}
	r = ibv_query_qp(ln->id->qp, &attr, IBV_QP_AV, &init);
	if (r != 0) {
		verbs_set_error(vx, "lane %u: ibv_query_qp: %s", lane, strerror(r));
		return -r;
	}
	r = rdmadev_gid_check(RDMADEV_SYSFS, ibv_get_device_name(ln->id->verbs->device),
			      ln->id->port_num, attr.ah_attr.grh.sgid_index,
			      p->gid_index_set ? p->gid_index : -1, p->roce_version, why,
			      sizeof(why));
	if (r < 0) {
		verbs_set_error(vx, "lane %u: %s", lane, why);
	}
	return r;
}
