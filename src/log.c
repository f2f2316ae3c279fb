/* SPDX-License-Identifier: MIT */
/* Program logging to stderr: plain, with a journal priority, or timestamped (see log.h). */
#include "log.h"

#include <errno.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum log_style {
	LOG_STYLE_PLAIN,       /* "ident: text" */
	LOG_STYLE_JOURNAL,     /* "<N>text" */
	LOG_STYLE_TIMESTAMPED, /* "2026-11-30T15:04:05.123+00:00 ident[pid] level: text" */
};

static int max_level = LOG_INFO;
static enum log_style style = LOG_STYLE_PLAIN;
static const char *log_ident = "rdmacp";

void log_set_max_level(int level)
{
	max_level = level;
}

int log_get_max_level(void)
{
	return max_level;
}

void log_set_prefix_mode(bool syslog_prefix, const char *ident)
{
	style = syslog_prefix ? LOG_STYLE_JOURNAL : LOG_STYLE_PLAIN;
	if (ident) {
		log_ident = ident;
	}
}

/*
 * systemd's documented test: JOURNAL_STREAM holds "DEV:INO" (decimal) of the
 * journal stream it connected stdout/stderr to. The variable alone is not
 * enough: it is inherited, and stderr may have been redirected since.
 */
bool log_stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char *end;

	if (!e || !*e) {
		return false;
	}
	errno = 0;
	dev = strtoull(e, &end, 10);
	if (errno || end == e || *end != ':') {
		return false;
	}
	e = end + 1;
	ino = strtoull(e, &end, 10);
	if (errno || end == e || *end != '\0') {
		return false;
	}
	if (fstat(STDERR_FILENO, &st) < 0) {
		return false;
	}
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_set_daemon_mode(const char *ident)
{
	/* Read the zone now: a session may later lose sight of /etc/localtime. */
	tzset();
	log_set_prefix_mode(false, ident);
	style = log_stderr_is_journal() ? LOG_STYLE_JOURNAL : LOG_STYLE_TIMESTAMPED;
}

/* "2026-11-30T15:04:05.123+01:00": local time, milliseconds, the zone's offset. */
static void format_timestamp(char buf[64])
{
	struct timespec ts;
	struct tm tm;
	char date[24];
	int off;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (!localtime_r(&ts.tv_sec, &tm) ||
	    !strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm)) {
		snprintf(buf, 64, "?");
		return;
	}
	/* Zone offsets stay within a day. */
	off = (int)(tm.tm_gmtoff / 60) % (24 * 60);
	snprintf(buf, 64, "%s.%03d%c%02d:%02d", date, (int)(ts.tv_nsec / 1000000L) % 1000,
		 off < 0 ? '-' : '+', abs(off) / 60, abs(off) % 60);
}

static const char *level_name(int level)
{
	static const char *const names[] = {
		"emergency", "alert", "critical", "error", "warning", "notice", "info", "debug",
	};

	return level >= 0 && level <= LOG_DEBUG ? names[level] : "log";
}

size_t utf8_sequence(const char *s, size_t n, uint32_t *ret_cp)
{
	const unsigned char *p = (const unsigned char *)s;
	uint32_t cp;
	size_t len;

	if (n == 0) {
		return 0;
	}
	if (p[0] < 0x80) {
		len = 1;
		cp = p[0];
	} else if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2;
		cp = p[0] & 0x1f;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3;
		cp = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		cp = p[0] & 0x07;
	} else {
		return 0; /* a continuation byte, an overlong lead, or not UTF-8 */
	}
	if (len > n) {
		return 0;
	}
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80) {
			return 0;
		}
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff)) {
		return 0; /* overlong, out of range, or a surrogate */
	}
	*ret_cp = cp;
	return len;
}

bool unicode_is_unsafe(uint32_t cp)
{
	/* C0, DEL, C1 (0x9b is CSI), line/paragraph separators, bidi overrides. */
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
	       (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Bytes at p that may go out as they are: a safe, well-formed sequence; 0: escape p[0]. */
static size_t printable_utf8(const unsigned char *p, size_t n)
{
	uint32_t cp = 0;
	size_t len = utf8_sequence((const char *)p, n, &cp);

	return len && !unicode_is_unsafe(cp) ? len : 0;
}

/*
 * The one escaper for text from elsewhere (SECURITY.md G46): everything that
 * is not printable UTF-8 becomes \xNN, so no byte from a peer can end a log
 * line, forge a "<N>" priority, or drive a terminal. With escape_backslash,
 * '\' is escaped too, making the result unambiguous.
 */
static const char *escape_text(const char *in, char *out, size_t outlen, bool escape_backslash)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t left = strlen(in), o = 0;

	if (outlen == 0) {
		return "";
	}
	while (left > 0) {
		size_t n = printable_utf8(p, left);
		char tmp[5];
		const char *src = (const char *)p;

		if (n == 0 || (escape_backslash && *p == '\\')) {
			snprintf(tmp, sizeof(tmp), "\\x%02x", *p);
			src = tmp;
			n = 4;
			p++;
			left--;
		} else {
			p += n;
			left -= n;
		}
		if (o + n + 1 > outlen) {
			break;
		}
		memcpy(out + o, src, n);
		o += n;
	}
	out[o] = '\0';
	return out;
}

const char *log_escape(const char *in, char *out, size_t outlen)
{
	return escape_text(in, out, outlen, true);
}

/* Where to end a kept start of escaped text s: not inside "\xNN" or a UTF-8 sequence. */
static size_t cut_before(const char *s, size_t at)
{
	while (at > 0 && ((unsigned char)s[at] & 0xc0) == 0x80) {
		at--;
	}
	for (size_t k = 1; k <= 3 && k <= at; k++) {
		if (s[at - k] == '\\') {
			return at - k;
		}
	}
	return at;
}

/* Where to start a kept end of escaped text s (n bytes): the same rule. */
static size_t cut_after(const char *s, size_t n, size_t at)
{
	while (at < n && ((unsigned char)s[at] & 0xc0) == 0x80) {
		at++;
	}
	for (size_t k = 1; k <= 3 && k <= at; k++) {
		if (s[at - k] == '\\') {
			return at - k + 4;
		}
	}
	return at;
}

const char *log_escape_short(const char *in, char *out, size_t outlen)
{
	size_t len = strlen(in), n, head, tail;
	char *full;

	if (outlen < 32 || len > SIZE_MAX / 4 - 1) {
		return log_escape(in, out, outlen);
	}
	full = malloc(4 * len + 1);
	if (!full) {
		return log_escape(in, out, outlen);
	}
	escape_text(in, full, 4 * len + 1, true);
	n = strlen(full);
	if (n < outlen) {
		memcpy(out, full, n + 1);
		free(full);
		return out;
	}
	head = cut_before(full, (outlen - 4) / 2);
	tail = cut_after(full, n, n - (outlen - 4 - (outlen - 4) / 2));
	memcpy(out, full, head);
	memcpy(out + head, "...", 3);
	memcpy(out + head + 3, full + tail, n - tail + 1);
	free(full);
	return out;
}

static void (*observer_fn)(void *ud, int level, const char *text);
static void *observer_ud;
static int observer_level;

void log_set_observer(int level, void (*fn)(void *ud, int level, const char *text), void *ud)
{
	observer_level = level;
	observer_fn = fn;
	observer_ud = ud;
}

int log_internal(int level, int error, const char *fmt, ...)
{
	char line[2048], safe[4 * sizeof(line)];
	va_list ap;
	int saved = errno;

	if (level > max_level) {
		return error;
	}
	/* %m means the passed error, not whatever errno happens to hold. */
	errno = error < 0 ? -error : error;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/*
	 * A log line is one line, whatever its arguments held: a string that
	 * was not passed through log_escape() still can't start a forged
	 * "<0>" line or reach a terminal raw. Backslashes stay, so text that
	 * was escaped already reads the same.
	 */
	escape_text(line, safe, sizeof(safe), false);
	if (observer_fn && level <= observer_level) {
		observer_fn(observer_ud, level, safe);
	}
	switch (style) {
	case LOG_STYLE_JOURNAL:
		fprintf(stderr, "<%d>%s\n", level, safe);
		break;
	case LOG_STYLE_TIMESTAMPED: {
		char stamp[64];

		format_timestamp(stamp);
		fprintf(stderr, "%s %s[%ld] %s: %s\n", stamp, log_ident, (long)getpid(),
			level_name(level), safe);
		break;
	}
	case LOG_STYLE_PLAIN:
	default:
		fprintf(stderr, "%s: %s\n", log_ident, safe);
		break;
	}
	errno = saved;
	return error;
}
