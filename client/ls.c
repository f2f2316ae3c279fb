/* SPDX-License-Identifier: MIT */
/*
 * rdmacp ls: the modules a daemon lets this client use (`rsync host::`), or
 * the entries under HOST:MODULE/PATH (`rsync host::mod/`, `ls -l`). Nothing
 * the daemon sends is trusted: the codec caps every batch, names are checked
 * as paths and escaped when printed, and a message that does not belong to
 * the answer ends it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "daemon_conn.h"
#include "exitcodes.h"
#include "fspath.h"
#include "log.h"
#include "output.h"

/* HOST, [V6], HOST: or HOST:MODULE/PATH (and rsync's HOST:: and HOST::MODULE/PATH). */
static int parse_ls_target(const char *arg, struct remote *ret)
{
	size_t n;
	int r = parse_remote(arg, ret);

	if (r == 1) {
		if (ret->path[0] == ':') {
			memmove(ret->path, ret->path + 1, strlen(ret->path));
		}
		return 0;
	}
	if (r < 0 || strlen(arg) >= sizeof(ret->host)) {
		return -EINVAL;
	}
	snprintf(ret->host, sizeof(ret->host), "%s", arg);
	ret->path[0] = '\0';
	n = strlen(ret->host);
	if (ret->host[0] == '[') {
		if (n < 3 || ret->host[n - 1] != ']') {
			return -EINVAL;
		}
		memmove(ret->host, ret->host + 1, n - 2);
		ret->host[n - 2] = '\0';
	}
	return ret->host[0] ? 0 : -EINVAL;
}

/*
 * Entries are printed sorted by name, as ls does; the daemon sends them in
 * directory order. What the client holds for that is capped: past
 * LS_SORT_MAX entries, the rest is printed as it comes.
 */
#define LS_SORT_MAX 100000

struct ls_sorted {
	struct proto_file *v;
	size_t n, cap;
	bool streaming; /* over the cap: printed as received */
};

static void ls_sorted_free(struct ls_sorted *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].link);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct proto_file *)a)->name, ((const struct proto_file *)b)->name);
}

static void ls_sorted_flush(struct ls_sorted *l, struct output *out, unsigned eflags)
{
	if (l->n > 1) {
		qsort(l->v, l->n, sizeof(*l->v), cmp_entry);
	}
	for (size_t i = 0; i < l->n; i++) {
		output_entry(out, &l->v[i], eflags);
	}
	ls_sorted_free(l);
}

/* Keep f (its strings are taken), or print it when over the cap. */
static int ls_sorted_add(struct ls_sorted *l, struct output *out, struct proto_file *f,
			 unsigned eflags)
{
	if (!l->streaming && l->n == LS_SORT_MAX) {
		log_warning("more than %d entries: the rest is listed unsorted", LS_SORT_MAX);
		ls_sorted_flush(l, out, eflags);
		l->streaming = true;
	}
	if (l->streaming) {
		output_entry(out, f, eflags);
		return 0;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		struct proto_file *v = reallocarray(l->v, cap, sizeof(*v));
		if (!v) {
			return -ENOMEM;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = *f;
	f->name = f->link = NULL;
	return 0;
}

static const char *module_access(uint8_t flags)
{
	return flags & PROTO_MOD_READ_ONLY    ? "read only"
	       : flags & PROTO_MOD_WRITE_ONLY ? "write only"
					      : "read/write";
}

/* The answer to LIST: MODULES (want_modules) or FILES batches, then END. */
static int receive_listing(struct daemon_conn *s, struct output *out, bool want_modules,
			   struct ls_sorted *sorted)
{
	char esc[4 * PROTO_MAX_TEXT + 1];
	unsigned eflags = (s->o->long_listing ? OUTPUT_ENTRY_LONG : 0) |
			  (s->hello.caps & PROTO_CAP_LIST_OWNERS ? OUTPUT_ENTRY_OWNERS : 0);

	for (;;) {
		struct msg m;
		int r = chan_recv(&s->chan, &m, s->o->idle_timeout_s * 1000);

		if (r < 0) {
			log_error("%s: control channel: %s", s->rem->host,
				  r == -EPIPE || r == -ECONNRESET ? "connection closed"
								  : strerror(-r));
			return r == -EPIPE || r == -ECONNRESET ? EXIT_CONNECT : EXIT_PROTOCOL;
		}
		switch (m.type) {
		case MSG_END:
			ls_sorted_flush(sorted, out, eflags);
			fflush(stdout);
			return EXIT_OK;
		case MSG_ERROR:
			/* What was listed before the refusal is shown, then why it stopped. */
			ls_sorted_flush(sorted, out, eflags);
			fflush(stdout);
			log_error("%s: %s", s->rem->host,
				  log_escape(m.u.error.text, esc, sizeof(esc)));
			return exit_for_perr(m.u.error.code);
		case MSG_MODULES:
			if (!want_modules) {
				break;
			}
			for (size_t i = 0; i < m.u.modules.count; i++) {
				const struct proto_module *pm = &m.u.modules.mods[i];

				output_module(out, pm->name, module_access(pm->flags),
					      !(pm->flags & PROTO_MOD_UNAVAILABLE), pm->comment);
			}
			msg_clear(&m);
			continue;
		case MSG_FILES:
			if (want_modules) {
				break;
			}
			for (size_t i = 0; i < m.u.files.count; i++) {
				if (fspath_validate(m.u.files.files[i].name) < 0) {
					log_error(
					    "%s: protocol error: listed a bad name '%s'",
					    s->rem->host,
					    log_escape(m.u.files.files[i].name, esc, sizeof(esc)));
					msg_clear(&m);
					return EXIT_PROTOCOL;
				}
				if (ls_sorted_add(sorted, out, &m.u.files.files[i], eflags) < 0) {
					log_error("out of memory");
					msg_clear(&m);
					return EXIT_LOCAL_IO;
				}
			}
			msg_clear(&m);
			continue;
		default:
			break;
		}
		log_error("%s: protocol error: unexpected %s in a listing", s->rem->host,
			  proto_type_name(m.type));
		msg_clear(&m);
		return EXIT_PROTOCOL;
	}
}

int cmd_ls(struct client_opts *o, char **args, int nargs)
{
	struct remote rem = { 0 };
	struct daemon_conn s = { .o = o, .rem = &rem };
	struct output out;
	struct msg m = { .type = MSG_LIST };
	struct ls_sorted sorted = { 0 };
	int rc;

	if (nargs != 1 || parse_ls_target(args[0], &rem) < 0) {
		log_error("usage: rdmacp ls [-l] [-r] [--json] HOST[:MODULE/PATH]");
		return EXIT_USAGE;
	}
	output_init(&out, o->json, 0, o->verbose);
	rc = daemon_conn_open_waiting(&s, NULL, NULL, NULL);
	if (rc != 0) {
		daemon_conn_close(&s, false);
		return rc;
	}
	/* An older daemon would answer LIST with ERROR PROTOCOL "unknown message type". */
	if (!(s.hello.caps & PROTO_CAP_LIST)) {
		log_error(
		    "%s: this rdmacpd cannot list (it does not announce the LIST capability): "
		    "upgrade it",
		    rem.host);
		daemon_conn_close(&s, true);
		return EXIT_VERSION;
	}
	m.u.list.flags = o->recursive ? PROTO_LIST_RECURSIVE : 0;
	snprintf(m.u.list.path, sizeof(m.u.list.path), "%s", rem.path);
	if (chan_send(&s.chan, &m) < 0) {
		log_error("%s: control channel write failed", rem.host);
		daemon_conn_close(&s, false);
		return EXIT_CONNECT;
	}
	rc = receive_listing(&s, &out, rem.path[0] == '\0', &sorted);
	ls_sorted_free(&sorted);
	daemon_conn_close(&s, rc == EXIT_OK);
	return rc;
}
