/* SPDX-License-Identifier: MIT */
/*
 * Facts about an RDMA device by name, from sysfs and the interface list: does
 * it exist, its NUMA node, and an IP address of its network device (the source
 * address that makes rdma_cm leave through it). No libibverbs: usable and
 * testable without RDMA. `sysfs` is the class directory, normally
 * RDMADEV_SYSFS; tests pass a fake tree.
 */
#pragma once

#include <stdbool.h>
#include <sys/socket.h>

#define RDMADEV_SYSFS	 "/sys/class/infiniband"
#define RDMADEV_NAME_MAX 63

/* [A-Za-z0-9_.-]{1,63}, and not "." or "..": safe inside a sysfs path. */
bool rdmadev_name_ok(const char *name);
/* 0 when sysfs/<name> exists, -ENODEV when not, -EINVAL for a bad name. */
int rdmadev_exists(const char *sysfs, const char *name);
/* The device's NUMA node, or -1 when it reports none (or cannot be read). */
int rdmadev_numa_node(const char *sysfs, const char *name);
/*
 * The network device behind port 1: the first GID whose ndev is set,
 * preferring a RoCE v2 one. -ENOENT when there is none (InfiniBand without
 * IPoIB addresses, a port without GIDs).
 */
int rdmadev_netdev(const char *sysfs, const char *name, char ret_ifname[static 64]);
/*
 * An address of `family` (AF_INET or AF_INET6) on the device's network device,
 * port 0; for IPv6 a global one before a link-local one (with its scope).
 * -EADDRNOTAVAIL when the network device has none of that family.
 */
int rdmadev_src_addr(const char *sysfs, const char *name, int family,
		     struct sockaddr_storage *ret_addr);
