/* SPDX-License-Identifier: MIT */
/*
 * A device lost under a session: a fatal device event (DEVICE_FATAL), an
 * error on its CQ (CQ_ERR), the device removed (the CM's DEVICE_REMOVAL),
 * an error or hang-up on one of its descriptors, or a failed poll of its
 * CQ: firmware reset, `devlink reload`, AER, hot unplug, `rdma link del`.
 *
 * The user-space CQ of a dead device never flushes what was outstanding on
 * its lanes, so the lanes' own bookkeeping does: what its CQ still holds is
 * taken first (poll_cq: a receive the device placed and acknowledged is one
 * the peer counts as taken), then every send and receive posted there and
 * not completed comes back as WR_FLUSH_ERR, in order, the first one naming
 * the device and why. The engine then takes each of those
 * lanes as lost as it takes any lane whose QP failed (rails: its slots and
 * credits go again on the lanes still up, by the peer's count), and what is
 * posted there later is flushed the same way without touching the device.
 * The session ends here only when no device with lanes is left.
 */
#include <errno.h>
#include <sys/epoll.h>

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
	name = ibv_get_device_name(dv->verbs->device);
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
