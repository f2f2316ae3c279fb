/* SPDX-License-Identifier: MIT */
/*
 * BENCH (serve_internal.h): the receiving end of rdmacp bench, memory to
 * memory, no module, no file. The same policy, data path set-up, memory
 * budget and engine as a push, with a ring that is checked and dropped.
 */
#include "serve.h"
#include "serve_internal.h"

#include <errno.h>
#include <pwd.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "privs.h"
#include "session_table.h"

/*
 * A root daemon runs a bench session as DAEMON_DEFAULT_USER, as it runs a
 * module without 'uid': the data path never needs root. A connection that
 * has switched to a module's user already stays that user.
 */
static int become_bench_user(struct conn *c)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	uint64_t kept = 0;
	char err[256];
	int r;

	if (c->switched || geteuid() != 0) {
		return 0;
	}
	if (getpwnam_r(DAEMON_DEFAULT_USER, &pw, buf, sizeof(buf), &res) != 0 || !res) {
		log_error("bench: no user %s to run it as", DAEMON_DEFAULT_USER);
		return serve_refuse(c, PERR_INTERNAL, "bench is unavailable on this daemon");
	}
	r = privs_drop(pw.pw_uid, pw.pw_gid, serve_session_memlock(c->cfg), &kept, err,
		       sizeof(err));
	if (r < 0) {
		log_error("bench: cannot switch to %s: %s", DAEMON_DEFAULT_USER, err);
		serve_refuse(c, PERR_INTERNAL, "bench is unavailable on this daemon");
		return r;
	}
	c->switched = true;
	c->uid = pw.pw_uid;
	c->gid = pw.pw_gid;
	return 0;
}

/* The bench's engine on its lanes x (destroyed here), and its result in the log. */
static int run_bench_engine(struct conn *c, struct engine_params *ep, struct xport *x,
			    const struct lanes *ln)
{
	struct engine_stats st;
	uint32_t code = 0;
	char err[512];
	int r;

	ep->chan = &c->chan;
	ep->x = x;
	ep->idle_timeout_ms = (int)c->cfg->idle_timeout_s * 1000;
	ep->peer_caps = c->peer_caps;
	ep->stop = c->stop;
	r = engine_run(ep, &st, &code, err, sizeof(err));
	explicit_bzero(ep->seal_secret, sizeof(ep->seal_secret));
	x->ops->destroy(x);
	if (r < 0) {
		char esc[4 * sizeof(err)];

		log_notice("%s (%s): bench failed: %s: %s", c->peer, c->id, proto_err_name(code),
			   log_escape(err, esc, sizeof(esc)));
		return r;
	}
	log_info("%s (%s): bench done: %llu bytes checked over %u %s lanes in %.3f s%s%s%s",
		 c->peer, c->id, (unsigned long long)st.bytes, ln->xp.nlanes, ln->ops->name,
		 st.data_seconds, ln->sealed ? ", encrypted (" : "",
		 ln->sealed ? serve_lanes_cipher(ln) : "", ln->sealed ? ")" : "");
	return 0;
}

/*
 * The receiving end of rdmacp bench: the same policy, listener, memory
 * budget and engine as a push, with a ring that is checked and dropped.
 */
static int run_bench_pinned(struct conn *c, const struct msg_bench *b,
			    const struct policy_grant *gr)
{
	/*
	 * BENCH has no flags: its verbs lanes are WRITE WITH IMMEDIATE only.
	 * Sealed lanes as for a copy, under [global]'s "encryption" (a bench
	 * has no module).
	 */
	struct lanes_want w = {
		.transport = b->transport,
		.encrypt = b->encrypt,
		.encrypt_asked = b->encrypt,
		.encryption = gr->encryption,
		.who = "this daemon",
		.purpose = LANE_SEAL_BENCH,
		.lanes = b->lanes,
		.tos = gr->tos,
		.what = "bench",
		.hash_threads = true,
	};
	struct engine_params ep = { ENGINE_NO_FEEDS };
	struct xport *x = NULL;
	struct lanes ln;
	int r;

	ep.role = ENGINE_BENCH_RECEIVER;
	serve_lanes_size(c->cfg, b->chunk_size, b->slots, &ep);
	ep.bench_bytes = b->bytes;
	ep.bench_seed = b->seed;
	ep.faults = getenv("RDMACPD_TEST_FLIP_BYTE") ? ENGINE_FAULT_FLIP_BYTE : 0;
	r = serve_lanes_open(c, &w, &ep, &ln, &x);
	if (r < 0) {
		return r;
	}
	return run_bench_engine(c, &ep, x, &ln);
}

int serve_bench(struct conn *c, const struct msg *m)
{
	const struct msg_bench *b = &m->u.bench;
	struct policy_request rq = { .op = POLICY_BENCH, .encrypt = b->encrypt };
	struct policy_grant gr;
	int r;

	/* Never to a peer that did not announce it: it could not have sent BENCH. */
	if (!(c->peer_caps & PROTO_CAP_BENCH)) {
		chan_send_error(&c->chan, PERR_PROTOCOL, "BENCH from a client without bench");
		return -EBADMSG;
	}
	if (b->encrypt && !(c->peer_caps & PROTO_CAP_BENCH_SEAL)) {
		chan_send_error(&c->chan, PERR_PROTOCOL,
				"BENCH asks for sealed lanes from a client without them");
		return -EBADMSG;
	}
	r = serve_decide(c, &rq, &gr);
	if (r < 0) {
		return r;
	}
	r = become_bench_user(c);
	if (r < 0) {
		return r;
	}
	r = run_bench_pinned(c, b, &gr);
	if (c->sessions) {
		session_table_release(c->sessions);
	}
	return r;
}
