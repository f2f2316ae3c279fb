/* SPDX-License-Identifier: MIT */
/*
 * The session processes (supervisor.h): one child per accepted connection,
 * forked with the listeners and the signalfd closed, running
 * serve_connection(); each has its entry in the shared session table (memory
 * budget, bytes moved, authenticated or not) until the supervisor reaps it,
 * however it died. Its end is logged with what it used.
 */
#include "supervisor.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "macro.h"
#include "serve.h"
#include "session_table.h"

bool child_unauthenticated(struct daemon *d, struct child *c)
{
	if (!c->authenticated) {
		c->authenticated = session_table_is_authenticated(d->sessions, c->slot, c->pid);
	}
	return !c->authenticated && c->started_ms != 0;
}

void children_notify_status(const struct daemon *d)
{
	uint64_t pinned = 0, moved = 0;

	if (d->sessions) {
		session_table_totals(d->sessions, &pinned, &moved);
	}
	sd_notifyf(0,
		   "STATUS=%zu active session%s, %" PRIu64 " MiB pinned, %" PRIu64 " bytes moved",
		   d->nchildren, d->nchildren == 1 ? "" : "s", pinned >> 20, moved);
}

static _noreturn_ void run_child(struct daemon *d, int fd, const struct sockaddr_storage *peer,
				 socklen_t peerlen)
{
	int r;

	listeners_close(d);
	close(d->sfd);
	/* Only the supervisor speaks to systemd. */
	unsetenv("NOTIFY_SOCKET");
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	/* SIGPIPE stays ignored (see supervisor_setup_signals): a write to a gone peer is EPIPE. */
	sigprocmask(SIG_SETMASK, &d->saved_mask, NULL);

	r = serve_connection(d->cfg, d->tls, d->sessions, fd, (const struct sockaddr *)peer,
			     peerlen);
	_exit(r < 0 ? 1 : 0);
}

void children_start(struct daemon *d, int fd, const struct sockaddr_storage *peer,
		    socklen_t peerlen, const char *peer_text)
{
	struct child *c;
	pid_t pid;

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
	children_notify_status(d);
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

void children_reap(struct daemon *d)
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
		children_notify_status(d);
	}
}

int children_grow(struct daemon *d, size_t cap)
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

void children_signal(struct daemon *d, int sig)
{
	for (size_t i = 0; i < d->nchildren; i++) {
		kill(d->children[i].pid, sig);
	}
}

void children_wait_all(struct daemon *d)
{
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
}
