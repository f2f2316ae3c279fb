/* SPDX-License-Identifier: MIT */
/*
 * The engine's io_uring plumbing: SQEs, submission, and the completions
 * handed to the sender (reads) and the receiver (writes, fsyncs).
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
		return fail(e, PERR_IO, r, "io_uring_submit: %s", strerror(-r));
	}
	e->uring_pending = 0;
	return 0;
}

int on_uring(struct engine *e)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	uint64_t v;

	if (read(e->uring_efd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
		return fail(e, PERR_IO, negerrno(), "eventfd: %s", strerror(errno));
	}
	io_uring_for_each_cqe(&e->ring, head, cqe)
	{
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		int res = cqe->res;

		n++;
		e->uring_inflight--;
		switch (UD_KIND(ud)) {
		case UD_READ:
			tx_read_done(e, UD_IDX(ud), res);
			break;
		case UD_WRITE:
			rx_write_done(e, UD_IDX(ud), res);
			break;
		case UD_PREAD:
			tx_pread_done(e, UD_IDX(ud), res);
			break;
		case UD_PWRITE:
			rx_pwrite_done(e, UD_IDX(ud), res);
			break;
		case UD_FSYNC:
			rx_fsync_done(e, &e->files[UD_IDX(ud)], res);
			break;
		case UD_DIRSYNC:
			rx_dirsync_done(e, UD_IDX(ud), res);
			break;
		case UD_LINK:
			rx_link_done(e, &e->files[UD_IDX(ud)], res);
			break;
		default:
			break;
		}
	}
	io_uring_cq_advance(&e->ring, n);
	return 0;
}
