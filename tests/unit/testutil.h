/* SPDX-License-Identifier: MIT */
/* Helpers shared by the unit tests. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#define T_EXIT_SKIP 77

/* A fresh private temp directory (removed recursively by tu_rmtree). */
char *tu_mkdtemp(void);
void tu_rmtree(const char *path);
struct tls_ctx;
/*
 * A TLS context from certs_init's files in certdir: NAME.crt and NAME.key,
 * ca.crt; server or client. NULL when tls_ctx_new refuses (tls_last_error).
 */
struct tls_ctx *tu_tls_ctx(const char *certdir, bool server, const char *name);
/* Print the reason and exit 77. */
void tu_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
