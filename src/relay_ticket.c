/* SPDX-License-Identifier: MIT */
/*
 * Relay tickets (relay_ticket.h): encoded with proto/wire.h, signed by the
 * original client's key over every byte before the signature, checked by a
 * daemon against its own trust store (CA, CRLs) as it would check that
 * client's certificate in a handshake, plus the ticket's own time window.
 */
#include "relay_ticket.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "macro.h"
#include "proto/wire.h"

#define TICKET_MAGIC	 "RDMACPT1"
#define TICKET_MAGIC_LEN 8

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(X509 *, X509_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(X509_STORE_CTX *, X509_STORE_CTX_free)

static void _printf_(3, 4) set_why(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (!why || whylen == 0) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
}

/* SHA-256, or none for the keys that sign the message itself (Ed25519, Ed448). */
static const EVP_MD *ticket_md(EVP_PKEY *key)
{
	if (EVP_PKEY_is_a(key, "ED25519") || EVP_PKEY_is_a(key, "ED448")) {
		return NULL;
	}
	return EVP_sha256();
}

static bool ticket_fields_ok(const struct relay_ticket *t)
{
	size_t hl = strnlen(t->host, sizeof(t->host)), pl = strnlen(t->path, sizeof(t->path));

	return hl >= 1 && hl <= PROTO_MAX_HOST && pl >= 1 && pl <= PROTO_MAX_PATH && t->port != 0 &&
	       t->expires > t->issued && t->expires - t->issued <= RELAY_TICKET_LIFE;
}

static void put_fields(struct wbuf *w, const struct relay_ticket *t)
{
	wbuf_put_bytes(w, TICKET_MAGIC, TICKET_MAGIC_LEN);
	wbuf_put_str16(w, t->host, PROTO_MAX_HOST);
	wbuf_put_u16(w, t->port);
	wbuf_put_str16(w, t->path, PROTO_MAX_PATH);
	wbuf_put_u32(w, t->open_flags);
	wbuf_put_u64(w, (uint64_t)t->issued);
	wbuf_put_u64(w, (uint64_t)t->expires);
	wbuf_put_bytes(w, t->nonce, sizeof(t->nonce));
}

/* sig (room for RELAY_TICKET_MAX_SIG) = key's signature over data: its length, or -errno. */
static int sign_bytes(EVP_PKEY *key, const uint8_t *data, size_t len, uint8_t *sig)
{
	_cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
	size_t siglen = 0;

	if (!md || EVP_DigestSignInit(md, NULL, ticket_md(key), NULL, key) != 1 ||
	    EVP_DigestSign(md, NULL, &siglen, data, len) != 1) {
		ERR_clear_error();
		return -EINVAL;
	}
	if (siglen == 0 || siglen > RELAY_TICKET_MAX_SIG) {
		return -EMSGSIZE;
	}
	if (EVP_DigestSign(md, sig, &siglen, data, len) != 1) {
		ERR_clear_error();
		return -EINVAL;
	}
	return (int)siglen;
}

int relay_ticket_make(EVP_PKEY *key, X509 *cert, const struct relay_ticket *t, uint8_t **ret,
		      size_t *ret_len)
{
	_cleanup_free_ uint8_t *buf = NULL;
	uint8_t sig[RELAY_TICKET_MAX_SIG];
	unsigned char *der = NULL;
	struct wbuf w;
	int derlen, siglen;

	if (!key || !cert || !ticket_fields_ok(t) || X509_check_private_key(cert, key) != 1) {
		ERR_clear_error();
		return -EINVAL;
	}
	buf = malloc(PROTO_MAX_RELAY_TICKET);
	if (!buf) {
		return -ENOMEM;
	}
	derlen = i2d_X509(cert, &der);
	if (derlen <= 0 || (unsigned)derlen > RELAY_TICKET_MAX_CERT) {
		OPENSSL_free(der);
		return derlen <= 0 ? -EINVAL : -EMSGSIZE;
	}
	wbuf_init(&w, buf, PROTO_MAX_RELAY_TICKET);
	put_fields(&w, t);
	wbuf_put_u16(&w, (uint16_t)derlen);
	wbuf_put_bytes(&w, der, (size_t)derlen);
	OPENSSL_free(der);
	if (w.overflow) {
		return -EMSGSIZE;
	}
	siglen = sign_bytes(key, buf, w.len, sig);
	if (siglen < 0) {
		return siglen;
	}
	wbuf_put_u16(&w, (uint16_t)siglen);
	wbuf_put_bytes(&w, sig, (size_t)siglen);
	if (w.overflow) {
		return -EMSGSIZE;
	}
	*ret_len = w.len;
	*ret = TAKE_PTR(buf);
	return 0;
}

/* A ticket's parts: its fields, its certificate's DER, its signature, and the signed bytes. */
struct ticket_parts {
	struct relay_ticket t;
	const uint8_t *buf, *der, *sig;
	size_t derlen, siglen, signed_len;
};

static int parse_ticket(const uint8_t *buf, size_t len, struct ticket_parts *p)
{
	struct rbuf r;
	uint8_t magic[TICKET_MAGIC_LEN];

	p->buf = buf;
	rbuf_init(&r, buf, len);
	rbuf_get_bytes(&r, magic, sizeof(magic));
	rbuf_get_str16(&r, p->t.host, sizeof(p->t.host), PROTO_MAX_HOST);
	p->t.port = rbuf_get_u16(&r);
	rbuf_get_str16(&r, p->t.path, sizeof(p->t.path), PROTO_MAX_PATH);
	p->t.open_flags = rbuf_get_u32(&r);
	p->t.issued = (int64_t)rbuf_get_u64(&r);
	p->t.expires = (int64_t)rbuf_get_u64(&r);
	rbuf_get_bytes(&r, p->t.nonce, sizeof(p->t.nonce));
	p->derlen = rbuf_get_u16(&r);
	if (r.error || memcmp(magic, TICKET_MAGIC, TICKET_MAGIC_LEN) != 0 || p->derlen == 0 ||
	    p->derlen > RELAY_TICKET_MAX_CERT || p->derlen > rbuf_left(&r)) {
		return -EBADMSG;
	}
	p->der = buf + r.pos;
	r.pos += p->derlen;
	p->signed_len = r.pos;
	p->siglen = rbuf_get_u16(&r);
	if (r.error || p->siglen == 0 || p->siglen > RELAY_TICKET_MAX_SIG ||
	    p->siglen != rbuf_left(&r)) {
		return -EBADMSG;
	}
	p->sig = buf + r.pos;
	return ticket_fields_ok(&p->t) ? 0 : -EBADMSG;
}

/* cert chains to store as a TLS client certificate would, at time now: 0 or -errno + why. */
static int check_chain(X509_STORE *store, X509 *cert, int64_t now, char *why, size_t whylen)
{
	_cleanup_(X509_STORE_CTX_freep) X509_STORE_CTX *vc = X509_STORE_CTX_new();
	int err;

	if (!vc || X509_STORE_CTX_init(vc, store, cert, NULL) != 1 ||
	    X509_STORE_CTX_set_purpose(vc, X509_PURPOSE_SSL_CLIENT) != 1) {
		ERR_clear_error();
		set_why(why, whylen, "cannot set up the certificate check");
		return -ENOMEM;
	}
	X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(vc), (time_t)now);
	if (X509_verify_cert(vc) == 1) {
		return 0;
	}
	ERR_clear_error();
	err = X509_STORE_CTX_get_error(vc);
	set_why(why, whylen, "the ticket's certificate: %s", X509_verify_cert_error_string(err));
	return err == X509_V_ERR_CERT_REVOKED ? -EKEYREVOKED : -EKEYREJECTED;
}

static int check_signature(X509 *cert, const struct ticket_parts *p)
{
	_cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
	EVP_PKEY *key = X509_get0_pubkey(cert);
	int ok;

	if (!md || !key || EVP_DigestVerifyInit(md, NULL, ticket_md(key), NULL, key) != 1) {
		ERR_clear_error();
		return -EKEYREJECTED;
	}
	ok = EVP_DigestVerify(md, p->sig, p->siglen, p->buf, p->signed_len);
	ERR_clear_error();
	return ok == 1 ? 0 : -EKEYREJECTED;
}

/* The ticket's time window holds now: issued no more than RELAY_TICKET_SKEW ahead, not expired. */
static int check_window(const struct relay_ticket *t, int64_t now, char *why, size_t whylen)
{
	if (now < t->issued - RELAY_TICKET_SKEW) {
		set_why(why, whylen,
			"the ticket is not valid yet (issued %lld s ahead of this clock)",
			(long long)(t->issued - now));
		return -EKEYEXPIRED;
	}
	if (now > t->expires) {
		set_why(why, whylen, "the ticket expired %lld s ago",
			(long long)(now - t->expires));
		return -EKEYEXPIRED;
	}
	return 0;
}

int relay_ticket_check(X509_STORE *store, const uint8_t *buf, size_t len, int64_t now,
		       struct relay_ticket *ret, X509 **ret_cert, char *why, size_t whylen)
{
	_cleanup_(X509_freep) X509 *cert = NULL;
	struct ticket_parts p = { 0 };
	const unsigned char *q;
	int r;

	if (!store || !buf || len == 0 || len > PROTO_MAX_RELAY_TICKET ||
	    parse_ticket(buf, len, &p) < 0) {
		set_why(why, whylen, "a malformed ticket");
		return -EBADMSG;
	}
	q = p.der;
	cert = d2i_X509(NULL, &q, (long)p.derlen);
	if (!cert || q != p.der + p.derlen) {
		ERR_clear_error();
		set_why(why, whylen, "a malformed certificate in the ticket");
		return -EBADMSG;
	}
	r = check_signature(cert, &p);
	if (r < 0) {
		set_why(why, whylen, "the ticket's signature is not its certificate's");
		return r;
	}
	r = check_window(&p.t, now, why, whylen);
	if (r < 0) {
		return r;
	}
	r = check_chain(store, cert, now, why, whylen);
	if (r < 0) {
		return r;
	}
	*ret = p.t;
	if (ret_cert) {
		*ret_cert = TAKE_PTR(cert);
	}
	return 0;
}

int relay_ticket_admits_open(const struct relay_ticket *t, const char *path, uint32_t open_flags,
			     char *why, size_t whylen)
{
	uint32_t extra = open_flags & RELAY_TICKET_BOUND_FLAGS & ~t->open_flags;

	if (!path || strcmp(t->path, path) != 0) {
		set_why(why, whylen, "the ticket is for %s, not %s", t->path, path ? path : "");
		return -EPERM;
	}
	if (extra) {
		set_why(why, whylen,
			"the OPEN asks for flags 0x%x the client's ticket does not carry", extra);
		return -EPERM;
	}
	return 0;
}
