/* SPDX-License-Identifier: MIT */
/* The plan tests' sample plan (plan_harness.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plan.h"
#include "plan_harness.h"

void write_plan(const char *path, struct plan_header *h, unsigned n)
{
	XXH3_state_t *st = XXH3_createState();
	char *body = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&body, &len), *f;

	memset(h, 0, sizeof(*h));
	assert_int_equal(plan_new_id(h->id), 0);
	strcpy(h->source, "src");
	strcpy(h->base, "/base");
	strcpy(h->hosts, "a,b");
	strcpy(h->path, "mod/dst");
	strcpy(h->skip, "quick");
	h->port = 7471;
	h->shards = 3;
	for (unsigned i = 1; i <= n; i++) {
		struct plan_entry e = { .n = i,
					.shard = i % 3,
					.ftype = PROTO_FT_REG,
					.size = i,
					.mtime = -5,
					.mtime_ns = 7,
					.mode = 0640 };

		/* A plan of one tree: its top first, every other name beneath it. */
		if (i == 1) {
			e.ftype = PROTO_FT_DIR;
			snprintf(e.name, sizeof(e.name), "d");
		} else {
			snprintf(e.name, sizeof(e.name), "d/f%u", i);
		}
		plan_put_entry(m, &e);
		h->entries++;
		h->bytes += i;
	}
	fclose(m);
	XXH3_128bits_reset(st);
	XXH3_128bits_update(st, body, len);
	plan_digest_final(st, h, h->digest);
	f = fopen(path, "w");
	assert_non_null(f);
	plan_put_header(f, h);
	fwrite(body, 1, len, f);
	fclose(f);
	free(body);
	XXH3_freeState(st);
}
