/* SPDX-License-Identifier: MIT */
/*
 * rdmacp certs init|issue|renew|revoke|show: a private CA and certificates in
 * one command, their second year (renewal, revocation), and a look at one.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <libgen.h>
#include <string.h>

#include "certs.h"
#include "client.h"
#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "opterr.h"
#include "parse.h"
#include "tls.h"

#define MAX_HOSTS 32
/* Certificates shown from one file (a CA bundle holds several). */
#define MAX_SHOWN 16

static int certs_usage(void)
{
	log_error("usage: rdmacp certs init DIR [--host NAME]... | "
		  "rdmacp certs issue DIR --client NAME [--days N] [--backdate N] | "
		  "rdmacp certs issue DIR --server --host NAME... [--days N] | "
		  "rdmacp certs renew FILE [--new-key] [--ca-dir DIR] [--days N] | "
		  "rdmacp certs revoke FILE|FINGERPRINT [--ca-dir DIR] | "
		  "rdmacp certs show FILE");
	return EXIT_USAGE;
}

/* An option getopt refused: what, the option meant (if one is close), the usage line. */
static int certs_usage_error(int c, char **argv, const struct option *opts)
{
	struct opterr_msg m;

	opterr_explain(c, optopt, optind, argv, opts, &m);
	log_error("%s", m.what);
	if (m.suggest[0]) {
		log_error("did you mean '%s'?", m.suggest);
	}
	return certs_usage();
}

static int parse_days(const char *s, int *ret)
{
	uint64_t v;
	int r = parse_uint(s, 0, 36500, &v);

	if (r < 0) {
		return r;
	}
	*ret = (int)v;
	return 0;
}

static void show_one(const struct certs_info *ci)
{
	char esc[4 * sizeof(ci->sans)], fp[2 * TLS_FINGERPRINT_LEN + 1];

	printf("subject:     %s\n", log_escape(ci->subject, esc, sizeof(esc)));
	printf("issuer:      %s%s\n", log_escape(ci->issuer, esc, sizeof(esc)),
	       ci->self_signed ? " (self-signed)" : "");
	printf("SANs:        %s\n", ci->sans[0] ? log_escape(ci->sans, esc, sizeof(esc)) : "none");
	printf("valid:       %s to %s%s\n", ci->not_before, ci->not_after,
	       ci->expired	   ? " (EXPIRED)"
	       : ci->not_yet_valid ? " (NOT YET VALID)"
				   : "");
	printf("CA:          %s\n", ci->is_ca ? "yes" : "no");
	tls_format_fingerprint(ci->sha256, fp);
	/* The form 'allow' and --pin take, as is. */
	printf("fingerprint: sha256:%s\n", fp);
}

/* rdmacp certs show FILE: each certificate in FILE. */
static int certs_show(const char *file)
{
	_cleanup_free_ struct certs_info *ci = calloc(MAX_SHOWN, sizeof(*ci));
	char esc[1024];
	int n;

	if (!ci) {
		log_error("out of memory");
		return EXIT_LOCAL_IO;
	}
	n = certs_show_file(file, ci, MAX_SHOWN);
	if (n < 0) {
		log_error("%s: %s", log_escape(file, esc, sizeof(esc)),
			  n == -EBADMSG ? "no PEM certificate in it" : strerror(-n));
		return n == -EBADMSG ? EXIT_CONFIG : EXIT_LOCAL_IO;
	}
	for (int i = 0; i < n; i++) {
		if (n > 1) {
			printf("%scertificate %d of %d%s:\n", i ? "\n" : "", i + 1, n,
			       n == MAX_SHOWN ? " or more" : "");
		}
		show_one(&ci[i]);
	}
	return EXIT_OK;
}

struct certs_args {
	const char *hosts[MAX_HOSTS];
	size_t nhosts;
	const char *client, *ca_dir;
	bool server, new_key;
	int days, backdate;
	const char *arg; /* DIR or FILE */
};

static int certs_init_cmd(const struct certs_args *a)
{
	int r;

	if (a->client || a->days || a->backdate || a->server || a->new_key || a->ca_dir) {
		return certs_usage();
	}
	r = certs_init(a->arg, a->hosts, a->nhosts);
	if (r < 0) {
		log_error("certs init %s: %s", a->arg,
			  r == -EEXIST	 ? "a CA already exists there (renew its certificates "
					   "with 'rdmacp certs renew', add hosts with 'rdmacp certs "
					   "issue --server')"
			  : r == -EINVAL ? "bad --host name"
					 : strerror(-r));
		return r == -EEXIST || r == -EINVAL ? EXIT_USAGE : EXIT_LOCAL_IO;
	}
	printf("created CA, server and client certificates in %s\n", a->arg);
	return EXIT_OK;
}

static int certs_issue_cmd(const struct certs_args *a)
{
	const char *name = a->server ? a->hosts[0] : a->client;
	int r;

	if (!!a->client == a->server || (a->server ? !a->nhosts : a->nhosts > 0) || a->new_key ||
	    a->ca_dir) {
		return certs_usage();
	}
	r = a->server ? certs_issue_server(a->arg, a->hosts, a->nhosts, a->days, a->backdate)
		      : certs_issue_client(a->arg, a->client, a->days, a->backdate);
	if (r < 0) {
		log_error("certs issue %s: %s", name,
			  r == -EEXIST	 ? "a key of that name exists"
			  : r != -EINVAL ? strerror(-r)
			  : a->server
			      ? "bad --host (a DNS name or an IP address; the first names the "
				"files: not an IPv6 address)"
			      : "bad name (letters, digits, . _ -)");
		return r == -EEXIST || r == -EINVAL ? EXIT_USAGE : EXIT_LOCAL_IO;
	}
	printf("created %s/%s.crt and %s/%s.key\n", a->arg, name, a->arg, name);
	return EXIT_OK;
}

/* A failure of renew or revoke: its words, and EXIT_CONFIG for files that are not what they should be. */
static int certs_failed(const char *verb, const char *what, int r)
{
	char esc[1024];
	const char *why = r == -ENOKEY	? "its key file is missing (renew with --new-key)"
			  : r == -EXDEV ? "not signed by this CA (give its directory with --ca-dir)"
			  : r == -EINVAL   ? "certificate, key or CA do not load or do not match"
			  : r == -EBADMSG  ? "not a PEM certificate, or a CRL not signed by this CA"
			  : r == -EALREADY ? "already revoked"
			  : r == -ENOENT && !strcmp(verb, "revoke")
			      ? "not found: no such file, no CA (ca.crt, ca.key) there, or a "
				"fingerprint not in the CA's index.txt (--ca-dir names the CA)"
			  : r == -ENOENT
			      ? "no such file, or no CA (ca.crt, ca.key) in its directory "
				"(--ca-dir names the CA)"
			      : strerror(-r);

	log_error("certs %s %s: %s", verb, log_escape(what, esc, sizeof(esc)), why);
	return r == -EIO || r == -ENOSPC || r == -EACCES || r == -EROFS ? EXIT_LOCAL_IO
	       : r == -EALREADY						? EXIT_USAGE
									: EXIT_CONFIG;
}

static int certs_renew_cmd(const struct certs_args *a)
{
	int r;

	if (a->client || a->server || a->nhosts || a->backdate) {
		return certs_usage();
	}
	r = certs_renew(a->arg, a->ca_dir, a->new_key, a->days);
	if (r < 0) {
		return certs_failed("renew", a->arg, r);
	}
	printf("renewed %s%s (the old %s kept as .old)\n", a->arg,
	       a->new_key ? " with a new key" : "", a->new_key ? "files" : "certificate");
	return EXIT_OK;
}

static int certs_revoke_cmd(const struct certs_args *a)
{
	char subject[512], esc[2048], dirbuf[4096];
	const char *ca_dir = a->ca_dir;
	uint8_t fp[TLS_FINGERPRINT_LEN];
	int r;

	if (a->client || a->server || a->nhosts || a->days || a->backdate || a->new_key) {
		return certs_usage();
	}
	if (!ca_dir && tls_parse_fingerprint(a->arg, fp) == 0) {
		log_error("certs revoke: a fingerprint needs --ca-dir DIR (the CA's directory)");
		return EXIT_USAGE;
	}
	if (!ca_dir) {
		snprintf(dirbuf, sizeof(dirbuf), "%s", a->arg);
		ca_dir = dirname(dirbuf);
	}
	r = certs_revoke(ca_dir, a->arg, subject, sizeof(subject));
	if (r < 0) {
		return certs_failed("revoke", a->arg, r);
	}
	printf("revoked %s: %s/crl.pem updated (copy it to each daemon's 'crl' file and "
	       "reload them)\n",
	       log_escape(subject, esc, sizeof(esc)), ca_dir);
	return EXIT_OK;
}

static int certs_show_cmd(const struct certs_args *a)
{
	if (a->client || a->days || a->backdate || a->nhosts || a->server || a->new_key ||
	    a->ca_dir) {
		return certs_usage();
	}
	return certs_show(a->arg);
}

static const struct {
	const char *verb;
	int (*run)(const struct certs_args *a);
} certs_verbs[] = {
	{ "init", certs_init_cmd },	{ "issue", certs_issue_cmd }, { "renew", certs_renew_cmd },
	{ "revoke", certs_revoke_cmd }, { "show", certs_show_cmd },
};

static int parse_certs_opt(int c, struct certs_args *a)
{
	switch (c) {
	case 'H':
		if (a->nhosts == MAX_HOSTS) {
			log_error("at most %d --host names", MAX_HOSTS);
			return EXIT_USAGE;
		}
		a->hosts[a->nhosts++] = optarg;
		return 0;
	case 'c':
		a->client = optarg;
		return 0;
	case 's':
		a->server = true;
		return 0;
	case 'n':
		a->new_key = true;
		return 0;
	case 'C':
		a->ca_dir = optarg;
		return 0;
	case 'd':
	case 'b':
		if (parse_days(optarg, c == 'd' ? &a->days : &a->backdate) < 0) {
			log_error("bad number of days '%s'", optarg);
			return EXIT_USAGE;
		}
		return 0;
	default:
		return certs_usage();
	}
}

int cmd_certs(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "client", required_argument, NULL, 'c' },
		{ "server", no_argument, NULL, 's' },
		{ "new-key", no_argument, NULL, 'n' },
		{ "ca-dir", required_argument, NULL, 'C' },
		{ "days", required_argument, NULL, 'd' },
		{ "backdate", required_argument, NULL, 'b' },
		{ 0 },
	};
	struct certs_args a = { 0 };
	int c, r;

	/* Options anywhere after "certs" (getopt moves VERB and DIR to the end). */
	optind = 0;
	opterr = 0; /* certs_usage_error() says it, as rdmacp's own options do */
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (c == '?' || c == ':') {
			return certs_usage_error(c, argv, opts);
		}
		r = parse_certs_opt(c, &a);
		if (r != 0) {
			return r;
		}
	}
	if (argc - optind != 2) {
		return certs_usage();
	}
	a.arg = argv[optind + 1];
	for (size_t i = 0; i < ARRAY_SIZE(certs_verbs); i++) {
		if (!strcmp(argv[optind], certs_verbs[i].verb)) {
			return certs_verbs[i].run(&a);
		}
	}
	return certs_usage();
}
