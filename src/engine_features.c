/* SPDX-License-Identifier: MIT */
/*
 * The engine's features, in the order the core calls them (engine_feature.h):
 * the one place that lists them. A new feature is a file of its own with its
 * struct engine_feature, and a line here.
 */
#include "engine-internal.h"
#include "engine_fence.h"
#include "engine_rx.h"

extern const struct engine_feature engine_feature_sums, engine_feature_hashers,
    engine_feature_rails, engine_feature_partial, engine_feature_links, engine_feature_delete,
    engine_feature_xattrs, engine_feature_delta, engine_feature_pack, engine_feature_bench,
    engine_feature_zeros, engine_feature_device, engine_feature_seal, engine_feature_relay_rx,
    engine_feature_follow, engine_feature_slowhop, engine_feature_windows;

const struct engine_feature *const engine_features[] = {
	/* Workers first: at teardown their jobs go before what they hold. */
	&engine_feature_sums,
	&engine_feature_hashers,
	/* The lanes' slot keys, freed after the workers that hold copies are gone. */
	&engine_feature_seal,
	/* The zero-copy fence: a lost lane with windows fails before rails re-posts. */
	&engine_feature_windows,
	/* A lost lane's work goes on the others before the role posts more. */
	&engine_feature_rails,
	&engine_feature_partial,
	&engine_feature_links,
	&engine_feature_delete,
	&engine_feature_xattrs,
	&engine_feature_delta,
	&engine_feature_zeros,
	&engine_feature_device,
	/* After every feature that writes or keeps: what it tells is on the disk. */
	&engine_feature_relay_rx,
	&engine_feature_follow,
	&engine_feature_slowhop,
	&engine_feature_pack,
	&engine_feature_bench,
};

const unsigned engine_nfeatures = sizeof(engine_features) / sizeof(engine_features[0]);
_Static_assert(sizeof(engine_features) / sizeof(engine_features[0]) <= ENGINE_FEATURES_MAX,
	       "the engine's table of features on holds them all");

#define ALIGN_FILE(n) (((n) + ENGINE_FILE_ALIGN - 1) & ~(size_t)(ENGINE_FILE_ALIGN - 1))
_Static_assert(_Alignof(struct efile) <= ENGINE_FILE_ALIGN, "blocks keep the entries aligned");

/*
 * A file-table entry: the core's struct efile, then a block for each
 * feature on that keeps per-file state this session, in the list's order.
 * A session with none (a plain copy) has entries of sizeof(struct efile).
 */
static void engine_features_layout(struct engine *e)
{
	size_t at = ALIGN_FILE(sizeof(struct efile));

	for (unsigned i = 0; i < e->nfeat; i++) {
		size_t n = e->feat[i]->file_size ? e->feat[i]->file_size(e) : 0;

		if (n) {
			e->fstate[e->nfstate].ft = e->feat[i];
			e->fstate[e->nfstate++].off = (uint32_t)at;
			at += ALIGN_FILE(n);
		}
	}
	e->file_stride = e->nfstate ? at : sizeof(struct efile);
}

/*
 * Which features are on for this session: they alone are called from here
 * on. A feature's session state is there for its enable already (which may
 * record its flags in it), and freed at once when it is off. -ENOMEM: the
 * caller frees what was allocated (engine_features_free).
 */
int engine_features_choose(struct engine *e)
{
	for (unsigned i = 0; i < engine_nfeatures; i++) {
		const struct engine_feature *ft = engine_features[i];
		unsigned k = e->nfeat;

		assert(k < ENGINE_FEATURES_MAX);
		if (ft->state_size) {
			e->sstate[k] = calloc(1, ft->state_size);
			if (!e->sstate[k]) {
				return -ENOMEM;
			}
		}
		e->feat[k] = ft;
		e->nfeat++;
		if (ft->enable && !ft->enable(e)) {
			e->nfeat--;
			e->feat[k] = NULL;
			free(e->sstate[k]);
			e->sstate[k] = NULL;
		}
	}
	engine_features_layout(e);
	return 0;
}

void engine_features_free(struct engine *e)
{
	for (unsigned i = 0; i < ENGINE_FEATURES_MAX; i++) {
		free(e->sstate[i]);
		e->sstate[i] = NULL;
	}
}

void *engine_feature_state(const struct engine *e, const struct engine_feature *ft)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i] == ft) {
			return e->sstate[i];
		}
	}
	return NULL;
}

int engine_features_setup(struct engine *e)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->setup ? e->feat[i]->setup(e) : 0;

		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* The features' steps: before the role's (late: false) or after it. */
int engine_features_step(struct engine *e, bool late)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int (*step)(struct engine *) = late ? e->feat[i]->late_step : e->feat[i]->step;
		int r = step ? step(e) : 0;

		if (r < 0) {
			return r;
		}
	}
	return 0;
}

int engine_features_end(struct engine *e)
{
	int started = 0;

	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->on_end ? e->feat[i]->on_end(e) : 0;

		if (r < 0) {
			return r;
		}
		started |= r > 0;
	}
	return started;
}

bool engine_busy(const struct engine *e)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->busy && e->feat[i]->busy(e)) {
			return true;
		}
	}
	return false;
}

bool engine_holds(const struct engine *e)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->holds && e->feat[i]->holds(e)) {
			return true;
		}
	}
	return false;
}

void engine_features_file_init(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->file_init) {
			e->feat[i]->file_init(e, f);
		}
	}
}

void engine_features_file_release(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->file_release) {
			e->feat[i]->file_release(e, f);
		}
	}
}

int engine_features_lane_error(struct engine *e, const struct xport_wc *wc)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->lane_error ? e->feat[i]->lane_error(e, wc) : ENGINE_DECLINED;

		if (r != ENGINE_DECLINED) {
			return r;
		}
	}
	return ENGINE_DECLINED;
}

/*
 * The receiver's points in an entry's life (engine_feature.h): each calls
 * the features that are on and have the hook, in the list's order.
 */
void engine_rx_batch(struct engine *e)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->rx_batch) {
			e->feat[i]->rx_batch(e);
		}
	}
}

void engine_rx_attrs(struct engine *e, uint32_t id)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->rx_attrs) {
			e->feat[i]->rx_attrs(e, id);
		}
	}
}

int engine_rx_accept(struct engine *e, struct efile *f, const struct proto_file *pf, uint32_t *code,
		     char *text, size_t textlen, bool *ret_peer)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		const struct engine_feature *ft = e->feat[i];
		int r = ft->rx_accept ? ft->rx_accept(e, f, pf, code, text, textlen, ret_peer)
				      : ENGINE_DECLINED;

		if (r != ENGINE_DECLINED) {
			return r;
		}
	}
	return ENGINE_DECLINED;
}

uint32_t engine_rx_target(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		uint32_t code =
		    e->feat[i]->rx_target ? e->feat[i]->rx_target(e, f, text, textlen) : PERR_OK;

		if (code != PERR_OK) {
			return code;
		}
	}
	return PERR_OK;
}

uint32_t engine_rx_probe_target(struct engine *e, struct efile *f, bool *ret_taken, char *text,
				size_t textlen)
{
	*ret_taken = false;
	for (unsigned i = 0; i < e->nfeat && !*ret_taken; i++) {
		const struct engine_feature *ft = e->feat[i];
		uint32_t code = ft->rx_probe_target
				    ? ft->rx_probe_target(e, f, ret_taken, text, textlen)
				    : PERR_OK;

		if (code != PERR_OK) {
			return code;
		}
	}
	return PERR_OK;
}

uint32_t engine_rx_dir(struct engine *e, const struct efile *f, char *text, size_t textlen)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		uint32_t code =
		    e->feat[i]->rx_dir ? e->feat[i]->rx_dir(e, f, text, textlen) : PERR_OK;

		if (code != PERR_OK) {
			return code;
		}
	}
	return PERR_OK;
}

int engine_rx_store(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->rx_store ? e->feat[i]->rx_store(e, f) : ENGINE_DECLINED;

		if (r != ENGINE_DECLINED) {
			return r;
		}
	}
	return ENGINE_DECLINED;
}

uint64_t engine_rx_range(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		uint64_t n = e->feat[i]->rx_range ? e->feat[i]->rx_range(e, f) : 0;

		if (n) {
			return n;
		}
	}
	return 0;
}

const char *engine_rx_range_holds(const struct engine *e, const struct efile *f, uint64_t off)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		const char *what =
		    e->feat[i]->rx_range_holds ? e->feat[i]->rx_range_holds(e, f, off) : NULL;

		if (what) {
			return what;
		}
	}
	return NULL;
}

void engine_rx_written(struct engine *e, struct efile *f, uint64_t off, uint32_t len,
		       const uint8_t *d)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->rx_written) {
			e->feat[i]->rx_written(e, f, off, len, d);
		}
	}
}

void engine_rx_named(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->rx_named) {
			e->feat[i]->rx_named(e, f);
		}
	}
}

void engine_rx_opened(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->rx_opened) {
			e->feat[i]->rx_opened(e, f);
		}
	}
}

int engine_rx_answered(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->rx_answered ? e->feat[i]->rx_answered(e, f) : 0;

		if (r < 0) {
			return r;
		}
	}
	return 0;
}

bool engine_rx_kept(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->rx_kept && e->feat[i]->rx_kept(e, f)) {
			return true;
		}
	}
	return false;
}

void engine_rx_complete(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->rx_complete) {
			e->feat[i]->rx_complete(e, f);
		}
	}
}

void engine_rx_settled(struct engine *e, const struct efile *f, enum engine_rx_end how)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->rx_settled) {
			e->feat[i]->rx_settled(e, f, how);
		}
	}
}

int engine_rx_durable(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->rx_durable ? e->feat[i]->rx_durable(e, f) : ENGINE_DECLINED;

		if (r != ENGINE_DECLINED) {
			return r;
		}
	}
	return ENGINE_DECLINED;
}

int engine_rx_slot(struct engine *e, uint32_t slot, uint32_t lane, const struct proto_desc *d)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r =
		    e->feat[i]->rx_slot ? e->feat[i]->rx_slot(e, slot, lane, d) : ENGINE_DECLINED;

		if (r != ENGINE_DECLINED) {
			return r;
		}
	}
	return ENGINE_DECLINED;
}

int engine_rx_unseal(struct engine *e, uint32_t slot, uint32_t lane, uint8_t *dst,
		     struct proto_desc *d, struct wjob *j)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->rx_unseal ? e->feat[i]->rx_unseal(e, slot, lane, dst, d, j)
					      : ENGINE_DECLINED;

		if (r != ENGINE_DECLINED) {
			return r;
		}
	}
	return ENGINE_DECLINED;
}

/* The sender's hooks (engine_feature.h). */
int engine_tx_offer(struct engine *e, const struct engine_src *s, const char **ret_first)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->tx_offer ? e->feat[i]->tx_offer(e, s, ret_first) : 0;

		if (r != 0) {
			return r;
		}
	}
	return 0;
}

int engine_tx_offered(struct engine *e, const struct proto_file *pf, uint32_t n)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->tx_offered ? e->feat[i]->tx_offered(e, pf, n) : 0;

		if (r < 0) {
			return r;
		}
	}
	return 0;
}

int engine_tx_skipped(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->tx_skipped ? e->feat[i]->tx_skipped(e, f) : 0;

		if (r != 0) {
			return r;
		}
	}
	return 0;
}

int engine_tx_opened(struct engine *e, struct efile *f, int fd, char *text, size_t textlen)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->tx_opened ? e->feat[i]->tx_opened(e, f, fd, text, textlen) : 0;

		if (r != 0) {
			return r;
		}
	}
	return 0;
}

int engine_tx_settled(struct engine *e, struct efile *f, int fd, char *text, size_t textlen)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r =
		    e->feat[i]->tx_settled ? e->feat[i]->tx_settled(e, f, fd, text, textlen) : 0;

		if (r != 0) {
			return r;
		}
	}
	return 0;
}

bool engine_tx_whole(const struct engine *e, const struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->tx_whole && e->feat[i]->tx_whole(e, f)) {
			return true;
		}
	}
	return false;
}

int engine_tx_read(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->tx_read ? e->feat[i]->tx_read(e, f) : ENGINE_DECLINED;

		if (r != ENGINE_DECLINED) {
			return r;
		}
	}
	return ENGINE_DECLINED;
}

void engine_tx_read_end(struct engine *e)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->tx_read_end) {
			e->feat[i]->tx_read_end(e);
		}
	}
}

/* Does a feature fill a chunk of its own with room left (a pack)? */
bool engine_tx_filling(const struct engine *e)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->tx_filling && e->feat[i]->tx_filling(e)) {
			return true;
		}
	}
	return false;
}

int engine_tx_claim(struct engine *e, uint32_t ci, struct efile *f, bool wait)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->tx_claim ? e->feat[i]->tx_claim(e, ci, f, wait) : READY_NONE;

		if (r != READY_NONE) {
			return r;
		}
	}
	return READY_NONE;
}

int engine_tx_post(struct engine *e, uint32_t ci)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->tx_post ? e->feat[i]->tx_post(e, ci) : READY_NONE;

		if (r != READY_NONE) {
			return r;
		}
	}
	return READY_NONE;
}

int engine_tx_flush(struct engine *e)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->tx_flush ? e->feat[i]->tx_flush(e) : 0;

		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* The ranges of every other kind than self's go first (one order for all ranges). */
int engine_tx_flush_others(struct engine *e, const struct engine_feature *self)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i] != self && e->feat[i]->tx_flush ? e->feat[i]->tx_flush(e) : 0;

		if (r < 0) {
			return r;
		}
	}
	return 0;
}

int engine_tx_zero(struct engine *e, struct efile *f, uint64_t off, uint64_t len, bool now)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->tx_zero) {
			return e->feat[i]->tx_zero(e, f, off, len, now);
		}
	}
	return -ENOTSUP; /* no feature sends ZEROS: the caller fails */
}

int engine_tx_same(struct engine *e, struct efile *f, uint64_t off, uint64_t len)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->tx_same) {
			return e->feat[i]->tx_same(e, f, off, len);
		}
	}
	return -ENOTSUP; /* no feature sends SAME ranges: the caller fails */
}

int engine_rx_open(struct engine *e, uint32_t h, uint32_t slot, uint32_t lane)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r =
		    e->feat[i]->rx_open ? e->feat[i]->rx_open(e, h, slot, lane) : ENGINE_DECLINED;

		if (r != ENGINE_DECLINED) {
			return r;
		}
	}
	return ENGINE_DECLINED;
}

int engine_tx_seal(struct engine *e, uint32_t ci, unsigned lane, uint32_t slot, uint8_t *stage,
		   uint32_t *io_len, struct file_hash **hash)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->tx_seal
			    ? e->feat[i]->tx_seal(e, ci, lane, slot, stage, io_len, hash)
			    : 0;

		if (r != 0) {
			return r; /* -errno, or ENGINE_TX_LATER: the feature pushes it */
		}
	}
	return 0;
}

int engine_tx_repost(struct engine *e, uint32_t ci)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->tx_repost ? e->feat[i]->tx_repost(e, ci) : 0;

		if (r < 0) {
			return r;
		}
	}
	return 0;
}

int engine_tx_source(struct engine *e, const struct engine_src **ret, char *why, size_t whylen)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		int r = e->feat[i]->tx_source ? e->feat[i]->tx_source(e, ret, why, whylen)
					      : ENGINE_DECLINED;

		if (r != ENGINE_DECLINED) {
			return r;
		}
	}
	return ENGINE_DECLINED;
}

uint64_t engine_tx_avail(const struct engine *e, const struct efile *f)
{
	uint64_t n = UINT64_MAX;

	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->tx_avail) {
			n = MIN(n, e->feat[i]->tx_avail(e, f));
		}
	}
	return n;
}

bool engine_tx_done_ready(struct engine *e, struct efile *f)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->tx_done_ready && !e->feat[i]->tx_done_ready(e, f)) {
			return false;
		}
	}
	return true;
}

uint32_t engine_tx_digest(struct engine *e, struct efile *f, uint8_t *hash, char *text,
			  size_t textlen)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		uint32_t code = e->feat[i]->tx_digest
				    ? e->feat[i]->tx_digest(e, f, hash, text, textlen)
				    : PERR_OK;

		if (code != PERR_OK) {
			return code;
		}
	}
	return PERR_OK;
}

/*
 * The slot fence's points (engine_fence.h): the first feature that does
 * not decline answers; ENGINE_DECLINED when none takes it.
 */
#define FENCE_ASK(hook, ...)                                                                   \
	for (unsigned i = 0; i < e->nfeat; i++) {                                              \
		int r = e->feat[i]->hook ? e->feat[i]->hook(e, __VA_ARGS__) : ENGINE_DECLINED; \
                                                                                               \
		if (r != ENGINE_DECLINED) {                                                    \
			return r;                                                              \
		}                                                                              \
	}                                                                                      \
	return ENGINE_DECLINED

int engine_fence_ring(struct engine *e, struct msg_ring *ring)
{
	FENCE_ASK(ring, ring);
}

int engine_rx_landed(struct engine *e, const struct xport_wc *wc, uint32_t slot)
{
	FENCE_ASK(rx_landed, wc, slot);
}

int engine_rx_fence(struct engine *e, uint32_t slot, bool on)
{
	FENCE_ASK(rx_fence, slot, on);
}

int engine_rx_credit(struct engine *e, uint32_t slot, struct xport_wr *wr)
{
	FENCE_ASK(rx_credit, slot, wr);
}

int engine_tx_credit(struct engine *e, const struct xport_wc *wc, uint32_t slot)
{
	FENCE_ASK(tx_credit, wc, slot);
}

int engine_tx_window(struct engine *e, uint32_t slot, unsigned *io_lane, struct xport_wr *data,
		     struct xport_wr *desc)
{
	FENCE_ASK(tx_window, slot, io_lane, data, desc);
}

void engine_lane_closing(struct engine *e, unsigned lane)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->lane_closing) {
			e->feat[i]->lane_closing(e, lane);
		}
	}
}

int engine_rx_reopen(struct engine *e, unsigned lane, uint32_t *slots, uint32_t cap, uint32_t *io_n)
{
	FENCE_ASK(rx_reopen, lane, slots, cap, io_n);
}

int engine_tx_resolved(struct engine *e, unsigned lane, const uint32_t *chunks, uint32_t n)
{
	FENCE_ASK(tx_resolved, lane, chunks, n);
}

/* 1 when no feature holds the slot back. */
int engine_tx_ready(struct engine *e, uint32_t slot)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->tx_ready && !e->feat[i]->tx_ready(e, slot)) {
			return 0;
		}
	}
	return 1;
}

void engine_tx_take(struct engine *e, unsigned lane)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->tx_take) {
			e->feat[i]->tx_take(e, lane);
		}
	}
}

bool engine_credit_on_slot_lane(const struct engine *e)
{
	for (unsigned i = 0; i < e->nfeat; i++) {
		if (e->feat[i]->credit_on_slot_lane) {
			return true;
		}
	}
	return false;
}
