/* SPDX-License-Identifier: MIT */
/*
 * rdmacpd.conf: INI read with libinih. [global] plus one section per module.
 * Every error names the file, the line and the problem.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define DAEMON_DEFAULT_PORT 7471
#define DAEMON_MAX_LISTEN   16
#define DAEMON_MAX_RAILS    15 /* rails: 16 lanes at most, one on the address reached */
#define DAEMON_MAX_MODULES  256
#define DAEMON_MAX_ALLOW    64
/* "relay to": host patterns, each at most DAEMON_MAX_HOST_PATTERN bytes. */
#define DAEMON_MAX_RELAY_TO	64
#define DAEMON_MAX_HOST_PATTERN 255
/* Sessions of a module without 'uid' run as this system user (sysusers.d). */
#define DAEMON_DEFAULT_USER "rdmacp"

/* Entries one pull may list or send, unless the module says otherwise. */
#define DAEMON_DEFAULT_MAX_FILES 1000000
/*
 * "max slots": the most ring slots one session's receiver may have, whatever
 * a client asks for ("pool size" over the chunk size caps them too); and the
 * smallest chunk a session is sized with, which bounds what "pool size" can
 * ever hold (POLICY_MIN_CHUNK).
 */
#define DAEMON_DEFAULT_MAX_SLOTS 1024
#define DAEMON_MIN_CHUNK	 (64u << 10)
/* "cert warn days": the daemon's certificate expiring this soon is logged. */
#define DAEMON_DEFAULT_CERT_WARN_DAYS 30
/* struct module.tos while loading: the key not given (then [global]'s). */
#define MODULE_TOS_INHERIT (-2)

struct listen_addr {
	struct sockaddr_storage ss;
	socklen_t len;
	char text[80]; /* as written, for logs */
};

enum allow_kind {
	ALLOW_ANY = 1,	       /* "*" */
	ALLOW_NAME = 2,	       /* certificate CN or a DNS SAN */
	ALLOW_FINGERPRINT = 3, /* "sha256:HEX" */
};

struct allow_rule {
	enum allow_kind kind;
	char name[256];
	uint8_t fp[32];
};

/* "encryption": what a module does with clear and sealed data lanes. */
enum module_encryption {
	ENCRYPTION_INHERIT = 0, /* a module without the key: [global]'s */
	ENCRYPTION_OFF,		/* clear lanes only; --encrypt is refused */
	ENCRYPTION_ALLOWED,	/* sealed when the client asks (its default on tcp); the default */
	ENCRYPTION_REQUIRED,	/* sealed lanes only; clear ones are refused */
};

struct module {
	char name[64];
	char path[4096]; /* absolute */
	bool read_only;	 /* default: no */
	bool write_only; /* default: no */
	struct allow_rule allow[DAEMON_MAX_ALLOW];
	size_t nallow; /* 0: nobody is allowed */
	/* "deny": certificates refused here whatever 'allow' says ([global]'s too). */
	struct allow_rule deny[DAEMON_MAX_ALLOW];
	size_t ndeny;
	bool have_uid, have_gid; /* written in the config */
	uid_t uid;
	gid_t gid;
	/*
	 * Who the module's sessions run as, resolved at load (rdmacpd.conf(5)):
	 * 'uid'/'gid' as written, else the system user DAEMON_DEFAULT_USER
	 * (and its group). When rdmacpd is not root, run_uid/run_gid are what
	 * the module asks for; serve.c refuses a module whose identity is not
	 * the daemon's own.
	 */
	uid_t run_uid;
	gid_t run_gid;
	bool keep_setid;     /* "keep setid": set-id and sticky bits as sent; default no */
	bool preserve_owner; /* "preserve owner": --owner honoured; needs uid = root */
	/*
	 * "devices": block devices under the path may be read whole (pull) and
	 * written, existing ones by name only (push); default no.
	 */
	bool devices;
	/*
	 * The module directory as found (modroot.h): at load, or by the
	 * supervisor once a path missing at load appears. A later OPEN must
	 * find the same one. root_known false: not found, the module is
	 * unavailable, root_errno (positive) says why.
	 */
	bool root_known;
	int root_errno;
	dev_t root_dev;
	ino_t root_ino;
	/* "max connections": sessions in this module at once, all clients; UINT_MAX: no cap */
	unsigned max_connections;
	unsigned max_files; /* entries one session may list or send; default 1000000 */
	/* Pushes: a file's declared size, and one connection's together; default none. */
	uint64_t max_file_size, max_session_bytes;
	char comment[1025]; /* "comment": shown in module listings (PROTO_MAX_TEXT) */
	int encryption;	    /* enum module_encryption, never INHERIT once loaded */
	/*
	 * "tos": the IP TOS byte of the daemon's RDMA lanes for this module (its
	 * frames); -1: none, they follow the client's connection request. A
	 * module without the key takes [global]'s once loaded.
	 */
	int tos;
	/*
	 * Relays (rdmacpd.conf(5), docs/SECURITY.md "Relays"). relay: a push
	 * into this module may go on to further destinations ('relay = yes').
	 * relay_to: the hosts it may go on to, as the client wrote them
	 * (fnmatch patterns); none here: [global]'s. relay_from: the relaying
	 * daemons that may deliver here on a client's behalf (rules as
	 * 'allow'); none: relayed pushes are refused.
	 */
	bool relay;
	char relay_to[DAEMON_MAX_RELAY_TO][DAEMON_MAX_HOST_PATTERN + 1];
	size_t nrelay_to;
	struct allow_rule relay_from[DAEMON_MAX_ALLOW];
	size_t nrelay_from;
};

struct daemon_config {
	char path[4096]; /* the config file */
	struct listen_addr listen[DAEMON_MAX_LISTEN];
	size_t nlisten; /* 0: socket activation or the default 0.0.0.0:7471 */
	char cert[4096], key[4096], ca[4096];
	char crl[4096];		 /* "crl": the CA's revocation list (PEM); "" none */
	unsigned cert_warn_days; /* "cert warn days": 0 never; default 30 */
	/* "deny" in [global]: certificates refused at connection, before HELLO's answer. */
	struct allow_rule deny[DAEMON_MAX_ALLOW];
	size_t ndeny;
	unsigned max_connections;     /* default 64 */
	unsigned max_per_host;	      /* default 8: per peer address */
	unsigned max_unauth;	      /* in TLS/HELLO at once; default max connections / 2 */
	unsigned max_unauth_per_host; /* per IPv4 address or IPv6 /64; default max_per_host */
	unsigned handshake_timeout_s; /* default 5: TLS and HELLO together */
	unsigned idle_timeout_s;      /* default 300 */
	uint64_t drain_timeout_ms;    /* SIGTERM: sessions may finish this long; default 20 s */
	int hash_threads;	      /* "hash threads": a receiving session's, -1 = auto */
	unsigned partial_max_age_s;   /* --partial data unwritten this long goes; 0 never; 7 days */
	uint64_t memory_budget;	      /* pinned bytes, all sessions; default 4 GiB */
	uint64_t pool_size;	      /* per session; default 64 MiB */
	unsigned max_slots;	      /* "max slots": a session's ring; DAEMON_DEFAULT_MAX_SLOTS */
	int log_level;		      /* LOG_* ; default LOG_INFO */
	/* 'allow bench': who may run rdmacp bench (memory to memory); none: nobody */
	struct allow_rule bench_allow[DAEMON_MAX_ALLOW];
	size_t nbench_allow;
	int encryption; /* modules' default; enum module_encryption, ALLOWED */
	/* "cipher": sealed tcp lanes' enum lane_seal_suite; 0 auto (the fastest here) */
	int seal_suite;
	/*
	 * "lanes from other addresses": RDMA lanes are taken from any address
	 * with the session token, not only the control connection's; default no.
	 */
	bool lanes_any_source;
	int tos; /* "tos" in [global]: modules' default and bench's; -1 none */
	/*
	 * "rails": more local addresses (each on another RDMA device, port 0)
	 * on which a verbs session's lanes are taken too (daemon rails).
	 */
	struct sockaddr_storage rails[DAEMON_MAX_RAILS];
	size_t nrails;
	/* "relay to" in [global]: the modules' default (a module's own replaces it). */
	char relay_to[DAEMON_MAX_RELAY_TO][DAEMON_MAX_HOST_PATTERN + 1];
	size_t nrelay_to;
	/*
	 * "relay certificate", "relay key": who this daemon is to the next hop
	 * of a relayed push ("" both: cert and key, which then need the client
	 * purpose). "relay client": the rdmacp binary it runs for that ("":
	 * rdmacp beside rdmacpd, else the one installed).
	 */
	char relay_cert[4096], relay_key[4096];
	char relay_client[4096];
	/*
	 * "relay slow time": the slow-hop window in seconds (slowhop.h) of
	 * this daemon's relay children, 0 never; default SLOWHOP_DEFAULT_S.
	 */
	unsigned relay_slow_s;
	struct module *modules;
	size_t nmodules;
};

/*
 * Parse FILE into a fresh config. On error returns -EINVAL and writes
 * "FILE:LINE: problem" into err; for the file as a whole, "FILE: problem"
 * and -errno: it cannot be opened or read, it is not a regular file (-EISDIR,
 * -EINVAL), or it is bigger than the cap in rdmacpd.conf(5) (-EFBIG).
 */
int daemon_config_load(const char *file, struct daemon_config **ret, char *err, size_t errlen);
void daemon_config_free(struct daemon_config *c);
const struct module *daemon_config_module(const struct daemon_config *c, const char *name);
/* Parse "host:port", "[v6]:port", "host" (default port). */
int parse_listen_addr(const char *text, struct listen_addr *ret);
