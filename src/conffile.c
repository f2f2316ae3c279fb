/* SPDX-License-Identifier: MIT */
/* Config files: the whole file and its lines, within caps (see conffile.h). */
#include "conffile.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

/* What a path is instead of a regular file, for the message that refuses it. */
static const char *file_kind(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR:
		return "a directory";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFIFO:
		return "a FIFO";
	case S_IFSOCK:
		return "a socket";
	default:
		return "not a plain file";
	}
}

/*
 * Opened non-blocking, so a FIFO nobody writes to can't hang the open; then
 * refused unless fstat() says it is a regular file within the cap
 * (/dev/urandom or /dev/zero would otherwise be read for ever). Reading stops
 * one byte past the cap whatever the size said, so a file that grows
 * meanwhile, or a /proc file that claims size 0, is refused rather than read
 * on.
 */
int conffile_read(const char *path, char **ret_text, size_t *ret_len, char *why, size_t whylen)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	struct stat st;
	int r;

	assert(path && ret_text && ret_len && why && whylen > 0);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		r = negerrno();
		snprintf(why, whylen, "%s: cannot open: %s", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = negerrno();
		snprintf(why, whylen, "%s: cannot stat: %s", path, strerror(-r));
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "%s: not a regular file (it is %s): refusing to read it",
			 path, file_kind(st.st_mode));
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	if ((uint64_t)st.st_size > CONFFILE_MAX_SIZE) {
		snprintf(why, whylen,
			 "%s: file too big (%" PRIu64 " bytes, a config is at most %" PRIu64
			 " bytes)",
			 path, (uint64_t)st.st_size, CONFFILE_MAX_SIZE);
		return -EFBIG;
	}
	text = malloc(CONFFILE_MAX_SIZE + 2);
	if (!text) {
		snprintf(why, whylen, "%s: out of memory", path);
		return -ENOMEM;
	}
	while (len <= CONFFILE_MAX_SIZE) {
		ssize_t n = read(fd, text + len, CONFFILE_MAX_SIZE + 1 - len);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			r = negerrno();
			snprintf(why, whylen, "%s: read error: %s", path, strerror(-r));
			return r;
		}
		if (n == 0) {
			break;
		}
		len += (size_t)n;
	}
	if (len > CONFFILE_MAX_SIZE) {
		snprintf(why, whylen,
			 "%s: file grew past the cap of %" PRIu64 " bytes while being read", path,
			 CONFFILE_MAX_SIZE);
		return -EFBIG;
	}
	text[len] = '\0';
	*ret_text = TAKE_PTR(text);
	*ret_len = len;
	return 0;
}

bool conffile_next_line(const char *text, size_t len, size_t *pos, const char **ret_line,
			size_t *ret_line_len)
{
	const char *start = text + *pos;
	const char *nl;
	size_t n;

	if (*pos >= len) {
		return false;
	}
	nl = memchr(start, '\n', len - *pos);
	n = nl ? (size_t)(nl - start) : len - *pos;
	*pos += nl ? n + 1 : n;
	while (n > 0 && start[n - 1] == '\r') {
		n--;
	}
	*ret_line = start;
	*ret_line_len = n;
	return true;
}

int conffile_line_check(const char *line, size_t line_len, char *why, size_t whylen)
{
	/* A NUL would end the line early for a C-string parser and hide the rest. */
	if (memchr(line, '\0', line_len)) {
		snprintf(why, whylen, "NUL byte in line");
		return -EINVAL;
	}
	if (line_len > CONFFILE_MAX_LINE) {
		snprintf(why, whylen, "line too long (%zu bytes, at most %d)", line_len,
			 CONFFILE_MAX_LINE);
		return -E2BIG;
	}
	return 0;
}
