/* SPDX-License-Identifier: MIT */
/*
 * rdmacp's options, one table for the command line (getopt) and the [client]
 * section of the config file: an option that makes sense as a default has a
 * config key, and both places take the same values through the same handler.
 * The table and its handlers are option_table.c, the walk over the config
 * file and the command line options.c, the --help text usage.c.
 */
#pragma once

#include <stddef.h>
#include <stdio.h>

#include "client.h"

struct client_option {
	const char *name;	/* long option without "--"; NULL: config file only */
	int has_arg;		/* getopt's no_argument or required_argument */
	int short_name;		/* 'X' for -X; 0: none */
	const char *config_key; /* key in [client]; NULL: command line only */
	/*
	 * value is the argument; for a no_argument option it is NULL on the
	 * command line and a boolean (parse_bool) in the config file.
	 * Returns 0 or -errno; logs nothing.
	 */
	int (*set)(struct client_opts *o, const char *value);
	const char *expect; /* what a good value looks like, for the error */
};

/* The table's rows: client_noptions of them, at most CLIENT_MAX_OPTIONS (getopt's tables). */
#define CLIENT_MAX_OPTIONS 96
extern const struct client_option client_options[];
extern const size_t client_noptions;

/* The entry for a [client] key, or NULL. */
const struct client_option *client_option_by_key(const char *key);

/* rdmacp --help's text on f (usage.c). */
void client_usage(FILE *f);
/* "Try 'rdmacp --help' for more information." on stderr, after a usage error (usage.c). */
void client_usage_hint(void);

/*
 * The config file (--config FILE or the default; load_config), then the
 * command line over it. Options may come anywhere: getopt moves the operands
 * to the end, from optind. Returns 0 or an exit code (error printed);
 * --help and --version print and exit.
 */
int client_parse_options(int argc, char **argv, struct client_opts *o, bool load_config);
