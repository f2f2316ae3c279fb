/* SPDX-License-Identifier: MIT */
/*
 * What the files that serve one connection share; serve.h is their face for
 * main.c. Each file calls only the ones listed below it:
 *
 *   serve.c           the connection: TLS, HELLO, the request table, FILTER, PING, BYE
 *   serve_open.c      OPEN: a push or a pull, its dry run or probe
 *   serve_transfer.c  a copy's data path and engine run, and what it logs
 *   serve_relay.c     RELAY and a relayed push: tickets, the relay child, results
 *   serve_bench.c     BENCH: memory to memory, no module
 *   serve_assemble.c  ASSEMBLE: rdmacp finalize's join of a split file
 *   serve_list.c      LIST (modules, paths), and the FILES a pull's dry run sends
 *   serve_get.c       GET: the pull's walk of the paths the client names
 *   serve_lanes.c     data path set-up: transport, listener, rails, sealing, budget
 *   serve_module.c    refusals, the module policy's word, the module's user and root
 */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <openssl/x509.h>

#include "chan.h"
#include "config.h"
#include "engine.h"
#include "filter.h"
#include "lane_seal.h"
#include "listattrs.h"
#include "policy.h"
#include "tls.h"
#include "xport.h"

#define POLICY_MAX_LANES 8
#define POLICY_MIN_CHUNK (64u << 10)
#define POLICY_MAX_CHUNK (16u << 20)

struct session_table;
struct serve_relay;
struct filehasher;
struct fsglob;
struct walk;

struct conn {
	const struct daemon_config *cfg;
	struct tls_ctx *tls_ctx; /* the daemon's: its trust store checks relay tickets */
	struct tls_conn *tls;
	struct chan chan;
	char peer[96];			   /* address */
	struct sockaddr_storage peer_addr; /* the client's, for its data lanes (verbs) */
	char id[320];			   /* "CN=client sha256:ab12.." for logs */
	uint8_t fp[TLS_FINGERPRINT_LEN];
	struct sockaddr_storage local;
	socklen_t locallen;
	struct session_table *sessions;
	volatile sig_atomic_t *stop; /* set by SIGTERM: an engine run ends cleanly */
	uint64_t last_progress;
	struct policy_session used; /* what this connection stored, against its modules' caps */
	uint64_t peer_caps;	    /* the client's HELLO caps */
	bool switched;		    /* runs as a module's user now, for good */
	uid_t uid;
	gid_t gid;
	/*
	 * The FILTER that came right before this OPEN (filter.h): a pull's
	 * walk applies it; a push's receiver keeps it for a delete pass.
	 */
	struct filter_list filter;
	bool have_filter;
	/* The RELAY that came right before this OPEN, then its child (serve_relay.c). */
	struct serve_relay *relay;
	/*
	 * A relayed push's original client (its ticket's certificate, owned by
	 * relay): the module policy judges the push as its (serve_decide).
	 */
	X509 *on_behalf;
	unsigned sealed_transfers; /* lane_seal_export's count: v1 keys seal only the first */
	/*
	 * Whose side and who writes, for a refusal for permission (the engine's
	 * perm_where): "daemon side: module 'M' (PATH), user 'U' (uid, gid)".
	 */
	char side[PROTO_MAX_PATH + 256];
};

/*
 * What a pull sends: the walk of the GET's paths, made as the engine (or the
 * dry run's listing) asks for entries, and capped by the module.
 */
struct get_source {
	struct conn *c;
	const struct policy_grant *gr;
	struct walk *w;
	uint64_t queued; /* top entries queued on w */
	/* Wildcard matches queued so far, sorted: each is sent once per GET. */
	char **globbed;
	size_t nglobbed;
	/* LIST with PROTO_LIST_SUMS: each regular file listed is hashed here. */
	struct filehasher *fh;
	/* LIST with attribute flags: a LIST_ATTRS record per entry of the batch. */
	struct list_attrs la;
	struct proto_entry_attrs *attrs; /* PROTO_MAX_BATCH of them */
};

/* ---- serve_module.c ---- */

/* Tell the client no (ERROR), and log who asked for what and why. Returns -EPERM. */
int serve_refuse(struct conn *c, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct policy_peer serve_conn_peer(const struct conn *c);
/* Ask the module policy (policy.h); a no is sent to the client, with its reason. */
int serve_decide(struct conn *c, const struct policy_request *rq, struct policy_grant *ret);
/* A path the granted request names in its module (policy_path); a no is sent. */
int serve_check_path(struct conn *c, const struct policy_grant *g, int rootfd, const char *rel);
/*
 * Become the module's user, then open its root as that user: only for a
 * request the module policy granted. The one way into a module's files.
 */
int serve_enter_module(struct conn *c, const struct policy_grant *gr, int *ret_rootfd);
/*
 * Can this session (the module's user, entered) write in dirfd, the
 * directory rel names in the module (rel's parent when parent)? A no is sent
 * naming the module, the directory, the user and the daemon's side.
 */
int serve_check_writable(struct conn *c, const struct policy_grant *gr, int dirfd, const char *rel,
			 bool parent);

/* ---- serve_lanes.c ---- */

/* What a data path is set up for: a copy's OPEN, or a BENCH. */
struct lanes_want {
	unsigned transport; /* XPORT_KIND_*, 0: the daemon's choice */
	bool write_send;    /* the client asked for the WRITE + SEND verbs path */
	uint8_t encrypt;    /* the client's wish for sealed lanes, 0: none */
	bool encrypt_asked; /* OPEN_OK says whether the lanes are sealed */
	int encryption;	    /* the "encryption" that applies ... */
	const char *who;    /* ... and whose it is, for the client */
	enum lane_seal_purpose purpose;
	unsigned lanes; /* the client's proposal */
	int tos;
	bool hash_threads; /* hashing threads beside the engine (a copy) */
	bool test_hooks;   /* RDMACPD_TEST_LANE_TAMPER / _TEE apply (a copy) */
	bool rails;	   /* daemon rails offered (a copy) */
	const char *what;  /* names the lanes in the log: "data", "bench" */
};

/* The data path as set up: how it went, for the log. */
struct lanes {
	const struct xport_ops *ops;
	struct xport_listener *l;
	struct xport_params xp;
	uint16_t port;
	bool sealed;
	/*
	 * Rails only: the address the client reached has no RDMA device (a
	 * management address); the listener is on this rail instead, and no
	 * lane goes to the address reached (OPEN_OK's PROTO_RAILS_UNREACHED).
	 * AF_UNSPEC otherwise.
	 */
	struct sockaddr_storage primary;
};

/* A ring of the client's slot size and count, within "max slots" and "pool size". */
void serve_lanes_size(const struct daemon_config *cfg, uint32_t chunk_size, uint32_t slots,
		      struct engine_params *ep);
/*
 * The data path the client asked for: listener, sealing and its keys (in
 * ep), pinned memory reserved against the budget (released by the caller's
 * session_table_release), OPEN_OK, then the lanes connected (*ret_x).
 * Refusals are sent; lane keys are wiped on failure.
 */
int serve_lanes_open(struct conn *c, const struct lanes_want *w, struct engine_params *ep,
		     struct lanes *ret, struct xport **ret_x);
/* The AEAD of sealed lanes, for the logs ("AES-256-GCM" for verbs slots). */
const char *serve_lanes_cipher(const struct lanes *ln);

/* ---- serve_get.c ---- */

void serve_pull_warning(void *ud, const char *path, const char *why);
int serve_get_next(void *ud, const struct engine_src **ret, char *why, size_t whylen);
void serve_get_engine_source(struct get_source *g, struct engine_source *ret);
/* The client's GET, each path checked and queued once on g's walker. */
int serve_expand_get(struct conn *c, const struct policy_grant *gr, int rootfd, bool recursive,
		     struct get_source *g);
/* fsglob_expand within the module's 'max files per session'; a refusal is sent. */
int serve_expand_pattern(struct conn *c, const struct policy_grant *gr, int rootfd,
			 const char *pattern, const char *esc, uint64_t max_matches,
			 struct fsglob *ret);
/* The walker's refusal of a path's top entry, as the client hears it. */
int serve_refuse_top(struct conn *c, int r, const char *esc);
void serve_free_strings(char **v, size_t n);

/* ---- serve_list.c ---- */

/* What a pull would send (or a listing shows), in FILES batches, then END. */
int serve_list_plan(struct get_source *g);
int serve_list(struct conn *c, const struct msg *m);

/* ---- serve_relay.c ---- */

/* RELAY: the chain kept for the push OPEN that must follow it. */
int serve_relay_request(struct conn *c, const struct msg *m);
/* Is a RELAY waiting for its OPEN? */
bool serve_relay_pending(const struct conn *c);
/*
 * OPEN with a RELAY before it, before the module policy's word: a push's
 * only; the ticket for this daemon checked; rq names the chain and the
 * client it is on behalf of (the ticket's). A no is sent. Nothing without a RELAY.
 */
int serve_relay_open(struct conn *c, const struct msg_open *o, struct policy_request *rq);
/* The policy said yes: whose push it is, through whom, in the log. */
void serve_relay_granted(struct conn *c);
/* Before the session leaves its privileges: the relay credentials read. */
int serve_relay_prepare(struct conn *c, const struct policy_grant *gr);
/* After: the relay child started and told the chain, before any OPEN_OK. */
int serve_relay_spawn(struct conn *c, const struct msg_open *o);
/* The engine's relay feed (engine_params.relay_feed), -1: none. */
int serve_relay_feed(const struct conn *c);
/* " (relayed by ... for ...)" for the transfer's log lines, or "". */
const char *serve_relay_note(const struct conn *c);
/*
 * After the engine (r its result): the child's results, one RELAY_RESULT per
 * destination of the chain when r >= 0. Returns r, or a send's failure.
 */
int serve_relay_finish(struct conn *c, int r);
/* The relay's end: a child still there is killed. Nothing without a RELAY. */
void serve_relay_free(struct conn *c);

/* ---- serve_transfer.c ---- */

/* A copy over a data path: a push into basefd, or a pull of pull_srcs. */
int serve_transfer(struct conn *c, const struct msg_open *o, const struct policy_grant *gr,
		   int basefd, const char *rename_to, struct get_source *pull_srcs);
/* A probe's engine, on the control channel alone. */
int serve_probe(struct conn *c, const struct msg_open *o, const struct policy_grant *gr, int basefd,
		const char *rename_to, struct get_source *pull_srcs);

/* ---- the request handlers (serve.c's table) ---- */

int serve_open(struct conn *c, const struct msg *m);
int serve_bench(struct conn *c, const struct msg *m);
int serve_assemble(struct conn *c, const struct msg *m);
