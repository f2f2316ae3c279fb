/* SPDX-License-Identifier: MIT */
/* "rdmacpd --check" on relays (config_relaycheck.h). */
#include "config_relaycheck.h"

#include <stdbool.h>
#include <stdio.h>

#include "certs.h"

static size_t say(void (*warn)(void *ud, const char *text), void *ud, const char *text)
{
	warn(ud, text);
	return 1;
}

static size_t check_module(const struct daemon_config *cfg, const struct module *m,
			   void (*warn)(void *ud, const char *text), void *ud)
{
	char text[512];
	size_t n = 0;

	if (m->relay && m->nrelay_to == 0 && cfg->nrelay_to == 0) {
		snprintf(text, sizeof(text),
			 "module [%s]: 'relay = yes' but no 'relay to' here or in [global]: every "
			 "relayed push into it will be refused",
			 m->name);
		n += say(warn, ud, text);
	}
	if (!m->relay && m->nrelay_to > 0) {
		snprintf(text, sizeof(text),
			 "module [%s]: 'relay to' without 'relay = yes' changes nothing", m->name);
		n += say(warn, ud, text);
	}
	if (m->nrelay_from > 0 && m->nallow == 0) {
		snprintf(text, sizeof(text),
			 "module [%s]: 'relay from' without 'allow': relayed pushes are authorized "
			 "as their original client, whom no 'allow' lets in",
			 m->name);
		n += say(warn, ud, text);
	}
	return n;
}

/* The certificate a relaying daemon shows the next hop: one a TLS server takes from a client? */
static size_t check_relay_cert(const struct daemon_config *cfg,
			       void (*warn)(void *ud, const char *text), void *ud)
{
	const char *file = cfg->relay_cert[0] ? cfg->relay_cert : cfg->cert;
	char text[4600];
	int r = certs_file_client_purpose(file);

	if (r < 0) {
		snprintf(text, sizeof(text), "relay certificate %s: cannot read a PEM certificate",
			 file);
		return say(warn, ud, text);
	}
	if (r == 1) {
		return 0;
	}
	snprintf(text, sizeof(text),
		 "%s %s is not a TLS client certificate (no clientAuth usage): the next hop of "
		 "a relayed push will refuse it; set 'relay certificate' and 'relay key' to a "
		 "client certificate of this host",
		 cfg->relay_cert[0] ? "relay certificate" : "certificate (the relay default)",
		 file);
	return say(warn, ud, text);
}

size_t relaycheck_config(const struct daemon_config *cfg, void (*warn)(void *ud, const char *text),
			 void *ud)
{
	bool relays = false;
	size_t n = 0;

	for (size_t i = 0; i < cfg->nmodules; i++) {
		n += check_module(cfg, &cfg->modules[i], warn, ud);
		relays = relays || cfg->modules[i].relay;
	}
	if (relays) {
		n += check_relay_cert(cfg, warn, ud);
	}
	return n;
}
