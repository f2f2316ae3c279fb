/* SPDX-License-Identifier: MIT */
/*
 * The control-protocol steps both programs share: the HELLO exchange and
 * version negotiation. (The transfer itself is engine.c.)
 */
#pragma once

#include <stdint.h>

#include "chan.h"

/* Capabilities this build offers (and this host's lanes: hello_offer_windows). */
uint64_t hello_local_caps(void);
/*
 * This process's verbs lanes can fence slots by memory windows or not
 * (xport_verbs_windows's answer for its lane devices): hello_local_caps
 * then has PROTO_CAP_MW_FENCE (mwfence_offer), or not. Said before HELLO.
 */
void hello_offer_windows(int windows);
/* caps not announced by this process while on (set by the program, before HELLO). */
void hello_withhold(uint64_t caps, bool on);
/*
 * A daemon's: the local ones and what only a daemon offers (PROTO_CAP_RELAY:
 * it takes RELAY before a push and runs the relay child). What hello_server
 * announces.
 */
uint64_t hello_daemon_caps(void);

/*
 * Client: send HELLO, wait for the daemon's HELLO. Returns the negotiated
 * version (> 0) or -EPROTONOSUPPORT (version mismatch: the daemon's ERROR
 * text or ours in errtext), -EREMOTEIO for another ERROR from the daemon
 * (its code in *ret_code, its text in errtext), or a channel error.
 */
int hello_client(struct chan *c, int timeout_ms, struct msg_hello *ret_peer, uint32_t *ret_code,
		 char *errtext, size_t errlen);

/*
 * Daemon: wait for the client's HELLO, answer HELLO or ERROR(VERSION_MISMATCH
 * / PROTOCOL). Returns the negotiated version or a negative errno (the
 * ERROR has been sent when it can be).
 */
int hello_server(struct chan *c, int timeout_ms, struct msg_hello *ret_peer, char *errtext,
		 size_t errlen);

/* Test hook: RDMACP_TEST_PROTO_VERSION=N makes HELLO offer only version N. */
/* Test hook: RDMACP_TEST_CAPS_OFF=MASK leaves those bits out of HELLO's caps (an older peer). */
