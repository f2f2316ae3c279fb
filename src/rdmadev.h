/* SPDX-License-Identifier: MIT */
/*
 * Facts about an RDMA device by name, from sysfs and the interface list: does
 * it exist, its NUMA node, its network devices on every port, and an IP
 * address of one of them (the source address that makes rdma_cm leave
 * through it). No libibverbs: usable and
 * testable without RDMA. `sysfs` is the class directory, normally
 * RDMADEV_SYSFS; tests pass a fake tree.
 */
#pragma once

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct ifaddrs;

#define RDMADEV_SYSFS	 "/sys/class/infiniband"
#define RDMADEV_NETSYSFS "/sys/class/net"
#define RDMADEV_NAME_MAX 63

/* [A-Za-z0-9_.-]{1,63}, and not "." or "..": safe inside a sysfs path. */
bool rdmadev_name_ok(const char *name);
/* 0 when sysfs/<name> exists, -ENODEV when not, -EINVAL for a bad name. */
int rdmadev_exists(const char *sysfs, const char *name);
/* The device's NUMA node, or -1 when it reports none (or cannot be read). */
int rdmadev_numa_node(const char *sysfs, const char *name);
/*
 * The CPUs of NUMA node `node` (nodes/node<N>/cpulist, "0-3,8-11"), into
 * *set. `nodes` is normally RDMADEV_NODESYSFS. -ENOENT: no such node;
 * -EINVAL: a list this cannot read (a CPU past CPU_SETSIZE included).
 */
#define RDMADEV_NODESYSFS "/sys/devices/system/node"
int rdmadev_node_cpus(const char *nodes, int node, cpu_set_t *set);
/*
 * The network devices of every port of the device, in port order, at most
 * max of them: for a RoCE port those its GIDs are attached to (RoCE v2 ones
 * first), for an InfiniBand port its IPoIB interfaces (those under
 * netsysfs, normally RDMADEV_NETSYSFS, whose device/infiniband/<name>
 * exists and whose dev_port, or dev_id before it, names the port). -ENOENT
 * when there is none.
 */
int rdmadev_netdevs(const char *sysfs, const char *netsysfs, const char *name,
		    char (*ret_names)[64], size_t max, size_t *ret_n);
/* The first of rdmadev_netdevs. */
int rdmadev_netdev(const char *sysfs, const char *name, char ret_ifname[static 64]);
/*
 * Of list's addresses of `family` on the interfaces names[0..n), the one to
 * leave from: one in dst's subnet first (of a port's VLANs, the one that
 * reaches the peer directly), then in the order of names, then for IPv6 a
 * global one before a link-local one. NULL when none. dst may be NULL.
 */
const struct ifaddrs *rdmadev_pick_addr(const struct ifaddrs *list, char (*names)[64], size_t n,
					int family, const struct sockaddr *dst);
/*
 * An address of `family` (AF_INET or AF_INET6) on the device's network
 * devices (rdmadev_pick_addr, towards dst when given), port 0.
 * -EADDRNOTAVAIL when they have none of that family.
 */
int rdmadev_src_addr(const char *sysfs, const char *name, int family, const struct sockaddr *dst,
		     struct sockaddr_storage *ret_addr);

/* ---- rdmadev_rate.c: how fast a device's ports are, and which device an address is on ---- */

#include <netinet/in.h>
#include <stdint.h>

/*
 * A port's "rate" file ("100 Gb/sec (4X EDR)", "2.5 Gb/sec (1X SDR)"), the
 * speed times the width ibv_query_port reports, in megabits per second.
 * -EINVAL for anything else (and for 0).
 */
int rdmadev_parse_rate(const char *text, uint64_t *ret_mbps);
/*
 * The rate of the device's port (1..255), or with port 0 of its fastest
 * port that is up (ACTIVE). -ENETDOWN: the port (every port) is down;
 * -ENOENT: no such port (none with a rate); -ENODEV: no such device.
 */
int rdmadev_port_rate(const char *sysfs, const char *name, unsigned port, uint64_t *ret_mbps);
/* An IPv4 address, or an IPv4-mapped IPv6 one, into *ret. */
bool rdmadev_addr_v4(const struct sockaddr *sa, struct in_addr *ret);
/* The name of the interface in list that holds addr (its port aside), or NULL. */
const char *rdmadev_ifname_of_addr(const struct ifaddrs *list, const struct sockaddr *addr);
/*
 * The RDMA device (under sysfs) one of whose ports has the network device
 * ifname (rdmadev_netdevs). -ENODEV when none has.
 */
int rdmadev_of_netdev(const char *sysfs, const char *netsysfs, const char *ifname,
		      char ret_name[static RDMADEV_NAME_MAX + 1]);

/* ---- one port (rdmadev.c), and a device as users name it (rdmadev_sel.c) ---- */

/* rdmadev_netdevs of port `port` (1..255) alone. -EINVAL: a bad name or port. */
int rdmadev_port_netdevs(const char *sysfs, const char *netsysfs, const char *name, unsigned port,
			 char (*ret_names)[64], size_t max, size_t *ret_n);
/* rdmadev_src_addr from port's network devices only (0: every port's). */
int rdmadev_src_addr_port(const char *sysfs, const char *name, unsigned port, int family,
			  const struct sockaddr *dst, struct sockaddr_storage *ret_addr);

/* "mlx5_0" or "mlx5_0:1" (NCCL_IB_HCA's and UCX_NET_DEVICES' syntax): 63 + ":255". */
#define RDMADEV_SPEC_MAX (RDMADEV_NAME_MAX + 4)
#define RDMADEV_PORT_MAX 255
struct rdmadev_spec {
	char name[RDMADEV_NAME_MAX + 1];
	unsigned port; /* 1..255; 0: not named (any port) */
};
/* -EINVAL: a bad name, or a port that is not 1..255 in decimal; *ret untouched then. */
int rdmadev_spec_parse(const char *spec, struct rdmadev_spec *ret);

/* RoCE versions as users name them (NCCL_IB_ROCE_VERSION_NUM); 0: an InfiniBand GID. */
#define RDMADEV_GID_TABLE_MAX 65536
struct rdmadev_gid {
	unsigned index;
	int version;	 /* 1 (RoCE v1), 2 (RoCE v2), 0 (InfiniBand) */
	char netdev[64]; /* "" for InfiniBand */
	uint8_t raw[16];
};
/*
 * GID `index` of the device's port from sysfs (ports/P/gids/N, its
 * gid_attrs/types/N and ndevs/N). -ENOENT: no such port or index, or the
 * entry is unset (all zeros); -EINVAL: a bad name, port or index.
 */
int rdmadev_gid_read(const char *sysfs, const char *name, unsigned port, unsigned index,
		     struct rdmadev_gid *ret);
/*
 * The address a GID stands for, to bind rdma_cm to (port 0): IPv4 for an
 * IPv4-mapped GID, else IPv6 (a link-local one scoped to its network
 * device's ifindex, read under netsysfs). -EAFNOSUPPORT (why says so) when
 * it is not of `family`, the peer's.
 */
int rdmadev_gid_addr(const struct rdmadev_gid *g, const char *netsysfs, int family,
		     struct sockaddr_storage *ret_addr, char *why, size_t whylen);
/*
 * Is the GID rdma_cm gave a lane (`used`, of device name's port) the one
 * asked for: index want_index (-1: any) and RoCE version want_version (0:
 * any)? 0, or -EXDEV with why saying what was used and how to change it.
 */
int rdmadev_gid_check(const char *sysfs, const char *name, unsigned port, unsigned used,
		      int want_index, int want_version, char *why, size_t whylen);
/*
 * Does spec name a device of this host, and a port of it (port 1 where it
 * names none), and gid_index (-1: none) a set GID of that port? 0, or with
 * why said: -EINVAL a bad spec, -ENODEV no such device, -ENOENT no such
 * port or GID.
 */
int rdmadev_spec_check(const char *sysfs, const char *spec, int gid_index, char *why,
		       size_t whylen);
