/* SPDX-License-Identifier: MIT */
/* rdmacp internals shared by the client's files. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include "chan.h"
#include "tls.h"

#define CLIENT_DEFAULT_PORT    7471
#define CLIENT_MAX_DEVICES     16 /* XPORT_MAX_LANES */
#define CLIENT_DEVICE_NAME_LEN 64 /* RDMADEV_NAME_MAX + 1 */

struct client_opts {
	char cert[4096], key[4096], ca[4096];
	bool have_pin;
	uint8_t pin[TLS_FINGERPRINT_LEN];
	uint16_t port;
	int transport; /* 0 auto, enum xport_kind */
	unsigned lanes;
	/* --devices: lane i leaves from devices[i % ndevices] (verbs rails). */
	char devices[CLIENT_MAX_DEVICES][CLIENT_DEVICE_NAME_LEN];
	unsigned ndevices;
	uint32_t chunk_size;
	uint32_t slots;
	uint32_t pool_chunks;
	int connect_timeout_s;
	int idle_timeout_s;
	int verbose; /* -1 quiet, 0 normal, 1+ verbose */
	bool preserve;
	bool owner;
	bool recursive;
	bool json;
	bool dry_run;
	bool busy_poll;
	bool long_listing; /* ls -l */
	int progress;	   /* -1 default (a terminal), 0 off, 1 on */
	uint64_t bwlimit;  /* bytes per second, 0 = none */
};

/* Defaults, then ~/.config/rdmacp/config (or file): "FILE:LINE: problem" in err. */
void client_opts_defaults(struct client_opts *o);
int client_config_load(struct client_opts *o, const char *file, bool must_exist, char *err,
		       size_t errlen);

struct remote {
	char host[256];	 /* without brackets */
	char path[4096]; /* MODULE/REL (may be empty) */
};

/* "HOST:PATH" / "[v6]:PATH" -> 1; a local path -> 0; malformed -> -EINVAL. */
int parse_remote(const char *arg, struct remote *ret);

/* What client_fit chose (client/fit.c). */
struct client_fit {
	uint64_t limit; /* RLIMIT_MEMLOCK (soft) */
	bool unlimited; /* no limit, or CAP_IPC_LOCK */
	bool fitted;	/* the pool was made smaller to fit the limit */
	uint64_t pool;	/* bytes the client pins */
	uint32_t chunk;
	uint32_t chunks; /* pool chunks (push) or ring slots (pull) */
};

/*
 * Fit o's chunk_size, slots and pool_chunks to --bwlimit and to the locked
 * memory this user may pin, for a transfer in direction (PROTO_DIR_*) on
 * *transport (0: auto, which may become tcp when verbs would not fit).
 * Returns 0, or an exit code with the error printed.
 */
int client_fit(struct client_opts *o, uint8_t direction, uint8_t *transport,
	       struct client_fit *ret);
/* "8 MiB", "1.5 GiB", "512 bytes". */
void fit_format_bytes(uint64_t v, char *buf, size_t len);
/* --bwlimit: a bare number is KiB/s (as rsync's), K/M/G/T suffixes as parse_size. */
int parse_bwlimit(const char *s, uint64_t *ret);

/* One control connection to a daemon (copy.c). */
struct session {
	struct client_opts *o;
	const struct remote *rem;
	struct tls_ctx *ctx;
	struct tls_conn *tls;
	struct chan chan;
	bool chan_ok;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	int version;
	struct msg_hello hello; /* the daemon's */
	struct client_fit fit;	/* what open_transfer fitted to the limits */
	bool have_fit;
};

/* Connect, TLS, HELLO. Returns 0 or an exit code (error already printed). */
int session_open(struct session *s);
void session_close(struct session *s, bool clean);
/* The exit code for a daemon's ERROR code. */
int exit_for_perr(uint32_t code);

int cmd_copy(struct client_opts *o, char **args, int nargs);
int cmd_ls(struct client_opts *o, char **args, int nargs);
int cmd_ping(struct client_opts *o, char **args, int nargs);
int cmd_doctor(struct client_opts *o, char **args, int nargs);
int cmd_certs(int argc, char **argv);
