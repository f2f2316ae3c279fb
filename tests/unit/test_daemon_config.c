/* SPDX-License-Identifier: MIT */
/*
 * rdmacpd.conf parsing, [global] and the file itself: a full valid file,
 * defaults, and every error with its "FILE:LINE:" position. Real files in a
 * private temp directory (daemon_config_harness.c). Modules:
 * test_daemon_config_module.c.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <syslog.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "modcheck.h"
#include "testutil.h"
#include "daemon_config_harness.h"
static void test_full_valid(void **state)
{
	static const char fp_hex[] =
	    "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
	char body[4096], want[4200];
	struct daemon_config *c;
	const struct module *m;
	struct sockaddr_in6 *sin6;
	struct sockaddr_in *sin;

	snprintf(body, sizeof(body),
		 "listen = 127.0.0.1:7000\n"
		 "listen = [::1]:7000\n"
		 "max connections = 10\n"
		 "max connections per host = 2\n"
		 "handshake timeout = 5\n"
		 "idle timeout = 600\n"
		 "drain timeout = 1500ms\n"
		 "partial max age = 0\n"
		 "memory budget = 1G\n"
		 "pool size = 16MiB\n"
		 "log level = debug\n"
		 "lanes from other addresses = yes\n"
		 "; a comment\n"
		 "# another\n"
		 "\n"
		 "[data]\n"
		 "  path = @/data\n"
		 "read only = yes\n"
		 "allow = * sha256:%s   client.example.com ; trailing comment\n"
		 "allow = backup-host\n"
		 "uid = 0\n"
		 "gid = root\n"
		 "comment = anything at all, ignored\n"
		 "\n"
		 "[backup-1.x_y]\n"
		 "path = @/backup/\n"
		 "write only = true\n"
		 "uid = root\n"
		 "[%s]\n"
		 "path = @/other\n",
		 fp_hex,
		 /* 63 characters: longer than inih's own section-name buffer. */
		 "m123456789m123456789m123456789m123456789m123456789m123456789mmm");
	write_conf(body);
	c = load_ok();

	assert_string_equal(c->path, conf_path);
	assert_int_equal(c->nlisten, 2);
	sin = (struct sockaddr_in *)&c->listen[0].ss;
	assert_int_equal(sin->sin_family, AF_INET);
	assert_int_equal(ntohs(sin->sin_port), 7000);
	assert_int_equal(ntohl(sin->sin_addr.s_addr), INADDR_LOOPBACK);
	assert_string_equal(c->listen[0].text, "127.0.0.1:7000");
	sin6 = (struct sockaddr_in6 *)&c->listen[1].ss;
	assert_int_equal(sin6->sin6_family, AF_INET6);
	assert_int_equal(ntohs(sin6->sin6_port), 7000);
	assert_true(IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr));
	assert_string_equal(c->listen[1].text, "[::1]:7000");

	assert_int_equal(c->max_connections, 10);
	assert_int_equal(c->max_per_host, 2);
	assert_int_equal(c->handshake_timeout_s, 5);
	assert_int_equal(c->idle_timeout_s, 600);
	assert_int_equal(c->drain_timeout_ms, 1500);
	assert_true(c->lanes_any_source);
	assert_int_equal(c->partial_max_age_s, 0);
	assert_int_equal(c->memory_budget, UINT64_C(1) << 30);
	assert_int_equal(c->pool_size, UINT64_C(16) << 20);
	assert_int_equal(c->log_level, LOG_DEBUG);
	snprintf(want, sizeof(want), "%s/cert.pem", tmpdir);
	assert_string_equal(c->cert, want);

	assert_int_equal(c->nmodules, 3);
	m = daemon_config_module(c, "data");
	assert_non_null(m);
	snprintf(want, sizeof(want), "%s/data", tmpdir);
	assert_string_equal(m->path, want);
	assert_true(m->read_only);
	assert_false(m->write_only);
	assert_int_equal(m->nallow, 4);
	assert_int_equal(m->allow[0].kind, ALLOW_ANY);
	assert_int_equal(m->allow[1].kind, ALLOW_FINGERPRINT);
	assert_int_equal(m->allow[1].fp[0], 0x00);
	assert_int_equal(m->allow[1].fp[1], 0x11);
	assert_int_equal(m->allow[1].fp[31], 0xff);
	assert_int_equal(m->allow[2].kind, ALLOW_NAME);
	assert_string_equal(m->allow[2].name, "client.example.com");
	assert_int_equal(m->allow[3].kind, ALLOW_NAME);
	assert_string_equal(m->allow[3].name, "backup-host");
	assert_true(m->have_uid);
	assert_int_equal(m->uid, 0);
	assert_true(m->have_gid);
	assert_int_equal(m->gid, 0);

	m = daemon_config_module(c, "backup-1.x_y");
	assert_non_null(m);
	assert_false(m->read_only);
	assert_true(m->write_only);
	assert_int_equal(m->nallow, 0);
	assert_true(m->have_uid);
	assert_false(m->have_gid);

	assert_non_null(daemon_config_module(
	    c, "m123456789m123456789m123456789m123456789m123456789m123456789mmm"));
	assert_null(daemon_config_module(c, "nope"));
	daemon_config_free(c);
}

static void test_defaults(void **state)
{
	struct daemon_config *c;

	write_conf("");
	c = load_ok();
	assert_int_equal(c->nlisten, 0);
	assert_int_equal(c->max_connections, 64);
	assert_int_equal(c->max_per_host, 8);
	assert_int_equal(c->max_unauth, 32);
	assert_int_equal(c->max_unauth_per_host, 8);
	assert_int_equal(c->handshake_timeout_s, 5);
	assert_int_equal(c->idle_timeout_s, 300);
	assert_int_equal(c->drain_timeout_ms, 20000);
	assert_int_equal(c->partial_max_age_s, 7 * 86400);
	assert_int_equal(c->memory_budget, UINT64_C(4) << 30);
	assert_int_equal(c->pool_size, UINT64_C(64) << 20);
	assert_int_equal(c->log_level, LOG_INFO);
	assert_false(c->lanes_any_source);
	assert_int_equal(c->nmodules, 0);
	daemon_config_free(c);

	/* A small global cap pulls the default per-host cap down with it. */
	write_conf("max connections = 3\n");
	c = load_ok();
	assert_int_equal(c->max_per_host, 3);
	daemon_config_free(c);
}

/* SECURITY.md G47: the pre-authentication caps and their checks. */
static void test_unauthenticated_limits(void **state)
{
	struct daemon_config *c;

	write_conf("max connections = 16\nmax connections per host = 6\n");
	c = load_ok();
	assert_int_equal(c->max_unauth, 8);
	assert_int_equal(c->max_unauth_per_host, 6);
	daemon_config_free(c);

	write_conf("max connections = 64\nmax connections per host = 64\n");
	c = load_ok();
	assert_int_equal(c->max_unauth, 32);
	assert_int_equal(c->max_unauth_per_host, 32);
	daemon_config_free(c);

	write_conf("max connections = 3\n");
	c = load_ok();
	assert_int_equal(c->max_unauth, 1);
	assert_int_equal(c->max_unauth_per_host, 1);
	daemon_config_free(c);

	write_conf("max connections = 10\nmax unauthenticated = 9\n"
		   "max unauthenticated per host = 9\n");
	c = load_ok();
	assert_int_equal(c->max_unauth, 9);
	assert_int_equal(c->max_unauth_per_host, 9);
	daemon_config_free(c);

	/* No reserve left for authenticated sessions. */
	write_conf("max connections = 10\nmax unauthenticated = 10\n");
	expect_error(BASE_LINES + 2, "reserved for authenticated sessions");
	write_conf("max unauthenticated = 4\nmax unauthenticated per host = 5\n");
	expect_error(BASE_LINES + 2, "exceeds 'max unauthenticated'");
	write_conf("max unauthenticated = 0\n");
	expect_error(BASE_LINES + 1, "max unauthenticated");
}

static void test_default_port(void **state)
{
	struct daemon_config *c;
	struct listen_addr la;

	write_conf("listen = 127.0.0.1\n");
	c = load_ok();
	assert_int_equal(c->nlisten, 1);
	assert_int_equal(ntohs(((struct sockaddr_in *)&c->listen[0].ss)->sin_port),
			 DAEMON_DEFAULT_PORT);
	daemon_config_free(c);

	assert_int_equal(parse_listen_addr("[::1]", &la), 0);
	assert_int_equal(la.ss.ss_family, AF_INET6);
	assert_int_equal(ntohs(((struct sockaddr_in6 *)&la.ss)->sin6_port), DAEMON_DEFAULT_PORT);
	assert_int_equal(parse_listen_addr("::", &la), 0);
	assert_int_equal(la.ss.ss_family, AF_INET6);
	assert_int_equal(ntohs(((struct sockaddr_in6 *)&la.ss)->sin6_port), DAEMON_DEFAULT_PORT);
	assert_int_equal(parse_listen_addr("*:9000", &la), 0);
	assert_int_equal(la.ss.ss_family, AF_INET);
	assert_int_equal(ntohs(((struct sockaddr_in *)&la.ss)->sin_port), 9000);
}

static void test_listen_addr_errors(void **state)
{
	struct listen_addr la;

	assert_int_equal(parse_listen_addr("127.0.0.1:0", &la), -ERANGE);
	assert_int_equal(parse_listen_addr("127.0.0.1:65536", &la), -ERANGE);
	assert_int_equal(parse_listen_addr("127.0.0.1:http", &la), -ERANGE);
	assert_int_equal(parse_listen_addr("127.0.0.1:", &la), -ERANGE);
	assert_int_equal(parse_listen_addr("127.0.0.1:-1", &la), -ERANGE);
	assert_int_equal(parse_listen_addr("[::1]:0", &la), -ERANGE);
	assert_int_equal(parse_listen_addr("[::1", &la), -EINVAL);
	assert_int_equal(parse_listen_addr("[]:7000", &la), -EINVAL);
	assert_int_equal(parse_listen_addr("[::1]x", &la), -EINVAL);
	assert_int_equal(parse_listen_addr("[127.0.0.1]:7000", &la), -EINVAL);
}

static void test_unknown_key(void **state)
{
	write_conf("listen = 127.0.0.1\n"
		   "lisen = 127.0.0.1\n");
	expect_error(BASE_LINES + 2, "unknown key 'lisen' in [global]");

	write_conf("[data]\npath = @/data\nreadonly = yes\n");
	expect_error(BASE_LINES + 3, "unknown key 'readonly'");
}

static void test_unknown_section(void **state)
{
	write_conf("\n[bad name!]\npath = @/data\n");
	expect_error(BASE_LINES + 2, "section");

	write_conf("[GLOBAL]\n");
	expect_error(BASE_LINES + 1, "unknown section");

	write_conf("[]\n");
	expect_error(BASE_LINES + 1, "section");

	write_conf("[..]\npath = @/data\n");
	expect_error(BASE_LINES + 1, "section");

	/* 64 characters: one too many. */
	write_conf("[m123456789m123456789m123456789m123456789m123456789m123456789mmmm]\n");
	expect_error(BASE_LINES + 1, "section");

	write_conf("[data\n");
	expect_error(BASE_LINES + 1, "unterminated");

	write_conf("[data] x\n");
	expect_error(BASE_LINES + 1, "after section");

	write_conf("[global]\n");
	expect_error(BASE_LINES + 1, "duplicate section");
}

static void test_key_outside_section(void **state)
{
	write_conf_raw("# leading comment\n"
		       "listen = 127.0.0.1\n"
		       "[global]\n");
	expect_error(2, "outside any section");
}

static void test_bad_port(void **state)
{
	write_conf("listen = 127.0.0.1:99999\n");
	expect_error(BASE_LINES + 1, "port");

	write_conf("\n\nlisten = [::1]:abc\n");
	expect_error(BASE_LINES + 3, "port");

	write_conf("listen = [::1\n");
	expect_error(BASE_LINES + 1, "bad 'listen' address");

	write_conf("listen = 127.0.0.1:7000\nlisten = 127.0.0.1:7000\n");
	expect_error(BASE_LINES + 2, "duplicate");
}

static void test_port_zero(void **state)
{
	write_conf("listen = 127.0.0.1:7000\nlisten = 0.0.0.0:0\n");
	expect_error(BASE_LINES + 2, "port");
}

static void test_too_many_listens(void **state)
{
	char body[4096];
	size_t o = 0;

	for (int i = 0; i <= DAEMON_MAX_LISTEN; i++) {
		o += (size_t)snprintf(body + o, sizeof(body) - o, "listen = 127.0.0.1:%d\n",
				      7000 + i);
	}
	write_conf(body);
	expect_error(BASE_LINES + DAEMON_MAX_LISTEN + 1, "too many");
}

/* Daemon rails: local IP addresses, a list and repeated, at most DAEMON_MAX_RAILS. */
static void test_rails(void **state)
{
	struct daemon_config *c;
	char body[4096];
	size_t o = 0;

	write_conf("rails = 127.0.0.2, 127.0.0.3\nrails = 127.0.0.4\n");
	c = load_ok();
	assert_int_equal(c->nrails, 3);
	assert_int_equal(c->rails[0].ss_family, AF_INET);
	assert_int_equal(((const struct sockaddr_in *)&c->rails[2])->sin_addr.s_addr,
			 htonl(0x7f000004));
	assert_int_equal(((const struct sockaddr_in *)&c->rails[2])->sin_port, 0);
	daemon_config_free(c);

	write_conf("");
	c = load_ok();
	assert_int_equal(c->nrails, 0);
	daemon_config_free(c);

	/* TEST-NET-1: no host has it. */
	write_conf("\nrails = 127.0.0.2, 192.0.2.1\n");
	expect_error(BASE_LINES + 2, "'rails' address '192.0.2.1' is not an address of this host");
	write_conf("rails = 127.0.0.2:7471\n");
	expect_error(BASE_LINES + 1, "bad 'rails' address '127.0.0.2:7471'");
	write_conf("rails = localhost\n");
	expect_error(BASE_LINES + 1, "expected an IPv4 or IPv6 address");
	write_conf("rails = 127.0.0.2\nrails = 127.0.0.2\n");
	expect_error(BASE_LINES + 2, "duplicate 'rails' address");
	for (int i = 0; i <= DAEMON_MAX_RAILS; i++) {
		o += (size_t)snprintf(body + o, sizeof(body) - o, "rails = 127.0.0.%d\n", 2 + i);
	}
	write_conf(body);
	expect_error(BASE_LINES + DAEMON_MAX_RAILS + 1, "too many 'rails' addresses (at most 15)");
}

static void test_unreadable_cert(void **state)
{
	write_conf_raw("[global]\n"
		       "cert = @/no-such-cert.pem\n"
		       "key = @/key.pem\n"
		       "ca = @/ca.pem\n");
	expect_error(2, "cannot read 'cert' file");
	assert_non_null(strstr(err, "no-such-cert.pem"));

	write_conf_raw("[global]\n"
		       "cert = @/cert.pem\n"
		       "key = @/key.pem\n"
		       "ca = @/data\n");
	expect_error(4, "cannot read 'ca' file");

	if (geteuid() != 0) {
		char p[4200];

		snprintf(p, sizeof(p), "%s/secret.pem", tmpdir);
		write_file(p, "x");
		assert_int_equal(chmod(p, 0), 0);
		write_conf_raw("[global]\n"
			       "cert = @/cert.pem\n"
			       "key = @/secret.pem\n"
			       "ca = @/ca.pem\n");
		expect_error(3, "cannot read 'key' file");
		assert_non_null(strstr(err, "Permission denied"));
	}
}

static void test_missing_cert(void **state)
{
	write_conf_raw("# rdmacpd.conf\n"
		       "[global]\n"
		       "key = @/key.pem\n"
		       "ca = @/ca.pem\n"
		       "[data]\n"
		       "path = @/data\n");
	expect_error(2, "missing required key 'cert'");

	write_conf_raw("[global]\n"
		       "cert = @/cert.pem\n"
		       "key = @/key.pem\n");
	expect_error(1, "missing required key 'ca'");
}

/* encryption: per module, its default from [global], allowed when neither says. */
static void test_encryption(void **state)
{
	struct daemon_config *c;

	write_conf("[a]\npath = @/data\n[b]\npath = @/other\nencryption = Required\n"
		   "[c]\npath = @/backup\nencryption = off\n");
	c = load_ok();
	assert_int_equal(c->modules[0].encryption, ENCRYPTION_ALLOWED);
	assert_int_equal(c->modules[1].encryption, ENCRYPTION_REQUIRED);
	assert_int_equal(c->modules[2].encryption, ENCRYPTION_OFF);
	daemon_config_free(c);

	write_conf("encryption = required\n[a]\npath = @/data\n[b]\npath = @/other\n"
		   "encryption = allowed\n");
	c = load_ok();
	assert_int_equal(c->modules[0].encryption, ENCRYPTION_REQUIRED);
	assert_int_equal(c->modules[1].encryption, ENCRYPTION_ALLOWED);
	daemon_config_free(c);

	write_conf("[data]\npath = @/data\nencryption = yes\n");
	expect_error(BASE_LINES + 3, "required, allowed or off");
	write_conf("encryption = on\n[data]\npath = @/data\n");
	expect_error(BASE_LINES + 1, "required, allowed or off");
}

/* tos: per module, its default from [global], none (-1) when neither says; 0..255. */
static void test_tos(void **state)
{
	struct daemon_config *c;

	write_conf("[a]\npath = @/data\n[b]\npath = @/other\ntos = 106\n");
	c = load_ok();
	assert_int_equal(c->tos, -1);
	assert_int_equal(c->modules[0].tos, -1);
	assert_int_equal(c->modules[1].tos, 106);
	daemon_config_free(c);

	/* [global]'s is the default; a module's 0 is its own. */
	write_conf("tos = 72\n[a]\npath = @/data\n[b]\npath = @/other\ntos = 0\n"
		   "[c]\npath = @/backup\ntos = 255\n");
	c = load_ok();
	assert_int_equal(c->tos, 72);
	assert_int_equal(c->modules[0].tos, 72);
	assert_int_equal(c->modules[1].tos, 0);
	assert_int_equal(c->modules[2].tos, 255);
	daemon_config_free(c);

	write_conf("[data]\npath = @/data\ntos = 256\n");
	expect_error(BASE_LINES + 3, "0..255");
	write_conf("tos = -1\n[data]\npath = @/data\n");
	expect_error(BASE_LINES + 1, "0..255");
	write_conf("tos = ef\n[data]\npath = @/data\n");
	expect_error(BASE_LINES + 1, "'tos'");
	write_conf("[data]\npath = @/data\ntos = 8\ntos = 16\n");
	expect_error(BASE_LINES + 4, "duplicate key 'tos'");
}

/* Issue 33: 'deny' ([global] and modules, as 'allow'), 'crl' (a readable file), 'cert warn days'. */
static void test_deny_crl_warn(void **state)
{
	struct daemon_config *c;

	write_conf("");
	c = load_ok();
	assert_int_equal(c->ndeny, 0);
	assert_string_equal(c->crl, "");
	assert_int_equal(c->cert_warn_days, 30);
	daemon_config_free(c);

	write_conf("deny = mallory, sha256:"
		   "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"
		   "crl = @/ca.pem\ncert warn days = 0\n"
		   "[data]\npath = @/data\nallow = *\ndeny = eve\ndeny = trudy\n");
	c = load_ok();
	assert_int_equal(c->ndeny, 2);
	assert_int_equal(c->deny[0].kind, ALLOW_NAME);
	assert_string_equal(c->deny[0].name, "mallory");
	assert_int_equal(c->deny[1].kind, ALLOW_FINGERPRINT);
	assert_int_equal(c->cert_warn_days, 0);
	assert_true(strstr(c->crl, "/ca.pem") != NULL);
	assert_int_equal(c->modules[0].ndeny, 2);
	assert_string_equal(c->modules[0].deny[1].name, "trudy");
	daemon_config_free(c);

	write_conf("deny = alice,,bob\n");
	expect_error(BASE_LINES + 1, "empty entry");
	write_conf("[data]\npath = @/data\ndeny = sha256:abcd\n");
	expect_error(BASE_LINES + 3, "bad fingerprint");
	write_conf("crl = @/no-such.pem\n");
	expect_error(BASE_LINES + 1, "crl");
	write_conf("cert warn days = 3651\n");
	expect_error(BASE_LINES + 1, "cert warn days");
	write_conf("cert warn days = 7\ncert warn days = 8\n");
	expect_error(BASE_LINES + 2, "duplicate key 'cert warn days'");
}

/* 'listen' takes a list too, and repeats. */
static void test_listen_lists(void **state)
{
	struct daemon_config *c;

	write_conf("listen = 127.0.0.1:7000, [::1]:7000 127.0.0.2:7001\n"
		   "listen = 127.0.0.3:7002,127.0.0.4:7003\n");
	c = load_ok();
	assert_int_equal(c->nlisten, 5);
	assert_string_equal(c->listen[0].text, "127.0.0.1:7000");
	assert_string_equal(c->listen[1].text, "[::1]:7000");
	assert_string_equal(c->listen[2].text, "127.0.0.2:7001");
	assert_string_equal(c->listen[4].text, "127.0.0.4:7003");
	daemon_config_free(c);

	write_conf("listen = 127.0.0.1:7000,\n");
	expect_error(BASE_LINES + 1, "ends with a comma");
	write_conf("listen = 127.0.0.1:7000,,127.0.0.1:7001\n");
	expect_error(BASE_LINES + 1, "empty entry");
	write_conf("listen = 127.0.0.1:7000, 127.0.0.1:7000\n");
	expect_error(BASE_LINES + 1, "duplicate");
}

static void test_bad_bool(void **state)
{
	write_conf("[data]\npath = @/data\nread only = maybe\n");
	expect_error(BASE_LINES + 3, "boolean");

	write_conf("[data]\npath = @/data\nread only = yes\nwrite only = yes\n");
	expect_error(BASE_LINES + 4, "both");
}

static void test_duplicate_key(void **state)
{
	write_conf("max connections = 4\nmax connections = 5\n");
	expect_error(BASE_LINES + 2, "duplicate key 'max connections'");

	write_conf("[data]\npath = @/data\npath = @/backup\n");
	expect_error(BASE_LINES + 3, "duplicate key 'path'");
}

static void test_bad_size(void **state)
{
	write_conf("memory budget = 12Q\n");
	expect_error(BASE_LINES + 1, "bad size");

	write_conf("memory budget = 1G\npool size = 16 M\n");
	expect_error(BASE_LINES + 2, "bad size");

	write_conf("pool size = 512K\n");
	expect_error(BASE_LINES + 1, "minimum");

	write_conf("memory budget = 99999999999T\n");
	expect_error(BASE_LINES + 1, "bad size");

	write_conf("memory budget = 32M\npool size = 64M\n");
	expect_error(BASE_LINES + 2, "exceeds 'memory budget'");

	/* Only the budget given: the default pool (64M) no longer fits. */
	write_conf("\nmemory budget = 32M\n");
	expect_error(BASE_LINES + 2, "exceeds");
}

static void test_bad_numbers(void **state)
{
	write_conf("max connections = 0\n");
	expect_error(BASE_LINES + 1, "1..65536");

	write_conf("max connections = 65537\n");
	expect_error(BASE_LINES + 1, "max connections");

	write_conf("handshake timeout = 301\n");
	expect_error(BASE_LINES + 1, "handshake timeout");

	write_conf("idle timeout = -1\n");
	expect_error(BASE_LINES + 1, "idle timeout");

	write_conf("drain timeout = 61m\n");
	expect_error(BASE_LINES + 1, "bad 'drain timeout' value '61m' (0 to 1h");

	write_conf("drain timeout = 5x\n");
	expect_error(BASE_LINES + 1, "drain timeout");

	write_conf("lanes from other addresses = maybe\n");
	expect_error(BASE_LINES + 1, "lanes from other addresses");

	write_conf("partial max age = 316224001\n");
	expect_error(BASE_LINES + 1, "partial max age");
	write_conf("partial max age = -1\n");
	expect_error(BASE_LINES + 1, "partial max age");

	write_conf("max connections per host = 20\nmax connections = 10\n");
	expect_error(BASE_LINES + 1, "exceeds 'max connections'");

	write_conf("log level = loud\n");
	expect_error(BASE_LINES + 1, "log level");
}

static void test_syntax(void **state)
{
	/* inih's own error, and it comes before ours on the next line. */
	write_conf("just words\nlisen = 1\n");
	expect_error(BASE_LINES + 1, "syntax error");

	/* An indented line is a key of its own, not a continuation. */
	write_conf("listen = 127.0.0.1:7000\n  lisen = 2\n");
	expect_error(BASE_LINES + 2, "unknown key");
}

static void test_long_line(void **state)
{
	char body[8192];

	/* Up to 4096 bytes is fine. */
	memset(body, ' ', sizeof(body));
	memcpy(body, "comment=", 8);
	memcpy(body + 4095, "x\n", 3);
	write_conf_raw(body); /* no [global]: an error, but not about length */
	expect_error(1, "outside any section");

	memcpy(body + 4095, "xx\n", 4);
	write_conf_raw(body);
	expect_error(1, "too long");
}

/* A line far past the cap is an error naming it, however long (a whole line is never kept). */
static void test_very_long_line(void **state)
{
	size_t n = 100 << 10, o;
	char *body = malloc(n + 64);

	assert_non_null(body);
	strcpy(body, "[global]\ncomment = ");
	o = strlen(body);
	memset(body + o, 'x', n);
	strcpy(body + o + n, "\n");
	write_file(conf_path, body);
	free(body);
	expect_error(2, "line too long");
}

/* Loads path, expects the whole-file error r with "path: " and word in the message. */
static void expect_file_error(const char *path, int r, const char *word)
{
	struct daemon_config *c = NULL;
	char prefix[4300];

	/* A regression reads /dev/urandom or waits on a FIFO for ever: fail instead. */
	alarm(10);
	assert_int_equal(daemon_config_load(path, &c, err, sizeof(err)), r);
	alarm(0);
	assert_null(c);
	snprintf(prefix, sizeof(prefix), "%s: ", path);
	if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, word)) {
		fail_msg("expected \"%s...%s...\", got \"%s\"", prefix, word, err);
	}
	assert_null(strchr(err, '\n'));
}

static void test_not_regular_file(void **state)
{
	char p[4200];

	snprintf(p, sizeof(p), "%s/fifo.conf", tmpdir);
	assert_int_equal(mkfifo(p, 0600), 0);
	expect_file_error(p, -EINVAL, "not a regular file (it is a FIFO)");
	unlink(p);

	snprintf(p, sizeof(p), "%s/data", tmpdir);
	expect_file_error(p, -EISDIR, "not a regular file (it is a directory)");

	if (access("/dev/urandom", R_OK) == 0) {
		expect_file_error("/dev/urandom", -EINVAL,
				  "not a regular file (it is a character device)");
	}
	if (access("/dev/zero", R_OK) == 0) {
		expect_file_error("/dev/zero", -EINVAL,
				  "not a regular file (it is a character device)");
	}
}

/* A valid config padded with comment lines to size bytes. */
static void write_padded_conf(size_t size)
{
	char head[4096];
	char *text = malloc(size + 1);
	size_t o;

	assert_non_null(text);
	snprintf(head, sizeof(head),
		 "[global]\ncert = %s/cert.pem\nkey = %s/key.pem\nca = %s/ca.pem\n", tmpdir, tmpdir,
		 tmpdir);
	o = strlen(head);
	assert_true(o < size);
	memcpy(text, head, o);
	while (o < size) {
		size_t n = MIN(size - o, (size_t)100);

		memset(text + o, '#', n);
		text[o + n - 1] = '\n';
		o += n;
	}
	text[size] = '\0';
	write_file(conf_path, text);
	free(text);
}

/* rdmacpd.conf(5): a config file is at most 1 MiB. */
static void test_file_size(void **state)
{
	struct daemon_config *c;

	write_padded_conf(1 << 20);
	c = load_ok();
	daemon_config_free(c);

	write_padded_conf((1 << 20) + 1);
	expect_file_error(conf_path, -EFBIG, "file too big (1048577 bytes");
}

static void test_missing_file(void **state)
{
	struct daemon_config *c = NULL;
	char p[4200];

	snprintf(p, sizeof(p), "%s/nope.conf", tmpdir);
	assert_int_equal(daemon_config_load(p, &c, err, sizeof(err)), -ENOENT);
	assert_null(c);
	assert_non_null(strstr(err, p));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_valid),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_default_port),
		cmocka_unit_test(test_listen_addr_errors),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_unknown_section),
		cmocka_unit_test(test_key_outside_section),
		cmocka_unit_test(test_bad_port),
		cmocka_unit_test(test_port_zero),
		cmocka_unit_test(test_too_many_listens),
		cmocka_unit_test(test_rails),
		cmocka_unit_test(test_unreadable_cert),
		cmocka_unit_test(test_missing_cert),
		cmocka_unit_test(test_encryption),
		cmocka_unit_test(test_tos),
		cmocka_unit_test(test_deny_crl_warn),
		cmocka_unit_test(test_listen_lists),
		cmocka_unit_test(test_bad_bool),
		cmocka_unit_test(test_duplicate_key),
		cmocka_unit_test(test_bad_size),
		cmocka_unit_test(test_bad_numbers),
		cmocka_unit_test(test_syntax),
		cmocka_unit_test(test_long_line),
		cmocka_unit_test(test_very_long_line),
		cmocka_unit_test(test_not_regular_file),
		cmocka_unit_test(test_file_size),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_unauthenticated_limits),
	};

	/* Modules without 'uid' run as this user; a root daemon needs it to exist. */
	if (geteuid() == 0 && !getpwnam(DAEMON_DEFAULT_USER)) {
		printf("SKIP: no system user '%s' (scripts/deps.sh creates it)\n",
		       DAEMON_DEFAULT_USER);
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
