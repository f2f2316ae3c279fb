/* SPDX-License-Identifier: MIT */
/*
 * The `verbs` transport's private parts, shared by its files
 * (src/xport_verbs/): the lane, device and xport structures, and what each
 * file offers the others. Nothing outside src/xport_verbs/ includes this;
 * callers see only xport_verbs_ops and xport_verbs_path (src/xport.h).
 *
 * The transport: real RC queue pairs through libibverbs, connected with
 * librdmacm. One xport = nlanes RC QPs ("lanes"). Lanes on one device share
 * its protection domain and completion queue (with a completion channel);
 * an active side given several devices (rails) stripes its lanes over them,
 * and memory is then registered in every device's domain, one key pair per
 * lane. With more than one device event_fd is an epoll set of the channels.
 * Each lane presents the session token in the RDMA CM private data; the
 * listener checks it before any QP exists and rejects (rdma_reject) what
 * does not fit. Memory is registered LOCAL_WRITE, plus REMOTE_WRITE when
 * asked: never remote read or atomics (SECURITY.md C.20).
 *
 * Our hardware wr_ids name (send|recv, lane, queue sequence) so that error
 * completions, whose opcode is undefined, still map back to the engine's
 * wr_id and lane; src/verbs_wr.c has the pure parts.
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
 *
 * Files, by object:
 *   verbs.c    the xport: allocation, teardown, its error, the ops table
 *   device.c   a device's PD, CQ and completion channel, shared by its lanes
 *   qp.c       a lane's QP, and its message area (WRITE + SEND)
 *   open.c     WRITE + SEND: each lane's opening message
 *   cm.c       rdma_cm events and connection parameters, both sides
 *   accept.c   the passive side: listening ids, lane requests checked, accept
 *   connect.c  the active side: address and route resolution, connect
 *   mr.c       memory registrations, in every device's domain
 *   data.c     posting writes and receives
 *   cq.c       polling completions into the engine's
 *   event.c    the event fd (an epoll set) and the async and CM events
 *   quiesce.c  lanes to error: all of them drained (teardown), or one
 *   devloss.c  a device lost mid-session: its lanes' work flushed by us
 *   path.c     which path (WRITE_IMM or WRITE + SEND) a host's devices need
 *   qos.c      the passive side's class of service: iWARP's listening ids, RoCE's SL
 *   gid.c      an active lane's source address (NAME:PORT, a GID index) and GID check
 *   mw.c       memory windows: the zero-copy slot fence (xport.windows)
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "macro.h"
#include "xport.h"

/*
 * Descriptors (32 bytes) and credits go inline. 64, not more: a larger
 * inline size makes some providers (mlx5) build much larger send queue
 * entries, and so fewer of them fit.
 */
#define VERBS_MAX_INLINE 64
/* What an event in the epoll set is (epoll_event.data.u32 >> 16); the device in the low bits. */
#define VERBS_EV_COMP  0u
#define VERBS_EV_ASYNC 1u
#define VERBS_EV_CM    2u

/* mw.c: one memory window of a registration on one device. */
struct verbs_window {
	/*
	 * NULL until first opened. mw->rkey is its key now (we keep it: a
	 * type-2 bind posted as a request leaves it to us, and rxe finds the
	 * window by it); the next opening takes ibv_inc_rkey of it.
	 */
	struct ibv_mw *mw;
};

struct verbs_mr {
	struct xport_mr pub;
	struct ibv_mr *mr[XPORT_MAX_LANES]; /* per device, as vx->devs */
	/* Windows (xport.windows): per device, XPORT_MAX_WINDOWS each, NULL until used. */
	struct verbs_window *win[XPORT_MAX_LANES];
	struct verbs_mr *next;
};

/* One device's resources, shared by the lanes on it. */
struct verbs_dev {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	unsigned wc_inv_flags; /* windows: its wc_flags that say invalidated (mw.c) */
	bool lost;    /* devloss.c: gone under the session; its lanes' work flushed by us */
	bool drained; /* lost, and what its CQ still held was taken first */
	/*
	 * Lost, drained and let go (devloss.c): its QPs, windows, registrations,
	 * CQ, channel, PD and the lanes' CM ids are gone and verbs is NULL, so
	 * the device can go and come back; the lanes' bookkeeping stays.
	 */
	bool released;
	char name[64]; /* the device's name, for messages after it is released */
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

static inline struct verbs_xport *to_verbs(struct xport *x)
{
	return container_of(x, struct verbs_xport, pub);
}

/* ---- verbs.c: the xport ---- */

int verbs_params_check(const struct xport_params *p);
/* A new xport's structure and the lanes' queues of wr_ids; NULL when out of memory. */
struct verbs_xport *verbs_xport_alloc(const struct xport_params *p);
/*
 * Teardown in the order verbs wants; safe on a half-built xport (any
 * set-up step that failed).
 */
void verbs_destroy(struct xport *x);
/* The xport's error: the first failure is the cause, later ones are ignored. */
void verbs_set_error(struct verbs_xport *vx, const char *fmt, ...) _printf_(2, 3);
const char *verbs_last_error(struct xport *x);
/* Non-blocking and close-on-exec: for the descriptors libibverbs and librdmacm open. */
int verbs_set_nonblock(int fd);

/* ---- device.c: the devices ---- */

/*
 * The index of the device (in vx->devs), set up on first use. Only an
 * active side with rails may add a second device (may_add); -EXDEV else.
 */
int verbs_device_of(struct verbs_xport *vx, struct ibv_context *verbs, bool may_add);
int verbs_numa_node(struct xport *x);
/* Device dev's name ("?" beyond the devices): also once it is released. */
static inline const char *verbs_dev_name(const struct verbs_xport *vx, unsigned dev)
{
	return dev < vx->ndevs ? vx->devs[dev].name : "?";
}

/* ---- devloss.c: a device lost under the session ---- */

/*
 * Device dev is gone (why: what said so): its descriptors leave the event
 * set and its lanes fail. 0, or -ENODEV when no device with lanes is left.
 */
int verbs_dev_lost(struct verbs_xport *vx, unsigned dev, const char *why);
/* Is the lane on a lost device (its work is flushed by devloss.c, never posted)? */
static inline bool verbs_lane_lost(const struct verbs_xport *vx, unsigned lane)
{
	const struct verbs_lane *ln = &vx->lanes[lane];

	return ln->has_qp && ln->dev < vx->ndevs && vx->devs[ln->dev].lost;
}
/* Up to max flushed completions of the lost devices' lanes' outstanding work. */
size_t verbs_dev_flush(struct verbs_xport *vx, struct xport_wc *wcs, size_t max);
/*
 * Every lost device whose CQ was drained let go of: everything of ours on
 * it, then librdmacm's own context of it (poll_cq calls it).
 */
void verbs_dev_release_drained(struct verbs_xport *vx);

/* ---- qp.c: a lane's QP ---- */

/* An RC QP on the lane's CM id (its device set up on first use, may_add as verbs_device_of). */
int verbs_lane_create_qp(struct verbs_xport *vx, unsigned lane, bool may_add);
/* Once a lane is up (RTS): ask peers for a short RNR NAK timer. Best effort. */
void verbs_lane_tune(struct verbs_lane *ln);
/*
 * The lane's QP to error (every way there: a lane that fails, is stopped,
 * drained, or whose device is lost): its posted work is flushed and the
 * device takes nothing more on it. 0, -ENOTCONN without a QP, or -errno.
 */
static inline int verbs_qp_error(struct verbs_lane *ln)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	if (!ln->id || !ln->id->qp) {
		return -ENOTCONN;
	}
	return -ibv_modify_qp(ln->id->qp, &attr, IBV_QP_STATE);
}
/* WRITE + SEND: the message entry of receive sequence seq. */
uint8_t *verbs_lane_recv_msg(const struct verbs_xport *vx, const struct verbs_lane *ln,
			     uint64_t seq);
/* WRITE + SEND: post one receive for a message, sequence ln->rq_tail. Returns 0 or an errno. */
int verbs_lane_post_msg_recv(struct verbs_xport *vx, unsigned lane);

/* ---- open.c: WRITE + SEND, the lanes' opening messages ---- */

/* The active side's first message on a lane (signaled; taken by verbs_wait_open). */
int verbs_lane_post_open(struct verbs_xport *vx, unsigned lane);
/* Until every lane's opening message is in (passive) or taken (active); 0 at once without. */
int verbs_wait_open(struct verbs_xport *vx, int64_t deadline);

/* ---- cm.c: rdma_cm ---- */

/* Next CM event on ec before the deadline. */
int verbs_cm_next_event(struct rdma_event_channel *ec, int64_t deadline,
			struct rdma_cm_event **ret);
int verbs_cm_event_errno(const struct rdma_cm_event *ev);
/* Wait for `want` on id; any other event of the xport's lanes is a failure. */
int verbs_cm_wait(struct rdma_event_channel *ec, struct rdma_cm_id *id,
		  enum rdma_cm_event_type want, int64_t deadline);
/* Writes only (no RDMA READ or atomics), our retry counts, pdata as private data. */
void verbs_conn_param_init(struct rdma_conn_param *cp, const void *pdata, uint8_t plen);
/* Which lane (index) owns this CM id, or -1. */
int verbs_lane_of_id(const struct verbs_xport *vx, const struct rdma_cm_id *id);

/* ---- accept.c, connect.c: setting up the lanes ---- */

int verbs_listen(const struct sockaddr *addr, socklen_t addrlen, int tos,
		 struct xport_listener **ret_listener, uint16_t *ret_port);
int verbs_listen_rail(struct xport_listener *l, const struct sockaddr *addr, socklen_t addrlen,
		      uint16_t *ret_port);
int verbs_accept(struct xport_listener *l, const struct xport_params *p, struct xport **ret);
void verbs_listener_close(struct xport_listener *l);
int verbs_connect(const struct sockaddr *addr, socklen_t addrlen, const struct xport_params *p,
		  struct xport **ret);

/* ---- qos.c: the passive side's class of service ---- */

/* The IP TOS byte (tos >= 0) on a listening id, before rdma_listen: iWARP lanes take it. */
int verbs_listen_id_tos(struct rdma_cm_id *id, int tos);
/*
 * The service level of class tos on the RoCE port listen_id (bound to
 * addr) is on, as rdma_cm gives an active side's route; -1 when not RoCE,
 * no class, or it can't be learned.
 */
int verbs_class_sl(const struct rdma_cm_id *listen_id, const struct sockaddr *addr, int tos);

/* ---- gid.c: an active lane's source address and GID (named devices) ---- */

struct rdmadev_spec;
/*
 * The address lane leaves from towards dst, of its device (p->devices, a
 * port where one is named) or of the GID asked for (p->gid_index), and
 * the device named: 1; 0 when no device is named; -errno (said) else.
 */
int verbs_lane_src(struct verbs_xport *vx, unsigned lane, const struct xport_params *p,
		   const struct sockaddr *dst, struct rdmadev_spec *ret_spec,
		   struct sockaddr_storage *ret_src);
/* A connected lane's GID against p's gid_index and roce_version: 0, or -EXDEV (said). */
int verbs_lane_gid_check(struct verbs_xport *vx, unsigned lane, const struct xport_params *p);

/* ---- mr.c: memory registrations ---- */

int verbs_reg_mr(struct xport *x, void *addr, size_t len, unsigned access,
		 struct xport_mr **ret_mr);
int verbs_dereg_mr(struct xport *x, struct xport_mr *pub);
/*
 * One device's windows over m (d), or every device's, deallocated and their
 * tables freed (before its registrations go: bound windows pin them).
 */
void verbs_mr_windows_free_dev(struct verbs_mr *m, unsigned d);
void verbs_mr_windows_free(struct verbs_mr *m);

/* ---- mw.c: memory windows (xport.windows) ---- */

/*
 * Can device dev bind type-2 windows? 0 (and its wc_inv_flags set), or
 * -EOPNOTSUPP with the reason in vx's error.
 */
int verbs_mw_device_check(struct verbs_xport *vx, unsigned dev);
int verbs_window_open(struct xport *x, struct xport_mr *mr, uint32_t idx, unsigned lane,
		      uint64_t offset, uint64_t len, uint32_t *ret_rkey);
int verbs_window_close(struct xport *x, struct xport_mr *mr, uint32_t idx, unsigned lane);

/* ---- data.c: posting ---- */

int verbs_post_writes(struct xport *x, const struct xport_wr *wrs, size_t n);
int verbs_post_recvs(struct xport *x, unsigned lane, const uint64_t *wr_ids, size_t n);

/* ---- cq.c: completions ---- */

int verbs_poll_cq(struct xport *x, struct xport_wc *wcs, size_t max);

/* ---- event.c: the event fd ---- */

/* Adds fd to the xport's epoll set (made on first use) as an event of kind on device dev. */
int verbs_watch(struct verbs_xport *vx, int fd, unsigned kind, unsigned dev);
int verbs_event_fd(struct xport *x);
/*
 * What the event fd has: comp[d] set for each device whose completion
 * channel has an event; async and CM events taken.
 */
int verbs_take_events(struct verbs_xport *vx, bool comp[XPORT_MAX_LANES]);
/* A fatal event on one lane's QP: that lane fails, its QP put in error. */
int verbs_lane_fatal(struct verbs_xport *vx, unsigned lane, const char *dev, const char *what);

/* ---- quiesce.c: lanes to error ---- */

int verbs_quiesce(struct xport *x);
int verbs_lane_down(struct xport *x, unsigned lane);
