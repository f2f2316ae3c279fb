/* SPDX-License-Identifier: MIT */
/* The one JSON string writer every --json event's text goes through (output.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "output.h"

/* How many of the first bytes of s need no escape: printable ASCII, not '"' or '\\'. */
static size_t json_plain_run(const char *s, size_t len)
{
	size_t n = 0;

	while (n < len && s[n] >= 0x20 && s[n] < 0x7f && s[n] != '"' && s[n] != '\\') {
		n++;
	}
	return n;
}

/*
 * A JSON string literal (RFC 8259), valid whatever the name held: quotes,
 * backslashes, controls (C0, DEL, C1), line separators and direction
 * overrides as \uXXXX; a byte that is not well-formed UTF-8 as \ufffd (JSON
 * text is UTF-8; such a name is shown escaped byte by byte on stderr).
 */
void output_json_string(FILE *f, const char *s)
{
	size_t left = strlen(s);

	flockfile(f);
	putc_unlocked('"', f);
	while (left > 0) {
		uint32_t cp = 0;
		size_t n = json_plain_run(s, left);

		if (n > 0) {
			/* Printable ASCII but for '"' and '\\': as it is, at once. */
			fwrite_unlocked(s, 1, n, f);
			s += n;
			left -= n;
			continue;
		}
		n = utf8_sequence(s, left, &cp);
		if (n == 0) {
			fputs("\\ufffd", f);
			n = 1;
		} else if (cp == '"' || cp == '\\') {
			fprintf(f, "\\%c", (char)cp);
		} else if (cp == '\n') {
			fputs("\\n", f);
		} else if (cp == '\t') {
			fputs("\\t", f);
		} else if (unicode_is_unsafe(cp)) {
			fprintf(f, "\\u%04x", (unsigned)cp);
		} else {
			fwrite(s, 1, n, f);
		}
		s += n;
		left -= n;
	}
	putc_unlocked('"', f);
	funlockfile(f);
}
