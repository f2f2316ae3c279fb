/* SPDX-License-Identifier: MIT */
#include "testutil.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tls.h"

char *tu_mkdtemp(void)
{
	const char *base = getenv("TMPDIR");
	char *p;

	if (!base) {
		base = "/tmp";
	}
	if (asprintf(&p, "%s/rdmacp-test.XXXXXX", base) < 0 || !mkdtemp(p)) {
		fprintf(stderr, "mkdtemp failed\n");
		exit(1);
	}
	return p;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void tu_rmtree(const char *path)
{
	if (path) {
		nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	}
}

void tu_skip(const char *fmt, ...)
{
	va_list ap;

	printf("SKIP: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(T_EXIT_SKIP);
}

struct tls_ctx *tu_tls_ctx(const char *certdir, bool server, const char *name)
{
	char crt[512], key[512], ca[512];
	struct tls_config cfg = {
		.server = server, .cert_file = crt, .key_file = key, .ca_file = ca
	};
	struct tls_ctx *ctx = NULL;

	snprintf(crt, sizeof(crt), "%s/%s.crt", certdir, name);
	snprintf(key, sizeof(key), "%s/%s.key", certdir, name);
	snprintf(ca, sizeof(ca), "%s/ca.crt", certdir);
	return tls_ctx_new(&cfg, &ctx) < 0 ? NULL : ctx;
}
