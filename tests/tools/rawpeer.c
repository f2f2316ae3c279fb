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
#include "rawpeer.h"

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
