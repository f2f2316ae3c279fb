/* SPDX-License-Identifier: MIT */
/*
 * The configuration as the supervisor holds it (supervisor.h): loaded with
 * its TLS credentials, looked over (--check, and at each start and reload),
 * and reloaded at SIGHUP for new connections; the sessions running keep the
 * copy they forked with. Modules missing at load are looked for again
 * before each new session (supervisor_find_modules). The certificate's
 * expiry is looked at with each.
 */
#include "supervisor.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "certs.h"
#include "clock.h"
#include "log.h"
#include "modcheck.h"
#include "modroot.h"
#include "parse.h"
#include "privs.h"
#include "config_relaycheck.h"
#include "serve.h"
#include "session_table.h"
#include "tls.h"
#include "windows_check.h"

static int load_tls(const struct daemon_config *cfg, struct tls_ctx **ret)
{
	struct tls_config tc = {
		.server = true,
		.cert_file = cfg->cert,
		.key_file = cfg->key,
		.ca_file = cfg->ca,
		.crl_file = cfg->crl,
	};
	int r = tls_ctx_new(&tc, ret);

	if (r < 0) {
		log_error_errno(r,
				"%s: cannot load TLS credentials (cert %s, key %s, ca %s): %m: %s",
				cfg->path, cfg->cert, cfg->key, cfg->ca, tls_last_error());
	}
	return r;
}

int supervisor_load(const char *file, struct daemon_config **ret_cfg, struct tls_ctx **ret_tls)
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

void supervisor_apply_log_level(const struct daemon *d)
{
	log_set_max_level(d->verbose ? LOG_DEBUG : d->cfg->log_level);
}

/*
 * Can sessions switch to their modules' users? And do those that are not
 * root get RLIMIT_MEMLOCK, or keep CAP_IPC_LOCK (privs.h)?
 */
void supervisor_check_memlock(const struct daemon_config *cfg)
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

static void warn_line(void *ud, const char *text)
{
	(void)ud;
	log_warning("%s", text);
}

/*
 * Modules that export the kernel or the whole host (modcheck.c). Logged at
 * --check, and again at start and on each reload: a SIGHUP runs no --check.
 */
void supervisor_system_path_warnings(const struct daemon_config *cfg)
{
	for (size_t i = 0; i < cfg->nmodules; i++) {
		modcheck_system_path(&cfg->modules[i], warn_line, NULL);
	}
}

void supervisor_missing_module_warnings(const struct daemon_config *cfg)
{
	for (size_t i = 0; i < cfg->nmodules; i++) {
		const struct module *m = &cfg->modules[i];

		if (m->root_known) {
			continue;
		}
		log_warning("module [%s]: path %s: %s: the module is unavailable until it is "
			    "there (rdmacpd looks again at each connection; the other modules are "
			    "served)",
			    m->name, m->path, modroot_missing_why(m));
	}
}

void supervisor_find_modules(struct daemon *d)
{
	for (size_t i = 0; i < d->cfg->nmodules; i++) {
		struct module *m = &d->cfg->modules[i];

		if (m->root_known || modroot_pin(m) < 0) {
			continue;
		}
		log_notice("module [%s]: %s is there now: serving it", m->name, m->path);
	}
}

/*
 * --check: what loads but deserves a look. Modules whose directory is
 * missing (unavailable until it appears); module paths another user could
 * swap, that export the kernel, or that the module's user can't write
 * (modcheck.c); modules a daemon that is not root can't serve; relay keys
 * that cannot work as written (config_relaycheck.c).
 */
void supervisor_check_warnings(const struct daemon_config *cfg)
{
	supervisor_missing_module_warnings(cfg);
	supervisor_system_path_warnings(cfg);
	supervisor_cert_expiry(cfg, NULL, 0);
	relaycheck_config(cfg, warn_line, NULL);
	for (size_t i = 0; i < cfg->nmodules; i++) {
		const struct module *m = &cfg->modules[i];

		modcheck_module(m, warn_line, NULL);
		modcheck_writable(m, warn_line, NULL);
		if (geteuid() != 0 && (m->run_uid != geteuid() || m->run_gid != getegid())) {
			log_warning("module [%s]: wants uid %u gid %u, but rdmacpd is not root: "
				    "it will refuse this module",
				    m->name, (unsigned)m->run_uid, (unsigned)m->run_gid);
		}
	}
}

/* One certificate file's expiry, logged when due. */
static void log_expiry(const struct daemon_config *cfg, const char *what, const char *file,
		       struct certs_expiry *e)
{
	char esc[sizeof(e->subject) * 4];
	int r = certs_file_expiry(file, e);

	if (r < 0) {
		log_warning("%s %s: cannot read when it expires: %s", what, file,
			    r == -EBADMSG ? "no PEM certificate in it" : strerror(-r));
		e->subject[0] = '\0';
		return;
	}
	log_escape(e->subject, esc, sizeof(esc));
	if (e->expired) {
		log_error("%s %s (%s) expired on %s: renew it (rdmacp certs renew) and reload",
			  what, file, esc, e->not_after);
	} else if (cfg->cert_warn_days && e->days_left < (int)cfg->cert_warn_days) {
		log_warning("%s %s (%s) expires in %d day%s, on %s: renew it (rdmacp certs renew) "
			    "and reload ('cert warn days' is %u)",
			    what, file, esc, e->days_left, e->days_left == 1 ? "" : "s",
			    e->not_after, cfg->cert_warn_days);
	}
}

void supervisor_cert_expiry(const struct daemon_config *cfg, char *ret_text, size_t len)
{
	struct certs_expiry e;
	char esc[sizeof(e.subject) * 4];

	log_expiry(cfg, "certificate", cfg->cert, &e);
	if (ret_text && len) {
		ret_text[0] = '\0';
		if (e.subject[0]) {
			snprintf(ret_text, len, "certificate %s expires %s",
				 log_escape(e.subject, esc, sizeof(esc)), e.not_after);
		}
	}
	log_expiry(cfg, "CA certificate", cfg->ca, &e);
}

uint64_t supervisor_next_cert_check_ms(void)
{
	const char *e = getenv("RDMACP_TEST_CERT_CHECK_MS");
	uint64_t ms = CERT_CHECK_INTERVAL_MS;

	if (e && parse_uint(e, 1, CERT_CHECK_INTERVAL_MS, &ms) < 0) {
		ms = CERT_CHECK_INTERVAL_MS;
	}
	return (uint64_t)now_ms() + ms;
}

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

void supervisor_reload(struct daemon *d)
{
	struct daemon_config *cfg;
	struct tls_ctx *tls;
	int r;

	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64, (uint64_t)now_ms() * 1000);
	r = supervisor_load(d->config_file, &cfg, &tls);
	if (r < 0) {
		log_error("reload failed, keeping the old configuration");
		goto done;
	}
	r = children_grow(d, cfg->max_connections);
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
	supervisor_apply_log_level(d);
	supervisor_missing_module_warnings(cfg);
	supervisor_system_path_warnings(cfg);
	supervisor_check_memlock(cfg);
	windows_table_refresh(windows_table_daemon());
	supervisor_cert_expiry(cfg, NULL, 0);
	d->next_cert_check_ms = supervisor_next_cert_check_ms();
	log_info("reloaded %s", d->config_file);
done:
	sd_notify(0, "READY=1");
	children_notify_status(d);
}
