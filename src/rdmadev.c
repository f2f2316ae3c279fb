/* SPDX-License-Identifier: MIT */
/*
 * RDMA device facts from sysfs (class/infiniband/<dev>/...) and getifaddrs():
 * existence, NUMA node, network device of port 1 and a source address on it.
 * Unset GID attributes read as errors in sysfs; they are skipped.
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

int rdmadev_netdev(const char *sysfs, const char *name, char ret_ifname[static 64])
{
	char dir[512], path[1024], ifname[64], type[32];
	struct dirent *de;
	bool found = false, v2 = false;
	DIR *d;

	if (!rdmadev_name_ok(name)) {
		return -EINVAL;
	}
	snprintf(dir, sizeof(dir), "%s/%s/ports/1/gid_attrs/ndevs", sysfs, name);
	d = opendir(dir);
	if (!d) {
		return errno == ENOENT ? -ENOENT : negerrno();
	}
	while (!v2 && (de = readdir(d))) {
		if (de->d_name[0] == '.') {
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (sysfile_read_line(path, ifname, sizeof(ifname)) <= 0) {
			continue; /* an unset GID */
		}
		snprintf(path, sizeof(path), "%s/%s/ports/1/gid_attrs/types/%s", sysfs, name,
			 de->d_name);
		v2 = sysfile_read_line(path, type, sizeof(type)) > 0 &&
		     strcasecmp(type, "RoCE v2") == 0;
		if (!found || v2) {
			memcpy(ret_ifname, ifname, sizeof(ifname));
			found = true;
		}
	}
	closedir(d);
	return found ? 0 : -ENOENT;
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

int rdmadev_src_addr(const char *sysfs, const char *name, int family,
		     struct sockaddr_storage *ret_addr)
{
	char ifname[64];
	struct ifaddrs *ifa_list, *best = NULL;
	int r;

	if (family != AF_INET && family != AF_INET6) {
		return -EINVAL;
	}
	r = rdmadev_netdev(sysfs, name, ifname);
	if (r < 0) {
		return r;
	}
	if (getifaddrs(&ifa_list) < 0) {
		return negerrno();
	}
	for (struct ifaddrs *ifa = ifa_list; ifa; ifa = ifa->ifa_next) {
		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != family ||
		    strcmp(ifa->ifa_name, ifname) != 0) {
			continue;
		}
		if (!best || addr_rank(ifa->ifa_addr) < addr_rank(best->ifa_addr)) {
			best = ifa;
		}
	}
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
