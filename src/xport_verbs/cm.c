/* SPDX-License-Identifier: MIT */
/*
 * librdmacm for both sides of a verbs xport: waiting for CM events on a
 * non-blocking channel within a deadline, what a failure event means as an
 * errno, the connection parameters every lane uses (writes only, finite
 * retries), and which lane a CM id is.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "clock.h"
#include "verbs-internal.h"

/*
 * Transport retries before a lane fails (IBV_WC_RETRY_EXC_ERR): 6, so a
 * lane tries 7 times in all, 7 ACK timeouts (rdma_cm's, or --ack-timeout).
 * Not 7: Soft-RoCE (rxe_comp.c) takes a retry count of 7 to mean "retry
 * for ever", as the spec says only of the RNR retry count, so a lane whose
 * peer vanished would never fail on rxe.
 */
#define VERBS_RETRY_COUNT 6
/* Finite: a missing receive is an engine bug that must show, not hang. */
#define VERBS_RNR_RETRY 6

int verbs_cm_next_event(struct rdma_event_channel *ec, int64_t deadline, struct rdma_cm_event **ret)
{
	for (;;) {
		struct pollfd pfd = { .fd = ec->fd, .events = POLLIN };
		int left, r;

		if (rdma_get_cm_event(ec, ret) == 0) {
			return 0;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			return negerrno();
		}
		left = remaining_ms(deadline);
		if (left == 0) {
			return -ETIMEDOUT;
		}
		r = poll(&pfd, 1, left);
		if (r < 0 && errno != EINTR) {
			return negerrno();
		}
	}
}

int verbs_cm_event_errno(const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ev->status < 0 ? ev->status : -EHOSTUNREACH;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return -ECONNRESET;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return -ENODEV;
	default:
		return -ECONNABORTED;
	}
}

int verbs_cm_wait(struct rdma_event_channel *ec, struct rdma_cm_id *id,
		  enum rdma_cm_event_type want, int64_t deadline)
{
	for (;;) {
		struct rdma_cm_event *ev;
		int r = verbs_cm_next_event(ec, deadline, &ev);
		enum rdma_cm_event_type type;
		bool ours;

		if (r < 0) {
			return r;
		}
		type = ev->event;
		ours = ev->id == id;
		r = verbs_cm_event_errno(ev);
		rdma_ack_cm_event(ev);
		if (ours && type == want) {
			return 0;
		}
		if (ours || type == RDMA_CM_EVENT_DISCONNECTED ||
		    type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
			return r;
		}
	}
}

void verbs_conn_param_init(struct rdma_conn_param *cp, const void *pdata, uint8_t plen)
{
	memset(cp, 0, sizeof(*cp));
	cp->private_data = pdata;
	cp->private_data_len = plen;
	/* Writes only: no RDMA READ or atomics in either direction. */
	cp->responder_resources = 0;
	cp->initiator_depth = 0;
	cp->retry_count = VERBS_RETRY_COUNT;
	cp->rnr_retry_count = VERBS_RNR_RETRY;
}

int verbs_lane_of_id(const struct verbs_xport *vx, const struct rdma_cm_id *id)
{
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		if (vx->lanes[i].id == id) {
			return (int)i;
		}
	}
	return -1;
}
