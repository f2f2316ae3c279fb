/* SPDX-License-Identifier: MIT */
/*
 * The FILES window against a receiver played by hand: how many entries the
 * sender offers unresolved (narrow, wide, wider; interleaved; long names),
 * the span of ids it keeps open, and a SUMS answer that never comes.
 */
#include "engine_harness.h"

/* A source of n empty regular files, f00000 onwards, made in the source directory. */
struct gen_source {
	struct engine_src cur;
	char name[PROTO_MAX_PATH + 1];
	size_t n, next;
	size_t name_len; /* 0: short names, f00000...; else names this long */
};

static int gen_next(void *ud, const struct engine_src **ret, char *why, size_t whylen)
{
	struct gen_source *g = ud;

	(void)why, (void)whylen;
	if (g->next == g->n) {
		return 0;
	}
	if (g->name_len) {
		/* Components of 200 bytes; no such file: each fails when it is opened. */
		for (size_t i = 0; i < g->name_len; i++) {
			g->name[i] = i % 201 == 200 ? '/' : 'n';
		}
		snprintf(g->name + g->name_len - 6, 7, "%06zu", g->next++);
	} else {
		snprintf(g->name, sizeof(g->name), "f%05zu", g->next++);
	}
	g->cur.name = g->cur.path = g->name; /* the engine copies both */
	*ret = &g->cur;
	return 1;
}

/* n empty files in the source directory, named as gen_next names them. */
static void make_empty_files(struct fx *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char name[32];
		int fd;

		snprintf(name, sizeof(name), "f%05zu", i);
		fd = openat(f->src_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		close(fd);
	}
}

/*
 * g's files offered to a raw receiver that resolves none of them: it accepts
 * every file, or with refuse_rest the first only, refusing the others (which
 * resolves those at once). Runs until the sender gives up at the idle
 * timeout; returns the last id offered, in *ret_offered how many, and in
 * *ret_before_done how many had been offered when the first FILE_DONE came.
 */
static uint32_t offer_unresolved(struct fx *f, struct gen_source *g, uint64_t caps,
				 bool refuse_rest, uint32_t *ret_offered, uint32_t *ret_before_done)
{
	struct raw w;
	uint32_t offered = 0, last = 0, before_done = 0;

	g->cur = (struct engine_src){ .dirfd = f->src_fd, .ftype = PROTO_FT_REG, .mode = 0644 };
	f->txr.p.source = (struct engine_source){ .next = gen_next, .ud = g };
	f->txr.p.peer_caps = caps;
	f->txr.p.idle_timeout_ms = IDLE_MS;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	for (;;) {
		struct msg m;

		raw_next(&w, &m);
		if (m.type == MSG_ERROR) {
			assert_int_equal(m.u.error.code, PERR_TIMEOUT);
			msg_clear(&m);
			break;
		}
		if (m.type == MSG_FILES) {
			struct proto_status st[PROTO_MAX_BATCH];
			struct msg a = { .type = MSG_FILES_ACK };

			for (size_t i = 0; i < m.u.files.count; i++) {
				/* Ids strictly increase from 1. */
				assert_int_equal(m.u.files.files[i].id, last + 1);
				last = m.u.files.files[i].id;
				if (g->name_len) {
					assert_int_equal(strlen(m.u.files.files[i].name),
							 g->name_len);
				}
				st[i] = (struct proto_status){ .id = last,
							       .status = refuse_rest && last != 1
									     ? PERR_PERMISSION
									     : PERR_OK,
							       .text = (char *)"" };
			}
			offered += m.u.files.count;
			a.u.files_ack.count = m.u.files.count;
			a.u.files_ack.st = st;
			raw_send(&w, &a);
		} else {
			/* An empty file is done at once, a missing one fails at its open. */
			assert_int_equal(m.type, MSG_FILE_DONE);
			before_done = before_done ? before_done : offered;
			if (refuse_rest) {
				assert_int_equal(m.u.file_done.id, 1);
			}
		}
		msg_clear(&m);
	}
	run_join(&f->txr);
	assert_failed_run(&f->txr, -ETIMEDOUT, PERR_TIMEOUT, "");
	raw_free(&w);
	if (ret_offered) {
		*ret_offered = offered;
	}
	if (ret_before_done) {
		*ret_before_done = before_done;
	}
	return last;
}

/*
 * The file window: a receiver that accepts every file and resolves none.
 * The sender offers exactly as many as the receiver announced it holds
 * (PROTO_CAP_WIDER_WINDOW: PROTO_FILES_WIDER; PROTO_CAP_WIDE_WINDOW:
 * PROTO_FILES_WIDE; else PROTO_FILES_NARROW, what a receiver with the old
 * 1,024-entry table takes), then waits; no more come until it gives up at
 * the idle timeout.
 */
static void files_window(void **state, uint64_t caps, uint32_t want)
{
	struct fx *f = *state;
	struct gen_source g = { .n = want + 200 };
	uint32_t offered;

	make_empty_files(f, g.n);
	offer_unresolved(f, &g, caps, false, &offered, NULL);
	assert_int_equal(offered, want);
}

static void test_window_narrow(void **state)
{
	files_window(state, 0, PROTO_FILES_NARROW);
}

static void test_window_wide(void **state)
{
	files_window(state, PROTO_CAP_WIDE_WINDOW, PROTO_FILES_WIDE);
}

static void test_window_wider(void **state)
{
	files_window(state, PROTO_CAP_WIDE_WINDOW | PROTO_CAP_WIDER_WINDOW, PROTO_FILES_WIDER);
}

/*
 * The sender reads while it offers: one FILES batch per loop turn, so the
 * first accepted file is read and done (empty files: FILE_DONE at once)
 * long before the wider window is full. A sender that offered the whole
 * window before reading (6,144 stats of its walk) sends no FILE_DONE until
 * all 6,144 are offered.
 */
static void test_offer_interleaved(void **state)
{
	struct fx *f = *state;
	struct gen_source g = { .n = PROTO_FILES_WIDER + 200 };
	uint32_t offered, before_done;

	make_empty_files(f, g.n);
	offer_unresolved(f, &g, PROTO_CAP_WIDE_WINDOW | PROTO_CAP_WIDER_WINDOW, false, &offered,
			 &before_done);
	assert_int_equal(offered, PROTO_FILES_WIDER);
	assert_true(before_done > 0);
	assert_true(before_done < PROTO_FILES_WIDER);
	printf("offered before the first FILE_DONE: %u of %u\n", before_done, offered);
}

/*
 * Long names: a receiver with the wider window that accepts every file and
 * resolves none. The sender stops offering once its files' names and source
 * paths take ENGINE_NAMES_IN_FLIGHT_MAX bytes, well before the window.
 */
static void test_window_long_names(void **state)
{
	struct fx *f = *state;
	const size_t len = 4000, per = 2 * (len + 1);
	const uint32_t want = (uint32_t)((ENGINE_NAMES_IN_FLIGHT_MAX + per - 1) / per);
	struct gen_source *g = calloc(1, sizeof(*g));
	uint32_t offered;

	assert_non_null(g);
	assert_true(want < PROTO_FILES_WIDER);
	g->n = want + 100;
	g->name_len = len;
	offer_unresolved(f, g, PROTO_CAP_WIDE_WINDOW | PROTO_CAP_WIDER_WINDOW, false, &offered,
			 NULL);
	assert_int_equal(offered, want);
	free(g);
}

/*
 * The span of ids: a receiver that accepts the first file, never resolves
 * it, and refuses every other (resolved at once). The sender offers ids up
 * to the first plus the receiver's span less one (a receiver with a smaller
 * table than ours takes a file by its id modulo its own table), then no
 * more until it gives up at the idle timeout.
 */
static void files_span(void **state, uint64_t caps, uint32_t span)
{
	struct fx *f = *state;
	struct gen_source g = { .n = span + 200 };

	make_empty_files(f, g.n);
	assert_int_equal(offer_unresolved(f, &g, caps, true, NULL, NULL), span);
}

static void test_span_narrow(void **state)
{
	files_span(state, 0, PROTO_SPAN_NARROW);
}

static void test_span_wide(void **state)
{
	files_span(state, PROTO_CAP_WIDE_WINDOW, PROTO_SPAN_WIDE);
}

static void test_span_wider(void **state)
{
	files_span(state, PROTO_CAP_WIDE_WINDOW | PROTO_CAP_WIDER_WINDOW, PROTO_SPAN_WIDER);
}

/*
 * Skip level checksum: a receiver that answers SUM_WANTED and then never
 * decides. The sender sends its digest, then waits beyond the idle timeout
 * for as long as the receiver could take to read the file at 50 MB/s, then
 * fails with TIMEOUT all the same.
 */
static void test_sum_answer_never_comes(void **state)
{
	struct fx *f = *state;
	struct source s = { 0 };
	struct raw w;
	struct msg m;
	struct proto_status st = { .status = PERR_SUM_WANTED, .text = (char *)"" };
	size_t size = 50u << 20; /* 1 s at 50 MB/s */
	int64_t t0;

	source_file(f, &s, "big", size);
	f->txr.p.source = (struct engine_source){ .next = source_next, .ud = &s };
	f->txr.p.idle_timeout_ms = IDLE_MS;
	f->txr.p.peer_caps = PROTO_CAP_SKIP | PROTO_CAP_CHECK;
	raw_init_receiver(&w, &f->rx);
	run_start(&f->txr);
	raw_expect(&w, MSG_FILES, &m);
	st.id = m.u.files.files[0].id;
	msg_clear(&m);
	m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
	raw_send(&w, &m);
	t0 = now_ms();
	raw_expect(&w, MSG_SUMS, &m);
	assert_int_equal(m.u.sums.count, 1);
	assert_int_equal(m.u.sums.sums[0].id, st.id);
	assert_int_equal(m.u.sums.sums[0].status, PERR_OK);
	msg_clear(&m);
	raw_expect_error(&w, PERR_TIMEOUT, "idle timeout");
	assert_true(now_ms() - t0 >= IDLE_MS + 900);
	run_join(&f->txr);
	assert_failed_run(&f->txr, -ETIMEDOUT, PERR_TIMEOUT, "no data progress");
	assert_no_fd_beneath(f->src);
	raw_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_window_narrow),
		T(test_window_wide),
		T(test_window_wider),
		T(test_offer_interleaved),
		T(test_window_long_names),
		T(test_span_narrow),
		T(test_span_wide),
		T(test_span_wider),
		T(test_sum_answer_never_comes),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
