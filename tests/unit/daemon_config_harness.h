/* SPDX-License-Identifier: MIT */
/*
 * What the rdmacpd.conf tests (test_daemon_config*.c) share: a private temp
 * directory with the files a config names (cert.pem, key.pem, ca.pem, data/,
 * backup/, other/, data/inner, data-link), the config written there, and a
 * load expected to pass or to fail at a line.
 */
#pragma once

struct daemon_config;

extern char *tmpdir;
extern char conf_path[4200];
extern char err[2048];

/* The [global] lines every test starts with: 4 lines, so a body begins at line 5. */
#define BASE_LINES 4

void write_file(const char *path, const char *text);
int setup(void **state);
int teardown(void **state);
/* Write the config: "@" in body stands for the temp directory. */
void write_conf_raw(const char *body);
/* The same after the [global] lines (BASE_LINES) every test starts with. */
void write_conf(const char *body);
struct daemon_config *load_ok(void);
/* Loads the current file, expects failure at line with a message containing word. */
void expect_error(unsigned line, const char *word);
