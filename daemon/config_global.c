/* SPDX-License-Identifier: MIT */
/*
 * rdmacpd.conf's [global] keys (config_parse.h): listen addresses, the
 * certificates, connection limits and timeouts, memory, logging, the lanes'
 * defaults (encryption, traffic class, rails), who may run bench, and the
 * certificates refused (deny, crl) and expiry warnings, relays (relay to,
 * relay certificate, relay key, relay client, relay slow time). One
 * handler per key, and the table the loader (config.c) dispatches through.
 */
#include "config_parse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "engine.h"
#include "lane_seal.h"
#include "parse.h"
#include "proto/msg.h"
#include "slowhop.h"

static int add_listen(struct parse_state *ps, const char *key, const char *value)
{
	struct daemon_config *c = ps->cfg;
	struct listen_addr la;
	int r;

	if (c->nlisten >= DAEMON_MAX_LISTEN) {
		return fail(ps, "too many '%s' addresses (at most %d)", key, DAEMON_MAX_LISTEN);
	}
	r = parse_listen_addr(value, &la);
	if (r == -ERANGE) {
		return fail(ps, "bad port in '%s' address '%s' (must be 1..65535)", key,
			    ESC(value));
	}
	if (r == -EADDRNOTAVAIL) {
		return fail(ps, "cannot resolve host in '%s' address '%s'", key, ESC(value));
	}
	if (r < 0) {
		return fail(ps, "bad '%s' address '%s' (expected host, host:port or [v6]:port)",
			    key, ESC(value));
	}
	for (size_t i = 0; i < c->nlisten; i++) {
		if (c->listen[i].len == la.len && memcmp(&c->listen[i].ss, &la.ss, la.len) == 0) {
			return fail(ps, "duplicate '%s' address '%s'", key, ESC(value));
		}
	}
	c->listen[c->nlisten++] = la;
	return 0;
}

/* One or more addresses per line, and the key may repeat. */
static int g_listen(struct parse_state *ps, const char *key, const char *value)
{
	return config_for_each_entry(ps, key, value, add_listen);
}

static int g_cert(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_path(ps, key, value, ps->cfg->cert, sizeof(ps->cfg->cert));
}

static int g_key(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_path(ps, key, value, ps->cfg->key, sizeof(ps->cfg->key));
}

static int g_ca(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_path(ps, key, value, ps->cfg->ca, sizeof(ps->cfg->ca));
}

static int g_crl(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_path(ps, key, value, ps->cfg->crl, sizeof(ps->cfg->crl));
}

static int g_cert_warn_days(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_uint(ps, key, value, 0, 3650, &ps->cfg->cert_warn_days);
}

static int add_deny(struct parse_state *ps, const char *key, const char *tok)
{
	return config_add_allow_rule(ps, key, tok, ps->cfg->deny, &ps->cfg->ndeny, "global");
}

/* 'deny' in [global]: certificates refused at connection (same entries as 'allow'). */
static int g_deny(struct parse_state *ps, const char *key, const char *value)
{
	return config_for_each_entry(ps, key, value, add_deny);
}

static int g_max_conn(struct parse_state *ps, const char *key, const char *value)
{
	ps->max_conn_line = ps->line;
	return config_set_uint(ps, key, value, 1, 65536, &ps->cfg->max_connections);
}

static int g_per_host(struct parse_state *ps, const char *key, const char *value)
{
	/* Checked against "max connections" after the parse: it may come later. */
	ps->per_host_line = ps->line;
	return config_set_uint(ps, key, value, 1, 65536, &ps->cfg->max_per_host);
}

static int g_max_unauth(struct parse_state *ps, const char *key, const char *value)
{
	ps->unauth_line = ps->line;
	return config_set_uint(ps, key, value, 1, 65536, &ps->cfg->max_unauth);
}

static int g_max_unauth_per_host(struct parse_state *ps, const char *key, const char *value)
{
	ps->unauth_per_host_line = ps->line;
	return config_set_uint(ps, key, value, 1, 65536, &ps->cfg->max_unauth_per_host);
}

static int g_handshake(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_uint(ps, key, value, 1, 300, &ps->cfg->handshake_timeout_s);
}

static int g_idle(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_uint(ps, key, value, 1, 86400, &ps->cfg->idle_timeout_s);
}

/* 0: no drain, the sessions are asked to end at once. At most an hour. */
static int g_drain(struct parse_state *ps, const char *key, const char *value)
{
	if (parse_duration_ms(value, 3600 * 1000, &ps->cfg->drain_timeout_ms) < 0) {
		return fail(ps, "bad '%s' value '%s' (0 to 1h: seconds, or with ms, s, m or h)",
			    key, ESC(value));
	}
	return 0;
}

static int g_hash_threads(struct parse_state *ps, const char *key, const char *value)
{
	unsigned n = 0;
	int r;

	if (!strcmp(value, "auto")) {
		ps->cfg->hash_threads = -1;
		return 0;
	}
	r = config_set_uint(ps, key, value, 0, ENGINE_HASH_THREADS_MAX, &n);
	if (r >= 0) {
		ps->cfg->hash_threads = (int)n;
	}
	return r;
}

static int g_tos(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_tos(ps, key, value, &ps->cfg->tos);
}

static int g_partial_max_age(struct parse_state *ps, const char *key, const char *value)
{
	/* 0: kept until resumed; at most ten years. */
	return config_set_uint(ps, key, value, 0, 10u * 366 * 86400, &ps->cfg->partial_max_age_s);
}

static int g_budget(struct parse_state *ps, const char *key, const char *value)
{
	ps->budget_line = ps->line;
	return config_set_size(ps, key, value, &ps->cfg->memory_budget);
}

static int g_pool(struct parse_state *ps, const char *key, const char *value)
{
	ps->pool_line = ps->line;
	return config_set_size(ps, key, value, &ps->cfg->pool_size);
}

/* Two at least, as the engine's ring; at most what OPEN may ask for. */
static int g_max_slots(struct parse_state *ps, const char *key, const char *value)
{
	ps->max_slots_line = ps->line;
	return config_set_uint(ps, key, value, 2, PROTO_MAX_SLOTS, &ps->cfg->max_slots);
}

static int g_log_level(struct parse_state *ps, const char *key, const char *value)
{
	static const struct parse_enum_name levels[] = {
		{ "error", LOG_ERR }, { "warning", LOG_WARNING }, { "notice", LOG_NOTICE },
		{ "info", LOG_INFO }, { "debug", LOG_DEBUG },
	};

	if (parse_enum(value, levels, ARRAY_SIZE(levels), true, &ps->cfg->log_level) < 0) {
		return fail(ps, "bad '%s' '%s' (error, warning, notice, info or debug)", key,
			    ESC(value));
	}
	return 0;
}

static int g_encryption(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_encryption(ps, key, value, &ps->cfg->encryption);
}

/* "cipher": auto, or a seal suite by name (lane_seal_suite_name). */
static int g_cipher(struct parse_state *ps, const char *key, const char *value)
{
	enum lane_seal_suite suite;

	if (!strcmp(value, "auto")) {
		ps->cfg->seal_suite = 0;
		return 0;
	}
	if (lane_seal_suite_parse(value, &suite) < 0) {
		return fail(ps,
			    "bad '%s' '%s' (auto, aes-256-gcm, aes-128-gcm or chacha20-poly1305)",
			    key, ESC(value));
	}
	ps->cfg->seal_suite = (int)suite;
	return 0;
}

static int g_lanes_any_source(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_bool(ps, key, value, &ps->cfg->lanes_any_source);
}

/*
 * Daemon rails: one IP address (no port, no name) that is this host's: a
 * UDP socket can bind it. Which RDMA device owns it is found per session.
 */
static int add_rail(struct parse_state *ps, const char *key, const char *value)
{
	struct daemon_config *c = ps->cfg;
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	socklen_t len;
	_cleanup_close_ int fd = -1;

	if (c->nrails >= DAEMON_MAX_RAILS) {
		return fail(ps, "too many '%s' addresses (at most %d)", key, DAEMON_MAX_RAILS);
	}
	if (inet_pton(AF_INET, value, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		len = sizeof(*s4);
	} else if (inet_pton(AF_INET6, value, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		len = sizeof(*s6);
	} else {
		return fail(ps, "bad '%s' address '%s' (expected an IPv4 or IPv6 address, no port)",
			    key, ESC(value));
	}
	fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0) {
		return fail(ps, "'%s' address '%s' is not an address of this host: %s", key,
			    ESC(value), strerror(errno));
	}
	for (size_t i = 0; i < c->nrails; i++) {
		if (memcmp(&c->rails[i], &ss, sizeof(ss)) == 0) {
			return fail(ps, "duplicate '%s' address '%s'", key, ESC(value));
		}
	}
	c->rails[c->nrails++] = ss;
	return 0;
}

/* One or more addresses per line, and the key may repeat. */
static int g_rails(struct parse_state *ps, const char *key, const char *value)
{
	return config_for_each_entry(ps, key, value, add_rail);
}

/* 'allow bench' in [global]: who may run rdmacp bench (same entries as a module's 'allow'). */
static int add_bench_allow(struct parse_state *ps, const char *key, const char *tok)
{
	return config_add_allow_rule(ps, key, tok, ps->cfg->bench_allow, &ps->cfg->nbench_allow,
				     "global");
}

static int g_allow_bench(struct parse_state *ps, const char *key, const char *value)
{
	return config_for_each_entry(ps, key, value, add_bench_allow);
}

static int add_relay_to(struct parse_state *ps, const char *key, const char *tok)
{
	return config_add_host_pattern(ps, key, tok, ps->cfg->relay_to, &ps->cfg->nrelay_to,
				       "global");
}

/* 'relay to' in [global]: where modules with 'relay = yes' and no 'relay to' may relay. */
static int g_relay_to(struct parse_state *ps, const char *key, const char *value)
{
	return config_for_each_entry(ps, key, value, add_relay_to);
}

static int g_relay_cert(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_path(ps, key, value, ps->cfg->relay_cert, sizeof(ps->cfg->relay_cert));
}

static int g_relay_key(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_path(ps, key, value, ps->cfg->relay_key, sizeof(ps->cfg->relay_key));
}

/* The client binary run for a relayed push's next hop: a file this daemon can execute. */
static int g_relay_client(struct parse_state *ps, const char *key, const char *value)
{
	int r =
	    config_set_path(ps, key, value, ps->cfg->relay_client, sizeof(ps->cfg->relay_client));

	if (r < 0) {
		return r;
	}
	if (value[0] != '/') {
		return fail(ps, "'%s' must be an absolute path, not '%s'", key, ESC(value));
	}
	if (access(value, X_OK) < 0) {
		return fail(ps, "'%s' %s is not executable: %s", key, ESC(value), strerror(errno));
	}
	return 0;
}

/* A relay child's slow-hop window (slowhop.h): 0 never cuts a hop out for slowness. */
static int g_relay_slow(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_uint(ps, key, value, 0, SLOWHOP_MAX_S, &ps->cfg->relay_slow_s);
}

const struct key_handler config_global_keys[] = {
	{ "listen", true, g_listen },
	{ "cert", false, g_cert },
	{ "key", false, g_key },
	{ "ca", false, g_ca },
	{ "max connections", false, g_max_conn },
	{ "max connections per host", false, g_per_host },
	{ "max unauthenticated", false, g_max_unauth },
	{ "max unauthenticated per host", false, g_max_unauth_per_host },
	{ "handshake timeout", false, g_handshake },
	{ "idle timeout", false, g_idle },
	{ "drain timeout", false, g_drain },
	{ "hash threads", false, g_hash_threads },
	{ "partial max age", false, g_partial_max_age },
	{ "memory budget", false, g_budget },
	{ "pool size", false, g_pool },
	{ "max slots", false, g_max_slots },
	{ "log level", false, g_log_level },
	{ "allow bench", true, g_allow_bench },
	{ "encryption", false, g_encryption },
	{ "cipher", false, g_cipher },
	{ "lanes from other addresses", false, g_lanes_any_source },
	{ "tos", false, g_tos },
	{ "rails", true, g_rails },
	{ "crl", false, g_crl },
	{ "deny", true, g_deny },
	{ "cert warn days", false, g_cert_warn_days },
	{ "relay to", true, g_relay_to },
	{ "relay certificate", false, g_relay_cert },
	{ "relay key", false, g_relay_key },
	{ "relay client", false, g_relay_client },
	{ "relay slow time", false, g_relay_slow },
};

const size_t config_nglobal_keys = ARRAY_SIZE(config_global_keys);
_Static_assert(ARRAY_SIZE(config_global_keys) <= 32, "'seen' is a 32-bit mask");
