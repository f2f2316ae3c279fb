/* SPDX-License-Identifier: MIT */
/*
 * rdmacp: the command line. Subcommands come from a table; anything that is
 * not a subcommand is a copy (SRC... DST).
 */
#include <errno.h>
#include <stdbool.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "exitcodes.h"
#include "rlimits.h"
#include "log.h"
#include "macro.h"
#include "proto/msg.h"
#include "rdmadev.h"
#include "xport.h"

_Static_assert(CLIENT_MAX_DEVICES == XPORT_MAX_LANES, "one device per lane at most");
_Static_assert(CLIENT_DEVICE_NAME_LEN == RDMADEV_NAME_MAX + 1, "device name buffer");

static void usage(FILE *f)
{
	fputs(
	    "usage: rdmacp [OPTIONS] SRC... HOST:MODULE/PATH        (push)\n"
	    "       rdmacp [OPTIONS] HOST:MODULE/PATH... DEST         (pull)\n"
	    "       rdmacp ls [-l] [-r] [--json] HOST[:MODULE/PATH]  (list modules or entries)\n"
	    "       rdmacp ping HOST\n"
	    "       rdmacp doctor [--json]                         (preflight checks)\n"
	    "       rdmacp certs init DIR [--host NAME]...\n"
	    "       rdmacp certs issue DIR --client NAME [--days N] [--backdate N]\n"
	    "       rdmacp certs show FILE                         (subject, SANs, fingerprint)\n"
	    "\n"
	    "Options:\n"
	    "  -P, --port PORT        daemon port (default 7471)\n"
	    "      --cert FILE        client certificate (default ~/.config/rdmacp/client.crt)\n"
	    "      --key FILE         client key (default ~/.config/rdmacp/client.key)\n"
	    "      --ca FILE          CA that signed the daemon (default ~/.config/rdmacp/ca.crt)\n"
	    "      --pin sha256:HEX   accept only this daemon certificate\n"
	    "      --config FILE      defaults ([client] section; default "
	    "~/.config/rdmacp/config)\n"
	    "      --transport T      auto, tcp or verbs (default auto)\n"
	    "      --lanes N, --qps N data connections: TCP lanes or RC QPs (default 2)\n"
	    "      --devices D1,D2    stripe the lanes over these RDMA devices (implies verbs)\n"
	    "      --chunk-size SIZE  chunk and slot size, power of two (default 1M)\n"
	    "  -r, --recursive        copy directories (symlinks as symlinks, empty dirs kept)\n"
	    "  -p, --preserve         keep modes and modification times\n"
	    "      --owner            also keep uid/gid (root on both ends)\n"
	    "  -n, --dry-run          check access and list what would be copied\n"
	    "  -l, --long             ls: type, mode, owner, size and time of each entry\n"
	    "      --bwlimit RATE     limit the data rate, push or pull: KiB/s, or with a\n"
	    "                         K, M or G suffix (binary): 500 = 500K = 500 KiB/s\n"
	    "      --poll             busy-poll completions (lower latency, one core spins)\n"
	    "      --progress         one updating progress line (default on a terminal)\n"
	    "      --no-progress      no progress line\n"
	    "      --json             NDJSON events on stdout (start, file, error, summary, plan)\n"
	    "  -q, --quiet            print errors only\n"
	    "  -v, --verbose          print each file with its verified checksum; -vv: debug\n"
	    "      --version          print the version\n"
	    "  -h, --help             this text\n"
	    "\n"
	    "Options may follow the operands; -- ends them.\n"
	    "\n"
	    "Exit codes: 0 ok, 1 usage, 2 config, 3 authentication, 4 protocol, 5 remote\n"
	    "refused, 6 local I/O, 7 integrity, 8 transport, 9 partial, 10 interrupted,\n"
	    "11 connect, 12 version mismatch, 13 no RDMA device, 14 remote I/O (the daemon\n"
	    "could not store or read a file, or failed on its side).\n",
	    f);
}

/* --devices rxe0,mlx5_1: 1..16 names, each [A-Za-z0-9_.-]{1,63}. */
static int parse_devices(const char *arg, struct client_opts *o)
{
	const char *p = arg;

	o->ndevices = 0;
	for (;;) {
		size_t n = strcspn(p, ",");
		char name[CLIENT_DEVICE_NAME_LEN];

		if (n == 0 || n >= sizeof(name) || o->ndevices == CLIENT_MAX_DEVICES) {
			log_error("bad --devices '%s': 1 to %d RDMA device names, comma-separated",
				  arg, CLIENT_MAX_DEVICES);
			return -EINVAL;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		if (!rdmadev_name_ok(name)) {
			log_error("bad --devices '%s': '%s' is not a device name", arg, name);
			return -EINVAL;
		}
		memcpy(o->devices[o->ndevices++], name, n + 1);
		if (p[n] == '\0') {
			return 0;
		}
		p += n + 1;
	}
}

enum {
	OPT_CERT = 0x100,
	OPT_KEY,
	OPT_CA,
	OPT_PIN,
	OPT_CONFIG,
	OPT_TRANSPORT,
	OPT_LANES,
	OPT_DEVICES,
	OPT_CHUNK,
	OPT_VERSION,
	OPT_JSON,
	OPT_PROGRESS,
	OPT_NO_PROGRESS,
	OPT_BWLIMIT,
	OPT_OWNER,
	OPT_POLL,
};

static const struct option long_opts[] = {
	{ "port", required_argument, NULL, 'P' },
	{ "cert", required_argument, NULL, OPT_CERT },
	{ "key", required_argument, NULL, OPT_KEY },
	{ "ca", required_argument, NULL, OPT_CA },
	{ "pin", required_argument, NULL, OPT_PIN },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "transport", required_argument, NULL, OPT_TRANSPORT },
	{ "lanes", required_argument, NULL, OPT_LANES },
	{ "qps", required_argument, NULL, OPT_LANES }, /* verbs' name for lanes */
	{ "devices", required_argument, NULL, OPT_DEVICES },
	{ "chunk-size", required_argument, NULL, OPT_CHUNK },
	{ "preserve", no_argument, NULL, 'p' },
	{ "recursive", no_argument, NULL, 'r' },
	{ "owner", no_argument, NULL, OPT_OWNER },
	{ "poll", no_argument, NULL, OPT_POLL },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "progress", no_argument, NULL, OPT_PROGRESS },
	{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
	{ "dry-run", no_argument, NULL, 'n' },
	{ "long", no_argument, NULL, 'l' },
	{ "bwlimit", required_argument, NULL, OPT_BWLIMIT },
	{ "quiet", no_argument, NULL, 'q' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static int set_path(char *dst, size_t len, const char *v)
{
	if (strlen(v) >= len) {
		log_error("path too long: %s", v);
		return -ENAMETOOLONG;
	}
	snprintf(dst, len, "%s", v);
	return 0;
}

/* Config file first (so the command line wins), then every other option. */
static int parse_options(int argc, char **argv, struct client_opts *o, bool load_config)
{
	const char *config = NULL;
	char default_config[4200], err[4400];
	int c, r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < argc) {
			config = argv[i + 1];
		} else if (!strncmp(argv[i], "--config=", 9)) {
			config = argv[i] + 9;
		} else if (!strcmp(argv[i], "--")) {
			break;
		}
	}
	if (!config) {
		const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
		if (xdg && *xdg) {
			snprintf(default_config, sizeof(default_config), "%s/rdmacp/config", xdg);
		} else {
			snprintf(default_config, sizeof(default_config), "%s/.config/rdmacp/config",
				 home ? home : "");
		}
	}
	if (load_config) {
		r = client_config_load(o, config ? config : default_config, config != NULL, err,
				       sizeof(err));
		if (r < 0) {
			log_error("%s", err);
			return EXIT_CONFIG;
		}
	}
	bool transport_tcp = false; /* --transport tcp on this command line */

	/*
	 * Options anywhere, before or after operands and the subcommand name,
	 * as GNU tools and rsync take them: getopt moves the operands to the end
	 * ("--" ends the options).
	 */
	optind = 0;
	while ((c = getopt_long(argc, argv, "P:pqvhrnl", long_opts, NULL)) != -1) {
		unsigned long v;
		uint64_t sz;
		char *end;

		switch (c) {
		case 'P':
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || v == 0 || v > 65535) {
				log_error("bad port '%s'", optarg);
				return EXIT_USAGE;
			}
			o->port = (uint16_t)v;
			break;
		case OPT_CERT:
			if (set_path(o->cert, sizeof(o->cert), optarg) < 0) {
				return EXIT_USAGE;
			}
			break;
		case OPT_KEY:
			if (set_path(o->key, sizeof(o->key), optarg) < 0) {
				return EXIT_USAGE;
			}
			break;
		case OPT_CA:
			if (set_path(o->ca, sizeof(o->ca), optarg) < 0) {
				return EXIT_USAGE;
			}
			break;
		case OPT_PIN:
			if (tls_parse_fingerprint(optarg, o->pin) < 0) {
				log_error("bad --pin '%s': expected sha256:<64 hex digits>",
					  optarg);
				return EXIT_USAGE;
			}
			o->have_pin = true;
			break;
		case OPT_CONFIG:
			break;
		case OPT_TRANSPORT:
			if (!strcmp(optarg, "tcp")) {
				o->transport = XPORT_KIND_TCP;
			} else if (!strcmp(optarg, "verbs")) {
				o->transport = XPORT_KIND_VERBS;
			} else if (!strcmp(optarg, "auto")) {
				o->transport = 0;
			} else {
				log_error("bad --transport '%s': auto, tcp or verbs", optarg);
				return EXIT_USAGE;
			}
			transport_tcp = o->transport == XPORT_KIND_TCP;
			break;
		case OPT_LANES:
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || v == 0 || v > PROTO_MAX_LANES) {
				log_error("bad --lanes '%s': 1..%u", optarg, PROTO_MAX_LANES);
				return EXIT_USAGE;
			}
			o->lanes = (unsigned)v;
			break;
		case OPT_DEVICES:
			if (parse_devices(optarg, o) < 0) {
				return EXIT_USAGE;
			}
			break;
		case OPT_CHUNK:
			if (parse_size(optarg, &sz) < 0 || sz < PROTO_MIN_CHUNK ||
			    sz > PROTO_MAX_CHUNK || (sz & (sz - 1))) {
				log_error("bad --chunk-size '%s': a power of two from 4K to 64M",
					  optarg);
				return EXIT_USAGE;
			}
			o->chunk_size = (uint32_t)sz;
			break;
		case 'p':
			o->preserve = true;
			break;
		case 'r':
			o->recursive = true;
			break;
		case 'n':
			o->dry_run = true;
			break;
		case 'l':
			o->long_listing = true;
			break;
		case OPT_OWNER:
			o->owner = true;
			break;
		case OPT_POLL:
			o->busy_poll = true;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_PROGRESS:
			o->progress = 1;
			break;
		case OPT_NO_PROGRESS:
			o->progress = 0;
			break;
		case OPT_BWLIMIT:
			if (parse_bwlimit(optarg, &sz) < 0 || sz == 0) {
				log_error("bad --bwlimit '%s': KiB per second, or with a "
					  "K, M or G suffix, e.g. 500 or 50M",
					  optarg);
				return EXIT_USAGE;
			}
			o->bwlimit = sz;
			break;
		case 'q':
			o->verbose = -1;
			break;
		case 'v':
			o->verbose = o->verbose < 0 ? 1 : o->verbose + 1;
			break;
		case OPT_VERSION:
			printf("rdmacp %s (protocol %d)\n", RDMACP_VERSION, PROTO_VERSION);
			exit(EXIT_OK);
		case 'h':
			usage(stdout);
			exit(EXIT_OK);
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (o->ndevices > 0) {
		/* Rails are RC QPs on named devices: only verbs has them. */
		if (transport_tcp) {
			log_error("--devices needs --transport verbs (or auto), not tcp");
			return EXIT_USAGE;
		}
		o->transport = XPORT_KIND_VERBS;
	}
	if (o->verbose > 1) {
		log_set_max_level(LOG_DEBUG);
	}
	return 0;
}

struct subcommand {
	const char *name;
	int (*run)(struct client_opts *o, char **args, int nargs);
};

static int run_certs(struct client_opts *o, char **args, int nargs)
{
	(void)o;
	return cmd_certs(nargs, args);
}

static const struct subcommand subcommands[] = {
	{ "ping", cmd_ping },
	{ "ls", cmd_ls },
	{ "doctor", cmd_doctor },
	{ "certs", run_certs },
};

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

int main(int argc, char **argv)
{
	struct client_opts o;
	int r;

	log_set_prefix_mode(false, "rdmacp");
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
	r = parse_options(argc, argv, &o, true);
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
	return cmd_copy(&o, argv + optind, argc - optind);
}
