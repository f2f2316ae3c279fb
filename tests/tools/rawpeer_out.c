/* SPDX-License-Identifier: MIT */
/*
 * rawpeer's output and arguments: the lines it prints (what expect looks
 * at), the values of a step's words, and how each message prints.
 */
#include "rawpeer.h"

/* ---- output ------------------------------------------------------------- */

void say(struct peer *p, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(p->last, sizeof(p->last), fmt, ap);
	va_end(ap);
	puts(p->last);
	fflush(stdout);
	n = strlen(p->last);
	if (p->seen_len + n + 2 > p->seen_cap) {
		size_t cap = MAX(p->seen_cap * 2, p->seen_len + n + 2 + 4096);
		char *s = realloc(p->seen, cap);
		if (!s) {
			return;
		}
		p->seen = s;
		p->seen_cap = cap;
	}
	memcpy(p->seen + p->seen_len, p->last, n);
	p->seen_len += n;
	p->seen[p->seen_len++] = '\n';
	p->seen[p->seen_len] = '\0';
}

static const char *esc(const char *in, char *out, size_t outlen)
{
	return log_escape(in ? in : "", out, outlen);
}

/* ---- argument parsing helpers ------------------------------------------- */

int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rawpeer: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -EINVAL;
}

int parse_u64(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-') {
		return -EINVAL;
	}
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end) {
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

int parse_u32(const char *s, uint32_t *ret)
{
	uint64_t v;

	if (parse_u64(s, &v) < 0 || v > UINT32_MAX) {
		return -EINVAL;
	}
	*ret = (uint32_t)v;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	return -1;
}

/* Hex (spaces, ':' and a leading 0x allowed) into a new buffer. */
int parse_hex(const char *s, uint8_t **ret, size_t *ret_len)
{
	_cleanup_free_ uint8_t *b = malloc(strlen(s) / 2 + 1);
	size_t n = 0;
	int hi = -1;

	if (!b) {
		return -ENOMEM;
	}
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		s += 2;
	}
	for (; *s; s++) {
		int v;
		if (*s == ' ' || *s == ':') {
			continue;
		}
		v = hexval(*s);
		if (v < 0) {
			return -EINVAL;
		}
		if (hi < 0) {
			hi = v;
		} else {
			b[n++] = (uint8_t)(hi << 4 | v);
			hi = -1;
		}
	}
	if (hi >= 0) {
		return -EINVAL;
	}
	*ret = TAKE_PTR(b);
	*ret_len = n;
	return 0;
}

/* "\xNN" and "\\" escapes; the rest is copied. */
int unescape(const char *in, char *out, size_t outlen)
{
	size_t n = 0;

	for (; *in; in++) {
		char c = *in;
		if (c == '\\' && in[1] == '\\') {
			in++;
		} else if (c == '\\' && in[1] == 'x' && hexval(in[2]) >= 0 && hexval(in[3]) >= 0) {
			c = (char)(hexval(in[2]) << 4 | hexval(in[3]));
			in += 3;
		}
		if (n + 1 >= outlen) {
			return -ENAMETOOLONG;
		}
		out[n++] = c;
	}
	out[n] = '\0';
	return 0;
}

/* "key=value" in args: the value, or NULL. */
const char *opt_value(char **args, int nargs, const char *key)
{
	size_t kl = strlen(key);

	for (int i = 0; i < nargs; i++) {
		if (!strncmp(args[i], key, kl) && args[i][kl] == '=') {
			return args[i] + kl + 1;
		}
	}
	return NULL;
}

bool has_word(char **args, int nargs, const char *word)
{
	for (int i = 0; i < nargs; i++) {
		if (!strcmp(args[i], word)) {
			return true;
		}
	}
	return false;
}

int opt_u32(char **args, int nargs, const char *key, uint32_t def, uint32_t *ret)
{
	const char *v = opt_value(args, nargs, key);

	*ret = def;
	if (v && parse_u32(v, ret) < 0) {
		return usage_error("bad %s=%s", key, v);
	}
	return 0;
}

int msg_type_by_name(const char *s, uint16_t *ret)
{
	uint64_t v;

	if (parse_u64(s, &v) == 0) {
		if (v > UINT16_MAX) {
			return -EINVAL;
		}
		*ret = (uint16_t)v;
		return 0;
	}
	for (uint16_t t = 1; t <= MSG_TYPE_MAX; t++) {
		if (!strcasecmp(s, proto_type_name(t))) {
			*ret = t;
			return 0;
		}
	}
	return -EINVAL;
}

int status_by_name(const char *s, uint32_t *ret)
{
	if (parse_u32(s, ret) == 0) {
		return 0;
	}
	for (uint32_t c = 0; c <= PERR_MAX; c++) {
		if (!strcasecmp(s, proto_err_name(c))) {
			*ret = c;
			return 0;
		}
	}
	return -EINVAL;
}

/* ---- printing messages ------------------------------------------------- */

const char *transport_name(unsigned kind)
{
	return kind == XPORT_KIND_TCP ? "tcp" : kind == XPORT_KIND_VERBS ? "verbs" : "?";
}

static const char *ftype_name(uint8_t t)
{
	return t == PROTO_FT_REG	? "file"
	       : t == PROTO_FT_DIR	? "dir"
	       : t == PROTO_FT_SYMLINK	? "symlink"
	       : t == PROTO_FT_HARDLINK ? "hardlink"
					: "?";
}

void print_msg(struct peer *p, const struct msg *m, const char *suffix)
{
	char e1[PROTO_MAX_PATH * 4 + 1], hex[2 * HASH_LEN + 1];
	char *line = NULL;
	size_t len = 0;
	FILE *f;

	switch (m->type) {
	case MSG_HELLO:
		say(p, "HELLO versions=%u..%u caps=0x%" PRIx64 " software=%s%s",
		    m->u.hello.min_version, m->u.hello.max_version, m->u.hello.caps,
		    esc(m->u.hello.software, e1, sizeof(e1)), suffix);
		return;
	case MSG_ERROR:
		say(p, "ERROR %s%s%s%s", proto_err_name(m->u.error.code),
		    m->u.error.text[0] ? " " : "", esc(m->u.error.text, e1, sizeof(e1)), suffix);
		return;
	case MSG_OPEN_OK:
		say(p, "OPEN_OK transport=%s lanes=%u port=%u chunk=%u slots=%u%s%s",
		    transport_name(m->u.open_ok.transport), m->u.open_ok.lanes,
		    m->u.open_ok.data_port, m->u.open_ok.chunk_size, m->u.open_ok.slots,
		    m->u.open_ok.lanes_sealed == PROTO_LANES_SEALED  ? " sealed"
		    : m->u.open_ok.lanes_sealed == PROTO_LANES_CLEAR ? " clear"
								     : "",
		    suffix);
		return;
	case MSG_FILE_DONE:
		hash_to_hex(m->u.file_done.hash, hex);
		say(p, "FILE_DONE %u %s bytes=%" PRIu64 " hash=%s%s%s%s", m->u.file_done.id,
		    proto_err_name(m->u.file_done.status), m->u.file_done.bytes, hex,
		    m->u.file_done.text[0] ? " " : "", esc(m->u.file_done.text, e1, sizeof(e1)),
		    suffix);
		return;
	case MSG_FILE_RESULT:
		say(p, "FILE_RESULT %u %s%s%s%s", m->u.file_result.id,
		    proto_err_name(m->u.file_result.status), m->u.file_result.text[0] ? " " : "",
		    esc(m->u.file_result.text, e1, sizeof(e1)), suffix);
		return;
	case MSG_END:
		say(p, "END files=%u bytes=%" PRIu64 "%s", m->u.end.files, m->u.end.bytes, suffix);
		return;
	case MSG_PING:
	case MSG_PONG:
		say(p, "%s nonce=%" PRIu64 "%s", proto_type_name(m->type), m->u.ping.nonce, suffix);
		return;
	case MSG_LANE_DOWN:
		say(p, "LANE_DOWN lane=%u count=%" PRIu64 "%s", m->u.lane_down.lane,
		    m->u.lane_down.count, suffix);
		return;
	default:
		break;
	}
	/* The list-shaped ones. */
	f = open_memstream(&line, &len);
	if (!f) {
		say(p, "%s (out of memory printing it)", proto_type_name(m->type));
		return;
	}
	fputs(proto_type_name(m->type), f);
	if (m->type == MSG_RING) {
		fprintf(f,
			" addr=0x%" PRIx64 " desc=0x%" PRIx64
			" rkey=0x%x nkeys=%u slots=%u chunk=%u",
			m->u.ring.addr, m->u.ring.desc_addr, m->u.ring.rkey[0], m->u.ring.nkeys,
			m->u.ring.slots, m->u.ring.slot_size);
		for (unsigned i = 1; i < m->u.ring.nkeys; i++) {
			fprintf(f, "%s0x%x", i == 1 ? " rkeys=" : ",", m->u.ring.rkey[i]);
		}
	} else if (m->type == MSG_FILES) {
		for (size_t i = 0; i < m->u.files.count; i++) {
			const struct proto_file *pf = &m->u.files.files[i];
			fprintf(f, " %u:%s:%" PRIu64 ":%o:%s", pf->id,
				esc(pf->name, e1, sizeof(e1)), pf->size, pf->mode,
				ftype_name(pf->ftype));
			if (pf->link) {
				fprintf(f, ":%s", esc(pf->link, e1, sizeof(e1)));
			}
		}
	} else if (m->type == MSG_FILES_ACK) {
		for (size_t i = 0; i < m->u.files_ack.count; i++) {
			const struct proto_status *st = &m->u.files_ack.st[i];
			fprintf(f, " %u=%s", st->id, proto_err_name(st->status));
			if (st->text && *st->text) {
				fprintf(f, "(%s)", esc(st->text, e1, sizeof(e1)));
			}
		}
	} else if (m->type == MSG_GET) {
		for (size_t i = 0; i < m->u.get.count; i++) {
			fprintf(f, " %s", esc(m->u.get.paths[i], e1, sizeof(e1)));
		}
	}
	fputs(suffix, f);
	fclose(f);
	say(p, "%s", line ? line : "?");
	free(line);
}
