/* SPDX-License-Identifier: MIT */
/*
 * rdmacpd: the supervisor process. Reads the config, loads the TLS
 * credentials, listens (or takes systemd's sockets), and forks one child per
 * accepted connection; the child runs serve_connection() and exits. The
 * parent only accepts, counts, reaps and handles signals, so a misbehaving
 * session can't stall or crash the others.
 *
 * This file has the command line and the start; the supervisor's parts are
 * in the files supervisor.h lists (the load limits in admission.c).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "exitcodes.h"
#include "lane_seal.h"
#include "rlimits.h"
#include "log.h"
#include "opterr.h"
#include "privs.h"
#include "session_table.h"
#include "supervisor.h"
#include "tls.h"
#include "windows_check.h"

/* ---- command line ---- */

static void usage(FILE *f)
{
	fprintf(f, "Usage: rdmacpd --config FILE [--check] [-v]\n"
		   "\n"
		   "The rdmacp daemon: serves the modules of FILE to rdmacp clients. Runs in the\n"
		   "foreground; logs to stderr with syslog priority prefixes.\n"
		   "\n"
		   "  -c, --config FILE  configuration (rdmacpd.conf(5))\n"
		   "      --check        validate the configuration and the TLS files, then exit\n"
		   "  -v, --verbose      log at debug level\n"
		   "      --version      print the version and exit\n"
		   "  -h, --help         this text\n"
		   "\n"
		   "Signals: SIGHUP reloads the configuration for new connections; SIGTERM stops\n"
		   "accepting, ends the sessions and exits.\n");
}

enum { OPT_CHECK = 0x100, OPT_VERSION };

/* A usage error in three lines at most, as coreutils say one: never the whole --help. */
static int usage_error(const char *what, const char *suggest)
{
	log_error("%s", what);
	if (suggest && *suggest) {
		log_error("did you mean '%s'?", suggest);
	}
	fputs("Try 'rdmacpd --help' for more information.\n", stderr);
	return -EINVAL;
}

static int parse_args(int argc, char **argv, struct daemon *d, bool *check)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, OPT_CHECK },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct opterr_msg m;
	char esc[256];
	int c;

	opterr = 0; /* usage_error() says it */
	while ((c = getopt_long(argc, argv, ":c:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			d->config_file = optarg;
			break;
		case OPT_CHECK:
			*check = true;
			break;
		case 'v':
			d->verbose = true;
			break;
		case OPT_VERSION:
			printf("rdmacpd %s\n", RDMACP_VERSION);
			exit(EXIT_OK);
		case 'h':
			usage(stdout);
			exit(EXIT_OK);
		default:
			opterr_explain(c, optopt, optind, argv, opts, &m);
			return usage_error(m.what, m.suggest);
		}
	}
	if (optind < argc) {
		snprintf(m.what, sizeof(m.what), "unexpected argument '%s'",
			 log_escape_short(argv[optind], esc, sizeof(esc)));
		return usage_error(m.what, NULL);
	}
	if (!d->config_file) {
		return usage_error("--config FILE is required", NULL);
	}
	return 0;
}

/*
 * --check went through: one line on stdout saying what was checked, as
 * nginx -t does, so that a script or ExecStartPre= log shows it ran.
 */
static void check_summary(const char *file, const struct daemon_config *cfg)
{
	char where[DAEMON_MAX_LISTEN * 82] = "", esc[1024];
	size_t used = 0;

	for (size_t i = 0; i < cfg->nlisten && used < sizeof(where); i++) {
		int w = snprintf(where + used, sizeof(where) - used, "%s%s", i ? ", " : "",
				 cfg->listen[i].text);

		used += w > 0 ? (size_t)w : 0;
	}
	if (cfg->nlisten == 0) {
		snprintf(where, sizeof(where), "0.0.0.0:%d or systemd's sockets",
			 DAEMON_DEFAULT_PORT);
	}
	printf("%s: OK: %zu module%s, listen %s\n", log_escape(file, esc, sizeof(esc)),
	       cfg->nmodules, cfg->nmodules == 1 ? "" : "s", where);
}

/*
 * Sealed tcp lanes' AEAD ("cipher"): with auto, measured here once, before
 * the sessions fork, so that each inherits the choice rather than timing it.
 */
static void log_cipher(const struct daemon_config *cfg)
{
	double rates[LANE_SEAL_NSUITES];

	if (cfg->seal_suite) {
		log_info("sealed tcp lanes: %s (cipher)",
			 lane_seal_suite_title((enum lane_seal_suite)cfg->seal_suite));
		return;
	}
	lane_seal_suite_rates(rates);
	log_info("sealed tcp lanes: %s, the fastest here (aes-256-gcm %.1f, aes-128-gcm %.1f, "
		 "chacha20-poly1305 %.1f GB/s on one core)",
		 lane_seal_suite_title(lane_seal_suite_fastest()), rates[0] / 1e9, rates[1] / 1e9,
		 rates[2] / 1e9);
}

/* Everything after the command line; returns the exit code. */
static int run(struct daemon *d, bool check)
{
	uint64_t usec = 0;
	char cert_text[1024];
	int r;

	if (supervisor_load(d->config_file, &d->cfg, &d->tls) < 0) {
		return EXIT_CONFIG;
	}
	if (check) {
		supervisor_check_warnings(d->cfg);
		check_summary(d->config_file, d->cfg);
		return EXIT_OK;
	}
	log_set_daemon_mode("rdmacpd");
	supervisor_apply_log_level(d);
	supervisor_missing_module_warnings(d->cfg);
	supervisor_system_path_warnings(d->cfg);
	supervisor_check_memlock(d->cfg);
	log_cipher(d->cfg);
	privs_preload_nss();
	if (limits_raise_nofile() < 0) {
		log_warning("cannot raise the open-files limit: many files in flight may fail");
	}

	r = supervisor_setup_signals(d);
	if (r < 0) {
		log_error_errno(r, "signals: %m");
		return EXIT_CONFIG;
	}
	if (children_grow(d, d->cfg->max_connections) < 0) {
		log_error("out of memory");
		return EXIT_CONFIG;
	}
	r = session_table_create(d->cfg->memory_budget, &d->sessions);
	if (r < 0) {
		log_error_errno(r, "shared session table: %m");
		return EXIT_CONFIG;
	}
	if (listeners_setup(d) < 0) {
		return EXIT_CONFIG;
	}
	/* Once per daemon, not per HELLO: connections wait in the backlog meanwhile. */
	windows_table_refresh(windows_table_daemon());
	/* unset_environment: the watchdog is the supervisor's job alone. */
	if (sd_watchdog_enabled(1, &usec) > 0 && usec >= 2000) {
		d->watchdog_usec = usec;
		d->next_watchdog_ms = (uint64_t)now_ms();
	}
	sd_notify(0, "READY=1");
	children_notify_status(d);
	supervisor_cert_expiry(d->cfg, cert_text, sizeof(cert_text));
	d->next_cert_check_ms = supervisor_next_cert_check_ms();
	log_info("rdmacpd %s ready%s%s", RDMACP_VERSION, cert_text[0] ? ", " : "", cert_text);
	supervisor_watchdog(d);

	r = supervisor_loop(d);
	supervisor_drain(d);
	log_info("stopped");
	/* Only a failing poll() ends the loop abnormally: a plain failure. */
	return r < 0 ? EXIT_FAILURE : EXIT_OK;
}

static void daemon_done(struct daemon *d)
{
	listeners_close(d);
	if (d->sfd >= 0) {
		close(d->sfd);
	}
	free(d->children);
	tls_ctx_free(d->tls);
	daemon_config_free(d->cfg);
}

int main(int argc, char **argv)
{
	struct daemon d = { .sfd = -1 };
	bool check = false;
	int r;

	/*
	 * Until the daemon runs, messages are for whoever started it (a shell,
	 * ExecStartPre=rdmacpd --check): plain "rdmacpd: " lines.
	 */
	log_set_prefix_mode(false, "rdmacpd");
	if (parse_args(argc, argv, &d, &check) < 0) {
		return EXIT_USAGE;
	}
	r = run(&d, check);
	daemon_done(&d);
	return r;
}
