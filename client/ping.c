/* SPDX-License-Identifier: MIT */
/* rdmacp ping HOST: connect, TLS, HELLO, and what the daemon and its certificate say. */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "client.h"
#include "daemon_conn.h"
#include "exitcodes.h"
#include "log.h"
#include "tls.h"

int cmd_ping(struct client_opts *o, char **args, int nargs)
{
	struct remote rem = { 0 };
	struct daemon_conn s = { .o = o, .rem = &rem };
	double t0, t1;
	uint8_t fp[TLS_FINGERPRINT_LEN];
	char fph[65], esc[256], cn[1024];
	int r;

	if (nargs != 1 || strlen(args[0]) >= sizeof(rem.host)) {
		log_error("usage: rdmacp ping HOST");
		return EXIT_USAGE;
	}
	snprintf(rem.host, sizeof(rem.host), "%s", args[0]);
	if (rem.host[0] == '[') {
		size_t n = strlen(rem.host);
		if (n < 3 || rem.host[n - 1] != ']') {
			log_error("bad host '%s'", args[0]);
			return EXIT_USAGE;
		}
		memmove(rem.host, rem.host + 1, n - 2);
		rem.host[n - 2] = '\0';
	}
	t0 = now_seconds();
	r = daemon_conn_open(&s);
	if (r == 0) {
		t1 = now_seconds();
		tls_peer_fingerprint(s.tls, fp);
		tls_format_fingerprint(fp, fph);
		printf(
		    "%s: %s, protocol %d, TLS 1.3, server certificate CN=%s sha256:%s, %.1f ms\n",
		    rem.host, log_escape(s.hello.software, esc, sizeof(esc)), s.version,
		    log_escape(tls_peer_cn(s.tls), cn, sizeof(cn)), fph, (t1 - t0) * 1e3);
	}
	daemon_conn_close(&s, r == 0);
	return r;
}
