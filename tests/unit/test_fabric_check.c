/* SPDX-License-Identifier: MIT */
/*
 * rdmacp doctor's fabric checks (src/fabric_check.c) on fake sysfs and
 * procfs trees: a healthy host reports no finding; each fault reports its
 * own (a PCIe link below its maximum, relaxed ordering off (and none for a
 * software device), a 1500-byte
 * MTU, an active MTU the network device disagrees with, ECN off, two RDMA
 * NICs in one subnet with ARP answering for any address, no device in a
 * container, a driver without its RDMA module, devices without uverbs
 * nodes); and what can't be read is reported unknown, not as a fault.
 */
#include "testutil.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fabric_check.h"
#include "macro.h"

static char *root;
static char ibp[512], netp[512], confp[512], devp[512];
static struct fabric_paths paths;
static struct fabric_report rep;

static void mkparents(char *path)
{
	for (char *p = path + strlen(root) + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			(void)mkdir(path, 0755);
			*p = '/';
		}
	}
}

/* root/rel: a file with content, or a directory (NULL). */
static void mk(const char *rel, const char *content)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	mkparents(path);
	if (!content) {
		(void)mkdir(path, 0755);
		return;
	}
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", content);
	fclose(f);
}

static void rm(const char *rel)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	assert_int_equal(unlink(path), 0);
}

/* root/rel -> target (relative to rel's directory). */
static void ln(const char *target, const char *rel)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	mkparents(path);
	assert_int_equal(symlink(target, path), 0);
}

/* The PCI config space: a capability list, PCI Express's Device Control with RO as given. */
static void config_space(const char *rel, size_t len, bool ro)
{
	uint8_t cfg[256] = { 0 };
	char path[1024];
	FILE *f;

	cfg[0x06] = 0x10;
	cfg[0x34] = 0x40;
	cfg[0x40] = 0x01; /* power management, then PCI Express */
	cfg[0x41] = 0x60;
	cfg[0x60] = 0x10;
	cfg[0x68] = ro ? 0x10 : 0x00;
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	mkparents(path);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(cfg, 1, len, f), len);
	fclose(f);
}

#define PCI "pci/0000:3b:00.0"

/* A healthy host: mlx5_0 at full PCIe link, RO on, RoCE on eth0 (MTU 9000, ECN on prio 3). */
static int setup(void **state)
{
	(void)state;
	root = tu_mkdtemp();
	snprintf(ibp, sizeof(ibp), "%s/ib", root);
	snprintf(netp, sizeof(netp), "%s/net", root);
	snprintf(confp, sizeof(confp), "%s/conf", root);
	snprintf(devp, sizeof(devp), "%s/dev", root);
	paths = (struct fabric_paths){ ibp, netp, confp, devp, root };
	mk(PCI "/current_link_speed", "16.0 GT/s PCIe");
	mk(PCI "/max_link_speed", "16.0 GT/s PCIe");
	mk(PCI "/current_link_width", "16");
	mk(PCI "/max_link_width", "16");
	config_space(PCI "/config", 256, true);
	ln("../../pci/0000:3b:00.0", "ib/mlx5_0/device");
	mk("ib/mlx5_0/ports/1/link_layer", "Ethernet");
	mk("ib/mlx5_0/ports/1/gid_attrs/ndevs/3", "eth0");
	mk("ib/mlx5_0/ports/1/gid_attrs/types/3", "RoCE v2");
	mk("net/eth0/mtu", "9000");
	for (int prio = 0; prio < 8; prio++) {
		char rel[128];

		snprintf(rel, sizeof(rel), "net/eth0/ecn/roce_np/enable/%d", prio);
		mk(rel, prio == 3 ? "1" : "0");
		snprintf(rel, sizeof(rel), "net/eth0/ecn/roce_rp/enable/%d", prio);
		mk(rel, prio == 3 ? "1" : "0");
	}
	mk("conf/all/arp_ignore", "0");
	mk("conf/all/arp_announce", "0");
	mk("dev/uverbs0", "");
	mk("proc/1/cgroup", "0::/init.scope");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmtree(root);
	free(root);
	return 0;
}

static const struct fabric_port port1 = { "mlx5_0", 1, 4096, true };

static void run(const struct fabric_port *ports, size_t n, const struct ifaddrs *addrs)
{
	fabric_check(&paths, ports, n, addrs, &rep);
}

/* The one finding of check `check`, its text holding `word`; fails unless exactly one. */
static const struct fabric_finding *only(const char *check, const char *word)
{
	if (rep.nfindings != 1 || strcmp(rep.findings[0].check, check) != 0) {
		for (size_t i = 0; i < rep.nfindings; i++) {
			print_message("finding %s: %s\n", rep.findings[i].check,
				      rep.findings[i].what);
		}
		fail_msg("wanted one %s finding, got %zu", check, rep.nfindings);
	}
	if (!strstr(rep.findings[0].what, word)) {
		fail_msg("'%s' not in: %s", word, rep.findings[0].what);
	}
	assert_false(rep.findings[0].error);
	assert_true(strlen(rep.findings[0].fix) > 0);
	return &rep.findings[0];
}

static bool has_fact(const char *word)
{
	for (size_t i = 0; i < rep.nfacts; i++) {
		if (strstr(rep.facts[i], word)) {
			return true;
		}
	}
	return false;
}

static void test_healthy(void **state)
{
	(void)state;
	run(&port1, 1, NULL);
	for (size_t i = 0; i < rep.nfindings; i++) {
		print_message("finding %s: %s\n", rep.findings[i].check, rep.findings[i].what);
	}
	assert_int_equal(rep.nfindings, 0);
	assert_true(has_fact("mlx5_0: PCIe 0000:3b:00.0: link 16.0 GT/s PCIe x16 of 16.0 GT/s "
			     "PCIe x16; relaxed ordering enabled"));
	assert_true(has_fact("MTU 9000, RoCE MTU 4096 (active 4096)"));
	assert_true(has_fact("notification point on priorities 3, reaction point on 3; trust "
			     "unknown; PFC unknown"));
	assert_true(has_fact("container: no; 1 RDMA devices, 1 uverbs"));
}

static void test_pcie(void **state)
{
	(void)state;
	rm(PCI "/current_link_width");
	mk(PCI "/current_link_width", "8");
	run(&port1, 1, NULL);
	only("pcie", "runs at 16.0 GT/s PCIe x8 but can do 16.0 GT/s PCIe x16: about 126 of 252");
	rm(PCI "/current_link_width");
	mk(PCI "/current_link_width", "16");
	rm(PCI "/current_link_speed");
	mk(PCI "/current_link_speed", "2.5 GT/s PCIe");
	run(&port1, 1, NULL);
	only("pcie", "2.5 GT/s PCIe x16");
	/* A virtual function's "Unknown" speed: a fact, not a fault. */
	rm(PCI "/current_link_speed");
	mk(PCI "/current_link_speed", "Unknown");
	run(&port1, 1, NULL);
	assert_int_equal(rep.nfindings, 0);
	assert_true(has_fact("link Unknown x16"));
	/* A software device (rxe, siw): no PCIe link to judge. */
	mk("ib/rxe0/ports/1/link_layer", "Ethernet");
	run(&port1, 1, NULL);
	assert_int_equal(rep.nfindings, 0);
	assert_true(has_fact("rxe0: no PCIe device under it (a software one: rxe, siw)"));
}

static void test_relaxed_ordering(void **state)
{
	(void)state;
	rm(PCI "/config");
	config_space(PCI "/config", 256, false);
	run(&port1, 1, NULL);
	only("relaxed-ordering", "relaxed ordering is disabled");
	/* An unprivileged read: the first 64 bytes only. Unknown, no finding. */
	rm(PCI "/config");
	config_space(PCI "/config", 64, false);
	run(&port1, 1, NULL);
	assert_int_equal(rep.nfindings, 0);
	assert_true(has_fact("relaxed ordering unknown (needs root)"));
}

static void test_mtu(void **state)
{
	struct fabric_port p = port1;

	(void)state;
	assert_int_equal(fabric_roce_mtu(9000), 4096);
	assert_int_equal(fabric_roce_mtu(4192), 4096);
	assert_int_equal(fabric_roce_mtu(4191), 2048);
	assert_int_equal(fabric_roce_mtu(1500), 1024);
	assert_int_equal(fabric_roce_mtu(100), 0);
	rm("net/eth0/mtu");
	mk("net/eth0/mtu", "1500");
	p.active_mtu = 1024;
	run(&p, 1, NULL);
	only("mtu", "eth0's MTU 1500 limits mlx5_0 port 1 to 1024-byte RoCE packets");
	/* The port and its network device disagree. */
	rm("net/eth0/mtu");
	mk("net/eth0/mtu", "9000");
	p.active_mtu = 1024;
	run(&p, 1, NULL);
	only("mtu", "active MTU is 1024 but eth0's MTU 9000 makes 4096");
	/* InfiniBand ports are the subnet manager's: not judged. */
	p.ethernet = false;
	run(&p, 1, NULL);
	assert_int_equal(rep.nfindings, 0);
}

static void test_ecn(void **state)
{
	(void)state;
	rm("net/eth0/ecn/roce_np/enable/3");
	mk("net/eth0/ecn/roce_np/enable/3", "0");
	run(&port1, 1, NULL);
	only("ecn", "ECN is off on every priority (notification point)");
	/* A driver without ecn/ in sysfs: unknown, no finding. */
	tu_rmtree(netp);
	mk("net/eth0/mtu", "9000");
	run(&port1, 1, NULL);
	assert_int_equal(rep.nfindings, 0);
	assert_true(has_fact("notification point on priorities unknown, reaction point on "
			     "unknown"));
	/* A trust mode where the driver shows one. */
	mk("net/eth0/qos/trust", "dscp");
	run(&port1, 1, NULL);
	assert_true(has_fact("trust dscp"));
}

static struct sockaddr_storage sa(const char *text)
{
	struct sockaddr_storage s = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&s;

	s4->sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, text, &s4->sin_addr), 1);
	return s;
}

static void test_arp_flux(void **state)
{
	struct sockaddr_storage a[5] = { sa("192.168.1.1"), sa("255.255.255.0"), sa("192.168.1.2"),
					 sa("10.0.0.1"), sa("255.0.0.0") };
	char eth0[] = "eth0", eth1[] = "eth1", eth9[] = "eth9";
	struct ifaddrs l[3] = {
		{ .ifa_name = eth0, .ifa_addr = (void *)&a[0], .ifa_netmask = (void *)&a[1] },
		{ .ifa_name = eth1, .ifa_addr = (void *)&a[2], .ifa_netmask = (void *)&a[1] },
		{ .ifa_name = eth9, .ifa_addr = (void *)&a[3], .ifa_netmask = (void *)&a[4] },
	};
	struct fabric_port ports[2] = { port1, { "mlx5_1", 1, 4096, true } };

	(void)state;
	l[0].ifa_next = &l[1];
	l[1].ifa_next = &l[2];
	ln("../../pci/0000:3b:00.0", "ib/mlx5_1/device");
	mk("ib/mlx5_1/ports/1/link_layer", "Ethernet");
	mk("ib/mlx5_1/ports/1/gid_attrs/ndevs/3", "eth1");
	mk("ib/mlx5_1/ports/1/gid_attrs/types/3", "RoCE v2");
	mk("net/eth1/mtu", "9000");
	run(ports, 1, l);
	only("arp-flux", "eth0 and eth1 are RDMA network devices with addresses in one subnet");
	/* The fix applied: arp_ignore 1 (all), arp_announce 2 (on each). */
	rm("conf/all/arp_ignore");
	mk("conf/all/arp_ignore", "1");
	mk("conf/eth0/arp_announce", "2");
	mk("conf/eth1/arp_announce", "2");
	run(ports, 1, l);
	assert_int_equal(rep.nfindings, 0);
	assert_true(has_fact("eth0 and eth1: one IPv4 subnet; arp_ignore 1, arp_announce 2"));
	/* Different subnets: nothing to say. */
	rm("conf/all/arp_ignore");
	mk("conf/all/arp_ignore", "0");
	a[2] = sa("192.168.2.2");
	run(ports, 1, l);
	assert_int_equal(rep.nfindings, 0);
}

static void test_not_visible(void **state)
{
	char ib2[512];

	(void)state;
	/* A container with no device. */
	snprintf(ib2, sizeof(ib2), "%s/none", root);
	paths.ib = ib2;
	mk(".dockerenv", "");
	run(NULL, 0, NULL);
	only("container", "no RDMA device is visible, and this is a container (/.dockerenv)");
	rm(".dockerenv");
	rm("proc/1/cgroup");
	mk("proc/1/cgroup", "0::/kubepods/besteffort/pod1234");
	run(NULL, 0, NULL);
	only("container", "(/proc/1/cgroup)");
	/* Not a container: a ConnectX network device without mlx5_ib. */
	rm("proc/1/cgroup");
	mk("drivers/mlx5_core", NULL);
	ln("../../../drivers/mlx5_core", "net/eth0/device/driver");
	run(NULL, 0, NULL);
	only("rdma-module", "eth0's driver mlx5_core has an RDMA side: is mlx5_ib loaded?");
	/* Devices, but no uverbs nodes. */
	paths.ib = ibp;
	rm("dev/uverbs0");
	run(&port1, 1, NULL);
	only("uverbs", "no /dev/infiniband/uverbs*");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_healthy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pcie, setup, teardown),
		cmocka_unit_test_setup_teardown(test_relaxed_ordering, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mtu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ecn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_arp_flux, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_visible, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
