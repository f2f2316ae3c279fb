/* SPDX-License-Identifier: MIT */
/*
 * Fake sysfs trees for the unit tests of what reads sysfs (rdmadev and its
 * neighbours): a file or directory under a temp root, its parents made.
 * Include after <cmocka.h>.
 */
#pragma once

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* root/rel, its parent directories made; with content, a file (and a newline), else a directory. */
static inline void fake_tree_mk(const char *root, const char *rel, const char *content)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			(void)mkdir(path, 0755);
			*p = '/';
		}
	}
	if (!content) {
		assert_int_equal(mkdir(path, 0755), 0);
		return;
	}
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", content);
	fclose(f);
}
