/* SPDX-License-Identifier: MIT */
/*
 * rawpeer's steps that end a session, send raw frames, wait and check:
 * get, end, bye, close, fin, frame, raw, wait, idle, sleep, expect*.
 */
#include "rawpeer.h"

/* ---- steps: ending, raw frames, waiting --------------------------------- */

int step_get(struct peer *p, char **args, int nargs)
{
	struct msg m = { .type = MSG_GET };
	_cleanup_free_ char **paths = calloc((size_t)nargs, sizeof(char *));
	_cleanup_free_ char *buf = malloc((size_t)nargs * (PROTO_MAX_PATH + 1));

	if (!paths || !buf) {
		return -ENOMEM;
	}
	for (int i = 0; i < nargs; i++) {
		paths[i] = buf + (size_t)i * (PROTO_MAX_PATH + 1);
		if (unescape(args[i], paths[i], PROTO_MAX_PATH + 1) < 0) {
			return usage_error("get: path too long");
		}
	}
	m.u.get.count = (uint16_t)nargs;
	m.u.get.paths = paths;
	if (send_msg(p, &m) >= 0) {
		say(p, "GET sent %d paths", nargs);
	}
	return 0;
}

int step_end(struct peer *p, char **args, int nargs)
{
	struct msg m = { .type = MSG_END };

	m.u.end.files = p->files_offered;
	if (nargs >= 2 &&
	    (parse_u32(args[0], &m.u.end.files) < 0 || parse_u64(args[1], &m.u.end.bytes) < 0)) {
		return usage_error("end [FILES BYTES]");
	}
	if (send_msg(p, &m) >= 0) {
		say(p, "END sent files=%u bytes=%" PRIu64, m.u.end.files, m.u.end.bytes);
	}
	return 0;
}

int step_bye(struct peer *p, char **args, int nargs)
{
	struct msg m = { .type = MSG_BYE };

	if (send_msg(p, &m) >= 0) {
		say(p, "BYE sent");
	}
	return 0;
}

int step_close(struct peer *p, char **args, int nargs)
{
	int r = tls_shutdown(p->tls, 1000);

	say(p, "CLOSE_NOTIFY sent%s", r < 0 ? " (the daemon's did not come back)" : "");
	return 0;
}

int step_fin(struct peer *p, char **args, int nargs)
{
	int r = shutdown(tls_fd(p->tls), SHUT_WR);

	say(p, "FIN sent%s%s", r < 0 ? " failed: " : "", r < 0 ? strerror(errno) : "");
	return 0;
}

static int send_raw(struct peer *p, const uint8_t *b, size_t n, const char *what)
{
	int r = tls_write_full(p->tls, b, n, p->timeout_ms);

	if (r < 0) {
		say(p, "SEND_FAILED %s: %s", what, strerror(-r));
	} else {
		say(p, "%s sent (%zu bytes)", what, n);
	}
	return 0;
}

int step_frame(struct peer *p, char **args, int nargs)
{
	_cleanup_free_ uint8_t *payload = NULL, *frame = NULL;
	uint32_t magic, version, res8, flags, res16, length;
	struct wbuf w;
	char what[64];
	uint16_t type;
	size_t n = 0;

	if (msg_type_by_name(args[0], &type) < 0) {
		return usage_error("frame: bad type %s", args[0]);
	}
	if (strcmp(args[1], "-") && parse_hex(args[1], &payload, &n) < 0) {
		return usage_error("frame: bad hex payload");
	}
	if (n > PROTO_MAX_PAYLOAD) {
		return usage_error("frame: payload over 1 MiB (use raw)");
	}
	/* The header as proto_hdr_encode writes it, unless a field is overridden. */
	if (opt_u32(args + 2, nargs - 2, "magic", PROTO_MAGIC, &magic) < 0 ||
	    opt_u32(args + 2, nargs - 2, "version", PROTO_VERSION, &version) < 0 || version > 255 ||
	    opt_u32(args + 2, nargs - 2, "res8", 0, &res8) < 0 || res8 > 255 ||
	    opt_u32(args + 2, nargs - 2, "flags", 0, &flags) < 0 || flags > 0xffff ||
	    opt_u32(args + 2, nargs - 2, "res16", 0, &res16) < 0 || res16 > 0xffff ||
	    opt_u32(args + 2, nargs - 2, "len", (uint32_t)n, &length) < 0) {
		return usage_error("frame: bad header field");
	}
	frame = malloc(PROTO_HDR_LEN + n);
	if (!frame) {
		return -ENOMEM;
	}
	wbuf_init(&w, frame, PROTO_HDR_LEN);
	wbuf_put_u32(&w, magic);
	wbuf_put_u8(&w, (uint8_t)version);
	wbuf_put_u8(&w, (uint8_t)res8);
	wbuf_put_u16(&w, type);
	wbuf_put_u16(&w, (uint16_t)flags);
	wbuf_put_u16(&w, (uint16_t)res16);
	wbuf_put_u32(&w, length);
	if (n) {
		memcpy(frame + PROTO_HDR_LEN, payload, n);
	}
	snprintf(what, sizeof(what), "FRAME type=%u len=%u", type, length);
	return send_raw(p, frame, PROTO_HDR_LEN + n, what);
}

int step_raw(struct peer *p, char **args, int nargs)
{
	_cleanup_free_ uint8_t *b = NULL;
	size_t n;

	if (parse_hex(args[0], &b, &n) < 0 || n == 0) {
		return usage_error("raw: bad hex");
	}
	return send_raw(p, b, n, "RAW");
}

int step_wait(struct peer *p, char **args, int nargs)
{
	uint16_t type;

	if (!strcmp(args[0], "closed")) {
		int64_t t0 = now_ms(), deadline = t0 + p->timeout_ms;
		for (;;) {
			struct msg m;
			int r = next_msg(p, deadline, t0, &m, NULL);
			if (r == 0) {
				say(p, "TIMEOUT waiting for the close after %.1f s",
				    (double)(now_ms() - t0) / 1000.0);
			}
			if (r <= 0) {
				return 0;
			}
			handle_msg(p, &m, true);
			msg_clear(&m);
		}
	}
	if (msg_type_by_name(args[0], &type) < 0 || type > MSG_TYPE_MAX) {
		return usage_error("wait: bad message type %s", args[0]);
	}
	return await_print(p, type);
}

int parse_secs(const char *s, double *ret)
{
	char *end;

	*ret = strtod(s, &end);
	if (*end || *ret < 0 || *ret > 86400) {
		return usage_error("bad seconds %s", s);
	}
	return 0;
}

int step_idle(struct peer *p, char **args, int nargs)
{
	bool pong = !has_word(args + 1, nargs - 1, "nopong");
	int64_t t0 = now_ms(), deadline;
	double secs;

	if (parse_secs(args[0], &secs) < 0) {
		return -EINVAL;
	}
	deadline = t0 + (int64_t)(secs * 1000);
	for (;;) {
		struct msg m;
		int r = next_msg(p, deadline, t0, &m, NULL);
		if (r == 0) {
			say(p, "IDLE %.1f s, the session is still open", secs);
			return 0;
		}
		if (r < 0) {
			return 0;
		}
		handle_msg(p, &m, pong);
		msg_clear(&m);
	}
}

int step_sleep(struct peer *p, char **args, int nargs)
{
	double secs;
	struct timespec ts;

	if (parse_secs(args[0], &secs) < 0) {
		return -EINVAL;
	}
	ts.tv_sec = (time_t)secs;
	ts.tv_nsec = (long)((secs - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
	say(p, "SLEPT %.1f s", secs);
	return 0;
}

int step_expect(struct peer *p, char **args, int nargs)
{
	bool ok = strstr(p->last, args[0]) != NULL;

	if (!ok) {
		fprintf(stderr, "rawpeer: expectation failed: wanted '%s' in: %s\n", args[0],
			p->last);
		say(p, "EXPECT_FAILED %s", args[0]);
		return EXIT_EXPECT;
	}
	return 0;
}

int step_expect_not(struct peer *p, char **args, int nargs)
{
	if (strstr(p->last, args[0])) {
		fprintf(stderr, "rawpeer: expectation failed: '%s' must not be in: %s\n", args[0],
			p->last);
		say(p, "EXPECT_FAILED not %s", args[0]);
		return EXIT_EXPECT;
	}
	return 0;
}

int step_expect_seen(struct peer *p, char **args, int nargs)
{
	if (!p->seen || !strstr(p->seen, args[0])) {
		fprintf(stderr, "rawpeer: expectation failed: no line so far contains '%s'\n",
			args[0]);
		say(p, "EXPECT_FAILED seen %s", args[0]);
		return EXIT_EXPECT;
	}
	return 0;
}
