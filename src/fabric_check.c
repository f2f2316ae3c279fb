/* SPDX-License-Identifier: MIT */
/*
 * The fabric checks of rdmacp doctor (fabric_check.h), each reading sysfs
 * and procfs under fabric_paths: PCIe link and relaxed ordering per device,
 * MTU, ECN and trust per RoCE port, ARP flux across the RDMA network
 * devices, and why no device is seen. Facts say what was read ("unknown"
 * where nothing could be); findings say what to change.
 */
#include "fabric_check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "rdmadev.h"
#include "sysfile.h"

#define FABRIC_MAX_DEVICES 64

static void _printf_(2, 3) fact(struct fabric_report *r, const char *fmt, ...)
{
	va_list ap;

	if (r->nfacts == FABRIC_MAX_FACTS) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(r->facts[r->nfacts++], sizeof(r->facts[0]), fmt, ap);
	va_end(ap);
}

static void _printf_(5, 6) finding(struct fabric_report *r, bool error, const char *check,
				   const char *fix, const char *fmt, ...)
{
	struct fabric_finding *f;
	va_list ap;

	if (r->nfindings == FABRIC_MAX_FINDINGS) {
		return;
	}
	f = &r->findings[r->nfindings++];
	f->error = error;
	snprintf(f->check, sizeof(f->check), "%s", check);
	snprintf(f->fix, sizeof(f->fix), "%s", fix);
	va_start(ap, fmt);
	vsnprintf(f->what, sizeof(f->what), fmt, ap);
	va_end(ap);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* The RDMA devices under p->ib, sorted; 0 when there is no such directory. */
static size_t device_names(const struct fabric_paths *p, char (*names)[64], size_t max)
{
	DIR *d = opendir(p->ib);
	struct dirent *de;
	size_t n = 0;

	while (d && (de = readdir(d)) && n < max) {
		if (de->d_name[0] != '.' && rdmadev_name_ok(de->d_name)) {
			snprintf(names[n++], 64, "%.63s", de->d_name);
		}
	}
	if (d) {
		closedir(d);
	}
	qsort(names, n, 64, cmp_name);
	return n;
}

/* A number file (decimal), or -1. */
static long read_long(const char *path)
{
	char line[64], *end;
	long v;

	if (sysfile_read_line(path, line, sizeof(line)) <= 0) {
		return -1;
	}
	errno = 0;
	v = strtol(line, &end, 10);
	return errno || end == line || v < 0 ? -1 : v;
}

/* ---- PCIe link and relaxed ordering ---- */

/* "16.0 GT/s PCIe" -> 16.0; 0 when unknown ("Unknown", a VF's). */
static double link_speed(const char *dir, const char *file, char *text, size_t len)
{
	char path[768], *end;
	double v;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (sysfile_read_line(path, text, len) <= 0) {
		snprintf(text, len, "unknown");
		return 0;
	}
	v = strtod(text, &end);
	return end == text || v <= 0 ? 0 : v;
}

/* Usable Gb/s of a link: 8b/10b up to 5 GT/s, 128b/130b from 8 GT/s on. */
static double link_gbps(double gts, long width)
{
	return gts * (double)width * (gts >= 8 ? 128.0 / 130.0 : 0.8);
}

/*
 * The Enable Relaxed Ordering bit of the PCI Express capability's Device
 * Control register: 1, 0, or -1 when the config space can't be read that
 * far (an unprivileged read gets its first 64 bytes only).
 */
static int relaxed_ordering(const char *dir)
{
	char path[768];
	uint8_t cfg[256];
	ssize_t len;
	unsigned ptr;
	int fd;

	snprintf(path, sizeof(path), "%s/config", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return -1;
	}
	len = pread(fd, cfg, sizeof(cfg), 0);
	close(fd);
	/* Status bit 4: a capability list; its head at 0x34. */
	if (len < 64 || !(cfg[0x06] & 0x10)) {
		return -1;
	}
	ptr = cfg[0x34] & 0xfcu;
	for (int hops = 0; hops < 48 && ptr >= 0x40; hops++) {
		if ((ssize_t)ptr + 10 > len) {
			return -1;
		}
		if (cfg[ptr] == 0x10) { /* PCI Express: Device Control at +8, bit 4 */
			return (cfg[ptr + 8] & 0x10) ? 1 : 0;
		}
		ptr = cfg[ptr + 1] & 0xfcu;
	}
	return -1;
}

/* A link width as text: "16", or "unknown". */
static const char *width_text(long w, char buf[static 24])
{
	if (w <= 0) {
		return "unknown";
	}
	snprintf(buf, 24, "%ld", w);
	return buf;
}

static void check_pcie(const struct fabric_paths *p, const char *dev, struct fabric_report *r)
{
	char dir[512], real[PATH_MAX], cur[32], max[32], bdf[64], cwt[24], mwt[24];
	double cs, ms;
	long cw, mw;
	int ro;

	/* The PCI address: the name of the directory the device link leads to. */
	snprintf(dir, sizeof(dir), "%s/%s/device", p->ib, dev);
	if (!realpath(dir, real)) {
		fact(r, "%s: no PCIe device under it (a software one: rxe, siw)", dev);
		return;
	}
	snprintf(bdf, sizeof(bdf), "%.63s", strrchr(real, '/') ? strrchr(real, '/') + 1 : real);
	cs = link_speed(dir, "current_link_speed", cur, sizeof(cur));
	ms = link_speed(dir, "max_link_speed", max, sizeof(max));
	snprintf(real, sizeof(real), "%s/current_link_width", dir);
	cw = read_long(real);
	snprintf(real, sizeof(real), "%s/max_link_width", dir);
	mw = read_long(real);
	ro = relaxed_ordering(dir);
	fact(r, "%s: PCIe %s: link %s x%s of %s x%s; relaxed ordering %s", dev, bdf, cur,
	     width_text(cw, cwt), max, width_text(mw, mwt),
	     ro > 0    ? "enabled"
	     : ro == 0 ? "disabled"
		       : "unknown (needs root)");
	if (cs > 0 && ms > 0 && cw > 0 && mw > 0 && (cs < ms || cw < mw)) {
		finding(
		    r, false, "pcie",
		    "put the card in a slot wired for its full width and speed (lspci -vv: LnkSta "
		    "against LnkCap), check the BIOS's PCIe bifurcation and link speed settings, "
		    "and reseat it",
		    "%s (PCIe %s) runs at %s x%ld but can do %s x%ld: about %.0f of %.0f Gb/s", dev,
		    bdf, cur, cw, max, mw, link_gbps(cs, cw), link_gbps(ms, mw));
	}
	if (ro == 0) {
		finding(
		    r, false, "relaxed-ordering",
		    "leave it off on hosts the kernel lists as broken for it (some Intel Xeon root "
		    "ports); elsewhere (AMD EPYC, ARM, GPU memory) enable it in the BIOS, or force "
		    "it in the NIC's firmware (ConnectX: mlxconfig -d BDF set "
		    "PCI_WR_ORDERING=1)",
		    "%s (PCIe %s): relaxed ordering is disabled in its Device Control register: "
		    "every DMA write is strictly ordered",
		    dev, bdf);
	}
}

/* ---- RoCE ports: MTU, ECN, trust ---- */

unsigned fabric_roce_mtu(unsigned netdev_mtu)
{
	/* GRH 40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4 (the kernel's iboe_get_mtu). */
	unsigned room = netdev_mtu > 96 ? netdev_mtu - 96 : 0;

	for (unsigned m = 4096; m >= 256; m /= 2) {
		if (room >= m) {
			return m;
		}
	}
	return 0;
}

static void check_mtu(const struct fabric_paths *p, const struct fabric_port *pt,
		      const char *ifname, struct fabric_report *r)
{
	char path[512];
	long mtu;
	unsigned roce;

	snprintf(path, sizeof(path), "%s/%s/mtu", p->net, ifname);
	mtu = read_long(path);
	if (mtu <= 0) {
		fact(r, "%s port %u (%s): MTU unknown", pt->dev, pt->num, ifname);
		return;
	}
	roce = fabric_roce_mtu((unsigned)mtu);
	fact(r, "%s port %u (%s): MTU %ld, RoCE MTU %u (active %u)", pt->dev, pt->num, ifname, mtu,
	     roce, pt->active_mtu);
	if (pt->active_mtu && roce && pt->active_mtu != roce) {
		finding(
		    r, false, "mtu",
		    "set the MTU on the network device again (ip link set dev IF mtu N) so the "
		    "port follows it, and the same MTU on the peer and every switch port between",
		    "%s port %u's active MTU is %u but %s's MTU %ld makes %u: the two disagree",
		    pt->dev, pt->num, pt->active_mtu, ifname, mtu, roce);
	} else if (roce && roce < 4096) {
		finding(r, false, "mtu",
			"raise the MTU to 9000 on both hosts (ip link set dev IF mtu 9000) and on "
			"every switch port between them: a path MTU below the RoCE MTU drops "
			"packets without a word",
			"%s's MTU %ld limits %s port %u to %u-byte RoCE packets (4096 needs 4192)",
			ifname, mtu, pt->dev, pt->num, roce);
	}
}

/* "3 5" for the priorities whose ecn/<kind>/enable/<prio> is 1; false when there is no such dir. */
static bool ecn_prios(const struct fabric_paths *p, const char *ifname, const char *kind, char *out,
		      size_t len)
{
	char path[512];
	bool any = false;

	out[0] = '\0';
	for (int prio = 0; prio < 8; prio++) {
		long v;

		snprintf(path, sizeof(path), "%s/%s/ecn/%s/enable/%d", p->net, ifname, kind, prio);
		v = read_long(path);
		any |= v >= 0;
		if (v == 1) {
			size_t n = strlen(out);

			snprintf(out + n, len - n, "%s%d", n ? " " : "", prio);
		}
	}
	return any;
}

static void check_qos(const struct fabric_paths *p, const struct fabric_port *pt,
		      const char *ifname, struct fabric_report *r)
{
	char np[32], rp[32], path[512], trust[32];
	bool has_np = ecn_prios(p, ifname, "roce_np", np, sizeof(np));
	bool has_rp = ecn_prios(p, ifname, "roce_rp", rp, sizeof(rp));

	snprintf(path, sizeof(path), "%s/%s/qos/trust", p->net, ifname);
	if (sysfile_read_line(path, trust, sizeof(trust)) <= 0) {
		snprintf(trust, sizeof(trust), "unknown");
	}
	fact(r,
	     "%s (%s port %u): ECN notification point on priorities %s, reaction point on %s; "
	     "trust %s; PFC unknown ('mlnx_qos -i %s' or 'dcb pfc show dev %s' shows it)",
	     ifname, pt->dev, pt->num, has_np ? (*np ? np : "none") : "unknown",
	     has_rp ? (*rp ? rp : "none") : "unknown", trust, ifname, ifname);
	if ((has_np && !*np) || (has_rp && !*rp)) {
		finding(r, false, "ecn",
			"enable ECN (DCQCN) on the lossless priority, both points: echo 1 > "
			"/sys/class/net/IF/ecn/roce_np/enable/PRIO and roce_rp/enable/PRIO, with "
			"ECN marking on the switches",
			"%s (%s port %u): ECN is off on every priority (%s%s%s): congestion then "
			"pauses the fabric with PFC, or drops packets on a lossy one",
			ifname, pt->dev, pt->num, has_np && !*np ? "notification point" : "",
			has_np && !*np && has_rp && !*rp ? ", " : "",
			has_rp && !*rp ? "reaction point" : "");
	}
}

static void check_port(const struct fabric_paths *p, const struct fabric_port *pt,
		       struct fabric_report *r)
{
	char names[8][64];
	size_t n;

	if (!pt->ethernet) {
		return; /* InfiniBand: the subnet manager sets MTU and QoS */
	}
	if (rdmadev_port_netdevs(p->ib, p->net, pt->dev, pt->num, names, ARRAY_SIZE(names), &n) <
	    0) {
		fact(r, "%s port %u: no network device: MTU, ECN and trust unknown", pt->dev,
		     pt->num);
		return;
	}
	check_mtu(p, pt, names[0], r);
	check_qos(p, pt, names[0], r);
}

/* ---- ARP flux ---- */

/* The effective value of an ARP sysctl for ifname: the larger of all's and its own; -1 unknown. */
static long arp_sysctl(const struct fabric_paths *p, const char *ifname, const char *key)
{
	char path[512];
	long all, own;

	snprintf(path, sizeof(path), "%s/all/%s", p->ipv4conf, key);
	all = read_long(path);
	snprintf(path, sizeof(path), "%s/%s/%s", p->ipv4conf, ifname, key);
	own = read_long(path);
	return all < 0 && own < 0 ? -1 : MAX(all, own);
}

static bool same_subnet4(const struct ifaddrs *a, const struct ifaddrs *b)
{
	const struct sockaddr_in *x = (const void *)a->ifa_addr, *y = (const void *)b->ifa_addr;
	const struct sockaddr_in *m = (const void *)a->ifa_netmask;

	if (!m || m->sin_family != AF_INET) {
		return false;
	}
	return (x->sin_addr.s_addr & m->sin_addr.s_addr) ==
	       (y->sin_addr.s_addr & m->sin_addr.s_addr);
}

/* Is ifa an IPv4 address of one of the names? Its index there, or -1. */
static int rdma_if(const struct ifaddrs *ifa, char (*names)[64], size_t n)
{
	if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET) {
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (strcmp(ifa->ifa_name, names[i]) == 0) {
			return (int)i;
		}
	}
	return -1;
}

static void arp_flux_pair(const struct fabric_paths *p, const char *x, const char *y,
			  struct fabric_report *r)
{
	long ig = MIN(arp_sysctl(p, x, "arp_ignore"), arp_sysctl(p, y, "arp_ignore"));
	long an = MIN(arp_sysctl(p, x, "arp_announce"), arp_sysctl(p, y, "arp_announce"));

	fact(r, "%s and %s: one IPv4 subnet; arp_ignore %ld, arp_announce %ld (-1: unknown)", x, y,
	     ig, an);
	if (ig == 0 || an == 0) {
		finding(
		    r, false, "arp-flux",
		    "sysctl -w net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 "
		    "(in /etc/sysctl.d to keep it), with a routing rule per interface (ip rule add "
		    "from ADDR table N), or put each NIC in its own subnet",
		    "%s and %s are RDMA network devices with addresses in one subnet and "
		    "arp_ignore/arp_announce 0: either answers ARP for the other's address, so "
		    "a peer's lanes for one NIC can arrive on the other (ARP flux)",
		    x, y);
	}
}

static void check_arp_flux(const struct fabric_paths *p, char (*devs)[64], size_t ndevs,
			   const struct ifaddrs *addrs, struct fabric_report *r)
{
	char names[32][64], done[8][2][64];
	size_t n = 0, ndone = 0;

	for (size_t i = 0; i < ndevs; i++) {
		size_t k;

		if (rdmadev_netdevs(p->ib, p->net, devs[i], names + n, ARRAY_SIZE(names) - n, &k) ==
		    0) {
			n += k;
		}
	}
	for (const struct ifaddrs *a = addrs; a; a = a->ifa_next) {
		for (const struct ifaddrs *b = a->ifa_next; b; b = b->ifa_next) {
			int ia = rdma_if(a, names, n), ib = rdma_if(b, names, n);
			bool seen = false;

			if (ia < 0 || ib < 0 || ia == ib || !same_subnet4(a, b)) {
				continue;
			}
			for (size_t d = 0; d < ndone; d++) {
				seen |= !strcmp(done[d][0], names[ia]) &&
					!strcmp(done[d][1], names[ib]);
			}
			if (!seen && ndone < ARRAY_SIZE(done)) {
				snprintf(done[ndone][0], 64, "%s", names[ia]);
				snprintf(done[ndone++][1], 64, "%s", names[ib]);
				arp_flux_pair(p, names[ia], names[ib], r);
			}
		}
	}
}

/* ---- no device seen ---- */

/* Is this a container, and which file says so; NULL when nothing does. */
static const char *container_sign(const struct fabric_paths *p)
{
	static const char *const files[] = { "/.dockerenv", "/run/.containerenv" };
	static const char *const words[] = { "docker", "kubepods", "containerd", "libpod", "lxc" };
	char path[512], line[512];
	FILE *f;

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s%s", p->root, files[i]);
		if (access(path, F_OK) == 0) {
			return files[i];
		}
	}
	snprintf(path, sizeof(path), "%s/proc/1/cgroup", p->root);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		for (size_t i = 0; i < ARRAY_SIZE(words); i++) {
			if (strstr(line, words[i])) {
				fclose(f);
				return "/proc/1/cgroup";
			}
		}
	}
	if (f) {
		fclose(f);
	}
	return NULL;
}

/* The RDMA module a network driver's RDMA side needs, or NULL for a driver without one. */
static const char *rdma_module(const char *driver)
{
	static const char *const map[][2] = {
		{ "mlx5_core", "mlx5_ib" }, { "mlx4_en", "mlx4_ib" },	  { "bnxt_en", "bnxt_re" },
		{ "ice", "irdma" },	    { "i40e", "irdma" },	  { "qede", "qedr" },
		{ "cxgb4", "iw_cxgb4" },    { "hns3", "hns_roce_hw_v2" }, { "erdma", "erdma" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
		if (strcmp(driver, map[i][0]) == 0) {
			return map[i][1];
		}
	}
	return NULL;
}

/* A network device whose driver has an RDMA side: its name, driver and module; false if none. */
static bool capable_netdev(const struct fabric_paths *p, char *ifname, char *driver,
			   const char **module)
{
	DIR *d = opendir(p->net);
	struct dirent *de;
	bool found = false;

	while (d && !found && (de = readdir(d))) {
		char path[512], link[PATH_MAX];
		ssize_t n;

		if (de->d_name[0] == '.' || !rdmadev_name_ok(de->d_name)) {
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s/device/driver", p->net, de->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0) {
			continue;
		}
		link[n] = '\0';
		*module = rdma_module(strrchr(link, '/') ? strrchr(link, '/') + 1 : link);
		if (*module) {
			snprintf(ifname, 64, "%.63s", de->d_name);
			snprintf(driver, 64, "%.63s",
				 strrchr(link, '/') ? strrchr(link, '/') + 1 : link);
			found = true;
		}
	}
	if (d) {
		closedir(d);
	}
	return found;
}

static size_t count_uverbs(const struct fabric_paths *p)
{
	DIR *d = opendir(p->devib);
	struct dirent *de;
	size_t n = 0;

	while (d && (de = readdir(d))) {
		n += strncmp(de->d_name, "uverbs", 6) == 0;
	}
	if (d) {
		closedir(d);
	}
	return n;
}

static void check_visible(const struct fabric_paths *p, size_t ndevs, struct fabric_report *r)
{
	const char *sign = container_sign(p), *module = NULL;
	size_t nuverbs = count_uverbs(p);
	char ifname[64], driver[64];

	fact(r, "container: %s; %zu RDMA devices, %zu uverbs character devices", sign ? sign : "no",
	     ndevs, nuverbs);
	if (ndevs == 0 && sign) {
		finding(r, false, "container",
			"pass the devices in: docker/podman run --device=/dev/infiniband/uverbs0 "
			"--device=/dev/infiniband/rdma_cm --cap-add=IPC_LOCK --ulimit memlock=-1 "
			"(and --network=host, or the RDMA netns the device is in); on Kubernetes, "
			"the RDMA shared device plugin or the SR-IOV network operator",
			"no RDMA device is visible, and this is a container (%s)", sign);
	} else if (ndevs == 0 && capable_netdev(p, ifname, driver, &module)) {
		finding(
		    r, false, "rdma-module",
		    "load the RDMA side of the driver (modprobe MODULE: mlx5_ib, irdma, bnxt_re, "
		    "qedr, iw_cxgb4...), and check that 'rdma system' shows the device in this "
		    "network namespace",
		    "no RDMA device, but %s's driver %s has an RDMA side: is %s loaded?", ifname,
		    driver, module);
	} else if (ndevs > 0 && nuverbs == 0) {
		finding(
		    r, false, "uverbs",
		    sign ? "pass /dev/infiniband/uverbs* and /dev/infiniband/rdma_cm into the "
			   "container (--device)"
			 : "modprobe ib_uverbs rdma_ucm; rdma-core's udev rules create the nodes",
		    "%zu RDMA devices, but no /dev/infiniband/uverbs*: verbs cannot open them",
		    ndevs);
	}
}

void fabric_check(const struct fabric_paths *p, const struct fabric_port *ports, size_t nports,
		  const struct ifaddrs *addrs, struct fabric_report *r)
{
	char devs[FABRIC_MAX_DEVICES][64];
	size_t ndevs = device_names(p, devs, ARRAY_SIZE(devs));

	memset(r, 0, sizeof(*r));
	check_visible(p, ndevs, r);
	for (size_t i = 0; i < ndevs; i++) {
		check_pcie(p, devs[i], r);
	}
	for (size_t i = 0; i < nports; i++) {
		check_port(p, &ports[i], r);
	}
	check_arp_flux(p, devs, ndevs, addrs, r);
}
