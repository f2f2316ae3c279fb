/* SPDX-License-Identifier: MIT */
/*
 * Fan-out (issue 36): one push delivered to several destinations along a
 * relay chain. The client pushes to the first destination and sends the
 * rest as the chain (MSG_RELAY, with a ticket it signed for each); every hop
 * forwards what it receives to the next and reports one MSG_RELAY_RESULT per
 * destination after it. A destination that cannot be reached, or refuses
 * before any data, or dies mid-copy, or is too slow (a relay child's
 * judgement, slowhop.h), is cut out and the next one tried with
 * the rest of the chain (a relay child replays what its feed told). The
 * same code runs in the client (fanout.c) and in a relay child started by a
 * daemon (relay_mode.c: its entries come from the feed).
 *
 * fanout.c: the command line and the loop over destinations;
 * fanout_wire.c: MSG_RELAY and the results; fanout_out.c: each
 * destination's outcome, its line, --json's "destinations", the exit code.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "output.h"
#include "proto/msg.h"
#include "slowhop.h"

struct daemon_conn;
struct follow_book;

struct fanout_dest {
	struct remote rem; /* host and MODULE/REL ('/' at its end: a directory) */
	uint16_t port;
	uint8_t *ticket; /* signed by the original client for this destination; NULL: none */
	size_t ticket_len;
	/* its outcome: status 0 while unknown (enum proto_relay_status) */
	uint8_t status;
	uint8_t exit_code;
	uint64_t files_ok, files_failed, bytes;
	char text[PROTO_MAX_TEXT + 1];
};

struct fanout {
	struct fanout_dest *dests;
	size_t n;
	size_t first; /* the destination pushed to now; the chain is the ones after it */
	/*
	 * 1: the ones after first are a chain; 2..: a tree of that fan-out
	 * below first (src/relay_tree.h), as MSG_RELAY tells first's daemon.
	 */
	unsigned fanout;
	/* a relay child: the first destination gets its ticket as MSG_RELAY's self ticket */
	bool relay_mode;
	int feed;		  /* relay mode: the feed, else -1 */
	struct follow_book *book; /* relay mode: what the feed told (engine_params.follow) */
	bool partial;		  /* --partial: a hop cut out mid-copy keeps what it has */
	bool connecting;	  /* this attempt got as far as connecting */
	bool opened;		  /* ... and OPEN was accepted: data may have gone */
	char last_error[PROTO_MAX_TEXT + 1]; /* the last error line logged in this attempt */
	struct output_dest out[PROTO_MAX_RELAY_HOPS + 1]; /* the summary's view of dests */
	/* relay mode: the slow-hop rule of each run (engine_params.slowhop); its window 0: off */
	struct slowhop slow;
};

/* The destinations a command line may name: the first and the chain after it. */
#define FANOUT_MAX_DESTS (PROTO_MAX_RELAY_HOPS + 1)

/* ---- fanout.c ------------------------------------------------------------- */

/*
 * rdmacp SRC... H1:M1/P1 H2:M2/P2 ...: local sources args[0..nsrc), then
 * remote operands args[nsrc..nargs). Returns the exit code.
 */
int fanout_copy(struct client_opts *o, char **args, int nsrc, int nargs);
/*
 * Pushes srcs (relay mode: the feed's entries) to f->dests from the first,
 * cutting out each destination unreached. Every destination has its outcome
 * on return. Returns the exit code (fanout_exit_code).
 */
int fanout_run(struct client_opts *o, char **srcs, int nsrcs, struct fanout *f);
void fanout_free(struct fanout *f);
/*
 * rdmacp run (plan --every-host): each destination's outcome of every
 * fan-out from now on, told to fn as it ends (NULL: none).
 */
void fanout_set_observer(void (*fn)(void *ud, const struct fanout_dest *d), void *ud);

/* ---- fanout_wire.c -------------------------------------------------------- */

/*
 * Before OPEN: MSG_RELAY with the chain after the first destination (none:
 * nothing is sent), once the daemon announced PROTO_CAP_RELAY. Returns 0 or
 * an exit code (said).
 */
int fanout_send_relay(struct daemon_conn *s, const struct fanout *f);
/*
 * After the push's END, before BYE: one MSG_RELAY_RESULT per destination of
 * the chain, into f. A destination left without a result is failed (said).
 */
void fanout_read_results(struct daemon_conn *s, struct fanout *f);
/*
 * One result into f, checked: its index names a destination of the chain
 * (1: the one after the first) not reported yet, its status is known.
 * Returns 0 or -EBADMSG.
 */
int fanout_take_result(struct fanout *f, const struct msg_relay_result *res);

/* ---- fanout_out.c --------------------------------------------------------- */

/* The exit code for the whole: 0, EXIT_FANOUT_PARTIAL, or the first failed destination's. */
int fanout_exit_code(const struct fanout *f);
/*
 * The push to the first destination ended with rc (t: its totals): true
 * when there is a destination after it to try and it never got to send
 * (unreached or refused before OPEN was accepted) or it died mid-copy (the
 * connection lost, the daemon gone: fanout_hop_died); its outcome is then
 * recorded, nothing said.
 */
bool fanout_bypass(struct fanout *f, const struct output_totals *t, int rc);
/*
 * Whether a push that ended with rc after its OPEN failed for its
 * destination's sake (not this side's, not upstream's: its session lost, or
 * too slow by the slow-hop rule), and what it sent can be sent again to the
 * next: a relay child only while its book can replay every entry.
 */
bool fanout_hop_died(const struct fanout *f, int rc);
/*
 * The push is over (t: its totals, rc: its exit code): its own outcome
 * recorded, destinations after it without a result failed, the lines and
 * --json's destinations given to out for its summary. Returns the exit code
 * of the whole so far.
 */
int fanout_conclude(struct fanout *f, struct output *out, const struct output_totals *t, int rc);
/* Each error line logged goes to f->last_error (log_set_observer). */
void fanout_watch_errors(struct fanout *f);
/*
 * A run to the first destination begins: the slow-hop rule's state for it,
 * its verdict cleared (engine_params.slowhop); NULL when it is off or no
 * destination follows (a slow last hop holds up no other).
 */
struct slowhop *fanout_slowhop(struct fanout *f);
/* "copied", "partial", "failed", "unreached" (--json's status). */
const char *fanout_status_name(uint8_t status);

/* ---- relay_mode.c --------------------------------------------------------- */

/* rdmacp --relay-feed FD (no operands: nargs 0). Returns the exit code. */
int relay_mode_run(struct client_opts *o, int nargs);
/*
 * A relay child's push down one chain (or one subtree of a tree): f's
 * destinations and fan-out set, its feed o->relay_feed. Every destination's
 * result goes back on the feed. Returns the exit code.
 */
int relay_mode_chain(struct client_opts *o, struct fanout *f);

/* ---- relay_tee.c ---------------------------------------------------------- */

/*
 * A relay child whose list splits into several next hops (a tree): one
 * process per next hop, forked here, each following its own copy of the
 * feed (chain, relay_mode_chain, with that next hop's group); the feed's records
 * passed on to every one of them, a lagging one cut off past a bounded
 * backlog (its subtree failed, its siblings never wait for it); their
 * results back on the feed, as indices of f's list. Returns the exit code.
 */
int relay_tee_run(struct client_opts *o, struct fanout *f,
		  int (*chain)(struct client_opts *o, struct fanout *f));
