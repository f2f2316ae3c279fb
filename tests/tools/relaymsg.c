/* SPDX-License-Identifier: MIT */
/*
 * relaymsg: a MSG_RELAY payload in hex, with tickets signed as a client
 * signs them (src/relay_ticket.c), for rawpeer's "frame RELAY HEX" step.
 * The integration tests play a relay child (or a client) with it: a ticket
 * for another path, an expired one, one signed by a certificate the daemon's
 * CA does not vouch for. Not a test itself.
 *
 * usage: relaymsg --cert C --key K [--self PATH] [--age SECS] [--flags N]
 *                 [--hop HOST:PORT:PATH]...
 *
 *   --cert/--key  the certificate and key the tickets are signed with (PEM)
 *   --self PATH   a ticket for the receiving daemon, for PATH (a relay
 *                 child's RELAY); without it, none (the original client's)
 *   --age SECS    every ticket issued SECS seconds ago (3601: expired)
 *   --flags N     the OPEN flags the tickets name (default 0)
 *   --hop H:P:PATH  a destination after the receiver, with its ticket
 *
 * Prints the payload's hex on one line; exit 0, or 2 on a usage or setup error.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/pem.h>
#include <openssl/rand.h>

#include "proto/msg.h"
#include "relay_ticket.h"

struct opts {
	EVP_PKEY *key;
	X509 *cert;
	int64_t issued;
	uint32_t flags;
};

static _Noreturn void usage(const char *why)
{
	fprintf(stderr,
		"relaymsg: %s\nusage: relaymsg --cert C --key K [--self PATH] "
		"[--age SECS] [--flags N] [--hop HOST:PORT:PATH]...\n",
		why);
	exit(2);
}

static int make_ticket(const struct opts *op, const char *host, uint16_t port, const char *path,
		       uint8_t **ret, uint32_t *ret_len)
{
	struct relay_ticket t = { .port = port, .open_flags = op->flags };
	size_t len = 0;
	int r;

	snprintf(t.host, sizeof(t.host), "%s", host);
	snprintf(t.path, sizeof(t.path), "%s", path);
	t.issued = op->issued;
	t.expires = op->issued + RELAY_TICKET_LIFE;
	if (RAND_bytes(t.nonce, sizeof(t.nonce)) != 1) {
		return -EIO;
	}
	r = relay_ticket_make(op->key, op->cert, &t, ret, &len);
	*ret_len = (uint32_t)len;
	return r;
}

/* "HOST:PORT:PATH" into hop h, with its ticket. */
static void add_hop(const struct opts *op, char *spec, struct msg_relay *m)
{
	struct proto_relay_hop *h = &m->hops[m->count];
	char *port = strchr(spec, ':');
	char *path = port ? strchr(port + 1, ':') : NULL;

	if (!path || m->count >= PROTO_MAX_RELAY_HOPS) {
		usage("bad --hop (HOST:PORT:PATH) or too many");
	}
	*port++ = '\0';
	*path++ = '\0';
	h->host = spec;
	h->port = (uint16_t)strtoul(port, NULL, 10);
	h->path = path;
	if (make_ticket(op, spec, h->port, path, &h->ticket, &h->ticket_len) < 0) {
		usage("cannot sign a ticket");
	}
	m->count++;
}

static void load(struct opts *op, const char *cert, const char *key)
{
	FILE *f = cert ? fopen(cert, "re") : NULL;

	op->cert = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
	if (f) {
		fclose(f);
	}
	f = key ? fopen(key, "re") : NULL;
	op->key = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
	if (f) {
		fclose(f);
	}
	if (!op->cert || !op->key) {
		usage("cannot read --cert and --key");
	}
}

int main(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "cert", required_argument, 0, 'c' },
		{ "key", required_argument, 0, 'k' },
		{ "self", required_argument, 0, 's' },
		{ "age", required_argument, 0, 'a' },
		{ "flags", required_argument, 0, 'f' },
		{ "hop", required_argument, 0, 'h' },
		{ 0 },
	};
	static struct proto_relay_hop hops[PROTO_MAX_RELAY_HOPS];
	static uint8_t frame[PROTO_HDR_LEN + PROTO_MAX_PAYLOAD];
	struct msg m = { .type = MSG_RELAY };
	struct opts op = { .issued = (int64_t)time(NULL) };
	const char *cert = NULL, *key = NULL, *self = NULL;
	char *hopspec[PROTO_MAX_RELAY_HOPS + 1];
	size_t nhops = 0;
	int c, n;

	while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (c) {
		case 'c':
			cert = optarg;
			break;
		case 'k':
			key = optarg;
			break;
		case 's':
			self = optarg;
			break;
		case 'a':
			op.issued -= strtoll(optarg, NULL, 10);
			break;
		case 'f':
			op.flags = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'h':
			if (nhops > PROTO_MAX_RELAY_HOPS) {
				usage("too many --hop");
			}
			hopspec[nhops++] = optarg;
			break;
		default:
			usage("unknown option");
		}
	}
	load(&op, cert, key);
	m.u.relay.hops = hops;
	for (size_t i = 0; i < nhops; i++) {
		add_hop(&op, hopspec[i], &m.u.relay);
	}
	if (self && make_ticket(&op, "self", 7471, self, &m.u.relay.self_ticket,
				&m.u.relay.self_ticket_len) < 0) {
		usage("cannot sign the self ticket");
	}
	n = msg_encode(&m, frame, sizeof(frame));
	if (n < PROTO_HDR_LEN) {
		usage("cannot encode the RELAY");
	}
	for (int i = PROTO_HDR_LEN; i < n; i++) {
		printf("%02x", frame[i]);
	}
	printf("\n");
	for (size_t i = 0; i < m.u.relay.count; i++) {
		free(hops[i].ticket);
	}
	free(m.u.relay.self_ticket);
	X509_free(op.cert);
	EVP_PKEY_free(op.key);
	return 0;
}
