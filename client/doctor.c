/* SPDX-License-Identifier: MIT */
/*
 * rdmacp doctor [--json]: a preflight check of this host. Reports the RDMA
 * devices (ports, state, link layer, MTU, GIDs), RLIMIT_MEMLOCK against the
 * pool this client would pin, whether io_uring can be set up, and huge
 * pages; the certificates' expiry (doctor_certs.c). Every problem comes with its fix.
 *
 * Exit 0 when the tcp transport can work (a missing RDMA device is only a
 * warning: verbs is then unavailable); EXIT_LOCAL_IO when io_uring cannot be
 * set up or the pool cannot be pinned, since every transfer needs both.
 *
 * Here: the memlock, io_uring and huge page checks and the command; the
 * RDMA devices are doctor_devices.c's, the report doctor_report.c's.
 */
#include <errno.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "client.h"
#include "doctor.h"
#include "engine.h"
#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "memfit.h"
#include "pool.h"
#include "sysfile.h"
#include "xport.h"

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
			doctor_human_bytes(d->tcp_pool, tcp, sizeof(tcp));
			doctor_problem(
			    d, d->ndevices > 0, fix,
			    "%s, and no CAP_IPC_LOCK: enough for tcp (a %s pool), not for verbs",
			    advice, tcp);
		} else {
			doctor_problem(d, true, fix, "%s, and no CAP_IPC_LOCK", advice);
		}
	}
}

/* ---- io_uring ------------------------------------------------------------------- */

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
			doctor_problem(
			    d, true,
			    d->uring_sysctl == 1
				? "'sysctl kernel.io_uring_disabled=0', or run rdmacp in the "
				  "group named by kernel.io_uring_group"
				: "'sysctl kernel.io_uring_disabled=0' (as root)",
			    "io_uring is unusable: io_uring_queue_init: %s "
			    "(kernel.io_uring_disabled=%d)",
			    strerror(-r), d->uring_sysctl);
		} else if (r == -EPERM || r == -ENOSYS) {
			doctor_problem(
			    d, true,
			    "a seccomp filter or container runtime blocks io_uring (Docker's "
			    "default profile does): allow io_uring_setup, io_uring_enter and "
			    "io_uring_register ('docker run --security-opt seccomp=PROFILE' with "
			    "them allowed); ENOSYS can also mean a kernel built without "
			    "CONFIG_IO_URING (use 5.10 or newer with it)",
			    "io_uring is unusable: io_uring_queue_init: %s", strerror(-r));
		} else if (r == -ENOMEM) {
			doctor_problem(
			    d, true,
			    "raise RLIMIT_MEMLOCK ('ulimit -l unlimited'): the kernel charges "
			    "io_uring's rings to it unless the process has CAP_IPC_LOCK",
			    "io_uring is unusable: io_uring_queue_init: %s", strerror(-r));
		} else {
			doctor_problem(
			    d, true, "check the kernel log (dmesg) and the kernel version",
			    "io_uring is unusable: io_uring_queue_init: %s", strerror(-r));
		}
		return;
	}
	uring_probe_ops(d, &ring);
	io_uring_queue_exit(&ring);
	if (!d->uring_ops_ok) {
		doctor_problem(d, true, "use a kernel of 5.10 or newer",
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

int cmd_doctor(struct client_opts *o, char **args, int nargs)
{
	struct doctor d = { 0 };
	bool json = o->json, ok = true;
	const char *daemon_conf = NULL;

	for (int i = 0; i < nargs; i++) {
		if (!strcmp(args[i], "--json")) {
			json = true;
		} else if (args[i][0] != '-' && !daemon_conf) {
			daemon_conf = args[i];
		} else {
			log_error("usage: rdmacp doctor [--json] [RDMACPD_CONF]");
			return EXIT_USAGE;
		}
	}
	/* A daemon config named is one to read: a stray word is a usage error. */
	if (daemon_conf && access(daemon_conf, F_OK) < 0) {
		log_error("doctor: %s: %s (the argument is the daemon's config, rdmacpd.conf)",
			  daemon_conf, strerror(errno));
		return EXIT_USAGE;
	}
	doctor_check_devices(&d);
	doctor_check_fabric(&d);
	check_memlock(&d, o);
	check_uring(&d);
	check_hugepages(&d);
	doctor_check_certs(&d, o, daemon_conf);
	for (size_t i = 0; i < d.nproblems; i++) {
		ok &= !d.problems[i].error;
	}
	if (json) {
		doctor_print_json(&d, ok);
	} else {
		doctor_print_human(&d, ok);
	}
	fflush(stdout);
	free(d.devices);
	free(d.fabric);
	return ok ? EXIT_OK : EXIT_LOCAL_IO;
}
