/* SPDX-License-Identifier: MIT */
/*
 * Memory windows with rails (engine_windows.c through the slot fence's points,
 * engine_fence.h), without verbs: the engine's bookkeeping of a lost lane's
 * windows, driven the way engine_rails.c and the roles drive it. A fake
 * transport stands in for window_open/window_close (windows exist only on
 * verbs; the VM test t_verbs_mw_vm runs them for real) and says which
 * windows were opened and let go.
 *   - sender: the keys of a lane that stops are dropped (its free slots wait
 *     for fresh credits); a credit that comes on such a lane is kept back; a
 *     fresh key for a slot whose chunk went on the lost lane is parked until
 *     the lane is resolved, then goes to that chunk again (it was not taken)
 *     or frees the slot (it was); a chunk that goes again waits for its
 *     slot's fresh key (tx_ready) and goes on that key's lane under it; a
 *     second credit for a slot that holds a key is refused; the next slot
 *     taken is one whose window is on the lane picked by load (tx_take);
 *   - receiver: a resolved lane's open windows (credit not taken, or
 *     descriptor not come) are let go on that lane and their slots listed to
 *     credit again, the ones a descriptor closed not; a slot credited again
 *     gets a fresh key on the lane it goes on;
 *   - rails' watchdog (engine_rails.c, rails_watch): with windows a sender's
 *     lane whose slots wait for credits, nothing out to complete, is taken
 *     down once it waited a stall's time while another lane moved, not
 *     while every lane waits (a slow receiver) nor before the stall; with
 *     the copy's fence (credits on any lane) such a wait takes no lane down;
 *   - its probe (rails_probe): with windows a sender's lane whose slots wait,
 *     nothing of ours out, gets one zero-length signaled RDMA WRITE after a
 *     second of quiet (none before, none while one is out, none on a lane
 *     that moved, none with the copy's fence), the last lane up too; a probe
 *     that fails loses its lane the ordinary way (LANE_DOWN told, the lane
 *     dead, the session going on) and says so.
 */
#include "testutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine-internal.h"
#include "engine_fence.h"

extern const struct engine_feature engine_feature_windows;
extern const struct engine_feature engine_feature_rails;

#define NSLOTS 8

struct fake {
	struct xport x; /* first: the ops get back to the fake from it */
	struct xport_ops ops;
	struct xport_mr desc_mr;
	uint32_t next_key;
	unsigned nclosed;
	uint32_t closed_idx[NSLOTS * 2];
	unsigned closed_lane[NSLOTS * 2];
	unsigned ndown; /* lane_down calls, the last one's lane */
	unsigned down_lane;
	char notice[160];
	unsigned nposted; /* post_writes: requests posted, the last one */
	struct xport_wr last;
	struct xport_wc wc; /* poll_cq's next completion (wc.wr_id 0: none) */
};

static int fake_post_writes(struct xport *x, const struct xport_wr *wrs, size_t n)
{
	struct fake *f = (struct fake *)x;

	f->nposted += (unsigned)n;
	f->last = wrs[n - 1];
	return 0;
}

static int fake_poll_cq(struct xport *x, struct xport_wc *wcs, size_t max)
{
	struct fake *f = (struct fake *)x;

	if (f->wc.wr_id == 0 || max == 0) {
		return 0;
	}
	wcs[0] = f->wc;
	f->wc.wr_id = 0;
	return 1;
}

static int fake_window_open(struct xport *x, struct xport_mr *mr, uint32_t idx, unsigned lane,
			    uint64_t offset, uint64_t len, uint32_t *ret_rkey)
{
	struct fake *f = (struct fake *)x;

	(void)mr, (void)idx, (void)lane, (void)offset, (void)len;
	*ret_rkey = 0x1000 + ++f->next_key;
	return 0;
}

static int fake_window_close(struct xport *x, struct xport_mr *mr, uint32_t idx, unsigned lane)
{
	struct fake *f = (struct fake *)x;

	(void)mr;
	f->closed_idx[f->nclosed] = idx;
	f->closed_lane[f->nclosed++] = lane;
	return 0;
}

static int fake_lane_down(struct xport *x, unsigned lane)
{
	struct fake *f = (struct fake *)x;

	f->ndown++;
	f->down_lane = lane;
	return 0;
}

static void fake_notice(void *ud, const char *name, const char *text)
{
	struct fake *f = ud;

	(void)name;
	snprintf(f->notice, sizeof(f->notice), "%s", text);
}

static int fake_reg_mr(struct xport *x, void *addr, size_t len, unsigned access,
		       struct xport_mr **ret)
{
	(void)addr, (void)len, (void)access;
	*ret = &((struct fake *)x)->desc_mr;
	return 0;
}

static int fake_dereg_mr(struct xport *x, struct xport_mr *mr)
{
	(void)x, (void)mr;
	return 0;
}

struct fx {
	struct fake fake;
	struct engine_params p;
	struct engine_role_ops role;
	struct engine *e;
	struct chunk chunks[4];
	struct pool pool;
	uint32_t free_slots[NSLOTS], free_pos[NSLOTS];
	uint8_t slot_lane[NSLOTS];
	struct lane_ent fifo[2][64];
	char err[256];
};

static struct fx *fx_new(bool receiver)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct engine *e;

	assert_non_null(f);
	f->fake.ops.window_open = fake_window_open;
	f->fake.ops.window_close = fake_window_close;
	f->fake.ops.reg_mr = fake_reg_mr;
	f->fake.ops.dereg_mr = fake_dereg_mr;
	f->fake.ops.lane_down = fake_lane_down;
	f->fake.ops.post_writes = fake_post_writes;
	f->fake.ops.poll_cq = fake_poll_cq;
	f->fake.x.ops = &f->fake.ops;
	f->fake.x.nlanes = 2;
	f->fake.x.windows = true;
	f->p.x = &f->fake.x;
	f->p.slots = NSLOTS;
	f->p.chunk_size = 65536;
	f->p.windows = true;
	f->p.role = receiver ? ENGINE_RECEIVER : ENGINE_SENDER;
	f->role.peer_writes = receiver;
	f->e = e = calloc(1, sizeof(*e));
	assert_non_null(e);
	e->p = &f->p;
	e->role = &f->role;
	e->err = f->err;
	e->errlen = sizeof(f->err);
	e->rails = true;
	e->chunks = f->chunks;
	e->free_slots = f->free_slots;
	e->free_pos = f->free_pos;
	tx_free_clear(e);
	e->slot_lane = f->slot_lane;
	for (unsigned i = 0; i < 2; i++) {
		e->lanes[i].state = LANE_UP;
		e->lanes[i].cap = 64;
		e->lanes[i].fifo = f->fifo[i];
	}
	e->feat[0] = &engine_feature_windows;
	e->sstate[0] = calloc(1, engine_feature_windows.state_size);
	assert_non_null(e->sstate[0]);
	e->nfeat = 1;
	assert_int_equal(engine_feature_windows.setup(e), 0);
	return f;
}

static void fx_free(struct fx *f)
{
	engine_feature_windows.stop(f->e);
	free(f->e->batch);
	for (unsigned i = 0; i < f->e->nfeat; i++) {
		f->e->feat[i]->release(f->e);
		free(f->e->sstate[i]);
	}
	free(f->e);
	free(f);
}

/*
 * Rails on too (the sender's), its watchdog's stall 5 s (a quarter of a 20 s
 * idle timeout); windows_seen false: rails set up as if no feature brought
 * credits back on the slot's own lane (the copy's fence).
 */
static void rails_add(struct fx *f, bool windows_seen)
{
	struct engine *e = f->e;

	f->pool.nchunks = 4;
	e->pool = &f->pool;
	f->p.idle_timeout_ms = 20000;
	f->p.ev.notice = fake_notice;
	f->p.ev.ud = &f->fake;
	e->feat[1] = &engine_feature_rails;
	e->sstate[1] = calloc(1, engine_feature_rails.state_size);
	assert_non_null(e->sstate[1]);
	if (!windows_seen) {
		e->feat[1] = e->feat[0];
		e->feat[0] = &engine_feature_rails;
		void *st = e->sstate[1];

		e->sstate[1] = e->sstate[0];
		e->sstate[0] = st;
	}
	e->nfeat = windows_seen ? 2 : 1;
	assert_int_equal(engine_feature_rails.setup(e), 0);
	e->nfeat = 2;
}

/* Sender: a credit for slot on lane with key; the role's own handling. */
static int credit(struct fx *f, uint32_t slot, unsigned lane, uint32_t key)
{
	struct xport_wc wc = {
		.status = XPORT_WC_SUCCESS,
		.opcode = XPORT_WC_RECV_IMM,
		.imm = proto_imm(PROTO_IMM_CREDIT, slot),
		.len = key,
		.lane = lane,
	};

	return tx_on_credit(f->e, &wc);
}

static bool is_free(const struct fx *f, uint32_t slot)
{
	for (uint32_t i = 0; i < f->e->nfree_slots; i++) {
		if (f->e->free_slots[i] == slot) {
			return true;
		}
	}
	return false;
}

/* Sender: slot goes out (taken from the free ones as the core does); its lane and key. */
static unsigned post(struct fx *f, uint32_t slot, uint32_t want_key)
{
	struct engine *e = f->e;
	struct xport_wr data = { 0 }, desc = { 0 };
	unsigned lane = 0;

	if (tx_free_has(e, slot)) {
		tx_free_to_top(e, slot);
		tx_free_pop(e);
	}
	assert_int_equal(engine_tx_window(e, slot, &lane, &data, &desc), 0);
	assert_int_equal(data.rkey, want_key);
	assert_int_equal(desc.inv_rkey, want_key);
	assert_int_equal(data.lane, lane);
	return lane;
}

static void test_sender(void **state)
{
	struct fx *f = fx_new(false);
	struct engine *e = f->e;
	uint32_t again[2] = { 0, 1 };

	(void)state;
	/* Slots 0..7 credited, the even ones on lane 0. */
	for (uint32_t s = 0; s < NSLOTS; s++) {
		assert_int_equal(credit(f, s, s % 2, 0x100 + s), 0);
	}
	assert_int_equal(e->nfree_slots, NSLOTS);
	/* The lane picked by load is honoured: a free slot whose window is there goes next. */
	engine_tx_take(e, 0);
	assert_int_equal(e->free_slots[e->nfree_slots - 1], 6);
	engine_tx_take(e, 1);
	assert_int_equal(e->free_slots[e->nfree_slots - 1], 7);
	assert_int_equal(post(f, 0, 0x100), 0);
	assert_int_equal(post(f, 2, 0x102), 0);
	assert_int_equal(post(f, 4, 0x104), 0);
	assert_int_equal(post(f, 1, 0x101), 1);

	/* Lane 0 stops: slot 6's key answers there, it waits for a fresh credit. */
	e->lanes[0].state = LANE_CLOSING;
	engine_lane_closing(e, 0);
	assert_int_equal(e->nfree_slots, 3);
	assert_true(is_free(f, 3) && is_free(f, 5) && is_free(f, 7));
	assert_false(is_free(f, 6));

	/* Slot 1's credit on the closing lane: kept back, never used. */
	assert_int_equal(credit(f, 1, 0, 0x201), 0);
	assert_false(is_free(f, 1));

	/* Fresh keys for slots 0 and 4 before lane 0 is resolved: parked. */
	assert_int_equal(credit(f, 0, 1, 0x300), 0);
	assert_int_equal(credit(f, 4, 1, 0x304), 0);
	assert_false(is_free(f, 0));
	assert_false(is_free(f, 4));

	/* Resolved: slots 0 and 2's chunks go again, slot 4's was taken. */
	e->lanes[0].state = LANE_DEAD;
	e->lanes[0].told = e->lanes[0].heard = true;
	f->chunks[0].slot = 0;
	f->chunks[1].slot = 2;
	assert_int_equal(engine_tx_resolved(e, 0, again, 2), 0);
	assert_true(is_free(f, 4));
	assert_false(is_free(f, 0) || is_free(f, 2));
	assert_int_equal(engine_tx_ready(e, 0), 1);
	assert_int_equal(engine_tx_ready(e, 2), 0); /* no fresh key yet */
	assert_int_equal(credit(f, 2, 1, 0x302), 0);
	assert_false(is_free(f, 2));
	assert_int_equal(engine_tx_ready(e, 2), 1);
	assert_int_equal(post(f, 0, 0x300), 1);
	assert_int_equal(post(f, 2, 0x302), 1);

	/* The fresh credits of the dropped keys free their slots. */
	assert_int_equal(credit(f, 6, 1, 0x306), 0);
	assert_int_equal(credit(f, 1, 1, 0x401), 0);
	assert_true(is_free(f, 6) && is_free(f, 1));
	assert_false(e->failed);

	/* A second credit for a slot that holds a key: refused. */
	assert_int_equal(credit(f, 3, 1, 0x503), -EBADMSG);
	assert_true(e->failed);
	fx_free(f);
}

/* Receiver: the credit of slot on lane; the key its window was opened under. */
static uint32_t credit_rx(struct fx *f, uint32_t slot, unsigned lane)
{
	struct xport_wr wr = { .lane = lane };

	assert_int_equal(engine_rx_credit(f->e, slot, &wr), 0);
	assert_int_not_equal(wr.key, 0);
	return wr.key;
}

static void test_receiver(void **state)
{
	struct fx *f = fx_new(true);
	struct engine *e = f->e;
	uint32_t key[4], slots[NSLOTS] = { 0 }, n = 1, k0;
	struct xport_wc wc = { .status = XPORT_WC_SUCCESS, .opcode = XPORT_WC_RECV_IMM };

	(void)state;
	for (uint32_t s = 0; s < 4; s++) {
		key[s] = credit_rx(f, s, s % 2);
	}
	/* Slot 2's descriptor came on lane 0 and closed its window. */
	wc.lane = 0;
	wc.invalidated = true;
	wc.inv_rkey = key[2];
	assert_int_equal(engine_rx_landed(e, &wc, 2), 0);

	/* Lane 0 resolved; rails listed slot 0 (say its credit was not taken). */
	e->lanes[0].state = LANE_DEAD;
	assert_int_equal(engine_rx_reopen(e, 0, slots, NSLOTS, &n), 0);
	/* The whole list: slot 0 only (slot 2 was closed by its descriptor). */
	assert_int_equal(n, 1);
	assert_int_equal(slots[0], 0);
	assert_int_equal(f->fake.nclosed, 1);
	assert_int_equal(f->fake.closed_idx[0], 0);
	assert_int_equal(f->fake.closed_lane[0], 0);

	/* Credited again on lane 1: a fresh key there. */
	k0 = credit_rx(f, 0, 1);
	assert_int_not_equal(k0, key[0]);
	n = 0;
	assert_int_equal(engine_rx_reopen(e, 0, slots, NSLOTS, &n), 0);
	assert_int_equal(n, 0);

	/* Lane 1 lost too: slots 0 (its new window) and 1 and 3. */
	n = 0;
	assert_int_equal(engine_rx_reopen(e, 1, slots, NSLOTS, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(slots[0], 0);
	assert_int_equal(slots[1], 1);
	assert_int_equal(slots[2], 3);
	assert_int_equal(f->fake.nclosed, 4);
	assert_false(e->failed);

	/* A descriptor for a slot whose window was let go: refused. */
	wc.lane = 1;
	wc.inv_rkey = key[1];
	assert_int_equal(engine_rx_landed(e, &wc, 1), -EBADMSG);
	assert_true(e->failed);
	fx_free(f);
}

/* Sender with rails: slots 0 (lane 0) and 1 (lane 1) out, credited, taken by the core. */
static struct fx *watch_fx(bool windows_seen)
{
	struct fx *f = fx_new(false);
	struct engine *e = f->e;

	rails_add(f, windows_seen);
	for (uint32_t s = 0; s < 2; s++) {
		assert_int_equal(credit(f, s, s, 0x100 + s), 0);
	}
	for (uint32_t s = 0; s < 2; s++) {
		assert_int_equal(post(f, s, 0x100 + s), s);
		lane_slot_posted(e, s, s);
	}
	assert_int_equal(e->lanes[0].load, 1);
	assert_int_equal(e->lanes[1].load, 1);
	return f;
}

static void test_watchdog(void **state)
{
	struct fx *f = watch_fx(true);
	struct engine *e = f->e;
	int64_t now = now_ms();

	(void)state;
	/* Both lanes' slots held by the receiver for 6 s: a slow receiver, no lane lost. */
	e->lanes[0].credit_since = e->lanes[1].credit_since = now - 6000;
	assert_int_equal(engine_feature_rails.step(e), 0);
	assert_int_equal(f->fake.ndown, 0);

	/* Lane 1 moves (its slot credited) while lane 0 has waited 3 s: not yet. */
	e->lanes[0].credit_since = now - 3000;
	assert_int_equal(credit(f, 1, 1, 0x201), 0);
	assert_int_equal(e->lanes[1].load, 0);
	assert_true(e->lanes[1].credit_since >= now);
	assert_int_equal(engine_feature_rails.step(e), 0);
	assert_int_equal(f->fake.ndown, 0);
	assert_int_equal(e->lanes[0].state, LANE_UP);

	/* Lane 0 has waited 6 s, lane 1 moved since: lane 0 is lost, its keys dropped. */
	e->lanes[0].credit_since = now - 6000;
	assert_int_equal(engine_feature_rails.step(e), 0);
	assert_int_equal(f->fake.ndown, 1);
	assert_int_equal(f->fake.down_lane, 0);
	assert_int_equal(e->lanes[0].state, LANE_CLOSING);
	assert_string_equal(f->fake.notice,
			    "data lane 0: no credit for 6 s with work out; taken down");
	assert_false(e->failed);

	/* The last lane up is not the watchdog's: its end is the session's. */
	lane_slot_posted(e, 2, 1);
	e->lanes[1].credit_since = now - 60000;
	e->lanes[1].len = 1;
	e->lanes[1].busy_since = now - 60000;
	assert_int_equal(engine_feature_rails.step(e), 0);
	assert_int_equal(f->fake.ndown, 1);
	assert_int_equal(e->lanes[1].state, LANE_UP);
	e->lanes[1].len = 0;
	fx_free(f);

	/* The copy's fence: a slot's credit may come on any lane, the wait is no lane's. */
	f = watch_fx(false);
	e = f->e;
	e->lanes[0].credit_since = now - 60000;
	assert_int_equal(credit(f, 1, 1, 0x201), 0);
	assert_int_equal(engine_feature_rails.step(e), 0);
	assert_int_equal(f->fake.ndown, 0);
	assert_int_equal(e->lanes[0].state, LANE_UP);

	/* Its posts out with no completion for 6 s still are (the rule's first half). */
	e->lanes[0].len = 1;
	e->lanes[0].busy_since = now - 6000;
	assert_int_equal(engine_feature_rails.step(e), 0);
	assert_int_equal(f->fake.ndown, 1);
	assert_string_equal(f->fake.notice,
			    "data lane 0: no completion for 6 s with work out; taken down");
	e->lanes[0].len = 0;
	fx_free(f);
}

/* The sender's turn as the loop runs it: completions in, rails' step, the batch out. */
static void turn(struct fx *f)
{
	assert_int_equal(lane_on_xport(f->e), 0);
	assert_int_equal(engine_feature_rails.step(f->e), 0);
	assert_int_equal(lane_batch_flush(f->e), 0);
}

/* Lane i's probe, just posted: a zero-length signaled WRITE, no key, no immediate. */
static uint64_t probe_posted(struct fx *f, unsigned lane, unsigned nposted)
{
	const struct xport_wr *w = &f->fake.last;

	assert_int_equal(f->fake.nposted, nposted);
	assert_int_equal(w->opcode, XPORT_OP_WRITE);
	assert_true(w->flags & XPORT_SEND_SIGNALED);
	assert_int_equal(w->lane, lane);
	assert_int_equal(w->len, 0);
	assert_int_equal(w->rkey, 0);
	assert_int_equal(w->inv_rkey, 0);
	assert_int_equal(w->key, 0);
	assert_int_equal(f->e->lanes[lane].len, 1);
	return w->wr_id;
}

static struct fx *probe_fx(bool windows_seen, struct chan *chan)
{
	struct fx *f = watch_fx(windows_seen);

	assert_int_equal(chan_init(chan, NULL, 0), 0);
	f->p.chan = chan;
	return f;
}

static void probe_fx_free(struct fx *f, struct chan *chan)
{
	chan_done(chan);
	fx_free(f);
}

static void test_probe(void **state)
{
	struct chan chan;
	struct fx *f = probe_fx(true, &chan);
	struct engine *e = f->e;
	int64_t now = now_ms();
	uint64_t id;

	(void)state;
	/* Slots out on both lanes, nothing of ours out: quiet for 0.5 s, no probe yet. */
	e->lanes[0].credit_since = e->lanes[1].credit_since = now - 500;
	turn(f);
	assert_int_equal(f->fake.nposted, 0);

	/* Lane 0 quiet for 1.5 s: one probe on it, none on lane 1. */
	e->lanes[0].credit_since = now - 1500;
	turn(f);
	id = probe_posted(f, 0, 1);
	assert_int_equal(e->lanes[1].len, 0);
	/* None more while it is out, however long. */
	e->lanes[0].credit_since = now - 3000;
	turn(f);
	assert_int_equal(f->fake.nposted, 1);

	/* It completes: the lane is live, and the next waits a second from this one. */
	f->fake.wc = (struct xport_wc){ .wr_id = id, .opcode = XPORT_WC_WRITE, .lane = 0 };
	turn(f);
	assert_int_equal(e->lanes[0].len, 0);
	assert_int_equal(f->fake.nposted, 1);
	assert_int_equal(e->lanes[0].state, LANE_UP);

	/* A lane that moved (its slot credited) is not probed; one with no slots out neither. */
	e->lanes[1].credit_since = now - 5000;
	assert_int_equal(credit(f, 1, 1, 0x201), 0);
	turn(f);
	assert_int_equal(f->fake.nposted, 1);
	e->lanes[1].credit_since = now - 5000;
	turn(f);
	assert_int_equal(e->lanes[1].load, 0);
	assert_int_equal(f->fake.nposted, 1);

	/* Lane 1 with a slot out again, quiet: probed; its probe fails: lane 1 is lost. */
	lane_slot_posted(e, 2, 1);
	e->lanes[1].credit_since = now - 1500;
	turn(f);
	id = probe_posted(f, 1, 2);
	f->fake.wc = (struct xport_wc){
		.wr_id = id, .status = XPORT_WC_RETRY_EXC_ERR, .opcode = XPORT_WC_WRITE, .lane = 1
	};
	turn(f);
	assert_false(e->failed);
	assert_int_equal(e->lanes[1].state, LANE_DEAD);
	assert_int_equal(f->fake.ndown, 1);
	assert_int_equal(f->fake.down_lane, 1);
	assert_true(chan.out_len > 0); /* LANE_DOWN told */
	assert_non_null(strstr(f->fake.notice, "data lane 1: its probe failed"));

	/* The last lane up is probed too (its failure would be the session's). */
	e->lanes[0].credit_since = now - 1500;
	sleep(1); /* a second since lane 0's last probe */
	turn(f);
	probe_posted(f, 0, 3);
	probe_fx_free(f, &chan);

	/* The copy's fence: a credit may come on any lane, a quiet lane is no lane's wait. */
	f = probe_fx(false, &chan);
	f->e->lanes[0].credit_since = f->e->lanes[1].credit_since = now - 60000;
	turn(f);
	assert_int_equal(f->fake.nposted, 0);
	probe_fx_free(f, &chan);
}

/*
 * Sender, tx_take under churn: slots credited on either lane, taken for a
 * lane (or by the core from the top, as with no free slot on the lane it
 * picked), credited again. Each take must put on top the free slot whose
 * window is on that lane and that was credited last, as a scan of the free
 * slots finds it; the lanes' stacks fill with stale entries and are built
 * again on the way.
 */
static void test_take_churn(void **state)
{
	struct fx *f = fx_new(false);
	struct engine *e = f->e;
	uint32_t key[NSLOTS], seq[NSLOTS], n = 0, rng = 12345;
	uint8_t lane_of[NSLOTS];
	bool out[NSLOTS] = { false };

	(void)state;
	for (uint32_t s = 0; s < NSLOTS; s++) {
		lane_of[s] = (uint8_t)(s % 2);
		key[s] = 0x100 + s;
		seq[s] = n++;
		assert_int_equal(credit(f, s, lane_of[s], key[s]), 0);
	}
	for (unsigned it = 0; it < 4000; it++) {
		unsigned l;
		int want = -1;

		rng = rng * 1103515245u + 12345u;
		l = (rng >> 16) & 1;
		for (uint32_t s = 0; s < NSLOTS; s++) {
			if (!out[s] && lane_of[s] == l && (want < 0 || seq[s] > seq[want])) {
				want = (int)s;
			}
		}
		if (e->nfree_slots > 0 && ((rng >> 20) & 3) != 0) {
			uint32_t top;

			/* Every other round the core takes the top without asking. */
			if ((rng >> 22) & 1) {
				engine_tx_take(e, l);
				if (want >= 0) {
					assert_int_equal(e->free_slots[e->nfree_slots - 1],
							 (uint32_t)want);
				}
			}
			top = e->free_slots[e->nfree_slots - 1];
			(void)post(f, top, key[top]);
			out[top] = true;
		}
		/* One slot that is out comes back, on a lane of the credit's choice. */
		for (uint32_t s = (rng >> 8) % NSLOTS, k = 0; k < NSLOTS;
		     k++, s = (s + 1) % NSLOTS) {
			if (out[s] && ((rng >> 24) & 1)) {
				lane_of[s] = (uint8_t)((rng >> 25) & 1);
				key[s] = 0x1000 + n;
				seq[s] = n++;
				out[s] = false;
				assert_int_equal(credit(f, s, lane_of[s], key[s]), 0);
				break;
			}
		}
	}
	fx_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sender),	   cmocka_unit_test(test_receiver),
		cmocka_unit_test(test_watchdog),   cmocka_unit_test(test_probe),
		cmocka_unit_test(test_take_churn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
