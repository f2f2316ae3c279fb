/* SPDX-License-Identifier: MIT */
/*
 * What a push (push.c) and a pull (pull.c) share: opening a transfer with
 * the daemon (transfer_open.c: the transport, OPEN, the data lanes) and
 * running it (transfer_run.c: the engine, its events told to the user, the
 * summary and the exit code). cmd_copy (copy.c) picks push or pull.
 */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "daemon_conn.h"
#include "engine.h"
#include "output.h"

struct fanout;

/* Set by SIGINT or SIGTERM during cmd_copy (copy.c): ends a busy wait and the engine. */
extern volatile sig_atomic_t transfer_interrupted;

struct xfer {
	struct client_opts *o;
	struct output out;
	/* pull: the names the client asked for (their last components) */
	char **wanted;
	size_t nwanted;
	/* pull: the remote paths, sent once the data connection is up */
	char **get_paths;
	size_t nget;
	/* where a local failure is: push: the operands; pull: the directory names land in */
	char **args;
	int nargs;
	const char *local_dir;
	/* for the summary */
	uint64_t planned; /* dry run: entries listed */
	const char *transport;
	bool completed;
	/* fan-out: the destinations, this push's the first of them (NULL: one destination) */
	struct fanout *fanout;
};

/* ---- transfer_open.c: set-up ---------------------------------------------- */

/* The OPEN flags both directions take from the options. */
uint32_t transfer_open_flags(const struct client_opts *o);
/* "verbs" or "tcp". */
const char *transfer_transport_name(int kind);
/*
 * Connect, then OPEN (a busy daemon asked again while --wait-busy lasts).
 * reply: OPEN_OK, or END for a dry run. Returns 0 or an exit code (said).
 */
int transfer_connect_open(struct daemon_conn *s, uint8_t direction, uint32_t flags,
			  const char *path, struct msg *reply);
/* A pull's GET: the remote paths it wants. Returns >= 0 or -errno. */
int transfer_send_get(struct daemon_conn *s, char **paths, size_t n);

/* ---- transfer_run.c: the run ---------------------------------------------- */

/*
 * Runs the engine over the lanes OPEN_OK offers (ok NULL: a probe, a dry
 * run with --skip or --delete, on the control channel alone). Returns 0 or
 * an exit code (said).
 */
int transfer_run_engine(struct daemon_conn *s, struct xfer *x, struct engine_params *ep,
			const struct msg_open_ok *ok, struct engine_stats *st);
/* Every run ends with a summary (--json: even a failed one, with its exit code). Returns rc. */
int transfer_finish(struct xfer *x, const struct engine_stats *st, uint64_t local_failures, int rc);
/*
 * A run that went through: the mirror pass told, then the summary with the
 * exit code of what committed and failed (probe: of what a run would do).
 */
int transfer_done(struct xfer *x, const struct engine_stats *st, uint64_t local_failures,
		  bool probe);
/* A walk's warning about a local path, said on stderr. */
void transfer_walk_warning(void *ud, const char *path, const char *why);
/* DIR/. (or .): the directory's contents, dotfiles too, as cp -r DIR/. DEST copies them. */
bool transfer_names_contents(const char *path);
/* The wire name an operand's entries go under: "" for DIR/. (its entries as they are). */
char *transfer_source_name(const char *path);

/* ---- push.c, pull.c ------------------------------------------------------- */

int transfer_push(struct client_opts *o, char **args, int nargs, const struct remote *rem);
/*
 * A push to f's first destination with the rest as its relay chain: args
 * its operands, or (f->relay_mode) the entries of f->feed.
 */
int transfer_push_fanout(struct client_opts *o, char **args, int nargs, struct fanout *f);
/* The OPEN flags a push of these operands to rem asks for. */
uint32_t transfer_push_open_flags(const struct client_opts *o, int nargs, char **args,
				  const struct remote *rem);
int transfer_pull(struct client_opts *o, char **args, int nargs, const char *dst);
