/* SPDX-License-Identifier: MIT */
/*
 * The inside of certs.h, shared by its files: certs.c (keys, certificates,
 * init and issue), certs_renew.c (renew, server certificates for an existing
 * CA), certs_crl.c (the CA's index and its revocation list) and certs_show.c
 * (what a certificate says, and when it expires).
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certs.h"
#include "macro.h"

#define CERTS_CA_DAYS	(10 * 365)
#define CERTS_LEAF_DAYS 825
#define CERTS_NAME_MAX	64
/* Tolerate a little clock skew between the machine that issues and the peer. */
#define CERTS_SKEW_SECONDS 300
/* The CA's files (certs init), and what revoke keeps next to them. */
#define CERTS_CA_CRT   "ca.crt"
#define CERTS_CA_KEY   "ca.key"
#define CERTS_INDEX    "index.txt"
#define CERTS_CRL_FILE "crl.pem"

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_PKEY *, EVP_PKEY_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(X509 *, X509_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(X509_CRL *, X509_CRL_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(X509_EXTENSION *, X509_EXTENSION_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(GENERAL_NAMES *, GENERAL_NAMES_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(GENERAL_NAME *, GENERAL_NAME_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(BIGNUM *, BN_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(BIO *, BIO_free)

enum cert_kind {
	CERT_CA,
	CERT_SERVER,
	CERT_CLIENT,
};

struct cert_spec {
	enum cert_kind kind;
	const char *cn;
	long valid_days;
	long backdate_days;
	X509 *issuer; /* NULL: self-signed */
	EVP_PKEY *issuer_key;
	const char *const *hosts; /* server only */
	size_t nhosts;
};

EVP_PKEY *certs_make_key(void);
int certs_make_cert(const struct cert_spec *spec, EVP_PKEY *key, X509 **ret);
/* A fresh random positive serial of 121 to 127 bits. */
int certs_set_random_serial(X509 *x);
/* Is host an IP literal or a DNS name we put in a certificate? */
bool certs_host_valid(const char *host);
/* A name for NAME.crt/NAME.key: letters, digits, . _ - (not first '.'), at most 64. */
bool certs_file_name_valid(const char *name);

/* ---- certs_files.c ---- */

typedef int (*pem_writer)(FILE *f, const void *obj);
int certs_pem_key(FILE *f, const void *obj);
int certs_pem_cert(FILE *f, const void *obj);
/*
 * Write NAME beneath dirfd via a temporary file (fsync'd) and rename. With
 * noreplace the final rename refuses an existing NAME (-EEXIST).
 */
int certs_write_atomic(int dirfd, const char *name, mode_t mode, pem_writer writer, const void *obj,
		       bool noreplace);
int certs_open_dir(const char *dir, bool create, int *ret_fd);
/* 0 when dirfd has no NAME, -EEXIST when it has, or -errno. */
int certs_exists_at(int dirfd, const char *name);
FILE *certs_fopen_at(int dirfd, const char *name, int *ret_err);
/* DIR's ca.crt and ca.key, checked to belong together (-EINVAL otherwise). */
int certs_load_ca(int dirfd, X509 **ret_ca, EVP_PKEY **ret_key);
/* NAME.crt (0644) then NAME.key (0600) beneath dirfd. */
int certs_write_pair(int dirfd, const char *base, X509 *cert, EVP_PKEY *key, bool noreplace_key);

/* Note a certificate the CA at dirfd signed in its index (for revoke by fingerprint). */
int certs_index_add(int dirfd, X509 *x);

/* ---- certs_show.c ---- */

/* The first certificate of a PEM file. -EBADMSG: none in it; -errno: can't open it. */
int certs_read_pem(const char *file, X509 **ret);
