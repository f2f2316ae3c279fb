/* SPDX-License-Identifier: MIT */
/*
 * Certificates in one command: a private CA, a server certificate, client
 * certificates; then their second year: more server certificates of the same
 * CA, renewal, revocation (the CA's CRL) and when one expires. ECDSA P-256
 * keys, SHA-256 signatures; keys written 0600.
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

/*
 * Add NAME.crt/NAME.key to DIR, a server certificate signed by DIR's CA:
 * NAME and CN the first of hosts, SANs hosts[] (DNS names or IP
 * addresses) plus localhost, 127.0.0.1 and ::1. Days as certs_issue_client.
 * -EEXIST when NAME.key exists, -EINVAL for a bad host (or an IPv6 first).
 */
int certs_issue_server(const char *dir, const char *const *hosts, size_t nhosts, int valid_days,
		       int backdate_days);

/*
 * Renew FILE (a certificate ca_dir's CA signed; ca_dir NULL: FILE's
 * directory): a new certificate with FILE's subject and extensions (SANs
 * and usages), a new serial and valid_days (0: 825) from now, for the same
 * key (FILE with .crt → .key), or a new one (new_key). The old certificate
 * (and key, with new_key) stay as FILE.old (KEY.old); each new file is
 * written to a temporary name, synced and renamed over the old one.
 * -ENOKEY: the key file is missing; -EXDEV: FILE is not signed by that CA;
 * -EINVAL: FILE, the key or the CA don't load or don't match.
 */
int certs_renew(const char *file, const char *ca_dir, bool new_key, int valid_days);

/*
 * Revoke a certificate of ca_dir's CA: WHAT is a certificate file, or its
 * fingerprint ("sha256:HEX" as certs show prints it) found in the CA's
 * index. Adds its serial to ca_dir/crl.pem (made when missing), signed by
 * the CA, and writes it atomically. -ENOENT: a fingerprint not in the
 * index; -EXDEV: a file signed by another CA; -EALREADY: already revoked.
 * *ret_subject (may be NULL) gets what was revoked.
 */
int certs_revoke(const char *ca_dir, const char *what, char *ret_subject, size_t subjectlen);

/* When a certificate file's first certificate expires. */
struct certs_expiry {
	char subject[512];  /* RFC 2253 */
	char not_after[32]; /* "2026-11-30 15:04:05 UTC" */
	long long not_after_t;
	int days_left; /* whole days, negative once expired */
	bool expired;
};

/* -EBADMSG: no PEM certificate in FILE; -errno: can't read it. */
int certs_file_expiry(const char *file, struct certs_expiry *ret);

/*
 * Is FILE's first certificate one a TLS server takes from a client (the
 * clientAuth usage, or no usage restriction)? 1 yes, 0 no; -EBADMSG: no
 * PEM certificate in FILE; -errno: can't read it.
 */
int certs_file_client_purpose(const char *file);
