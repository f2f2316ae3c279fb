/* SPDX-License-Identifier: MIT */
/* Helpers shared by the unit tests. */
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#define T_EXIT_SKIP 77

/* A fresh private temp directory (removed recursively by tu_rmtree). */
char *tu_mkdtemp(void);
void tu_rmtree(const char *path);
/* Print the reason and exit 77. */
void tu_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
