/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every file uses: scoped cleanup, ownership transfer,
 * container_of, array sizes. Modelled on systemd's cleanup-fundamental.h.
 */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#define _unused_       __attribute__((unused))
#define _noreturn_     __attribute__((noreturn))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _warn_unused_  __attribute__((warn_unused_result))

static inline void freep(void *p)
{
	free(*(void **)p);
}

static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

static inline void fclosep(FILE **f)
{
	if (*f) {
		fclose(*f);
	}
}

#define _cleanup_(f)	 __attribute__((cleanup(f)))
#define _cleanup_free_	 _cleanup_(freep)
#define _cleanup_close_	 _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Define a NULL-safe pointer cleanup function for a destructor. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
	static inline void func##p(type *p)     \
	{                                       \
		if (*p) {                       \
			func(*p);               \
		}                               \
	}

/* Hand ownership on: returns the value and leaves the variable empty. */
#define TAKE_PTR(p)                       \
	({                                \
		__typeof__(p) _tp_ = (p); \
		(p) = NULL;               \
		_tp_;                     \
	})

#define TAKE_FD(fd)              \
	({                       \
		int _tf_ = (fd); \
		(fd) = -1;       \
		_tf_;            \
	})

/* Convert a libc "-1 and errno" result into -errno. */
static inline int negerrno(void)
{
	return errno > 0 ? -errno : -EIO;
}

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
