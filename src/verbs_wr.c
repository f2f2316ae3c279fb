/* SPDX-License-Identifier: MIT */
/*
 * Pure builders for the verbs transport: xport_wr → ibv_send_wr chains,
 * ibv_wc → xport_wc, and the wr_id encoding that lets an error completion be
 * traced back to its lane and queue entry. See verbs_wr.h.
 *
 * Compiled only with HAVE_VERBS (the ENABLE_VERBS=OFF build has no
 * libibverbs headers); the whole file is empty otherwise.
 */
#ifdef HAVE_VERBS

#include "verbs_wr.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "macro.h"

#define WRID_LANE_SHIFT VERBS_WRID_SEQ_BITS
#define WRID_KIND_SHIFT (VERBS_WRID_SEQ_BITS + 8)

uint64_t verbs_wrid_encode(enum verbs_wrid_kind kind, unsigned lane, uint64_t seq)
{
	return ((uint64_t)kind << WRID_KIND_SHIFT) | ((uint64_t)(lane & 0xff) << WRID_LANE_SHIFT) |
	       (seq & VERBS_WRID_SEQ_MASK);
}

int verbs_wrid_decode(uint64_t wr_id, unsigned nlanes, enum verbs_wrid_kind *ret_kind,
		      unsigned *ret_lane, uint64_t *ret_seq48)
{
	uint64_t kind = wr_id >> WRID_KIND_SHIFT;
	unsigned lane = (unsigned)((wr_id >> WRID_LANE_SHIFT) & 0xff);

	if ((kind != VERBS_WRID_SEND && kind != VERBS_WRID_RECV) || lane >= nlanes) {
		return -EINVAL;
	}
	*ret_kind = (enum verbs_wrid_kind)kind;
	*ret_lane = lane;
	*ret_seq48 = wr_id & VERBS_WRID_SEQ_MASK;
	return 0;
}

uint64_t verbs_seq_expand(uint64_t done, uint64_t seq48)
{
	return done + ((seq48 - done) & VERBS_WRID_SEQ_MASK);
}

/* [addr, addr+len) inside [base, base+mlen), without overflow. */
static bool wants_inline(const struct xport_wr *w, uint32_t max_inline)
{
	return (w->flags & XPORT_SEND_INLINE) && w->len > 0 && w->len <= max_inline;
}

int verbs_wr_check(const struct xport_wr *w, unsigned nlanes, uint32_t max_inline)
{
	int r = xport_wr_check_common(w, nlanes);

	if (r != 0) {
		return r < 0 ? r : 0;
	}
	if (wants_inline(w, max_inline)) {
		return 0;
	}
	/* Too big for inline (or not inline): registered in the lane's domain. */
	if (!w->mr || w->mr->lane_lkey[w->lane] == 0) {
		return -EINVAL;
	}
	return xport_range_inside((uint64_t)(uintptr_t)w->mr->addr, w->mr->len,
				  (uint64_t)(uintptr_t)w->buf, w->len)
		   ? 0
		   : -EINVAL;
}

void verbs_wr_fill(const struct xport_wr *w, uint64_t hw_wr_id, uint32_t max_inline,
		   struct ibv_send_wr *ret_wr, struct ibv_sge *ret_sge)
{
	memset(ret_wr, 0, sizeof(*ret_wr));
	memset(ret_sge, 0, sizeof(*ret_sge));
	ret_wr->wr_id = hw_wr_id;
	ret_wr->next = NULL;
	if (w->opcode == XPORT_OP_WRITE_IMM) {
		ret_wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		ret_wr->imm_data = htobe32(w->imm);
	} else {
		ret_wr->opcode = IBV_WR_RDMA_WRITE;
	}
	if (w->flags & XPORT_SEND_SIGNALED) {
		ret_wr->send_flags |= IBV_SEND_SIGNALED;
	}
	/* A zero-length write carries no sge; the IB spec allows any rkey then. */
	ret_wr->wr.rdma.remote_addr = w->remote_addr;
	ret_wr->wr.rdma.rkey = w->rkey;
	if (w->len == 0) {
		ret_wr->sg_list = NULL;
		ret_wr->num_sge = 0;
		return;
	}
	ret_sge->length = w->len;
	/* Rails: each lane's device has its own key for the same memory. */
	assert(w->lane < XPORT_MAX_LANES);
	ret_sge->lkey = w->mr ? w->mr->lane_lkey[w->lane] : 0;
	if (wants_inline(w, max_inline)) {
		/* Inline: the provider copies from our own address, no key involved. */
		ret_sge->addr = (uint64_t)(uintptr_t)w->buf;
		ret_wr->send_flags |= IBV_SEND_INLINE;
	} else {
		/* A keyed local address lives in the registration's iova space. */
		assert(w->mr);
		ret_sge->addr = w->mr->iova +
				(uint64_t)((const uint8_t *)w->buf - (const uint8_t *)w->mr->addr);
	}
	ret_wr->sg_list = ret_sge;
	ret_wr->num_sge = 1;
}

void verbs_wr_chain(const struct xport_wr *wrs, size_t n, unsigned nlanes, const uint64_t *base_seq,
		    uint32_t max_inline, struct ibv_send_wr *out_wr, struct ibv_sge *out_sge,
		    struct ibv_send_wr **ret_heads, size_t *ret_counts)
{
	struct ibv_send_wr *tail[XPORT_MAX_LANES] = { 0 };

	for (unsigned l = 0; l < nlanes; l++) {
		ret_heads[l] = NULL;
		ret_counts[l] = 0;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned l = wrs[i].lane;
		uint64_t seq = base_seq[l] + ret_counts[l];

		verbs_wr_fill(&wrs[i], verbs_wrid_encode(VERBS_WRID_SEND, l, seq), max_inline,
			      &out_wr[i], &out_sge[i]);
		if (tail[l]) {
			tail[l]->next = &out_wr[i];
		} else {
			ret_heads[l] = &out_wr[i];
		}
		tail[l] = &out_wr[i];
		ret_counts[l]++;
	}
}

void verbs_send_msg_encode(uint32_t imm, uint32_t len, uint8_t out[VERBS_SEND_MSG_LEN])
{
	uint32_t be_imm = htobe32(imm), be_len = htobe32(len);

	memcpy(out, &be_imm, 4);
	memcpy(out + 4, &be_len, 4);
}

void verbs_send_msg_decode(const uint8_t in[VERBS_SEND_MSG_LEN], uint32_t *ret_imm,
			   uint32_t *ret_len)
{
	uint32_t be_imm, be_len;

	memcpy(&be_imm, in, 4);
	memcpy(&be_len, in + 4, 4);
	*ret_imm = be32toh(be_imm);
	*ret_len = be32toh(be_len);
}

unsigned verbs_wr_hw_count(const struct xport_wr *w, bool write_send)
{
	return write_send && w->opcode == XPORT_OP_WRITE_IMM && w->len > 0 ? 2 : 1;
}

/* The SEND that carries w's immediate and length, from the message entry msg. */
static void fill_send(const struct xport_wr *w, uint64_t hw_wr_id, uint32_t max_inline,
		      uint8_t *msg, uint32_t lkey, struct ibv_send_wr *ret_wr,
		      struct ibv_sge *ret_sge)
{
	memset(ret_wr, 0, sizeof(*ret_wr));
	memset(ret_sge, 0, sizeof(*ret_sge));
	/* A request of no bytes may hand the peer a window's key in the length's place. */
	verbs_send_msg_encode(w->imm, w->len != 0 ? w->len : w->key, msg);
	ret_wr->wr_id = hw_wr_id;
	ret_wr->opcode = IBV_WR_SEND;
	if (w->inv_rkey != 0) {
		/* Closes the peer's window (xport.windows) as it is delivered. */
		ret_wr->opcode = IBV_WR_SEND_WITH_INV;
		ret_wr->invalidate_rkey = w->inv_rkey;
	}
	if (w->flags & XPORT_SEND_SIGNALED) {
		ret_wr->send_flags |= IBV_SEND_SIGNALED;
	}
	/* Registered either way; inline where the lane has room (copied at post time). */
	if (max_inline >= VERBS_SEND_MSG_LEN) {
		ret_wr->send_flags |= IBV_SEND_INLINE;
	}
	ret_sge->addr = (uint64_t)(uintptr_t)msg;
	ret_sge->length = VERBS_SEND_MSG_LEN;
	ret_sge->lkey = lkey;
	ret_wr->sg_list = ret_sge;
	ret_wr->num_sge = 1;
}

size_t verbs_wr_chain_send(const struct xport_wr *wrs, size_t n, unsigned nlanes,
			   const uint64_t *base_seq, uint32_t max_inline, uint8_t *const *msgs,
			   const uint32_t *msg_lkey, unsigned msg_slots, struct ibv_send_wr *out_wr,
			   struct ibv_sge *out_sge, size_t *ret_src, struct ibv_send_wr **ret_heads,
			   size_t *ret_counts)
{
	struct ibv_send_wr *tail[XPORT_MAX_LANES] = { 0 };
	size_t k = 0;

	for (unsigned l = 0; l < nlanes; l++) {
		ret_heads[l] = NULL;
		ret_counts[l] = 0;
	}
	for (size_t i = 0; i < n; i++) {
		const struct xport_wr *w = &wrs[i];
		unsigned l = w->lane;

		for (unsigned part = 0; part < verbs_wr_hw_count(w, true); part++) {
			uint64_t seq = base_seq[l] + ret_counts[l];
			uint64_t id = verbs_wrid_encode(VERBS_WRID_SEND, l, seq);
			bool send = w->opcode == XPORT_OP_WRITE_IMM && (part == 1 || w->len == 0);

			if (send) {
				fill_send(w, id, max_inline,
					  msgs[l] + (seq % msg_slots) * VERBS_SEND_MSG_LEN,
					  msg_lkey[l], &out_wr[k], &out_sge[k]);
			} else {
				struct xport_wr write = *w;

				/* A WRITE_IMM's bytes: a plain write, its SEND signals. */
				write.opcode = XPORT_OP_WRITE;
				if (w->opcode == XPORT_OP_WRITE_IMM) {
					write.flags &= ~(uint32_t)XPORT_SEND_SIGNALED;
				}
				verbs_wr_fill(&write, id, max_inline, &out_wr[k], &out_sge[k]);
			}
			ret_src[k] = i;
			if (tail[l]) {
				tail[l]->next = &out_wr[k];
			} else {
				ret_heads[l] = &out_wr[k];
			}
			tail[l] = &out_wr[k];
			ret_counts[l]++;
			k++;
		}
	}
	return k;
}

void verbs_recv_fill_msg(uint64_t hw_wr_id, void *buf, uint32_t lkey, struct ibv_recv_wr *ret_wr,
			 struct ibv_sge *ret_sge)
{
	memset(ret_wr, 0, sizeof(*ret_wr));
	memset(ret_sge, 0, sizeof(*ret_sge));
	ret_sge->addr = (uint64_t)(uintptr_t)buf;
	ret_sge->length = VERBS_SEND_MSG_LEN;
	ret_sge->lkey = lkey;
	ret_wr->wr_id = hw_wr_id;
	ret_wr->sg_list = ret_sge;
	ret_wr->num_sge = 1;
}

int verbs_transport_path(enum ibv_transport_type t, bool force_send)
{
	switch (t) {
	case IBV_TRANSPORT_IB:
		return force_send ? XPORT_PATH_WRITE_SEND : XPORT_PATH_WRITE_IMM;
	case IBV_TRANSPORT_IWARP:
		/* No immediate data in iWARP (RDMAP, RFC 5040): WRITE then SEND. */
		return XPORT_PATH_WRITE_SEND;
	default:
		return -EOPNOTSUPP;
	}
}

const char *verbs_transport_name(enum ibv_transport_type t)
{
	switch (t) {
	case IBV_TRANSPORT_IB:
		return "InfiniBand/RoCE";
	case IBV_TRANSPORT_IWARP:
		return "iWARP";
	case IBV_TRANSPORT_USNIC:
	case IBV_TRANSPORT_USNIC_UDP:
		return "usNIC";
	default:
		return "unspecified";
	}
}

void verbs_recv_fill(uint64_t hw_wr_id, struct ibv_recv_wr *ret_wr)
{
	memset(ret_wr, 0, sizeof(*ret_wr));
	ret_wr->wr_id = hw_wr_id;
	ret_wr->sg_list = NULL;
	ret_wr->num_sge = 0;
}

bool verbs_mw_caps_ok(uint64_t device_cap_flags)
{
	return (device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
	       (device_cap_flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B));
}

void verbs_window_bind_fill(uint64_t hw_wr_id, struct ibv_mw *mw, struct ibv_mr *mr, uint64_t addr,
			    uint64_t len, uint32_t new_rkey, struct ibv_send_wr *ret_wr)
{
	memset(ret_wr, 0, sizeof(*ret_wr));
	ret_wr->wr_id = hw_wr_id;
	ret_wr->opcode = IBV_WR_BIND_MW;
	ret_wr->bind_mw.mw = mw;
	ret_wr->bind_mw.rkey = new_rkey;
	ret_wr->bind_mw.bind_info.mr = mr;
	ret_wr->bind_mw.bind_info.addr = addr;
	ret_wr->bind_mw.bind_info.length = len;
	/* Writes only, as the registration (SECURITY.md C.20). */
	ret_wr->bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
}

void verbs_window_inv_fill(uint64_t hw_wr_id, uint32_t rkey, struct ibv_send_wr *ret_wr)
{
	memset(ret_wr, 0, sizeof(*ret_wr));
	ret_wr->wr_id = hw_wr_id;
	ret_wr->opcode = IBV_WR_LOCAL_INV;
	ret_wr->invalidate_rkey = rkey;
}

/* Soft-RoCE's vendor id (RXE_VENDOR_ID in the kernel and rdma-core). */
#define VERBS_RXE_VENDOR_ID 0xffffffu

unsigned verbs_wc_inv_flags(uint32_t vendor_id)
{
	/*
	 * rxe hands userspace its kernel's completions as they are, with the
	 * kernel's IB_WC_WITH_INVALIDATE (1 << 2, where libibverbs has
	 * IBV_WC_IP_CSUM_OK) for libibverbs' IBV_WC_WITH_INV (1 << 3). It sets
	 * neither checksum flag on an RC completion, so on rxe either bit
	 * means invalidated; elsewhere only libibverbs' own does (mlx5 sets
	 * IP_CSUM_OK on RoCE receives).
	 */
	return IBV_WC_WITH_INV | (vendor_id == VERBS_RXE_VENDOR_ID ? 1u << 2 : 0);
}

void verbs_wc_invalidation(const struct ibv_wc *wc, unsigned inv_flags, struct xport_wc *out)
{
	out->invalidated = wc->status == IBV_WC_SUCCESS && wc->opcode == IBV_WC_RECV &&
			   (wc->wc_flags & inv_flags) != 0;
	/* Host order, unlike imm_data (the same union). */
	out->inv_rkey = out->invalidated ? wc->invalidated_rkey : 0;
}

int verbs_wc_status_map(enum ibv_wc_status status)
{
	switch (status) {
	case IBV_WC_SUCCESS:
		return XPORT_WC_SUCCESS;
	case IBV_WC_LOC_PROT_ERR:
		return XPORT_WC_LOC_PROT_ERR;
	case IBV_WC_REM_ACCESS_ERR:
		return XPORT_WC_REM_ACCESS_ERR;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return XPORT_WC_RNR_ERR;
	case IBV_WC_WR_FLUSH_ERR:
		return XPORT_WC_WR_FLUSH_ERR;
	case IBV_WC_RETRY_EXC_ERR:
		return XPORT_WC_RETRY_EXC_ERR;
	default:
		/* The exact name goes to last_error. */
		return XPORT_WC_GENERAL_ERR;
	}
}

const char *verbs_wc_status_name(enum ibv_wc_status status)
{
	static const char *const names[] = {
		[IBV_WC_SUCCESS] = "IBV_WC_SUCCESS",
		[IBV_WC_LOC_LEN_ERR] = "IBV_WC_LOC_LEN_ERR",
		[IBV_WC_LOC_QP_OP_ERR] = "IBV_WC_LOC_QP_OP_ERR",
		[IBV_WC_LOC_EEC_OP_ERR] = "IBV_WC_LOC_EEC_OP_ERR",
		[IBV_WC_LOC_PROT_ERR] = "IBV_WC_LOC_PROT_ERR",
		[IBV_WC_WR_FLUSH_ERR] = "IBV_WC_WR_FLUSH_ERR",
		[IBV_WC_MW_BIND_ERR] = "IBV_WC_MW_BIND_ERR",
		[IBV_WC_BAD_RESP_ERR] = "IBV_WC_BAD_RESP_ERR",
		[IBV_WC_LOC_ACCESS_ERR] = "IBV_WC_LOC_ACCESS_ERR",
		[IBV_WC_REM_INV_REQ_ERR] = "IBV_WC_REM_INV_REQ_ERR",
		[IBV_WC_REM_ACCESS_ERR] = "IBV_WC_REM_ACCESS_ERR",
		[IBV_WC_REM_OP_ERR] = "IBV_WC_REM_OP_ERR",
		[IBV_WC_RETRY_EXC_ERR] = "IBV_WC_RETRY_EXC_ERR",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "IBV_WC_RNR_RETRY_EXC_ERR",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "IBV_WC_LOC_RDD_VIOL_ERR",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "IBV_WC_REM_INV_RD_REQ_ERR",
		[IBV_WC_REM_ABORT_ERR] = "IBV_WC_REM_ABORT_ERR",
		[IBV_WC_INV_EECN_ERR] = "IBV_WC_INV_EECN_ERR",
		[IBV_WC_INV_EEC_STATE_ERR] = "IBV_WC_INV_EEC_STATE_ERR",
		[IBV_WC_FATAL_ERR] = "IBV_WC_FATAL_ERR",
		[IBV_WC_RESP_TIMEOUT_ERR] = "IBV_WC_RESP_TIMEOUT_ERR",
		[IBV_WC_GENERAL_ERR] = "IBV_WC_GENERAL_ERR",
	};

	if ((unsigned)status >= ARRAY_SIZE(names) || !names[status]) {
		return "IBV_WC_UNKNOWN";
	}
	return names[status];
}

/*
 * A successful send completion: a write, a SEND on WRITE + SEND, or a
 * window's opening or closing (signaled ones never are; allowed all the same).
 */
static bool send_opcode_ok(enum ibv_wc_opcode op, bool write_send)
{
	switch (op) {
	case IBV_WC_RDMA_WRITE:
		return true;
	case IBV_WC_SEND:
	case IBV_WC_BIND_MW:
	case IBV_WC_LOCAL_INV:
		return write_send;
	default:
		return false;
	}
}

int verbs_wc_map(const struct ibv_wc *wc, unsigned nlanes, bool write_send, struct xport_wc *ret,
		 enum verbs_wrid_kind *ret_kind, uint64_t *ret_seq48)
{
	enum verbs_wrid_kind kind;
	unsigned lane;
	uint64_t seq;

	if (verbs_wrid_decode(wc->wr_id, nlanes, &kind, &lane, &seq) < 0) {
		return -EPROTO;
	}
	*ret = (struct xport_wc){
		.status = verbs_wc_status_map(wc->status),
		.opcode = kind == VERBS_WRID_SEND ? XPORT_WC_WRITE : XPORT_WC_RECV_IMM,
		.lane = lane,
	};
	/* An error completion's opcode and lengths are undefined: trust the wr_id only. */
	if (wc->status == IBV_WC_SUCCESS) {
		if (kind == VERBS_WRID_SEND && !send_opcode_ok(wc->opcode, write_send)) {
			return -EPROTO;
		}
		if (kind == VERBS_WRID_RECV && write_send) {
			/* The message itself is in the receive's buffer: the caller reads it. */
			if (wc->opcode != IBV_WC_RECV || (wc->wc_flags & IBV_WC_WITH_IMM) ||
			    wc->byte_len != VERBS_SEND_MSG_LEN) {
				return -EPROTO;
			}

		} else if (kind == VERBS_WRID_RECV) {
			if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
			    !(wc->wc_flags & IBV_WC_WITH_IMM)) {
				return -EPROTO;
			}
			ret->imm = be32toh(wc->imm_data);
			ret->len = wc->byte_len;
		}
	}
	*ret_kind = kind;
	*ret_seq48 = seq;
	return 0;
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int verbs_wr_unused;
#endif
