/* SPDX-License-Identifier: MIT */
/*
 * The tcp transport's sealed lanes (their data runs with the plain tests in
 * test_xport_tcp.c): a capture sees only ciphertext, and a flipped,
 * replayed, moved or truncated frame or another key fails the lane.
 */
#include "testutil.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "xport.h"
#include "xport_tcp_harness.h"

#define CHUNK 8192u

/* ---- sealed lanes ---- */

static bool contains(const uint8_t *hay, size_t n, const uint8_t *needle, size_t m)
{
	for (size_t i = 0; i + m <= n; i++) {
		if (memcmp(hay + i, needle, m) == 0) {
			return true;
		}
	}
	return false;
}

/* What a lane sends (the test tee, as a capture would see it): ciphertext only when sealed. */
static bool tee_shows_plaintext(bool seal)
{
	char path[] = "/tmp/rdmacp-tee-XXXXXX";
	int fd = mkstemp(path);
	size_t len = 3 * 256 * 1024 + 100, got;
	uint8_t *src = malloc(len), *dst = calloc(1, len), *seen = malloc(2 * len);
	struct xport_mr *smr, *dmr;
	struct xport_wr w;
	struct xport_wc wc;
	struct pair pr;
	bool shows = false;

	assert_true(fd >= 0);
	g_seal = seal;
	g_cli_tee = path;
	pr = make_pair(1, 4, 4);
	fill(src, len, 5);
	assert_int_equal(ops->reg_mr(pr.cli, src, len, XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(ops->reg_mr(pr.srv, dst, len, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	post_recvs(pr.srv, 0, 1, 1);
	w = wr_write(smr, src, (uint32_t)len, dmr->iova, dmr->rkey, 0, 9);
	w.opcode = XPORT_OP_WRITE_IMM;
	w.flags = XPORT_SEND_SIGNALED;
	assert_int_equal(ops->post_writes(pr.cli, &w, 1), 0);
	wait_wcs(pr.srv, &wc, 1, 10000);
	assert_int_equal(wc.status, XPORT_WC_SUCCESS);
	assert_memory_equal(dst, src, len);
	wait_wcs(pr.cli, &wc, 1, 10000);
	assert_int_equal(wc.status, XPORT_WC_SUCCESS);
	free_pair(&pr);
	got = (size_t)pread(fd, seen, 2 * len, 0);
	assert_true(got >= len);
	/* Any 32 bytes of the payload, at its start, middle, or past a seal piece. */
	for (size_t off = 0; off + 32 <= len; off += len / 7) {
		shows |= contains(seen, got, src + off, 32);
	}
	close(fd);
	unlink(path);
	free(src);
	free(dst);
	free(seen);
	g_seal = false;
	g_cli_tee = NULL;
	return shows;
}

static void test_sealed_tee(void **state)
{
	assert_true(tee_shows_plaintext(false));
	assert_false(tee_shows_plaintext(true));
}

/*
 * A spoiled frame (the sender's test hook, or a key that differs) fails the
 * lane before the immediate behind it completes: the receiver never sees a
 * descriptor after bytes the peer did not seal, and both ends say why.
 */
static void run_sealed_spoiled(unsigned tamper, uint8_t secret_xor)
{
	struct pair pr;
	uint8_t *src = malloc(4 * CHUNK), *dst = calloc(1, 4 * CHUNK);
	struct xport_mr *smr, *dmr;
	struct xport_wr w[2];
	struct xport_wc wc;
	const char *why;

	g_seal = true;
	g_cli_tamper = tamper;
	g_cli_secret_xor = secret_xor;
	pr = make_pair(1, 8, 4);
	fill(src, 4 * CHUNK, 3);
	assert_int_equal(ops->reg_mr(pr.cli, src, 4 * CHUNK, XPORT_ACCESS_LOCAL, &smr), 0);
	assert_int_equal(ops->reg_mr(pr.srv, dst, 4 * CHUNK, XPORT_ACCESS_REMOTE_WRITE, &dmr), 0);
	post_recvs(pr.srv, 0, 1, 2);
	w[0] = wr_write(smr, src, CHUNK, dmr->iova, dmr->rkey, 0, 1);
	w[1] = wr_write(NULL, NULL, 0, 0, 0, 0, 2);
	w[1].opcode = XPORT_OP_WRITE_IMM;
	w[1].flags = XPORT_SEND_SIGNALED;
	assert_int_equal(ops->post_writes(pr.cli, w, 2), 0);
	wait_wcs(pr.srv, &wc, 1, 10000);
	assert_int_equal(wc.opcode, XPORT_WC_RECV_IMM);
	assert_int_equal(wc.status, XPORT_WC_WR_FLUSH_ERR);
	why = ops->last_error(pr.srv);
	assert_non_null(why);
	if (!strstr(why, "failed authentication")) {
		fail_msg("receiver's reason: %s", why);
	}
	/* The refused frame's request fails (a replay: the WRITE went, its copy did not). */
	wait_wcs(pr.cli, &wc, 1, 10000);
	assert_int_not_equal(wc.status, XPORT_WC_SUCCESS);
	why = ops->last_error(pr.cli);
	assert_non_null(why);
	if (!strstr(why, "failed authentication")) {
		fail_msg("sender's reason: %s", why);
	}
	free_pair(&pr);
	free(src);
	free(dst);
	g_seal = false;
	g_cli_tamper = 0;
	g_cli_secret_xor = 0;
}

static void test_sealed_flip(void **state)
{
	run_sealed_spoiled(XPORT_TEST_TAMPER_FLIP, 0);
}

static void test_sealed_replay(void **state)
{
	run_sealed_spoiled(XPORT_TEST_TAMPER_REPLAY, 0);
}

static void test_sealed_move(void **state)
{
	run_sealed_spoiled(XPORT_TEST_TAMPER_MOVE, 0);
}

static void test_sealed_truncate(void **state)
{
	run_sealed_spoiled(XPORT_TEST_TAMPER_TRUNCATE, 0);
}

static void test_sealed_other_key(void **state)
{
	run_sealed_spoiled(XPORT_TEST_TAMPER_NONE, 0x01);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sealed_tee),	cmocka_unit_test(test_sealed_flip),
		cmocka_unit_test(test_sealed_replay),	cmocka_unit_test(test_sealed_move),
		cmocka_unit_test(test_sealed_truncate), cmocka_unit_test(test_sealed_other_key),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
