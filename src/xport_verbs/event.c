/* SPDX-License-Identifier: MIT */
/*
 * The event fd of a verbs xport: an epoll set of every device's completion
 * channel and async event fd and, once connected, the lanes' CM event
 * channel. What wakes it is sorted here: completion channels are left to
 * poll_cq; a fatal event on a lane's QP fails that lane (lane_fatal), one on
 * a CQ or the device, or the device removed, loses the device (devloss.c:
 * its lanes fail; the session goes on while another device has lanes); an
 * address moved to another device fails the lanes on it; a peer's
 * disconnect stops new work on its lane.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/epoll.h>

#include "verbs-internal.h"

int verbs_watch(struct verbs_xport *vx, int fd, unsigned kind, unsigned dev)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (kind << 16) | dev };

	if (vx->epfd < 0) {
		vx->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (vx->epfd < 0) {
			return negerrno();
		}
	}
	if (epoll_ctl(vx->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		return negerrno();
	}
	return 0;
}

int verbs_event_fd(struct xport *x)
{
	struct verbs_xport *vx = to_verbs(x);

	return vx->epfd;
}

/* The lane whose QP this is, or -1. */
static int lane_of_qp(const struct verbs_xport *vx, const struct ibv_qp *qp)
{
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		if (vx->lanes[i].id && vx->lanes[i].id->qp == qp) {
			return (int)i;
		}
	}
	return -1;
}

/*
 * A fatal event on one lane's QP (QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR): that
 * lane fails as a failed completion fails it, not the whole xport. Its QP is
 * put in error (the device may have done so already), so its posted work,
 * the receives every lane has posted included, comes back flushed; the
 * engine then takes the lane as lost (rails), or fails the session on those
 * completions (no rails), as for any failed completion.
 */
int verbs_lane_fatal(struct verbs_xport *vx, unsigned lane, const char *dev, const char *what)
{
	struct verbs_lane *ln = &vx->lanes[lane];

	if (!ln->failed) {
		verbs_set_error(vx, "lane %u: %s: %s", lane, dev, what);
	}
	ln->failed = true;
	return ln->has_qp && verbs_qp_error(ln) == 0 ? 0 : -EIO;
}

/*
 * A device's async events (non-blocking fd). A fatal event on a lane's QP
 * fails that lane (lane_fatal); one on the device or its CQ (all its lanes
 * share it) loses the device; one on an unknown QP or an SRQ ends the
 * session with its name; a port going down does not by itself (a link that
 * comes back within the QP's retries costs nothing; one that does not fails
 * the work requests).
 */
static int take_async(struct verbs_xport *vx, unsigned dev)
{
	struct verbs_dev *dv = &vx->devs[dev];
	struct ibv_async_event ev;

	while (!dv->lost && ibv_get_async_event(dv->verbs, &ev) == 0) {
		enum ibv_event_type type = ev.event_type;
		int lane = -1;
		int r = 0;

		switch (type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
			lane = lane_of_qp(vx, ev.element.qp);
			r = -EIO;
			break;
		case IBV_EVENT_SRQ_ERR:
			r = -EIO;
			break;
		case IBV_EVENT_CQ_ERR:
		case IBV_EVENT_DEVICE_FATAL:
			ibv_ack_async_event(&ev);
			r = verbs_dev_lost(vx, dev, ibv_event_type_str(type));
			if (r < 0) {
				return r;
			}
			continue;
		default:
			break;
		}
		ibv_ack_async_event(&ev);
		if (r < 0 && lane >= 0) {
			r = verbs_lane_fatal(vx, (unsigned)lane, dv->name,
					     ibv_event_type_str(type));
		}
		if (r < 0) {
			/* lane_fatal named a lane whose QP could not be put in error */
			if (lane < 0) {
				verbs_set_error(vx, "%s: %s", dv->name, ibv_event_type_str(type));
			}
			return r;
		}
	}
	return 0;
}

/*
 * The lanes' CM events after set-up. The device removed: it is lost
 * (devloss.c). The address moved to another device: the lane fails (its QP
 * stays on the old one). A lane the peer disconnected refuses new work
 * (post_writes) but is no failure by itself: a peer that has finished
 * disconnects while our END may still be on its way to us.
 */
static int take_cm(struct verbs_xport *vx)
{
	struct rdma_cm_event *ev;

	while (vx->ec && rdma_get_cm_event(vx->ec, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;
		int lane = verbs_lane_of_id(vx, ev->id);

		int r;

		rdma_ack_cm_event(ev);
		switch (type) {
		case RDMA_CM_EVENT_DISCONNECTED:
			if (lane >= 0) {
				vx->lanes[lane].peer_gone = true;
			}
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			if (lane < 0 || !vx->lanes[lane].has_qp) {
				verbs_set_error(vx, "lane %d: the RDMA device was removed", lane);
				return -ENODEV;
			}
			r = verbs_dev_lost(vx, vx->lanes[lane].dev, "the device was removed");
			if (r < 0) {
				return r;
			}
			break;
		case RDMA_CM_EVENT_ADDR_CHANGE:
			if (lane < 0 || !vx->lanes[lane].has_qp) {
				verbs_set_error(
				    vx, "lane %d: the address it uses moved to another device",
				    lane);
				return -EADDRNOTAVAIL;
			}
			r = verbs_lane_fatal(vx, (unsigned)lane,
					     ibv_get_device_name(vx->lanes[lane].id->verbs->device),
					     "the address it uses moved to another device");
			if (r < 0 && !verbs_lane_lost(vx, (unsigned)lane)) {
				return r;
			}
			break;
		default:
			break;
		}
	}
	return 0;
}

/* A descriptor in error (a device detached reports EPOLLERR, nothing to read) ends the session. */
int verbs_take_events(struct verbs_xport *vx, bool comp[XPORT_MAX_LANES])
{
	struct epoll_event evs[2 * XPORT_MAX_LANES + 1];
	int n = epoll_wait(vx->epfd, evs, (int)ARRAY_SIZE(evs), 0);

	if (n < 0) {
		return errno == EINTR ? 0 : negerrno();
	}
	for (int i = 0; i < n; i++) {
		unsigned kind = evs[i].data.u32 >> 16, dev = evs[i].data.u32 & 0xffff;
		const char *name = verbs_dev_name(vx, dev);
		int r = 0;

		if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
			char why[96];

			snprintf(why, sizeof(why), "its %s reports %s (device gone?)",
				 kind == VERBS_EV_COMP	  ? "completion channel"
				 : kind == VERBS_EV_ASYNC ? "async event descriptor"
							  : "CM event channel",
				 (evs[i].events & EPOLLERR) ? "an error" : "a hang-up");
			if (kind == VERBS_EV_CM || dev >= vx->ndevs) {
				verbs_set_error(vx, "%s: %s", name, why);
				return -ENODEV;
			}
			r = verbs_dev_lost(vx, dev, why);
			if (r < 0) {
				return r;
			}
			continue;
		}
		if (kind != VERBS_EV_CM && dev < vx->ndevs && vx->devs[dev].lost) {
			continue; /* an event taken before it left the set */
		}
		if (kind == VERBS_EV_COMP && dev < vx->ndevs) {
			comp[dev] = true;
		} else if (kind == VERBS_EV_ASYNC && dev < vx->ndevs) {
			r = take_async(vx, dev);
		} else if (kind == VERBS_EV_CM) {
			r = take_cm(vx);
		}
		if (r < 0) {
			return r;
		}
	}
	return 0;
}
