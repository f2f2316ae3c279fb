/* SPDX-License-Identifier: MIT */
/*
 * The receiver's ranges without payload: ZEROS (holes) and --delta's SAME
 * ranges, noted in the file's block of this feature and taken into its
 * digest in file order (rx_range), journaled (--partial).
 * And the sender's ZEROS: the zero ranges it notes (tx_zero), one file's
 * at a time, sent before that file's FILE_DONE and before ranges of
 * another kind (tx_flush).
 */
#include "engine_delta.h"
#include "engine_rx.h"

#include "hello.h"

/*
 * The session state of zero extents. The feature is on in every session,
 * so that ZEROS in a session without them is refused here.
 */
struct zeros_state {
	/* The XXH3-128 of one chunk of zeros, for the journal (--partial) and a tree. */
	uint8_t zero_chunk_hash[HASH_LEN];
	bool zero_chunk_hashed;
	/* The sender's ZEROS not sent yet: ranges of one file (zq->id), from the first one noted. */
	struct msg_resume *zq;
	/* Receiver: ranges noted and not taken into a digest yet, in all files (efile.nranges). */
	uint32_t ranges;
};

/*
 * A file's block. Both: zeroed, its bytes described as zeros (ZEROS), no
 * payload; a sender's block ends there. Receiver: its ranges not hashed
 * yet, ascending: zr the ZEROS, sr the SAME (taken from the old file); the
 * end of the last one noted.
 */
struct zeros_file {
	uint64_t zeroed;
	struct proto_range *zr, *sr;
	uint32_t nzr, zr_cap, nsr, sr_cap;
	uint64_t zr_end;
};

extern const struct engine_feature engine_feature_zeros;

static struct zeros_file *zeros_file(const struct engine *e, const struct efile *f)
{
	return engine_file_state(e, &engine_feature_zeros, f);
}

/* The XXH3-128 of len zero bytes (the journal's record of a zero chunk; a tree's digest). */
void zero_digest(struct engine *e, uint64_t len, uint8_t out[HASH_LEN])
{
	struct zeros_state *zs = engine_feature_state(e, &engine_feature_zeros);
	struct file_hash h;

	if (len == e->p->chunk_size && zs->zero_chunk_hashed) {
		memcpy(out, zs->zero_chunk_hash, HASH_LEN);
		return;
	}
	if (file_hash_init(&h) < 0) {
		memset(out, 0xff, HASH_LEN); /* a record that never verifies: re-sent, not wrong */
		return;
	}
	hash_zeros(&h, len);
	file_hash_final(&h, out);
	file_hash_free(&h);
	if (len == e->p->chunk_size) {
		memcpy(zs->zero_chunk_hash, out, HASH_LEN);
		zs->zero_chunk_hashed = true;
	}
}

/* A range whole chunks of f, past what is hashed or described, with no data held inside. */
static int rx_range_check(struct engine *e, struct efile *f, const struct proto_range *g, bool same)
{
	const struct zeros_file *zf = zeros_file(e, f);
	uint64_t cs = e->p->chunk_size, end = g->offset + g->len;
	const char *what = same ? "DELTA SAME" : "ZEROS";

	if (g->offset % cs || g->offset >= f->size || g->len > f->size - g->offset ||
	    (g->len % cs && g->offset + g->len != f->size) || !zf ||
	    g->offset < MAX(zf->zr_end, f->hash_off)) {
		return engine_fail(
		    e, PERR_PROTOCOL, -EBADMSG,
		    "%s for %s: range %llu+%llu not whole chunks of it, or overlapping", what,
		    f->name, (unsigned long long)g->offset, (unsigned long long)g->len);
	}
	/* Only chunks whose digests we sent can be unchanged. */
	if (same && g->offset + g->len > MIN(f->size, delta_ndsum(e, f) * cs)) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "DELTA SAME for %s: range %llu+%llu past the digests sent",
				   f->name, (unsigned long long)g->offset,
				   (unsigned long long)g->len);
	}
	for (uint32_t i = 0; f->held && i < e->p->slots; i++) {
		const struct rslot *s = &e->rslots[i];

		if (s->state == SL_HELD && !s->packed && file_at(e, s->fidx) == f &&
		    s->off >= g->offset && s->off < end) {
			return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
					   "%s for %s: range %llu+%llu overlaps data", what,
					   f->name, (unsigned long long)g->offset,
					   (unsigned long long)g->len);
		}
	}
	return 0;
}

/* The range noted on f's list (ZEROS or SAME), merged with the last one where they touch. */
static int rx_range_note(struct engine *e, struct efile *f, const struct proto_range *g, bool same)
{
	struct zeros_state *zs = engine_feature_state(e, &engine_feature_zeros);
	struct zeros_file *zf = zeros_file(e, f);
	struct proto_range **zr = same ? &zf->sr : &zf->zr;
	uint32_t *nzr = same ? &zf->nsr : &zf->nzr, *zr_cap = same ? &zf->sr_cap : &zf->zr_cap;
	struct proto_range *last = *nzr ? &(*zr)[*nzr - 1] : NULL;
	const char *what = same ? "DELTA SAME" : "ZEROS";

	if (last && last->offset + last->len == g->offset) {
		last->len += g->len;
	} else {
		/*
		 * An honest sender is at most a ring of chunks ahead of our hash,
		 * and its ranges between them are merged: more (per file, or in
		 * all, one more per file) is not a sender's.
		 */
		if (f->nranges > e->p->slots || zs->ranges >= e->p->slots + FILE_TABLE) {
			return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
					   "%s for %s: too many ranges ahead of the data", what,
					   f->name);
		}
		if (*nzr == *zr_cap) {
			uint32_t cap = *zr_cap ? *zr_cap * 2 : 8;
			struct proto_range *t = realloc(*zr, cap * sizeof(*t));

			if (!t) {
				return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
			}
			*zr = t;
			*zr_cap = cap;
		}
		(*zr)[(*nzr)++] = *g;
		f->nranges++;
		zs->ranges++;
	}
	return 0;
}

/* A zero range of the device written by the worker (on the worker): journaled once there. */
static int rx_zeros_written(struct engine *e, struct efile *f, int r, uint64_t off, uint64_t len)
{
	f->zeros_out--;
	if (r < 0 && !f->failed) {
		file_fail(f, errno_to_perr(r), "zeros %s: %s", f->name, strerror(-r));
	}
	if (r == 0) {
		rx_zeros_journal(e, f, off, off + len);
	}
	return rx_maybe_finish(e, f);
}

/*
 * Receiver, a device target: a ZEROS range [off, off + len). The chunks the
 * digest pass read as zeros are zeros already: not written again (the
 * device takes only what changed; its read back at the commit checks them
 * like every byte), journaled now; the others go to the zero writer.
 */
static int rx_zeros_mapped(struct engine *e, struct efile *f, uint64_t off, uint64_t len)
{
	const uint8_t *dzero = delta_dzero(e, f);
	uint64_t cs = e->p->chunk_size, end = off + len, ndsum = delta_ndsum(e, f);

	while (off < end) {
		uint64_t i = off / cs, at = off;
		bool zero = i < ndsum && bit_get(dzero, i);

		/* The run of chunks of one kind from off. */
		do {
			at = MIN(end, (at / cs + 1) * cs);
			i = at / cs;
		} while (at < end && (i < ndsum && bit_get(dzero, i)) == zero);
		if (zero) {
			rx_zeros_journal(e, f, off, at);
		} else {
			int r = sums_queue_zeros(e, f, off, at - off, rx_zeros_written);

			if (r < 0) {
				return r;
			}
		}
		off = at;
	}
	return 0;
}

/* Zeros written where f needs them (a device's on the worker), then journaled. */
static int rx_zeros_write(struct engine *e, struct efile *f, const struct proto_range *g)
{
	int r;

	/*
	 * --assume-zero-target: the user says the device reads as zeros there
	 * already. Not trusted: its read back (rx_device_verified) covers these
	 * bytes too, so a device that was not zeros fails the copy.
	 */
	if (f->device && e->assume_zero) {
		f->zero_assumed += g->len;
		r = 0;
	} else if (f->device) {
		/* On the worker, off the loop; journaled when written (rx_zeros_written). */
		r = delta_dzero(e, f) ? rx_zeros_mapped(e, f, g->offset, g->len)
				      : sums_queue_zeros(e, f, g->offset, g->len, rx_zeros_written);
		if (r == 0) {
			return 0;
		}
	} else {
		/*
		 * A new temp file has nothing there, unless it was allocated
		 * whole (rx_prealloc): then punched. Its size is set last
		 * (rx_maybe_finish).
		 */
		r = sparse_zero_range(f->tfd, g->offset, g->len,
				      SPARSE_KEEP_SIZE |
					  (f->partial || f->prealloc ? 0 : SPARSE_FRESH));
	}
	if (r < 0) {
		file_fail(f, errno_to_perr(r), "zeros %s: %s", f->name, strerror(-r));
		return 0;
	}
	rx_zeros_journal(e, f, g->offset, g->offset + g->len);
	return 0;
}

/*
 * One ZEROS range of f, checked: whole chunks of the file (the last may be
 * short), past everything hashed, kept or described before, and no chunk
 * of data held for it inside. Queued to be hashed in file order, and made
 * zeros on the disk now (sparse_zero_range: a hole in a new temp file, a
 * punch in a partial's data file, zeroes on a device), or on a device
 * taken to be zeros already (--assume-zero-target) left alone.
 */
int rx_range_take(struct engine *e, struct efile *f, const struct proto_range *g, bool same)
{
	int r = rx_range_check(e, f, g, same);

	if (r == 0) {
		r = rx_range_note(e, f, g, same);
	}
	if (r < 0) {
		return r;
	}
	zeros_file(e, f)->zr_end = g->offset + g->len;
	e->bytes_progress += g->len;
	if (same) {
		delta_file(e, f)->skipped += g->len;
		return 0; /* copied and hashed at its turn (rx_hash_ready) */
	}
	zeros_file(e, f)->zeroed += g->len;
	return f->failed ? 0 : rx_zeros_write(e, f, g);
}

/*
 * [off, end) of f is zeros on the disk: told to the features chunk by chunk
 * (engine_rx_written), with the zero digest when --partial journals it.
 */
void rx_zeros_journal(struct engine *e, struct efile *f, uint64_t off, uint64_t end)
{
	uint64_t cs = e->p->chunk_size;

	for (; off < end; off += cs) {
		uint64_t unit = MIN(cs, end - off);
		uint8_t h[HASH_LEN];

		if (f->partial) {
			zero_digest(e, unit, h);
		}
		engine_rx_written(e, f, off, (uint32_t)unit, f->partial ? h : NULL);
	}
}

/* ZEROS: only from a peer that knows them, for a file of ours whose FILE_DONE is still to come. */
static int rx_zeros(struct engine *e, const struct msg_resume *z)
{
	struct efile *f = file_by_id(e, z->id);
	int r;

	if (!engine_zeros(e) || !f || f->ftype != PROTO_FT_REG || sums_wanted(e, f) ||
	    f->got_done || z->count == 0) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "ZEROS for id %u out of place",
				   z->id);
	}
	for (uint16_t i = 0; i < z->count; i++) {
		r = rx_range_take(e, f, &z->r[i], false);
		if (r < 0) {
			return r;
		}
	}
	rx_hash_ready(e, f);
	return rx_maybe_finish(e, f);
}

/* The first of n ranges at r, taken off the list. */
static void rx_range_pop(struct engine *e, struct efile *f, struct proto_range *r, uint32_t *n)
{
	struct zeros_state *zs = engine_feature_state(e, &engine_feature_zeros);

	memmove(r, r + 1, (*n - 1) * sizeof(*r));
	(*n)--;
	f->nranges--;
	zs->ranges--;
}

/*
 * f's next range at hash_off, into its digest: an unchanged one (--delta:
 * from the old file, hashed as read back) or zeros (hashed as the zeros it
 * stands for). Its length, 0: none starts there.
 */
static uint64_t zeros_rx_range(struct engine *e, struct efile *f)
{
	struct zeros_file *zf = zeros_file(e, f);
	struct proto_range g;

	if (zf && zf->nsr && zf->sr[0].offset == f->hash_off) {
		g = zf->sr[0];
		rx_range_pop(e, f, zf->sr, &zf->nsr);
		/* Only a file with an old copy takes SAME (rx_delta_same): it chose how. */
		f->dg->rx_same(e, f, &g);
		return g.len;
	}
	if (!zf || !zf->nzr || zf->zr[0].offset != f->hash_off) {
		return 0;
	}
	g = zf->zr[0];
	rx_range_pop(e, f, zf->zr, &zf->nzr);
	if (f->failed) {
	} else if (f->dg && f->dg->rx_zeros) {
		f->dg->rx_zeros(e, f, g.offset, g.len);
	} else {
		hash_zeros(&f->hash, g.len);
	}
	return g.len;
}

/* Is off inside one of the n ranges at r (ascending, apart)? A binary search. */
static bool rx_ranges_hold(const struct proto_range *r, uint32_t n, uint64_t off)
{
	uint32_t lo = 0, hi = n;

	/* The first range that starts past off is hi; the one before may hold it. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (r[mid].offset <= off) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo > 0 && off - r[lo - 1].offset < r[lo - 1].len;
}

static const char *zeros_rx_range_holds(const struct engine *e, const struct efile *f, uint64_t off)
{
	const struct zeros_file *zf = zeros_file(e, f);

	if (zf && rx_ranges_hold(zf->zr, zf->nzr, off)) {
		return "zeros";
	}
	return zf && rx_ranges_hold(zf->sr, zf->nsr, off) ? "unchanged ranges" : NULL;
}

/* ---- sender ---- */

/* The zero ranges noted so far, in one ZEROS (before anything that must follow them). */
static int tx_zeros_flush(struct engine *e)
{
	struct zeros_state *zs = engine_feature_state(e, &engine_feature_zeros);
	struct msg m = { .type = MSG_ZEROS };
	int r;

	if (!zs->zq || zs->zq->count == 0) {
		return 0;
	}
	m.u.zeros = *zs->zq;
	zs->zq->count = 0;
	r = chan_queue(e->p->chan, &m);
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/* [off, off + len) of f is zeros: into the next ZEROS, merged with the range before it. */
static int tx_zero_note(struct engine *e, struct efile *f, uint64_t off, uint64_t len)
{
	struct zeros_state *zs = engine_feature_state(e, &engine_feature_zeros);
	struct msg_resume *q;
	/* One order for all ranges: the SAME noted before go first. */
	int r = engine_tx_flush_others(e, &engine_feature_zeros);

	if (r < 0) {
		return r;
	}
	if (!zs->zq) {
		zs->zq = calloc(1, sizeof(*zs->zq));
		if (!zs->zq) {
			return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
		}
	}
	q = zs->zq;
	zeros_file(e, f)->zeroed += len;
	if (q->count > 0 && q->id == f->id &&
	    q->r[q->count - 1].offset + q->r[q->count - 1].len == off) {
		q->r[q->count - 1].len += len;
		return 0;
	}
	if (q->count > 0 && (q->id != f->id || q->count == PROTO_MAX_ZERO_RANGES)) {
		r = tx_zeros_flush(e);
		if (r < 0) {
			return r;
		}
	}
	q->id = f->id;
	q->r[q->count++] = (struct proto_range){ .offset = off, .len = len };
	return 0;
}

/* A zero range noted; now: what is noted goes out at once, the channel flushed. */
static int zeros_tx_zero(struct engine *e, struct efile *f, uint64_t off, uint64_t len, bool now)
{
	int r = len ? tx_zero_note(e, f, off, len) : 0;

	if (r < 0 || !now) {
		return r;
	}
	r = tx_zeros_flush(e);
	if (r >= 0) {
		r = chan_flush(e->p->chan);
	}
	if (r < 0) {
		return e->failed ? r
				 : engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
	}
	return 0;
}

/*
 * A receiver with ranges to take: ZEROS on, or --delta asked for (its SAME
 * ranges); a sender that notes zeros (its count alone). Neither end of a
 * session without ZEROS.
 */
static size_t zeros_file_size(const struct engine *e)
{
	if (e->p->role == ENGINE_RECEIVER) {
		return e->zeros || (e->p->x && (e->p->open_flags & PROTO_OPEN_DELTA))
			   ? sizeof(struct zeros_file)
			   : 0;
	}
	return e->p->role == ENGINE_SENDER && e->zeros ? offsetof(struct zeros_file, zr) : 0;
}

static void zeros_file_unsent(const struct engine *e, const struct efile *f,
			      struct engine_unsent *u)
{
	u->zeroed += zeros_file(e, f)->zeroed;
}

static void zeros_file_release(struct engine *e, struct efile *f)
{
	struct zeros_state *zs = engine_feature_state(e, &engine_feature_zeros);
	struct zeros_file *zf = e->p->role == ENGINE_RECEIVER ? zeros_file(e, f) : NULL;

	if (zf) {
		zs->ranges -= zf->nzr + zf->nsr;
		free(zf->zr);
		free(zf->sr);
	}
}

static void zeros_release(struct engine *e)
{
	struct zeros_state *zs = engine_feature_state(e, &engine_feature_zeros);

	free(zs->zq);
	zs->zq = NULL;
}

/* Zero extents: a data path, and both ends announced them (our own caps too, for tests). */
static bool zeros_enable(struct engine *e)
{
	const struct engine_params *p = e->p;

	e->zeros =
	    p->x && (p->peer_caps & PROTO_CAP_ZEROS) && (hello_local_caps() & PROTO_CAP_ZEROS);
	return true; /* ZEROS in a session without them is refused here */
}

static int zeros_on_zeros(struct engine *e, struct msg *m)
{
	return rx_zeros(e, &m->u.zeros);
}

static const struct engine_msg_row zeros_msgs[] = {
	{ MSG_ZEROS, ENGINE_ROLE_BIT(ENGINE_RECEIVER), 0, zeros_on_zeros },
	{ 0 },
};

const struct engine_feature engine_feature_zeros = {
	.name = "zeros",
	.enable = zeros_enable,
	.state_size = sizeof(struct zeros_state),
	.release = zeros_release,
	.file_size = zeros_file_size,
	.file_release = zeros_file_release,
	.file_unsent = zeros_file_unsent,
	.msgs = zeros_msgs,
	.rx_range = zeros_rx_range,
	.rx_range_holds = zeros_rx_range_holds,
	.tx_zero = zeros_tx_zero,
	.tx_flush = tx_zeros_flush,
};
