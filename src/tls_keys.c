/* SPDX-License-Identifier: MIT */
/*
 * Accessors to what a TLS context and connection hold (tls_keys.h): the
 * context's key, certificate and trust store, the peer's certificate.
 */
#include "tls_keys.h"

#include "tls-internal.h"

EVP_PKEY *tls_ctx_key(struct tls_ctx *ctx)
{
	return ctx && ctx->ssl_ctx ? SSL_CTX_get0_privatekey(ctx->ssl_ctx) : NULL;
}

X509 *tls_ctx_cert(struct tls_ctx *ctx)
{
	return ctx && ctx->ssl_ctx ? SSL_CTX_get0_certificate(ctx->ssl_ctx) : NULL;
}

X509_STORE *tls_ctx_store(struct tls_ctx *ctx)
{
	return ctx && ctx->ssl_ctx ? SSL_CTX_get_cert_store(ctx->ssl_ctx) : NULL;
}

X509 *tls_peer_cert(struct tls_conn *c)
{
	return c && c->ssl ? SSL_get0_peer_certificate(c->ssl) : NULL;
}
