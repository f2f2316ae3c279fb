/* SPDX-License-Identifier: MIT */
/*
 * How fast an RDMA device's ports are, and which device an address is on,
 * from sysfs (rdmadev.h): a port's "rate" file is the kernel's word for
 * ibv_query_port's active_speed times active_width ("100 Gb/sec (4X EDR)",
 * "2.5 Gb/sec (1X SDR)" for Soft-RoCE), its "state" whether it is up. No
 * libibverbs, so the client sizes its window before any lane exists, and the
 * tests point it at a fake tree.
 */
#include "rdmadev.h"

#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "sysfile.h"

int rdmadev_parse_rate(const char *text, uint64_t *ret_mbps)
{
	uint64_t whole = 0, frac = 0, scale = 1000;
	const char *p = text;
	size_t digits = 0;

	for (; *p >= '0' && *p <= '9' && digits < 7; p++, digits++) {
		whole = whole * 10 + (uint64_t)(*p - '0');
	}
	if (digits == 0 || (*p >= '0' && *p <= '9')) {
		return -EINVAL;
	}
	if (*p == '.') {
		for (p++, digits = 0; *p >= '0' && *p <= '9'; p++, digits++) {
			if (digits < 3) {
				scale /= 10;
				frac += (uint64_t)(*p - '0') * scale;
			}
		}
		if (digits == 0) {
			return -EINVAL;
		}
	}
	/* "Gb/sec", then the end or the speed and width: " (4X EDR)". */
	if (strncmp(p, " Gb/sec", 7) != 0 || (p[7] != '\0' && p[7] != ' ')) {
		return -EINVAL;
	}
	if (whole == 0 && frac == 0) {
		return -EINVAL;
	}
	*ret_mbps = whole * 1000 + frac;
	return 0;
}

/* One port's rate when it is up: -ENETDOWN when not, -ENOENT when there is no such port. */
static int one_port_rate(const char *sysfs, const char *name, unsigned port, uint64_t *ret_mbps)
{
	char path[512], line[64], *end;
	unsigned long state;

	snprintf(path, sizeof(path), "%s/%s/ports/%u/state", sysfs, name, port);
	if (sysfile_read_line(path, line, sizeof(line)) <= 0) {
		return -ENOENT;
	}
	/* "4: ACTIVE" (IB_PORT_ACTIVE); ACTIVE_DEFER (5) carries data too. */
	state = strtoul(line, &end, 10);
	if (end == line || *end != ':' || (state != 4 && state != 5)) {
		return -ENETDOWN;
	}
	snprintf(path, sizeof(path), "%s/%s/ports/%u/rate", sysfs, name, port);
	if (sysfile_read_line(path, line, sizeof(line)) <= 0) {
		return -ENOENT;
	}
	return rdmadev_parse_rate(line, ret_mbps);
}

int rdmadev_port_rate(const char *sysfs, const char *name, unsigned port, uint64_t *ret_mbps)
{
	char dir[512];
	struct dirent *de;
	uint64_t best = 0;
	int r = -ENOENT;
	DIR *d;

	if (!rdmadev_name_ok(name) || port > 255) {
		return -EINVAL;
	}
	if (rdmadev_exists(sysfs, name) < 0) {
		return -ENODEV;
	}
	if (port > 0) {
		return one_port_rate(sysfs, name, port, ret_mbps);
	}
	snprintf(dir, sizeof(dir), "%s/%s/ports", sysfs, name);
	d = opendir(dir);
	if (!d) {
		return errno == ENOENT ? -ENOENT : negerrno();
	}
	while ((de = readdir(d))) {
		char *end;
		unsigned long v = strtoul(de->d_name, &end, 10);
		uint64_t mbps;
		int q;

		if (de->d_name[0] == '.' || *end != '\0' || v == 0 || v > 255) {
			continue;
		}
		q = one_port_rate(sysfs, name, (unsigned)v, &mbps);
		if (q == 0) {
			best = MAX(best, mbps);
			r = 0;
		} else if (q == -ENETDOWN && r == -ENOENT) {
			r = q;
		}
	}
	closedir(d);
	if (r == 0) {
		*ret_mbps = best;
	}
	return r;
}

/* Same address (the port aside), IPv4-mapped IPv6 as IPv4. */
static bool same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	struct in_addr a4, b4;
	bool a_is4 = rdmadev_addr_v4(a, &a4), b_is4 = rdmadev_addr_v4(b, &b4);

	if (a_is4 || b_is4) {
		return a_is4 && b_is4 && a4.s_addr == b4.s_addr;
	}
	if (a->sa_family != AF_INET6 || b->sa_family != AF_INET6) {
		return false;
	}
	return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr,
		      sizeof(struct in6_addr)) == 0;
}

bool rdmadev_addr_v4(const struct sockaddr *sa, struct in_addr *ret)
{
	if (sa->sa_family == AF_INET) {
		*ret = ((const struct sockaddr_in *)(const void *)sa)->sin_addr;
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 =
		    &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			memcpy(&ret->s_addr, &a6->s6_addr[12], 4);
			return true;
		}
	}
	return false;
}

const char *rdmadev_ifname_of_addr(const struct ifaddrs *list, const struct sockaddr *addr)
{
	for (const struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
		if (ifa->ifa_addr && ifa->ifa_name && same_addr(ifa->ifa_addr, addr)) {
			return ifa->ifa_name;
		}
	}
	return NULL;
}

int rdmadev_of_netdev(const char *sysfs, const char *netsysfs, const char *ifname,
		      char ret_name[static RDMADEV_NAME_MAX + 1])
{
	struct dirent *de;
	int r = -ENODEV;
	DIR *d = opendir(sysfs);

	if (!d) {
		return -ENODEV;
	}
	while (r < 0 && (de = readdir(d))) {
		char names[16][64];
		size_t n = 0;

		if (!rdmadev_name_ok(de->d_name) ||
		    rdmadev_netdevs(sysfs, netsysfs, de->d_name, names, ARRAY_SIZE(names), &n) <
			0) {
			continue;
		}
		for (size_t i = 0; i < n && r < 0; i++) {
			if (strcmp(names[i], ifname) == 0) {
				/* rdmadev_name_ok: at most RDMADEV_NAME_MAX bytes. */
				memcpy(ret_name, de->d_name, strlen(de->d_name) + 1);
				r = 0;
			}
		}
	}
	closedir(d);
	return r;
}
