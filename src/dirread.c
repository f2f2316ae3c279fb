/* SPDX-License-Identifier: MIT */
#include "dirread.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* As readdir(3)'s buffer: most directories are read in one call, and one more says the end. */
#define DIR_READER_BUF 32768

struct dir_reader {
	int fd;
	int error; /* -errno once reading failed */
	size_t pos, len;
	char buf[DIR_READER_BUF] __attribute__((aligned(8)));
};

int dir_reader_open(int fd, struct dir_reader **ret)
{
	struct dir_reader *d = malloc(sizeof(*d));

	if (!d) {
		return -ENOMEM;
	}
	d->fd = fd;
	d->error = 0;
	d->pos = d->len = 0;
	*ret = d;
	return 0;
}

int dir_reader_next(struct dir_reader *d, const struct dirent64 **ret)
{
	for (;;) {
		const struct dirent64 *de;
		const void *rec;

		if (d->error) {
			return d->error;
		}
		if (d->pos >= d->len) {
			ssize_t n = getdents64(d->fd, d->buf, sizeof(d->buf));

			if (n < 0) {
				d->error = errno ? -errno : -EIO;
				return d->error;
			}
			if (n == 0) {
				return 0;
			}
			d->pos = 0;
			d->len = (size_t)n;
		}
		/* The kernel aligns every record to 8 bytes, as buf is (checked below). */
		rec = d->buf + d->pos;
		de = rec;
		/* The kernel's records; one that does not fit what it returned is its bug, not ours. */
		if (de->d_reclen == 0 || de->d_reclen % 8 != 0 || de->d_reclen > d->len - d->pos) {
			d->error = -EIO;
			return d->error;
		}
		d->pos += de->d_reclen;
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
			*ret = de;
			return 1;
		}
	}
}

int dir_reader_fd(const struct dir_reader *d)
{
	return d->fd;
}

void dir_reader_close(struct dir_reader *d)
{
	if (d) {
		close(d->fd);
		free(d);
	}
}
