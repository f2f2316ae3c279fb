/* SPDX-License-Identifier: MIT */
/*
 * The daemon's memory-window answers per RDMA device (daemon/windows_check.c),
 * over a fake sysfs tree with a counting stand-in for the verbs question
 * (opening a device needs one; the VM test mwfence.sh asks real ones):
 *   - a refresh asks every device once; sessions then answer HELLO from the
 *     table without asking any device again;
 *   - the answer for several devices is no when one says no (its reason),
 *     an error when one cannot be asked;
 *   - a device added since the refresh is asked when a session meets it; a
 *     device replaced under the same name (another node GUID) is asked
 *     again; an error at the refresh is not kept (asked again); a device
 *     gone from sysfs is not listed at the next refresh.
 */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_tree.h"
#include "windows_check.h"

/* The stand-in: rxe* bind windows, siw* do not, gone* cannot be asked. */
static int fake_ask(const char *dev, char *why, size_t whylen)
{
	if (strncmp(dev, "rxe", 3) == 0) {
		snprintf(why, whylen, "%s binds type-2 memory windows", dev);
		return 1;
	}
	if (strncmp(dev, "siw", 3) == 0) {
		snprintf(why, whylen, "%s has no type-2 memory windows", dev);
		return 0;
	}
	snprintf(why, whylen, "%s: ibv_open_device: No such device", dev);
	return -ENODEV;
}

static void dev_add(const char *root, const char *name, const char *guid)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "%s/node_guid", name);
	fake_tree_mk(root, rel, guid);
}

static int answer(struct windows_table *t, const char *a, const char *b, char *why, size_t len)
{
	const char *devs[2] = { a, b };

	return windows_table_answer(t, devs, b ? 2 : 1, why, len);
}

static void test_windows_table(void **state)
{
	char *root = tu_mkdtemp();
	struct windows_table t = { .sysfs = root, .ask = fake_ask };
	char why[256];

	(void)state;
	dev_add(root, "rxe0", "0200:00ff:fe00:0001");
	dev_add(root, "rxe1", "0200:00ff:fe00:0002");
	dev_add(root, "siw0", "0200:00ff:fe00:0003");
	dev_add(root, "gone0", "0200:00ff:fe00:0004");
	windows_table_refresh(&t);
	assert_int_equal(t.n, 4);
	assert_int_equal(t.asked, 4);

	/* Sessions: from the table, no device asked. */
	assert_int_equal(answer(&t, "rxe0", "rxe1", why, sizeof(why)), 1);
	assert_string_equal(why, "rxe1 binds type-2 memory windows");
	assert_int_equal(answer(&t, "rxe1", "siw0", why, sizeof(why)), 0);
	assert_string_equal(why, "siw0 has no type-2 memory windows");
	assert_int_equal(t.asked, 4);

	/* An error at the refresh is not kept: asked again by the session. */
	assert_int_equal(answer(&t, "gone0", NULL, why, sizeof(why)), -ENODEV);
	assert_int_equal(t.asked, 5);

	/* Added since: asked when met. Replaced under its name (another GUID): asked again. */
	dev_add(root, "rxe2", "0200:00ff:fe00:0005");
	assert_int_equal(answer(&t, "rxe2", NULL, why, sizeof(why)), 1);
	assert_int_equal(t.asked, 6);
	dev_add(root, "rxe0", "0200:00ff:fe00:0009");
	assert_int_equal(answer(&t, "rxe0", NULL, why, sizeof(why)), 1);
	assert_int_equal(t.asked, 7);
	assert_int_equal(answer(&t, "rxe1", NULL, why, sizeof(why)), 1);
	assert_int_equal(t.asked, 7);

	/* The next refresh (a reload) lists what is there now, each asked once. */
	tu_rmtree(root);
	free(root);
	root = tu_mkdtemp();
	t.sysfs = root;
	dev_add(root, "rxe1", "0200:00ff:fe00:0002");
	t.asked = 0;
	windows_table_refresh(&t);
	assert_int_equal(t.n, 1);
	assert_int_equal(t.asked, 1);
	assert_int_equal(answer(&t, "rxe1", NULL, why, sizeof(why)), 1);
	assert_int_equal(t.asked, 1);

	/* No RDMA device at all (no sysfs class): an empty table, nothing asked. */
	tu_rmtree(root);
	t.asked = 0;
	windows_table_refresh(&t);
	assert_int_equal(t.n, 0);
	assert_int_equal(t.asked, 0);
	free(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_windows_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
