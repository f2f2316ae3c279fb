/* SPDX-License-Identifier: MIT */
/*
 * Memory registrations of a verbs xport: in every device's domain (one key
 * pair per lane), LOCAL_WRITE plus REMOTE_WRITE when asked and never remote
 * read or atomics, zero-based where the device allows it.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "verbs-internal.h"

static size_t page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps > 0 ? (size_t)ps : 4096;
}

/* Never REMOTE_READ or atomics: a peer may only write where we let it. */
static unsigned mr_access_flags(unsigned access)
{
	int flags = IBV_ACCESS_LOCAL_WRITE;

	if (access & XPORT_ACCESS_REMOTE_WRITE) {
		flags |= IBV_ACCESS_REMOTE_WRITE;
	}
	/*
	 * Windows (mw.c) may open over it, and the peer writes through them
	 * only: its own rkey has no remote access (a window with remote write
	 * needs local write on its registration, IB spec o10-37.2.18).
	 */
	if (access & XPORT_ACCESS_WINDOWS) {
		flags |= IBV_ACCESS_MW_BIND;
	}
	/*
	 * PCIe relaxed ordering where the device and platform allow it (an
	 * optional flag: dropped where they do not). Safe here: the receiver
	 * reads a slot only after the completion of its immediate, and a
	 * completion, written in strict order, cannot pass the writes before it.
	 */
#ifdef IBV_ACCESS_OPTIONAL_FIRST
	flags |= IBV_ACCESS_RELAXED_ORDERING;
#endif
	return (unsigned)flags;
}

/*
 * Zero-based: the peer addresses the registration from its iova, so our
 * heap addresses never leave the process. Devices (rxe included) map an
 * iova to a page by its page offset, so the iova keeps addr's offset in
 * its page: 0 for the page-aligned pools the engine registers.
 */
static uint64_t mr_iova(const struct verbs_xport *vx, const void *addr)
{
	return vx->va_keys ? (uint64_t)(uintptr_t)addr
			   : (uint64_t)((uintptr_t)addr & (uintptr_t)(page_size() - 1));
}

/*
 * In every device's domain: a lane can only use keys of its own device. A
 * released device (devloss.c) has none: nothing is posted there.
 */
static int mr_reg_devices(struct verbs_xport *vx, struct verbs_mr *m, void *addr, size_t len,
			  uint64_t iova, unsigned flags)
{
	for (unsigned d = 0; d < vx->ndevs; d++) {
		if (vx->devs[d].released) {
			continue;
		}
		m->mr[d] = ibv_reg_mr_iova2(vx->devs[d].pd, addr, len, iova, flags);
		if (!m->mr[d]) {
			int r = negerrno();

			while (d-- > 0) {
				if (m->mr[d]) {
					(void)ibv_dereg_mr(m->mr[d]);
				}
			}
			return r;
		}
	}
	return 0;
}

int verbs_reg_mr(struct xport *x, void *addr, size_t len, unsigned access, struct xport_mr **ret_mr)
{
	struct verbs_xport *vx = to_verbs(x);
	struct verbs_mr *m;
	unsigned flags;
	uint64_t iova;
	int r;

	if (!addr || len == 0 || (uintptr_t)addr + len < (uintptr_t)addr || !ret_mr ||
	    (access & ~(unsigned)(XPORT_ACCESS_LOCAL | XPORT_ACCESS_REMOTE_WRITE |
				  XPORT_ACCESS_WINDOWS)) != 0 ||
	    (access & XPORT_ACCESS_WINDOWS && access & XPORT_ACCESS_REMOTE_WRITE)) {
		return -EINVAL;
	}
	if ((access & XPORT_ACCESS_WINDOWS) && !x->windows) {
		return -EOPNOTSUPP;
	}
	if (vx->ndevs == 0) {
		return -ENOTCONN;
	}
	flags = mr_access_flags(access);
	iova = mr_iova(vx, addr);
	m = calloc(1, sizeof(*m));
	if (!m) {
		return -ENOMEM;
	}
	r = mr_reg_devices(vx, m, addr, len, iova, flags);
	if (r < 0) {
		free(m);
		return r;
	}
	for (unsigned i = 0; i < x->nlanes; i++) {
		const struct ibv_mr *mr = m->mr[vx->lanes[i].dev];

		m->pub.lane_lkey[i] = mr ? mr->lkey : 0;
		m->pub.lane_rkey[i] = mr && (access & XPORT_ACCESS_REMOTE_WRITE) ? mr->rkey : 0;
	}
	m->pub.addr = addr;
	m->pub.iova = iova;
	m->pub.len = len;
	m->pub.lkey = m->pub.lane_lkey[0];
	m->pub.rkey = m->pub.lane_rkey[0];
	m->pub.access = access;
	m->next = vx->mrs;
	vx->mrs = m;
	*ret_mr = &m->pub;
	return 0;
}

void verbs_mr_windows_free_dev(struct verbs_mr *m, unsigned d)
{
	if (!m->win[d]) {
		return;
	}
	for (uint32_t i = 0; i < XPORT_MAX_WINDOWS; i++) {
		if (m->win[d][i].mw) {
			(void)ibv_dealloc_mw(m->win[d][i].mw);
		}
	}
	free(m->win[d]);
	m->win[d] = NULL;
}

void verbs_mr_windows_free(struct verbs_mr *m)
{
	for (unsigned d = 0; d < XPORT_MAX_LANES; d++) {
		verbs_mr_windows_free_dev(m, d);
	}
}

int verbs_dereg_mr(struct xport *x, struct xport_mr *pub)
{
	struct verbs_xport *vx = to_verbs(x);
	struct verbs_mr **pp, *m;
	int r;

	if (!pub) {
		return -EINVAL;
	}
	for (pp = &vx->mrs; *pp && &(*pp)->pub != pub; pp = &(*pp)->next) {
	}
	if (!*pp) {
		return -ENOENT;
	}
	m = *pp;
	verbs_mr_windows_free(m);
	/* Once this returns the devices refuse the rkeys: a later write is a remote access error. */
	for (unsigned d = 0; d < vx->ndevs; d++) {
		if (!m->mr[d]) {
			continue;
		}
		r = ibv_dereg_mr(m->mr[d]);
		if (r != 0) {
			return -r; /* kept: a retry deregisters what is left */
		}
		m->mr[d] = NULL;
	}
	*pp = m->next;
	free(m);
	return 0;
}
