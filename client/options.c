/* SPDX-License-Identifier: MIT */
/*
 * rdmacp's options (options.h): a first getopt pass that takes no values and
 * finds the operands (their host picks the config's [host] sections), then
 * the config file (config.c), then the command line over it, through the one
 * table (option_table.c). A usage error is said in three lines at most
 * (opterr.h), never with the whole --help.
 */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "opterr.h"
#include "xport.h"

/* --config FILE, as typed before "--", or the default file (must_exist false). */
static const char *config_file(int argc, char **argv, char *buf, size_t len, bool *ret_named)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	const char *config = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < argc) {
			config = argv[i + 1];
		} else if (!strncmp(argv[i], "--config=", 9)) {
			config = argv[i] + 9;
		} else if (!strcmp(argv[i], "--")) {
			break;
		}
	}
	*ret_named = config != NULL;
	if (config) {
		return config;
	}
	if (xdg && *xdg) {
		snprintf(buf, len, "%s/rdmacp/config", xdg);
	} else {
		snprintf(buf, len, "%s/.config/rdmacp/config", home ? home : "");
	}
	return buf;
}

/* Whether opt is the option named name (--transport, --devices: checked together). */
static bool option_is(const struct client_option *opt, const char *name)
{
	return opt->name && !strcmp(opt->name, name);
}

/* getopt's tables from ours: a long option's val is 0x100 + its index. */
static void getopt_tables(struct option *longs, char *shorts)
{
	size_t nl = 0, ns = 0;

	/* A leading ':' tells a missing argument (':') from an unknown option ('?'). */
	shorts[ns++] = ':';
	for (size_t i = 0; i < client_noptions; i++) {
		const struct client_option *opt = &client_options[i];

		if (opt->name) {
			longs[nl++] =
			    (struct option){ opt->name, opt->has_arg, NULL, 0x100 + (int)i };
		}
		if (opt->short_name) {
			shorts[ns++] = (char)opt->short_name;
			if (opt->has_arg == required_argument) {
				shorts[ns++] = ':';
			}
		}
	}
	longs[nl] = (struct option){ 0 };
	shorts[ns] = '\0';
}

static const struct client_option *option_for(int c)
{
	if (c >= 0x100 && (size_t)(c - 0x100) < client_noptions) {
		return &client_options[c - 0x100];
	}
	for (size_t i = 0; i < client_noptions; i++) {
		if (client_options[i].short_name == c) {
			return &client_options[i];
		}
	}
	return NULL;
}

/*
 * What getopt refused, as rsync and coreutils say it: the error, the option a
 * misspelt one was probably meant to be, where the help is. Never the whole
 * --help: it would bury the one line that matters.
 */
static int usage_error(int c, char **argv, const struct option *longs)
{
	struct opterr_msg m;

	opterr_explain(c, optopt, optind, argv, longs, &m);
	log_error("%s", m.what);
	if (m.suggest[0]) {
		log_error("did you mean '%s'?", m.suggest);
	}
	client_usage_hint();
	return EXIT_USAGE;
}

/* Subcommands whose first operand is a host, HOST or HOST:PATH (main.c's table has them all). */
static const char *const host_first_subcommands[] = { "ls", "ping", "bench" };

/*
 * The host the operands name, as typed (an IPv6 address without its
 * brackets), for the config's [host] sections: a subcommand's HOST operand,
 * else the first HOST:PATH. NULL when none names one (local operands, a
 * plan file).
 */
static const char *operands_host(char **ops, int n, struct remote *buf)
{
	size_t len;

	for (size_t i = 0; n > 1 && i < ARRAY_SIZE(host_first_subcommands); i++) {
		if (strcmp(ops[0], host_first_subcommands[i]) != 0) {
			continue;
		}
		if (parse_remote(ops[1], buf) == 1) {
			return buf->host;
		}
		len = strlen(ops[1]);
		if (ops[1][0] == '[' && len > 2 && ops[1][len - 1] == ']') {
			snprintf(buf->host, sizeof(buf->host), "%.*s", (int)(len - 2), ops[1] + 1);
		} else {
			snprintf(buf->host, sizeof(buf->host), "%s", ops[1]);
		}
		return buf->host;
	}
	for (int i = 0; i < n; i++) {
		if (parse_remote(ops[i], buf) == 1) {
			return buf->host;
		}
	}
	return NULL;
}

/*
 * getopt over the command line without taking any value, for the operands
 * (argv[*ret_first..], as getopt moves them to the end) before the config
 * file is read. Returns 0 or EXIT_USAGE (said).
 */
static int find_operands(int argc, char **argv, const struct option *longs, const char *shorts,
			 int *ret_first)
{
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		if (c == '?' || c == ':' || !option_for(c)) {
			return usage_error(c, argv, longs);
		}
	}
	*ret_first = optind;
	return 0;
}

/*
 * --devices implies verbs; tcp_here, devices_here: --transport tcp and
 * --devices were on the command line. Returns 0 or -EINVAL (said).
 */
static int devices_transport(struct client_opts *o, bool tcp_here, bool devices_here)
{
	if (o->ndevices == 0) {
		return 0;
	}
	/* Rails are RC QPs on named devices: only verbs has them. */
	if (tcp_here && devices_here) {
		log_error("--devices needs --transport verbs (or auto), not tcp");
		return -EINVAL;
	}
	if (tcp_here) {
		/* --transport tcp here wins over the config file's devices. */
		o->ndevices = 0;
	} else {
		o->transport = XPORT_KIND_VERBS;
	}
	return 0;
}

/*
 * A GID index is one port's table entry: it names the device's port
 * (--devices NAME:PORT, port 1 without) whose address the lanes leave from.
 * Returns 0 or -EINVAL (said).
 */
static int gid_needs_device(const struct client_opts *o)
{
	if (o->gid_index >= 0 && o->ndevices == 0 && o->transport != XPORT_KIND_TCP) {
		log_error("--gid-index needs --devices NAME[:PORT]: a GID index is an entry of "
			  "one port's table");
		return -EINVAL;
	}
	return 0;
}

/*
 * The config file over o: [client], and the [host] sections for the host
 * the operands (argv[first..]) name. Returns 0 or EXIT_CONFIG (said).
 */
static int load_config_for(int argc, char **argv, int first, struct client_opts *o)
{
	char default_config[4200], err[4400];
	bool named;
	const char *config =
	    config_file(argc, argv, default_config, sizeof(default_config), &named);
	struct remote host;
	int r = client_config_load(
	    o, config, named, operands_host(argv + first, argc - first, &host), err, sizeof(err));

	if (r < 0) {
		log_error("%s", err);
		return EXIT_CONFIG;
	}
	return 0;
}

int client_parse_options(int argc, char **argv, struct client_opts *o, bool load_config)
{
	struct option longs[CLIENT_MAX_OPTIONS + 1];
	char shorts[2 * CLIENT_MAX_OPTIONS + 2];
	char esc[256];
	bool devices_here = false, tcp_here = false;
	int c, r, first = 0;

	getopt_tables(longs, shorts);
	r = find_operands(argc, argv, longs, shorts, &first);
	if (r == 0 && load_config) {
		r = load_config_for(argc, argv, first, o);
	}
	if (r != 0) {
		return r;
	}
	/*
	 * Options anywhere, before or after operands and the subcommand name,
	 * as GNU tools and rsync take them: getopt moves the operands to the end
	 * ("--" ends the options).
	 */
	optind = 0;
	opterr = 0; /* usage_error() says it, in one line */
	while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		const struct client_option *opt = option_for(c);
		const char *value;

		if (c == '?' || c == ':' || !opt) {
			return usage_error(c, argv, longs);
		}
		value = opt->has_arg == required_argument ? optarg : NULL;
		r = opt->set(o, value);
		if (r < 0) {
			log_error("bad --%s '%s': %s", opt->name,
				  log_escape(value ? value : "", esc, sizeof(esc)),
				  opt->expect ? opt->expect : "");
			return EXIT_USAGE;
		}
		if (option_is(opt, "transport")) {
			tcp_here = o->transport == XPORT_KIND_TCP;
		} else if (option_is(opt, "devices")) {
			devices_here = true;
		}
	}
	if (devices_transport(o, tcp_here, devices_here) < 0 || gid_needs_device(o) < 0) {
		return EXIT_USAGE;
	}
	if (o->verbose > 1) {
		log_set_max_level(LOG_DEBUG);
	}
	return 0;
}
