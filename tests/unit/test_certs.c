/* SPDX-License-Identifier: MIT */
/*
 * certs_init / certs_issue_client / certs_issue_server / certs_renew /
 * certs_revoke / certs_file_expiry: files, modes, extensions, chain, refusals.
 */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certs.h"

static char *path_in(const char *dir, const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static X509 *load_cert(const char *dir, const char *name)
{
	char *p = path_in(dir, name);
	FILE *f = fopen(p, "r");
	X509 *x;

	assert_non_null(f);
	x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	free(p);
	assert_non_null(x);
	return x;
}

static EVP_PKEY *load_key(const char *dir, const char *name)
{
	char *p = path_in(dir, name);
	FILE *f = fopen(p, "r");
	EVP_PKEY *k;

	assert_non_null(f);
	k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	free(p);
	assert_non_null(k);
	return k;
}

static void assert_mode(const char *dir, const char *name, mode_t want)
{
	char *p = path_in(dir, name);
	struct stat st;

	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode));
	if ((st.st_mode & 07777) != want) {
		fail_msg("%s: mode %o, want %o", p, st.st_mode & 07777, want);
	}
	free(p);
}

static void cn_of(X509 *x, char *buf, size_t size)
{
	assert_true(X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, buf,
					      (int)size) > 0);
}

/* X509_V_OK or the verification error of cert against dir's ca.crt. */
static int verify_against(const char *cadir, X509 *cert, int purpose)
{
	X509 *ca = load_cert(cadir, "ca.crt");
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *sctx = X509_STORE_CTX_new();
	int err;

	assert_true(X509_STORE_add_cert(store, ca));
	assert_true(X509_STORE_CTX_init(sctx, store, cert, NULL));
	X509_STORE_CTX_set_purpose(sctx, purpose);
	err = X509_verify_cert(sctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(sctx);
	X509_STORE_CTX_free(sctx);
	X509_STORE_free(store);
	X509_free(ca);
	return err;
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			n++;
		}
	}
	closedir(d);
	return n;
}

struct fixture {
	char *tmp;
	char *dir; /* tmp/pki: created by certs_init */
};

static int setup(void **state)
{
	static const char *const hosts[] = { "Data1.Example.com", "10.1.2.3", "localhost",
					     "127.0.0.1", "fd00::7" };
	struct fixture *fx = calloc(1, sizeof(*fx));

	fx->tmp = tu_mkdtemp();
	fx->dir = path_in(fx->tmp, "pki");
	if (certs_init(fx->dir, hosts, 5) != 0) {
		return -1;
	}
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	tu_rmtree(fx->tmp);
	free(fx->tmp);
	free(fx->dir);
	free(fx);
	return 0;
}

static void test_init_files_and_modes(void **state)
{
	struct fixture *fx = *state;

	assert_mode(fx->tmp, "pki", 0700);
	assert_mode(fx->dir, "ca.crt", 0644);
	assert_mode(fx->dir, "ca.key", 0600);
	assert_mode(fx->dir, "server.crt", 0644);
	assert_mode(fx->dir, "server.key", 0600);
	assert_mode(fx->dir, "client.crt", 0644);
	assert_mode(fx->dir, "client.key", 0600);
	/* The CA's index of what it signed (certs revoke by fingerprint). */
	assert_mode(fx->dir, "index.txt", 0644);
	/* Nothing else: no temporary files left behind. */
	assert_int_equal(count_entries(fx->dir), 7);
}

/* "rdmacp CA HOST YYYY-MM-DD XXXXXX", made today (UTC). */
static void expect_ca_name(const char *cn, const char *host)
{
	char want[256], today[16];
	time_t now = time(NULL);
	struct tm tm;
	regex_t re;

	assert_non_null(gmtime_r(&now, &tm));
	strftime(today, sizeof(today), "%Y-%m-%d", &tm);
	snprintf(want, sizeof(want), "^rdmacp CA %s %s [0-9a-f]{6}$", host, today);
	assert_int_equal(regcomp(&re, want, REG_EXTENDED | REG_NOSUB), 0);
	if (regexec(&re, cn, 0, NULL, 0) != 0) {
		regfree(&re);
		fail_msg("CA name \"%s\" does not match /%s/", cn, want);
	}
	regfree(&re);
	assert_true(strlen(cn) <= 64);
}

static void test_ca_properties(void **state)
{
	struct fixture *fx = *state;
	X509 *ca = load_cert(fx->dir, "ca.crt");
	EVP_PKEY *key = load_key(fx->dir, "ca.key");
	char cn[128];
	int days = 0, secs = 0;

	cn_of(ca, cn, sizeof(cn));
	expect_ca_name(cn, "Data1.Example.com");
	assert_int_equal(X509_check_ca(ca), 1);
	assert_int_equal(X509_check_issued(ca, ca), X509_V_OK);
	assert_true(X509_get_key_usage(ca) & KU_KEY_CERT_SIGN);
	assert_non_null(X509_get0_subject_key_id(ca));
	assert_int_equal(X509_check_private_key(ca, key), 1);
	assert_int_equal(EVP_PKEY_get_base_id(key), EVP_PKEY_EC);
	assert_int_equal(EVP_PKEY_get_bits(key), 256);
	assert_int_equal(X509_get_signature_nid(ca), NID_ecdsa_with_SHA256);
	assert_true(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(ca), X509_get0_notAfter(ca)));
	assert_true(days >= 3649 && days <= 3651);
	X509_free(ca);
	EVP_PKEY_free(key);
}

static bool has_san(GENERAL_NAMES *names, int type, const char *text)
{
	for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
		GENERAL_NAME *gn = sk_GENERAL_NAME_value(names, i);

		if (gn->type != type) {
			continue;
		}
		if (type == GEN_DNS &&
		    strcmp((const char *)ASN1_STRING_get0_data(gn->d.dNSName), text) == 0) {
			return true;
		}
		if (type == GEN_IPADD) {
			ASN1_OCTET_STRING *want = a2i_IPADDRESS(text);
			bool eq = ASN1_OCTET_STRING_cmp(want, gn->d.iPAddress) == 0;

			ASN1_OCTET_STRING_free(want);
			if (eq) {
				return true;
			}
		}
	}
	return false;
}

static void test_server_cert(void **state)
{
	struct fixture *fx = *state;
	X509 *srv = load_cert(fx->dir, "server.crt");
	EVP_PKEY *key = load_key(fx->dir, "server.key");
	GENERAL_NAMES *names;
	char cn[128];

	cn_of(srv, cn, sizeof(cn));
	assert_string_equal(cn, "Data1.Example.com");
	names = X509_get_ext_d2i(srv, NID_subject_alt_name, NULL, NULL);
	assert_non_null(names);
	assert_true(has_san(names, GEN_DNS, "data1.example.com"));
	assert_true(has_san(names, GEN_IPADD, "10.1.2.3"));
	assert_true(has_san(names, GEN_IPADD, "fd00::7"));
	assert_true(has_san(names, GEN_DNS, "localhost"));
	assert_true(has_san(names, GEN_IPADD, "127.0.0.1"));
	assert_true(has_san(names, GEN_IPADD, "::1"));
	/* The IP literal is not also a DNS name, and nothing appears twice. */
	assert_false(has_san(names, GEN_DNS, "10.1.2.3"));
	assert_int_equal(sk_GENERAL_NAME_num(names), 6);
	GENERAL_NAMES_free(names);

	assert_int_equal(X509_check_ca(srv), 0);
	assert_int_equal(X509_check_purpose(srv, X509_PURPOSE_SSL_SERVER, 0), 1);
	assert_int_not_equal(X509_check_purpose(srv, X509_PURPOSE_SSL_CLIENT, 0), 1);
	assert_non_null(X509_get0_authority_key_id(srv));
	assert_int_equal(X509_check_host(srv, "data1.example.com", 0, 0, NULL), 1);
	assert_int_equal(X509_check_ip_asc(srv, "::1", 0), 1);
	assert_int_equal(X509_check_host(srv, "other.example.com", 0, 0, NULL), 0);
	assert_int_equal(X509_check_private_key(srv, key), 1);
	assert_int_equal(verify_against(fx->dir, srv, X509_PURPOSE_SSL_SERVER), X509_V_OK);
	X509_free(srv);
	EVP_PKEY_free(key);
}

static void test_default_client(void **state)
{
	struct fixture *fx = *state;
	X509 *cli = load_cert(fx->dir, "client.crt");
	char cn[128];

	cn_of(cli, cn, sizeof(cn));
	assert_string_equal(cn, "client");
	assert_int_equal(verify_against(fx->dir, cli, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
	assert_int_not_equal(X509_check_purpose(cli, X509_PURPOSE_SSL_SERVER, 0), 1);
	X509_free(cli);
}

static void test_issue_client(void **state)
{
	struct fixture *fx = *state;
	X509 *a, *def;
	EVP_PKEY *key;
	char cn[128];
	int days = 0, secs = 0;
	BIGNUM *sa, *sd;

	assert_int_equal(certs_issue_client(fx->dir, "alice-01.lab_x", 0, 0), 0);
	assert_mode(fx->dir, "alice-01.lab_x.crt", 0644);
	assert_mode(fx->dir, "alice-01.lab_x.key", 0600);
	a = load_cert(fx->dir, "alice-01.lab_x.crt");
	key = load_key(fx->dir, "alice-01.lab_x.key");
	cn_of(a, cn, sizeof(cn));
	assert_string_equal(cn, "alice-01.lab_x");
	assert_int_equal(X509_check_private_key(a, key), 1);
	assert_int_equal(verify_against(fx->dir, a, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
	assert_true(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(a), X509_get0_notAfter(a)));
	assert_int_equal(days, 825);

	/* Random 128-bit serials: distinct and about 128 bits long. */
	def = load_cert(fx->dir, "client.crt");
	sa = ASN1_INTEGER_to_BN(X509_get0_serialNumber(a), NULL);
	sd = ASN1_INTEGER_to_BN(X509_get0_serialNumber(def), NULL);
	assert_int_not_equal(BN_cmp(sa, sd), 0);
	assert_true(BN_num_bits(sa) > 100 && BN_num_bits(sa) <= 128);
	BN_free(sa);
	BN_free(sd);
	X509_free(def);
	X509_free(a);
	EVP_PKEY_free(key);

	/* Never overwrite an existing key. */
	assert_int_equal(certs_issue_client(fx->dir, "alice-01.lab_x", 0, 0), -EEXIST);
	assert_int_equal(certs_issue_client(fx->dir, "client", 0, 0), -EEXIST);
	assert_int_equal(certs_issue_client(fx->dir, "server", 0, 0), -EEXIST);
	assert_int_equal(certs_issue_client(fx->dir, "ca", 0, 0), -EEXIST);
}

static void test_issue_expired(void **state)
{
	struct fixture *fx = *state;
	X509 *x;

	assert_int_equal(certs_issue_client(fx->dir, "old", 1, 10), 0);
	x = load_cert(fx->dir, "old.crt");
	assert_int_equal(verify_against(fx->dir, x, X509_PURPOSE_SSL_CLIENT),
			 X509_V_ERR_CERT_HAS_EXPIRED);
	assert_true(X509_cmp_current_time(X509_get0_notAfter(x)) < 0);
	X509_free(x);
}

static void test_issue_bad_names(void **state)
{
	struct fixture *fx = *state;
	static const char *const bad[] = {
		"",
		".hidden",
		"..",
		"../evil",
		"a/b",
		"a b",
		"tab\t",
		"nl\n",
		"caf\xc3\xa9",
		"x;rm",
		"a\\b",
		"0123456789012345678901234567890123456789012345678901234567890123x", /* 65 */
	};
	char sixty_four[65];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (certs_issue_client(fx->dir, bad[i], 0, 0) != -EINVAL) {
			fail_msg("name '%s' was not refused", bad[i]);
		}
	}
	assert_int_equal(certs_issue_client(fx->dir, NULL, 0, 0), -EINVAL);
	assert_int_equal(certs_issue_client(fx->dir, "neg", -1, 0), -EINVAL);
	memset(sixty_four, 'n', 64);
	sixty_four[64] = '\0';
	assert_int_equal(certs_issue_client(fx->dir, sixty_four, 0, 0), 0);
}

static void test_reinit_refused(void **state)
{
	struct fixture *fx = *state;
	X509 *before = load_cert(fx->dir, "ca.crt");
	X509 *after;

	assert_int_equal(certs_init(fx->dir, NULL, 0), -EEXIST);
	after = load_cert(fx->dir, "ca.crt");
	assert_int_equal(X509_cmp(before, after), 0);
	X509_free(before);
	X509_free(after);
}

static void test_init_defaults_and_bad_hosts(void **state)
{
	struct fixture *fx = *state;
	static const char *const bad[] = { "evil,DNS:x" };
	char *dir = path_in(fx->tmp, "plain");
	char *dir2 = path_in(fx->tmp, "bad");
	X509 *srv;
	GENERAL_NAMES *names;
	char cn[128];

	assert_int_equal(certs_init(dir, NULL, 0), 0);
	srv = load_cert(dir, "server.crt");
	cn_of(srv, cn, sizeof(cn));
	assert_string_equal(cn, "localhost");
	names = X509_get_ext_d2i(srv, NID_subject_alt_name, NULL, NULL);
	assert_int_equal(sk_GENERAL_NAME_num(names), 3);
	GENERAL_NAMES_free(names);
	/* Different CA each time. */
	assert_int_not_equal(verify_against(fx->dir, srv, X509_PURPOSE_SSL_SERVER), X509_V_OK);
	X509_free(srv);

	assert_int_equal(certs_init(dir2, bad, 1), -EINVAL);
	free(dir);
	free(dir2);
}

/* Issue 15 item 8: two CAs, even from one machine on one day, have different names. */
static void test_ca_names_differ(void **state)
{
	struct fixture *fx = *state;
	char *a = path_in(fx->tmp, "ca-a"), *b = path_in(fx->tmp, "ca-b");
	char *ca_a = path_in(a, "ca.crt"), *ca_b = path_in(b, "ca.crt");
	struct certs_info ia, ib;
	char host[256];

	assert_int_equal(certs_init(a, NULL, 0), 0);
	assert_int_equal(certs_init(b, NULL, 0), 0);
	assert_int_equal(certs_show_file(ca_a, &ia, 1), 1);
	assert_int_equal(certs_show_file(ca_b, &ib, 1), 1);
	assert_int_equal(gethostname(host, sizeof(host)), 0);
	host[36] = '\0';
	assert_true(strncmp(ia.subject, "CN=", 3) == 0);
	expect_ca_name(ia.subject + 3, host);
	expect_ca_name(ib.subject + 3, host);
	assert_string_not_equal(ia.subject, ib.subject);
	free(a);
	free(b);
	free(ca_a);
	free(ca_b);
}

/* certs show: subject, issuer, SANs, validity, and the fingerprint of the DER. */
static void test_show(void **state)
{
	struct fixture *fx = *state;
	char *srv_path = path_in(fx->dir, "server.crt");
	char *bad_path = path_in(fx->tmp, "not-a-cert");
	X509 *srv = load_cert(fx->dir, "server.crt");
	unsigned char fp[32];
	unsigned int n = 0;
	struct certs_info ci[2];
	FILE *f;

	assert_int_equal(certs_show_file(srv_path, ci, 2), 1);
	assert_string_equal(ci[0].subject, "CN=Data1.Example.com");
	assert_true(strncmp(ci[0].issuer, "CN=rdmacp CA Data1.Example.com ", 31) == 0);
	assert_string_equal(ci[0].sans, "DNS:data1.example.com, IP:10.1.2.3, DNS:localhost, "
					"IP:127.0.0.1, IP:fd00::7, IP:::1");
	assert_false(ci[0].is_ca || ci[0].self_signed || ci[0].expired || ci[0].not_yet_valid);
	assert_true(strlen(ci[0].not_before) == 23 && strstr(ci[0].not_after, " UTC"));
	assert_int_equal(X509_digest(srv, EVP_sha256(), fp, &n), 1);
	assert_memory_equal(ci[0].sha256, fp, 32);
	X509_free(srv);

	f = fopen(bad_path, "we");
	assert_non_null(f);
	fputs("hello\n", f);
	fclose(f);
	assert_int_equal(certs_show_file(bad_path, ci, 2), -EBADMSG);
	assert_int_equal(certs_show_file("/nonexistent/x.crt", ci, 2), -ENOENT);
	free(srv_path);
	free(bad_path);
}

static void test_issue_server(void **state)
{
	static const char *const hosts[] = { "data2.example.org", "10.9.8.7" };
	static const char *const v6first[] = { "fd00::9", "x.example" };
	static const char *const bad[] = { "ok.example", "bad name" };
	struct fixture *fx = *state;
	GENERAL_NAMES *names;
	X509 *x;
	char cn[128];

	assert_int_equal(certs_issue_server(fx->dir, hosts, 2, 0, 0), 0);
	assert_mode(fx->dir, "data2.example.org.key", 0600);
	x = load_cert(fx->dir, "data2.example.org.crt");
	cn_of(x, cn, sizeof(cn));
	assert_string_equal(cn, "data2.example.org");
	names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	assert_true(has_san(names, GEN_DNS, "data2.example.org"));
	assert_true(has_san(names, GEN_IPADD, "10.9.8.7"));
	GENERAL_NAMES_free(names);
	assert_int_equal(X509_check_purpose(x, X509_PURPOSE_SSL_SERVER, 0), 1);
	assert_int_equal(verify_against(fx->dir, x, X509_PURPOSE_SSL_SERVER), X509_V_OK);
	X509_free(x);
	/* The same name again, a bad host, an IPv6 address to name the files, no host. */
	assert_int_equal(certs_issue_server(fx->dir, hosts, 2, 0, 0), -EEXIST);
	assert_int_equal(certs_issue_server(fx->dir, bad, 2, 0, 0), -EINVAL);
	assert_int_equal(certs_issue_server(fx->dir, v6first, 2, 0, 0), -EINVAL);
	assert_int_equal(certs_issue_server(fx->dir, hosts, 0, 0, 0), -EINVAL);
}

static bool same_der(X509 *a, X509 *b)
{
	return X509_cmp(a, b) == 0;
}

static void test_renew(void **state)
{
	struct fixture *fx = *state;
	X509 *before, *after, *old;
	EVP_PKEY *k1, *k2;
	char *file = path_in(fx->dir, "server.crt");
	GENERAL_NAMES *names;
	int days = 0, secs = 0;

	before = load_cert(fx->dir, "server.crt");
	k1 = load_key(fx->dir, "server.key");
	assert_int_equal(certs_renew(file, NULL, false, 30), 0);
	after = load_cert(fx->dir, "server.crt");
	old = load_cert(fx->dir, "server.crt.old");
	assert_true(same_der(old, before));
	assert_false(same_der(after, before));
	/* Same subject, SANs, key; new serial and validity; the same CA. */
	assert_int_equal(X509_NAME_cmp(X509_get_subject_name(before), X509_get_subject_name(after)),
			 0);
	assert_int_not_equal(
	    ASN1_INTEGER_cmp(X509_get0_serialNumber(before), X509_get0_serialNumber(after)), 0);
	names = X509_get_ext_d2i(after, NID_subject_alt_name, NULL, NULL);
	assert_true(has_san(names, GEN_IPADD, "fd00::7"));
	assert_true(has_san(names, GEN_DNS, "data1.example.com"));
	GENERAL_NAMES_free(names);
	assert_int_equal(X509_check_private_key(after, k1), 1);
	assert_true(ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(after)));
	assert_true(days == 30 || days == 29);
	assert_int_equal(verify_against(fx->dir, after, X509_PURPOSE_SSL_SERVER), X509_V_OK);
	X509_free(old);
	X509_free(after);

	/* --new-key: a new key, the old one kept. */
	assert_int_equal(certs_renew(file, NULL, true, 0), 0);
	after = load_cert(fx->dir, "server.crt");
	k2 = load_key(fx->dir, "server.key");
	assert_int_not_equal(EVP_PKEY_eq(k1, k2), 1);
	assert_int_equal(X509_check_private_key(after, k2), 1);
	EVP_PKEY_free(k2);
	k2 = load_key(fx->dir, "server.key.old");
	assert_int_equal(EVP_PKEY_eq(k1, k2), 1);
	assert_mode(fx->dir, "server.key", 0600);
	assert_mode(fx->dir, "server.key.old", 0600);
	assert_int_equal(verify_against(fx->dir, after, X509_PURPOSE_SSL_SERVER), X509_V_OK);
	X509_free(after);
	X509_free(before);
	EVP_PKEY_free(k1);
	EVP_PKEY_free(k2);
	free(file);
}

static void test_renew_refusals(void **state)
{
	struct fixture *fx = *state;
	char *other = tu_mkdtemp(), *odir = path_in(other, "pki");
	char *file = path_in(fx->dir, "client.crt"), *key = path_in(fx->dir, "client.key");
	char *ofile = path_in(odir, "client.crt");

	assert_int_equal(certs_init(odir, NULL, 0), 0);
	/* Another CA's certificate, with this CA: not renewed. */
	assert_int_equal(certs_renew(ofile, fx->dir, false, 0), -EXDEV);
	/* Its key lost: only --new-key renews it. */
	assert_int_equal(unlink(key), 0);
	assert_int_equal(certs_renew(file, NULL, false, 0), -ENOKEY);
	assert_int_equal(certs_renew(file, NULL, true, 0), 0);
	free(ofile);
	free(key);
	free(file);
	free(odir);
	tu_rmtree(other);
	free(other);
}

/* The first certificate of dir/name, as certs show reads it. */
static void path_free_show(const char *dir, const char *name, struct certs_info *ci)
{
	char *p = path_in(dir, name);

	assert_int_equal(certs_show_file(p, ci, 1), 1);
	free(p);
}

static X509_CRL *load_crl(const char *dir)
{
	char *p = path_in(dir, "crl.pem");
	FILE *f = fopen(p, "r");
	X509_CRL *crl;

	assert_non_null(f);
	crl = PEM_read_X509_CRL(f, NULL, NULL, NULL);
	fclose(f);
	free(p);
	assert_non_null(crl);
	return crl;
}

static bool crl_lists(X509_CRL *crl, X509 *x)
{
	X509_REVOKED *rev = NULL;

	return X509_CRL_get0_by_serial(crl, &rev, X509_get0_serialNumber(x)) == 1;
}

static void test_revoke(void **state)
{
	struct fixture *fx = *state;
	char *file = path_in(fx->dir, "client.crt"), subject[512];
	struct certs_info ci[1];
	char fp[80] = "sha256:";
	X509 *cli, *bob, *ca;
	X509_CRL *crl;

	assert_int_equal(certs_issue_client(fx->dir, "bob", 0, 0), 0);
	assert_int_equal(certs_revoke(fx->dir, file, subject, sizeof(subject)), 0);
	assert_string_equal(subject, "/CN=client");
	assert_int_equal(certs_revoke(fx->dir, file, NULL, 0), -EALREADY);
	/* By fingerprint, as certs show prints it: found in the index. */
	path_free_show(fx->dir, "bob.crt", ci);
	for (int i = 0; i < 32; i++) {
		sprintf(fp + 7 + 2 * i, "%02x", ci[0].sha256[i]);
	}
	assert_int_equal(certs_revoke(fx->dir, fp, subject, sizeof(subject)), 0);
	assert_string_equal(subject, "/CN=bob");
	/* A fingerprint the CA never signed. */
	memset(fp + 7, 'a', 64);
	assert_int_equal(certs_revoke(fx->dir, fp, NULL, 0), -ENOENT);

	crl = load_crl(fx->dir);
	cli = load_cert(fx->dir, "client.crt");
	bob = load_cert(fx->dir, "bob.crt");
	ca = load_cert(fx->dir, "ca.crt");
	assert_true(crl_lists(crl, cli));
	assert_true(crl_lists(crl, bob));
	assert_int_equal(X509_CRL_verify(crl, X509_get0_pubkey(ca)), 1);
	assert_int_equal(X509_NAME_cmp(X509_CRL_get_issuer(crl), X509_get_subject_name(ca)), 0);
	X509_CRL_free(crl);
	X509_free(cli);
	X509_free(bob);
	X509_free(ca);
	free(file);
}

static void test_expiry(void **state)
{
	struct fixture *fx = *state;
	char *file;
	struct certs_expiry e;

	assert_int_equal(certs_issue_client(fx->dir, "soon", 10, 0), 0);
	file = path_in(fx->dir, "soon.crt");
	assert_int_equal(certs_file_expiry(file, &e), 0);
	assert_true(e.days_left == 9 || e.days_left == 10);
	assert_false(e.expired);
	assert_string_equal(e.subject, "CN=soon");
	free(file);
	assert_int_equal(certs_issue_client(fx->dir, "gone", 1, 3), 0);
	file = path_in(fx->dir, "gone.crt");
	assert_int_equal(certs_file_expiry(file, &e), 0);
	assert_true(e.expired);
	assert_true(e.days_left < 0);
	free(file);
	file = path_in(fx->dir, "index.txt");
	assert_int_equal(certs_file_expiry(file, &e), -EBADMSG);
	free(file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_files_and_modes),
		cmocka_unit_test(test_ca_properties),
		cmocka_unit_test(test_server_cert),
		cmocka_unit_test(test_default_client),
		cmocka_unit_test(test_issue_client),
		cmocka_unit_test(test_issue_expired),
		cmocka_unit_test(test_issue_bad_names),
		cmocka_unit_test(test_reinit_refused),
		cmocka_unit_test(test_init_defaults_and_bad_hosts),
		cmocka_unit_test(test_ca_names_differ),
		cmocka_unit_test(test_show),
		cmocka_unit_test(test_issue_server),
		cmocka_unit_test(test_renew),
		cmocka_unit_test(test_renew_refusals),
		cmocka_unit_test(test_revoke),
		cmocka_unit_test(test_expiry),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
