/* SPDX-License-Identifier: MIT */
/* Small kernel text files (see sysfile.h). */
#include "sysfile.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"

int sysfile_read_line(const char *path, char *buf, size_t len)
{
	_cleanup_close_ int fd = -1;
	ssize_t n;

	assert(len > 1);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		return negerrno();
	}
	n = read(fd, buf, len - 1);
	if (n < 0) {
		return negerrno();
	}
	if (n == 0) {
		return -ENODATA;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return (int)strlen(buf);
}
