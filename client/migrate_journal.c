/* SPDX-License-Identifier: MIT */
/*
 * Writing journals (migrate.h): a run's or finalize's own (locked, loaded
 * and checked, a torn last line cut, then a line per outcome, fsynced at
 * most once a second, journal_outcome), and finalize's "failed" lines in the shards'
 * journals (journal_marks) for what it found not done.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "migrate.h"
#include "ndjson.h"
#include "plan.h"

void journal_sync(struct journal_writer *j)
{
	if (fflush(j->f) != 0 || fdatasync(j->fd) < 0) {
		j->err = j->err ? j->err : -EIO;
	}
	j->unsynced = 0;
	j->synced_at = now_seconds();
}

/*
 * An outcome written: the journal fsynced once JOURNAL_SYNC_EVERY outcomes
 * wait and JOURNAL_SYNC_SECS have passed since the last sync. An outcome
 * lost in a crash is only work done again (the next run finds the file
 * there and keeps it), so a sync bounds that work, not a guarantee: by
 * count alone a shard of small skipped files paid a sync every few
 * milliseconds of its run.
 */
void journal_outcome(struct journal_writer *j)
{
	if (++j->unsynced >= JOURNAL_SYNC_EVERY &&
	    now_seconds() - j->synced_at >= JOURNAL_SYNC_SECS) {
		journal_sync(j);
	}
}

/*
 * A name the plan has and the source lost since: told by the push (a listed
 * name missing, or one gone before its sender opened it). A live migration
 * expects some; journaled apart, never a failure of the run. Accepted
 * (code MISSING_OK) when the run or the plan has --missing-ok.
 */
int vanished_state(struct journal_writer *j, const char *name, const char *action, const char *code,
		   const char **ret_code)
{
	struct stat st;
	char esc[1024];

	if (strcmp(action, "missing") != 0 &&
	    !(j->base && !strcmp(action, "failed") && code && !strcmp(code, "NOT_FOUND") &&
	      source_lstat(j->base, name, &st) == -ENOENT)) {
		return journal_state_parse(action);
	}
	j->vanished++;
	*ret_code = j->missing_ok ? "MISSING_OK" : NULL;
	if (!j->missing_ok && !j->quiet) {
		log_warning("%s: vanished from the source since the plan",
			    log_escape_short(name, esc, sizeof(esc)));
	}
	return JOURNAL_VANISHED;
}

void journal_observe(void *ud, const char *name, const char *action, uint64_t bytes,
		     const char *code, const uint8_t *hash)
{
	struct journal_writer *j = ud;

	(void)hash;
	int state = vanished_state(j, name, action, code, &code);

	if (state < 0) {
		return;
	}
	j->failed += state == JOURNAL_FAILED;
	journal_put_entry(j->f, name, state, bytes, code);
	j->bytes += bytes;
	journal_outcome(j);
}

/* Open and lock a journal: EXIT_SHARD_TAKEN when another run holds it. */
static int journal_lock(const char *jpath, const char *what, int *ret_fd)
{
	char esc[1024];
	int fd = open(jpath, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	if (fd < 0) {
		log_error("%s: %s", log_escape_short(jpath, esc, sizeof(esc)), strerror(errno));
		return EXIT_LOCAL_IO;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		close(fd);
		if (e == EWOULDBLOCK) {
			log_error("%s is running already (its journal %s is locked by another "
				  "process): one process per shard",
				  what, log_escape_short(jpath, esc, sizeof(esc)));
			return EXIT_SHARD_TAKEN;
		}
		log_error("%s: lock: %s", log_escape_short(jpath, esc, sizeof(esc)), strerror(e));
		return EXIT_LOCAL_IO;
	}
	*ret_fd = fd;
	return 0;
}

/* Lock, check and load a journal, cut a torn last line. j->fresh: it has no header yet. */
int journal_open(const char *jpath, const char *what, const struct plan_header *h, int64_t shard,
		 struct nameset *done, struct journal_writer *j)
{
	off_t good = 0;
	struct stat stt;
	int rc = journal_lock(jpath, what, &j->fd);

	if (rc != 0) {
		return rc;
	}
	rc = journal_load(j->fd, jpath, h->id, shard, h->shards, done, NULL, NULL, &good);
	if (rc == 0 && fstat(j->fd, &stt) == 0 && stt.st_size > good &&
	    ftruncate(j->fd, good) < 0) {
		rc = EXIT_LOCAL_IO;
	}
	if (rc != 0) {
		close(j->fd);
		return rc;
	}
	j->fresh = good == 0;
	return 0;
}

/* After journal_open: the header of a new journal, and this run's start. */
int journal_start(const struct plan_header *h, int64_t shard, struct journal_writer *j)
{
	if (!(j->f = fdopen(j->fd, "a"))) {
		close(j->fd);
		return EXIT_LOCAL_IO;
	}
	if (j->fresh) {
		journal_put_header(j->f, h->id, shard, h->shards);
	}
	journal_put_run(j->f, true, (double)time(NULL), 0, 0, 0);
	journal_sync(j);
	return 0;
}

int journal_begin(const char *jpath, const char *what, const struct plan_header *h, int64_t shard,
		  struct nameset *done, struct journal_writer *j)
{
	int rc = journal_open(jpath, what, h, shard, done, j);

	return rc != 0 ? rc : journal_start(h, shard, j);
}

int journal_end(struct journal_writer *j, int rc, double secs)
{
	journal_put_run(j->f, false, (double)time(NULL), rc, j->bytes, secs);
	journal_sync(j);
	if (fclose(j->f) != 0 && j->err == 0) {
		j->err = -EIO;
	}
	return j->err;
}

/* ---- finalize's word in the shards' journals ------------------------------------ */

#define MARKS_OPEN_MAX 256 /* shard journals held open at once */

int marks_init(struct journal_marks *jm, const char *plan, const struct plan_header *h)
{
	*jm = (struct journal_marks){ .plan = plan, .h = h };
	jm->v = calloc(h->shards, sizeof(*jm->v));
	return jm->v ? 0 : -ENOMEM;
}

void marks_close_all(struct journal_marks *jm)
{
	for (uint32_t i = 0; jm->v && i < jm->h->shards; i++) {
		FILE *f = jm->v[i].f;

		if (!f) {
			continue;
		}
		if (fflush(f) != 0 || fdatasync(fileno(f)) < 0) {
			log_warning("the journal of shard %" PRIu32 ": %s", i, strerror(errno));
		}
		fclose(f);
		jm->v[i].f = NULL;
	}
	jm->nopen = 0;
}

void marks_free(struct journal_marks *jm)
{
	marks_close_all(jm);
	free(jm->v);
	jm->v = NULL;
}

/* Where a journal's last whole line ends: its tail read back (a line is at most 64 KiB). */
static int journal_whole_end(int fd, off_t *ret)
{
	_cleanup_free_ char *buf = malloc(NDJSON_MAX_LINE + 2);
	struct stat st;
	off_t from;
	ssize_t n;
	char *nl;

	if (!buf || fstat(fd, &st) < 0) {
		return buf ? -errno : -ENOMEM;
	}
	from = st.st_size > NDJSON_MAX_LINE + 2 ? st.st_size - (NDJSON_MAX_LINE + 2) : 0;
	n = pread(fd, buf, (size_t)(st.st_size - from), from);
	if (n < 0 || n != st.st_size - from) {
		return n < 0 ? -errno : -EIO;
	}
	nl = memrchr(buf, '\n', (size_t)n);
	if (!nl && from > 0) {
		return -EBADMSG; /* more than a line's worth without a newline: not a torn line */
	}
	*ret = nl ? from + (nl - buf) + 1 : 0;
	return 0;
}

/* The journal of a shard, open for finalize's lines; NULL (said why) when it can't be. */
static FILE *marks_journal(struct journal_marks *jm, uint32_t shard)
{
	struct marked *mk = &jm->v[shard];
	char jpath[PATH_MAX], esc[1024];
	off_t good = 0;
	int fd, r = 0;

	if (mk->f || mk->refused) {
		return mk->f;
	}
	if (jm->nopen == MARKS_OPEN_MAX) {
		marks_close_all(jm);
	}
	if (journal_path(jm->plan, shard, jpath, sizeof(jpath)) < 0) {
		snprintf(jpath, sizeof(jpath), "%s (shard %" PRIu32 ")", jm->plan, shard);
		fd = -1;
		r = -ENAMETOOLONG;
	} else {
		fd = open(jpath, O_RDWR | O_APPEND | O_CLOEXEC);
		if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
			r = -errno;
		}
	}
	log_escape_short(jpath, esc, sizeof(esc));
	if (r == 0) {
		r = journal_whole_end(fd, &good);
	}
	if (r == 0 && ftruncate(fd, good) < 0) {
		r = -errno;
	}
	if (r == 0 && !(mk->f = fdopen(fd, "a"))) {
		r = -errno;
	}
	if (r < 0) {
		log_warning(
		    "%s: can't mark outcomes of shard %" PRIu32 " failed (%s): run finalize "
		    "again once the shard is not running",
		    esc, shard, r == -EWOULDBLOCK ? "its run holds the journal" : strerror(-r));
		if (fd >= 0) {
			close(fd);
		}
		mk->refused = true;
		return NULL;
	}
	if (good == 0) {
		journal_put_header(mk->f, jm->h->id, shard, jm->h->shards);
	}
	jm->nopen++;
	mk->used = true;
	return mk->f;
}

/* A failed line for an entry (range < 0) or a range of a split file, in its shard's journal. */
void marks_put(struct journal_marks *jm, uint32_t shard, const char *name, int64_t range,
	       const char *code)
{
	FILE *f = marks_journal(jm, shard);

	if (!f) {
		return;
	}
	if (range < 0) {
		journal_put_entry(f, name, JOURNAL_FAILED, 0, code);
	} else {
		journal_put_range(f, name, (uint32_t)range, JOURNAL_FAILED, 0, code, NULL);
	}
}

/* The shards marked, as "3, 17, 40" (the first few, then how many more); how many. */
size_t marks_shards(const struct journal_marks *jm, char *buf, size_t len)
{
	size_t used = 0, n = 0, shown = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < jm->h->shards; i++) {
		if (!jm->v[i].used) {
			continue;
		}
		n++;
		if (shown < 16 && used < len) {
			int w =
			    snprintf(buf + used, len - used, "%s%" PRIu32, shown ? ", " : "", i);

			used += w > 0 ? (size_t)w : 0;
			shown++;
		}
	}
	if (n > shown && used < len) {
		snprintf(buf + used, len - used, " and %zu more", n - shown);
	}
	return n;
}
