/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the value grammars (src/parse.c), checked against a
 * plain reading of the grammar in src/parse.h: each parser accepts exactly
 * the strings the grammar describes, with the value the digits and the
 * multiple say (computed in 128 bits), -ERANGE exactly when that value does
 * not fit, and leaves its output alone on failure.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                              \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                 \
		}                                                                                \
	} while (0)

#define SENTINEL UINT64_C(0x5a5a5a5a5a5a5a5a)
#define BIG	 ((unsigned __int128)1 << 80) /* "too big" for any digits; << 40 still fits */

/* DIGIT+ at s: its value (BIG when past 2^64) and its length; 0 when none. */
static size_t digits(const char *s, unsigned __int128 *ret)
{
	unsigned __int128 v = 0;
	size_t n = 0;

	while (s[n] >= '0' && s[n] <= '9') {
		if (v < BIG) {
			v = v * 10 + (unsigned)(s[n] - '0');
		}
		n++;
	}
	*ret = v;
	return n;
}

static void check_uint(const char *s, uint64_t min, uint64_t max)
{
	unsigned __int128 v;
	size_t n = digits(s, &v);
	uint64_t got = SENTINEL;
	int r = parse_uint(s, min, max, &got);

	if (n == 0 || s[n] != '\0') {
		CHECK(r == -EINVAL && got == SENTINEL);
	} else if (v < min || v > max) {
		CHECK(r == -ERANGE && got == SENTINEL);
	} else {
		CHECK(r == 0 && got == (uint64_t)v);
	}
}

static void check_size(const char *s, uint64_t unit)
{
	static const char mults[] = "KMGT";
	unsigned __int128 v;
	size_t n = digits(s, &v);
	const char *m = s[n] ? strchr(mults, s[n] & ~0x20) : NULL;
	bool ok = n > 0;
	uint64_t got = SENTINEL;
	int r = parse_size_unit(s, unit, &got);

	if (ok && s[n] == '\0') {
		v *= unit;
	} else if (ok && m && *m && (s[n] | 0x20) >= 'a' &&
		   (s[n + 1] == '\0' || !strcasecmp(s + n + 1, "B") ||
		    !strcasecmp(s + n + 1, "iB"))) {
		v <<= 10 * (m - mults + 1);
	} else {
		ok = false;
	}
	if (!ok) {
		CHECK(r == -EINVAL && got == SENTINEL);
	} else if (v > UINT64_MAX) {
		CHECK(r == -ERANGE && got == SENTINEL);
	} else {
		CHECK(r == 0 && got == (uint64_t)v);
	}
}

static void check_bool(const char *s)
{
	static const char *const words[] = { "yes", "true", "1", "no", "false", "0" };
	bool got = true;
	int r = parse_bool(s, &got);
	int want = -1;

	for (size_t i = 0; i < 6; i++) {
		if (!strcasecmp(s, words[i])) {
			want = i < 3;
		}
	}
	if (want < 0) {
		CHECK(r == -EINVAL && got);
	} else {
		CHECK(r == 0 && got == (want == 1));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	uint16_t port = 7;
	uint64_t min = 0, max = UINT64_MAX;
	int r;

	if (!s) {
		return 0;
	}
	memcpy(s, data, size);
	s[size] = '\0';
	/* Bounds from the input's first bytes, so the range checks are reached. */
	if (size >= 2) {
		min = (uint64_t)data[0] * 3;
		max = min + (uint64_t)data[1] * 1000;
	}
	check_uint(s, 0, UINT64_MAX);
	check_uint(s, min, max);
	check_size(s, 1);
	check_size(s, 1024);
	check_bool(s);
	r = parse_port(s, &port);
	CHECK(r == 0 ? port >= 1 : port == 7);
	free(s);
	return 0;
}
