/* SPDX-License-Identifier: MIT */
/*
 * Transport-independent helpers: completion status names and the table of
 * built backends, looked up by kind or by name.
 */
#include "xport.h"

#include <string.h>

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
