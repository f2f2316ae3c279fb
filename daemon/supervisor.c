/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's loop (supervisor.h): signals through a signalfd (SIGCHLD
 * reaps, SIGHUP reloads, SIGTERM/SIGINT stop), the listeners polled unless
 * accepting is backing off, systemd's watchdog and STATUS= kept fresh, the
 * handshake backstop run; and the drain at SIGTERM.
 */
#include "supervisor.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "macro.h"

int supervisor_setup_signals(struct daemon *d)
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
 * A hook for tests alone (t_systemd_boot): with RDMACPD_TEST_HANG_ON_HUP in
 * the environment, SIGHUP makes the supervisor hang for good instead of
 * reloading (no more watchdog pings, no accepting), so that a test can watch
 * systemd's WatchdogSec= kill and restart it. Without the variable it does
 * nothing; never set it outside a test (rdmacpd(8), SYSTEMD).
 */
static void test_hang_on_hup(void)
{
	if (!getenv("RDMACPD_TEST_HANG_ON_HUP")) {
		return;
	}
	log_warning(
	    "RDMACPD_TEST_HANG_ON_HUP is set: hanging on purpose, as a test of the watchdog");
	for (;;) {
		pause();
	}
}

/* Drain the signalfd. Returns true on SIGTERM/SIGINT. */
static bool handle_signals(struct daemon *d)
{
	struct signalfd_siginfo si;
	bool stop = false;

	while (read(d->sfd, &si, sizeof(si)) == sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			children_reap(d);
			break;
		case SIGHUP:
			test_hang_on_hup();
			if (!d->stopping) {
				supervisor_reload(d);
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

void supervisor_watchdog(struct daemon *d)
{
	uint64_t now = (uint64_t)now_ms();

	if (d->watchdog_usec && now >= d->next_watchdog_ms) {
		sd_notify(0, "WATCHDOG=1");
		d->next_watchdog_ms = now + d->watchdog_usec / 2000;
	}
}

/*
 * SIGTERM drains: stop accepting, let running transfers finish for up to
 * 'drain timeout' (rdmacpd.conf(5)), then ask the sessions that are left to
 * abort (SIGTERM: they remove their temp files and tell their clients, whose
 * exit code says the daemon is going away), and after
 * SHUTDOWN_GRACE_S more, kill what still runs. A second SIGTERM or SIGINT
 * skips the drain.
 */
void supervisor_drain(struct daemon *d)
{
	uint64_t deadline = (uint64_t)now_ms() + d->cfg->drain_timeout_ms;
	int phase = 0; /* 0 draining, 1 asked to abort, 2 killed */

	d->stopping = true;
	listeners_close(d);
	sd_notify(0, "STOPPING=1");
	if (d->nchildren == 0) {
		log_info("stopping, 0 active sessions");
	} else {
		log_info("stopping, %zu active session%s: letting them finish for up to %g s",
			 d->nchildren, d->nchildren == 1 ? "" : "s",
			 (double)d->cfg->drain_timeout_ms / 1000);
	}

	while (d->nchildren > 0) {
		struct pollfd pfd = { .fd = d->sfd, .events = POLLIN };
		uint64_t now = (uint64_t)now_ms();
		int timeout;

		if (now >= deadline && phase == 0) {
			log_notice("%zu session%s still running after the drain, ending them",
				   d->nchildren, d->nchildren == 1 ? "" : "s");
			children_signal(d, SIGTERM);
			phase = 1;
			deadline = now + SHUTDOWN_GRACE_S * 1000;
			continue;
		}
		if (now >= deadline) {
			log_warning("%zu session%s still running, killing them", d->nchildren,
				    d->nchildren == 1 ? "" : "s");
			children_signal(d, SIGKILL);
			children_wait_all(d);
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
		supervisor_watchdog(d);
		if (handle_signals(d) && phase == 0) {
			deadline = (uint64_t)now_ms(); /* impatient: skip the drain */
		}
	}
	/* Refusals counted and not yet said: said now, not lost. */
	admission_flush_refusals(d, true);
}

/*
 * How long the loop's poll may wait: until accepting resumes, the next
 * watchdog ping, the next STATUS=, the next handshake backstop (-1: none).
 */
static int loop_timeout(struct daemon *d, uint64_t now, bool accepting)
{
	int timeout = accepting ? -1 : (int)(d->accept_paused_until_ms - now);
	int r;

	if (d->watchdog_usec) {
		int wd = d->next_watchdog_ms > now ? (int)(d->next_watchdog_ms - now) : 0;

		timeout = timeout < 0 ? wd : MIN(timeout, wd);
	}
	if (d->nchildren > 0) {
		/* Keep STATUS= (bytes moved) fresh while sessions run. */
		int st = d->next_status_ms > now ? (int)(d->next_status_ms - now) : 0;

		timeout = timeout < 0 ? st : MIN(timeout, st);
	}
	if (d->next_cert_check_ms) {
		uint64_t due = d->next_cert_check_ms > now ? d->next_cert_check_ms - now : 0;

		timeout = timeout < 0 ? (int)MIN(due, (uint64_t)INT_MAX)
				      : MIN(timeout, (int)MIN(due, (uint64_t)INT_MAX));
	}
	r = admission_enforce_handshake_deadline(d);
	if (r >= 0) {
		timeout = timeout < 0 ? r : MIN(timeout, r);
	}
	/* Repeated refusals: their count is said when their interval is over. */
	r = admission_flush_refusals(d, false);
	if (r >= 0) {
		timeout = timeout < 0 ? r : MIN(timeout, r);
	}
	return timeout;
}

int supervisor_loop(struct daemon *d)
{
	for (;;) {
		struct pollfd pfd[DAEMON_MAX_LISTEN + 1];
		uint64_t now = (uint64_t)now_ms();
		bool accepting = now >= d->accept_paused_until_ms;
		size_t n = 0;
		int timeout;
		int r;

		pfd[n++] = (struct pollfd){ .fd = d->sfd, .events = POLLIN };
		for (size_t i = 0; accepting && i < d->nlisten; i++) {
			pfd[n++] = (struct pollfd){ .fd = d->listen_fds[i], .events = POLLIN };
		}
		timeout = loop_timeout(d, now, accepting);

		r = poll(pfd, n, timeout);
		if (r < 0 && errno != EINTR) {
			return log_error_errno(negerrno(), "poll: %m");
		}
		supervisor_watchdog(d);
		if (d->nchildren > 0 && (uint64_t)now_ms() >= d->next_status_ms) {
			children_notify_status(d);
			d->next_status_ms = (uint64_t)now_ms() + STATUS_INTERVAL_MS;
		}
		if (d->next_cert_check_ms && (uint64_t)now_ms() >= d->next_cert_check_ms) {
			supervisor_cert_expiry(d->cfg, NULL, 0);
			d->next_cert_check_ms = supervisor_next_cert_check_ms();
		}
		if (r <= 0) {
			continue;
		}
		if (pfd[0].revents && handle_signals(d)) {
			return 0;
		}
		for (size_t i = 1; i < n; i++) {
			if (pfd[i].revents) {
				admission_accept_all(d, pfd[i].fd);
			}
		}
	}
}
