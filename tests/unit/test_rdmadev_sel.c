/* SPDX-License-Identifier: MIT */
/*
 * A device as users name it and the GID they pick (src/rdmadev_sel.c):
 * NAME[:PORT] parsed, good and bad, from a table; a device's port's
 * network devices alone; GIDs read from a fake sysfs tree (RoCE v1 and v2,
 * IPv4-mapped and link-local IPv6, InfiniBand, unset ones) and the address
 * each stands for; the check of the GID rdma_cm gave a lane against the
 * index and RoCE version asked for, with what the error says; and the
 * check of a device, port and GID before a transfer.
 */
#include "testutil.h"
#include "fake_tree.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"
#include "rdmadev.h"

static char *root;
static char ib[512], net[512];

/* root/rel (fake_tree.h): with content, a file, else a directory. */
static void mk(const char *rel, const char *content)
{
	fake_tree_mk(root, rel, content);
}

/* One GID of roce0 (port), its type and network device (NULL: leave out). */
static void gid(unsigned port, unsigned idx, const char *g, const char *type, const char *ndev)
{
	char rel[256];

	snprintf(rel, sizeof(rel), "infiniband/roce0/ports/%u/gids/%u", port, idx);
	mk(rel, g);
	if (type) {
		snprintf(rel, sizeof(rel), "infiniband/roce0/ports/%u/gid_attrs/types/%u", port,
			 idx);
		mk(rel, type);
	}
	if (ndev) {
		snprintf(rel, sizeof(rel), "infiniband/roce0/ports/%u/gid_attrs/ndevs/%u", port,
			 idx);
		mk(rel, ndev);
	}
}

static int setup(void **state)
{
	(void)state;
	root = tu_mkdtemp();
	snprintf(ib, sizeof(ib), "%s/infiniband", root);
	snprintf(net, sizeof(net), "%s/net", root);
	mk("infiniband/roce0/ports/1/link_layer", "Ethernet");
	mk("infiniband/roce0/ports/2/link_layer", "Ethernet");
	gid(1, 0, "fe80:0000:0000:0000:0202:c9ff:fe00:0001", "IB/RoCE v1", "eth0");
	gid(1, 1, "fe80:0000:0000:0000:0202:c9ff:fe00:0001", "RoCE v2", "eth0");
	gid(1, 2, "0000:0000:0000:0000:0000:ffff:c0a8:0101", "IB/RoCE v1", "eth0");
	gid(1, 3, "0000:0000:0000:0000:0000:ffff:c0a8:0101", "RoCE v2", "eth0");
	gid(1, 4, "0000:0000:0000:0000:0000:0000:0000:0000", NULL, NULL);
	gid(1, 5, "2001:0db8:0000:0000:0000:0000:0000:0007", "RoCE v2", "eth0");
	gid(2, 0, "0000:0000:0000:0000:0000:ffff:0a00:0002", "RoCE v2", "eth1");
	mk("net/eth0/ifindex", "7");
	mk("infiniband/ib0dev/ports/1/link_layer", "InfiniBand");
	mk("infiniband/ib0dev/ports/1/gids/0", "fe80:0000:0000:0000:0002:c903:0001:0002");
	mk("infiniband/ib0dev/ports/1/gid_attrs/types/0", "IB/RoCE v1");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmtree(root);
	free(root);
	return 0;
}

/* NAME[:PORT], from a table: what is taken and what is refused. */
static void test_spec_parse(void **state)
{
	static const struct {
		const char *in;
		int ret;
		const char *name;
		unsigned port;
	} cases[] = {
		{ "mlx5_0", 0, "mlx5_0", 0 },
		{ "mlx5_0:1", 0, "mlx5_0", 1 },
		{ "rxe0:255", 0, "rxe0", 255 },
		{ "bnxt_re.3-a:007", 0, "bnxt_re.3-a", 7 },
		{ "", -EINVAL, NULL, 0 },
		{ ":1", -EINVAL, NULL, 0 },
		{ "mlx5_0:", -EINVAL, NULL, 0 },
		{ "mlx5_0:0", -EINVAL, NULL, 0 },
		{ "mlx5_0:256", -EINVAL, NULL, 0 },
		{ "mlx5_0:1000", -EINVAL, NULL, 0 },
		{ "mlx5_0:-1", -EINVAL, NULL, 0 },
		{ "mlx5_0:+1", -EINVAL, NULL, 0 },
		{ "mlx5_0: 1", -EINVAL, NULL, 0 },
		{ "mlx5_0:0x1", -EINVAL, NULL, 0 },
		{ "mlx5_0:1:2", -EINVAL, NULL, 0 },
		{ "mlx5 0:1", -EINVAL, NULL, 0 },
		{ "../x:1", -EINVAL, NULL, 0 },
		{ "..", -EINVAL, NULL, 0 },
		{ "a234567890123456789012345678901234567890123456789012345678901234", -EINVAL, NULL,
		  0 },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct rdmadev_spec s = { .name = "untouched", .port = 99 };
		int r = rdmadev_spec_parse(cases[i].in, &s);

		if (r != cases[i].ret) {
			fail_msg("'%s': %d, want %d", cases[i].in, r, cases[i].ret);
		}
		if (r == 0) {
			assert_string_equal(s.name, cases[i].name);
			assert_int_equal(s.port, cases[i].port);
		} else {
			assert_string_equal(s.name, "untouched"); /* untouched on failure */
			assert_int_equal(s.port, 99);
		}
	}
	assert_int_equal(rdmadev_spec_parse(NULL, &(struct rdmadev_spec){ 0 }), -EINVAL);
}

/* A port's network devices alone: port 2's are not port 1's. */
static void test_port_netdevs(void **state)
{
	char names[8][64];
	size_t n;

	(void)state;
	mk("infiniband/roce0/ports/1/gid_attrs/ndevs/9", "eth0.5");
	mk("infiniband/roce0/ports/1/gid_attrs/types/9", "RoCE v2");
	assert_int_equal(rdmadev_port_netdevs(ib, net, "roce0", 2, names, 8, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], "eth1");
	assert_int_equal(rdmadev_port_netdevs(ib, net, "roce0", 1, names, 8, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "eth0");
	assert_string_equal(names[1], "eth0.5");
	assert_int_equal(rdmadev_netdevs(ib, net, "roce0", names, 8, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(rdmadev_port_netdevs(ib, net, "roce0", 3, names, 8, &n), -ENOENT);
	assert_int_equal(rdmadev_port_netdevs(ib, net, "roce0", 0, names, 8, &n), -EINVAL);
	assert_int_equal(rdmadev_port_netdevs(ib, net, "roce0", 256, names, 8, &n), -EINVAL);
}

/* GIDs read: types, devices, unset ones, InfiniBand's, and the addresses they stand for. */
static void test_gid_read_addr(void **state)
{
	struct rdmadev_gid g;
	struct sockaddr_storage a;
	char why[256], text[64];

	(void)state;
	assert_int_equal(rdmadev_gid_read(ib, "roce0", 1, 3, &g), 0);
	assert_int_equal(g.version, 2);
	assert_string_equal(g.netdev, "eth0");
	assert_int_equal(rdmadev_gid_addr(&g, net, AF_INET, &a, why, sizeof(why)), 0);
	assert_int_equal(a.ss_family, AF_INET);
	inet_ntop(AF_INET, &((struct sockaddr_in *)&a)->sin_addr, text, sizeof(text));
	assert_string_equal(text, "192.168.1.1");
	assert_int_equal(((struct sockaddr_in *)&a)->sin_port, 0);
	/* An IPv4 GID towards an IPv6 daemon: refused, and said why. */
	assert_int_equal(rdmadev_gid_addr(&g, net, AF_INET6, &a, why, sizeof(why)), -EAFNOSUPPORT);
	assert_non_null(strstr(why, "GID 3"));
	assert_non_null(strstr(why, "IPv4"));
	assert_int_equal(rdmadev_gid_read(ib, "roce0", 1, 2, &g), 0);
	assert_int_equal(g.version, 1);
	/* Link-local IPv6: scoped to its network device's ifindex. */
	assert_int_equal(rdmadev_gid_read(ib, "roce0", 1, 0, &g), 0);
	assert_int_equal(rdmadev_gid_addr(&g, net, AF_INET6, &a, why, sizeof(why)), 0);
	assert_int_equal(((struct sockaddr_in6 *)&a)->sin6_scope_id, 7);
	assert_int_equal(rdmadev_gid_read(ib, "roce0", 1, 5, &g), 0);
	assert_int_equal(rdmadev_gid_addr(&g, net, AF_INET6, &a, why, sizeof(why)), 0);
	assert_int_equal(((struct sockaddr_in6 *)&a)->sin6_scope_id, 0); /* global: no scope */
	assert_int_equal(rdmadev_gid_addr(&g, net, AF_INET, &a, why, sizeof(why)), -EAFNOSUPPORT);
	/* Unset (zeros), missing, out of range, bad names. */
	assert_int_equal(rdmadev_gid_read(ib, "roce0", 1, 4, &g), -ENOENT);
	assert_int_equal(rdmadev_gid_read(ib, "roce0", 1, 6, &g), -ENOENT);
	assert_int_equal(rdmadev_gid_read(ib, "roce0", 3, 0, &g), -ENOENT);
	assert_int_equal(rdmadev_gid_read(ib, "roce0", 1, RDMADEV_GID_TABLE_MAX, &g), -EINVAL);
	assert_int_equal(rdmadev_gid_read(ib, "roce0", 0, 0, &g), -EINVAL);
	assert_int_equal(rdmadev_gid_read(ib, "../roce0", 1, 0, &g), -EINVAL);
	/* InfiniBand: no RoCE version, no network device. */
	assert_int_equal(rdmadev_gid_read(ib, "ib0dev", 1, 0, &g), 0);
	assert_int_equal(g.version, 0);
	assert_string_equal(g.netdev, "");
}

/* The GID rdma_cm gave a lane against what was asked, and what the refusal says. */
static void test_gid_check(void **state)
{
	char why[512];

	(void)state;
	assert_int_equal(rdmadev_gid_check(ib, "roce0", 1, 3, -1, 0, why, sizeof(why)), 0);
	assert_int_equal(rdmadev_gid_check(ib, "roce0", 1, 3, 3, 2, why, sizeof(why)), 0);
	assert_int_equal(rdmadev_gid_check(ib, "roce0", 1, 2, -1, 1, why, sizeof(why)), 0);
	/* v2 asked, v1 given: the port's default RoCE mode is the fix. */
	assert_int_equal(rdmadev_gid_check(ib, "roce0", 1, 2, -1, 2, why, sizeof(why)), -EXDEV);
	assert_non_null(strstr(why, "GID 2"));
	assert_non_null(strstr(why, "RoCE v1, not RoCE v2"));
	assert_non_null(strstr(why, "rdma_cm/roce0"));
	assert_non_null(strstr(why, "\"RoCE v2\""));
	assert_non_null(strstr(why, "ports/1/default_roce_mode"));
	/* GID 2 (v1) asked, 3 (v2, same address) given. */
	assert_int_equal(rdmadev_gid_check(ib, "roce0", 1, 3, 2, 0, why, sizeof(why)), -EXDEV);
	assert_non_null(strstr(why, "GID 3 (RoCE v2)"));
	assert_non_null(strstr(why, "not GID 2 (RoCE v1)"));
	assert_non_null(strstr(why, "\"IB/RoCE v1\""));
	assert_non_null(strstr(why, "ask for GID 3"));
	/* An unset GID asked for. */
	assert_int_equal(rdmadev_gid_check(ib, "roce0", 1, 3, 4, 0, why, sizeof(why)), -EXDEV);
	assert_non_null(strstr(why, "not GID 4 (unset)"));
	/* InfiniBand has no RoCE version: nothing to refuse. */
	assert_int_equal(rdmadev_gid_check(ib, "ib0dev", 1, 0, -1, 2, why, sizeof(why)), 0);
}

/* A device, port and GID before a transfer: each missing one said. */
static void test_spec_check(void **state)
{
	char why[256];

	(void)state;
	assert_int_equal(rdmadev_spec_check(ib, "roce0", -1, why, sizeof(why)), 0);
	assert_int_equal(rdmadev_spec_check(ib, "roce0:2", 0, why, sizeof(why)), 0);
	assert_int_equal(rdmadev_spec_check(ib, "roce0:1", 3, why, sizeof(why)), 0);
	assert_int_equal(rdmadev_spec_check(ib, "nosuch:1", -1, why, sizeof(why)), -ENODEV);
	assert_string_equal(why, "no RDMA device named nosuch");
	assert_int_equal(rdmadev_spec_check(ib, "roce0:3", -1, why, sizeof(why)), -ENOENT);
	assert_string_equal(why, "RDMA device roce0 has no port 3");
	assert_int_equal(rdmadev_spec_check(ib, "roce0", 4, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "GID 4 of roce0 port 1 is not set"));
	assert_int_equal(rdmadev_spec_check(ib, "roce0:2", 1, why, sizeof(why)), -ENOENT);
	assert_int_equal(rdmadev_spec_check(ib, "roce0:x", -1, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "NAME:PORT"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spec_parse),
		cmocka_unit_test_setup_teardown(test_port_netdevs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gid_read_addr, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gid_check, setup, teardown),
		cmocka_unit_test_setup_teardown(test_spec_check, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
