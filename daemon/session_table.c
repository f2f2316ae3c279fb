/* SPDX-License-Identifier: MIT */
/* The supervisor/session shared table (see session_table.h). */
#include "session_table.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "macro.h"

struct entry {
	pid_t pid; /* 0: free */
	uint64_t pinned;
	uint64_t bytes;
	uint32_t authenticated; /* set once by the session after HELLO; read by the supervisor */
	char module[64];	/* the module it entered last, "" none (struct module.name) */
};

/* BUSY refusals of one kind: the last logged, the repeats counted since. */
struct busy_log {
	uint64_t logged_ms;
	uint32_t counted;
};

struct session_table {
	pthread_mutex_t lock;
	uint64_t budget;
	uint64_t moved_done; /* bytes of reaped sessions */
	struct busy_log busy[SESSION_BUSY_KINDS];
	struct entry e[SESSIONS_MAX];
};

static void lock(struct session_table *s)
{
	/* A session killed while holding the lock: its entry is cleaned at reap. */
	if (pthread_mutex_lock(&s->lock) == EOWNERDEAD) {
		pthread_mutex_consistent(&s->lock);
	}
}

static void unlock(struct session_table *s)
{
	pthread_mutex_unlock(&s->lock);
}

int session_table_create(uint64_t budget, struct session_table **ret)
{
	pthread_mutexattr_t a;
	struct session_table *s;

	s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s == MAP_FAILED) {
		return negerrno();
	}
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&s->lock, &a);
	pthread_mutexattr_destroy(&a);
	s->budget = budget;
	*ret = s;
	return 0;
}

void session_table_set_budget(struct session_table *s, uint64_t budget)
{
	lock(s);
	s->budget = budget;
	unlock(s);
}

static struct entry *find(struct session_table *s, pid_t pid)
{
	for (size_t i = 0; i < SESSIONS_MAX; i++) {
		if (s->e[i].pid == pid) {
			return &s->e[i];
		}
	}
	return NULL;
}

/* This process's entry, made on first use; NULL when the table is full. */
static struct entry *own(struct session_table *s)
{
	pid_t me = getpid();
	struct entry *e = find(s, me);

	if (!e) {
		e = find(s, 0);
		if (e) {
			*e = (struct entry){ .pid = me };
		}
	}
	return e;
}

int session_table_reserve(struct session_table *s, uint64_t bytes)
{
	uint64_t used = 0;
	struct entry *e;
	int r = 0;

	lock(s);
	for (size_t i = 0; i < SESSIONS_MAX; i++) {
		if (s->e[i].pid && s->e[i].pid != getpid()) {
			used += s->e[i].pinned;
		}
	}
	e = own(s);
	if (!e || used > s->budget || bytes > s->budget - used) {
		r = -EBUSY;
	} else {
		e->pinned = bytes;
	}
	unlock(s);
	return r;
}

void session_table_release(struct session_table *s)
{
	struct entry *e;

	lock(s);
	e = find(s, getpid());
	if (e) {
		e->pinned = 0;
	}
	unlock(s);
}

void session_table_add_bytes(struct session_table *s, uint64_t bytes)
{
	/* A hot path: the entry is found once per process, the add is lock-free. */
	static struct entry *self;
	static pid_t self_pid;

	if (!self || self_pid != getpid()) {
		lock(s);
		self = own(s);
		self_pid = getpid();
		unlock(s);
	}
	if (self) {
		__atomic_add_fetch(&self->bytes, bytes, __ATOMIC_RELAXED);
	}
}

int session_table_register(struct session_table *s, pid_t pid)
{
	struct entry *e;
	int r;

	lock(s);
	/* The child may have made its entry first (own()); the same one then. */
	e = find(s, pid);
	if (!e) {
		e = find(s, 0);
		if (e) {
			*e = (struct entry){ .pid = pid };
		}
	}
	r = e ? (int)(e - s->e) : -ENOSPC;
	unlock(s);
	return r;
}

void session_table_set_authenticated(struct session_table *s)
{
	struct entry *e;

	lock(s);
	e = own(s);
	if (e) {
		__atomic_store_n(&e->authenticated, 1, __ATOMIC_RELEASE);
	}
	unlock(s);
}

bool session_table_is_authenticated(struct session_table *s, int slot, pid_t pid)
{
	const struct entry *e;

	if (slot < 0 || slot >= SESSIONS_MAX) {
		return false;
	}
	e = &s->e[slot];
	/* The entry is the child's until the supervisor reaps it; no lock needed to read. */
	return __atomic_load_n(&e->pid, __ATOMIC_ACQUIRE) == pid &&
	       __atomic_load_n(&e->authenticated, __ATOMIC_ACQUIRE) != 0;
}

void session_table_reap(struct session_table *s, pid_t pid)
{
	struct entry *e;

	lock(s);
	e = find(s, pid);
	if (e) {
		s->moved_done += e->bytes;
		memset(e, 0, sizeof(*e));
	}
	unlock(s);
}

void session_table_totals(struct session_table *s, uint64_t *ret_pinned, uint64_t *ret_moved)
{
	uint64_t pinned = 0, moved;

	lock(s);
	moved = s->moved_done;
	for (size_t i = 0; i < SESSIONS_MAX; i++) {
		if (s->e[i].pid) {
			pinned += s->e[i].pinned;
			moved += __atomic_load_n(&s->e[i].bytes, __ATOMIC_RELAXED);
		}
	}
	unlock(s);
	*ret_pinned = pinned;
	*ret_moved = moved;
}

bool session_table_note_busy(struct session_table *s, enum session_busy kind, uint64_t now_ms,
			     unsigned *ret_counted)
{
	struct busy_log *b = &s->busy[kind];
	bool say;

	assert(kind < SESSION_BUSY_KINDS);
	lock(s);
	say = b->logged_ms == 0 || now_ms - b->logged_ms >= REFUSE_LOG_INTERVAL_MS;
	if (say) {
		*ret_counted = b->counted;
		b->counted = 0;
		b->logged_ms = now_ms;
	} else {
		b->counted++;
	}
	unlock(s);
	return say;
}

int session_table_take_busy(struct session_table *s, enum session_busy kind, uint64_t now_ms,
			    bool all, unsigned *ret_counted)
{
	struct busy_log *b = &s->busy[kind];
	uint64_t due;
	int next = -1;

	assert(kind < SESSION_BUSY_KINDS);
	*ret_counted = 0;
	lock(s);
	due = b->logged_ms + REFUSE_LOG_INTERVAL_MS;
	if (b->counted > 0 && (all || now_ms >= due)) {
		*ret_counted = b->counted;
		b->counted = 0;
		b->logged_ms = now_ms;
	} else if (b->counted > 0) {
		next = (int)(due - now_ms);
	}
	unlock(s);
	return next;
}

/* Sessions other than pid counted in module name; under the lock. */
static unsigned count_in_module(const struct session_table *s, const char *name, pid_t pid)
{
	unsigned n = 0;

	for (size_t i = 0; i < SESSIONS_MAX; i++) {
		n += s->e[i].pid && s->e[i].pid != pid && strcmp(s->e[i].module, name) == 0;
	}
	return n;
}

int session_table_enter_module(struct session_table *s, const char *name, unsigned max)
{
	struct entry *e;
	int r = 0;

	assert(name[0] && strlen(name) < sizeof(e->module));
	lock(s);
	e = own(s);
	if (!e) {
		r = -ENOSPC; /* can't happen: the supervisor registered this pid */
	} else if (strcmp(e->module, name) != 0 && count_in_module(s, name, getpid()) >= max) {
		r = -EBUSY;
	} else {
		snprintf(e->module, sizeof(e->module), "%s", name);
	}
	unlock(s);
	return r;
}

unsigned session_table_module_sessions(struct session_table *s, const char *name)
{
	unsigned n;

	lock(s);
	n = count_in_module(s, name, 0);
	unlock(s);
	return n;
}
