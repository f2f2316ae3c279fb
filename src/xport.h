/* SPDX-License-Identifier: MIT */
/*
 * The transport interface: a const ops table shaped like RC verbs.
 *
 * One `struct xport` is one data connection of one session: a set of lanes
 * (TCP connections for xport_tcp, RC QPs for xport_verbs, possibly on several
 * devices). Semantics are RC's:
 *   - work requests on one lane complete in order, and their effects land in
 *     order at the peer;
 *   - an immediate is delivered (RECV_IMM completion) only after the data of
 *     its WRITE_WITH_IMM, and of every earlier write on that lane, is placed;
 *   - a write outside a registration or with a wrong rkey is a remote access
 *     error: the target memory is untouched, the lane fails (requester gets
 *     XPORT_WC_REM_ACCESS_ERR, later requests and posted receives are flushed
 *     with XPORT_WC_WR_FLUSH_ERR on both sides);
 *   - registrations are zero-based: the peer addresses a registration from
 *     its iova (0 for both backends), never by our virtual address, so
 *     nothing about our address space leaves the process.
 * A signaled write completion means that write and every earlier write on its
 * lane are done and their local buffers may be reused.
 *
 * All functions return >= 0 on success, -errno on failure, and never log above
 * debug. A backend embeds `struct xport` and gets back with container_of.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define XPORT_TOKEN_LEN	      32
#define XPORT_MAX_LANES	      16
#define XPORT_SEAL_SECRET_LEN 32
/* Memory windows per registration (one per ring slot: PROTO_MAX_SLOTS). */
#define XPORT_MAX_WINDOWS 4096

enum xport_kind {
	XPORT_KIND_TCP = 1,
	XPORT_KIND_VERBS = 2,
};

/* Access flags for reg_mr. REMOTE_WRITE is the only remote access that exists. */
enum {
	XPORT_ACCESS_LOCAL = 1u << 0,
	XPORT_ACCESS_REMOTE_WRITE = 1u << 1,
	/*
	 * xport.windows only: the peer writes only through windows opened
	 * over it (window_open); the registration's own rkey grants nothing
	 * (0). With REMOTE_WRITE instead, windows would fence nothing.
	 */
	XPORT_ACCESS_WINDOWS = 1u << 2,
};

/*
 * Lanes may sit on different devices (rails), each with its own protection
 * domain: a registration then has one key pair per lane. lkey/rkey are lane
 * 0's; the lane_ keys are filled for every lane of the xport (all equal where
 * the lanes share one domain).
 */
struct xport_mr {
	void *addr;    /* start of the registered range, in this process */
	uint64_t iova; /* the address the peer uses for addr (0: zero-based) */
	uint64_t len;
	uint32_t lkey;
	uint32_t rkey; /* 0 unless XPORT_ACCESS_REMOTE_WRITE */
	unsigned access;
	uint32_t lane_lkey[XPORT_MAX_LANES];
	uint32_t lane_rkey[XPORT_MAX_LANES]; /* 0 unless XPORT_ACCESS_REMOTE_WRITE */
};

enum xport_wr_opcode {
	XPORT_OP_WRITE = 1,
	XPORT_OP_WRITE_IMM = 2,
};

enum {
	XPORT_SEND_SIGNALED = 1u << 0,
	XPORT_SEND_INLINE = 1u << 1, /* hint: tiny payload, copy at post time */
};

struct xport_wr {
	uint64_t wr_id;
	uint32_t opcode;	   /* enum xport_wr_opcode */
	uint32_t flags;		   /* XPORT_SEND_* */
	const struct xport_mr *mr; /* local registration holding buf; NULL when len == 0 */
	const void *buf;
	uint32_t len;	      /* 0 allowed (immediate only) */
	uint32_t imm;	      /* for WRITE_IMM, host order */
	uint64_t remote_addr; /* peer address inside the peer's registration */
	uint32_t rkey;
	uint32_t lane; /* < xport->nlanes */
	/*
	 * WRITE_IMM on an xport with windows (xport.windows): the key of the
	 * peer's window this request closes, as it is delivered (SEND with
	 * invalidate). 0: none.
	 */
	uint32_t inv_rkey;
	/*
	 * A WRITE_IMM of no bytes on an xport with windows: the key of a window
	 * of ours it hands the peer (window_open's: a credit), carried where a
	 * request with bytes carries its length, so the peer's RECV_IMM has it
	 * as len. 0: none. Refused elsewhere (tcp has no windows).
	 */
	uint32_t key;
};

enum xport_wc_opcode {
	XPORT_WC_WRITE = 1,    /* a signaled WRITE or WRITE_IMM of ours finished */
	XPORT_WC_RECV_IMM = 2, /* the peer's WRITE_IMM arrived; imm and len valid */
};

enum xport_wc_status {
	XPORT_WC_SUCCESS = 0,
	XPORT_WC_LOC_PROT_ERR,	 /* local buffer not inside the given MR */
	XPORT_WC_REM_ACCESS_ERR, /* peer refused: bad rkey or range */
	XPORT_WC_RNR_ERR,	 /* peer had no receive posted */
	XPORT_WC_WR_FLUSH_ERR,	 /* lane failed; request or receive flushed */
	XPORT_WC_RETRY_EXC_ERR,	 /* peer unreachable / connection lost */
	XPORT_WC_GENERAL_ERR,
};

struct xport_wc {
	uint64_t wr_id;
	int status;	 /* enum xport_wc_status */
	uint32_t opcode; /* enum xport_wc_opcode */
	uint32_t imm;	 /* RECV_IMM: host order */
	uint32_t len;	 /* RECV_IMM: bytes placed by the WRITE_IMM (windows: or its key) */
	uint32_t lane;
	/*
	 * RECV_IMM on an xport with windows: the peer's request closed our
	 * window inv_rkey (the hardware did, before the completion came). A
	 * request that closed none has invalidated false.
	 */
	bool invalidated;
	uint32_t inv_rkey;
};

/* The wr_id of a window operation's completion (only an error one ever comes back). */
#define XPORT_WR_ID_WINDOW UINT64_MAX

/*
 * May the receiver take what a RECV_IMM completion announces as the
 * content of the window it opened under key want? Only when that request
 * closed exactly that window: then no write of the peer's can reach it any
 * more. Every path that accepts a fenced slot asks this, nothing else.
 */
static inline bool xport_wc_closed_window(const struct xport_wc *wc, uint32_t want)
{
	return wc->status == XPORT_WC_SUCCESS && wc->opcode == XPORT_WC_RECV_IMM &&
	       wc->invalidated && wc->inv_rkey == want;
}

struct xport_params {
	unsigned nlanes;		/* 1..XPORT_MAX_LANES */
	unsigned sq_depth;		/* outstanding send WRs per lane (>= 2) */
	unsigned rq_depth;		/* posted receives per lane */
	int timeout_ms;			/* connect/accept deadline */
	uint8_t token[XPORT_TOKEN_LEN]; /* one-time session token from the control channel */
	/*
	 * Active side of verbs only (rails): lane i leaves from device
	 * devices[i % ndevices], each NAME or NAME:PORT (rdmadev_spec_parse).
	 * 0 = the device the route to the peer picks.
	 */
	const char *devices[XPORT_MAX_LANES];
	unsigned ndevices;
	/*
	 * Active side of verbs only. gid_index_set (with devices): each lane
	 * leaves from the address of GID gid_index of its device's port (port
	 * 1 where none is named), and fails unless rdma_cm gives it that GID.
	 * roce_version (1 or 2; 0: any): a lane on RoCE fails unless its GID is
	 * of that version. rdma_cm takes the port's default RoCE mode: these
	 * are checked, they can't make rdma_cm choose otherwise.
	 */
	bool gid_index_set;
	uint16_t gid_index;
	uint8_t roce_version;
	/*
	 * Optional (NULL: none): where a failed connect or accept leaves why,
	 * the xport's last error (a lane's GID, its device), which dies with it.
	 */
	char *error_buf;
	size_t error_len;
	/*
	 * Active side of verbs only (daemon rails): lane i connects to rails[i %
	 * (1 + nrails) - 1], or to connect's addr where that is -1 (i % (1 +
	 * nrails) == 0). Each is a full address, port included. rails_only
	 * (the daemon's control address takes no lanes): lane i connects to
	 * rails[i % nrails], never to connect's addr.
	 */
	struct sockaddr_storage rails[XPORT_MAX_LANES - 1];
	unsigned nrails;
	bool rails_only;
	/*
	 * The caller polls the CQ every turn (--poll) instead of waiting for
	 * event_fd: verbs then does not re-arm completion notification.
	 */
	bool busy_poll;
	/*
	 * Verbs, each used when its _set is true (else the system's): the
	 * lanes' IP TOS byte (active side: rdma_cm's RDMA_OPTION_ID_TOS, set
	 * before the route is resolved; passive side: the accepted QPs' traffic
	 * class, which otherwise follows the connection request) and, active
	 * side only, the local ACK timeout (IB encoding, 4.096 us << n).
	 */
	bool tos_set, ack_timeout_set;
	uint8_t tos, ack_timeout;
	/*
	 * Seal every frame of every lane (tcp only; verbs refuses with
	 * -EOPNOTSUPP): the AEAD seal_suite names (enum lane_seal_suite; 0 is
	 * AES-256-GCM) under keys derived from seal_secret, which both ends
	 * export from their TLS control channel (src/lane_seal.h).
	 */
	bool seal;
	uint8_t seal_suite;
	uint8_t seal_secret[XPORT_SEAL_SECRET_LEN];
	/*
	 * Passive side of verbs: when peer_set, only lanes whose source IP is
	 * peer's (the control connection's client; port ignored, ::ffff:a.b.c.d
	 * equal to a.b.c.d) are accepted; others are rejected at connect time
	 * like a wrong token, and accept goes on waiting. The token travels in
	 * clear in the CM request: this keeps a host that saw it from using it.
	 */
	bool peer_set;
	struct sockaddr_storage peer;
	/*
	 * Verbs: carry each WRITE_IMM as an RDMA WRITE of its bytes and then a
	 * SEND of its immediate and length (the WRITE + SEND path), for devices
	 * without immediate data (iWARP). Both ends must agree (the control
	 * channel negotiates it): the lanes' first messages differ.
	 */
	bool write_send;
	/*
	 * Verbs: memory windows (xport.windows, window_open): remotely
	 * writable registrations may be bound by type-2 windows, and a
	 * WRITE_IMM may close one of the peer's (inv_rkey). Rides the WRITE +
	 * SEND path (implies write_send: an immediate cannot invalidate, a
	 * SEND can). Both ends must agree, as for write_send. connect and
	 * accept fail with -EOPNOTSUPP where a lane's device has no type-2
	 * windows.
	 */
	bool windows;
	/* Test hooks, tcp only, set by the programs from the environment (tests). */
	unsigned test_tamper; /* XPORT_TEST_TAMPER_*: spoil one frame we send */
	/*
	 * Test hook, verbs only: 1 + the lane whose QP fails as on a fatal
	 * async event (QP_FATAL) once 64 completions were polled; 0: none.
	 */
	unsigned test_qp_fatal;
	const char *test_tee_path; /* append every byte our lanes send to this file */
};

/* How test_tamper spoils the first payload write (op WRITE, len > 0) on lane 0. */
enum {
	XPORT_TEST_TAMPER_NONE = 0,
	XPORT_TEST_TAMPER_FLIP = 1,	/* one ciphertext bit flipped */
	XPORT_TEST_TAMPER_REPLAY = 2,	/* sent twice, byte for byte */
	XPORT_TEST_TAMPER_MOVE = 3,	/* header aimed one payload length further */
	XPORT_TEST_TAMPER_TRUNCATE = 4, /* header and payload cut to half, tag kept */
	/*
	 * Lane 0 goes silent at that write, sealed or clear: nothing more is
	 * sent on it (ACKs included), so nothing of ours or the peer's
	 * completes there, and nothing fails: a dead link no one reports.
	 */
	XPORT_TEST_TAMPER_STALL = 5,
};

/*
 * Queue depths for an engine whose receiver ring has `slots` slots: room for
 * several send WRs per slot in flight (writes, immediates, credits) and some
 * spare; one posted receive per slot. Both peers size their lanes with this.
 */
static inline void xport_params_set_slots(struct xport_params *p, unsigned slots)
{
	p->sq_depth = 4 * slots + 16;
	p->rq_depth = slots;
}

struct xport;
struct xport_listener;

struct xport_ops {
	const char *name;
	enum xport_kind kind;
	/*
	 * Passive side. listen binds `addr` (port 0 = ephemeral) and reports the
	 * bound port; accept waits up to p->timeout_ms for p->nlanes lanes that
	 * present p->token, dropping any that present something else (before a
	 * byte of theirs is placed). Each lane index is accepted once; the token
	 * is dead once all lanes are in. tos: the IP TOS byte of the lanes it
	 * accepts (-1: the system's); verbs sets it on its listening ids, which
	 * iWARP connections take it from (accept's p->tos does the rest, on
	 * RoCE), tcp ignores it.
	 */
	int (*listen)(const struct sockaddr *addr, socklen_t addrlen, int tos,
		      struct xport_listener **ret_listener, uint16_t *ret_port);
	/*
	 * Optional (NULL: the backend cannot; daemon rails then stay off): the
	 * listener also takes lanes on addr (another device's address; port 0
	 * = ephemeral), reported in *ret_port. accept then takes each lane on
	 * any of the listener's addresses, and the lanes may sit on several
	 * devices.
	 */
	int (*listen_rail)(struct xport_listener *l, const struct sockaddr *addr, socklen_t addrlen,
			   uint16_t *ret_port);
	int (*accept)(struct xport_listener *l, const struct xport_params *p, struct xport **ret);
	void (*listener_close)(struct xport_listener *l);
	/* Active side: connect p->nlanes lanes presenting p->token. */
	int (*connect)(const struct sockaddr *addr, socklen_t addrlen, const struct xport_params *p,
		       struct xport **ret);

	int (*reg_mr)(struct xport *x, void *addr, size_t len, unsigned access,
		      struct xport_mr **ret_mr);
	/* Revokes the rkey: later peer writes to it are remote access errors. */
	int (*dereg_mr)(struct xport *x, struct xport_mr *mr);
	/*
	 * Optional (NULL: the backend cannot): fence [offset, offset+len) of a
	 * remotely writable registration (offset from its start). While fenced,
	 * a peer write touching the range is a remote access error: memory
	 * untouched, lane failed. When fence(on) returns, no write into the
	 * range is in progress or can start, so the bytes there only change
	 * by our own hand. A write already being placed there when the fence
	 * goes on is cut off (its lane fails); -EIO then, the fence stays.
	 * -EEXIST when exactly this range is fenced already. Unfencing takes
	 * exactly a range that was fenced (-ENOENT otherwise).
	 */
	int (*fence)(struct xport *x, struct xport_mr *mr, uint64_t offset, uint64_t len, bool on);
	/*
	 * Optional (NULL, or xport.windows false: none): the zero-copy fence of
	 * verbs. window_open opens window idx (< XPORT_MAX_WINDOWS) of
	 * registration mr (XPORT_ACCESS_WINDOWS) over [offset, offset+len) for the peer's
	 * writes on lane only, under a fresh key (*ret_rkey, never one it had
	 * before, for 255 openings). Posted on lane's send queue: in effect
	 * before anything posted on lane after it is sent. The peer's writes
	 * there with that key land until a request of the peer's closes it
	 * (inv_rkey; our completion says so: xport_wc_closed_window), after
	 * which they are remote access errors. The window must be closed (new,
	 * closed by the peer, or by window_close), else the lane fails.
	 * window_close closes it from our side: posted on lane while it is up;
	 * when lane (the one it was opened on) is lost, the window goes with it
	 * at once (its key refused from then, on every lane), so it can be
	 * opened on another. Errors of either come back as a completion with
	 * wr_id XPORT_WR_ID_WINDOW.
	 */
	int (*window_open)(struct xport *x, struct xport_mr *mr, uint32_t idx, unsigned lane,
			   uint64_t offset, uint64_t len, uint32_t *ret_rkey);
	int (*window_close)(struct xport *x, struct xport_mr *mr, uint32_t idx, unsigned lane);

	/*
	 * Optional (NULL: nothing to wait for): stop the lanes before memory
	 * they use goes (teardown). Every lane is put in error, and once it
	 * returns no work request of ours is in flight and no peer write is
	 * being placed, so any registration may be deregistered and freed.
	 * Bounded in time: -ETIMEDOUT when the flush did not all come back (it
	 * goes on regardless: destroy still stops the lanes before freeing).
	 * Later posts fail (-ESHUTDOWN), polls return 0.
	 */
	int (*quiesce)(struct xport *x);

	/*
	 * Optional (NULL: the backend cannot; rails then fail the session):
	 * take one lane down as if its connection were lost, the others left
	 * as they are. When it returns the lane places nothing more of the
	 * peer's and completes nothing more successfully; its posted work
	 * comes back in error (flushed, at least one completion when
	 * anything was posted), and the peer's side of it fails too (tcp at
	 * once; verbs at the peer's next request on it). Tests use it to kill
	 * a lane; the engine to stop one its peer has lost (rails).
	 */
	int (*lane_down)(struct xport *x, unsigned lane);

	/* -ENOSPC when a lane's send queue is full; nothing posted then. */
	int (*post_writes)(struct xport *x, const struct xport_wr *wrs, size_t n);
	/* Post zero-length receives for immediates on one lane. */
	int (*post_recvs)(struct xport *x, unsigned lane, const uint64_t *wr_ids, size_t n);
	/* Returns the number of completions written (0 = none now). */
	int (*poll_cq)(struct xport *x, struct xport_wc *wcs, size_t max);
	/*
	 * A file descriptor that becomes readable when completions may be
	 * waiting. After it is readable the caller drains with poll_cq until it
	 * returns 0; the backend re-arms itself.
	 */
	int (*event_fd)(struct xport *x);
	/*
	 * Optional (NULL = unknown): the NUMA node of the device lane 0 is on,
	 * or -1 when it reports none. Buffers placed there save a hop.
	 */
	int (*numa_node)(struct xport *x);
	/* Human-readable reason for the last lane failure, or NULL. */
	const char *(*last_error)(struct xport *x);
	void (*destroy)(struct xport *x);
};

struct xport {
	const struct xport_ops *ops;
	unsigned nlanes;
	unsigned sq_depth;
	unsigned rq_depth;
	uint32_t max_inline; /* bytes XPORT_SEND_INLINE may carry */
	bool windows;	     /* xport_params.windows granted: window_open, inv_rkey */
};

/*
 * What the programs say, once per session, of verbs lanes whose device took
 * no inline data (max_inline 0: its queue pairs were made without).
 */
#define XPORT_NO_INLINE_NOTE                                                            \
	"verbs lanes without inline data (the device refused it): each descriptor and " \
	"credit is fetched by DMA, a little more latency per chunk"

extern const struct xport_ops xport_tcp_ops;
#ifdef HAVE_VERBS
extern const struct xport_ops xport_verbs_ops;
#endif

/*
 * Is there an RDMA device here? Returns the number of devices (> 0), or
 * -ENODEV / -errno with the reason in why ("ibv_get_device_list: Function
 * not implemented", "built without verbs", ...).
 */
int xport_verbs_probe(char *why, size_t whylen);

/*
 * How a verbs xport carries an immediate: RDMA WRITE WITH IMMEDIATE
 * (InfiniBand, RoCE), or an RDMA WRITE then a SEND holding the immediate and
 * length (iWARP has no immediate data). Same semantics above the transport.
 */
enum xport_verbs_path {
	XPORT_PATH_WRITE_IMM = 1,
	XPORT_PATH_WRITE_SEND = 2,
};

/* "write_imm", "write_send" (as the --json start event and doctor say it), "-" otherwise. */
const char *xport_path_name(int path);

/*
 * The path this host's verbs lanes need: those of the named devices
 * (ndevices > 0: rails, WRITE + SEND if any one needs it), else of the RDMA
 * device that holds the address `local` (the control connection's own:
 * what rdma_cm binds lanes to). force_send (a test switch) asks for WRITE +
 * SEND on any device. Returns XPORT_PATH_*, or -errno with the reason in
 * why: -ENODEV when no RDMA device holds the address, -EOPNOTSUPP for a
 * device whose transport can do neither (why says which).
 */
int xport_verbs_path(const struct sockaddr *local, const char *const *devices, unsigned ndevices,
		     bool force_send, char *why, size_t whylen);

/*
 * Can this host's verbs lanes fence slots by memory windows
 * (xport_params.windows)? The same devices as xport_verbs_path: 1 when
 * every one binds type-2 windows, 0 when one does not (why names it),
 * -errno (-ENODEV: no RDMA device holds the address) with why.
 */
int xport_verbs_windows(const struct sockaddr *local, const char *const *devices, unsigned ndevices,
			char *why, size_t whylen);

/* [addr, addr+len) inside [base, base+mlen), without overflow. */
static inline bool xport_range_inside(uint64_t base, uint64_t mlen, uint64_t addr, uint64_t len)
{
	return addr >= base && len <= mlen && addr - base <= mlen - len;
}

/*
 * What every backend checks in a work request before anything else: lane,
 * opcode, flags, a buffer when there are bytes. Returns -EINVAL, 1 when
 * nothing more needs checking (no payload), 0 when the backend must check
 * the local buffer (inline size, registration).
 */
int xport_wr_check_common(const struct xport_wr *w, unsigned nlanes);

/*
 * The tests' lane hooks from the environment: tamper_env names one of
 * flip, replay, move, truncate (XPORT_TEST_TAMPER_*), tee_env a file.
 * Unset (as outside the tests), nothing changes.
 */
void xport_test_hooks(struct xport_params *p, const char *tamper_env, const char *tee_env);

/* "IBV_WC_REM_ACCESS_ERR"-style names, for messages. */
const char *xport_wc_status_str(int status);
/*
 * Do a and b name the same IP address (ports ignored)? An IPv4-mapped IPv6
 * address (::ffff:a.b.c.d) equals the IPv4 one; anything but AF_INET and
 * AF_INET6 is never equal.
 */
bool xport_same_ip(const struct sockaddr *a, const struct sockaddr *b);

/* Backend by kind, or NULL when not built. */
const struct xport_ops *xport_ops_by_kind(enum xport_kind kind);
const struct xport_ops *xport_ops_by_name(const char *name);
