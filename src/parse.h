/* SPDX-License-Identifier: MIT */
/*
 * Values typed by people: numbers, sizes, rates, durations, booleans, ports
 * and names from a set, from the command line and the config files of both
 * programs, one grammar each.
 *
 *   uint     := DIGIT+                      decimal, nothing before or after
 *   size     := DIGIT+ [MULT ["B" | "iB"]]  MULT one of K M G T, binary (1024),
 *                                           MULT and B/iB in either case
 *   rate     := size, but a bare number counts KiB (rsync's --bwlimit)
 *   duration := DIGIT+ ["ms" | "s" | "m" | "h"]   a bare number counts seconds
 *   bool     := yes | no | true | false | 1 | 0   (any case)
 *   port     := uint in 1..65535
 *   enum     := one of the names of a table (parse_enum)
 *
 * No sign, no blanks, no empty value, no other base, no fraction. A string
 * outside the grammar is -EINVAL (even when its digits are also too many);
 * a value too big for uint64_t or outside its range is -ERANGE.
 * Outputs are untouched on failure. Certificate fingerprints are parsed in
 * one place too: tls_parse_fingerprint() (src/tls.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A uint in min..max. */
int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *ret);
/* A size in bytes: "4096", "64M", "4GiB", "1t". */
int parse_size(const char *s, uint64_t *ret);
/* A size whose bare number counts units of bare_unit bytes ("500" KiB), suffixes as parse_size. */
int parse_size_unit(const char *s, uint64_t bare_unit, uint64_t *ret);
/* A rate in bytes per second: "500" (KiB/s), "500K", "50M". */
int parse_rate(const char *s, uint64_t *ret);
/* A duration in milliseconds, at most max_ms: "90" (s), "1500ms", "2m", "24h". */
int parse_duration_ms(const char *s, uint64_t max_ms, uint64_t *ret);
int parse_bool(const char *s, bool *ret);
int parse_port(const char *s, uint16_t *ret);

/* A name an enumeration's value has (parse_enum). */
struct parse_enum_name {
	const char *name;
	int value;
};
/* The value of the one of names[0..n) that s is (any_case: in any case, else exactly). */
int parse_enum(const char *s, const struct parse_enum_name *names, size_t n, bool any_case,
	       int *ret);
