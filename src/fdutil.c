/* SPDX-License-Identifier: MIT */
/* File descriptor flags (see fdutil.h). */
#include "fdutil.h"

#include <fcntl.h>

#include "macro.h"

int fd_set_nonblock(int fd, bool nonblock)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0) {
		return negerrno();
	}
	fl = nonblock ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	if (fcntl(fd, F_SETFL, fl) < 0) {
		return negerrno();
	}
	return 0;
}
