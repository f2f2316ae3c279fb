/* SPDX-License-Identifier: MIT */
/*
 * The relay child of a relayed push (serve_relay.h): its credentials, read
 * while the session is still privileged into sealed memfds that only the
 * child holds once it runs; its start (fork + exec of the relay client with
 * the feed's other end and the OPEN's transfer options); its end.
 *
 * The child runs as the session does (the module's user), dies with the
 * session (PR_SET_PDEATHSIG), reads nothing from stdin and writes into the
 * daemon's log (the session's stderr). It keeps no descriptor of the session
 * but its feed and its credentials.
 */
#include "serve_relay.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exitcodes.h"
#include "fdutil.h"
#include "macro.h"
#include "xport.h"

#ifndef RDMACP_INSTALL_BINDIR
#define RDMACP_INSTALL_BINDIR "/usr/local/bin"
#endif

extern char **environ;

/* The credential files: 'relay certificate' and 'relay key', else the daemon's own. */
static const char *cred_path(const struct daemon_config *cfg, enum relay_cred which)
{
	switch (which) {
	case RELAY_CRED_CERT:
		return cfg->relay_cert[0] ? cfg->relay_cert : cfg->cert;
	case RELAY_CRED_KEY:
		return cfg->relay_key[0] ? cfg->relay_key : cfg->key;
	default:
		return cfg->ca;
	}
}

/* in's bytes (at most RELAY_CRED_MAX) into out. */
static int copy_capped(int in, int out)
{
	char buf[16384];
	size_t total = 0;

	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n <= 0) {
			return n < 0 ? negerrno() : 0;
		}
		total += (size_t)n;
		if (total > RELAY_CRED_MAX) {
			return -EFBIG;
		}
		if (write(out, buf, (size_t)n) != n) {
			return negerrno();
		}
	}
}

/* One credential file into a memfd: sealed, mode 0400, owned by who will read it. */
static int cred_memfd(const char *name, const char *path, uid_t uid, gid_t gid, int *ret_fd)
{
	_cleanup_close_ int in = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	if (in < 0) {
		return negerrno();
	}
	if (fstat(in, &st) < 0) {
		return negerrno();
	}
	if (!S_ISREG(st.st_mode)) {
		return -EINVAL;
	}
	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		return negerrno();
	}
	r = copy_capped(in, fd);
	if (r < 0) {
		return r;
	}
	if (fchown(fd, uid, gid) < 0 || fchmod(fd, 0400) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		return negerrno();
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* 'relay client', else rdmacp beside this rdmacpd, else the installed one. */
static void client_path(const struct daemon_config *cfg, char *buf, size_t len)
{
	char self[PATH_MAX];
	ssize_t n;

	if (cfg->relay_client[0]) {
		snprintf(buf, len, "%s", cfg->relay_client);
		return;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		char *slash;

		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			int w;

			*slash = '\0';
			w = snprintf(buf, len, "%s/rdmacp", self);
			if (w > 0 && (size_t)w < len && access(buf, X_OK) == 0) {
				return;
			}
		}
	}
	snprintf(buf, len, "%s/rdmacp", RDMACP_INSTALL_BINDIR);
}

void serve_relay_child_close_creds(struct serve_relay *rl)
{
	for (size_t i = 0; i < RELAY_CRED_N; i++) {
		if (rl->cred[i] >= 0) {
			close(rl->cred[i]);
			rl->cred[i] = -1;
		}
	}
}

int serve_relay_child_prepare(const struct daemon_config *cfg, struct serve_relay *rl, uid_t uid,
			      gid_t gid, char *why, size_t whylen)
{
	static const char *const names[RELAY_CRED_N] = { "relay-cert", "relay-key", "relay-ca" };

	for (int i = 0; i < RELAY_CRED_N; i++) {
		const char *path = cred_path(cfg, (enum relay_cred)i);
		int r;

		r = cred_memfd(names[i], path, uid, gid, &rl->cred[i]);
		if (r < 0) {
			snprintf(why, whylen, "relay credentials: %s: %s", path,
				 r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
			serve_relay_child_close_creds(rl);
			return r;
		}
	}
	client_path(cfg, rl->client, sizeof(rl->client));
	rl->slow_s = cfg->relay_slow_s;
	if (access(rl->client, X_OK) < 0) {
		int r = negerrno();

		snprintf(why, whylen, "relay client %s: %s", rl->client, strerror(-r));
		serve_relay_child_close_creds(rl);
		return r;
	}
	return 0;
}

/* The relay client's command line, in storage that outlives the fork. */
struct child_argv {
	char *argv[48];
	size_t n;
	char store[2048];
	size_t used;
};

static void arg(struct child_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(struct child_argv *a, const char *fmt, ...)
{
	va_list ap;
	int n;

	assert(a->n + 1 < ARRAY_SIZE(a->argv));
	va_start(ap, fmt);
	n = vsnprintf(a->store + a->used, sizeof(a->store) - a->used, fmt, ap);
	va_end(ap);
	assert(n >= 0 && (size_t)n < sizeof(a->store) - a->used);
	a->argv[a->n++] = a->store + a->used;
	a->argv[a->n] = NULL;
	a->used += (size_t)n + 1;
}

/* What the OPEN asked for, as the client's options name it (client/option_table.c). */
static void transfer_args(struct child_argv *a, const struct msg_open *o)
{
	uint32_t f = o->flags;

	if (f & PROTO_OPEN_RECURSIVE) {
		arg(a, "--recursive");
	}
	if (f & PROTO_OPEN_PRESERVE) {
		arg(a, "--preserve");
	}
	if (f & PROTO_OPEN_OWNER) {
		arg(a, "--owner");
	}
	if (f & PROTO_OPEN_XATTRS) {
		arg(a, "--xattrs");
	}
	if (f & PROTO_OPEN_ACLS) {
		arg(a, "--acls");
	}
	if (f & PROTO_OPEN_HARDLINKS) {
		arg(a, "--hard-links");
	}
	if (f & PROTO_OPEN_SKIP_LEVELS) {
		arg(a, "--skip=%s",
		    f & PROTO_OPEN_SKIP_EXISTS	? "exists"
		    : f & PROTO_OPEN_SKIP_QUICK ? "quick"
						: "checksum");
	}
	if (f & PROTO_OPEN_PARTIAL) {
		arg(a, "--partial");
	}
	if (f & PROTO_OPEN_DELTA) {
		arg(a, "--delta");
	}
	if (f & PROTO_OPEN_ASSUME_ZERO) {
		arg(a, "--assume-zero-target");
	}
	if (f & PROTO_OPEN_DELETE) {
		arg(a, "--delete");
		if (o->max_delete != PROTO_NO_MAX_DELETE) {
			arg(a, "--max-delete=%llu", (unsigned long long)o->max_delete);
		}
	}
}

/* The data path the OPEN asked for: transport, lanes, chunk size, sealing. */
static void lanes_args(struct child_argv *a, const struct msg_open *o)
{
	if (o->transport == XPORT_KIND_TCP || o->transport == XPORT_KIND_VERBS) {
		arg(a, "--transport=%s", o->transport == XPORT_KIND_TCP ? "tcp" : "verbs");
	}
	if (o->lanes >= 1 && o->lanes <= PROTO_MAX_LANES) {
		arg(a, "--lanes=%u", o->lanes);
	}
	if (o->chunk_size >= PROTO_MIN_CHUNK && o->chunk_size <= PROTO_MAX_CHUNK &&
	    !(o->chunk_size & (o->chunk_size - 1))) {
		arg(a, "--chunk-size=%u", o->chunk_size);
	}
	if (!(o->flags & PROTO_OPEN_ENCRYPT)) {
		arg(a, "--no-encrypt");
	} else if (o->encrypt == PROTO_ENCRYPT_REQUIRE) {
		arg(a, "--encrypt");
	}
}

static void build_argv(struct child_argv *a, const struct serve_relay *rl, const struct msg_open *o,
		       int feed)
{
	static const char *const opt[RELAY_CRED_N] = { "cert", "key", "ca" };

	arg(a, "%s", rl->client);
	arg(a, "--config=/dev/null");
	arg(a, "--relay-feed=%d", feed);
	for (int i = 0; i < RELAY_CRED_N; i++) {
		if (rl->cred[i] >= 0) {
			arg(a, "--%s=/proc/self/fd/%d", opt[i], rl->cred[i]);
		}
	}
	arg(a, "--port=%u", rl->chain.count ? rl->chain.hops[0].port : 0);
	arg(a, "--relay-slow-time=%u", rl->slow_s);
	transfer_args(a, o);
	lanes_args(a, o);
}

/* Every descriptor from 3 up closes at exec, but those the child is given. */
static void child_fds(const struct serve_relay *rl, int feed, int devnull)
{
#ifdef SYS_close_range
	syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */);
#endif
	dup2(devnull, STDIN_FILENO);
	dup2(STDERR_FILENO, STDOUT_FILENO);
	fcntl(feed, F_SETFD, 0);
	for (int i = 0; i < RELAY_CRED_N; i++) {
		if (rl->cred[i] >= 0) {
			fcntl(rl->cred[i], F_SETFD, 0);
		}
	}
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static _noreturn_ void child_exec(const struct serve_relay *rl, char *const argv[], int feed,
				  int devnull, pid_t parent)
{
	sigset_t none;

	/* The session's end is the child's: a SIGKILLed session leaves no orphan. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent) {
		_exit(127);
	}
	signal(SIGTERM, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	child_fds(rl, feed, devnull);
	execve(rl->client, argv, environ);
	_exit(127);
}

int serve_relay_child_spawn(struct serve_relay *rl, const struct msg_open *o, char *why,
			    size_t whylen)
{
	_cleanup_close_ int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct child_argv a = { .n = 0 };
	pid_t parent = getpid(), pid;
	int sv[2];

	if (devnull < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		int r = negerrno();

		snprintf(why, whylen, "relay feed: %s", strerror(-r));
		return r;
	}
	build_argv(&a, rl, o, sv[1]);
	pid = fork();
	if (pid == 0) {
		child_exec(rl, a.argv, sv[1], devnull, parent);
	}
	close(sv[1]);
	serve_relay_child_close_creds(rl);
	if (pid < 0 || fd_set_nonblock(sv[0], true) < 0) {
		int r = negerrno();

		close(sv[0]);
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		snprintf(why, whylen, "relay client %s: %s", rl->client, strerror(-r));
		return r;
	}
	rl->pid = pid;
	rl->sock = sv[0];
	return 0;
}

void serve_relay_child_reap(struct serve_relay *rl, int wait_ms, char *how, size_t howlen,
			    int *ret_exit)
{
	int status = 0;
	pid_t r;

	for (int waited = 0;; waited += 10) {
		r = waitpid(rl->pid, &status, WNOHANG);
		if (r != 0 || waited >= wait_ms) {
			break;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
	if (r == 0) {
		kill(rl->pid, SIGKILL);
		r = waitpid(rl->pid, &status, 0);
	}
	rl->pid = 0;
	how[0] = '\0';
	*ret_exit = EXIT_TRANSPORT;
	if (r < 0) {
		snprintf(how, howlen, "relay client lost: %s", strerror(errno));
	} else if (WIFSIGNALED(status)) {
		snprintf(how, howlen, "relay client killed by signal %d", WTERMSIG(status));
	} else if (WEXITSTATUS(status) != 0) {
		*ret_exit = WEXITSTATUS(status);
		snprintf(how, howlen, "relay client exited %d", WEXITSTATUS(status));
	} else {
		*ret_exit = EXIT_OK;
	}
}
