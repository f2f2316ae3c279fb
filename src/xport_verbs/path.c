/* SPDX-License-Identifier: MIT */
/*
 * What a host's verbs lanes need or can do, judged from the named devices
 * (rails) or from the device rdma_cm binds the control connection's own
 * address to: the path (xport_verbs_path, src/xport.h: WRITE_IMM, or WRITE
 * + SEND for a device without immediate data, iWARP), and whether every one
 * binds type-2 memory windows (xport_verbs_windows: the zero-copy fence).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "net.h"
#include "rdmadev.h"
#include "verbs-internal.h"
#include "verbs_wr.h"

/*
 * A question asked of each device: its answer (>= 0, or -errno) and why. The
 * host's answer is the worst of its devices' (the highest, or with
 * worst_low the lowest), with the reason of the device that decided it.
 */
struct judge {
	int (*ask)(struct ibv_device *dev, bool force_send, char *why, size_t whylen);
	bool force_send;
	bool worst_low;
};

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

/* Does the device bind type-2 windows? 1 or 0 (why says), -errno when it can't be asked. */
static int device_windows(struct ibv_device *dev, bool force_send, char *why, size_t whylen)
{
	struct ibv_context *c = ibv_open_device(dev);
	const char *name = ibv_get_device_name(dev);
	struct ibv_device_attr a;
	int r;

	(void)force_send;
	if (!c) {
		r = negerrno();
		snprintf(why, whylen, "%s: ibv_open_device: %s", name, strerror(-r));
		return r;
	}
	r = ibv_query_device(c, &a);
	(void)ibv_close_device(c);
	if (r != 0) {
		snprintf(why, whylen, "%s: ibv_query_device: %s", name, strerror(r));
		return -r;
	}
	if (!verbs_mw_caps_ok(a.device_cap_flags) || a.max_mw == 0) {
		snprintf(why, whylen, "%s has no type-2 memory windows", name);
		return 0;
	}
	snprintf(why, whylen, "%s binds type-2 memory windows", name);
	return 1;
}

/* Is r a worse answer than the one so far? */
static bool judge_worse(const struct judge *j, int r, int so_far)
{
	return r < 0 || (j->worst_low ? r < so_far : r > so_far);
}

static int named_devices_judge(const char *const *devices, unsigned ndevices, const struct judge *j,
			       char *why, size_t whylen)
{
	struct ibv_device **list;
	int n = 0, path = j->worst_low ? INT32_MAX : 0;

	list = ibv_get_device_list(&n);
	if (!list) {
		int r = negerrno();

		snprintf(why, whylen, "ibv_get_device_list: %s", strerror(-r));
		return r;
	}
	for (unsigned i = 0; i < ndevices && path >= 0; i++) {
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
			int r = j->ask(list[found], j->force_send, one, sizeof(one));

			/* The reason of the device that decides: a refusal, or the worst. */
			if (judge_worse(j, r, path) || i == 0) {
				snprintf(why, whylen, "%s", one);
				path = r;
			}
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

/* The answer of the RDMA device rdma_cm binds address a (named name in why) to. */
static int bound_device_judge(struct sockaddr_storage *a, const char *name, const struct judge *j,
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
		r = j->ask(id->verbs->device, j->force_send, why, whylen);
	}
	if (id) {
		(void)rdma_destroy_id(id);
	}
	rdma_destroy_event_channel(ec);
	return r;
}

static int host_judge(const struct sockaddr *local, const char *const *devices, unsigned ndevices,
		      const struct judge *j, char *why, size_t whylen)
{
	struct sockaddr_storage a = { 0 };
	char name[INET6_ADDRSTRLEN + 8] = "?";

	why[0] = '\0';
	if (ndevices > 0) {
		return named_devices_judge(devices, ndevices, j, why, whylen);
	}
	if (!local || (local->sa_family != AF_INET && local->sa_family != AF_INET6)) {
		snprintf(why, whylen, "no IP address to find the RDMA device by");
		return -ENODEV;
	}
	bind_addr(local, &a);
	(void)net_addr_str((struct sockaddr *)&a, sizeof(a), name, sizeof(name));
	return bound_device_judge(&a, name, j, why, whylen);
}

int xport_verbs_path(const struct sockaddr *local, const char *const *devices, unsigned ndevices,
		     bool force_send, char *why, size_t whylen)
{
	const struct judge j = { .ask = device_path, .force_send = force_send };

	return host_judge(local, devices, ndevices, &j, why, whylen);
}

int xport_verbs_windows(const struct sockaddr *local, const char *const *devices, unsigned ndevices,
			char *why, size_t whylen)
{
	const struct judge j = { .ask = device_windows, .worst_low = true };

	return host_judge(local, devices, ndevices, &j, why, whylen);
}
