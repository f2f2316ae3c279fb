/* SPDX-License-Identifier: MIT */
/*
 * What the plan tests (test_plan_*.c) share: a sample plan of one tree, its
 * header and digest made to fit, to read back plain or compressed.
 */
#pragma once

struct plan_header;

/* Write a plan of n entries in 3 shards to path; its header in h. */
void write_plan(const char *path, struct plan_header *h, unsigned n);
