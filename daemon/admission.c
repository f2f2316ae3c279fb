/* SPDX-License-Identifier: MIT */
/*
 * Accepting a connection within the load limits (supervisor.h).
 *
 * Load limits (SECURITY.md F34): "max connections" counts every live child,
 * including those still in the TLS handshake, and "max connections per host"
 * counts them per peer IP. A connection over a limit is closed at once,
 * before any TLS: the client sees EOF, which is the documented "busy" at the
 * TCP level. The handshake deadline itself is enforced in the child
 * (serve_connection: TLS and HELLO within handshake timeout, one absolute
 * deadline).
 *
 * Pre-authentication slots (SECURITY.md G47): a child counts as
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
#include "supervisor.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "macro.h"
#include "net.h"
#include "session_table.h"

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

static const char *const refusal_why[REFUSED_KINDS] = {
	[REFUSED_CONNECTIONS] = "max connections reached",
	[REFUSED_PER_HOST] = "max connections per host reached",
	[REFUSED_UNAUTH] = "max unauthenticated reached",
	[REFUSED_UNAUTH_PER_HOST] = "max unauthenticated per host reached",
};

/* The line for the refusals of one kind counted since its last one. */
static void log_suppressed(struct refusal_log *r, enum refusal kind, uint64_t now)
{
	log_notice("refused %u more connection%s in the last %u s: %s (%u), the last from %s",
		   r->suppressed, r->suppressed == 1 ? "" : "s",
		   (unsigned)((now - r->logged_ms + 500) / 1000), refusal_why[kind], r->limit,
		   r->last_peer);
	r->suppressed = 0;
	r->logged_ms = now;
}

/*
 * The first refusal of a kind is logged at once; its repeats within
 * REFUSE_LOG_INTERVAL_MS are counted (debug lines only) and said in one line
 * when the interval is over (admission_flush_refusals): a client waiting
 * under --wait-busy, or a flood, costs one line per interval and kind.
 */
static void log_refused(struct daemon *d, enum refusal kind, const char *peer, unsigned limit)
{
	struct refusal_log *r = &d->refusals[kind];
	uint64_t now = (uint64_t)now_ms();

	r->limit = limit;
	snprintf(r->last_peer, sizeof(r->last_peer), "%s", peer);
	if (r->logged_ms != 0 && now - r->logged_ms < REFUSE_LOG_INTERVAL_MS) {
		r->suppressed++;
		log_debug("refusing connection from %s: %s (%u) (repeated: counted)", peer,
			  refusal_why[kind], limit);
		return;
	}
	if (r->suppressed > 0) {
		/* Its interval ended before the loop came round to say so: this one joins. */
		r->suppressed++;
		log_suppressed(r, kind, now);
		return;
	}
	r->logged_ms = now;
	log_notice("refusing connection from %s: %s (%u)", peer, refusal_why[kind], limit);
}

/* The sessions' BUSY refusals (memory budget, a module's limit) counted and due: said here. */
static int flush_busy(struct daemon *d, uint64_t now, bool all)
{
	static const char *const what[SESSION_BUSY_KINDS] = {
		[SESSION_BUSY_MEMORY] = "transfer",
		[SESSION_BUSY_MODULE] = "session",
	};
	static const char *const why[SESSION_BUSY_KINDS] = {
		[SESSION_BUSY_MEMORY] = "memory budget in use",
		[SESSION_BUSY_MODULE] = "a module's max connections reached",
	};
	int next = -1;

	if (!d->sessions) {
		return -1;
	}
	for (int k = 0; k < SESSION_BUSY_KINDS; k++) {
		unsigned counted;
		int n =
		    session_table_take_busy(d->sessions, (enum session_busy)k, now, all, &counted);

		if (counted > 0) {
			log_notice("refused %u more %s%s since the last such line: busy: %s",
				   counted, what[k], counted == 1 ? "" : "s", why[k]);
		}
		if (n >= 0 && (next < 0 || n < next)) {
			next = n;
		}
	}
	return next;
}

int admission_flush_refusals(struct daemon *d, bool all)
{
	uint64_t now = (uint64_t)now_ms();
	int next = flush_busy(d, now, all);

	for (int k = 0; k < REFUSED_KINDS; k++) {
		struct refusal_log *r = &d->refusals[k];
		uint64_t due = r->logged_ms + REFUSE_LOG_INTERVAL_MS;

		if (r->suppressed == 0) {
			continue;
		}
		if (all || now >= due) {
			log_suppressed(r, (enum refusal)k, now);
		} else if (next < 0 || due - now < (uint64_t)next) {
			next = (int)(due - now);
		}
	}
	return next;
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
		log_refused(d, REFUSED_UNAUTH_PER_HOST, peer_text, d->cfg->max_unauth_per_host);
		return false;
	}
	if (all < d->cfg->max_unauth) {
		return true;
	}
	victim = pick_unauthenticated_victim(d, host);
	if (!victim) {
		log_refused(d, REFUSED_UNAUTH, peer_text, d->cfg->max_unauth);
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
	char peer_text[INET6_ADDRSTRLEN + 8];

	net_addr_str((const struct sockaddr *)peer, peerlen, peer_text, sizeof(peer_text));
	if (d->nchildren >= d->cfg->max_connections || d->nchildren >= SESSIONS_MAX) {
		log_refused(d, REFUSED_CONNECTIONS, peer_text, d->cfg->max_connections);
		close(fd);
		return;
	}
	if (children_from_host(d, peer) >= d->cfg->max_per_host) {
		log_refused(d, REFUSED_PER_HOST, peer_text, d->cfg->max_per_host);
		close(fd);
		return;
	}
	/* A new connection is unauthenticated: it must fit those caps too. */
	if (!admit_unauthenticated(d, peer, peer_text)) {
		close(fd);
		return;
	}
	/* A module's directory that appeared since (mounted at last) is this session's. */
	supervisor_find_modules(d);
	children_start(d, fd, peer, peerlen, peer_text);
}

void admission_accept_all(struct daemon *d, int lfd)
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

/* The child's own deadline should have ended these: a backstop. */
int admission_enforce_handshake_deadline(struct daemon *d)
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
