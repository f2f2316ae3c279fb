/* SPDX-License-Identifier: MIT */
/*
 * The tcp xport's protection domain: memory registrations with random keys
 * (one key space for all lanes), zero-based so peers never learn our
 * addresses; deregistration that waits out the RX threads placing into a
 * registration and the TX threads reading from it; and fences, ranges a
 * peer's write may not touch.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "tcp-internal.h"

static int random_key_locked(struct tcp_xport *tx, uint32_t *ret)
{
	for (int tries = 0; tries < 64; tries++) {
		uint32_t k;
		bool used = false;

		if (getrandom(&k, sizeof(k), 0) != sizeof(k)) {
			return negerrno();
		}
		if (k == 0) {
			continue;
		}
		for (struct tcp_mr *m = tx->mrs; m; m = m->next) {
			used |= m->pub.rkey == k || m->pub.lkey == k;
		}
		if (!used) {
			*ret = k;
			return 0;
		}
	}
	return -EAGAIN;
}

int tcp_reg_mr(struct xport *x, void *addr, size_t len, unsigned access, struct xport_mr **ret_mr)
{
	struct tcp_xport *tx = to_tcp(x);
	struct tcp_mr *m;
	int r;

	if (!addr || len == 0 || (uintptr_t)addr + len < (uintptr_t)addr || !ret_mr ||
	    (access & ~(unsigned)(XPORT_ACCESS_LOCAL | XPORT_ACCESS_REMOTE_WRITE)) != 0) {
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		return -ENOMEM;
	}
	m->pub.addr = addr;
	m->pub.iova = 0; /* zero-based: peers never learn our addresses */
	m->pub.len = len;
	m->pub.access = access;
	fence_set_init(&m->fences, len);
	pthread_mutex_lock(&tx->mr_lock);
	r = random_key_locked(tx, &m->pub.lkey);
	if (r >= 0 && (access & XPORT_ACCESS_REMOTE_WRITE)) {
		r = random_key_locked(tx, &m->pub.rkey);
	}
	if (r >= 0) {
		m->next = tx->mrs;
		tx->mrs = m;
	}
	pthread_mutex_unlock(&tx->mr_lock);
	if (r < 0) {
		free(m);
		return r;
	}
	/* One key space for all lanes. */
	for (unsigned i = 0; i < XPORT_MAX_LANES; i++) {
		m->pub.lane_lkey[i] = m->pub.lkey;
		m->pub.lane_rkey[i] = m->pub.rkey;
	}
	*ret_mr = &m->pub;
	return 0;
}

/* ---- lookups, placements in progress ---- */

/* mr_lock held: the registered MR behind pub, or NULL. */
static struct tcp_mr *mr_lookup_locked(struct tcp_xport *tx, const struct xport_mr *pub)
{
	for (struct tcp_mr *m = tx->mrs; m; m = m->next) {
		if (&m->pub == pub) {
			return m;
		}
	}
	return NULL;
}

bool tcp_mr_registered(struct tcp_xport *tx, const struct xport_mr *pub)
{
	bool ok;

	pthread_mutex_lock(&tx->mr_lock);
	ok = mr_lookup_locked(tx, pub) != NULL;
	pthread_mutex_unlock(&tx->mr_lock);
	return ok;
}

struct tcp_mr *tcp_mr_find_rkey_locked(struct tcp_xport *tx, uint32_t rkey)
{
	if (rkey == 0) {
		return NULL;
	}
	for (struct tcp_mr *m = tx->mrs; m; m = m->next) {
		if (m->pub.rkey == rkey && (m->pub.access & XPORT_ACCESS_REMOTE_WRITE)) {
			return m;
		}
	}
	return NULL;
}

void tcp_mr_release(struct tcp_xport *tx, struct tcp_lane *ln, struct tcp_mr *m)
{
	pthread_mutex_lock(&tx->mr_lock);
	assert(m->busy > 0);
	m->busy--;
	ln->placing = NULL;
	if ((m->revoked && m->busy == 0) || m->fence_waiters > 0) {
		pthread_cond_broadcast(&tx->mr_cond);
	}
	pthread_mutex_unlock(&tx->mr_lock);
}

/* ---- deregistration ---- */

/* mr_lock held: end placements into m that a stalled peer keeps open. */
static void shut_lanes_placing_locked(struct tcp_xport *tx, struct tcp_mr *m)
{
	for (unsigned i = 0; i < tx->pub.nlanes; i++) {
		if (tx->lanes[i].placing == m) {
			tcp_set_error(tx, "lane %u: write stalled during dereg_mr", i);
			shutdown(tx->lanes[i].fd, SHUT_RDWR);
		}
	}
}

/*
 * Waits until no TX thread reads from m's memory (a send in progress from a
 * buffer in it). A lane whose send stalls longer than timeout_ms is shut,
 * which ends the send.
 */
static void wait_tx_reads(struct tcp_xport *tx, const struct tcp_mr *m)
{
	uintptr_t lo = (uintptr_t)m->pub.addr, hi = lo + m->pub.len;

	for (unsigned i = 0; i < tx->pub.nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += tx->timeout_ms / 1000 + 1;
		pthread_mutex_lock(&ln->lock);
		while (ln->tx_reading && (uintptr_t)ln->tx_reading < hi &&
		       (uintptr_t)ln->tx_reading + ln->tx_reading_len > lo) {
			ln->tx_waiters++;
			if (pthread_cond_timedwait(&ln->cond, &ln->lock, &ts) == ETIMEDOUT) {
				tcp_set_error(tx, "lane %u: send stalled during dereg_mr", i);
				shutdown(ln->fd, SHUT_RDWR);
				ts.tv_sec += 3600;
			}
			ln->tx_waiters--;
		}
		pthread_mutex_unlock(&ln->lock);
	}
}

/*
 * Unlinks the MR so no new placement can find it, then waits for placements
 * already in progress. A peer that stalls inside a write into this MR for
 * longer than timeout_ms gets its lane shut, which ends the placement.
 */
int tcp_dereg_mr(struct xport *x, struct xport_mr *pub)
{
	struct tcp_xport *tx = to_tcp(x);
	struct tcp_mr *m, **pp;
	struct timespec ts;

	if (!pub) {
		return -EINVAL;
	}
	pthread_mutex_lock(&tx->mr_lock);
	for (pp = &tx->mrs; *pp && &(*pp)->pub != pub; pp = &(*pp)->next) {
	}
	if (!*pp) {
		pthread_mutex_unlock(&tx->mr_lock);
		return -ENOENT;
	}
	m = *pp;
	*pp = m->next;
	m->revoked = true;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += tx->timeout_ms / 1000;
	ts.tv_nsec += (long)(tx->timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	while (m->busy > 0) {
		if (pthread_cond_timedwait(&tx->mr_cond, &tx->mr_lock, &ts) == ETIMEDOUT) {
			shut_lanes_placing_locked(tx, m);
			ts.tv_sec += 3600;
		}
	}
	pthread_mutex_unlock(&tx->mr_lock);
	/* The caller may free the memory next: no send may still be reading it. */
	wait_tx_reads(tx, m);
	fence_set_fini(&m->fences);
	free(m);
	return 0;
}

/* ---- fences ---- */

/* Do [a, a+alen) and [b, b+blen) share a byte? Both lie inside one MR: no overflow. */
static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

/* mr_lock held: is an RX thread placing into [off, off+len) of m? Cuts it off if so. */
static bool cut_placements_locked(struct tcp_xport *tx, struct tcp_mr *m, uint64_t off,
				  uint64_t len)
{
	bool any = false;

	for (unsigned i = 0; i < tx->pub.nlanes; i++) {
		struct tcp_lane *ln = &tx->lanes[i];

		if (ln->placing == m &&
		    ranges_overlap(ln->placing_off, ln->placing_len, off, len)) {
			/*
			 * The range's data and its descriptor came before on one
			 * lane, so a sender that keeps the rules is never here.
			 */
			tcp_set_error(tx, "lane %u: write into memory the receiver holds", i);
			shutdown(ln->fd, SHUT_RDWR);
			any = true;
		}
	}
	return any;
}

static int mr_fence_on_locked(struct tcp_xport *tx, struct tcp_mr *m, uint64_t off, uint64_t len)
{
	bool cut = false;
	int r = fence_set_add(&m->fences, off, len);

	if (r < 0) {
		return r;
	}
	/* New placements see the fence; wait out (after cutting) any already inside. */
	while (cut_placements_locked(tx, m, off, len)) {
		cut = true;
		m->fence_waiters++;
		pthread_cond_wait(&tx->mr_cond, &tx->mr_lock);
		m->fence_waiters--;
	}
	return cut ? -EIO : 0;
}

int tcp_fence(struct xport *x, struct xport_mr *pub, uint64_t offset, uint64_t len, bool on)
{
	struct tcp_xport *tx = to_tcp(x);
	struct tcp_mr *m;
	int r;

	if (!pub || len == 0 || !xport_range_inside(0, pub->len, offset, len)) {
		return -EINVAL;
	}
	pthread_mutex_lock(&tx->mr_lock);
	m = mr_lookup_locked(tx, pub);
	if (!m) {
		r = -ENOENT;
	} else if (on) {
		r = mr_fence_on_locked(tx, m, offset, len);
	} else {
		r = fence_set_remove(&m->fences, offset, len);
	}
	pthread_mutex_unlock(&tx->mr_lock);
	return r;
}
