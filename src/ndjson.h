/* SPDX-License-Identifier: MIT */
/*
 * The flat NDJSON objects of migration plans and journals (plan.h): one
 * object a line, string, integer, boolean and null values, no nesting.
 * Writing keeps names exact: a string that is not UTF-8 can't be JSON, so
 * the caller writes those as hex (ndjson_utf8_ok). Reading is for files
 * that may have been edited by hand: every length is capped, every error
 * says what was wrong.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NDJSON_MAX_FIELDS 32
#define NDJSON_MAX_LINE	  (64 * 1024)

enum ndjson_kind {
	NDJSON_STRING = 1,
	NDJSON_INT,
	NDJSON_BOOL,
	NDJSON_NULL,
};

struct ndjson_field {
	const char *key;
	enum ndjson_kind kind;
	const char *str; /* NDJSON_STRING: decoded, NUL-terminated (a NUL inside: refused) */
	size_t len;
	int64_t num; /* NDJSON_INT: -2^63..2^63-1 */
	bool b;
};

struct ndjson_obj {
	struct ndjson_field f[NDJSON_MAX_FIELDS];
	size_t n;
	char buf[NDJSON_MAX_LINE + NDJSON_MAX_FIELDS * 2]; /* keys and strings, decoded */
};

/*
 * Parse one line (without its newline) into obj. 0, or -EINVAL with a
 * reason in why: not an object, a bad escape, a duplicate key, trailing
 * bytes, nesting; -E2BIG: longer than NDJSON_MAX_LINE or more than
 * NDJSON_MAX_FIELDS fields.
 */
int ndjson_parse(const char *line, size_t len, struct ndjson_obj *obj, const char **why);

/* The field named key, or NULL. */
const struct ndjson_field *ndjson_get(const struct ndjson_obj *obj, const char *key);
/* Typed getters: 0, -ENOENT (absent) or -EINVAL (another type, or out of range). */
int ndjson_get_str(const struct ndjson_obj *obj, const char *key, const char **ret);
int ndjson_get_u64(const struct ndjson_obj *obj, const char *key, uint64_t *ret);
int ndjson_get_i64(const struct ndjson_obj *obj, const char *key, int64_t *ret);
int ndjson_get_bool(const struct ndjson_obj *obj, const char *key, bool *ret);

/* Whether s (len bytes) is UTF-8 without NUL: then it can be a JSON string. */
bool ndjson_utf8_ok(const char *s, size_t len);
/* s as a JSON string (quoted; controls as \u00XX); s must pass ndjson_utf8_ok. */
void ndjson_put_string(FILE *f, const char *s);
/* ,"key":"value" for a name: as "key" when UTF-8, else as "key_hex" in hex. */
void ndjson_put_name(FILE *f, const char *key, const char *name);
/* A name written by ndjson_put_name: into buf (cap bytes), 0 or -EINVAL/-ENOENT/-ENAMETOOLONG. */
int ndjson_get_name(const struct ndjson_obj *obj, const char *key, char *buf, size_t cap);
