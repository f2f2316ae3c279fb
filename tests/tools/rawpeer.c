/* SPDX-License-Identifier: MIT */
/*
 * rawpeer: a scriptable HOSTILE client for rdmacpd, for integration tests.
 * Built with the project's own library (TLS, channel, codec, the tcp and
 * verbs transports, hash), so every frame it sends is well formed unless a
 * step says otherwise, and every step can misbehave on purpose. The data
 * lanes are those OPEN_OK names: tcp, or verbs (RC QPs through rdma_cm; on
 * this project's machines only inside the Soft-RoCE VM, tests/rxe-vm), and
 * every data step works the same on both. Not a test itself: the scripts in
 * tests/integration drive it.
 *
 * usage: rawpeer [--host H] -P PORT --cert C --key K --ca CA [--source ADDR]
 *                [--timeout SECS] STEP...
 *
 *   --host H        daemon address (default 127.0.0.1); the TLS name checked too
 *   -P PORT         the daemon's control port
 *   --cert/--key    our client certificate and key (PEM); --ca verifies the daemon
 *   --source ADDR   connect the control connection from this local address
 *                   (the data lanes leave from the kernel's, or rdma_cm's,
 *                   choice: a verbs daemon takes lanes only from the control
 *                   connection's address)
 *   --timeout SECS  how long a step waits for an answer (default 10)
 *
 * The control connection (TCP + TLS 1.3) is made first and prints
 * "CONNECTED ..." or "CONNECT_FAILED ..."/"TLS_FAILED ..." (then only expect
 * steps run). Steps run in command-line order; each is a word and its
 * arguments. A step with optional arguments takes words until the next step
 * name (or a lone ";", which is dropped). Every step prints at least one line,
 * except the expect steps, which are silent when they hold.
 * Incoming messages print as:
 *   HELLO versions=1..1 caps=0xf software=...   ERROR PERMISSION text...
 *   OPEN_OK transport=tcp lanes=1 port=P chunk=1048576 slots=8 [sealed|clear]
 *   RING addr=0x... desc=0x... rkey=0x... nkeys=1 slots=8 chunk=1048576
 *   FILES 1:name:size:mode:type ...   FILES_ACK 1=OK 2=DUPLICATE(text)
 *   FILE_DONE 1 OK bytes=N hash=HEX text   FILE_RESULT 1 OK text
 *   END files=N bytes=N   PING nonce=N (answered)   PONG nonce=N
 *   LANE_DOWN lane=L count=N
 *   closed (close_notify) after S s   closed (EOF without close_notify) after S s
 * (To tell the two closes apart, expect "(close_notify)".) Data-path failures
 * print "DATA_ERROR lane=L STATUS: reason" once per lane and status (and
 * "DATA_ERROR transport: ..." once when the transport itself fails); chunk,
 * poke and write end with "placed" or "failed (IBV_WC_REM_ACCESS_ERR)" etc.
 * Numbers take 0x; a read step gives up after --timeout ("TIMEOUT ...").
 *
 * Steps:
 *   hello [MIN:MAX] [caps=N] [sw=TEXT]  send HELLO, print the answer
 *   ping [NONCE]                send PING, wait for PONG
 *   open push|pull PATH [dir] [recursive] [preserve] [owner] [dry] [lanes=N]
 *        [chunk=B] [slots=S] [transport=tcp|verbs|auto] [flags=N] [encrypt=W]
 *                               send OPEN, wait for OPEN_OK / END (dry) / ERROR;
 *                               defaults lanes=1 chunk=1048576 slots=8 tcp;
 *                               encrypt=W: the encrypt flag and wish W (1 prefer,
 *                               2 require; announce 0x20000 in hello)
 *   bench BYTES [lanes=N] [chunk=B] [slots=S] [encrypt=W]
 *                               send BENCH (seed 1, tcp), wait for OPEN_OK / ERROR
 *   lanes [token=HEX64] [nlanes=N] [replay] [v1]
 *                               connect the data lanes of OPEN_OK's transport
 *                               with its token (or another), register a local
 *                               buffer of two chunks, post receives for
 *                               credits; prints "LANES connected=N port=P
 *                               transport=tcp|verbs". Verbs lanes take the
 *                               WRITE + SEND path when the OPEN's flags= had
 *                               it (0x40000) and OPEN_OK's rails when it lists
 *                               them, as rdmacp does. With replay (lanes
 *                               already up): connect once more with the same
 *                               parameters and drop that connection. tcp lanes
 *                               OPEN_OK says are sealed take their keys as rdmacp
 *                               does (lane_seal_export: bound to the transfer when
 *                               both HELLOs have 0x40000000; else the connection's
 *                               first sealed transfer only, "SEAL_REFUSED" after);
 *                               v1: as a client from before transfer keys, the
 *                               connection's one v1 secret, every time
 *   drop-lanes                  close the data lanes and forget the transfer, so
 *                               that another open or bench may follow
 *   ring                        wait for RING and remember it
 *   files ID:NAME:SIZE[:MODE_OCTAL[:TYPE[:LINK]]]... [mtime=S] [uid=N] [gid=N]
 *                               one FILES batch; TYPE file|dir|symlink|hardlink; NAME and
 *                               LINK take \xNN escapes (\x3a is ':')
 *   ack                         wait for FILES_ACK
 *   chunk SLOT ID OFFSET LEN SRC [lane=L] [did=N] [dlen=N] [doff=N] [seq=N]
 *         [dres=N] [imm=N] [nodesc]
 *                               payload WRITE of LEN bytes of file SRC (or
 *                               fill=BYTE) from OFFSET (zero padded past its end)
 *                               into ring slot SLOT, then the descriptor
 *                               WRITE_WITH_IMM; d* override descriptor fields;
 *                               waits until both are placed (LEN, as for poke
 *                               and write, at most two chunks)
 *   poke SLOT OFFSET_IN_SLOT HEX|fill=BYTE:LEN [lane=L] [area=desc] [rkey=N|^N]
 *                               bare RDMA WRITE into a ring slot (or its
 *                               descriptor with area=desc): no descriptor, no imm
 *   write ADDR LEN [fill=BYTE] [rkey=N|^N] [lane=L] [imm=N]
 *                               a WRITE (WRITE_WITH_IMM with imm=) to any address
 *                               (ADDR in the RING's address space: the ring's
 *                               registration starts at its addr=)
 *                               rkey= (poke, write): that key; ^N: the RING's
 *                               key for the lane XOR N (a wrong key whatever
 *                               the daemon's are); default the RING's key
 *   credits                     print the slots we hold credits for
 *   done ID BYTES HASHSRC [status=CODE] [text=T]
 *                               FILE_DONE; HASHSRC is a file (XXH3-128 of all
 *                               of it) or hex=32HEX
 *   result                      wait for FILE_RESULT
 *   get PATH...                 GET (pull)
 *   end [FILES BYTES]           END (default: files offered so far, 0 bytes)
 *   bye                         BYE
 *   close                       TLS close_notify
 *   fin                         shutdown(SHUT_WR) without close_notify
 *   frame TYPE HEX|- [len=N] [magic=N] [version=N] [flags=N] [res8=N] [res16=N]
 *                               a frame with this payload (- = empty) and a
 *                               valid header unless a field is overridden
 *                               (TYPE a number or a name)
 *   raw HEX                     bytes straight into the TLS stream
 *   wait MSGTYPE|closed         read messages until that type (or ERROR, or the
 *                               close) arrives, printing each, answering PINGs
 *   idle SECS [nopong]          stay silent on the data path for SECS, printing
 *                               messages, answering PINGs unless nopong; stops
 *                               early when the daemon ends the session
 *   recv-all [nocredit] [result=CODE]
 *                               pull: send our RING, then receive: FILES
 *                               (acked OK), chunks (credits returned unless
 *                               nocredit), FILE_DONE (hash compared, FILE_RESULT
 *                               sent: OK/INTEGRITY or CODE), END (answered);
 *                               ends "RECV_ALL complete (END) files_ok=N ..."
 *   sleep SECS                  do nothing (nothing read, nothing answered)
 *   expect WORD                 fail unless the last printed line contains WORD
 *   expect-not WORD             fail if the last printed line contains WORD
 *   expect-seen WORD            fail unless some line so far contained WORD
 *
 * Exit: 0 every step ran and every expectation held; 1 an expectation failed
 * (the run stops there); 2 usage or setup error.
 *
 * In a test (after lib.sh's setup_standard; t_rawpeer.sh has more):
 *   RAWPEER=("$BUILD_DIR/tests/rawpeer" -P "$PORT" --cert "$T/certs/client.crt"
 *            --key "$T/certs/client.key" --ca "$T/certs/ca.crt")
 *   push:  "${RAWPEER[@]}" hello open push data/f lanes ring files 1:f:5 ack \
 *            chunk 0 1 0 5 "$SRC" "done" 1 5 "$SRC" result expect "1 OK" \
 *            end wait END bye close
 *   ("done" quoted only because shellcheck takes it for the keyword.)
 *   pull:  "${RAWPEER[@]}" hello open pull data/f lanes get data/f recv-all \
 *            expect "complete (END)" bye close
 * On verbs (inside the Soft-RoCE VM; tests/rxe-vm/hostile.sh has the attacks):
 *   --host 10.0.0.2 --source 10.0.0.1 ... open push data/f transport=verbs lanes \
 *            expect "transport=verbs" ring ... (the same steps from there)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "clock.h"
#include "hash.h"
#include "lane_seal.h"
#include "log.h"
#include "macro.h"
#include "net.h"
#include "proto/msg.h"
#include "proto/wire.h"
#include "tls.h"
#include "xport.h"

#define EXIT_EXPECT 1
#define EXIT_SETUP  2

#define DEFAULT_CHUNK (1u << 20)
#define DEFAULT_SLOTS 8
#define STAGE_BYTES   4096 /* the descriptor of a chunk is staged here */
#define LINE_MAX_LEN  8192

struct peer {
	/* options */
	const char *host, *cert, *key, *ca, *source;
	uint16_t port;
	int timeout_ms;

	/* control channel */
	struct tls_ctx *ctx;
	struct tls_conn *tls;
	struct chan chan;
	bool connected;
	bool closed;
	char closed_how[64];
	struct sockaddr_storage addr;
	socklen_t addrlen;
	uint64_t caps, peer_caps;  /* the HELLOs: ours, the daemon's */
	unsigned sealed_transfers; /* lane_seal_export's count */

	/* the transfer */
	bool have_ok;
	struct msg_open_ok ok;
	enum lane_seal_purpose purpose; /* what asked for ok: OPEN's direction, BENCH */
	uint32_t open_flags; /* the last OPEN's: WRITE_SEND picks the verbs lanes' path */
	struct xport *x;
	struct xport_mr *mr;
	uint8_t *buf; /* two chunks, then STAGE_BYTES */
	size_t buflen;
	uint32_t lane_errs[XPORT_MAX_LANES]; /* statuses already printed, as bits */
	bool poll_failed;		     /* poll_cq's own failure printed */
	bool have_ring;
	struct msg_ring ring;
	uint8_t credit[PROTO_MAX_SLOTS]; /* 1: we may write the slot */
	uint64_t credits_returned;
	uint64_t wr_id;
	uint64_t seq;
	uint32_t files_offered;
	uint8_t *rring; /* recv-all: our ring (registered until the end) */
	struct xport_mr *rmr;

	/* output */
	char last[LINE_MAX_LEN];
	char *seen;
	size_t seen_len, seen_cap;
};

struct step {
	const char *name;
	int min_args, max_args; /* max -1: any number */
	int (*fn)(struct peer *p, char **args, int nargs);
	bool needs_conn;
};

/* ---- output ------------------------------------------------------------- */

static void say(struct peer *p, const char *fmt, ...) _printf_(2, 3);
static void say(struct peer *p, const char *fmt, ...)
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

static int usage_error(const char *fmt, ...) _printf_(1, 2);
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rawpeer: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -EINVAL;
}

static int parse_u64(const char *s, uint64_t *ret)
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

static int parse_u32(const char *s, uint32_t *ret)
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
static int parse_hex(const char *s, uint8_t **ret, size_t *ret_len)
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
static int unescape(const char *in, char *out, size_t outlen)
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
static const char *opt_value(char **args, int nargs, const char *key)
{
	size_t kl = strlen(key);

	for (int i = 0; i < nargs; i++) {
		if (!strncmp(args[i], key, kl) && args[i][kl] == '=') {
			return args[i] + kl + 1;
		}
	}
	return NULL;
}

static bool has_word(char **args, int nargs, const char *word)
{
	for (int i = 0; i < nargs; i++) {
		if (!strcmp(args[i], word)) {
			return true;
		}
	}
	return false;
}

static int opt_u32(char **args, int nargs, const char *key, uint32_t def, uint32_t *ret)
{
	const char *v = opt_value(args, nargs, key);

	*ret = def;
	if (v && parse_u32(v, ret) < 0) {
		return usage_error("bad %s=%s", key, v);
	}
	return 0;
}

static int msg_type_by_name(const char *s, uint16_t *ret)
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

static int status_by_name(const char *s, uint32_t *ret)
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

static const char *transport_name(unsigned kind)
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

static void print_msg(struct peer *p, const struct msg *m, const char *suffix)
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

/* ---- the data path ----------------------------------------------------- */

static void lane_error(struct peer *p, const struct xport_wc *wc)
{
	const char *why;

	uint32_t bit = 1u << (wc->status & 31), *seen;

	if (wc->lane >= XPORT_MAX_LANES) {
		return;
	}
	/* Each status once per lane; flushes only when they are all we know. */
	seen = &p->lane_errs[wc->lane];
	if ((*seen & bit) || (wc->status == XPORT_WC_WR_FLUSH_ERR && *seen)) {
		return;
	}
	*seen |= bit;
	why = p->x->ops->last_error ? p->x->ops->last_error(p->x) : NULL;
	say(p, "DATA_ERROR lane=%u %s: %s", wc->lane, xport_wc_status_str(wc->status),
	    why ? why : "(no reason given)");
}

struct recv_state; /* recv-all's, when it runs */
static int recv_on_imm(struct peer *p, struct recv_state *rs, const struct xport_wc *wc);

/*
 * Drain the completion queue: credits are counted and their receive posted
 * again; failures print (see lane_error). *ret_done is set when want_id
 * completed: 1 placed, -status failed.
 */
static void drain_cq(struct peer *p, uint64_t want_id, int *ret_done, struct recv_state *rs)
{
	struct xport_wc wc[64];
	int n;

	if (!p->x) {
		return;
	}
	while ((n = p->x->ops->poll_cq(p->x, wc, ARRAY_SIZE(wc))) != 0) {
		if (n < 0) {
			/* The transport as a whole (verbs: a device event), said once. */
			if (!p->poll_failed) {
				const char *why =
				    p->x->ops->last_error ? p->x->ops->last_error(p->x) : NULL;
				p->poll_failed = true;
				say(p, "DATA_ERROR transport: %s (%s)", strerror(-n),
				    why ? why : "no reason given");
			}
			return;
		}
		for (int i = 0; i < n; i++) {
			if (wc[i].status != XPORT_WC_SUCCESS) {
				lane_error(p, &wc[i]);
				/* Errors complete every WR, signaled or not. */
				if (ret_done && wc[i].opcode != XPORT_WC_RECV_IMM &&
				    wc[i].wr_id == want_id) {
					*ret_done = -wc[i].status;
				}
				continue;
			}
			if (wc[i].opcode == XPORT_WC_WRITE) {
				if (ret_done && wc[i].wr_id == want_id) {
					*ret_done = 1;
				}
				continue;
			}
			uint64_t id = wc[i].lane;
			(void)p->x->ops->post_recvs(p->x, wc[i].lane, &id, 1);
			if (rs) {
				recv_on_imm(p, rs, &wc[i]);
				continue;
			}
			uint32_t kind = wc[i].imm >> PROTO_IMM_KIND_SHIFT;
			uint32_t slot = wc[i].imm & PROTO_IMM_SLOT_MASK;
			if (kind == PROTO_IMM_CREDIT && wc[i].len == 0 && slot < PROTO_MAX_SLOTS) {
				p->credit[slot] = 1;
				p->credits_returned++;
			} else {
				say(p, "IMM lane=%u imm=0x%08x len=%u (not a credit)", wc[i].lane,
				    wc[i].imm, wc[i].len);
			}
		}
	}
}

/*
 * Post WRs (the last one signaled) and wait until they are placed or fail.
 * Returns 0 (placed), a positive enum xport_wc_status, or -errno.
 */
static int post_and_wait(struct peer *p, struct xport_wr *wrs, size_t n)
{
	int64_t deadline = now_ms() + p->timeout_ms;
	int done = 0, r;

	for (size_t i = 0; i < n; i++) {
		wrs[i].wr_id = ++p->wr_id;
	}
	wrs[n - 1].flags |= XPORT_SEND_SIGNALED;
	r = p->x->ops->post_writes(p->x, wrs, n);
	if (r < 0) {
		say(p, "POST_FAILED %s", strerror(-r));
		return r;
	}
	while (!done) {
		int64_t left = deadline - now_ms();
		struct pollfd pfd = { .fd = p->x->ops->event_fd(p->x), .events = POLLIN };

		drain_cq(p, p->wr_id, &done, NULL);
		if (done) {
			break;
		}
		if (p->poll_failed) {
			return -EIO;
		}
		if (left <= 0) {
			say(p, "TIMEOUT waiting for the write to be placed");
			return -ETIMEDOUT;
		}
		poll(&pfd, 1, (int)MIN(left, 200));
	}
	return done > 0 ? 0 : -done;
}

/* How a post_and_wait ended, for the step's line. */
static const char *outcome(int r, char *buf, size_t len)
{
	if (r == 0) {
		snprintf(buf, len, "placed");
	} else if (r > 0) {
		snprintf(buf, len, "failed (%s)", xport_wc_status_str(r));
	} else {
		snprintf(buf, len, "failed (%s)", strerror(-r));
	}
	return buf;
}

/* ---- the control channel ----------------------------------------------- */

static void mark_closed(struct peer *p, const char *how, int64_t t0)
{
	p->closed = true;
	snprintf(p->closed_how, sizeof(p->closed_how), "%s", how);
	say(p, "closed (%s) after %.1f s", how, (double)(now_ms() - t0) / 1000.0);
}

static int send_msg(struct peer *p, const struct msg *m)
{
	int r = chan_send(&p->chan, m);

	if (r < 0) {
		say(p, "SEND_FAILED %s: %s", proto_type_name(m->type), strerror(-r));
	}
	return r;
}

/*
 * The next control message before deadline, answering nothing and
 * draining the data path meanwhile. 1: *m holds it; 0: deadline; -1: the
 * channel is closed or broken (a line was printed).
 */
static int next_msg(struct peer *p, int64_t deadline, int64_t t0, struct msg *m,
		    struct recv_state *rs)
{
	if (p->closed) {
		say(p, "closed (%s) earlier", p->closed_how);
		return -1;
	}
	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = tls_fd(p->tls), .events = POLLIN },
			{ .fd = p->x ? p->x->ops->event_fd(p->x) : -1, .events = POLLIN },
		};
		int64_t left = deadline - now_ms();
		int r;

		drain_cq(p, 0, NULL, rs);
		if (!chan_readable_now(&p->chan)) {
			if (left <= 0) {
				return 0;
			}
			poll(pfd, 2, (int)MIN(left, 200));
			if (!(pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    !chan_readable_now(&p->chan)) {
				continue;
			}
		}
		r = chan_recv(&p->chan, m, 100);
		if (r == -ETIMEDOUT) {
			continue; /* a record not complete yet */
		}
		if (r == -EPIPE) {
			mark_closed(p, "close_notify", t0);
			return -1;
		}
		if (r == -ECONNRESET) {
			mark_closed(p, "EOF without close_notify", t0);
			return -1;
		}
		if (r < 0) {
			say(p, "BAD_FRAME from the daemon: %s (type %u)", strerror(-r),
			    p->chan.bad_type);
			p->closed = true;
			snprintf(p->closed_how, sizeof(p->closed_how), "after a bad frame");
			return -1;
		}
		return 1;
	}
}

/* Print m; answer a PING when pong is set. */
static void handle_msg(struct peer *p, const struct msg *m, bool pong)
{
	if (m->type == MSG_PING && pong) {
		struct msg reply = { .type = MSG_PONG };
		reply.u.ping.nonce = m->u.ping.nonce;
		print_msg(p, m, chan_send(&p->chan, &reply) < 0 ? " (PONG failed)" : " (answered)");
		return;
	}
	print_msg(p, m, "");
}

#define TYPE_BIT(t) (1ull << (t))

/*
 * Read messages until one whose type is in want (or an ERROR) arrives,
 * printing each and answering PINGs. 1: it is in *ret (caller clears);
 * 0: timeout (printed); -1: closed.
 */
static int await(struct peer *p, uint64_t want, const char *what, struct msg *ret)
{
	int64_t t0 = now_ms(), deadline = t0 + p->timeout_ms;

	for (;;) {
		struct msg m;
		int r = next_msg(p, deadline, t0, &m, NULL);

		if (r == 0) {
			say(p, "TIMEOUT waiting for %s after %.1f s", what,
			    (double)(now_ms() - t0) / 1000.0);
			return 0;
		}
		if (r < 0) {
			return -1;
		}
		handle_msg(p, &m, true);
		if ((want & TYPE_BIT(m.type)) || m.type == MSG_ERROR) {
			*ret = m;
			return 1;
		}
		msg_clear(&m);
	}
}

static int await_print(struct peer *p, uint16_t type)
{
	struct msg m;

	if (await(p, TYPE_BIT(type), proto_type_name(type), &m) > 0) {
		msg_clear(&m);
	}
	return 0;
}

/* ---- connecting -------------------------------------------------------- */

static int connect_tcp(struct peer *p, int *ret_fd)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL, *src = NULL;
	char portstr[8];
	int r = -EHOSTUNREACH;

	snprintf(portstr, sizeof(portstr), "%u", p->port);
	if (getaddrinfo(p->host, portstr, &hints, &res) != 0) {
		return -ENOENT;
	}
	if (p->source && getaddrinfo(p->source, "0", &hints, &src) != 0) {
		freeaddrinfo(res);
		return -EADDRNOTAVAIL;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		_cleanup_close_ int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct timeval tv = { .tv_sec = p->timeout_ms / 1000 };

		if (fd < 0) {
			r = negerrno();
			continue;
		}
		if (src && bind(fd, src->ai_addr, src->ai_addrlen) < 0) {
			r = negerrno();
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			r = negerrno();
			continue;
		}
		memcpy(&p->addr, ai->ai_addr, ai->ai_addrlen);
		p->addrlen = ai->ai_addrlen;
		*ret_fd = TAKE_FD(fd);
		r = 0;
		break;
	}
	freeaddrinfo(res);
	if (src) {
		freeaddrinfo(src);
	}
	return r;
}

/* 0: connected, or the failure printed (only expect steps run); 1: setup error. */
static int connect_control(struct peer *p)
{
	struct tls_config tc = {
		.server = false, .cert_file = p->cert, .key_file = p->key, .ca_file = p->ca
	};
	char addr[128];
	int fd = -1, r;

	r = tls_ctx_new(&tc, &p->ctx);
	if (r < 0) {
		fprintf(stderr, "rawpeer: TLS setup: %s\n", tls_last_error());
		return 1;
	}
	r = connect_tcp(p, &fd);
	if (r < 0) {
		say(p, "CONNECT_FAILED %s port %u: %s", p->host, p->port, strerror(-r));
		return r;
	}
	r = tls_connect(p->ctx, fd, p->host, p->timeout_ms, &p->tls);
	if (r < 0) {
		say(p, "TLS_FAILED %s: %s", strerror(-r), tls_last_error());
		return r;
	}
	r = chan_init(&p->chan, p->tls, p->timeout_ms);
	if (r < 0) {
		return 1;
	}
	p->connected = true;
	say(p, "CONNECTED %s TLS 1.3 server CN=%s",
	    net_addr_str((struct sockaddr *)&p->addr, p->addrlen, addr, sizeof(addr)),
	    tls_peer_cn(p->tls));
	return 0;
}

/* ---- steps: handshake and requests ------------------------------------- */

static int step_hello(struct peer *p, char **args, int nargs)
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

static int step_ping(struct peer *p, char **args, int nargs)
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

static int step_open(struct peer *p, char **args, int nargs)
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
static int step_bench(struct peer *p, char **args, int nargs)
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
static void drop_transfer(struct peer *p)
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

static int step_drop_lanes(struct peer *p, char **args, int nargs)
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

static int step_lanes(struct peer *p, char **args, int nargs)
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

static int step_ring(struct peer *p, char **args, int nargs)
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

static int step_files(struct peer *p, char **args, int nargs)
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

static int step_ack(struct peer *p, char **args, int nargs)
{
	return await_print(p, MSG_FILES_ACK);
}

static int step_result(struct peer *p, char **args, int nargs)
{
	return await_print(p, MSG_FILE_RESULT);
}

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

static int step_chunk(struct peer *p, char **args, int nargs)
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

static int step_poke(struct peer *p, char **args, int nargs)
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

static int step_write(struct peer *p, char **args, int nargs)
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

static int step_credits(struct peer *p, char **args, int nargs)
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

static int step_done(struct peer *p, char **args, int nargs)
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

/* ---- steps: ending, raw frames, waiting --------------------------------- */

static int step_get(struct peer *p, char **args, int nargs)
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

static int step_end(struct peer *p, char **args, int nargs)
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

static int step_bye(struct peer *p, char **args, int nargs)
{
	struct msg m = { .type = MSG_BYE };

	if (send_msg(p, &m) >= 0) {
		say(p, "BYE sent");
	}
	return 0;
}

static int step_close(struct peer *p, char **args, int nargs)
{
	int r = tls_shutdown(p->tls, 1000);

	say(p, "CLOSE_NOTIFY sent%s", r < 0 ? " (the daemon's did not come back)" : "");
	return 0;
}

static int step_fin(struct peer *p, char **args, int nargs)
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

static int step_frame(struct peer *p, char **args, int nargs)
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

static int step_raw(struct peer *p, char **args, int nargs)
{
	_cleanup_free_ uint8_t *b = NULL;
	size_t n;

	if (parse_hex(args[0], &b, &n) < 0 || n == 0) {
		return usage_error("raw: bad hex");
	}
	return send_raw(p, b, n, "RAW");
}

static int step_wait(struct peer *p, char **args, int nargs)
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

static int parse_secs(const char *s, double *ret)
{
	char *end;

	*ret = strtod(s, &end);
	if (*end || *ret < 0 || *ret > 86400) {
		return usage_error("bad seconds %s", s);
	}
	return 0;
}

static int step_idle(struct peer *p, char **args, int nargs)
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

static int step_sleep(struct peer *p, char **args, int nargs)
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

static int step_expect(struct peer *p, char **args, int nargs)
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

static int step_expect_not(struct peer *p, char **args, int nargs)
{
	if (strstr(p->last, args[0])) {
		fprintf(stderr, "rawpeer: expectation failed: '%s' must not be in: %s\n", args[0],
			p->last);
		say(p, "EXPECT_FAILED not %s", args[0]);
		return EXIT_EXPECT;
	}
	return 0;
}

static int step_expect_seen(struct peer *p, char **args, int nargs)
{
	if (!p->seen || !strstr(p->seen, args[0])) {
		fprintf(stderr, "rawpeer: expectation failed: no line so far contains '%s'\n",
			args[0]);
		say(p, "EXPECT_FAILED seen %s", args[0]);
		return EXIT_EXPECT;
	}
	return 0;
}

/* ---- pull: receive everything ------------------------------------------ */

struct rfile {
	uint32_t id;
	uint64_t size, got, hash_off;
	struct file_hash h;
	bool live;
};

struct recv_state {
	uint8_t *ring; /* slots * chunk, then the descriptors */
	struct xport_mr *mr;
	uint32_t slots, chunk;
	struct rfile files[64];
	struct {
		bool held;
		uint32_t id, len, lane;
		uint64_t off;
	} held[PROTO_MAX_SLOTS]; /* chunks waiting for their turn in the hash */
	uint64_t chunks;
	uint32_t files_ok, files_bad;
	bool failed, got_end;
	/* hostile options */
	bool no_credit;	  /* never return a slot */
	bool have_result; /* answer every FILE_DONE with this status */
	uint32_t result;
};

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
static int recv_on_imm(struct peer *p, struct recv_state *rs, const struct xport_wc *wc)
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

static int step_recv_all(struct peer *p, char **args, int nargs)
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

/* ---- main --------------------------------------------------------------- */

static const struct step steps[] = {
	{ "hello", 0, 3, step_hello, true },
	{ "ping", 0, 1, step_ping, true },
	{ "open", 2, -1, step_open, true },
	{ "lanes", 0, 4, step_lanes, true },
	{ "drop-lanes", 0, 0, step_drop_lanes, true },
	{ "ring", 0, 0, step_ring, true },
	{ "bench", 1, -1, step_bench, true },
	{ "files", 1, -1, step_files, true },
	{ "ack", 0, 0, step_ack, true },
	{ "chunk", 5, -1, step_chunk, true },
	{ "poke", 3, -1, step_poke, true },
	{ "write", 2, -1, step_write, true },
	{ "credits", 0, 0, step_credits, true },
	{ "done", 3, -1, step_done, true },
	{ "result", 0, 0, step_result, true },
	{ "get", 1, -1, step_get, true },
	{ "end", 0, 2, step_end, true },
	{ "bye", 0, 0, step_bye, true },
	{ "close", 0, 0, step_close, true },
	{ "fin", 0, 0, step_fin, true },
	{ "frame", 2, -1, step_frame, true },
	{ "raw", 1, 1, step_raw, true },
	{ "wait", 1, 1, step_wait, true },
	{ "idle", 1, 2, step_idle, true },
	{ "recv-all", 0, 2, step_recv_all, true },
	{ "sleep", 1, 1, step_sleep, false },
	{ "expect", 1, 1, step_expect, false },
	{ "expect-not", 1, 1, step_expect_not, false },
	{ "expect-seen", 1, 1, step_expect_seen, false },
};

static const struct step *step_by_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		if (!strcmp(steps[i].name, name)) {
			return &steps[i];
		}
	}
	return NULL;
}

static void usage(FILE *f)
{
	/* The header comment of this file is the manual; this is its summary. */
	fputs("usage: rawpeer [--host H] -P PORT --cert C --key K --ca CA [--source ADDR]\n"
	      "               [--timeout SECS] STEP...\n"
	      "steps (see the top of tests/tools/rawpeer.c for details):\n"
	      "  hello [MIN:MAX] [caps=N] [sw=TEXT]    ping [NONCE]\n"
	      "  open push|pull PATH [dir] [recursive] [preserve] [owner] [dry] [lanes=N]\n"
	      "       [chunk=B] [slots=S] [transport=tcp|verbs|auto] [flags=N] [encrypt=W]\n"
	      "  bench BYTES [lanes=N] [chunk=B] [slots=S] [encrypt=W]\n"
	      "  lanes [token=HEX] [nlanes=N] [replay] [v1]    drop-lanes    ring\n"
	      "  files ID:NAME:SIZE[:MODE_OCTAL[:TYPE[:LINK]]]... [mtime=S] [uid=N] [gid=N]\n"
	      "  ack    result    credits\n"
	      "  chunk SLOT ID OFFSET LEN SRC|fill=BYTE [lane=L] [did=N] [dlen=N] [doff=N]\n"
	      "        [seq=N] [dres=N] [imm=N] [nodesc]\n"
	      "  poke SLOT OFFSET_IN_SLOT HEX|fill=BYTE:LEN [lane=L] [area=desc] [rkey=N|^N]\n"
	      "  write ADDR LEN [fill=BYTE] [rkey=N|^N] [lane=L] [imm=N]\n"
	      "  done ID BYTES FILE|hex=32HEX [status=CODE] [text=T]\n"
	      "  get PATH...   end [FILES BYTES]   bye   close   fin\n"
	      "  frame TYPE HEX|- [len=N] [magic=N] [version=N] [flags=N] [res8=N] [res16=N]\n"
	      "  raw HEX   wait MSGTYPE|closed   idle SECS [nopong]\n"
	      "  recv-all [nocredit] [result=CODE]   sleep SECS\n"
	      "  expect WORD   expect-not WORD   expect-seen WORD   (silent when they hold)\n"
	      "A step with optional arguments takes words up to the next step name or ';'.\n"
	      "Exit: 0 all steps ran and expectations held, 1 an expectation failed,\n"
	      "2 usage or setup error.\n",
	      f);
}

struct planned {
	const struct step *s;
	char **args;
	int nargs;
};

/* Split argv into steps. Returns the count or -EINVAL (printed). */
static int plan_steps(char **argv, int argc, struct planned *ret)
{
	int n = 0, i = 0;

	while (i < argc) {
		const struct step *s = step_by_name(argv[i]);
		int start, k;

		if (!strcmp(argv[i], ";")) {
			i++;
			continue;
		}
		if (!s) {
			return usage_error("unknown step '%s'", argv[i]);
		}
		start = ++i;
		for (k = 0; i < argc && (s->max_args < 0 || k < s->max_args); k++, i++) {
			if (k >= s->min_args && (step_by_name(argv[i]) || !strcmp(argv[i], ";"))) {
				break;
			}
		}
		if (k < s->min_args) {
			return usage_error("step '%s' needs %d argument(s)", s->name, s->min_args);
		}
		ret[n++] = (struct planned){ .s = s, .args = argv + start, .nargs = k };
	}
	return n;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'P' },
		{ "cert", required_argument, NULL, 'c' },
		{ "key", required_argument, NULL, 'k' },
		{ "ca", required_argument, NULL, 'a' },
		{ "source", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct peer p = { .host = "127.0.0.1", .timeout_ms = 10000 };
	_cleanup_free_ struct planned *plan = NULL;
	uint32_t v;
	int c, n, r, rc = 0;
	double secs;

	while ((c = getopt_long(argc, argv, "+H:P:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'H':
			p.host = optarg;
			break;
		case 'P':
			if (parse_u32(optarg, &v) < 0 || v == 0 || v > 65535) {
				usage_error("bad port %s", optarg);
				return EXIT_SETUP;
			}
			p.port = (uint16_t)v;
			break;
		case 'c':
			p.cert = optarg;
			break;
		case 'k':
			p.key = optarg;
			break;
		case 'a':
			p.ca = optarg;
			break;
		case 's':
			p.source = optarg;
			break;
		case 't':
			if (parse_secs(optarg, &secs) < 0 || secs <= 0) {
				return EXIT_SETUP;
			}
			p.timeout_ms = (int)(secs * 1000);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_SETUP;
		}
	}
	if (!p.port || !p.cert || !p.key || !p.ca || optind >= argc) {
		usage(stderr);
		return EXIT_SETUP;
	}
	plan = calloc((size_t)(argc - optind), sizeof(*plan));
	if (!plan) {
		return EXIT_SETUP;
	}
	n = plan_steps(argv + optind, argc - optind, plan);
	if (n < 0) {
		return EXIT_SETUP;
	}
	signal(SIGPIPE, SIG_IGN);
	if (connect_control(&p) > 0) {
		return EXIT_SETUP;
	}
	for (int i = 0; i < n && rc == 0; i++) {
		if (plan[i].s->needs_conn && !p.connected) {
			say(&p, "NOT_CONNECTED: cannot run '%s'", plan[i].s->name);
			rc = EXIT_SETUP;
			break;
		}
		r = plan[i].s->fn(&p, plan[i].args, plan[i].nargs);
		if (r < 0) {
			rc = EXIT_SETUP;
		} else if (r > 0) {
			rc = r;
		}
	}
	drop_transfer(&p);
	if (p.connected) {
		chan_done(&p.chan);
		tls_conn_free(p.tls);
	}
	if (p.ctx) {
		tls_ctx_free(p.ctx);
	}
	free(p.seen);
	return rc;
}
