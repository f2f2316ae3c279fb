/* SPDX-License-Identifier: MIT */
/*
 * Block devices as a receiver's targets (engine_params.write_devices): an
 * existing block device by the destination name is written in place,
 * opened O_EXCL (a mounted or held device is refused), never created,
 * never renamed over. Its commit: every chunk written and hashed as for a
 * file, the sender's digest matched, an fsync, then the device read back
 * (its cached pages dropped first) over the source's length on the hashing
 * thread, and that digest matched too before the file is reported done.
 * Any other special file where data should go is refused, so a FIFO or a
 * character device is never written to nor replaced by a file.
 */
#include "engine-internal.h"
#include "engine_partial.h"

#include "hello.h"

#include <linux/openat2.h>
#include <sys/syscall.h>

/* Open the block device leaf of dirfd for writing, exclusively, and check it is still st. */
static int device_open(int dirfd, const char *leaf, const struct stat *st, int *ret_fd)
{
	struct open_how how = {
		.flags = O_RDWR | O_EXCL | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	_cleanup_close_ int fd = -1;
	struct stat now;

	do {
		fd = (int)syscall(SYS_openat2, dirfd, leaf, &how, sizeof(how));
	} while (fd < 0 && errno == EAGAIN);
	if (fd < 0) {
		return negerrno();
	}
	if (fstat(fd, &now) < 0) {
		return negerrno();
	}
	/* Swapped for something else between the look and the open. */
	if (!S_ISBLK(now.st_mode) || now.st_rdev != st->st_rdev) {
		return -ESTALE;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/*
 * What is at f's destination name: PERR_OK with *ret_blk false for nothing
 * there, a file, a directory or a symlink (the usual path); PERR_OK with
 * *ret_blk and *st for a block device the receiver may write; else the
 * refusal, its text in text.
 */
static uint32_t device_look(struct engine *e, struct efile *f, struct stat *st, bool *ret_blk,
			    char *text, size_t textlen)
{
	int dirfd = e->dirs[f->dir].fd;
	const char *kind;

	*ret_blk = false;
	f->old_seen = true;
	f->old_mode = 0;
	/*
	 * In a directory this session made, nothing is there to look at (rx_fresh_add).
	 * Whatever another writer puts there meanwhile is replaced at commit, as
	 * if it had come after this look.
	 */
	if (e->dirs[f->dir].fresh) {
		return PERR_OK;
	}
	if (fstatat(dirfd, f->leaf, st, AT_SYMLINK_NOFOLLOW) < 0) {
		/* Nothing there (the usual case), or the usual path reports it. */
		return PERR_OK;
	}
	f->old_mode = (uint32_t)st->st_mode;
	if (S_ISLNK(st->st_mode) && e->p->write_devices) {
		struct stat to;

		/* Looked at only: a device is written by its own name, never through a link. */
		if (fstatat(dirfd, f->leaf, &to, 0) == 0 && S_ISBLK(to.st_mode)) {
			snprintf(text, textlen,
				 "a symlink to a block device: devices are written by their own "
				 "name only");
			return PERR_DEVICE_REFUSED;
		}
	}
	/* The rule every path follows (fspath.h); a directory there fails at commit. */
	if (fspath_replace_rule(st->st_mode, &kind) != -EPERM) {
		return PERR_OK;
	}
	if (!S_ISBLK(st->st_mode)) {
		snprintf(text, textlen, "%s is there: only a block device takes data in place",
			 kind);
		return PERR_DEVICE_REFUSED;
	}
	if (!e->p->write_devices) {
		snprintf(text, textlen,
			 "a block device: writing devices is not enabled here (a daemon's module "
			 "needs 'devices = yes', a client --write-devices)");
		return PERR_DEVICE_REFUSED;
	}
	*ret_blk = true;
	return PERR_OK;
}

static uint32_t device_too_small(const struct efile *f, uint64_t size, char *text, size_t textlen)
{
	if (size >= f->size) {
		return PERR_OK;
	}
	snprintf(text, textlen, "block device of %llu bytes: smaller than the source's %llu bytes",
		 (unsigned long long)size, (unsigned long long)f->size);
	return PERR_DEVICE_SMALL;
}

static uint32_t rx_device_probe(struct engine *e, struct efile *f, bool *ret_blk, char *text,
				size_t textlen)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	uint64_t size;
	bool blk;
	uint32_t code = device_look(e, f, &st, &blk, text, textlen);
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	*ret_blk = blk;
	if (code != PERR_OK || !blk) {
		return code;
	}
	/* A look only: its size; whether it is free is known when a real run opens it. */
	fd = (int)syscall(SYS_openat2, e->dirs[f->dir].fd, f->leaf, &how, sizeof(how));
	int r = fd < 0 ? negerrno() : diskio_blk_geometry(fd, &size, NULL);

	if (r < 0) {
		snprintf(text, textlen, "block device: %s", strerror(-r));
		return errno_to_perr(r);
	}
	return device_too_small(f, size, text, textlen);
}

static uint32_t rx_device_target(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	struct stat st;
	uint64_t size;
	bool blk;
	uint32_t code = device_look(e, f, &st, &blk, text, textlen);
	int fd, r;

	if (code != PERR_OK || !blk) {
		return code;
	}
	r = device_open(e->dirs[f->dir].fd, f->leaf, &st, &fd);
	if (r == -EBUSY) {
		snprintf(text, textlen, "block device in use (mounted, or held open exclusively)");
		return PERR_DEVICE_BUSY;
	}
	if (r < 0) {
		snprintf(text, textlen, "open block device: %s", strerror(-r));
		return errno_to_perr(r);
	}
	r = diskio_blk_geometry(fd, &size, NULL);
	if (r < 0) {
		close(fd);
		snprintf(text, textlen, "block device size: %s", strerror(-r));
		return errno_to_perr(r);
	}
	code = device_too_small(f, size, text, textlen);
	if (code != PERR_OK) {
		close(fd);
		return code;
	}
	f->tfd = fd;
	f->device = true;
	return PERR_OK;
}

/* The worker's digest of the device read back, while the commit waits for it. */
static int rx_device_read_back(struct engine *e, struct efile *f, int r,
			       const uint8_t hash[HASH_LEN])
{
	return f->dev_verify ? rx_device_verified(e, f, r, hash) : 0;
}

static int rx_device_verify_start(struct engine *e, struct efile *f)
{
	int fd, r;

	/*
	 * What was written is durable (fsynced); read it back from the device,
	 * not from the page cache its buffered tail may still sit in.
	 */
	r = posix_fadvise(f->tfd, 0, (off_t)f->size, POSIX_FADV_DONTNEED);
	if (r != 0) {
		file_fail(f, PERR_IO, "drop cached device pages: %s", strerror(r));
		return rx_resolve(e, f);
	}
	fd = fcntl(f->tfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0) {
		file_fail(f, PERR_IO, "read back the device: %s", strerror(errno));
		return rx_resolve(e, f);
	}
	f->dev_verify = true;
	/* Checked by chunk digests: only what was written since the digest pass is read. */
	return f->tree ? delta_tree_read_back(e, f, fd, rx_device_read_back)
		       : sums_queue(e, f, fd, rx_device_read_back);
}

int rx_device_verified(struct engine *e, struct efile *f, int r, const uint8_t hash[HASH_LEN])
{
	f->dev_verify = false;
	if (r < 0) {
		file_fail(f, errno_to_perr(r), "read back the device: %s", strerror(-r));
	} else if (CRYPTO_memcmp(hash, f->done_hash, HASH_LEN) != 0) {
		char a[33], b[33];

		hash_to_hex(f->done_hash, a);
		hash_to_hex(hash, b);
		if (f->zero_assumed > 0) {
			/* By far the likeliest cause (not proven: the read back is one digest). */
			file_fail(f, PERR_INTEGRITY,
				  "device read back does not match (device xxh128 %s): most likely "
				  "it did not read as zeros where --assume-zero-target left %llu "
				  "bytes unwritten; copy again without it",
				  b, (unsigned long long)f->zero_assumed);
		} else {
			file_fail(f, PERR_INTEGRITY,
				  "device read back does not match: sender xxh128 %s, device %s", a,
				  b);
		}
	}
	/* Nothing to rename: the device is in place; its journal (--partial) has done its work. */
	if (!f->failed && f->partial) {
		rx_partial_committed(e, f);
	}
	f->renamed = true;
	return rx_resolve(e, f);
}

/*
 * Block device targets are the receiver's. --assume-zero-target is its own
 * knowledge only: a pull's is the client's option, a push's the OPEN.
 */
static bool device_enable(struct engine *e)
{
	const struct engine_params *p = e->p;

	e->assume_zero = p->role == ENGINE_RECEIVER && (p->open_flags & PROTO_OPEN_ASSUME_ZERO) &&
			 (hello_local_caps() & PROTO_CAP_ASSUME_ZERO);
	return p->role == ENGINE_RECEIVER;
}

/* A device is in place once fsynced: its read back decides (rx_device_verified). */
static int device_rx_durable(struct engine *e, struct efile *f)
{
	if (!f->device) {
		return ENGINE_DECLINED;
	}
	rx_device_verify_start(e, f);
	return 0;
}

const struct engine_feature engine_feature_device = {
	.name = "device",
	.enable = device_enable,
	.rx_target = rx_device_target,
	.rx_probe_target = rx_device_probe,
	.rx_durable = device_rx_durable,
};
