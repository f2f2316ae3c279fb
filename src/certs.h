/* SPDX-License-Identifier: MIT */
/*
 * Certificates in one command: a private CA, a server certificate, client
 * certificates. ECDSA P-256 keys, SHA-256 signatures; keys written 0600.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Create DIR (0700 if new) with ca.crt (CN "rdmacp CA HOST YYYY-MM-DD XXXXXX":
 * the first host or this machine's name, today (UTC), 24 random bits), ca.key, server.crt, server.key
 * (SANs: hosts[] plus localhost, 127.0.0.1, ::1) and client.crt, client.key
 * (CN "client"). Refuses (-EEXIST) to overwrite an existing ca.key.
 */
int certs_init(const char *dir, const char *const *hosts, size_t nhosts);

/*
 * Add NAME.crt/NAME.key to DIR, a client certificate with CN NAME signed by
 * DIR's CA. The certificate is valid from (now - backdate_days) for
 * valid_days days (valid_days 0 means the default, 825).
 */
int certs_issue_client(const char *dir, const char *name, int valid_days, int backdate_days);

/* What "rdmacp certs show" prints about one certificate. Text is as in the file: escape it. */
struct certs_info {
	char subject[512]; /* RFC 2253: "CN=client" */
	char issuer[512];
	char sans[1024];		    /* "DNS:localhost, IP:127.0.0.1"; "" without any */
	char not_before[32], not_after[32]; /* "2026-11-30 15:04:05 UTC" */
	bool not_yet_valid, expired;
	bool is_ca, self_signed;
	uint8_t sha256[32]; /* of the DER: what 'allow = sha256:' and --pin take */
};

/*
 * The certificates of a PEM file (a bundle holds several), at most max, in
 * order. Returns how many (>= 1), -EBADMSG when the file holds none, or
 * -errno when it can't be opened.
 */
int certs_show_file(const char *file, struct certs_info *ret, size_t max);
