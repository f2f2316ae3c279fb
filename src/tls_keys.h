/* SPDX-License-Identifier: MIT */
/*
 * What a TLS context and connection hold that relay tickets need
 * (src/relay_ticket.c): a context's own key and certificate (to sign with),
 * a context's trust store (its CA and CRLs, to check a ticket's certificate
 * as a peer's would be) and a connection's peer certificate. No SSL object
 * leaves src/tls_*.c. Borrowed pointers: valid while the context or the
 * connection lives; up-ref what is kept longer.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "tls.h"

/* The context's own private key and (leaf) certificate; NULL when it has none. */
EVP_PKEY *tls_ctx_key(struct tls_ctx *ctx);
X509 *tls_ctx_cert(struct tls_ctx *ctx);
/* The store the context verifies peers with: its CA file and CRL file, its flags. */
X509_STORE *tls_ctx_store(struct tls_ctx *ctx);
/* The peer's certificate after the handshake; NULL when there is none. */
X509 *tls_peer_cert(struct tls_conn *c);

/*
 * A certificate read as a peer's is (tls_peer.c): its subject CN ("" when
 * it has none, or one with control characters) into out, and fn called for
 * each DNS/IP SAN as text until it returns true.
 */
void tls_cert_cn(X509 *cert, char *out, size_t size);
bool tls_cert_match_san(X509 *cert, bool (*fn)(const char *san, void *ud), void *ud);
/* SHA-256 of a certificate's DER (tls_ctx.c). */
int tls_cert_fingerprint(X509 *cert, uint8_t ret_fp[TLS_FINGERPRINT_LEN]);
