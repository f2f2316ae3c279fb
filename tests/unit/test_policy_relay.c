/* SPDX-License-Identifier: MIT */
/*
 * Relays in policy (daemon/policy.c, policy_relay.c, policy_peer.c), with
 * real certificates (src/certs.c), a real rdmacpd.conf and real TLS
 * connections over a socketpair, so the relaying daemon is a TLS peer as
 * in a session: 'relay from' matched against the relay, 'allow' and
 * 'deny' against the original client (by CN, DNS SAN and fingerprint),
 * relayed pulls and listings refused, and a chain's hops against 'relay',
 * 'relay to' (a module's or [global]'s) and the flags a relay refuses.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <openssl/pem.h>

#include "testutil.h"

#include "certs.h"
#include "config.h"
#include "policy.h"
#include "tls.h"
#include "tls_keys.h"

#define IO_MS 5000

static char *tmpdir, cadir[512];
static struct daemon_config *cfg;
static struct tls_ctx *server;
static X509 *alice, *bob, *srv_cert;

static X509 *load_cert(const char *name)
{
	char path[600];
	FILE *f;
	X509 *c;

	snprintf(path, sizeof(path), "%s/%s.crt", cadir, name);
	f = fopen(path, "r");
	assert_non_null(f);
	c = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(c);
	return c;
}

static void hex_fp(const char *name, char out[65])
{
	char path[600];
	uint8_t fp[TLS_FINGERPRINT_LEN];

	snprintf(path, sizeof(path), "%s/%s.crt", cadir, name);
	assert_int_equal(tls_file_fingerprint(path, fp), 0);
	tls_format_fingerprint(fp, out);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int group_setup(void **state)
{
	char conf[4096], path[600], fp_alice[65], fp_relay2[65], err[512];
	static const char *const mods[] = { "data", "plain", "glob", "denied", "san", "fpmod" };

	(void)state;
	tmpdir = tu_mkdtemp();
	snprintf(cadir, sizeof(cadir), "%s/ca", tmpdir);
	if (certs_init(cadir, NULL, 0) != 0 || certs_issue_client(cadir, "alice", 0, 0) != 0 ||
	    certs_issue_client(cadir, "bob", 0, 0) != 0 ||
	    certs_issue_client(cadir, "relay1", 0, 0) != 0 ||
	    certs_issue_client(cadir, "relay2", 0, 0) != 0) {
		return -1;
	}
	for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, mods[i]);
		mkdir(path, 0755);
	}
	hex_fp("alice", fp_alice);
	hex_fp("relay2", fp_relay2);
	snprintf(conf, sizeof(conf),
		 "[global]\ncert = %1$s/ca/server.crt\nkey = %1$s/ca/server.key\n"
		 "ca = %1$s/ca/ca.crt\nrelay to = *.cluster\n"
		 "[data]\npath = %1$s/data\nallow = alice\nrelay = yes\nrelay to = node[0-9]\n"
		 "relay from = relay1\n"
		 "[plain]\npath = %1$s/plain\nallow = alice bob\n"
		 "[glob]\npath = %1$s/glob\nallow = alice\nrelay = yes\n"
		 "relay from = sha256:%2$s\n"
		 "[denied]\npath = %1$s/denied\nallow = *\ndeny = bob\nrelay from = relay1\n"
		 "[san]\npath = %1$s/san\nallow = localhost\nrelay from = relay1\n"
		 "[fpmod]\npath = %1$s/fpmod\nallow = sha256:%3$s\nrelay from = relay1\n",
		 tmpdir, fp_relay2, fp_alice);
	snprintf(path, sizeof(path), "%s/rdmacpd.conf", tmpdir);
	write_text(path, conf);
	if (daemon_config_load(path, &cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "config: %s\n", err);
		return -1;
	}
	server = tu_tls_ctx(cadir, true, "server");
	alice = load_cert("alice");
	bob = load_cert("bob");
	srv_cert = load_cert("server");
	return server ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	X509_free(alice);
	X509_free(bob);
	X509_free(srv_cert);
	tls_ctx_free(server);
	daemon_config_free(cfg);
	tu_rmtree(tmpdir);
	free(tmpdir);
	return 0;
}

struct accept_arg {
	int fd, r;
	struct tls_conn *conn;
};

static void *accept_main(void *p)
{
	struct accept_arg *a = p;

	a->r = tls_accept(server, a->fd, IO_MS, &a->conn);
	return NULL;
}

/* A TLS connection from dir's client NAME: the daemon's end (*ret_srv) and the client's. */
static struct tls_conn *connect_as(const char *name, struct tls_conn **ret_client,
				   uint8_t fp[TLS_FINGERPRINT_LEN])
{
	struct tls_ctx *cl = tu_tls_ctx(cadir, false, name);
	struct accept_arg a = { 0 };
	pthread_t th;
	int sv[2];

	assert_non_null(cl);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	a.fd = sv[0];
	assert_int_equal(pthread_create(&th, NULL, accept_main, &a), 0);
	assert_int_equal(tls_connect(cl, sv[1], "localhost", IO_MS, ret_client), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.r, 0);
	tls_ctx_free(cl);
	tls_peer_fingerprint(a.conn, fp);
	return a.conn;
}

struct link {
	struct tls_conn *srv, *cl;
	uint8_t fp[TLS_FINGERPRINT_LEN];
	struct policy_peer peer;
};

static void link_open(struct link *l, const char *name, X509 *behalf)
{
	l->srv = connect_as(name, &l->cl, l->fp);
	l->peer = (struct policy_peer){ .tls = l->srv, .fp = l->fp, .caps = ~0ull };
	if (behalf) {
		assert_int_equal(policy_peer_on_behalf(&l->peer, behalf), 0);
	}
}

static void link_close(struct link *l)
{
	tls_conn_free(l->srv);
	tls_conn_free(l->cl);
}

/* policy_decide for a push (or op) of path: its return; code and why in the caller's. */
static int decide(const struct link *l, enum policy_op op, const char *path, uint32_t flags,
		  const struct msg_relay *rl, uint32_t *code, char *why, size_t whylen)
{
	struct policy_session s = { 0 };
	struct policy_request rq = { .op = op, .path = path, .flags = flags, .relay = rl };
	struct policy_grant g;

	return policy_decide(cfg, &l->peer, &s, &rq, &g, code, why, whylen);
}

static void expect_no(const struct link *l, enum policy_op op, const char *path, uint32_t flags,
		      const struct msg_relay *rl, uint32_t want_code, const char *want_text)
{
	char why[512];
	uint32_t code;

	assert_int_equal(decide(l, op, path, flags, rl, &code, why, sizeof(why)), -EPERM);
	assert_int_equal(code, want_code);
	if (!strstr(why, want_text)) {
		fail_msg("'%s' does not say '%s'", why, want_text);
	}
}

static void expect_yes(const struct link *l, enum policy_op op, const char *path, uint32_t flags,
		       const struct msg_relay *rl)
{
	char why[512];
	uint32_t code;

	if (decide(l, op, path, flags, rl, &code, why, sizeof(why)) != 0) {
		fail_msg("%s refused: %s", path, why);
	}
	assert_int_equal(code, PERR_OK);
}

/* 'relay from' is matched against the TLS peer: by name, by fingerprint, or refused. */
static void relay_from(void **state)
{
	struct link r1, r2;
	char rn[256], cn[256];

	(void)state;
	link_open(&r1, "relay1", alice);
	link_open(&r2, "relay2", alice);
	expect_yes(&r1, POLICY_PUSH, "data/in", 0, NULL);
	expect_no(&r1, POLICY_PUSH, "plain/in", 0, NULL, PERR_PERMISSION,
		  "relay1 may not relay into module plain");
	expect_no(&r2, POLICY_PUSH, "data/in", 0, NULL, PERR_PERMISSION,
		  "relay2 may not relay into module data");
	expect_yes(&r2, POLICY_PUSH, "glob/x", 0, NULL);
	policy_relay_names(&r1.peer, rn, sizeof(rn), cn, sizeof(cn));
	assert_string_equal(rn, "relay1");
	assert_string_equal(cn, "alice");
	link_close(&r1);
	link_close(&r2);
}

/*
 * On behalf: 'allow' and 'deny' see the original client, by CN, SAN or
 * fingerprint; a relay cannot use a ticket of a client the module refuses,
 * nor push as itself where only its clients may.
 */
static void on_behalf(void **state)
{
	struct link ra, rb, rs, self;

	(void)state;
	link_open(&ra, "relay1", alice);
	link_open(&rb, "relay1", bob);
	link_open(&rs, "relay1", srv_cert);
	link_open(&self, "relay1", NULL);
	expect_no(&rb, POLICY_PUSH, "data/in", 0, NULL, PERR_PERMISSION,
		  "module 'data' does not allow this client");
	expect_no(&rb, POLICY_PUSH, "denied/in", 0, NULL, PERR_AUTH, "deny list");
	expect_yes(&ra, POLICY_PUSH, "denied/in", 0, NULL);
	expect_yes(&ra, POLICY_PUSH, "fpmod/in", 0, NULL);
	expect_no(&rb, POLICY_PUSH, "fpmod/in", 0, NULL, PERR_PERMISSION, "does not allow");
	expect_yes(&rs, POLICY_PUSH, "san/in", 0, NULL); /* the server's SAN localhost */
	expect_no(&ra, POLICY_PUSH, "san/in", 0, NULL, PERR_PERMISSION, "does not allow");
	expect_no(&self, POLICY_PUSH, "data/in", 0, NULL, PERR_PERMISSION, "does not allow");
	/* Only pushes are relayed. */
	expect_no(&ra, POLICY_PULL, "data/in", 0, NULL, PERR_PROTOCOL, "only a push");
	expect_no(&ra, POLICY_LIST, "data/in", 0, NULL, PERR_PROTOCOL, "only a push");
	expect_no(&ra, POLICY_BENCH, NULL, 0, NULL, PERR_PROTOCOL, "only a push");
	link_close(&ra);
	link_close(&rb);
	link_close(&rs);
	link_close(&self);
}

/* A chain: the module relays, each hop in 'relay to' (the module's, else [global]'s). */
static void chain(void **state)
{
	static uint8_t t[1] = { 1 };
	struct proto_relay_hop hops[2] = {
		{ .host = (char *)"node1",
		  .port = 1,
		  .path = (char *)"m/p",
		  .ticket = t,
		  .ticket_len = 1 },
		{ .host = (char *)"node2",
		  .port = 1,
		  .path = (char *)"m/p",
		  .ticket = t,
		  .ticket_len = 1 },
	};
	struct msg_relay rl = { .count = 2, .hops = hops }, last = { .count = 0 };
	struct link a;

	(void)state;
	link_open(&a, "alice", NULL);
	expect_yes(&a, POLICY_PUSH, "data/in", PROTO_OPEN_RECURSIVE, &rl);
	expect_yes(&a, POLICY_PUSH, "plain/in", 0, &last); /* nothing goes on */
	expect_no(&a, POLICY_PUSH, "plain/in", 0, &rl, PERR_PERMISSION,
		  "module 'plain' does not relay");
	hops[1].host = (char *)"node10";
	expect_no(&a, POLICY_PUSH, "data/in", 0, &rl, PERR_PERMISSION, "may not relay to 'node10'");
	hops[1].host = (char *)"a.cluster"; /* [global]'s pattern: not the module's */
	expect_no(&a, POLICY_PUSH, "data/in", 0, &rl, PERR_PERMISSION, "'a.cluster'");
	hops[0].host = (char *)"B.Cluster";
	expect_yes(&a, POLICY_PUSH, "glob/in", 0, &rl); /* no 'relay to' of its own: [global]'s */
	hops[0].host = (char *)"node1";
	expect_no(&a, POLICY_PUSH, "glob/in", 0, &rl, PERR_PERMISSION, "'node1'");
	hops[0].host = (char *)"node1";
	hops[1].host = (char *)"node2";
	/* -H, -X and -A are carried at every hop. */
	expect_yes(&a, POLICY_PUSH, "data/in", PROTO_OPEN_RECURSIVE | PROTO_OPEN_HARDLINKS, &rl);
	expect_yes(&a, POLICY_PUSH, "data/in",
		   PROTO_OPEN_RECURSIVE | PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS, &rl);
	expect_no(&a, POLICY_PULL, "data/in", 0, &rl, PERR_PROTOCOL, "only a push");
	link_close(&a);
	/* A client the module does not allow learns nothing of its relay settings. */
	struct link b;
	hops[1].host = (char *)"elsewhere";
	link_open(&b, "bob", NULL);
	expect_no(&b, POLICY_PUSH, "data/in", 0, &rl, PERR_PERMISSION,
		  "module 'data' does not allow this client");
	link_close(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(relay_from),
		cmocka_unit_test(on_behalf),
		cmocka_unit_test(chain),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown) ? 1 : 0;
}
