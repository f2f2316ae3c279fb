/* SPDX-License-Identifier: MIT */
/*
 * The passive side of a verbs xport. A listener is one rdma_cm channel with
 * a listening id per address (the daemon's rails add more). accept takes
 * connect requests until every lane is in: each request is checked before
 * any QP exists (the control connection's host, the token in the private
 * data, the lane, the device it arrived on) and rejected when it does not
 * fit; a good one gets its QP and rdma_accept, with the daemon's traffic
 * class where one is set. The token dies once all lanes are in.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>

#include <openssl/crypto.h>

#include "clock.h"
#include "lane_hello.h"
#include "log.h"
#include "net.h"
#include "verbs-internal.h"

struct xport_listener {
	struct rdma_event_channel *ec;
	/* ids[0]: listen's address; then listen_rail's (daemon rails), one channel for all */
	struct rdma_cm_id *ids[XPORT_MAX_LANES];
	unsigned nids;
	int tos;		 /* the daemon's class, on every listening id; -1: none */
	int sl[XPORT_MAX_LANES]; /* per id: the class's SL on its RoCE port, -1: the request's */
	struct lane_tokens dead; /* tokens already used up */
};

void verbs_listener_close(struct xport_listener *l)
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
int verbs_listen_rail(struct xport_listener *l, const struct sockaddr *addr, socklen_t addrlen,
		      uint16_t *ret_port)
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
	/* The class before rdma_listen: iWARP connections take the listening id's. */
	if (verbs_listen_id_tos(id, l->tos) < 0 ||
	    rdma_bind_addr(id, (struct sockaddr *)addr) != 0 || rdma_listen(id, 64) != 0) {
		int r = negerrno();

		(void)rdma_destroy_id(id);
		return r;
	}
	l->sl[l->nids] = verbs_class_sl(id, addr, l->tos);
	l->ids[l->nids++] = id;
	if (ret_port) {
		*ret_port = ntohs(rdma_get_src_port(id));
	}
	return 0;
}

int verbs_listen(const struct sockaddr *addr, socklen_t addrlen, int tos,
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
	l->tos = tos;
	l->ec = rdma_create_event_channel();
	if (!l->ec) {
		r = negerrno();
		goto fail;
	}
	r = verbs_set_nonblock(l->ec->fd);
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
 * through INIT -> RTR (the request's attributes, traffic class replaced,
 * and on RoCE the service level that goes with it: sl, -1 to keep the
 * request's) -> RTS itself, as librdmacm's rdma_accept does, and accepts
 * with the QP hidden from librdmacm (it then takes qp_num from the
 * parameters and leaves the QP alone).
 */
static int accept_with_tos(struct verbs_lane *ln, struct rdma_conn_param *cp, uint8_t tos, int sl)
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
			if (sl >= 0) {
				attr.ah_attr.sl = (uint8_t)sl;
			}
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

/*
 * A good request: resources, then rdma_accept, with our class where we have
 * one (sl: its SL on the port the request came to, qos.c). The lane owns id
 * from here.
 */
static int accept_lane(struct verbs_xport *vx, unsigned lane, struct rdma_cm_id *id, bool rails,
		       int sl)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct rdma_conn_param cp;
	int r;

	ln->id = id;
	r = verbs_lane_create_qp(vx, lane, rails);
	if (r < 0) {
		return r;
	}
	/* WRITE + SEND: the receive for the active side's opening message, before it can come. */
	if (vx->write_send) {
		int e = verbs_lane_post_msg_recv(vx, lane);

		if (e != 0) {
			verbs_set_error(vx, "lane %u: ibv_post_recv: %s", lane, strerror(e));
			return -e;
		}
		ln->rq_tail++;
	}
	verbs_conn_param_init(&cp, NULL, 0);
	/* iWARP has no address vector: its connection took the listening id's class. */
	if (vx->tos >= 0 && id->verbs->device->transport_type != IBV_TRANSPORT_IWARP) {
		return accept_with_tos(ln, &cp, (uint8_t)vx->tos, sl);
	}
	if (rdma_accept(id, &cp) != 0) {
		return negerrno();
	}
	return 0;
}

/* The SL of our class on the listening id a request came through (-1: keep the request's). */
static int listener_sl(const struct xport_listener *l, const struct rdma_cm_id *listen_id)
{
	for (unsigned i = 0; i < l->nids; i++) {
		if (l->ids[i] == listen_id) {
			return l->sl[i];
		}
	}
	return -1;
}

static int accept_handle_event(struct xport_listener *l, const struct xport_params *p,
			       bool token_dead, struct verbs_xport *vx, struct rdma_cm_event *ev,
			       unsigned *nest)
{
	/* Taken before the event is acked: rdma_ack_cm_event frees it. */
	struct rdma_cm_id *id = ev->id, *listen_id = ev->listen_id;
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
		r = accept_lane(vx, (unsigned)lane, id, l->nids > 1, listener_sl(l, listen_id));
		if (r < 0) {
			(void)rdma_reject(id, NULL, 0);
		}
		return r;
	}
	lane = verbs_lane_of_id(vx, id);
	r = verbs_cm_event_errno(ev);
	rdma_ack_cm_event(ev);
	if (lane < 0) {
		/* A rejected request's id (already destroyed) or the listener's own. */
		return type == RDMA_CM_EVENT_DEVICE_REMOVAL ? -ENODEV : 0;
	}
	if (type == RDMA_CM_EVENT_ESTABLISHED) {
		vx->lanes[lane].connected = true;
		verbs_lane_tune(&vx->lanes[lane]);
		(*nest)++;
		return 0;
	}
	/* A lane that presented the token and then failed: the session is off. */
	return r;
}

/* The lanes' later events (disconnects) belong to the xport, not the listener: its own channel. */
static int lanes_migrate(struct verbs_xport *vx)
{
	int r;

	vx->ec = rdma_create_event_channel();
	r = vx->ec ? verbs_set_nonblock(vx->ec->fd) : negerrno();
	for (unsigned i = 0; r >= 0 && i < vx->pub.nlanes; i++) {
		if (rdma_migrate_id(vx->lanes[i].id, vx->ec) != 0) {
			r = negerrno();
		}
	}
	return r;
}

int verbs_accept(struct xport_listener *l, const struct xport_params *p, struct xport **ret)
{
	struct verbs_xport *vx;
	unsigned nest = 0;
	bool token_dead;
	int64_t deadline;
	int r = 0;

	if (!l || !ret || verbs_params_check(p) < 0) {
		return -EINVAL;
	}
	/* Sealed lanes exist on tcp only: never carry clear what was asked sealed. */
	if (p->seal) {
		return -EOPNOTSUPP;
	}
	vx = verbs_xport_alloc(p);
	if (!vx) {
		return -ENOMEM;
	}
	token_dead = lane_token_dead(&l->dead, p->token);
	deadline = now_ms() + p->timeout_ms;
	while (r >= 0 && nest < p->nlanes) {
		struct rdma_cm_event *ev;

		r = verbs_cm_next_event(l->ec, deadline, &ev);
		if (r >= 0) {
			r = accept_handle_event(l, p, token_dead, vx, ev, &nest);
		}
	}
	if (r >= 0) {
		r = verbs_wait_open(vx, deadline);
	}
	if (r >= 0) {
		r = lane_token_kill(&l->dead, p->token);
	}
	if (r >= 0) {
		r = lanes_migrate(vx);
	}
	if (r >= 0) {
		r = verbs_watch(vx, vx->ec->fd, VERBS_EV_CM, 0);
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
