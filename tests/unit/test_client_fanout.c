/* SPDX-License-Identifier: MIT */
/*
 * A fan-out's outcomes (client/fanout.h): the one exit code for all
 * destinations, which failures cut a destination out of the chain, the
 * results a daemon reports checked before they are believed, destinations
 * left without one, the error line kept for a result, and --json's
 * destinations (hostile text escaped). The end-to-end runs are
 * tests/integration/t_relay.sh's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "exitcodes.h"
#include "fanout.h"
#include "log.h"
#include "output.h"

/* n destinations h1..hn:data/x, none with an outcome yet. */
static struct fanout *fanout_of(size_t n)
{
	struct fanout *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->dests = calloc(n, sizeof(*f->dests));
	assert_non_null(f->dests);
	f->n = n;
	f->feed = -1;
	for (size_t i = 0; i < n; i++) {
		snprintf(f->dests[i].rem.host, sizeof(f->dests[i].rem.host), "h%zu", i + 1);
		snprintf(f->dests[i].rem.path, sizeof(f->dests[i].rem.path), "data/x");
		f->dests[i].port = 7471;
	}
	return f;
}

static void fanout_destroy(struct fanout *f)
{
	fanout_free(f);
	free(f);
}

static void set(struct fanout *f, size_t i, uint8_t status, uint8_t exit_code)
{
	f->dests[i].status = status;
	f->dests[i].exit_code = exit_code;
}

static void test_exit_code(void **state)
{
	struct fanout *f = fanout_of(3);

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		set(f, i, PROTO_RELAY_COPIED, EXIT_OK);
	}
	assert_int_equal(fanout_exit_code(f), EXIT_OK);
	/* Some copied, one refused: 25, whatever the refusal's code. */
	set(f, 1, PROTO_RELAY_FAILED, EXIT_REFUSED);
	assert_int_equal(fanout_exit_code(f), EXIT_FANOUT_PARTIAL);
	/* A partial destination is not a copied one. */
	set(f, 1, PROTO_RELAY_PARTIAL, EXIT_PARTIAL);
	assert_int_equal(fanout_exit_code(f), EXIT_FANOUT_PARTIAL);
	/* None copied: the first failed destination's own code. */
	set(f, 0, PROTO_RELAY_UNREACHED, EXIT_CONNECT);
	set(f, 1, PROTO_RELAY_FAILED, EXIT_REFUSED);
	set(f, 2, PROTO_RELAY_FAILED, EXIT_INTEGRITY);
	assert_int_equal(fanout_exit_code(f), EXIT_CONNECT);
	/* A failure reported with exit 0 is never success. */
	set(f, 0, PROTO_RELAY_FAILED, EXIT_OK);
	assert_int_equal(fanout_exit_code(f), EXIT_PROTOCOL);
	fanout_destroy(f);
}

static void test_bypass(void **state)
{
	struct fanout *f = fanout_of(3);
	struct output_totals t = { .bytes = 1234, .files = 1 };

	(void)state;
	/* A local failure before connecting: the next destination would fail the same way. */
	assert_false(fanout_bypass(f, NULL, EXIT_LOCAL_IO));
	f->connecting = true;
	f->opened = false;
	assert_false(fanout_bypass(f, NULL, EXIT_INTERRUPTED));
	assert_false(fanout_bypass(f, NULL, EXIT_OK));
	snprintf(f->last_error, sizeof(f->last_error), "cannot connect to h1 port 7471: refused");
	assert_true(fanout_bypass(f, NULL, EXIT_CONNECT));
	assert_int_equal(f->dests[0].status, PROTO_RELAY_UNREACHED);
	assert_int_equal(f->dests[0].exit_code, EXIT_CONNECT);
	assert_string_equal(f->dests[0].text, "cannot connect to h1 port 7471: refused");
	/* Data went: a hop that died mid-copy is cut out, one that failed files is not. */
	f->opened = true;
	f->dests[0].status = 0;
	assert_false(fanout_bypass(f, &t, EXIT_PARTIAL));
	assert_false(fanout_bypass(f, &t, EXIT_LOCAL_IO));
	assert_false(fanout_bypass(f, &t, EXIT_INTEGRITY));
	assert_false(fanout_bypass(f, &t, EXIT_INTERRUPTED));
	snprintf(f->last_error, sizeof(f->last_error), "h1: connection lost");
	assert_true(fanout_bypass(f, &t, EXIT_TRANSPORT));
	assert_int_equal(f->dests[0].status, PROTO_RELAY_FAILED);
	assert_int_equal(f->dests[0].exit_code, EXIT_TRANSPORT);
	assert_int_equal(f->dests[0].bytes, 1234);
	assert_string_equal(f->dests[0].text, "h1: connection lost; cut out of the chain mid-copy");
	/* With --partial it keeps what it has: a resumable partial. */
	f->first = 1;
	f->partial = true;
	assert_true(fanout_bypass(f, &t, EXIT_REMOTE_IO));
	assert_int_equal(f->dests[1].status, PROTO_RELAY_PARTIAL);
	assert_string_equal(f->dests[1].text, "h1: connection lost; cut out of the chain mid-copy, "
					      "its partial kept for a --partial re-run");
	/* The last destination has none after it: its failure concludes. */
	f->first = 2;
	f->opened = false;
	assert_false(fanout_bypass(f, NULL, EXIT_CONNECT));
	fanout_destroy(f);
}

static struct msg_relay_result result(uint8_t index, uint8_t status, uint8_t exit_code,
				      const char *text)
{
	return (struct msg_relay_result){ .index = index,
					  .status = status,
					  .exit_code = exit_code,
					  .files_ok = 3,
					  .bytes = 4096,
					  .host = (char *)"hX",
					  .text = (char *)text };
}

static void test_results_checked(void **state)
{
	struct fanout *f = fanout_of(4);
	struct msg_relay_result r;

	(void)state;
	/* Index 0, past the chain, an unknown status: refused, nothing taken. */
	r = result(0, PROTO_RELAY_COPIED, 0, "");
	assert_int_equal(fanout_take_result(f, &r), -EBADMSG);
	r = result(4, PROTO_RELAY_COPIED, 0, "");
	assert_int_equal(fanout_take_result(f, &r), -EBADMSG);
	r = result(1, 0, 0, "");
	assert_int_equal(fanout_take_result(f, &r), -EBADMSG);
	r = result(1, PROTO_RELAY_UNREACHED + 1, 0, "");
	assert_int_equal(fanout_take_result(f, &r), -EBADMSG);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(f->dests[i].status, 0);
	}
	/* Index 1 is the destination after the first. */
	r = result(1, PROTO_RELAY_COPIED, EXIT_INTEGRITY, "");
	assert_int_equal(fanout_take_result(f, &r), 0);
	assert_int_equal(f->dests[1].status, PROTO_RELAY_COPIED);
	assert_int_equal(f->dests[1].exit_code, EXIT_OK);
	assert_int_equal(f->dests[1].bytes, 4096);
	/* Twice the same destination: refused, the first kept. */
	r = result(1, PROTO_RELAY_FAILED, EXIT_REFUSED, "no");
	assert_int_equal(fanout_take_result(f, &r), -EBADMSG);
	assert_int_equal(f->dests[1].status, PROTO_RELAY_COPIED);
	/* A failure that says exit 0 is a protocol error's. */
	r = result(3, PROTO_RELAY_FAILED, EXIT_OK, "upstream h3 failed");
	assert_int_equal(fanout_take_result(f, &r), 0);
	assert_int_equal(f->dests[3].exit_code, EXIT_PROTOCOL);
	assert_string_equal(f->dests[3].text, "upstream h3 failed");
	/* After the first was cut out, index 1 is the one after the second. */
	fanout_destroy(f);
	f = fanout_of(4);
	f->first = 1;
	r = result(1, PROTO_RELAY_COPIED, 0, "");
	assert_int_equal(fanout_take_result(f, &r), 0);
	assert_int_equal(f->dests[2].status, PROTO_RELAY_COPIED);
	r = result(3, PROTO_RELAY_COPIED, 0, "");
	assert_int_equal(fanout_take_result(f, &r), -EBADMSG);
	fanout_destroy(f);
}

static void test_conclude(void **state)
{
	struct fanout *f = fanout_of(3);
	struct output out;
	struct output_totals t = { .files = 2, .bytes = 100 };
	struct msg_relay_result r = result(1, PROTO_RELAY_COPIED, 0, "");

	(void)state;
	output_init(&out, false, 0, -1);
	f->connecting = f->opened = true;
	assert_int_equal(fanout_take_result(f, &r), 0);
	/* The first copied, the second reported, the third never: no result is a failure. */
	assert_int_equal(fanout_conclude(f, &out, &t, EXIT_OK), EXIT_FANOUT_PARTIAL);
	assert_int_equal(f->dests[0].status, PROTO_RELAY_COPIED);
	assert_int_equal(f->dests[0].files_ok, 2);
	assert_int_equal(f->dests[2].status, PROTO_RELAY_FAILED);
	assert_int_equal(f->dests[2].exit_code, EXIT_PROTOCOL);
	assert_string_equal(f->dests[2].text, "no result from h1");
	assert_int_equal(out.ndests, 3);
	assert_string_equal(out.dests[2].status, "failed");
	assert_true(out.dests[1].copied);
	fanout_destroy(f);

	/* The first failed mid-copy: the ones behind it failed with it, its code for all. */
	f = fanout_of(3);
	f->connecting = f->opened = true;
	snprintf(f->last_error, sizeof(f->last_error), "transfer failed: connection lost");
	assert_int_equal(fanout_conclude(f, &out, &t, EXIT_TRANSPORT), EXIT_TRANSPORT);
	assert_int_equal(f->dests[0].status, PROTO_RELAY_FAILED);
	assert_string_equal(f->dests[0].text, "transfer failed: connection lost");
	assert_string_equal(f->dests[1].text, "upstream h1 failed");
	assert_int_equal(f->dests[2].exit_code, EXIT_TRANSPORT);
	fanout_destroy(f);

	/* The last one lost mid-copy with --partial: a resumable partial, nowhere to cut to. */
	f = fanout_of(2);
	f->dests[0].status = PROTO_RELAY_COPIED;
	f->first = 1;
	f->connecting = f->opened = f->partial = true;
	snprintf(f->last_error, sizeof(f->last_error), "h2: connection lost");
	assert_false(fanout_bypass(f, &t, EXIT_TRANSPORT));
	assert_int_equal(fanout_conclude(f, &out, &t, EXIT_TRANSPORT), EXIT_FANOUT_PARTIAL);
	assert_int_equal(f->dests[1].status, PROTO_RELAY_PARTIAL);
	assert_string_equal(f->dests[1].text,
			    "h2: connection lost, its partial kept for a --partial re-run");
	fanout_destroy(f);

	/* The last one, unreached after the others were cut out too. */
	f = fanout_of(2);
	f->dests[0].status = PROTO_RELAY_UNREACHED;
	f->dests[0].exit_code = EXIT_CONNECT;
	f->first = 1;
	f->connecting = true;
	assert_int_equal(fanout_conclude(f, &out, NULL, EXIT_REFUSED), EXIT_CONNECT);
	assert_int_equal(f->dests[1].status, PROTO_RELAY_UNREACHED);
	assert_string_equal(f->dests[1].text, "failed with exit code 5");
	fanout_destroy(f);
	output_release(&out);
}

static void test_last_error(void **state)
{
	struct fanout *f = fanout_of(2);

	(void)state;
	fanout_watch_errors(f);
	log_error("h2: no relay from rule lets relay deliver into 'data'");
	log_warning("a warning is not why it failed");
	log_set_observer(0, NULL, NULL);
	log_error("after the observer is gone");
	assert_string_equal(f->last_error, "h2: no relay from rule lets relay deliver into 'data'");
	fanout_destroy(f);
}

/* What output_dests_json prints, into buf. */
static void dests_json(const struct output *out, char *buf, size_t len)
{
	FILE *tmp = tmpfile();
	int saved = dup(STDOUT_FILENO);
	size_t n;

	assert_non_null(tmp);
	fflush(stdout);
	assert_true(dup2(fileno(tmp), STDOUT_FILENO) >= 0);
	output_dests_json(out);
	fflush(stdout);
	assert_true(dup2(saved, STDOUT_FILENO) >= 0);
	close(saved);
	rewind(tmp);
	n = fread(buf, 1, len - 1, tmp);
	buf[n] = '\0';
	fclose(tmp);
}

static void test_json(void **state)
{
	struct output_dest d[2] = {
		{ .host = "h1",
		  .path = "data/x",
		  .status = "copied",
		  .copied = true,
		  .files_ok = 120,
		  .bytes = 1 << 20,
		  .error = "" },
		{ .host = "h2\x1b[31m",
		  .path = "data/\"x",
		  .status = "failed",
		  .exit_code = EXIT_REFUSED,
		  .error = "refused\nforged line" },
	};
	struct output out;
	char buf[2048];

	(void)state;
	output_init(&out, true, 0, 0);
	dests_json(&out, buf, sizeof(buf));
	assert_string_equal(buf, "");
	output_destinations(&out, d, 2);
	dests_json(&out, buf, sizeof(buf));
	assert_non_null(strstr(buf, ",\"destinations\":[{\"host\":\"h1\",\"path\":\"data/x\","
				    "\"status\":\"copied\",\"files_ok\":120,\"files_failed\":0,"
				    "\"bytes\":1048576,\"exit\":0,\"error\":\"\"},"));
	/* Text from the network: escaped, never a raw control or quote. */
	assert_null(strchr(buf, '\x1b'));
	assert_null(strchr(buf, '\n'));
	assert_non_null(strstr(buf, "\"path\":\"data/\\\"x\""));
	assert_non_null(strstr(buf, "\"status\":\"failed\""));
	assert_non_null(strstr(buf, "\"exit\":5"));
	output_release(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_code),	cmocka_unit_test(test_bypass),
		cmocka_unit_test(test_results_checked), cmocka_unit_test(test_conclude),
		cmocka_unit_test(test_last_error),	cmocka_unit_test(test_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
