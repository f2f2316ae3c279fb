/* SPDX-License-Identifier: MIT */
/*
 * RDMA device facts from sysfs (class/infiniband/<dev>/..., class/net/...) and
 * getifaddrs(): existence, NUMA node, the network devices of every port
 * (RoCE: its GIDs' ones; InfiniBand: its IPoIB interfaces) and a source
 * address on one of them. Unset GID attributes read as errors in sysfs; they
 * are skipped.
 */
#include "rdmadev.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "sysfile.h"

bool rdmadev_name_ok(const char *name)
{
	size_t n;

	if (!name) {
		return false;
	}
	n = strlen(name);
	if (n == 0 || n > RDMADEV_NAME_MAX || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-')) {
			return false;
		}
	}
	return true;
}

int rdmadev_exists(const char *sysfs, const char *name)
{
	char path[512];
	struct stat st;

	if (!rdmadev_name_ok(name)) {
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "%s/%s", sysfs, name);
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -ENODEV;
}

int rdmadev_numa_node(const char *sysfs, const char *name)
{
	char path[512], line[32], *end;
	long node;

	if (!rdmadev_name_ok(name)) {
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s/device/numa_node", sysfs, name);
	if (sysfile_read_line(path, line, sizeof(line)) <= 0) {
		return -1;
	}
	errno = 0;
	node = strtol(line, &end, 10);
	if (errno != 0 || *end != '\0' || node < 0 || node > 4095) {
		return -1;
	}
	return (int)node;
}

int rdmadev_node_cpus(const char *nodes, int node, cpu_set_t *set)
{
	char path[512], line[4096], *p, *end;

	if (node < 0 || node > 4095) {
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "%s/node%d/cpulist", nodes, node);
	if (sysfile_read_line(path, line, sizeof(line)) < 0) {
		return -ENOENT;
	}
	CPU_ZERO(set);
	/* Ranges a-b or single CPUs, comma separated; an empty list is a node without CPUs. */
	for (p = line; *p;) {
		unsigned long lo, hi;

		errno = 0;
		lo = strtoul(p, &end, 10);
		if (errno || end == p) {
			return -EINVAL;
		}
		hi = lo;
		if (*end == '-') {
			p = end + 1;
			hi = strtoul(p, &end, 10);
			if (errno || end == p || hi < lo) {
				return -EINVAL;
			}
		}
		if (hi >= CPU_SETSIZE) {
			return -EINVAL;
		}
		for (unsigned long c = lo; c <= hi; c++) {
			CPU_SET(c, set);
		}
		if (*end == ',') {
			end++;
		} else if (*end != '\0') {
			return -EINVAL;
		}
		p = end;
	}
	return 0;
}

/* Add ifname to the list unless it is there; false when the list is full. */
static bool list_add(char (*names)[64], size_t max, size_t *n, const char *ifname)
{
	for (size_t i = 0; i < *n; i++) {
		if (strcmp(names[i], ifname) == 0) {
			return true;
		}
	}
	if (*n == max) {
		return false;
	}
	snprintf(names[(*n)++], 64, "%s", ifname);
	return true;
}

static int cmp_uint(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

/*
 * RoCE: the network devices of port's GIDs (gid_attrs/ndevs/<index>; an
 * unset GID reads as an error and is skipped), RoCE v2 ones first, each
 * kind in GID index order (not readdir order: the same answer every time);
 * each GID's files read once.
 */
static void roce_netdevs(const char *sysfs, const char *name, const char *port, char (*names)[64],
			 size_t max, size_t *n)
{
	char dir[512], path[1024], ifname[64], type[32];
	unsigned *idx = NULL;
	size_t nidx = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/%s/ports/%s/gid_attrs/ndevs", sysfs, name, port);
	d = opendir(dir);
	if (!d) {
		return;
	}
	/* Every index (a GID table has hundreds or thousands, most unset). */
	while ((de = readdir(d))) {
		char *end;
		unsigned long v = strtoul(de->d_name, &end, 10);

		if (de->d_name[0] == '.' || *end != '\0' || v >= 65536) {
			continue;
		}
		if (nidx == cap) {
			unsigned *grown = realloc(idx, (cap ? cap * 2 : 256) * sizeof(*idx));

			if (!grown) {
				break;
			}
			idx = grown;
			cap = cap ? cap * 2 : 256;
		}
		idx[nidx++] = (unsigned)v;
	}
	closedir(d);
	if (nidx > 1) {
		qsort(idx, nidx, sizeof(*idx), cmp_uint);
	}
	/* One read of each GID: RoCE v2 ones straight in, the others behind them. */
	char others[16][64];
	size_t nothers = 0;

	for (size_t i = 0; i < nidx; i++) {
		snprintf(path, sizeof(path), "%s/%u", dir, idx[i]);
		if (sysfile_read_line(path, ifname, sizeof(ifname)) <= 0 ||
		    !rdmadev_name_ok(ifname)) {
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s/ports/%s/gid_attrs/types/%u", sysfs, name, port,
			 idx[i]);
		if (sysfile_read_line(path, type, sizeof(type)) > 0 &&
		    strcasecmp(type, "RoCE v2") == 0) {
			list_add(names, max, n, ifname);
		} else {
			list_add(others, ARRAY_SIZE(others), &nothers, ifname);
		}
	}
	for (size_t i = 0; i < nothers; i++) {
		list_add(names, max, n, others[i]);
	}
	free(idx);
}

/*
 * InfiniBand: IPoIB interfaces are not attached to IB GIDs. As rdma-core's
 * ibdev2netdev does, an interface belongs to the device when its
 * device/infiniband/<name> exists, and to the port its dev_port (0-based)
 * names; kernels before dev_port gave IPoIB ports in dev_id (hex).
 */
static void ib_netdevs(const char *netsysfs, const char *name, unsigned port, char (*names)[64],
		       size_t max, size_t *n)
{
	struct dirent *de;
	DIR *d = opendir(netsysfs);

	if (!d) {
		return;
	}
	while ((de = readdir(d))) {
		char path[1024], line[32], *end;
		struct stat st;
		unsigned long v;

		if (de->d_name[0] == '.' || !rdmadev_name_ok(de->d_name)) {
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s/device/infiniband/%s", netsysfs, de->d_name,
			 name);
		if (stat(path, &st) < 0) {
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s/dev_port", netsysfs, de->d_name);
		if (sysfile_read_line(path, line, sizeof(line)) > 0) {
			v = strtoul(line, &end, 10);
		} else {
			snprintf(path, sizeof(path), "%s/%s/dev_id", netsysfs, de->d_name);
			if (sysfile_read_line(path, line, sizeof(line)) <= 0) {
				continue;
			}
			v = strtoul(line, &end, 16);
		}
		if (*end == '\0' && v + 1 == port) {
			list_add(names, max, n, de->d_name);
		}
	}
	closedir(d);
}

/* One port's network devices, added to names: by its link layer, IPoIB or RoCE GIDs. */
static void port_netdevs(const char *sysfs, const char *netsysfs, const char *name, unsigned num,
			 char (*names)[64], size_t max, size_t *n)
{
	char path[1024], ll[32], port[8];

	snprintf(port, sizeof(port), "%u", num);
	snprintf(path, sizeof(path), "%s/%s/ports/%s/link_layer", sysfs, name, port);
	if (sysfile_read_line(path, ll, sizeof(ll)) > 0 && strcmp(ll, "InfiniBand") == 0) {
		ib_netdevs(netsysfs, name, num, names, max, n);
	} else {
		roce_netdevs(sysfs, name, port, names, max, n);
	}
}

int rdmadev_netdevs(const char *sysfs, const char *netsysfs, const char *name,
		    char (*ret_names)[64], size_t max, size_t *ret_n)
{
	char dir[512];
	unsigned ports[64];
	size_t nports = 0;
	struct dirent *de;
	DIR *d;

	*ret_n = 0;
	if (!rdmadev_name_ok(name)) {
		return -EINVAL;
	}
	snprintf(dir, sizeof(dir), "%s/%s/ports", sysfs, name);
	d = opendir(dir);
	if (!d) {
		return errno == ENOENT ? -ENOENT : negerrno();
	}
	while ((de = readdir(d)) && nports < ARRAY_SIZE(ports)) {
		char *end;
		unsigned long v = strtoul(de->d_name, &end, 10);

		if (de->d_name[0] != '.' && *end == '\0' && v > 0 && v < 256) {
			ports[nports++] = (unsigned)v;
		}
	}
	closedir(d);
	/* Port order, not readdir order: the same answer every time. */
	qsort(ports, nports, sizeof(*ports), cmp_uint);
	for (size_t i = 0; i < nports; i++) {
		port_netdevs(sysfs, netsysfs, name, ports[i], ret_names, max, ret_n);
	}
	return *ret_n > 0 ? 0 : -ENOENT;
}

int rdmadev_port_netdevs(const char *sysfs, const char *netsysfs, const char *name, unsigned port,
			 char (*ret_names)[64], size_t max, size_t *ret_n)
{
	*ret_n = 0;
	if (!rdmadev_name_ok(name) || port == 0 || port > 255) {
		return -EINVAL;
	}
	port_netdevs(sysfs, netsysfs, name, port, ret_names, max, ret_n);
	return *ret_n > 0 ? 0 : -ENOENT;
}

int rdmadev_netdev(const char *sysfs, const char *name, char ret_ifname[static 64])
{
	char names[16][64];
	size_t n;
	int r = rdmadev_netdevs(sysfs, RDMADEV_NETSYSFS, name, names, ARRAY_SIZE(names), &n);

	if (r == 0) {
		memcpy(ret_ifname, names[0], 64);
	}
	return r;
}

/* Lower is better: IPv4 any; IPv6 global before link-local. */
static int addr_rank(const struct sockaddr *sa)
{
	const struct sockaddr_in6 *s6;

	if (sa->sa_family != AF_INET6) {
		return 0;
	}
	s6 = (const struct sockaddr_in6 *)(const void *)sa;
	return IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr) ? 1 : 0;
}

/* Is a in the subnet of addr/mask that holds b? */
static bool same_subnet(const struct sockaddr *a, const struct sockaddr *mask,
			const struct sockaddr *b)
{
	const uint8_t *x, *m, *y;
	size_t len;

	if (!mask || a->sa_family != b->sa_family || mask->sa_family != a->sa_family) {
		return false;
	}
	if (a->sa_family == AF_INET) {
		x = (const uint8_t *)&((const struct sockaddr_in *)(const void *)a)->sin_addr;
		m = (const uint8_t *)&((const struct sockaddr_in *)(const void *)mask)->sin_addr;
		y = (const uint8_t *)&((const struct sockaddr_in *)(const void *)b)->sin_addr;
		len = 4;
	} else {
		x = (const uint8_t *)&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr;
		m = (const uint8_t *)&((const struct sockaddr_in6 *)(const void *)mask)->sin6_addr;
		y = (const uint8_t *)&((const struct sockaddr_in6 *)(const void *)b)->sin6_addr;
		len = 16;
	}
	for (size_t i = 0; i < len; i++) {
		if ((x[i] & m[i]) != (y[i] & m[i])) {
			return false;
		}
	}
	return true;
}

const struct ifaddrs *rdmadev_pick_addr(const struct ifaddrs *list, char (*names)[64], size_t n,
					int family, const struct sockaddr *dst)
{
	const struct ifaddrs *best = NULL;
	int best_score = 0;

	for (const struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
		size_t k;
		int score;

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != family) {
			continue;
		}
		for (k = 0; k < n && strcmp(ifa->ifa_name, names[k]) != 0; k++) {
		}
		if (k == n) {
			continue;
		}
		/* The peer's subnet first (a VLAN of the port), then the netdev order, then the rank. */
		score = (dst && same_subnet(ifa->ifa_addr, ifa->ifa_netmask, dst) ? 0 : 1000) +
			(int)k * 2 + addr_rank(ifa->ifa_addr);
		if (!best || score < best_score) {
			best = ifa;
			best_score = score;
		}
	}
	return best;
}

int rdmadev_src_addr(const char *sysfs, const char *name, int family, const struct sockaddr *dst,
		     struct sockaddr_storage *ret_addr)
{
	return rdmadev_src_addr_port(sysfs, name, 0, family, dst, ret_addr);
}

int rdmadev_src_addr_port(const char *sysfs, const char *name, unsigned port, int family,
			  const struct sockaddr *dst, struct sockaddr_storage *ret_addr)
{
	char names[16][64];
	size_t n;
	struct ifaddrs *ifa_list;
	const struct ifaddrs *best;
	int r;

	if (family != AF_INET && family != AF_INET6) {
		return -EINVAL;
	}
	r = port ? rdmadev_port_netdevs(sysfs, RDMADEV_NETSYSFS, name, port, names,
					ARRAY_SIZE(names), &n)
		 : rdmadev_netdevs(sysfs, RDMADEV_NETSYSFS, name, names, ARRAY_SIZE(names), &n);
	if (r < 0) {
		return r;
	}
	if (getifaddrs(&ifa_list) < 0) {
		return negerrno();
	}
	best = rdmadev_pick_addr(ifa_list, names, n, family, dst);
	if (!best) {
		freeifaddrs(ifa_list);
		return -EADDRNOTAVAIL;
	}
	memset(ret_addr, 0, sizeof(*ret_addr));
	memcpy(ret_addr, best->ifa_addr,
	       family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	/* Port 0: any source port (getifaddrs leaves it 0 already; be sure). */
	if (family == AF_INET) {
		((struct sockaddr_in *)ret_addr)->sin_port = 0;
	} else {
		((struct sockaddr_in6 *)ret_addr)->sin6_port = 0;
	}
	freeifaddrs(ifa_list);
	return 0;
}
