/* SPDX-License-Identifier: MIT */
/*
 * -X (extended attributes) and -A (POSIX ACLs, as their system.posix_acl_*
 * attributes in the kernel's raw format, numeric ids). The sender reads an
 * entry's attributes from its open file (a regular file, when it opens, or
 * right before its FILE_DONE when it is still being written: a relay hop's,
 * whose are set after its data) or directory (right after the FILES batch that offered it) and
 * sends them in one XATTRS message; symlinks and hard links carry none.
 * The receiver keeps a file's (at most XATTR_HELD_MAX for all the files in
 * flight) and sets them on the temp file once it is verified, before its
 * mode and time and the rename (so a file appears with its attributes); a
 * directory's as it arrives. user.* are
 * always set; security.* and trusted.* only by a receiver running as root
 * (else they are ignored, as rsync does). One the receiving file system
 * refuses fails the entry: a file is not committed, a directory is
 * reported.
 *
 * Between ends with PROTO_CAP_ITEMIZE an entry there already is brought in
 * line (xattr_sync_on): the sender sends the attributes of every directory
 * and of every regular file the receiver kept (SKIPPED), none too (an empty
 * XATTRS), and the receiver sets them and removes the user.* attributes and
 * ACLs the entry has that the sender's has not (rx_xattrs_prune), as rsync
 * -X does. security.* and trusted.* are never removed. With PROTO_CAP_KEPT_ITEMS
 * a kept file's answer waits for them (PROTO_ITEM_WAIT) and says what differed;
 * with PROTO_CAP_DIR_ITEMS too a kept directory's (the sender then sends every
 * directory's XATTRS, unread when it can read none, right after its batch).
 */
#include "engine-internal.h"
#include "engine_rx.h"
#include "engine_xattr.h"

#include <sys/xattr.h>

extern const struct engine_feature engine_feature_xattrs;

/* A receiver's regular file (-X/-A): its attributes, set once it is verified. */
struct xattrs_file {
	struct proto_xattr *xattrs;
	size_t nxattrs, xattr_bytes;
};

/* f's attributes held: only a receiver with -X or -A has them. */
static struct xattrs_file *xattrs_file(const struct engine *e, const struct efile *f)
{
	return engine_file_state(e, &engine_feature_xattrs, f);
}

/* Kept files waiting for their XATTRS: twice the widest file window. */
#define XKEPT_MAX (2u * PROTO_SPAN_WIDER)

/* A directory of the last FILES batch, which XATTRS may name next. */
struct xattr_dir {
	uint32_t id;
	bool created;
	char *name;
};

/*
 * The receiver's session state of -X/-A. The feature is on in every
 * session, so that XATTRS in a session without them is refused here; what
 * only -X/-A use is allocated at its first use, so a plain copy pays for
 * these few words only.
 */
struct xattr_state {
	struct xattr_dir *xdirs; /* PROTO_MAX_BATCH of them, from the first directory noted */
	size_t nxdirs;
	/*
	 * With PROTO_CAP_ITEMIZE: regular files kept (SKIPPED) whose attributes
	 * the sender sends next, to be brought in line (rx_xattrs).
	 */
	struct {
		uint32_t id;
		char *name;
	} * xkept;
	size_t nxkept, xkept_cap;
	size_t xattr_held; /* bytes of attributes the files in flight hold */
};

static struct xattr_state *xattr_of(const struct engine *e)
{
	return engine_feature_state(e, &engine_feature_xattrs);
}

/* ---- receiver ---- */

/* Forget the directories of the previous FILES batch. */
static void rx_xattr_dirs_reset(struct engine *e)
{
	struct xattr_state *xs = xattr_of(e);
	for (size_t i = 0; i < xs->nxdirs; i++) {
		free(xs->xdirs[i].name);
	}
	xs->nxdirs = 0;
}

/*
 * A new FILES batch: a directory of the one before whose answer is held
 * (PROTO_CAP_DIR_ITEMS) had its XATTRS right after that batch, or the
 * sender never sends them. So at most one batch of directories is held.
 */
static void rx_xattr_batch(struct engine *e)
{
	struct xattr_state *xs = xattr_of(e);

	for (size_t i = 0; i < xs->nxdirs; i++) {
		const struct efile *f = file_by_id(e, xs->xdirs[i].id);

		if (f && f->kept_wait && f->ftype == PROTO_FT_DIR) {
			engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				    "no XATTRS for directory id %u before the next FILES", f->id);
			break;
		}
	}
	rx_xattr_dirs_reset(e);
}

static void rx_xattr_dirs_free(struct engine *e)
{
	struct xattr_state *xs = xattr_of(e);

	rx_xattr_dirs_reset(e);
	free(xs->xdirs);
	xs->xdirs = NULL;
}

/* Directory f of this FILES batch may get its attributes next. */
int rx_xattr_dir_note(struct engine *e, const struct efile *f, bool created)
{
	struct xattr_state *xs = xattr_of(e);
	if (!(e->p->open_flags & (PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS)) ||
	    xs->nxdirs >= PROTO_MAX_BATCH) {
		return 0;
	}
	if (!xs->xdirs) {
		xs->xdirs = calloc(PROTO_MAX_BATCH, sizeof(*xs->xdirs));
		if (!xs->xdirs) {
			return -ENOMEM;
		}
	}
	xs->xdirs[xs->nxdirs].name = strdup(f->name);
	if (!xs->xdirs[xs->nxdirs].name) {
		return -ENOMEM;
	}
	xs->xdirs[xs->nxdirs].id = f->id;
	xs->xdirs[xs->nxdirs].created = created;
	xs->nxdirs++;
	return 0;
}

/* Does x carry only what this session carries? Else the session fails. */
static int rx_xattrs_check(struct engine *e, const struct msg_xattrs *x)
{
	for (size_t i = 0; i < x->count; i++) {
		if (!xattr_wanted(e, x->x[i].name)) {
			return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
					   "XATTRS: an attribute this session does not carry");
		}
	}
	return 0;
}

/* Set n attributes on fd. Returns PERR_OK or a failure with text. */
static uint32_t rx_xattrs_set(const struct engine *e, const struct proto_xattr *x, size_t n, int fd,
			      char *text, size_t textlen)
{
	bool root = e->euid_root;

	for (size_t i = 0; i < n; i++) {
		const struct proto_xattr *a = &x[i];

		bool privileged =
		    strncmp(a->name, "security.", 9) == 0 || strncmp(a->name, "trusted.", 8) == 0;

		/*
		 * Only root may set these (with CAP_SYS_ADMIN, which rdmacpd's
		 * sessions never keep); anyone else ignores them, as rsync does.
		 */
		if (privileged && !root) {
			continue;
		}
		if (fsetxattr(fd, a->name, a->value, a->len, 0) < 0) {
			int r = negerrno();

			if (privileged && r == -EPERM) {
				continue;
			}
			snprintf(text, textlen, "set extended attribute %.100s: %s", a->name,
				 strerror(-r));
			return errno_to_perr(r);
		}
	}
	return PERR_OK;
}

/*
 * The attributes this session carries that fd has and x has not: removed,
 * for an entry there already (xattr_sync_on). Only user.* and ACLs: a
 * receiver may not own security.* and trusted.* (they stay).
 */
static uint32_t rx_xattrs_prune(struct engine *e, const struct msg_xattrs *x, int fd, char *text,
				size_t textlen)
{
	_cleanup_free_ char *list = malloc(XATTR_LIST_MAX);
	ssize_t len;

	if (!list) {
		snprintf(text, textlen, "out of memory");
		return PERR_INTERNAL;
	}
	len = flistxattr(fd, list, XATTR_LIST_MAX);
	if (len < 0) {
		int r = negerrno();

		if (r == -ENOTSUP || r == -EOPNOTSUPP) {
			return PERR_OK;
		}
		snprintf(text, textlen, "list extended attributes: %s", strerror(-r));
		return errno_to_perr(r);
	}
	for (char *p = list; p < list + len; p += strlen(p) + 1) {
		bool sent = false;

		if (!xattr_wanted(e, p) ||
		    (strncmp(p, "user.", 5) != 0 && strncmp(p, "system.posix_acl_", 17) != 0)) {
			continue;
		}
		for (size_t i = 0; i < x->count && !sent; i++) {
			sent = strcmp(x->x[i].name, p) == 0;
		}
		if (!sent && fremovexattr(fd, p) < 0 && errno != ENODATA) {
			int r = negerrno();

			snprintf(text, textlen, "remove extended attribute %.100s: %s", p,
				 strerror(-r));
			return errno_to_perr(r);
		}
	}
	return PERR_OK;
}

/* An entry there already (fd): the sender's attributes set, the others removed. */
static uint32_t rx_xattrs_sync(struct engine *e, const struct msg_xattrs *x, int fd, char *text,
			       size_t textlen)
{
	uint32_t code = rx_xattrs_set(e, x->x, x->count, fd, text, textlen);

	return code == PERR_OK && xattr_sync_on(e) ? rx_xattrs_prune(e, x, fd, text, textlen)
						   : code;
}

static int rx_xattr_kept_note(struct engine *e, const struct efile *f)
{
	struct xattr_state *xs = xattr_of(e);
	if (!xattr_sync_on(e) || f->ftype != PROTO_FT_REG) {
		return 0;
	}
	/* The sender answers within its file window: more waiting is a sender that never does. */
	if (xs->nxkept >= XKEPT_MAX) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "more than %u kept files waiting for their attributes",
				   XKEPT_MAX);
	}
	if (xs->nxkept == xs->xkept_cap) {
		size_t cap = xs->xkept_cap ? xs->xkept_cap * 2 : 64;
		void *t = reallocarray(xs->xkept, cap, sizeof(*xs->xkept));

		if (!t) {
			return -ENOMEM;
		}
		xs->xkept = t;
		xs->xkept_cap = cap;
	}
	xs->xkept[xs->nxkept].name = strdup(f->name);
	if (!xs->xkept[xs->nxkept].name) {
		return -ENOMEM;
	}
	xs->xkept[xs->nxkept++].id = f->id;
	return 0;
}

static void rx_xattr_kept_free(struct engine *e)
{
	struct xattr_state *xs = xattr_of(e);
	for (size_t i = 0; i < xs->nxkept; i++) {
		free(xs->xkept[i].name);
	}
	free(xs->xkept);
	xs->xkept = NULL;
	xs->nxkept = xs->xkept_cap = 0;
}

/* Which item a differing attribute is: an ACL (system.posix_acl_*) or another. */
static uint32_t xattr_item(const char *name)
{
	return strncmp(name, "system.", 7) == 0 ? PROTO_ITEM_ACLS : PROTO_ITEM_XATTRS;
}

/* What of fd's attributes that this session carries and sets differs from x's (items). */
static uint32_t rx_xattrs_differ(struct engine *e, const struct msg_xattrs *x, int fd)
{
	_cleanup_free_ char *list = malloc(XATTR_LIST_MAX);
	_cleanup_free_ uint8_t *val = malloc(PROTO_MAX_XATTR_VALUE);
	bool root = e->euid_root;
	uint32_t items = 0;
	ssize_t len = list ? flistxattr(fd, list, XATTR_LIST_MAX) : -1;

	if (!val || len < 0) {
		return PROTO_ITEM_XATTRS; /* not known: set them all, as without a look */
	}
	for (size_t i = 0; i < x->count; i++) {
		const struct proto_xattr *a = &x->x[i];
		bool privileged =
		    strncmp(a->name, "security.", 9) == 0 || strncmp(a->name, "trusted.", 8) == 0;
		ssize_t n = privileged && !root
				? (ssize_t)a->len
				: fgetxattr(fd, a->name, val, PROTO_MAX_XATTR_VALUE);

		if (n != (ssize_t)a->len ||
		    (!(privileged && !root) && memcmp(val, a->value, a->len))) {
			items |= xattr_item(a->name);
		}
	}
	/* Those here that x has not, which rx_xattrs_prune removes. */
	for (char *p = list; p < list + len; p += strlen(p) + 1) {
		bool sent = false;

		if (!xattr_wanted(e, p) ||
		    (strncmp(p, "user.", 5) != 0 && strncmp(p, "system.posix_acl_", 17) != 0)) {
			continue;
		}
		for (size_t i = 0; i < x->count && !sent; i++) {
			sent = strcmp(x->x[i].name, p) == 0;
		}
		items |= sent ? 0 : xattr_item(p);
	}
	return items;
}

/*
 * A kept entry, by its name (never followed): a regular file opened
 * beneath its directory, a directory as itself. 0 or -errno.
 */
static int rx_kept_open(struct engine *e, const char *name, uint8_t ftype, int *ret_fd)
{
	_cleanup_close_ int dirfd = -1, fd = -1;
	const char *leaf;
	struct stat st;
	int r;

	if (ftype == PROTO_FT_DIR) {
		return fspath_open_dir(e->p->base_fd, name, ret_fd);
	}
	r = fspath_open_parent(e->p->base_fd, name, false, &dirfd, &leaf);
	if (r >= 0) {
		fd = openat(dirfd, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		r = fd < 0 ? negerrno() : fstat(fd, &st) < 0 ? negerrno() : 0;
	}
	if (r == 0 && !S_ISREG(st.st_mode)) {
		r = -ESTALE;
	}
	if (r < 0) {
		return r;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/*
 * A kept entry's attributes (a regular file's, or a held directory's), by
 * its name: set on it, the others removed; with ret_items, only where they
 * differ, and which did. A failure is the entry's (reported).
 */
static void rx_xattrs_sync_name(struct engine *e, const char *name, uint8_t ftype,
				const struct msg_xattrs *x, uint32_t *ret_items)
{
	_cleanup_close_ int fd = -1;
	char text[256] = "";
	uint32_t code = PERR_OK;
	int r = rx_kept_open(e, name, ftype, &fd);

	if (r < 0) {
		snprintf(text, sizeof(text), "extended attributes: %s", strerror(-r));
		code = errno_to_perr(r);
	} else if (ret_items) {
		*ret_items = rx_xattrs_differ(e, x, fd);
		code = *ret_items ? rx_xattrs_sync(e, x, fd, text, sizeof(text)) : PERR_OK;
	} else {
		code = rx_xattrs_sync(e, x, fd, text, sizeof(text));
	}
	if (code != PERR_OK) {
		file_note_failure(e, name, ftype, code, true, text);
		if (ret_items) {
			*ret_items = 0;
		}
	}
}

/* A kept file's attributes (rx_xattr_kept_note), from a peer that does not wait. */
static int rx_xattrs_kept(struct engine *e, const struct msg_xattrs *x, size_t i)
{
	struct xattr_state *xs = xattr_of(e);
	_cleanup_free_ char *name = xs->xkept[i].name;

	xs->xkept[i] = xs->xkept[--xs->nxkept];
	rx_xattrs_sync_name(e, name, PROTO_FT_REG, x, NULL);
	engine_rx_attrs(e, x->id);
	return 0;
}

/*
 * A kept file or directory whose answer we held (xattrs_rx_kept): its
 * attributes compared with the sender's, brought in line where they
 * differ, and the answer given with what differed (an entry updated, not
 * just kept). A directory the sender could read none of (x->unread) is
 * left as it is and answered as kept.
 */
static int rx_xattrs_held(struct engine *e, struct efile *f, const struct msg_xattrs *x)
{
	uint32_t items = 0;

	if (!x->unread) {
		rx_xattrs_sync_name(e, f->name, f->ftype, x, &items);
	}
	engine_rx_attrs(e, x->id);
	return engine_rx_kept_answer(e, f, items);
}

/* Free what a regular file holds of its attributes. */
static void rx_xattrs_release(struct engine *e, struct efile *f)
{
	struct xattr_state *xs = xattr_of(e);
	struct xattrs_file *xf = xattrs_file(e, f);

	if (!xf) {
		return;
	}
	for (size_t i = 0; i < xf->nxattrs; i++) {
		free(xf->xattrs[i].name);
		free(xf->xattrs[i].value);
	}
	free(xf->xattrs);
	xf->xattrs = NULL;
	xf->nxattrs = 0;
	xs->xattr_held -= MIN(xs->xattr_held, xf->xattr_bytes);
	xf->xattr_bytes = 0;
}

/*
 * A regular file verified: its attributes on the temp file, after the
 * last write (a write clears security.capability) and before its mode
 * and time (rx_apply_meta: a mode that agrees with its access ACL).
 */
static void rx_xattrs_apply(struct engine *e, struct efile *f)
{
	struct xattrs_file *xf = xattrs_file(e, f);
	char text[256];
	uint32_t code;

	if (!xf || !xf->nxattrs) {
		return;
	}
	code = rx_xattrs_set(e, xf->xattrs, xf->nxattrs, f->tfd, text, sizeof(text));
	if (code != PERR_OK) {
		file_fail(f, code, "%s", text);
	}
	rx_xattrs_release(e, f);
}

/* A regular file's, once, before FILE_DONE: kept until the file is verified (rx_xattrs_apply). */
static int rx_xattrs_hold(struct engine *e, struct efile *f, struct msg_xattrs *x)
{
	struct xattr_state *xs = xattr_of(e);
	struct xattrs_file *xf = xattrs_file(e, f);
	size_t bytes = 0;

	if (f->got_done || xf->nxattrs) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "XATTRS after FILE_DONE or twice");
	}
	if (f->failed || f->tfd < 0) {
		return 0;
	}
	for (size_t i = 0; i < x->count; i++) {
		bytes += sizeof(x->x[i]) + strlen(x->x[i].name) + 1 + x->x[i].len;
	}
	if (xs->xattr_held + bytes > XATTR_HELD_MAX) {
		file_fail(f, PERR_BUSY, "extended attributes of the files in flight over %zu MiB",
			  XATTR_HELD_MAX >> 20);
		return 0;
	}
	xf->xattrs = x->x;
	xf->nxattrs = x->count;
	xf->xattr_bytes = bytes;
	xs->xattr_held += bytes;
	x->x = NULL;
	x->count = 0;
	return 0;
}

/* A directory of the last FILES batch (xs->xdirs[i]): its attributes set now, by its name. */
static int rx_xattrs_dir(struct engine *e, const struct msg_xattrs *x, size_t i)
{
	struct xattr_state *xs = xattr_of(e);
	_cleanup_close_ int fd = -1;
	char text[256] = "";
	struct stat st;
	uint32_t code;
	int r;

	r = fspath_open_dir(e->p->base_fd, xs->xdirs[i].name, &fd);
	if (r < 0) {
		snprintf(text, sizeof(text), "extended attributes: %s", strerror(-r));
		file_note_failure(e, xs->xdirs[i].name, PROTO_FT_DIR, errno_to_perr(r), true, text);
		return 0;
	}
	code = rx_xattrs_sync(e, x, fd, text, sizeof(text));
	if (code != PERR_OK) {
		file_note_failure(e, xs->xdirs[i].name, PROTO_FT_DIR, code, true, text);
	}
	/*
	 * An access ACL sets the mode's bits: a directory we made stays
	 * ours to write into until its own mode is set, at the end.
	 */
	if (xs->xdirs[i].created && fstat(fd, &st) == 0 && (st.st_mode & 0700) != 0700) {
		fchmod(fd, (st.st_mode & 07777) | 0700);
	}
	engine_rx_attrs(e, x->id);
	return 0;
}

/* Which directory of the last FILES batch is id (xs->xdirs): its index, or -1. */
static int rx_xattr_dir_index(struct engine *e, uint32_t id)
{
	struct xattr_state *xs = xattr_of(e);

	for (size_t i = 0; i < xs->nxdirs; i++) {
		if (xs->xdirs[i].id == id) {
			return (int)i;
		}
	}
	return -1;
}

static int rx_xattrs(struct engine *e, struct msg_xattrs *x)
{
	struct xattr_state *xs = xattr_of(e);
	struct efile *f = file_by_id(e, x->id);
	int r;

	if (!(e->p->open_flags & (PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS))) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "XATTRS in a session without -X or -A");
	}
	if (x->unread && !xattr_kept_waits(e, PROTO_FT_DIR)) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "XATTRS: unread from a peer without kept directories' items");
	}
	r = rx_xattrs_check(e, x);
	if (r < 0) {
		return r;
	}
	if (x->unread && !(f ? f->ftype == PROTO_FT_DIR : rx_xattr_dir_index(e, x->id) >= 0)) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "XATTRS: unread for id %u, not a directory of the last FILES",
				   x->id);
	}
	if (f && f->kept_wait) {
		return rx_xattrs_held(e, f, x);
	}
	if (f && f->ftype == PROTO_FT_REG) {
		return rx_xattrs_hold(e, f, x);
	}
	r = rx_xattr_dir_index(e, x->id);
	if (r >= 0 && x->unread) {
		engine_rx_attrs(e, x->id); /* nothing to set: the directory is as it was */
		return 0;
	}
	if (r >= 0) {
		return rx_xattrs_dir(e, x, (size_t)r);
	}
	for (size_t i = 0; i < xs->nxkept; i++) {
		if (xs->xkept[i].id == x->id) {
			return rx_xattrs_kept(e, x, i);
		}
	}
	/* Not in flight and not a directory of the last batch: a refused or failed entry. */
	if (x->id > e->next_id) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "XATTRS for unknown id %u", x->id);
	}
	return 0;
}

/* -X/-A: a receiver takes XATTRS (a probe reads no source: nothing to carry them for). */
static int xattrs_on_xattrs(struct engine *e, struct msg *m)
{
	return engine_probe(e) ? engine_msg_unexpected(e, m) : rx_xattrs(e, &m->u.xattrs);
}

static void xattrs_release(struct engine *e)
{
	rx_xattr_dirs_free(e);
	rx_xattr_kept_free(e);
}

static const struct engine_msg_row xattrs_msgs[] = {
	{ MSG_XATTRS, ENGINE_ROLE_BIT(ENGINE_RECEIVER), 0, xattrs_on_xattrs },
	{ 0 },
};

/* A file kept as it is may have attributes to bring in line: they come next. */
static void xattrs_rx_settled(struct engine *e, const struct efile *f, enum engine_rx_end how)
{
	if (how == ENGINE_RX_KEPT && !f->kept_wait && rx_xattr_kept_note(e, f) == -ENOMEM) {
		engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
}

/* A kept file or directory, with a peer that waits: answered with its attributes. */
static bool xattrs_rx_kept(struct engine *e, struct efile *f)
{
	return xattr_kept_waits(e, f->ftype);
}

/* A device keeps its own node: no attributes from the source. */
static void xattrs_rx_complete(struct engine *e, struct efile *f)
{
	if (!f->device) {
		rx_xattrs_apply(e, f);
	}
}

/*
 * -X, -A: a regular file's attributes go ahead of its FILE_DONE: read when
 * it opens, or, from a source still being written (a relay hop's file,
 * engine_tx_avail), only once it is settled there (xattrs_tx_settled): a
 * hop sets them on its file after its data, so none is read half made.
 */
static int xattrs_tx_opened(struct engine *e, struct efile *f, int fd, char *text, size_t textlen)
{
	if (engine_tx_avail(e, f) != UINT64_MAX) {
		return 0;
	}
	return xattr_tx_send(e, f->id, fd, false, text, textlen);
}

static int xattrs_tx_settled(struct engine *e, struct efile *f, int fd, char *text, size_t textlen)
{
	_cleanup_close_ int own = -1;
	int r;

	if (engine_tx_avail(e, f) == UINT64_MAX ||
	    !(e->p->open_flags & (PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS))) {
		return 0;
	}
	if (fd < 0) {
		/* Read whole and closed already (a packed file): opened again. */
		r = diskio_open_read_flags(f->src_dirfd, f->src_path, 0, DISKIO_NONBLOCK, &own,
					   NULL, NULL);
		if (r < 0) {
			snprintf(text, textlen, "open for its extended attributes: %s",
				 strerror(-r));
			return (int)errno_to_perr(r);
		}
		fd = own;
	}
	return xattr_tx_send(e, f->id, fd, false, text, textlen);
}

static size_t xattrs_file_size(const struct engine *e)
{
	return e->p->role == ENGINE_RECEIVER &&
		       (e->p->open_flags & (PROTO_OPEN_XATTRS | PROTO_OPEN_ACLS))
		   ? sizeof(struct xattrs_file)
		   : 0;
}

const struct engine_feature engine_feature_xattrs = {
	.name = "xattrs",
	.file_size = xattrs_file_size,
	.state_size = sizeof(struct xattr_state),
	.file_release = rx_xattrs_release,
	.release = xattrs_release,
	.msgs = xattrs_msgs,
	.rx_batch = rx_xattr_batch,
	.rx_complete = xattrs_rx_complete,
	.rx_settled = xattrs_rx_settled,
	.rx_kept = xattrs_rx_kept,
	.tx_offered = xattr_tx_dirs,
	.tx_skipped = xattr_tx_kept,
	.tx_opened = xattrs_tx_opened,
	.tx_settled = xattrs_tx_settled,
};
