/* SPDX-License-Identifier: MIT */
/*
 * The supervisor process's state and the files that share it (main.c has
 * the command line and the start). Each file calls only the ones listed
 * below it:
 *
 *   supervisor.c  the signalfd, the main loop, the watchdog, the drain at SIGTERM
 *   reload.c      the configuration and TLS credentials: loaded, checked, reloaded
 *   admission.c   accepting a connection within the load limits
 *   children.c    one session process per connection: started, counted, reaped
 *   listeners.c   the listening sockets, or systemd's
 */
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "config.h"

#define SHUTDOWN_GRACE_S   10
#define STATUS_INTERVAL_MS 2000
/* After EMFILE/ENOBUFS and the like, stop polling the listeners this long. */
#define ACCEPT_BACKOFF_MS 100
/* The supervisor's backstop after a child's own handshake deadline. */
#define HANDSHAKE_GRACE_MS 1000
/* How often a running daemon looks at its certificate's expiry. */
#define CERT_CHECK_INTERVAL_MS (24ull * 3600 * 1000)

struct tls_ctx;
struct session_table;

/* Why admission turned a connection away: one log rate limit each. */
enum refusal {
	REFUSED_CONNECTIONS,	 /* max connections */
	REFUSED_PER_HOST,	 /* max connections per host */
	REFUSED_UNAUTH,		 /* max unauthenticated */
	REFUSED_UNAUTH_PER_HOST, /* max unauthenticated per host */
	REFUSED_KINDS
};

struct refusal_log {
	uint64_t logged_ms;  /* its last line; 0: none yet */
	unsigned suppressed; /* refused since, not logged */
	unsigned limit;	     /* the limit, as last refused */
	char last_peer[INET6_ADDRSTRLEN + 8];
};

struct child {
	pid_t pid;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	char peer_text[INET6_ADDRSTRLEN + 8];
	int slot;	    /* its entry in the shared session table, or -1 */
	bool authenticated; /* TLS and HELLO done (cached from the table) */
	uint64_t started_ms;
};

struct daemon {
	struct daemon_config *cfg;
	struct tls_ctx *tls;
	const char *config_file;
	bool verbose;

	int listen_fds[DAEMON_MAX_LISTEN];
	size_t nlisten;
	bool socket_activated;
	int sfd;	     /* signalfd */
	sigset_t saved_mask; /* restored in children */

	struct child *children;
	size_t nchildren, children_cap;
	struct session_table *sessions; /* shared with the session processes */
	uint64_t next_status_ms;

	uint64_t watchdog_usec; /* 0: no watchdog */
	uint64_t next_watchdog_ms;
	uint64_t accept_paused_until_ms;

	struct refusal_log refusals[REFUSED_KINDS];

	bool stopping;
	uint64_t next_cert_check_ms; /* the daily look at the certificate's expiry */
};

/* ---- listeners.c ---- */

/* systemd's sockets, or the configured 'listen' addresses; errors logged. */
int listeners_setup(struct daemon *d);
void listeners_close(struct daemon *d);

/* ---- children.c ---- */

/* Is c still in TLS/HELLO (and not already ended by us)? Refreshes the cached flag. */
bool child_unauthenticated(struct daemon *d, struct child *c);
/* A session process for the accepted fd (closed here); logged if fork fails. */
void children_start(struct daemon *d, int fd, const struct sockaddr_storage *peer,
		    socklen_t peerlen, const char *peer_text);
void children_reap(struct daemon *d);
/* Room for cap children (never shrinks). */
int children_grow(struct daemon *d, size_t cap);
void children_signal(struct daemon *d, int sig);
/* Every child waited for (after SIGKILL), their table entries released. */
void children_wait_all(struct daemon *d);
/* STATUS= for systemd: sessions, memory pinned, bytes moved. */
void children_notify_status(const struct daemon *d);

/* ---- admission.c ---- */

/* Every connection waiting on listener lfd, each admitted or refused. */
void admission_accept_all(struct daemon *d, int lfd);
/*
 * Kill children still unauthenticated past the handshake deadline plus a
 * grace. Returns the ms until the next such deadline, or -1 when none is
 * pending.
 */
int admission_enforce_handshake_deadline(struct daemon *d);
/*
 * Log the refusals counted but not said whose interval is over (all: every
 * one, at shutdown). Returns the ms until the next is due, or -1 when none is.
 */
int admission_flush_refusals(struct daemon *d, bool all);

/* ---- reload.c ---- */

/* Config plus TLS context, or an error already logged. */
int supervisor_load(const char *file, struct daemon_config **ret_cfg, struct tls_ctx **ret_tls);
void supervisor_apply_log_level(const struct daemon *d);
void supervisor_check_memlock(const struct daemon_config *cfg);
void supervisor_system_path_warnings(const struct daemon_config *cfg);
/* Modules whose directory is missing or not one: unavailable, and why (start, reload, --check). */
void supervisor_missing_module_warnings(const struct daemon_config *cfg);
/*
 * Before each session: look again for the modules missing so far, and pin
 * those that appeared (modroot.h), so that the session forked next serves them.
 */
void supervisor_find_modules(struct daemon *d);
/*
 * The daemon's certificate and CA: each expired one logged as an error, each
 * expiring within 'cert warn days' as a warning (at start, reload, --check
 * and once a day). ret_text (may be NULL): "certificate CN=X expires DATE"
 * for the start line.
 */
void supervisor_cert_expiry(const struct daemon_config *cfg, char *ret_text, size_t len);
/*
 * When the next look at the expiry is due: CERT_CHECK_INTERVAL_MS from now
 * (test hook: RDMACP_TEST_CERT_CHECK_MS=N looks every N ms).
 */
uint64_t supervisor_next_cert_check_ms(void);
/* --check: what loads but deserves a look. */
void supervisor_check_warnings(const struct daemon_config *cfg);
/* SIGHUP: the new configuration for new connections, or the old one kept. */
void supervisor_reload(struct daemon *d);

/* ---- supervisor.c ---- */

int supervisor_setup_signals(struct daemon *d);
void supervisor_watchdog(struct daemon *d);
/* Accepts and serves until SIGTERM/SIGINT (0) or a failing poll (<0). */
int supervisor_loop(struct daemon *d);
/* SIGTERM: stop accepting, let the sessions finish, then end them. */
void supervisor_drain(struct daemon *d);
