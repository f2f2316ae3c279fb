/* SPDX-License-Identifier: MIT */
/*
 * A sender played by hand against a receiver that brings kept files'
 * attributes in line (-X with a skip level, the peer able to itemize): each
 * file the receiver keeps waits for its XATTRS, and a sender that never
 * sends them must not make the receiver hold names without end. Up to
 * 16,384 kept files may wait (twice the widest file window); one more is a
 * protocol error, said and counted as the session's failure.
 */
#include "engine_harness.h"

#define XKEPT_CAP (2u * PROTO_SPAN_WIDER)
#define BATCH	  8

/* Names k0 .. k(n-1) at the destination: empty, mtime 0, so skip quick keeps each. */
static void kept_files(struct fx *f, uint32_t n)
{
	char name[32];

	for (uint32_t i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "k%u", i);
		dest_file(f, name, 0, 1, (struct timespec){ 0 });
	}
}

/* FILES of ids first .. first+n-1 (named k<id-1>), each answered SKIPPED. */
static void offer_kept(struct raw *w, uint32_t first, uint32_t n)
{
	static const uint32_t skipped[BATCH] = { PERR_SKIPPED, PERR_SKIPPED, PERR_SKIPPED,
						 PERR_SKIPPED, PERR_SKIPPED, PERR_SKIPPED,
						 PERR_SKIPPED, PERR_SKIPPED };
	static const uint64_t sizes[BATCH];
	char buf[BATCH][32];
	const char *names[BATCH];
	uint32_t ids[BATCH];

	assert_true(n <= BATCH);
	for (uint32_t i = 0; i < n; i++) {
		ids[i] = first + i;
		snprintf(buf[i], sizeof(buf[i]), "k%u", first + i - 1);
		names[i] = buf[i];
	}
	raw_files(w, n, ids, names, sizes);
	raw_ack(w, n, ids, skipped);
}

/*
 * XKEPT_CAP kept files with no XATTRS are taken (each FILES answered); the
 * next kept file is answered, then ends the session with PERR_PROTOCOL,
 * saying why.
 */
static void test_kept_waiting_capped(void **state)
{
	struct fx *f = *state;
	struct raw w;
	uint32_t id = 1;

	kept_files(f, XKEPT_CAP + 1);
	f->rxr.p.open_flags = PROTO_OPEN_SKIP_QUICK | PROTO_OPEN_XATTRS;
	f->rxr.p.peer_caps = PROTO_CAP_SKIP | PROTO_CAP_XATTRS | PROTO_CAP_ITEMIZE;
	raw_init(&w, &f->tx);
	run_start(&f->rxr);
	raw_ring(&w);
	while (id <= XKEPT_CAP) {
		offer_kept(&w, id, BATCH);
		id += BATCH;
	}
	offer_kept(&w, id, 1); /* answered, then the session ends */
	raw_expect_error(&w, PERR_PROTOCOL, "kept files waiting for their attributes");
	run_join(&f->rxr);
	assert_failed_run(&f->rxr, -EBADMSG, PERR_PROTOCOL,
			  "kept files waiting for their attributes");
	raw_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_kept_waiting_capped),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
