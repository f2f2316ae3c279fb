/* SPDX-License-Identifier: MIT */
/*
 * Relays in policy (policy.h): whether a push may go on to the hops its
 * client named, and the names a relayed push is logged with.
 */
#include "policy.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>

#include "log.h"
#include "macro.h"
#include "policy_peer.h"
#include "tls_keys.h"

int policy_peer_on_behalf(struct policy_peer *peer, X509 *cert)
{
	int r;

	if (!cert) {
		return -EINVAL;
	}
	r = tls_cert_fingerprint(cert, peer->behalf_fp);
	if (r < 0) {
		return r;
	}
	peer->behalf = cert;
	return 0;
}

/* Does host (as the client wrote it) match one of the patterns? Host names know no case. */
static bool host_allowed(const char (*pats)[DAEMON_MAX_HOST_PATTERN + 1], size_t n,
			 const char *host)
{
	for (size_t i = 0; i < n; i++) {
		if (fnmatch(pats[i], host, FNM_CASEFOLD) == 0) {
			return true;
		}
	}
	return false;
}

static int _printf_(5, 6)
    refuse(uint32_t *ret_code, uint32_t code, char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	*ret_code = code;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -EPERM;
}

int policy_relay_chain(const struct daemon_config *cfg, const struct module *m,
		       const struct msg_relay *rl, uint32_t *ret_code, char *why, size_t whylen)
{
	const char(*pats)[DAEMON_MAX_HOST_PATTERN + 1] = m->nrelay_to ? m->relay_to : cfg->relay_to;
	size_t npats = m->nrelay_to ? m->nrelay_to : cfg->nrelay_to;
	char esc[PROTO_MAX_HOST * 4 + 1];

	*ret_code = PERR_OK;
	why[0] = '\0';
	if (!rl || rl->count == 0) {
		return 0; /* nothing goes on from here */
	}
	if (!m->relay) {
		return refuse(ret_code, PERR_PERMISSION, why, whylen,
			      "module '%s' does not relay pushes onward ('relay = no')", m->name);
	}
	for (size_t i = 0; i < rl->count; i++) {
		const char *host = rl->hops[i].host;

		if (!host_allowed(pats, npats, host)) {
			return refuse(ret_code, PERR_PERMISSION, why, whylen,
				      "module '%s' may not relay to '%s' ('relay to')", m->name,
				      log_escape(host, esc, sizeof(esc)));
		}
	}
	return 0;
}

void policy_relay_names(const struct policy_peer *peer, char *relay, size_t relaylen, char *client,
			size_t clientlen)
{
	struct policy_ident r = policy_tls_ident(peer), c = policy_subject(peer);

	policy_ident_name(&r, relay, relaylen);
	policy_ident_name(&c, client, clientlen);
}
