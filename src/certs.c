/* SPDX-License-Identifier: MIT */
/*
 * Certificate generation: a private CA, a server certificate and client
 * certificates (see certs.h). EC P-256 keys, SHA-256 signatures, random
 * 128-bit serials. Files are written through certs_files.c: to a temporary
 * name beneath the held directory fd, then renamed into place.
 */
#include "certs-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "macro.h"

EVP_PKEY *certs_make_key(void)
{
	return EVP_EC_gen("P-256");
}

int certs_set_random_serial(X509 *x)
{
	unsigned char raw[16];
	_cleanup_(BN_freep) BIGNUM *bn = NULL;

	if (RAND_bytes(raw, sizeof(raw)) != 1) {
		return -EIO;
	}
	/* Positive, and never shorter than 121 bits. */
	raw[0] &= 0x7f;
	raw[0] |= 0x01;
	bn = BN_bin2bn(raw, sizeof(raw), NULL);
	if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x))) {
		return -ENOMEM;
	}
	return 0;
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	_cleanup_(X509_EXTENSION_freep) X509_EXTENSION *ext = NULL;

	X509V3_set_ctx(&v3, issuer ? issuer : x, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	if (!ext || !X509_add_ext(x, ext, -1)) {
		return -EINVAL;
	}
	return 0;
}

/* A DNS name we are willing to put in a certificate. */
static bool dns_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 253 || s[0] == '.' || s[0] == '-') {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_' ||
		      (ch == '*' && i == 0 && s[1] == '.'))) {
			return false;
		}
	}
	return true;
}

bool certs_host_valid(const char *host)
{
	ASN1_OCTET_STRING *ip = a2i_IPADDRESS(host);

	if (ip) {
		ASN1_OCTET_STRING_free(ip);
		return true;
	}
	return dns_name_valid(host);
}

/* host → GENERAL_NAME: an IP literal becomes an IP SAN, anything else a DNS SAN. */
static int san_from_host(const char *host, GENERAL_NAME **ret)
{
	_cleanup_(GENERAL_NAME_freep) GENERAL_NAME *gn = NULL;
	ASN1_OCTET_STRING *ip;

	ip = a2i_IPADDRESS(host);
	if (ip) {
		gn = GENERAL_NAME_new();
		if (!gn) {
			ASN1_OCTET_STRING_free(ip);
			return -ENOMEM;
		}
		GENERAL_NAME_set0_value(gn, GEN_IPADD, ip);
	} else {
		ASN1_IA5STRING *dns;
		char lower[254];
		size_t n = strlen(host);

		if (!dns_name_valid(host)) {
			return -EINVAL;
		}
		for (size_t i = 0; i <= n; i++) {
			char ch = host[i];

			lower[i] = (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
		}
		dns = ASN1_IA5STRING_new();
		gn = GENERAL_NAME_new();
		if (!dns || !gn || !ASN1_STRING_set(dns, lower, (int)n)) {
			ASN1_IA5STRING_free(dns);
			return -ENOMEM;
		}
		GENERAL_NAME_set0_value(gn, GEN_DNS, dns);
	}
	*ret = TAKE_PTR(gn);
	return 0;
}

static int add_san(GENERAL_NAMES *names, const char *host)
{
	_cleanup_(GENERAL_NAME_freep) GENERAL_NAME *gn = NULL;
	int r;

	r = san_from_host(host, &gn);
	if (r < 0) {
		return r;
	}
	for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
		if (GENERAL_NAME_cmp(sk_GENERAL_NAME_value(names, i), gn) == 0) {
			return 0; /* duplicate */
		}
	}
	if (!sk_GENERAL_NAME_push(names, gn)) {
		return -ENOMEM;
	}
	TAKE_PTR(gn);
	return 0;
}

static int add_server_sans(X509 *x, const char *const *hosts, size_t nhosts)
{
	static const char *const always[] = { "localhost", "127.0.0.1", "::1" };
	_cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *names = GENERAL_NAMES_new();
	int r;

	if (!names) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < nhosts; i++) {
		r = add_san(names, hosts[i]);
		if (r < 0) {
			return r;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(always); i++) {
		r = add_san(names, always[i]);
		if (r < 0) {
			return r;
		}
	}
	if (!X509_add1_ext_i2d(x, NID_subject_alt_name, names, 0, X509V3_ADD_DEFAULT)) {
		return -EINVAL;
	}
	return 0;
}

int certs_make_cert(const struct cert_spec *spec, EVP_PKEY *key, X509 **ret)
{
	_cleanup_(X509_freep) X509 *x = X509_new();
	X509_NAME *name;
	X509 *issuer;
	long start = -(spec->backdate_days * 86400L) - CERTS_SKEW_SECONDS;
	int r;

	if (!x) {
		return -ENOMEM;
	}
	issuer = spec->issuer ? spec->issuer : x;
	if (!X509_set_version(x, X509_VERSION_3)) {
		return -ENOMEM;
	}
	r = certs_set_random_serial(x);
	if (r < 0) {
		return r;
	}
	if (!X509_gmtime_adj(X509_getm_notBefore(x), start) ||
	    !X509_time_adj_ex(X509_getm_notAfter(x), (int)(spec->valid_days - spec->backdate_days),
			      0, NULL)) {
		return -EINVAL;
	}
	name = X509_get_subject_name(x);
	if (!X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)spec->cn,
					-1, -1, 0)) {
		return -EINVAL;
	}
	if (!X509_set_issuer_name(x, X509_get_subject_name(issuer)) || !X509_set_pubkey(x, key)) {
		return -ENOMEM;
	}

	/* SKI before AKI: a self-signed AKI refers to its own SKI. */
	r = add_ext(x, issuer, NID_subject_key_identifier, "hash");
	if (r < 0) {
		return r;
	}
	switch (spec->kind) {
	case CERT_CA:
		r = add_ext(x, issuer, NID_basic_constraints, "critical,CA:TRUE");
		if (r >= 0) {
			r = add_ext(x, issuer, NID_key_usage, "critical,keyCertSign,cRLSign");
		}
		break;
	case CERT_SERVER:
		r = add_ext(x, issuer, NID_basic_constraints, "critical,CA:FALSE");
		if (r >= 0) {
			r = add_ext(x, issuer, NID_key_usage, "critical,digitalSignature");
		}
		if (r >= 0) {
			r = add_ext(x, issuer, NID_ext_key_usage, "serverAuth");
		}
		if (r >= 0) {
			r = add_ext(x, issuer, NID_authority_key_identifier, "keyid:always");
		}
		if (r >= 0) {
			r = add_server_sans(x, spec->hosts, spec->nhosts);
		}
		break;
	case CERT_CLIENT:
		r = add_ext(x, issuer, NID_basic_constraints, "critical,CA:FALSE");
		if (r >= 0) {
			r = add_ext(x, issuer, NID_key_usage, "critical,digitalSignature");
		}
		if (r >= 0) {
			r = add_ext(x, issuer, NID_ext_key_usage, "clientAuth");
		}
		if (r >= 0) {
			r = add_ext(x, issuer, NID_authority_key_identifier, "keyid:always");
		}
		break;
	}
	if (r < 0) {
		return r;
	}
	if (X509_sign(x, spec->issuer_key ? spec->issuer_key : key, EVP_sha256()) <= 0) {
		return -EINVAL;
	}
	*ret = TAKE_PTR(x);
	return 0;
}

static int issue_leaf(int dirfd, const char *base, enum cert_kind kind, const char *cn,
		      long valid_days, long backdate_days, X509 *ca, EVP_PKEY *ca_key,
		      const char *const *hosts, size_t nhosts, bool noreplace_key)
{
	_cleanup_(EVP_PKEY_freep) EVP_PKEY *key = certs_make_key();
	_cleanup_(X509_freep) X509 *cert = NULL;
	struct cert_spec spec = {
		.kind = kind,
		.cn = cn,
		.valid_days = valid_days,
		.backdate_days = backdate_days,
		.issuer = ca,
		.issuer_key = ca_key,
		.hosts = hosts,
		.nhosts = nhosts,
	};
	int r;

	if (!key) {
		return -ENOMEM;
	}
	r = certs_make_cert(&spec, key, &cert);
	if (r < 0) {
		return r;
	}
	r = certs_write_pair(dirfd, base, cert, key, noreplace_key);
	if (r < 0) {
		return r;
	}
	return certs_index_add(dirfd, cert);
}

/*
 * "rdmacp CA data1.example.org 2026-11-30 3f9a2c": the host it serves (the
 * first --host, else this machine's name), the day it was made (UTC) and 24
 * random bits, so that two CAs, even from one machine on one day, have
 * different names and an error naming one can be told from the other.
 * At most 64 characters, the CN limit of RFC 5280.
 */
static int ca_name(const char *const *hosts, size_t nhosts, char *buf, size_t size)
{
	char host[HOST_NAME_MAX + 1] = "", date[16];
	unsigned char rnd[3];
	time_t now = time(NULL);
	struct tm tm;
	size_t n;

	if (nhosts > 0) {
		snprintf(host, sizeof(host), "%s", hosts[0]);
	} else if (gethostname(host, sizeof(host)) < 0 || !dns_name_valid(host)) {
		snprintf(host, sizeof(host), "localhost");
	}
	host[HOST_NAME_MAX] = '\0';
	/* "rdmacp CA " + host + " YYYY-MM-DD xxxxxx" within 64. */
	n = strlen(host);
	if (n > 36) {
		host[36] = '\0';
	}
	if (!gmtime_r(&now, &tm) || !strftime(date, sizeof(date), "%Y-%m-%d", &tm)) {
		return -EINVAL;
	}
	if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
		return -EIO;
	}
	snprintf(buf, size, "rdmacp CA %s %s %02x%02x%02x", host, date, rnd[0], rnd[1], rnd[2]);
	return 0;
}

int certs_init(const char *dir, const char *const *hosts, size_t nhosts)
{
	_cleanup_close_ int dirfd = -1;
	_cleanup_(EVP_PKEY_freep) EVP_PKEY *ca_key = NULL;
	_cleanup_(X509_freep) X509 *ca = NULL;
	const char *server_cn = "localhost";
	char ca_cn[CERTS_NAME_MAX + 1];
	struct cert_spec ca_spec = {
		.kind = CERT_CA,
		.cn = ca_cn,
		.valid_days = CERTS_CA_DAYS,
	};
	int r;

	if (!dir || (nhosts > 0 && !hosts)) {
		return -EINVAL;
	}
	for (size_t i = 0; i < nhosts; i++) {
		if (!certs_host_valid(hosts[i])) {
			return -EINVAL;
		}
	}
	if (nhosts > 0 && strlen(hosts[0]) <= CERTS_NAME_MAX) {
		server_cn = hosts[0];
	}
	r = ca_name(hosts, nhosts, ca_cn, sizeof(ca_cn));
	if (r < 0) {
		return r;
	}

	r = certs_open_dir(dir, true, &dirfd);
	if (r < 0) {
		return r;
	}
	r = certs_exists_at(dirfd, "ca.key");
	if (r < 0) {
		return r;
	}

	ca_key = certs_make_key();
	if (!ca_key) {
		return -ENOMEM;
	}
	r = certs_make_cert(&ca_spec, ca_key, &ca);
	if (r < 0) {
		return r;
	}
	r = certs_write_atomic(dirfd, "ca.crt", 0644, certs_pem_cert, ca, false);
	if (r < 0) {
		return r;
	}
	r = issue_leaf(dirfd, "server", CERT_SERVER, server_cn, CERTS_LEAF_DAYS, 0, ca, ca_key,
		       hosts, nhosts, false);
	if (r < 0) {
		return r;
	}
	r = issue_leaf(dirfd, "client", CERT_CLIENT, "client", CERTS_LEAF_DAYS, 0, ca, ca_key, NULL,
		       0, false);
	if (r < 0) {
		return r;
	}
	/* ca.key last: it marks a complete directory, and a failed run can be redone. */
	return certs_write_atomic(dirfd, "ca.key", 0600, certs_pem_key, ca_key, true);
}

bool certs_file_name_valid(const char *name)
{
	size_t n;

	if (!name) {
		return false;
	}
	n = strlen(name);
	if (n == 0 || n > CERTS_NAME_MAX || name[0] == '.') {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-')) {
			return false;
		}
	}
	return true;
}

/* NAME.crt/NAME.key in dir, of this kind, signed by dir's CA; an existing NAME.key is kept. */
static int issue_named(const char *dir, enum cert_kind kind, const char *name,
		       const char *const *hosts, size_t nhosts, int valid_days, int backdate_days)
{
	_cleanup_close_ int dirfd = -1;
	_cleanup_(X509_freep) X509 *ca = NULL;
	_cleanup_(EVP_PKEY_freep) EVP_PKEY *ca_key = NULL;
	char keyname[CERTS_NAME_MAX + 8];
	int r;

	if (!dir || !certs_file_name_valid(name) || valid_days < 0 || backdate_days < 0 ||
	    valid_days > 100 * 365 || backdate_days > 100 * 365) {
		return -EINVAL;
	}
	if (valid_days == 0) {
		valid_days = CERTS_LEAF_DAYS;
	}
	r = certs_open_dir(dir, false, &dirfd);
	if (r < 0) {
		return r;
	}
	snprintf(keyname, sizeof(keyname), "%s.key", name);
	r = certs_exists_at(dirfd, keyname);
	if (r < 0) {
		return r;
	}
	r = certs_load_ca(dirfd, &ca, &ca_key);
	if (r < 0) {
		return r;
	}
	return issue_leaf(dirfd, name, kind, name, valid_days, backdate_days, ca, ca_key, hosts,
			  nhosts, true);
}

int certs_issue_client(const char *dir, const char *name, int valid_days, int backdate_days)
{
	return issue_named(dir, CERT_CLIENT, name, NULL, 0, valid_days, backdate_days);
}

int certs_issue_server(const char *dir, const char *const *hosts, size_t nhosts, int valid_days,
		       int backdate_days)
{
	if (nhosts == 0 || !hosts) {
		return -EINVAL;
	}
	for (size_t i = 0; i < nhosts; i++) {
		if (!certs_host_valid(hosts[i])) {
			return -EINVAL;
		}
	}
	/* The first host names the files and the CN, as certs init's server.crt. */
	return issue_named(dir, CERT_SERVER, hosts[0], hosts, nhosts, valid_days, backdate_days);
}
