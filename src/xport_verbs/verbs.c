/* SPDX-License-Identifier: MIT */
/*
 * The verbs xport as a whole (the transport: src/xport_verbs/verbs-internal.h):
 * its structure and parameters, its error, teardown in the order verbs wants,
 * and the ops table callers reach it by.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fdutil.h"
#include "rdmadev.h"
#include "verbs-internal.h"

#define VERBS_MAX_DEPTH 16384

void verbs_set_error(struct verbs_xport *vx, const char *fmt, ...)
{
	va_list ap;

	/* The first failure is the cause; later ones are its consequences. */
	if (vx->has_error) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(vx->error, sizeof(vx->error), fmt, ap);
	va_end(ap);
	vx->has_error = true;
}

const char *verbs_last_error(struct xport *x)
{
	struct verbs_xport *vx = to_verbs(x);

	return vx->has_error ? vx->error : NULL;
}

int verbs_set_nonblock(int fd)
{
	int r = fd_set_nonblock(fd, true);

	if (r < 0) {
		return r;
	}
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		return negerrno();
	}
	return 0;
}

/* ---- set-up ---- */

int verbs_params_check(const struct xport_params *p)
{
	if (!p || p->nlanes < 1 || p->nlanes > XPORT_MAX_LANES || p->sq_depth < 2 ||
	    p->sq_depth > VERBS_MAX_DEPTH || p->rq_depth < 1 || p->rq_depth > VERBS_MAX_DEPTH ||
	    p->timeout_ms <= 0 || p->ndevices > XPORT_MAX_LANES || p->nrails >= XPORT_MAX_LANES) {
		return -EINVAL;
	}
	for (unsigned i = 0; i < p->nrails; i++) {
		if (p->rails[i].ss_family != AF_INET && p->rails[i].ss_family != AF_INET6) {
			return -EINVAL;
		}
	}
	for (unsigned i = 0; i < p->ndevices; i++) {
		struct rdmadev_spec spec;

		if (rdmadev_spec_parse(p->devices[i], &spec) < 0) {
			return -EINVAL;
		}
	}
	return 0;
}

struct verbs_xport *verbs_xport_alloc(const struct xport_params *p)
{
	struct verbs_xport *vx = calloc(1, sizeof(*vx));

	if (!vx) {
		return NULL;
	}
	vx->pub.ops = &xport_verbs_ops;
	vx->pub.nlanes = p->nlanes;
	vx->pub.sq_depth = p->sq_depth;
	vx->pub.rq_depth = p->rq_depth;
	vx->pub.max_inline = VERBS_MAX_INLINE;
	/* Windows ride the WRITE + SEND path: a SEND can close one, an immediate cannot. */
	vx->pub.windows = p->windows;
	vx->write_send = p->write_send || p->windows;
	vx->sq_cap = vx->write_send ? 2 * p->sq_depth : p->sq_depth;
	vx->busy_poll = p->busy_poll;
	vx->tos = p->tos_set ? p->tos : -1;
	vx->ack_timeout = p->ack_timeout_set ? p->ack_timeout : -1;
	vx->epfd = -1;
	vx->test_qp_fatal = p->test_qp_fatal;
	for (unsigned i = 0; i < p->nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];

		ln->sq_ids = calloc(vx->sq_cap, sizeof(*ln->sq_ids));
		ln->rq_ids = calloc(p->rq_depth, sizeof(*ln->rq_ids));
		if (!ln->sq_ids || !ln->rq_ids) {
			for (unsigned j = 0; j <= i; j++) {
				free(vx->lanes[j].sq_ids);
				free(vx->lanes[j].rq_ids);
			}
			free(vx);
			return NULL;
		}
	}
	return vx;
}

/* ---- teardown ---- */

/* Each lane disconnected, then its QP gone: before the MRs, PD and CQ they use. */
static void lanes_disconnect(struct verbs_xport *vx)
{
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];

		if (ln->id && ln->connected) {
			(void)rdma_disconnect(ln->id);
		}
	}
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];

		if (ln->id && ln->has_qp) {
			rdma_destroy_qp(ln->id);
			ln->has_qp = false;
		}
	}
}

/* The lanes' message areas and every registration, in each device's domain. */
static void mrs_free(struct verbs_xport *vx)
{
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];

		if (ln->msg_mr) {
			(void)ibv_dereg_mr(ln->msg_mr);
		}
		free(ln->msgs);
	}
	while (vx->mrs) {
		struct verbs_mr *m = vx->mrs;

		vx->mrs = m->next;
		verbs_mr_windows_free(m);
		for (unsigned d = 0; d < vx->ndevs; d++) {
			if (m->mr[d]) {
				(void)ibv_dereg_mr(m->mr[d]);
			}
		}
		free(m);
	}
}

/* Each device's PD, CQ (after its last event is acked: we ack each at once) and channel. */
static void devs_free(struct verbs_xport *vx)
{
	for (unsigned d = 0; d < vx->ndevs; d++) {
		struct verbs_dev *dv = &vx->devs[d];

		if (dv->pd) {
			(void)ibv_dealloc_pd(dv->pd);
		}
		if (dv->cq) {
			(void)ibv_destroy_cq(dv->cq);
		}
		if (dv->cch) {
			(void)ibv_destroy_comp_channel(dv->cch);
		}
	}
}

/* The lanes' CM ids, after their QPs, and their queues of wr_ids. */
static void lanes_free(struct verbs_xport *vx)
{
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];

		if (ln->id) {
			(void)rdma_destroy_id(ln->id);
		}
		free(ln->sq_ids);
		free(ln->rq_ids);
	}
}

/*
 * Teardown in the order verbs wants: QPs to error and drained (quiesce),
 * their memory windows gone, disconnected and gone before the MRs, PD and CQ they use; the CQ after
 * its last event is acked (we ack each at once); CM ids after their QPs;
 * the channel last. Safe on a half-built xport.
 */
void verbs_destroy(struct xport *x)
{
	struct verbs_xport *vx;

	if (!x) {
		return;
	}
	vx = to_verbs(x);
	(void)verbs_quiesce(x);
	/*
	 * Windows before the QPs: a window still open holds its QP (rxe
	 * waits 50 s for that reference when the QP is destroyed first).
	 */
	for (struct verbs_mr *m = vx->mrs; m; m = m->next) {
		verbs_mr_windows_free(m);
	}
	lanes_disconnect(vx);
	mrs_free(vx);
	devs_free(vx);
	if (vx->epfd >= 0) {
		close(vx->epfd);
	}
	lanes_free(vx);
	if (vx->ec) {
		rdma_destroy_event_channel(vx->ec);
	}
	free(vx);
}

const struct xport_ops xport_verbs_ops = {
	.name = "verbs",
	.kind = XPORT_KIND_VERBS,
	.listen = verbs_listen,
	.listen_rail = verbs_listen_rail,
	.accept = verbs_accept,
	.listener_close = verbs_listener_close,
	.connect = verbs_connect,
	.reg_mr = verbs_reg_mr,
	.dereg_mr = verbs_dereg_mr,
	.window_open = verbs_window_open,
	.window_close = verbs_window_close,
	.quiesce = verbs_quiesce,
	.lane_down = verbs_lane_down,
	.post_writes = verbs_post_writes,
	.post_recvs = verbs_post_recvs,
	.poll_cq = verbs_poll_cq,
	.event_fd = verbs_event_fd,
	.numa_node = verbs_numa_node,
	.last_error = verbs_last_error,
	.destroy = verbs_destroy,
};
