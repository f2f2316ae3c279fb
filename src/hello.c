/* SPDX-License-Identifier: MIT */
/* HELLO exchange and version negotiation (see hello.h, docs/PROTOCOL.md). */
#include "hello.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "macro.h"
#include "mwfence.h"

/*
 * Open files a process needs before it announces PROTO_CAP_WIDE_WINDOW and
 * PROTO_CAP_WIDER_WINDOW: a descriptor for each of PROTO_FILES_WIDER files in
 * flight, for each of their directories, and room for the rest.
 */
#define WIDE_WINDOW_NOFILE 16384
_Static_assert(2 * PROTO_FILES_WIDER + 2048 <= WIDE_WINDOW_NOFILE, "room for the wider window");

/* PROTO_CAP_MW_FENCE where this process's lane devices bind type-2 windows. */
static uint64_t windows_cap;

void hello_offer_windows(int windows)
{
	windows_cap = mwfence_offer(windows);
}

/* What hello_withhold holds back now. */
static uint64_t withheld_caps;

void hello_withhold(uint64_t caps, bool on)
{
	withheld_caps = on ? withheld_caps | caps : withheld_caps & ~caps;
}

uint64_t hello_local_caps(void)
{
	uint64_t caps = PROTO_CAP_TCP | PROTO_CAP_PULL | PROTO_CAP_TREES | PROTO_CAP_LIST |
			PROTO_CAP_ENTRY_FAILED | PROTO_CAP_SKIP | PROTO_CAP_FILTER |
			PROTO_CAP_PARTIAL | PROTO_CAP_DELETE | PROTO_CAP_CHECK |
			PROTO_CAP_HARDLINKS | PROTO_CAP_XATTRS | PROTO_CAP_PROBE | PROTO_CAP_ZEROS |
			PROTO_CAP_DEVICES | PROTO_CAP_BENCH | PROTO_CAP_ENCRYPT | PROTO_CAP_DELTA |
			PROTO_CAP_PACK | PROTO_CAP_ASSUME_ZERO | PROTO_CAP_BENCH_SEAL |
			PROTO_CAP_VERBS_SEAL | PROTO_CAP_ASSEMBLE | PROTO_CAP_DELTA_TREE |
			PROTO_CAP_RAILS | PROTO_CAP_TRANSFER_KEYS | PROTO_CAP_ITEMIZE |
			PROTO_CAP_LIST_OWNERS | PROTO_CAP_LIST_ATTRS | PROTO_CAP_UNAVAILABLE |
			PROTO_CAP_SEAL_SUITES | PROTO_CAP_SLOT_SUITES | PROTO_CAP_ASM_DISCARD |
			PROTO_CAP_ASM_SEED | PROTO_CAP_KEPT_ITEMS | PROTO_CAP_FILE_TREE |
			PROTO_CAP_DIR_ITEMS | PROTO_CAP_LINKED_FILES;
	const char *off = getenv("RDMACP_TEST_CAPS_OFF");
	struct rlimit rl;

	/*
	 * A receiver holds a descriptor for each file in flight and its
	 * directory: it takes the wide windows only where its limit (raised to
	 * the hard one at start) leaves room for that many.
	 */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= WIDE_WINDOW_NOFILE) {
		caps |= PROTO_CAP_WIDE_WINDOW | PROTO_CAP_WIDER_WINDOW;
	}
#ifdef HAVE_VERBS
	caps |= PROTO_CAP_VERBS | PROTO_CAP_WRITE_SEND | PROTO_CAP_DAEMON_RAILS |
		PROTO_CAP_RAILS_ONLY | windows_cap;
#endif
	caps &= ~withheld_caps;
	/* Test hook: play a peer from before a feature; only removes bits. */
	if (off && *off) {
		caps &= ~(uint64_t)strtoull(off, NULL, 0);
	}
	return caps;
}

uint64_t hello_daemon_caps(void)
{
	const char *off = getenv("RDMACP_TEST_CAPS_OFF");
	uint64_t caps = hello_local_caps() | PROTO_CAP_RELAY | PROTO_CAP_RELAY_TREE;

	if (off && *off) {
		caps &= ~(uint64_t)strtoull(off, NULL, 0);
	}
	return caps;
}

/*
 * Versions we offer. The environment override exists so that the test suite
 * can play a peer from the future; it can only narrow what we speak to one
 * number, never widen what we accept from the peer.
 */
static void local_versions(uint16_t *ret_min, uint16_t *ret_max)
{
	const char *e = getenv("RDMACP_TEST_PROTO_VERSION");

	*ret_min = PROTO_VERSION_MIN;
	*ret_max = PROTO_VERSION;
	if (e && *e) {
		long v = strtol(e, NULL, 10);
		if (v > 0 && v < 65536) {
			*ret_min = *ret_max = (uint16_t)v;
		}
	}
}

static void fill_hello(struct msg *m)
{
	m->type = MSG_HELLO;
	local_versions(&m->u.hello.min_version, &m->u.hello.max_version);
	m->u.hello.caps = hello_local_caps();
	snprintf(m->u.hello.software, sizeof(m->u.hello.software), "rdmacp %s", RDMACP_VERSION);
}

/* Highest version both ranges contain, or 0. */
static uint16_t pick_version(const struct msg_hello *a, const struct msg_hello *b)
{
	uint16_t hi = MIN(a->max_version, b->max_version);
	uint16_t lo = MAX(a->min_version, b->min_version);

	return hi >= lo ? hi : 0;
}

int hello_client(struct chan *c, int timeout_ms, struct msg_hello *ret_peer, uint32_t *ret_code,
		 char *errtext, size_t errlen)
{
	struct msg out = { 0 }, in;
	uint16_t v;
	int r;

	fill_hello(&out);
	r = chan_send(c, &out);
	if (r < 0) {
		return r;
	}
	r = chan_recv(c, &in, timeout_ms);
	if (r < 0) {
		return r;
	}
	if (in.type == MSG_ERROR) {
		*ret_code = in.u.error.code;
		snprintf(errtext, errlen, "%s", in.u.error.text);
		return in.u.error.code == PERR_VERSION ? -EPROTONOSUPPORT : -EREMOTEIO;
	}
	if (in.type != MSG_HELLO) {
		snprintf(errtext, errlen, "expected HELLO, got %s", proto_type_name(in.type));
		msg_clear(&in);
		return -EBADMSG;
	}
	v = pick_version(&out.u.hello, &in.u.hello);
	if (v == 0) {
		snprintf(errtext, errlen,
			 "protocol version mismatch: we speak %u..%u, the daemon %u..%u",
			 out.u.hello.min_version, out.u.hello.max_version, in.u.hello.min_version,
			 in.u.hello.max_version);
		return -EPROTONOSUPPORT;
	}
	*ret_peer = in.u.hello;
	return v;
}

int hello_server(struct chan *c, int timeout_ms, struct msg_hello *ret_peer, char *errtext,
		 size_t errlen)
{
	struct msg out = { 0 }, in;
	uint16_t v;
	int r;

	r = chan_recv(c, &in, timeout_ms);
	if (r == -EPROTONOSUPPORT) {
		snprintf(errtext, errlen, "peer speaks an unknown header version");
		chan_send_error(c, PERR_VERSION, "protocol version mismatch: daemon speaks %u..%u",
				PROTO_VERSION_MIN, PROTO_VERSION);
		return r;
	}
	if (r < 0) {
		snprintf(errtext, errlen, "bad HELLO: %s", strerror(-r));
		if (r != -ECONNRESET && r != -EPIPE && r != -ETIMEDOUT) {
			chan_send_error(c, chan_err_code(r), "malformed message");
		}
		return r;
	}
	if (in.type != MSG_HELLO) {
		snprintf(errtext, errlen, "expected HELLO, got %s", proto_type_name(in.type));
		chan_send_error(c, PERR_PROTOCOL, "expected HELLO, got %s",
				proto_type_name(in.type));
		msg_clear(&in);
		return -EBADMSG;
	}
	fill_hello(&out);
	out.u.hello.caps = hello_daemon_caps();
	v = pick_version(&out.u.hello, &in.u.hello);
	if (v == 0) {
		snprintf(errtext, errlen, "protocol version mismatch: client speaks %u..%u",
			 in.u.hello.min_version, in.u.hello.max_version);
		chan_send_error(c, PERR_VERSION,
				"protocol version mismatch: daemon speaks %u..%u, client %u..%u",
				out.u.hello.min_version, out.u.hello.max_version,
				in.u.hello.min_version, in.u.hello.max_version);
		return -EPROTONOSUPPORT;
	}
	r = chan_send(c, &out);
	if (r < 0) {
		return r;
	}
	*ret_peer = in.u.hello;
	return v;
}
