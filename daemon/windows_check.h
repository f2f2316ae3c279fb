/* SPDX-License-Identifier: MIT */
/*
 * Which RDMA devices bind type-2 memory windows (the zero-copy fence,
 * PROTO_CAP_MW_FENCE), asked once per device per daemon rather than in
 * every session's HELLO: the supervisor asks each device at start and at
 * each reload (opening a device takes seconds under an emulator), and the
 * sessions it forks answer from the table they inherit.
 */
#pragma once

#include <stddef.h>

#include "rdmadev.h"

#define WINDOWS_CHECK_MAX 32

/* Does device dev bind type-2 windows? 1, 0 (why says), -errno when it can't be asked. */
typedef int (*windows_ask_fn)(const char *dev, char *why, size_t whylen);

struct windows_dev {
	char name[RDMADEV_NAME_MAX + 1];
	char guid[40]; /* its node_guid when asked: another device under that name differs */
	int answer;
	char why[160];
};

struct windows_table {
	const char *sysfs; /* RDMADEV_SYSFS; tests pass a fake tree */
	windows_ask_fn ask;
	unsigned n;
	struct windows_dev dev[WINDOWS_CHECK_MAX];
	unsigned asked; /* devices asked so far (tests) */
};

/* The daemon's table: the host's sysfs, asked through the verbs transport. */
struct windows_table *windows_table_daemon(void);

/* Supervisor: every RDMA device under t->sysfs asked again (at start, at each reload). */
void windows_table_refresh(struct windows_table *t);

/*
 * Session: do devs[0, n) all bind type-2 windows? 1, 0 (why names the
 * device), -errno (why says). From the table for each device it holds
 * under the same node GUID with an answer (>= 0); any other (one added or
 * replaced since, or one that could not be asked then) is asked now.
 */
int windows_table_answer(struct windows_table *t, const char *const *devs, unsigned n, char *why,
			 size_t whylen);
