/* SPDX-License-Identifier: MIT */
/*
 * rdmacpd.conf parsing, the module sections: paths, identities, allow and
 * deny lists, limits, nesting, every error with its "FILE:LINE:" position.
 * Real files in a private temp directory (daemon_config_harness.c).
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
/* SECURITY.md G42: one module inside another is refused, however it is spelled. */
static void test_nested_modules(void **state)
{
	static const struct {
		const char *outer, *inner;
	} cases[] = {
		{ "@/data", "@/data/inner" },
		{ "@/data/inner", "@/data" },
		{ "@/data", "@/data/" },
		{ "@//data/./", "@/data//inner/." },
		{ "@/data", "@/other/../data/inner" },
		{ "/", "@/other" },
	};
	char body[4096];
	struct daemon_config *c;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(body, sizeof(body), "[a]\npath = %s\n[b]\npath = %s\n", cases[i].outer,
			 cases[i].inner);
		write_conf(body);
		expect_error(BASE_LINES + 4, "overlaps module [a]");
	}
	/* A symlink into another module: no module path may hold a symlink at all. */
	write_conf("[a]\npath = @/data\n[b]\npath = @/data-link\n");
	expect_error(BASE_LINES + 4, "has a symlink in it");
	write_conf("[a]\npath = @/data\n[b]\npath = @/other\n[c]\npath = @/data-link/..\n");
	expect_error(BASE_LINES + 6, "has a symlink in it");
	/* Siblings, and a name that only starts like another's. */
	write_conf("[a]\npath = @/backup\n[b]\npath = @/data/inner\n");
	c = load_ok();
	daemon_config_free(c);
}

/* A module's comment is kept for listings (issue 15), up to 1024 bytes; longer: refused. */
static void test_module_comment(void **state)
{
	struct daemon_config *c;
	char body[2200];
	char text[1026];

	(void)state;
	write_conf(
	    "[data]\npath = @/data\ncomment = main data ; inline comment\n[b]\npath = @/other\n");
	c = load_ok();
	assert_string_equal(daemon_config_module(c, "data")->comment, "main data");
	assert_string_equal(daemon_config_module(c, "b")->comment, "");
	daemon_config_free(c);
	memset(text, 'c', 1024);
	text[1024] = '\0';
	snprintf(body, sizeof(body), "[data]\npath = @/data\ncomment = %s\n", text);
	write_conf(body);
	c = load_ok();
	assert_int_equal(strlen(daemon_config_module(c, "data")->comment), 1024);
	daemon_config_free(c);
	strcat(text, "c");
	snprintf(body, sizeof(body), "[data]\npath = @/data\ncomment = %s\n", text);
	write_conf(body);
	expect_error(BASE_LINES + 3, "'comment' is too long");
}

static void test_module_path(void **state)
{
	write_conf("[data]\ncomment = no path\n[other]\npath = @/data\n");
	expect_error(BASE_LINES + 1, "has no 'path'");

	/* The last section is checked at the end of the file too. */
	write_conf("[data]\npath = @/data\n\n[other]\nread only = no\n");
	expect_error(BASE_LINES + 4, "has no 'path'");

	write_conf("[data]\npath = relative/dir\n");
	expect_error(BASE_LINES + 2, "absolute");
}

/*
 * A path that is missing, or not a directory, loads: that module is
 * unavailable (root_known false, and why), the others are served. Its
 * overlap with another module is known all the same, ".." and all.
 */
static void test_module_path_missing(void **state)
{
	struct daemon_config *c;

	(void)state;
	write_conf("[gone]\npath = @/nonexistent\n[file]\npath = @/cert.pem\n"
		   "[data]\npath = @/data\n");
	c = load_ok();
	assert_false(c->modules[0].root_known);
	assert_int_equal(c->modules[0].root_errno, ENOENT);
	assert_false(c->modules[1].root_known);
	assert_int_equal(c->modules[1].root_errno, ENOTDIR);
	assert_true(c->modules[2].root_known);
	assert_true(c->modules[2].root_ino != 0);
	daemon_config_free(c);

	write_conf("[a]\npath = @/nonexistent/../data\n[b]\npath = @/data/inner\n");
	expect_error(BASE_LINES + 4, "overlaps module [a]");
}

/* Who sessions run as, the keys that widen what a client may set, the path's symlinks. */
static void test_identity(void **state)
{
	struct daemon_config *c;
	const struct module *m;
	struct passwd *pw;
	char p[4200];

	write_conf("[r]\npath = @/data\nuid = root\nkeep setid = yes\npreserve owner = yes\n"
		   "[d]\npath = @/backup\n");
	c = load_ok();
	m = daemon_config_module(c, "r");
	assert_true(m->keep_setid);
	assert_true(m->preserve_owner);
	assert_int_equal(m->run_uid, 0);
	if (geteuid() == 0) {
		assert_int_equal(m->run_gid, 0); /* root's primary group */
	}
	m = daemon_config_module(c, "d");
	assert_false(m->keep_setid);
	assert_false(m->preserve_owner);
	if (geteuid() == 0) {
		/* Never root by default: the system user. */
		pw = getpwnam(DAEMON_DEFAULT_USER);
		assert_non_null(pw);
		assert_int_equal(m->run_uid, pw->pw_uid);
		assert_int_equal(m->run_gid, pw->pw_gid);
		assert_int_not_equal(m->run_uid, 0);
	} else {
		assert_int_equal(m->run_uid, geteuid());
		assert_int_equal(m->run_gid, getegid());
	}
	daemon_config_free(c);

	/* --owner needs a session that is root. */
	write_conf("[d]\npath = @/data\nallow = *\npreserve owner = yes\n");
	expect_error(BASE_LINES + 4, "'preserve owner' in [d] needs 'uid = root'");
	write_conf("[d]\npath = @/data\nkeep setid = maybe\n");
	expect_error(BASE_LINES + 3, "bad boolean");

	/* No symlink anywhere in a module path. */
	snprintf(p, sizeof(p), "%s/link", tmpdir);
	assert_int_equal(symlink("data", p), 0);
	write_conf("[d]\npath = @/link\n");
	expect_error(BASE_LINES + 2, "has a symlink in it");
	write_conf("[d]\npath = @/link/\n");
	expect_error(BASE_LINES + 2, "has a symlink in it");
	assert_int_equal(unlink(p), 0);
}

static void test_max_files(void **state)
{
	struct daemon_config *c;

	write_conf("[data]\npath = @/data\n[small]\npath = @/other\nmax files per session = 100\n");
	c = load_ok();
	assert_int_equal(c->modules[0].max_files, 1000000);
	assert_int_equal(c->modules[1].max_files, 100);
	daemon_config_free(c);

	write_conf("[data]\npath = @/data\nmax files per session = 0\n");
	expect_error(BASE_LINES + 3, "max files per session");

	write_conf("[data]\npath = @/data\nmax files per session = 4294967296\n");
	expect_error(BASE_LINES + 3, "1..4294967295");
}

static void test_bad_allow(void **state)
{
	write_conf("[data]\npath = @/data\nallow = * sha256:abcd\n");
	expect_error(BASE_LINES + 3, "bad fingerprint");

	write_conf("[data]\npath = @/data\n"
		   "allow = sha256:"
		   "00112233445566778899aabbccddeeff00112233445566778899aabbccddeefg\n");
	expect_error(BASE_LINES + 3, "fingerprint");

	write_conf("[data]\npath = @/data\nallow = \n");
	expect_error(BASE_LINES + 3, "empty");
}

/* 'allow bench' in [global]: a module's allow syntax, repeatable, none by default. */
static void test_allow_bench(void **state)
{
	struct daemon_config *c;

	write_conf("[data]\npath = @/data\nallow = *\n");
	c = load_ok();
	assert_int_equal(c->nbench_allow, 0);
	daemon_config_free(c);

	write_conf("allow bench = alice, *\nallow bench = sha256:"
		   "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"
		   "[data]\npath = @/data\n");
	c = load_ok();
	assert_int_equal(c->nbench_allow, 3);
	assert_int_equal(c->bench_allow[0].kind, ALLOW_NAME);
	assert_string_equal(c->bench_allow[0].name, "alice");
	assert_int_equal(c->bench_allow[1].kind, ALLOW_ANY);
	assert_int_equal(c->bench_allow[2].kind, ALLOW_FINGERPRINT);
	assert_int_equal(c->bench_allow[2].fp[31], 0xff);
	/* Not a module's: no module allows anyone for it. */
	assert_int_equal(c->modules[0].nallow, 0);
	daemon_config_free(c);

	write_conf("allow bench = alice,,bob\n");
	expect_error(BASE_LINES + 1, "empty entry");
	write_conf("allow bench = \"alice\"\n");
	expect_error(BASE_LINES + 1, "bad entry");
	write_conf("[data]\npath = @/data\nallow bench = alice\n");
	expect_error(BASE_LINES + 3, "unknown key 'allow bench' in module [data]");
}

/* Issue 15: "allow = alice, bob" took "alice," as a name and locked alice out. */
static void test_allow_lists(void **state)
{
	static const char *const ok[] = {
		"alice, bob", "alice,bob", "alice  bob", "alice ,bob", "alice\t,\tbob",
	};
	static const char fp_colons[] = "00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:"
					"00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF";
	char body[1024];
	struct daemon_config *c;
	const struct module *m;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		snprintf(body, sizeof(body), "[data]\npath = @/data\nallow = %s\n", ok[i]);
		write_conf(body);
		c = load_ok();
		m = daemon_config_module(c, "data");
		assert_int_equal(m->nallow, 2);
		assert_int_equal(m->allow[0].kind, ALLOW_NAME);
		assert_string_equal(m->allow[0].name, "alice");
		assert_int_equal(m->allow[1].kind, ALLOW_NAME);
		assert_string_equal(m->allow[1].name, "bob");
		daemon_config_free(c);
	}

	/* Fingerprints with or without ':' and with or without "sha256:", in a list. */
	snprintf(body, sizeof(body),
		 "[data]\npath = @/data\nallow = sha256:%s, %s,"
		 "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n",
		 fp_colons, fp_colons);
	write_conf(body);
	c = load_ok();
	m = daemon_config_module(c, "data");
	assert_int_equal(m->nallow, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(m->allow[i].kind, ALLOW_FINGERPRINT);
		assert_int_equal(m->allow[i].fp[0], 0x00);
		assert_int_equal(m->allow[i].fp[10], 0xaa);
		assert_int_equal(m->allow[i].fp[31], 0xff);
	}
	daemon_config_free(c);

	/* Empty entries and stray characters are refused at their line, never taken as names. */
	write_conf("[data]\npath = @/data\nallow = alice, bob,\n");
	expect_error(BASE_LINES + 3, "ends with a comma");
	write_conf("[data]\npath = @/data\nallow = alice,,bob\n");
	expect_error(BASE_LINES + 3, "empty entry");
	write_conf("[data]\npath = @/data\nallow = , alice\n");
	expect_error(BASE_LINES + 3, "empty entry");
	write_conf("[data]\npath = @/data\nallow = ,\n");
	expect_error(BASE_LINES + 3, "empty entry");
	write_conf("[data]\npath = @/data\nallow = \"alice\", \"bob\"\n");
	expect_error(BASE_LINES + 3, "bad entry '\"alice\"'");
	write_conf("[data]\npath = @/data\nallow = alice # and bob\n");
	expect_error(BASE_LINES + 3, "bad entry '#'");
	write_conf("[data]\npath = @/data\nallow = alice;bob\n");
	expect_error(BASE_LINES + 3, "bad entry 'alice;bob'");
	write_conf("[data]\npath = @/data\nallow = alice/bob\n");
	expect_error(BASE_LINES + 3, "bad entry");
	write_conf("[data]\npath = @/data\nallow = sha256:00:11\n");
	expect_error(BASE_LINES + 3, "bad fingerprint");
}

static void test_too_many_allow(void **state)
{
	char body[8192];
	size_t o = 0;

	o += (size_t)snprintf(body + o, sizeof(body) - o, "[data]\npath = @/data\nallow =");
	for (int i = 0; i <= DAEMON_MAX_ALLOW; i++) {
		o += (size_t)snprintf(body + o, sizeof(body) - o, " host%d", i);
	}
	snprintf(body + o, sizeof(body) - o, "\n");
	write_conf(body);
	expect_error(BASE_LINES + 3, "too many");
}

static void test_duplicate_module(void **state)
{
	write_conf("[data]\npath = @/data\n[backup]\npath = @/backup\n[data]\npath = @/data\n");
	expect_error(BASE_LINES + 5, "duplicate module [data]");
}

/* A module's push limits: no limit by default, sizes with suffixes, 0 allowed. */
static void test_module_limits(void **state)
{
	struct daemon_config *c;

	write_conf("[a]\npath = @/data\n"
		   "[b]\npath = @/backup\nmax file size = 1M\nmax session bytes = 3G\n");
	c = load_ok();
	assert_int_equal(c->modules[0].max_file_size, UINT64_MAX);
	assert_int_equal(c->modules[0].max_session_bytes, UINT64_MAX);
	assert_int_equal(c->modules[1].max_file_size, UINT64_C(1) << 20);
	assert_int_equal(c->modules[1].max_session_bytes, UINT64_C(3) << 30);
	daemon_config_free(c);

	write_conf("[a]\npath = @/data\nmax file size = 0\nmax session bytes = 12\n");
	c = load_ok();
	assert_int_equal(c->modules[0].max_file_size, 0);
	assert_int_equal(c->modules[0].max_session_bytes, 12);
	daemon_config_free(c);

	write_conf("[a]\npath = @/data\nmax file size = 1X\n");
	expect_error(BASE_LINES + 3, "bad size");
	write_conf("[a]\npath = @/data\nmax session bytes = -5\n");
	expect_error(BASE_LINES + 3, "bad size");
	write_conf("[a]\npath = @/data\nmax session bytes = 99999999999T\n");
	expect_error(BASE_LINES + 3, "bad size");
	write_conf("[a]\npath = @/data\nmax file size = 1M\nmax file size = 2M\n");
	expect_error(BASE_LINES + 4, "max file size");
	write_conf("max file size = 1M\n");
	expect_error(BASE_LINES + 1, "max file size");

	/* "max connections" of a module: its own cap, none when not set. */
	write_conf("max connections = 8\n[a]\npath = @/data\n[b]\npath = @/backup\n"
		   "max connections = 2\n");
	c = load_ok();
	assert_int_equal(c->max_connections, 8);
	assert_int_equal(c->modules[0].max_connections, UINT_MAX);
	assert_int_equal(c->modules[1].max_connections, 2);
	daemon_config_free(c);
	write_conf("[a]\npath = @/data\nmax connections = 0\n");
	expect_error(BASE_LINES + 3, "max connections");
}

static void test_bad_user(void **state)
{
	write_conf("[data]\npath = @/data\nuid = no-such-user-rdmacp\n");
	expect_error(BASE_LINES + 3, "no such user");

	write_conf("[data]\npath = @/data\ngid = no-such-group-rdmacp\n");
	expect_error(BASE_LINES + 3, "no such group");

	write_conf("[data]\npath = @/data\nuid = 4294967295\n");
	expect_error(BASE_LINES + 3, "uid");
}

struct warnings {
	size_t n;
	char text[4][8192];
};

static void collect_warning(void *ud, const char *text)
{
	struct warnings *w = ud;

	assert_true(w->n < 4);
	snprintf(w->text[w->n++], sizeof(w->text[0]), "%s", text);
}

/* One warning containing word for a module at path, or none when word is NULL. */
static void expect_system_path(const char *path, bool devices, const char *word)
{
	struct module m = { .devices = devices };
	struct warnings w = { 0 };
	size_t n;

	snprintf(m.name, sizeof(m.name), "mod");
	snprintf(m.path, sizeof(m.path), "%s", path);
	n = modcheck_system_path(&m, collect_warning, &w);
	assert_int_equal(n, w.n);
	if (!word) {
		if (n != 0) {
			fail_msg("path %s: unexpected warning \"%s\"", path, w.text[0]);
		}
		return;
	}
	if (n != 1 || !strstr(w.text[0], word) || !strstr(w.text[0], "module [mod]") ||
	    !strstr(w.text[0], path)) {
		fail_msg("path %s: expected one warning with \"%s\", got %zu: \"%s\"", path, word,
			 n, n ? w.text[0] : "");
	}
}

/* --check's warnings about modules that export the kernel or the whole host. */
static void test_system_paths(void **state)
{
	static const char root[] = "exports the whole host";

	expect_system_path("/", false, root);
	expect_system_path("//", false, root);
	expect_system_path("/.", false, root);
	expect_system_path("/proc/..", false, root);
	expect_system_path("/proc", false, "is under /proc");
	expect_system_path("/proc/", false, "is under /proc");
	expect_system_path("/./proc", false, "is under /proc");
	expect_system_path("//proc//sys/", false, "is under /proc");
	expect_system_path("/srv/../proc", false, "is under /proc");
	expect_system_path("/srv/a/../../proc/1", false, "is under /proc");
	expect_system_path("/sys", false, "is under /sys");
	expect_system_path("/sys/kernel/debug", true, "is under /sys");
	expect_system_path("/dev", false, "is under /dev without 'devices = yes'");
	expect_system_path("/dev/shm/", false, "is under /dev without 'devices = yes'");
	expect_system_path("/dev", true, NULL);
	expect_system_path("/dev/disks", true, NULL);

	expect_system_path("/srv", false, NULL);
	expect_system_path("/procfs", false, NULL);
	expect_system_path("/system", false, NULL);
	expect_system_path("/device", false, NULL);
	expect_system_path("/proc/../srv", false, NULL);
	expect_system_path("/srv/proc", false, NULL);
	expect_system_path("/srv/..proc", false, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_module_path),	 cmocka_unit_test(test_module_path_missing),
		cmocka_unit_test(test_identity),	 cmocka_unit_test(test_max_files),
		cmocka_unit_test(test_bad_allow),	 cmocka_unit_test(test_allow_lists),
		cmocka_unit_test(test_allow_bench),	 cmocka_unit_test(test_too_many_allow),
		cmocka_unit_test(test_duplicate_module), cmocka_unit_test(test_module_limits),
		cmocka_unit_test(test_bad_user),	 cmocka_unit_test(test_system_paths),
		cmocka_unit_test(test_nested_modules),	 cmocka_unit_test(test_module_comment),
	};

	/* Modules without 'uid' run as this user; a root daemon needs it to exist. */
	if (geteuid() == 0 && !getpwnam(DAEMON_DEFAULT_USER)) {
		printf("SKIP: no system user '%s' (scripts/deps.sh creates it)\n",
		       DAEMON_DEFAULT_USER);
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
