/* SPDX-License-Identifier: MIT */
/*
 * The CA's revocation list (certs.h): crl.pem, re-signed with each
 * certificate revoked, by its file or by its fingerprint (looked up in the
 * index that certs_files.c keeps).
 */
#include "certs-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "tls.h"

/* A CRL is re-signed with each revocation; until then it stays good this long. */
#define CERTS_CRL_DAYS (10 * 365)

DEFINE_TRIVIAL_CLEANUP_FUNC(ASN1_INTEGER *, ASN1_INTEGER_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(ASN1_TIME *, ASN1_TIME_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(X509_REVOKED *, X509_REVOKED_free)

/* The serial and subject the index holds for fingerprint fp: 0, -ENOENT or -errno. */
static int index_find(int dirfd, const uint8_t fp[TLS_FINGERPRINT_LEN], ASN1_INTEGER **ret,
		      char *subject, size_t subjectlen)
{
	_cleanup_fclose_ FILE *f = NULL;
	char line[1024], want[2 * TLS_FINGERPRINT_LEN + 1];
	int r = 0;

	f = certs_fopen_at(dirfd, CERTS_INDEX, &r);
	if (!f) {
		return r;
	}
	tls_format_fingerprint(fp, want);
	while (fgets(line, sizeof(line), f)) {
		char serial[80], sfp[80];
		int off = 0;
		BIGNUM *bn = NULL;

		if (sscanf(line, "%79s sha256:%79s %n", serial, sfp, &off) != 2 ||
		    strcmp(sfp, want)) {
			continue;
		}
		line[strcspn(line, "\n")] = '\0';
		snprintf(subject, subjectlen, "%s", line + off);
		if (!BN_hex2bn(&bn, serial)) {
			return -EINVAL;
		}
		*ret = BN_to_ASN1_INTEGER(bn, NULL);
		BN_free(bn);
		return *ret ? 0 : -ENOMEM;
	}
	return -ENOENT;
}

/* What to revoke: a certificate file of this CA, or a fingerprint in its index. */
static int revoke_target(int dirfd, X509 *ca, const char *what, ASN1_INTEGER **ret, char *subject,
			 size_t subjectlen)
{
	_cleanup_(X509_freep) X509 *x = NULL;
	uint8_t fp[TLS_FINGERPRINT_LEN];
	int r;

	if (tls_parse_fingerprint(what, fp) == 0) {
		return index_find(dirfd, fp, ret, subject, subjectlen);
	}
	r = certs_read_pem(what, &x);
	if (r < 0) {
		return r;
	}
	if (X509_check_issued(ca, x) != X509_V_OK || X509_verify(x, X509_get0_pubkey(ca)) != 1) {
		ERR_clear_error();
		return -EXDEV;
	}
	X509_NAME_oneline(X509_get_subject_name(x), subject, (int)subjectlen);
	*ret = ASN1_INTEGER_dup(X509_get0_serialNumber(x));
	return *ret ? 0 : -ENOMEM;
}

/* The CA's CRL so far (checked to be its own), or a new empty one. */
static int load_crl(int dirfd, X509 *ca, EVP_PKEY *ca_key, X509_CRL **ret)
{
	_cleanup_fclose_ FILE *f = NULL;
	X509_CRL *crl;
	int r = 0;

	f = certs_fopen_at(dirfd, CERTS_CRL_FILE, &r);
	if (!f && r != -ENOENT) {
		return r;
	}
	if (!f) {
		crl = X509_CRL_new();
		if (!crl || !X509_CRL_set_version(crl, X509_CRL_VERSION_2) ||
		    !X509_CRL_set_issuer_name(crl, X509_get_subject_name(ca))) {
			X509_CRL_free(crl);
			return -ENOMEM;
		}
		*ret = crl;
		return 0;
	}
	crl = PEM_read_X509_CRL(f, NULL, NULL, NULL);
	if (!crl || X509_CRL_verify(crl, ca_key) != 1) {
		ERR_clear_error();
		X509_CRL_free(crl);
		return -EBADMSG;
	}
	*ret = crl;
	return 0;
}

static int add_revoked(X509_CRL *crl, ASN1_INTEGER *serial)
{
	_cleanup_(X509_REVOKED_freep) X509_REVOKED *rev = X509_REVOKED_new();
	_cleanup_(ASN1_TIME_freep) ASN1_TIME *now = X509_gmtime_adj(NULL, 0);
	X509_REVOKED *have = NULL;

	if (X509_CRL_get0_by_serial(crl, &have, serial) == 1) {
		return -EALREADY;
	}
	if (!rev || !now || !X509_REVOKED_set_serialNumber(rev, serial) ||
	    !X509_REVOKED_set_revocationDate(rev, now) || !X509_CRL_add0_revoked(crl, rev)) {
		return -ENOMEM;
	}
	TAKE_PTR(rev);
	return 0;
}

static int sign_crl(X509_CRL *crl, EVP_PKEY *ca_key)
{
	_cleanup_(ASN1_TIME_freep) ASN1_TIME *last = X509_gmtime_adj(NULL, -CERTS_SKEW_SECONDS);
	_cleanup_(ASN1_TIME_freep) ASN1_TIME *next =
	    X509_time_adj_ex(NULL, CERTS_CRL_DAYS, 0, NULL);

	if (!last || !next || !X509_CRL_set1_lastUpdate(crl, last) ||
	    !X509_CRL_set1_nextUpdate(crl, next) || !X509_CRL_sort(crl)) {
		return -ENOMEM;
	}
	return X509_CRL_sign(crl, ca_key, EVP_sha256()) > 0 ? 0 : -EINVAL;
}

static int write_crl_pem(FILE *f, const void *obj)
{
	return PEM_write_X509_CRL(f, (X509_CRL *)obj);
}

int certs_revoke(const char *ca_dir, const char *what, char *ret_subject, size_t subjectlen)
{
	_cleanup_close_ int dirfd = -1;
	_cleanup_(X509_freep) X509 *ca = NULL;
	_cleanup_(EVP_PKEY_freep) EVP_PKEY *ca_key = NULL;
	_cleanup_(X509_CRL_freep) X509_CRL *crl = NULL;
	_cleanup_(ASN1_INTEGER_freep) ASN1_INTEGER *serial = NULL;
	char subject[512] = "";
	int r;

	if (!ca_dir || !what) {
		return -EINVAL;
	}
	r = certs_open_dir(ca_dir, false, &dirfd);
	if (r >= 0) {
		r = certs_load_ca(dirfd, &ca, &ca_key);
	}
	if (r >= 0) {
		r = revoke_target(dirfd, ca, what, &serial, subject, sizeof(subject));
	}
	if (r >= 0 && ret_subject) {
		snprintf(ret_subject, subjectlen, "%s", subject);
	}
	if (r >= 0) {
		r = load_crl(dirfd, ca, ca_key, &crl);
	}
	if (r >= 0) {
		r = add_revoked(crl, serial);
	}
	if (r >= 0) {
		r = sign_crl(crl, ca_key);
	}
	if (r >= 0) {
		r = certs_write_atomic(dirfd, CERTS_CRL_FILE, 0644, write_crl_pem, crl, false);
	}
	return r;
}
