/* SPDX-License-Identifier: MIT */
/*
 * rdmacp: the command line. Options come from a table (option_table.c), so do
 * subcommands; anything that is not a subcommand is a copy (SRC... DST).
 */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "client.h"
#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "options.h"
#include "rlimits.h"

struct subcommand {
	const char *name;
	int (*run)(struct client_opts *o, char **args, int nargs);
};

static int run_certs(struct client_opts *o, char **args, int nargs)
{
	(void)o;
	return cmd_certs(nargs, args);
}

/* One subcommand a line, however many there are. */
/* clang-format off */
static const struct subcommand subcommands[] = {
	{ "ping", cmd_ping },
	{ "ls", cmd_ls },
	{ "check", cmd_check },
	{ "doctor", cmd_doctor },
	{ "bench", cmd_bench },
	{ "certs", run_certs },
	{ "plan", cmd_plan },
	{ "run", cmd_run },
	{ "finalize", cmd_finalize },
	{ "report", cmd_report },
};
/* clang-format on */

/* Was there a "--" before operand p on the command line as typed? */
static bool after_dashdash(char *const *typed, int argc, const char *p)
{
	for (int i = 1; i < argc && typed[i] != p; i++) {
		if (!strcmp(typed[i], "--")) {
			return true;
		}
	}
	return false;
}

/*
 * --relay-feed: rdmacpd's relay child (client/relay_mode.c). Looked for
 * before anything is read: it holds the relay's key (never dumpable) and
 * takes its options from the command line alone, no config file.
 */
static bool relay_child(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strncmp(argv[i], "--relay-feed", 12) &&
		    (argv[i][12] == '\0' || argv[i][12] == '=')) {
			return true;
		}
	}
	return false;
}

int main(int argc, char **argv)
{
	bool relay = relay_child(argc, argv);
	_cleanup_(client_opts_free) struct client_opts o = { 0 };
	int r;

	if (relay) {
		/* A core dump or ptrace by the same user would give the key away. */
		if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
			log_error_errno(negerrno(), "relay: PR_SET_DUMPABLE: %m");
			return EXIT_LOCAL_IO;
		}
		/* Its lines land in the daemon's journal: said as the daemon says them. */
		log_set_daemon_mode("rdmacp-relay");
	} else {
		log_set_prefix_mode(false, "rdmacp");
	}
	/* A peer that goes away is an error to report, not a signal to die of. */
	signal(SIGPIPE, SIG_IGN);
	limits_raise_nofile();
	/* certs takes its own options: dispatch before the copy options. */
	if (argc > 1 && !strcmp(argv[1], "certs")) {
		return cmd_certs(argc - 1, argv + 1);
	}
	/* getopt reorders argv: keep the order as typed. */
	_cleanup_free_ char **typed = calloc((size_t)argc, sizeof(*typed));
	if (!typed) {
		return EXIT_LOCAL_IO;
	}
	memcpy(typed, argv, (size_t)argc * sizeof(*typed));
	client_opts_defaults(&o);
	if (relay) {
		/* Its identity is the one rdmacpd hands it, never a user's files under $HOME. */
		o.cert[0] = o.key[0] = o.ca[0] = '\0';
	}
	r = client_parse_options(argc, argv, &o, !relay);
	if (r != 0) {
		return r;
	}
	/* The first operand names the subcommand, unless "--" came before it. */
	if (optind < argc && !after_dashdash(typed, argc, argv[optind])) {
		for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++) {
			if (!strcmp(argv[optind], subcommands[i].name)) {
				return subcommands[i].run(&o, argv + optind + 1, argc - optind - 1);
			}
		}
	}
	r = cmd_copy(&o, argv + optind, argc - optind);
	if (r == EXIT_INTERRUPTED) {
		copy_interrupt_hint(&o);
	}
	return r;
}
