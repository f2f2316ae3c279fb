/* SPDX-License-Identifier: MIT */
/*
 * Relay tickets: what the original client of a relayed push signs for each
 * destination after the first (docs/SECURITY.md, "Relays"). A ticket binds
 * the destination's path, the OPEN flags, a time window and the client's
 * certificate; the daemon at that destination checks it (relay_ticket_check)
 * and then authorizes the push as the client's, the relay that delivers it
 * as the module's `relay from` allows. The host is carried for the logs and
 * not checked: names differ between where they are seen.
 *
 * Encoding (proto/wire.h, big-endian): magic "RDMACPT1" | host str16 |
 * port u16 | path str16 | open flags u32 | issued u64 | expires u64 |
 * nonce[16] | certificate (u16 length, DER, <= RELAY_TICKET_MAX_CERT) |
 * signature (u16 length, <= RELAY_TICKET_MAX_SIG) over every byte before it
 * (SHA-256; no digest for Ed25519 and Ed448 keys).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "proto/msg.h"

#define RELAY_TICKET_LIFE     3600 /* seconds from issued to expires */
#define RELAY_TICKET_SKEW     300  /* seconds a ticket may seem issued in the future */
#define RELAY_TICKET_MAX_CERT (8u << 10)
#define RELAY_TICKET_MAX_SIG  1024

struct relay_ticket {
	char host[PROTO_MAX_HOST + 1]; /* as the client wrote it (for the logs; not checked) */
	uint16_t port;
	char path[PROTO_MAX_PATH + 1]; /* MODULE/REL: must equal the OPEN's path */
	uint32_t open_flags;	       /* PROTO_OPEN_* the client asked for */
	int64_t issued, expires;       /* unix seconds; expires = issued + RELAY_TICKET_LIFE */
	uint8_t nonce[16];
};

/* Signs t with key (whose certificate is cert): an encoded ticket, *ret malloc'd. */
int relay_ticket_make(EVP_PKEY *key, X509 *cert, const struct relay_ticket *t, uint8_t **ret,
		      size_t *ret_len);
/*
 * Decodes and checks an encoded ticket: cert chains to store (purpose sslclient, CRLs as the
 * store has them), the signature is cert's, now within [issued - 300, expires]. *ret_cert
 * (up-ref'd) is the original client's certificate. Returns 0 or -errno with why filled.
 */
int relay_ticket_check(X509_STORE *store, const uint8_t *buf, size_t len, int64_t now,
		       struct relay_ticket *ret, X509 **ret_cert, char *why, size_t whylen);

/*
 * The OPEN flags a ticket binds: what a relay's OPEN at the ticket's
 * destination may carry only where the client's ticket carries it too
 * (a relay may do less than the client asked, never more: no --delete,
 * ownership or tree the client did not sign for). The rest (skip levels,
 * partial, delta, sealing, the lanes) are the hop's own business.
 */
#define RELAY_TICKET_BOUND_FLAGS                                                             \
	(PROTO_OPEN_RECURSIVE | PROTO_OPEN_PRESERVE | PROTO_OPEN_OWNER | PROTO_OPEN_DELETE | \
	 PROTO_OPEN_ASSUME_ZERO | PROTO_OPEN_HARDLINKS | PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS)
/*
 * Does a checked ticket admit an OPEN of path with open_flags: the same path
 * byte for byte, no bound flag the ticket lacks. 0, or -EPERM with why filled.
 */
int relay_ticket_admits_open(const struct relay_ticket *t, const char *path, uint32_t open_flags,
			     char *why, size_t whylen);
