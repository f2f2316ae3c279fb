/* SPDX-License-Identifier: MIT */
/*
 * rdmacpd.conf's relay keys: a module's relay, relay to and relay from,
 * [global]'s relay to, relay certificate, relay key, relay client and
 * relay slow time;
 * a module's relay to replacing [global]'s, and every error with its line.
 * Real files in a private temp directory (daemon_config_harness.c).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "certs.h"
#include "config_relaycheck.h"
#include "testutil.h"
#include "daemon_config_harness.h"

/* tmpdir/name, in a static buffer. */
static const char *tmp_path(const char *name)
{
	static char p[4200];

	snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
	return p;
}

/* Defaults: nothing relays, nowhere, from nobody. */
static void relay_defaults(void **state)
{
	struct daemon_config *c;
	const struct module *m;

	(void)state;
	write_conf("[data]\npath = @/data\n");
	c = load_ok();
	m = daemon_config_module(c, "data");
	assert_false(m->relay);
	assert_int_equal(m->nrelay_to, 0);
	assert_int_equal(m->nrelay_from, 0);
	assert_int_equal(c->nrelay_to, 0);
	assert_string_equal(c->relay_cert, "");
	assert_string_equal(c->relay_key, "");
	assert_string_equal(c->relay_client, "");
	daemon_config_free(c);
}

/* Every key read; a module's relay to replaces [global]'s, repeated lines add up. */
static void relay_keys(void **state)
{
	struct daemon_config *c;
	const struct module *m, *b;
	char body[2048];

	(void)state;
	snprintf(body, sizeof(body),
		 "[global]\ncert = @/cert.pem\nkey = @/key.pem\nca = @/ca.pem\n"
		 "relay to = *.cluster\nrelay certificate = @/cert.pem\nrelay key = @/key.pem\n"
		 "relay client = /bin/true\n"
		 "[data]\npath = @/data\nrelay = yes\nrelay to = node[0-9].example, 10.0.0.*\n"
		 "relay to = NODE9\nrelay from = relay1 sha256:%064x\nrelay from = *\n"
		 "[b]\npath = @/other\nrelay = yes\n",
		 0);
	write_conf_raw(body);
	c = load_ok();
	m = daemon_config_module(c, "data");
	b = daemon_config_module(c, "b");
	assert_true(m->relay && b->relay);
	assert_int_equal(m->nrelay_to, 3);
	assert_string_equal(m->relay_to[0], "node[0-9].example");
	assert_string_equal(m->relay_to[1], "10.0.0.*");
	assert_string_equal(m->relay_to[2], "NODE9");
	assert_int_equal(m->nrelay_from, 3);
	assert_int_equal(m->relay_from[0].kind, ALLOW_NAME);
	assert_int_equal(m->relay_from[1].kind, ALLOW_FINGERPRINT);
	assert_int_equal(m->relay_from[2].kind, ALLOW_ANY);
	assert_int_equal(b->nrelay_to, 0); /* [global]'s apply (policy_relay_chain) */
	assert_int_equal(c->nrelay_to, 1);
	assert_string_equal(c->relay_to[0], "*.cluster");
	assert_non_null(strstr(c->relay_cert, "/cert.pem"));
	assert_non_null(strstr(c->relay_key, "/key.pem"));
	assert_string_equal(c->relay_client, "/bin/true");
	daemon_config_free(c);
}

/* Bad values, each refused at its line. */
static void relay_errors(void **state)
{
	char body[8192];
	size_t n;

	(void)state;
	write_conf("[data]\npath = @/data\nrelay = maybe\n");
	expect_error(BASE_LINES + 3, "relay");
	write_conf("[data]\npath = @/data\nrelay = yes\nrelay = no\n");
	expect_error(BASE_LINES + 4, "duplicate key 'relay'");
	write_conf("[data]\npath = @/data\nrelay to = node/1\n");
	expect_error(BASE_LINES + 3, "bad host pattern");
	write_conf("[data]\npath = @/data\nrelay to = a;b\n");
	expect_error(BASE_LINES + 3, "bad host pattern");
	n = (size_t)snprintf(body, sizeof(body), "[data]\npath = @/data\nrelay to =");
	for (int i = 0; i <= DAEMON_MAX_RELAY_TO; i++) {
		n += (size_t)snprintf(body + n, sizeof(body) - n, " h%d", i);
	}
	snprintf(body + n, sizeof(body) - n, "\n");
	write_conf(body);
	expect_error(BASE_LINES + 3, "too many 'relay to' patterns");
	memset(body, 0, sizeof(body));
	n = (size_t)snprintf(body, sizeof(body), "[data]\npath = @/data\nrelay to = ");
	memset(body + n, 'h', DAEMON_MAX_HOST_PATTERN + 1);
	strcat(body, "\n");
	write_conf(body);
	expect_error(BASE_LINES + 3, "bad host pattern");
	write_conf("[data]\npath = @/data\nrelay from = bad/name\n");
	expect_error(BASE_LINES + 3, "bad entry");
	write_conf("[data]\npath = @/data\nrelay from = sha256:12\n");
	expect_error(BASE_LINES + 3, "bad fingerprint");
	write_conf_raw("[global]\ncert = @/cert.pem\nkey = @/key.pem\nca = @/ca.pem\n"
		       "relay certificate = @/cert.pem\n[data]\npath = @/data\n");
	expect_error(1, "'relay certificate' is set without 'relay key'");
	write_conf_raw("[global]\ncert = @/cert.pem\nkey = @/key.pem\nca = @/ca.pem\n"
		       "relay key = @/key.pem\n[data]\npath = @/data\n");
	expect_error(1, "'relay key' is set without 'relay certificate'");
	write_conf_raw("[global]\ncert = @/cert.pem\nkey = @/key.pem\nca = @/ca.pem\n"
		       "relay certificate = @/missing.pem\n");
	expect_error(5, "cannot read 'relay certificate'");
	write_conf_raw("[global]\ncert = @/cert.pem\nkey = @/key.pem\nca = @/ca.pem\n"
		       "relay client = @/cert.pem\n");
	expect_error(5, "is not executable");
	write_conf_raw("[global]\ncert = @/cert.pem\nkey = @/key.pem\nca = @/ca.pem\n"
		       "relay to = *\nrelay to = x y/z\n");
	expect_error(6, "bad host pattern");
}

/* 'relay slow time': 10 s unless set, 0 (never) to 3600, nothing else. */
static void relay_slow_time(void **state)
{
	struct daemon_config *c;

	(void)state;
	write_conf("[data]\npath = @/data\n");
	c = load_ok();
	assert_int_equal(c->relay_slow_s, 10);
	daemon_config_free(c);
	write_conf_raw("[global]\ncert = @/cert.pem\nkey = @/key.pem\nca = @/ca.pem\n"
		       "relay slow time = 0\n[data]\npath = @/data\n");
	c = load_ok();
	assert_int_equal(c->relay_slow_s, 0);
	daemon_config_free(c);
	write_conf_raw("[global]\ncert = @/cert.pem\nkey = @/key.pem\nca = @/ca.pem\n"
		       "relay slow time = 3600\n[data]\npath = @/data\n");
	c = load_ok();
	assert_int_equal(c->relay_slow_s, 3600);
	daemon_config_free(c);
	write_conf_raw("[global]\ncert = @/cert.pem\nkey = @/key.pem\nca = @/ca.pem\n"
		       "relay slow time = 3601\n");
	expect_error(5, "bad 'relay slow time' value '3601' (must be 0..3600)");
	write_conf_raw("[global]\ncert = @/cert.pem\nkey = @/key.pem\nca = @/ca.pem\n"
		       "relay slow time = 5s\n");
	expect_error(5, "bad 'relay slow time' value");
}

struct warnings {
	char all[4096];
	size_t n;
};

static void collect(void *ud, const char *text)
{
	struct warnings *w = ud;
	size_t len = strlen(w->all);

	snprintf(w->all + len, sizeof(w->all) - len, "%s\n", text);
	w->n++;
}

/* --check on relays: each warning when due, none for a config that can work. */
static void relay_check_warnings(void **state)
{
	struct daemon_config *c;
	struct warnings w = { 0 };
	char body[2048];

	(void)state;
	/* The harness's cert.pem is no certificate: make a CA with a client and a server. */
	assert_int_equal(certs_init(tmp_path("pki"), NULL, 0), 0);
	snprintf(body, sizeof(body),
		 "[data]\npath = @/data\nallow = *\nrelay = yes\n"
		 "[b]\npath = @/other\nrelay to = x\nrelay from = r1\n");
	write_conf(body);
	c = load_ok();
	assert_int_equal(relaycheck_config(c, collect, &w), 4);
	assert_non_null(strstr(w.all, "module [data]: 'relay = yes' but no 'relay to'"));
	assert_non_null(strstr(w.all, "module [b]: 'relay to' without 'relay = yes'"));
	assert_non_null(strstr(w.all, "module [b]: 'relay from' without 'allow'"));
	assert_non_null(strstr(w.all, "cannot read a PEM certificate"));
	daemon_config_free(c);

	/* A server certificate is no client's; a client certificate is. */
	write_conf_raw("[global]\ncert = @/pki/server.crt\nkey = @/pki/server.key\n"
		       "ca = @/pki/ca.crt\nrelay to = *\n"
		       "[data]\npath = @/data\nallow = *\nrelay = yes\nrelay from = r1\n");
	c = load_ok();
	memset(&w, 0, sizeof(w));
	assert_int_equal(relaycheck_config(c, collect, &w), 1);
	assert_non_null(strstr(w.all, "not a TLS client certificate"));
	daemon_config_free(c);
	write_conf_raw("[global]\ncert = @/pki/server.crt\nkey = @/pki/server.key\n"
		       "ca = @/pki/ca.crt\nrelay to = *\nrelay certificate = @/pki/client.crt\n"
		       "relay key = @/pki/client.key\n"
		       "[data]\npath = @/data\nallow = *\nrelay = yes\nrelay from = r1\n");
	c = load_ok();
	memset(&w, 0, sizeof(w));
	assert_int_equal(relaycheck_config(c, collect, &w), 0);
	daemon_config_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(relay_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(relay_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(relay_slow_time, setup, teardown),
		cmocka_unit_test_setup_teardown(relay_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(relay_check_warnings, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
