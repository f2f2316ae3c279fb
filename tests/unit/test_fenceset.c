/* SPDX-License-Identifier: MIT */
/*
 * The fence set (src/fenceset.c): ranges inside the span only, exact
 * removal, overlap by one byte at either end, partial pages, bounds near
 * UINT64_MAX, spans whose pages grow past 4 KiB, and thousands of random
 * adds and removes checked against a plain list.
 */
#include "testutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fenceset.h"

static void test_basic(void **state)
{
	struct fence_set s;

	fence_set_init(&s, 16 * 4096);
	assert_false(fence_set_touches(&s, 0, 16 * 4096));
	assert_int_equal(fence_set_add(&s, 4096, 4096), 0);
	assert_int_equal(fence_set_add(&s, 4096, 4096), -EEXIST);
	assert_true(fence_set_touches(&s, 4096, 1));
	assert_true(fence_set_touches(&s, 8191, 1));
	assert_true(fence_set_touches(&s, 0, 4097));
	assert_false(fence_set_touches(&s, 0, 4096));
	assert_false(fence_set_touches(&s, 8192, 4096));
	/* A fence inside a page: writes elsewhere in that page pass. */
	assert_int_equal(fence_set_add(&s, 2048, 16), 0);
	assert_false(fence_set_touches(&s, 0, 2048));
	assert_true(fence_set_touches(&s, 2063, 1));
	assert_false(fence_set_touches(&s, 2064, 100));
	/* Removal is exact. */
	assert_int_equal(fence_set_remove(&s, 4096, 4095), -ENOENT);
	assert_int_equal(fence_set_remove(&s, 4096, 4096), 0);
	assert_int_equal(fence_set_remove(&s, 4096, 4096), -ENOENT);
	assert_false(fence_set_touches(&s, 4096, 4096));
	assert_true(fence_set_touches(&s, 0, 4096));
	assert_int_equal(fence_set_remove(&s, 2048, 16), 0);
	assert_false(fence_set_touches(&s, 0, 16 * 4096));
	fence_set_fini(&s);
}

static void test_bounds(void **state)
{
	struct fence_set s;

	fence_set_init(&s, 8192);
	assert_int_equal(fence_set_add(&s, 0, 0), -EINVAL);
	assert_int_equal(fence_set_add(&s, 0, 8193), -EINVAL);
	assert_int_equal(fence_set_add(&s, 8192, 1), -EINVAL);
	assert_int_equal(fence_set_add(&s, UINT64_MAX - 15, 64), -EINVAL);
	assert_int_equal(fence_set_add(&s, 64, UINT64_MAX), -EINVAL);
	assert_int_equal(fence_set_add(&s, 8191, 1), 0);
	assert_int_equal(fence_set_add(&s, 0, 8192), 0);
	assert_true(fence_set_touches(&s, 8191, 1));
	fence_set_fini(&s);
	/* Not allocated before the first fence: a huge span costs nothing until then. */
	fence_set_init(&s, UINT64_MAX);
	assert_null(s.pages);
	assert_true(s.page_shift > 12);
	fence_set_fini(&s);
}

/* Granules follow the smallest fence: whole 1 MiB slots, then a 16-byte fence. */
static void test_granules(void **state)
{
	struct fence_set s;

	fence_set_init(&s, 16u << 20);
	assert_int_equal(fence_set_add(&s, 3u << 20, 1u << 20), 0);
	assert_int_equal(s.page_shift, 20);
	assert_true(fence_set_touches(&s, (4u << 20) - 1, 1));
	assert_false(fence_set_touches(&s, 4u << 20, 1u << 20));
	assert_false(fence_set_touches(&s, (2u << 20) + 100, 1000));
	assert_int_equal(fence_set_add(&s, 100, 16), 0);
	assert_int_equal(s.page_shift, 12);
	assert_true(fence_set_touches(&s, (4u << 20) - 1, 1));
	assert_true(fence_set_touches(&s, 115, 1));
	assert_false(fence_set_touches(&s, 116, 4000));
	assert_int_equal(fence_set_remove(&s, 3u << 20, 1u << 20), 0);
	assert_false(fence_set_touches(&s, 3u << 20, 1u << 20));
	fence_set_fini(&s);
}

/* A span of 8 GiB: pages of 8 KiB or more, still exact. */
static void test_big_span(void **state)
{
	struct fence_set s;
	uint64_t span = (uint64_t)8 << 30;

	fence_set_init(&s, span);
	assert_true(s.page_shift > 12);
	assert_int_equal(fence_set_add(&s, span - 4096, 4096), 0);
	assert_true(fence_set_touches(&s, span - 1, 1));
	assert_false(fence_set_touches(&s, span - 4097, 1));
	assert_int_equal(fence_set_remove(&s, span - 4096, 4096), 0);
	assert_false(fence_set_touches(&s, span - 1, 1));
	fence_set_fini(&s);
}

#define SPAN  (1u << 20)
#define MODEL 4096

struct model {
	uint64_t off[MODEL], len[MODEL];
	size_t n;
};

static bool model_touches(const struct model *m, uint64_t off, uint64_t len)
{
	for (size_t i = 0; i < m->n; i++) {
		if (m->off[i] < off + len && off < m->off[i] + m->len[i]) {
			return true;
		}
	}
	return false;
}

static bool model_has(const struct model *m, uint64_t off, uint64_t len, size_t *ret_i)
{
	for (size_t i = 0; i < m->n; i++) {
		if (m->off[i] == off && m->len[i] == len) {
			*ret_i = i;
			return true;
		}
	}
	return false;
}

/* Slot-like and odd ranges, added and removed at random: the set answers as the list does. */
static void test_random_against_model(void **state)
{
	static struct model m;
	struct fence_set s;
	unsigned seed = 12345;

	m.n = 0;
	fence_set_init(&s, SPAN);
	for (int step = 0; step < 50000; step++) {
		uint32_t r = (uint32_t)rand_r(&seed);
		uint64_t off, len;
		size_t i;

		if (r & 1) {
			/* slot-aligned: 256 slots of 4 KiB */
			off = (uint64_t)((r >> 1) % 256) * 4096;
			len = 4096;
		} else {
			off = (r >> 1) % SPAN;
			len = 1 + (uint64_t)rand_r(&seed) % 20000;
			if (len > SPAN - off) {
				len = SPAN - off;
			}
		}
		if ((r >> 28) == 0 && m.n > 0) {
			/* remove a random existing one */
			i = (size_t)rand_r(&seed) % m.n;
			assert_int_equal(fence_set_remove(&s, m.off[i], m.len[i]), 0);
			m.off[i] = m.off[m.n - 1];
			m.len[i] = m.len[m.n - 1];
			m.n--;
		} else if (model_has(&m, off, len, &i)) {
			assert_int_equal(fence_set_add(&s, off, len), -EEXIST);
			assert_int_equal(fence_set_remove(&s, off, len), 0);
			m.off[i] = m.off[m.n - 1];
			m.len[i] = m.len[m.n - 1];
			m.n--;
		} else if (m.n < MODEL && r % 7 != 0) {
			assert_int_equal(fence_set_add(&s, off, len), 0);
			m.off[m.n] = off;
			m.len[m.n] = len;
			m.n++;
		} else {
			assert_int_equal(fence_set_remove(&s, off, len), -ENOENT);
		}
		assert_int_equal(s.n, m.n);
		off = (uint64_t)rand_r(&seed) % SPAN;
		len = 1 + (uint64_t)rand_r(&seed) % 8192;
		if (len > SPAN - off) {
			len = SPAN - off;
		}
		assert_int_equal(fence_set_touches(&s, off, len), model_touches(&m, off, len));
	}
	assert_true(m.n > 1000); /* the table grew and probed long runs */
	/* Drain: everything left comes out exactly once, and the pages are clean. */
	while (m.n > 0) {
		assert_int_equal(fence_set_remove(&s, m.off[m.n - 1], m.len[m.n - 1]), 0);
		m.n--;
	}
	for (size_t p = 0; p < s.npages; p++) {
		assert_int_equal(s.pages[p], 0);
	}
	assert_false(fence_set_touches(&s, 0, SPAN));
	fence_set_fini(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_granules),
		cmocka_unit_test(test_big_span),
		cmocka_unit_test(test_random_against_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
