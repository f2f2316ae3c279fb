/* SPDX-License-Identifier: MIT */
/*
 * The peer of a TLS connection after its handshake (tls.h): its subject CN,
 * its fingerprint, its DNS/IP SANs, and keying material exported from the
 * session (RFC 8446 7.5); a certificate's CN and SANs, read as a peer's are.
 */
#include "tls-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

const char *tls_peer_cn(struct tls_conn *c)
{
	return c ? c->peer_cn : "";
}

void tls_peer_fingerprint(struct tls_conn *c, uint8_t ret_fp[TLS_FINGERPRINT_LEN])
{
	memcpy(ret_fp, c->peer_fp, TLS_FINGERPRINT_LEN);
}

int tls_export_secret(struct tls_conn *c, const char *label, uint8_t *out, size_t len)
{
	if (!c || !c->ssl || c->broken || !label || !out || len == 0) {
		return -EINVAL;
	}
	/* RFC 8446 7.5: both ends of this session get the same bytes, nobody else can. */
	if (SSL_export_keying_material(c->ssl, out, len, label, strlen(label), NULL, 0, 0) != 1) {
		return -EIO;
	}
	return 0;
}

int tls_export_secret_ctx(struct tls_conn *c, const char *label, const uint8_t *context,
			  size_t contextlen, uint8_t *out, size_t len)
{
	if (!c || !c->ssl || c->broken || !label || !out || len == 0 ||
	    (!context && contextlen > 0)) {
		return -EINVAL;
	}
	/* use_context = 1: the context is part of the derivation, even when empty. */
	if (SSL_export_keying_material(c->ssl, out, len, label, strlen(label), context, contextlen,
				       1) != 1) {
		return -EIO;
	}
	return 0;
}

static bool san_text(const GENERAL_NAME *gn, char *out, size_t size)
{
	if (gn->type == GEN_DNS) {
		const ASN1_IA5STRING *s = gn->d.dNSName;
		int n = ASN1_STRING_length(s);
		const unsigned char *d = ASN1_STRING_get0_data(s);

		if (n <= 0 || (size_t)n >= size || memchr(d, '\0', (size_t)n)) {
			return false;
		}
		memcpy(out, d, (size_t)n);
		out[n] = '\0';
		return true;
	}
	if (gn->type == GEN_IPADD) {
		const ASN1_OCTET_STRING *s = gn->d.iPAddress;
		int n = ASN1_STRING_length(s);
		const unsigned char *d = ASN1_STRING_get0_data(s);

		if (n == 4) {
			return inet_ntop(AF_INET, d, out, (socklen_t)size) != NULL;
		}
		if (n == 16) {
			return inet_ntop(AF_INET6, d, out, (socklen_t)size) != NULL;
		}
	}
	return false;
}

bool tls_cert_match_san(X509 *cert, bool (*fn)(const char *san, void *ud), void *ud)
{
	GENERAL_NAMES *names;
	bool matched = false;

	if (!cert) {
		return false;
	}
	names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
	if (!names) {
		ERR_clear_error();
		return false;
	}
	for (int i = 0; i < sk_GENERAL_NAME_num(names) && !matched; i++) {
		char text[256];

		if (san_text(sk_GENERAL_NAME_value(names, i), text, sizeof(text))) {
			matched = fn(text, ud);
		}
	}
	GENERAL_NAMES_free(names);
	return matched;
}

bool tls_peer_match_san(struct tls_conn *c, bool (*fn)(const char *san, void *ud), void *ud)
{
	return c && tls_cert_match_san(SSL_get0_peer_certificate(c->ssl), fn, ud);
}

void tls_cert_cn(X509 *cert, char *out, size_t size)
{
	X509_NAME *name = cert ? X509_get_subject_name(cert) : NULL;
	int idx = name ? X509_NAME_get_index_by_NID(name, NID_commonName, -1) : -1;
	unsigned char *utf8 = NULL;
	int n;

	out[0] = '\0';
	if (idx < 0) {
		return;
	}
	n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, idx)));
	if (n > 0 && (size_t)n < size) {
		bool clean = true;

		/* No NULs or control characters: callers log and compare this. */
		for (int i = 0; i < n; i++) {
			if (utf8[i] < 0x20 || utf8[i] == 0x7f) {
				clean = false;
			}
		}
		if (clean) {
			memcpy(out, utf8, (size_t)n);
			out[n] = '\0';
		}
	}
	ERR_clear_error();
	OPENSSL_free(utf8);
}
