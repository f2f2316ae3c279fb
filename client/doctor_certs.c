/* SPDX-License-Identifier: MIT */
/*
 * rdmacp doctor: the certificates' expiry. This client's certificate and CA
 * (--cert, --ca, the config), and on a daemon's host the daemon's own
 * ('cert' and 'ca' of its rdmacpd.conf: the file named, else
 * /etc/rdmacp/rdmacpd.conf when there is one). An expired one is an error
 * (no transfer can work), one that expires within the daemon config's
 * 'cert warn days' (30 without one) a warning, each with its fix.
 */
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "certs.h"
#include "client.h"
#include "conffile.h"
#include "doctor.h"
#include "log.h"
#include "macro.h"
#include "parse.h"

/* What doctor takes from rdmacpd.conf's [global]. */
struct daemon_keys {
	char cert[4096], ca[4096];
	unsigned warn_days;
};

static int daemon_key(void *user, const char *section, const char *name, const char *value)
{
	struct daemon_keys *k = user;
	uint64_t v;

	if (strcasecmp(section, "global") != 0) {
		return 1;
	}
	if (!strcmp(name, "cert")) {
		snprintf(k->cert, sizeof(k->cert), "%s", value);
	} else if (!strcmp(name, "ca")) {
		snprintf(k->ca, sizeof(k->ca), "%s", value);
	} else if (!strcmp(name, "cert warn days") && parse_uint(value, 0, 3650, &v) >= 0) {
		k->warn_days = (unsigned)v;
	}
	return 1;
}

static void check_one(struct doctor *d, const char *what, const char *file, unsigned warn_days)
{
	struct doctor_cert *c;
	char esc[sizeof(c->e.subject) * 4];
	int r;

	if (!file[0] || d->ncerts == DOCTOR_MAX_CERTS) {
		return;
	}
	c = &d->certs[d->ncerts++];
	snprintf(c->what, sizeof(c->what), "%s", what);
	snprintf(c->file, sizeof(c->file), "%s", file);
	r = certs_file_expiry(file, &c->e);
	if (r < 0) {
		snprintf(c->error, sizeof(c->error), "%s",
			 r == -EBADMSG ? "no PEM certificate in it" : strerror(-r));
		return;
	}
	log_escape(c->e.subject, esc, sizeof(esc));
	if (c->e.expired) {
		doctor_problem(
		    d, true,
		    "renew it: rdmacp certs renew FILE (with the CA's directory), or ask "
		    "for a new one",
		    "%s %s (%s) expired on %s", what, file, esc, c->e.not_after);
	} else if (c->e.days_left < (int)warn_days) {
		doctor_problem(d, false,
			       "renew it before then: rdmacp certs renew FILE (then reload "
			       "rdmacpd if it is the daemon's)",
			       "%s %s (%s) expires in %d day%s, on %s", what, file, esc,
			       c->e.days_left, c->e.days_left == 1 ? "" : "s", c->e.not_after);
	}
}

/* The daemon's config: 0 and its keys, 1 when there is none to read, or -errno (a finding made). */
static int read_daemon_conf(struct doctor *d, const char *daemon_conf, struct daemon_keys *k)
{
	_cleanup_free_ char *text = NULL;
	char why[512];
	size_t len;
	int r;

	if (!daemon_conf) {
		daemon_conf = DOCTOR_DAEMON_CONFIG;
		if (access(daemon_conf, F_OK) < 0) {
			return 1; /* not a daemon's host */
		}
	}
	r = conffile_read(daemon_conf, &text, &len, why, sizeof(why));
	if (r < 0) {
		doctor_problem(d, false, "give the daemon's config: rdmacp doctor FILE",
			       "daemon config %s", why);
		return r;
	}
	if (ini_parse_string(text, daemon_key, k) != 0) {
		doctor_problem(d, false, "rdmacpd --check --config FILE says what is wrong",
			       "daemon config %s cannot be read", daemon_conf);
		return -EINVAL;
	}
	return 0;
}

void doctor_check_certs(struct doctor *d, const struct client_opts *o, const char *daemon_conf)
{
	struct daemon_keys k = { .warn_days = DOCTOR_CERT_WARN_DAYS };
	int r = read_daemon_conf(d, daemon_conf, &k);

	check_one(d, "client certificate", o->cert, k.warn_days);
	check_one(d, "CA certificate", o->ca, k.warn_days);
	if (r == 0) {
		check_one(d, "daemon certificate", k.cert, k.warn_days);
		if (strcmp(k.ca, o->ca) != 0) {
			check_one(d, "daemon CA certificate", k.ca, k.warn_days);
		}
	}
}
