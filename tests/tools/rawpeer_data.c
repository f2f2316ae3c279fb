/* SPDX-License-Identifier: MIT */
/* rawpeer's steps of the data path: chunk, poke, write, credits, done. */
#include "rawpeer.h"

/* ---- steps: data ------------------------------------------------------- */

static int need_ring(struct peer *p, const char *step)
{
	if (!p->x || !p->have_ring) {
		return usage_error("%s: needs lanes and a RING first", step);
	}
	return 0;
}

/* Fill buf with len bytes of src ("fill=BYTE" or a file from offset; zeros past its end). */
static int load_payload(const char *src, uint64_t offset, uint8_t *buf, size_t len, size_t *ret_got)
{
	_cleanup_close_ int fd = -1;
	size_t got = 0;

	if (!strncmp(src, "fill=", 5)) {
		uint32_t b;
		if (parse_u32(src + 5, &b) < 0 || b > 255) {
			return usage_error("bad %s", src);
		}
		memset(buf, (int)b, len);
		*ret_got = len;
		return 0;
	}
	fd = open(src, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return usage_error("%s: %s", src, strerror(errno));
	}
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)(offset + got));
		if (n < 0) {
			return usage_error("read %s: %s", src, strerror(errno));
		}
		if (n == 0) {
			break;
		}
		got += (size_t)n;
	}
	memset(buf + got, 0, len - got);
	*ret_got = got;
	return 0;
}

static int opt_lane(struct peer *p, char **args, int nargs, uint32_t *ret)
{
	if (opt_u32(args, nargs, "lane", 0, ret) < 0 || *ret >= p->x->nlanes) {
		return usage_error("bad lane (we have %u)", p->x->nlanes);
	}
	return 0;
}

/*
 * rkey=N: that key; rkey=^N: the RING's key for the lane XOR N (a wrong key,
 * whatever the daemon's are); none: the RING's key for the lane.
 */
static int opt_rkey(struct peer *p, char **args, int nargs, uint32_t lane, uint32_t *ret)
{
	const char *v = opt_value(args, nargs, "rkey");
	uint32_t ring = 0, x;

	if (p->have_ring && p->ring.nkeys > 0) {
		ring = p->ring.rkey[MIN(lane, p->ring.nkeys - 1u)];
	}
	*ret = ring;
	if (!v) {
		return 0;
	}
	if (v[0] == '^') {
		if (parse_u32(v + 1, &x) < 0) {
			return usage_error("bad rkey=%s", v);
		}
		*ret = ring ^ x;
		return 0;
	}
	return parse_u32(v, ret) < 0 ? usage_error("bad rkey=%s", v) : 0;
}

int step_chunk(struct peer *p, char **args, int nargs)
{
	uint32_t slot, id, len, lane, dlen, did, dres, imm;
	uint64_t off, doff, seq;
	size_t got = 0;
	uint8_t *stage;
	struct proto_desc d;
	struct xport_wr wr[2];
	char note[64] = "", res[64];
	int r;

	r = need_ring(p, "chunk");
	if (r < 0) {
		return r;
	}
	if (parse_u32(args[0], &slot) < 0 || parse_u32(args[1], &id) < 0 ||
	    parse_u64(args[2], &off) < 0 || parse_u32(args[3], &len) < 0) {
		return usage_error("chunk SLOT ID OFFSET LEN SRC");
	}
	if (len > 2 * (size_t)p->ok.chunk_size) {
		return usage_error("chunk: at most %u bytes", 2 * p->ok.chunk_size);
	}
	r = load_payload(args[4], off, p->buf, len, &got);
	if (r < 0) {
		return r;
	}
	seq = p->seq + 1;
	if (opt_lane(p, args + 5, nargs - 5, &lane) < 0 ||
	    opt_u32(args + 5, nargs - 5, "did", id, &did) < 0 ||
	    opt_u32(args + 5, nargs - 5, "dlen", len, &dlen) < 0 ||
	    opt_u32(args + 5, nargs - 5, "dres", 0, &dres) < 0 ||
	    opt_u32(args + 5, nargs - 5, "imm", proto_imm(PROTO_IMM_DATA, slot), &imm) < 0) {
		return -EINVAL;
	}
	doff = off;
	if (opt_value(args + 5, nargs - 5, "doff") &&
	    parse_u64(opt_value(args + 5, nargs - 5, "doff"), &doff) < 0) {
		return usage_error("chunk: bad doff");
	}
	if (opt_value(args + 5, nargs - 5, "seq") &&
	    parse_u64(opt_value(args + 5, nargs - 5, "seq"), &seq) < 0) {
		return usage_error("chunk: bad seq");
	}
	p->seq++;
	d = (struct proto_desc){ .file_id = did, .len = dlen, .offset = doff, .seq = seq };
	stage = p->buf + 2 * (size_t)p->ok.chunk_size;
	proto_desc_encode(&d, stage);
	if (dres) {
		stage[24] = (uint8_t)(dres >> 24);
		stage[25] = (uint8_t)(dres >> 16);
		stage[26] = (uint8_t)(dres >> 8);
		stage[27] = (uint8_t)dres;
	}
	wr[0] = (struct xport_wr){
		.opcode = XPORT_OP_WRITE,
		.mr = len ? p->mr : NULL,
		.buf = len ? p->buf : NULL,
		.len = len,
		.remote_addr = p->ring.addr + (uint64_t)slot * p->ring.slot_size,
		.rkey = p->ring.rkey[MIN(lane, p->ring.nkeys - 1u)],
		.lane = lane,
	};
	wr[1] = (struct xport_wr){
		.opcode = XPORT_OP_WRITE_IMM,
		.mr = p->mr,
		.buf = stage,
		.len = PROTO_DESC_LEN,
		.remote_addr = p->ring.desc_addr + (uint64_t)slot * PROTO_DESC_LEN,
		.rkey = wr[0].rkey,
		.imm = imm,
		.lane = lane,
	};
	if (slot >= PROTO_MAX_SLOTS || !p->credit[slot]) {
		snprintf(note, sizeof(note), " (no credit)");
	} else {
		p->credit[slot] = 0;
	}
	if (got < len) {
		size_t l = strlen(note);
		snprintf(note + l, sizeof(note) - l, " (%zu bytes zero padded)", len - got);
	}
	r = post_and_wait(p, wr, has_word(args + 5, nargs - 5, "nodesc") ? 1 : 2);
	say(p, "CHUNK slot=%u id=%u off=%" PRIu64 " len=%u lane=%u %s%s", slot, id, off, len, lane,
	    outcome(r, res, sizeof(res)), note);
	return 0;
}

int step_poke(struct peer *p, char **args, int nargs)
{
	_cleanup_free_ uint8_t *bytes = NULL;
	const char *area = opt_value(args + 3, nargs - 3, "area");
	uint32_t slot, lane, rkey;
	uint64_t off, base;
	size_t n;
	struct xport_wr wr;
	char res[64];
	int r;

	r = need_ring(p, "poke");
	if (r < 0) {
		return r;
	}
	if (parse_u32(args[0], &slot) < 0 || parse_u64(args[1], &off) < 0) {
		return usage_error("poke SLOT OFFSET_IN_SLOT HEX|fill=BYTE:LEN");
	}
	if (!strncmp(args[2], "fill=", 5)) {
		unsigned b, len;
		if (sscanf(args[2] + 5, "%i:%i", &b, &len) != 2 || b > 255 ||
		    len > 2 * p->ok.chunk_size) {
			return usage_error("poke: bad %s", args[2]);
		}
		memset(p->buf, (int)b, len);
		n = len;
	} else {
		if (parse_hex(args[2], &bytes, &n) < 0 || n > 2 * (size_t)p->ok.chunk_size) {
			return usage_error("poke: bad hex %s", args[2]);
		}
		memcpy(p->buf, bytes, n);
	}
	if (opt_lane(p, args + 3, nargs - 3, &lane) < 0 ||
	    opt_rkey(p, args + 3, nargs - 3, lane, &rkey) < 0) {
		return -EINVAL;
	}
	if (area && !strcmp(area, "desc")) {
		base = p->ring.desc_addr + (uint64_t)slot * PROTO_DESC_LEN;
	} else if (!area || !strcmp(area, "data")) {
		base = p->ring.addr + (uint64_t)slot * p->ring.slot_size;
	} else {
		return usage_error("poke: area=data|desc");
	}
	wr = (struct xport_wr){
		.opcode = XPORT_OP_WRITE,
		.mr = n ? p->mr : NULL,
		.buf = n ? p->buf : NULL,
		.len = (uint32_t)n,
		.remote_addr = base + off,
		.rkey = rkey,
		.lane = lane,
	};
	r = post_and_wait(p, &wr, 1);
	say(p, "POKE slot=%u off=%" PRIu64 " len=%zu lane=%u %s", slot, off, n, lane,
	    outcome(r, res, sizeof(res)));
	return 0;
}

int step_write(struct peer *p, char **args, int nargs)
{
	const char *fill = opt_value(args + 2, nargs - 2, "fill"), *imm;
	uint32_t len, lane, rkey, immv = 0, b = 0;
	uint64_t addr;
	struct xport_wr wr;
	char res[64];
	int r;

	if (!p->x) {
		return usage_error("write: needs lanes first");
	}
	if (parse_u64(args[0], &addr) < 0 || parse_u32(args[1], &len) < 0 ||
	    len > 2 * p->ok.chunk_size) {
		return usage_error("write ADDR LEN");
	}
	if (fill && (parse_u32(fill, &b) < 0 || b > 255)) {
		return usage_error("write: bad fill");
	}
	imm = opt_value(args + 2, nargs - 2, "imm");
	if (opt_lane(p, args + 2, nargs - 2, &lane) < 0 ||
	    opt_rkey(p, args + 2, nargs - 2, lane, &rkey) < 0 ||
	    (imm && parse_u32(imm, &immv) < 0)) {
		return -EINVAL;
	}
	memset(p->buf, (int)b, len);
	wr = (struct xport_wr){
		.opcode = imm ? XPORT_OP_WRITE_IMM : XPORT_OP_WRITE,
		.mr = len ? p->mr : NULL,
		.buf = len ? p->buf : NULL,
		.len = len,
		.remote_addr = addr,
		.rkey = rkey,
		.imm = immv,
		.lane = lane,
	};
	r = post_and_wait(p, &wr, 1);
	say(p, "WRITE addr=0x%" PRIx64 " len=%u lane=%u %s", addr, len, lane,
	    outcome(r, res, sizeof(res)));
	return 0;
}

int step_credits(struct peer *p, char **args, int nargs)
{
	uint32_t held = 0, n = p->have_ring ? MIN(p->ring.slots, (uint32_t)PROTO_MAX_SLOTS) : 0;

	drain_cq(p, 0, NULL, NULL);
	for (uint32_t i = 0; i < n; i++) {
		held += p->credit[i];
	}
	say(p, "CREDITS held=%u of %u returned=%" PRIu64, held, n, p->credits_returned);
	return 0;
}

static int hash_file(const char *path, uint8_t out[HASH_LEN])
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct file_hash h;
	uint8_t buf[65536];
	ssize_t n;

	if (fd < 0) {
		return negerrno();
	}
	if (file_hash_init(&h) < 0) {
		return -ENOMEM;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		file_hash_update(&h, buf, (size_t)n);
	}
	file_hash_final(&h, out);
	file_hash_free(&h);
	return n < 0 ? -EIO : 0;
}

int step_done(struct peer *p, char **args, int nargs)
{
	struct msg m = { .type = MSG_FILE_DONE };
	const char *st = opt_value(args + 3, nargs - 3, "status");
	const char *text = opt_value(args + 3, nargs - 3, "text");
	char hex[2 * HASH_LEN + 1];
	int r;

	if (parse_u32(args[0], &m.u.file_done.id) < 0 ||
	    parse_u64(args[1], &m.u.file_done.bytes) < 0) {
		return usage_error("done ID BYTES HASHSRC");
	}
	if (!strncmp(args[2], "hex=", 4)) {
		_cleanup_free_ uint8_t *b = NULL;
		size_t n;
		if (parse_hex(args[2] + 4, &b, &n) < 0 || n != HASH_LEN) {
			return usage_error("done: hex= takes 32 hex digits");
		}
		memcpy(m.u.file_done.hash, b, HASH_LEN);
	} else {
		r = hash_file(args[2], m.u.file_done.hash);
		if (r < 0) {
			return usage_error("done: hash %s: %s", args[2], strerror(-r));
		}
	}
	if (st && status_by_name(st, &m.u.file_done.status) < 0) {
		return usage_error("done: bad status=%s", st);
	}
	if (text && unescape(text, m.u.file_done.text, sizeof(m.u.file_done.text)) < 0) {
		return usage_error("done: text too long");
	}
	if (send_msg(p, &m) < 0) {
		return 0;
	}
	hash_to_hex(m.u.file_done.hash, hex);
	say(p, "FILE_DONE sent %u %s bytes=%" PRIu64 " hash=%s", m.u.file_done.id,
	    proto_err_name(m.u.file_done.status), m.u.file_done.bytes, hex);
	return 0;
}
