/* SPDX-License-Identifier: MIT */
/*
 * Rails, both roles (PROTO_CAP_RAILS on both ends; PROTOCOL.md "Rails"): a
 * data lane lost mid-transfer while others are up does not end the session.
 *
 * Each side counts, per lane, the posts that matter to the other (the
 * sender's slot descriptors, the receiver's credits) and the receives it
 * has taken (descriptors, credits). A side that loses a lane (its first
 * failed completion there), or hears that its peer did (LANE_DOWN) and
 * stops the lane itself, takes nothing more from it once that first failed
 * completion is in: every completion the lane made before is taken first,
 * so its count is final. It then tells the peer (LANE_DOWN with that
 * count). With both counts known, each side posts again on the lanes that
 * are up exactly what the other did not take: the sender the chunks beyond
 * the receiver's count of descriptors (same slot, same descriptor, sealed
 * again under the new lane's key: the receiver is authoritative), the
 * receiver the credits beyond the sender's count. Nothing is lost, nothing
 * twice. The last lane lost fails the session as before.
 *
 * Which lane a slot goes on is the core's (lane_pick in engine_lane.c).
 */
#include "engine-internal.h"
#include "engine_fence.h"

#include "hello.h"

/*
 * The session state of rails (on in every session with lanes: the lanes
 * still up are counted, and a test's lane kills, without rails too).
 * Sender: chunks to post again, in order; receiver: slots whose credit went
 * on a lane lost before the sender took it.
 */
struct rails_state {
	uint32_t *repost;
	uint32_t nrepost;
	uint32_t *recredit;
	uint32_t nrecredit;
	unsigned lanes_up;
	unsigned lanes_killed; /* tests: ENGINE_FAULT_KILL_LANE */
	bool credit_wait;      /* sender: a slot's credit comes on its own lane (rails_watch) */
	/* Sender, credit_wait: each lane's last probe (now_ms()) and its wr_id while out. */
	int64_t probed[XPORT_MAX_LANES];
	uint64_t probe_id[XPORT_MAX_LANES];
};

extern const struct engine_feature engine_feature_rails;

static struct rails_state *rails_of(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_rails);
}

static int rails_setup(struct engine *e)
{
	struct rails_state *rs = rails_of(e);
	const struct engine_params *p = e->p;

	rs->lanes_up = p->x->nlanes;
	if (!e->rails) {
		return 0;
	}
	rs->credit_wait = !e->role->peer_writes && engine_credit_on_slot_lane(e);
	if (e->role->peer_writes) {
		rs->recredit = calloc(p->slots, sizeof(*rs->recredit));
	} else {
		rs->repost = calloc(e->pool->nchunks, sizeof(*rs->repost));
	}
	if (!rs->recredit && !rs->repost) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	return 0;
}

static void rails_free(struct engine *e)
{
	struct rails_state *rs = rails_of(e);
	free(rs->repost);
	free(rs->recredit);
}

static int all_lanes_lost(struct engine *e, unsigned lane, const char *why)
{
	return engine_fail(e, PERR_TRANSPORT, -EIO,
			   "data transport: every data lane is down (lane %u: %s)", lane, why);
}

/* A lane stops being up: nothing new goes on it (the features' too: a window's slots). */
static void lane_leave(struct engine *e, unsigned lane)
{
	e->lanes[lane].state = LANE_CLOSING;
	rails_of(e)->lanes_up--;
	engine_lane_closing(e, lane);
}

/*
 * Stop a lane that is up (the peer lost it, or a test kills it): nothing new
 * goes on it, and its completions are taken until its first failed one.
 */
static int lane_stop(struct engine *e, unsigned lane, const char *why)
{
	struct rails_state *rs = rails_of(e);
	struct xport *x = e->p->x;
	int r;

	if (!x->ops->lane_down) {
		return engine_fail(
		    e, PERR_TRANSPORT, -EOPNOTSUPP,
		    "data lane %u is down (%s) and the transport cannot stop it alone", lane, why);
	}
	lane_leave(e, lane);
	r = x->ops->lane_down(x, lane);
	if (r < 0) {
		return engine_fail(e, PERR_TRANSPORT, r, "stop data lane %u: %s", lane,
				   strerror(-r));
	}
	return rs->lanes_up == 0 && e->rails ? all_lanes_lost(e, lane, why) : 0;
}

/*
 * The first counted post still in the lane's queue (its index among the
 * counted ones), or the count of them when none is: every post before it
 * completed, so the peer took it.
 */
static uint64_t lane_first_open(const struct lane *l)
{
	for (unsigned k = 0; k < l->len; k++) {
		const struct lane_ent *le = &l->fifo[(l->head + k) % l->cap];

		if (le->idx) {
			return le->idx - 1;
		}
	}
	return l->posted;
}

/*
 * A lost lane's queue, with the peer's count n: what the peer took is done,
 * what it did not goes again on the others (rails_step), in the order it went.
 */
static void resolve_queue(struct engine *e, struct lane *l, uint64_t n)
{
	struct rails_state *rs = rails_of(e);
	bool sender = !e->role->peer_writes;

	for (unsigned k = 0; k < l->len; k++) {
		const struct lane_ent *le = &l->fifo[(l->head + k) % l->cap];

		if (!le->idx) {
			continue;
		}
		if (le->idx - 1 < n) {
			/* Taken there: its completion went with the lane. */
			if (sender && le->chunk >= 0) {
				lane_chunk_sent(e, (uint32_t)le->chunk);
			}
			continue;
		}
		if (sender) {
			rs->repost[rs->nrepost++] = (uint32_t)le->chunk;
		} else {
			rs->recredit[rs->nrecredit++] = le->slot;
		}
	}
	l->head = l->len = 0;
	l->load = 0;
	l->busy_since = 0;
}

/*
 * The slot fence's part (memory windows): the receiver's slots whose
 * windows were on the lane are credited again under fresh keys, the
 * sender's chunks that go again wait for them.
 */
static int resolve_fence(struct engine *e, unsigned lane, uint32_t before)
{
	struct rails_state *rs = rails_of(e);
	uint32_t n;
	int r;

	if (!e->role->peer_writes) {
		r = engine_tx_resolved(e, lane, rs->repost + before, rs->nrepost - before);
		return r == ENGINE_DECLINED ? 0 : r;
	}
	n = rs->nrecredit - before;
	r = engine_rx_reopen(e, lane, rs->recredit + before, e->p->slots - before, &n);
	if (r == 0) {
		rs->nrecredit = before + n;
	}
	return r == ENGINE_DECLINED ? 0 : r;
}

/* Both counts of a lost lane known: what the peer did not take goes again on the others. */
static int rails_resolve(struct engine *e, unsigned lane)
{
	struct rails_state *rs = rails_of(e);
	struct lane *l = &e->lanes[lane];
	uint64_t first = lane_first_open(l), n = l->peer_count;
	bool sender = !e->role->peer_writes;
	uint32_t before = sender ? rs->nrepost : rs->nrecredit;
	int r;

	if (n < first || n > l->posted) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "LANE_DOWN: the peer took %" PRIu64
				   " %s on lane %u, but %" PRIu64
				   " went there and it took the first %" PRIu64 " already",
				   n, sender ? "slots" : "credits", lane, l->posted, first);
	}
	resolve_queue(e, l, n);
	r = resolve_fence(e, lane, before);
	if (r < 0) {
		return r;
	}
	if (e->p->ev.notice) {
		char text[160];

		snprintf(
		    text, sizeof(text), "data lane %u lost; %u %s again on the %u lane%s still up",
		    lane, sender ? rs->nrepost - before : rs->nrecredit - before,
		    sender ? "slots go" : "credits go", rs->lanes_up, rs->lanes_up == 1 ? "" : "s");
		e->p->ev.notice(e->p->ev.ud, "transport", text);
	}
	return 0;
}

/* Our count on a lane is final: the peer hears it, and the lane is resolved once both are known. */
static int lane_dead(struct engine *e, unsigned lane)
{
	struct lane *l = &e->lanes[lane];
	struct msg m = { .type = MSG_LANE_DOWN };
	int r;

	l->state = LANE_DEAD;
	m.u.lane_down.lane = (uint8_t)lane;
	m.u.lane_down.count = l->taken;
	r = chan_queue(e->p->chan, &m);
	if (r < 0) {
		return engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
	}
	l->told = true;
	return l->heard ? rails_resolve(e, lane) : 0;
}

static int rails_lane_error(struct engine *e, const struct xport_wc *wc)
{
	struct rails_state *rs = rails_of(e);
	struct lane *l = &e->lanes[wc->lane];

	if (l->state == LANE_UP) {
		/* Lost here first: no other lane may take its work while it is the last. */
		if (rs->lanes_up == 1) {
			return engine_fail_lane(e, wc);
		}
		lane_leave(e, wc->lane);
		if (e->p->x->ops->lane_down) {
			/* Put the peer's side of it down too (tcp: at once). */
			(void)e->p->x->ops->lane_down(e->p->x, wc->lane);
		}
	}
	return lane_dead(e, wc->lane);
}

static int rails_lane_down_msg(struct engine *e, const struct msg_lane_down *ld)
{
	struct lane *l;
	int r;

	if (!e->rails || ld->lane >= e->p->x->nlanes || e->lanes[ld->lane].heard) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "unexpected LANE_DOWN for lane %u",
				   ld->lane);
	}
	l = &e->lanes[ld->lane];
	l->heard = true;
	l->peer_count = ld->count;
	if (l->state == LANE_UP) {
		r = lane_stop(e, ld->lane, "lost by the peer");
		if (r < 0) {
			return r;
		}
	}
	return l->state == LANE_DEAD ? rails_resolve(e, ld->lane) : 0;
}

/*
 * Tests (ENGINE_FAULT_KILL_LANE): lanes 0, 1, ... taken down, one every 4
 * slots from the 4th; after the turn's posts are queued, before they go, so
 * the lane is lost with work in flight.
 */
static int rails_test_kill(struct engine *e)
{
	struct rails_state *rs = rails_of(e);
	const struct engine_params *p = e->p;
	uint64_t slots = 0;

	if (!p->x || engine_probe(e) || !(p->faults & ENGINE_FAULT_KILL_LANE) ||
	    rs->lanes_killed >= p->test_kill_lanes || rs->lanes_killed >= p->x->nlanes) {
		return 0;
	}
	for (unsigned i = 0; i < p->x->nlanes; i++) {
		slots += e->role->peer_writes ? e->lanes[i].taken : e->lanes[i].posted;
	}
	if (slots < 4 * (uint64_t)(rs->lanes_killed + 1)) {
		return 0;
	}
	unsigned lane = rs->lanes_killed++;

	return lane_is_up(e, lane) ? lane_stop(e, lane, "taken down by a test") : 0;
}

/*
 * How long a lane may have work out with no completion before rails takes
 * it down: a quarter of the idle timeout, within [5 s, 30 s]. A NIC fails a
 * lane whose peer is gone once its retries run out (seconds); this is the
 * backstop for a queue pair that neither completes nor fails (Soft-RoCE
 * after its link went down and up, an ACK timeout set very long). Taking
 * down a lane that was only slow costs nothing but the lane: its work goes
 * again on the others by the peer's count, as for any lost lane.
 */
static int64_t rails_stall_ms(const struct engine *e)
{
	int64_t idle = e->p->idle_timeout_ms > 0 ? e->p->idle_timeout_ms : 300000;

	return MIN(MAX(idle / 4, (int64_t)5000), (int64_t)30000);
}

/*
 * When lane j last moved: its last completion or credit (0: never, or not
 * since idle). Its probe alone out (rails_probe) is no move: it says the
 * queue pair lives, not that the receiver takes anything.
 */
static int64_t lane_moved(const struct engine *e, unsigned j)
{
	const struct lane *l = &e->lanes[j];

	if (l->len == 1 && l->fifo[l->head].wr_id == rails_of(e)->probe_id[j]) {
		return l->credit_since;
	}
	return MAX(l->busy_since, l->credit_since);
}

/*
 * Since when lane i has had work out with nothing moving on it, or 0 (*why
 * says which work): its posts with no completion; or, where a slot's credit
 * comes back only on its own lane (memory windows), its slots not credited
 * back. The receiver may hold those for its disk, so that wait counts only
 * while another lane up moved a stall's time after it: a receiver slow for
 * every lane is no lane lost, a lane whose credits are stuck while the
 * others carry the copy is (with the copy's fence its posts would fail).
 */
static int64_t lane_out_since(const struct engine *e, unsigned i, int64_t stall, const char **why)
{
	const struct lane *l = &e->lanes[i];
	int64_t since = l->len > 0 ? l->busy_since : 0, other = 0;

	*why = "no completion";
	if (!rails_of(e)->credit_wait || l->load == 0 || l->credit_since == 0) {
		return since;
	}
	for (unsigned j = 0; j < e->p->x->nlanes; j++) {
		if (j != i && e->lanes[j].state == LANE_UP) {
			other = MAX(other, lane_moved(e, j));
		}
	}
	if (other - l->credit_since < stall || (since && since <= l->credit_since)) {
		return since;
	}
	*why = "no credit";
	return l->credit_since;
}

/*
 * How long a lane may wait for its credits with nothing of ours out on it
 * before rails_probe asks its queue pair whether it still works.
 */
#define RAILS_PROBE_MS 1000

/*
 * Sender, where a slot's credit comes back only on its own lane (memory
 * windows): a lane whose slots all wait at the receiver has nothing of ours
 * out, so neither its ACK timeout nor the watchdog's "no completion" can see
 * its queue pair die, and the receiver may hold those slots for its disk
 * as long as it likes. Once such a lane was quiet RAILS_PROBE_MS (no credit,
 * no slot out, no probe), a zero-length RDMA WRITE goes on it, signaled: no
 * key, no address (IB C9-88: a responder checks neither for zero bytes),
 * no immediate, so it consumes no receive and the peer's engine never sees
 * it. A live lane completes it; a dead one fails it once its retries run
 * out (7 ACK timeouts, --ack-timeout) and the lane is lost through its
 * failed completion like any other; one that does neither has work out for
 * the watchdog. At most one a second per waiting lane: nothing on a lane
 * that moves.
 */
static int rails_probe(struct engine *e, unsigned i, int64_t *now)
{
	struct rails_state *rs = rails_of(e);
	struct lane *l = &e->lanes[i];
	struct xport_wr wr = { .opcode = XPORT_OP_WRITE, .flags = XPORT_SEND_SIGNALED, .lane = i };
	int r;

	if (!rs->credit_wait || l->state != LANE_UP || l->load == 0 || l->len > 0) {
		return 0;
	}
	*now = *now ? *now : now_ms();
	if (*now - MAX(l->credit_since, rs->probed[i]) < RAILS_PROBE_MS) {
		return 0;
	}
	r = lane_push(e, &wr, -1);
	if (r >= 0) {
		rs->probed[i] = *now;
		rs->probe_id[i] = wr.wr_id;
	}
	return r;
}

/*
 * Rails' watchdog, the one rule: a lane that may be dead is probed
 * (rails_probe), and a lane with work out (lane_out_since) and nothing
 * moving on it for too long is lost.
 */
static int rails_watch(struct engine *e)
{
	struct rails_state *rs = rails_of(e);
	int64_t now = 0, stall = rails_stall_ms(e);

	for (unsigned i = 0; i < e->p->x->nlanes; i++) {
		const char *why = NULL;
		int r = rails_probe(e, i, &now);
		int64_t since = r >= 0 && rs->lanes_up > 1 && e->lanes[i].state == LANE_UP
				    ? lane_out_since(e, i, stall, &why)
				    : 0;
		char text[128];

		if (r < 0) {
			return r;
		}
		if (since == 0) {
			continue;
		}
		now = now ? now : now_ms();
		if (now - since < stall) {
			continue;
		}
		snprintf(text, sizeof(text),
			 "data lane %u: %s for %lld s with work out; taken down", i, why,
			 (long long)((now - since) / 1000));
		if (e->p->ev.notice) {
			e->p->ev.notice(e->p->ev.ud, "transport", text);
		}
		r = lane_stop(e, i, why);
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* Each turn: a lost lane's chunks or credits on the lanes that are up. */
static int rails_step(struct engine *e)
{
	struct rails_state *rs = rails_of(e);
	uint32_t done = 0;
	int r = e->rails && e->p->x ? rails_watch(e) : 0;

	while (r >= 0 && done < rs->nrepost) {
		int pick = lane_pick(e, 2);

		/* In order; a slot whose window was lost waits for its fresh credit. */
		if (pick < 0 || !engine_tx_ready(e, e->chunks[rs->repost[done]].slot)) {
			break;
		}
		r = tx_post_again(e, rs->repost[done], (unsigned)pick);
		if (r >= 0) {
			done++;
		}
	}
	if (done > 0) {
		memmove(rs->repost, rs->repost + done, (rs->nrepost - done) * sizeof(*rs->repost));
		rs->nrepost -= done;
	}
	done = 0;
	while (r >= 0 && done < rs->nrecredit) {
		int pick = lane_pick(e, 1);

		if (pick < 0) {
			break;
		}
		r = rx_credit_post(e, rs->recredit[done], (unsigned)pick);
		if (r >= 0) {
			done++;
		}
	}
	if (done > 0) {
		memmove(rs->recredit, rs->recredit + done,
			(rs->nrecredit - done) * sizeof(*rs->recredit));
		rs->nrecredit -= done;
	}
	return r < 0 ? r : 0;
}

/* A lost lane's slots go on the others: files only (a bench fails as before). */
static bool rails_enable(struct engine *e)
{
	const struct engine_params *p = e->p;

	e->rails = p->x && (p->role == ENGINE_SENDER || p->role == ENGINE_RECEIVER) &&
		   (p->peer_caps & PROTO_CAP_RAILS) && (hello_local_caps() & PROTO_CAP_RAILS);
	return true; /* the lanes' own bookkeeping, and a test's lane kills, are here too */
}

static int rails_feature_setup(struct engine *e)
{
	return e->p->x ? rails_setup(e) : 0; /* a probe has no lanes */
}

/* Said when a lane fails at its probe: the peer may hold its slots long after. */
static void rails_probe_failed(struct engine *e, const struct xport_wc *wc)
{
	struct rails_state *rs = rails_of(e);
	char text[128];

	if (!rs->credit_wait || wc->wr_id != rs->probe_id[wc->lane] ||
	    e->lanes[wc->lane].state != LANE_UP || !e->p->ev.notice) {
		return;
	}
	snprintf(text, sizeof(text), "data lane %u: its probe failed (%s) while its slots wait",
		 wc->lane, xport_wc_status_str(wc->status));
	e->p->ev.notice(e->p->ev.ud, "transport", text);
}

/* A lane's failed completion: with rails, its slots go on the others. */
static int rails_on_lane_error(struct engine *e, const struct xport_wc *wc)
{
	int r;

	if (!e->rails) {
		return ENGINE_DECLINED;
	}
	rails_probe_failed(e, wc);
	r = rails_lane_error(e, wc);
	return r < 0 ? r : 0;
}

static int rails_on_lane_down(struct engine *e, struct msg *m)
{
	return rails_lane_down_msg(e, &m->u.lane_down);
}

static const struct engine_msg_row rails_msgs[] = {
	{ MSG_LANE_DOWN, ENGINE_ROLES_ALL, ENGINE_MSG_ANYTIME, rails_on_lane_down },
	{ 0 },
};

const struct engine_feature engine_feature_rails = {
	.name = "rails",
	.enable = rails_enable,
	.state_size = sizeof(struct rails_state),
	.setup = rails_feature_setup,
	.step = rails_step,
	.late_step = rails_test_kill,
	.lane_error = rails_on_lane_error,
	.release = rails_free,
	.msgs = rails_msgs,
};
