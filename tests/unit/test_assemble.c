/* SPDX-License-Identifier: MIT */
/*
 * Joining a split file's parts (src/assemble.c) on real files: a good
 * request puts the file whole in place with its mode and mtime and removes
 * the parts and their directory; a part missing, of another size, or
 * corrupted (its digest no longer matches), a staging directory that is a
 * symlink, a name whose directory is a symlink, a part listed twice (by
 * name or as another link to the same file), a special file under the name:
 * refused with a reason, no file under the final name, the parts left as
 * they were. The mode follows the destination's metadata rule: set-id bits
 * only where kept.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "assemble.h"

#define NPARTS 4
#define PART   (256u * 1024)
#define TAIL   777u
#define TOTAL  ((NPARTS - 1) * PART + TAIL)

struct fx {
	char dir[64];
	int fd;
	uint8_t *data;
	struct proto_part parts[NPARTS];
	struct msg_assemble a;
	struct meta_policy mp;
};

static void put_file(int dirfd, const char *name, const void *buf, size_t len)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	strcpy(f->dir, "/tmp/test_assemble.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->fd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->fd >= 0);
	f->data = malloc(TOTAL);
	assert_non_null(f->data);
	for (size_t i = 0; i < TOTAL; i++) {
		f->data[i] = (uint8_t)(i * 2654435761u >> 13);
	}
	assert_int_equal(mkdirat(f->fd, "out", 0755), 0);
	assert_int_equal(mkdirat(f->fd, ".stage", 0700), 0);
	for (unsigned i = 0; i < NPARTS; i++) {
		struct proto_part *p = &f->parts[i];
		int sfd = openat(f->fd, ".stage", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		XXH128_canonical_t c;

		snprintf(p->name, sizeof(p->name), "7.%u", i);
		p->offset = (uint64_t)i * PART;
		p->len = i == NPARTS - 1 ? TAIL : PART;
		XXH128_canonicalFromHash(&c, XXH3_128bits(f->data + p->offset, p->len));
		memcpy(p->hash, c.digest, PROTO_HASH_LEN);
		put_file(sfd, p->name, f->data + p->offset, p->len);
		close(sfd);
	}
	f->a = (struct msg_assemble){ .name = (char *)"out/big",
				      .staging = (char *)".stage",
				      .mode = 0640,
				      .mtime_sec = 1500000000,
				      .mtime_nsec = 123456789,
				      .size = TOTAL,
				      .count = NPARTS,
				      .parts = f->parts };
	f->mp = (struct meta_policy){ .preserve = true, .umask = 022 };
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	close(f->fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f->data);
	free(f);
	return 0;
}

static bool exists_at(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A refused request: this code, a reason with text in it, no final name, every part kept. */
static void assert_refused(struct fx *f, uint32_t want, const char *text)
{
	char why[512];
	uint32_t code = 0;

	assert_true(assemble_file(f->fd, &f->a, &f->mp, &code, why, sizeof(why)) < 0);
	if (code != want || !strstr(why, text)) {
		fail_msg("code %u (%s), wanted %u with '%s'", code, why, want, text);
	}
	assert_false(exists_at(f->fd, "out/big"));
	for (unsigned i = 0; i < NPARTS; i++) {
		char name[300];

		snprintf(name, sizeof(name), ".stage/%s", f->parts[i].name);
		assert_true(exists_at(f->fd, name) || i == 1);
	}
}

static void test_good(void **state)
{
	struct fx *f = *state;
	char why[512];
	uint32_t code = 99;
	struct stat st;
	uint8_t *back = malloc(TOTAL);
	int fd;

	assert_non_null(back);
	assert_int_equal(assemble_file(f->fd, &f->a, &f->mp, &code, why, sizeof(why)), 0);
	assert_int_equal(code, PERR_OK);
	fd = openat(f->fd, "out/big", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, TOTAL);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(st.st_mtim.tv_sec, 1500000000);
	assert_int_equal(st.st_mtim.tv_nsec, 123456789);
	assert_int_equal(read(fd, back, TOTAL), TOTAL);
	assert_memory_equal(back, f->data, TOTAL);
	close(fd);
	free(back);
	assert_false(exists_at(f->fd, ".stage"));
}

static void test_part_missing(void **state)
{
	struct fx *f = *state;

	assert_int_equal(unlinkat(f->fd, ".stage/7.1", 0), 0);
	assert_refused(f, PERR_ASSEMBLY, "part 2 of 4 (7.1) is missing");
}

static void test_part_short(void **state)
{
	struct fx *f = *state;
	int sfd = openat(f->fd, ".stage", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	put_file(sfd, "7.2", f->data, PART - 1);
	close(sfd);
	assert_refused(f, PERR_ASSEMBLY, "part 3 of 4 (7.2) holds 262143 bytes");
}

static void test_part_corrupt(void **state)
{
	struct fx *f = *state;
	int fd = openat(f->fd, ".stage/7.2", O_WRONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "\xff", 1, 1000), 1);
	close(fd);
	assert_refused(f, PERR_ASSEMBLY, "(part 3 of 4, 7.2) do not match the digest");
}

static void test_staging_symlink(void **state)
{
	struct fx *f = *state;

	assert_int_equal(renameat(f->fd, ".stage", f->fd, ".real"), 0);
	assert_int_equal(symlinkat(".real", f->fd, ".stage"), 0);
	f->a.staging = (char *)".stage";
	{
		char why[512];
		uint32_t code = 0;

		assert_true(assemble_file(f->fd, &f->a, &f->mp, &code, why, sizeof(why)) < 0);
		assert_int_equal(code, PERR_BAD_PATH);
		assert_non_null(strstr(why, "symlink or escape refused"));
		assert_false(exists_at(f->fd, "out/big"));
	}
}

static void test_dir_symlink(void **state)
{
	struct fx *f = *state;
	char why[512];
	uint32_t code = 0;

	assert_int_equal(symlinkat("/tmp", f->fd, "link"), 0);
	f->a.name = (char *)"link/big";
	assert_true(assemble_file(f->fd, &f->a, &f->mp, &code, why, sizeof(why)) < 0);
	assert_int_equal(code, PERR_BAD_PATH);
	assert_true(exists_at(f->fd, ".stage/7.0"));
}

/* An existing file under the name is replaced whole, atomically. */
static void test_replaces(void **state)
{
	struct fx *f = *state;
	int ofd = openat(f->fd, "out", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char why[512];
	uint32_t code = 0;
	struct stat st;

	put_file(ofd, "big", "old", 3);
	close(ofd);
	assert_int_equal(assemble_file(f->fd, &f->a, &f->mp, &code, why, sizeof(why)), 0);
	assert_int_equal(fstatat(f->fd, "out/big", &st, 0), 0);
	assert_int_equal(st.st_size, TOTAL);
}

/* A set-id mode is kept only where the rule keeps set-id bits. */
static void test_setid(void **state)
{
	struct fx *f = *state;
	char why[512];
	uint32_t code = 0;
	struct stat st;

	f->a.mode = 04755;
	assert_int_equal(assemble_file(f->fd, &f->a, &f->mp, &code, why, sizeof(why)), 0);
	assert_int_equal(fstatat(f->fd, "out/big", &st, 0), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
}

static void test_setid_kept(void **state)
{
	struct fx *f = *state;
	char why[512];
	uint32_t code = 0;
	struct stat st;

	f->a.mode = 02750;
	f->mp.keep_setid = true;
	assert_int_equal(assemble_file(f->fd, &f->a, &f->mp, &code, why, sizeof(why)), 0);
	assert_int_equal(fstatat(f->fd, "out/big", &st, 0), 0);
	assert_int_equal(st.st_mode & 07777, 02750);
}

/* The same part twice by name: refused, nothing counted twice. */
static void test_part_twice(void **state)
{
	struct fx *f = *state;

	f->parts[1] = f->parts[0];
	f->parts[1].offset = PART;
	assert_refused(f, PERR_ASSEMBLY, "part 2 of 4 (7.0) is part 1 (7.0) again");
}

/* Another name for the same file (a hard link) is the same part. */
static void test_part_linked(void **state)
{
	struct fx *f = *state;
	int sfd = openat(f->fd, ".stage", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	assert_true(sfd >= 0);
	assert_int_equal(unlinkat(sfd, "7.1", 0), 0);
	assert_int_equal(linkat(sfd, "7.0", sfd, "7.1", 0), 0);
	close(sfd);
	f->parts[1].len = PART;
	memcpy(f->parts[1].hash, f->parts[0].hash, PROTO_HASH_LEN);
	assert_refused(f, PERR_ASSEMBLY, "part 2 of 4 (7.1) is part 1 (7.0) again");
}

/* A FIFO (any special file) under the name is never replaced. */
static void test_special_target(void **state)
{
	struct fx *f = *state;

	assert_int_equal(mkfifoat(f->fd, "out/big", 0600), 0);
	{
		char why[512];
		uint32_t code = 0;
		struct stat st;

		assert_true(assemble_file(f->fd, &f->a, &f->mp, &code, why, sizeof(why)) < 0);
		assert_int_equal(code, PERR_DEVICE_REFUSED);
		assert_non_null(strstr(why, "a FIFO is there"));
		assert_int_equal(fstatat(f->fd, "out/big", &st, AT_SYMLINK_NOFOLLOW), 0);
		assert_true(S_ISFIFO(st.st_mode));
		assert_true(exists_at(f->fd, ".stage/7.0"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_good, setup, teardown),
		cmocka_unit_test_setup_teardown(test_part_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_part_short, setup, teardown),
		cmocka_unit_test_setup_teardown(test_part_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_staging_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dir_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replaces, setup, teardown),
		cmocka_unit_test_setup_teardown(test_setid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_setid_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_part_twice, setup, teardown),
		cmocka_unit_test_setup_teardown(test_part_linked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_special_target, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
