/* SPDX-License-Identifier: MIT */
/*
 * The window sized to the link (src/linkwin.h): over RDMA, the lanes, chunk
 * size and ring slots the user left unset follow the rate of the ports the
 * lanes leave from (--devices, else the device holding the control
 * connection's own address), read from sysfs. tcp keeps the defaults.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon_conn.h"
#include "fit.h"
#include "linkwin.h"
#include "log.h"
#include "macro.h"
#include "proto/msg.h"
#include "rdmadev.h"
#include "units.h"
#include "xport.h"

/* The device of the control connection's own address: its interface's RDMA device. */
static int local_device(const struct daemon_conn *s, char name[static RDMADEV_NAME_MAX + 1])
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	struct ifaddrs *list = NULL;
	const char *ifname;
	int r = -ENODEV;

	if (!s->tls || getsockname(tls_fd(s->tls), (struct sockaddr *)&local, &len) < 0 ||
	    getifaddrs(&list) < 0) {
		return -ENODEV;
	}
	ifname = rdmadev_ifname_of_addr(list, (struct sockaddr *)&local);
	if (ifname) {
		r = rdmadev_of_netdev(RDMADEV_SYSFS, RDMADEV_NETSYSFS, ifname, name);
	}
	freeifaddrs(list);
	return r;
}

/* Whether devices[0..i) names devices[i] already: a rail named twice is one port. */
static bool named_before(const struct client_opts *o, unsigned i)
{
	for (unsigned k = 0; k < i; k++) {
		if (strcmp(o->devices[k], o->devices[i]) == 0) {
			return true;
		}
	}
	return false;
}

/* Each device's fastest port that is up, into rates (0 where unknown); how many. */
static unsigned device_rates(const struct daemon_conn *s, uint64_t *rates, char *names,
			     size_t nameslen)
{
	char one[RDMADEV_NAME_MAX + 1];
	unsigned n = 0;

	names[0] = '\0';
	for (unsigned i = 0; i < s->o->ndevices || (i == 0 && s->o->ndevices == 0); i++) {
		const char *name = s->o->devices[i];
		struct rdmadev_spec spec = { .port = 0 };
		int r = 0;

		if (s->o->ndevices > 0 && named_before(s->o, i)) {
			continue;
		}
		if (s->o->ndevices == 0) {
			r = local_device(s, one);
			name = one;
		} else {
			/* NAME:PORT: that port's rate; NAME alone: its fastest port that is up. */
			r = rdmadev_spec_parse(name, &spec);
		}
		if (r >= 0) {
			r = rdmadev_port_rate(RDMADEV_SYSFS, s->o->ndevices ? spec.name : name,
					      spec.port, &rates[n]);
		}
		if (r < 0) {
			log_debug("link rate of %s: %s",
				  r == -ENODEV && !s->o->ndevices
				      ? "the control connection's device"
				      : name,
				  strerror(-r));
			rates[n] = 0;
		}
		snprintf(names + strlen(names), nameslen - strlen(names), "%s%s", n ? "," : "",
			 r == -ENODEV && !s->o->ndevices ? "?" : name);
		n++;
	}
	return n;
}

void client_fit_link(struct daemon_conn *s, uint8_t transport)
{
	static bool said;
	struct client_opts *o = s->o;
	struct linkwin_ask ask = { .lanes = o->lanes_set ? o->lanes : CLIENT_DEFAULT_LANES,
				   .lanes_set = o->lanes_set,
				   .chunk_size =
				       o->chunk_set ? o->chunk_size : CLIENT_DEFAULT_CHUNK,
				   .chunk_set = o->chunk_set,
				   .slots = o->slots_set ? o->slots_given : CLIENT_DEFAULT_SLOTS,
				   .slots_set = o->slots_set };
	uint64_t rates[CLIENT_MAX_DEVICES], total = 0;
	char names[CLIENT_MAX_DEVICES * (RDMADEV_NAME_MAX + 2)], chunk[32];
	unsigned n;

	/* tcp, or auto without a device here: the defaults (no port to size for). */
	if (transport != XPORT_KIND_TCP) {
		n = device_rates(s, rates, names, sizeof(names));
		total = linkwin_fit(rates, n, PROTO_MAX_LANES, &ask);
	}
	o->lanes = ask.lanes;
	o->chunk_size = ask.chunk_size;
	o->slots = ask.slots;
	/* Chunks the link made larger: a push's pool keeps its bytes (64 MiB), not its count. */
	o->pool_chunks = CLIENT_DEFAULT_POOL_CHUNKS;
	if (!o->chunk_set && o->chunk_size > CLIENT_DEFAULT_CHUNK) {
		o->pool_chunks =
		    MAX(CLIENT_DEFAULT_POOL_CHUNKS / (o->chunk_size / CLIENT_DEFAULT_CHUNK), 2u);
	}
	/* Said once a run, however many connections open (--wait-busy, a split file's parts). */
	if (total > 0 && o->verbose > 0 && !said) {
		char why[96] = " (--slots)";

		said = true;
		if (!o->slots_set) {
			snprintf(why, sizeof(why), " (the rate x %u us held)", LINKWIN_HOLD_US);
		}
		units_format_bytes(o->chunk_size, chunk, sizeof(chunk));
		log_info("link %s at %" PRIu64 ".%" PRIu64 " Gb/s: %u lanes%s, chunks of %s%s, "
			 "%u slots%s",
			 names, total / 1000, total % 1000 / 100, o->lanes,
			 o->lanes_set ? " (--lanes)" : "", chunk,
			 o->chunk_set ? " (--chunk-size)" : "", o->slots, why);
	}
}
