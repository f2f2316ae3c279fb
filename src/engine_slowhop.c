/* SPDX-License-Identifier: MIT */
/*
 * slowhop (engine_params.slowhop set, with follow): a relay child's sender
 * judges the hop it sends to by the slow-hop rule (slowhop.h). Each turn of
 * the loop (at least once a second) it samples the backlog, what the hop
 * before has on disk (tx_avail) that has not been posted yet, over the
 * regular files this run holds that the hop has not kept; what the hop
 * before received meanwhile (each file's tx_avail growth since this run
 * first saw it: a kept file, or a replay, is there already and no pace);
 * and the bytes posted. When the rule says too slow, the hop is told why (ERROR, as the
 * idle timeout does), its lanes are taken down and the run fails "too
 * slow": the relay child's
 * fan-out loop then cuts the hop out as one that died (fanout_hop_died),
 * and the verdict stays in the struct slowhop it owns.
 */
#include <errno.h>

#include "clock.h"
#include "engine-internal.h"
#include "slowhop.h"

extern const struct engine_feature engine_feature_slowhop;

struct slow_state {
	uint64_t gave; /* what the hop before received during this run */
};

struct slow_file {
	bool seen;
	uint64_t avail; /* tx_avail when last sampled */
};

/*
 * Bytes the hop before has of f that have not gone yet (0 when f is not the
 * hop's to take), and what it received of f since the last sample into *gave.
 */
static uint64_t file_backlog(struct engine *e, struct efile *f, uint64_t *gave)
{
	struct slow_file *sf;
	uint64_t avail;

	if (!f->used || f->ftype != PROTO_FT_REG || f->failed) {
		return 0;
	}
	avail = engine_tx_avail(e, f);
	if (avail == UINT64_MAX) {
		return 0; /* not a file of the feed */
	}
	avail = MIN(avail, f->size);
	sf = engine_file_state(e, &engine_feature_slowhop, f);
	if (sf->seen && avail > sf->avail) {
		*gave += avail - sf->avail;
	}
	sf->seen = true;
	sf->avail = avail;
	if (f->kept_wait || sums_wanted(e, f) || f->done_sent) {
		return 0;
	}
	return avail > f->send_off ? avail - f->send_off : 0;
}

static uint64_t backlog(struct engine *e, uint64_t *gave)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < e->files_hw; i++) {
		sum += file_backlog(e, file_at(e, i), gave);
	}
	return sum;
}

/* MiB/s, rounded, for the words. */
static unsigned long long mib_s(uint64_t rate)
{
	return (unsigned long long)((rate + (1u << 19)) >> 20);
}

/*
 * The hop is cut out: every lane taken down, as if lost, so that no send
 * stalled on a hop that takes nothing (a full socket) holds the teardown.
 */
static void lanes_down(struct engine *e)
{
	struct xport *x = e->p->x;

	for (unsigned i = 0; x && x->ops->lane_down && i < x->nlanes; i++) {
		(void)x->ops->lane_down(x, i);
	}
}

static int slow_step(struct engine *e)
{
	struct slowhop *h = e->p->slowhop;
	struct slow_state *ss = engine_feature_state(e, &engine_feature_slowhop);
	uint64_t waiting = backlog(e, &ss->gave);
	int r;

	if (!slowhop_note(h, now_ms(), waiting, ss->gave, e->bytes_progress)) {
		return 0;
	}
	chan_send_error(e->p->chan, PERR_TIMEOUT,
			"too slow: cut out of the relay chain (took %llu MiB/s of %llu MiB/s)",
			mib_s(h->took_rate), mib_s(h->gave_rate));
	e->error_sent = true;
	r = engine_fail(e, PERR_TIMEOUT, -ETIMEDOUT,
			"too slow: took %llu MiB/s while the hop before gave %llu MiB/s, for %u s",
			mib_s(h->took_rate), mib_s(h->gave_rate), h->window_ms / 1000u);
	lanes_down(e);
	return r;
}

static bool slow_enable(struct engine *e)
{
	const struct engine_params *p = e->p;

	return p->role == ENGINE_SENDER && p->follow && p->slowhop && p->slowhop->window_ms > 0;
}

static size_t slow_file_size(const struct engine *e)
{
	(void)e;
	return sizeof(struct slow_file);
}

const struct engine_feature engine_feature_slowhop = {
	.name = "slowhop",
	.enable = slow_enable,
	.step = slow_step,
	.file_size = slow_file_size,
	.state_size = sizeof(struct slow_state),
};
