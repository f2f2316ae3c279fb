/* SPDX-License-Identifier: MIT */
/*
 * RDMA devices to network devices and source addresses (src/rdmadev.c) on
 * fake sysfs trees: a RoCE port's GIDs (RoCE v2 first, GID index order, a
 * VLAN, an unset GID), InfiniBand ports and their IPoIB interfaces (dev_port,
 * and dev_id on older kernels; another device's interface and a plain
 * Ethernet one left out), every port in order; and the address chosen
 * towards a peer (its subnet first, then the interface order, a global IPv6
 * address before a link-local one).
 */
#include "testutil.h"
#include "fake_tree.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rdmadev.h"

static char *root;

/* root/rel (fake_tree.h): with content, a file, else a directory. */
static void mk(const char *rel, const char *content)
{
	fake_tree_mk(root, rel, content);
}

static void paths(char *ib, char *net, size_t len)
{
	snprintf(ib, len, "%s/infiniband", root);
	snprintf(net, len, "%s/net", root);
}

static int setup(void **state)
{
	(void)state;
	root = tu_mkdtemp();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmtree(root);
	free(root);
	return 0;
}

/* A node's CPU list: ranges, single CPUs, an empty node, and lists that are refused. */
static void test_node_cpus(void **state)
{
	char nodes[512];
	cpu_set_t set;

	(void)state;
	snprintf(nodes, sizeof(nodes), "%s/node", root);
	mk("node/node0/cpulist", "0-3,8-11,16");
	mk("node/node1/cpulist", "");
	mk("node/node2/cpulist", "3-1");
	mk("node/node3/cpulist", "0-99999");
	mk("node/node4/cpulist", "1,x");
	assert_int_equal(rdmadev_node_cpus(nodes, 0, &set), 0);
	assert_int_equal(CPU_COUNT(&set), 9);
	assert_true(CPU_ISSET(0, &set) && CPU_ISSET(3, &set) && CPU_ISSET(8, &set));
	assert_true(CPU_ISSET(11, &set) && CPU_ISSET(16, &set) && !CPU_ISSET(4, &set));
	assert_int_equal(rdmadev_node_cpus(nodes, 1, &set), 0);
	assert_int_equal(CPU_COUNT(&set), 0);
	assert_int_equal(rdmadev_node_cpus(nodes, 2, &set), -EINVAL);
	assert_int_equal(rdmadev_node_cpus(nodes, 3, &set), -EINVAL);
	assert_int_equal(rdmadev_node_cpus(nodes, 4, &set), -EINVAL);
	assert_int_equal(rdmadev_node_cpus(nodes, 5, &set), -ENOENT);
	assert_int_equal(rdmadev_node_cpus(nodes, -1, &set), -EINVAL);
	/* This machine's own node 0, where it has one: at least one CPU. */
	if (rdmadev_node_cpus(RDMADEV_NODESYSFS, 0, &set) == 0) {
		assert_true(CPU_COUNT(&set) >= 1);
	}
}

static void test_roce(void **state)
{
	char ib[512], net[512], names[8][64], one[64];
	size_t n;

	(void)state;
	mk("infiniband/roce0/ports/1/link_layer", "Ethernet");
	/* Indices 0..11: v1 on eth0, v2 on eth0 and its VLAN, an unset GID (a directory). */
	mk("infiniband/roce0/ports/1/gid_attrs/ndevs/0", "eth0");
	mk("infiniband/roce0/ports/1/gid_attrs/types/0", "IB/RoCE v1");
	mk("infiniband/roce0/ports/1/gid_attrs/ndevs/11", "eth0.100");
	mk("infiniband/roce0/ports/1/gid_attrs/types/11", "RoCE v2");
	mk("infiniband/roce0/ports/1/gid_attrs/ndevs/2", "vlan7");
	mk("infiniband/roce0/ports/1/gid_attrs/types/2", "IB/RoCE v1");
	mk("infiniband/roce0/ports/1/gid_attrs/ndevs/3", "eth0");
	mk("infiniband/roce0/ports/1/gid_attrs/types/3", "RoCE v2");
	mk("infiniband/roce0/ports/1/gid_attrs/ndevs/4", NULL);
	mk("net", NULL);
	paths(ib, net, sizeof(ib));

	assert_int_equal(rdmadev_netdevs(ib, net, "roce0", names, 8, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(names[0], "eth0");	   /* v2, index 3 */
	assert_string_equal(names[1], "eth0.100"); /* v2, index 11 */
	assert_string_equal(names[2], "vlan7");	   /* v1 only */
	assert_int_equal(rdmadev_netdevs(ib, net, "roce0", names, 1, &n), 0);
	assert_int_equal(n, 1); /* capped */
	assert_int_equal(rdmadev_netdev(ib, "roce0", one), 0);
	assert_string_equal(one, "eth0");
	/* A GID table of a thousand entries, all unset but the last (rxe has such). */
	for (int i = 0; i < 1000; i++) {
		char rel[128];

		snprintf(rel, sizeof(rel), "infiniband/big0/ports/1/gid_attrs/ndevs/%d", i);
		mk(rel, i == 999 ? "veth0" : NULL);
	}
	assert_int_equal(rdmadev_netdevs(ib, net, "big0", names, 8, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], "veth0");
	assert_int_equal(rdmadev_netdevs(ib, net, "nosuch", names, 8, &n), -ENOENT);
	assert_int_equal(rdmadev_netdevs(ib, net, "../x", names, 8, &n), -EINVAL);
}

static void test_infiniband(void **state)
{
	char ib[512], net[512], names[8][64];
	size_t n;

	(void)state;
	mk("infiniband/mlx5_0/ports/1/link_layer", "InfiniBand");
	mk("infiniband/mlx5_0/ports/2/link_layer", "InfiniBand");
	/* No IPoIB GIDs: the interfaces are found from the net side. */
	mk("infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0", NULL);
	mk("net/ib1/device/infiniband/mlx5_0", NULL);
	mk("net/ib1/dev_port", "1");
	mk("net/ib0/device/infiniband/mlx5_0", NULL);
	mk("net/ib0/dev_port", "0");
	mk("net/ib0.8001/device/infiniband/mlx5_0", NULL); /* a partition of port 1 */
	mk("net/ib0.8001/dev_port", "0");
	mk("net/ib2/device/infiniband/mlx5_1", NULL); /* another device */
	mk("net/ib2/dev_port", "0");
	mk("net/eth0/dev_port", "0"); /* not an IPoIB interface */
	/* An older kernel: the port in dev_id (hex), no dev_port. */
	mk("infiniband/mlx4_0/ports/1/link_layer", "InfiniBand");
	mk("infiniband/mlx4_0/ports/2/link_layer", "InfiniBand");
	mk("net/ib9/device/infiniband/mlx4_0", NULL);
	mk("net/ib9/dev_id", "0x1");
	paths(ib, net, sizeof(ib));

	assert_int_equal(rdmadev_netdevs(ib, net, "mlx5_0", names, 8, &n), 0);
	assert_int_equal(n, 3);
	/* Port 1's (in whatever order the directory lists them), then port 2's. */
	assert_true((!strcmp(names[0], "ib0") && !strcmp(names[1], "ib0.8001")) ||
		    (!strcmp(names[0], "ib0.8001") && !strcmp(names[1], "ib0")));
	assert_string_equal(names[2], "ib1");
	assert_int_equal(rdmadev_netdevs(ib, net, "mlx4_0", names, 8, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], "ib9");
}

static struct sockaddr_storage sa(const char *text)
{
	struct sockaddr_storage s = { 0 };

	if (strchr(text, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&s;

		s6->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, text, &s6->sin6_addr), 1);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&s;

		s4->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, text, &s4->sin_addr), 1);
	}
	return s;
}

static void test_pick_addr(void **state)
{
	struct sockaddr_storage a[6] = { sa("10.0.0.5"),      sa("255.255.255.0"),
					 sa("192.168.100.5"), sa("255.255.255.0"),
					 sa("fe80::1"),	      sa("2001:db8::1") };
	struct sockaddr_storage m6 = sa("ffff:ffff:ffff:ffff::");
	char names[2][64] = { "eth0", "eth0.100" };
	char eth0[] = "eth0", vlan[] = "eth0.100", lo[] = "lo";
	struct ifaddrs l[5] = {
		{ .ifa_name = eth0,
		  .ifa_addr = (struct sockaddr *)&a[0],
		  .ifa_netmask = (struct sockaddr *)&a[1] },
		{ .ifa_name = vlan,
		  .ifa_addr = (struct sockaddr *)&a[2],
		  .ifa_netmask = (struct sockaddr *)&a[3] },
		{ .ifa_name = eth0,
		  .ifa_addr = (struct sockaddr *)&a[4],
		  .ifa_netmask = (struct sockaddr *)&m6 },
		{ .ifa_name = eth0,
		  .ifa_addr = (struct sockaddr *)&a[5],
		  .ifa_netmask = (struct sockaddr *)&m6 },
		{ .ifa_name = lo, .ifa_addr = NULL },
	};
	struct sockaddr_storage d1 = sa("192.168.100.9"), d2 = sa("10.0.0.7"),
				d3 = sa("172.16.0.1");

	(void)state;
	for (int i = 0; i < 4; i++) {
		l[i].ifa_next = &l[i + 1];
	}
	/* The peer's subnet: the VLAN's address, though eth0 comes first. */
	assert_ptr_equal(rdmadev_pick_addr(l, names, 2, AF_INET, (struct sockaddr *)&d1), &l[1]);
	assert_ptr_equal(rdmadev_pick_addr(l, names, 2, AF_INET, (struct sockaddr *)&d2), &l[0]);
	/* Routed (no subnet holds the peer), or no peer given: the interface order. */
	assert_ptr_equal(rdmadev_pick_addr(l, names, 2, AF_INET, (struct sockaddr *)&d3), &l[0]);
	assert_ptr_equal(rdmadev_pick_addr(l, names, 2, AF_INET, NULL), &l[0]);
	/* IPv6: a global address before a link-local one. */
	assert_ptr_equal(rdmadev_pick_addr(l, names, 2, AF_INET6, NULL), &l[3]);
	/* Only the device's interfaces count. */
	assert_ptr_equal(rdmadev_pick_addr(l, &names[1], 1, AF_INET, NULL), &l[1]);
	assert_null(rdmadev_pick_addr(l, &names[1], 1, AF_INET6, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_node_cpus, setup, teardown),
		cmocka_unit_test_setup_teardown(test_roce, setup, teardown),
		cmocka_unit_test_setup_teardown(test_infiniband, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pick_addr, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
