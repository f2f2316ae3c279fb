/* SPDX-License-Identifier: MIT */
/*
 * The verbs transport's memory windows (xport.windows, src/xport_verbs/mw.c)
 * against a real RDMA device: the zero-copy slot fence. The receiver
 * registers its target XPORT_ACCESS_WINDOWS (its own rkey grants nothing),
 * opens a slot's window and a descriptor window on a lane; the sender writes
 * the slot through the window key and sends the descriptor as WRITE + SEND
 * WITH INVALIDATE naming the slot's key. Checked:
 *   - the bytes land exactly and the receive completion says the slot's
 *     window was closed, by exactly its key (xport_wc_closed_window);
 *   - a late write into the slot with that key is IBV_WC_REM_ACCESS_ERR at
 *     the sender and the slot's bytes are unchanged;
 *   - a window opened again has a new key, and a write with the old key is
 *     refused; the new key works;
 *   - a window is the lane's: a write with its key on another lane is
 *     refused (type-2 windows answer only the QP they were bound on);
 *   - window_close (ours, as when its lane is lost) closes it: a write is
 *     refused; a window whose lane is lost is closed from another lane of
 *     its device and opened there, the slot lands and is fenced again
 *     (rails' LANE_DOWN); or let go on the lost lane itself (deallocated,
 *     as the engine does), opened on another under a fresh key, and the
 *     lost lane's key is refused there;
 *   - a descriptor that closes another window than the slot's is reported
 *     with that other key, so the receiver refuses it (no acceptance);
 *   - nothing reaches the registration through its own (zero) rkey;
 *   - xport_verbs_windows says yes for the devices (by name, by address)
 *     and -ENODEV for a device that is not there.
 * Windows on a device without them, and every rule that needs no device,
 * are test_verbs_mw's.
 *
 * Needs a device with type-2 memory windows: exits 77 and says why
 * elsewhere. Runs in the Soft-RoCE VM (tests/rxe-vm/mwfence.sh): listener
 * on 10.0.0.2 (rxe1), connector from 10.0.0.1 (rxe0), or 127.0.0.1 with one
 * device.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "xport.h"

#ifdef HAVE_VERBS
#include <infiniband/verbs.h>

#define TIMEOUT_MS 20000
#define SLOT	   65536u
#define NSLOTS	   4u
#define DESC_OFF   (NSLOTS * SLOT)
#define TARGET_LEN (DESC_OFF + 4096u)
#define DESC_WIN   100u /* the descriptor window's index, apart from the slots' */

static int failures;
static int64_t t_start; /* for the log: where the time goes */
static const char *listen_ip = "10.0.0.2";
static const struct xport_ops *ops = &xport_verbs_ops;

#define CHECK(cond, ...)                                                                \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                   \
			fprintf(stderr, "\n");                                          \
			failures++;                                                     \
			return -1;                                                      \
		}                                                                       \
	} while (0)

static struct xport_params mkparams(unsigned nlanes)
{
	struct xport_params p = {
		.nlanes = nlanes, .sq_depth = 32, .rq_depth = 16, .timeout_ms = TIMEOUT_MS
	};

	memset(p.token, 0x3c, sizeof(p.token));
	p.windows = true;
	return p;
}

static struct sockaddr_in addr_of(const char *ip, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

struct acceptor {
	pthread_t thr;
	struct xport_listener *l;
	struct xport_params p;
	struct xport *x;
	int r;
};

static void *accept_main(void *arg)
{
	struct acceptor *a = arg;

	a->r = ops->accept(a->l, &a->p, &a->x);
	return NULL;
}

struct pair {
	struct xport *srv, *cli;
	uint8_t *target, *source;
	struct xport_mr *tmr, *smr;
	uint32_t desc_key[2]; /* the descriptor window's key, per lane */
};

/*
 * Teardown with windows still open (the descriptor windows always are) is
 * bounded: a window holds its QP, and rxe waits 50 s for that reference
 * when the QP goes first.
 */
static void pair_close(struct pair *pr)
{
	int64_t t0 = now_ms();

	if (pr->srv) {
		pr->srv->ops->destroy(pr->srv);
		if (now_ms() - t0 > 10000) {
			fprintf(stderr, "FAIL: destroy with open windows took %lld ms\n",
				(long long)(now_ms() - t0));
			failures++;
		}
	}
	if (pr->cli) {
		pr->cli->ops->destroy(pr->cli);
	}
	free(pr->target);
	free(pr->source);
	memset(pr, 0, sizeof(*pr));
}

/* Receives on every lane of the receiver: one per message it will get. */
static int post_recvs(struct pair *pr)
{
	uint64_t ids[8];

	for (unsigned i = 0; i < 8; i++) {
		ids[i] = 0x9000 + i;
	}
	for (unsigned l = 0; l < pr->srv->nlanes; l++) {
		int r = pr->srv->ops->post_recvs(pr->srv, l, ids, 8);

		CHECK(r >= 0, "post_recvs: %s", strerror(-r));
	}
	return 0;
}

static int pair_connect(struct pair *pr, unsigned nlanes)
{
	struct acceptor a = { .p = mkparams(nlanes) };
	struct xport_params p = mkparams(nlanes);
	struct sockaddr_in la = addr_of(listen_ip, 0), ca;
	uint16_t port;
	int r, ra;

	r = ops->listen((struct sockaddr *)&la, sizeof(la), -1, &a.l, &port);
	CHECK(r >= 0, "listen: %s", strerror(-r));
	CHECK(pthread_create(&a.thr, NULL, accept_main, &a) == 0, "thread");
	ca = addr_of(listen_ip, port);
	r = ops->connect((struct sockaddr *)&ca, sizeof(ca), &p, &pr->cli);
	pthread_join(a.thr, NULL);
	ops->listener_close(a.l);
	ra = a.r;
	pr->srv = a.x;
	CHECK(r >= 0, "connect: %s", strerror(-r));
	CHECK(ra >= 0, "accept: %s", strerror(-ra));
	CHECK(pr->cli->windows && pr->srv->windows, "windows not granted");
	return 0;
}

static int pair_open(struct pair *pr, unsigned nlanes)
{
	int r;

	memset(pr, 0, sizeof(*pr));
	if (pair_connect(pr, nlanes) < 0) {
		return -1;
	}
	pr->target = aligned_alloc(4096, TARGET_LEN);
	pr->source = aligned_alloc(4096, SLOT);
	CHECK(pr->target && pr->source, "out of memory");
	memset(pr->target, 0xee, TARGET_LEN);
	for (size_t i = 0; i < SLOT; i++) {
		pr->source[i] = (uint8_t)(i * 13 + 5);
	}
	r = pr->srv->ops->reg_mr(pr->srv, pr->target, TARGET_LEN,
				 XPORT_ACCESS_LOCAL | XPORT_ACCESS_WINDOWS, &pr->tmr);
	CHECK(r >= 0, "reg target: %s", strerror(-r));
	CHECK(pr->tmr->rkey == 0, "a windows-only registration has rkey 0x%x", pr->tmr->rkey);
	r = pr->cli->ops->reg_mr(pr->cli, pr->source, SLOT, XPORT_ACCESS_LOCAL, &pr->smr);
	CHECK(r >= 0, "reg source: %s", strerror(-r));
	for (unsigned l = 0; l < nlanes; l++) {
		r = pr->srv->ops->window_open(pr->srv, pr->tmr, DESC_WIN + l, l, DESC_OFF, 4096,
					      &pr->desc_key[l]);
		CHECK(r >= 0, "open descriptor window: %s", strerror(-r));
	}
	return post_recvs(pr);
}

/* Gather `want` completions (or stop at the first error), waiting on event_fd. */
static int collect(struct xport *x, struct xport_wc *out, int want, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	int got = 0;

	while (got < want) {
		struct pollfd pfd = { .fd = x->ops->event_fd(x), .events = POLLIN };
		int n = x->ops->poll_cq(x, out + got, (size_t)(want - got));
		int64_t left;

		if (n < 0) {
			return n;
		}
		for (int i = got; i < got + n; i++) {
			if (out[i].status != XPORT_WC_SUCCESS) {
				return i + 1;
			}
		}
		got += n;
		if (n > 0) {
			continue;
		}
		left = deadline - now_ms();
		if (left <= 0) {
			break;
		}
		(void)poll(&pfd, 1, (int)left);
	}
	return got;
}

/* The slot's bytes through window key `key` on lane, signaled. */
static struct xport_wr slot_write(struct pair *pr, unsigned slot, uint32_t key, unsigned lane)
{
	return (struct xport_wr){ .wr_id = 0x100 + slot,
				  .opcode = XPORT_OP_WRITE,
				  .flags = XPORT_SEND_SIGNALED,
				  .mr = pr->smr,
				  .buf = pr->source,
				  .len = SLOT,
				  .remote_addr = pr->tmr->iova + (uint64_t)slot * SLOT,
				  .rkey = key,
				  .lane = lane };
}

/* The slot's descriptor (32 bytes into the descriptor area) closing window inv. */
static struct xport_wr desc_write(struct pair *pr, unsigned slot, uint32_t inv, unsigned lane)
{
	return (struct xport_wr){ .wr_id = 0x200 + slot,
				  .opcode = XPORT_OP_WRITE_IMM,
				  .flags = XPORT_SEND_SIGNALED,
				  .mr = pr->smr,
				  .buf = pr->source,
				  .len = 32,
				  .imm = 0x01000000u | slot,
				  .remote_addr = pr->tmr->iova + DESC_OFF + 32 * slot,
				  .rkey = pr->desc_key[lane],
				  .lane = lane,
				  .inv_rkey = inv };
}

/* The receiver's next completion on lane (those of other lanes, flushed ones, passed over). */
static int next_on_lane(struct xport *x, unsigned lane, struct xport_wc *ret)
{
	int64_t deadline = now_ms() + TIMEOUT_MS;

	while (now_ms() < deadline) {
		struct pollfd pfd = { .fd = x->ops->event_fd(x), .events = POLLIN };
		int n = x->ops->poll_cq(x, ret, 1);

		if (n < 0) {
			return n;
		}
		if (n == 1 && ret->lane == lane) {
			return 1;
		}
		if (n == 0) {
			(void)poll(&pfd, 1, 100);
		}
	}
	return 0;
}

/* Slot filled through its window on lane, its descriptor sent closing `inv`; the receive. */
static int push_slot_on(struct pair *pr, unsigned lane, unsigned slot, uint32_t key, uint32_t inv,
			struct xport_wc *ret_wc)
{
	struct xport_wr wrs[2] = { slot_write(pr, slot, key, lane),
				   desc_write(pr, slot, inv, lane) };
	struct xport_wc wc[2];
	int r = pr->cli->ops->post_writes(pr->cli, wrs, 2);

	CHECK(r >= 0, "post: %s", strerror(-r));
	r = collect(pr->cli, wc, 2, TIMEOUT_MS);
	CHECK(r == 2 && wc[0].status == 0 && wc[1].status == 0, "sender: %d completions (%s)", r,
	      r > 0 ? xport_wc_status_str(wc[r - 1].status) : "-");
	r = next_on_lane(pr->srv, lane, ret_wc);
	CHECK(r == 1 && ret_wc->status == 0, "receiver: %d completions", r);
	CHECK(ret_wc->opcode == XPORT_WC_RECV_IMM && ret_wc->imm == (0x01000000u | slot) &&
		  ret_wc->len == 32,
	      "receiver got opcode %u imm 0x%x len %u", ret_wc->opcode, ret_wc->imm, ret_wc->len);
	return 0;
}

static int push_slot(struct pair *pr, unsigned slot, uint32_t key, uint32_t inv,
		     struct xport_wc *ret_wc)
{
	return push_slot_on(pr, 0, slot, key, inv, ret_wc);
}

/* A write with key on lane must fail REM_ACCESS_ERR at the sender, slot bytes as they were. */
static int write_refused(struct pair *pr, unsigned slot, uint32_t key, unsigned lane,
			 const char *what)
{
	struct xport_wr w = slot_write(pr, slot, key, lane);
	uint8_t *before = malloc(SLOT);
	struct xport_wc wc;
	int r, same;

	CHECK(before, "out of memory");
	memcpy(before, pr->target + (size_t)slot * SLOT, SLOT);
	for (size_t i = 0; i < SLOT; i++) {
		pr->source[i] ^= 0x5a; /* other bytes than any that landed */
	}
	r = pr->cli->ops->post_writes(pr->cli, &w, 1);
	if (r >= 0) {
		r = collect(pr->cli, &wc, 1, TIMEOUT_MS);
	}
	same = memcmp(before, pr->target + (size_t)slot * SLOT, SLOT) == 0;
	free(before);
	CHECK(r == 1 && wc.status == XPORT_WC_REM_ACCESS_ERR, "%s: %d, %s", what, r,
	      r == 1 ? xport_wc_status_str(wc.status) : "no completion");
	CHECK(same, "%s: the slot changed", what);
	fprintf(stderr, "ok: %s: IBV_WC_REM_ACCESS_ERR, slot untouched (%s)\n", what,
		pr->cli->ops->last_error(pr->cli) ? pr->cli->ops->last_error(pr->cli) : "-");
	return 0;
}

/* The fence: bytes exact, the slot's window closed by exactly its key, a late write refused. */
static int test_fence(void)
{
	struct pair pr;
	struct xport_wc wc;
	uint32_t key;
	int r;

	fprintf(stderr, "-- fence: write, SEND_WITH_INV, late write (at %lld ms)\n",
		(long long)(now_ms() - t_start));
	if (pair_open(&pr, 1) < 0) {
		goto out;
	}
	r = pr.srv->ops->window_open(pr.srv, pr.tmr, 2, 0, 2 * SLOT, SLOT, &key);
	CHECK(r >= 0, "window_open: %s", strerror(-r));
	if (push_slot(&pr, 2, key, key, &wc) < 0) {
		goto out;
	}
	CHECK(xport_wc_closed_window(&wc, key), "receive closed 0x%x (%d), want 0x%x", wc.inv_rkey,
	      wc.invalidated, key);
	CHECK(memcmp(pr.target + 2 * SLOT, pr.source, SLOT) == 0, "slot bytes differ");
	CHECK(pr.target[2 * SLOT - 1] == 0xee && pr.target[3 * SLOT] == 0xee, "outside the slot");
	fprintf(stderr, "ok: slot exact, window 0x%x closed by the descriptor\n", key);
	write_refused(&pr, 2, key, 0, "late write into the fenced slot");
out:
	pair_close(&pr);
	return 0;
}

/* Opened again: a new key; the old one refused, the new one taken. */
static int test_reopen(void)
{
	struct pair pr;
	struct xport_wc wc;
	uint32_t k1, k2;
	int r;

	fprintf(stderr, "-- window opened again: a new key (at %lld ms)\n",
		(long long)(now_ms() - t_start));
	if (pair_open(&pr, 1) < 0) {
		goto out;
	}
	r = pr.srv->ops->window_open(pr.srv, pr.tmr, 1, 0, SLOT, SLOT, &k1);
	CHECK(r >= 0, "window_open: %s", strerror(-r));
	if (push_slot(&pr, 1, k1, k1, &wc) < 0) {
		goto out;
	}
	CHECK(xport_wc_closed_window(&wc, k1), "first closing");
	r = pr.srv->ops->window_open(pr.srv, pr.tmr, 1, 0, SLOT, SLOT, &k2);
	CHECK(r >= 0, "window_open again: %s", strerror(-r));
	CHECK(k2 != k1 && k2 == ibv_inc_rkey(k1), "key 0x%x after 0x%x", k2, k1);
	if (push_slot(&pr, 1, k2, k2, &wc) < 0) {
		goto out;
	}
	CHECK(xport_wc_closed_window(&wc, k2) && !xport_wc_closed_window(&wc, k1),
	      "second closing");
	fprintf(stderr, "ok: reopened under 0x%x, closed again\n", k2);
	r = pr.srv->ops->window_open(pr.srv, pr.tmr, 1, 0, SLOT, SLOT, &k2);
	CHECK(r >= 0, "window_open third: %s", strerror(-r));
	write_refused(&pr, 1, k1, 0, "write with the window's previous key");
out:
	pair_close(&pr);
	return 0;
}

/* A descriptor that closes another window than its slot's is seen as such. */
static int test_wrong_window(void)
{
	struct pair pr;
	struct xport_wc wc;
	uint32_t ka, kb;
	int r;

	fprintf(stderr, "-- descriptor closing another window (at %lld ms)\n",
		(long long)(now_ms() - t_start));
	if (pair_open(&pr, 1) < 0) {
		goto out;
	}
	r = pr.srv->ops->window_open(pr.srv, pr.tmr, 0, 0, 0, SLOT, &ka);
	CHECK(r >= 0, "window_open a: %s", strerror(-r));
	r = pr.srv->ops->window_open(pr.srv, pr.tmr, 3, 0, 3 * SLOT, SLOT, &kb);
	CHECK(r >= 0, "window_open b: %s", strerror(-r));
	/* Slot 0 written, but the descriptor closes slot 3's window. */
	if (push_slot(&pr, 0, ka, kb, &wc) < 0) {
		goto out;
	}
	CHECK(!xport_wc_closed_window(&wc, ka), "slot 0 taken though its window is open");
	CHECK(wc.invalidated && wc.inv_rkey == kb, "reported 0x%x", wc.inv_rkey);
	fprintf(stderr, "ok: the receiver sees window 0x%x closed, not slot 0's 0x%x\n", kb, ka);
	/* Slot 0's window is still open: the peer can still write it, so it must not be taken. */
	r = pr.srv->ops->window_close(pr.srv, pr.tmr, 0, 0);
	CHECK(r >= 0, "window_close: %s", strerror(-r));
	write_refused(&pr, 0, ka, 0, "write after window_close");
out:
	pair_close(&pr);
	return 0;
}

/* A window answers only its lane's QP. */
static int test_other_lane(void)
{
	struct pair pr;
	uint32_t key;
	int r;

	fprintf(stderr, "-- a window's key on another lane (at %lld ms)\n",
		(long long)(now_ms() - t_start));
	if (pair_open(&pr, 2) < 0) {
		goto out;
	}
	r = pr.srv->ops->window_open(pr.srv, pr.tmr, 1, 0, SLOT, SLOT, &key);
	CHECK(r >= 0, "window_open: %s", strerror(-r));
	write_refused(&pr, 1, key, 1, "window of lane 0 used on lane 1");
out:
	pair_close(&pr);
	return 0;
}

/*
 * Rails: the lane a window was opened on is lost; the window is closed from
 * a surviving lane of its device and opened there, and the slot lands
 * through it and is fenced again.
 */
static int test_lane_takeover(void)
{
	struct pair pr;
	struct xport_wc wc;
	uint32_t k0, k1;
	int r;

	fprintf(stderr, "-- a window's lane lost, the window opened on another (at %lld ms)\n",
		(long long)(now_ms() - t_start));
	if (pair_open(&pr, 2) < 0) {
		goto out;
	}
	r = pr.srv->ops->window_open(pr.srv, pr.tmr, 1, 0, SLOT, SLOT, &k0);
	CHECK(r >= 0, "window_open: %s", strerror(-r));
	r = pr.srv->ops->lane_down(pr.srv, 0);
	CHECK(r >= 0, "lane_down: %s", strerror(-r));
	r = pr.srv->ops->window_open(pr.srv, pr.tmr, 1, 0, SLOT, SLOT, &k1);
	CHECK(r == -ENOTCONN, "window_open on the lost lane: %d", r);
	r = pr.srv->ops->window_close(pr.srv, pr.tmr, 1, 1);
	CHECK(r >= 0, "window_close from lane 1: %s", strerror(-r));
	r = pr.srv->ops->window_open(pr.srv, pr.tmr, 1, 1, SLOT, SLOT, &k1);
	CHECK(r >= 0, "window_open on lane 1: %s", strerror(-r));
	if (push_slot_on(&pr, 1, 1, k1, k1, &wc) < 0) {
		goto out;
	}
	CHECK(xport_wc_closed_window(&wc, k1), "closing on lane 1");
	CHECK(memcmp(pr.target + SLOT, pr.source, SLOT) == 0, "slot bytes differ");
	fprintf(stderr,
		"ok: window 0x%x of the lost lane closed, 0x%x opened on lane 1, slot exact\n", k0,
		k1);
	write_refused(&pr, 1, k1, 1, "late write after the takeover");
out:
	pair_close(&pr);
	return 0;
}

/*
 * Rails as the engine does it: the window of a lost lane is let go on that
 * lane itself (window_close there deallocates it), the slot is opened on
 * another lane of the device under a fresh key and lands; the lost lane's
 * key is then refused on the live lane too.
 */
static int test_lane_release(void)
{
	struct pair pr;
	struct xport_wc wc;
	uint32_t k0, k1;
	int r;

	fprintf(stderr, "-- a lost lane's window let go on that lane (at %lld ms)\n",
		(long long)(now_ms() - t_start));
	if (pair_open(&pr, 2) < 0) {
		goto out;
	}
	r = pr.srv->ops->window_open(pr.srv, pr.tmr, 1, 0, SLOT, SLOT, &k0);
	CHECK(r >= 0, "window_open: %s", strerror(-r));
	r = pr.srv->ops->lane_down(pr.srv, 0);
	CHECK(r >= 0, "lane_down: %s", strerror(-r));
	r = pr.srv->ops->window_close(pr.srv, pr.tmr, 1, 0);
	CHECK(r >= 0, "window_close on the lost lane: %s", strerror(-r));
	r = pr.srv->ops->window_open(pr.srv, pr.tmr, 1, 1, SLOT, SLOT, &k1);
	CHECK(r >= 0, "window_open on lane 1: %s", strerror(-r));
	CHECK(k1 != k0, "the fresh window has the lost one's key 0x%x", k0);
	if (push_slot_on(&pr, 1, 1, k1, k1, &wc) < 0) {
		goto out;
	}
	CHECK(xport_wc_closed_window(&wc, k1), "closing on lane 1");
	CHECK(memcmp(pr.target + SLOT, pr.source, SLOT) == 0, "slot bytes differ");
	fprintf(stderr, "ok: window 0x%x let go with its lane, 0x%x opened on lane 1, slot exact\n",
		k0, k1);
	write_refused(&pr, 1, k0, 1, "write with the lost lane's key on lane 1");
out:
	pair_close(&pr);
	return 0;
}

/* The registration's own key: nothing. */
static int test_no_mr_key(void)
{
	struct pair pr;
	int r;

	fprintf(stderr, "-- the registration's own key (at %lld ms)\n",
		(long long)(now_ms() - t_start));
	if (pair_open(&pr, 1) < 0) {
		goto out;
	}
	r = pr.srv->ops->reg_mr(pr.srv, pr.target, 4096,
				XPORT_ACCESS_WINDOWS | XPORT_ACCESS_REMOTE_WRITE, &pr.tmr);
	CHECK(r == -EINVAL, "windows with remote write: %d", r);
	write_refused(&pr, 0, 0, 0, "write with rkey 0");
out:
	pair_close(&pr);
	return 0;
}

/* The host's answer (xport_verbs_windows): the devices named, the one holding an address. */
static int test_host_probe(void)
{
	const char *both[2] = { "rxe0", "rxe1" }, *none[1] = { "nosuchdev" };
	struct sockaddr_in local = addr_of(listen_ip, 0);
	char why[256];
	int r;

	fprintf(stderr, "-- xport_verbs_windows (at %lld ms)\n", (long long)(now_ms() - t_start));
	r = xport_verbs_windows((struct sockaddr *)&local, NULL, 0, why, sizeof(why));
	CHECK(r == 1, "by address %s: %d (%s)", listen_ip, r, why);
	fprintf(stderr, "ok: by address %s: %s\n", listen_ip, why);
	r = xport_verbs_windows(NULL, none, 1, why, sizeof(why));
	CHECK(r == -ENODEV, "nosuchdev: %d (%s)", r, why);
	if (strcmp(listen_ip, "10.0.0.2") == 0) {
		r = xport_verbs_windows(NULL, both, 2, why, sizeof(why));
		CHECK(r == 1, "rxe0,rxe1: %d (%s)", r, why);
		fprintf(stderr, "ok: rxe0,rxe1: %s\n", why);
	}
	return 0;
}

static int mw_support(char *why, size_t whylen)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_context *c;
	struct ibv_device_attr a;
	int ok = 0;

	if (!devs || !devs[0]) {
		snprintf(why, whylen, "no RDMA device (ibv_get_device_list: %s)",
			 devs ? "0 devices" : strerror(errno ? errno : ENODEV));
		goto out;
	}
	c = ibv_open_device(devs[0]);
	if (!c || ibv_query_device(c, &a) != 0) {
		snprintf(why, whylen, "%s: cannot query", ibv_get_device_name(devs[0]));
	} else if (!(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW) ||
		   !(a.device_cap_flags &
		     (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B))) {
		snprintf(why, whylen, "%s: no type-2 memory windows (device_cap_flags 0x%x)",
			 ibv_get_device_name(devs[0]), a.device_cap_flags);
	} else {
		ok = devs[1] ? 2 : 1;
	}
	if (c) {
		ibv_close_device(c);
	}
out:
	if (devs) {
		ibv_free_device_list(devs);
	}
	return ok;
}

int main(void)
{
	char why[256];
	int ndev;
	int64_t t0 = t_start = now_ms();

	setvbuf(stdout, NULL, _IONBF, 0);
	ndev = mw_support(why, sizeof(why));
	if (ndev == 0) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	listen_ip = getenv("VERBS_LOOP_IP") ? getenv("VERBS_LOOP_IP")
					    : (ndev < 2 ? "127.0.0.1" : listen_ip);
	fprintf(stderr, "windows: listening on %s\n", listen_ip);
	test_host_probe();
	test_fence();
	test_reopen();
	test_wrong_window();
	test_other_lane();
	test_lane_takeover();
	test_lane_release();
	test_no_mr_key();
	fprintf(stderr, "%s: %d failure(s), %lld ms\n", failures ? "FAILED" : "PASSED", failures,
		(long long)(now_ms() - t0));
	return failures ? 1 : 0;
}

#else
int main(void)
{
	printf("SKIP: built without the verbs transport (ENABLE_VERBS=OFF)\n");
	return 77;
}
#endif
