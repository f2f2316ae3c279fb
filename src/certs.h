/* SPDX-License-Identifier: MIT */
/*
 * Certificates in one command: a private CA, a server certificate, client
 * certificates. ECDSA P-256 keys, SHA-256 signatures; keys written 0600.
 */
#pragma once

#include <stddef.h>

/*
 * Create DIR (0700 if new) with ca.crt, ca.key, server.crt, server.key
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
