/* SPDX-License-Identifier: MIT */
/* Text files that may be zstd-compressed (zfile.h). */
#include "zfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#define ZFILE_BUF (128 * 1024)

static const uint8_t zstd_magic[4] = { 0x28, 0xb5, 0x2f, 0xfd };

struct zreader {
	int fd;
	bool compressed;
	ZSTD_DCtx *z;
	uint8_t *in, *out; /* ZFILE_BUF each */
	size_t in_pos, in_len, out_pos, out_len;
	bool in_eof;
	size_t frame_left; /* ZSTD_decompressStream's last hint: 0 at a frame's end */
	uint64_t pos;	   /* of the text */
	char err[160];
};

static int read_full(int fd, void *buf, size_t len, size_t *ret)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (uint8_t *)buf + got, len - got);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			return -errno;
		}
		if (n == 0) {
			break;
		}
		got += (size_t)n;
	}
	*ret = got;
	return 0;
}

static int reader_start(struct zreader *r)
{
	if (lseek(r->fd, 0, SEEK_SET) < 0) {
		return -errno;
	}
	r->in_pos = r->in_len = r->out_pos = r->out_len = 0;
	r->in_eof = false;
	r->frame_left = 0;
	r->pos = 0;
	if (r->compressed) {
		ZSTD_DCtx_reset(r->z, ZSTD_reset_session_only);
	}
	return 0;
}

int zreader_open(const char *path, struct zreader **ret)
{
	struct zreader *r = calloc(1, sizeof(*r));
	uint8_t magic[4];
	size_t got;
	int q;

	if (!r) {
		return -ENOMEM;
	}
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0) {
		q = -errno;
		free(r);
		return q;
	}
	r->in = malloc(ZFILE_BUF);
	r->out = malloc(ZFILE_BUF);
	q = !r->in || !r->out ? -ENOMEM : read_full(r->fd, magic, sizeof(magic), &got);
	if (q == 0 && got == sizeof(magic) && !memcmp(magic, zstd_magic, sizeof(magic))) {
		r->compressed = true;
		r->z = ZSTD_createDCtx();
		if (!r->z || ZSTD_isError(ZSTD_DCtx_setParameter(r->z, ZSTD_d_windowLogMax,
								 ZFILE_WINDOW_LOG_MAX))) {
			q = -ENOMEM;
		}
	}
	if (q == 0) {
		q = reader_start(r);
	}
	if (q < 0) {
		zreader_close(r);
		return q;
	}
	*ret = r;
	return 0;
}

bool zreader_compressed(const struct zreader *r)
{
	return r->compressed;
}

const char *zreader_error(const struct zreader *r)
{
	return r->err;
}

/* More text into r->out once it is used up: 1, 0 at the end, or an error. */
static int fill(struct zreader *r)
{
	size_t got;
	int q;

	if (r->out_pos < r->out_len) {
		return 1;
	}
	r->out_pos = r->out_len = 0;
	if (!r->compressed) {
		q = read_full(r->fd, r->out, ZFILE_BUF, &got);
		if (q < 0) {
			return q;
		}
		r->out_len = got;
		return got > 0;
	}
	for (;;) {
		ZSTD_inBuffer in;
		ZSTD_outBuffer out = { .dst = r->out, .size = ZFILE_BUF, .pos = 0 };
		size_t z;

		if (r->in_pos == r->in_len && !r->in_eof) {
			q = read_full(r->fd, r->in, ZFILE_BUF, &got);
			if (q < 0) {
				return q;
			}
			r->in_pos = 0;
			r->in_len = got;
			r->in_eof = got < ZFILE_BUF;
		}
		if (r->in_pos == r->in_len && r->in_eof && r->frame_left == 0) {
			return 0;
		}
		in = (ZSTD_inBuffer){ .src = r->in, .size = r->in_len, .pos = r->in_pos };
		z = ZSTD_decompressStream(r->z, &out, &in);
		r->in_pos = in.pos;
		if (ZSTD_isError(z)) {
			snprintf(r->err, sizeof(r->err), "the zstd stream is corrupt (%s)",
				 ZSTD_getErrorName(z));
			return -EBADMSG;
		}
		r->frame_left = z;
		if (out.pos > 0) {
			r->out_len = out.pos;
			return 1;
		}
		if (r->in_pos == r->in_len && r->in_eof && r->frame_left != 0) {
			snprintf(r->err, sizeof(r->err),
				 "the zstd stream ends inside a frame (cut short?)");
			return -EBADMSG;
		}
	}
}

int zreader_gets(struct zreader *r, char *buf, size_t cap, size_t *ret_len)
{
	size_t len = 0;
	int q;

	if (cap == 0) {
		return -EINVAL;
	}
	while (len + 1 < cap) {
		const uint8_t *p, *nl;
		size_t n;

		q = fill(r);
		if (q < 0) {
			return q;
		}
		if (q == 0) {
			break;
		}
		p = r->out + r->out_pos;
		n = r->out_len - r->out_pos;
		if (n > cap - 1 - len) {
			n = cap - 1 - len;
		}
		nl = memchr(p, '\n', n);
		if (nl) {
			n = (size_t)(nl - p) + 1;
		}
		memcpy(buf + len, p, n);
		len += n;
		r->out_pos += n;
		r->pos += n;
		if (nl) {
			break;
		}
	}
	buf[len] = '\0';
	*ret_len = len;
	return len > 0;
}

uint64_t zreader_tell(const struct zreader *r)
{
	return r->pos;
}

int zreader_seek(struct zreader *r, uint64_t off)
{
	int q;

	if (!r->compressed) {
		if (lseek(r->fd, (off_t)off, SEEK_SET) < 0) {
			return -errno;
		}
		r->out_pos = r->out_len = 0;
		r->pos = off;
		return 0;
	}
	q = reader_start(r);
	while (q == 0 && r->pos < off) {
		size_t n;

		q = fill(r);
		if (q == 0) {
			return -EIO; /* shorter than it was */
		}
		if (q < 0) {
			return q;
		}
		n = r->out_len - r->out_pos;
		if (n > off - r->pos) {
			n = (size_t)(off - r->pos);
		}
		r->out_pos += n;
		r->pos += n;
		q = 0;
	}
	return q;
}

void zreader_close(struct zreader *r)
{
	if (!r) {
		return;
	}
	if (r->fd >= 0) {
		close(r->fd);
	}
	ZSTD_freeDCtx(r->z);
	free(r->in);
	free(r->out);
	free(r);
}

/* ---- writing ------------------------------------------------------------------- */

struct zwriter {
	int fd;
	ZSTD_CCtx *z; /* NULL: plain */
	uint8_t *out; /* ZFILE_BUF */
};

static int write_full(int fd, const void *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			return -errno;
		}
		buf = (const uint8_t *)buf + n;
		len -= (size_t)n;
	}
	return 0;
}

int zwriter_new(int fd, bool compress, struct zwriter **ret)
{
	struct zwriter *w = calloc(1, sizeof(*w));

	if (!w) {
		return -ENOMEM;
	}
	w->fd = fd;
	if (compress) {
		w->z = ZSTD_createCCtx();
		w->out = malloc(ZFILE_BUF);
		if (!w->z || !w->out ||
		    ZSTD_isError(
			ZSTD_CCtx_setParameter(w->z, ZSTD_c_compressionLevel, ZFILE_LEVEL)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(w->z, ZSTD_c_checksumFlag, 1))) {
			zwriter_free(w);
			return -ENOMEM;
		}
	}
	*ret = w;
	return 0;
}

/* Compress in (all of it with ZSTD_e_continue; to the frame's end with ZSTD_e_end). */
static int compress_out(struct zwriter *w, ZSTD_inBuffer *in, ZSTD_EndDirective how)
{
	for (;;) {
		ZSTD_outBuffer out = { .dst = w->out, .size = ZFILE_BUF, .pos = 0 };
		size_t z = ZSTD_compressStream2(w->z, &out, in, how);
		int q;

		if (ZSTD_isError(z)) {
			return -EIO;
		}
		q = write_full(w->fd, w->out, out.pos);
		if (q < 0) {
			return q;
		}
		if (how == ZSTD_e_end ? z == 0 : in->pos == in->size) {
			return 0;
		}
	}
}

int zwriter_write(struct zwriter *w, const void *buf, size_t len)
{
	ZSTD_inBuffer in = { .src = buf, .size = len, .pos = 0 };

	if (!w->z) {
		return write_full(w->fd, buf, len);
	}
	return compress_out(w, &in, ZSTD_e_continue);
}

int zwriter_finish(struct zwriter *w)
{
	ZSTD_inBuffer in = { .src = NULL, .size = 0, .pos = 0 };

	if (!w->z) {
		return 0;
	}
	return compress_out(w, &in, ZSTD_e_end);
}

void zwriter_free(struct zwriter *w)
{
	if (!w) {
		return;
	}
	ZSTD_freeCCtx(w->z);
	free(w->out);
	free(w);
}
