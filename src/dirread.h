/* SPDX-License-Identifier: MIT */
/*
 * A directory's entries read straight with getdents64(2) from a descriptor
 * opened with O_DIRECTORY: what readdir(3) gives, without fdopendir(3)'s
 * fstat and two fcntl calls for each directory (a tree's walk opens
 * thousands), and without "." and "..".
 */
#pragma once

#include <dirent.h>

struct dir_reader;

/* A reader of directory fd (taken on success: dir_reader_close closes it). 0 or -ENOMEM. */
int dir_reader_open(int fd, struct dir_reader **ret);
/*
 * The next entry, valid until the next call: 1 with *ret; 0 at the end;
 * -errno when reading fails (the same error again after it).
 */
int dir_reader_next(struct dir_reader *d, const struct dirent64 **ret);
int dir_reader_fd(const struct dir_reader *d);
void dir_reader_close(struct dir_reader *d);
