/* SPDX-License-Identifier: MIT */
/*
 * finalize's proof at the destination (migrate.h): a dry-run probe of every
 * file the journals say done; one not found as the source has it is marked
 * failed in its journal, and finalize changes nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "exitcodes.h"
#include "log.h"
#include "macro.h"
#include "migrate.h"
#include "plan.h"

/*
 * A journal is a record a shard keeps of what it did, on a shared file
 * system, as easy to edit or to damage as any file there. A shard's run
 * believes its own (that is what it is for: it leaves out what is done);
 * finalize does not, for files: it asks the destination. A probe (a dry run
 * that looks at the destination) of every regular file, every other name of
 * one and every split file assembled, at the level at which a run of the
 * plan takes a file as done, must find each one there as the source has it
 * (the daemon would skip it). One it would copy is not done, whatever its
 * journal says: it is marked failed there, and finalize exits 15 having
 * changed nothing. Directories and symlinks finalize makes again itself
 * (dirs_entry).
 */
static uint32_t proof_level(const struct plan_header *h)
{
	uint32_t skip = skip_parse(h->skip);

	if (skip & PROTO_OPEN_SKIP_CHECKSUM) {
		return PROTO_OPEN_SKIP_CHECKSUM; /* the content, as a run compared it */
	}
	/* Without -p a copy's mtime is its own: quick would find every file changed. */
	if ((skip & PROTO_OPEN_SKIP_EXISTS) || !h->preserve) {
		return PROTO_OPEN_SKIP_EXISTS;
	}
	return PROTO_OPEN_SKIP_QUICK;
}

struct verifier {
	struct runner ru; /* the list of names pushed, the destination */
	struct merged *m;
	struct journal_writer *j; /* finalize's own: a split file's "assembled" is its word */
	struct journal_marks marks;
	uint64_t files, unproven, gone;
	uint64_t proven; /* names the probe marked proven, each once */
	/* The split file the pass is in: kept by its shards, not found as the source has it. */
	bool kept_unproven;
	/* finalize --jobs: the probes in jobs sessions, each of the entries of shard % jobs */
	uint32_t jobs, part;
	FILE *found; /* a probe session's (a child): what it found, for finalize to merge */
};

/* The names a probe proves, and which set holds their outcome. */
static struct nameset *proven_set(struct merged *m, const struct plan_entry *e)
{
	if (e->ranges) {
		const struct nameset_slot *f = nameset_get(&m->final, e->name);

		if (f && journal_state_done(f->state)) {
			return &m->final;
		}
		/* Kept by its shards: proven whole, as any file. Else ASSEMBLE checks every part. */
		return nameset_get(&m->kept, e->name) ? &m->kept : NULL;
	}
	return e->ftype == PROTO_FT_REG || e->ftype == PROTO_FT_HARDLINK ? &m->ns : NULL;
}

static int verify_entry(void *ud, const struct plan_entry *e)
{
	struct verifier *v = ud;

	if (v->ru.stop || !proven_set(v->m, e) || e->shard % v->jobs != v->part) {
		return 0;
	}
	batch_add(&v->ru.list, e->name);
	v->files++;
	if (v->ru.list.n >= RUN_BATCH) {
		run_result(&v->ru, run_push(&v->ru, &v->ru.list));
	}
	return 0;
}

/*
 * A name the probe found (or found gone) marked proven in the set
 * proven_set takes its outcome from: a whole file's shard outcome, else
 * finalize's own word on a split file when done, else its shards' keeping
 * of it. Each name marked the first time is counted: when all the files
 * probed are, none is left unproven (verify_all leaves out the pass that
 * looks for them).
 */
static void verify_mark(struct verifier *v, const char *name)
{
	struct nameset *sets[] = { &v->m->ns, &v->m->final, &v->m->kept };

	for (size_t i = 0; i < ARRAY_SIZE(sets); i++) {
		const struct nameset_slot *s = nameset_get(sets[i], name);

		if (!s || (sets[i] == &v->m->final && !journal_state_done(s->state) &&
			   nameset_get(&v->m->kept, name))) {
			continue;
		}
		if (!(s->marks & NAMESET_PROVEN)) {
			v->proven++;
		}
		nameset_mark(sets[i], name, NAMESET_PROVEN);
		return;
	}
}

/*
 * A name the probe found as the source has it, or found gone from the
 * source: marked here, or in a probe session of several (finalize --jobs)
 * a record for finalize to merge (verify_merge): a kind ('P' or 'G'), the
 * name, a NUL.
 */
static void verify_found(struct verifier *v, const char *name, bool gone)
{
	if (v->found) {
		fputc(gone ? 'G' : 'P', v->found);
		fputs(name, v->found);
		fputc('\0', v->found);
		return;
	}
	if (gone) {
		v->gone++;
	}
	verify_mark(v, name);
}

static void verify_observe(void *ud, const char *name, const char *action, uint64_t bytes,
			   const char *code, const uint8_t *hash)
{
	struct verifier *v = ud;
	struct stat st;

	(void)bytes;
	(void)hash;
	if (!strcmp(action, "missing") ||
	    (!strcmp(action, "failed") && code && !strcmp(code, "NOT_FOUND") &&
	     source_lstat(v->ru.h->base, name, &st) == -ENOENT)) {
		/* The source no longer has it: nothing to compare (finalize --delete removes it). */
		verify_found(v, name, true);
	} else if (!strcmp(action, "would_skip")) {
		verify_found(v, name, false);
	}
}

/* After the probes: each file not proven named, and marked failed where its outcome is kept. */
static int verify_unproven(void *ud, const struct plan_entry *e)
{
	struct verifier *v = ud;
	struct nameset *ns = proven_set(v->m, e);
	const struct nameset_slot *s = ns ? nameset_get(ns, e->name) : NULL;
	char esc[1024];

	if (e->ftype == PLAN_FT_RANGE) {
		/* A file its shards kept, not found as the source has it: its ranges to send. */
		if (v->kept_unproven) {
			marks_put(&v->marks, e->shard, e->name, e->range, "UNVERIFIED");
		}
		return 0;
	}
	v->kept_unproven = false;
	if (!ns || (s && (s->marks & NAMESET_PROVEN))) {
		return 0;
	}
	if (v->unproven++ < 100 || v->ru.o->verbose > 0) {
		log_error("%s: not at the destination%s%s as the source has it (%s), though its "
			  "journal says done",
			  log_escape_short(e->name, esc, sizeof(esc)),
			  v->m->h->every_host ? " " : "", v->m->h->every_host ? v->ru.dests[0] : "",
			  skip_name(proof_level(v->m->h)));
	}
	if (ns == &v->m->kept) {
		v->kept_unproven = true;
	} else if (e->ranges) {
		journal_put_entry(v->j->f, e->name, JOURNAL_FAILED, 0, "UNVERIFIED");
	} else {
		marks_put(&v->marks, e->shard, e->name, -1, "UNVERIFIED");
	}
	return 0;
}

/*
 * The probes: every file the journals say done, pushed dry at the proof
 * level. The options are the plan's, less what a probe has no use for; it
 * prints nothing of its own (finalize says what it found). 0, or the exit
 * code of a probe that could not be made.
 */
static int verify_probe(struct verifier *v, struct client_opts *o, struct plan_reader *r)
{
	int verbose = o->verbose, progress = o->progress, rc;
	bool json = o->json;

	o->dry_run = true;
	o->skip = proof_level(v->m->h);
	o->hardlinks = o->xattrs = o->acls = o->owner = false;
	o->delta = o->assume_zero = o->partial = false;
	o->have_max_delete = false; /* finalize --delete's, for its mirror pass after */
	o->verbose = -1;
	o->json = false;
	o->progress = 0;
	copy_set_observer(verify_observe, v);
	rc = plan_pass(r, verify_entry, v);
	if (rc == 0 && !v->ru.stop && v->ru.list.n > 0) {
		run_result(&v->ru, run_push(&v->ru, &v->ru.list));
	}
	copy_set_observer(NULL, NULL);
	o->verbose = verbose;
	o->json = json;
	o->progress = progress;
	apply_plan_options(o, v->m->h);
	/* A probe's 9 is an entry it could not look at: not proven, said below. */
	if (rc == 0 && v->ru.rc != EXIT_PARTIAL) {
		rc = v->ru.rc;
	}
	return rc;
}

/* After the unproven are marked: the verdict said, EXIT_DIFFERENT when there are some. */
static int verify_verdict(struct verifier *v, const struct client_opts *o)
{
	char shards[256];
	size_t nshards;

	if (v->unproven > 0) {
		nshards = marks_shards(&v->marks, shards, sizeof(shards));
		if (nshards == 0) {
			/* Split files (their word is finalize's) or shards running now: said above. */
			snprintf(shards, sizeof(shards), "that hold them");
		}
		log_error("%" PRIu64 " of %" PRIu64
			  " files are not at the destination as the source has them, though "
			  "their journals say done: marked failed in the journal%s of shard%s %s; "
			  "run %s again, then finalize",
			  v->unproven, v->files, nshards == 1 ? "" : "s", nshards == 1 ? "" : "s",
			  shards, nshards == 1 ? "it" : "them");
		return EXIT_DIFFERENT;
	}
	if (o->verbose > 0) {
		fprintf(stderr, "finalize: %" PRIu64 " files found at the destination (%s)%s\n",
			v->files - v->gone, skip_name(proof_level(v->m->h)),
			v->gone ? ", some gone from the source since" : "");
	}
	return 0;
}

/* The probes of one session: its list of names beside the journal, then removed. */
static int verify_session(struct verifier *v, struct client_opts *o, struct plan_reader *r)
{
	char what[32];
	int rc;

	snprintf(what, sizeof(what), v->jobs > 1 ? "verify.%" PRIu32 : "verify", v->part);
	rc = batch_open(&v->ru.list, v->ru.jpath, what) < 0 ? EXIT_LOCAL_IO : verify_probe(v, o, r);
	if (v->ru.list.f) {
		fclose(v->ru.list.f);
		unlink(v->ru.list.path);
		v->ru.list.f = NULL;
	}
	return rc;
}

/*
 * One probe session of several (a child of finalize): the plan opened
 * again (a reader of its own: the parent's shares its file offset), the
 * entries of its part probed, what it found written to fd, ended by the
 * count of files probed ('F', the number in decimal, a NUL). Exits with
 * the probe's exit code; nothing of the parent's (its buffered streams,
 * its journal) is flushed or closed by it.
 */
static _Noreturn void verify_child(struct verifier *v, struct client_opts *o, const char *plan,
				   uint32_t part, int fd)
{
	struct plan_reader *r = NULL;
	const struct plan_header *h;
	int rc;

	v->part = part;
	v->found = fdopen(fd, "w");
	rc = v->found ? open_plan(plan, &r) : EXIT_LOCAL_IO;
	if (rc == 0) {
		h = plan_reader_header(r);
		if (strcmp(h->id, v->m->h->id) || strcmp(h->digest, v->m->h->digest)) {
			log_error("the plan changed while finalize read it");
			rc = EXIT_BAD_PLAN;
		}
	}
	if (rc == 0) {
		rc = verify_session(v, o, r);
	}
	if (rc == 0) {
		fprintf(v->found, "F%" PRIu64, v->files);
		fputc('\0', v->found);
		if (fflush(v->found) != 0 || ferror(v->found)) {
			rc = EXIT_LOCAL_IO;
		}
	}
	fflush(stdout);
	fflush(stderr);
	_exit(rc);
}

/* A file beside the journal for a probe session's findings, its name unlinked at once. */
static int found_open(const char *jpath)
{
	char path[JOURNAL_PATH_MAX + 32];
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s.found.XXXXXX", jpath) >= sizeof(path)) {
		return -ENAMETOOLONG;
	}
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0) {
		return -errno;
	}
	unlink(path);
	return fd;
}

/* One record of a session's findings (verify_found). 1, 0 at the end, or -EBADMSG. */
static int found_next(FILE *f, int *ret_kind, char name[PROTO_MAX_PATH + 1])
{
	size_t len = 0;
	int c = getc(f);

	if (c == EOF) {
		return ferror(f) ? -EIO : 0;
	}
	*ret_kind = c;
	while ((c = getc(f)) != EOF && c != '\0') {
		if (len == PROTO_MAX_PATH) {
			return -EBADMSG; /* longer than any name */
		}
		name[len++] = (char)c;
	}
	name[len] = '\0';
	return c == EOF ? -EBADMSG : 1;
}

/*
 * A session's findings merged as if its probes had been finalize's own:
 * each name found marked (verify_found), its count of files added. The
 * file is checked as any input: each name capped, the count last and
 * once. 0, or EXIT_LOCAL_IO said why.
 */
static int verify_merge(struct verifier *v, int fd, uint32_t part)
{
	_cleanup_free_ char *name = malloc(PROTO_MAX_PATH + 1);
	_cleanup_fclose_ FILE *f = NULL;
	bool end = false;
	char *tail;
	int kind, q;

	if (!name || lseek(fd, 0, SEEK_SET) < 0 || !(f = fdopen(fd, "r"))) {
		close(fd);
		return EXIT_LOCAL_IO;
	}
	while ((q = found_next(f, &kind, name)) > 0 && !end) {
		if (kind == 'P' || kind == 'G') {
			verify_found(v, name, kind == 'G');
		} else if (kind == 'F' && name[0] >= '0' && name[0] <= '9') {
			errno = 0;
			v->files += strtoull(name, &tail, 10);
			end = !*tail && errno == 0;
			q = end ? q : -EBADMSG;
		} else {
			q = -EBADMSG;
		}
		if (q < 0) {
			break;
		}
	}
	if (q != 0 || !end) {
		log_error("finalize: probe session %" PRIu32 ": its findings %s", part,
			  q > 0 ? "go on past their end" : "are cut short or malformed");
		return EXIT_LOCAL_IO;
	}
	return 0;
}

/* A probe session's end: its exit code, or what its signal makes of it (said). */
static int verify_wait(pid_t pid, uint32_t part)
{
	bool told = false;
	int status, sig;

	for (;;) {
		/* finalize interrupted (a signal to it alone, too): the session is told to end. */
		if (copy_interrupted() && !told) {
			kill(pid, SIGTERM);
			told = true;
		}
		if (waitpid(pid, &status, 0) >= 0) {
			break;
		}
		if (errno != EINTR) {
			return EXIT_LOCAL_IO;
		}
	}
	if (WIFEXITED(status)) {
		return WEXITSTATUS(status);
	}
	sig = WTERMSIG(status);
	if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
		return EXIT_INTERRUPTED;
	}
	log_error("finalize: probe session %" PRIu32 " ended by signal %d (%s)", part, sig,
		  strsignal(sig));
	return EXIT_LOCAL_IO;
}

/*
 * finalize --jobs: the probes in v->jobs sessions at once, each a child
 * with its own connection, proving the entries of the shards that are
 * part (shard % jobs) of it; then each one's end waited for and, where it
 * succeeded, its findings merged. Their exit codes come together as a
 * run's pushes' do (run_result): the first failure, an interruption or a
 * daemon stopping above it. 0, or the exit code of a probe that could not
 * be made (nothing is marked then).
 */
static int verify_parallel(struct verifier *v, struct client_opts *o, const char *plan)
{
	_cleanup_free_ pid_t *pid = calloc(v->jobs, sizeof(*pid));
	_cleanup_free_ int *fd = calloc(v->jobs, sizeof(*fd));
	int rc = 0;

	if (!pid || !fd) {
		return EXIT_LOCAL_IO;
	}
	for (uint32_t k = 0; k < v->jobs; k++) {
		fd[k] = -1;
	}
	/*
	 * What the parent has buffered is written once, by it, not again by a
	 * child; SIGINT and SIGTERM end the sessions and then finalize (exit 10),
	 * as they end one session's push.
	 */
	fflush(NULL);
	copy_catch_signals();
	for (uint32_t k = 0; k < v->jobs && rc == 0; k++) {
		fd[k] = found_open(v->ru.jpath);
		pid[k] = fd[k] < 0 ? -1 : fork();
		if (pid[k] == 0) {
			verify_child(v, o, plan, k, fd[k]);
		}
		if (pid[k] < 0) {
			log_error_errno(fd[k] < 0 ? fd[k] : -errno,
					"finalize: probe session %" PRIu32 ": %m", k);
			rc = EXIT_LOCAL_IO;
		}
	}
	for (uint32_t k = 0; k < v->jobs; k++) {
		int q = pid[k] > 0 ? verify_wait(pid[k], k) : 0;

		if (pid[k] > 0 && q == 0 && rc == 0 && v->ru.rc == 0) {
			q = verify_merge(v, TAKE_FD(fd[k]), k);
		}
		if (fd[k] >= 0) {
			close(fd[k]);
		}
		run_result(&v->ru, q);
	}
	return rc ? rc : v->ru.rc;
}

/*
 * finalize --jobs N: how many probe sessions; by default the plan's shard
 * count, at most the CPUs online. Never more than the shards: a session
 * proves whole shards.
 */
static uint32_t verify_jobs(const struct client_opts *o, const struct plan_header *h)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t n = o->jobs				      ? o->jobs
		     : cpus > 0 && (uint64_t)cpus < h->shards ? (uint32_t)cpus
							      : h->shards;

	return n < h->shards ? n : h->shards > 0 ? h->shards : 1;
}

/*
 * The probes, then the verdict. 0 when every file is proven,
 * EXIT_DIFFERENT when some are not, or the exit code of a probe that could
 * not be made.
 */
int verify_all(struct merged *m, struct client_opts *o, struct journal_writer *j, const char *plan,
	       const char *jpath, const char *dest)
{
	struct verifier v = { .ru = { .o = o, .h = m->h }, .m = m, .j = j };
	int rc;

	v.ru.dests[0] = (char *)dest;
	v.ru.ndests = 1;
	v.jobs = verify_jobs(o, m->h);
	/* Proven here, not at the destination a proof before this one looked at. */
	nameset_unmark_all(&m->ns, NAMESET_PROVEN);
	nameset_unmark_all(&m->final, NAMESET_PROVEN);
	nameset_unmark_all(&m->kept, NAMESET_PROVEN);
	snprintf(v.ru.jpath, sizeof(v.ru.jpath), "%s", jpath);
	if (marks_init(&v.marks, plan, m->h) < 0) {
		marks_free(&v.marks);
		return EXIT_LOCAL_IO;
	}
	rc = v.jobs > 1 ? verify_parallel(&v, o, plan) : verify_session(&v, o, m->r);
	/* Every file probed found as the source has it: no pass to look for one that isn't. */
	if (rc == 0 && v.proven != v.files) {
		rc = plan_pass(m->r, verify_unproven, &v);
	}
	marks_close_all(&v.marks);
	if (rc == 0) {
		rc = verify_verdict(&v, o);
	}
	marks_free(&v.marks);
	return rc;
}
