/* SPDX-License-Identifier: MIT */
/*
 * rdmacp doctor's fabric checks (doctor.h): the ports verbs found and this
 * host's addresses handed to src/fabric_check.c, its findings made
 * problems (doctor_report.c prints its facts after the devices).
 */
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "fabric_check.h"

void doctor_check_fabric(struct doctor *d)
{
	static const struct fabric_paths sys = FABRIC_PATHS_SYSTEM;
	struct fabric_port ports[64];
	struct ifaddrs *ifa = NULL;
	size_t n = 0;

	d->fabric = calloc(1, sizeof(*d->fabric));
	if (!d->fabric) {
		return;
	}
	for (size_t i = 0; i < d->ndevices; i++) {
		for (unsigned p = 0; p < d->devices[i].nports && n < ARRAY_SIZE(ports); p++) {
			const struct doctor_port *pt = &d->devices[i].ports[p];

			snprintf(ports[n].dev, sizeof(ports[n].dev), "%s", d->devices[i].name);
			ports[n].num = pt->num;
			ports[n].active_mtu = pt->active_mtu;
			ports[n++].ethernet = strcmp(pt->link_layer, "Ethernet") == 0;
		}
	}
	if (getifaddrs(&ifa) < 0) {
		ifa = NULL; /* no ARP flux check: said in the facts by its absence */
	}
	fabric_check(&sys, ports, n, ifa, d->fabric);
	if (ifa) {
		freeifaddrs(ifa);
	}
	for (size_t i = 0; i < d->fabric->nfindings; i++) {
		const struct fabric_finding *f = &d->fabric->findings[i];

		doctor_problem(d, f->error, f->fix, "%s", f->what);
	}
}
