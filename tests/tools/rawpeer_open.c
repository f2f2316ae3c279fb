/* SPDX-License-Identifier: MIT */
/*
 * rawpeer's steps of the handshake and the requests: hello, ping, open,
 * bench, lanes, drop-lanes, ring, files, ack, result.
 */
#include "rawpeer.h"

/* ---- steps: handshake and requests ------------------------------------- */

int step_hello(struct peer *p, char **args, int nargs)
{
	struct msg m = { .type = MSG_HELLO }, reply;
	const char *caps = opt_value(args, nargs, "caps"), *sw = opt_value(args, nargs, "sw");
	unsigned lo = PROTO_VERSION_MIN, hi = PROTO_VERSION;

	if (nargs > 0 && strchr(args[0], ':') && !strchr(args[0], '=')) {
		if (sscanf(args[0], "%u:%u", &lo, &hi) != 2 || lo > 65535 || hi > 65535) {
			return usage_error("hello: bad version range %s", args[0]);
		}
	}
	m.u.hello.min_version = (uint16_t)lo;
	m.u.hello.max_version = (uint16_t)hi;
	m.u.hello.caps = PROTO_CAP_TCP | PROTO_CAP_PULL | PROTO_CAP_TREES;
	if (caps && parse_u64(caps, &m.u.hello.caps) < 0) {
		return usage_error("hello: bad caps=%s", caps);
	}
	snprintf(m.u.hello.software, sizeof(m.u.hello.software), "%s", sw ? sw : "rawpeer");
	p->caps = m.u.hello.caps;
	if (send_msg(p, &m) < 0) {
		return 0;
	}
	if (await(p, TYPE_BIT(MSG_HELLO), "HELLO", &reply) > 0) {
		if (reply.type == MSG_HELLO) {
			p->peer_caps = reply.u.hello.caps;
		}
		msg_clear(&reply);
	}
	return 0;
}

int step_ping(struct peer *p, char **args, int nargs)
{
	struct msg m = { .type = MSG_PING };

	m.u.ping.nonce = 0x5241575045455221ull; /* "RAWPEER!" */
	if (nargs > 0 && parse_u64(args[0], &m.u.ping.nonce) < 0) {
		return usage_error("ping: bad nonce %s", args[0]);
	}
	if (send_msg(p, &m) < 0) {
		return 0;
	}
	return await_print(p, MSG_PONG);
}

int step_open(struct peer *p, char **args, int nargs)
{
	struct msg m = { .type = MSG_OPEN }, reply;
	const char *tr = opt_value(args, nargs, "transport");
	uint32_t v, wish;

	if (!strcmp(args[0], "push")) {
		m.u.open.direction = PROTO_DIR_PUSH;
	} else if (!strcmp(args[0], "pull")) {
		m.u.open.direction = PROTO_DIR_PULL;
	} else if (parse_u32(args[0], &v) == 0 && v <= 255) {
		m.u.open.direction = (uint8_t)v;
	} else {
		return usage_error("open: push or pull, not %s", args[0]);
	}
	if (unescape(args[1], m.u.open.path, sizeof(m.u.open.path)) < 0) {
		return usage_error("open: path too long");
	}
	args += 2;
	nargs -= 2;
	m.u.open.transport = XPORT_KIND_TCP;
	if (tr) {
		m.u.open.transport = !strcmp(tr, "tcp")	    ? XPORT_KIND_TCP
				     : !strcmp(tr, "verbs") ? XPORT_KIND_VERBS
				     : !strcmp(tr, "auto")  ? 0
							    : 255;
		if (m.u.open.transport == 255 && (parse_u32(tr, &v) < 0 || v > 255)) {
			return usage_error("open: bad transport=%s", tr);
		}
		if (m.u.open.transport == 255) {
			m.u.open.transport = (uint8_t)v;
		}
	}
	m.u.open.flags = (has_word(args, nargs, "recursive") ? PROTO_OPEN_RECURSIVE : 0) |
			 (has_word(args, nargs, "preserve") ? PROTO_OPEN_PRESERVE : 0) |
			 (has_word(args, nargs, "owner") ? PROTO_OPEN_OWNER : 0) |
			 (has_word(args, nargs, "dry") ? PROTO_OPEN_DRY_RUN : 0) |
			 (has_word(args, nargs, "dir") ? PROTO_OPEN_DEST_IS_DIR : 0);
	if (opt_u32(args, nargs, "flags", m.u.open.flags, &m.u.open.flags) < 0 ||
	    opt_u32(args, nargs, "lanes", 1, &v) < 0 || v > 255 ||
	    opt_u32(args, nargs, "chunk", DEFAULT_CHUNK, &m.u.open.chunk_size) < 0 ||
	    opt_u32(args, nargs, "slots", DEFAULT_SLOTS, &m.u.open.slots) < 0 ||
	    opt_u32(args, nargs, "encrypt", 0, &wish) < 0 || wish > 255) {
		return usage_error("open: bad option");
	}
	m.u.open.lanes = (uint8_t)v;
	if (wish) {
		m.u.open.flags |= PROTO_OPEN_ENCRYPT;
		m.u.open.encrypt = (uint8_t)wish;
	}
	p->purpose = m.u.open.direction == PROTO_DIR_PULL ? LANE_SEAL_PULL : LANE_SEAL_PUSH;
	p->open_flags = m.u.open.flags;
	if (send_msg(p, &m) < 0) {
		return 0;
	}
	if (await(p, TYPE_BIT(MSG_OPEN_OK) | TYPE_BIT(MSG_END), "OPEN_OK", &reply) > 0) {
		if (reply.type == MSG_OPEN_OK) {
			p->ok = reply.u.open_ok;
			p->have_ok = true;
		}
		msg_clear(&reply);
	}
	return 0;
}

/* BENCH (rdmacp bench), answered like OPEN: its OPEN_OK is kept for lanes and chunk. */
int step_bench(struct peer *p, char **args, int nargs)
{
	struct msg m = { .type = MSG_BENCH }, reply;
	uint32_t lanes, wish;

	m.u.bench.transport = XPORT_KIND_TCP;
	if (parse_u64(args[0], &m.u.bench.bytes) < 0 ||
	    opt_u32(args + 1, nargs - 1, "lanes", 1, &lanes) < 0 || lanes > 255 ||
	    opt_u32(args + 1, nargs - 1, "chunk", DEFAULT_CHUNK, &m.u.bench.chunk_size) < 0 ||
	    opt_u32(args + 1, nargs - 1, "slots", DEFAULT_SLOTS, &m.u.bench.slots) < 0 ||
	    opt_u32(args + 1, nargs - 1, "encrypt", 0, &wish) < 0 || wish > 255) {
		return usage_error("bench: bad option");
	}
	m.u.bench.lanes = (uint8_t)lanes;
	m.u.bench.encrypt = (uint8_t)wish;
	m.u.bench.seed = 1;
	p->purpose = LANE_SEAL_BENCH;
	if (send_msg(p, &m) < 0) {
		return 0;
	}
	if (await(p, TYPE_BIT(MSG_OPEN_OK), "OPEN_OK", &reply) > 0) {
		p->ok = reply.u.open_ok;
		p->have_ok = true;
		msg_clear(&reply);
	}
	return 0;
}

/* Daemon rails (OPEN_OK's list, verbs only): lane i to address i % (1 + n), as rdmacp does. */
static void lanes_rails(const struct msg_open_ok *ok, struct xport_params *xp)
{
	for (unsigned i = 0; i < ok->nrails && i < PROTO_MAX_RAILS; i++) {
		net_rail_addr(&ok->rails[i], &xp->rails[xp->nrails++]);
	}
}

/*
 * The lanes' parameters from OPEN_OK (and token=, nlanes=): on verbs also
 * the path the OPEN asked for (WRITE + SEND) and the daemon's rails. More
 * receives than slots: a hostile run may draw more credits than it has slots.
 */
static int lanes_params(struct peer *p, char **args, int nargs, struct xport_params *xp)
{
	const char *tok = opt_value(args, nargs, "token");
	uint32_t nlanes;

	if (opt_u32(args, nargs, "nlanes", p->ok.lanes, &nlanes) < 0 || nlanes < 1 ||
	    nlanes > XPORT_MAX_LANES) {
		return usage_error("lanes: bad nlanes");
	}
	memcpy(xp->token, p->ok.token, sizeof(xp->token));
	if (tok) {
		_cleanup_free_ uint8_t *b = NULL;
		size_t n;
		if (parse_hex(tok, &b, &n) < 0 || n != XPORT_TOKEN_LEN) {
			return usage_error("lanes: token= takes 64 hex digits");
		}
		memcpy(xp->token, b, n);
	}
	xp->nlanes = nlanes;
	xp->sq_depth = 4 * p->ok.slots + 16;
	xp->rq_depth = p->ok.slots + 16;
	xp->timeout_ms = p->timeout_ms;
	if (p->ok.transport == XPORT_KIND_VERBS) {
		xp->write_send = (p->open_flags & PROTO_OPEN_WRITE_SEND) != 0;
		lanes_rails(&p->ok, xp);
	}
	return 0;
}

/* Our buffer (two chunks, then the descriptor's stage), registered; receives posted. */
static int lanes_memory(struct peer *p, const struct xport_params *xp)
{
	int r;

	p->buflen = 2 * (size_t)p->ok.chunk_size + STAGE_BYTES;
	p->buf = aligned_alloc(4096, (p->buflen + 4095) / 4096 * 4096);
	if (!p->buf) {
		return -ENOMEM;
	}
	memset(p->buf, 0, p->buflen);
	r = p->x->ops->reg_mr(p->x, p->buf, p->buflen, XPORT_ACCESS_LOCAL, &p->mr);
	if (r < 0) {
		say(p, "LANES_FAILED reg_mr: %s", strerror(-r));
		return 0;
	}
	for (unsigned l = 0; l < xp->nlanes; l++) {
		for (uint32_t k = 0; k < xp->rq_depth; k++) {
			uint64_t id = l;
			r = p->x->ops->post_recvs(p->x, l, &id, 1);
			if (r < 0) {
				say(p, "LANES_FAILED post receives: %s", strerror(-r));
				return 0;
			}
		}
	}
	return 1;
}

/* The data path's end: lanes, registrations, buffers, the ring; the connection stays. */
void drop_transfer(struct peer *p)
{
	if (p->x) {
		/* verbs: nothing in flight on memory about to go (tcp has no quiesce). */
		if (p->x->ops->quiesce) {
			(void)p->x->ops->quiesce(p->x);
		}
		if (p->mr) {
			p->x->ops->dereg_mr(p->x, p->mr);
		}
		if (p->rmr) {
			p->x->ops->dereg_mr(p->x, p->rmr);
		}
		p->x->ops->destroy(p->x);
	}
	p->x = NULL;
	p->mr = p->rmr = NULL;
	free(p->buf);
	free(p->rring);
	p->buf = p->rring = NULL;
	p->buflen = 0;
	p->have_ok = p->have_ring = false;
	memset(p->credit, 0, sizeof(p->credit));
	memset(p->lane_errs, 0, sizeof(p->lane_errs));
}

int step_drop_lanes(struct peer *p, char **args, int nargs)
{
	(void)args;
	(void)nargs;
	drop_transfer(p);
	say(p, "LANES dropped");
	return 0;
}

/*
 * Sealed tcp lanes (OPEN_OK says so): the keys of OPEN_OK's token (not
 * token=), as rdmacp would take them; v1: a client's from before transfer
 * keys. 1 to go on, 0 when refused (said), <0 on a usage error.
 */
static int lanes_seal(struct peer *p, char **args, int nargs, struct xport_params *xp)
{
	int r;

	if (p->ok.lanes_sealed != PROTO_LANES_SEALED || p->x) {
		return 1;
	}
	if (p->ok.transport != XPORT_KIND_TCP) {
		say(p, "SEAL_REFUSED sealed verbs slots: not in rawpeer");
		return 0;
	}
	xp->seal = true;
	if (has_word(args, nargs, "v1")) {
		r = tls_export_secret(p->tls, LANE_SEAL_EXPORT_LABEL, xp->seal_secret,
				      sizeof(xp->seal_secret));
	} else {
		r = lane_seal_export(p->tls, p->caps & p->peer_caps, p->purpose, p->ok.token,
				     sizeof(p->ok.token), &p->sealed_transfers, xp->seal_secret);
	}
	if (r < 0) {
		explicit_bzero(xp->seal_secret, sizeof(xp->seal_secret));
		say(p, "SEAL_REFUSED no lane keys for this transfer: %s",
		    r == -EKEYREJECTED ? "they would repeat an earlier transfer's" : strerror(-r));
		return 0;
	}
	return 1;
}

int step_lanes(struct peer *p, char **args, int nargs)
{
	const struct xport_ops *ops;
	struct xport_params xp = { 0 };
	struct sockaddr_storage addr = p->addr;
	const char *tr;
	int r;

	if (!p->have_ok) {
		return usage_error("lanes: no OPEN_OK yet");
	}
	if (p->x && !has_word(args, nargs, "replay")) {
		return usage_error(
		    "lanes: already connected (replay connects again, then drops it)");
	}
	r = lanes_params(p, args, nargs, &xp);
	if (r < 0) {
		return r;
	}
	/* The transport OPEN_OK names: tcp connections, or RC QPs through rdma_cm. */
	ops = xport_ops_by_kind(p->ok.transport);
	tr = transport_name(p->ok.transport);
	if (!ops) {
		say(p, "LANES_FAILED transport %s (%u): not in this build", tr, p->ok.transport);
		return 0;
	}
	net_set_port(&addr, p->ok.data_port);
	r = lanes_seal(p, args, nargs, &xp);
	if (r <= 0) {
		return r;
	}
	if (p->x) {
		/* A second connection with the same (or another) token: is it refused? */
		struct xport *again = NULL;
		r = ops->connect((struct sockaddr *)&addr, p->addrlen, &xp, &again);
		if (r < 0) {
			say(p, "LANES_FAILED replay: %s", strerror(-r));
		} else {
			say(p, "LANES connected=%u port=%u transport=%s (replay accepted)",
			    xp.nlanes, p->ok.data_port, tr);
			again->ops->destroy(again);
		}
		return 0;
	}
	r = ops->connect((struct sockaddr *)&addr, p->addrlen, &xp, &p->x);
	explicit_bzero(xp.seal_secret, sizeof(xp.seal_secret));
	if (r < 0) {
		say(p, "LANES_FAILED %u %s lanes to port %u: %s", xp.nlanes, tr, p->ok.data_port,
		    strerror(-r));
		return 0;
	}
	r = lanes_memory(p, &xp);
	if (r <= 0) {
		return r;
	}
	say(p, "LANES connected=%u port=%u transport=%s%s%s", xp.nlanes, p->ok.data_port, tr,
	    xp.write_send ? " (WRITE + SEND)" : "", xp.seal ? " sealed" : "");
	return 0;
}

int step_ring(struct peer *p, char **args, int nargs)
{
	struct msg m;

	if (await(p, TYPE_BIT(MSG_RING), "RING", &m) > 0) {
		if (m.type == MSG_RING) {
			p->ring = m.u.ring;
			p->have_ring = true;
			memset(p->credit, 1, MIN(m.u.ring.slots, (uint32_t)PROTO_MAX_SLOTS));
		}
		msg_clear(&m);
	}
	return 0;
}

static int parse_entry(char *spec, struct proto_file *pf, char *name, char *link)
{
	char *f[6] = { 0 };
	int n = 0;
	uint64_t v;

	for (char *s = spec; n < 6; n++) {
		f[n] = s;
		s = n < 5 ? strchr(s, ':') : NULL;
		if (!s) {
			n++;
			break;
		}
		*s++ = '\0';
	}
	if (n < 3 || parse_u32(f[0], &pf->id) < 0 || parse_u64(f[2], &pf->size) < 0) {
		return -EINVAL;
	}
	if (unescape(f[1], name, PROTO_MAX_PATH + 1) < 0) {
		return -EINVAL;
	}
	pf->name = name;
	pf->ftype = PROTO_FT_REG;
	pf->mode = 0644;
	if (n > 3 && *f[3]) {
		char *end;
		v = strtoull(f[3], &end, 8);
		if (*end || v > UINT32_MAX) {
			return -EINVAL;
		}
		pf->mode = (uint32_t)v;
	}
	if (n > 4 && *f[4]) {
		pf->ftype = !strcmp(f[4], "file")	? PROTO_FT_REG
			    : !strcmp(f[4], "dir")	? PROTO_FT_DIR
			    : !strcmp(f[4], "symlink")	? PROTO_FT_SYMLINK
			    : !strcmp(f[4], "hardlink") ? PROTO_FT_HARDLINK
							: 0;
		if (!pf->ftype) {
			return -EINVAL;
		}
	}
	if (n > 5) {
		if (unescape(f[5], link, PROTO_MAX_PATH + 1) < 0) {
			return -EINVAL;
		}
		pf->link = link;
	}
	return 0;
}

int step_files(struct peer *p, char **args, int nargs)
{
	_cleanup_free_ struct proto_file *pf = calloc((size_t)nargs, sizeof(*pf));
	_cleanup_free_ char *names = malloc((size_t)nargs * 2 * (PROTO_MAX_PATH + 1));
	struct msg m = { .type = MSG_FILES };
	const char *mt = opt_value(args, nargs, "mtime");
	uint32_t uid, gid;
	int64_t mtime = 0;

	if (!pf || !names) {
		return -ENOMEM;
	}
	if (mt) {
		char *end;
		mtime = strtoll(mt, &end, 0);
		if (*end) {
			return usage_error("files: bad mtime=%s", mt);
		}
	}
	if (opt_u32(args, nargs, "uid", 0, &uid) < 0 || opt_u32(args, nargs, "gid", 0, &gid) < 0) {
		return -EINVAL;
	}
	for (int i = 0; i < nargs; i++) {
		_cleanup_free_ char *spec = NULL;
		char *name = names + (size_t)i * 2 * (PROTO_MAX_PATH + 1);

		if (strchr(args[i], '=') && !strchr(args[i], ':')) {
			continue; /* an option */
		}
		spec = strdup(args[i]);
		if (!spec) {
			return -ENOMEM;
		}
		if (parse_entry(spec, &pf[m.u.files.count], name, name + PROTO_MAX_PATH + 1) < 0) {
			return usage_error(
			    "files: bad entry %s (ID:NAME:SIZE[:MODE[:TYPE[:LINK]]])", args[i]);
		}
		pf[m.u.files.count].mtime_sec = mtime;
		pf[m.u.files.count].uid = uid;
		pf[m.u.files.count].gid = gid;
		m.u.files.count++;
	}
	m.u.files.files = pf;
	if (send_msg(p, &m) < 0) {
		return 0;
	}
	p->files_offered += m.u.files.count;
	say(p, "FILES sent %u entries", m.u.files.count);
	return 0;
}

int step_ack(struct peer *p, char **args, int nargs)
{
	return await_print(p, MSG_FILES_ACK);
}

int step_result(struct peer *p, char **args, int nargs)
{
	return await_print(p, MSG_FILE_RESULT);
}
