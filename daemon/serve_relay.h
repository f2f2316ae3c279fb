/* SPDX-License-Identifier: MIT */
/*
 * A relayed push's state in its session, shared by the two files that keep
 * it: serve_relay.c (MSG_RELAY, the tickets and the policy's word, the
 * results) and serve_relay_child.c below it (the relay credentials, the
 * relay child's start and end). serve_internal.h is their face for the rest
 * of the session.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <openssl/x509.h>

#include "config.h"
#include "proto/msg.h"

/*
 * The relay credentials as the child gets them: /proc/self/fd/N (no /dev/fd needed) of a sealed memfd
 * each. (No CRL: a client checks no revocation of a daemon's certificate.)
 */
enum relay_cred {
	RELAY_CRED_CERT,
	RELAY_CRED_KEY,
	RELAY_CRED_CA,
	RELAY_CRED_N,
};
/* A credential file, at most (they are PEM certificates, keys and lists). */
#define RELAY_CRED_MAX (1u << 20)

struct serve_relay {
	struct msg_relay chain; /* the MSG_RELAY, copied (relay_chain_copy) */
	/* The original client's certificate: the TLS peer's, or the self ticket's. */
	X509 *client_cert;
	char note[720];		/* " (relayed by ... for ...)" for the session's log lines, or "" */
	int cred[RELAY_CRED_N]; /* memfds, -1: none */
	char client[4096];	/* the relay client's binary */
	unsigned slow_s;	/* 'relay slow time' (slowhop.h) */
	pid_t pid;		/* the relay child, 0: none */
	int sock;		/* our end of the feed (O_NONBLOCK), -1: none */
};

/* ---- serve_relay_child.c ---- */

/*
 * While the session is still privileged: the relay credentials into sealed
 * memfds owned by uid/gid (who the child will run as), mode 0400, and the
 * relay client's binary. -errno with why filled.
 */
int serve_relay_child_prepare(const struct daemon_config *cfg, struct serve_relay *rl, uid_t uid,
			      gid_t gid, char *why, size_t whylen);
/*
 * The relay child: fork + exec of rl->client with the feed's other end, the
 * credentials and o's transfer options; rl->pid and rl->sock set, the
 * memfds closed here. -errno with why filled.
 */
int serve_relay_child_spawn(struct serve_relay *rl, const struct msg_open *o, char *why,
			    size_t whylen);
/*
 * The child's end: waited for up to wait_ms (then killed). Its exit in
 * words into how ("" for a clean exit 0) and *ret_exit its exit code, or
 * EXIT_TRANSPORT when a signal ended it. rl->pid is 0 after.
 */
void serve_relay_child_reap(struct serve_relay *rl, int wait_ms, char *how, size_t howlen,
			    int *ret_exit);
/* Closes the memfds that are still open. */
void serve_relay_child_close_creds(struct serve_relay *rl);
