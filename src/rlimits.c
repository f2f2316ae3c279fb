/* SPDX-License-Identifier: MIT */
/* Process limits (see rlimits.h). */
#include "rlimits.h"

#include <sys/resource.h>

#include "macro.h"

long limits_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		return negerrno();
	}
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
			return negerrno();
		}
	}
	return (long)rl.rlim_cur;
}
