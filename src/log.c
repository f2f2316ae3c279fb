/* SPDX-License-Identifier: MIT */
/* Program logging to stderr with syslog priority prefixes (see log.h). */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int max_level = LOG_INFO;
static bool use_syslog_prefix;
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
	use_syslog_prefix = syslog_prefix;
	if (ident) {
		log_ident = ident;
	}
}

int log_internal(int level, int error, const char *fmt, ...)
{
	char line[2048];
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
	if (use_syslog_prefix) {
		fprintf(stderr, "<%d>%s\n", level, line);
	} else {
		fprintf(stderr, "%s: %s\n", log_ident, line);
	}
	errno = saved;
	return error;
}

const char *log_escape(const char *in, char *out, size_t outlen)
{
	size_t o = 0;

	if (outlen == 0) {
		return "";
	}
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		char tmp[5];
		size_t n;

		if (*p < 0x20 || *p == 0x7f || *p == '\\') {
			n = (size_t)snprintf(tmp, sizeof(tmp), "\\x%02x", *p);
		} else {
			tmp[0] = (char)*p;
			n = 1;
		}
		if (o + n + 1 > outlen) {
			break;
		}
		memcpy(out + o, tmp, n);
		o += n;
	}
	out[o] = '\0';
	return out;
}
