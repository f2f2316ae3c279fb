/* SPDX-License-Identifier: MIT */
/* Joining the parts of a split file (assemble.h). */
#include "assemble.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diskio.h"
#include "engine.h"
#include "fspath.h"
#include "hash.h"
#include "macro.h"

#define ASSEMBLE_BUF (1u << 20)

struct asm_job {
	const struct msg_assemble *a;
	const struct meta_policy *mp;
	uint32_t code;
	char *why;
	size_t whylen;
};

static int asm_fail(struct asm_job *j, uint32_t code, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int asm_fail(struct asm_job *j, uint32_t code, int r, const char *fmt, ...)
{
	va_list ap;

	j->code = code;
	va_start(ap, fmt);
	vsnprintf(j->why, j->whylen, fmt, ap);
	va_end(ap);
	return r;
}

/* As the engine reports a -errno, but a part gone is an I/O error (ASSEMBLY where it matters). */
static uint32_t perr_of(int r)
{
	return r == -ENOENT ? PERR_IO : errno_to_perr(r);
}

/* Bytes [off, off + len) of in to the same offsets of out: copy_file_range, else read and write. */
static int copy_range(int in, uint64_t in_off, int out, uint64_t out_off, uint64_t len,
		      uint8_t *buf)
{
	bool plain = false;

	while (len > 0) {
		size_t want = len > (1u << 30) ? (1u << 30) : (size_t)len;
		ssize_t n;

		if (!plain) {
			loff_t io = (loff_t)in_off, oo = (loff_t)out_off;

			n = copy_file_range(in, &io, out, &oo, want, 0);
			if (n < 0 && (errno == EXDEV || errno == EOPNOTSUPP || errno == ENOSYS ||
				      errno == EINVAL)) {
				plain = true;
				continue;
			}
		} else {
			n = pread(in, buf, want > ASSEMBLE_BUF ? ASSEMBLE_BUF : want,
				  (off_t)in_off);
			if (n > 0 && pwrite(out, buf, (size_t)n, (off_t)out_off) != n) {
				return errno ? negerrno() : -EIO;
			}
		}
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			return negerrno();
		}
		if (n == 0) {
			return -ENODATA; /* the part shrank meanwhile */
		}
		in_off += (uint64_t)n;
		out_off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* Read [off, off + len) of fd back and compare its XXH3-128 with want. 1 same, 0 not, or -errno. */
static int range_matches(int fd, uint64_t off, uint64_t len, const uint8_t want[PROTO_HASH_LEN],
			 uint8_t *buf)
{
	struct file_hash h;
	uint8_t got[HASH_LEN];
	int r = file_hash_init(&h);

	if (r < 0) {
		return r;
	}
	while (len > 0) {
		size_t n = len > ASSEMBLE_BUF ? ASSEMBLE_BUF : (size_t)len;
		ssize_t k = pread(fd, buf, n, (off_t)off);

		if (k < 0 && errno == EINTR) {
			continue;
		}
		if (k <= 0) {
			file_hash_free(&h);
			return k < 0 ? negerrno() : -ENODATA;
		}
		file_hash_update(&h, buf, (size_t)k);
		off += (uint64_t)k;
		len -= (uint64_t)k;
	}
	file_hash_final(&h, got);
	file_hash_free(&h);
	return memcmp(got, want, HASH_LEN) == 0;
}

/*
 * Is part i a file an earlier part is already (the same name, or another
 * link to the same inode)? Each byte of a part counts once against the
 * module's caps: a part listed twice would make a file bigger than what was
 * stored. ids: the earlier parts' device and inode.
 */
static int part_repeated(struct asm_job *j, size_t i, const struct stat *st, dev_t *devs,
			 ino_t *inos)
{
	const struct msg_assemble *a = j->a;

	for (size_t k = 0; k < i; k++) {
		if (!strcmp(a->parts[k].name, a->parts[i].name) ||
		    (devs[k] == st->st_dev && inos[k] == st->st_ino)) {
			return asm_fail(j, PERR_ASSEMBLY, -EBADMSG,
					"part %zu of %u (%s) is part %zu (%s) again: each part "
					"must be a file of its own",
					i + 1, a->count, a->parts[i].name, k + 1, a->parts[k].name);
		}
	}
	devs[i] = st->st_dev;
	inos[i] = st->st_ino;
	return 0;
}

/* Each part open, of its size and no other part: into fds (a->count of them). */
static int open_parts(struct asm_job *j, int stagefd, int *fds)
{
	const struct msg_assemble *a = j->a;
	_cleanup_free_ dev_t *devs = calloc(a->count, sizeof(*devs));
	_cleanup_free_ ino_t *inos = calloc(a->count, sizeof(*inos));

	if (!devs || !inos) {
		return asm_fail(j, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < a->count; i++) {
		const struct proto_part *p = &a->parts[i];
		struct stat st;
		int r = diskio_open_read_flags(stagefd, p->name, 0, 0, &fds[i], NULL, &st);

		if (r == -ENOENT) {
			return asm_fail(j, PERR_ASSEMBLY, r, "part %zu of %u (%s) is missing",
					i + 1, a->count, p->name);
		}
		if (r < 0) {
			return asm_fail(j, r == -EINVAL ? PERR_BAD_PATH : perr_of(r), r,
					"part %zu of %u (%s): %s", i + 1, a->count, p->name,
					r == -EINVAL ? "not a regular file" : strerror(-r));
		}
		if ((uint64_t)st.st_size != p->len) {
			return asm_fail(j, PERR_ASSEMBLY, -EBADMSG,
					"part %zu of %u (%s) holds %llu bytes, its range %llu",
					i + 1, a->count, p->name, (unsigned long long)st.st_size,
					(unsigned long long)p->len);
		}
		r = part_repeated(j, i, &st, devs, inos);
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* The parts into fd, read back and checked range by range. */
static int join_and_verify(struct asm_job *j, const int *fds, int fd)
{
	const struct msg_assemble *a = j->a;
	_cleanup_free_ uint8_t *buf = malloc(ASSEMBLE_BUF);
	int r;

	if (!buf) {
		return asm_fail(j, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	/* Not preallocated: copy_file_range may share the parts' extents (reflink) or keep holes. */
	for (size_t i = 0; i < a->count; i++) {
		const struct proto_part *p = &a->parts[i];

		r = copy_range(fds[i], 0, fd, p->offset, p->len, buf);
		if (r < 0) {
			return asm_fail(j, r == -ENODATA ? PERR_ASSEMBLY : perr_of(r), r,
					"copying part %zu of %u (%s): %s", i + 1, a->count, p->name,
					r == -ENODATA ? "it shrank" : strerror(-r));
		}
	}
	if (ftruncate(fd, (off_t)a->size) < 0 || fsync(fd) < 0) {
		r = negerrno();
		return asm_fail(j, perr_of(r), r, "writing: %s", strerror(-r));
	}
	for (size_t i = 0; i < a->count; i++) {
		const struct proto_part *p = &a->parts[i];

		r = range_matches(fd, p->offset, p->len, p->hash, buf);
		if (r < 0) {
			return asm_fail(j, perr_of(r), r, "reading back: %s", strerror(-r));
		}
		if (r == 0) {
			return asm_fail(j, PERR_ASSEMBLY, -EBADMSG,
					"bytes %llu..%llu (part %zu of %u, %s) do not match the "
					"digest the sender computed",
					(unsigned long long)p->offset,
					(unsigned long long)(p->offset + p->len), i + 1, a->count,
					p->name);
		}
	}
	return 0;
}

/* Owner, mode and mtime by the destination's rule (meta_policy.h), then an fsync. */
static int set_meta(struct asm_job *j, int fd, uint32_t existing)
{
	const struct msg_assemble *a = j->a;
	struct meta_policy mp = *j->mp;
	const char *what = "fsync";
	int r;

	mp.owner = mp.owner && (a->flags & PROTO_ASM_OWNER);
	r = meta_policy_apply_fd(&mp, fd, S_IFREG, a->mode, existing, a->uid, a->gid, a->mtime_sec,
				 a->mtime_nsec, &what);
	if (r == 0 && fsync(fd) < 0) {
		r = negerrno();
	}
	if (r < 0) {
		return asm_fail(j, perr_of(r), r, "%s: %s", what, strerror(-r));
	}
	return 0;
}

/*
 * What holds the name now may be replaced by a file (fspath_replace_rule):
 * its st_mode in *ret_existing (0: nothing). A special file is refused.
 */
static int check_target(struct asm_job *j, int dirfd, const char *leaf, uint32_t *ret_existing)
{
	struct stat st;
	const char *kind;
	int r;

	*ret_existing = 0;
	if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		r = negerrno();
		return r == -ENOENT ? 0 : asm_fail(j, perr_of(r), r, "%s", strerror(-r));
	}
	r = fspath_replace_rule(st.st_mode, &kind);
	if (r == -EPERM) {
		return asm_fail(j, PERR_DEVICE_REFUSED, r,
				"%s is there: a special file is never replaced by a file", kind);
	}
	if (r < 0) {
		return asm_fail(j, PERR_BAD_PATH, r, "%s is there", kind);
	}
	*ret_existing = (uint32_t)st.st_mode;
	return 0;
}

/* The file, whole and checked, under its name: unnamed until then where the file system can. */
static int commit(struct asm_job *j, int dirfd, const char *leaf, int fd, const char *tmpname)
{
	int r;

	if (tmpname[0]) {
		r = renameat(dirfd, tmpname, dirfd, leaf) < 0 ? negerrno() : 0;
	} else {
		r = fspath_link_anon(dirfd, fd, leaf);
	}
	if (r == 0 && fsync(dirfd) < 0) {
		r = negerrno();
	}
	if (r < 0) {
		return asm_fail(j, perr_of(r), r, "linking into place: %s", strerror(-r));
	}
	return 0;
}

/*
 * The parts (and what a cut run kept of them in staging's --partial store)
 * and, once empty, their directory: the file is in place, or gone from the
 * source; they are spare.
 */
static void remove_parts(int destfd, int stagefd, const struct msg_assemble *a)
{
	for (size_t i = 0; i < a->count; i++) {
		unlinkat(stagefd, a->parts[i].name, 0);
		engine_partial_forget(stagefd, a->parts[i].name);
	}
	fsync(stagefd);
	if (unlinkat(destfd, a->staging, AT_REMOVEDIR) == 0) {
		fsync(destfd);
	}
}

int assemble_file(int destfd, const struct msg_assemble *a, const struct meta_policy *mp,
		  uint32_t *ret_code, char *why, size_t whylen)
{
	struct asm_job j = { .a = a, .mp = mp, .code = PERR_OK, .why = why, .whylen = whylen };
	uint32_t existing = 0;
	_cleanup_close_ int stagefd = -1, dirfd = -1, fd = -1;
	_cleanup_free_ int *fds = calloc(a->count, sizeof(int));
	char tmpname[FSPATH_NAME_MAX + 1] = "";
	const char *leaf;
	int r;

	why[0] = '\0';
	if (!fds) {
		r = asm_fail(&j, PERR_INTERNAL, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < a->count; i++) {
		fds[i] = -1;
	}
	r = fspath_open_dir(destfd, a->staging, &stagefd);
	if (r < 0) {
		r = asm_fail(&j, r == -ENOENT ? PERR_ASSEMBLY : perr_of(r), r,
			     "the parts' directory: %s",
			     r == -ENOENT		  ? "missing"
			     : r == -ELOOP || r == -EXDEV ? "symlink or escape refused"
							  : strerror(-r));
		goto out;
	}
	r = fspath_open_parent(destfd, a->name, false, &dirfd, &leaf);
	if (r < 0) {
		r = asm_fail(&j, r == -ENOENT ? PERR_NOT_FOUND : perr_of(r), r, "its directory: %s",
			     r == -ELOOP || r == -EXDEV ? "symlink or escape refused"
							: strerror(-r));
		goto out;
	}
	r = check_target(&j, dirfd, leaf, &existing);
	if (r == 0) {
		r = open_parts(&j, stagefd, fds);
	}
	if (r < 0) {
		goto out;
	}
	r = fspath_create_anon(dirfd, 0600, &fd);
	if (r == -EOPNOTSUPP) {
		r = fspath_create_temp(dirfd, leaf, &fd, tmpname, sizeof(tmpname));
	}
	if (r < 0) {
		r = asm_fail(&j, perr_of(r), r, "a temp file: %s", strerror(-r));
		goto out;
	}
	r = join_and_verify(&j, fds, fd);
	if (r == 0) {
		r = set_meta(&j, fd, existing);
	}
	/* Looked at again: a special file made there meanwhile is not replaced either. */
	if (r == 0) {
		r = check_target(&j, dirfd, leaf, &existing);
	}
	if (r == 0) {
		r = commit(&j, dirfd, leaf, fd, tmpname);
	}
	if (r < 0 && tmpname[0]) {
		fspath_discard(dirfd, tmpname);
	}
	if (r == 0) {
		remove_parts(destfd, stagefd, a);
	}
out:
	for (size_t i = 0; fds && i < a->count; i++) {
		if (fds[i] >= 0) {
			close(fds[i]);
		}
	}
	*ret_code = j.code;
	return r;
}

int assemble_discard(int destfd, const struct msg_assemble *a, uint32_t *ret_code, char *why,
		     size_t whylen)
{
	_cleanup_close_ int stagefd = -1;
	int r = fspath_open_dir(destfd, a->staging, &stagefd);

	why[0] = '\0';
	*ret_code = PERR_OK;
	if (r == -ENOENT) {
		return 0;
	}
	if (r < 0) {
		*ret_code = perr_of(r);
		snprintf(why, whylen, "the parts' directory: %s",
			 r == -ELOOP || r == -EXDEV ? "symlink or escape refused" : strerror(-r));
		return r;
	}
	remove_parts(destfd, stagefd, a);
	return 0;
}

/* The staging directory beneath destfd, made (0700: the parts are no one's files yet) if missing. */
static int seed_staging(int destfd, const char *staging, int *ret_fd)
{
	_cleanup_close_ int parentfd = -1;
	const char *leaf;
	int r = fspath_open_dir(destfd, staging, ret_fd);

	if (r != -ENOENT) {
		return r;
	}
	r = fspath_open_parent(destfd, staging, false, &parentfd, &leaf);
	if (r < 0) {
		return r;
	}
	if (mkdirat(parentfd, leaf, 0700) < 0 && errno != EEXIST) {
		return negerrno();
	}
	return fspath_open_dir(parentfd, leaf, ret_fd);
}

/* One part not in staging yet: bytes [p->offset, + p->len) of filefd, linked in whole. */
static int seed_part(int stagefd, int filefd, const struct proto_part *p, uint8_t *buf)
{
	_cleanup_close_ int fd = -1;
	char tmpname[FSPATH_NAME_MAX + 1] = "";
	struct stat st;
	int r;

	if (fstatat(stagefd, p->name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) {
		return 0; /* there already (an old copy as good as any), or not ours to touch */
	}
	r = fspath_create_anon(stagefd, 0600, &fd);
	if (r == -EOPNOTSUPP) {
		r = fspath_create_temp(stagefd, p->name, &fd, tmpname, sizeof(tmpname));
	}
	if (r == 0) {
		r = copy_range(filefd, p->offset, fd, 0, p->len, buf);
	}
	if (r == 0) {
		r = tmpname[0] ? (renameat(stagefd, tmpname, stagefd, p->name) < 0 ? negerrno() : 0)
			       : fspath_link_anon(stagefd, fd, p->name);
	}
	if (r < 0 && tmpname[0]) {
		fspath_discard(stagefd, tmpname);
	}
	return r;
}

int assemble_seed(int destfd, const struct msg_assemble *a, uint64_t *ret_bytes, uint32_t *ret_code,
		  char *why, size_t whylen)
{
	_cleanup_close_ int dirfd = -1, filefd = -1, stagefd = -1;
	_cleanup_free_ uint8_t *buf = NULL;
	const char *leaf;
	struct stat st;
	int r;

	*ret_bytes = 0;
	*ret_code = PERR_OK;
	why[0] = '\0';
	r = fspath_open_parent(destfd, a->name, false, &dirfd, &leaf);
	if (r == 0) {
		filefd =
		    openat(dirfd, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		r = filefd < 0 ? negerrno() : fstat(filefd, &st) < 0 ? negerrno() : 0;
	}
	/* No old file, none to read as one (a symlink anywhere): nothing seeded, each range goes whole. */
	if (r == -ENOENT || r == -ELOOP || r == -EXDEV || r == -ENOTDIR ||
	    (r == 0 && !S_ISREG(st.st_mode))) {
		return 0;
	}
	r = r < 0 ? r : seed_staging(destfd, a->staging, &stagefd);
	buf = r < 0 ? NULL : malloc(ASSEMBLE_BUF);
	if (r == 0 && !buf) {
		r = -ENOMEM;
	}
	for (size_t i = 0; r == 0 && i < a->count; i++) {
		const struct proto_part *p = &a->parts[i];

		if (p->offset + p->len > (uint64_t)st.st_size) {
			continue; /* the old file is shorter: this range has no old copy */
		}
		r = seed_part(stagefd, filefd, p, buf);
		*ret_bytes += r == 0 ? p->len : 0;
	}
	if (r < 0) {
		*ret_code = perr_of(r);
		snprintf(why, whylen, "%s",
			 r == -EXDEV ? "symlink or escape refused" : strerror(-r));
	}
	return r;
}
