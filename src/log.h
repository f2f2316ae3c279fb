/* SPDX-License-Identifier: MIT */
/*
 * Program logging to stderr: "ident: text" for commands; for the running
 * daemon, a "<N>" syslog priority prefix when stderr is the journal (which
 * adds its own time), else a timestamp, the ident, the pid and the level.
 * The library itself never logs above LOG_DEBUG.
 * log_*_errno(r, ...) logs with %m meaning strerror(-r) and returns r.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <syslog.h>

#include "macro.h"

void log_set_max_level(int level);
int log_get_max_level(void);
/* Prefix lines with "<N>" (daemon under journald) or "rdmacp: " (client). */
void log_set_prefix_mode(bool syslog_prefix, const char *ident);
/*
 * The running daemon: "<N>text" when stderr is the journal (JOURNAL_STREAM
 * names stderr's device and inode, as systemd documents), else
 * "2026-11-30T15:04:05.123+00:00 ident[pid] level: text" (local time).
 */
void log_set_daemon_mode(const char *ident);
bool log_stderr_is_journal(void);

int log_internal(int level, int error, const char *fmt, ...) _printf_(3, 4);
/*
 * Every line logged at level or more urgent is also handed to fn (its text
 * as printed, without the prefix): a relay client keeps its last error for
 * the result it reports upstream. fn NULL: none. One observer per process.
 */
void log_set_observer(int level, void (*fn)(void *ud, int level, const char *text), void *ud);

#define log_full_errno(level, error, ...) log_internal((level), (error), __VA_ARGS__)
/* Its arguments (an escaped name, say) are not even computed unless debug is on. */
#define log_debug(...)                                           \
	do {                                                     \
		if (log_get_max_level() >= LOG_DEBUG) {          \
			log_internal(LOG_DEBUG, 0, __VA_ARGS__); \
		}                                                \
	} while (0)
#define log_info(...)		  log_internal(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...)		  log_internal(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...)	  log_internal(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...)		  log_internal(LOG_ERR, 0, __VA_ARGS__)
#define log_debug_errno(e, ...)	  log_internal(LOG_DEBUG, (e), __VA_ARGS__)
#define log_info_errno(e, ...)	  log_internal(LOG_INFO, (e), __VA_ARGS__)
#define log_notice_errno(e, ...)  log_internal(LOG_NOTICE, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_internal(LOG_WARNING, (e), __VA_ARGS__)
#define log_error_errno(e, ...)	  log_internal(LOG_ERR, (e), __VA_ARGS__)

/*
 * SECURITY.md G46: the one escaper for peer-supplied text (names, error
 * texts, certificate names, software strings) before any log or terminal.
 * Everything but printable UTF-8 becomes \xNN: C0 and C1 controls, DEL,
 * bytes that are not well-formed UTF-8, line separators, bidi overrides, and
 * the backslash itself: "a\nb" -> "a\\x0ab". Truncates to outlen. Every
 * log line goes through it as well (without the backslash rule), so a
 * string that missed it still can't break a line.
 */
const char *log_escape(const char *in, char *out, size_t outlen);

/*
 * log_escape(), and when the result does not fit in outlen, its start and
 * its end with "..." between them, never cutting an escape or a UTF-8
 * sequence: a long path keeps its last components, and the line it goes
 * into keeps the reason that follows it.
 */
const char *log_escape_short(const char *in, char *out, size_t outlen);

/* Length of the well-formed UTF-8 sequence at s (n bytes left) and its code point; 0: none. */
size_t utf8_sequence(const char *s, size_t n, uint32_t *ret_cp);
/* A control, line separator or direction override: never raw on a terminal or in a log. */
bool unicode_is_unsafe(uint32_t cp);
