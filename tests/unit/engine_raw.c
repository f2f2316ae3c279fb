/* SPDX-License-Identifier: MIT */
/*
 * A peer played by hand for the engine tests (engine_harness.h): a sender's
 * control messages through chan and its chunks and packs as WRITE +
 * WRITE_WITH_IMM through the xport ops, or a receiver's ring, RING and
 * FILES_ACK; what the engine under test answers, read and checked.
 */
#include "engine_harness.h"

void raw_init(struct raw *w, struct end *e)
{
	struct xport *x = e->x;

	memset(w, 0, sizeof(*w));
	w->end = e;
	w->buf = aligned_alloc(4096, CHUNK + 4096);
	assert_non_null(w->buf);
	assert_int_equal(x->ops->reg_mr(x, w->buf, CHUNK + 4096, XPORT_ACCESS_LOCAL, &w->mr), 0);
	/* Receives for the receiver's credits, as the sender engine posts them. */
	for (unsigned l = 0; l < x->nlanes; l++) {
		for (uint32_t k = 0; k < SLOTS; k++) {
			uint64_t id = l;
			assert_int_equal(x->ops->post_recvs(x, l, &id, 1), 0);
		}
	}
}

/*
 * A receiver played by hand: a ring of SLOTS slots registered for the peer's
 * writes, receives posted for its immediates, the RING sent. It never gives a
 * credit back.
 */
void raw_init_receiver(struct raw *w, struct end *e)
{
	struct xport *x = e->x;
	size_t len = (size_t)SLOTS * CHUNK + 4096;
	struct msg m = { .type = MSG_RING };

	memset(w, 0, sizeof(*w));
	w->end = e;
	w->receiver = true;
	w->buf = aligned_alloc(4096, len);
	assert_non_null(w->buf);
	memset(w->buf, 0, len);
	assert_int_equal(
	    x->ops->reg_mr(x, w->buf, len, XPORT_ACCESS_LOCAL | XPORT_ACCESS_REMOTE_WRITE, &w->mr),
	    0);
	for (unsigned l = 0; l < x->nlanes; l++) {
		for (uint32_t k = 0; k < SLOTS; k++) {
			uint64_t id = l;
			assert_int_equal(x->ops->post_recvs(x, l, &id, 1), 0);
		}
	}
	m.u.ring.addr = w->mr->iova;
	m.u.ring.desc_addr = w->mr->iova + (uint64_t)SLOTS * CHUNK;
	m.u.ring.slots = SLOTS;
	m.u.ring.slot_size = CHUNK;
	m.u.ring.nkeys = (uint8_t)x->nlanes;
	for (unsigned l = 0; l < x->nlanes; l++) {
		m.u.ring.rkey[l] = w->mr->lane_rkey[l];
	}
	assert_int_equal(chan_send(&e->chan, &m), 0);
}

void raw_free(struct raw *w)
{
	if (w->end->x && w->mr) {
		w->end->x->ops->dereg_mr(w->end->x, w->mr);
	}
	free(w->buf);
}

/* Drain completions: credits counted (and their receive posted again); *done when want_id completes. */
void raw_drain(struct raw *w, uint64_t want_id, int *done)
{
	struct xport *x = w->end->x;
	struct xport_wc wc[16];
	int n;

	while ((n = x->ops->poll_cq(x, wc, 16)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].opcode == XPORT_WC_RECV_IMM && wc[i].status == XPORT_WC_SUCCESS) {
				uint64_t id = wc[i].lane;
				if (w->receiver) {
					assert_int_equal(wc[i].imm >> PROTO_IMM_KIND_SHIFT,
							 PROTO_IMM_DATA);
					assert_true(w->data_imms < ARRAY_SIZE(w->data_slot));
					w->data_lane[w->data_imms] = wc[i].lane;
					w->data_slot[w->data_imms++] =
					    wc[i].imm & PROTO_IMM_SLOT_MASK;
				} else {
					assert_int_equal(wc[i].imm >> PROTO_IMM_KIND_SHIFT,
							 PROTO_IMM_CREDIT);
					w->credits++;
				}
				(void)x->ops->post_recvs(x, wc[i].lane, &id, 1);
			} else if (done && wc[i].opcode == XPORT_WC_WRITE &&
				   wc[i].wr_id == want_id) {
				*done = wc[i].status == XPORT_WC_SUCCESS ? 1 : -1;
			}
		}
	}
}

/* Payload data of d->len bytes into ring slot, then descriptor d with the immediate. */
static void raw_post(struct raw *w, uint32_t slot, const struct proto_desc *dp, const uint8_t *data)
{
	struct xport *x = w->end->x;
	struct proto_desc d = *dp;
	uint32_t len = d.len;
	uint8_t *desc = w->buf + CHUNK;
	int64_t deadline = now_ms() + IO_MS;
	int done = 0;

	assert_true(len <= CHUNK && slot < w->ring.slots);
	memcpy(w->buf, data, len);
	proto_desc_encode(&d, desc);
	struct xport_wr wr[2] = {
		{ .wr_id = ++w->wr_id,
		  .opcode = XPORT_OP_WRITE,
		  .mr = len ? w->mr : NULL,
		  .buf = len ? w->buf : NULL,
		  .len = len,
		  .remote_addr = w->ring.addr + (uint64_t)slot * w->ring.slot_size,
		  .rkey = w->ring.rkey[0] },
		{ .wr_id = ++w->wr_id,
		  .opcode = XPORT_OP_WRITE_IMM,
		  .flags = XPORT_SEND_SIGNALED,
		  .mr = w->mr,
		  .buf = desc,
		  .len = PROTO_DESC_LEN,
		  .imm = proto_imm(PROTO_IMM_DATA, slot),
		  .remote_addr = w->ring.desc_addr + (uint64_t)slot * PROTO_DESC_LEN,
		  .rkey = w->ring.rkey[0] },
	};
	assert_int_equal(x->ops->post_writes(x, wr, 2), 0);
	while (!done) {
		struct pollfd pfd = { .fd = x->ops->event_fd(x), .events = POLLIN };
		int64_t left = deadline - now_ms();

		raw_drain(w, w->wr_id, &done);
		if (done) {
			break;
		}
		if (left <= 0) {
			fail_msg("chunk for slot %u not placed within %d ms", slot, IO_MS);
		}
		poll(&pfd, 1, (int)left);
	}
	assert_int_equal(done, 1);
}

/* One chunk of file id into ring slot: payload, then its descriptor with the immediate. */
void raw_chunk(struct raw *w, uint32_t slot, uint32_t id, uint64_t off, const uint8_t *data,
	       uint32_t len)
{
	struct proto_desc d = { .file_id = id, .len = len, .offset = off, .seq = ++w->seq };

	raw_post(w, slot, &d, data);
}

/*
 * A packed slot: n pieces (ids[i], lens[i] bytes of data[i]) back to back,
 * then their table; table_extra bytes of junk between the two (0: none).
 */
void raw_pack(struct raw *w, uint32_t slot, size_t n, const uint32_t *ids,
	      const uint8_t *const *data, const uint32_t *lens, uint32_t table_extra)
{
	uint8_t *buf = malloc(CHUNK);
	struct proto_desc d = { .seq = ++w->seq, .pieces = (uint32_t)n };

	assert_non_null(buf);
	for (size_t i = 0; i < n; i++) {
		assert_true(d.len + lens[i] <= CHUNK);
		memcpy(buf + d.len, data[i], lens[i]);
		d.len += lens[i];
	}
	memset(buf + d.len, 0x5a, table_extra);
	d.len += table_extra;
	for (size_t i = 0; i < n; i++) {
		struct proto_piece pc = { .id = ids[i], .len = lens[i] };

		proto_piece_encode(&pc, buf + d.len);
		d.len += PROTO_PIECE_LEN;
	}
	raw_post(w, slot, &d, buf);
	free(buf);
}

void raw_send(struct raw *w, const struct msg *m)
{
	assert_int_equal(chan_send(&w->end->chan, m), 0);
}

/* The next message other than PING/PONG (PINGs are left unanswered), within IO_MS. */
void raw_next(struct raw *w, struct msg *m)
{
	int64_t deadline = now_ms() + IO_MS;

	for (;;) {
		int64_t left = deadline - now_ms();
		int r;

		if (left <= 0) {
			fail_msg("no message within %d ms", IO_MS);
		}
		raw_drain(w, 0, NULL);
		r = chan_recv(&w->end->chan, m, (int)MIN(left, 100));
		if (r == -ETIMEDOUT) {
			continue;
		}
		if (r < 0) {
			fail_msg("control channel: %s", strerror(-r));
		}
		if (m->type != MSG_PING && m->type != MSG_PONG) {
			return;
		}
		msg_clear(m);
	}
}

/* Expect a message of this type; an ERROR instead fails with its text. Caller clears m. */
void raw_expect(struct raw *w, uint16_t type, struct msg *m)
{
	raw_next(w, m);
	if (m->type == MSG_ERROR && type != MSG_ERROR) {
		fail_msg("expected %s, got ERROR %s: %s", proto_type_name(type),
			 proto_err_name(m->u.error.code), m->u.error.text);
	}
	if (m->type != type) {
		fail_msg("expected %s, got %s", proto_type_name(type), proto_type_name(m->type));
	}
}

/* The receiver's session ended with ERROR code, its text containing why. */
void raw_expect_error(struct raw *w, uint32_t code, const char *why)
{
	struct msg m;

	raw_expect(w, MSG_ERROR, &m);
	if (m.u.error.code != code || !strstr(m.u.error.text, why)) {
		fail_msg("ERROR %s: %s; expected %s (%s)", proto_err_name(m.u.error.code),
			 m.u.error.text, proto_err_name(code), why);
	}
	msg_clear(&m);
}

void raw_ring(struct raw *w)
{
	struct msg m;

	raw_expect(w, MSG_RING, &m);
	assert_int_equal(m.u.ring.slots, SLOTS);
	assert_int_equal(m.u.ring.slot_size, CHUNK);
	assert_int_equal(m.u.ring.nkeys, NLANES);
	w->ring = m.u.ring;
	msg_clear(&m);
}

/* One FILES batch of regular files: ids[i] names[i] sizes[i]. */
void raw_files(struct raw *w, size_t n, const uint32_t *ids, const char *const *names,
	       const uint64_t *sizes)
{
	struct proto_file pf[8];
	struct msg m = { .type = MSG_FILES };

	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++) {
		pf[i] = (struct proto_file){ .id = ids[i],
					     .ftype = PROTO_FT_REG,
					     .mode = 0644,
					     .size = sizes[i],
					     .name = (char *)names[i] };
	}
	m.u.files.count = (uint16_t)n;
	m.u.files.files = pf;
	raw_send(w, &m);
}

/* FILES_ACK with these statuses, in order. */
void raw_ack(struct raw *w, size_t n, const uint32_t *ids, const uint32_t *status)
{
	struct msg m;

	raw_expect(w, MSG_FILES_ACK, &m);
	assert_int_equal(m.u.files_ack.count, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(m.u.files_ack.st[i].id, ids[i]);
		if (m.u.files_ack.st[i].status != status[i]) {
			fail_msg("FILES_ACK id %u: %s (%s), expected %s", ids[i],
				 proto_err_name(m.u.files_ack.st[i].status),
				 m.u.files_ack.st[i].text ? m.u.files_ack.st[i].text : "",
				 proto_err_name(status[i]));
		}
	}
	msg_clear(&m);
}

void raw_done(struct raw *w, uint32_t id, uint64_t bytes, const uint8_t *data, size_t len)
{
	struct msg m = { .type = MSG_FILE_DONE };

	m.u.file_done.id = id;
	m.u.file_done.bytes = bytes;
	hash_of(data, len, m.u.file_done.hash);
	raw_send(w, &m);
}

void raw_result(struct raw *w, uint32_t id, uint32_t status, const char *why)
{
	struct msg m;

	raw_expect(w, MSG_FILE_RESULT, &m);
	assert_int_equal(m.u.file_result.id, id);
	if (m.u.file_result.status != status || !strstr(m.u.file_result.text, why)) {
		fail_msg("FILE_RESULT %u: %s (%s), expected %s (%s)", id,
			 proto_err_name(m.u.file_result.status), m.u.file_result.text,
			 proto_err_name(status), why);
	}
	msg_clear(&m);
}

/* END from us, END back: the session completed. */
void raw_end(struct raw *w, uint32_t files)
{
	struct msg m = { .type = MSG_END };

	m.u.end.files = files;
	raw_send(w, &m);
	raw_expect(w, MSG_END, &m);
	msg_clear(&m);
}

void assert_stats(const struct engine_stats *st, uint64_t ok, uint64_t failed, uint64_t bytes,
		  uint32_t first_error)
{
	assert_int_equal(st->files_ok, ok);
	assert_int_equal(st->files_failed, failed);
	assert_int_equal(st->bytes, bytes);
	if (st->first_error != first_error) {
		fail_msg("first_error %s, expected %s", proto_err_name(st->first_error),
			 proto_err_name(first_error));
	}
}

void raw_zeros(struct raw *w, uint32_t id, uint64_t off, uint64_t len)
{
	struct msg m = { .type = MSG_ZEROS };

	m.u.zeros.id = id;
	m.u.zeros.count = 1;
	m.u.zeros.r[0] = (struct proto_range){ .offset = off, .len = len };
	raw_send(w, &m);
}
