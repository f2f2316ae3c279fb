/* SPDX-License-Identifier: MIT */
/*
 * State the supervisor shares with its session processes: pinned memory
 * reserved against "memory budget", and bytes moved (for STATUS=). One
 * MAP_SHARED table created before the first fork, guarded by a robust
 * process-shared mutex, so a session that dies holding it can't wedge the
 * others. Entries are keyed by pid; the supervisor clears an entry when it
 * reaps the process, whatever state the process died in.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SESSIONS_MAX 4096
/*
 * A refusal of one kind is logged at once, then its repeats are counted and
 * said in one line per this interval (a client under --wait-busy retries
 * several times a second; a flood retries faster). The supervisor's
 * admission refusals and the sessions' BUSY for the memory budget alike.
 */
#define REFUSE_LOG_INTERVAL_MS 10000

struct session_table;

/* The sessions' BUSY refusals, each kind logged and counted apart. */
enum session_busy {
	SESSION_BUSY_MEMORY, /* "memory budget" in use */
	SESSION_BUSY_MODULE, /* a module's "max connections" reached */
	SESSION_BUSY_KINDS,
};

int session_table_create(uint64_t budget, struct session_table **ret);
void session_table_set_budget(struct session_table *s, uint64_t budget);

/* In a session process: reserve pinned bytes; -EBUSY over the budget. */
int session_table_reserve(struct session_table *s, uint64_t bytes);
void session_table_release(struct session_table *s);
/*
 * In a session process refused busy (kind): true when this refusal is to be
 * logged (none of its kind was for REFUSE_LOG_INTERVAL_MS), with the repeats
 * counted since the last one in *ret_counted; false when it is counted.
 */
bool session_table_note_busy(struct session_table *s, enum session_busy kind, uint64_t now_ms,
			     unsigned *ret_counted);
/*
 * In the supervisor: the repeats of kind counted whose interval is over
 * (all: any), taken in *ret_counted (0: none due). Returns the ms until the
 * next are due, or -1.
 */
int session_table_take_busy(struct session_table *s, enum session_busy kind, uint64_t now_ms,
			    bool all, unsigned *ret_counted);
/*
 * In a session process: count this session in module name from now on (the
 * last module it entered), unless max sessions other than this one are in
 * it already: -EBUSY then, and the session stays where it was. A session
 * counts until the supervisor reaps it ("max connections" of a module, as
 * rsyncd's).
 */
int session_table_enter_module(struct session_table *s, const char *name, unsigned max);
/* Sessions counted in module name now (tests, status). */
unsigned session_table_module_sessions(struct session_table *s, const char *name);
/* In a session process: bytes moved so far by this session. */
void session_table_add_bytes(struct session_table *s, uint64_t bytes);

/*
 * Pre-authentication accounting (SECURITY.md G47). In the supervisor, right
 * after fork: make sure pid has an entry; returns its slot, or -ENOSPC when
 * the table is full (the supervisor never has more than SESSIONS_MAX
 * children, so that can't happen). In the session: mark this session
 * authenticated (TLS and HELLO done). In the supervisor: has the child in
 * slot authenticated? An entry lives until its pid is reaped, so a child
 * that dies at any point is simply no longer counted.
 */
int session_table_register(struct session_table *s, pid_t pid);
void session_table_set_authenticated(struct session_table *s);
bool session_table_is_authenticated(struct session_table *s, int slot, pid_t pid);

/* In the supervisor: forget pid (reaped); its bytes count as moved. */
void session_table_reap(struct session_table *s, pid_t pid);
/* Totals for STATUS=: pinned bytes now, bytes moved ever. */
void session_table_totals(struct session_table *s, uint64_t *ret_pinned, uint64_t *ret_moved);
