/* SPDX-License-Identifier: MIT */
/*
 * certs renew (certs.h): the same subject, SANs and usages, a new serial and
 * validity, the same key or a new one, signed by the same CA. The old files
 * stay as NAME.old; the new ones replace them by rename, each synced first.
 */
#include "certs-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>

/* A certificate file's directory and base name, and its key's name (.crt/.pem → .key). */
struct renew_paths {
	char dir[PATH_MAX];
	char crt[NAME_MAX + 1];
	char key[NAME_MAX + 1];
};

static int split_paths(const char *file, struct renew_paths *p)
{
	char copy[PATH_MAX];
	const char *base;
	size_t n;

	if (strlen(file) >= sizeof(copy)) {
		return -ENAMETOOLONG;
	}
	strcpy(copy, file);
	snprintf(p->dir, sizeof(p->dir), "%s", dirname(copy));
	strcpy(copy, file);
	base = basename(copy);
	n = strlen(base);
	/* Room for ".old" and the temporary name's decoration. */
	if (n == 0 || n + 32 > sizeof(p->crt)) {
		return -ENAMETOOLONG;
	}
	strcpy(p->crt, base);
	if (n > 4 && (!strcmp(base + n - 4, ".crt") || !strcmp(base + n - 4, ".pem"))) {
		n -= 4;
	}
	snprintf(p->key, sizeof(p->key), "%.*s.key", (int)n, base);
	return 0;
}

static int read_at(int dirfd, const char *name, bool key, void **ret)
{
	_cleanup_fclose_ FILE *f = NULL;
	void *obj;
	int r = 0;

	f = certs_fopen_at(dirfd, name, &r);
	if (!f) {
		return r;
	}
	obj = key ? (void *)PEM_read_PrivateKey(f, NULL, NULL, NULL)
		  : (void *)PEM_read_X509(f, NULL, NULL, NULL);
	ERR_clear_error();
	if (!obj) {
		return -EINVAL;
	}
	*ret = obj;
	return 0;
}

/* The extensions of old, but the key identifiers made anew (the key may be new). */
static int copy_extensions(X509 *x, X509 *old, X509 *ca)
{
	static const int fresh[] = { NID_subject_key_identifier, NID_authority_key_identifier };

	for (int i = 0; i < X509_get_ext_count(old); i++) {
		X509_EXTENSION *ext = X509_get_ext(old, i);
		int nid = OBJ_obj2nid(X509_EXTENSION_get_object(ext));

		if (nid == fresh[0] || nid == fresh[1]) {
			continue;
		}
		if (!X509_add_ext(x, ext, -1)) {
			return -ENOMEM;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(fresh); i++) {
		_cleanup_(X509_EXTENSION_freep) X509_EXTENSION *ext = NULL;
		X509V3_CTX v3;

		X509V3_set_ctx(&v3, ca, x, NULL, NULL, 0);
		ext = X509V3_EXT_conf_nid(NULL, &v3, fresh[i], i == 0 ? "hash" : "keyid:always");
		if (!ext || !X509_add_ext(x, ext, -1)) {
			return -EINVAL;
		}
	}
	return 0;
}

static int renewed_cert(X509 *old, EVP_PKEY *key, X509 *ca, EVP_PKEY *ca_key, int days, X509 **ret)
{
	_cleanup_(X509_freep) X509 *x = X509_new();
	int r;

	if (!x || !X509_set_version(x, X509_VERSION_3)) {
		return -ENOMEM;
	}
	r = certs_set_random_serial(x);
	if (r < 0) {
		return r;
	}
	if (!X509_gmtime_adj(X509_getm_notBefore(x), -CERTS_SKEW_SECONDS) ||
	    !X509_time_adj_ex(X509_getm_notAfter(x), days, 0, NULL) ||
	    !X509_set_subject_name(x, X509_get_subject_name(old)) ||
	    !X509_set_issuer_name(x, X509_get_subject_name(ca)) || !X509_set_pubkey(x, key)) {
		return -ENOMEM;
	}
	r = copy_extensions(x, old, ca);
	if (r < 0) {
		return r;
	}
	if (X509_sign(x, ca_key, EVP_sha256()) <= 0) {
		return -EINVAL;
	}
	*ret = TAKE_PTR(x);
	return 0;
}

/* NAME → NAME.old (replacing an older one), NAME itself left in place. */
static int keep_old(int dirfd, const char *name)
{
	char old[NAME_MAX + 1], tmp[NAME_MAX + 1];

	snprintf(old, sizeof(old), "%s.old", name);
	snprintf(tmp, sizeof(tmp), ".%s.old.%ld", name, (long)getpid());
	(void)unlinkat(dirfd, tmp, 0);
	if (linkat(dirfd, name, dirfd, tmp, 0) < 0) {
		return negerrno();
	}
	if (renameat(dirfd, tmp, dirfd, old) < 0) {
		int r = negerrno();

		(void)unlinkat(dirfd, tmp, 0);
		return r;
	}
	return 0;
}

/* The CA, and old checked to be its certificate. */
static int load_issuer(const char *ca_dir, X509 *old, X509 **ret_ca, EVP_PKEY **ret_key)
{
	_cleanup_close_ int cafd = -1;
	int r = certs_open_dir(ca_dir, false, &cafd);

	if (r < 0) {
		return r;
	}
	r = certs_load_ca(cafd, ret_ca, ret_key);
	if (r < 0) {
		return r;
	}
	if (X509_check_issued(*ret_ca, old) != X509_V_OK ||
	    X509_verify(old, X509_get0_pubkey(*ret_ca)) != 1) {
		ERR_clear_error();
		return -EXDEV;
	}
	return 0;
}

static int write_renewed(int dirfd, const struct renew_paths *p, X509 *cert, EVP_PKEY *key,
			 bool new_key)
{
	int r = keep_old(dirfd, p->crt);

	if (r >= 0 && new_key) {
		r = keep_old(dirfd, p->key);
		r = r == -ENOENT ? 0 : r; /* a lost key is what --new-key is for */
	}
	if (r >= 0 && new_key) {
		r = certs_write_atomic(dirfd, p->key, 0600, certs_pem_key, key, false);
	}
	if (r >= 0) {
		r = certs_write_atomic(dirfd, p->crt, 0644, certs_pem_cert, cert, false);
	}
	if (r >= 0 && fsync(dirfd) < 0) {
		r = negerrno();
	}
	return r;
}

int certs_renew(const char *file, const char *ca_dir, bool new_key, int valid_days)
{
	_cleanup_close_ int dirfd = -1;
	_cleanup_(X509_freep) X509 *old = NULL, *ca = NULL, *cert = NULL;
	_cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL, *ca_key = NULL;
	struct renew_paths p;
	int r;

	if (!file || valid_days < 0 || valid_days > 100 * 365) {
		return -EINVAL;
	}
	r = split_paths(file, &p);
	if (r >= 0) {
		r = certs_open_dir(p.dir, false, &dirfd);
	}
	if (r >= 0) {
		r = read_at(dirfd, p.crt, false, (void **)&old);
	}
	if (r >= 0) {
		r = load_issuer(ca_dir ? ca_dir : p.dir, old, &ca, &ca_key);
	}
	if (r < 0) {
		return r;
	}
	r = read_at(dirfd, p.key, true, (void **)&key);
	if (r == -ENOENT && !new_key) {
		return -ENOKEY;
	}
	if (r >= 0 && X509_check_private_key(old, key) != 1) {
		ERR_clear_error();
		r = -EINVAL;
	}
	if (new_key) {
		EVP_PKEY_free(TAKE_PTR(key));
		key = certs_make_key();
		r = key ? 0 : -ENOMEM;
	}
	if (r >= 0) {
		r = renewed_cert(old, key, ca, ca_key, valid_days ? valid_days : CERTS_LEAF_DAYS,
				 &cert);
	}
	if (r >= 0) {
		r = write_renewed(dirfd, &p, cert, key, new_key);
	}
	if (r >= 0 && ca_dir) {
		_cleanup_close_ int cafd = -1;

		r = certs_open_dir(ca_dir, false, &cafd);
		return r < 0 ? r : certs_index_add(cafd, cert);
	}
	return r < 0 ? r : certs_index_add(dirfd, cert);
}
