/* SPDX-License-Identifier: MIT */
/*
 * A device lost under a session: a fatal device event (DEVICE_FATAL), an
 * error on its CQ (CQ_ERR), the device removed (the CM's DEVICE_REMOVAL),
 * an error or hang-up on one of its descriptors, or a failed poll of its
 * CQ: firmware reset, `devlink reload`, AER, hot unplug, `rdma link del`.
 *
 * The user-space CQ of a dead device never flushes what was outstanding on
 * its lanes, so the lanes' own bookkeeping does: their QPs are put in error
 * (a device still running takes no more writes on them), what its CQ still
 * holds is taken (poll_cq: a receive the device placed and acknowledged is one
 * the peer counts as taken), then every send and receive posted there and
 * not completed comes back as WR_FLUSH_ERR, in order, the first one naming
 * the device and why. The engine then takes each of those
 * lanes as lost as it takes any lane whose QP failed (rails: its slots and
 * credits go again on the lanes still up, by the peer's count), and what is
 * posted there later is flushed the same way without touching the device.
 * The session ends here only when no device with lanes is left.
 *
 * Once drained, the device is let go of (verbs_dev_release_drained): every
 * object of ours on it, then librdmacm's context, so that the session holds
 * nothing of a dead device. A device that comes back (`rdma link add`, a
 * NIC after its reset) is then a new device to the system, which the next
 * session's lanes and the daemon's next listeners use. Its lanes do not
 * come back in this session: the protocol has no way to connect a lane
 * again (a LANE_DOWN is final for its lane, RING's keys are sent once).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "log.h"
#include "verbs-internal.h"

static bool dev_has_lanes(const struct verbs_xport *vx, unsigned dev)
{
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		if (vx->lanes[i].has_qp && vx->lanes[i].dev == dev) {
			return true;
		}
	}
	return false;
}

int verbs_dev_lost(struct verbs_xport *vx, unsigned dev, const char *why)
{
	struct verbs_dev *dv;
	const char *name;

	if (dev >= vx->ndevs) {
		return -ENODEV;
	}
	dv = &vx->devs[dev];
	if (dv->lost) {
		return 0;
	}
	dv->lost = true;
	name = dv->name;
	/* Nothing more is read from it: its descriptors may report errors forever. */
	if (dv->cch) {
		(void)epoll_ctl(vx->epfd, EPOLL_CTL_DEL, dv->cch->fd, NULL);
	}
	(void)epoll_ctl(vx->epfd, EPOLL_CTL_DEL, dv->verbs->async_fd, NULL);
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];

		if (!ln->has_qp || ln->dev != dev) {
			continue;
		}
		if (!ln->failed) {
			verbs_set_error(vx, "lane %u: %s: %s", i, name, why);
		}
		ln->failed = true;
		/*
		 * Its QP to error first: a device that still runs (Soft-RoCE until
		 * every process lets go, `devlink reload` until it resets) would
		 * otherwise go on placing and acknowledging the peer's writes after
		 * its CQ was drained, and our count (rails) would be short of what
		 * the peer saw acknowledged, its chunks no longer its to send again.
		 * A device that is gone fails the call, and takes nothing either.
		 */
		(void)verbs_qp_error(ln);
	}
	for (unsigned d = 0; d < vx->ndevs; d++) {
		if (!vx->devs[d].lost && dev_has_lanes(vx, d)) {
			return 0;
		}
	}
	verbs_set_error(vx, "%s: %s, and no other device is left", name, why);
	return -ENODEV;
}

/* Up to max flushed completions of one lost lane's outstanding work. */
static size_t lane_flush(struct verbs_xport *vx, unsigned lane, struct xport_wc *wcs, size_t max)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	size_t n = 0;

	while (n < max && ln->sq_done < ln->sq_tail) {
		wcs[n++] = (struct xport_wc){
			.wr_id = ln->sq_ids[ln->sq_done % vx->sq_cap],
			.lane = lane,
			.status = XPORT_WC_WR_FLUSH_ERR,
			.opcode = XPORT_WC_WRITE,
		};
		ln->sq_done++;
	}
	while (n < max && ln->rq_done < ln->rq_tail) {
		wcs[n++] = (struct xport_wc){
			.wr_id = ln->rq_ids[ln->rq_done % vx->pub.rq_depth],
			.lane = lane,
			.status = XPORT_WC_WR_FLUSH_ERR,
			.opcode = XPORT_WC_RECV_IMM,
		};
		ln->rq_done++;
	}
	return n;
}

size_t verbs_dev_flush(struct verbs_xport *vx, struct xport_wc *wcs, size_t max)
{
	size_t n = 0;

	for (unsigned i = 0; i < vx->pub.nlanes && n < max; i++) {
		/* Only once what the device did complete was taken (verbs_poll_cq). */
		if (verbs_lane_lost(vx, i) && vx->devs[vx->lanes[i].dev].drained) {
			n += lane_flush(vx, i, wcs + n, max - n);
		}
	}
	return n;
}

/*
 * Device dev's windows of every registration, then its lanes' QPs and
 * message areas: the windows first, as at teardown (a window still bound
 * holds its QP).
 */
static void dev_release_lanes(struct verbs_xport *vx, unsigned dev)
{
	for (struct verbs_mr *m = vx->mrs; m; m = m->next) {
		verbs_mr_windows_free_dev(m, dev);
	}
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];

		if (!ln->has_qp || ln->dev != dev || !ln->id) {
			continue;
		}
		if (ln->id->qp) {
			rdma_destroy_qp(ln->id);
		}
		if (ln->msg_mr) {
			(void)ibv_dereg_mr(ln->msg_mr);
			ln->msg_mr = NULL;
		}
	}
}

/*
 * Everything of ours on device dev, in teardown's order (windows, QPs,
 * registrations, CQ, channel, PD, then the lanes' CM ids, whose events we
 * ack at once). The lanes keep has_qp and their queues of wr_ids: what
 * the engine posts there later is flushed from those, as before.
 */
static void dev_release(struct verbs_xport *vx, unsigned dev)
{
	struct verbs_dev *dv = &vx->devs[dev];

	dev_release_lanes(vx, dev);
	for (struct verbs_mr *m = vx->mrs; m; m = m->next) {
		if (m->mr[dev]) {
			(void)ibv_dereg_mr(m->mr[dev]);
			m->mr[dev] = NULL;
		}
	}
	if (dv->cq) {
		(void)ibv_destroy_cq(dv->cq);
		dv->cq = NULL;
	}
	if (dv->cch) {
		(void)ibv_destroy_comp_channel(dv->cch);
		dv->cch = NULL;
	}
	if (dv->pd) {
		(void)ibv_dealloc_pd(dv->pd);
		dv->pd = NULL;
	}
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];

		if (ln->has_qp && ln->dev == dev && ln->id) {
			(void)rdma_destroy_id(ln->id);
			ln->id = NULL;
			ln->connected = false;
		}
	}
	dv->verbs = NULL; /* librdmacm's: closed by it below, once it sees the device gone */
	dv->released = true;
	log_debug("verbs: %s let go of (its lanes lost): it may go and come back", dv->name);
}

/*
 * librdmacm keeps a context of every device it used, after the last CM id
 * on it is gone, until it next lists the devices: then one the system no
 * longer has is closed (and one added since is known). Without that a
 * removed device stays open here for the session's life: Soft-RoCE's
 * `rdma link del` waits for it, and a NIC's removed device its memory.
 * Listing opens librdmacm's context of each device it had not used yet,
 * kept as it keeps every one it used: once per device lost, not per lane.
 */
static void cm_devices_resync(void)
{
	int n = 0;
	struct ibv_context **list = rdma_get_devices(&n);

	if (list) {
		rdma_free_devices(list);
	}
}

void verbs_dev_release_drained(struct verbs_xport *vx)
{
	bool released = false;

	for (unsigned d = 0; d < vx->ndevs; d++) {
		struct verbs_dev *dv = &vx->devs[d];

		if (dv->lost && dv->drained && !dv->released) {
			dev_release(vx, d);
			released = true;
		}
	}
	if (released) {
		cm_devices_resync();
	}
}
