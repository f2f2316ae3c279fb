/* SPDX-License-Identifier: MIT */
/*
 * The value grammars of parse.h. strtoull() is not used on its own: it skips
 * blanks, takes a sign and wraps "-1" around to the largest value, none of
 * which a config value or an option should mean.
 */
#include "parse.h"

#include <assert.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "macro.h"

/*
 * DIGIT+ at s; *ret_end after the digits. A value past UINT64_MAX is
 * *ret_overflow, not an error yet: what follows the digits may make the
 * string malformed, and malformed wins over too big.
 */
static int parse_digits(const char *s, uint64_t *ret, bool *ret_overflow, const char **ret_end)
{
	uint64_t v = 0;
	bool overflow = false;
	const char *p = s;

	if (!s || *p < '0' || *p > '9') {
		return -EINVAL;
	}
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10) {
			overflow = true;
		} else {
			v = v * 10 + d;
		}
	}
	*ret = v;
	*ret_overflow = overflow;
	*ret_end = p;
	return 0;
}

int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	const char *end;
	uint64_t v;
	bool overflow;
	int r = parse_digits(s, &v, &overflow, &end);

	if (r < 0) {
		return r;
	}
	if (*end != '\0') {
		return -EINVAL;
	}
	if (overflow || v < min || v > max) {
		return -ERANGE;
	}
	*ret = v;
	return 0;
}

/* "", "K", "MiB", "gb": the shift the suffix stands for, or -EINVAL. */
static int size_suffix_shift(const char *s, bool *ret_has_mult)
{
	int shift;

	*ret_has_mult = false;
	switch (*s) {
	case '\0':
		return 0;
	case 'K':
	case 'k':
		shift = 10;
		break;
	case 'M':
	case 'm':
		shift = 20;
		break;
	case 'G':
	case 'g':
		shift = 30;
		break;
	case 'T':
	case 't':
		shift = 40;
		break;
	default:
		return -EINVAL;
	}
	s++;
	if (*s != '\0' && strcasecmp(s, "B") != 0 && strcasecmp(s, "iB") != 0) {
		return -EINVAL;
	}
	*ret_has_mult = true;
	return shift;
}

int parse_size_unit(const char *s, uint64_t bare_unit, uint64_t *ret)
{
	const char *end;
	uint64_t v;
	bool has_mult, overflow;
	int r, shift;

	assert(bare_unit > 0);
	r = parse_digits(s, &v, &overflow, &end);
	if (r < 0) {
		return r;
	}
	shift = size_suffix_shift(end, &has_mult);
	if (shift < 0) {
		return shift;
	}
	if (overflow) {
		return -ERANGE;
	}
	if (has_mult) {
		if (v > (UINT64_MAX >> shift)) {
			return -ERANGE;
		}
		v <<= shift;
	} else {
		if (v > UINT64_MAX / bare_unit) {
			return -ERANGE;
		}
		v *= bare_unit;
	}
	*ret = v;
	return 0;
}

int parse_size(const char *s, uint64_t *ret)
{
	return parse_size_unit(s, 1, ret);
}

int parse_rate(const char *s, uint64_t *ret)
{
	return parse_size_unit(s, 1024, ret);
}

int parse_duration_ms(const char *s, uint64_t max_ms, uint64_t *ret)
{
	static const struct {
		const char *suffix;
		uint64_t ms;
	} units[] = { { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 }, { "", 1000 } };
	const char *end;
	uint64_t n;
	bool overflow;
	int r = parse_digits(s, &n, &overflow, &end);

	if (r < 0) {
		return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		if (!strcmp(end, units[i].suffix)) {
			if (overflow || n > max_ms / units[i].ms) {
				return -ERANGE;
			}
			*ret = n * units[i].ms;
			return 0;
		}
	}
	return -EINVAL;
}

int parse_bool(const char *s, bool *ret)
{
	static const char *const yes[] = { "yes", "true", "1" };
	static const char *const no[] = { "no", "false", "0" };

	if (!s) {
		return -EINVAL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*ret = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*ret = false;
			return 0;
		}
	}
	return -EINVAL;
}

int parse_port(const char *s, uint16_t *ret)
{
	uint64_t v;
	int r = parse_uint(s, 1, 65535, &v);

	if (r < 0) {
		return r;
	}
	*ret = (uint16_t)v;
	return 0;
}

int parse_enum(const char *s, const struct parse_enum_name *names, size_t n, bool any_case,
	       int *ret)
{
	if (!s) {
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (any_case ? !strcasecmp(s, names[i].name) : !strcmp(s, names[i].name)) {
			*ret = names[i].value;
			return 0;
		}
	}
	return -EINVAL;
}
