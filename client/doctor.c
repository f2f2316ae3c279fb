/* SPDX-License-Identifier: MIT */
/*
 * rdmacp doctor [--json]: a preflight check of this host. Reports the RDMA
 * devices (ports, state, link layer, MTU, GIDs), RLIMIT_MEMLOCK against the
 * pool this client would pin, whether io_uring can be set up, and huge
 * pages. Every problem comes with its fix.
 *
 * Exit 0 when the tcp transport can work (a missing RDMA device is only a
 * warning: verbs is then unavailable); EXIT_LOCAL_IO when io_uring cannot be
 * set up or the pool cannot be pinned, since every transfer needs both.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <liburing.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#ifdef HAVE_VERBS
#include <infiniband/verbs.h>

#include "verbs_wr.h"
#endif

#include "client.h"
#include "engine.h"
#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "memfit.h"
#include "pool.h"
#include "output.h"
#include "proto/msg.h"
#include "sysfile.h"
#include "xport.h"

/* What the engine asks io_uring for (src/engine.c URING_ENTRIES). */
#define DOCTOR_URING_ENTRIES 2048
#define DOCTOR_MAX_PROBLEMS  64
#define DOCTOR_MAX_GIDS	     32	  /* per port: the non-zero ones we show */
#define DOCTOR_GID_SCAN	     1024 /* table indexes we look at, per port */
#define DOCTOR_MAX_PORTS     8

struct doctor_problem {
	bool error; /* false: a warning, the tcp transport still works */
	char what[512];
	char fix[512];
};

struct doctor_gid {
	unsigned index;
	char addr[INET6_ADDRSTRLEN];
	char type[16]; /* "IB", "RoCE v1", "RoCE v2", "?" */
	char netdev[IF_NAMESIZE];
	bool ipv4_mapped;
};

struct doctor_port {
	unsigned num;
	char state[16];
	char link_layer[16];
	unsigned active_mtu; /* bytes */
	unsigned ngids;
	unsigned gid_tbl_len;
	struct doctor_gid gids[DOCTOR_MAX_GIDS];
};

struct doctor_device {
	char name[64];
	char error[128];    /* open/query failure, or "" */
	char transport[24]; /* "InfiniBand/RoCE", "iWARP", ... */
	int path;	    /* XPORT_PATH_*, or -EOPNOTSUPP: no verbs lanes on it */
	unsigned nports;
	struct doctor_port ports[DOCTOR_MAX_PORTS];
};

struct doctor {
	/* devices */
	bool verbs_ok;
	char verbs_why[256];
	size_t ndevices;
	struct doctor_device *devices;
	/* memlock */
	uint64_t pool_need;  /* what verbs pins: the pool for io_uring and each device */
	uint64_t pool_bytes; /* one pool */
	uint64_t memlock_cur, memlock_max; /* RLIM_INFINITY: unlimited */
	uint64_t tcp_pool;		   /* the pool a tcp push fits under it (0: none) */
	int cap_ipc_lock;		   /* 1, 0, or -errno */
	bool memlock_ok;
	/* io_uring */
	int uring_sysctl; /* -1: no such file */
	bool uring_ok;
	int uring_err; /* -errno of io_uring_queue_init */
	bool uring_ops_ok;
	char uring_missing_ops[128];
	/* huge pages */
	long huge_total, huge_free, huge_size_kb; /* -1: unknown */
	char thp[32];
	bool pool_huge;
	/* findings */
	size_t nproblems;
	struct doctor_problem problems[DOCTOR_MAX_PROBLEMS];
};

static void problem(struct doctor *d, bool error, const char *fix, const char *fmt, ...)
    _printf_(4, 5);
static void problem(struct doctor *d, bool error, const char *fix, const char *fmt, ...)
{
	struct doctor_problem *p;
	va_list ap;

	if (d->nproblems == DOCTOR_MAX_PROBLEMS) {
		return;
	}
	p = &d->problems[d->nproblems++];
	p->error = error;
	va_start(ap, fmt);
	vsnprintf(p->what, sizeof(p->what), fmt, ap);
	va_end(ap);
	snprintf(p->fix, sizeof(p->fix), "%s", fix);
}

/* ---- RDMA devices ---------------------------------------------------------- */

#ifdef HAVE_VERBS
static const char *link_layer_name(uint8_t ll)
{
	switch (ll) {
	case IBV_LINK_LAYER_INFINIBAND:
		return "InfiniBand";
	case IBV_LINK_LAYER_ETHERNET:
		return "Ethernet";
	default:
		return "unknown";
	}
}

static unsigned mtu_bytes(enum ibv_mtu mtu)
{
	/* IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5 */
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0;
}

/* ibv_port_state_str says "active"; the tools (ibstat, rdma link) say ACTIVE. */
static const char *port_state_name(enum ibv_port_state st)
{
	switch (st) {
	case IBV_PORT_DOWN:
		return "DOWN";
	case IBV_PORT_INIT:
		return "INIT";
	case IBV_PORT_ARMED:
		return "ARMED";
	case IBV_PORT_ACTIVE:
		return "ACTIVE";
	case IBV_PORT_ACTIVE_DEFER:
		return "ACTIVE_DEFER";
	default:
		return "NOP";
	}
}

static const char *gid_type_name(uint32_t type)
{
	switch (type) {
	case IBV_GID_TYPE_IB:
		return "IB";
	case IBV_GID_TYPE_ROCE_V1:
		return "RoCE v1";
	case IBV_GID_TYPE_ROCE_V2:
		return "RoCE v2";
	default:
		return "?";
	}
}

static bool gid_is_zero(const union ibv_gid *g)
{
	static const uint8_t zero[16];

	return memcmp(g->raw, zero, sizeof(zero)) == 0;
}

/* ::ffff:a.b.c.d: the entry RoCE v2 over IPv4 (rdma_cm with an IPv4 address) uses. */
static bool gid_is_ipv4_mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

static void gid_store(struct doctor_port *pt, unsigned index, const union ibv_gid *g,
		      const char *type, const char *netdev)
{
	struct doctor_gid *out;

	if (pt->ngids == DOCTOR_MAX_GIDS) {
		return;
	}
	out = &pt->gids[pt->ngids++];
	out->index = index;
	out->ipv4_mapped = gid_is_ipv4_mapped(g);
	/* inet_ntop writes a mapped address as ::ffff:a.b.c.d already. */
	inet_ntop(AF_INET6, g->raw, out->addr, sizeof(out->addr));
	snprintf(out->type, sizeof(out->type), "%s", type);
	snprintf(out->netdev, sizeof(out->netdev), "%s", netdev);
}

/*
 * Non-zero GIDs of one port with their types. ibv_query_gid_ex knows the type
 * and the netdev; where the kernel or rdma-core lacks it, ibv_query_gid plus
 * the type from sysfs (gid_attrs/types/<idx>) says the same.
 */
static void port_gids(struct ibv_context *ctx, const char *dev, struct doctor_port *pt)
{
	unsigned n = MIN(pt->gid_tbl_len, (unsigned)DOCTOR_GID_SCAN);
	bool legacy = false;

	for (unsigned i = 0; i < n; i++) {
		struct ibv_gid_entry e;
		union ibv_gid g;
		char path[256], type[32], netdev[IF_NAMESIZE] = "";
		int r;

		if (!legacy) {
			r = ibv_query_gid_ex(ctx, pt->num, i, &e, 0);
			if (r == 0) {
				if (!gid_is_zero(&e.gid)) {
					if (e.ndev_ifindex) {
						(void)if_indextoname(e.ndev_ifindex, netdev);
					}
					gid_store(pt, i, &e.gid, gid_type_name(e.gid_type), netdev);
				}
				continue;
			}
			if (r == ENODATA || r == EINVAL || r == ENOENT) {
				continue; /* an empty slot */
			}
			legacy = true;
		}
		if (ibv_query_gid(ctx, (uint8_t)pt->num, (int)i, &g) != 0 || gid_is_zero(&g)) {
			continue;
		}
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%u",
			 dev, pt->num, i);
		if (sysfile_read_line(path, type, sizeof(type)) < 0) {
			snprintf(type, sizeof(type), "?");
		} else if (!strcmp(type, "IB/RoCE v1")) {
			snprintf(type, sizeof(type), "%s",
				 pt->link_layer[0] == 'E' ? "RoCE v1" : "IB");
		}
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%u/gid_attrs/ndevs/%u",
			 dev, pt->num, i);
		if (sysfile_read_line(path, netdev, sizeof(netdev)) < 0) {
			netdev[0] = '\0';
		}
		gid_store(pt, i, &g, type, netdev);
	}
}

static bool port_has_roce_v2_ipv4(const struct doctor_port *pt)
{
	for (unsigned i = 0; i < pt->ngids; i++) {
		if (pt->gids[i].ipv4_mapped && !strcmp(pt->gids[i].type, "RoCE v2")) {
			return true;
		}
	}
	return false;
}

static void port_problems(struct doctor *d, const struct doctor_device *dev,
			  const struct doctor_port *pt)
{
	if (strcmp(pt->state, "ACTIVE") != 0) {
		problem(d, false,
			"bring the link up: check the cable/switch, 'ip link set NETDEV up' for "
			"RoCE, a running subnet manager (opensm) for InfiniBand",
			"%s port %u is %s, not ACTIVE: verbs cannot use it", dev->name, pt->num,
			pt->state);
	}
	if (!strcmp(pt->link_layer, "Ethernet") && !port_has_roce_v2_ipv4(pt)) {
		problem(d, false,
			"give the port's network interface an IPv4 address ('ip addr add ADDR/LEN "
			"dev NETDEV'); rdmacp connects with RoCE v2 over IP",
			"%s port %u has no RoCE v2 GID for an IPv4 address: rdma_cm cannot reach "
			"it by IPv4",
			dev->name, pt->num);
	}
}

static void device_scan(struct ibv_device *ibdev, struct doctor *d, struct doctor_device *out)
{
	struct ibv_context *ctx;
	struct ibv_device_attr da;

	const char *force = getenv("RDMACP_TEST_WRITE_SEND");

	snprintf(out->name, sizeof(out->name), "%s", ibv_get_device_name(ibdev));
	/* What the copy's lanes on it would be (xport_verbs_path): iWARP has no immediates. */
	snprintf(out->transport, sizeof(out->transport), "%s",
		 verbs_transport_name(ibdev->transport_type));
	out->path = verbs_transport_path(ibdev->transport_type, force && *force);
	if (out->path < 0) {
		problem(d, false, "use another device, or --transport tcp",
			"%s: the %s transport has no RC RDMA WRITE: verbs lanes cannot use it",
			out->name, out->transport);
	}
	ctx = ibv_open_device(ibdev);
	if (!ctx) {
		snprintf(out->error, sizeof(out->error), "ibv_open_device: %s", strerror(errno));
		problem(d, false,
			"check /dev/infiniband/uverbs* permissions and that the provider library "
			"(ibverbs-providers) matches the kernel driver",
			"%s: cannot open the device (%s)", out->name, strerror(errno));
		return;
	}
	if (ibv_query_device(ctx, &da) != 0) {
		snprintf(out->error, sizeof(out->error), "ibv_query_device failed");
		ibv_close_device(ctx);
		return;
	}
	out->nports = MIN((unsigned)da.phys_port_cnt, (unsigned)DOCTOR_MAX_PORTS);
	for (unsigned p = 0; p < out->nports; p++) {
		struct doctor_port *pt = &out->ports[p];
		struct ibv_port_attr pa;

		pt->num = p + 1;
		if (ibv_query_port(ctx, (uint8_t)pt->num, &pa) != 0) {
			snprintf(pt->state, sizeof(pt->state), "?");
			continue;
		}
		snprintf(pt->state, sizeof(pt->state), "%s", port_state_name(pa.state));
		snprintf(pt->link_layer, sizeof(pt->link_layer), "%s",
			 link_layer_name(pa.link_layer));
		pt->active_mtu = mtu_bytes(pa.active_mtu);
		pt->gid_tbl_len = (unsigned)MAX(pa.gid_tbl_len, 0);
		port_gids(ctx, out->name, pt);
		port_problems(d, out, pt);
	}
	ibv_close_device(ctx);
}
#endif

static void check_devices(struct doctor *d)
{
#ifdef HAVE_VERBS
	struct ibv_device **list;
	int n = 0;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list || n <= 0) {
		if (!list) {
			snprintf(d->verbs_why, sizeof(d->verbs_why), "ibv_get_device_list: %s",
				 strerror(errno ? errno : ENODEV));
		} else {
			snprintf(d->verbs_why, sizeof(d->verbs_why),
				 "ibv_get_device_list found none");
			ibv_free_device_list(list);
		}
		problem(d, false,
			"load the driver (modprobe mlx5_ib, or rdma_rxe for Soft-RoCE: 'rdma link "
			"add rxe0 type rxe netdev ETH'), or use --transport tcp",
			"no RDMA devices (%s): the verbs transport is unavailable, tcp works",
			d->verbs_why);
		return;
	}
	d->devices = calloc((size_t)n, sizeof(*d->devices));
	if (!d->devices) {
		ibv_free_device_list(list);
		snprintf(d->verbs_why, sizeof(d->verbs_why), "out of memory");
		return;
	}
	d->ndevices = (size_t)n;
	for (int i = 0; i < n; i++) {
		device_scan(list[i], d, &d->devices[i]);
	}
	ibv_free_device_list(list);
	for (size_t i = 0; i < d->ndevices; i++) {
		for (unsigned p = 0; p < d->devices[i].nports; p++) {
			d->verbs_ok |= !strcmp(d->devices[i].ports[p].state, "ACTIVE");
		}
	}
	if (!d->verbs_ok) {
		snprintf(d->verbs_why, sizeof(d->verbs_why), "no port is ACTIVE");
	}
#else
	snprintf(d->verbs_why, sizeof(d->verbs_why), "this build has no verbs transport");
	problem(d, false,
		"rebuild with -DENABLE_VERBS=ON (libibverbs-dev, librdmacm-dev), or "
		"use --transport tcp",
		"no RDMA devices (this build has no verbs transport): tcp works");
#endif
}

/* ---- memlock ------------------------------------------------------------------ */

/*
 * What the engine pins (engine_pinned_bytes): a push pins pool_chunks, a pull
 * the slots, over verbs with a copy of each; report the larger.
 */
static uint64_t pool_bytes(const struct client_opts *o, enum engine_role role)
{
	struct engine_params ep = { .role = role,
				    .chunk_size = o->chunk_size,
				    .slots = o->slots,
				    .pool_chunks = MAX(o->pool_chunks, 2u) };
	static const struct xport_ops no_fence = { .name = "verbs" };

	return engine_pinned_bytes(&ep, &no_fence);
}

static void human_bytes(uint64_t v, char *buf, size_t len);

/* What a tcp push fits under the limit (client/fit.c does the same): 0 if nothing. */
static uint64_t tcp_pool_bytes(const struct doctor *d, const struct client_opts *o)
{
	struct engine_params ep = { .role = ENGINE_SENDER,
				    .chunk_size = o->chunk_size,
				    .slots = o->slots,
				    .pool_chunks = MAX(o->pool_chunks, 2u) };

	if (memfit_engine(&ep, &xport_tcp_ops, memfit_budget(d->memlock_cur, d->cap_ipc_lock > 0)) <
	    0) {
		return 0;
	}
	return engine_pinned_bytes(&ep, &xport_tcp_ops);
}

static void check_memlock(struct doctor *d, const struct client_opts *o)
{
	uint64_t push = pool_bytes(o, ENGINE_SENDER);
	uint64_t pull = pool_bytes(o, ENGINE_RECEIVER);
	struct rlimit rl;
	char advice[512];

	/* Verbs: once per device registration and once for io_uring (memfit_verbs_need). */
	d->pool_bytes = MAX(push, pull);
	d->pool_need = memfit_verbs_need(d->pool_bytes, o->ndevices);
	d->cap_ipc_lock = pool_has_cap_ipc_lock();
	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
		d->memlock_cur = d->memlock_max = 0;
	} else {
		d->memlock_cur = rl.rlim_cur;
		d->memlock_max = rl.rlim_max;
	}
	d->memlock_ok = pool_memlock_check(d->pool_need, advice, sizeof(advice)) == 0;
	d->tcp_pool = tcp_pool_bytes(d, o);
	if (!d->memlock_ok) {
		char *how = strstr(advice, ": raise it with ");
		char fix[512];

		/* pool_memlock_advice says "<problem>: raise it with <ways>": split the two. */
		if (how) {
			*how = '\0';
			how += strlen(": raise it with ");
		}
		snprintf(fix, sizeof(fix),
			 "raise RLIMIT_MEMLOCK with %s; or grant CAP_IPC_LOCK "
			 "(AmbientCapabilities=CAP_IPC_LOCK); or pin less with a smaller "
			 "--chunk-size",
			 how ? how : "'ulimit -l unlimited'");
		if (d->tcp_pool > 0) {
			char tcp[32];

			/* tcp copies fit a smaller pool (client/fit.c): only verbs needs more. */
			human_bytes(d->tcp_pool, tcp, sizeof(tcp));
			problem(
			    d, d->ndevices > 0, fix,
			    "%s, and no CAP_IPC_LOCK: enough for tcp (a %s pool), not for verbs",
			    advice, tcp);
		} else {
			problem(d, true, fix, "%s, and no CAP_IPC_LOCK", advice);
		}
	}
}

/* ---- io_uring ------------------------------------------------------------------- */

static const char *uring_sysctl_meaning(int v)
{
	switch (v) {
	case -1:
		return "no such sysctl (kernel before 6.6): io_uring is not switched off there";
	case 0:
		return "0: enabled for all processes";
	case 1:
		return "1: only for processes in kernel.io_uring_group or with CAP_SYS_ADMIN";
	case 2:
		return "2: disabled for all processes";
	default:
		return "unknown value";
	}
}

/* The opcodes the engine submits; a kernel too old for one fails mid-transfer. */
static void uring_probe_ops(struct doctor *d, struct io_uring *ring)
{
	static const struct {
		int op;
		const char *name;
	} ops[] = {
		{ IORING_OP_READ_FIXED, "READ_FIXED" },
		{ IORING_OP_WRITE_FIXED, "WRITE_FIXED" },
		{ IORING_OP_FSYNC, "FSYNC" },
	};
	struct io_uring_probe *probe = io_uring_get_probe_ring(ring);

	d->uring_ops_ok = true;
	if (!probe) {
		return; /* kernel without IORING_REGISTER_PROBE: the init test is all we have */
	}
	for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
		if (!io_uring_opcode_supported(probe, ops[i].op)) {
			size_t len = strlen(d->uring_missing_ops);
			snprintf(d->uring_missing_ops + len, sizeof(d->uring_missing_ops) - len,
				 "%s%s", len ? " " : "", ops[i].name);
			d->uring_ops_ok = false;
		}
	}
	io_uring_free_probe(probe);
}

static void check_uring(struct doctor *d)
{
	struct io_uring ring;
	char buf[32];
	int r;

	d->uring_sysctl = -1;
	if (sysfile_read_line("/proc/sys/kernel/io_uring_disabled", buf, sizeof(buf)) >= 0) {
		d->uring_sysctl = atoi(buf);
	}
	r = io_uring_queue_init(DOCTOR_URING_ENTRIES, &ring, 0);
	if (r < 0) {
		d->uring_err = r;
		if (r == -EPERM && d->uring_sysctl >= 1) {
			problem(d, true,
				d->uring_sysctl == 1
				    ? "'sysctl kernel.io_uring_disabled=0', or run rdmacp in the "
				      "group named by kernel.io_uring_group"
				    : "'sysctl kernel.io_uring_disabled=0' (as root)",
				"io_uring is unusable: io_uring_queue_init: %s "
				"(kernel.io_uring_disabled=%d)",
				strerror(-r), d->uring_sysctl);
		} else if (r == -EPERM || r == -ENOSYS) {
			problem(
			    d, true,
			    "a seccomp filter or container runtime blocks io_uring (Docker's "
			    "default profile does): allow io_uring_setup, io_uring_enter and "
			    "io_uring_register ('docker run --security-opt seccomp=PROFILE' with "
			    "them allowed); ENOSYS can also mean a kernel built without "
			    "CONFIG_IO_URING (use 5.10 or newer with it)",
			    "io_uring is unusable: io_uring_queue_init: %s", strerror(-r));
		} else if (r == -ENOMEM) {
			problem(d, true,
				"raise RLIMIT_MEMLOCK ('ulimit -l unlimited'): the kernel charges "
				"io_uring's rings to it unless the process has CAP_IPC_LOCK",
				"io_uring is unusable: io_uring_queue_init: %s", strerror(-r));
		} else {
			problem(d, true, "check the kernel log (dmesg) and the kernel version",
				"io_uring is unusable: io_uring_queue_init: %s", strerror(-r));
		}
		return;
	}
	uring_probe_ops(d, &ring);
	io_uring_queue_exit(&ring);
	if (!d->uring_ops_ok) {
		problem(d, true, "use a kernel of 5.10 or newer",
			"io_uring lacks operations rdmacp needs: %s", d->uring_missing_ops);
		return;
	}
	d->uring_ok = true;
}

/* ---- huge pages ----------------------------------------------------------------- */

static void check_hugepages(struct doctor *d)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/meminfo", "re");
	char line[256], thp[128];

	d->huge_total = d->huge_free = d->huge_size_kb = -1;
	while (f && fgets(line, sizeof(line), f)) {
		long v;

		if (sscanf(line, "HugePages_Total: %ld", &v) == 1) {
			d->huge_total = v;
		} else if (sscanf(line, "HugePages_Free: %ld", &v) == 1) {
			d->huge_free = v;
		} else if (sscanf(line, "Hugepagesize: %ld kB", &v) == 1) {
			d->huge_size_kb = v;
		}
	}
	snprintf(d->thp, sizeof(d->thp), "unknown");
	if (sysfile_read_line("/sys/kernel/mm/transparent_hugepage/enabled", thp, sizeof(thp)) >=
	    0) {
		char *l = strchr(thp, '['), *r = l ? strchr(l, ']') : NULL;

		if (l && r) {
			*r = '\0';
			snprintf(d->thp, sizeof(d->thp), "%s", l + 1);
		}
	}
	/* src/pool.c: MAP_HUGETLB (2 MiB) when the size is a multiple and pages are free. */
	d->pool_huge = d->huge_size_kb == 2048 && d->huge_free > 0 &&
		       d->pool_bytes % (2u << 20) == 0 &&
		       (uint64_t)d->huge_free * (2u << 20) >= d->pool_bytes;
}

/* ---- output --------------------------------------------------------------------- */

static void json_limit(FILE *f, uint64_t v)
{
	if (v == (uint64_t)RLIM_INFINITY) {
		fputs("null", f);
	} else {
		fprintf(f, "%" PRIu64, v);
	}
}

static void print_json_port(FILE *f, const struct doctor_port *pt)
{
	fprintf(f, "{\"port\":%u,\"state\":", pt->num);
	output_json_string(f, pt->state);
	fputs(",\"link_layer\":", f);
	output_json_string(f, pt->link_layer);
	fprintf(f, ",\"active_mtu\":%u,\"gid_table_len\":%u,\"gids\":[", pt->active_mtu,
		pt->gid_tbl_len);
	for (unsigned g = 0; g < pt->ngids; g++) {
		const struct doctor_gid *gd = &pt->gids[g];

		fprintf(f, "%s{\"index\":%u,\"gid\":", g ? "," : "", gd->index);
		output_json_string(f, gd->addr);
		fputs(",\"type\":", f);
		output_json_string(f, gd->type);
		fprintf(f, ",\"ipv4_mapped\":%s,\"ipv4\":", gd->ipv4_mapped ? "true" : "false");
		output_json_string(
		    f, gd->ipv4_mapped && strrchr(gd->addr, ':') ? strrchr(gd->addr, ':') + 1 : "");
		fputs(",\"netdev\":", f);
		output_json_string(f, gd->netdev);
		fputc('}', f);
	}
	fputs("]}", f);
}

static void print_json(const struct doctor *d, bool ok)
{
	FILE *f = stdout;

	fputs("{\"verbs\":{\"available\":", f);
	fputs(d->verbs_ok ? "true" : "false", f);
	fputs(",\"reason\":", f);
	output_json_string(f, d->verbs_ok ? "" : d->verbs_why);
	fputs("},\"devices\":[", f);
	for (size_t i = 0; i < d->ndevices; i++) {
		const struct doctor_device *dev = &d->devices[i];

		fprintf(f, "%s{\"name\":", i ? "," : "");
		output_json_string(f, dev->name);
		fputs(",\"transport\":", f);
		output_json_string(f, dev->transport);
		fprintf(f, ",\"verbs_path\":\"%s\"", xport_path_name(dev->path));
		fputs(",\"error\":", f);
		output_json_string(f, dev->error);
		fputs(",\"ports\":[", f);
		for (unsigned p = 0; p < dev->nports; p++) {
			fputs(p ? "," : "", f);
			print_json_port(f, &dev->ports[p]);
		}
		fputs("]}", f);
	}
	fprintf(f, "],\"memlock\":{\"need\":%" PRIu64 ",\"limit\":", d->pool_need);
	json_limit(f, d->memlock_cur);
	fputs(",\"limit_hard\":", f);
	json_limit(f, d->memlock_max);
	fprintf(f, ",\"cap_ipc_lock\":%s,\"ok\":%s,\"tcp_pool\":%" PRIu64 "}",
		d->cap_ipc_lock > 0 ? "true" : "false", d->memlock_ok ? "true" : "false",
		d->tcp_pool);
	fputs(",\"io_uring\":{\"io_uring_disabled\":", f);
	if (d->uring_sysctl < 0) {
		fputs("null", f);
	} else {
		fprintf(f, "%d", d->uring_sysctl);
	}
	fputs(",\"meaning\":", f);
	output_json_string(f, uring_sysctl_meaning(d->uring_sysctl));
	fprintf(f, ",\"ok\":%s,\"error\":", d->uring_ok ? "true" : "false");
	output_json_string(f, d->uring_err ? strerror(-d->uring_err) : "");
	fputs(",\"missing_ops\":", f);
	output_json_string(f, d->uring_missing_ops);
	fprintf(f, "},\"hugepages\":{\"total\":%ld,\"free\":%ld,\"size_kb\":%ld,\"thp\":",
		d->huge_total, d->huge_free, d->huge_size_kb);
	output_json_string(f, d->thp);
	fprintf(f, ",\"pool_uses_hugepages\":%s},\"problems\":[", d->pool_huge ? "true" : "false");
	for (size_t i = 0; i < d->nproblems; i++) {
		fprintf(f, "%s{\"severity\":\"%s\",\"what\":", i ? "," : "",
			d->problems[i].error ? "error" : "warning");
		output_json_string(f, d->problems[i].what);
		fputs(",\"fix\":", f);
		output_json_string(f, d->problems[i].fix);
		fputc('}', f);
	}
	fprintf(f, "],\"ok\":%s}\n", ok ? "true" : "false");
}

static void human_bytes(uint64_t v, char *buf, size_t len)
{
	if (v == (uint64_t)RLIM_INFINITY) {
		snprintf(buf, len, "unlimited");
	} else if (v >= (1u << 20) && v % (1u << 20) == 0) {
		snprintf(buf, len, "%" PRIu64 " MiB", v >> 20);
	} else if (v >= 1024 && v % 1024 == 0) {
		snprintf(buf, len, "%" PRIu64 " KiB", v >> 10);
	} else {
		snprintf(buf, len, "%" PRIu64 " bytes", v);
	}
}

static void print_human_devices(const struct doctor *d)
{
	if (d->ndevices == 0) {
		printf("RDMA devices: none (%s): verbs unavailable, tcp only\n", d->verbs_why);
		return;
	}
	if (d->verbs_ok) {
		printf("RDMA devices: %zu\n", d->ndevices);
	} else {
		printf("RDMA devices: %zu (verbs unusable: %s)\n", d->ndevices, d->verbs_why);
	}
	for (size_t i = 0; i < d->ndevices; i++) {
		const struct doctor_device *dev = &d->devices[i];

		printf("  %s (%s, verbs lanes: %s)%s%s\n", dev->name, dev->transport,
		       dev->path == XPORT_PATH_WRITE_SEND  ? "RDMA WRITE + SEND, write_send"
		       : dev->path == XPORT_PATH_WRITE_IMM ? "RDMA WRITE WITH IMMEDIATE, write_imm"
							   : "none",
		       dev->error[0] ? ": " : "", dev->error);
		for (unsigned p = 0; p < dev->nports; p++) {
			const struct doctor_port *pt = &dev->ports[p];

			printf("    port %u: %s, %s, active MTU %u\n", pt->num, pt->state,
			       pt->link_layer, pt->active_mtu);
			for (unsigned g = 0; g < pt->ngids; g++) {
				const struct doctor_gid *gd = &pt->gids[g];

				printf("      GID %-3u %-7s %s%s%s%s\n", gd->index, gd->type,
				       gd->addr, gd->netdev[0] ? " on " : "", gd->netdev,
				       gd->ipv4_mapped && !strcmp(gd->type, "RoCE v2")
					   ? "  <- RoCE v2 over IPv4 (rdma_cm)"
					   : "");
			}
			if (pt->ngids == 0) {
				printf("      no GIDs\n");
			}
		}
	}
}

static void print_human(const struct doctor *d, bool ok)
{
	char need[32], cur[32], max[32];

	print_human_devices(d);
	human_bytes(d->pool_need, need, sizeof(need));
	human_bytes(d->memlock_cur, cur, sizeof(cur));
	human_bytes(d->memlock_max, max, sizeof(max));
	printf("memlock: limit %s (hard %s), verbs pins %s (the pool for io_uring and each "
	       "device), CAP_IPC_LOCK %s: %s\n",
	       cur, max, need, d->cap_ipc_lock > 0 ? "yes" : "no",
	       d->memlock_ok	 ? "ok"
	       : d->tcp_pool > 0 ? "TOO SMALL for verbs (tcp fits a smaller pool)"
				 : "TOO SMALL");
	printf("io_uring: kernel.io_uring_disabled %s; queue init %s%s\n",
	       uring_sysctl_meaning(d->uring_sysctl), d->uring_ok ? "ok" : "FAILED: ",
	       d->uring_ok ? "" : (d->uring_err ? strerror(-d->uring_err) : d->uring_missing_ops));
	printf("huge pages: %ld total, %ld free, %ld kB each; transparent huge pages [%s]; "
	       "pool on %s pages\n",
	       d->huge_total, d->huge_free, d->huge_size_kb, d->thp,
	       d->pool_huge ? "2 MiB" : "4 KiB");
	if (d->nproblems == 0) {
		printf("no problems found\n");
	}
	for (size_t i = 0; i < d->nproblems; i++) {
		printf("%s: %s\n  fix: %s\n", d->problems[i].error ? "ERROR" : "warning",
		       d->problems[i].what, d->problems[i].fix);
	}
	printf("%s\n",
	       ok ? (d->verbs_ok ? "ready: tcp and verbs" : "ready: tcp (verbs unavailable)")
		  : "NOT ready: fix the errors above");
}

int cmd_doctor(struct client_opts *o, char **args, int nargs)
{
	struct doctor d = { 0 };
	bool json = o->json, ok = true;

	for (int i = 0; i < nargs; i++) {
		if (!strcmp(args[i], "--json")) {
			json = true;
		} else {
			log_error("usage: rdmacp doctor [--json]");
			return EXIT_USAGE;
		}
	}
	check_devices(&d);
	check_memlock(&d, o);
	check_uring(&d);
	check_hugepages(&d);
	for (size_t i = 0; i < d.nproblems; i++) {
		ok &= !d.problems[i].error;
	}
	if (json) {
		print_json(&d, ok);
	} else {
		print_human(&d, ok);
	}
	fflush(stdout);
	free(d.devices);
	return ok ? EXIT_OK : EXIT_LOCAL_IO;
}
