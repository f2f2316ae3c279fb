/* SPDX-License-Identifier: MIT */
/*
 * The `verbs` transport: real RC queue pairs through libibverbs, connected
 * with librdmacm.
 *
 * One xport = nlanes RC QPs ("lanes"). Lanes on one device share its
 * protection domain and completion queue (with a completion channel); an
 * active side given several devices (rails) stripes its lanes over them, and
 * memory is then registered in every device's domain, one key pair per lane.
 * With more than one device event_fd is an epoll set of the channels. Each
 * lane presents the session token in the RDMA CM private data; the listener
 * checks it before any QP exists and rejects (rdma_reject) what does not fit.
 * Memory is registered LOCAL_WRITE, plus REMOTE_WRITE when asked: never
 * remote read or atomics (THREATS.md C.20).
 *
 * Our hardware wr_ids name (send|recv, lane, queue sequence) so that error
 * completions, whose opcode is undefined, still map back to the engine's
 * wr_id and lane; verbs_wr.c has the pure parts.
 *
 * The WRITE + SEND path (xport_params.write_send, for iWARP, which has no
 * immediate data: siw, cxgb4, irdma in iWARP mode refuse WRITE_WITH_IMM).
 * A WRITE_IMM becomes an RDMA WRITE of its bytes, then a SEND of its imm and
 * len (8 bytes) into a receive buffer of ours: each lane has its own small
 * registered area, one message entry per send queue entry and one per posted
 * receive (the engine's post_recvs posts one of ours each). A receive's
 * completion turns back into RECV_IMM with the message's imm and len. What
 * the interface promises still holds because a SEND is delivered only after
 * every earlier message on its connection is placed: on InfiniBand/RoCE RC
 * the responder executes requests in order and completes a receive only once
 * the SEND and everything before it is placed; on iWARP, RDMAP (RFC 5040,
 * 5.5 "Ordering and Completions") requires a Send to complete at the data
 * sink only after every earlier RDMA Write on the stream is placed. The len
 * is the peer's word, not the hardware's: a peer holding the token can write
 * the bytes it likes there anyway, so it gains nothing by lying about it.
 * iWARP has no RNR retry: a SEND without a posted receive is fatal. The
 * engine posts its receives before the peer can send (RING, credits), and
 * here the active side opens every lane with one message the passive side
 * has a receive for before it accepts (MPA wants the active side first);
 * accept returns once each lane's opening message is in, connect once each
 * was taken.
 *
 * Not thread-safe per xport (nor is the engine's use of it): one thread
 * posts and polls an xport at a time.
 */
#include "xport.h"

#include <arpa/inet.h>
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <openssl/crypto.h>
#include <rdma/rdma_cma.h>

#include "macro.h"
#include "clock.h"
#include "fdutil.h"
#include "lane_hello.h"
#include "log.h"
#include "net.h"
#include "rdmadev.h"
#include "verbs_wr.h"

#define VERBS_HELLO_LEN LANE_HELLO_LEN
/*
 * Descriptors (32 bytes) and credits go inline. 64, not more: a larger
 * inline size makes some providers (mlx5) build much larger send queue
 * entries, and so fewer of them fit.
 */
#define VERBS_MAX_INLINE 64
#define VERBS_MAX_DEPTH	 16384
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
/*
 * The receiver-not-ready NAK timer we ask peers to wait: IB encoding 12 =
 * 0.64 ms. rdma_cm leaves 0, which means 655 ms per retry.
 */
#define VERBS_MIN_RNR_TIMER 12
/* What an event in the epoll set is (epoll_event.data.u32 >> 16); the device in the low bits. */
#define VERBS_EV_COMP	      0u
#define VERBS_EV_ASYNC	      1u
#define VERBS_EV_CM	      2u
#define VERBS_POST_STACK      64
#define VERBS_SIW_VENDOR_ID   0x626d74u
#define VERBS_RESOLVE_STEP_MS 1000
/*
 * Teardown waits this long for the lanes' flush (QP in error: every work
 * request outstanding completes with WR_FLUSH_ERR) before it goes on.
 */
#define VERBS_DRAIN_MS 300

/* ---- time ---- */

static int set_nonblock(int fd)
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

/* ---- structures ---- */

struct verbs_mr {
	struct xport_mr pub;
	struct ibv_mr *mr[XPORT_MAX_LANES]; /* per device, as vx->devs */
	struct verbs_mr *next;
};

/* One device's resources, shared by the lanes on it. */
struct verbs_dev {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
};

struct verbs_lane {
	struct rdma_cm_id *id;
	/*
	 * WRITE + SEND: message entries, sq_cap for SENDs (by sequence) then
	 * rq_depth for receives, registered on the lane's device.
	 */
	uint8_t *msgs;
	struct ibv_mr *msg_mr;
	unsigned dev; /* index into vx->devs, once it has a QP */
	bool has_qp;
	bool connected;
	bool failed;
	bool peer_gone; /* DISCONNECTED: nothing more may be posted */
	bool draining;	/* quiesce put the QP in error: its receives come back flushed */
	/*
	 * Quiesce: the signaled marker posted after the QP went to error. Its
	 * flush completion comes after every earlier send's (in order), so it
	 * shows the send queue empty, unsignaled requests included. The QP has
	 * room for it beyond sq_depth.
	 */
	bool drain_sq;
	uint64_t drain_seq;
	/* Send queue: engine wr_ids of entries [sq_done, sq_tail). */
	uint64_t *sq_ids;
	uint64_t sq_tail, sq_done;
	/* Receive queue, likewise. */
	uint64_t *rq_ids;
	uint64_t rq_tail, rq_done;
};

struct verbs_xport {
	struct xport pub;
	struct rdma_event_channel *ec; /* the lanes' CM events (after accept: migrated here) */
	struct verbs_dev devs[XPORT_MAX_LANES];
	unsigned ndevs;
	/*
	 * The event fd: an epoll set of every device's completion channel and
	 * async event fd, and (once connected) the lanes' CM event channel.
	 */
	int epfd;
	struct verbs_mr *mrs;
	bool write_send; /* XPORT_PATH_WRITE_SEND: WRITE then SEND, no immediates */
	/*
	 * Hardware send entries per lane we keep in flight: sq_depth, or twice
	 * that on WRITE + SEND (a WRITE_IMM with bytes takes two).
	 */
	unsigned sq_cap;
	/*
	 * A device maps remote addresses by our virtual address whatever iova
	 * we register (siw ignores it): registrations then use their address
	 * as iova, and the peer sees it.
	 */
	bool va_keys;
	bool busy_poll;		/* no re-arming: the engine polls every turn */
	int tos, ack_timeout;	/* xport_params' (tos: both sides); -1: the system's */
	bool quiesced;		/* lanes in error and drained: nothing more is posted or polled */
	unsigned test_qp_fatal; /* xport_params': 1 + lane, 0 none */
	uint64_t test_polled;	/* completions polled, for test_qp_fatal */
	bool has_error;
	char error[256];
	struct verbs_lane lanes[XPORT_MAX_LANES];
};

static struct verbs_xport *to_verbs(struct xport *x)
{
	return container_of(x, struct verbs_xport, pub);
}

static void set_error(struct verbs_xport *vx, const char *fmt, ...) _printf_(2, 3);
static void set_error(struct verbs_xport *vx, const char *fmt, ...)
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

static int params_check(const struct xport_params *p)
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
		if (!rdmadev_name_ok(p->devices[i])) {
			return -EINVAL;
		}
	}
	return 0;
}

/* ---- xport lifetime ---- */

static struct verbs_xport *xport_alloc(const struct xport_params *p)
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
	vx->write_send = p->write_send;
	vx->sq_cap = p->write_send ? 2 * p->sq_depth : p->sq_depth;
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

/* ---- quiesce ---- */

/* Has every lane's flush come back: the marker's, and one per posted receive? */
static bool lanes_drained(const struct verbs_xport *vx)
{
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		const struct verbs_lane *ln = &vx->lanes[i];

		if (!ln->draining) {
			continue;
		}
		if ((ln->drain_sq && ln->sq_done <= ln->drain_seq) || ln->rq_done != ln->rq_tail) {
			return false;
		}
	}
	return true;
}

/* Takes what a device's CQ holds, for the bookkeeping only (nobody gets these). */
static int drain_device(struct verbs_xport *vx, struct verbs_dev *dv)
{
	struct ibv_wc hw[32];
	int got;

	if (!dv->cq) {
		return 0; /* a half-built xport: a device whose set-up failed */
	}
	got = ibv_poll_cq(dv->cq, (int)ARRAY_SIZE(hw), hw);
	for (int i = 0; i < got; i++) {
		enum verbs_wrid_kind kind;
		struct verbs_lane *ln;
		unsigned lane;
		uint64_t seq48;

		if (verbs_wrid_decode(hw[i].wr_id, vx->pub.nlanes, &kind, &lane, &seq48) < 0) {
			continue;
		}
		ln = &vx->lanes[lane];
		if (kind == VERBS_WRID_SEND) {
			ln->sq_done = verbs_seq_expand(ln->sq_done, seq48) + 1;
		} else {
			ln->rq_done = verbs_seq_expand(ln->rq_done, seq48) + 1;
		}
	}
	return got;
}

/*
 * As the kernel's ib_drain_qp: each QP to error, which flushes everything
 * outstanding on it; a signaled marker on its send queue (unsignaled
 * requests that finished leave no completion, the marker's flush comes
 * after all of them); then the CQs polled until every lane's marker and
 * posted receives are back, or VERBS_DRAIN_MS passed (said at debug
 * level; destroying the QPs still stops them before the MRs go).
 */
static int verbs_quiesce(struct xport *x)
{
	struct verbs_xport *vx = to_verbs(x);
	int64_t t0 = now_ms(), deadline = t0 + VERBS_DRAIN_MS;

	if (vx->quiesced) {
		return 0;
	}
	vx->quiesced = true;
	for (unsigned i = 0; i < x->nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];
		struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
		struct ibv_send_wr wr = { 0 }, *bad = NULL;
		int e;

		if (!ln->has_qp || !ln->id || !ln->id->qp) {
			continue;
		}
		e = ibv_modify_qp(ln->id->qp, &attr, IBV_QP_STATE);
		if (e != 0) {
			log_debug("verbs: lane %u: QP to error: %s", i, strerror(e));
			continue;
		}
		ln->draining = true;
		/* Zero bytes, no SGE: flushed at once, it touches no memory. */
		wr.wr_id = verbs_wrid_encode(VERBS_WRID_SEND, i, ln->sq_tail);
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		e = ibv_post_send(ln->id->qp, &wr, &bad);
		if (e != 0) {
			log_debug("verbs: lane %u: drain marker: %s", i, strerror(e));
			continue;
		}
		ln->drain_sq = true;
		ln->drain_seq = ln->sq_tail++;
	}
	while (!lanes_drained(vx)) {
		struct timespec ts = { .tv_nsec = 1000000 };
		int got = 0;

		for (unsigned d = 0; d < vx->ndevs; d++) {
			int n = drain_device(vx, &vx->devs[d]);

			if (n < 0) {
				log_debug("verbs: drain: ibv_poll_cq failed");
				return -EIO;
			}
			got += n;
		}
		if (got > 0 || lanes_drained(vx)) {
			continue;
		}
		if (now_ms() >= deadline) {
			for (unsigned i = 0; i < x->nlanes; i++) {
				const struct verbs_lane *ln = &vx->lanes[i];

				if (!ln->draining ||
				    ((!ln->drain_sq || ln->sq_done > ln->drain_seq) &&
				     ln->rq_done == ln->rq_tail)) {
					continue;
				}
				log_debug("verbs: lane %u not drained after %d ms: %llu sends, "
					  "%llu receives outstanding; going on",
					  i, VERBS_DRAIN_MS,
					  (unsigned long long)(ln->sq_tail - ln->sq_done),
					  (unsigned long long)(ln->rq_tail - ln->rq_done));
			}
			return -ETIMEDOUT;
		}
		nanosleep(&ts, NULL);
	}
	log_debug("verbs: %u lanes quiesced in %lld ms", x->nlanes, (long long)(now_ms() - t0));
	return 0;
}

/*
 * One lane's QP to error: its posted work is flushed. The peer's QP learns
 * at its next request (retries exhausted); the engine tells the peer over
 * the control channel (rails) before that.
 */
static int verbs_lane_down(struct xport *x, unsigned lane)
{
	struct verbs_xport *vx = to_verbs(x);
	struct verbs_lane *ln;
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	int e;

	if (lane >= x->nlanes) {
		return -EINVAL;
	}
	ln = &vx->lanes[lane];
	if (!ln->has_qp || !ln->id || !ln->id->qp) {
		return -ENOTCONN;
	}
	e = ibv_modify_qp(ln->id->qp, &attr, IBV_QP_STATE);
	if (e != 0) {
		return -e;
	}
	ln->failed = true;
	return 0;
}

/*
 * Teardown in the order verbs wants: QPs to error and drained (quiesce),
 * disconnected and gone before the MRs, PD and CQ they use; the CQ after
 * its last event is acked
 * (we ack each at once); CM ids after their QPs; the channel last. Safe on a
 * half-built xport.
 */
static void verbs_destroy(struct xport *x)
{
	struct verbs_xport *vx;

	if (!x) {
		return;
	}
	vx = to_verbs(x);
	(void)verbs_quiesce(x);
	for (unsigned i = 0; i < x->nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];

		if (ln->id && ln->connected) {
			(void)rdma_disconnect(ln->id);
		}
	}
	for (unsigned i = 0; i < x->nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];

		if (ln->id && ln->has_qp) {
			rdma_destroy_qp(ln->id);
			ln->has_qp = false;
		}
	}
	for (unsigned i = 0; i < x->nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];

		if (ln->msg_mr) {
			(void)ibv_dereg_mr(ln->msg_mr);
		}
		free(ln->msgs);
	}
	while (vx->mrs) {
		struct verbs_mr *m = vx->mrs;

		vx->mrs = m->next;
		for (unsigned d = 0; d < vx->ndevs; d++) {
			if (m->mr[d]) {
				(void)ibv_dereg_mr(m->mr[d]);
			}
		}
		free(m);
	}
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
	if (vx->epfd >= 0) {
		close(vx->epfd);
	}
	for (unsigned i = 0; i < x->nlanes; i++) {
		struct verbs_lane *ln = &vx->lanes[i];

		if (ln->id) {
			(void)rdma_destroy_id(ln->id);
		}
		free(ln->sq_ids);
		free(ln->rq_ids);
	}
	if (vx->ec) {
		rdma_destroy_event_channel(vx->ec);
	}
	free(vx);
}

static int xport_watch(struct verbs_xport *vx, int fd, unsigned kind, unsigned dev)
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

/*
 * One fd wakes the engine for everything of a device: completions, and the
 * async events (a port down, a QP in error, the device fatal) whose
 * descriptor reports EPOLLERR when the device goes away.
 */
static int xport_watch_device(struct verbs_xport *vx, unsigned dev)
{
	struct verbs_dev *dv = &vx->devs[dev];
	int r = xport_watch(vx, dv->cch->fd, VERBS_EV_COMP, dev);

	if (r >= 0) {
		r = set_nonblock(dv->verbs->async_fd);
	}
	if (r >= 0) {
		r = xport_watch(vx, dv->verbs->async_fd, VERBS_EV_ASYNC, dev);
	}
	return r;
}

/* PD, completion channel and CQ on a device new to this xport. */
static int xport_setup_device(struct verbs_xport *vx, struct verbs_dev *dv,
			      struct ibv_context *verbs)
{
	struct ibv_device_attr da;
	int cqe, r;

	dv->verbs = verbs;
	/*
	 * The device's own limits, before anything is sized by ours: a send
	 * queue deeper than it allows is made shallower (the engine posts within
	 * x->sq_depth); receive queue and CQ sizes are the engine's credits and
	 * can't shrink, so a device too small for them is an error that says so.
	 */
	r = ibv_query_device(verbs, &da);
	if (r != 0) {
		set_error(vx, "%s: ibv_query_device: %s", ibv_get_device_name(verbs->device),
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
	/* Soft-iWARP's vendor id ("bmt"): it checks remote addresses against our own. */
	if (da.vendor_id == VERBS_SIW_VENDOR_ID) {
		vx->va_keys = true;
	}
	if ((da.max_qp_wr > 0 && vx->pub.rq_depth > (unsigned)da.max_qp_wr) ||
	    (da.max_cqe > 0 && cqe > da.max_cqe)) {
		set_error(vx,
			  "%s allows %d work requests per queue and %d completions per CQ; "
			  "%u lanes of %u receive slots need %u and %d (fewer --slots or lanes)",
			  ibv_get_device_name(verbs->device), da.max_qp_wr, da.max_cqe,
			  vx->pub.nlanes, vx->pub.rq_depth, vx->pub.rq_depth, cqe);
		return -EINVAL;
	}
	dv->pd = ibv_alloc_pd(verbs);
	if (!dv->pd) {
		return negerrno();
	}
	dv->cch = ibv_create_comp_channel(verbs);
	if (!dv->cch) {
		return negerrno();
	}
	r = set_nonblock(dv->cch->fd);
	if (r < 0) {
		return r;
	}
	dv->cq = ibv_create_cq(verbs, cqe, vx, dv->cch, 0);
	if (!dv->cq) {
		return negerrno();
	}
	r = ibv_req_notify_cq(dv->cq, 0);
	return r ? -r : 0;
}

/*
 * The index of the lane's device, set up on first use. Only an active side
 * with rails may add a second device (may_add); a passive side's lanes all
 * arrive on the device of its listening address, and one that does not is
 * refused (-EXDEV).
 */
static int xport_device(struct verbs_xport *vx, struct ibv_context *verbs, bool may_add)
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

/* WRITE + SEND: the lane's message entries, registered for local use only. */
static int lane_setup_msgs(struct verbs_xport *vx, struct verbs_lane *ln)
{
	size_t len = (size_t)(vx->sq_cap + vx->pub.rq_depth) * VERBS_SEND_MSG_LEN;

	if (!vx->write_send) {
		return 0;
	}
	ln->msgs = calloc(1, len);
	if (!ln->msgs) {
		return -ENOMEM;
	}
	ln->msg_mr = ibv_reg_mr(vx->devs[ln->dev].pd, ln->msgs, len, IBV_ACCESS_LOCAL_WRITE);
	return ln->msg_mr ? 0 : negerrno();
}

static uint8_t *lane_recv_msg(const struct verbs_xport *vx, const struct verbs_lane *ln,
			      uint64_t seq)
{
	return ln->msgs + (size_t)(vx->sq_cap + seq % vx->pub.rq_depth) * VERBS_SEND_MSG_LEN;
}

/* Post one receive for a message (WRITE + SEND), sequence ln->rq_tail. */
static int lane_post_msg_recv(struct verbs_xport *vx, unsigned lane)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct ibv_recv_wr wr, *bad = NULL;
	struct ibv_sge sge;

	verbs_recv_fill_msg(verbs_wrid_encode(VERBS_WRID_RECV, lane, ln->rq_tail),
			    lane_recv_msg(vx, ln, ln->rq_tail), ln->msg_mr->lkey, &wr, &sge);
	return ibv_post_recv(ln->id->qp, &wr, &bad);
}

/* An RC QP on the lane's CM id, with inline data if the device has it. */
static int lane_create_qp(struct verbs_xport *vx, unsigned lane, bool may_add)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct ibv_qp_init_attr attr;
	struct verbs_dev *dv;
	int r = xport_device(vx, ln->id->verbs, may_add);

	if (r < 0) {
		return r;
	}
	ln->dev = (unsigned)r;
	dv = &vx->devs[ln->dev];
	for (int attempt = 0; attempt < 2; attempt++) {
		memset(&attr, 0, sizeof(attr));
		attr.send_cq = dv->cq;
		attr.recv_cq = dv->cq;
		attr.qp_type = IBV_QPT_RC;
		attr.sq_sig_all = 0;
		attr.cap.max_send_wr = vx->sq_cap + 1; /* + the quiesce marker */
		attr.cap.max_recv_wr = vx->pub.rq_depth;
		attr.cap.max_send_sge = 1;
		attr.cap.max_recv_sge = 1;
		attr.cap.max_inline_data = attempt == 0 ? VERBS_MAX_INLINE : 0;
		if (rdma_create_qp(ln->id, dv->pd, &attr) == 0) {
			ln->has_qp = true;
			r = lane_setup_msgs(vx, ln);
			if (r < 0) {
				return r;
			}
			/* The device may give more than asked; promise what all lanes have. */
			if (attr.cap.max_inline_data < vx->pub.max_inline) {
				vx->pub.max_inline = attr.cap.max_inline_data;
			}
			if (attempt == 1) {
				vx->pub.max_inline = 0;
			}
			return 0;
		}
		r = negerrno();
	}
	return r;
}

static void conn_param_init(struct rdma_conn_param *cp, const void *pdata, uint8_t plen)
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

/*
 * Once a lane is up (RTS): ask peers to wait 0.64 ms after our RNR NAK, not
 * the 655 ms rdma_cm leaves (RTS -> RTS may change it). Best effort: a
 * provider that refuses keeps the default, which is slow but correct.
 */
static void lane_tune(struct verbs_lane *ln)
{
	struct ibv_qp_attr attr = { .min_rnr_timer = VERBS_MIN_RNR_TIMER };

	if (ln->id && ln->id->qp) {
		(void)ibv_modify_qp(ln->id->qp, &attr, IBV_QP_MIN_RNR_TIMER);
	}
}

/* ---- WRITE + SEND: opening the lanes ---- */

/* The active side's first message on a lane (signaled; taken by wait_open). */
static int lane_post_open(struct verbs_xport *vx, unsigned lane)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct xport_wr w = { .opcode = XPORT_OP_WRITE_IMM,
			      .flags = XPORT_SEND_SIGNALED,
			      .imm = VERBS_OPEN_IMM,
			      .len = 0,
			      .lane = lane };
	uint8_t *msgs[XPORT_MAX_LANES] = { 0 };
	uint32_t lkeys[XPORT_MAX_LANES] = { 0 };
	struct ibv_send_wr wr, *heads[XPORT_MAX_LANES], *bad = NULL;
	size_t counts[XPORT_MAX_LANES], src;
	uint64_t base[XPORT_MAX_LANES] = { 0 };
	struct ibv_sge sge;
	int e;

	msgs[lane] = ln->msgs;
	lkeys[lane] = ln->msg_mr->lkey;
	base[lane] = ln->sq_tail;
	(void)verbs_wr_chain_send(&w, 1, vx->pub.nlanes, base, vx->pub.max_inline, msgs, lkeys,
				  vx->sq_cap, &wr, &sge, &src, heads, counts);
	/* The length field says "opening", not a length: no write ever has that many bytes. */
	verbs_send_msg_encode(VERBS_OPEN_IMM, VERBS_OPEN_LEN,
			      ln->msgs + (base[lane] % vx->sq_cap) * VERBS_SEND_MSG_LEN);
	e = ibv_post_send(ln->id->qp, &wr, &bad);
	if (e != 0) {
		set_error(vx, "lane %u: opening message: ibv_post_send: %s", lane, strerror(e));
		return -e;
	}
	ln->sq_tail++;
	return 0;
}

/* Has every lane its opening message out (active) or in (passive)? */
static bool lanes_open(const struct verbs_xport *vx)
{
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		const struct verbs_lane *ln = &vx->lanes[i];

		if (ln->sq_done != ln->sq_tail || ln->rq_done != ln->rq_tail) {
			return false;
		}
	}
	return true;
}

/* One completion while the lanes open: only the opening messages may come. */
static int open_complete(struct verbs_xport *vx, const struct ibv_wc *wc)
{
	struct xport_wc out;
	enum verbs_wrid_kind kind;
	struct verbs_lane *ln;
	uint64_t seq48, seq;
	uint32_t imm, len;

	if (verbs_wc_map(wc, vx->pub.nlanes, true, &out, &kind, &seq48) < 0) {
		set_error(vx, "opening the lanes: a completion that is no opening message "
			      "(is the peer on the WRITE + SEND path?)");
		return -EPROTO;
	}
	ln = &vx->lanes[out.lane];
	if (wc->status != IBV_WC_SUCCESS) {
		set_error(vx, "lane %u: opening message: %s (%s, vendor error 0x%x)", out.lane,
			  verbs_wc_status_name(wc->status), ibv_wc_status_str(wc->status),
			  wc->vendor_err);
		return -ECONNABORTED;
	}
	if (kind == VERBS_WRID_SEND) {
		ln->sq_done = verbs_seq_expand(ln->sq_done, seq48) + 1;
		return 0;
	}
	seq = verbs_seq_expand(ln->rq_done, seq48);
	verbs_send_msg_decode(lane_recv_msg(vx, ln, seq), &imm, &len);
	ln->rq_done = seq + 1;
	if (imm != VERBS_OPEN_IMM || len != VERBS_OPEN_LEN) {
		set_error(vx, "lane %u: the peer's first message is no opening message", out.lane);
		return -EPROTO;
	}
	return 0;
}

/*
 * Until every lane's opening message is in (passive) or taken by the peer
 * (active): nothing else is in flight yet, so whatever the CQs hold is one.
 * Their channel events stay for the first poll_cq, which re-arms.
 */
static int wait_open(struct verbs_xport *vx, int64_t deadline)
{
	if (!vx->write_send) {
		return 0;
	}
	while (!lanes_open(vx)) {
		struct timespec ts = { .tv_nsec = 1000000 };
		int got = 0;

		for (unsigned d = 0; d < vx->ndevs; d++) {
			struct ibv_wc hw[XPORT_MAX_LANES];
			int n = ibv_poll_cq(vx->devs[d].cq, (int)ARRAY_SIZE(hw), hw);

			if (n < 0) {
				set_error(vx, "ibv_poll_cq failed");
				return -EIO;
			}
			for (int i = 0; i < n; i++) {
				int r = open_complete(vx, &hw[i]);

				if (r < 0) {
					return r;
				}
			}
			got += n;
		}
		if (got > 0) {
			continue;
		}
		if (remaining_ms(deadline) == 0) {
			set_error(vx, "the lanes' opening messages did not all come through");
			return -ETIMEDOUT;
		}
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* ---- CM event waiting ---- */

/* Next CM event on ec before the deadline. */
static int cm_next_event(struct rdma_event_channel *ec, int64_t deadline,
			 struct rdma_cm_event **ret)
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

static int cm_event_errno(const struct rdma_cm_event *ev)
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

/* Wait for `want` on id; any other event of the xport's lanes is a failure. */
static int cm_wait(struct rdma_event_channel *ec, struct rdma_cm_id *id,
		   enum rdma_cm_event_type want, int64_t deadline)
{
	for (;;) {
		struct rdma_cm_event *ev;
		int r = cm_next_event(ec, deadline, &ev);
		enum rdma_cm_event_type type;
		bool ours;

		if (r < 0) {
			return r;
		}
		type = ev->event;
		ours = ev->id == id;
		r = cm_event_errno(ev);
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

/* ---- passive side ---- */

struct xport_listener {
	struct rdma_event_channel *ec;
	/* ids[0]: listen's address; then listen_rail's (daemon rails), one channel for all */
	struct rdma_cm_id *ids[XPORT_MAX_LANES];
	unsigned nids;
	struct lane_tokens dead; /* tokens already used up */
};

static void verbs_listener_close(struct xport_listener *l)
{
	if (!l) {
		return;
	}
	for (unsigned i = 0; i < l->nids; i++) {
		(void)rdma_destroy_id(l->ids[i]);
	}
	if (l->ec) {
		rdma_destroy_event_channel(l->ec);
	}
	lane_tokens_free(&l->dead);
	free(l);
}

/* One more listening id on l's channel, bound to addr. */
static int verbs_listen_rail(struct xport_listener *l, const struct sockaddr *addr,
			     socklen_t addrlen, uint16_t *ret_port)
{
	struct rdma_cm_id *id = NULL;

	(void)addrlen;
	if (!l || !addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) {
		return -EINVAL;
	}
	if (l->nids >= XPORT_MAX_LANES) {
		return -E2BIG;
	}
	if (rdma_create_id(l->ec, &id, NULL, RDMA_PS_TCP) != 0) {
		return negerrno();
	}
	if (rdma_bind_addr(id, (struct sockaddr *)addr) != 0 || rdma_listen(id, 64) != 0) {
		int r = negerrno();

		(void)rdma_destroy_id(id);
		return r;
	}
	l->ids[l->nids++] = id;
	if (ret_port) {
		*ret_port = ntohs(rdma_get_src_port(id));
	}
	return 0;
}

static int verbs_listen(const struct sockaddr *addr, socklen_t addrlen,
			struct xport_listener **ret_listener, uint16_t *ret_port)
{
	struct xport_listener *l;
	int r;

	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) || !ret_listener) {
		return -EINVAL;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		return -ENOMEM;
	}
	l->ec = rdma_create_event_channel();
	if (!l->ec) {
		r = negerrno();
		goto fail;
	}
	r = set_nonblock(l->ec->fd);
	if (r < 0) {
		goto fail;
	}
	r = verbs_listen_rail(l, addr, addrlen, ret_port);
	if (r < 0) {
		goto fail;
	}
	*ret_listener = l;
	return 0;
fail:
	verbs_listener_close(l);
	return r;
}

/* May this connect request become a lane? Checked before any QP exists. */
static int request_lane(const struct rdma_cm_event *ev, const struct xport_params *p,
			bool token_dead, const struct verbs_xport *vx, bool rails)
{
	struct lane_hello h;
	int lane;

	/*
	 * From the control connection's client only: the token crossed the
	 * network in clear in this very request, so anyone on the path has it.
	 */
	if (p->peer_set &&
	    !xport_same_ip(rdma_get_peer_addr(ev->id), (const struct sockaddr *)&p->peer)) {
		return -EPERM;
	}
	if (lane_hello_decode(ev->param.conn.private_data, ev->param.conn.private_data_len, &h) <
	    0) {
		return -EPROTO;
	}
	if (token_dead || CRYPTO_memcmp(h.token, p->token, XPORT_TOKEN_LEN) != 0) {
		OPENSSL_cleanse(h.token, sizeof(h.token));
		return -EACCES;
	}
	OPENSSL_cleanse(h.token, sizeof(h.token));
	if (h.nlanes != p->nlanes || h.lane >= p->nlanes || vx->lanes[h.lane].id) {
		return -EPROTO;
	}
	/*
	 * Each lane on the device of the address it reached: with rails (more
	 * than one listening address) that may be several devices.
	 */
	if (rails ? (ev->listen_id && ev->id->verbs != ev->listen_id->verbs)
		  : (vx->ndevs > 0 && ev->id->verbs != vx->devs[0].verbs)) {
		return -EXDEV;
	}
	lane = h.lane;
	return lane;
}

/*
 * The passive side's own traffic class (the daemon's "tos"): rdma_cm would
 * give the QP the class of the connection request, and a QP's address
 * vector can change only on the way to RTR. So this side takes the QP
 * through INIT -> RTR (the request's attributes, traffic class replaced)
 * -> RTS itself, as librdmacm's rdma_accept does, and accepts with the QP
 * hidden from librdmacm (it then takes qp_num from the parameters and
 * leaves the QP alone).
 */
static int accept_with_tos(struct verbs_lane *ln, struct rdma_conn_param *cp, uint8_t tos)
{
	static const enum ibv_qp_state steps[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };
	struct rdma_cm_id *id = ln->id;
	struct ibv_qp *qp = id->qp;
	int r = 0;

	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		struct ibv_qp_attr attr = { .qp_state = steps[i] };
		int mask = 0;

		if (rdma_init_qp_attr(id, &attr, &mask) != 0) {
			return negerrno();
		}
		if (steps[i] == IBV_QPS_RTR) {
			/* As librdmacm's rdma_accept: these bits are not for ibv_modify_qp. */
			mask &= ~0xe00000;
			attr.max_dest_rd_atomic = cp->responder_resources;
			attr.ah_attr.grh.traffic_class = tos;
		} else if (steps[i] == IBV_QPS_RTS) {
			attr.max_rd_atomic = cp->initiator_depth;
		}
		r = ibv_modify_qp(qp, &attr, mask);
		if (r != 0) {
			return -r;
		}
	}
	cp->qp_num = qp->qp_num;
	id->qp = NULL;
	r = rdma_accept(id, cp) == 0 ? 0 : negerrno();
	id->qp = qp;
	return r;
}

/* A good request: resources, then rdma_accept. The lane owns id from here. */
static int accept_lane(struct verbs_xport *vx, unsigned lane, struct rdma_cm_id *id, bool rails)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct rdma_conn_param cp;
	int r;

	ln->id = id;
	r = lane_create_qp(vx, lane, rails);
	if (r < 0) {
		return r;
	}
	/* WRITE + SEND: the receive for the active side's opening message, before it can come. */
	if (vx->write_send) {
		int e = lane_post_msg_recv(vx, lane);

		if (e != 0) {
			set_error(vx, "lane %u: ibv_post_recv: %s", lane, strerror(e));
			return -e;
		}
		ln->rq_tail++;
	}
	conn_param_init(&cp, NULL, 0);
	if (vx->tos >= 0) {
		return accept_with_tos(ln, &cp, (uint8_t)vx->tos);
	}
	if (rdma_accept(id, &cp) != 0) {
		return negerrno();
	}
	return 0;
}

/* Which lane (index) owns this CM id, or -1. */
static int lane_of_id(const struct verbs_xport *vx, const struct rdma_cm_id *id)
{
	for (unsigned i = 0; i < vx->pub.nlanes; i++) {
		if (vx->lanes[i].id == id) {
			return (int)i;
		}
	}
	return -1;
}

static int accept_handle_event(struct xport_listener *l, const struct xport_params *p,
			       bool token_dead, struct verbs_xport *vx, struct rdma_cm_event *ev,
			       unsigned *nest)
{
	struct rdma_cm_id *id = ev->id;
	enum rdma_cm_event_type type = ev->event;
	int lane, r;

	if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		lane = request_lane(ev, p, token_dead, vx, l->nids > 1);
		if (lane < 0) {
			char from[INET6_ADDRSTRLEN + 8];

			(void)net_addr_str(rdma_get_peer_addr(id), sizeof(struct sockaddr_storage),
					   from, sizeof(from));
			log_debug("verbs: lane request from %s rejected: %s", from,
				  lane == -EPERM    ? "not the control connection's host"
				  : lane == -EACCES ? "wrong or used-up token"
				  : lane == -EXDEV  ? "arrived on another device"
						    : "malformed or duplicate lane");
		}
		rdma_ack_cm_event(ev);
		if (lane < 0) {
			/* Turned away before a QP or a byte of theirs exists here. */
			(void)rdma_reject(id, NULL, 0);
			(void)rdma_destroy_id(id);
			return 0;
		}
		r = accept_lane(vx, (unsigned)lane, id, l->nids > 1);
		if (r < 0) {
			(void)rdma_reject(id, NULL, 0);
		}
		return r;
	}
	lane = lane_of_id(vx, id);
	r = cm_event_errno(ev);
	rdma_ack_cm_event(ev);
	if (lane < 0) {
		/* A rejected request's id (already destroyed) or the listener's own. */
		return type == RDMA_CM_EVENT_DEVICE_REMOVAL ? -ENODEV : 0;
	}
	if (type == RDMA_CM_EVENT_ESTABLISHED) {
		vx->lanes[lane].connected = true;
		lane_tune(&vx->lanes[lane]);
		(*nest)++;
		return 0;
	}
	/* A lane that presented the token and then failed: the session is off. */
	return r;
}

static int verbs_accept(struct xport_listener *l, const struct xport_params *p, struct xport **ret)
{
	struct verbs_xport *vx;
	unsigned nest = 0;
	bool token_dead;
	int64_t deadline;
	int r = 0;

	if (!l || !ret || params_check(p) < 0) {
		return -EINVAL;
	}
	/* Sealed lanes exist on tcp only: never carry clear what was asked sealed. */
	if (p->seal) {
		return -EOPNOTSUPP;
	}
	vx = xport_alloc(p);
	if (!vx) {
		return -ENOMEM;
	}
	token_dead = lane_token_dead(&l->dead, p->token);
	deadline = now_ms() + p->timeout_ms;
	while (r >= 0 && nest < p->nlanes) {
		struct rdma_cm_event *ev;

		r = cm_next_event(l->ec, deadline, &ev);
		if (r >= 0) {
			r = accept_handle_event(l, p, token_dead, vx, ev, &nest);
		}
	}
	if (r >= 0) {
		r = wait_open(vx, deadline);
	}
	if (r >= 0) {
		r = lane_token_kill(&l->dead, p->token);
	}
	if (r >= 0) {
		/* The lanes' later events (disconnects) belong to the xport, not the listener. */
		vx->ec = rdma_create_event_channel();
		r = vx->ec ? set_nonblock(vx->ec->fd) : negerrno();
		for (unsigned i = 0; r >= 0 && i < p->nlanes; i++) {
			if (rdma_migrate_id(vx->lanes[i].id, vx->ec) != 0) {
				r = negerrno();
			}
		}
	}
	if (r >= 0) {
		r = xport_watch(vx, vx->ec->fd, VERBS_EV_CM, 0);
	}
	if (r < 0) {
		/*
		 * Lanes still on the listener's channel: destroy_id there is fine,
		 * every event we took from it is acked.
		 */
		verbs_destroy(&vx->pub);
		return r;
	}
	*ret = &vx->pub;
	return 0;
}

/* ---- active side ---- */

/*
 * rdma_resolve_addr in short attempts: the kernel looks at the neighbour
 * table again only when an attempt times out, so one long attempt can sleep
 * through an ARP reply that came in long ago (seen on Soft-RoCE over veth).
 */
static int resolve_addr(struct verbs_xport *vx, struct verbs_lane *ln, const struct sockaddr *src,
			const struct sockaddr *addr, int64_t deadline)
{
	for (;;) {
		int r, step;

		if (ln->id) {
			(void)rdma_destroy_id(ln->id);
			ln->id = NULL;
		}
		if (rdma_create_id(vx->ec, &ln->id, NULL, RDMA_PS_TCP) != 0) {
			ln->id = NULL;
			return negerrno();
		}
		/* Before the route is resolved: it carries the traffic class. */
		if (vx->tos >= 0) {
			uint8_t tos = (uint8_t)vx->tos;

			if (rdma_set_option(ln->id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos,
					    sizeof(tos)) != 0) {
				r = negerrno();
				set_error(vx, "lane: set TOS %d: %s", vx->tos, strerror(-r));
				return r;
			}
		}
		step = MAX(1, MIN(VERBS_RESOLVE_STEP_MS, remaining_ms(deadline)));
		if (rdma_resolve_addr(ln->id, (struct sockaddr *)src, (struct sockaddr *)addr,
				      step) != 0) {
			return negerrno();
		}
		r = cm_wait(vx->ec, ln->id, RDMA_CM_EVENT_ADDR_RESOLVED, deadline);
		if (r != -ETIMEDOUT || remaining_ms(deadline) == 0) {
			return r;
		}
	}
}

static int connect_lane(struct verbs_xport *vx, unsigned lane, const struct sockaddr *addr,
			const struct xport_params *p, int64_t deadline)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct lane_hello h = { .lane = (uint16_t)lane, .nlanes = (uint16_t)p->nlanes };
	uint8_t pdata[VERBS_HELLO_LEN];
	const char *dev = p->ndevices ? p->devices[lane % p->ndevices] : NULL;
	struct sockaddr_storage src;
	struct rdma_conn_param cp;
	int r;

	/* Rails: leave from an address of the lane's device, and rdma_cm binds to it. */
	if (dev) {
		r = rdmadev_src_addr(RDMADEV_SYSFS, dev, addr->sa_family, addr, &src);
		if (r < 0) {
			set_error(vx, "lane %u: no %s address on RDMA device %s: %s", lane,
				  addr->sa_family == AF_INET ? "IPv4" : "IPv6", dev, strerror(-r));
			return r == -ENOENT ? -EADDRNOTAVAIL : r;
		}
	}
	r = resolve_addr(vx, ln, dev ? (struct sockaddr *)&src : NULL, addr, deadline);
	if (r < 0) {
		return r;
	}
	if (dev && strcmp(ibv_get_device_name(ln->id->verbs->device), dev) != 0) {
		/* Two devices on one network device: the address does not pick ours. */
		set_error(vx, "lane %u: address of %s resolved to device %s", lane, dev,
			  ibv_get_device_name(ln->id->verbs->device));
		return -EXDEV;
	}
	if (rdma_resolve_route(ln->id, MAX(1, remaining_ms(deadline))) != 0) {
		return negerrno();
	}
	r = cm_wait(vx->ec, ln->id, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline);
	if (r < 0) {
		return r;
	}
	if (vx->ack_timeout >= 0) {
		uint8_t t = (uint8_t)vx->ack_timeout;

		if (rdma_set_option(ln->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t,
				    sizeof(t)) != 0) {
			r = negerrno();
			set_error(vx, "lane %u: set ACK timeout %d: %s", lane, vx->ack_timeout,
				  strerror(-r));
			return r;
		}
	}
	r = lane_create_qp(vx, lane, dev != NULL);
	if (r < 0) {
		return r;
	}
	memcpy(h.token, p->token, XPORT_TOKEN_LEN);
	lane_hello_encode(&h, pdata);
	OPENSSL_cleanse(h.token, sizeof(h.token));
	conn_param_init(&cp, pdata, sizeof(pdata));
	r = rdma_connect(ln->id, &cp) == 0 ? 0 : negerrno();
	OPENSSL_cleanse(pdata, sizeof(pdata));
	if (r < 0) {
		return r;
	}
	r = cm_wait(vx->ec, ln->id, RDMA_CM_EVENT_ESTABLISHED, deadline);
	if (r < 0) {
		return r;
	}
	ln->connected = true;
	lane_tune(ln);
	/* WRITE + SEND: iWARP's active side speaks first (MPA); the peer has a receive for it. */
	return vx->write_send ? lane_post_open(vx, lane) : 0;
}

static int verbs_connect(const struct sockaddr *addr, socklen_t addrlen,
			 const struct xport_params *p, struct xport **ret)
{
	struct verbs_xport *vx;
	int64_t deadline;
	int r = 0;

	if (!addr || !ret || params_check(p) < 0 ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) {
		return -EINVAL;
	}
	if (p->seal) {
		return -EOPNOTSUPP;
	}
	vx = xport_alloc(p);
	if (!vx) {
		return -ENOMEM;
	}
	deadline = now_ms() + p->timeout_ms;
	vx->ec = rdma_create_event_channel();
	r = vx->ec ? set_nonblock(vx->ec->fd) : negerrno();
	for (unsigned i = 0; r >= 0 && i < p->nlanes; i++) {
		/* Daemon rails: lane i to the daemon's address i % (1 + nrails). */
		unsigned a = p->nrails ? i % (1 + p->nrails) : 0;

		r = connect_lane(vx, i, a ? (const struct sockaddr *)&p->rails[a - 1] : addr, p,
				 deadline);
	}
	if (r >= 0) {
		r = wait_open(vx, deadline);
	}
	if (r >= 0) {
		r = xport_watch(vx, vx->ec->fd, VERBS_EV_CM, 0);
	}
	if (r < 0) {
		verbs_destroy(&vx->pub);
		return r;
	}
	*ret = &vx->pub;
	return 0;
}

/* ---- memory registration ---- */

static size_t page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps > 0 ? (size_t)ps : 4096;
}

static int verbs_reg_mr(struct xport *x, void *addr, size_t len, unsigned access,
			struct xport_mr **ret_mr)
{
	struct verbs_xport *vx = to_verbs(x);
	struct verbs_mr *m;
	int flags = IBV_ACCESS_LOCAL_WRITE;
	uint64_t iova;

	if (!addr || len == 0 || (uintptr_t)addr + len < (uintptr_t)addr || !ret_mr ||
	    (access & ~(unsigned)(XPORT_ACCESS_LOCAL | XPORT_ACCESS_REMOTE_WRITE)) != 0) {
		return -EINVAL;
	}
	if (vx->ndevs == 0) {
		return -ENOTCONN;
	}
	/* Never REMOTE_READ or atomics: a peer may only write where we let it. */
	if (access & XPORT_ACCESS_REMOTE_WRITE) {
		flags |= IBV_ACCESS_REMOTE_WRITE;
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
	/*
	 * Zero-based: the peer addresses the registration from its iova, so our
	 * heap addresses never leave the process. Devices (rxe included) map an
	 * iova to a page by its page offset, so the iova keeps addr's offset in
	 * its page: 0 for the page-aligned pools the engine registers.
	 */
	iova = vx->va_keys ? (uint64_t)(uintptr_t)addr
			   : (uint64_t)((uintptr_t)addr & (uintptr_t)(page_size() - 1));
	m = calloc(1, sizeof(*m));
	if (!m) {
		return -ENOMEM;
	}
	/* In every device's domain: a lane can only use keys of its own device. */
	for (unsigned d = 0; d < vx->ndevs; d++) {
		m->mr[d] = ibv_reg_mr_iova2(vx->devs[d].pd, addr, len, iova, (unsigned)flags);
		if (!m->mr[d]) {
			int r = negerrno();

			while (d-- > 0) {
				(void)ibv_dereg_mr(m->mr[d]);
			}
			free(m);
			return r;
		}
	}
	for (unsigned i = 0; i < x->nlanes; i++) {
		const struct ibv_mr *mr = m->mr[vx->lanes[i].dev];

		m->pub.lane_lkey[i] = mr->lkey;
		m->pub.lane_rkey[i] = (access & XPORT_ACCESS_REMOTE_WRITE) ? mr->rkey : 0;
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

static int verbs_dereg_mr(struct xport *x, struct xport_mr *pub)
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

/* ---- posting ---- */

static int verbs_post_writes(struct xport *x, const struct xport_wr *wrs, size_t n)
{
	struct verbs_xport *vx = to_verbs(x);
	struct ibv_send_wr stack_wr[2 * VERBS_POST_STACK], *out_wr = stack_wr;
	struct ibv_sge stack_sge[2 * VERBS_POST_STACK], *out_sge = stack_sge;
	size_t stack_src[2 * VERBS_POST_STACK], *src = stack_src;
	struct ibv_send_wr *heads[XPORT_MAX_LANES];
	size_t need[XPORT_MAX_LANES] = { 0 }, counts[XPORT_MAX_LANES], nhw = 0;
	uint64_t base[XPORT_MAX_LANES];
	int r = 0;

	if (n == 0) {
		return 0;
	}
	if (!wrs) {
		return -EINVAL;
	}
	if (vx->quiesced) {
		return -ESHUTDOWN;
	}
	for (size_t i = 0; i < n; i++) {
		r = verbs_wr_check(&wrs[i], x->nlanes, x->max_inline);
		if (r < 0) {
			return r;
		}
		need[wrs[i].lane] += verbs_wr_hw_count(&wrs[i], vx->write_send);
	}
	for (unsigned l = 0; l < x->nlanes; l++) {
		struct verbs_lane *ln = &vx->lanes[l];

		if (need[l] && ln->peer_gone) {
			set_error(vx, "lane %u: the peer disconnected", l);
			return -ENOTCONN;
		}
		if (need[l] && ln->sq_tail - ln->sq_done + need[l] > vx->sq_cap) {
			return -ENOSPC;
		}
		base[l] = ln->sq_tail;
	}
	if (n > VERBS_POST_STACK) {
		out_wr = calloc(2 * n, sizeof(*out_wr));
		out_sge = calloc(2 * n, sizeof(*out_sge));
		src = calloc(2 * n, sizeof(*src));
		if (!out_wr || !out_sge || !src) {
			r = -ENOMEM;
			goto out;
		}
	}
	if (vx->write_send) {
		uint8_t *msgs[XPORT_MAX_LANES];
		uint32_t lkeys[XPORT_MAX_LANES];

		for (unsigned l = 0; l < x->nlanes; l++) {
			msgs[l] = vx->lanes[l].msgs;
			lkeys[l] = vx->lanes[l].msg_mr->lkey;
		}
		nhw = verbs_wr_chain_send(wrs, n, x->nlanes, base, x->max_inline, msgs, lkeys,
					  vx->sq_cap, out_wr, out_sge, src, heads, counts);
	} else {
		verbs_wr_chain(wrs, n, x->nlanes, base, x->max_inline, out_wr, out_sge, heads,
			       counts);
		for (size_t i = 0; i < n; i++) {
			src[i] = i;
		}
		nhw = n;
	}
	for (size_t k = 0; k < nhw; k++) {
		const struct xport_wr *w = &wrs[src[k]];
		struct verbs_lane *ln = &vx->lanes[w->lane];
		enum verbs_wrid_kind kind;
		unsigned lane;
		uint64_t seq;

		(void)verbs_wrid_decode(out_wr[k].wr_id, x->nlanes, &kind, &lane, &seq);
		ln->sq_ids[verbs_seq_expand(ln->sq_done, seq) % vx->sq_cap] = w->wr_id;
	}
	for (unsigned l = 0; l < x->nlanes && r >= 0; l++) {
		struct verbs_lane *ln = &vx->lanes[l];
		struct ibv_send_wr *bad = NULL;
		int e;

		if (!heads[l]) {
			continue;
		}
		e = ibv_post_send(ln->id->qp, heads[l], &bad);
		if (e == 0) {
			ln->sq_tail += counts[l];
			continue;
		}
		/* Those before bad went in and will complete. */
		for (struct ibv_send_wr *w = heads[l]; w && w != bad; w = w->next) {
			ln->sq_tail++;
		}
		set_error(vx, "lane %u: ibv_post_send: %s", l, strerror(e));
		r = e == ENOMEM ? -ENOSPC : -e;
	}
out:
	if (out_wr != stack_wr) {
		free(out_wr);
		free(out_sge);
		free(src);
	}
	return r;
}

static int verbs_post_recvs(struct xport *x, unsigned lane, const uint64_t *wr_ids, size_t n)
{
	struct verbs_xport *vx = to_verbs(x);
	struct verbs_lane *ln;

	if (lane >= x->nlanes || (n > 0 && !wr_ids)) {
		return -EINVAL;
	}
	if (vx->quiesced) {
		return -ESHUTDOWN;
	}
	ln = &vx->lanes[lane];
	if (ln->rq_tail - ln->rq_done + n > x->rq_depth) {
		return -ENOSPC;
	}
	for (size_t i = 0; i < n; i++) {
		struct ibv_recv_wr wr, *bad = NULL;
		int e;

		ln->rq_ids[ln->rq_tail % x->rq_depth] = wr_ids[i];
		if (vx->write_send) {
			e = lane_post_msg_recv(vx, lane);
		} else {
			verbs_recv_fill(verbs_wrid_encode(VERBS_WRID_RECV, lane, ln->rq_tail), &wr);
			e = ibv_post_recv(ln->id->qp, &wr, &bad);
		}
		if (e != 0) {
			set_error(vx, "lane %u: ibv_post_recv: %s", lane, strerror(e));
			return e == ENOMEM ? -ENOSPC : -e;
		}
		ln->rq_tail++;
	}
	return 0;
}

/* ---- completions ---- */

static void complete_one(struct verbs_xport *vx, const struct ibv_wc *wc, struct xport_wc *out)
{
	enum verbs_wrid_kind kind;
	uint64_t seq48, seq;
	struct verbs_lane *ln;
	int r = verbs_wc_map(wc, vx->pub.nlanes, vx->write_send, out, &kind, &seq48);

	if (r < 0) {
		/* Not a completion we asked for: the device or our bookkeeping is broken. */
		set_error(vx, "unexpected completion (wr_id 0x%llx, opcode %d, %s)",
			  (unsigned long long)wc->wr_id, (int)wc->opcode,
			  verbs_wc_status_name(wc->status));
		*out = (struct xport_wc){ .wr_id = wc->wr_id,
					  .status = XPORT_WC_GENERAL_ERR,
					  .opcode = XPORT_WC_WRITE };
		return;
	}
	ln = &vx->lanes[out->lane];
	if (kind == VERBS_WRID_SEND) {
		/* In order per lane: this one and every unsignaled one before it are done. */
		seq = verbs_seq_expand(ln->sq_done, seq48);
		out->wr_id = ln->sq_ids[seq % vx->sq_cap];
		ln->sq_done = seq + 1;
	} else {
		seq = verbs_seq_expand(ln->rq_done, seq48);
		out->wr_id = ln->rq_ids[seq % vx->pub.rq_depth];
		ln->rq_done = seq + 1;
		/* WRITE + SEND: the immediate and length came in the message. */
		if (vx->write_send && wc->status == IBV_WC_SUCCESS) {
			verbs_send_msg_decode(lane_recv_msg(vx, ln, seq), &out->imm, &out->len);
		}
	}
	/* The lane's first failure names it (a fatal QP event's flush says less). */
	if (wc->status != IBV_WC_SUCCESS && !ln->failed) {
		ln->failed = true;
		set_error(vx, "lane %u: %s (%s, vendor error 0x%x)", out->lane,
			  verbs_wc_status_name(wc->status), ibv_wc_status_str(wc->status),
			  wc->vendor_err);
	}
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
static int lane_fatal(struct verbs_xport *vx, unsigned lane, const char *dev, const char *what)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	int e;

	if (!ln->failed) {
		set_error(vx, "lane %u: %s: %s", lane, dev, what);
	}
	ln->failed = true;
	if (!ln->has_qp || !ln->id || !ln->id->qp) {
		return -EIO;
	}
	e = ibv_modify_qp(ln->id->qp, &attr, IBV_QP_STATE);
	return e == 0 ? 0 : -EIO;
}

/*
 * A device's async events (non-blocking fd). A fatal event on a lane's QP
 * fails that lane (lane_fatal); those that mean a CQ, the device or an
 * unknown QP can no longer work end the session with their name; a port
 * going down does not by itself (a link that comes back within the QP's
 * retries costs nothing; one that does not fails the work requests).
 */
static int take_async(struct verbs_xport *vx, unsigned dev)
{
	struct verbs_dev *dv = &vx->devs[dev];
	struct ibv_async_event ev;

	while (ibv_get_async_event(dv->verbs, &ev) == 0) {
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
		case IBV_EVENT_CQ_ERR:
		case IBV_EVENT_SRQ_ERR:
			r = -EIO;
			break;
		case IBV_EVENT_DEVICE_FATAL:
			r = -ENODEV;
			break;
		default:
			break;
		}
		ibv_ack_async_event(&ev);
		if (r < 0 && lane >= 0) {
			r = lane_fatal(vx, (unsigned)lane, ibv_get_device_name(dv->verbs->device),
				       ibv_event_type_str(type));
		}
		if (r < 0) {
			/* lane_fatal named a lane whose QP could not be put in error */
			if (lane < 0) {
				set_error(vx, "%s: %s", ibv_get_device_name(dv->verbs->device),
					  ibv_event_type_str(type));
			}
			return r;
		}
	}
	return 0;
}

/*
 * The lanes' CM events after set-up. The device removed or the address
 * moved: the session can't go on. A lane the peer disconnected refuses new
 * work (post_writes) but is no failure by itself: a peer that has finished
 * disconnects while our END may still be on its way to us.
 */
static int take_cm(struct verbs_xport *vx)
{
	struct rdma_cm_event *ev;

	while (vx->ec && rdma_get_cm_event(vx->ec, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;
		int lane = lane_of_id(vx, ev->id);

		rdma_ack_cm_event(ev);
		switch (type) {
		case RDMA_CM_EVENT_DISCONNECTED:
			if (lane >= 0) {
				vx->lanes[lane].peer_gone = true;
			}
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			set_error(vx, "lane %d: the RDMA device was removed", lane);
			return -ENODEV;
		case RDMA_CM_EVENT_ADDR_CHANGE:
			set_error(vx, "lane %d: the address it uses moved to another device", lane);
			return -EADDRNOTAVAIL;
		default:
			break;
		}
	}
	return 0;
}

/*
 * What the event fd has: which completion channels have an event, async and
 * CM events taken, and a descriptor in error (a device detached reports
 * EPOLLERR and nothing to read) turned into the session's failure.
 */
static int take_events(struct verbs_xport *vx, bool comp[XPORT_MAX_LANES])
{
	struct epoll_event evs[2 * XPORT_MAX_LANES + 1];
	int n = epoll_wait(vx->epfd, evs, (int)ARRAY_SIZE(evs), 0);

	if (n < 0) {
		return errno == EINTR ? 0 : negerrno();
	}
	for (int i = 0; i < n; i++) {
		unsigned kind = evs[i].data.u32 >> 16, dev = evs[i].data.u32 & 0xffff;
		const char *name =
		    dev < vx->ndevs ? ibv_get_device_name(vx->devs[dev].verbs->device) : "?";
		int r = 0;

		if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
			set_error(vx, "%s: its %s reports %s (device gone?)", name,
				  kind == VERBS_EV_COMP	   ? "completion channel"
				  : kind == VERBS_EV_ASYNC ? "async event descriptor"
							   : "CM event channel",
				  (evs[i].events & EPOLLERR) ? "an error" : "a hang-up");
			return -ENODEV;
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

/* Up to max completions of one device's CQ into wcs; returns how many. */
static int poll_device(struct verbs_xport *vx, struct verbs_dev *dv, bool event,
		       struct xport_wc *wcs, size_t max)
{
	struct ibv_wc hw[32];
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	size_t n = 0;

	/* Take a pending event (non-blocking fd) and re-arm before polling: nothing is missed. */
	if (event && ibv_get_cq_event(dv->cch, &ev_cq, &ev_ctx) == 0) {
		ibv_ack_cq_events(ev_cq, 1);
		/* Busy polling takes every completion without being told: no more events. */
		if (!vx->busy_poll && ibv_req_notify_cq(dv->cq, 0) != 0) {
			return -EIO;
		}
	}
	while (n < max && n < INT32_MAX) {
		int want = (int)MIN(max - n, ARRAY_SIZE(hw));
		int got = ibv_poll_cq(dv->cq, want, hw);

		if (got < 0) {
			set_error(vx, "ibv_poll_cq failed");
			return -EIO;
		}
		for (int i = 0; i < got; i++) {
			complete_one(vx, &hw[i], &wcs[n++]);
		}
		if (got < want) {
			break;
		}
	}
	return (int)n;
}

static int verbs_poll_cq(struct xport *x, struct xport_wc *wcs, size_t max)
{
	struct verbs_xport *vx = to_verbs(x);
	bool comp[XPORT_MAX_LANES] = { false };
	size_t n = 0;
	int r;

	if (max > 0 && !wcs) {
		return -EINVAL;
	}
	if (vx->quiesced) {
		return 0;
	}
	r = take_events(vx, comp);
	if (r < 0) {
		return r;
	}
	/*
	 * Every device each call, also when wcs fills up: the caller drains
	 * until 0, and each device's channel event must be taken and re-armed.
	 */
	for (unsigned d = 0; d < vx->ndevs && n < INT32_MAX; d++) {
		int got = poll_device(vx, &vx->devs[d], comp[d], wcs + n, max - n);

		if (got < 0) {
			return got;
		}
		n += (size_t)got;
	}
	/* Test hook: a lane's QP fails as on QP_FATAL (the event's own path from here). */
	vx->test_polled += n;
	if (vx->test_qp_fatal && vx->test_polled >= 64) {
		unsigned lane = vx->test_qp_fatal - 1;

		vx->test_qp_fatal = 0;
		if (lane < vx->pub.nlanes && vx->lanes[lane].has_qp) {
			r = lane_fatal(vx, lane,
				       ibv_get_device_name(vx->lanes[lane].id->verbs->device),
				       ibv_event_type_str(IBV_EVENT_QP_FATAL));
			if (r < 0) {
				return r;
			}
		}
	}
	return (int)n;
}

static int verbs_event_fd(struct xport *x)
{
	struct verbs_xport *vx = to_verbs(x);

	return vx->epfd;
}

static int verbs_numa_node(struct xport *x)
{
	struct verbs_xport *vx = to_verbs(x);

	if (vx->ndevs == 0) {
		return -1;
	}
	return rdmadev_numa_node(RDMADEV_SYSFS,
				 ibv_get_device_name(vx->devs[vx->lanes[0].dev].verbs->device));
}

static const char *verbs_last_error(struct xport *x)
{
	struct verbs_xport *vx = to_verbs(x);

	return vx->has_error ? vx->error : NULL;
}

/* ---- which path ---- */

static int device_path(struct ibv_device *dev, bool force_send, char *why, size_t whylen)
{
	int r = verbs_transport_path(dev->transport_type, force_send);
	const char *name = ibv_get_device_name(dev), *t = verbs_transport_name(dev->transport_type);

	if (r < 0) {
		snprintf(why, whylen, "RDMA device %s has the %s transport: no RC RDMA WRITE", name,
			 t);
	} else if (dev->transport_type == IBV_TRANSPORT_IWARP) {
		snprintf(why, whylen, "%s is iWARP: no immediate data", name);
	} else {
		snprintf(why, whylen, "%s is %s%s", name, t,
			 force_send ? ", WRITE + SEND forced by a test switch" : "");
	}
	return r;
}

static int named_devices_path(const char *const *devices, unsigned ndevices, bool force_send,
			      char *why, size_t whylen)
{
	struct ibv_device **list;
	int n = 0, path = XPORT_PATH_WRITE_IMM;

	list = ibv_get_device_list(&n);
	if (!list) {
		int r = negerrno();

		snprintf(why, whylen, "ibv_get_device_list: %s", strerror(-r));
		return r;
	}
	for (unsigned i = 0; i < ndevices && path > 0; i++) {
		int found = -1;

		for (int k = 0; k < n && found < 0; k++) {
			if (strcmp(ibv_get_device_name(list[k]), devices[i]) == 0) {
				found = k;
			}
		}
		if (found < 0) {
			snprintf(why, whylen, "no RDMA device named %s", devices[i]);
			path = -ENODEV;
		} else {
			char one[256];
			int r = device_path(list[found], force_send, one, sizeof(one));

			/* The reason of the device that decides: a refusal, or WRITE + SEND. */
			if (r < 0 || r > path || i == 0) {
				snprintf(why, whylen, "%s", one);
			}
			path = r < 0 ? r : MAX(path, r);
		}
	}
	ibv_free_device_list(list);
	return path;
}

int xport_verbs_path(const struct sockaddr *local, const char *const *devices, unsigned ndevices,
		     bool force_send, char *why, size_t whylen)
{
	struct rdma_event_channel *ec;
	struct rdma_cm_id *id = NULL;
	struct sockaddr_storage a = { 0 };
	char name[INET6_ADDRSTRLEN + 8] = "?";
	int r;

	why[0] = '\0';
	if (ndevices > 0) {
		return named_devices_path(devices, ndevices, force_send, why, whylen);
	}
	if (!local || (local->sa_family != AF_INET && local->sa_family != AF_INET6)) {
		snprintf(why, whylen, "no IP address to find the RDMA device by");
		return -ENODEV;
	}
	/* The address alone (port 0), IPv4-mapped as plain IPv4: what rdma_cm binds lanes to. */
	if (local->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)(const void *)local)->sin6_addr)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&a;

		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr,
		       &((const struct sockaddr_in6 *)(const void *)local)->sin6_addr.s6_addr[12],
		       4);
	} else if (local->sa_family == AF_INET) {
		memcpy(&a, local, sizeof(struct sockaddr_in));
		((struct sockaddr_in *)&a)->sin_port = 0;
	} else {
		memcpy(&a, local, sizeof(struct sockaddr_in6));
		((struct sockaddr_in6 *)&a)->sin6_port = 0;
	}
	(void)net_addr_str((struct sockaddr *)&a, sizeof(a), name, sizeof(name));
	ec = rdma_create_event_channel();
	if (!ec) {
		r = negerrno();
		snprintf(why, whylen, "rdma_create_event_channel: %s", strerror(-r));
		return r;
	}
	if (rdma_create_id(ec, &id, NULL, RDMA_PS_TCP) != 0) {
		r = negerrno();
		snprintf(why, whylen, "rdma_create_id: %s", strerror(-r));
		id = NULL;
	} else if (rdma_bind_addr(id, (struct sockaddr *)&a) != 0) {
		r = negerrno();
		snprintf(why, whylen, "rdma_cm cannot bind %s: %s", name, strerror(-r));
	} else if (!id->verbs) {
		r = -ENODEV;
		snprintf(why, whylen, "no RDMA device holds %s", name);
	} else {
		r = device_path(id->verbs->device, force_send, why, whylen);
	}
	if (id) {
		(void)rdma_destroy_id(id);
	}
	rdma_destroy_event_channel(ec);
	return r;
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
