/* SPDX-License-Identifier: MIT */
/*
 * The files of a CA directory (certs.h): held open by its fd, PEM keys and
 * certificates written to a temporary name, fsynced and renamed into place
 * (so a reader never sees half a key), the CA loaded, and the index of what
 * the CA signed (index.txt: "SERIAL sha256:FINGERPRINT SUBJECT" a line), so
 * that a certificate can be revoked by its fingerprint alone.
 */
#include "certs-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "macro.h"
#include "tls.h"

static void openssl_free_str(char **p)
{
	OPENSSL_free(*p);
}

int certs_pem_key(FILE *f, const void *obj)
{
	return PEM_write_PrivateKey(f, (EVP_PKEY *)obj, NULL, NULL, 0, NULL, NULL);
}

int certs_pem_cert(FILE *f, const void *obj)
{
	return PEM_write_X509(f, (X509 *)obj);
}

/*
 * Write NAME beneath dirfd via a temporary file and rename. With noreplace the
 * final rename refuses an existing NAME (-EEXIST).
 */
int certs_write_atomic(int dirfd, const char *name, mode_t mode, pem_writer writer, const void *obj,
		       bool noreplace)
{
	char tmp[256];
	_cleanup_close_ int fd = -1;
	FILE *f;
	int r;

	r = snprintf(tmp, sizeof(tmp), ".%s.tmp.%ld", name, (long)getpid());
	if (r < 0 || (size_t)r >= sizeof(tmp)) {
		return -ENAMETOOLONG;
	}
	(void)unlinkat(dirfd, tmp, 0);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0) {
		return negerrno();
	}
	/* The umask must not widen or narrow what we promise. */
	if (fchmod(fd, mode) < 0) {
		r = negerrno();
		goto fail;
	}
	f = fdopen(fd, "w");
	if (!f) {
		r = negerrno();
		goto fail;
	}
	fd = -1; /* owned by f now */
	if (!writer(f, obj)) {
		fclose(f);
		r = -EIO;
		goto fail;
	}
	if (fflush(f) != 0 || fsync(fileno(f)) < 0) {
		r = negerrno();
		fclose(f);
		goto fail;
	}
	if (fclose(f) != 0) {
		r = negerrno();
		goto fail;
	}
	if (noreplace) {
		r = renameat2(dirfd, tmp, dirfd, name, RENAME_NOREPLACE);
		if (r < 0 && (errno == EINVAL || errno == ENOSYS)) {
			/* File system without RENAME_NOREPLACE: link fails on an existing name. */
			r = linkat(dirfd, tmp, dirfd, name, 0);
			if (r == 0) {
				(void)unlinkat(dirfd, tmp, 0);
			}
		}
	} else {
		r = renameat(dirfd, tmp, dirfd, name);
	}
	if (r < 0) {
		r = negerrno();
		goto fail;
	}
	return 0;
fail:
	(void)unlinkat(dirfd, tmp, 0);
	return r;
}

int certs_write_pair(int dirfd, const char *base, X509 *cert, EVP_PKEY *key, bool noreplace_key)
{
	char crt[CERTS_NAME_MAX + 8], keyname[CERTS_NAME_MAX + 8];
	int r;

	snprintf(crt, sizeof(crt), "%s.crt", base);
	snprintf(keyname, sizeof(keyname), "%s.key", base);
	r = certs_write_atomic(dirfd, crt, 0644, certs_pem_cert, cert, false);
	if (r < 0) {
		return r;
	}
	return certs_write_atomic(dirfd, keyname, 0600, certs_pem_key, key, noreplace_key);
}

int certs_open_dir(const char *dir, bool create, int *ret_fd)
{
	int fd;

	if (create && mkdir(dir, 0700) < 0 && errno != EEXIST) {
		return negerrno();
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		return negerrno();
	}
	*ret_fd = fd;
	return 0;
}

int certs_exists_at(int dirfd, const char *name)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		return -EEXIST;
	}
	return errno == ENOENT ? 0 : negerrno();
}

FILE *certs_fopen_at(int dirfd, const char *name, int *ret_err)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	FILE *f;

	if (fd < 0) {
		*ret_err = negerrno();
		return NULL;
	}
	f = fdopen(fd, "r");
	if (!f) {
		*ret_err = negerrno();
		close(fd);
	}
	return f;
}

int certs_load_ca(int dirfd, X509 **ret_ca, EVP_PKEY **ret_key)
{
	_cleanup_fclose_ FILE *fc = NULL;
	_cleanup_fclose_ FILE *fk = NULL;
	_cleanup_(X509_freep) X509 *ca = NULL;
	_cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
	int r = 0;

	fc = certs_fopen_at(dirfd, "ca.crt", &r);
	if (!fc) {
		return r;
	}
	fk = certs_fopen_at(dirfd, "ca.key", &r);
	if (!fk) {
		return r;
	}
	ca = PEM_read_X509(fc, NULL, NULL, NULL);
	key = PEM_read_PrivateKey(fk, NULL, NULL, NULL);
	if (!ca || !key || X509_check_private_key(ca, key) != 1) {
		return -EINVAL;
	}
	*ret_ca = TAKE_PTR(ca);
	*ret_key = TAKE_PTR(key);
	return 0;
}

int certs_index_add(int dirfd, X509 *x)
{
	_cleanup_(BN_freep) BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
	_cleanup_(openssl_free_str) char *hex = bn ? BN_bn2hex(bn) : NULL;
	_cleanup_close_ int fd = -1;
	struct certs_info ci;
	char fp[2 * TLS_FINGERPRINT_LEN + 1], line[1024];
	unsigned int len = 0;
	int n;

	if (!hex || X509_digest(x, EVP_sha256(), ci.sha256, &len) != 1 ||
	    len != sizeof(ci.sha256)) {
		return -ENOMEM;
	}
	X509_NAME_oneline(X509_get_subject_name(x), ci.subject, sizeof(ci.subject));
	tls_format_fingerprint(ci.sha256, fp);
	n = snprintf(line, sizeof(line), "%s sha256:%s %s\n", hex, fp, ci.subject);
	if (n < 0 || (size_t)n >= sizeof(line)) {
		return -ENAMETOOLONG;
	}
	fd = openat(dirfd, CERTS_INDEX, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
		    0644);
	if (fd < 0) {
		return negerrno();
	}
	/* One write with O_APPEND: lines of two runs never mix. */
	if (write(fd, line, (size_t)n) != n || fsync(fd) < 0) {
		return -EIO;
	}
	return 0;
}
