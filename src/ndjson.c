/* SPDX-License-Identifier: MIT */
/* Flat NDJSON objects (ndjson.h). */
#include "ndjson.h"

#include <errno.h>
#include <string.h>

struct cursor {
	const char *p, *end;
	struct ndjson_obj *obj;
	size_t used; /* of obj->buf */
	const char *why;
};

static void skip_ws(struct cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r')) {
		c->p++;
	}
}

static int fail(struct cursor *c, const char *why)
{
	c->why = why;
	return -EINVAL;
}

static int hex4(const char *p, uint32_t *ret)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++) {
		char ch = p[i];

		v <<= 4;
		if (ch >= '0' && ch <= '9') {
			v |= (uint32_t)(ch - '0');
		} else if (ch >= 'a' && ch <= 'f') {
			v |= (uint32_t)(ch - 'a' + 10);
		} else if (ch >= 'A' && ch <= 'F') {
			v |= (uint32_t)(ch - 'A' + 10);
		} else {
			return -EINVAL;
		}
	}
	*ret = v;
	return 0;
}

static int put_byte(struct cursor *c, char ch)
{
	if (c->used >= sizeof(c->obj->buf)) {
		c->why = "too long";
		return -E2BIG;
	}
	c->obj->buf[c->used++] = ch;
	return 0;
}

static int put_utf8(struct cursor *c, uint32_t cp)
{
	char b[4];
	size_t n;

	if (cp < 0x80) {
		b[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | (cp >> 6));
		b[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | (cp >> 12));
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		b[0] = (char)(0xf0 | (cp >> 18));
		b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	for (size_t i = 0; i < n; i++) {
		int r = put_byte(c, b[i]);
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* A string at c->p (the opening quote), decoded into obj->buf. */
/*
 * The bytes up to the next quote, backslash or control character, copied at
 * once: most strings (names, above all) have no escape in them.
 */
static int put_plain_run(struct cursor *c)
{
	const char *s = c->p;
	size_t n;

	while (s < c->end && *s != '"' && *s != '\\' && (unsigned char)*s >= 0x20) {
		s++;
	}
	n = (size_t)(s - c->p);
	if (n > sizeof(c->obj->buf) - c->used) {
		c->why = "too long";
		return -E2BIG;
	}
	memcpy(c->obj->buf + c->used, c->p, n);
	c->used += n;
	c->p = s;
	return 0;
}

static int parse_string(struct cursor *c, const char **ret, size_t *ret_len)
{
	size_t start = c->used;
	int r;

	if (c->p >= c->end || *c->p != '"') {
		return fail(c, "expected a string");
	}
	c->p++;
	for (;;) {
		unsigned char ch;

		r = put_plain_run(c);
		if (r < 0) {
			return r;
		}
		if (c->p >= c->end) {
			return fail(c, "unterminated string");
		}
		ch = (unsigned char)*c->p++;
		if (ch == '"') {
			break;
		}
		if (ch < 0x20) {
			return fail(c, "a control character in a string");
		}
		if (ch != '\\') {
			r = put_byte(c, (char)ch);
		} else {
			uint32_t cp, lo;

			if (c->p >= c->end) {
				return fail(c, "unterminated escape");
			}
			ch = (unsigned char)*c->p++;
			switch (ch) {
			case '"':
			case '\\':
			case '/':
				r = put_byte(c, (char)ch);
				break;
			case 'b':
				r = put_byte(c, '\b');
				break;
			case 'f':
				r = put_byte(c, '\f');
				break;
			case 'n':
				r = put_byte(c, '\n');
				break;
			case 'r':
				r = put_byte(c, '\r');
				break;
			case 't':
				r = put_byte(c, '\t');
				break;
			case 'u':
				if (c->end - c->p < 4 || hex4(c->p, &cp) < 0) {
					return fail(c, "a bad \\u escape");
				}
				c->p += 4;
				if (cp >= 0xdc00 && cp < 0xe000) {
					return fail(c, "a lone low surrogate");
				}
				if (cp >= 0xd800 && cp < 0xdc00) {
					if (c->end - c->p < 6 || c->p[0] != '\\' ||
					    c->p[1] != 'u' || hex4(c->p + 2, &lo) < 0 ||
					    lo < 0xdc00 || lo >= 0xe000) {
						return fail(c, "a lone high surrogate");
					}
					c->p += 6;
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				}
				if (cp == 0) {
					return fail(c, "a NUL in a string");
				}
				r = put_utf8(c, cp);
				break;
			default:
				return fail(c, "a bad escape");
			}
		}
		if (r < 0) {
			return r;
		}
	}
	r = put_byte(c, '\0');
	if (r < 0) {
		return r;
	}
	*ret = c->obj->buf + start;
	*ret_len = c->used - start - 1;
	return 0;
}

static int parse_int(struct cursor *c, int64_t *ret)
{
	bool neg = false;
	uint64_t v = 0;
	const char *start;

	if (c->p < c->end && *c->p == '-') {
		neg = true;
		c->p++;
	}
	start = c->p;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		uint64_t d = (uint64_t)(*c->p - '0');

		if (v > (UINT64_MAX - d) / 10) {
			return fail(c, "a number out of range");
		}
		v = v * 10 + d;
		c->p++;
	}
	if (c->p == start || (c->p - start > 1 && *start == '0')) {
		return fail(c, "a bad number");
	}
	if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E')) {
		return fail(c, "a number that is not an integer");
	}
	if (v > (uint64_t)INT64_MAX + (neg ? 1 : 0)) {
		return fail(c, "a number out of range");
	}
	*ret = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

static bool literal(struct cursor *c, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(c->end - c->p) >= n && !memcmp(c->p, word, n)) {
		c->p += n;
		return true;
	}
	return false;
}

static int parse_value(struct cursor *c, struct ndjson_field *f)
{
	if (c->p >= c->end) {
		return fail(c, "a value is missing");
	}
	if (*c->p == '"') {
		f->kind = NDJSON_STRING;
		return parse_string(c, &f->str, &f->len);
	}
	if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9')) {
		f->kind = NDJSON_INT;
		return parse_int(c, &f->num);
	}
	if (literal(c, "true") || literal(c, "false")) {
		f->kind = NDJSON_BOOL;
		f->b = c->p[-1] == 'e' && c->p[-2] == 'u';
		return 0;
	}
	if (literal(c, "null")) {
		f->kind = NDJSON_NULL;
		return 0;
	}
	if (*c->p == '{' || *c->p == '[') {
		return fail(c, "a nested object or array");
	}
	return fail(c, "not a JSON value");
}

int ndjson_parse(const char *line, size_t len, struct ndjson_obj *obj, const char **why)
{
	struct cursor c = { .p = line, .end = line + len, .obj = obj };
	int r;

	obj->n = 0;
	*why = NULL;
	if (len > NDJSON_MAX_LINE) {
		*why = "longer than 64 KiB";
		return -E2BIG;
	}
	skip_ws(&c);
	if (c.p >= c.end || *c.p != '{') {
		*why = c.p >= c.end ? "an empty line" : "not a JSON object";
		return -EINVAL;
	}
	c.p++;
	skip_ws(&c);
	if (c.p < c.end && *c.p == '}') {
		c.p++;
	} else {
		for (;;) {
			struct ndjson_field *f;
			size_t klen;

			if (obj->n == NDJSON_MAX_FIELDS) {
				*why = "too many fields";
				return -E2BIG;
			}
			f = &obj->f[obj->n];
			skip_ws(&c);
			r = parse_string(&c, &f->key, &klen);
			if (r < 0) {
				*why = c.why;
				return r;
			}
			if (ndjson_get(obj, f->key)) {
				*why = "a key given twice";
				return -EINVAL;
			}
			skip_ws(&c);
			if (c.p >= c.end || *c.p != ':') {
				*why = c.p >= c.end ? "the line ends inside the object"
						    : "expected ':'";
				return -EINVAL;
			}
			c.p++;
			skip_ws(&c);
			r = parse_value(&c, f);
			if (r < 0) {
				*why = c.why;
				return r;
			}
			obj->n++;
			skip_ws(&c);
			if (c.p < c.end && *c.p == ',') {
				c.p++;
				continue;
			}
			if (c.p < c.end && *c.p == '}') {
				c.p++;
				break;
			}
			*why = c.p >= c.end ? "the line ends inside the object (cut short?)"
					    : "expected ',' or '}'";
			return -EINVAL;
		}
	}
	skip_ws(&c);
	if (c.p != c.end) {
		*why = "bytes after the object";
		return -EINVAL;
	}
	return 0;
}

const struct ndjson_field *ndjson_get(const struct ndjson_obj *obj, const char *key)
{
	/*
	 * A plan's line has a dozen keys, each looked up once by its reader and
	 * once by the parser (no key twice): the first byte rules out most of
	 * them without a call (a re-run reads every line of the plan thrice).
	 */
	for (size_t i = 0; i < obj->n; i++) {
		if (obj->f[i].key[0] == key[0] && !strcmp(obj->f[i].key, key)) {
			return &obj->f[i];
		}
	}
	return NULL;
}

int ndjson_get_str(const struct ndjson_obj *obj, const char *key, const char **ret)
{
	const struct ndjson_field *f = ndjson_get(obj, key);

	if (!f) {
		return -ENOENT;
	}
	if (f->kind != NDJSON_STRING) {
		return -EINVAL;
	}
	*ret = f->str;
	return 0;
}

int ndjson_get_i64(const struct ndjson_obj *obj, const char *key, int64_t *ret)
{
	const struct ndjson_field *f = ndjson_get(obj, key);

	if (!f) {
		return -ENOENT;
	}
	if (f->kind != NDJSON_INT) {
		return -EINVAL;
	}
	*ret = f->num;
	return 0;
}

int ndjson_get_u64(const struct ndjson_obj *obj, const char *key, uint64_t *ret)
{
	int64_t v;
	int r = ndjson_get_i64(obj, key, &v);

	if (r < 0) {
		return r;
	}
	if (v < 0) {
		return -EINVAL;
	}
	*ret = (uint64_t)v;
	return 0;
}

int ndjson_get_bool(const struct ndjson_obj *obj, const char *key, bool *ret)
{
	const struct ndjson_field *f = ndjson_get(obj, key);

	if (!f) {
		return -ENOENT;
	}
	if (f->kind != NDJSON_BOOL) {
		return -EINVAL;
	}
	*ret = f->b;
	return 0;
}

bool ndjson_utf8_ok(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;

	while (p < end) {
		unsigned char ch = *p;
		size_t n;
		uint32_t cp;

		if (ch == 0) {
			return false;
		}
		if (ch < 0x80) {
			p++;
			continue;
		}
		if ((ch & 0xe0) == 0xc0) {
			n = 1;
			cp = ch & 0x1f;
		} else if ((ch & 0xf0) == 0xe0) {
			n = 2;
			cp = ch & 0x0f;
		} else if ((ch & 0xf8) == 0xf0) {
			n = 3;
			cp = ch & 0x07;
		} else {
			return false;
		}
		if ((size_t)(end - p) <= n) {
			return false;
		}
		for (size_t i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80) {
				return false;
			}
			cp = (cp << 6) | (p[i] & 0x3f);
		}
		/* Overlong forms, surrogates and beyond U+10FFFF do not round-trip. */
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp < 0xe000) || cp > 0x10ffff) {
			return false;
		}
		p += n + 1;
	}
	return true;
}

/* A byte written as it is inside a JSON string: not a quote, a backslash or a control. */
static bool plain_byte(unsigned char c)
{
	return c >= 0x20 && c != 0x7f && c != '"' && c != '\\';
}

/* Runs of plain bytes in one fwrite each (a journal line is mostly one run). */
void ndjson_put_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	while (*p) {
		const unsigned char *run = p;

		while (plain_byte(*p)) {
			p++;
		}
		if (p > run) {
			fwrite(run, 1, (size_t)(p - run), f);
		}
		if (*p == '"' || *p == '\\') {
			fputc('\\', f);
			fputc(*p++, f);
		} else if (*p) {
			fprintf(f, "\\u%04x", *p++);
		}
	}
	fputc('"', f);
}

void ndjson_put_name(FILE *f, const char *key, const char *name)
{
	size_t len = strlen(name);

	if (ndjson_utf8_ok(name, len)) {
		fprintf(f, ",\"%s\":", key);
		ndjson_put_string(f, name);
		return;
	}
	fprintf(f, ",\"%s_hex\":\"", key);
	for (size_t i = 0; i < len; i++) {
		fprintf(f, "%02x", (unsigned char)name[i]);
	}
	fputc('"', f);
}

int ndjson_get_name(const struct ndjson_obj *obj, const char *key, char *buf, size_t cap)
{
	char hexkey[64];
	const char *s;
	size_t len;

	if (ndjson_get_str(obj, key, &s) == 0) {
		len = strlen(s);
		if (len >= cap) {
			return -ENAMETOOLONG;
		}
		memcpy(buf, s, len + 1);
		return 0;
	}
	if (ndjson_get(obj, key)) {
		return -EINVAL;
	}
	snprintf(hexkey, sizeof(hexkey), "%s_hex", key);
	int r = ndjson_get_str(obj, hexkey, &s);
	if (r < 0) {
		return r;
	}
	len = strlen(s);
	if (len % 2 || len / 2 >= cap || len == 0) {
		return len / 2 >= cap ? -ENAMETOOLONG : -EINVAL;
	}
	for (size_t i = 0; i < len / 2; i++) {
		uint32_t v;
		char quad[4] = { '0', '0', s[2 * i], s[2 * i + 1] };

		if (hex4(quad, &v) < 0 || v == 0) {
			return -EINVAL;
		}
		buf[i] = (char)v;
	}
	buf[len / 2] = '\0';
	return 0;
}
