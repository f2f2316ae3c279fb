/* SPDX-License-Identifier: MIT */
/*
 * The zero-copy fence (memory windows; engine_params.windows, PROTOCOL.md
 * "Memory windows"), both roles, as a feature that takes the slot fence's
 * points (engine_fence.h). The receiver registers its ring for windows only
 * (engine.c: the ring's own key writes nothing) and its descriptors apart,
 * for the peer's plain writes (named in RING in the ring's keys' place);
 * it opens each slot's window on the lane it credits the slot on, under a
 * fresh key, and the credit carries that key (mwfence_credit_key); it takes
 * a descriptor only when its receive closed exactly that key
 * (xport_wc_closed_window), and then keeps no private copy: the slot is out
 * of the peer's reach already. The sender starts with no slot: each comes
 * with its credit (the first ones once the sender's first FILES shows its
 * engine up, its receives posted), and goes out on its window's lane, the payload written
 * through the window's key and the descriptor's SEND closing it.
 *
 * With rails (engine_rails.c), a lost lane's windows answer only its dead
 * QP. Once the lane is resolved (both counts known) the receiver lets each
 * window still open there go (window_close: released with its lane, its key
 * refused from then) and credits the slot again on a lane that is up, under
 * a fresh key: the slots whose credits the sender did not take, and those
 * it took but whose descriptors did not come. The sender never uses a key
 * of a lane that is not up: a free slot's is dropped when its lane stops,
 * a credit that comes on such a lane is kept back; a chunk that goes again
 * waits in its slot for the fresh credit (tx_ready). A fresh credit that
 * comes before the sender resolved the lane its slot went on is parked
 * until then: it is the slot's next chunk's if the receiver took the
 * descriptor, the same chunk's again if not. Without rails a lost lane
 * fails the session.
 */
#include "engine_rx.h"
#include "mwfence.h"

/* Sender, per ring slot: where its chunk is (rails). */
enum win_out {
	WIN_IDLE,   /* no chunk in it (free, or waiting for a credit) */
	WIN_OUT,    /* its chunk went out on out_lane; the next credit frees it */
	WIN_PARKED, /* out on a lane lost, not resolved yet: a fresh key came, kept */
	WIN_AGAIN,  /* its chunk goes again into it: under the next key (or the one kept) */
};

struct windows_state {
	/*
	 * Per ring slot. Receiver: the key its window was opened under, 0
	 * once a descriptor closed it. Sender: the key its credit carried, 0
	 * once the slot went out.
	 */
	uint32_t *key;
	uint8_t *lane;		  /* per ring slot: the lane its window answers on */
	uint8_t *out;		  /* sender, per ring slot: enum win_out */
	uint8_t *out_lane;	  /* sender, per ring slot: the lane its chunk went on */
	struct xport_mr *desc_mr; /* receiver: the descriptors, remotely writable */
	bool credited;		  /* receiver: every slot's first window opened and credited */
	/*
	 * Receiver: the sender's engine is up (its first FILES came), so its
	 * receives for credits are posted: a credit before that would find
	 * none (an RNR error once the retries are spent).
	 */
	bool sender_up;
	/*
	 * Sender: per lane, slots made free with their window on it, newest on
	 * top (lstack, lcap entries a lane; lsn: how many): the candidates of
	 * tx_take, each checked when looked at (one the core took since, or
	 * whose key went with its lane, is dropped then), so a take costs O(1)
	 * over time, not a scan of the free slots.
	 */
	uint32_t *lstack, lcap;
	uint32_t lsn[XPORT_MAX_LANES];
	/* Sender, ENGINE_FAULT_MW_REWRITE: the first slot posted and the key it closed. */
	unsigned posted;
	uint32_t first_slot, first_key;
};

extern const struct engine_feature engine_feature_windows;

static struct windows_state *win_of(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_windows);
}

static bool windows_enable(struct engine *e)
{
	return e->p->windows && !e->p->seal_slots &&
	       (e->p->role == ENGINE_SENDER || e->p->role == ENGINE_RECEIVER);
}

static int windows_setup(struct engine *e)
{
	struct windows_state *w = win_of(e);
	struct xport *x = e->p->x;
	int r;

	w->key = calloc(e->p->slots, sizeof(*w->key));
	w->lane = calloc(e->p->slots, sizeof(*w->lane));
	w->out = calloc(e->p->slots, sizeof(*w->out));
	w->out_lane = calloc(e->p->slots, sizeof(*w->out_lane));
	if (!w->key || !w->lane || !w->out || !w->out_lane) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	if (!e->role->peer_writes) {
		w->lcap = 2 * e->p->slots;
		w->lstack = calloc((size_t)w->lcap * XPORT_MAX_LANES, sizeof(*w->lstack));
		return w->lstack ? 0 : engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	r = x->ops->reg_mr(x, e->desc_area, (size_t)e->p->slots * e->desc_len,
			   XPORT_ACCESS_LOCAL | XPORT_ACCESS_REMOTE_WRITE, &w->desc_mr);
	return r < 0 ? engine_fail(e, PERR_TRANSPORT, r,
				   "register the slot descriptors with the transport: %s",
				   strerror(-r))
		     : 0;
}

/* Receiver: RING names the descriptors' registration; sender: no slot before its credit. */
static int windows_ring(struct engine *e, struct msg_ring *ring)
{
	struct windows_state *w = win_of(e);

	if (!e->role->peer_writes) {
		tx_free_clear(e);
		return 0;
	}
	ring->desc_addr = w->desc_mr->iova;
	for (unsigned i = 0; i < ring->nkeys; i++) {
		ring->rkey[i] = w->desc_mr->lane_rkey[i];
	}
	return 0;
}

/* Receiver: the sender's first FILES came, its engine is up. */
static void windows_rx_batch(struct engine *e)
{
	win_of(e)->sender_up = true;
}

/* Receiver, once the sender is up: every slot's window opened and credited, the lanes in turn. */
static int windows_step(struct engine *e)
{
	struct windows_state *w = win_of(e);
	int r = 0;

	if (!e->role->peer_writes || !w->sender_up || w->credited || e->failed) {
		return 0;
	}
	w->credited = true;
	for (uint32_t s = 0; s < e->p->slots && r >= 0; s++) {
		e->rring[s].lane = s % e->p->x->nlanes;
		r = rx_ring_credit(e, s, 0);
	}
	return r < 0 ? r : 0;
}

static int windows_rx_landed(struct engine *e, const struct xport_wc *wc, uint32_t slot)
{
	struct windows_state *w = win_of(e);

	/* No open window (a second descriptor for the slot): nothing can close it. */
	if (slot >= e->p->slots || w->key[slot] == 0 || !xport_wc_closed_window(wc, w->key[slot])) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "slot %u's descriptor did not close its window (closed %s0x%x)",
				   slot, wc->invalidated ? "" : "none, ", wc->inv_rkey);
	}
	w->key[slot] = 0;
	return 0;
}

/* Held: its window was closed by the descriptor's SEND; let go: opened with its credit. */
static int windows_rx_fence(struct engine *e, uint32_t slot, bool on)
{
	(void)e, (void)slot, (void)on;
	return 0;
}

static int windows_rx_credit(struct engine *e, uint32_t slot, struct xport_wr *wr)
{
	struct windows_state *w = win_of(e);
	struct xport *x = e->p->x;
	uint32_t key;
	int r = x->ops->window_open(x, e->mr, slot, wr->lane, (uint64_t)slot * e->p->chunk_size,
				    e->p->chunk_size, &key);

	if (r < 0) {
		const char *why = x->ops->last_error ? x->ops->last_error(x) : NULL;

		return engine_fail(e, PERR_TRANSPORT, r, "open the window of slot %u: %s%s%s", slot,
				   strerror(-r), why ? ": " : "", why ? why : "");
	}
	w->key[slot] = key;
	w->lane[slot] = (uint8_t)wr->lane;
	wr->key = key;
	return 0;
}

/* Sender: has the lane a chunk went on been resolved (rails: both counts known)? */
static bool lane_resolved(const struct engine *e, unsigned lane)
{
	const struct lane *l = &e->lanes[lane];

	return l->state == LANE_DEAD && l->told && l->heard;
}

/* Sender: lane l's candidates again from the free slots (its stack was full of stale ones). */
static void win_stack_rebuild(struct engine *e, struct windows_state *w, unsigned l)
{
	w->lsn[l] = 0;
	for (uint32_t i = 0; i < e->nfree_slots; i++) {
		uint32_t s = e->free_slots[i];

		if (w->lane[s] == l && w->key[s] != 0) {
			w->lstack[(size_t)l * w->lcap + w->lsn[l]++] = s;
		}
	}
}

/* Sender: slot goes free with its window on w->lane[slot]: a candidate of that lane's takes. */
static void win_free_note(struct engine *e, struct windows_state *w, uint32_t slot)
{
	unsigned l = w->lane[slot];

	if (w->lsn[l] == w->lcap) {
		win_stack_rebuild(e, w, l);
	}
	w->lstack[(size_t)l * w->lcap + w->lsn[l]++] = slot;
}

static int windows_tx_credit(struct engine *e, const struct xport_wc *wc, uint32_t slot)
{
	struct windows_state *w = win_of(e);
	uint32_t key;

	if (mwfence_credit_key(true, wc->len, &key) < 0 || w->key[slot] != 0) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "credit for slot %u without a window's key, or twice", slot);
	}
	/* Its chunk went on a lane lost: which chunk the key is for is known once resolved. */
	bool unsure = w->out[slot] == WIN_OUT && !lane_is_up(e, w->out_lane[slot]) &&
		      !lane_resolved(e, w->out_lane[slot]);

	if (!lane_is_up(e, wc->lane)) {
		/* A window on a lane going down: the receiver opens it again once resolved. */
		if (w->out[slot] != WIN_AGAIN && !unsure) {
			w->out[slot] = WIN_IDLE;
		}
		return ENGINE_FENCE_KEPT;
	}
	w->key[slot] = key;
	w->lane[slot] = (uint8_t)wc->lane;
	if (w->out[slot] == WIN_AGAIN) {
		return ENGINE_FENCE_KEPT; /* its chunk goes again under this key */
	}
	if (unsure) {
		w->out[slot] = WIN_PARKED;
		return ENGINE_FENCE_KEPT;
	}
	w->out[slot] = WIN_IDLE;
	win_free_note(e, w, slot);
	return 0;
}

/* ENGINE_FAULT_MW_REWRITE: the second slot's payload into the first, through its closed key. */
static void windows_test_rewrite(struct engine *e, struct windows_state *w, uint32_t slot,
				 struct xport_wr *data)
{
	if (w->posted == 0) {
		w->first_slot = slot;
		w->first_key = data->rkey;
	} else if (w->posted == 1) {
		data->rkey = w->first_key;
		data->remote_addr = e->rring_addr + (uint64_t)w->first_slot * e->p->chunk_size;
	}
	w->posted++;
}

/* The slot goes on its window's lane: the payload through the window, the SEND closing it. */
static int windows_tx_window(struct engine *e, uint32_t slot, unsigned *io_lane,
			     struct xport_wr *data, struct xport_wr *desc)
{
	struct windows_state *w = win_of(e);
	unsigned lane = w->lane[slot];

	if (w->key[slot] == 0 || !lane_is_up(e, lane)) {
		return engine_fail(e, PERR_INTERNAL, -EINVAL, "slot %u has no open window", slot);
	}
	/* Cannot happen: a lane's queue holds every slot's two requests; be loud if it does. */
	if (!lane_room(e, lane, 2)) {
		return engine_fail(e, PERR_INTERNAL, -ENOSPC, "no room on slot %u's lane", slot);
	}
	*io_lane = lane;
	data->lane = desc->lane = lane;
	data->rkey = w->key[slot];
	desc->rkey = e->rkey[lane];
	desc->inv_rkey = w->key[slot];
	w->key[slot] = 0;
	w->out[slot] = WIN_OUT;
	w->out_lane[slot] = (uint8_t)lane;
	if (e->p->faults & ENGINE_FAULT_MW_REWRITE) {
		windows_test_rewrite(e, w, slot, data);
	}
	return 0;
}

/* Without rails a lost lane's windows cannot be opened again: the session ends. */
static int windows_lane_error(struct engine *e, const struct xport_wc *wc)
{
	return e->rails ? ENGINE_DECLINED : engine_fail_lane(e, wc);
}

/*
 * Sender: a lane stops: every key that answers on it is dropped (the
 * receiver opens those windows again once the lane is resolved): its free
 * slots wait for fresh credits, a parked key is given up.
 */
static void windows_lane_closing(struct engine *e, unsigned lane)
{
	struct windows_state *w = win_of(e);
	uint32_t kept = 0;

	if (e->role->peer_writes) {
		return;
	}
	for (uint32_t s = 0; s < e->p->slots; s++) {
		if (w->key[s] != 0 && w->lane[s] == lane) {
			w->key[s] = 0;
			w->out[s] = w->out[s] == WIN_PARKED ? WIN_OUT : w->out[s];
		}
	}
	for (uint32_t i = 0; i < e->nfree_slots; i++) {
		if (w->key[e->free_slots[i]] != 0) {
			e->free_slots[kept++] = e->free_slots[i];
		}
	}
	/* The stack again from what stays, in its order. */
	tx_free_clear(e);
	for (uint32_t i = 0; i < kept; i++) {
		tx_free_push(e, e->free_slots[i]);
	}
	w->lsn[lane] = 0;
}

/*
 * Receiver: lane resolved: every window still open on it (its credit not
 * taken, or its descriptor not come) let go with its lane, its slot
 * credited again (the whole list: those rails found are among them).
 */
static int windows_rx_reopen(struct engine *e, unsigned lane, uint32_t *slots, uint32_t cap,
			     uint32_t *io_n)
{
	struct windows_state *w = win_of(e);
	struct xport *x = e->p->x;
	uint32_t n = 0;

	for (uint32_t s = 0; s < e->p->slots; s++) {
		if (w->key[s] == 0 || w->lane[s] != lane) {
			continue;
		}
		if (n == cap) {
			return engine_fail(e, PERR_INTERNAL, -ENOSPC, "slots to credit again");
		}
		/*
		 * Released with its lane (its key refused from then); should that
		 * fail, the window still answers only the dead QP.
		 */
		if (x->ops->window_close) {
			(void)x->ops->window_close(x, e->mr, s, lane);
		}
		w->key[s] = 0;
		slots[n++] = s;
	}
	*io_n = n;
	return 0;
}

/*
 * Sender: lane resolved: the chunks that go again wait in their slots for
 * fresh keys (or take the one parked); a parked key whose chunk the
 * receiver took frees its slot.
 */
static int windows_tx_resolved(struct engine *e, unsigned lane, const uint32_t *chunks, uint32_t n)
{
	struct windows_state *w = win_of(e);
	int r = 0;

	for (uint32_t i = 0; i < n; i++) {
		w->out[e->chunks[chunks[i]].slot] = WIN_AGAIN;
	}
	for (uint32_t s = 0; s < e->p->slots && r >= 0; s++) {
		if (w->out[s] == WIN_PARKED && w->out_lane[s] == lane) {
			w->out[s] = WIN_IDLE;
			win_free_note(e, w, s);
			r = tx_slot_free(e, s);
		}
	}
	return r < 0 ? r : 0;
}

/*
 * Sender: a slot keeps the lane of its window, so the lane the core picked
 * by load (lane_pick) is honoured by putting on top a free slot whose
 * window is there (the last made free among them), when one is: the
 * lane's candidates, newest first, each dropped when it no longer holds.
 */
static void windows_tx_take(struct engine *e, unsigned lane)
{
	struct windows_state *w = win_of(e);
	uint32_t *stack = w->lstack + (size_t)lane * w->lcap;

	while (w->lsn[lane] > 0) {
		uint32_t s = stack[--w->lsn[lane]];

		if (tx_free_has(e, s) && w->lane[s] == lane && w->key[s] != 0) {
			tx_free_to_top(e, s);
			return;
		}
	}
}

/* Sender: a chunk goes again into its slot only under a fresh key. */
static int windows_tx_ready(struct engine *e, uint32_t slot)
{
	return win_of(e)->key[slot] != 0;
}

static void windows_stop(struct engine *e)
{
	struct windows_state *w = win_of(e);

	if (w->desc_mr) {
		e->p->x->ops->dereg_mr(e->p->x, w->desc_mr);
		w->desc_mr = NULL;
	}
}

static void windows_release(struct engine *e)
{
	struct windows_state *w = win_of(e);

	free(w->key);
	free(w->lane);
	free(w->out);
	free(w->out_lane);
	free(w->lstack);
}

const struct engine_feature engine_feature_windows = {
	.name = "windows",
	.enable = windows_enable,
	.setup = windows_setup,
	.step = windows_step,
	.lane_error = windows_lane_error,
	.stop = windows_stop,
	.release = windows_release,
	.state_size = sizeof(struct windows_state),
	.rx_batch = windows_rx_batch,
	.ring = windows_ring,
	.rx_landed = windows_rx_landed,
	.rx_fence = windows_rx_fence,
	.rx_credit = windows_rx_credit,
	.tx_credit = windows_tx_credit,
	.tx_window = windows_tx_window,
	.lane_closing = windows_lane_closing,
	.rx_reopen = windows_rx_reopen,
	.tx_resolved = windows_tx_resolved,
	.tx_ready = windows_tx_ready,
	.tx_take = windows_tx_take,
	.credit_on_slot_lane = true,
};
