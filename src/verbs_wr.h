/* SPDX-License-Identifier: MIT */
/*
 * Pure translation between the transport interface (struct xport_wr /
 * xport_wc) and libibverbs work requests and completions: no device, no
 * system calls, so all of it is unit-tested on machines without RDMA.
 *
 * Hardware wr_ids are ours, not the engine's: a completion in error carries
 * only wr_id, status and qp_num (its opcode is undefined), so the wr_id has to
 * say by itself whether it was a send or a receive, on which lane, and which
 * queue entry. The backend keeps the engine's wr_id in that entry.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "xport.h"

enum verbs_wrid_kind {
	VERBS_WRID_SEND = 1,
	VERBS_WRID_RECV = 2,
};

/* Queue sequence numbers travel in the low 48 bits of a wr_id. */
#define VERBS_WRID_SEQ_BITS 48
#define VERBS_WRID_SEQ_MASK ((UINT64_C(1) << VERBS_WRID_SEQ_BITS) - 1)

uint64_t verbs_wrid_encode(enum verbs_wrid_kind kind, unsigned lane, uint64_t seq);
/* -EINVAL for a wr_id we never made (unknown kind or lane >= nlanes). */
int verbs_wrid_decode(uint64_t wr_id, unsigned nlanes, enum verbs_wrid_kind *ret_kind,
		      unsigned *ret_lane, uint64_t *ret_seq48);
/* The full sequence number of a 48-bit one that is at or after `done`. */
uint64_t verbs_seq_expand(uint64_t done, uint64_t seq48);

/*
 * Checks one request the way xport_tcp does at post time: lane, opcode and
 * flags known; a non-empty buffer lies inside its MR, unless it is inline
 * and fits max_inline (inline data needs no registration).
 */
int verbs_wr_check(const struct xport_wr *w, unsigned nlanes, uint32_t max_inline);

/* One ibv_send_wr (and its single sge) for w; next is left NULL. */
void verbs_wr_fill(const struct xport_wr *w, uint64_t hw_wr_id, uint32_t max_inline,
		   struct ibv_send_wr *ret_wr, struct ibv_sge *ret_sge);

/*
 * Builds one chain per lane from wrs[0..n) (checked before), keeping the
 * caller's order within each lane. out_wr/out_sge have n entries; entry i
 * gets sequence base_seq[lane] + (its position in the lane). ret_heads and
 * ret_counts have nlanes entries (NULL / 0 for lanes without requests).
 */
void verbs_wr_chain(const struct xport_wr *wrs, size_t n, unsigned nlanes, const uint64_t *base_seq,
		    uint32_t max_inline, struct ibv_send_wr *out_wr, struct ibv_sge *out_sge,
		    struct ibv_send_wr **ret_heads, size_t *ret_counts);

/*
 * The WRITE + SEND path (xport_params.write_send). A WRITE_IMM becomes an
 * RDMA WRITE of its bytes (none when len is 0: a zero-length RDMA WRITE is
 * not sent) and then a SEND of a VERBS_SEND_MSG_LEN-byte message: imm u32,
 * len u32, big-endian. The active side opens each lane with one message,
 * VERBS_OPEN_IMM / VERBS_OPEN_LEN, before anything else (iWARP: MPA wants
 * the active side to send first).
 */
#define VERBS_SEND_MSG_LEN 8
#define VERBS_OPEN_IMM	   0x52444d43u /* "RDMC" */
#define VERBS_OPEN_LEN	   0xffffffffu

void verbs_send_msg_encode(uint32_t imm, uint32_t len, uint8_t out[VERBS_SEND_MSG_LEN]);
void verbs_send_msg_decode(const uint8_t in[VERBS_SEND_MSG_LEN], uint32_t *ret_imm,
			   uint32_t *ret_len);

/* Hardware send requests one request takes: 2 for a WRITE_IMM with bytes on WRITE + SEND. */
unsigned verbs_wr_hw_count(const struct xport_wr *w, bool write_send);

/*
 * verbs_wr_chain for the WRITE + SEND path. Each lane's messages live in
 * msgs[lane] (msg_slots entries of VERBS_SEND_MSG_LEN bytes, registered with
 * msg_lkey[lane]); a SEND with sequence s uses entry s % msg_slots, written
 * here. The WRITE of a WRITE_IMM is unsignaled, its SEND carries the
 * request's flags (signaled: both are done). out_wr, out_sge and ret_src
 * have 2n entries; ret_src[k] is the index in wrs that hardware request k
 * came from. Returns the number of hardware requests.
 */
size_t verbs_wr_chain_send(const struct xport_wr *wrs, size_t n, unsigned nlanes,
			   const uint64_t *base_seq, uint32_t max_inline, uint8_t *const *msgs,
			   const uint32_t *msg_lkey, unsigned msg_slots, struct ibv_send_wr *out_wr,
			   struct ibv_sge *out_sge, size_t *ret_src, struct ibv_send_wr **ret_heads,
			   size_t *ret_counts);

/* WRITE + SEND: a receive for one message into buf (VERBS_SEND_MSG_LEN bytes, lkey). */
void verbs_recv_fill_msg(uint64_t hw_wr_id, void *buf, uint32_t lkey, struct ibv_recv_wr *ret_wr,
			 struct ibv_sge *ret_sge);

/*
 * Which path a device's transport allows: WRITE_IMM for InfiniBand and RoCE
 * (IBV_TRANSPORT_IB), WRITE_SEND for iWARP (or any, when force_send), and
 * -EOPNOTSUPP for the others (usNIC, unspecified: no RC RDMA WRITE).
 */
int verbs_transport_path(enum ibv_transport_type t, bool force_send);
/* "InfiniBand/RoCE", "iWARP", ... for messages. */
const char *verbs_transport_name(enum ibv_transport_type t);

/* A zero-length receive (num_sge 0) for an immediate. */
void verbs_recv_fill(uint64_t hw_wr_id, struct ibv_recv_wr *ret_wr);

/*
 * Memory windows (xport.windows). Does a device with these
 * device_cap_flags bind type-2 windows (2A or 2B)? Its SEND_WITH_INV and
 * LOCAL_INV come with them (IB spec o10-37.2; rdma-core providers list
 * both with a type-2 window).
 */
bool verbs_mw_caps_ok(uint64_t device_cap_flags);
/*
 * The request that opens window mw over [addr, addr+len) of mr (addr in
 * the registration's iova space) for remote writes under key new_rkey,
 * unsignaled; and the one that closes the window under key rkey locally.
 */
void verbs_window_bind_fill(uint64_t hw_wr_id, struct ibv_mw *mw, struct ibv_mr *mr, uint64_t addr,
			    uint64_t len, uint32_t new_rkey, struct ibv_send_wr *ret_wr);
void verbs_window_inv_fill(uint64_t hw_wr_id, uint32_t rkey, struct ibv_send_wr *ret_wr);

/*
 * Which wc_flags bits of a device (by its vendor_id) say a receive
 * invalidated a window (IBV_WC_WITH_INV, plus rxe's kernel-numbered one),
 * and a completion's invalidation into out (invalidated, inv_rkey): only a
 * successful plain receive (SEND_WITH_INV) has one.
 */
unsigned verbs_wc_inv_flags(uint32_t vendor_id);
void verbs_wc_invalidation(const struct ibv_wc *wc, unsigned inv_flags, struct xport_wc *out);

/* ibv_wc_status → enum xport_wc_status. */
int verbs_wc_status_map(enum ibv_wc_status status);
/* "IBV_WC_REM_ACCESS_ERR" for IBV_WC_REM_ACCESS_ERR, ...; never NULL. */
const char *verbs_wc_status_name(enum ibv_wc_status status);

/*
 * Maps a completion. wr_id, lane and opcode come from the decoded hardware
 * wr_id (valid also for errors); imm and len only for a successful
 * RECV_RDMA_WITH_IMM. ret->wr_id is left for the caller (the engine's id).
 * -EPROTO when the completion does not fit (unknown wr_id, or a successful
 * receive that is not RECV_RDMA_WITH_IMM, or a send that is not a write).
 * write_send: a successful receive must be a plain RECV of exactly
 * VERBS_SEND_MSG_LEN bytes (the caller reads imm and len from its buffer),
 * and a send may be a SEND.
 */
int verbs_wc_map(const struct ibv_wc *wc, unsigned nlanes, bool write_send, struct xport_wc *ret,
		 enum verbs_wrid_kind *ret_kind, uint64_t *ret_seq48);
