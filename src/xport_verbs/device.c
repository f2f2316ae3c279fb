/* SPDX-License-Identifier: MIT */
/*
 * The devices a verbs xport's lanes sit on (more than one with rails): each
 * sized against its own limits, with a protection domain, a completion
 * channel and one CQ for all its lanes (on a completion vector of the
 * device's NUMA node), and both its completion channel and async event fd
 * in the xport's event fd.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "numapick.h"
#include "rdmadev.h"
#include "verbs-internal.h"

/* Soft-iWARP's vendor id ("bmt"): it checks remote addresses against our own. */
#define VERBS_SIW_VENDOR_ID 0x626d74u

/*
 * The device's own limits, before anything is sized by ours: a send queue
 * deeper than it allows is made shallower (the engine posts within
 * x->sq_depth); receive queue and CQ sizes are the engine's credits and
 * can't shrink, so a device too small for them is an error that says so.
 * Returns the CQ size the lanes need, or -errno.
 */
static int device_fit(struct verbs_xport *vx, struct ibv_context *verbs)
{
	struct ibv_device_attr da;
	int cqe, r;

	r = ibv_query_device(verbs, &da);
	if (r != 0) {
		verbs_set_error(vx, "%s: ibv_query_device: %s", ibv_get_device_name(verbs->device),
				strerror(r));
		return -r;
	}
	if (da.max_qp_wr > 1 && vx->sq_cap + 1 > (unsigned)da.max_qp_wr) {
		unsigned cap = (unsigned)da.max_qp_wr - 1;

		vx->pub.sq_depth = vx->write_send ? cap / 2 : cap;
		vx->sq_cap = vx->write_send ? 2 * vx->pub.sq_depth : vx->pub.sq_depth;
	}
	/* One more send per lane: the quiesce marker. */
	cqe = (int)(vx->pub.nlanes * (vx->sq_cap + 1 + vx->pub.rq_depth));
	if (da.vendor_id == VERBS_SIW_VENDOR_ID) {
		vx->va_keys = true;
	}
	if ((da.max_qp_wr > 0 && vx->pub.rq_depth > (unsigned)da.max_qp_wr) ||
	    (da.max_cqe > 0 && cqe > da.max_cqe)) {
		verbs_set_error(
		    vx,
		    "%s allows %d work requests per queue and %d completions per CQ; "
		    "%u lanes of %u receive slots need %u and %d (fewer --slots or lanes)",
		    ibv_get_device_name(verbs->device), da.max_qp_wr, da.max_cqe, vx->pub.nlanes,
		    vx->pub.rq_depth, vx->pub.rq_depth, cqe);
		return -EINVAL;
	}
	return cqe;
}

/*
 * The completion vector of a device's CQ: one whose interrupt lands on the
 * device's NUMA node (where the engine's loop runs: engine.c binds it
 * there), and the next one for each CQ this process makes, starting from
 * its pid, so that sessions side by side (a daemon's, each its own process)
 * take different vectors of the node instead of all taking vector 0.
 */
static int comp_vector(struct ibv_context *verbs)
{
	static unsigned made;
	int node = rdmadev_numa_node(RDMADEV_SYSFS, ibv_get_device_name(verbs->device));
	unsigned node_cpus = 0;
	cpu_set_t cpus;

	if (node >= 0 && rdmadev_node_cpus(RDMADEV_NODESYSFS, node, &cpus) == 0) {
		node_cpus = (unsigned)CPU_COUNT(&cpus);
	}
	return numapick_comp_vector(verbs->num_comp_vectors, node_cpus,
				    (unsigned)getpid() + made++);
}

/* PD, completion channel and CQ on a device new to this xport. */
static int xport_setup_device(struct verbs_xport *vx, struct verbs_dev *dv,
			      struct ibv_context *verbs)
{
	int cqe, r;

	dv->verbs = verbs;
	snprintf(dv->name, sizeof(dv->name), "%s", ibv_get_device_name(verbs->device));
	cqe = device_fit(vx, verbs);
	if (cqe < 0) {
		return cqe;
	}
	dv->pd = ibv_alloc_pd(verbs);
	if (!dv->pd) {
		return negerrno();
	}
	dv->cch = ibv_create_comp_channel(verbs);
	if (!dv->cch) {
		return negerrno();
	}
	r = verbs_set_nonblock(dv->cch->fd);
	if (r < 0) {
		return r;
	}
	dv->cq = ibv_create_cq(verbs, cqe, vx, dv->cch, comp_vector(verbs));
	if (!dv->cq) {
		return negerrno();
	}
	r = ibv_req_notify_cq(dv->cq, 0);
	return r ? -r : 0;
}

/*
 * One fd wakes the engine for everything of a device: completions, and the
 * async events (a port down, a QP in error, the device fatal) whose
 * descriptor reports EPOLLERR when the device goes away.
 */
static int xport_watch_device(struct verbs_xport *vx, unsigned dev)
{
	struct verbs_dev *dv = &vx->devs[dev];
	int r = verbs_watch(vx, dv->cch->fd, VERBS_EV_COMP, dev);

	if (r >= 0) {
		r = verbs_set_nonblock(dv->verbs->async_fd);
	}
	if (r >= 0) {
		r = verbs_watch(vx, dv->verbs->async_fd, VERBS_EV_ASYNC, dev);
	}
	return r;
}

/*
 * A passive side's lanes all arrive on the device of its listening address
 * (one that does not is refused: -EXDEV); an active side with rails may
 * add more (may_add).
 */
int verbs_device_of(struct verbs_xport *vx, struct ibv_context *verbs, bool may_add)
{
	struct verbs_dev *dv;
	unsigned d;
	int r;

	for (d = 0; d < vx->ndevs; d++) {
		if (vx->devs[d].verbs == verbs) {
			return (int)d;
		}
	}
	if ((vx->ndevs > 0 && !may_add) || vx->ndevs >= XPORT_MAX_LANES) {
		return -EXDEV;
	}
	dv = &vx->devs[vx->ndevs++];
	r = xport_setup_device(vx, dv, verbs);
	if (r >= 0) {
		r = xport_watch_device(vx, d);
	}
	return r < 0 ? r : (int)d;
}

/*
 * Where the ring goes (engine.c binds the pool there): the node of the
 * device most lanes leave from, lane 0's on a tie (numapick_ring_node). One
 * rail, or rails on one node: theirs. Rails on several nodes share one ring
 * that any lane may write: the node of most of them is the best one place.
 */
int verbs_numa_node(struct xport *x)
{
	struct verbs_xport *vx = to_verbs(x);
	int dev_node[XPORT_MAX_LANES], lane_node[XPORT_MAX_LANES];
	unsigned n = 0;

	for (unsigned d = 0; d < vx->ndevs; d++) {
		dev_node[d] = rdmadev_numa_node(RDMADEV_SYSFS, vx->devs[d].name);
	}
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		if (vx->lanes[i].has_qp) {
			lane_node[n++] = dev_node[vx->lanes[i].dev];
		}
	}
	return numapick_ring_node(lane_node, n);
}
