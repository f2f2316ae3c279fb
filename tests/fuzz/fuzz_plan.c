/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for what reads plans and journals (src/ndjson.c,
 * src/plan_read.c, src/plan_journal.c, src/zfile.c): the input, as a file,
 * is opened as a plan (plain, or zstd when it starts with the zstd magic:
 * the corpus has both) and read to its end; each of its lines is also
 * parsed as a journal line, and the file is read as a journal
 * (journal_read: NUL bytes, torn last lines). Names that come out are
 * written back with ndjson_put_name and must read back the same.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ndjson.h"
#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ndjson_obj obj;
static struct journal_line jl;
static struct plan_entry pe;

static void name_round_trip(const char *name)
{
	char buf[5 * (PROTO_MAX_PATH + 16)], out[PROTO_MAX_PATH + 1];
	const char *why;
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	if (!f) {
		return;
	}
	fputs("{\"x\":0", f);
	ndjson_put_name(f, "name", name);
	fputs("}", f);
	fclose(f);
	if (ndjson_parse(buf, strlen(buf), &obj, &why) != 0 ||
	    ndjson_get_name(&obj, "name", out, sizeof(out)) != 0 || strcmp(out, name)) {
		abort();
	}
}

static int journal_each(void *ud, uint64_t line, const struct journal_line *l)
{
	(void)ud;
	(void)line;
	if (l->kind == JL_ENTRY) {
		name_round_trip(l->name);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[] = "/tmp/fuzz_plan.XXXXXX", err[8192];
	struct plan_reader *r;
	const char *why;
	int fd = mkstemp(path);
	size_t start = 0;

	if (fd < 0) {
		return 0;
	}
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		unlink(path);
		return 0;
	}
	close(fd);
	if (plan_open(path, &r, err, sizeof(err)) == 0) {
		while (plan_next(r, &pe, err, sizeof(err)) > 0) {
			name_round_trip(pe.name);
		}
		plan_close(r);
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		off_t good;

		journal_read(fd, path, journal_each, NULL, &good, err, sizeof(err));
		close(fd);
	}
	unlink(path);
	for (size_t i = 0; i <= size; i++) {
		if (i == size || data[i] == '\n') {
			char *line = malloc(i - start + 1);

			if (line) {
				memcpy(line, data + start, i - start);
				line[i - start] = '\0';
				if (journal_parse(line, i - start, &obj, &jl, &why) == 0 &&
				    jl.kind == JL_ENTRY) {
					name_round_trip(jl.name);
				}
				free(line);
			}
			start = i + 1;
		}
	}
	return 0;
}
