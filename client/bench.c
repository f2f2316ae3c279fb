/* SPDX-License-Identifier: MIT */
/*
 * rdmacp bench HOST: the data path alone, memory to memory. The client is
 * the sender of a seeded pattern (engine_bench.c), the daemon checks every
 * chunk and drops it; no disk on either side. Throughput per lane and in
 * total, as text or one --json object.
 */
#include <errno.h>
#include <inttypes.h>
#include <openssl/rand.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "daemon_conn.h"
#include "engine.h"
#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "output.h"
#include "xport.h"

static volatile sig_atomic_t bench_interrupted;

static void on_signal(int sig)
{
	(void)sig;
	bench_interrupted = 1;
}

/* HOST or [V6] (a trailing ':' is allowed: HOST:). */
static int parse_bench_host(const char *arg, struct remote *ret)
{
	size_t n = strlen(arg);

	if (n == 0 || n >= sizeof(ret->host)) {
		return -EINVAL;
	}
	snprintf(ret->host, sizeof(ret->host), "%s", arg);
	if (ret->host[n - 1] == ':' && (n < 2 || ret->host[n - 2] != ':')) {
		ret->host[--n] = '\0';
	}
	if (ret->host[0] == '[') {
		if (n < 3 || ret->host[n - 1] != ']') {
			return -EINVAL;
		}
		memmove(ret->host, ret->host + 1, n - 2);
		ret->host[n - 2] = '\0';
	}
	return ret->host[0] && !strchr(ret->host, '/') ? 0 : -EINVAL;
}

static double gbit(uint64_t bytes, double secs)
{
	return secs > 0 ? (double)bytes * 8 / secs / 1e9 : 0;
}

struct bench_result {
	const char *host;
	const char *transport;
	unsigned lanes;
	uint32_t chunk, slots;
	uint64_t size;
	enum lane_seal_suite suite; /* the lanes' AEAD; 0: clear */
	const struct engine_stats *st;
	int rc;
	const char *error;
};

static void print_json(const struct bench_result *b)
{
	const struct engine_stats *st = b->st;

	printf("{\"event\":\"bench\",\"host\":");
	output_json_string(stdout, b->host);
	printf(",\"transport\":");
	if (b->transport) {
		output_json_string(stdout, b->transport);
	} else {
		printf("null"); /* refused before the lanes were set up */
	}
	printf(",\"lanes\":%u,\"chunk_size\":%" PRIu32 ",\"slots\":%" PRIu32 ",\"size\":%" PRIu64
	       ",\"encryption\":\"%s\"",
	       b->lanes, b->chunk, b->slots, b->size,
	       b->suite ? lane_seal_suite_name(b->suite) : "none");
	if (st) {
		printf(",\"bytes\":%" PRIu64 ",\"seconds\":%.6f,\"bytes_per_second\":%.0f"
		       ",\"gbit_per_second\":%.3f,\"verified\":%s,\"per_lane\":[",
		       st->bytes, st->data_seconds,
		       st->data_seconds > 0 ? (double)st->bytes / st->data_seconds : 0.0,
		       gbit(st->bytes, st->data_seconds), b->rc == 0 ? "true" : "false");
		for (unsigned i = 0; i < b->lanes; i++) {
			printf("%s{\"lane\":%u,\"bytes\":%" PRIu64 ",\"gbit_per_second\":%.3f}",
			       i ? "," : "", i, st->lane_bytes[i],
			       gbit(st->lane_bytes[i], st->data_seconds));
		}
		printf("]");
	}
	if (b->error) {
		printf(",\"error\":");
		output_json_string(stdout, b->error);
	}
	printf(",\"exit\":%d}\n", b->rc);
	fflush(stdout);
}

static void print_text(const struct bench_result *b)
{
	const struct engine_stats *st = b->st;
	double gib = (double)st->bytes / (1u << 30);

	printf("bench %s: %.2f GiB over %u %s lane%s%s%s%s, chunk %" PRIu32 " KiB, %" PRIu32
	       " slots, every chunk checked by the daemon\n",
	       b->host, gib, b->lanes, b->transport, b->lanes == 1 ? "" : "s",
	       b->suite ? " (encrypted, " : "", b->suite ? lane_seal_suite_title(b->suite) : "",
	       b->suite ? ")" : "", b->chunk >> 10, b->slots);
	for (unsigned i = 0; i < b->lanes; i++) {
		printf("  lane %2u: %8.2f GiB  %8.2f Gbit/s\n", i,
		       (double)st->lane_bytes[i] / (1u << 30),
		       gbit(st->lane_bytes[i], st->data_seconds));
	}
	printf("  total  : %8.2f GiB  %8.2f Gbit/s  (%.2f GiB/s, %.3f s)\n", gib,
	       gbit(st->bytes, st->data_seconds),
	       st->data_seconds > 0 ? gib / st->data_seconds : 0.0, st->data_seconds);
}

/* Send BENCH; OPEN_OK back, or the daemon's refusal as an exit code. */
static int bench_open(struct daemon_conn *s, uint64_t seed, struct msg *ret, char *err,
		      size_t errlen)
{
	struct msg m = { .type = MSG_BENCH };
	char esc[1024];
	int r;

	r = daemon_conn_pick_transport(s, &m.u.bench.transport);
	if (r != 0) {
		return r;
	}
	client_fit_link(s, m.u.bench.transport);
	r = client_fit(s->o, PROTO_DIR_PUSH, &m.u.bench.transport, &s->fit);
	if (r != 0) {
		return r;
	}
	s->have_fit = true;
	/* Sealed lanes as a copy's, from a daemon that takes BENCH's encrypt byte. */
	r = daemon_conn_encryption_wish(s, PROTO_CAP_BENCH_SEAL, &m.u.bench.transport);
	if (r != 0) {
		return r;
	}
	m.u.bench.encrypt = s->encrypt_wish;
	m.u.bench.lanes = (uint8_t)s->o->lanes;
	m.u.bench.chunk_size = s->o->chunk_size;
	m.u.bench.slots = s->o->slots;
	m.u.bench.bytes = s->o->bench_size;
	m.u.bench.seed = seed;
	r = chan_send(&s->chan, &m);
	if (r >= 0) {
		r = chan_recv(&s->chan, ret, s->o->idle_timeout_s * 1000);
	}
	if (r < 0) {
		log_error("%s: control channel: %s", s->rem->host,
			  r == -EPIPE || r == -ECONNRESET ? "connection closed" : strerror(-r));
		return r == -EPIPE || r == -ECONNRESET ? EXIT_CONNECT : EXIT_PROTOCOL;
	}
	if (ret->type == MSG_ERROR) {
		snprintf(err, errlen, "%s", ret->u.error.text);
		log_error("%s: %s", s->rem->host, log_escape(ret->u.error.text, esc, sizeof(esc)));
		if (ret->u.error.code == PERR_TRANSPORT &&
		    m.u.bench.transport == XPORT_KIND_VERBS) {
			return EXIT_NO_DEVICE;
		}
		return exit_for_perr(ret->u.error.code);
	}
	if (ret->type != MSG_OPEN_OK) {
		log_error("%s: protocol error: unexpected %s", s->rem->host,
			  proto_type_name(ret->type));
		msg_clear(ret);
		return EXIT_PROTOCOL;
	}
	r = daemon_conn_check_lanes(s, &ret->u.open_ok);
	if (r != 0) {
		msg_clear(ret);
	}
	return r;
}

/* The engine's failure as an exit code: the daemon's word, or ours. */
static int bench_exit(int r, uint32_t code)
{
	if (bench_interrupted) {
		return EXIT_INTERRUPTED;
	}
	if (r == -ECONNRESET || r == -EPIPE) {
		return EXIT_TRANSPORT;
	}
	if (r != -EREMOTEIO && code == PERR_INTERNAL) {
		return EXIT_LOCAL_IO;
	}
	return exit_for_perr(code);
}

static int bench_run(struct daemon_conn *s, struct bench_result *res, struct engine_stats *st,
		     char *err, size_t errlen)
{
	struct msg ok = { 0 };
	struct engine_params ep = { ENGINE_NO_FEEDS };
	struct xport *x = NULL;
	uint32_t code = 0;
	uint64_t seed;
	int rc, r;

	if (RAND_bytes((uint8_t *)&seed, sizeof(seed)) != 1) {
		log_error("no randomness for the bench pattern");
		return EXIT_LOCAL_IO;
	}
	rc = bench_open(s, seed, &ok, err, errlen);
	if (rc != 0) {
		return rc;
	}
	rc = daemon_conn_connect_data(s, &ok.u.open_ok, LANE_SEAL_BENCH, &ep, &x);
	if (rc != 0) {
		return rc;
	}
	res->transport = x->ops->name;
	res->suite = lane_seal_lanes_suite(ok.u.open_ok.lanes_sealed);
	res->lanes = ok.u.open_ok.lanes;
	res->chunk = ok.u.open_ok.chunk_size;
	res->slots = ok.u.open_ok.slots;
	ep.role = ENGINE_BENCH_SENDER;
	ep.chan = &s->chan;
	ep.x = x;
	ep.chunk_size = ok.u.open_ok.chunk_size;
	ep.slots = ok.u.open_ok.slots;
	ep.pool_chunks = MAX(s->o->pool_chunks, 2u);
	ep.idle_timeout_ms = s->o->idle_timeout_s * 1000;
	ep.busy_poll = s->o->busy_poll;
	ep.peer_caps = s->hello.caps;
	ep.bench_bytes = s->o->bench_size;
	ep.bench_seed = seed;
	ep.stop = &bench_interrupted;
	/* Test hook: the second chunk carries the first one's bytes (the daemon must notice). */
	ep.faults = getenv("RDMACP_TEST_BENCH_MISPLACE") ? ENGINE_FAULT_BENCH_MISPLACE : 0;
	r = engine_run(&ep, st, &code, err, errlen);
	explicit_bzero(ep.seal_secret, sizeof(ep.seal_secret));
	x->ops->destroy(x);
	res->st = st;
	if (r < 0) {
		char esc[1200];

		log_error("bench failed: %s", log_escape(err, esc, sizeof(esc)));
		return bench_exit(r, code);
	}
	return 0;
}

int cmd_bench(struct client_opts *o, char **args, int nargs)
{
	struct remote rem = { 0 };
	struct daemon_conn s = { .o = o, .rem = &rem };
	struct engine_stats st = { 0 };
	struct bench_result res = { .size = o->bench_size };
	char err[1200] = "";
	int rc;

	if (nargs != 1 || parse_bench_host(args[0], &rem) < 0) {
		log_error("usage: rdmacp bench [--size S] [--lanes N] [--chunk-size S] "
			  "[--transport T] [--json] HOST");
		return EXIT_USAGE;
	}
	res.host = rem.host;
	res.lanes = o->lanes;
	res.chunk = o->chunk_size;
	res.slots = o->slots;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	rc = daemon_conn_open(&s);
	if (rc == 0 && !(s.hello.caps & PROTO_CAP_BENCH)) {
		log_error("%s: the daemon is too old for bench (it has no memory-to-memory mode): "
			  "upgrade it",
			  rem.host);
		snprintf(err, sizeof(err), "the daemon is too old for bench");
		rc = EXIT_VERSION;
	} else if (rc == 0) {
		rc = bench_run(&s, &res, &st, err, sizeof(err));
	}
	daemon_conn_close(&s, rc == 0);
	res.rc = rc;
	res.error = rc == 0 ? NULL : err[0] ? err : "failed";
	if (o->json) {
		print_json(&res);
	} else if (rc == 0 && o->verbose >= 0) {
		print_text(&res);
	}
	return rc;
}
