/* SPDX-License-Identifier: MIT */
/*
 * Transport-independent helpers: completion status names and the table of
 * built backends, looked up by kind or by name; the tests' lane hooks.
 */
#include "xport.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_VERBS
#include <infiniband/verbs.h>
#endif

#include "macro.h"

const char *xport_wc_status_str(int status)
{
	/* Spelled like libibverbs' ibv_wc_status_str() so RDMA users recognise them. */
	static const char *const names[] = {
		[XPORT_WC_SUCCESS] = "IBV_WC_SUCCESS",
		[XPORT_WC_LOC_PROT_ERR] = "IBV_WC_LOC_PROT_ERR",
		[XPORT_WC_REM_ACCESS_ERR] = "IBV_WC_REM_ACCESS_ERR",
		[XPORT_WC_RNR_ERR] = "IBV_WC_RNR_RETRY_EXC_ERR",
		[XPORT_WC_WR_FLUSH_ERR] = "IBV_WC_WR_FLUSH_ERR",
		[XPORT_WC_RETRY_EXC_ERR] = "IBV_WC_RETRY_EXC_ERR",
		[XPORT_WC_GENERAL_ERR] = "IBV_WC_GENERAL_ERR",
	};

	if (status < 0 || (size_t)status >= ARRAY_SIZE(names) || !names[status]) {
		return "IBV_WC_UNKNOWN";
	}
	return names[status];
}

int xport_wr_check_common(const struct xport_wr *w, unsigned nlanes)
{
	if (!w || w->lane >= nlanes ||
	    (w->opcode != XPORT_OP_WRITE && w->opcode != XPORT_OP_WRITE_IMM) ||
	    (w->flags & ~(uint32_t)(XPORT_SEND_SIGNALED | XPORT_SEND_INLINE)) != 0 ||
	    (w->inv_rkey != 0 && w->opcode != XPORT_OP_WRITE_IMM) ||
	    (w->key != 0 && (w->opcode != XPORT_OP_WRITE_IMM || w->len != 0))) {
		return -EINVAL;
	}
	if (w->len == 0) {
		return 1;
	}
	return w->buf ? 0 : -EINVAL;
}

/* Only backends that were built are listed. */
static const struct xport_ops *const backends[] = {
	&xport_tcp_ops,
#ifdef HAVE_VERBS
	&xport_verbs_ops,
#endif
};

const struct xport_ops *xport_ops_by_kind(enum xport_kind kind)
{
	for (size_t i = 0; i < ARRAY_SIZE(backends); i++) {
		if (backends[i]->kind == kind) {
			return backends[i];
		}
	}
	return NULL;
}

const struct xport_ops *xport_ops_by_name(const char *name)
{
	if (!name) {
		return NULL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(backends); i++) {
		if (strcmp(backends[i]->name, name) == 0) {
			return backends[i];
		}
	}
	return NULL;
}

int xport_verbs_probe(char *why, size_t whylen)
{
#ifdef HAVE_VERBS
	struct ibv_device **list;
	int n = 0;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		int r = errno ? -errno : -ENODEV;
		snprintf(why, whylen, "ibv_get_device_list: %s", strerror(-r));
		return r;
	}
	ibv_free_device_list(list);
	if (n <= 0) {
		snprintf(why, whylen, "no RDMA devices found");
		return -ENODEV;
	}
	why[0] = '\0';
	return n;
#else
	snprintf(why, whylen, "this build has no verbs transport");
	return -EOPNOTSUPP;
#endif
}

const char *xport_path_name(int path)
{
	return path == XPORT_PATH_WRITE_IMM    ? "write_imm"
	       : path == XPORT_PATH_WRITE_SEND ? "write_send"
					       : "-";
}

#ifndef HAVE_VERBS
int xport_verbs_path(const struct sockaddr *local, const char *const *devices, unsigned ndevices,
		     bool force_send, char *why, size_t whylen)
{
	(void)local;
	(void)devices;
	(void)ndevices;
	(void)force_send;
	snprintf(why, whylen, "this build has no verbs transport");
	return -EOPNOTSUPP;
}

int xport_verbs_windows(const struct sockaddr *local, const char *const *devices, unsigned ndevices,
			char *why, size_t whylen)
{
	(void)local;
	(void)devices;
	(void)ndevices;
	snprintf(why, whylen, "this build has no verbs transport");
	return -EOPNOTSUPP;
}
#endif

void xport_test_hooks(struct xport_params *p, const char *tamper_env, const char *tee_env)
{
	static const char *const names[] = {
		[XPORT_TEST_TAMPER_FLIP] = "flip",   [XPORT_TEST_TAMPER_REPLAY] = "replay",
		[XPORT_TEST_TAMPER_MOVE] = "move",   [XPORT_TEST_TAMPER_TRUNCATE] = "truncate",
		[XPORT_TEST_TAMPER_STALL] = "stall",
	};
	const char *t = getenv(tamper_env), *tee = getenv(tee_env);

	for (unsigned i = 1; t && i < ARRAY_SIZE(names); i++) {
		if (strcmp(t, names[i]) == 0) {
			p->test_tamper = i;
		}
	}
	if (tee && *tee) {
		p->test_tee_path = tee;
	}
}

/* The 4 bytes of an IPv4 address in a, plain or IPv4-mapped; NULL for anything else. */
static const uint8_t *ipv4_bytes(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET) {
		return (const uint8_t *)&((const struct sockaddr_in *)(const void *)a)->sin_addr;
	}
	if (a->sa_family == AF_INET6) {
		const struct in6_addr *v6 =
		    &((const struct sockaddr_in6 *)(const void *)a)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(v6)) {
			return &v6->s6_addr[12];
		}
	}
	return NULL;
}

bool xport_same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
	const uint8_t *a4, *b4;

	if (!a || !b) {
		return false;
	}
	a4 = ipv4_bytes(a);
	b4 = ipv4_bytes(b);
	if (a4 || b4) {
		return a4 && b4 && memcmp(a4, b4, 4) == 0;
	}
	if (a->sa_family != AF_INET6 || b->sa_family != AF_INET6) {
		return false;
	}
	return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr,
		      sizeof(struct in6_addr)) == 0;
}
