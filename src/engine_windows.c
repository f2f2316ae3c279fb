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
 * Windows are agreed only where a lost lane ends the session anyway (one
 * lane, or an end without rails: mwfence_agreed), so a lost lane fails it
 * here too: its windows answer only its QP, and rails' re-posts would need
 * the receiver to open them again on another lane first (not done yet).
 */
#include "engine_rx.h"
#include "mwfence.h"

struct windows_state {
	/*
	 * Per ring slot. Receiver: the key its window was opened under, 0
	 * once a descriptor closed it. Sender: the key its credit carried, 0
	 * once the slot went out.
	 */
	uint32_t *key;
	uint8_t *lane;		  /* per ring slot: the lane its window answers on */
	struct xport_mr *desc_mr; /* receiver: the descriptors, remotely writable */
	bool credited;		  /* receiver: every slot's first window opened and credited */
	/*
	 * Receiver: the sender's engine is up (its first FILES came), so its
	 * receives for credits are posted: a credit before that would find
	 * none (an RNR error once the retries are spent).
	 */
	bool sender_up;
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
	if (!w->key || !w->lane) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	if (!e->role->peer_writes) {
		return 0;
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
		e->nfree_slots = 0;
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

static int windows_tx_credit(struct engine *e, const struct xport_wc *wc, uint32_t slot)
{
	struct windows_state *w = win_of(e);
	uint32_t key;

	if (mwfence_credit_key(true, wc->len, &key) < 0 || w->key[slot] != 0) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "credit for slot %u without a window's key, or twice", slot);
	}
	w->key[slot] = key;
	w->lane[slot] = (uint8_t)wc->lane;
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
	if (e->p->faults & ENGINE_FAULT_MW_REWRITE) {
		windows_test_rewrite(e, w, slot, data);
	}
	return 0;
}

/* A lost lane's windows answer only its QP: the session ends (rails not yet with windows). */
static int windows_lane_error(struct engine *e, const struct xport_wc *wc)
{
	return engine_fail_lane(e, wc);
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
};
