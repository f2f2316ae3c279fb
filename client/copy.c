/* SPDX-License-Identifier: MIT */
/*
 * rdmacp's copy command: its operands make it a push (push.c) or a pull
 * (pull.c); SIGINT and SIGTERM end it with exit 10 (transfer.h).
 */
#include <signal.h>
#include <stddef.h>

#include "exitcodes.h"
#include "fanout.h"
#include "log.h"
#include "transfer.h"

volatile sig_atomic_t transfer_interrupted;

bool copy_interrupted(void)
{
	return transfer_interrupted != 0;
}

static void on_signal(int sig)
{
	(void)sig;
	transfer_interrupted = 1;
}

/* SIGINT and SIGTERM end the copy cleanly (exit 10); a closed peer is an error, not a death. */
void copy_catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* How many operands at the end are remote (a fan-out: all of them, after the sources). */
static int nremote_tail(char **args, int nargs)
{
	struct remote tmp;
	int n = 0;

	while (n < nargs && parse_remote(args[nargs - 1 - n], &tmp) == 1) {
		n++;
	}
	return n;
}

int cmd_copy(struct client_opts *o, char **args, int nargs)
{
	struct remote dst;
	int r, nremote = 0;

	if (o->relay_feed >= 0) {
		copy_catch_signals();
		return relay_mode_run(o, nargs);
	}
	if (nargs == 1 && parse_remote(args[0], &dst) == 1) {
		/* rsync HOST:: lists modules; here that is ls, and a copy needs a DST. */
		char esc[1024];

		log_escape_short(args[0], esc, sizeof(esc));
		log_error("a copy needs SRC... DST; to list what %s offers: rdmacp ls %s", esc,
			  esc);
		return EXIT_USAGE;
	}
	if (nargs < 2) {
		log_error("usage: rdmacp [OPTIONS] SRC... DST (see rdmacp --help)");
		return EXIT_USAGE;
	}
	if (o->have_max_delete && !o->mirror) {
		log_error("--max-delete needs --delete");
		return EXIT_USAGE;
	}
	if (o->mirror && !o->recursive) {
		log_error("--delete needs -r (it mirrors directories)");
		return EXIT_USAGE;
	}
	copy_catch_signals();
	for (int i = 0; i < nargs - 1; i++) {
		struct remote tmp;
		r = parse_remote(args[i], &tmp);
		if (r < 0) {
			log_error("bad remote '%s': expected HOST:MODULE/PATH", args[i]);
			return EXIT_USAGE;
		}
		nremote += r;
	}
	r = parse_remote(args[nargs - 1], &dst);
	if (r < 0) {
		log_error("bad remote '%s': expected HOST:MODULE/PATH", args[nargs - 1]);
		return EXIT_USAGE;
	}
	if (r == 1 && nremote == 0) {
		return transfer_push(o, args, nargs - 1, &dst);
	}
	/* Local sources, then two or more destinations: a fan-out (fanout.c). */
	if (r == 1 && nremote > 0 && nremote < nargs - 1 &&
	    nremote_tail(args, nargs) == nremote + 1) {
		return fanout_copy(o, args, nargs - 1 - nremote, nargs);
	}
	if (r == 0 && nremote == nargs - 1) {
		return transfer_pull(o, args, nargs - 1, args[nargs - 1]);
	}
	log_error("copy either local files to one or more remote destinations (remote operands "
		  "after all local ones), or remote files to a local destination");
	return EXIT_USAGE;
}

void copy_interrupt_hint(const struct client_opts *o)
{
	/* Nothing to resume after a dry run; -q asked for errors alone. */
	if (o->dry_run || o->verbose < 0) {
		return;
	}
	if (o->partial) {
		log_info("interrupted: re-run the same command to resume");
	} else {
		log_info("interrupted: re-run with --partial to keep what was copied");
	}
}
