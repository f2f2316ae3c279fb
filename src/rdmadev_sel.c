/* SPDX-License-Identifier: MIT */
/*
 * A device as users of NCCL and UCX name it ("mlx5_0:1": NCCL_IB_HCA,
 * UCX_NET_DEVICES) and the GID they pick (NCCL_IB_GID_INDEX,
 * UCX_IB_GID_INDEX, NCCL_IB_ROCE_VERSION_NUM), from sysfs. Our lanes are
 * rdma_cm's: it takes the GID of the source address in the port's default
 * RoCE mode, so a GID index is honoured by binding to its address, and
 * both are checked against the GID rdma_cm gave the lane (rdmadev_gid_check).
 */
#include "rdmadev.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sysfile.h"

int rdmadev_spec_parse(const char *spec, struct rdmadev_spec *ret)
{
	struct rdmadev_spec s = { 0 };
	const char *colon = spec ? strchr(spec, ':') : NULL;
	size_t n = colon ? (size_t)(colon - spec) : (spec ? strlen(spec) : 0);

	if (!spec || n == 0 || n > RDMADEV_NAME_MAX) {
		return -EINVAL;
	}
	memcpy(s.name, spec, n);
	if (!rdmadev_name_ok(s.name)) {
		return -EINVAL;
	}
	if (colon) {
		const char *p = colon + 1;
		unsigned long v = 0;

		/* Decimal digits only: no sign, no space, no "0x", at most three of them. */
		if (*p == '\0' || strlen(p) > 3 || strspn(p, "0123456789") != strlen(p)) {
			return -EINVAL;
		}
		v = strtoul(p, NULL, 10);
		if (v == 0 || v > RDMADEV_PORT_MAX) {
			return -EINVAL;
		}
		s.port = (unsigned)v;
	}
	*ret = s;
	return 0;
}

/* sysfs/<name>/ports/<port>/<rel><index>, read as one line; -ENOENT when it can't be. */
static int gid_file(const char *sysfs, const char *name, unsigned port, const char *rel,
		    unsigned index, char *buf, size_t len)
{
	char path[768];

	snprintf(path, sizeof(path), "%s/%s/ports/%u/%s%u", sysfs, name, port, rel, index);
	return sysfile_read_line(path, buf, len) < 0 ? -ENOENT : 0;
}

int rdmadev_gid_read(const char *sysfs, const char *name, unsigned port, unsigned index,
		     struct rdmadev_gid *ret)
{
	struct rdmadev_gid g = { .index = index };
	static const uint8_t zero[16];
	char text[64], type[32], ll[32], path[768];

	if (!rdmadev_name_ok(name) || port == 0 || port > RDMADEV_PORT_MAX ||
	    index >= RDMADEV_GID_TABLE_MAX) {
		return -EINVAL;
	}
	if (gid_file(sysfs, name, port, "gids/", index, text, sizeof(text)) < 0 ||
	    inet_pton(AF_INET6, text, g.raw) != 1 || memcmp(g.raw, zero, sizeof(zero)) == 0) {
		return -ENOENT;
	}
	snprintf(path, sizeof(path), "%s/%s/ports/%u/link_layer", sysfs, name, port);
	if (sysfile_read_line(path, ll, sizeof(ll)) > 0 && strcmp(ll, "InfiniBand") == 0) {
		g.version = 0;
	} else {
		/* An unset attribute reads as an error; RoCE without one is v1 (older kernels). */
		g.version = gid_file(sysfs, name, port, "gid_attrs/types/", index, type,
				     sizeof(type)) == 0 &&
				    strcasecmp(type, "RoCE v2") == 0
				? 2
				: 1;
		if (gid_file(sysfs, name, port, "gid_attrs/ndevs/", index, g.netdev,
			     sizeof(g.netdev)) < 0 ||
		    !rdmadev_name_ok(g.netdev)) {
			g.netdev[0] = '\0';
		}
	}
	*ret = g;
	return 0;
}

/* The network device's ifindex under netsysfs, 0 when it can't be read. */
static uint32_t netdev_ifindex(const char *netsysfs, const char *ifname)
{
	char path[512], line[32], *end;
	unsigned long v;

	if (!rdmadev_name_ok(ifname)) {
		return 0;
	}
	snprintf(path, sizeof(path), "%s/%s/ifindex", netsysfs, ifname);
	if (sysfile_read_line(path, line, sizeof(line)) <= 0) {
		return 0;
	}
	v = strtoul(line, &end, 10);
	return *end == '\0' && v <= UINT32_MAX ? (uint32_t)v : 0;
}

int rdmadev_gid_addr(const struct rdmadev_gid *g, const char *netsysfs, int family,
		     struct sockaddr_storage *ret_addr, char *why, size_t whylen)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	bool v4 = memcmp(g->raw, mapped, sizeof(mapped)) == 0;
	char text[INET6_ADDRSTRLEN];

	if ((v4 ? AF_INET : AF_INET6) != family) {
		inet_ntop(AF_INET6, g->raw, text, sizeof(text));
		snprintf(why, whylen, "GID %u (%s) is an %s address and the daemon's is %s",
			 g->index, text, v4 ? "IPv4" : "IPv6", family == AF_INET ? "IPv4" : "IPv6");
		return -EAFNOSUPPORT;
	}
	memset(ret_addr, 0, sizeof(*ret_addr));
	if (v4) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ret_addr;

		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, g->raw + 12, 4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ret_addr;

		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, g->raw, 16);
		if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) {
			s6->sin6_scope_id = netdev_ifindex(netsysfs, g->netdev);
		}
	}
	return 0;
}

/* "RoCE v2", "RoCE v1", "InfiniBand": a GID's kind in words. */
static const char *version_name(int version)
{
	return version == 2 ? "RoCE v2" : version == 1 ? "RoCE v1" : "InfiniBand";
}

/* How to make rdma_cm use RoCE `version` on the port: its default RoCE mode, in configfs. */
static void roce_mode_fix(char *buf, size_t len, const char *name, unsigned port, int version)
{
	snprintf(
	    buf, len,
	    "make that the port's default RoCE mode (as root: mkdir -p "
	    "/sys/kernel/config/rdma_cm/%s, then write \"%s\" to its ports/%u/default_roce_mode)",
	    name, version == 2 ? "RoCE v2" : "IB/RoCE v1", port);
}

int rdmadev_gid_check(const char *sysfs, const char *name, unsigned port, unsigned used,
		      int want_index, int want_version, char *why, size_t whylen)
{
	struct rdmadev_gid g, w;
	int version = rdmadev_gid_read(sysfs, name, port, used, &g) == 0 ? g.version : -1;
	int wv;
	char how[384];

	/* An InfiniBand GID has no RoCE version; one we can't read is not judged. */
	if ((want_index < 0 || (unsigned)want_index == used) &&
	    (want_version == 0 || version <= 0 || version == want_version)) {
		return 0;
	}
	if (want_index < 0 || (unsigned)want_index == used) {
		roce_mode_fix(how, sizeof(how), name, port, want_version);
		snprintf(why, whylen,
			 "rdma_cm gave the lane GID %u of %s port %u, %s, not RoCE v%d: %s", used,
			 name, port, version_name(version), want_version, how);
		return -EXDEV;
	}
	wv = rdmadev_gid_read(sysfs, name, port, (unsigned)want_index, &w) == 0 ? w.version : -1;
	if (wv > 0) {
		roce_mode_fix(how, sizeof(how), name, port, wv);
	} else {
		snprintf(how, sizeof(how),
			 "ask for a GID that is set ('rdmacp doctor' lists them)");
	}
	snprintf(why, whylen,
		 "rdma_cm gave the lane GID %u (%s) of %s port %u, not GID %d (%s): it takes the "
		 "address's GID in the port's default RoCE mode; %s, or ask for GID %u",
		 used, version < 0 ? "?" : version_name(version), name, port, want_index,
		 wv < 0 ? "unset" : version_name(wv), how, used);
	return -EXDEV;
}

int rdmadev_spec_check(const char *sysfs, const char *spec, int gid_index, char *why, size_t whylen)
{
	struct rdmadev_spec s;
	struct rdmadev_gid g;
	char path[512];
	unsigned port;

	if (rdmadev_spec_parse(spec, &s) < 0) {
		snprintf(why, whylen, "'%.80s' is not NAME or NAME:PORT", spec ? spec : "");
		return -EINVAL;
	}
	if (rdmadev_exists(sysfs, s.name) < 0) {
		snprintf(why, whylen, "no RDMA device named %s", s.name);
		return -ENODEV;
	}
	port = s.port ? s.port : 1;
	snprintf(path, sizeof(path), "%s/%s/ports/%u", sysfs, s.name, port);
	if (access(path, F_OK) < 0) {
		snprintf(why, whylen, "RDMA device %s has no port %u", s.name, port);
		return -ENOENT;
	}
	if (gid_index >= 0 && rdmadev_gid_read(sysfs, s.name, port, (unsigned)gid_index, &g) < 0) {
		snprintf(why, whylen,
			 "GID %d of %s port %u is not set ('rdmacp doctor' lists the port's GIDs)",
			 gid_index, s.name, port);
		return -ENOENT;
	}
	return 0;
}
