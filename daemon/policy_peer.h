/* SPDX-License-Identifier: MIT */
/*
 * Who a rule is matched against (inside policy, not for callers of
 * policy.h): a certificate as 'allow', 'deny', 'allow bench' and
 * 'relay from' see it, the TLS peer of a connection or a certificate
 * alone (a relayed push's original client, from its ticket). One matcher
 * serves both, so a rule means the same whoever it is matched against.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/x509.h>

#include "config.h"
#include "policy.h"

/* One identity: a TLS peer (tls set) or a certificate (cert set), with its fingerprint. */
struct policy_ident {
	struct tls_conn *tls;
	X509 *cert;
	const uint8_t *fp; /* SHA-256 of the certificate's DER */
};

/* Whom a request's rules are about: the original client of a relayed push, else the TLS peer. */
struct policy_ident policy_subject(const struct policy_peer *peer);
/* The TLS peer itself (for a relayed push, the relaying daemon). */
struct policy_ident policy_tls_ident(const struct policy_peer *peer);
/* Does the identity match one of these rules (CN or DNS/IP SAN, fingerprint, "*")? */
bool policy_ident_matches(const struct policy_ident *id, const struct allow_rule *rules, size_t n);
/* Its CN for a log line or a refusal, else "sha256:" and the first bytes of its fingerprint. */
void policy_ident_name(const struct policy_ident *id, char *out, size_t size);
