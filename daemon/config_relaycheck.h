/* SPDX-License-Identifier: MIT */
/*
 * "rdmacpd --check" on relays (config_relaycheck.c): what loads but cannot work
 * as written. A module that relays with nowhere to relay to; 'relay to' or
 * 'relay from' where they change nothing; 'relay from' on a module no
 * client is allowed into; a relay certificate not made for the client
 * side of TLS, which every next hop would refuse.
 */
#pragma once

#include <stddef.h>

#include "config.h"

/* Call warn once per problem found; returns the number of warnings. */
size_t relaycheck_config(const struct daemon_config *cfg, void (*warn)(void *ud, const char *text),
			 void *ud);
