/* SPDX-License-Identifier: MIT */
/* File descriptor flags: the one place that toggles O_NONBLOCK. */
#pragma once

#include <stdbool.h>

/* Set (nonblock true) or clear O_NONBLOCK on fd, keeping its other status flags. */
int fd_set_nonblock(int fd, bool nonblock);
