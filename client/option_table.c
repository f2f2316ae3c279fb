/* SPDX-License-Identifier: MIT */
/*
 * rdmacp's option table (options.h): a row per option, for the command line
 * and the [client] section of the config file alike, and the handler that
 * takes each option's value. Handlers log nothing but --exclude-from's line.
 */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "proto/msg.h"
#include "rdmadev.h"
#include "slowhop.h"
#include "xport.h"

_Static_assert(CLIENT_MAX_DEVICES == XPORT_MAX_LANES, "one device per lane at most");
_Static_assert(CLIENT_DEVICE_NAME_LEN == RDMADEV_SPEC_MAX + 1, "device name[:port] buffer");
_Static_assert(PROTO_MAX_LANES == 16, "the lanes' range in the table");
_Static_assert(PROTO_MAX_SLOTS == 4096, "the slots' range in the table");

/* A no_argument option: given on the command line (NULL), or a boolean in the file. */
static int flag_value(const char *v, bool *ret)
{
	if (!v) {
		*ret = true;
		return 0;
	}
	return parse_bool(v, ret);
}

static int set_path(char *dst, size_t len, const char *v)
{
	if (!*v) {
		return -EINVAL;
	}
	if (strlen(v) >= len) {
		return -ENAMETOOLONG;
	}
	snprintf(dst, len, "%s", v);
	return 0;
}

static int set_cert(struct client_opts *o, const char *v)
{
	return set_path(o->cert, sizeof(o->cert), v);
}

static int set_key(struct client_opts *o, const char *v)
{
	return set_path(o->key, sizeof(o->key), v);
}

static int set_ca(struct client_opts *o, const char *v)
{
	return set_path(o->ca, sizeof(o->ca), v);
}

static int set_pin(struct client_opts *o, const char *v)
{
	int r = tls_parse_fingerprint(v, o->pin);

	if (r < 0) {
		return r;
	}
	o->have_pin = true;
	return 0;
}

static int set_port(struct client_opts *o, const char *v)
{
	return parse_port(v, &o->port);
}

/* --config was read before the walk (client_parse_options). */
static int set_config(struct client_opts *o, const char *v)
{
	(void)o;
	(void)v;
	return 0;
}

static int set_transport(struct client_opts *o, const char *v)
{
	static const struct parse_enum_name names[] = {
		{ "tcp", XPORT_KIND_TCP },
		{ "verbs", XPORT_KIND_VERBS },
		{ "auto", 0 },
	};

	return parse_enum(v, names, ARRAY_SIZE(names), false, &o->transport);
}

static int set_lanes(struct client_opts *o, const char *v)
{
	uint64_t n;
	int r = parse_uint(v, 1, PROTO_MAX_LANES, &n);

	if (r < 0) {
		return r;
	}
	o->lanes = (unsigned)n;
	o->lanes_set = true;
	return 0;
}

/*
 * --slots auto|2..PROTO_MAX_SLOTS: the receiving ring's slots. Two at least:
 * one slot would let one chunk in flight at a time, and the engine refuses it.
 */
static int set_slots(struct client_opts *o, const char *v)
{
	uint64_t n;
	int r;

	if (!strcmp(v, "auto")) {
		o->slots = CLIENT_DEFAULT_SLOTS;
		o->slots_set = false;
		return 0;
	}
	r = parse_uint(v, 2, PROTO_MAX_SLOTS, &n);
	if (r < 0) {
		return r;
	}
	o->slots = o->slots_given = (uint32_t)n;
	o->slots_set = true;
	return 0;
}

/* --tos 0..255: the IP TOS byte (DSCP << 2 | ECN) RDMA lanes carry. */
static int set_tos(struct client_opts *o, const char *v)
{
	uint64_t n;
	int r = parse_uint(v, 0, 255, &n);

	if (r < 0) {
		return r;
	}
	o->tos = (int)n;
	return 0;
}

/* --hash-threads auto|0..16: threads hashing what this end receives. */
static int set_hash_threads(struct client_opts *o, const char *v)
{
	uint64_t n;
	int r;

	if (!strcmp(v, "auto")) {
		o->hash_threads = -1;
		return 0;
	}
	r = parse_uint(v, 0, ENGINE_HASH_THREADS_MAX, &n);
	if (r < 0) {
		return r;
	}
	o->hash_threads = (int)n;
	return 0;
}

/* --ack-timeout 0..31: the local ACK timeout of RDMA lanes, 4.096 us << N. */
static int set_ack_timeout(struct client_opts *o, const char *v)
{
	uint64_t n;
	int r = parse_uint(v, 0, 31, &n);

	if (r < 0) {
		return r;
	}
	o->ack_timeout = (int)n;
	return 0;
}

/* rxe0,mlx5_1:2: 1..16 devices, each a name [A-Za-z0-9_.-]{1,63} and maybe :PORT (1..255). */
static int set_devices(struct client_opts *o, const char *v)
{
	char devices[CLIENT_MAX_DEVICES][CLIENT_DEVICE_NAME_LEN];
	unsigned ndevices = 0;
	const char *p = v;

	for (;;) {
		size_t n = strcspn(p, ",");
		struct rdmadev_spec spec;

		if (n == 0 || n >= sizeof(devices[0]) || ndevices == CLIENT_MAX_DEVICES) {
			return -EINVAL;
		}
		memcpy(devices[ndevices], p, n);
		devices[ndevices][n] = '\0';
		if (rdmadev_spec_parse(devices[ndevices], &spec) < 0) {
			return -EINVAL;
		}
		ndevices++;
		if (p[n] == '\0') {
			break;
		}
		p += n + 1;
	}
	memcpy(o->devices, devices, sizeof(devices));
	o->ndevices = ndevices;
	return 0;
}

/* --gid-index auto or 0..65535 (NCCL_IB_GID_INDEX, UCX_IB_GID_INDEX): -1 is auto. */
static int set_gid_index(struct client_opts *o, const char *v)
{
	uint64_t n;
	int r;

	if (strcmp(v, "auto") == 0) {
		o->gid_index = -1;
		return 0;
	}
	r = parse_uint(v, 0, RDMADEV_GID_TABLE_MAX - 1, &n);
	if (r < 0) {
		return r;
	}
	o->gid_index = (int)n;
	return 0;
}

/* --roce-version auto, 1 or 2 (NCCL_IB_ROCE_VERSION_NUM): 0 is auto. */
static int set_roce_version(struct client_opts *o, const char *v)
{
	if (strcmp(v, "auto") == 0) {
		o->roce_version = 0;
	} else if (strcmp(v, "1") == 0 || strcmp(v, "2") == 0) {
		o->roce_version = v[0] - '0';
	} else {
		return -EINVAL;
	}
	return 0;
}

static int set_chunk_size(struct client_opts *o, const char *v)
{
	uint64_t sz;
	int r = parse_size(v, &sz);

	if (r < 0) {
		return r;
	}
	if (sz < PROTO_MIN_CHUNK || sz > PROTO_MAX_CHUNK || (sz & (sz - 1))) {
		return -ERANGE;
	}
	o->chunk_size = (uint32_t)sz;
	o->chunk_set = true;
	return 0;
}

static int set_bwlimit(struct client_opts *o, const char *v)
{
	uint64_t rate;
	int r = parse_rate(v, &rate);

	if (r < 0) {
		return r;
	}
	if (rate == 0) {
		return -ERANGE;
	}
	o->bwlimit = rate;
	return 0;
}

static int set_skip(struct client_opts *o, const char *v)
{
	static const struct parse_enum_name names[] = {
		{ "none", 0 },
		{ "exists", PROTO_OPEN_SKIP_EXISTS },
		{ "quick", PROTO_OPEN_SKIP_QUICK },
		{ "checksum", PROTO_OPEN_SKIP_CHECKSUM },
	};
	int level;
	int r = parse_enum(v, names, ARRAY_SIZE(names), false, &level);

	if (r == 0) {
		o->skip = (uint32_t)level;
	}
	return r;
}

static int set_level(struct client_opts *o, const char *v)
{
	static const struct parse_enum_name names[] = {
		{ "quick", CHECK_LEVEL_QUICK },
		{ "checksum", CHECK_LEVEL_CHECKSUM },
	};

	return parse_enum(v, names, ARRAY_SIZE(names), false, &o->check_level);
}

static int set_size(struct client_opts *o, const char *v)
{
	uint64_t sz;
	int r = parse_size(v, &sz);

	if (r < 0) {
		return r;
	}
	if (sz == 0 || sz > PROTO_BENCH_MAX_BYTES) {
		return -ERANGE;
	}
	o->bench_size = sz;
	return 0;
}

static int set_exclude(struct client_opts *o, const char *v)
{
	return filter_add(&o->filters, FILTER_EXCLUDE, v);
}

static int set_include(struct client_opts *o, const char *v)
{
	return filter_add(&o->filters, FILTER_INCLUDE, v);
}

static int set_exclude_from(struct client_opts *o, const char *v)
{
	unsigned line;
	int r = filter_add_file(&o->filters, v, &line);

	o->filters_from_stdin |= !strcmp(v, "-");
	if (r < 0 && line > 0) {
		char esc[256];

		/* Which line: the table's message names only the file. */
		log_error("--exclude-from %s: line %u: %s", log_escape(v, esc, sizeof(esc)), line,
			  r == -E2BIG ? "too many rules" : strerror(-r));
	}
	return r;
}

static int set_files_from(struct client_opts *o, const char *v)
{
	return set_path(o->files_from, sizeof(o->files_from), v);
}

static int set_max_delete(struct client_opts *o, const char *v)
{
	uint64_t n;
	int r = parse_uint(v, 0, UINT64_MAX - 1, &n);

	if (r < 0) {
		return r;
	}
	o->max_delete = n;
	o->have_max_delete = true;
	return 0;
}

/* --wait-busy: at most a day. */
static int set_wait_busy(struct client_opts *o, const char *v)
{
	return parse_duration_ms(v, 24ull * 3600 * 1000, &o->wait_busy_ms);
}

static int set_output(struct client_opts *o, const char *v)
{
	return set_path(o->plan_out, sizeof(o->plan_out), v);
}

static int set_compress(struct client_opts *o, const char *v)
{
	static const struct parse_enum_name names[] = {
		{ "zstd", PLAN_COMPRESS_ZSTD },
		{ "none", PLAN_COMPRESS_NONE },
	};
	int compress;
	int r = parse_enum(v, names, ARRAY_SIZE(names), false, &compress);

	if (r == 0) {
		o->plan_compress = compress;
	}
	return r;
}

static int set_split_size(struct client_opts *o, const char *v)
{
	uint64_t sz;
	int r = parse_size(v, &sz);

	if (r < 0) {
		return r;
	}
	if (sz < PROTO_MIN_CHUNK || sz > (1ull << 50)) {
		return -ERANGE;
	}
	o->split_size = sz;
	return 0;
}

static int set_shards(struct client_opts *o, const char *v)
{
	uint64_t n;
	int r = parse_uint(v, 1, 65536, &n);

	if (r < 0) {
		return r;
	}
	o->shards = (uint32_t)n;
	return 0;
}

static int set_jobs(struct client_opts *o, const char *v)
{
	uint64_t n;
	int r = parse_uint(v, 1, 1024, &n);

	if (r < 0) {
		return r;
	}
	o->jobs = (uint32_t)n;
	return 0;
}

static int set_shard(struct client_opts *o, const char *v)
{
	return set_path(o->shard_spec, sizeof(o->shard_spec), v);
}

static int set_connect_timeout(struct client_opts *o, const char *v)
{
	uint64_t s;
	int r = parse_uint(v, 1, 3600, &s);

	if (r < 0) {
		return r;
	}
	o->connect_timeout_s = (int)s;
	return 0;
}

/* A flag kept in a bool of client_opts. */
#define FLAG_HANDLER(fn, field)                             \
	static int fn(struct client_opts *o, const char *v) \
	{                                                   \
		return flag_value(v, &o->field);            \
	}

FLAG_HANDLER(set_recursive, recursive)
FLAG_HANDLER(set_preserve, preserve)
FLAG_HANDLER(set_owner, owner)
FLAG_HANDLER(set_hardlinks, hardlinks)
FLAG_HANDLER(set_xattrs, xattrs)

/* -A: ACLs, and the modes they go with (rsync's -A implies -p too). */
static int set_acls(struct client_opts *o, const char *v)
{
	int r = flag_value(v, &o->acls);

	if (r == 0 && o->acls) {
		o->preserve = true;
	}
	return r;
}
FLAG_HANDLER(set_dry_run, dry_run)
FLAG_HANDLER(set_partial, partial)
FLAG_HANDLER(set_delta, delta)
FLAG_HANDLER(set_write_devices, write_devices)
FLAG_HANDLER(set_assume_zero, assume_zero)
FLAG_HANDLER(set_long, long_listing)
FLAG_HANDLER(set_poll, busy_poll)
FLAG_HANDLER(set_json, json)
FLAG_HANDLER(set_from0, from0)
FLAG_HANDLER(set_missing_ok, missing_ok)
FLAG_HANDLER(set_delete, mirror)
FLAG_HANDLER(set_csv, csv)
FLAG_HANDLER(set_watch, watch)
FLAG_HANDLER(set_every_host, every_host)

/* -a: -r -p, as cp -a and rsync -a (less what rdmacp doesn't keep: owners, links). */
static int set_archive(struct client_opts *o, const char *v)
{
	int r = set_recursive(o, v);

	return r < 0 ? r : set_preserve(o, v);
}

static int set_progress(struct client_opts *o, const char *v)
{
	bool on;
	int r = flag_value(v, &on);

	if (r < 0) {
		return r;
	}
	o->progress = on ? 1 : 0;
	return 0;
}

static int set_encrypt(struct client_opts *o, const char *v)
{
	bool on;
	int r = flag_value(v, &on);

	if (r < 0) {
		return r;
	}
	o->encrypt = on ? 1 : 0;
	return 0;
}

static int set_no_encrypt(struct client_opts *o, const char *v)
{
	(void)v;
	o->encrypt = 0;
	return 0;
}

static int set_no_progress(struct client_opts *o, const char *v)
{
	(void)v;
	o->progress = 0;
	return 0;
}

static int set_quiet(struct client_opts *o, const char *v)
{
	(void)v;
	o->verbose = -1;
	return 0;
}

static int set_verbose(struct client_opts *o, const char *v)
{
	(void)v;
	o->verbose = o->verbose < 0 ? 1 : o->verbose + 1;
	return 0;
}

static int set_version(struct client_opts *o, const char *v)
{
	(void)o;
	(void)v;
	printf("rdmacp %s (protocol %d)\n", RDMACP_VERSION, PROTO_VERSION);
	exit(EXIT_OK);
}

/* rdmacpd's relay child: the feed's descriptor (relay_mode.c checks it is one). */
static int set_relay_feed(struct client_opts *o, const char *v)
{
	uint64_t fd;
	int r = parse_uint(v, 0, INT32_MAX, &fd);

	if (r < 0) {
		return r;
	}
	o->relay_feed = (int)fd;
	return 0;
}

/* --fanout K: several destinations as a tree where each hop forwards to up to K. */
static int set_fanout(struct client_opts *o, const char *v)
{
	uint64_t n;
	int r = parse_uint(v, 1, PROTO_MAX_RELAY_FANOUT, &n);

	if (r < 0) {
		return r;
	}
	o->fanout = (unsigned)n;
	return 0;
}

/* rdmacpd's relay child: its 'relay slow time' (slowhop.h), 0 never. */
static int set_relay_slow_time(struct client_opts *o, const char *v)
{
	uint64_t s;
	int r = parse_uint(v, 0, SLOWHOP_MAX_S, &s);

	if (r < 0) {
		return r;
	}
	o->relay_slow_s = (unsigned)s;
	return 0;
}

static int set_help(struct client_opts *o, const char *v)
{
	(void)o;
	(void)v;
	client_usage(stdout);
	exit(EXIT_OK);
}

#define PATH_EXPECT "a file name, 1 to 4095 bytes"
#define BOOL_EXPECT "yes, no, true, false, 1 or 0"
#define PATTERN_EXPECT \
	"a pattern of 1 to 4096 bytes (not just /); at most 1024 rules and 256 KiB in all"

/* { name, has_arg, short, config key, handler, what a good value is }, as rdmacp(1) lists them. */
const struct client_option client_options[] = {
	{ "port", required_argument, 'P', "port", set_port, "1..65535" },
	{ "cert", required_argument, 0, "cert", set_cert, PATH_EXPECT },
	{ "key", required_argument, 0, "key", set_key, PATH_EXPECT },
	{ "ca", required_argument, 0, "ca", set_ca, PATH_EXPECT },
	{ "pin", required_argument, 0, "pin", set_pin,
	  "expected sha256:<64 hex digits, ':' between pairs allowed>" },
	{ "config", required_argument, 0, NULL, set_config, PATH_EXPECT },
	{ "transport", required_argument, 0, "transport", set_transport, "auto, tcp or verbs" },
	{ "lanes", required_argument, 0, "lanes", set_lanes, "1..16" },
	{ "qps", required_argument, 0, NULL, set_lanes, "1..16" }, /* verbs' name for lanes */
	{ "devices", required_argument, 0, "devices", set_devices,
	  "1 to 16 RDMA devices, comma-separated, each NAME or NAME:PORT (port 1..255)" },
	{ "gid-index", required_argument, 0, "gid index", set_gid_index, "auto or 0..65535" },
	{ "roce-version", required_argument, 0, "roce version", set_roce_version, "auto, 1 or 2" },
	{ "tos", required_argument, 0, "tos", set_tos, "0..255 (DSCP << 2)" },
	{ "ack-timeout", required_argument, 0, "ack timeout", set_ack_timeout,
	  "0..31 (4.096 us << N)" },
	{ "hash-threads", required_argument, 0, "hash threads", set_hash_threads, "auto or 0..16" },
	{ "chunk-size", required_argument, 0, "chunk size", set_chunk_size,
	  "a power of two from 4K to 64M" },
	{ "slots", required_argument, 0, "slots", set_slots, "auto or 2..4096" },
	{ NULL, required_argument, 0, "connect timeout", set_connect_timeout, "seconds, 1..3600" },
	{ "wait-busy", required_argument, 0, "wait busy", set_wait_busy,
	  "a duration up to 24h: seconds, or with ms, s, m or h (0: don't wait)" },
	{ "recursive", no_argument, 'r', NULL, set_recursive, NULL },
	{ "preserve", no_argument, 'p', NULL, set_preserve, NULL },
	{ "archive", no_argument, 'a', NULL, set_archive, NULL },
	{ "owner", no_argument, 0, NULL, set_owner, NULL },
	{ "hard-links", no_argument, 'H', NULL, set_hardlinks, NULL },
	{ "xattrs", no_argument, 'X', NULL, set_xattrs, NULL },
	{ "acls", no_argument, 'A', NULL, set_acls, NULL },
	{ "dry-run", no_argument, 'n', NULL, set_dry_run, NULL },
	{ "skip", required_argument, 0, "skip", set_skip, "none, exists, quick or checksum" },
	{ "level", required_argument, 0, NULL, set_level, "quick or checksum" },
	{ "size", required_argument, 0, NULL, set_size, "bytes, with K, M, G or T: 1 .. 1P" },
	{ "exclude", required_argument, 0, NULL, set_exclude, PATTERN_EXPECT },
	{ "include", required_argument, 0, NULL, set_include, PATTERN_EXPECT },
	{ "exclude-from", required_argument, 0, NULL, set_exclude_from,
	  "a readable file of patterns, one a line (at most 1024 rules, 256 KiB)" },
	{ "files-from", required_argument, 0, NULL, set_files_from, PATH_EXPECT " or -" },
	{ "from0", no_argument, '0', NULL, set_from0, NULL },
	{ "missing-ok", no_argument, 0, NULL, set_missing_ok, NULL },
	{ "delete", no_argument, 0, NULL, set_delete, NULL },
	{ "max-delete", required_argument, 0, NULL, set_max_delete,
	  "a number of entries, 0 or more" },
	{ "partial", no_argument, 0, NULL, set_partial, NULL },
	{ "delta", no_argument, 0, NULL, set_delta, NULL },
	{ "write-devices", no_argument, 0, NULL, set_write_devices, NULL },
	{ "assume-zero-target", no_argument, 0, NULL, set_assume_zero, NULL },
	{ "encrypt", no_argument, 0, "encrypt", set_encrypt, BOOL_EXPECT },
	{ "no-encrypt", no_argument, 0, NULL, set_no_encrypt, NULL },
	{ "long", no_argument, 'l', NULL, set_long, NULL },
	{ "output", required_argument, 'o', NULL, set_output, PATH_EXPECT },
	{ "shards", required_argument, 0, NULL, set_shards, "1..65536" },
	{ "compress", required_argument, 0, NULL, set_compress, "zstd or none" },
	{ "split-size", required_argument, 0, NULL, set_split_size,
	  "bytes, with K, M, G or T: 4K .. 1P" },
	{ "every-host", no_argument, 0, NULL, set_every_host, NULL },
	{ "shard", required_argument, 0, NULL, set_shard, "I/N (0 <= I < N) or auto" },
	{ "jobs", required_argument, 0, NULL, set_jobs, "1..1024" },
	{ "csv", no_argument, 0, NULL, set_csv, NULL },
	{ "watch", no_argument, 0, NULL, set_watch, NULL },
	{ "bwlimit", required_argument, 0, "bwlimit", set_bwlimit,
	  "KiB per second, or with a K, M, G or T suffix, e.g. 500 or 50M" },
	{ "poll", no_argument, 0, "poll", set_poll, BOOL_EXPECT },
	{ "progress", no_argument, 0, "progress", set_progress, BOOL_EXPECT },
	{ "no-progress", no_argument, 0, NULL, set_no_progress, NULL },
	{ "json", no_argument, 0, NULL, set_json, NULL },
	{ "fanout", required_argument, 0, NULL, set_fanout, "1..16 (1: a chain)" },
	{ "relay-feed", required_argument, 0, NULL, set_relay_feed,
	  "a descriptor number (rdmacpd's relay child only)" },
	{ "relay-slow-time", required_argument, 0, NULL, set_relay_slow_time,
	  "seconds, 0..3600 (rdmacpd's relay child only)" },
	{ "quiet", no_argument, 'q', NULL, set_quiet, NULL },
	{ "verbose", no_argument, 'v', NULL, set_verbose, NULL },
	{ "version", no_argument, 0, NULL, set_version, NULL },
	{ "help", no_argument, 'h', NULL, set_help, NULL },
};

const size_t client_noptions = ARRAY_SIZE(client_options);
_Static_assert(ARRAY_SIZE(client_options) <= CLIENT_MAX_OPTIONS, "getopt's tables in options.c");

const struct client_option *client_option_by_key(const char *key)
{
	for (size_t i = 0; i < ARRAY_SIZE(client_options); i++) {
		if (client_options[i].config_key && !strcmp(client_options[i].config_key, key)) {
			return &client_options[i];
		}
	}
	return NULL;
}
