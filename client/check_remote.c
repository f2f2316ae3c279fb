/* SPDX-License-Identifier: MIT */
/*
 * rdmacp check: the daemon's side, as its answer to LIST arrives (see
 * check.c). Nothing in it is trusted: names are checked as paths, a digest
 * must name a regular file of the batch just before it and come once, a
 * batch's attributes must come right after it, one record per entry in its
 * order, and what is held is capped (check_list_add).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "check.h"
#include "client.h"
#include "daemon_conn.h"
#include "exitcodes.h"
#include "fspath.h"
#include "log.h"

static int remote_files(struct daemon_conn *s, struct remote_list *rl, const struct msg_files *mf)
{
	char esc[4 * PROTO_MAX_PATH + 1];

	if (rl->attrs_due) {
		log_error("%s: protocol error: FILES without the attributes of the batch before",
			  s->rem->host);
		return EXIT_PROTOCOL;
	}
	rl->attrs_due = rl->want != 0;
	rl->batch_start = rl->list.n;
	for (size_t i = 0; i < mf->count; i++) {
		const struct proto_file *pf = &mf->files[i];
		struct check_entry *ce;
		int r;

		if (fspath_validate(pf->name) < 0) {
			log_error("%s: protocol error: listed a bad name '%s'", s->rem->host,
				  log_escape(pf->name, esc, sizeof(esc)));
			return EXIT_PROTOCOL;
		}
		r = check_list_add(&rl->list, pf->name, pf->link, &ce);
		if (r < 0) {
			log_error("%s: %s", s->rem->host,
				  r == -E2BIG ? "more entries than check compares"
					      : "out of memory");
			return EXIT_LOCAL_IO;
		}
		ce->ftype = pf->ftype;
		ce->mode = pf->mode;
		ce->size = pf->size;
		ce->mtime_sec = pf->mtime_sec;
		ce->mtime_nsec = pf->mtime_nsec;
		ce->uid = pf->uid;
		ce->gid = pf->gid;
		ce->id = pf->id;
	}
	return EXIT_OK;
}

/* Digests for the last batch: each for one of its regular files, once. */
static int remote_sums(struct daemon_conn *s, struct remote_list *rl, const struct msg_sums *ms)
{
	char esc[4 * PROTO_MAX_PATH + 1];

	for (size_t i = 0; i < ms->count; i++) {
		const struct proto_sum *ps = &ms->sums[i];
		struct check_entry *ce = NULL;

		for (size_t k = rl->batch_start; k < rl->list.n; k++) {
			if (rl->list.v[k].id == ps->id) {
				ce = &rl->list.v[k];
				break;
			}
		}
		if (!ce || ce->ftype != PROTO_FT_REG || ce->summed) {
			log_error("%s: protocol error: a digest for no listed file (id %" PRIu32
				  ")",
				  s->rem->host, ps->id);
			return EXIT_PROTOCOL;
		}
		ce->summed = true;
		ce->sum_status = ps->status;
		memcpy(ce->hash, ps->hash, HASH_LEN);
		if (ps->status != PERR_OK) {
			rl->errors++;
			log_error("%s: %s: could not be hashed there (%s)", s->rem->host,
				  log_escape_short(ce->name, esc, sizeof(esc)),
				  proto_err_name(ps->status));
		}
	}
	return EXIT_OK;
}

/* The LIST_ATTRS fields asked for and those sent agree (PRIVILEGED is the daemon's to add). */
static bool attrs_fields_ok(struct remote_list *rl, uint8_t fields)
{
	if ((fields & ~PROTO_LATTR_PRIVILEGED) != rl->want ||
	    (rl->fields != 0 && fields != rl->fields)) {
		return false;
	}
	rl->fields = fields;
	return true;
}

/* The attributes of the last batch: one record per entry, in its order. */
static int remote_attrs(struct daemon_conn *s, struct remote_list *rl,
			const struct msg_list_attrs *la)
{
	char esc[4 * PROTO_MAX_PATH + 1];

	if (!rl->attrs_due || !attrs_fields_ok(rl, la->fields) ||
	    la->count != rl->list.n - rl->batch_start) {
		log_error("%s: protocol error: attributes that are not the last batch's",
			  s->rem->host);
		return EXIT_PROTOCOL;
	}
	rl->attrs_due = false;
	for (size_t i = 0; i < la->count; i++) {
		const struct proto_entry_attrs *a = &la->ents[i];
		struct check_entry *ce = &rl->list.v[rl->batch_start + i];

		if (a->id != ce->id || (a->link_group && ce->ftype != PROTO_FT_REG)) {
			log_error("%s: protocol error: attributes for id %" PRIu32
				  " where the batch has %" PRIu32,
				  s->rem->host, a->id, ce->id);
			return EXIT_PROTOCOL;
		}
		ce->attr_status = a->status;
		memcpy(ce->attr_digest, a->digest, sizeof(ce->attr_digest));
		ce->link_group = a->link_group;
		if (a->status != PERR_OK) {
			rl->errors++;
			log_error("%s: %s: its attributes could not be read there (%s)",
				  s->rem->host, log_escape_short(ce->name, esc, sizeof(esc)),
				  proto_err_name(a->status));
		}
	}
	return EXIT_OK;
}

/* The answer to LIST: FILES (and SUMS) batches, ENTRY_FAILED, then END or ERROR. */
int check_receive_remote(struct daemon_conn *s, struct remote_list *rl)
{
	char esc[4 * PROTO_MAX_TEXT + 1];

	for (;;) {
		struct msg m;
		int r = chan_recv(&s->chan, &m, s->o->idle_timeout_s * 1000), rc;

		if (r < 0) {
			log_error("%s: control channel: %s", s->rem->host,
				  r == -EPIPE || r == -ECONNRESET ? "connection closed"
								  : strerror(-r));
			return r == -EPIPE || r == -ECONNRESET ? EXIT_CONNECT : EXIT_PROTOCOL;
		}
		if (rl->attrs_due && m.type != MSG_LIST_ATTRS && m.type != MSG_ERROR) {
			log_error("%s: protocol error: %s where a batch's attributes were due",
				  s->rem->host, proto_type_name(m.type));
			msg_clear(&m);
			return EXIT_PROTOCOL;
		}
		switch (m.type) {
		case MSG_END:
			return EXIT_OK;
		case MSG_ERROR:
			log_error("%s: %s", s->rem->host,
				  log_escape(m.u.error.text, esc, sizeof(esc)));
			return exit_for_perr(m.u.error.code);
		case MSG_FILES:
			rc = remote_files(s, rl, &m.u.files);
			msg_clear(&m);
			if (rc != EXIT_OK) {
				return rc;
			}
			continue;
		case MSG_LIST_ATTRS:
			rc = remote_attrs(s, rl, &m.u.list_attrs);
			msg_clear(&m);
			if (rc != EXIT_OK) {
				return rc;
			}
			continue;
		case MSG_SUMS:
			rc = remote_sums(s, rl, &m.u.sums);
			msg_clear(&m);
			if (rc != EXIT_OK) {
				return rc;
			}
			continue;
		case MSG_ENTRY_FAILED:
			rl->errors++;
			log_error("%s: %s: %s (remote)", s->rem->host,
				  log_escape_short(m.u.entry_failed.name, esc, 1200),
				  m.u.entry_failed.text);
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
