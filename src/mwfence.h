/* SPDX-License-Identifier: MIT */
/*
 * The zero-copy fence's agreement (memory windows, PROTO_CAP_MW_FENCE,
 * docs/PROTOCOL.md "Memory windows"): whether this end announces it, whether
 * a session's lanes take it, and what a credit carries once they do. One
 * place for each rule; the programs and the engine call these.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "xport.h"

/*
 * PROTO_CAP_MW_FENCE when this host's verbs lanes can fence by windows:
 * windows is xport_verbs_windows's answer for its lane devices (1: every
 * one binds type-2 windows; 0 or -errno: not). 0 otherwise. A test switch
 * plays an end without it by masking the bit (RDMACP_TEST_CAPS_OFF).
 */
uint64_t mwfence_offer(int windows);

/*
 * Do a session's lanes fence slots by windows? Only when both ends announced
 * PROTO_CAP_MW_FENCE, the lanes are verbs, and slots are not sealed (a
 * sealed slot is opened into a private copy, which is its fence already).
 * With rails a lost lane's windows are opened again on the lanes up
 * (engine_windows.c), so any number of lanes takes them. Both ends compute
 * it from the same facts (OPEN_OK's) before the lanes connect.
 */
bool mwfence_agreed(uint64_t local_caps, uint64_t peer_caps, enum xport_kind kind,
		    bool sealed_slots);

/*
 * A credit's word (its RECV_IMM's len): with windows, the key of the window
 * the receiver opened over the slot, never 0; without, 0. Returns 0 with
 * *ret_key (0 without windows), or -EBADMSG.
 */
int mwfence_credit_key(bool windows, uint32_t word, uint32_t *ret_key);
