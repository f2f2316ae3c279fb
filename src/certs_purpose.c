/* SPDX-License-Identifier: MIT */
/*
 * What a certificate file may be used for (certs.h): whether a TLS server
 * would take its first certificate from a client (a relaying daemon's
 * identity for its next hop).
 */
#include <errno.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "certs-internal.h"
#include "certs.h"

int certs_file_client_purpose(const char *file)
{
	_cleanup_(X509_freep) X509 *x = NULL;
	int r = certs_read_pem(file, &x);

	if (r < 0) {
		return r;
	}
	r = X509_check_purpose(x, X509_PURPOSE_SSL_CLIENT, 0);
	ERR_clear_error();
	return r == 1 ? 1 : 0;
}
