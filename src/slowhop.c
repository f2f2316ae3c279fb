/* SPDX-License-Identifier: MIT */
/* The slow-hop rule (slowhop.h): samples of a run, and the verdict. */
#include "slowhop.h"

#include <string.h>

#include "macro.h"

void slowhop_init(struct slowhop *h, unsigned window_s)
{
	memset(h, 0, sizeof(*h));
	h->window_ms = MIN(window_s, SLOWHOP_MAX_S) * 1000u;
}

void slowhop_restart(struct slowhop *h)
{
	slowhop_init(h, h->window_ms / 1000u);
}

/* How far apart kept samples are: 32 to a window, so the ring holds two windows. */
static int64_t spacing_ms(const struct slowhop *h)
{
	return MAX((int64_t)h->window_ms / 32, 100);
}

static const struct slowhop_sample *nth(const struct slowhop *h, unsigned i)
{
	return &h->s[(h->head + i) % SLOWHOP_SAMPLES];
}

/* The newest kept sample at least a window before now_ms; NULL: the run is younger. */
static const struct slowhop_sample *window_start(const struct slowhop *h, int64_t now_ms)
{
	const struct slowhop_sample *best = NULL;

	for (unsigned i = 0; i < h->n; i++) {
		const struct slowhop_sample *s = nth(h, i);

		if (now_ms - s->ms >= (int64_t)h->window_ms) {
			best = s;
		}
	}
	return best;
}

static void keep(struct slowhop *h, int64_t now_ms, uint64_t backlog, uint64_t gave, uint64_t taken)
{
	if (h->n > 0 && now_ms - nth(h, h->n - 1)->ms < spacing_ms(h)) {
		return;
	}
	if (h->n == SLOWHOP_SAMPLES) {
		h->head = (h->head + 1) % SLOWHOP_SAMPLES;
		h->n--;
	}
	h->s[(h->head + h->n) % SLOWHOP_SAMPLES] = (struct slowhop_sample){
		.ms = now_ms, .backlog = backlog, .gave = gave, .taken = taken
	};
	h->n++;
}

bool slowhop_note(struct slowhop *h, int64_t now_ms, uint64_t backlog, uint64_t gave,
		  uint64_t taken)
{
	const struct slowhop_sample *w;
	uint64_t took, got, secs;

	if (h->window_ms == 0 || h->cut) {
		return h->cut;
	}
	w = window_start(h, now_ms);
	if (w && backlog >= SLOWHOP_MIN_BACKLOG && gave >= w->gave && taken >= w->taken) {
		took = taken - w->taken;
		got = gave - w->gave;
		if (got / 2 > took) {
			secs = MAX((uint64_t)(now_ms - w->ms) / 1000u, 1u);
			h->cut = true;
			h->gave_rate = got / secs;
			h->took_rate = took / secs;
			return true;
		}
	}
	keep(h, now_ms, backlog, gave, taken);
	return false;
}
