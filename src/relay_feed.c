/* SPDX-License-Identifier: MIT */
/*
 * The relay feed's records (relay_feed.h): encode and decode with
 * proto/wire.h, one record per SOCK_SEQPACKET message, a descriptor in
 * SCM_RIGHTS with a regular file's ENTRY (and with a directory's, -X/-A). Every length is checked against
 * its cap before anything is allocated; what decode allocates is freed by
 * relay_feed_msg_free, on its own failure too.
 */
#include "relay_feed.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "proto/wire.h"

#define FEED_MAGIC   0x52464431u /* "RFD1" */
#define FEED_VERSION 1
#define FEED_HDR     8 /* magic, version, type, reserved u16 */

/* ---- encode ------------------------------------------------------------- */

/* An ENTRY of this type carries a name it points at: a symlink's target, a hard link's file. */
static bool relay_feed_entry_links(uint8_t ftype)
{
	return ftype == PROTO_FT_SYMLINK || ftype == PROTO_FT_HARDLINK;
}

/*
 * A field past its cap (or an empty name) is the caller's error: -EINVAL,
 * latched in *bad; a record too long for RELAY_FEED_MAX is -EMSGSIZE.
 */
static void put_str(struct wbuf *w, const char *s, size_t max, bool *bad)
{
	if (!s || !*s || strlen(s) > max) {
		*bad = true;
		return;
	}
	wbuf_put_str16(w, s, max);
}

static void put_blob(struct wbuf *w, const uint8_t *p, uint32_t len, uint32_t max, bool *bad)
{
	if (len > max || (len && !p)) {
		*bad = true;
		return;
	}
	wbuf_put_u32(w, len);
	wbuf_put_bytes(w, p, len);
}

static int put_start(struct wbuf *w, const struct relay_feed_start *s)
{
	bool bad = false;

	if (!s->count || s->count > PROTO_MAX_RELAY_HOPS || !s->hops) {
		return -EINVAL;
	}
	wbuf_put_u8(w, s->count);
	for (unsigned i = 0; i < s->count; i++) {
		if (!proto_relay_hop_valid(&s->hops[i]) ||
		    proto_relay_hop_enc(w, &s->hops[i]) < 0) {
			return -EINVAL;
		}
	}
	put_blob(w, s->client_cert, s->client_cert_len, RELAY_FEED_MAX_CERT, &bad);
	wbuf_put_u8(w, s->fanout ? s->fanout : 1);
	return bad || s->fanout > PROTO_MAX_RELAY_FANOUT ? -EINVAL : 0;
}

/* A chunk tree's chunk size as the engine has them: a power of two, a slot size. */
static bool relay_feed_tree_ok(uint32_t chunk)
{
	return chunk >= PROTO_MIN_CHUNK && chunk <= PROTO_MAX_CHUNK && (chunk & (chunk - 1)) == 0;
}

static int put_entry(struct wbuf *w, const struct relay_feed_entry *en)
{
	bool is_link = relay_feed_entry_links(en->ftype), bad = false;

	if ((en->ftype != PROTO_FT_REG && en->ftype != PROTO_FT_DIR && !is_link) ||
	    en->mode > 07777 || en->mtime_nsec >= 1000000000u || is_link != !!en->link ||
	    (en->digest_tree && !relay_feed_tree_ok(en->digest_tree))) {
		return -EINVAL;
	}
	wbuf_put_u32(w, en->id);
	wbuf_put_u8(w, en->ftype);
	wbuf_put_u8(w, !en->digest_known ? 0
		       : en->digest_tree ? (uint8_t)__builtin_ctz(en->digest_tree)
					 : 1);
	wbuf_put_u32(w, en->mode);
	wbuf_put_u64(w, en->size);
	wbuf_put_u64(w, (uint64_t)en->mtime_sec);
	wbuf_put_u32(w, en->mtime_nsec);
	wbuf_put_u32(w, en->uid);
	wbuf_put_u32(w, en->gid);
	put_str(w, en->name, PROTO_MAX_PATH, &bad);
	if (is_link) {
		put_str(w, en->link, PROTO_MAX_PATH, &bad);
	}
	return bad ? -EINVAL : 0;
}

static int put_result(struct wbuf *w, const struct relay_feed_result *res)
{
	if (!res->index || res->index > PROTO_MAX_RELAY_HOPS || res->status < PROTO_RELAY_COPIED ||
	    res->status > PROTO_RELAY_STATUS_MAX) {
		return -EINVAL;
	}
	wbuf_put_u8(w, res->index);
	wbuf_put_u8(w, res->status);
	wbuf_put_u8(w, res->exit_code);
	wbuf_put_u64(w, res->files_ok);
	wbuf_put_u64(w, res->files_failed);
	wbuf_put_u64(w, res->bytes);
	wbuf_put_str16(w, res->host, PROTO_MAX_HOST);
	wbuf_put_str16(w, res->text, PROTO_MAX_TEXT);
	return 0;
}

static int put_body(struct wbuf *w, const struct relay_feed_msg *m)
{
	switch (m->type) {
	case RELAY_FEED_START:
		return put_start(w, &m->u.start);
	case RELAY_FEED_ENTRY:
		return put_entry(w, &m->u.entry);
	case RELAY_FEED_RANGE:
		wbuf_put_u32(w, m->u.range.id);
		wbuf_put_u64(w, m->u.range.upto);
		return 0;
	case RELAY_FEED_DONE:
		if (m->u.done.ok != (m->u.done.code == PERR_OK)) {
			return -EINVAL;
		}
		wbuf_put_u32(w, m->u.done.id);
		wbuf_put_u8(w, m->u.done.ok);
		wbuf_put_u32(w, m->u.done.code);
		wbuf_put_bytes(w, m->u.done.digest, sizeof(m->u.done.digest));
		return 0;
	case RELAY_FEED_END:
		return 0;
	case RELAY_FEED_ABORT:
		if (m->u.abort.code == PERR_OK) {
			return -EINVAL;
		}
		wbuf_put_u32(w, m->u.abort.code);
		wbuf_put_str16(w, m->u.abort.text, PROTO_MAX_TEXT);
		return 0;
	case RELAY_FEED_RESULT:
		return put_result(w, &m->u.result);
	}
	return -EINVAL;
}

/*
 * A descriptor rides only with an ENTRY: always with a regular file's, and
 * with a directory's when the child reads its attributes (-X/-A) from it.
 */
static bool fd_fits(const struct relay_feed_msg *m, bool has_fd)
{
	if (m->type != RELAY_FEED_ENTRY) {
		return !has_fd;
	}
	switch (m->u.entry.ftype) {
	case PROTO_FT_REG:
		return has_fd;
	case PROTO_FT_DIR:
		return true;
	default:
		return !has_fd;
	}
}

static int feed_sendmsg(int sock, const uint8_t *buf, size_t len, int fd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.b;
		mh.msg_controllen = sizeof(ctl.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	do {
		n = sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
	return (size_t)n == len ? 0 : -EIO; /* a seqpacket record goes whole or not at all */
}

int relay_feed_send(int sock, const struct relay_feed_msg *m, int fd)
{
	_cleanup_free_ uint8_t *buf = malloc(RELAY_FEED_MAX);
	struct wbuf w;
	int r;

	if (!buf) {
		return -ENOMEM;
	}
	if (!fd_fits(m, fd >= 0)) {
		return -EINVAL;
	}
	wbuf_init(&w, buf, RELAY_FEED_MAX);
	wbuf_put_u32(&w, FEED_MAGIC);
	wbuf_put_u8(&w, FEED_VERSION);
	wbuf_put_u8(&w, m->type);
	wbuf_put_u16(&w, 0);
	r = put_body(&w, m);
	if (r < 0) {
		return r;
	}
	if (w.overflow) {
		return -EMSGSIZE;
	}
	return feed_sendmsg(sock, buf, w.len, fd);
}

/* ---- decode ------------------------------------------------------------- */

/* A u16-length string of 1..max bytes, no NUL inside, allocated. */
static char *get_str(struct rbuf *r, size_t max)
{
	uint16_t n = rbuf_get_u16(r);
	char *s;

	if (r->error || !n || n > max || n > rbuf_left(r) || memchr(r->buf + r->pos, 0, n)) {
		r->error = true;
		return NULL;
	}
	s = malloc((size_t)n + 1);
	if (!s) {
		r->error = true;
		return NULL;
	}
	rbuf_get_bytes(r, s, n);
	s[n] = '\0';
	return s;
}

/* A u32-length blob of min..max bytes, allocated (NULL when empty). */
static uint8_t *get_blob(struct rbuf *r, uint32_t min, uint32_t max, uint32_t *ret_len)
{
	uint32_t n = rbuf_get_u32(r);
	uint8_t *p = NULL;

	if (r->error || n < min || n > max || n > rbuf_left(r)) {
		r->error = true;
		return NULL;
	}
	if (n) {
		p = malloc(n);
		if (!p) {
			r->error = true;
			return NULL;
		}
		rbuf_get_bytes(r, p, n);
	}
	*ret_len = n;
	return p;
}

static void get_start(struct rbuf *r, struct relay_feed_start *s)
{
	s->count = rbuf_get_u8(r);
	if (r->error || !s->count || s->count > PROTO_MAX_RELAY_HOPS) {
		r->error = true;
		s->count = 0;
		return;
	}
	s->hops = calloc(s->count, sizeof(*s->hops));
	if (!s->hops) {
		r->error = true;
		s->count = 0;
		return;
	}
	for (unsigned i = 0; i < s->count && !r->error; i++) {
		proto_relay_hop_dec(r, &s->hops[i]);
	}
	s->client_cert = get_blob(r, 0, RELAY_FEED_MAX_CERT, &s->client_cert_len);
	s->fanout = rbuf_get_u8(r);
	r->error |= s->fanout < 1 || s->fanout > PROTO_MAX_RELAY_FANOUT;
}

static void get_entry(struct rbuf *r, struct relay_feed_entry *en)
{
	uint8_t known;

	en->id = rbuf_get_u32(r);
	en->ftype = rbuf_get_u8(r);
	known = rbuf_get_u8(r);
	en->mode = rbuf_get_u32(r);
	en->size = rbuf_get_u64(r);
	en->mtime_sec = (int64_t)rbuf_get_u64(r);
	en->mtime_nsec = rbuf_get_u32(r);
	en->uid = rbuf_get_u32(r);
	en->gid = rbuf_get_u32(r);
	en->digest_known = known != 0;
	en->digest_tree = known > 1 && known < 32 ? 1u << known : 0;
	if ((known > 1 && !relay_feed_tree_ok(en->digest_tree)) || en->mode > 07777 ||
	    en->mtime_nsec >= 1000000000u ||
	    (en->ftype != PROTO_FT_REG && en->ftype != PROTO_FT_DIR &&
	     !relay_feed_entry_links(en->ftype))) {
		r->error = true;
		return;
	}
	en->name = get_str(r, PROTO_MAX_PATH);
	if (relay_feed_entry_links(en->ftype)) {
		en->link = get_str(r, PROTO_MAX_PATH);
	}
}

static void get_text(struct rbuf *r, char *out, size_t outlen, size_t max)
{
	rbuf_get_str16(r, out, outlen, max);
}

static void get_result(struct rbuf *r, struct relay_feed_result *res)
{
	res->index = rbuf_get_u8(r);
	res->status = rbuf_get_u8(r);
	res->exit_code = rbuf_get_u8(r);
	res->files_ok = rbuf_get_u64(r);
	res->files_failed = rbuf_get_u64(r);
	res->bytes = rbuf_get_u64(r);
	get_text(r, res->host, sizeof(res->host), PROTO_MAX_HOST);
	get_text(r, res->text, sizeof(res->text), PROTO_MAX_TEXT);
	r->error |= !res->index || res->index > PROTO_MAX_RELAY_HOPS ||
		    res->status < PROTO_RELAY_COPIED || res->status > PROTO_RELAY_STATUS_MAX;
}

static void get_body(struct rbuf *r, struct relay_feed_msg *m)
{
	uint8_t ok;

	switch (m->type) {
	case RELAY_FEED_START:
		get_start(r, &m->u.start);
		break;
	case RELAY_FEED_ENTRY:
		get_entry(r, &m->u.entry);
		break;
	case RELAY_FEED_RANGE:
		m->u.range.id = rbuf_get_u32(r);
		m->u.range.upto = rbuf_get_u64(r);
		break;
	case RELAY_FEED_DONE:
		m->u.done.id = rbuf_get_u32(r);
		ok = rbuf_get_u8(r);
		m->u.done.ok = ok == 1;
		m->u.done.code = rbuf_get_u32(r);
		rbuf_get_bytes(r, m->u.done.digest, sizeof(m->u.done.digest));
		r->error |= ok > 1 || m->u.done.ok != (m->u.done.code == PERR_OK);
		break;
	case RELAY_FEED_END:
		break;
	case RELAY_FEED_ABORT:
		m->u.abort.code = rbuf_get_u32(r);
		get_text(r, m->u.abort.text, sizeof(m->u.abort.text), PROTO_MAX_TEXT);
		r->error |= m->u.abort.code == PERR_OK;
		break;
	case RELAY_FEED_RESULT:
		get_result(r, &m->u.result);
		break;
	default:
		r->error = true;
	}
}

/* The record in buf[0, len) into *m: 0 or -EBADMSG (then nothing is left allocated in *m). */
static int feed_decode(const uint8_t *buf, size_t len, struct relay_feed_msg *m)
{
	struct rbuf r;

	memset(m, 0, sizeof(*m));
	rbuf_init(&r, buf, len);
	if (rbuf_get_u32(&r) != FEED_MAGIC || rbuf_get_u8(&r) != FEED_VERSION) {
		return -EBADMSG;
	}
	m->type = rbuf_get_u8(&r);
	if (rbuf_get_u16(&r) != 0 || r.error) {
		return -EBADMSG;
	}
	get_body(&r, m);
	if (r.error || rbuf_left(&r)) {
		relay_feed_msg_free(m);
		return -EBADMSG;
	}
	return 0;
}

/* Every descriptor that came in the control data closed; *ret_fd the one there was, if one. */
static int feed_fds(struct msghdr *mh, int *ret_fd)
{
	int fd = -1, n = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			continue;
		}
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (n++ == 0) {
				fd = got;
			} else {
				close(got);
			}
		}
	}
	if (n > 1 || (mh->msg_flags & MSG_CTRUNC)) {
		if (fd >= 0) {
			close(fd);
		}
		return -EBADMSG;
	}
	*ret_fd = fd;
	return 0;
}

static ssize_t feed_recvmsg(int sock, uint8_t *buf, int *ret_fd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 4)];
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = RELAY_FEED_MAX };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = ctl.b,
			     .msg_controllen = sizeof(ctl.b) };
	ssize_t n;
	int r;

	do {
		n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
	r = feed_fds(&mh, ret_fd);
	if (r < 0) {
		return r;
	}
	if ((size_t)n > RELAY_FEED_MAX || (mh.msg_flags & MSG_TRUNC)) {
		if (*ret_fd >= 0) {
			close(*ret_fd);
			*ret_fd = -1;
		}
		return -EMSGSIZE;
	}
	return n;
}

int relay_feed_recv(int sock, struct relay_feed_msg *m, int *ret_fd)
{
	_cleanup_free_ uint8_t *buf = malloc(RELAY_FEED_MAX);
	_cleanup_close_ int fd = -1;
	struct relay_feed_msg got;
	ssize_t n;

	if (!buf) {
		return -ENOMEM;
	}
	n = feed_recvmsg(sock, buf, &fd);
	if (n < 0) {
		return (int)n;
	}
	if (n == 0 && fd < 0) {
		return 0; /* seqpacket: no empty records, so this is the end */
	}
	if (feed_decode(buf, (size_t)n, &got) < 0) {
		return -EBADMSG;
	}
	if (!fd_fits(&got, fd >= 0)) {
		relay_feed_msg_free(&got);
		return -EBADMSG;
	}
	*m = got;
	*ret_fd = TAKE_FD(fd);
	return 1;
}

void relay_feed_msg_free(struct relay_feed_msg *m)
{
	if (m->type == RELAY_FEED_START) {
		for (unsigned i = 0; m->u.start.hops && i < m->u.start.count; i++) {
			proto_relay_hop_clear(&m->u.start.hops[i]);
		}
		free(m->u.start.hops);
		free(m->u.start.client_cert);
	} else if (m->type == RELAY_FEED_ENTRY) {
		free(m->u.entry.name);
		free(m->u.entry.link);
	}
	memset(m, 0, sizeof(*m));
}
