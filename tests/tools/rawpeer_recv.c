/* SPDX-License-Identifier: MIT */
/* rawpeer's pull: the recv-all step, everything a transfer sends received. */
#include "rawpeer.h"

/* ---- pull: receive everything ------------------------------------------ */

static struct rfile *rfile_by_id(struct recv_state *rs, uint32_t id)
{
	for (size_t i = 0; i < ARRAY_SIZE(rs->files); i++) {
		if (rs->files[i].live && rs->files[i].id == id) {
			return &rs->files[i];
		}
	}
	return NULL;
}

/* Hash every held chunk that is next in its file; return its slot. */
static int recv_hash_ready(struct peer *p, struct recv_state *rs)
{
	bool progress = true;

	while (progress) {
		progress = false;
		for (uint32_t slot = 0; slot < rs->slots; slot++) {
			struct rfile *f = rfile_by_id(rs, rs->held[slot].id);
			struct xport_wr cr = {
				.opcode = XPORT_OP_WRITE_IMM,
				.imm = proto_imm(PROTO_IMM_CREDIT, slot),
				.lane = rs->held[slot].lane,
				.wr_id = ++p->wr_id,
				.flags = XPORT_SEND_SIGNALED,
			};

			if (!rs->held[slot].held || !f || rs->held[slot].off != f->hash_off) {
				continue;
			}
			file_hash_update(&f->h, rs->ring + (size_t)slot * rs->chunk,
					 rs->held[slot].len);
			f->hash_off += rs->held[slot].len;
			f->got += rs->held[slot].len;
			rs->held[slot].held = false;
			rs->chunks++;
			progress = true;
			if (!rs->no_credit && p->x->ops->post_writes(p->x, &cr, 1) < 0) {
				return -1;
			}
		}
	}
	return 0;
}

/*
 * A chunk arrived: hold it until it is next in its file (lanes may reorder
 * chunks of one file), hash it, then return the slot on the lane it came on.
 */
int recv_on_imm(struct peer *p, struct recv_state *rs, const struct xport_wc *wc)
{
	uint32_t kind = wc->imm >> PROTO_IMM_KIND_SHIFT, slot = wc->imm & PROTO_IMM_SLOT_MASK;
	struct proto_desc d;
	struct rfile *f;

	if (kind != PROTO_IMM_DATA || slot >= rs->slots || wc->len != PROTO_DESC_LEN ||
	    rs->held[slot].held ||
	    proto_desc_decode(
		rs->ring + (size_t)rs->slots * rs->chunk + (size_t)slot * PROTO_DESC_LEN, &d) < 0) {
		say(p, "BAD_CHUNK imm=0x%08x len=%u", wc->imm, wc->len);
		rs->failed = true;
		return -1;
	}
	f = rfile_by_id(rs, d.file_id);
	if (!f || d.offset < f->hash_off || d.len > rs->chunk || d.offset + d.len > f->size) {
		say(p, "BAD_CHUNK id=%u off=%" PRIu64 " len=%u (unknown file or outside it)",
		    d.file_id, d.offset, d.len);
		rs->failed = true;
		return -1;
	}
	rs->held[slot].held = true;
	rs->held[slot].id = d.file_id;
	rs->held[slot].off = d.offset;
	rs->held[slot].len = d.len;
	rs->held[slot].lane = wc->lane;
	return recv_hash_ready(p, rs);
}

static int recv_message(struct peer *p, struct recv_state *rs, struct msg *m)
{
	if (m->type == MSG_FILES) {
		_cleanup_free_ struct proto_status *st = calloc(m->u.files.count + 1u, sizeof(*st));
		struct msg ack = { .type = MSG_FILES_ACK };

		if (!st) {
			return -ENOMEM;
		}
		for (size_t i = 0; i < m->u.files.count; i++) {
			const struct proto_file *pf = &m->u.files.files[i];
			st[i] = (struct proto_status){ .id = pf->id, .status = PERR_OK };
			if (pf->ftype != PROTO_FT_REG) {
				continue;
			}
			struct rfile *f = NULL;
			for (size_t k = 0; k < ARRAY_SIZE(rs->files) && !f; k++) {
				if (!rs->files[k].live) {
					f = &rs->files[k];
				}
			}
			if (!f || file_hash_init(&f->h) < 0) {
				st[i].status = PERR_BUSY;
				continue;
			}
			*f = (struct rfile){
				.id = pf->id, .size = pf->size, .live = true, .h = f->h
			};
		}
		ack.u.files_ack.count = m->u.files.count;
		ack.u.files_ack.st = st;
		return send_msg(p, &ack);
	}
	if (m->type == MSG_FILE_DONE) {
		struct rfile *f = rfile_by_id(rs, m->u.file_done.id);
		struct msg res = { .type = MSG_FILE_RESULT };
		uint8_t h[HASH_LEN];

		res.u.file_result.id = m->u.file_done.id;
		if (!f) {
			res.u.file_result.status = PERR_PROTOCOL;
			snprintf(res.u.file_result.text, sizeof(res.u.file_result.text),
				 "unknown file");
		} else {
			/* The data may trail FILE_DONE: wait for it (bounded). */
			int64_t deadline = now_ms() + p->timeout_ms;
			while (f->got < m->u.file_done.bytes && !rs->failed &&
			       now_ms() < deadline) {
				struct pollfd pfd = { .fd = p->x->ops->event_fd(p->x),
						      .events = POLLIN };
				poll(&pfd, 1, 100);
				drain_cq(p, 0, NULL, rs);
			}
			file_hash_final(&f->h, h);
			file_hash_free(&f->h);
			f->live = false;
			bool match = f->got == m->u.file_done.bytes &&
				     !memcmp(h, m->u.file_done.hash, HASH_LEN);
			res.u.file_result.status = match ? PERR_OK : PERR_INTEGRITY;
			if (rs->have_result) {
				res.u.file_result.status = rs->result;
			}
			say(p, "RECEIVED %u bytes=%" PRIu64 " hash %s, FILE_RESULT %s sent", f->id,
			    f->got, match ? "matches" : "MISMATCH",
			    proto_err_name(res.u.file_result.status));
			if (match) {
				rs->files_ok++;
			} else {
				rs->files_bad++;
			}
		}
		return send_msg(p, &res);
	}
	if (m->type == MSG_END) {
		struct msg end = { .type = MSG_END };
		end.u.end = m->u.end;
		rs->got_end = true;
		return send_msg(p, &end);
	}
	return 0;
}

int step_recv_all(struct peer *p, char **args, int nargs)
{
	struct recv_state rs = { 0 };
	struct msg ring = { .type = MSG_RING };
	size_t len;
	int64_t t0 = now_ms();
	int r;

	const char *result = opt_value(args, nargs, "result");

	if (!p->x) {
		return usage_error("recv-all: needs lanes first");
	}
	rs.no_credit = has_word(args, nargs, "nocredit");
	rs.have_result = result != NULL;
	if (result && status_by_name(result, &rs.result) < 0) {
		return usage_error("recv-all: bad result=%s", result);
	}
	rs.slots = p->ok.slots;
	rs.chunk = p->ok.chunk_size;
	len = (size_t)rs.slots * rs.chunk + (size_t)rs.slots * PROTO_DESC_LEN;
	rs.ring = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
	if (!rs.ring) {
		return -ENOMEM;
	}
	r = p->x->ops->reg_mr(p->x, rs.ring, len, XPORT_ACCESS_LOCAL | XPORT_ACCESS_REMOTE_WRITE,
			      &rs.mr);
	if (r < 0) {
		say(p, "RECV_FAILED reg_mr: %s", strerror(-r));
		free(rs.ring);
		return 0;
	}
	/* Registered until the end: the daemon may still be writing into it. */
	p->rring = rs.ring;
	p->rmr = rs.mr;
	/* In the registration's own (zero-based) address space, as the daemon's RING. */
	ring.u.ring.addr = rs.mr->iova;
	ring.u.ring.desc_addr = ring.u.ring.addr + (uint64_t)rs.slots * rs.chunk;
	ring.u.ring.slots = rs.slots;
	ring.u.ring.slot_size = rs.chunk;
	ring.u.ring.nkeys = (uint8_t)p->x->nlanes;
	for (unsigned i = 0; i < p->x->nlanes; i++) {
		ring.u.ring.rkey[i] = rs.mr->lane_rkey[i];
	}
	if (send_msg(p, &ring) < 0) {
		goto out;
	}
	say(p, "RING sent slots=%u chunk=%u", rs.slots, rs.chunk);
	/* PINGs are answered but are no progress: a stalled daemon ends the step. */
	int64_t progress = now_ms();
	uint64_t chunks = 0;
	for (;;) {
		struct msg m;
		r = next_msg(p, progress + p->timeout_ms, t0, &m, &rs);
		if (rs.chunks != chunks) {
			chunks = rs.chunks;
			progress = now_ms();
		}
		if (r == 0 && now_ms() >= progress + p->timeout_ms) {
			say(p, "TIMEOUT in recv-all: no progress for %.1f s",
			    (double)p->timeout_ms / 1000.0);
			break;
		}
		if (r == 0) {
			continue;
		}
		if (r < 0) {
			break;
		}
		if (m.type != MSG_PING && m.type != MSG_PONG) {
			progress = now_ms();
		}
		handle_msg(p, &m, true);
		r = recv_message(p, &rs, &m);
		bool last = m.type == MSG_END || m.type == MSG_ERROR;
		msg_clear(&m);
		if (r < 0 || last || rs.failed) {
			break;
		}
	}
	say(p, "RECV_ALL %s files_ok=%u files_bad=%u chunks=%" PRIu64,
	    rs.failed	 ? "stopped on a bad chunk"
	    : rs.got_end ? "complete (END)"
			 : "incomplete",
	    rs.files_ok, rs.files_bad, rs.chunks);
out:
	for (size_t i = 0; i < ARRAY_SIZE(rs.files); i++) {
		file_hash_free(&rs.files[i].h);
	}
	return 0;
}
