/* SPDX-License-Identifier: MIT */
/*
 * Text files that may be zstd-compressed (migration plans, plan.h): a
 * reader that tells a zstd frame by its magic number and decompresses as it
 * goes, lines out through bounded buffers (fgets-like), and a writer that
 * compresses or not. Memory is fixed whatever the file's size: the
 * decompressor's window is capped (ZFILE_WINDOW_LOG_MAX), a frame that asks
 * for more is refused as corrupt.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZFILE_WINDOW_LOG_MAX 23 /* 8 MiB: zstd -19 and below stay under it */
#define ZFILE_LEVEL	     3

struct zreader;
/* Open path for reading; zstd or plain, told by the first four bytes. 0 or -errno. */
int zreader_open(const char *path, struct zreader **ret);
bool zreader_compressed(const struct zreader *r);
/*
 * Like fgets: up to cap - 1 bytes, through the first newline, into buf,
 * NUL-terminated; their count in *ret_len. 1, 0 at the end, -EBADMSG (a
 * corrupt or cut-short zstd stream: zreader_error says which) or -errno.
 */
int zreader_gets(struct zreader *r, char *buf, size_t cap, size_t *ret_len);
/* The offset in the text (decompressed) of the next byte zreader_gets reads. */
uint64_t zreader_tell(const struct zreader *r);
/* Back to an offset zreader_tell gave: a plain file seeks, a zstd one decompresses from its start. */
int zreader_seek(struct zreader *r, uint64_t off);
/* What was wrong after -EBADMSG; "" before. */
const char *zreader_error(const struct zreader *r);
void zreader_close(struct zreader *r);

struct zwriter;
/* Writes go to fd (not closed here), zstd-compressed when compress. 0 or -errno. */
int zwriter_new(int fd, bool compress, struct zwriter **ret);
int zwriter_write(struct zwriter *w, const void *buf, size_t len);
/* Ends the frame and writes out what is held. 0 or -errno. */
int zwriter_finish(struct zwriter *w);
void zwriter_free(struct zwriter *w);
