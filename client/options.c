/* SPDX-License-Identifier: MIT */
/*
 * rdmacp's options (options.h): the table, a handler per option, and the
 * walk that applies the config file and then the command line.
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
#include "xport.h"

_Static_assert(CLIENT_MAX_DEVICES == XPORT_MAX_LANES, "one device per lane at most");
_Static_assert(CLIENT_DEVICE_NAME_LEN == RDMADEV_NAME_MAX + 1, "device name buffer");
_Static_assert(PROTO_MAX_LANES == 16, "the lanes' range in the table");

static void usage(FILE *f)
{
	fputs(
	    "usage: rdmacp [OPTIONS] SRC... HOST:MODULE/PATH        (push)\n"
	    "       rdmacp [OPTIONS] HOST:MODULE/PATH... DEST         (pull)\n"
	    "       rdmacp ls [-l] [-r] [--json] HOST[:MODULE/PATH]  (list modules or entries)\n"
	    "       rdmacp check [-r] [-p] [--level L] SRC HOST:MODULE/PATH  (compare, no copy;\n"
	    "                                                  or HOST:MODULE/PATH DEST)\n"
	    "       rdmacp plan SRC HOST[,HOST...]:MODULE/PATH -o PLAN [--shards N] [copy "
	    "options]\n"
	    "       rdmacp run PLAN --shard I/N|auto              (copy one shard, journaled)\n"
	    "       rdmacp finalize PLAN [--delete [--max-delete N]]  (after all shards)\n"
	    "       rdmacp report PLAN [--json|--csv|--watch]      (outcomes of every entry)\n"
	    "       rdmacp ping HOST\n"
	    "       rdmacp bench [--size S] [--lanes N] [--json] HOST  (memory to memory)\n"
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
	    "      --tos N            IP TOS byte of RDMA lanes (DSCP << 2), for the fabric's\n"
	    "                         lossless class\n"
	    "      --ack-timeout N    RDMA lanes' ACK timeout, 4.096 us << N (0..31)\n"
	    "      --hash-threads N   threads hashing what this end sends or receives,\n"
	    "                         off the event loop (auto: 1 per 4 CPUs on verbs,\n"
	    "                         0 on tcp)\n"
	    "      --chunk-size SIZE  chunk and slot size, power of two (default 1M)\n"
	    "      --wait-busy TIME   a busy daemon (connection limit, memory budget) is\n"
	    "                         asked again with backoff for up to TIME: seconds, or\n"
	    "                         with ms, s, m or h (default 1m; 0: fail at once)\n"
	    "  -r, --recursive        copy directories (symlinks as symlinks, empty dirs kept)\n"
	    "  -p, --preserve         keep modes and modification times (symlinks' too)\n"
	    "  -a, --archive          the same as -r -p\n"
	    "      --owner            also keep uid/gid (root on both ends)\n"
	    "  -H, --hard-links       keep hard links: a file's other names as links to it\n"
	    "  -X, --xattrs           keep extended attributes (user.*; security.*, trusted.*\n"
	    "                         where the receiver runs as root)\n"
	    "  -A, --acls             keep POSIX ACLs (numeric ids; implies -p)\n"
	    "  -n, --dry-run          check access and list what would be copied (with --skip,\n"
	    "                         --delete: kept and deleted too; nothing is written)\n"
	    "      --skip LEVEL       keep destination files: none (default: overwrite),\n"
	    "                         exists (a file by that name), quick (same size and\n"
	    "                         modification time: use with -p), checksum (same\n"
	    "                         size and XXH3-128, each side hashing its own file)\n"
	    "      --size SIZE        bench: bytes to send (K, M, G, T suffixes; default 10G)\n"
	    "      --level LEVEL      check: quick (type, size, modification time; the\n"
	    "                         default) or checksum (type, size, XXH3-128 of the\n"
	    "                         contents, each side hashing its own files); with -p\n"
	    "                         modes and every modification time too, --owner\n"
	    "                         owners, -X extended attributes, -A ACLs, -H hard\n"
	    "                         links\n"
	    "      --exclude PATTERN  leave out what matches (rsync's rules: *, **, ?, [..],\n"
	    "                         leading / anchors at the transfer root, trailing /\n"
	    "                         only directories); repeatable, first match wins\n"
	    "      --include PATTERN  keep what matches, before a later --exclude\n"
	    "      --exclude-from FILE  patterns from FILE, one a line (+ PAT / - PAT)\n"
	    "      --files-from FILE  copy the names listed in FILE (- for stdin), relative to\n"
	    "                         the one source directory, their paths kept\n"
	    "  -0, --from0            --files-from names end in NUL, not newline\n"
	    "      --missing-ok       a listed name that doesn't exist is no failure\n"
	    "      --delete           with -r: remove destination entries the source lacks\n"
	    "                         (only when every entry of the run succeeded)\n"
	    "      --max-delete N     with --delete: remove at most N entries (exit 16 if\n"
	    "                         more were due; 0 lists them with -v, removes none)\n"
	    "      --partial          keep what a cut copy received; a later --partial run\n"
	    "                         of the same source sends only what is missing\n"
	    "      --delta            a file there with the same size: send only the chunks\n"
	    "                         whose XXH3-128 differs (the rest is copied from it)\n"
	    "      --write-devices    pull into an existing local block device by its name\n"
	    "                         (written in place, verified by reading it back)\n"
	    "      --assume-zero-target  block device targets read as zeros already (a new\n"
	    "                         disk or thin LV): zeros not written, still verified\n"
	    "      --encrypt          seal the data lanes (AES-256-GCM) or fail (exit 20);\n"
	    "                         the default seals tcp lanes (not verbs) where the\n"
	    "                         daemon can\n"
	    "      --no-encrypt       data lanes in clear (a module may refuse: exit 20)\n"
	    "  -l, --long             ls: type, mode, owner, size and time of each entry\n"
	    "  -o, --output PLAN      plan: the plan file to write\n"
	    "      --shards N         plan: how many shards (default 1, at most 65536);\n"
	    "                         run --shard auto: the plan's count (a Slurm task's\n"
	    "                         ID is then its shard, whatever the array)\n"
	    "      --compress zstd|none  plan: write the plan zstd-compressed or plain\n"
	    "                         (default: zstd when PLAN ends in .zst)\n"
	    "      --split-size SIZE  plan: files larger than SIZE go in byte ranges of\n"
	    "                         about SIZE that shards send apart; finalize joins them\n"
	    "      --shard I/N|auto   run: which shard; auto from Slurm, MPI, PMI or a\n"
	    "                         Kubernetes Indexed Job (JOB_COMPLETION_INDEX)\n"
	    "      --csv              report: one CSV row per entry\n"
	    "      --watch            report: again every 5 s until nothing is pending\n"
	    "      --bwlimit RATE     limit the data rate, push or pull: KiB/s, or with a\n"
	    "                         K, M, G or T suffix (binary): 500 = 500K = 500 KiB/s\n"
	    "      --poll             busy-poll completions (lower latency, one core spins)\n"
	    "      --progress         one updating progress line (default on a terminal)\n"
	    "      --no-progress      no progress line\n"
	    "      --json             NDJSON events on stdout (start, file, error, summary, plan)\n"
	    "  -q, --quiet            print errors only\n"
	    "  -v, --verbose          itemized line per changed entry (rsync -i), with checksums;\n"
	    "                         -vv: unchanged entries too, and debug\n"
	    "      --version          print the version\n"
	    "  -h, --help             this text\n"
	    "\n"
	    "Options may follow the operands; -- ends them.\n"
	    "\n"
	    "Exit codes: 0 ok, 1 usage, 2 config, 3 authentication, 4 protocol, 5 remote\n"
	    "refused, 6 local I/O, 7 integrity, 8 transport, 9 partial, 10 interrupted,\n"
	    "11 connect, 12 version mismatch, 13 no RDMA device, 14 remote I/O (the daemon\n"
	    "could not store or read a file, or failed on its side), 15 check found\n"
	    "differences (finalize: files not at the destination), 16 deletions held\n"
	    "back by --max-delete, 17 a block device\n"
	    "refused (not allowed, in use, too small), 18 shard already running, 19 bad\n"
	    "plan or journal, 20 lane encryption refused, 21 a split file's parts could\n"
	    "not be assembled.\n",
	    f);
}

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
	if (!strcmp(v, "tcp")) {
		o->transport = XPORT_KIND_TCP;
	} else if (!strcmp(v, "verbs")) {
		o->transport = XPORT_KIND_VERBS;
	} else if (!strcmp(v, "auto")) {
		o->transport = 0;
	} else {
		return -EINVAL;
	}
	return 0;
}

static int set_lanes(struct client_opts *o, const char *v)
{
	uint64_t n;
	int r = parse_uint(v, 1, PROTO_MAX_LANES, &n);

	if (r < 0) {
		return r;
	}
	o->lanes = (unsigned)n;
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

/* rxe0,mlx5_1: 1..16 names, each [A-Za-z0-9_.-]{1,63}. */
static int set_devices(struct client_opts *o, const char *v)
{
	char devices[CLIENT_MAX_DEVICES][CLIENT_DEVICE_NAME_LEN];
	unsigned ndevices = 0;
	const char *p = v;

	for (;;) {
		size_t n = strcspn(p, ",");

		if (n == 0 || n >= sizeof(devices[0]) || ndevices == CLIENT_MAX_DEVICES) {
			return -EINVAL;
		}
		memcpy(devices[ndevices], p, n);
		devices[ndevices][n] = '\0';
		if (!rdmadev_name_ok(devices[ndevices])) {
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
	return 0;
}

static int set_bwlimit(struct client_opts *o, const char *v)
{
	uint64_t rate;
	int r = parse_bwlimit(v, &rate);

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
	if (!strcmp(v, "none")) {
		o->skip = 0;
	} else if (!strcmp(v, "exists")) {
		o->skip = PROTO_OPEN_SKIP_EXISTS;
	} else if (!strcmp(v, "quick")) {
		o->skip = PROTO_OPEN_SKIP_QUICK;
	} else if (!strcmp(v, "checksum")) {
		o->skip = PROTO_OPEN_SKIP_CHECKSUM;
	} else {
		return -EINVAL;
	}
	return 0;
}

static int set_level(struct client_opts *o, const char *v)
{
	if (!strcmp(v, "quick")) {
		o->check_level = CHECK_LEVEL_QUICK;
	} else if (!strcmp(v, "checksum")) {
		o->check_level = CHECK_LEVEL_CHECKSUM;
	} else {
		return -EINVAL;
	}
	return 0;
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

static int set_wait_busy(struct client_opts *o, const char *v)
{
	return parse_duration_ms(v, &o->wait_busy_ms);
}

static int set_output(struct client_opts *o, const char *v)
{
	return set_path(o->plan_out, sizeof(o->plan_out), v);
}

static int set_compress(struct client_opts *o, const char *v)
{
	if (!strcmp(v, "zstd")) {
		o->plan_compress = PLAN_COMPRESS_ZSTD;
	} else if (!strcmp(v, "none")) {
		o->plan_compress = PLAN_COMPRESS_NONE;
	} else {
		return -EINVAL;
	}
	return 0;
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

static int set_help(struct client_opts *o, const char *v)
{
	(void)o;
	(void)v;
	usage(stdout);
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
	  "1 to 16 RDMA device names, comma-separated" },
	{ "tos", required_argument, 0, "tos", set_tos, "0..255 (DSCP << 2)" },
	{ "ack-timeout", required_argument, 0, "ack timeout", set_ack_timeout,
	  "0..31 (4.096 us << N)" },
	{ "hash-threads", required_argument, 0, "hash threads", set_hash_threads, "auto or 0..16" },
	{ "chunk-size", required_argument, 0, "chunk size", set_chunk_size,
	  "a power of two from 4K to 64M" },
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
	{ "skip", required_argument, 0, NULL, set_skip, "none, exists, quick or checksum" },
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
	{ "shard", required_argument, 0, NULL, set_shard, "I/N (0 <= I < N) or auto" },
	{ "csv", no_argument, 0, NULL, set_csv, NULL },
	{ "watch", no_argument, 0, NULL, set_watch, NULL },
	{ "bwlimit", required_argument, 0, "bwlimit", set_bwlimit,
	  "KiB per second, or with a K, M, G or T suffix, e.g. 500 or 50M" },
	{ "poll", no_argument, 0, "poll", set_poll, BOOL_EXPECT },
	{ "progress", no_argument, 0, "progress", set_progress, BOOL_EXPECT },
	{ "no-progress", no_argument, 0, NULL, set_no_progress, NULL },
	{ "json", no_argument, 0, NULL, set_json, NULL },
	{ "quiet", no_argument, 'q', NULL, set_quiet, NULL },
	{ "verbose", no_argument, 'v', NULL, set_verbose, NULL },
	{ "version", no_argument, 0, NULL, set_version, NULL },
	{ "help", no_argument, 'h', NULL, set_help, NULL },
};

const size_t client_noptions = ARRAY_SIZE(client_options);

const struct client_option *client_option_by_key(const char *key)
{
	for (size_t i = 0; i < ARRAY_SIZE(client_options); i++) {
		if (client_options[i].config_key && !strcmp(client_options[i].config_key, key)) {
			return &client_options[i];
		}
	}
	return NULL;
}

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

/* getopt's tables from ours: a long option's val is 0x100 + its index. */
static void getopt_tables(struct option *longs, char *shorts)
{
	size_t nl = 0, ns = 0;

	for (size_t i = 0; i < ARRAY_SIZE(client_options); i++) {
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
	if (c >= 0x100 && (size_t)(c - 0x100) < ARRAY_SIZE(client_options)) {
		return &client_options[c - 0x100];
	}
	for (size_t i = 0; i < ARRAY_SIZE(client_options); i++) {
		if (client_options[i].short_name == c) {
			return &client_options[i];
		}
	}
	return NULL;
}

int client_parse_options(int argc, char **argv, struct client_opts *o, bool load_config)
{
	struct option longs[ARRAY_SIZE(client_options) + 1];
	char shorts[2 * ARRAY_SIZE(client_options) + 1];
	char default_config[4200], err[4400], esc[256];
	bool named, devices_here = false, tcp_here = false;
	const char *config =
	    config_file(argc, argv, default_config, sizeof(default_config), &named);
	int c, r;

	if (load_config) {
		r = client_config_load(o, config, named, err, sizeof(err));
		if (r < 0) {
			log_error("%s", err);
			return EXIT_CONFIG;
		}
	}
	getopt_tables(longs, shorts);
	/*
	 * Options anywhere, before or after operands and the subcommand name,
	 * as GNU tools and rsync take them: getopt moves the operands to the end
	 * ("--" ends the options).
	 */
	optind = 0;
	while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		const struct client_option *opt = option_for(c);
		const char *value;

		if (!opt) {
			usage(stderr);
			return EXIT_USAGE;
		}
		value = opt->has_arg == required_argument ? optarg : NULL;
		r = opt->set(o, value);
		if (r < 0) {
			log_error("bad --%s '%s': %s", opt->name,
				  log_escape(value ? value : "", esc, sizeof(esc)),
				  opt->expect ? opt->expect : "");
			return EXIT_USAGE;
		}
		if (opt->set == set_transport) {
			tcp_here = o->transport == XPORT_KIND_TCP;
		} else if (opt->set == set_devices) {
			devices_here = true;
		}
	}
	if (o->ndevices > 0) {
		/* Rails are RC QPs on named devices: only verbs has them. */
		if (tcp_here && devices_here) {
			log_error("--devices needs --transport verbs (or auto), not tcp");
			return EXIT_USAGE;
		}
		if (tcp_here) {
			/* --transport tcp here wins over the config file's devices. */
			o->ndevices = 0;
		} else {
			o->transport = XPORT_KIND_VERBS;
		}
	}
	if (o->verbose > 1) {
		log_set_max_level(LOG_DEBUG);
	}
	return 0;
}
