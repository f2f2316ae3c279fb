/* SPDX-License-Identifier: MIT */
/*
 * A relayed push in its session (serve_internal.h; docs/SECURITY.md,
 * "Relays"): the MSG_RELAY kept for the push OPEN right after it; at that
 * OPEN the ticket for this daemon checked (a relay child's RELAY carries
 * one; the original client's none) and the module policy's word on the
 * chain, on behalf of the ticket's client; the relay credentials read while
 * the session is still privileged; the relay child started (serve_relay_child.c)
 * and the feed given to the engine; after the engine, the child's results,
 * one MSG_RELAY_RESULT per destination of the chain.
 */
#include "serve_internal.h"
#include "serve_relay.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/x509.h>

#include "exitcodes.h"
#include "hello.h"
#include "log.h"
#include "macro.h"
#include "relay_feed.h"
#include "relay_ticket.h"
#include "tls_keys.h"

/* How long a child that closed its feed may take to exit before it is killed. */
#define RELAY_REAP_MS 5000

/* ---- the chain, as MSG_RELAY brought it ---- */

static void *memdup_or_null(const void *p, size_t n)
{
	void *q = malloc(n ? n : 1);

	if (q && n) {
		memcpy(q, p, n);
	}
	return q;
}

static void chain_free(struct msg_relay *ch)
{
	struct msg m = { .type = MSG_RELAY };

	m.u.relay = *ch;
	msg_clear(&m);
	memset(ch, 0, sizeof(*ch));
}

/* A deep copy of src (what decode allocated is the message's, freed after the request). */
static int chain_copy(const struct msg_relay *src, struct msg_relay *dst)
{
	memset(dst, 0, sizeof(*dst));
	dst->self_ticket = memdup_or_null(src->self_ticket, src->self_ticket_len);
	dst->self_ticket_len = src->self_ticket_len;
	dst->hops = calloc(src->count ? src->count : 1, sizeof(*dst->hops));
	if (!dst->self_ticket || !dst->hops) {
		chain_free(dst);
		return -ENOMEM;
	}
	dst->count = src->count;
	dst->fanout = src->fanout;
	for (size_t i = 0; i < src->count; i++) {
		const struct proto_relay_hop *h = &src->hops[i];
		struct proto_relay_hop *d = &dst->hops[i];

		d->host = strdup(h->host);
		d->path = strdup(h->path);
		d->ticket = memdup_or_null(h->ticket, h->ticket_len);
		d->port = h->port;
		d->ticket_len = h->ticket_len;
		if (!d->host || !d->path || !d->ticket) {
			chain_free(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

bool serve_relay_pending(const struct conn *c)
{
	return c->relay != NULL;
}

void serve_relay_free(struct conn *c)
{
	struct serve_relay *rl = c->relay;

	if (!rl) {
		return;
	}
	if (rl->pid > 0) {
		kill(rl->pid, SIGKILL);
		while (waitpid(rl->pid, NULL, 0) < 0 && errno == EINTR) {
		}
	}
	if (rl->sock >= 0) {
		close(rl->sock);
	}
	serve_relay_child_close_creds(rl);
	chain_free(&rl->chain);
	X509_free(rl->client_cert);
	free(rl);
	c->relay = NULL;
	c->on_behalf = NULL;
}

int serve_relay_request(struct conn *c, const struct msg *m)
{
	struct serve_relay *rl;

	if (!(hello_daemon_caps() & PROTO_CAP_RELAY)) {
		return serve_refuse(c, PERR_PROTOCOL,
				    "unexpected RELAY: this daemon does not relay");
	}
	if (m->u.relay.fanout > 1 && !(hello_daemon_caps() & PROTO_CAP_RELAY_TREE)) {
		return serve_refuse(c, PERR_PROTOCOL,
				    "unexpected RELAY tree: this daemon relays as a chain only");
	}
	if (c->relay) {
		return serve_refuse(c, PERR_PROTOCOL, "one RELAY per OPEN");
	}
	rl = calloc(1, sizeof(*rl));
	if (!rl || chain_copy(&m->u.relay, &rl->chain) < 0) {
		free(rl);
		return serve_refuse(c, PERR_INTERNAL, "out of memory");
	}
	rl->sock = -1;
	for (size_t i = 0; i < RELAY_CRED_N; i++) {
		rl->cred[i] = -1;
	}
	c->relay = rl;
	log_debug("%s: RELAY: %u hops after this one, fan-out %u%s", c->peer, rl->chain.count,
		  rl->chain.fanout > 1 ? rl->chain.fanout : 1,
		  rl->chain.self_ticket_len ? ", with a ticket for this one" : "");
	return 0;
}

/* ---- at the OPEN: the ticket, the policy ---- */

/*
 * The ticket a relay child brought for this daemon: made by a client the CA
 * vouches for, in its time, for this very OPEN (relay_ticket_admits_open).
 * rl->client_cert is its client.
 */
static int check_self_ticket(struct conn *c, struct serve_relay *rl, const struct msg_open *o)
{
	struct relay_ticket t;
	char why[512];
	X509 *cert = NULL;
	int r;

	r = relay_ticket_check(tls_ctx_store(c->tls_ctx), rl->chain.self_ticket,
			       rl->chain.self_ticket_len, (int64_t)time(NULL), &t, &cert, why,
			       sizeof(why));
	if (r < 0) {
		return serve_refuse(c, PERR_AUTH, "relay ticket refused: %s", why);
	}
	rl->client_cert = cert;
	if (relay_ticket_admits_open(&t, o->path, o->flags, why, sizeof(why)) < 0) {
		return serve_refuse(c, PERR_AUTH, "relay ticket refused: %s", why);
	}
	return 0;
}

int serve_relay_open(struct conn *c, const struct msg_open *o, struct policy_request *rq)
{
	struct serve_relay *rl = c->relay;
	int r;

	if (!rl) {
		return 0;
	}
	if (o->direction != PROTO_DIR_PUSH || (o->flags & PROTO_OPEN_DRY_RUN)) {
		return serve_refuse(c, PERR_PROTOCOL,
				    "RELAY must come right before a push's OPEN "
				    "(a pull or a dry run is not relayed)");
	}
	if (rl->chain.self_ticket_len) {
		r = check_self_ticket(c, rl, o);
		if (r < 0) {
			return r;
		}
	}
	/* The policy decides the chain, and on whose behalf when a ticket says (serve_decide). */
	rq->relay = &rl->chain;
	c->on_behalf = rl->chain.self_ticket_len ? rl->client_cert : NULL;
	return 0;
}

/* Who this push is for, and through whom: rl->note, and the log says it now. */
static void relay_note(struct conn *c, struct serve_relay *rl)
{
	struct policy_peer peer = serve_conn_peer(c);
	char relay[320], client[320];

	if (!rl->chain.self_ticket_len) {
		if (rl->chain.count) {
			log_info("%s (%s): relaying on to %u destination%s, first %s:%u", c->peer,
				 c->id, rl->chain.count, rl->chain.count == 1 ? "" : "s",
				 log_escape(rl->chain.hops[0].host, client, sizeof(client)),
				 rl->chain.hops[0].port);
		}
		return;
	}
	if (policy_peer_on_behalf(&peer, rl->client_cert) < 0) {
		return;
	}
	policy_relay_names(&peer, relay, sizeof(relay), client, sizeof(client));
	snprintf(rl->note, sizeof(rl->note), " (relayed by %s for %s)", relay, client);
	log_info("%s (%s): relayed by %s for %s%s", c->peer, c->id, relay, client,
		 rl->chain.count ? ", relaying on" : "");
}

void serve_relay_granted(struct conn *c)
{
	struct serve_relay *rl = c->relay;
	X509 *peer;

	if (!rl) {
		return;
	}
	if (!rl->client_cert) {
		peer = tls_peer_cert(c->tls);
		if (peer && X509_up_ref(peer) == 1) {
			rl->client_cert = peer;
		}
	}
	relay_note(c, rl);
}

const char *serve_relay_note(const struct conn *c)
{
	return c->relay ? c->relay->note : "";
}

int serve_relay_prepare(struct conn *c, const struct policy_grant *gr)
{
	struct serve_relay *rl = c->relay;
	char why[PATH_MAX + 128];
	int r;

	if (!rl || rl->chain.count == 0) {
		return 0;
	}
	r = serve_relay_child_prepare(c->cfg, rl, gr->m->run_uid, gr->m->run_gid, why, sizeof(why));
	if (r < 0) {
		log_error("%s (%s): %s", c->peer, c->id, why);
		return serve_refuse(c, PERR_UNAVAILABLE, "this daemon cannot relay now");
	}
	return 0;
}

/* ---- the relay child ---- */

/* FEED_START: the chain after this daemon, and whose push it is. */
static int send_start(struct serve_relay *rl)
{
	struct relay_feed_msg m = { .type = RELAY_FEED_START };
	_cleanup_free_ uint8_t *der = NULL;
	int n = rl->client_cert ? i2d_X509(rl->client_cert, &der) : 0;

	if (n < 0 || (size_t)n > RELAY_FEED_MAX_CERT || rl->chain.count > PROTO_MAX_RELAY_HOPS) {
		return -EINVAL;
	}
	m.u.start.count = rl->chain.count;
	m.u.start.hops = rl->chain.hops;
	m.u.start.client_cert = der;
	m.u.start.client_cert_len = (uint32_t)n;
	m.u.start.fanout = rl->chain.fanout > 1 ? rl->chain.fanout : 1;
	return relay_feed_send(rl->sock, &m, -1);
}

int serve_relay_spawn(struct conn *c, const struct msg_open *o)
{
	struct serve_relay *rl = c->relay;
	char why[PATH_MAX + 128];
	int r;

	if (!rl || rl->chain.count == 0) {
		return 0;
	}
	r = serve_relay_child_spawn(rl, o, why, sizeof(why));
	if (r >= 0) {
		r = send_start(rl);
		/* A child already gone says so in its exit status, after the engine. */
		if (r == -EPIPE || r == -ECONNRESET) {
			r = 0;
		}
		if (r < 0) {
			snprintf(why, sizeof(why), "relay feed: START: %s", strerror(-r));
		}
	}
	if (r < 0) {
		log_error("%s (%s): %s", c->peer, c->id, why);
		return serve_refuse(c, PERR_INTERNAL, "cannot start the relay client");
	}
	log_debug("%s: relay child %d: %s", c->peer, (int)rl->pid, rl->client);
	return 0;
}

int serve_relay_feed(const struct conn *c)
{
	return c->relay && c->relay->pid > 0 ? c->relay->sock : -1;
}

/* ---- after the engine: the results ---- */

/* What the child said of each destination (index 1..count); status 0: nothing yet. */
struct relay_results {
	struct relay_feed_result r[PROTO_MAX_RELAY_HOPS];
};

static void take_result(struct conn *c, const struct serve_relay *rl, struct relay_results *res,
			const struct relay_feed_result *in)
{
	if (in->index < 1 || in->index > rl->chain.count || in->status < 1 ||
	    in->status > PROTO_RELAY_STATUS_MAX) {
		log_notice("%s (%s): relay client: a result for destination %u of %u ignored",
			   c->peer, c->id, in->index, rl->chain.count);
		return;
	}
	if (res->r[in->index - 1].status == 0) {
		res->r[in->index - 1] = *in;
	}
}

/*
 * A PING to the client every RELAY_KEEPALIVE_S seconds the chain is quiet:
 * the client's wait for the results (after its END) is bounded by its idle
 * timeout, and a hop behind a slow one may finish long after the first.
 */
#define RELAY_KEEPALIVE_S 10

/*
 * The child's records until it closes its end (its results); SIGTERM is
 * passed on; the client kept alive (live: the session did not fail).
 */
static void read_results(struct conn *c, struct serve_relay *rl, struct relay_results *res,
			 bool live)
{
	bool told = false;
	unsigned quiet = 0;

	for (;;) {
		struct pollfd p = { .fd = rl->sock, .events = POLLIN };
		struct relay_feed_msg m;
		int fd = -1, r;

		if (*c->stop && !told) {
			kill(rl->pid, SIGTERM);
			told = true;
		}
		r = relay_feed_recv(rl->sock, &m, &fd);
		if (r == -EAGAIN) {
			if (poll(&p, 1, 1000) == 0 && live && ++quiet % RELAY_KEEPALIVE_S == 0) {
				struct msg ping = { .type = MSG_PING };

				chan_send(&c->chan, &ping);
			}
			continue;
		}
		quiet = 0;
		if (r <= 0) {
			/* A child gone with records unread resets the feed: its exit says why. */
			if (r < 0 && r != -ECONNRESET) {
				log_notice("%s (%s): relay feed: %s", c->peer, c->id, strerror(-r));
			}
			return;
		}
		if (fd >= 0) {
			close(fd);
		}
		if (m.type == RELAY_FEED_RESULT) {
			take_result(c, rl, res, &m.u.result);
		}
		relay_feed_msg_free(&m);
	}
}

/* A session that failed tells its child, which stops and still reports. */
static void send_abort(struct serve_relay *rl, const char *text)
{
	struct relay_feed_msg m = { .type = RELAY_FEED_ABORT };

	m.u.abort.code = PERR_INTERNAL;
	snprintf(m.u.abort.text, sizeof(m.u.abort.text), "%s", text);
	relay_feed_send(rl->sock, &m, -1);
}

/* One destination's result to our upstream, and in the log. */
static int send_result(struct conn *c, const struct serve_relay *rl, unsigned index,
		       const struct relay_feed_result *in, bool send)
{
	static const char *const words[] = { "?", "copied", "partial", "failed", "unreached" };
	struct msg out = { .type = MSG_RELAY_RESULT };
	struct msg_relay_result *o = &out.u.relay_result;
	char host[PROTO_MAX_HOST + 1], text[PROTO_MAX_TEXT + 1];
	char esc[4 * sizeof(host)], esc2[4 * sizeof(text)];

	snprintf(host, sizeof(host), "%s", rl->chain.hops[index - 1].host);
	snprintf(text, sizeof(text), "%s", in->text);
	*o = (struct msg_relay_result){ .index = (uint8_t)index,
					.status = in->status,
					.exit_code = in->exit_code,
					.files_ok = in->files_ok,
					.files_failed = in->files_failed,
					.bytes = in->bytes,
					.host = host,
					.text = text };
	log_info("%s (%s): relay destination %u (%s:%u): %s, %llu files, %llu bytes, %llu "
		 "failed%s%s",
		 c->peer, c->id, index, log_escape(host, esc, sizeof(esc)),
		 rl->chain.hops[index - 1].port, words[in->status],
		 (unsigned long long)in->files_ok, (unsigned long long)in->bytes,
		 (unsigned long long)in->files_failed, text[0] ? ": " : "",
		 log_escape(text, esc2, sizeof(esc2)));
	return send ? chan_send(&c->chan, &out) : 0;
}

int serve_relay_finish(struct conn *c, int r)
{
	struct serve_relay *rl = c->relay;
	struct relay_results res = { 0 };
	char how[128];
	int exit_code, rs;

	if (!rl || rl->pid <= 0) {
		return r;
	}
	if (r < 0) {
		send_abort(rl, "the upstream session failed");
	}
	read_results(c, rl, &res, r >= 0);
	serve_relay_child_reap(rl, RELAY_REAP_MS, how, sizeof(how), &exit_code);
	if (how[0]) {
		log_notice("%s (%s): %s", c->peer, c->id, how);
	}
	for (unsigned i = 1; i <= rl->chain.count; i++) {
		struct relay_feed_result *d = &res.r[i - 1];

		if (d->status == 0) {
			d->status = PROTO_RELAY_FAILED;
			d->exit_code = (uint8_t)(exit_code ? exit_code : EXIT_PROTOCOL);
			snprintf(d->text, sizeof(d->text), "%s",
				 how[0] ? how : "the relay client reported nothing for it");
		}
		/* After a failed session the client hears no more: the log has them. */
		rs = send_result(c, rl, i, d, r >= 0);
		if (rs < 0 && r >= 0) {
			r = rs;
		}
	}
	return r;
}
