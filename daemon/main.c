/* SPDX-License-Identifier: MIT */
/*
 * rdmacpd: the supervisor process. Reads the config, loads the TLS
 * credentials, listens (or takes systemd's sockets), and forks one child per
 * accepted connection; the child runs serve_connection() and exits. The
 * parent only accepts, counts, reaps and handles signals, so a misbehaving
 * session can't stall or crash the others.
 *
 * Load limits (THREATS.md F34): "max connections" counts every live child,
 * including those still in the TLS handshake, and "max connections per host"
 * counts them per peer IP. A connection over a limit is closed at once,
 * before any TLS: the client sees EOF, which is the documented "busy" at the
 * TCP level. The handshake deadline itself is enforced in the child
 * (serve_connection: TLS and HELLO within handshake timeout, one absolute
 * deadline).
 *
 * Pre-authentication slots (THREATS.md G47): a child counts as
 * unauthenticated until it marks its entry in the shared session table
 * (session_table_set_authenticated, after HELLO). Those are capped apart, in all
 * ("max unauthenticated", below "max connections", so the difference is a
 * reserve only authenticated sessions can hold) and per IPv4 address or
 * IPv6 /64 ("max unauthenticated per host"). The flag lives in the child's
 * entry, which exists until the supervisor reaps the pid, so however a child
 * dies its slot is released with it. As a backstop for a child stuck where
 * its own deadline can't fire, the supervisor kills children still
 * unauthenticated a second after the handshake deadline.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fdutil.h"
#include "config.h"
#include "exitcodes.h"
#include "rlimits.h"
#include "log.h"
#include "macro.h"
#include "net.h"
#include "modcheck.h"
#include "privs.h"
#include "serve.h"
#include "session_table.h"
#include "tls.h"

#define DRAIN_S		   20
#define SHUTDOWN_GRACE_S   10
#define STATUS_INTERVAL_MS 2000
/* After EMFILE/ENOBUFS and the like, stop polling the listeners this long. */
#define ACCEPT_BACKOFF_MS 100
/* At most this many "refused" notices per second; the rest are counted. */
#define REFUSE_LOG_PER_S 10
/* The supervisor's backstop after a child's own handshake deadline. */
#define HANDSHAKE_GRACE_MS 1000

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

	uint64_t refuse_window_ms;
	unsigned refuse_logged, refuse_suppressed;

	bool stopping;
};

/*
 * The peer's IP as 16 bytes, IPv4 mapped into IPv6, so that a dual-stack
 * (socket-activated) listener counts ::ffff:1.2.3.4 and 1.2.3.4 as one host.
 */
static void peer_ip_key(const struct sockaddr_storage *ss, uint8_t key[16])
{
	memset(key, 0, 16);
	if (ss->ss_family == AF_INET6) {
		memcpy(key, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	} else if (ss->ss_family == AF_INET) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	}
}

/*
 * The "host" for pre-authentication limits: an IPv4 address, or an IPv6 /64
 * (one subscriber's usual allocation, where every address is the attacker's
 * to pick).
 */
static void peer_prefix_key(const struct sockaddr_storage *ss, uint8_t key[16])
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	peer_ip_key(ss, key);
	if (memcmp(key, v4mapped, sizeof(v4mapped)) != 0) {
		memset(key + 8, 0, 8);
	}
}

/* Is c still in TLS/HELLO (and not already ended by us)? Refreshes the cached flag. */
static bool child_unauthenticated(struct daemon *d, struct child *c)
{
	if (!c->authenticated) {
		c->authenticated = session_table_is_authenticated(d->sessions, c->slot, c->pid);
	}
	return !c->authenticated && c->started_ms != 0;
}

static unsigned unauthenticated_from(struct daemon *d, const uint8_t key[16])
{
	uint8_t have[16];
	unsigned n = 0;

	for (size_t i = 0; i < d->nchildren; i++) {
		if (child_unauthenticated(d, &d->children[i])) {
			peer_prefix_key(&d->children[i].peer, have);
			n += memcmp(key, have, 16) == 0;
		}
	}
	return n;
}

static unsigned children_from_host(const struct daemon *d, const struct sockaddr_storage *peer)
{
	uint8_t want[16], have[16];
	unsigned n = 0;

	peer_ip_key(peer, want);
	for (size_t i = 0; i < d->nchildren; i++) {
		peer_ip_key(&d->children[i].peer, have);
		n += memcmp(want, have, 16) == 0;
	}
	return n;
}

static void notify_status(const struct daemon *d)
{
	uint64_t pinned = 0, moved = 0;

	if (d->sessions) {
		session_table_totals(d->sessions, &pinned, &moved);
	}
	sd_notifyf(0,
		   "STATUS=%zu active session%s, %" PRIu64 " MiB pinned, %" PRIu64 " bytes moved",
		   d->nchildren, d->nchildren == 1 ? "" : "s", pinned >> 20, moved);
}

static int load_tls(const struct daemon_config *cfg, struct tls_ctx **ret)
{
	struct tls_config tc = {
		.server = true,
		.cert_file = cfg->cert,
		.key_file = cfg->key,
		.ca_file = cfg->ca,
	};
	int r = tls_ctx_new(&tc, ret);

	if (r < 0) {
		log_error_errno(r,
				"%s: cannot load TLS credentials (cert %s, key %s, ca %s): %m: %s",
				cfg->path, cfg->cert, cfg->key, cfg->ca, tls_last_error());
	}
	return r;
}

/* Config plus TLS context, or an error already logged. */
static int load_all(const char *file, struct daemon_config **ret_cfg, struct tls_ctx **ret_tls)
{
	char err[1536];
	struct daemon_config *cfg = NULL;
	struct tls_ctx *tls = NULL;
	int r;

	r = daemon_config_load(file, &cfg, err, sizeof(err));
	if (r < 0) {
		return log_error_errno(r, "%s", err);
	}
	r = load_tls(cfg, &tls);
	if (r < 0) {
		daemon_config_free(cfg);
		return r;
	}
	*ret_cfg = cfg;
	*ret_tls = tls;
	return 0;
}

static void apply_log_level(const struct daemon *d)
{
	log_set_max_level(d->verbose ? LOG_DEBUG : d->cfg->log_level);
}

/*
 * Can sessions switch to their modules' users? And do those that are not
 * root get RLIMIT_MEMLOCK, or keep CAP_IPC_LOCK (privs.h)?
 */
static void check_memlock(const struct daemon_config *cfg)
{
	uint64_t need = serve_session_memlock(cfg);
	const char *missing = geteuid() == 0 ? privs_missing() : NULL;

	if (missing) {
		log_error("rdmacpd runs as root without %s: every session will fail to switch "
			  "to its module's user (see PRIVILEGES in rdmacpd(8))",
			  missing);
	}
	if (geteuid() == 0 && !privs_memlock_settable(need)) {
		log_notice(
		    "RLIMIT_MEMLOCK is below the %" PRIu64 " MiB that sessions need "
		    "('memory budget' and slack) and cannot be raised (no CAP_SYS_RESOURCE): "
		    "sessions will keep CAP_IPC_LOCK instead (LimitMEMLOCK=infinity or "
		    "'ulimit -l unlimited' avoids that)",
		    need >> 20);
	}
}

/* ---- listening ---- */

static int listen_on(const struct listen_addr *la)
{
	_cleanup_close_ int fd = -1;
	int one = 1;

	fd = socket(la->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		return negerrno();
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) {
		return negerrno();
	}
	/* One socket per address family: [::] must not also grab 0.0.0.0. */
	if (la->ss.ss_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) {
		return negerrno();
	}
	if (bind(fd, (const struct sockaddr *)&la->ss, la->len) < 0) {
		return negerrno();
	}
	if (listen(fd, SOMAXCONN) < 0) {
		return negerrno();
	}
	return TAKE_FD(fd);
}

static int setup_listeners(struct daemon *d)
{
	char default_addr[32];
	struct listen_addr def;
	const struct listen_addr *addrs = d->cfg->listen;
	size_t n = d->cfg->nlisten;
	int r;

	/* unset_environment: children must not think they were activated. */
	r = sd_listen_fds(1);
	if (r < 0) {
		return log_error_errno(r, "socket activation: %m");
	}
	if (r > 0) {
		if ((size_t)r > DAEMON_MAX_LISTEN) {
			return log_error_errno(-E2BIG,
					       "socket activation passed %d sockets, at most %d", r,
					       DAEMON_MAX_LISTEN);
		}
		for (int i = 0; i < r; i++) {
			int fd = SD_LISTEN_FDS_START + i;

			if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
				return log_error_errno(-EINVAL,
						       "socket activation: fd %d is not "
						       "a listening stream socket",
						       fd);
			}
			/* accept4 in the loop must never block on a vanished connection. */
			int nb = fd_set_nonblock(fd, true);

			if (nb < 0) {
				return log_error_errno(nb, "fd %d: %m", fd);
			}
			d->listen_fds[d->nlisten++] = fd;
		}
		d->socket_activated = true;
		log_info("using %d socket%s from systemd", r, r == 1 ? "" : "s");
		return 0;
	}

	if (n == 0) {
		snprintf(default_addr, sizeof(default_addr), "0.0.0.0:%d", DAEMON_DEFAULT_PORT);
		r = parse_listen_addr(default_addr, &def);
		assert(r == 0);
		addrs = &def;
		n = 1;
	}
	for (size_t i = 0; i < n; i++) {
		int fd = listen_on(&addrs[i]);

		if (fd < 0) {
			return log_error_errno(fd, "cannot listen on %s: %m", addrs[i].text);
		}
		d->listen_fds[d->nlisten++] = fd;
		log_info("listening on %s", addrs[i].text);
	}
	return 0;
}

static void close_listeners(struct daemon *d)
{
	for (size_t i = 0; i < d->nlisten; i++) {
		close(d->listen_fds[i]);
	}
	d->nlisten = 0;
}

/* ---- children ---- */

static _noreturn_ void run_child(struct daemon *d, int fd, const struct sockaddr_storage *peer,
				 socklen_t peerlen)
{
	int r;

	close_listeners(d);
	close(d->sfd);
	/* Only the supervisor speaks to systemd. */
	unsetenv("NOTIFY_SOCKET");
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	/* SIGPIPE stays ignored (see setup_signals): a write to a gone peer is EPIPE. */
	sigprocmask(SIG_SETMASK, &d->saved_mask, NULL);

	r = serve_connection(d->cfg, d->tls, d->sessions, fd, (const struct sockaddr *)peer,
			     peerlen);
	_exit(r < 0 ? 1 : 0);
}

static struct child *find_child(struct daemon *d, pid_t pid)
{
	for (size_t i = 0; i < d->nchildren; i++) {
		if (d->children[i].pid == pid) {
			return &d->children[i];
		}
	}
	return NULL;
}

static void remove_child(struct daemon *d, struct child *c)
{
	*c = d->children[--d->nchildren];
}

/*
 * ru: what the session used, from wait4(); a clean end is logged with it (CPU
 * time and peak resident memory, the figure the memory budget is about).
 */
static void log_child_exit(const struct daemon *d, const struct child *c, pid_t pid, int status,
			   const struct rusage *ru)
{
	const char *peer = c ? c->peer_text : "?";

	if (c && c->started_ms == 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
		/* Ended by us before it authenticated (already logged or rate limited). */
		log_debug("session %d from %s ended before it authenticated", (int)pid, peer);
	} else if (d->stopping && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) {
		/* We sent that SIGTERM ourselves: nothing abnormal. */
		log_info("session %d from %s ended by shutdown", (int)pid, peer);
	} else if (WIFSIGNALED(status)) {
		log_notice("session %d from %s killed by signal %s%s", (int)pid, peer,
			   sigabbrev_np(WTERMSIG(status)) ?: "?",
			   WCOREDUMP(status) ? " (core dumped)" : "");
	} else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
		log_notice("session %d from %s exited with status %d", (int)pid, peer,
			   WEXITSTATUS(status));
	} else if (c && c->authenticated) {
		log_info("session %d from %s ended: %.3f s CPU (%.3f user), peak RSS %ld KiB",
			 (int)pid, peer,
			 (double)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) +
			     (double)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1e6,
			 (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec / 1e6,
			 ru->ru_maxrss);
	} else {
		log_debug("session %d from %s ended", (int)pid, peer);
	}
}

static void reap_children(struct daemon *d)
{
	bool changed = false;

	for (;;) {
		struct rusage ru;
		int status;
		pid_t pid = wait4(-1, &status, WNOHANG, &ru);
		struct child *c;

		if (pid <= 0) {
			break;
		}
		c = find_child(d, pid);
		if (c) {
			(void)child_unauthenticated(d, c); /* refreshes c->authenticated */
		}
		log_child_exit(d, c, pid, status, &ru);
		/* Whatever it died holding is released here. */
		session_table_reap(d->sessions, pid);
		if (c) {
			remove_child(d, c);
			changed = true;
		}
	}
	if (changed && !d->stopping) {
		notify_status(d);
	}
}

static int grow_children(struct daemon *d, size_t cap)
{
	struct child *c;

	if (cap <= d->children_cap) {
		return 0;
	}
	c = reallocarray(d->children, cap, sizeof(*c));
	if (!c) {
		return -ENOMEM;
	}
	d->children = c;
	d->children_cap = cap;
	return 0;
}

/* ---- accepting ---- */

static void log_refused(struct daemon *d, const char *peer, const char *why, unsigned limit)
{
	uint64_t now = (uint64_t)now_ms();

	/* A flood of refused connections must not become a flood of log lines. */
	if (now - d->refuse_window_ms >= 1000) {
		if (d->refuse_suppressed) {
			log_notice("%u more connections refused (log rate limited)",
				   d->refuse_suppressed);
		}
		d->refuse_window_ms = now;
		d->refuse_logged = 0;
		d->refuse_suppressed = 0;
	}
	if (d->refuse_logged >= REFUSE_LOG_PER_S) {
		d->refuse_suppressed++;
		return;
	}
	d->refuse_logged++;
	log_notice("refusing connection from %s: %s (%u)", peer, why, limit);
}

/*
 * With "max unauthenticated" reached, a new connection may still take the
 * place of the oldest unauthenticated connection of the host holding the
 * most of them, when that host holds more than the newcomer's: silent
 * connections from a few addresses can't lock everyone else out, while a
 * real client's handshake (milliseconds, and the youngest) is the last to
 * go. Returns the child to end, or NULL (refuse the newcomer).
 */
static struct child *pick_unauthenticated_victim(struct daemon *d, unsigned newcomer_has)
{
	struct child *victim = NULL;
	unsigned victim_count = 0;
	uint8_t key[16];

	for (size_t i = 0; i < d->nchildren; i++) {
		struct child *c = &d->children[i];
		unsigned n;

		if (!child_unauthenticated(d, c)) {
			continue;
		}
		peer_prefix_key(&c->peer, key);
		n = unauthenticated_from(d, key);
		if (n > victim_count || (n == victim_count && c->started_ms < victim->started_ms)) {
			victim = c;
			victim_count = n;
		}
	}
	return victim && victim_count > newcomer_has ? victim : NULL;
}

/* Room for one more unauthenticated connection from peer? May end another (see above). */
static bool admit_unauthenticated(struct daemon *d, const struct sockaddr_storage *peer,
				  const char *peer_text)
{
	uint8_t key[16];
	unsigned all = 0, host;
	struct child *victim;

	for (size_t i = 0; i < d->nchildren; i++) {
		all += child_unauthenticated(d, &d->children[i]);
	}
	peer_prefix_key(peer, key);
	host = unauthenticated_from(d, key);
	if (host >= d->cfg->max_unauth_per_host) {
		log_refused(d, peer_text, "max unauthenticated per host reached",
			    d->cfg->max_unauth_per_host);
		return false;
	}
	if (all < d->cfg->max_unauth) {
		return true;
	}
	victim = pick_unauthenticated_victim(d, host);
	if (!victim) {
		log_refused(d, peer_text, "max unauthenticated reached", d->cfg->max_unauth);
		return false;
	}
	/* Debug only: a flood of these must not become a flood of log lines. */
	log_debug("max unauthenticated reached (%u): ending session %d from %s, "
		  "still in its handshake, for %s",
		  d->cfg->max_unauth, (int)victim->pid, victim->peer_text, peer_text);
	kill(victim->pid, SIGKILL);
	victim->started_ms = 0; /* ended; it stops counting as unauthenticated now */
	return true;
}

static void handle_connection(struct daemon *d, int fd, const struct sockaddr_storage *peer,
			      socklen_t peerlen)
{
	struct child *c;
	char peer_text[INET6_ADDRSTRLEN + 8];
	pid_t pid;

	net_addr_str((const struct sockaddr *)peer, peerlen, peer_text, sizeof(peer_text));
	if (d->nchildren >= d->cfg->max_connections || d->nchildren >= SESSIONS_MAX) {
		log_refused(d, peer_text, "max connections reached", d->cfg->max_connections);
		close(fd);
		return;
	}
	if (children_from_host(d, peer) >= d->cfg->max_per_host) {
		log_refused(d, peer_text, "max connections per host reached", d->cfg->max_per_host);
		close(fd);
		return;
	}
	/* A new connection is unauthenticated: it must fit those caps too. */
	if (!admit_unauthenticated(d, peer, peer_text)) {
		close(fd);
		return;
	}
	/* Capacity is at least max connections (see main and reload), so this holds. */
	assert(d->nchildren < d->children_cap);

	pid = fork();
	if (pid < 0) {
		log_error_errno(negerrno(), "fork for %s: %m", peer_text);
		close(fd);
		return;
	}
	if (pid == 0) {
		run_child(d, fd, peer, peerlen);
	}
	close(fd);
	c = &d->children[d->nchildren++];
	c->pid = pid;
	c->peer = *peer;
	c->peerlen = peerlen;
	snprintf(c->peer_text, sizeof(c->peer_text), "%s", peer_text);
	c->authenticated = false;
	c->started_ms = (uint64_t)now_ms();
	c->slot = session_table_register(d->sessions, pid);
	if (c->slot < 0) {
		/* Can't happen (at most SESSIONS_MAX children); the backstop ends it. */
		log_error_errno(c->slot, "session table for %d: %m", (int)pid);
	}
	log_debug("session %d from %s started", (int)pid, peer_text);
	notify_status(d);
}

static void accept_all(struct daemon *d, int lfd)
{
	for (;;) {
		struct sockaddr_storage peer;
		socklen_t len = sizeof(peer);
		int fd = accept4(lfd, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC);

		if (fd >= 0) {
			int one = 1;

			/*
			 * The control channel is request and answer: without this, a
			 * small record waits for the peer's delayed ACK (40 ms).
			 */
			(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			handle_connection(d, fd, &peer, len);
			continue;
		}
		switch (errno) {
		case EAGAIN:
		case EINTR:
			return;
		case ECONNABORTED:
		case EPROTO:
		case EPERM:
			/* That one connection failed; the listener is fine. */
			continue;
		default:
			/* EMFILE, ENFILE, ENOBUFS, ENOMEM: poll would report the listener
			 * readable again at once, so back off instead of spinning. */
			log_warning_errno(negerrno(), "accept: %m");
			d->accept_paused_until_ms = (uint64_t)now_ms() + ACCEPT_BACKOFF_MS;
			return;
		}
	}
}

static void warn_line(void *ud, const char *text)
{
	(void)ud;
	log_warning("%s", text);
}

/*
 * Modules that export the kernel or the whole host (modcheck.c). Logged at
 * --check, and again at start and on each reload: a SIGHUP runs no --check.
 */
static void system_path_warnings(const struct daemon_config *cfg)
{
	for (size_t i = 0; i < cfg->nmodules; i++) {
		modcheck_system_path(&cfg->modules[i], warn_line, NULL);
	}
}

/* ---- signals ---- */

static bool same_listen(const struct daemon_config *a, const struct daemon_config *b)
{
	if (a->nlisten != b->nlisten) {
		return false;
	}
	for (size_t i = 0; i < a->nlisten; i++) {
		if (a->listen[i].len != b->listen[i].len ||
		    memcmp(&a->listen[i].ss, &b->listen[i].ss, a->listen[i].len) != 0) {
			return false;
		}
	}
	return true;
}

static void reload(struct daemon *d)
{
	struct daemon_config *cfg;
	struct tls_ctx *tls;
	int r;

	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64, (uint64_t)now_ms() * 1000);
	r = load_all(d->config_file, &cfg, &tls);
	if (r < 0) {
		log_error("reload failed, keeping the old configuration");
		goto done;
	}
	r = grow_children(d, cfg->max_connections);
	if (r < 0) {
		log_error_errno(r, "reload: %m, keeping the old configuration");
		daemon_config_free(cfg);
		tls_ctx_free(tls);
		goto done;
	}
	if (!d->socket_activated && !same_listen(d->cfg, cfg)) {
		log_warning("'listen' changed: restart rdmacpd to apply it");
	}
	/* Children forked a copy of the old config and context; ours can go. */
	daemon_config_free(d->cfg);
	tls_ctx_free(d->tls);
	d->cfg = cfg;
	d->tls = tls;
	session_table_set_budget(d->sessions, cfg->memory_budget);
	apply_log_level(d);
	system_path_warnings(cfg);
	check_memlock(cfg);
	log_info("reloaded %s", d->config_file);
done:
	sd_notify(0, "READY=1");
	notify_status(d);
}

/* Drain the signalfd. Returns true on SIGTERM/SIGINT. */
static bool handle_signals(struct daemon *d)
{
	struct signalfd_siginfo si;
	bool stop = false;

	while (read(d->sfd, &si, sizeof(si)) == sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			reap_children(d);
			break;
		case SIGHUP:
			if (!d->stopping) {
				reload(d);
			}
			break;
		case SIGTERM:
		case SIGINT:
			stop = true;
			break;
		default:
			break;
		}
	}
	return stop;
}

static void send_watchdog(struct daemon *d)
{
	uint64_t now = (uint64_t)now_ms();

	if (d->watchdog_usec && now >= d->next_watchdog_ms) {
		sd_notify(0, "WATCHDOG=1");
		d->next_watchdog_ms = now + d->watchdog_usec / 2000;
	}
}

static void signal_children(struct daemon *d, int sig)
{
	for (size_t i = 0; i < d->nchildren; i++) {
		kill(d->children[i].pid, sig);
	}
}

/* SIGTERM: stop accepting, pass it on, give the sessions time to finish. */
/*
 * SIGTERM drains: stop accepting, let running transfers finish for up to
 * DRAIN_S seconds, then ask the sessions that are left to abort (SIGTERM:
 * they remove their temp files and tell their clients), and after
 * SHUTDOWN_GRACE_S more, kill what still runs. A second SIGTERM or SIGINT
 * skips the drain.
 */
static void shutdown_children(struct daemon *d)
{
	uint64_t deadline = (uint64_t)now_ms() + DRAIN_S * 1000;
	int phase = 0; /* 0 draining, 1 asked to abort, 2 killed */

	d->stopping = true;
	close_listeners(d);
	sd_notify(0, "STOPPING=1");
	log_info("stopping, %zu active session%s%s", d->nchildren, d->nchildren == 1 ? "" : "s",
		 d->nchildren ? ": letting them finish" : "");

	while (d->nchildren > 0) {
		struct pollfd pfd = { .fd = d->sfd, .events = POLLIN };
		uint64_t now = (uint64_t)now_ms();
		int timeout;

		if (now >= deadline && phase == 0) {
			log_notice("%zu session%s still running after the drain, ending them",
				   d->nchildren, d->nchildren == 1 ? "" : "s");
			signal_children(d, SIGTERM);
			phase = 1;
			deadline = now + SHUTDOWN_GRACE_S * 1000;
			continue;
		}
		if (now >= deadline) {
			log_warning("%zu session%s still running, killing them", d->nchildren,
				    d->nchildren == 1 ? "" : "s");
			signal_children(d, SIGKILL);
			while (d->nchildren > 0) {
				int status;
				pid_t pid = waitpid(-1, &status, 0);
				struct child *c;

				if (pid < 0) {
					break;
				}
				session_table_reap(d->sessions, pid);
				c = find_child(d, pid);
				if (c) {
					remove_child(d, c);
				}
			}
			break;
		}
		timeout = (int)(deadline - now);
		if (d->watchdog_usec) {
			timeout = MIN(timeout, (int)(d->watchdog_usec / 2000));
		}
		if (poll(&pfd, 1, timeout) < 0 && errno != EINTR) {
			log_error_errno(negerrno(), "poll: %m");
			break;
		}
		send_watchdog(d);
		if (handle_signals(d) && phase == 0) {
			deadline = (uint64_t)now_ms(); /* impatient: skip the drain */
		}
	}
}

/*
 * Kill children still unauthenticated past the handshake deadline plus a
 * grace (the child's own deadline should have ended them). Returns the ms
 * until the next such deadline, or -1 when none is pending.
 */
static int enforce_handshake_deadline(struct daemon *d)
{
	uint64_t now = (uint64_t)now_ms();
	uint64_t limit = (uint64_t)d->cfg->handshake_timeout_s * 1000 + HANDSHAKE_GRACE_MS;
	int next = -1;

	for (size_t i = 0; i < d->nchildren; i++) {
		struct child *c = &d->children[i];
		uint64_t due = c->started_ms + limit;

		if (c->authenticated || c->started_ms == 0) {
			continue;
		}
		c->authenticated = session_table_is_authenticated(d->sessions, c->slot, c->pid);
		if (c->authenticated) {
			continue;
		}
		if (now >= due) {
			log_notice("session %d from %s: not authenticated within %u s, ending it",
				   (int)c->pid, c->peer_text, d->cfg->handshake_timeout_s);
			kill(c->pid, SIGKILL);
			c->started_ms = 0; /* killed once; it still counts until reaped */
			continue;
		}
		next = next < 0 ? (int)(due - now) : MIN(next, (int)(due - now));
	}
	return next;
}

static int main_loop(struct daemon *d)
{
	for (;;) {
		struct pollfd pfd[DAEMON_MAX_LISTEN + 1];
		uint64_t now = (uint64_t)now_ms();
		bool accepting = now >= d->accept_paused_until_ms;
		size_t n = 0;
		int timeout = -1;
		int r;

		pfd[n++] = (struct pollfd){ .fd = d->sfd, .events = POLLIN };
		if (accepting) {
			for (size_t i = 0; i < d->nlisten; i++) {
				pfd[n++] =
				    (struct pollfd){ .fd = d->listen_fds[i], .events = POLLIN };
			}
		} else {
			timeout = (int)(d->accept_paused_until_ms - now);
		}
		if (d->watchdog_usec) {
			int wd = d->next_watchdog_ms > now ? (int)(d->next_watchdog_ms - now) : 0;

			timeout = timeout < 0 ? wd : MIN(timeout, wd);
		}
		if (d->nchildren > 0) {
			/* Keep STATUS= (bytes moved) fresh while sessions run. */
			int st = d->next_status_ms > now ? (int)(d->next_status_ms - now) : 0;

			timeout = timeout < 0 ? st : MIN(timeout, st);
		}
		r = enforce_handshake_deadline(d);
		if (r >= 0) {
			timeout = timeout < 0 ? r : MIN(timeout, r);
		}

		r = poll(pfd, n, timeout);
		if (r < 0 && errno != EINTR) {
			return log_error_errno(negerrno(), "poll: %m");
		}
		send_watchdog(d);
		if (d->nchildren > 0 && (uint64_t)now_ms() >= d->next_status_ms) {
			notify_status(d);
			d->next_status_ms = (uint64_t)now_ms() + STATUS_INTERVAL_MS;
		}
		if (r <= 0) {
			continue;
		}
		if (pfd[0].revents && handle_signals(d)) {
			return 0;
		}
		for (size_t i = 1; i < n; i++) {
			if (pfd[i].revents) {
				accept_all(d, pfd[i].fd);
			}
		}
	}
}

/* ---- command line ---- */

static void usage(FILE *f)
{
	fprintf(f, "Usage: rdmacpd --config FILE [--check] [-v]\n"
		   "\n"
		   "The rdmacp daemon: serves the modules of FILE to rdmacp clients. Runs in the\n"
		   "foreground; logs to stderr with syslog priority prefixes.\n"
		   "\n"
		   "  -c, --config FILE  configuration (rdmacpd.conf(5))\n"
		   "      --check        validate the configuration and the TLS files, then exit\n"
		   "  -v, --verbose      log at debug level\n"
		   "      --version      print the version and exit\n"
		   "  -h, --help         this text\n"
		   "\n"
		   "Signals: SIGHUP reloads the configuration for new connections; SIGTERM stops\n"
		   "accepting, ends the sessions and exits.\n");
}

enum { OPT_CHECK = 0x100, OPT_VERSION };

static int parse_args(int argc, char **argv, struct daemon *d, bool *check)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, OPT_CHECK },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "c:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			d->config_file = optarg;
			break;
		case OPT_CHECK:
			*check = true;
			break;
		case 'v':
			d->verbose = true;
			break;
		case OPT_VERSION:
			printf("rdmacpd %s\n", RDMACP_VERSION);
			exit(EXIT_OK);
		case 'h':
			usage(stdout);
			exit(EXIT_OK);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	if (!d->config_file) {
		log_error("--config FILE is required");
		return -EINVAL;
	}
	return 0;
}

static int setup_signals(struct daemon *d)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, &d->saved_mask) < 0) {
		return negerrno();
	}
	d->sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (d->sfd < 0) {
		return negerrno();
	}
	/* A peer that goes away must cost its session an EPIPE, not its life. */
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

/*
 * --check: what loads but deserves a look. Module paths another user could
 * swap, or that export the kernel (modcheck.c); modules a daemon that is
 * not root can't serve.
 */
static void check_warnings(const struct daemon_config *cfg)
{
	system_path_warnings(cfg);
	for (size_t i = 0; i < cfg->nmodules; i++) {
		const struct module *m = &cfg->modules[i];

		modcheck_module(m, warn_line, NULL);
		if (geteuid() != 0 && (m->run_uid != geteuid() || m->run_gid != getegid())) {
			log_warning("module [%s]: wants uid %u gid %u, but rdmacpd is not root: "
				    "it will refuse this module",
				    m->name, (unsigned)m->run_uid, (unsigned)m->run_gid);
		}
	}
}

/* Everything after the command line; returns the exit code. */
static int run(struct daemon *d, bool check)
{
	uint64_t usec = 0;
	int r;

	if (load_all(d->config_file, &d->cfg, &d->tls) < 0) {
		return EXIT_CONFIG;
	}
	if (check) {
		check_warnings(d->cfg);
		return EXIT_OK;
	}
	log_set_daemon_mode("rdmacpd");
	apply_log_level(d);
	system_path_warnings(d->cfg);
	check_memlock(d->cfg);
	privs_preload_nss();
	if (limits_raise_nofile() < 0) {
		log_warning("cannot raise the open-files limit: many files in flight may fail");
	}

	r = setup_signals(d);
	if (r < 0) {
		log_error_errno(r, "signals: %m");
		return EXIT_CONFIG;
	}
	if (grow_children(d, d->cfg->max_connections) < 0) {
		log_error("out of memory");
		return EXIT_CONFIG;
	}
	r = session_table_create(d->cfg->memory_budget, &d->sessions);
	if (r < 0) {
		log_error_errno(r, "shared session table: %m");
		return EXIT_CONFIG;
	}
	if (setup_listeners(d) < 0) {
		return EXIT_CONFIG;
	}
	/* unset_environment: the watchdog is the supervisor's job alone. */
	if (sd_watchdog_enabled(1, &usec) > 0 && usec >= 2000) {
		d->watchdog_usec = usec;
		d->next_watchdog_ms = (uint64_t)now_ms();
	}
	sd_notify(0, "READY=1");
	notify_status(d);
	log_info("rdmacpd %s ready", RDMACP_VERSION);
	send_watchdog(d);

	r = main_loop(d);
	shutdown_children(d);
	log_info("stopped");
	/* Only a failing poll() ends the loop abnormally: a plain failure. */
	return r < 0 ? EXIT_FAILURE : EXIT_OK;
}

static void daemon_done(struct daemon *d)
{
	close_listeners(d);
	if (d->sfd >= 0) {
		close(d->sfd);
	}
	free(d->children);
	tls_ctx_free(d->tls);
	daemon_config_free(d->cfg);
}

int main(int argc, char **argv)
{
	struct daemon d = { .sfd = -1 };
	bool check = false;
	int r;

	/*
	 * Until the daemon runs, messages are for whoever started it (a shell,
	 * ExecStartPre=rdmacpd --check): plain "rdmacpd: " lines.
	 */
	log_set_prefix_mode(false, "rdmacpd");
	if (parse_args(argc, argv, &d, &check) < 0) {
		return EXIT_USAGE;
	}
	r = run(&d, check);
	daemon_done(&d);
	return r;
}
