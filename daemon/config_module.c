/* SPDX-License-Identifier: MIT */
/*
 * rdmacpd.conf's module keys (config_parse.h): the path, who may use the
 * module and how (allow, deny, read only, write only), who its sessions run as,
 * what they keep (set-id bits, owners), block devices, limits, the lanes'
 * encryption and traffic class, relays (relay, relay to, relay from). One handler per key, and the table the
 * loader (config.c) dispatches through.
 */
#include "config_parse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "modroot.h"

static int m_path(struct parse_state *ps, const char *key, const char *value)
{
	struct module *m = config_cur_module(ps);
	int r;

	if (value[0] != '/') {
		return fail(ps, "'%s' must be an absolute path, not '%s'", key, ESC(value));
	}
	if (strlen(value) >= sizeof(m->path)) {
		return fail(ps, "'%s' is too long", key);
	}
	strcpy(m->path, value);
	ps->path_line[ps->cfg->nmodules - 1] = ps->line;
	/*
	 * Resolved as every OPEN will resolve it (no symlink anywhere), and its
	 * identity kept: a directory swapped in later is refused (modroot.c).
	 * A path that is not there, or not a directory, leaves the module
	 * unavailable until it appears (a file system not mounted yet): the
	 * supervisor says so and serves the others. A symlink is a mistake to
	 * fix now.
	 */
	r = modroot_pin(m);
	if (r == -ELOOP) {
		return fail(ps, "module path %s has a symlink in it (write the real path)",
			    ESC(value));
	}
	return 0;
}

static int check_ro_wo(struct parse_state *ps)
{
	const struct module *m = config_cur_module(ps);

	/* Both would make a module nobody can use: surely a typo. */
	if (m->read_only && m->write_only) {
		return fail(ps, "'read only' and 'write only' are both set in [%s]", m->name);
	}
	return 0;
}

static int m_read_only(struct parse_state *ps, const char *key, const char *value)
{
	int r = config_set_bool(ps, key, value, &config_cur_module(ps)->read_only);

	return r < 0 ? r : check_ro_wo(ps);
}

static int m_write_only(struct parse_state *ps, const char *key, const char *value)
{
	int r = config_set_bool(ps, key, value, &config_cur_module(ps)->write_only);

	return r < 0 ? r : check_ro_wo(ps);
}

static int add_allow(struct parse_state *ps, const char *key, const char *tok)
{
	struct module *m = config_cur_module(ps);

	return config_add_allow_rule(ps, key, tok, m->allow, &m->nallow, m->name);
}

static int m_allow(struct parse_state *ps, const char *key, const char *value)
{
	return config_for_each_entry(ps, key, value, add_allow);
}

static int add_deny(struct parse_state *ps, const char *key, const char *tok)
{
	struct module *m = config_cur_module(ps);

	return config_add_allow_rule(ps, key, tok, m->deny, &m->ndeny, m->name);
}

static int m_deny(struct parse_state *ps, const char *key, const char *value)
{
	return config_for_each_entry(ps, key, value, add_deny);
}

static int m_uid(struct parse_state *ps, const char *key, const char *value)
{
	struct module *m = config_cur_module(ps);
	int r = config_resolve_user(value, &m->uid);

	if (r < 0) {
		return fail(ps, "bad '%s' '%s': %s", key, ESC(value),
			    r == -ESRCH ? "no such user" : strerror(-r));
	}
	m->have_uid = true;
	return 0;
}

static int m_gid(struct parse_state *ps, const char *key, const char *value)
{
	struct module *m = config_cur_module(ps);
	int r = config_resolve_group(value, &m->gid);

	if (r < 0) {
		return fail(ps, "bad '%s' '%s': %s", key, ESC(value),
			    r == -ESRCH ? "no such group" : strerror(-r));
	}
	m->have_gid = true;
	return 0;
}

static int m_keep_setid(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_bool(ps, key, value, &config_cur_module(ps)->keep_setid);
}

static int m_preserve_owner(struct parse_state *ps, const char *key, const char *value)
{
	ps->owner_line = ps->line;
	return config_set_bool(ps, key, value, &config_cur_module(ps)->preserve_owner);
}

static int m_devices(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_bool(ps, key, value, &config_cur_module(ps)->devices);
}

static int m_max_file_size(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_limit(ps, key, value, &config_cur_module(ps)->max_file_size);
}

static int m_max_session_bytes(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_limit(ps, key, value, &config_cur_module(ps)->max_session_bytes);
}

static int m_max_files(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_uint(ps, key, value, 1, UINT32_MAX, &config_cur_module(ps)->max_files);
}

static int m_max_connections(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_uint(ps, key, value, 1, 65536, &config_cur_module(ps)->max_connections);
}

static int m_encryption(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_encryption(ps, key, value, &config_cur_module(ps)->encryption);
}

static int m_tos(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_tos(ps, key, value, &config_cur_module(ps)->tos);
}

/* Shown to the clients the module allows, in `rdmacp ls HOST`. */
static int m_comment(struct parse_state *ps, const char *key, const char *value)
{
	struct module *m = config_cur_module(ps);

	if (strlen(value) >= sizeof(m->comment)) {
		return fail(ps, "'%s' is too long (at most %zu bytes)", key,
			    sizeof(m->comment) - 1);
	}
	snprintf(m->comment, sizeof(m->comment), "%s", value);
	return 0;
}

static int m_relay(struct parse_state *ps, const char *key, const char *value)
{
	return config_set_bool(ps, key, value, &config_cur_module(ps)->relay);
}

static int add_relay_to(struct parse_state *ps, const char *key, const char *tok)
{
	struct module *m = config_cur_module(ps);

	return config_add_host_pattern(ps, key, tok, m->relay_to, &m->nrelay_to, m->name);
}

static int m_relay_to(struct parse_state *ps, const char *key, const char *value)
{
	return config_for_each_entry(ps, key, value, add_relay_to);
}

static int add_relay_from(struct parse_state *ps, const char *key, const char *tok)
{
	struct module *m = config_cur_module(ps);

	return config_add_allow_rule(ps, key, tok, m->relay_from, &m->nrelay_from, m->name);
}

static int m_relay_from(struct parse_state *ps, const char *key, const char *value)
{
	return config_for_each_entry(ps, key, value, add_relay_from);
}

const struct key_handler config_module_keys[] = {
	{ "path", false, m_path },
	{ "read only", false, m_read_only },
	{ "write only", false, m_write_only },
	{ "allow", true, m_allow },
	{ "uid", false, m_uid },
	{ "gid", false, m_gid },
	{ "keep setid", false, m_keep_setid },
	{ "preserve owner", false, m_preserve_owner },
	{ "comment", false, m_comment },
	{ "max file size", false, m_max_file_size },
	{ "max session bytes", false, m_max_session_bytes },
	{ "max files per session", false, m_max_files },
	{ "max connections", false, m_max_connections },
	{ "devices", false, m_devices },
	{ "encryption", false, m_encryption },
	{ "tos", false, m_tos },
	{ "deny", true, m_deny },
	{ "relay", false, m_relay },
	{ "relay to", true, m_relay_to },
	{ "relay from", true, m_relay_from },
};

const size_t config_nmodule_keys = ARRAY_SIZE(config_module_keys);
_Static_assert(ARRAY_SIZE(config_module_keys) <= 32, "'seen' is a 32-bit mask");
