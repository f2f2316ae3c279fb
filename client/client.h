/* SPDX-License-Identifier: MIT */
/*
 * The client's options, remote operands and subcommands. The connection to a
 * daemon is daemon_conn.h, fitting the pool to the limits fit.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter.h"
#include "tls.h"

#define CLIENT_DEFAULT_PORT    7471
#define CLIENT_MAX_DEVICES     16 /* XPORT_MAX_LANES */
#define CLIENT_DEVICE_NAME_LEN 68 /* RDMADEV_SPEC_MAX + 1: name[:port] */
/* Lanes, chunk size and ring slots when neither the user nor the link says otherwise. */
#define CLIENT_DEFAULT_LANES 2
#define CLIENT_DEFAULT_CHUNK (1u << 20)
#define CLIENT_DEFAULT_SLOTS 32 /* LINKWIN_MIN_SLOTS */
/* A push's pool: 64 chunks of the default size (as many bytes of larger ones sized to the link). */
#define CLIENT_DEFAULT_POOL_CHUNKS 64

enum check_level {
	CHECK_LEVEL_QUICK = 0, /* type, size and mtime (rsync's quick check) */
	CHECK_LEVEL_CHECKSUM,  /* type, size and XXH3-128 of the contents */
};

struct client_opts {
	char cert[4096], key[4096], ca[4096];
	bool have_pin;
	uint8_t pin[TLS_FINGERPRINT_LEN];
	uint16_t port;
	int transport; /* 0 auto, enum xport_kind */
	unsigned lanes;
	bool lanes_set; /* --lanes given (here or in the config): not sized to the link */
	/* --devices: lane i leaves from devices[i % ndevices] (verbs rails), NAME[:PORT]. */
	char devices[CLIENT_MAX_DEVICES][CLIENT_DEVICE_NAME_LEN];
	unsigned ndevices;
	uint32_t chunk_size;
	bool chunk_set; /* --chunk-size given */
	/*
	 * --slots: the receiving ring's slots asked for in OPEN (the daemon may
	 * grant fewer). Not given (slots_set false): sized to the link
	 * (client_fit_link), CLIENT_DEFAULT_SLOTS until then.
	 */
	uint32_t slots;
	bool slots_set;
	uint32_t slots_given; /* --slots as given, before any fit */
	uint32_t pool_chunks;
	int connect_timeout_s;
	int idle_timeout_s;
	int verbose; /* -1 quiet, 0 normal, 1+ verbose */
	bool preserve;
	bool owner;
	bool hardlinks; /* -H */
	bool xattrs;	/* -X */
	bool acls;	/* -A */
	bool recursive;
	bool json;
	bool dry_run;
	uint32_t skip;	      /* --skip: 0 or one PROTO_OPEN_SKIP_* level */
	int check_level;      /* check --level: enum check_level */
	bool mirror;	      /* --delete */
	bool have_max_delete; /* --max-delete given */
	uint64_t max_delete;  /* --max-delete, PROTO_NO_MAX_DELETE: none */
	bool partial;	      /* --partial: keep cut files, resume them */
	bool delta;	      /* --delta: send only the chunks the destination's file lacks */
	bool write_devices;   /* --write-devices: a pull may write local block devices */
	bool assume_zero;     /* --assume-zero-target: device targets read as zeros already */
	bool busy_poll;
	int tos;	   /* --tos: the lanes' traffic class (verbs), -1 = the system's */
	int ack_timeout;   /* --ack-timeout: verbs' IB encoding 0..31, -1 = rdma_cm's */
	int gid_index;	   /* --gid-index: the lanes' GID (with --devices), -1 = auto */
	int roce_version;  /* --roce-version: 1 or 2, checked on the lanes; 0 = auto */
	int hash_threads;  /* --hash-threads: a receiving engine's, -1 = auto */
	bool long_listing; /* ls -l */
	int progress;	   /* -1 default (a terminal), 0 off, 1 on */
	int encrypt;	   /* -1 default (tcp lanes sealed where the daemon can), 0 off, 1 on */
	uint64_t bwlimit;  /* bytes per second, 0 = none */
	/* --include, --exclude, --exclude-from, in the order given */
	struct filter_list filters;
	bool filters_from_stdin; /* --exclude-from - */
	/* --files-from FILE ("-": standard input), -0: its names end in NUL */
	char files_from[4096];
	bool from0;
	bool missing_ok;       /* a --files-from name that doesn't exist is no failure */
	uint64_t bench_size;   /* bench --size: bytes to send (default 10 GiB) */
	uint64_t wait_busy_ms; /* --wait-busy: how long a busy daemon is asked again, 0: not */
	/* plan, run, report, finalize (migrate_*.c) */
	char plan_out[4096]; /* plan -o */
	uint32_t shards;     /* plan --shards; run --shard auto: a Kubernetes index's count */
	char shard_spec[64]; /* run --shard I/N or auto */
	uint32_t jobs;	     /* finalize --jobs: probe sessions at once; 0: the default */
	bool csv;	     /* report --csv */
	bool watch;	     /* report --watch */
	/* plan --compress: by the name (.zst), or as said */
	enum { PLAN_COMPRESS_AUTO = 0, PLAN_COMPRESS_NONE, PLAN_COMPRESS_ZSTD } plan_compress;
	uint64_t split_size; /* plan --split-size: files larger go in ranges of it; 0 = none */
	bool every_host;     /* plan --every-host: each shard to every host (a fan-out) */
	int relay_feed;	     /* --relay-feed: a relay child's feed from rdmacpd, -1: none */
	unsigned fanout;     /* --fanout: several destinations as a tree of it; 1: a chain */
	/* --relay-slow-time: a relay child's slow-hop window in seconds (slowhop.h), 0: off */
	unsigned relay_slow_s;
};

/* A pull's receiver removes partials of cut runs older than this from the directories it writes. */
#define CLIENT_PARTIAL_MAX_AGE_S (7 * 24 * 3600)

/* The built-in defaults, which the config file and then the command line override. */
void client_opts_defaults(struct client_opts *o);
/* What the options hold on the heap (the filters). */
void client_opts_free(struct client_opts *o);
/*
 * Defaults from ~/.config/rdmacp/config (or file) over o: its [client]
 * section, then the [host PATTERN] sections matching host (as typed; NULL:
 * no host, only [client]). A missing file is
 * no error unless must_exist; /dev/null is an empty config. On error returns
 * -errno with "FILE:LINE: problem" in err, or "FILE: problem" for the file as
 * a whole (conffile_read(): not a regular file, too big, unreadable).
 */
int client_config_load(struct client_opts *o, const char *file, bool must_exist, const char *host,
		       char *err, size_t errlen);

struct remote {
	char host[256];	 /* without brackets */
	char path[4096]; /* MODULE/REL (may be empty) */
};

/* "HOST:PATH" / "[v6]:PATH" -> 1; a local path -> 0; malformed -> -EINVAL. */
int parse_remote(const char *arg, struct remote *ret);

int cmd_copy(struct client_opts *o, char **args, int nargs);
/* rdmacp run: each entry a push commits, skips or fails is told to fn too (NULL: none). */
void copy_set_observer(void (*fn)(void *ud, const char *name, const char *action, uint64_t bytes,
				  const char *code, const uint8_t *hash),
		       void *ud);
/*
 * rdmacp run: the next pushes send these entries (v[0..n), kept by the
 * caller), not their operands' files; the operands name the destination
 * only. n = 0: back to operands.
 */
struct engine_src;
void copy_set_sources(const struct engine_src *v, size_t n);
/* Whether SIGINT or SIGTERM came during cmd_copy (or after copy_catch_signals). */
bool copy_interrupted(void);
/* SIGINT and SIGTERM from now on noted for copy_interrupted, not fatal; SIGPIPE ignored. */
void copy_catch_signals(void);
/* After a copy cut by SIGINT or SIGTERM: how to pick it up again (--partial or not). */
void copy_interrupt_hint(const struct client_opts *o);
int cmd_plan(struct client_opts *o, char **args, int nargs);
int cmd_run(struct client_opts *o, char **args, int nargs);
int cmd_finalize(struct client_opts *o, char **args, int nargs);
int cmd_report(struct client_opts *o, char **args, int nargs);
int cmd_ls(struct client_opts *o, char **args, int nargs);
int cmd_check(struct client_opts *o, char **args, int nargs);
int cmd_bench(struct client_opts *o, char **args, int nargs);
int cmd_ping(struct client_opts *o, char **args, int nargs);
int cmd_doctor(struct client_opts *o, char **args, int nargs);
int cmd_certs(int argc, char **argv);
