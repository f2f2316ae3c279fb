/* SPDX-License-Identifier: MIT */
/*
 * A fan-out push on the control channel (fanout.h): MSG_RELAY with the
 * chain right before OPEN, and after the push's END the MSG_RELAY_RESULT of
 * every destination of the chain, checked before they are believed.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "chan.h"
#include "daemon_conn.h"
#include "exitcodes.h"
#include "fanout.h"
#include "log.h"

/*
 * The fan-out MSG_RELAY says: f's for a list of two or more to a daemon
 * that lays out trees, else a chain (a daemon from before trees relays the
 * subtree below it as a chain: the same destinations, deeper).
 */
static unsigned relay_fanout(const struct daemon_conn *s, const struct fanout *f, size_t count)
{
	if (f->fanout <= 1 || count < 2) {
		return 1;
	}
	if (!(s->hello.caps & PROTO_CAP_RELAY_TREE)) {
		log_notice("%s relays as a chain only (rdmacpd too old): the %zu destinations "
			   "after it go as a chain",
			   s->rem->host, count);
		return 1;
	}
	return f->fanout;
}

int fanout_send_relay(struct daemon_conn *s, const struct fanout *f)
{
	struct proto_relay_hop hops[PROTO_MAX_RELAY_HOPS];
	const struct fanout_dest *self = &f->dests[f->first];
	struct msg m = { .type = MSG_RELAY };
	size_t count = f->n - f->first - 1;
	int r;

	/* The last destination alone, pushed to by the original client: a plain push. */
	if (count == 0 && !f->relay_mode) {
		return 0;
	}
	if (!(s->hello.caps & PROTO_CAP_RELAY)) {
		log_error("%s cannot relay (rdmacpd too old or relaying off)", s->rem->host);
		return EXIT_REFUSED;
	}
	assert(count <= PROTO_MAX_RELAY_HOPS);
	for (size_t i = 0; i < count; i++) {
		const struct fanout_dest *d = &f->dests[f->first + 1 + i];

		hops[i] = (struct proto_relay_hop){
			.host = (char *)d->rem.host,
			.port = d->port,
			.path = (char *)d->rem.path,
			.ticket = d->ticket,
			.ticket_len = (uint32_t)d->ticket_len,
		};
	}
	/* A relay child speaks for the original client: the ticket it made for this hop. */
	if (f->relay_mode) {
		m.u.relay.self_ticket = self->ticket;
		m.u.relay.self_ticket_len = (uint32_t)self->ticket_len;
	}
	m.u.relay.count = (uint8_t)count;
	m.u.relay.hops = hops;
	m.u.relay.fanout = (uint8_t)relay_fanout(s, f, count);
	r = chan_send(&s->chan, &m);
	if (r < 0) {
		log_error("%s: control channel: %s", s->rem->host, strerror(-r));
		return r == -EPIPE || r == -ECONNRESET ? EXIT_CONNECT : EXIT_PROTOCOL;
	}
	return 0;
}

int fanout_take_result(struct fanout *f, const struct msg_relay_result *res)
{
	size_t count = f->n - f->first - 1;
	struct fanout_dest *d;

	if (res->index < 1 || res->index > count || res->status < PROTO_RELAY_COPIED ||
	    res->status > PROTO_RELAY_STATUS_MAX) {
		return -EBADMSG;
	}
	d = &f->dests[f->first + res->index];
	if (d->status != 0) {
		return -EBADMSG;
	}
	d->status = res->status;
	/* A copied destination exits 0; one that failed never does. */
	d->exit_code = res->status == PROTO_RELAY_COPIED ? EXIT_OK
		       : res->exit_code != EXIT_OK	 ? res->exit_code
							 : EXIT_PROTOCOL;
	d->files_ok = res->files_ok;
	d->files_failed = res->files_failed;
	d->bytes = res->bytes;
	snprintf(d->text, sizeof(d->text), "%s", res->text ? res->text : "");
	return 0;
}

void fanout_read_results(struct daemon_conn *s, struct fanout *f)
{
	size_t count = f->n - f->first - 1;
	char esc[256];

	for (size_t i = 0; i < count; i++) {
		struct msg m = { 0 };
		int r = chan_recv(&s->chan, &m, s->o->idle_timeout_s * 1000);

		/* The daemon's keepalive while a hop further on is still busy. */
		if (r >= 0 && m.type == MSG_PING) {
			msg_clear(&m);
			i--;
			continue;
		}
		if (r >= 0 && m.type != MSG_RELAY_RESULT) {
			log_error("%s: protocol error: %s where a relay result was due",
				  s->rem->host,
				  log_escape(proto_type_name(m.type), esc, sizeof(esc)));
			msg_clear(&m);
			return;
		}
		if (r >= 0) {
			r = fanout_take_result(f, &m.u.relay_result);
			msg_clear(&m);
		}
		if (r < 0) {
			log_error("%s: relay results: %s", s->rem->host,
				  r == -EBADMSG ? "a result for no destination of the chain"
						: strerror(-r));
			return;
		}
	}
}
