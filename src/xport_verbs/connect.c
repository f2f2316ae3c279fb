/* SPDX-License-Identifier: MIT */
/*
 * The active side of a verbs xport: each lane's address and route resolved
 * (from the lane's own device with rails, to the daemon's rail address
 * where it has several), its QP, and rdma_connect presenting the token in
 * the private data; on the WRITE + SEND path each lane's opening message.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "clock.h"
#include "lane_hello.h"
#include "rdmadev.h"
#include "verbs-internal.h"

#define VERBS_HELLO_LEN	      LANE_HELLO_LEN
#define VERBS_RESOLVE_STEP_MS 1000

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
				verbs_set_error(vx, "lane: set TOS %d: %s", vx->tos, strerror(-r));
				return r;
			}
		}
		step = MAX(1, MIN(VERBS_RESOLVE_STEP_MS, remaining_ms(deadline)));
		if (rdma_resolve_addr(ln->id, (struct sockaddr *)src, (struct sockaddr *)addr,
				      step) != 0) {
			return negerrno();
		}
		r = verbs_cm_wait(vx->ec, ln->id, RDMA_CM_EVENT_ADDR_RESOLVED, deadline);
		if (r != -ETIMEDOUT || remaining_ms(deadline) == 0) {
			return r;
		}
	}
}

/* Address and route resolved (to the lane's device and port, rails), with our ACK timeout. */
static int lane_route(struct verbs_xport *vx, unsigned lane, const struct sockaddr *src,
		      const struct rdmadev_spec *dev, const struct sockaddr *addr, int64_t deadline)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	int r = resolve_addr(vx, ln, src, addr, deadline);

	if (r < 0) {
		return r;
	}
	if (dev && (strcmp(ibv_get_device_name(ln->id->verbs->device), dev->name) != 0 ||
		    (dev->port && ln->id->port_num != dev->port))) {
		/* Two devices (or ports) on one network device: the address does not pick ours. */
		verbs_set_error(vx, "lane %u: address of %s port %u resolved to %s port %u", lane,
				dev->name, dev->port, ibv_get_device_name(ln->id->verbs->device),
				ln->id->port_num);
		return -EXDEV;
	}
	if (rdma_resolve_route(ln->id, MAX(1, remaining_ms(deadline))) != 0) {
		return negerrno();
	}
	r = verbs_cm_wait(vx->ec, ln->id, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline);
	if (r < 0) {
		return r;
	}
	if (vx->ack_timeout >= 0) {
		uint8_t t = (uint8_t)vx->ack_timeout;

		if (rdma_set_option(ln->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t,
				    sizeof(t)) != 0) {
			r = negerrno();
			verbs_set_error(vx, "lane %u: set ACK timeout %d: %s", lane,
					vx->ack_timeout, strerror(-r));
			return r;
		}
	}
	return 0;
}

/* rdma_connect with the lane's hello (the token) as private data, until it is established. */
static int lane_connect_cm(struct verbs_xport *vx, unsigned lane, const struct xport_params *p,
			   int64_t deadline)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct lane_hello h = { .lane = (uint16_t)lane, .nlanes = (uint16_t)p->nlanes };
	uint8_t pdata[VERBS_HELLO_LEN];
	struct rdma_conn_param cp;
	int r;

	memcpy(h.token, p->token, XPORT_TOKEN_LEN);
	lane_hello_encode(&h, pdata);
	OPENSSL_cleanse(h.token, sizeof(h.token));
	verbs_conn_param_init(&cp, pdata, sizeof(pdata));
	r = rdma_connect(ln->id, &cp) == 0 ? 0 : negerrno();
	OPENSSL_cleanse(pdata, sizeof(pdata));
	if (r < 0) {
		return r;
	}
	return verbs_cm_wait(vx->ec, ln->id, RDMA_CM_EVENT_ESTABLISHED, deadline);
}

static int connect_lane(struct verbs_xport *vx, unsigned lane, const struct sockaddr *addr,
			const struct xport_params *p, int64_t deadline)
{
	struct verbs_lane *ln = &vx->lanes[lane];
	struct rdmadev_spec dev;
	struct sockaddr_storage src;
	/* Rails: leave from an address of the lane's device (its GID's), and rdma_cm binds to it. */
	int named = verbs_lane_src(vx, lane, p, addr, &dev, &src);
	int r;

	if (named < 0) {
		return named;
	}
	r = lane_route(vx, lane, named ? (struct sockaddr *)&src : NULL, named ? &dev : NULL, addr,
		       deadline);
	if (r < 0) {
		return r;
	}
	r = verbs_lane_create_qp(vx, lane, named > 0);
	if (r < 0) {
		return r;
	}
	r = lane_connect_cm(vx, lane, p, deadline);
	if (r < 0) {
		return r;
	}
	ln->connected = true;
	r = verbs_lane_gid_check(vx, lane, p);
	if (r < 0) {
		return r;
	}
	verbs_lane_tune(ln);
	/* WRITE + SEND: iWARP's active side speaks first (MPA); the peer has a receive for it. */
	return vx->write_send ? verbs_lane_post_open(vx, lane) : 0;
}

int verbs_connect(const struct sockaddr *addr, socklen_t addrlen, const struct xport_params *p,
		  struct xport **ret)
{
	struct verbs_xport *vx;
	int64_t deadline;
	int r = 0;

	if (!addr || !ret || verbs_params_check(p) < 0 ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) {
		return -EINVAL;
	}
	if (p->seal) {
		return -EOPNOTSUPP;
	}
	vx = verbs_xport_alloc(p);
	if (!vx) {
		return -ENOMEM;
	}
	deadline = now_ms() + p->timeout_ms;
	vx->ec = rdma_create_event_channel();
	r = vx->ec ? verbs_set_nonblock(vx->ec->fd) : negerrno();
	for (unsigned i = 0; r >= 0 && i < p->nlanes; i++) {
		/*
		 * Daemon rails: lane i to the daemon's address i % (1 + nrails),
		 * address 0 the one reached; rails only: to rails[i % nrails].
		 */
		unsigned a =
		    p->nrails ? p->rails_only ? 1 + i % p->nrails : i % (1 + p->nrails) : 0;

		r = connect_lane(vx, i, a ? (const struct sockaddr *)&p->rails[a - 1] : addr, p,
				 deadline);
	}
	if (r >= 0) {
		r = verbs_wait_open(vx, deadline);
	}
	if (r >= 0) {
		r = verbs_watch(vx, vx->ec->fd, VERBS_EV_CM, 0);
	}
	if (r < 0) {
		if (p->error_buf && p->error_len && vx->has_error) {
			snprintf(p->error_buf, p->error_len, "%s", vx->error);
		}
		verbs_destroy(&vx->pub);
		return r;
	}
	*ret = &vx->pub;
	return 0;
}
