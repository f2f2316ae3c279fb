/* SPDX-License-Identifier: MIT */
/*
 * Fan-out (fanout.h): the command line's destinations, a ticket signed for
 * each one after the first, and the loop that pushes to the first one it
 * reaches with the rest as the relay chain.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "exitcodes.h"
#include "engine.h"
#include "fanout.h"
#include "log.h"
#include "relay_ticket.h"
#include "tls.h"
#include "tls_keys.h"
#include "transfer.h"

/* What this slice cannot relay, refused before anything is sent. Returns 0 or EXIT_USAGE. */
static int check_options(const struct client_opts *o, int ndests)
{
	static const char *const why = "not possible with several destinations (relay chains)";

	if (ndests > FANOUT_MAX_DESTS) {
		log_error("too many destinations: %d (at most %d)", ndests, FANOUT_MAX_DESTS);
		return EXIT_USAGE;
	}
	if (o->dry_run || o->mirror) {
		log_error("--dry-run and --delete are %s in this version: run them per "
			  "destination",
			  why);
		return EXIT_USAGE;
	}
	/* A destination cut out is tried again with the next: the list must be read again. */
	if (!strcmp(o->files_from, "-")) {
		log_error("--files-from - is %s: name a file", why);
		return EXIT_USAGE;
	}
	return 0;
}

/* Whether every destination is a directory the entries go into (as push_open_flags says). */
static bool into_directory(const struct client_opts *o, char **srcs, int nsrcs)
{
	if (nsrcs > 1 || o->files_from[0]) {
		return true;
	}
	for (int i = 0; i < nsrcs; i++) {
		if (transfer_names_contents(srcs[i])) {
			return true;
		}
	}
	return false;
}

/*
 * The remote operands, in order. A destination the entries go into as a
 * directory carries a '/' at its end down the chain: its relay client
 * (which has no operands to tell) then opens it as one. 0 or EXIT_USAGE.
 */
static int parse_dests(struct fanout *f, char **args, int n, uint16_t port, bool dir)
{
	f->dests = calloc((size_t)n, sizeof(*f->dests));
	if (!f->dests) {
		return EXIT_LOCAL_IO;
	}
	f->n = (size_t)n;
	for (int i = 0; i < n; i++) {
		struct fanout_dest *d = &f->dests[i];
		size_t len;

		if (parse_remote(args[i], &d->rem) != 1) {
			log_error("bad remote '%s': expected HOST:MODULE/PATH", args[i]);
			return EXIT_USAGE;
		}
		len = strlen(d->rem.path);
		if (len >= PROTO_MAX_PATH || strlen(d->rem.host) > PROTO_MAX_HOST) {
			log_error("remote '%s': host or path too long", args[i]);
			return EXIT_USAGE;
		}
		if (dir && len > 0 && d->rem.path[len - 1] != '/') {
			d->rem.path[len] = '/';
			d->rem.path[len + 1] = '\0';
		}
		d->port = port;
		for (int j = 0; j < i; j++) {
			const struct fanout_dest *e = &f->dests[j];

			if (proto_relay_same_dest(d->rem.host, port, d->rem.path, e->rem.host, port,
						  e->rem.path)) {
				log_error("destination '%s' is named twice", args[i]);
				return EXIT_USAGE;
			}
		}
	}
	return 0;
}

/* One ticket for d, signed with key (cert's). Returns 0 or -errno. */
static int sign_ticket(EVP_PKEY *key, X509 *cert, uint32_t flags, struct fanout_dest *d)
{
	struct relay_ticket t = { .port = d->port, .open_flags = flags };

	snprintf(t.host, sizeof(t.host), "%s", d->rem.host);
	snprintf(t.path, sizeof(t.path), "%s", d->rem.path);
	t.issued = (int64_t)time(NULL);
	t.expires = t.issued + RELAY_TICKET_LIFE;
	if (RAND_bytes(t.nonce, sizeof(t.nonce)) != 1) {
		return -EIO;
	}
	return relay_ticket_make(key, cert, &t, &d->ticket, &d->ticket_len);
}

/*
 * A ticket for every destination after the first, signed with the key the
 * TLS sessions present (so the hop that checks it sees the identity its
 * relay speaks for). Returns 0 or an exit code (said).
 */
static int sign_tickets(struct client_opts *o, struct fanout *f, char **srcs, int nsrcs)
{
	struct tls_config tc = { .server = false };
	struct tls_ctx *ctx = NULL;
	EVP_PKEY *key;
	X509 *cert;
	int r = 0;

	tc.cert_file = o->cert;
	tc.key_file = o->key;
	tc.ca_file = o->ca;
	tc.have_pin = o->have_pin;
	memcpy(tc.pin, o->pin, sizeof(tc.pin));
	if (tls_ctx_new(&tc, &ctx) < 0) {
		log_error("TLS setup: %s", tls_last_error());
		return EXIT_CONFIG;
	}
	key = tls_ctx_key(ctx);
	cert = tls_ctx_cert(ctx);
	for (size_t i = 1; i < f->n && r == 0; i++) {
		struct fanout_dest *d = &f->dests[i];

		r = key && cert ? sign_ticket(key, cert,
					      transfer_push_open_flags(o, nsrcs, srcs, &d->rem), d)
				: -ENOKEY;
	}
	tls_ctx_free(ctx);
	if (r < 0) {
		log_error_errno(r, "relay tickets: signing with %s: %m", o->key);
		return EXIT_CONFIG;
	}
	return 0;
}

/* rdmacp run: where each destination's outcome goes (fanout_set_observer). */
static void (*observe_fn)(void *ud, const struct fanout_dest *d);
static void *observe_ud;

void fanout_set_observer(void (*fn)(void *ud, const struct fanout_dest *d), void *ud)
{
	observe_fn = fn;
	observe_ud = ud;
}

int fanout_copy(struct client_opts *o, char **args, int nsrc, int nargs)
{
	struct fanout f = { .feed = -1, .fanout = o->fanout };
	int rc = check_options(o, nargs - nsrc);

	if (rc == 0) {
		rc = parse_dests(&f, args + nsrc, nargs - nsrc, o->port,
				 into_directory(o, args, nsrc));
	}
	if (rc == 0) {
		rc = sign_tickets(o, &f, args, nsrc);
	}
	if (rc == 0) {
		rc = fanout_run(o, args, nsrc, &f);
		for (size_t i = 0; i < f.n && observe_fn; i++) {
			observe_fn(observe_ud, &f.dests[i]);
		}
	}
	fanout_free(&f);
	return rc;
}

int fanout_run(struct client_opts *o, char **srcs, int nsrcs, struct fanout *f)
{
	int rc = EXIT_OK;

	fanout_watch_errors(f);
	f->partial = o->partial;
	for (f->first = 0; f->first < f->n; f->first++) {
		struct fanout_dest *d = &f->dests[f->first];

		f->connecting = f->opened = false;
		f->last_error[0] = '\0';
		o->port = d->port;
		/* While a hop may yet be cut out, what the feed told stays for a replay. */
		if (f->book) {
			follow_book_keep(f->book, f->first + 1 < f->n);
		}
		rc = transfer_push_fanout(o, srcs, nsrcs, f);
		/* Concluded: every destination has its outcome. */
		if (f->dests[f->n - 1].status != 0 || transfer_interrupted) {
			break;
		}
		log_warning("%s: cut out of the chain (%s): %s takes its place", d->rem.host,
			    fanout_status_name(d->status), f->dests[f->first + 1].rem.host);
	}
	log_set_observer(0, NULL, NULL);
	return rc;
}
