/* SPDX-License-Identifier: MIT */
/*
 * How fast a device's ports are (src/rdmadev_rate.c) on a fake sysfs tree:
 * the kernel's rate strings (Soft-RoCE's 2.5, 25, 100, 200, 400 Gb/s) and
 * ones that are refused; a port's rate when it is up, the fastest port that
 * is up, a port down, missing, or with a broken rate file; and which device
 * an interface (and an address) belongs to.
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

#include "macro.h"
#include "rdmadev.h"

static char *root;

/* root/rel (fake_tree.h): with content, a file, else a directory. */
static void mk(const char *rel, const char *content)
{
	fake_tree_mk(root, rel, content);
}

/* A port: its state and rate files. */
static void port(const char *dev, unsigned n, const char *state, const char *rate)
{
	char rel[256];

	snprintf(rel, sizeof(rel), "infiniband/%s/ports/%u/state", dev, n);
	mk(rel, state);
	if (rate) {
		snprintf(rel, sizeof(rel), "infiniband/%s/ports/%u/rate", dev, n);
		mk(rel, rate);
	}
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

static void test_parse(void **state)
{
	static const struct {
		const char *text;
		uint64_t mbps;
	} good[] = {
		{ "2.5 Gb/sec (1X SDR)", 2500 },   { "25 Gb/sec (1X EDR)", 25000 },
		{ "100 Gb/sec (4X EDR)", 100000 }, { "200 Gb/sec (4X HDR)", 200000 },
		{ "400 Gb/sec (4X NDR)", 400000 }, { "56 Gb/sec (4X FDR)", 56000 },
		{ "53.125 Gb/sec (1X x)", 53125 }, { "10 Gb/sec", 10000 },
		{ "0.5 Gb/sec (1X SDR)", 500 },	   { "1.23456 Gb/sec", 1234 },
	};
	static const char *const bad[] = {
		"",	     "Gb/sec",		"100",	       "100 Mb/sec (4X)",  "100Gb/sec",
		"0 Gb/sec",  "-5 Gb/sec",	"abc Gb/sec",  "100 Gb/secs",	   "1. Gb/sec",
		".5 Gb/sec", "12345678 Gb/sec", "100  Gb/sec", "Invalid argument",
	};
	uint64_t v;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		v = 0;
		if (rdmadev_parse_rate(good[i].text, &v) != 0 || v != good[i].mbps) {
			fail_msg("'%s': %llu, want %llu", good[i].text, (unsigned long long)v,
				 (unsigned long long)good[i].mbps);
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		v = 7;
		if (rdmadev_parse_rate(bad[i], &v) != -EINVAL || v != 7) {
			fail_msg("'%s' accepted", bad[i]);
		}
	}
}

static void test_port_rate(void **state)
{
	char ib[512];
	uint64_t v = 0;

	(void)state;
	snprintf(ib, sizeof(ib), "%s/infiniband", root);
	port("rxe0", 1, "4: ACTIVE", "2.5 Gb/sec (1X SDR)");
	/* Port 1 up at 100, port 2 down at 400, port 3 up at 25. */
	port("mlx5_0", 1, "4: ACTIVE", "100 Gb/sec (4X EDR)");
	port("mlx5_0", 2, "1: DOWN", "400 Gb/sec (4X NDR)");
	port("mlx5_0", 3, "4: ACTIVE", "25 Gb/sec (1X EDR)");
	port("down0", 1, "1: DOWN", "200 Gb/sec (4X HDR)");
	port("down0", 2, "2: INIT", "200 Gb/sec (4X HDR)");
	port("broken0", 1, "4: ACTIVE", "fast");
	port("norate0", 1, "4: ACTIVE", NULL);
	port("defer0", 1, "5: ACTIVE_DEFER", "200 Gb/sec (4X HDR)");
	mk("infiniband/noports0", NULL);

	assert_int_equal(rdmadev_port_rate(ib, "rxe0", 0, &v), 0);
	assert_int_equal(v, 2500);
	assert_int_equal(rdmadev_port_rate(ib, "rxe0", 1, &v), 0);
	assert_int_equal(v, 2500);
	/* The fastest port that is up, not the fastest port. */
	assert_int_equal(rdmadev_port_rate(ib, "mlx5_0", 0, &v), 0);
	assert_int_equal(v, 100000);
	assert_int_equal(rdmadev_port_rate(ib, "mlx5_0", 3, &v), 0);
	assert_int_equal(v, 25000);
	v = 7;
	assert_int_equal(rdmadev_port_rate(ib, "mlx5_0", 2, &v), -ENETDOWN);
	assert_int_equal(rdmadev_port_rate(ib, "mlx5_0", 4, &v), -ENOENT);
	assert_int_equal(rdmadev_port_rate(ib, "down0", 0, &v), -ENETDOWN);
	assert_int_equal(rdmadev_port_rate(ib, "broken0", 0, &v), -ENOENT);
	assert_int_equal(rdmadev_port_rate(ib, "broken0", 1, &v), -EINVAL);
	assert_int_equal(rdmadev_port_rate(ib, "norate0", 1, &v), -ENOENT);
	assert_int_equal(rdmadev_port_rate(ib, "noports0", 0, &v), -ENOENT);
	assert_int_equal(v, 7); /* untouched by every failure */
	assert_int_equal(rdmadev_port_rate(ib, "defer0", 0, &v), 0);
	assert_int_equal(v, 200000);
	assert_int_equal(rdmadev_port_rate(ib, "nosuch", 0, &v), -ENODEV);
	assert_int_equal(rdmadev_port_rate(ib, "../etc", 0, &v), -EINVAL);
	assert_int_equal(rdmadev_port_rate(ib, "rxe0", 256, &v), -EINVAL);
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
		s4->sin_port = htons(7471);
		assert_int_equal(inet_pton(AF_INET, text, &s4->sin_addr), 1);
	}
	return s;
}

static void test_device_of(void **state)
{
	char ib[512], net[512], name[RDMADEV_NAME_MAX + 1] = "";
	struct sockaddr_storage a1 = sa("10.0.0.1"), a2 = sa("fd00::2"), a3 = sa("10.9.9.9");
	struct sockaddr_storage mapped = sa("::ffff:10.0.0.1");
	struct ifaddrs i2 = { .ifa_name = (char *)"ens2", .ifa_addr = (struct sockaddr *)&a2 };
	struct ifaddrs i1 = { .ifa_next = &i2,
			      .ifa_name = (char *)"ens1",
			      .ifa_addr = (struct sockaddr *)&a1 };
	struct ifaddrs i0 = { .ifa_next = &i1, .ifa_name = (char *)"lo" }; /* no address */

	(void)state;
	snprintf(ib, sizeof(ib), "%s/infiniband", root);
	snprintf(net, sizeof(net), "%s/net", root);
	mk("infiniband/roceA/ports/1/link_layer", "Ethernet");
	mk("infiniband/roceA/ports/1/gid_attrs/ndevs/0", "ens1");
	mk("infiniband/roceB/ports/1/link_layer", "Ethernet");
	mk("infiniband/roceB/ports/1/gid_attrs/ndevs/0", "ens2");
	mk("net", NULL);

	assert_string_equal(rdmadev_ifname_of_addr(&i0, (struct sockaddr *)&a1), "ens1");
	assert_string_equal(rdmadev_ifname_of_addr(&i0, (struct sockaddr *)&mapped), "ens1");
	assert_string_equal(rdmadev_ifname_of_addr(&i0, (struct sockaddr *)&a2), "ens2");
	assert_null(rdmadev_ifname_of_addr(&i0, (struct sockaddr *)&a3));
	assert_int_equal(rdmadev_of_netdev(ib, net, "ens1", name), 0);
	assert_string_equal(name, "roceA");
	assert_int_equal(rdmadev_of_netdev(ib, net, "ens2", name), 0);
	assert_string_equal(name, "roceB");
	assert_int_equal(rdmadev_of_netdev(ib, net, "eth9", name), -ENODEV);
	assert_int_equal(rdmadev_of_netdev("/nonexistent", net, "ens1", name), -ENODEV);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_parse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_port_rate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_device_of, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
