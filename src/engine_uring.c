/* SPDX-License-Identifier: MIT */
/*
 * The engine's io_uring plumbing: SQEs, submission, and the completions,
 * each handed to the handler its kind's submitter registered
 * (engine_uring_handle): the core names none of them.
 */
#include "engine-internal.h"

struct io_uring_sqe *uring_sqe(struct engine *e)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);

	if (!sqe) {
		io_uring_submit(&e->ring);
		e->uring_pending = 0;
		e->link_chain = NULL; /* submitted: a chain does not reach past it */
		sqe = io_uring_get_sqe(&e->ring);
	}
	if (sqe) {
		e->uring_pending++;
		e->uring_inflight++;
	}
	return sqe;
}

int uring_flush(struct engine *e)
{
	int r;

	if (e->uring_pending == 0) {
		return 0;
	}
	r = io_uring_submit(&e->ring);
	e->link_chain = NULL;
	if (r < 0) {
		return engine_fail(e, PERR_IO, r, "io_uring_submit: %s", strerror(-r));
	}
	e->uring_pending = 0;
	return 0;
}

void engine_uring_handle(struct engine *e, unsigned kind, engine_uring_fn fn)
{
	assert(kind < ENGINE_UD_KINDS && (!e->uring_fn[kind] || e->uring_fn[kind] == fn));
	e->uring_fn[kind] = fn;
}

/* Completions to reap without waiting: in the ring, or held by the kernel past a full one. */
bool uring_ready(struct engine *e)
{
	return e->ring_ok &&
	       (io_uring_cq_ready(&e->ring) > 0 || io_uring_cq_has_overflow(&e->ring));
}

static unsigned uring_reap(struct engine *e)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&e->ring, head, cqe)
	{
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		int res = cqe->res;

		n++;
		e->uring_inflight--;
		/* A kind nobody registered is nobody's: dropped. */
		if (UD_KIND(ud) < ENGINE_UD_KINDS && e->uring_fn[UD_KIND(ud)]) {
			e->uring_fn[UD_KIND(ud)](e, UD_IDX(ud), res);
		}
	}
	io_uring_cq_advance(&e->ring, n);
	return n;
}

/*
 * Nothing bounds the operations in flight by the completion queue's size:
 * a receiver with thousands of small files links, writes and syncs more at
 * once than it holds. The kernel then keeps the completions that did not
 * fit on a list of its own (IORING_FEAT_NODROP) and flags the ring; they
 * come into the queue only when asked for (io_uring_get_events), and no
 * eventfd signal says so. Left there, the loop would wait for them forever:
 * they are asked for here until none is left. A completion the kernel could
 * not even keep (its allocation failed) is lost, and so is the operation's
 * answer: the session ends rather than wait for it.
 */
int uring_on_ready(struct engine *e)
{
	uint64_t v;

	if (read(e->uring_efd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
		return engine_fail(e, PERR_IO, negerrno(), "eventfd: %s", strerror(errno));
	}
	/* Bounded: a flag that stays with nothing to reap is looked at again next turn. */
	for (unsigned turn = 0;; turn++) {
		unsigned n = uring_reap(e);
		int r;

		if (!io_uring_cq_has_overflow(&e->ring) || (turn > 0 && n == 0)) {
			break;
		}
		e->st.uring_overflows++;
		r = io_uring_get_events(&e->ring);
		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
			return engine_fail(e, PERR_IO, r, "io_uring: %s", strerror(-r));
		}
	}
	if (IO_URING_READ_ONCE(*e->ring.cq.koverflow) != 0) {
		return engine_fail(e, PERR_INTERNAL, -EOVERFLOW, "io_uring lost %u completions",
				   IO_URING_READ_ONCE(*e->ring.cq.koverflow));
	}
	return 0;
}
