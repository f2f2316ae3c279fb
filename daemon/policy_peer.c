/* SPDX-License-Identifier: MIT */
/*
 * Identities as rules see them (policy_peer.h): a TLS peer, or a
 * certificate carried by a relay ticket, matched by the same code.
 */
#include "policy_peer.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "tls.h"
#include "tls_keys.h"

struct policy_ident policy_subject(const struct policy_peer *peer)
{
	if (peer->behalf) {
		return (struct policy_ident){ .cert = peer->behalf, .fp = peer->behalf_fp };
	}
	return policy_tls_ident(peer);
}

struct policy_ident policy_tls_ident(const struct policy_peer *peer)
{
	return (struct policy_ident){ .tls = peer->tls, .fp = peer->fp };
}

static bool san_equals(const char *san, void *ud)
{
	return strcmp(san, (const char *)ud) == 0;
}

static bool ident_has_name(const struct policy_ident *id, const char *name)
{
	char cn[256];

	if (id->cert) {
		tls_cert_cn(id->cert, cn, sizeof(cn));
		return strcmp(cn, name) == 0 ||
		       tls_cert_match_san(id->cert, san_equals, (void *)name);
	}
	return strcmp(tls_peer_cn(id->tls), name) == 0 ||
	       tls_peer_match_san(id->tls, san_equals, (void *)name);
}

bool policy_ident_matches(const struct policy_ident *id, const struct allow_rule *rules, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct allow_rule *a = &rules[i];

		switch (a->kind) {
		case ALLOW_ANY:
			return true;
		case ALLOW_FINGERPRINT:
			if (id->fp && CRYPTO_memcmp(a->fp, id->fp, TLS_FINGERPRINT_LEN) == 0) {
				return true;
			}
			break;
		case ALLOW_NAME:
			if (ident_has_name(id, a->name)) {
				return true;
			}
			break;
		}
	}
	return false; /* no rule, or none matched: fail closed */
}

void policy_ident_name(const struct policy_ident *id, char *out, size_t size)
{
	char cn[256], hex[65];

	if (id->cert) {
		tls_cert_cn(id->cert, cn, sizeof(cn));
	} else {
		snprintf(cn, sizeof(cn), "%s", tls_peer_cn(id->tls));
	}
	if (cn[0]) {
		log_escape(cn, out, size);
		return;
	}
	if (!id->fp) {
		snprintf(out, size, "an unnamed certificate");
		return;
	}
	tls_format_fingerprint(id->fp, hex);
	snprintf(out, size, "sha256:%.16s...", hex);
}
