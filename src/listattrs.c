/* SPDX-License-Identifier: MIT */
/* Attribute digests and link groups of listed entries (see listattrs.h). */
#include "listattrs.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "diskio.h"
#include "fspath.h"
#include "macro.h"

/* Does this process hold CAP_SYS_ADMIN, which reading trusted.* needs? */
static bool reads_privileged(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { 0 };

	if (syscall(SYS_capget, &h, d) < 0) {
		return false;
	}
	return (d[CAP_SYS_ADMIN / 32].effective >> (CAP_SYS_ADMIN % 32)) & 1;
}

int list_attrs_init(uint32_t list_flags, struct list_attrs *ret)
{
	struct list_attrs la = { 0 };

	if (list_flags & PROTO_LIST_XATTRS) {
		la.fields |= PROTO_LATTR_XATTRS | (reads_privileged() ? PROTO_LATTR_PRIVILEGED : 0);
	}
	if (list_flags & PROTO_LIST_ACLS) {
		la.fields |= PROTO_LATTR_ACLS;
	}
	if (list_flags & PROTO_LIST_HARDLINKS) {
		la.fields |= PROTO_LATTR_LINKS;
		if (getrandom(&la.seed, sizeof(la.seed), 0) != sizeof(la.seed)) {
			return -EIO;
		}
	}
	*ret = la;
	return 0;
}

int list_attrs_class(const char *name)
{
	if (!proto_xattr_name_ok(name)) {
		return -1;
	}
	if (strncmp(name, "user.", 5) == 0) {
		return PROTO_LATTR_DIGEST_XATTRS;
	}
	return strncmp(name, "system.", 7) == 0 ? PROTO_LATTR_DIGEST_ACLS
						: PROTO_LATTR_DIGEST_PRIVILEGED;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in list (len bytes, NUL-separated) of the classes in fields, sorted. */
static int wanted_names(char *list, size_t len, uint8_t fields, char ***ret, size_t *ret_n)
{
	char **v;
	size_t n = 0;

	/* At most one name per two bytes of the list: bounded by XATTR_LIST_MAX. */
	v = calloc(len / 2 + 1, sizeof(*v));
	if (!v) {
		return -ENOMEM;
	}
	for (char *p = list; p < list + len; p += strlen(p) + 1) {
		int k = list_attrs_class(p);

		if (k >= 0 && (fields & (1u << k))) {
			v[n++] = p;
		}
	}
	if (n > 1) {
		qsort(v, n, sizeof(*v), cmp_name);
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* (name, value) into h: a 16-bit name length, the name, a 32-bit value length, the value. */
static void hash_pair(struct file_hash *h, const char *name, const uint8_t *val, size_t vlen)
{
	uint16_t nlen = htobe16((uint16_t)strlen(name));
	uint32_t len = htobe32((uint32_t)vlen);

	file_hash_update(h, &nlen, sizeof(nlen));
	file_hash_update(h, name, strlen(name));
	file_hash_update(h, &len, sizeof(len));
	file_hash_update(h, val, vlen);
}

static void free_hashes(struct file_hash (*h)[PROTO_LATTR_DIGESTS])
{
	for (size_t k = 0; k < PROTO_LATTR_DIGESTS; k++) {
		file_hash_free(&(*h)[k]);
	}
}

/* Each wanted name's value, fed to its class's digest. */
static int hash_values(int fd, char **names, size_t n, struct file_hash *h)
{
	_cleanup_free_ uint8_t *val = malloc(XATTR_SIZE_MAX);

	if (!val) {
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		ssize_t vlen = fgetxattr(fd, names[i], val, XATTR_SIZE_MAX);

		if (vlen < 0 && errno == ENODATA) {
			continue; /* gone since it was listed */
		}
		if (vlen < 0) {
			return negerrno();
		}
		hash_pair(&h[list_attrs_class(names[i])], names[i], val, (size_t)vlen);
	}
	return 0;
}

int list_attrs_digest_fd(int fd, uint8_t fields, uint8_t ret[PROTO_LATTR_DIGESTS][HASH_LEN])
{
	_cleanup_free_ char *list = malloc(XATTR_LIST_MAX);
	_cleanup_free_ char **names = NULL;
	struct file_hash h[PROTO_LATTR_DIGESTS] = { 0 };
	ssize_t len;
	size_t n = 0;
	int r;

	if (!list) {
		return -ENOMEM;
	}
	len = flistxattr(fd, list, XATTR_LIST_MAX);
	if (len < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP)) {
		len = 0; /* a file system without them: there are none */
	}
	if (len < 0) {
		return negerrno();
	}
	r = wanted_names(list, (size_t)len, fields, &names, &n);
	for (size_t k = 0; k < PROTO_LATTR_DIGESTS && r == 0; k++) {
		r = file_hash_init(&h[k]);
	}
	if (r == 0) {
		r = hash_values(fd, names, n, h);
	}
	for (size_t k = 0; k < PROTO_LATTR_DIGESTS && r == 0; k++) {
		memset(ret[k], 0, HASH_LEN);
		if (fields & (1u << k)) {
			file_hash_final(&h[k], ret[k]);
		}
	}
	free_hashes(&h);
	return r;
}

/* Open e (a regular file or a directory) to read its attributes, as the walker found it. */
static int open_entry(const struct engine_src *e, int *ret_fd)
{
	int fd;

	if (e->ftype == PROTO_FT_REG) {
		return diskio_open_read(e->dirfd, e->path, 0, ret_fd, NULL, NULL);
	}
	if (e->dirfd != AT_FDCWD) {
		return fspath_open_dir(e->dirfd, e->path, ret_fd);
	}
	/* A local path as the user typed it: the walker followed it too. */
	fd = open(e->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		return negerrno();
	}
	*ret_fd = fd;
	return 0;
}

/* A regular file's link group: 0 unless it has other names (somewhere). */
static uint64_t link_group(const struct list_attrs *la, const struct engine_src *e)
{
	uint64_t who[2] = { e->dev, e->ino }, g;

	if (e->ftype != PROTO_FT_REG || e->device || e->window || e->nlink < 2) {
		return 0;
	}
	g = XXH3_64bits_withSeed(who, sizeof(who), la->seed);
	return g ? g : 1;
}

int list_attrs_entry(const struct list_attrs *la, const struct engine_src *e, uint32_t id,
		     struct proto_entry_attrs *ret)
{
	_cleanup_close_ int fd = -1;
	uint8_t want =
	    la->fields & (PROTO_LATTR_XATTRS | PROTO_LATTR_PRIVILEGED | PROTO_LATTR_ACLS);
	int r = 0;

	*ret = (struct proto_entry_attrs){ .id = id };
	if (la->fields & PROTO_LATTR_LINKS) {
		ret->link_group = link_group(la, e);
	}
	/* Symlinks carry none in a copy; a device named as a root is read as its contents. */
	if (!want || (e->ftype != PROTO_FT_REG && e->ftype != PROTO_FT_DIR) || e->device) {
		return 0;
	}
	r = open_entry(e, &fd);
	if (r >= 0) {
		r = list_attrs_digest_fd(fd, want, ret->digest);
	}
	if (r < 0) {
		memset(ret->digest, 0, sizeof(ret->digest));
		ret->status = errno_to_perr(r);
	}
	return r;
}
