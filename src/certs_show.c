/* SPDX-License-Identifier: MIT */
/*
 * What a certificate says (certs.h): "rdmacp certs show", and when one
 * expires (rdmacp doctor, rdmacpd's start line and warnings).
 */
#include "certs-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>

static void name_text(const X509_NAME *name, char *buf, size_t size)
{
	_cleanup_(BIO_freep) BIO *bio = BIO_new(BIO_s_mem());
	int n;

	buf[0] = '\0';
	/* RFC 2253 order and escaping, UTF-8 kept as is (the caller escapes for the terminal). */
	if (!bio || X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) < 0) {
		return;
	}
	n = BIO_read(bio, buf, (int)size - 1);
	buf[n > 0 ? n : 0] = '\0';
}

static void time_text(const ASN1_TIME *t, char *buf, size_t size)
{
	struct tm tm;

	if (!t || ASN1_TIME_to_tm(t, &tm) != 1 ||
	    !strftime(buf, size, "%Y-%m-%d %H:%M:%S UTC", &tm)) {
		snprintf(buf, size, "?");
	}
}

/* buf += prefix text, cut at the buffer's end. */
static void append(char *buf, size_t size, const char *prefix, const char *text)
{
	size_t n = strlen(buf);

	if (n < size) {
		snprintf(buf + n, size - n, "%s%s", prefix, text);
	}
}

static void sans_text(X509 *x, char *buf, size_t size)
{
	_cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *names =
	    X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	int count = names ? sk_GENERAL_NAME_num(names) : 0;

	buf[0] = '\0';
	for (int i = 0; i < count; i++) {
		const GENERAL_NAME *gn = sk_GENERAL_NAME_value(names, i);
		char text[256] = "?";
		const ASN1_STRING *str;
		const char *kind = "other";

		append(buf, size, buf[0] ? ", " : "", "");
		switch (gn->type) {
		case GEN_DNS:
		case GEN_EMAIL:
			str = gn->type == GEN_DNS ? gn->d.dNSName : gn->d.rfc822Name;
			kind = gn->type == GEN_DNS ? "DNS:" : "email:";
			/* IA5 text of any length: bounded here, and a NUL stops it early. */
			snprintf(text, sizeof(text), "%.*s", MIN(ASN1_STRING_length(str), 255),
				 (const char *)ASN1_STRING_get0_data(str));
			break;
		case GEN_IPADD:
			str = gn->d.iPAddress;
			kind = "IP:";
			if (ASN1_STRING_length(str) == 4 || ASN1_STRING_length(str) == 16) {
				inet_ntop(ASN1_STRING_length(str) == 4 ? AF_INET : AF_INET6,
					  ASN1_STRING_get0_data(str), text, sizeof(text));
			}
			break;
		default:
			text[0] = '\0';
			break;
		}
		append(buf, size, kind, text);
	}
}

static int describe(X509 *x, struct certs_info *ret)
{
	unsigned int n = 0;

	memset(ret, 0, sizeof(*ret));
	name_text(X509_get_subject_name(x), ret->subject, sizeof(ret->subject));
	name_text(X509_get_issuer_name(x), ret->issuer, sizeof(ret->issuer));
	sans_text(x, ret->sans, sizeof(ret->sans));
	time_text(X509_get0_notBefore(x), ret->not_before, sizeof(ret->not_before));
	time_text(X509_get0_notAfter(x), ret->not_after, sizeof(ret->not_after));
	ret->not_yet_valid = X509_cmp_current_time(X509_get0_notBefore(x)) > 0;
	ret->expired = X509_cmp_current_time(X509_get0_notAfter(x)) < 0;
	ret->is_ca = X509_check_ca(x) > 0;
	ret->self_signed = X509_check_issued(x, x) == X509_V_OK;
	if (X509_digest(x, EVP_sha256(), ret->sha256, &n) != 1 || n != sizeof(ret->sha256)) {
		return -EIO;
	}
	return 0;
}

int certs_show_file(const char *file, struct certs_info *ret, size_t max)
{
	_cleanup_fclose_ FILE *f = NULL;
	size_t n = 0;

	if (!file || !ret || max == 0) {
		return -EINVAL;
	}
	f = fopen(file, "re");
	if (!f) {
		return negerrno();
	}
	while (n < max) {
		_cleanup_(X509_freep) X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
		int r;

		if (!x) {
			break;
		}
		r = describe(x, &ret[n]);
		if (r < 0) {
			ERR_clear_error();
			return r;
		}
		n++;
	}
	/* The end of the file, or text that is no certificate: only the first matters. */
	ERR_clear_error();
	return n > 0 ? (int)n : -EBADMSG;
}

int certs_read_pem(const char *file, X509 **ret)
{
	_cleanup_fclose_ FILE *f = NULL;
	X509 *x;

	f = fopen(file, "re");
	if (!f) {
		return negerrno();
	}
	x = PEM_read_X509(f, NULL, NULL, NULL);
	ERR_clear_error();
	if (!x) {
		return -EBADMSG;
	}
	*ret = x;
	return 0;
}

int certs_file_expiry(const char *file, struct certs_expiry *ret)
{
	_cleanup_(X509_freep) X509 *x = NULL;
	struct certs_expiry e = { 0 };
	struct tm tm;
	int days, secs, r;

	if (!file || !ret) {
		return -EINVAL;
	}
	r = certs_read_pem(file, &x);
	if (r < 0) {
		return r;
	}
	name_text(X509_get_subject_name(x), e.subject, sizeof(e.subject));
	time_text(X509_get0_notAfter(x), e.not_after, sizeof(e.not_after));
	if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) != 1 ||
	    ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(x)) != 1) {
		ERR_clear_error();
		return -EBADMSG;
	}
	e.not_after_t = timegm(&tm);
	/* Whole days left, rounded down; negative once expired. */
	e.days_left = days - (secs < 0 && days <= 0 ? 1 : 0);
	e.expired = days < 0 || secs < 0;
	*ret = e;
	return 0;
}
