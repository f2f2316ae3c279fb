/* SPDX-License-Identifier: MIT */
/*
 * What a client may do in a module: the one place that decides it.
 *
 * Every request that touches a module (OPEN for a push or a pull, LIST,
 * ASSEMBLE) and every one that needs a daemon-wide right (BENCH) asks
 * policy_decide() first, with what it wants (struct policy_request). The
 * answer is a grant: the module, the path in it, and everything the request
 * may then do there (the metadata rule for what it writes, the byte and file
 * caps left, devices, lane encryption). serve.c opens a module's root only
 * with a grant (enter_module), and it cannot find a module by itself: the
 * lookup of a path's module lives here. So a new request type gets nothing
 * from a module without passing through these rules, and a rule added here
 * holds for every request type at once.
 *
 * Each path a request names beneath the module (a GET's paths and their
 * wildcard matches, a listing's, ASSEMBLE's name and staging directory)
 * goes through policy_path(): clean, not the receiver's reserved store, and
 * for reads no block device unless the module exports devices.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/x509.h>

#include "config.h"
#include "meta_policy.h"
#include "proto/msg.h"
#include "tls.h"

struct tls_conn;

/* Who asks: the authenticated peer of one connection. */
struct policy_peer {
	struct tls_conn *tls;
	const uint8_t *fp; /* its certificate's SHA-256 fingerprint */
	uint64_t caps;	   /* its HELLO capabilities */
	/*
	 * On behalf of (a relayed push, set by policy_peer_on_behalf): the
	 * original client's certificate from its checked relay ticket, and
	 * that certificate's fingerprint. Then 'deny', 'allow' and every
	 * module rule match the original client, and the TLS peer (the
	 * relaying daemon) must match the module's 'relay from'.
	 */
	X509 *behalf;
	uint8_t behalf_fp[TLS_FINGERPRINT_LEN];
};

/*
 * Make peer a relayed push's: on behalf of cert (borrowed: it must outlive
 * peer's use), the certificate relay_ticket_check returned. 0 or -errno.
 */
int policy_peer_on_behalf(struct policy_peer *peer, X509 *cert);

/* What one connection has used so far of its modules' caps. */
struct policy_session {
	uint64_t bytes;	    /* declared by pushes and assembled, all modules together */
	uint32_t assembles; /* ASSEMBLEs done */
};

enum policy_op {
	POLICY_PUSH = 1, /* OPEN, direction push */
	POLICY_PULL,	 /* OPEN, direction pull */
	POLICY_LIST,	 /* LIST of a path */
	POLICY_ASSEMBLE, /* ASSEMBLE (rdmacp finalize) */
	POLICY_BENCH,	 /* BENCH: no module, 'allow bench' */
};

struct policy_request {
	enum policy_op op;
	const char *path; /* MODULE/REL or /ABS/PATH as the peer sent it; NULL for BENCH */
	uint32_t flags;	  /* PROTO_OPEN_* (push, pull), PROTO_LIST_*, PROTO_ASM_* */
	uint8_t encrypt;  /* BENCH: its lanes wish (PROTO_ENCRYPT_*) */
	uint64_t bytes;	  /* ASSEMBLE: the file's size */
	/*
	 * A push that goes on to further destinations: the RELAY the client
	 * sent before OPEN (NULL: none). policy_relay_chain's rules hold.
	 */
	const struct msg_relay *relay;
};

struct policy_grant {
	enum policy_op op;
	const struct daemon_config *cfg;
	const struct module *m; /* NULL for BENCH */
	const char *path;	/* the request's path as sent */
	const char *rel;	/* the path in the module (in path) */
	/* The metadata rule for every entry this request makes. */
	struct meta_policy meta;
	uint64_t max_file_size;	     /* a file's declared size */
	uint64_t session_bytes_left; /* this connection's, for this module */
	unsigned max_files;	     /* entries one request may list or send */
	bool devices;		     /* block devices read and written whole */
	int encryption;		     /* enum module_encryption of the request */
	int tos;		     /* its lanes' IP TOS byte, -1 none */
	/*
	 * A 'write only' module: the answers to a push say nothing of what is
	 * there (no items of what differed, nothing answered kept).
	 */
	bool conceal;
	uint32_t seal_; /* set by policy_decide only (policy_grant_valid) */
};

/*
 * Decide. 0 with *ret filled in; or -EPERM with the PERR_* code and the text
 * the client is told. A refusal in a 'write only' module names nothing the
 * module holds.
 */
int policy_decide(const struct daemon_config *cfg, const struct policy_peer *peer,
		  const struct policy_session *s, const struct policy_request *rq,
		  struct policy_grant *ret, uint32_t *ret_code, char *why, size_t whylen);

/*
 * May a granted push go on to the hops of rl (its count may be 0: only
 * the receiver's own ticket, nothing after it)? The module relays
 * ('relay = yes'); every hop's host, as the client wrote it, matches the
 * module's 'relay to' patterns (or [global]'s when the module has none).
 * Every OPEN flag is carried along (-H, -X, -A included). policy_decide
 * applies it to a request with relay set. 0, or -EPERM with the PERR_*
 * code and the text.
 */
int policy_relay_chain(const struct daemon_config *cfg, const struct module *m,
		       const struct msg_relay *rl, uint32_t *ret_code, char *why, size_t whylen);

/*
 * For a log line: "relayed by RELAY for CLIENT" names (escaped CN, else
 * a fingerprint) of a relayed push's TLS peer and original client. Only
 * for a peer with behalf set.
 */
void policy_relay_names(const struct policy_peer *peer, char *relay, size_t relaylen, char *client,
			size_t clientlen);

/* Did policy_decide make g (and say yes)? */
bool policy_grant_valid(const struct policy_grant *g);

/*
 * A path rel (no leading '/', trailing ones allowed, "" the module itself)
 * that a granted request names beneath its module: 0, or -EPERM with the
 * code and text. rootfd: the module's root, for a read's block-device rule
 * (-1: not looked at).
 */
int policy_path(const struct policy_grant *g, int rootfd, const char *rel, uint32_t *ret_code,
		char *why, size_t whylen);

/*
 * A further path of a granted request as the peer sent it (MODULE/REL or
 * /ABS/PATH, as a GET's): in the same module, and then policy_path's rules.
 * *ret_rel points into path.
 */
int policy_request_path(const struct policy_grant *g, int rootfd, const char *path,
			const char **ret_rel, uint32_t *ret_code, char *why, size_t whylen);

/* Count what a granted request stored (bytes pushed or assembled) against the session. */
void policy_account(struct policy_session *s, const struct policy_grant *g, uint64_t bytes);

/*
 * Is this peer's certificate on a 'deny' list: [global]'s (cfg, may be
 * NULL) or module m's (may be NULL)? A deny entry matches as an 'allow'
 * entry does (CN or SAN, or fingerprint), and wins over any 'allow'.
 */
bool policy_peer_denied(const struct daemon_config *cfg, const struct module *m,
			const struct policy_peer *peer);

/*
 * May this peer see module m in a listing of modules (its 'allow')? Its
 * PROTO_MOD_* flags (read only, write only) in *ret_flags when it may.
 */
bool policy_module_visible(const struct policy_peer *peer, const struct module *m,
			   uint32_t *ret_flags);

/* Does m take pushes at all (no 'read only'): what --check's write test asks. */
bool policy_module_takes_pushes(const struct module *m);
