/* SPDX-License-Identifier: MIT */
/*
 * -X/-A, the sender's half (engine_xattr.c has the feature and the
 * receiver's): an entry's attributes read from its open file or directory
 * and sent in one XATTRS message.
 */
#include "engine-internal.h"
#include "engine_xattr.h"
#include "hello.h"

#include <sys/xattr.h>

/* Is name one this session carries (-X: user, security, trusted; -A: the two ACLs)? */
bool xattr_wanted(const struct engine *e, const char *name)
{
	bool acl = strncmp(name, "system.", 7) == 0;

	if (!proto_xattr_name_ok(name)) {
		return false;
	}
	return acl ? (e->p->open_flags & PROTO_OPEN_ACLS) != 0
		   : (e->p->open_flags & PROTO_OPEN_XATTRS) != 0;
}

/* Entries there already are brought in line (both ends know it; never in a probe). */
bool xattr_sync_on(const struct engine *e)
{
	return (e->p->open_flags & (PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS)) &&
	       (e->p->peer_caps & PROTO_CAP_ITEMIZE) && !engine_probe(e);
}

/*
 * May a kept entry of type ftype be answered with a wait (PROTO_ITEM_WAIT),
 * its attributes compared first: a regular file with the peer's
 * PROTO_CAP_KEPT_ITEMS; a directory with PROTO_CAP_DIR_ITEMS too, on both
 * ends. Both ends ask this, and the sender whether to send a directory's
 * XATTRS unread.
 */
bool xattr_kept_waits(const struct engine *e, uint8_t ftype)
{
	const uint64_t dir = PROTO_CAP_KEPT_ITEMS | PROTO_CAP_DIR_ITEMS;

	if (!xattr_sync_on(e)) {
		return false;
	}
	if (ftype == PROTO_FT_REG) {
		return (e->p->peer_caps & PROTO_CAP_KEPT_ITEMS) != 0;
	}
	return ftype == PROTO_FT_DIR && (e->p->peer_caps & hello_local_caps() & dir) == dir;
}

/* A directory's XATTRS unread (PROTO_CAP_DIR_ITEMS): none could be read. */
static int tx_xattrs_unread(struct engine *e, uint32_t id)
{
	struct msg m = { .type = MSG_XATTRS };
	int r;

	m.u.xattrs.id = id;
	m.u.xattrs.unread = true;
	r = chan_queue(e->p->chan, &m);
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/*
 * The values of the n wanted names of list (len bytes) into mx, each read
 * into val, then kept at its size: at most a frame's worth in all. 0 with
 * *ret_code PERR_OK or an entry's failure (text says why); -errno when the
 * session fails.
 */
static int tx_xattr_values(struct engine *e, int fd, char *list, ssize_t len, uint8_t *val,
			   size_t n, struct msg_xattrs *mx, uint32_t *ret_code, char *text,
			   size_t textlen)
{
	size_t total = 4 + 2;
	uint32_t code = PERR_OK;
	int r = 0;

	for (char *p = list; p < list + len && code == PERR_OK; p += strlen(p) + 1) {
		struct proto_xattr *a = &mx->x[mx->count];
		ssize_t vlen;

		if (!xattr_wanted(e, p) || mx->count >= n) {
			continue;
		}
		vlen = fgetxattr(fd, p, val, PROTO_MAX_XATTR_VALUE);
		if (vlen < 0 && errno == ENODATA) {
			continue; /* gone since it was listed */
		}
		if (vlen < 0) {
			int err = negerrno();

			snprintf(text, textlen, "read extended attribute %.100s: %s", p,
				 strerror(-err));
			code = errno_to_perr(err);
			break;
		}
		total += 2 + strlen(p) + 4 + (size_t)vlen;
		if (total > PROTO_MAX_PAYLOAD) {
			snprintf(text, textlen, "extended attributes over %u bytes in all",
				 PROTO_MAX_PAYLOAD);
			code = PERR_PERMISSION;
			break;
		}
		a->value = malloc(vlen ? (size_t)vlen : 1);
		if (!a->value) {
			r = engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
			break;
		}
		memcpy(a->value, val, (size_t)vlen);
		a->name = p;
		a->len = (uint32_t)vlen;
		mx->count++;
	}
	*ret_code = code;
	return r;
}

/*
 * The attributes of the entry open as fd, for id, in one XATTRS message
 * (none: nothing sent). Returns 0, PERR_* > 0 for a failure of that entry
 * (text says why), or -errno when the session fails.
 */
int xattr_tx_send(struct engine *e, uint32_t id, int fd, bool always, char *text, size_t textlen)
{
	_cleanup_free_ char *list = NULL;
	_cleanup_free_ uint8_t *val = NULL;
	struct proto_xattr *x = NULL;
	struct msg m = { .type = MSG_XATTRS };
	size_t n = 0;
	ssize_t len;
	uint32_t code = PERR_OK;
	int r = 0;

	if (!(e->p->open_flags & (PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS))) {
		return 0;
	}
	list = malloc(XATTR_LIST_MAX);
	val = malloc(PROTO_MAX_XATTR_VALUE);
	if (!list || !val) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	len = flistxattr(fd, list, XATTR_LIST_MAX);
	if (len < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP)) {
		len = 0; /* a file system without them: there are none */
	}
	if (len < 0) {
		r = negerrno();
		snprintf(text, textlen, "list extended attributes: %s", strerror(-r));
		return (int)errno_to_perr(r);
	}
	for (char *p = list; p < list + len; p += strlen(p) + 1) {
		n += xattr_wanted(e, p);
	}
	if (n == 0 && !always) {
		return 0;
	}
	if (n > PROTO_MAX_XATTRS) {
		snprintf(text, textlen, "more than %u extended attributes", PROTO_MAX_XATTRS);
		return PERR_PERMISSION;
	}
	x = calloc(n ? n : 1, sizeof(*x));
	if (!x) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	m.u.xattrs.id = id;
	m.u.xattrs.x = x;
	r = tx_xattr_values(e, fd, list, len, val, n, &m.u.xattrs, &code, text, textlen);
	if (r == 0 && code == PERR_OK && (m.u.xattrs.count > 0 || always)) {
		r = chan_queue(e->p->chan, &m);
		if (r < 0) {
			r = engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
	}
	for (size_t i = 0; i < m.u.xattrs.count; i++) {
		free(x[i].value);
	}
	free(x);
	return r < 0 ? r : (int)code;
}

/*
 * The attributes of the directories of a FILES batch just sent (pf, n),
 * each opened again from its entry. A directory that can't be read is a
 * failure here (it was offered already: the receiver has it without them),
 * and with PROTO_CAP_DIR_ITEMS its XATTRS go unread.
 */
int xattr_tx_dirs(struct engine *e, const struct proto_file *pf, uint32_t n)
{
	if (!(e->p->open_flags & (PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS))) {
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct efile *f = file_by_id(e, pf[i].id);
		_cleanup_close_ int fd = -1;
		char text[256] = "";
		int r;

		if (!f || pf[i].ftype != PROTO_FT_DIR) {
			continue;
		}
		if (f->src_dirfd == AT_FDCWD) {
			fd = open(f->src_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			r = fd < 0 ? negerrno() : 0;
		} else if (f->src_path[0] == '\0') {
			fd = openat(f->src_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			r = fd < 0 ? negerrno() : 0;
		} else {
			r = fspath_open_dir(f->src_dirfd, f->src_path, &fd);
		}
		if (r < 0) {
			snprintf(text, sizeof(text), "open for its extended attributes: %s",
				 strerror(-r));
			r = (int)errno_to_perr(r);
		} else {
			r = xattr_tx_send(e, f->id, fd, xattr_sync_on(e), text, sizeof(text));
		}
		if (r < 0) {
			return r;
		}
		if (r > 0) {
			file_note_failure(e, f->name, f->ftype, (uint32_t)r, true, text);
		}
		/* A receiver that holds the directory's answer hears that none come. */
		r = r > 0 && xattr_kept_waits(e, PROTO_FT_DIR) ? tx_xattrs_unread(e, f->id) : 0;
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/*
 * A regular file the receiver kept (SKIPPED): its attributes, none too, so
 * that the receiver brings the file's in line. One that can't be read is a
 * failure of its own (the file is kept, its attributes as they were).
 */
int xattr_tx_kept(struct engine *e, struct efile *f)
{
	_cleanup_close_ int fd = -1;
	char text[256] = "";
	struct stat st;
	bool wait = f->kept_wait && !f->acked; /* PROTO_ITEM_WAIT: its answer comes after these */
	int r;

	/* Sent already at the receiver's wait (the answer after it needs nothing). */
	if (!xattr_sync_on(e) || f->ftype != PROTO_FT_REG || (f->kept_wait && f->acked)) {
		return 0;
	}
	/* A source still being written (a relay hop's) has its attributes once it is settled. */
	if (engine_tx_avail(e, f) != UINT64_MAX && !engine_tx_done_ready(e, f)) {
		file_note_failure(e, f->name, f->ftype, PERR_BUSY, true,
				  "extended attributes: not settled at the hop yet (run again)");
		return 0;
	}
	r = diskio_open_read_flags(f->src_dirfd, f->src_path, 0, DISKIO_NONBLOCK, &fd, NULL, &st);
	if (r < 0) {
		snprintf(text, sizeof(text), "open for its extended attributes: %s", strerror(-r));
		r = (int)errno_to_perr(r);
	} else {
		r = xattr_tx_send(e, f->id, fd, true, text, sizeof(text));
	}
	if (r > 0 && wait) {
		file_fail(f, (uint32_t)r, "%s", text);
		return r;
	}
	if (r > 0) {
		file_note_failure(e, f->name, f->ftype, (uint32_t)r, true, text);
	}
	return r < 0 ? r : 0;
}
