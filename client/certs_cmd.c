/* SPDX-License-Identifier: MIT */
/* rdmacp certs init|issue|show: a private CA and certificates in one command, and a look at one. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
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

int cmd_certs(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "client", required_argument, NULL, 'c' },
		{ "days", required_argument, NULL, 'd' },
		{ "backdate", required_argument, NULL, 'b' },
		{ 0 },
	};
	const char *hosts[MAX_HOSTS];
	const char *client = NULL, *verb, *dir;
	size_t nhosts = 0;
	int days = 0, backdate = 0, c, r;

	/* Options anywhere after "certs" (getopt moves VERB and DIR to the end). */
	optind = 0;
	opterr = 0; /* certs_usage_error() says it, as rdmacp's own options do */
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			if (nhosts == MAX_HOSTS) {
				log_error("at most %d --host names", MAX_HOSTS);
				return EXIT_USAGE;
			}
			hosts[nhosts++] = optarg;
			break;
		case 'c':
			client = optarg;
			break;
		case 'd':
		case 'b':
			if (parse_days(optarg, c == 'd' ? &days : &backdate) < 0) {
				log_error("bad number of days '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		default:
			return certs_usage_error(c, argv, opts);
		}
	}
	if (argc - optind != 2) {
		return certs_usage();
	}
	verb = argv[optind];
	dir = argv[optind + 1];
	if (!strcmp(verb, "show")) {
		if (client || days || backdate || nhosts) {
			return certs_usage();
		}
		return certs_show(dir);
	}
	if (!strcmp(verb, "init")) {
		if (client || days || backdate) {
			return certs_usage();
		}
		r = certs_init(dir, hosts, nhosts);
		if (r < 0) {
			log_error("certs init %s: %s", dir,
				  r == -EEXIST ? "a CA already exists there" : strerror(-r));
			return r == -EEXIST ? EXIT_USAGE : EXIT_LOCAL_IO;
		}
		printf("created CA, server and client certificates in %s\n", dir);
		return EXIT_OK;
	}
	if (!strcmp(verb, "issue")) {
		if (!client || nhosts) {
			return certs_usage();
		}
		r = certs_issue_client(dir, client, days, backdate);
		if (r < 0) {
			log_error("certs issue %s: %s", client,
				  r == -EEXIST	 ? "a key of that name exists"
				  : r == -EINVAL ? "bad name (letters, digits, . _ -)"
						 : strerror(-r));
			return r == -EEXIST || r == -EINVAL ? EXIT_USAGE : EXIT_LOCAL_IO;
		}
		printf("created %s/%s.crt and %s/%s.key\n", dir, client, dir, client);
		return EXIT_OK;
	}
	return certs_usage();
}
