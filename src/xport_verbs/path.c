/* SPDX-License-Identifier: MIT */
/*
 * Which path a host's verbs lanes need (xport_verbs_path, src/xport.h):
 * WRITE_IMM, or WRITE + SEND for a device without immediate data (iWARP),
 * judged from the transport of the named devices (rails) or of the device
 * rdma_cm binds the control connection's own address to.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "net.h"
#include "rdmadev.h"
#include "verbs-internal.h"
#include "verbs_wr.h"

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
		struct rdmadev_spec spec = { .name = "" };
		int found = -1;

		/* NAME or NAME:PORT: the device by its name. */
		(void)rdmadev_spec_parse(devices[i], &spec);
		for (int k = 0; k < n && found < 0; k++) {
			if (strcmp(ibv_get_device_name(list[k]), spec.name) == 0) {
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

/* The address alone (port 0), IPv4-mapped as plain IPv4: what rdma_cm binds lanes to. */
static void bind_addr(const struct sockaddr *local, struct sockaddr_storage *a)
{
	if (local->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)(const void *)local)->sin6_addr)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)a;

		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr,
		       &((const struct sockaddr_in6 *)(const void *)local)->sin6_addr.s6_addr[12],
		       4);
	} else if (local->sa_family == AF_INET) {
		memcpy(a, local, sizeof(struct sockaddr_in));
		((struct sockaddr_in *)a)->sin_port = 0;
	} else {
		memcpy(a, local, sizeof(struct sockaddr_in6));
		((struct sockaddr_in6 *)a)->sin6_port = 0;
	}
}

/* The path of the RDMA device rdma_cm binds address a (named name in why) to. */
static int bound_device_path(struct sockaddr_storage *a, const char *name, bool force_send,
			     char *why, size_t whylen)
{
	struct rdma_event_channel *ec;
	struct rdma_cm_id *id = NULL;
	int r;

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
	} else if (rdma_bind_addr(id, (struct sockaddr *)a) != 0) {
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

int xport_verbs_path(const struct sockaddr *local, const char *const *devices, unsigned ndevices,
		     bool force_send, char *why, size_t whylen)
{
	struct sockaddr_storage a = { 0 };
	char name[INET6_ADDRSTRLEN + 8] = "?";

	why[0] = '\0';
	if (ndevices > 0) {
		return named_devices_path(devices, ndevices, force_send, why, whylen);
	}
	if (!local || (local->sa_family != AF_INET && local->sa_family != AF_INET6)) {
		snprintf(why, whylen, "no IP address to find the RDMA device by");
		return -ENODEV;
	}
	bind_addr(local, &a);
	(void)net_addr_str((struct sockaddr *)&a, sizeof(a), name, sizeof(name));
	return bound_device_path(&a, name, force_send, why, whylen);
}
