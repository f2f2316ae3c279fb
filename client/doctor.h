/* SPDX-License-Identifier: MIT */
/*
 * rdmacp doctor (doctor.c): what the checks find about this host, shared by
 * the RDMA device scan (doctor_devices.c) and the report of the findings
 * (doctor_report.c).
 */
#pragma once

#include <arpa/inet.h>
#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "certs.h"
#include "macro.h"

struct client_opts;
struct fabric_report;

/* What the engine asks io_uring for (src/engine.c URING_ENTRIES). */
#define DOCTOR_URING_ENTRIES 2048
#define DOCTOR_MAX_PROBLEMS  64
#define DOCTOR_MAX_GIDS	     32	  /* per port: the non-zero ones we show */
#define DOCTOR_GID_SCAN	     1024 /* table indexes we look at, per port */
#define DOCTOR_MAX_PORTS     8
#define DOCTOR_MAX_CERTS     4
/* The daemon's config doctor looks at when given none (the systemd unit's). */
#define DOCTOR_DAEMON_CONFIG "/etc/rdmacp/rdmacpd.conf"
/* Warn of a certificate expiring within this many days, unless rdmacpd.conf says. */
#define DOCTOR_CERT_WARN_DAYS 30

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

struct doctor_cert {
	char what[32]; /* "client certificate", "daemon certificate", ... */
	char file[4096];
	char error[128]; /* it could not be read: why; else "" */
	struct certs_expiry e;
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
	/* certificates */
	size_t ncerts;
	struct doctor_cert certs[DOCTOR_MAX_CERTS];
	/* the fabric: PCIe, MTU, ECN, ARP flux, visibility (doctor_fabric.c; heap, may be NULL) */
	struct fabric_report *fabric;
	/* findings */
	size_t nproblems;
	struct doctor_problem problems[DOCTOR_MAX_PROBLEMS];
};

/* A finding: an error (a transfer can't work) or a warning (tcp still works), and its fix. */
void doctor_problem(struct doctor *d, bool error, const char *fix, const char *fmt, ...)
    _printf_(4, 5);
/* The RDMA devices, their ports and GIDs (doctor_devices.c). */
void doctor_check_devices(struct doctor *d);
/*
 * The fabric around them (doctor_fabric.c, after doctor_check_devices):
 * PCIe links, relaxed ordering, MTU, ECN, ARP flux, why no device is seen.
 */
void doctor_check_fabric(struct doctor *d);
/*
 * The certificates' expiry (doctor_certs.c): this client's and its CA's, and
 * the daemon's of daemon_conf (NULL: DOCTOR_DAEMON_CONFIG when it exists),
 * each warned of within its 'cert warn days' (else DOCTOR_CERT_WARN_DAYS).
 */
void doctor_check_certs(struct doctor *d, const struct client_opts *o, const char *daemon_conf);
/* What kernel.io_uring_disabled's value v means (-1: no such sysctl). */
const char *doctor_uring_sysctl_meaning(int v);
/* "unlimited", "N MiB", "N KiB" or "N bytes". */
void doctor_human_bytes(uint64_t v, char *buf, size_t len);
/* The findings on stdout, as one JSON object or for people; ok: no errors. */
void doctor_print_json(const struct doctor *d, bool ok);
void doctor_print_human(const struct doctor *d, bool ok);
