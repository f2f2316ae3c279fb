/* SPDX-License-Identifier: MIT */
/*
 * What a host's RDMA fabric setup looks like from sysfs and procfs, and
 * what in it costs or breaks RDMA (rdmacp doctor): each device's PCIe link
 * against its maximum and its relaxed-ordering enable bit; each RoCE
 * port's MTU against its network device's; ECN (DCQCN) and the QoS trust
 * mode where the driver shows them; two RDMA network devices in one IPv4
 * subnet while ARP answers for any address (ARP flux); and why no device is
 * seen (a container without /dev/infiniband, a driver without its RDMA
 * module). Everything is read under fabric_paths, which tests point at a
 * fake tree; what can't be read is reported as unknown, never guessed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct ifaddrs;

struct fabric_paths {
	const char *ib;	      /* /sys/class/infiniband */
	const char *net;      /* /sys/class/net */
	const char *ipv4conf; /* /proc/sys/net/ipv4/conf */
	const char *devib;    /* /dev/infiniband */
	const char *root;     /* "" for /: /.dockerenv, /run/.containerenv, /proc/1/cgroup */
};
#define FABRIC_PATHS_SYSTEM                                                           \
	{                                                                             \
		"/sys/class/infiniband", "/sys/class/net", "/proc/sys/net/ipv4/conf", \
		    "/dev/infiniband", ""                                             \
	}

/* A port as verbs reports it (ibv_query_port): sysfs has no active MTU. */
struct fabric_port {
	char dev[64];
	unsigned num;
	unsigned active_mtu; /* bytes, 0: unknown */
	bool ethernet;	     /* RoCE (link layer Ethernet) */
};

#define FABRIC_MAX_FINDINGS 32
#define FABRIC_MAX_FACTS    48

struct fabric_finding {
	bool error;	/* false: a warning, transfers still work */
	char check[24]; /* "pcie", "relaxed-ordering", "mtu", "ecn", "arp-flux", "container", ... */
	char what[512];
	char fix[512];
};

struct fabric_report {
	size_t nfacts, nfindings;
	char facts[FABRIC_MAX_FACTS][256]; /* what was read, "unknown" where it couldn't be */
	struct fabric_finding findings[FABRIC_MAX_FINDINGS];
};

/*
 * Every check, into *r (zeroed first): ports are verbs' view of the ports
 * (may be none), addrs the interface addresses (getifaddrs; may be NULL).
 */
void fabric_check(const struct fabric_paths *p, const struct fabric_port *ports, size_t nports,
		  const struct ifaddrs *addrs, struct fabric_report *r);
/* The RoCE MTU (bytes) a network device MTU gives, as the kernel computes it (iboe_get_mtu). */
unsigned fabric_roce_mtu(unsigned netdev_mtu);
