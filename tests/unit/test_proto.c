/* SPDX-License-Identifier: MIT */
/*
 * Control-protocol codec (proto/): header checks, a round trip for every
 * message type, every cap at and one past its limit, every truncation, and
 * the bounds-checked reader/writer underneath (THREATS.md A1-A5, A9).
 * Decoders always read from an exact-size heap copy so that ASan sees any
 * over-read; LeakSanitizer catches anything a failed decode leaves behind.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "proto/msg.h"
#include "proto/wire.h"

#define FRAME_CAP (PROTO_HDR_LEN + (size_t)PROTO_MAX_PAYLOAD)
#define N_TYPES	  MSG_TYPE_MAX

static uint8_t frame[FRAME_CAP];
static const struct msg zero_msg;

/* ---- helpers ------------------------------------------------------------ */

/* Encode m into frame; check the header; return the payload length. */
static size_t encode_ok(const struct msg *m)
{
	struct proto_hdr h;
	int n = msg_encode(m, frame, sizeof(frame));

	assert_true(n >= PROTO_HDR_LEN);
	assert_int_equal(proto_hdr_decode(frame, &h), 0);
	assert_int_equal(h.version, PROTO_VERSION);
	assert_int_equal(h.type, m->type);
	assert_int_equal(h.flags, 0);
	assert_int_equal(h.length, (size_t)n - PROTO_HDR_LEN);
	return (size_t)n - PROTO_HDR_LEN;
}

static uint8_t *payload(void)
{
	return frame + PROTO_HDR_LEN;
}

/* Decode from an exact-size heap copy; on failure ret must be all zero. */
static int decode_copy(uint16_t type, const uint8_t *p, size_t len, struct msg *ret)
{
	uint8_t *copy = malloc(len ? len : 1);
	int r;

	assert_non_null(copy);
	if (len) {
		memcpy(copy, p, len);
	}
	r = msg_decode(type, copy, len, ret);
	free(copy);
	if (r < 0) {
		assert_memory_equal(ret, &zero_msg, sizeof(*ret));
	}
	return r;
}

static int decode_rc(uint16_t type, const uint8_t *p, size_t len)
{
	struct msg m;
	int r = decode_copy(type, p, len, &m);

	msg_clear(&m);
	return r;
}

/* The encoder does not validate field values, so it can build bad payloads. */
static int encode_decode_rc(const struct msg *m)
{
	size_t len = encode_ok(m);

	return decode_rc(m->type, payload(), len);
}

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* ---- sample messages, one valid instance of each type ------------------- */

static char s_name_reg[] = "dir/file.bin";
static char s_name_dir[] = "dir";
static char s_name_lnk[] = "dir/link";
static char s_link[] = "../target";
static struct proto_file s_files[3] = {
	{ .id = 7,
	  .ftype = PROTO_FT_REG,
	  .mode = 0644,
	  .size = 123456789012ull,
	  .mtime_sec = -5,
	  .mtime_nsec = 999999999,
	  .uid = 1000,
	  .gid = 100,
	  .name = s_name_reg },
	{ .id = 8,
	  .ftype = PROTO_FT_DIR,
	  .mode = 07777,
	  .size = 0,
	  .mtime_sec = 1700000000,
	  .mtime_nsec = 0,
	  .uid = 0,
	  .gid = 0,
	  .name = s_name_dir },
	{ .id = 9,
	  .ftype = PROTO_FT_SYMLINK,
	  .mode = 0777,
	  .size = 0,
	  .mtime_sec = 1,
	  .mtime_nsec = 1,
	  .uid = 1,
	  .gid = 2,
	  .name = s_name_lnk,
	  .link = s_link },
};
static char s_text_empty[] = "";
static char s_text_nospace[] = "no space left";
static struct proto_status s_st[2] = {
	{ .id = 7, .status = PERR_OK, .items = PROTO_ITEM_NEW, .text = s_text_empty },
	{ .id = 8, .status = PERR_MAX, .text = s_text_nospace },
};
static char s_get0[] = "mod/a";
static char s_get1[] = "mod/b/c";
static char *s_paths[2] = { s_get0, s_get1 };
static char s_pat0[] = "*/", s_pat1[] = "/src/**.c", s_pat2[] = "*";
static struct proto_filter_rule s_rules[3] = {
	{ .action = PROTO_FILTER_INCLUDE, .pattern = s_pat0 },
	{ .action = PROTO_FILTER_INCLUDE, .pattern = s_pat1 },
	{ .action = PROTO_FILTER_EXCLUDE, .pattern = s_pat2 },
};
static char s_mod0[] = "data", s_mod1[] = "backups", s_mod2[] = "inbox";
static char s_comment0[] = "main data", s_comment1[] = "";
static struct proto_module s_mods[3] = {
	{ .flags = 0, .name = s_mod0, .comment = s_comment0 },
	{ .flags = PROTO_MOD_READ_ONLY, .name = s_mod1, .comment = s_comment1 },
	{ .flags = PROTO_MOD_WRITE_ONLY, .name = s_mod2, .comment = s_comment0 },
};

/* Type numbers may have gaps (reserved for other features): those have no sample. */
static bool type_defined(uint16_t t)
{
	return strcmp(proto_type_name(t), "UNKNOWN") != 0;
}

static char s_xname0[] = "user.comment", s_xname1[] = "system.posix_acl_access";
static uint8_t s_xval0[] = "hello", s_xval1[] = { 2, 0, 0, 0, 1, 0, 6, 0 };
static struct proto_xattr s_xattrs[3] = {
	{ .name = s_xname0, .value = s_xval0, .len = 5 },
	{ .name = s_xname1, .value = s_xval1, .len = sizeof(s_xval1) },
	{ .name = s_xname0, .value = s_xval0, .len = 0 },
};

static char s_del0[] = "tree/extra", s_del1[] = "tree/old/dir", s_del2[] = "tree/busy";
static char s_deltext[] = "Permission denied", s_empty[] = "";
static struct proto_deleted s_deleted[] = {
	{ .what = PROTO_DEL_DELETED, .ftype = PROTO_FT_REG, .name = s_del0, .text = s_empty },
	{ .what = PROTO_DEL_WITHHELD, .ftype = PROTO_FT_DIR, .name = s_del1, .text = s_empty },
	{ .what = PROTO_DEL_FAILED,
	  .ftype = 0,
	  .code = PERR_PERMISSION,
	  .name = s_del2,
	  .text = s_deltext },
};

static struct proto_sum s_sums[3] = {
	{ .id = 1,
	  .status = PERR_OK,
	  .hash = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 } },
	{ .id = 2, .status = PERR_SOURCE_CHANGED },
	{ .id = UINT32_MAX, .status = PERR_OK, .hash = { [15] = 0xff } },
};

static struct proto_entry_attrs s_lattrs[3] = {
	{ .id = 1,
	  .status = PERR_OK,
	  .digest = { { 1, 2, 3 }, { [15] = 4 }, { 5, [15] = 6 } },
	  .link_group = 0x0102030405060708ull },
	{ .id = 2, .status = PERR_PERMISSION },
	{ .id = UINT32_MAX, .status = PERR_OK, .digest = { { [15] = 0xff } } },
};

static char s_asm_path[] = "mod/dst", s_asm_name[] = "tree/big.img",
	    s_asm_staging[] = ".rdmacp-split.0123456789abcdef";
static struct proto_part s_parts[3] = {
	{ .name = "5.0", .offset = 0, .len = 4u << 20, .hash = { 1, 2, 3 } },
	{ .name = "5.1", .offset = 4u << 20, .len = 4u << 20, .hash = { [15] = 9 } },
	{ .name = "5.2", .offset = 8u << 20, .len = 17, .hash = { 7 } },
};

static void sample_assemble(struct msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = MSG_ASSEMBLE;
	m->u.assemble = (struct msg_assemble){ .flags = PROTO_ASM_OWNER,
					       .path = s_asm_path,
					       .name = s_asm_name,
					       .staging = s_asm_staging,
					       .mode = 0640,
					       .mtime_sec = -3,
					       .mtime_nsec = 999999999,
					       .uid = 1000,
					       .gid = 100,
					       .size = (8u << 20) + 17,
					       .count = 3,
					       .parts = s_parts };
}

static void sample(uint16_t type, struct msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	switch (type) {
	case MSG_HELLO:
		m->u.hello.min_version = 1;
		m->u.hello.max_version = 3;
		/* Unknown capability bits travel unchanged. */
		m->u.hello.caps = PROTO_CAP_TCP | PROTO_CAP_TREES | (1ull << 63);
		strcpy(m->u.hello.software, "rdmacp 0.1");
		break;
	case MSG_ERROR:
		m->u.error.code = PERR_NO_MODULE;
		strcpy(m->u.error.text, "no such module");
		break;
	case MSG_OPEN:
		m->u.open.direction = PROTO_DIR_PUSH;
		m->u.open.transport = 1;
		m->u.open.lanes = 4;
		/*
		 * Every flag, with one skip level (two at once is refused), but
		 * DELETE (see sample_open_delete): the path is the last field.
		 */
		m->u.open.flags = PROTO_OPEN_FLAGS_KNOWN & ~PROTO_OPEN_SKIP_EXISTS &
				  ~PROTO_OPEN_SKIP_QUICK & ~PROTO_OPEN_DELETE;
		m->u.open.chunk_size = 1u << 20;
		m->u.open.slots = 64;
		strcpy(m->u.open.path, "mod/dest");
		m->u.open.encrypt = PROTO_ENCRYPT_REQUIRE; /* with PROTO_OPEN_ENCRYPT */
		break;
	case MSG_OPEN_OK:
		m->u.open_ok.transport = 2;
		m->u.open_ok.lanes = 3;
		m->u.open_ok.data_port = 40001;
		m->u.open_ok.chunk_size = 1u << 16;
		m->u.open_ok.slots = 128;
		for (size_t i = 0; i < PROTO_TOKEN_LEN; i++) {
			m->u.open_ok.token[i] = (uint8_t)(0xa0 + i);
		}
		m->u.open_ok.lanes_sealed = PROTO_LANES_SEALED;
		break;
	case MSG_RING:
		m->u.ring.addr = 0x7f0000001000ull;
		m->u.ring.desc_addr = 0x7f0000100000ull;
		m->u.ring.slots = 16;
		m->u.ring.slot_size = 1u << 20;
		m->u.ring.nkeys = 2;
		m->u.ring.rkey[0] = 0xdeadbeef;
		m->u.ring.rkey[1] = 0x01020304;
		break;
	case MSG_FILES:
		m->u.files.count = 3;
		m->u.files.files = s_files;
		break;
	case MSG_FILES_ACK:
		m->u.files_ack.count = 2;
		m->u.files_ack.st = s_st;
		break;
	case MSG_FILE_DONE:
		m->u.file_done.id = 7;
		m->u.file_done.status = PERR_OK;
		m->u.file_done.bytes = 123456789012ull;
		for (size_t i = 0; i < PROTO_HASH_LEN; i++) {
			m->u.file_done.hash[i] = (uint8_t)(i * 17);
		}
		strcpy(m->u.file_done.text, "done");
		break;
	case MSG_FILE_RESULT:
		m->u.file_result.id = 7;
		m->u.file_result.status = PERR_INTEGRITY;
		strcpy(m->u.file_result.text, "checksum mismatch");
		break;
	case MSG_GET:
		m->u.get.count = 2;
		m->u.get.paths = s_paths;
		break;
	case MSG_END:
		m->u.end.files = 3;
		m->u.end.bytes = UINT64_MAX;
		break;
	case MSG_PING:
	case MSG_PONG:
		m->u.ping.nonce = 0x0102030405060708ull;
		break;
	case MSG_BYE:
		break;
	case MSG_ENTRY_FAILED:
		m->u.entry_failed.status = PERR_PERMISSION;
		strcpy(m->u.entry_failed.name, "tree/a\nb");
		strcpy(m->u.entry_failed.text, "open: Permission denied");
		break;
	case MSG_RESUME:
		m->u.resume.id = 7;
		m->u.resume.count = 2;
		m->u.resume.r[0] = (struct proto_range){ .offset = 0, .len = 3u << 20 };
		m->u.resume.r[1] = (struct proto_range){ .offset = 5u << 20, .len = 12345 };
		break;
	case MSG_LIST:
		m->u.list.flags = PROTO_LIST_FLAGS_KNOWN;
		strcpy(m->u.list.path, "mod/dir/");
		break;
	case MSG_MODULES:
		m->u.modules.count = 3;
		m->u.modules.mods = s_mods;
		break;
	case MSG_XATTRS:
		m->u.xattrs.id = 0x01020304;
		m->u.xattrs.count = 3;
		m->u.xattrs.x = s_xattrs;
		break;
	case MSG_FILTER:
		m->u.filter.count = 3;
		m->u.filter.rules = s_rules;
		break;
	case MSG_DELETED:
		m->u.deleted.count = 3;
		m->u.deleted.ents = s_deleted;
		break;
	case MSG_SUMS:
		m->u.sums.count = 3;
		m->u.sums.sums = s_sums;
		break;
	case MSG_LIST_ATTRS:
		m->u.list_attrs.fields = PROTO_LATTR_KNOWN;
		m->u.list_attrs.count = 3;
		m->u.list_attrs.ents = s_lattrs;
		break;
	case MSG_BENCH:
		m->u.bench.transport = 1;
		m->u.bench.lanes = 4;
		m->u.bench.chunk_size = 1u << 20;
		m->u.bench.slots = 64;
		m->u.bench.bytes = 10ull << 30;
		m->u.bench.seed = 0x0102030405060708ull;
		break;
	case MSG_ZEROS:
		m->u.zeros.id = 9;
		m->u.zeros.count = 2;
		m->u.zeros.r[0] = (struct proto_range){ .offset = 1u << 20, .len = 4u << 20 };
		m->u.zeros.r[1] = (struct proto_range){ .offset = 8u << 20, .len = 777 };
		break;
	case MSG_ASSEMBLE:
		sample_assemble(m);
		break;
	case MSG_ASSEMBLED:
		m->u.assembled.size = (8u << 20) + 17;
		break;
	case MSG_LANE_DOWN:
		m->u.lane_down.lane = 3;
		m->u.lane_down.count = 0x0102030405060708ull;
		break;
	case MSG_DELTA:
		m->u.delta.id = 11;
		m->u.delta.kind = PROTO_DELTA_SUMS;
		m->u.delta.first = 256;
		m->u.delta.count = 3;
		for (size_t i = 0; i < 3; i++) {
			memset(m->u.delta.sums[i], (int)(0xa0 + i), PROTO_HASH_LEN);
		}
		break;
	default:
		fail();
	}
}

/* An OPEN of a push with --delete: max_delete follows the path. */
static void sample_open_delete(struct msg *m)
{
	sample(MSG_OPEN, m);
	m->u.open.flags = PROTO_OPEN_RECURSIVE | PROTO_OPEN_PRESERVE | PROTO_OPEN_DELETE;
	m->u.open.max_delete = 0x0102030405060708ull;
}

static void assert_file_equal(const struct proto_file *a, const struct proto_file *b)
{
	assert_int_equal(a->id, b->id);
	assert_int_equal(a->ftype, b->ftype);
	assert_int_equal(a->mode, b->mode);
	assert_true(a->size == b->size);
	assert_true(a->mtime_sec == b->mtime_sec);
	assert_int_equal(a->mtime_nsec, b->mtime_nsec);
	assert_int_equal(a->uid, b->uid);
	assert_int_equal(a->gid, b->gid);
	assert_string_equal(a->name, b->name);
	if (a->ftype == PROTO_FT_SYMLINK || a->ftype == PROTO_FT_HARDLINK) {
		assert_string_equal(a->link, b->link);
	} else {
		assert_null(b->link);
	}
}

/* a: what was sent, b: what was decoded. */
static void assert_msg_equal(const struct msg *a, const struct msg *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case MSG_HELLO:
		assert_int_equal(a->u.hello.min_version, b->u.hello.min_version);
		assert_int_equal(a->u.hello.max_version, b->u.hello.max_version);
		assert_true(a->u.hello.caps == b->u.hello.caps);
		assert_string_equal(a->u.hello.software, b->u.hello.software);
		break;
	case MSG_ERROR:
		assert_int_equal(a->u.error.code, b->u.error.code);
		assert_string_equal(a->u.error.text, b->u.error.text);
		break;
	case MSG_OPEN:
		assert_int_equal(a->u.open.direction, b->u.open.direction);
		assert_int_equal(a->u.open.transport, b->u.open.transport);
		assert_int_equal(a->u.open.lanes, b->u.open.lanes);
		assert_int_equal(a->u.open.flags, b->u.open.flags);
		assert_int_equal(a->u.open.chunk_size, b->u.open.chunk_size);
		assert_int_equal(a->u.open.slots, b->u.open.slots);
		assert_string_equal(a->u.open.path, b->u.open.path);
		assert_true(a->u.open.max_delete == b->u.open.max_delete);
		assert_int_equal(a->u.open.flags & PROTO_OPEN_ENCRYPT ? a->u.open.encrypt : 0,
				 b->u.open.encrypt);
		break;
	case MSG_OPEN_OK:
		assert_int_equal(a->u.open_ok.transport, b->u.open_ok.transport);
		assert_int_equal(a->u.open_ok.lanes, b->u.open_ok.lanes);
		assert_int_equal(a->u.open_ok.data_port, b->u.open_ok.data_port);
		assert_int_equal(a->u.open_ok.chunk_size, b->u.open_ok.chunk_size);
		assert_int_equal(a->u.open_ok.slots, b->u.open_ok.slots);
		assert_memory_equal(a->u.open_ok.token, b->u.open_ok.token, PROTO_TOKEN_LEN);
		assert_int_equal(a->u.open_ok.lanes_sealed, b->u.open_ok.lanes_sealed);
		assert_int_equal(a->u.open_ok.nrails, b->u.open_ok.nrails);
		break;
	case MSG_RING:
		assert_true(a->u.ring.addr == b->u.ring.addr);
		assert_true(a->u.ring.desc_addr == b->u.ring.desc_addr);
		assert_int_equal(a->u.ring.nkeys, b->u.ring.nkeys);
		for (unsigned i = 0; i < a->u.ring.nkeys; i++) {
			assert_int_equal(a->u.ring.rkey[i], b->u.ring.rkey[i]);
		}
		assert_int_equal(a->u.ring.slots, b->u.ring.slots);
		assert_int_equal(a->u.ring.slot_size, b->u.ring.slot_size);
		break;
	case MSG_FILES:
		assert_int_equal(a->u.files.count, b->u.files.count);
		assert_non_null(b->u.files.files);
		for (size_t i = 0; i < a->u.files.count; i++) {
			assert_file_equal(&a->u.files.files[i], &b->u.files.files[i]);
		}
		break;
	case MSG_FILES_ACK:
		assert_int_equal(a->u.files_ack.count, b->u.files_ack.count);
		for (size_t i = 0; i < a->u.files_ack.count; i++) {
			assert_int_equal(a->u.files_ack.st[i].id, b->u.files_ack.st[i].id);
			assert_int_equal(a->u.files_ack.st[i].status, b->u.files_ack.st[i].status);
			assert_int_equal(a->u.files_ack.st[i].items, b->u.files_ack.st[i].items);
			assert_string_equal(a->u.files_ack.st[i].text, b->u.files_ack.st[i].text);
		}
		break;
	case MSG_FILE_DONE:
		assert_int_equal(a->u.file_done.id, b->u.file_done.id);
		assert_int_equal(a->u.file_done.status, b->u.file_done.status);
		assert_true(a->u.file_done.bytes == b->u.file_done.bytes);
		assert_memory_equal(a->u.file_done.hash, b->u.file_done.hash, PROTO_HASH_LEN);
		assert_string_equal(a->u.file_done.text, b->u.file_done.text);
		break;
	case MSG_FILE_RESULT:
		assert_int_equal(a->u.file_result.id, b->u.file_result.id);
		assert_int_equal(a->u.file_result.status, b->u.file_result.status);
		assert_string_equal(a->u.file_result.text, b->u.file_result.text);
		break;
	case MSG_GET:
		assert_int_equal(a->u.get.count, b->u.get.count);
		for (size_t i = 0; i < a->u.get.count; i++) {
			assert_string_equal(a->u.get.paths[i], b->u.get.paths[i]);
		}
		break;
	case MSG_END:
		assert_int_equal(a->u.end.files, b->u.end.files);
		assert_true(a->u.end.bytes == b->u.end.bytes);
		break;
	case MSG_PING:
	case MSG_PONG:
		assert_true(a->u.ping.nonce == b->u.ping.nonce);
		break;
	case MSG_BYE:
		break;
	case MSG_ENTRY_FAILED:
		assert_int_equal(a->u.entry_failed.status, b->u.entry_failed.status);
		assert_string_equal(a->u.entry_failed.name, b->u.entry_failed.name);
		assert_string_equal(a->u.entry_failed.text, b->u.entry_failed.text);
		break;
	case MSG_RESUME:
	case MSG_ZEROS: /* the same layout */
		assert_int_equal(a->u.resume.id, b->u.resume.id);
		assert_int_equal(a->u.resume.count, b->u.resume.count);
		for (size_t i = 0; i < a->u.resume.count; i++) {
			assert_true(a->u.resume.r[i].offset == b->u.resume.r[i].offset);
			assert_true(a->u.resume.r[i].len == b->u.resume.r[i].len);
		}
		break;
	case MSG_DELTA:
		assert_int_equal(a->u.delta.id, b->u.delta.id);
		assert_int_equal(a->u.delta.kind, b->u.delta.kind);
		assert_int_equal(a->u.delta.flags, b->u.delta.flags);
		assert_int_equal(a->u.delta.count, b->u.delta.count);
		if (a->u.delta.kind == PROTO_DELTA_SUMS) {
			assert_true(a->u.delta.first == b->u.delta.first);
			assert_memory_equal(a->u.delta.sums, b->u.delta.sums,
					    (size_t)a->u.delta.count * PROTO_HASH_LEN);
		}
		for (size_t i = 0; a->u.delta.kind == PROTO_DELTA_SAME && i < a->u.delta.count;
		     i++) {
			assert_true(a->u.delta.r[i].offset == b->u.delta.r[i].offset);
			assert_true(a->u.delta.r[i].len == b->u.delta.r[i].len);
		}
		break;
	case MSG_LIST:
		assert_int_equal(a->u.list.flags, b->u.list.flags);
		assert_string_equal(a->u.list.path, b->u.list.path);
		break;
	case MSG_MODULES:
		assert_int_equal(a->u.modules.count, b->u.modules.count);
		assert_non_null(b->u.modules.mods);
		for (size_t i = 0; i < a->u.modules.count; i++) {
			assert_int_equal(a->u.modules.mods[i].flags, b->u.modules.mods[i].flags);
			assert_string_equal(a->u.modules.mods[i].name, b->u.modules.mods[i].name);
			assert_string_equal(a->u.modules.mods[i].comment,
					    b->u.modules.mods[i].comment);
		}
		break;
	case MSG_XATTRS:
		assert_int_equal(a->u.xattrs.id, b->u.xattrs.id);
		assert_int_equal(a->u.xattrs.count, b->u.xattrs.count);
		for (size_t i = 0; i < a->u.xattrs.count; i++) {
			assert_string_equal(a->u.xattrs.x[i].name, b->u.xattrs.x[i].name);
			assert_int_equal(a->u.xattrs.x[i].len, b->u.xattrs.x[i].len);
			assert_non_null(b->u.xattrs.x[i].value);
			assert_memory_equal(a->u.xattrs.x[i].value, b->u.xattrs.x[i].value,
					    a->u.xattrs.x[i].len);
		}
		break;
	case MSG_FILTER:
		assert_int_equal(a->u.filter.count, b->u.filter.count);
		assert_non_null(b->u.filter.rules);
		for (size_t i = 0; i < a->u.filter.count; i++) {
			assert_int_equal(a->u.filter.rules[i].action, b->u.filter.rules[i].action);
			assert_string_equal(a->u.filter.rules[i].pattern,
					    b->u.filter.rules[i].pattern);
		}
		break;
	case MSG_DELETED:
		assert_int_equal(a->u.deleted.flags, b->u.deleted.flags);
		assert_int_equal(a->u.deleted.count, b->u.deleted.count);
		assert_non_null(b->u.deleted.ents);
		for (size_t i = 0; i < a->u.deleted.count; i++) {
			const struct proto_deleted *x = &a->u.deleted.ents[i];
			const struct proto_deleted *y = &b->u.deleted.ents[i];

			assert_int_equal(x->what, y->what);
			assert_int_equal(x->ftype, y->ftype);
			assert_int_equal(x->code, y->code);
			assert_string_equal(x->name, y->name);
			assert_string_equal(x->text, y->text);
		}
		break;
	case MSG_SUMS:
		assert_int_equal(a->u.sums.count, b->u.sums.count);
		assert_non_null(b->u.sums.sums);
		for (size_t i = 0; i < a->u.sums.count; i++) {
			assert_int_equal(a->u.sums.sums[i].id, b->u.sums.sums[i].id);
			assert_int_equal(a->u.sums.sums[i].status, b->u.sums.sums[i].status);
			assert_memory_equal(a->u.sums.sums[i].hash, b->u.sums.sums[i].hash,
					    PROTO_HASH_LEN);
		}
		break;
	case MSG_LIST_ATTRS:
		assert_int_equal(a->u.list_attrs.fields, b->u.list_attrs.fields);
		assert_int_equal(a->u.list_attrs.count, b->u.list_attrs.count);
		for (size_t i = 0; i < a->u.list_attrs.count; i++) {
			const struct proto_entry_attrs *x = &a->u.list_attrs.ents[i];
			const struct proto_entry_attrs *y = &b->u.list_attrs.ents[i];

			assert_int_equal(x->id, y->id);
			assert_int_equal(x->status, y->status);
			assert_memory_equal(x->digest, y->digest, sizeof(x->digest));
			assert_true(x->link_group == y->link_group);
		}
		break;
	case MSG_ASSEMBLE:
		assert_int_equal(a->u.assemble.flags, b->u.assemble.flags);
		assert_string_equal(a->u.assemble.path, b->u.assemble.path);
		assert_string_equal(a->u.assemble.name, b->u.assemble.name);
		assert_string_equal(a->u.assemble.staging, b->u.assemble.staging);
		assert_int_equal(a->u.assemble.mode, b->u.assemble.mode);
		assert_true(a->u.assemble.mtime_sec == b->u.assemble.mtime_sec);
		assert_int_equal(a->u.assemble.mtime_nsec, b->u.assemble.mtime_nsec);
		assert_int_equal(a->u.assemble.uid, b->u.assemble.uid);
		assert_int_equal(a->u.assemble.gid, b->u.assemble.gid);
		assert_true(a->u.assemble.size == b->u.assemble.size);
		assert_int_equal(a->u.assemble.count, b->u.assemble.count);
		for (size_t i = 0; i < a->u.assemble.count; i++) {
			const struct proto_part *x = &a->u.assemble.parts[i];
			const struct proto_part *y = &b->u.assemble.parts[i];

			assert_string_equal(x->name, y->name);
			assert_true(x->offset == y->offset && x->len == y->len);
			assert_memory_equal(x->hash, y->hash, PROTO_HASH_LEN);
		}
		break;
	case MSG_ASSEMBLED:
		assert_true(a->u.assembled.size == b->u.assembled.size);
		break;
	case MSG_LANE_DOWN:
		assert_int_equal(a->u.lane_down.lane, b->u.lane_down.lane);
		assert_true(a->u.lane_down.count == b->u.lane_down.count);
		break;
	case MSG_BENCH:
		assert_int_equal(a->u.bench.transport, b->u.bench.transport);
		assert_int_equal(a->u.bench.lanes, b->u.bench.lanes);
		assert_int_equal(a->u.bench.encrypt, b->u.bench.encrypt);
		assert_int_equal(a->u.bench.chunk_size, b->u.bench.chunk_size);
		assert_int_equal(a->u.bench.slots, b->u.bench.slots);
		assert_true(a->u.bench.bytes == b->u.bench.bytes);
		assert_true(a->u.bench.seed == b->u.bench.seed);
		break;
	default:
		fail();
	}
}

/* Encode, decode, compare fields, and check the re-encoding is byte-identical. */
static void round_trip(const struct msg *m)
{
	struct msg d;
	size_t len = encode_ok(m);
	uint8_t *first = malloc(len ? len : 1);

	assert_non_null(first);
	memcpy(first, payload(), len);
	assert_int_equal(decode_copy(m->type, first, len, &d), 0);
	assert_msg_equal(m, &d);
	assert_int_equal(encode_ok(&d), len);
	assert_memory_equal(payload(), first, len);
	msg_clear(&d);
	assert_memory_equal(&d, &zero_msg, sizeof(d));
	free(first);
}

/*
 * Replace the string at the end of an encoded payload (length u16 at
 * len - slen - 2) by one byte longer: the same message, one over its cap.
 */
static int decode_last_string_grown(uint16_t type, const uint8_t *p, size_t len, size_t slen)
{
	uint8_t *grown = malloc(len + 1);
	size_t at = len - slen - 2;
	int r;

	assert_non_null(grown);
	memcpy(grown, p, len);
	assert_int_equal((grown[at] << 8) | grown[at + 1], slen);
	grown[at] = (uint8_t)((slen + 1) >> 8);
	grown[at + 1] = (uint8_t)(slen + 1);
	grown[len] = 'x';
	r = decode_rc(type, grown, len + 1);
	free(grown);
	return r;
}

/* A FILES entry written field by field, with no checks (link written even if not a symlink). */
static void put_file_raw(struct wbuf *w, const struct proto_file *f)
{
	wbuf_put_u32(w, f->id);
	wbuf_put_u8(w, f->ftype);
	wbuf_put_u32(w, f->mode);
	wbuf_put_u64(w, f->size);
	wbuf_put_u64(w, (uint64_t)f->mtime_sec);
	wbuf_put_u32(w, f->mtime_nsec);
	wbuf_put_u32(w, f->uid);
	wbuf_put_u32(w, f->gid);
	wbuf_put_str16(w, f->name, UINT16_MAX);
	wbuf_put_str16(w, f->link ? f->link : "", UINT16_MAX);
}

static int decode_one_file_raw(const struct proto_file *f)
{
	static uint8_t buf[3 * PROTO_MAX_PATH];
	struct wbuf w;

	wbuf_init(&w, buf, sizeof(buf));
	wbuf_put_u16(&w, 1);
	put_file_raw(&w, f);
	assert_false(w.overflow);
	return decode_rc(MSG_FILES, buf, w.len);
}

/* ---- header ------------------------------------------------------------- */

static void test_hdr_round_trip(void **state)
{
	uint8_t h[PROTO_HDR_LEN];
	const uint8_t expect[PROTO_HDR_LEN] = { 0x52, 0x44, 0x4d, 0x43, 1, 0, 0, 6,
						0,    0,    0,	  0,	0, 1, 2, 3 };
	struct proto_hdr d;

	(void)state;
	proto_hdr_encode(MSG_FILES, 0x10203, h);
	assert_memory_equal(h, expect, sizeof(h));
	assert_int_equal(proto_hdr_decode(h, &d), 0);
	assert_int_equal(d.version, 1);
	assert_int_equal(d.type, MSG_FILES);
	assert_int_equal(d.flags, 0);
	assert_int_equal(d.length, 0x10203);

	for (uint16_t t = 1; t <= MSG_TYPE_MAX; t++) {
		if (!type_defined(t)) {
			proto_hdr_encode(t, 0, h);
			assert_int_equal(proto_hdr_decode(h, &d), -ENOMSG);
			continue;
		}
		proto_hdr_encode(t, 0, h);
		assert_int_equal(proto_hdr_decode(h, &d), 0);
		assert_int_equal(d.type, t);
	}
	assert_true(type_defined(MSG_ENTRY_FAILED) && type_defined(MSG_XATTRS));
	assert_string_equal(proto_type_name(0), "UNKNOWN");
	assert_string_equal(proto_type_name(MSG_TYPE_MAX + 1), "UNKNOWN");
	assert_string_equal(proto_err_name(PERR_VERSION), "VERSION_MISMATCH");
	assert_string_equal(proto_err_name(PERR_MAX + 1), "UNKNOWN");
}

/* The device codes: named, and downgraded for a peer without PROTO_CAP_DEVICES. */
static void test_device_codes(void **state)
{
	(void)state;
	assert_string_equal(proto_err_name(PERR_DEVICE_REFUSED), "DEVICE_REFUSED");
	assert_string_equal(proto_err_name(PERR_DEVICE_BUSY), "DEVICE_BUSY");
	assert_string_equal(proto_err_name(PERR_DEVICE_SMALL), "DEVICE_SMALL");
	assert_int_equal(proto_err_for_peer(PERR_DEVICE_REFUSED, 0), PERR_PERMISSION);
	assert_int_equal(proto_err_for_peer(PERR_DEVICE_BUSY, 0), PERR_BUSY);
	assert_int_equal(proto_err_for_peer(PERR_DEVICE_SMALL, PROTO_CAP_TCP), PERR_NOSPACE);
	for (uint32_t c = PERR_DEVICE_REFUSED; c <= PERR_DEVICE_SMALL; c++) {
		assert_int_equal(proto_err_for_peer(c, PROTO_CAP_DEVICES), c);
	}
	for (uint32_t c = 0; c < PERR_DEVICE_REFUSED; c++) {
		assert_int_equal(proto_err_for_peer(c, 0), c);
	}
	assert_true(PROTO_CAPS_KNOWN & PROTO_CAP_DEVICES);
}

static void test_hdr_bad_fields(void **state)
{
	uint8_t h[PROTO_HDR_LEN];
	struct proto_hdr d;

	(void)state;
	/* Any byte of the magic wrong. */
	for (size_t i = 0; i < 4; i++) {
		proto_hdr_encode(MSG_PING, 8, h);
		h[i] ^= 0x01;
		assert_int_equal(proto_hdr_decode(h, &d), -EBADMSG);
	}
	/* Version 0 and 2 (and 255) are not spoken. */
	for (unsigned v = 0; v < 256; v++) {
		proto_hdr_encode(MSG_PING, 8, h);
		h[4] = (uint8_t)v;
		assert_int_equal(proto_hdr_decode(h, &d),
				 v == PROTO_VERSION ? 0 : -EPROTONOSUPPORT);
	}
	/* Reserved u8, reserved u16 and every flag bit. */
	for (unsigned bit = 0; bit < 8; bit++) {
		proto_hdr_encode(MSG_PING, 8, h);
		h[5] = (uint8_t)(1u << bit);
		assert_int_equal(proto_hdr_decode(h, &d), -EBADMSG);
	}
	for (unsigned bit = 0; bit < 16; bit++) {
		proto_hdr_encode(MSG_PING, 8, h);
		h[8 + (bit / 8)] = (uint8_t)(1u << (bit % 8));
		assert_int_equal(proto_hdr_decode(h, &d), -EBADMSG);
		proto_hdr_encode(MSG_PING, 8, h);
		h[10 + (bit / 8)] = (uint8_t)(1u << (bit % 8));
		assert_int_equal(proto_hdr_decode(h, &d), -EBADMSG);
	}
}

static void test_hdr_length_and_type(void **state)
{
	uint8_t h[PROTO_HDR_LEN];
	struct proto_hdr d;

	(void)state;
	proto_hdr_encode(MSG_FILES, PROTO_MAX_PAYLOAD, h);
	assert_int_equal(proto_hdr_decode(h, &d), 0);
	assert_int_equal(d.length, PROTO_MAX_PAYLOAD);
	proto_hdr_encode(MSG_FILES, PROTO_MAX_PAYLOAD + 1, h);
	assert_int_equal(proto_hdr_decode(h, &d), -EMSGSIZE);
	proto_hdr_encode(MSG_FILES, UINT32_MAX, h);
	assert_int_equal(proto_hdr_decode(h, &d), -EMSGSIZE);

	proto_hdr_encode(0, 0, h);
	assert_int_equal(proto_hdr_decode(h, &d), -ENOMSG);
	proto_hdr_encode(MSG_TYPE_MAX + 1, 0, h);
	assert_int_equal(proto_hdr_decode(h, &d), -ENOMSG);
	assert_int_equal(d.type, MSG_TYPE_MAX + 1); /* reported for the error reply */
	proto_hdr_encode(UINT16_MAX, 0, h);
	assert_int_equal(proto_hdr_decode(h, &d), -ENOMSG);
}

/* ---- round trips -------------------------------------------------------- */

static void test_round_trip_every_type(void **state)
{
	struct msg m;

	(void)state;
	for (uint16_t t = 1; t <= N_TYPES; t++) {
		if (!type_defined(t)) {
			continue;
		}
		sample(t, &m);
		round_trip(&m);
	}
	/* FILES and FILES_ACK with no entries are valid; GET with none is not. */
	m = (struct msg){ .type = MSG_FILES };
	round_trip(&m);
	m = (struct msg){ .type = MSG_FILES_ACK };
	round_trip(&m);
	/* An empty LIST path asks for the modules; a MODULES batch may be empty. */
	m = (struct msg){ .type = MSG_LIST };
	round_trip(&m);
	m = (struct msg){ .type = MSG_MODULES };
	round_trip(&m);
	/* An empty DELETED: still looking; SUPPRESSED: nothing looked at. */
	m = (struct msg){ .type = MSG_DELETED };
	round_trip(&m);
	m = (struct msg){ .type = MSG_DELETED, .u.deleted.flags = PROTO_DELETED_SUPPRESSED };
	round_trip(&m);
	/* With DELETE, OPEN carries max_delete (any value, "none" too). */
	sample_open_delete(&m);
	round_trip(&m);
	m.u.open.max_delete = PROTO_NO_MAX_DELETE;
	round_trip(&m);
	m.u.open.max_delete = 0;
	round_trip(&m);
}

static void test_round_trip_edges(void **state)
{
	struct msg m;

	(void)state;
	/* Every limit exactly at its edge is accepted. */
	sample(MSG_OPEN, &m);
	m.u.open.direction = PROTO_DIR_PULL;
	m.u.open.flags &= ~PROTO_OPEN_ASSUME_ZERO; /* a push's only */
	m.u.open.transport = 0;
	m.u.open.lanes = PROTO_MAX_LANES;
	m.u.open.chunk_size = PROTO_MAX_CHUNK;
	m.u.open.slots = PROTO_MAX_SLOTS;
	round_trip(&m);
	m.u.open.lanes = 1;
	m.u.open.chunk_size = PROTO_MIN_CHUNK;
	m.u.open.slots = 1;
	m.u.open.flags = 0;
	round_trip(&m);

	sample(MSG_OPEN_OK, &m);
	m.u.open_ok.transport = 1;
	m.u.open_ok.lanes = PROTO_MAX_LANES;
	m.u.open_ok.data_port = UINT16_MAX;
	m.u.open_ok.chunk_size = PROTO_MAX_CHUNK;
	m.u.open_ok.slots = PROTO_MAX_SLOTS;
	round_trip(&m);

	sample(MSG_RING, &m);
	m.u.ring.slots = PROTO_MAX_SLOTS;
	m.u.ring.slot_size = PROTO_MAX_CHUNK;
	m.u.ring.addr = UINT64_MAX - (uint64_t)PROTO_MAX_SLOTS * PROTO_MAX_CHUNK;
	m.u.ring.desc_addr = UINT64_MAX - (uint64_t)PROTO_MAX_SLOTS * PROTO_DESC_LEN;
	round_trip(&m);

	sample(MSG_HELLO, &m);
	m.u.hello.min_version = m.u.hello.max_version = 7;
	round_trip(&m);

	sample(MSG_FILE_DONE, &m);
	m.u.file_done.status = PERR_MAX;
	round_trip(&m);
	sample(MSG_FILE_RESULT, &m);
	m.u.file_result.status = PERR_MAX;
	round_trip(&m);

	/* A regular file of INT64_MAX bytes, mode 07777, nsec just below 1e9. */
	{
		char name[] = "big";
		struct proto_file f = { .id = UINT32_MAX,
					.ftype = PROTO_FT_REG,
					.mode = 07777,
					.size = INT64_MAX,
					.mtime_sec = INT64_MIN,
					.mtime_nsec = 999999999,
					.uid = UINT32_MAX,
					.gid = UINT32_MAX,
					.name = name };

		m = (struct msg){ .type = MSG_FILES, .u.files = { .count = 1, .files = &f } };
		round_trip(&m);
	}
}

/* Strings exactly at their cap decode; one byte over is refused (A9, A1). */
static void test_string_caps(void **state)
{
	struct msg m;
	size_t len;
	char *text = repeat('t', PROTO_MAX_TEXT);
	char *path = repeat('p', PROTO_MAX_PATH);

	(void)state;
	sample(MSG_HELLO, &m);
	strcpy(m.u.hello.software, text);
	round_trip(&m);
	len = encode_ok(&m);
	assert_int_equal(decode_last_string_grown(MSG_HELLO, payload(), len, PROTO_MAX_TEXT),
			 -EBADMSG);

	sample(MSG_ERROR, &m);
	strcpy(m.u.error.text, text);
	round_trip(&m);
	len = encode_ok(&m);
	assert_int_equal(decode_last_string_grown(MSG_ERROR, payload(), len, PROTO_MAX_TEXT),
			 -EBADMSG);

	sample(MSG_OPEN, &m);
	strcpy(m.u.open.path, path);
	round_trip(&m);
	m.u.open.flags &= ~PROTO_OPEN_ENCRYPT; /* its wish byte would follow the path */
	len = encode_ok(&m);
	assert_int_equal(decode_last_string_grown(MSG_OPEN, payload(), len, PROTO_MAX_PATH),
			 -EBADMSG);

	sample(MSG_FILE_DONE, &m);
	strcpy(m.u.file_done.text, text);
	round_trip(&m);
	len = encode_ok(&m);
	assert_int_equal(decode_last_string_grown(MSG_FILE_DONE, payload(), len, PROTO_MAX_TEXT),
			 -EBADMSG);

	sample(MSG_FILE_RESULT, &m);
	strcpy(m.u.file_result.text, text);
	round_trip(&m);
	len = encode_ok(&m);
	assert_int_equal(decode_last_string_grown(MSG_FILE_RESULT, payload(), len, PROTO_MAX_TEXT),
			 -EBADMSG);

	{
		struct proto_status st = { .id = 1, .status = PERR_IO, .text = text };

		m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
		round_trip(&m);
		len = encode_ok(&m);
		assert_int_equal(
		    decode_last_string_grown(MSG_FILES_ACK, payload(), len, PROTO_MAX_TEXT),
		    -EBADMSG);
	}
	{
		m = (struct msg){ .type = MSG_GET, .u.get = { .count = 1, .paths = &path } };
		round_trip(&m);
		len = encode_ok(&m);
		assert_int_equal(decode_last_string_grown(MSG_GET, payload(), len, PROTO_MAX_PATH),
				 -EBADMSG);
	}
	{
		/* FILES: a symlink whose name and target are both at PROTO_MAX_PATH. */
		struct proto_file f = {
			.id = 1, .ftype = PROTO_FT_SYMLINK, .mode = 0777, .name = path, .link = path
		};
		char *over = repeat('o', PROTO_MAX_PATH + 1);

		m = (struct msg){ .type = MSG_FILES, .u.files = { .count = 1, .files = &f } };
		round_trip(&m);
		len = encode_ok(&m);
		assert_int_equal(
		    decode_last_string_grown(MSG_FILES, payload(), len, PROTO_MAX_PATH), -EBADMSG);
		/* The name (not the last field) over its cap. */
		f.name = over;
		assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
		f.name = path;
		assert_int_equal(decode_one_file_raw(&f), 0);
		free(over);
	}
	free(text);
	free(path);
}

/* The string length also must not run past the payload. */
static void test_string_longer_than_payload(void **state)
{
	struct msg m;
	size_t len;

	(void)state;
	sample(MSG_ERROR, &m);
	len = encode_ok(&m);
	/* Claim 2 more bytes than the text has, and supply only one. */
	payload()[5] = (uint8_t)(strlen(m.u.error.text) + 2);
	assert_int_equal(decode_rc(MSG_ERROR, payload(), len + 1), -EBADMSG);

	sample(MSG_GET, &m);
	len = encode_ok(&m);
	payload()[len - strlen(s_get1) - 1] = (uint8_t)(strlen(s_get1) + 1);
	assert_int_equal(decode_rc(MSG_GET, payload(), len), -EBADMSG);
}

/* Embedded NUL bytes would make a peer's name differ from what we check. */
static void test_embedded_nul(void **state)
{
	struct msg m;
	size_t len;
	uint16_t types[] = { MSG_HELLO,	      MSG_ERROR,     MSG_OPEN, MSG_FILE_DONE,
			     MSG_FILE_RESULT, MSG_FILES_ACK, MSG_GET,  MSG_FILES };

	(void)state;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		sample(types[i], &m);
		len = encode_ok(&m);
		assert_int_equal(decode_rc(types[i], payload(), len), 0);
		/* The last string in each sample is at least 2 bytes: put a NUL in its middle. */
		payload()[len - 2] = '\0';
		assert_int_equal(decode_rc(types[i], payload(), len), -EBADMSG);
	}
	/* A NUL in a FILES name (not the last string). */
	{
		char name[] = "a?b";
		struct proto_file f = { .id = 1, .ftype = PROTO_FT_REG, .name = name };
		uint8_t buf[128];
		struct wbuf w;

		wbuf_init(&w, buf, sizeof(buf));
		wbuf_put_u16(&w, 1);
		put_file_raw(&w, &f);
		assert_int_equal(decode_rc(MSG_FILES, buf, w.len), 0);
		buf[w.len - 2 - 2] = '\0'; /* the '?' (before the empty link's u16) */
		assert_int_equal(decode_rc(MSG_FILES, buf, w.len), -EBADMSG);
	}
}

/* ---- truncation and trailing bytes -------------------------------------- */

static void test_truncated_every_byte(void **state)
{
	struct msg m;

	(void)state;
	for (uint16_t t = 1; t <= N_TYPES; t++) {
		size_t len;
		uint8_t *full;

		if (!type_defined(t)) {
			continue;
		}
		sample(t, &m);
		if (t == MSG_OPEN_OK) {
			/*
			 * Its lanes byte is optional: cut off, the rest is the
			 * older form, which the client refuses when its OPEN asked
			 * (test_bad_open_ok; client/copy.c).
			 */
			m.u.open_ok.lanes_sealed = 0;
		}
		len = encode_ok(&m);
		full = malloc(len + 1);
		assert_non_null(full);
		memcpy(full, payload(), len);
		for (size_t cut = 0; cut < len; cut++) {
			if (decode_rc(t, full, cut) != -EBADMSG) {
				fail_msg("%s cut at %zu of %zu decoded", proto_type_name(t), cut,
					 len);
			}
		}
		/* Trailing garbage, whatever its value. */
		full[len] = 0;
		assert_int_equal(decode_rc(t, full, len + 1), -EBADMSG);
		full[len] = 0xff;
		assert_int_equal(decode_rc(t, full, len + 1), -EBADMSG);
		assert_int_equal(decode_rc(t, full, len), 0);
		free(full);
	}
}

static void test_decode_refuses_oversize_and_unknown(void **state)
{
	/*
	 * More than PROTO_MAX_PAYLOAD bytes handed in: refused, even though
	 * they are a well-formed GET (256 paths at PROTO_MAX_PATH).
	 */
	size_t big = 2 + PROTO_MAX_BATCH * (2 + (size_t)PROTO_MAX_PATH);
	uint8_t *buf = malloc(big);
	char *path = repeat('p', PROTO_MAX_PATH);
	struct wbuf w;

	(void)state;
	assert_non_null(buf);
	wbuf_init(&w, buf, big);
	wbuf_put_u16(&w, PROTO_MAX_BATCH);
	for (size_t i = 0; i < PROTO_MAX_BATCH; i++) {
		wbuf_put_str16(&w, path, PROTO_MAX_PATH);
	}
	assert_false(w.overflow);
	assert_int_equal(w.len, big);
	assert_true(big > PROTO_MAX_PAYLOAD);
	assert_int_equal(decode_rc(MSG_GET, buf, big), -EBADMSG);
	free(path);
	free(buf);
	assert_int_equal(decode_rc(0, frame, 0), -EBADMSG);
	assert_int_equal(decode_rc(MSG_TYPE_MAX + 1, frame, 0), -EBADMSG);
}

/* ---- lists -------------------------------------------------------------- */

static void test_lists_at_batch_cap(void **state)
{
	struct proto_file *files = calloc(PROTO_MAX_BATCH, sizeof(*files));
	struct proto_status *st = calloc(PROTO_MAX_BATCH, sizeof(*st));
	char **paths = calloc(PROTO_MAX_BATCH, sizeof(*paths));
	char names[PROTO_MAX_BATCH][16];
	struct msg m;

	(void)state;
	assert_non_null(files);
	assert_non_null(st);
	assert_non_null(paths);
	for (size_t i = 0; i < PROTO_MAX_BATCH; i++) {
		snprintf(names[i], sizeof(names[i]), "m/f%03zu", i);
		files[i] = s_files[i % 3];
		files[i].id = (uint32_t)i;
		files[i].name = names[i];
		st[i] = (struct proto_status){ .id = (uint32_t)i,
					       .status = (uint32_t)(i % (PERR_MAX + 1)),
					       .text = names[i] };
		paths[i] = names[i];
	}
	m = (struct msg){ .type = MSG_FILES,
			  .u.files = { .count = PROTO_MAX_BATCH, .files = files } };
	round_trip(&m);
	m = (struct msg){ .type = MSG_FILES_ACK,
			  .u.files_ack = { .count = PROTO_MAX_BATCH, .st = st } };
	round_trip(&m);
	m = (struct msg){ .type = MSG_GET, .u.get = { .count = PROTO_MAX_BATCH, .paths = paths } };
	round_trip(&m);

	/* One more: the encoder refuses ... */
	m = (struct msg){ .type = MSG_FILES, .u.files = { .count = PROTO_MAX_BATCH + 1 } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = PROTO_MAX_BATCH + 1 } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m = (struct msg){ .type = MSG_GET, .u.get = { .count = PROTO_MAX_BATCH + 1 } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);

	/* ... and the decoder refuses 257 well-formed entries. */
	{
		struct wbuf w;
		uint8_t *buf = payload();

		wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
		wbuf_put_u16(&w, PROTO_MAX_BATCH + 1);
		for (size_t i = 0; i <= PROTO_MAX_BATCH; i++) {
			put_file_raw(&w, &files[i % PROTO_MAX_BATCH]);
		}
		assert_false(w.overflow);
		assert_int_equal(decode_rc(MSG_FILES, buf, w.len), -EBADMSG);

		wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
		wbuf_put_u16(&w, PROTO_MAX_BATCH + 1);
		for (size_t i = 0; i <= PROTO_MAX_BATCH; i++) {
			wbuf_put_u32(&w, (uint32_t)i);
			wbuf_put_u32(&w, PERR_OK);
			wbuf_put_str16(&w, "ok", PROTO_MAX_TEXT);
		}
		assert_false(w.overflow);
		assert_int_equal(decode_rc(MSG_FILES_ACK, buf, w.len), -EBADMSG);

		wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
		wbuf_put_u16(&w, PROTO_MAX_BATCH + 1);
		for (size_t i = 0; i <= PROTO_MAX_BATCH; i++) {
			wbuf_put_str16(&w, "m/p", PROTO_MAX_PATH);
		}
		assert_false(w.overflow);
		assert_int_equal(decode_rc(MSG_GET, buf, w.len), -EBADMSG);
	}
	free(files);
	free(st);
	free(paths);
}

/* FILTER rules written with no checks: count, then (action, pattern) each. */
static size_t filter_raw(uint8_t *buf, size_t cap, uint16_t count, uint8_t action,
			 const char *pattern)
{
	struct wbuf w;

	wbuf_init(&w, buf, cap);
	wbuf_put_u16(&w, count);
	for (size_t i = 0; i < count; i++) {
		wbuf_put_u8(&w, action);
		wbuf_put_str16(&w, pattern, UINT16_MAX);
	}
	assert_false(w.overflow);
	return w.len;
}

/* FILTER: the decoder's checks, each on a message otherwise good. */
static void test_filter_checks(void **state)
{
	size_t cap = PROTO_MAX_PAYLOAD;
	uint8_t *buf = malloc(cap);
	char *big = repeat('p', PROTO_MAX_PATH + 1);
	struct msg m;
	size_t len;

	(void)state;
	assert_non_null(buf);
	len = filter_raw(buf, cap, 1, PROTO_FILTER_EXCLUDE, "*.o");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), 0);
	len = filter_raw(buf, cap, 1, PROTO_FILTER_INCLUDE, "*.o");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), 0);
	/* An unknown action, an empty pattern, no rules at all. */
	for (uint8_t a = 0; a < 8; a++) {
		len = filter_raw(buf, cap, 1, a, "x");
		assert_int_equal(decode_rc(MSG_FILTER, buf, len),
				 a == PROTO_FILTER_INCLUDE || a == PROTO_FILTER_EXCLUDE ? 0
											: -EBADMSG);
	}
	len = filter_raw(buf, cap, 1, PROTO_FILTER_EXCLUDE, "");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	len = filter_raw(buf, cap, 0, PROTO_FILTER_EXCLUDE, "x");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	/* A pattern over PROTO_MAX_PATH; one at it is fine. */
	len = filter_raw(buf, cap, 1, PROTO_FILTER_EXCLUDE, big);
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	len = filter_raw(buf, cap, 1, PROTO_FILTER_EXCLUDE, big + 1);
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), 0);
	/* The count cap, and a count the payload can't hold (before any allocation). */
	len = filter_raw(buf, cap, PROTO_MAX_FILTERS, PROTO_FILTER_EXCLUDE, "a");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), 0);
	len = filter_raw(buf, cap, PROTO_MAX_FILTERS + 1, PROTO_FILTER_EXCLUDE, "a");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	len = filter_raw(buf, cap, 2, PROTO_FILTER_EXCLUDE, "a");
	buf[1] = 200;
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	/* The byte cap: 64 patterns of PROTO_MAX_PATH fill it, 65 are over. */
	len = filter_raw(buf, cap, 64, PROTO_FILTER_EXCLUDE, big + 1);
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), 0);
	len = filter_raw(buf, cap, 65, PROTO_FILTER_EXCLUDE, big + 1);
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	/* Trailing bytes, a cut message, a NUL in a pattern. */
	len = filter_raw(buf, cap, 1, PROTO_FILTER_EXCLUDE, "ab");
	assert_int_equal(decode_rc(MSG_FILTER, buf, len + 1), -EBADMSG);
	assert_int_equal(decode_rc(MSG_FILTER, buf, len - 1), -EBADMSG);
	buf[len - 1] = '\0';
	assert_int_equal(decode_rc(MSG_FILTER, buf, len), -EBADMSG);
	/* The encoder refuses more rules than the cap. */
	m = (struct msg){ .type = MSG_FILTER,
			  .u.filter = { .count = PROTO_MAX_FILTERS + 1, .rules = s_rules } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	free(big);
	free(buf);
}

/* A huge count with a tiny payload is refused before any allocation (A3). */
static void test_lists_huge_count(void **state)
{
	const uint16_t types[] = { MSG_FILES, MSG_FILES_ACK, MSG_GET };
	const uint16_t counts[] = { UINT16_MAX, PROTO_MAX_BATCH + 1, PROTO_MAX_BATCH, 2 };

	(void)state;
	for (size_t t = 0; t < 3; t++) {
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			uint8_t p[4] = { (uint8_t)(counts[c] >> 8), (uint8_t)counts[c], 0, 0 };

			assert_int_equal(decode_rc(types[t], p, sizeof(p)), -EBADMSG);
		}
	}
	/* GET must name something. */
	{
		const uint8_t p[2] = { 0, 0 };

		assert_int_equal(decode_rc(MSG_GET, p, sizeof(p)), -EBADMSG);
	}
}

/* One path short of a full frame fits; one byte more is refused by the encoder. */
static void test_encode_payload_cap(void **state)
{
	/* 2 + 255 * (2 + 4096) + (2 + 3582) == PROTO_MAX_PAYLOAD */
	char *full = repeat('p', PROTO_MAX_PATH);
	char *tail = repeat('q', 3583);
	char **paths = calloc(PROTO_MAX_BATCH, sizeof(*paths));
	size_t big = FRAME_CAP + 4096;
	uint8_t *buf = malloc(big);
	struct msg m = { .type = MSG_GET, .u.get = { .count = PROTO_MAX_BATCH } };

	(void)state;
	assert_non_null(paths);
	assert_non_null(buf);
	for (size_t i = 0; i < PROTO_MAX_BATCH - 1; i++) {
		paths[i] = full;
	}
	paths[PROTO_MAX_BATCH - 1] = tail + 1;
	m.u.get.paths = paths;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), (int)FRAME_CAP);
	round_trip(&m);
	assert_int_equal(msg_encode(&m, frame, sizeof(frame) - 1), -EMSGSIZE);

	/* Over PROTO_MAX_PAYLOAD, even with room to spare in the buffer. */
	paths[PROTO_MAX_BATCH - 1] = tail;
	assert_int_equal(msg_encode(&m, buf, big), -EMSGSIZE);
	free(buf);
	free(paths);
	free(full);
	free(tail);
}

/* ---- field checks, message by message ----------------------------------- */

static void test_bad_hello(void **state)
{
	struct msg m;

	(void)state;
	sample(MSG_HELLO, &m);
	m.u.hello.min_version = 2;
	m.u.hello.max_version = 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
}

static void test_bad_open(void **state)
{
	struct msg m;
	size_t len;

	(void)state;
#define BAD_OPEN(field, value)                                    \
	do {                                                      \
		sample(MSG_OPEN, &m);                             \
		m.u.open.field = (value);                         \
		assert_int_equal(encode_decode_rc(&m), -EBADMSG); \
	} while (0)
	BAD_OPEN(direction, 0);
	BAD_OPEN(direction, 3);
	BAD_OPEN(transport, 3);
	BAD_OPEN(lanes, 0);
	BAD_OPEN(lanes, PROTO_MAX_LANES + 1);
	BAD_OPEN(chunk_size, 0);
	BAD_OPEN(chunk_size, PROTO_MIN_CHUNK / 2);
	BAD_OPEN(chunk_size, PROTO_MIN_CHUNK + 1);
	BAD_OPEN(chunk_size, 3 * PROTO_MIN_CHUNK);
	BAD_OPEN(chunk_size, PROTO_MAX_CHUNK * 2);
	BAD_OPEN(chunk_size, 1u << 31);
	BAD_OPEN(slots, 0);
	BAD_OPEN(slots, PROTO_MAX_SLOTS + 1);
	for (unsigned bit = 7; bit < 32; bit++) {
		if (PROTO_OPEN_FLAGS_KNOWN & (1u << bit)) {
			continue;
		}
		BAD_OPEN(flags, (PROTO_OPEN_FLAGS_KNOWN & ~PROTO_OPEN_SKIP_EXISTS &
				 ~PROTO_OPEN_SKIP_CHECKSUM & ~PROTO_OPEN_DELETE) |
				    (1u << bit));
	}
	/*
	 * DELETE: a recursive push's (a dry run's too: a probe), a pull's only
	 * in a dry run (a probe, the client receives), never without RECURSIVE.
	 */
	sample_open_delete(&m);
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.open.direction = PROTO_DIR_PULL;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.open.flags |= PROTO_OPEN_DRY_RUN;
	assert_int_equal(encode_decode_rc(&m), 0);
	assert_true(proto_open_is_probe(m.u.open.flags));
	sample_open_delete(&m);
	m.u.open.flags &= ~PROTO_OPEN_RECURSIVE;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.open.flags |= PROTO_OPEN_DRY_RUN;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_open_delete(&m);
	m.u.open.flags |= PROTO_OPEN_DRY_RUN;
	assert_int_equal(encode_decode_rc(&m), 0);
	assert_true(proto_open_is_probe(m.u.open.flags));
	/* A probe is a dry run with a skip level or DELETE; a plain dry run is not one. */
	assert_false(proto_open_is_probe(PROTO_OPEN_DRY_RUN | PROTO_OPEN_RECURSIVE));
	assert_false(proto_open_is_probe(PROTO_OPEN_SKIP_QUICK | PROTO_OPEN_DELETE));
	assert_true(proto_open_is_probe(PROTO_OPEN_DRY_RUN | PROTO_OPEN_SKIP_CHECKSUM));
	/* ASSUME_ZERO: a push's only (a pull's receiver is the client, which applies it). */
	sample(MSG_OPEN, &m);
	assert_true(m.u.open.flags & PROTO_OPEN_ASSUME_ZERO);
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.open.direction = PROTO_DIR_PULL;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.open.flags |= PROTO_OPEN_DRY_RUN;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.open.flags &= ~PROTO_OPEN_ASSUME_ZERO;
	assert_int_equal(encode_decode_rc(&m), 0);
	assert_true(PROTO_CAPS_KNOWN & PROTO_CAP_ASSUME_ZERO);
	/* WRITE + SEND: a flag any OPEN may carry (the daemon checks the capability). */
	m.u.open.flags |= PROTO_OPEN_WRITE_SEND;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.open.direction = PROTO_DIR_PUSH;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.open.flags &= ~PROTO_OPEN_WRITE_SEND;
	assert_true(PROTO_CAPS_KNOWN & PROTO_CAP_WRITE_SEND);
	assert_true(PROTO_OPEN_FLAGS_KNOWN & PROTO_OPEN_WRITE_SEND);
	/* Its max_delete cut short, or missing. */
	sample_open_delete(&m);
	len = encode_ok(&m);
	for (size_t cut = len - 8; cut < len; cut++) {
		assert_int_equal(decode_rc(MSG_OPEN, payload(), cut), -EBADMSG);
	}
	/* Two skip levels at once. */
	BAD_OPEN(flags, PROTO_OPEN_SKIP_EXISTS | PROTO_OPEN_SKIP_QUICK);
	BAD_OPEN(flags, PROTO_OPEN_SKIP_EXISTS | PROTO_OPEN_SKIP_CHECKSUM);
	BAD_OPEN(flags, PROTO_OPEN_SKIP_QUICK | PROTO_OPEN_SKIP_CHECKSUM);
	BAD_OPEN(flags, PROTO_OPEN_SKIP_LEVELS);
	/* ENCRYPT's wish byte: known values only, and there. */
	BAD_OPEN(encrypt, 0);
	BAD_OPEN(encrypt, 3);
	sample(MSG_OPEN, &m);
	len = encode_ok(&m);
	assert_int_equal(decode_rc(MSG_OPEN, payload(), len - 1), -EBADMSG);
	/* Without the flag there is no wish byte, and a stray byte is refused. */
	sample(MSG_OPEN, &m);
	m.u.open.flags &= ~PROTO_OPEN_ENCRYPT;
	m.u.open.encrypt = 0;
	assert_int_equal(encode_decode_rc(&m), 0);
	len = encode_ok(&m);
	payload()[len] = PROTO_ENCRYPT_PREFER;
	assert_int_equal(decode_rc(MSG_OPEN, payload(), len + 1), -EBADMSG);
#undef BAD_OPEN
	/* The reserved byte after lanes. */
	sample(MSG_OPEN, &m);
	len = encode_ok(&m);
	payload()[3] = 1;
	assert_int_equal(decode_rc(MSG_OPEN, payload(), len), -EBADMSG);
}

/* BENCH: every field at its edges; each out of range, and the reserved bytes, refused. */
static void test_bench(void **state)
{
	struct msg m;
	size_t len;

	(void)state;
	sample(MSG_BENCH, &m);
	m.u.bench.transport = 0;
	m.u.bench.lanes = PROTO_MAX_LANES;
	m.u.bench.chunk_size = PROTO_MAX_CHUNK;
	m.u.bench.slots = PROTO_MAX_SLOTS;
	m.u.bench.bytes = PROTO_BENCH_MAX_BYTES;
	round_trip(&m);
	m.u.bench.transport = 2;
	m.u.bench.lanes = 1;
	m.u.bench.chunk_size = PROTO_MIN_CHUNK;
	m.u.bench.slots = 1;
	m.u.bench.bytes = 1;
	m.u.bench.seed = 0;
	round_trip(&m);
#define BAD_BENCH(field, value)                                   \
	do {                                                      \
		sample(MSG_BENCH, &m);                            \
		m.u.bench.field = (value);                        \
		assert_int_equal(encode_decode_rc(&m), -EBADMSG); \
	} while (0)
	BAD_BENCH(transport, 3);
	BAD_BENCH(lanes, 0);
	BAD_BENCH(lanes, PROTO_MAX_LANES + 1);
	BAD_BENCH(chunk_size, 0);
	BAD_BENCH(chunk_size, PROTO_MIN_CHUNK + 1);
	BAD_BENCH(chunk_size, PROTO_MAX_CHUNK * 2);
	BAD_BENCH(slots, 0);
	BAD_BENCH(slots, PROTO_MAX_SLOTS + 1);
	BAD_BENCH(bytes, 0);
	BAD_BENCH(bytes, PROTO_BENCH_MAX_BYTES + 1);
#undef BAD_BENCH
	/* The encrypt byte: a wish (1 prefer, 2 require) or 0; the byte after it reserved. */
	for (uint8_t w = 0; w <= PROTO_ENCRYPT_REQUIRE; w++) {
		sample(MSG_BENCH, &m);
		m.u.bench.encrypt = w;
		round_trip(&m);
	}
	sample(MSG_BENCH, &m);
	len = encode_ok(&m);
	payload()[2] = PROTO_ENCRYPT_REQUIRE + 1;
	assert_int_equal(decode_rc(MSG_BENCH, payload(), len), -EBADMSG);
	sample(MSG_BENCH, &m);
	len = encode_ok(&m);
	payload()[3] = 1;
	assert_int_equal(decode_rc(MSG_BENCH, payload(), len), -EBADMSG);
	/* Short by one byte, one byte too many. */
	sample(MSG_BENCH, &m);
	len = encode_ok(&m);
	assert_int_equal(len, 28);
	assert_int_equal(decode_rc(MSG_BENCH, payload(), len - 1), -EBADMSG);
	assert_int_equal(decode_rc(MSG_BENCH, payload(), len + 1), -EBADMSG);
}

static void test_bad_open_ok(void **state)
{
	struct msg m;
	size_t len;

	(void)state;
#define BAD_OPEN_OK(field, value)                                 \
	do {                                                      \
		sample(MSG_OPEN_OK, &m);                          \
		m.u.open_ok.field = (value);                      \
		assert_int_equal(encode_decode_rc(&m), -EBADMSG); \
	} while (0)
	BAD_OPEN_OK(data_port, 0);
	BAD_OPEN_OK(transport, 0);
	BAD_OPEN_OK(transport, 3);
	BAD_OPEN_OK(lanes, 0);
	BAD_OPEN_OK(lanes, PROTO_MAX_LANES + 1);
	BAD_OPEN_OK(chunk_size, 0);
	BAD_OPEN_OK(chunk_size, PROTO_MIN_CHUNK + PROTO_MIN_CHUNK / 2);
	BAD_OPEN_OK(chunk_size, PROTO_MAX_CHUNK * 2);
	BAD_OPEN_OK(slots, 0);
	BAD_OPEN_OK(slots, PROTO_MAX_SLOTS + 1);
	BAD_OPEN_OK(lanes_sealed, 3);
#undef BAD_OPEN_OK
	/* The lanes byte: absent for an OPEN without ENCRYPT (what older clients parse), one byte. */
	sample(MSG_OPEN_OK, &m);
	m.u.open_ok.lanes_sealed = 0;
	assert_int_equal(encode_decode_rc(&m), 0);
	sample(MSG_OPEN_OK, &m);
	m.u.open_ok.lanes_sealed = PROTO_LANES_CLEAR;
	assert_int_equal(encode_decode_rc(&m), 0);
	len = encode_ok(&m);
	payload()[len] = PROTO_LANES_CLEAR;
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len + 1), -EBADMSG);
}

/* Daemon rails: the lanes byte, then the count and the addresses; every cut or bad field refused. */
static void test_open_ok_rails(void **state)
{
	struct msg m, back;
	size_t len, base;

	(void)state;
	sample(MSG_OPEN_OK, &m);
	m.u.open_ok.lanes_sealed = 0;
	base = encode_ok(&m);
	m.u.open_ok.nrails = 2;
	m.u.open_ok.rails[0] = (struct proto_rail){ .family = PROTO_RAIL_INET,
						    .addr = { 10, 0, 0, 1 },
						    .port = 40002 };
	m.u.open_ok.rails[1] = (struct proto_rail){ .family = PROTO_RAIL_INET6, .port = 40003 };
	m.u.open_ok.rails[1].addr[15] = 1;
	len = encode_ok(&m);
	/* lanes byte (clear: not asked), count, 1 + 4 + 2, 1 + 16 + 2 */
	assert_int_equal(len, base + 1 + 1 + 7 + 19);
	assert_int_equal(payload()[base], PROTO_LANES_CLEAR);
	assert_int_equal(decode_copy(MSG_OPEN_OK, payload(), len, &back), 0);
	assert_int_equal(back.u.open_ok.lanes_sealed, PROTO_LANES_CLEAR);
	assert_int_equal(back.u.open_ok.nrails, 2);
	for (unsigned i = 0; i < 2; i++) {
		assert_int_equal(back.u.open_ok.rails[i].family, m.u.open_ok.rails[i].family);
		assert_int_equal(back.u.open_ok.rails[i].port, m.u.open_ok.rails[i].port);
		assert_memory_equal(back.u.open_ok.rails[i].addr, m.u.open_ok.rails[i].addr, 16);
	}
	msg_clear(&back);
	/* Cut anywhere inside the rails (the count included): refused. */
	for (size_t cut = base + 2; cut < len; cut++) {
		assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), cut), -EBADMSG);
	}
	/* A sealed lanes byte stays what it was. */
	m.u.open_ok.lanes_sealed = PROTO_LANES_SEALED;
	len = encode_ok(&m);
	assert_int_equal(decode_copy(MSG_OPEN_OK, payload(), len, &back), 0);
	assert_int_equal(back.u.open_ok.lanes_sealed, PROTO_LANES_SEALED);
	msg_clear(&back);
	/* Bad family, port 0, count 0 or beyond PROTO_MAX_RAILS, trailing bytes. */
	m.u.open_ok.rails[1].family = 5;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.open_ok.rails[1].family = PROTO_RAIL_INET6;
	m.u.open_ok.rails[0].port = 0;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.open_ok.rails[0].port = 1;
	len = encode_ok(&m);
	payload()[base + 1] = 0;
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len), -EBADMSG);
	payload()[base + 1] = PROTO_MAX_RAILS + 1;
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len), -EBADMSG);
	payload()[base + 1] = 2;
	payload()[len] = 0;
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len), 0);
	assert_int_equal(decode_rc(MSG_OPEN_OK, payload(), len + 1), -EBADMSG);
	/* The encoder refuses more than PROTO_MAX_RAILS. */
	m.u.open_ok.nrails = PROTO_MAX_RAILS + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EINVAL);
}

static void test_bad_ring(void **state)
{
	struct msg m;
	uint64_t span;

	(void)state;
#define BAD_RING(field, value)                                    \
	do {                                                      \
		sample(MSG_RING, &m);                             \
		m.u.ring.field = (value);                         \
		assert_int_equal(encode_decode_rc(&m), -EBADMSG); \
	} while (0)
	BAD_RING(slot_size, 0);
	BAD_RING(slot_size, 5000);
	BAD_RING(slot_size, PROTO_MAX_CHUNK * 2);
	BAD_RING(slots, 0);
	BAD_RING(slots, PROTO_MAX_SLOTS + 1);
	BAD_RING(addr, UINT64_MAX);
	BAD_RING(desc_addr, UINT64_MAX);
#undef BAD_RING
	/* The last slot (or descriptor) would wrap past 2^64 by one byte. */
	sample(MSG_RING, &m);
	span = (uint64_t)m.u.ring.slots * m.u.ring.slot_size;
	m.u.ring.addr = UINT64_MAX - span;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.ring.addr = UINT64_MAX - span + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);

	sample(MSG_RING, &m);
	span = (uint64_t)m.u.ring.slots * PROTO_DESC_LEN;
	m.u.ring.desc_addr = UINT64_MAX - span;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.ring.desc_addr = UINT64_MAX - span + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);

	/* One rkey per lane: 1..PROTO_MAX_LANES, and exactly that many follow. */
	sample(MSG_RING, &m);
	m.u.ring.nkeys = 0;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EINVAL);
	m.u.ring.nkeys = PROTO_MAX_LANES + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EINVAL);
	{
		/* addr, desc_addr, slots 16, slot_size 1 MiB, nkeys, keys */
		uint8_t p[25 + 4 * (PROTO_MAX_LANES + 1)] = { [16] = 0, 0, 0, 16, 0, 0x10, 0, 0 };
		struct msg d;

		for (unsigned n = 0; n <= PROTO_MAX_LANES + 1; n++) {
			p[24] = (uint8_t)n;
			for (unsigned k = 0; k < 4 * n; k++) {
				p[25 + k] = (uint8_t)(k + 1);
			}
			/* Exact length only: one key short, or one more, is refused. */
			if (n >= 1 && n <= PROTO_MAX_LANES) {
				assert_int_equal(decode_copy(MSG_RING, p, 25 + 4 * n, &d), 0);
				assert_int_equal(d.u.ring.nkeys, n);
				assert_int_equal(d.u.ring.rkey[n - 1],
						 (uint32_t)(4 * n - 3) << 24 | (4 * n - 2) << 16 |
						     (4 * n - 1) << 8 | (4 * n));
				msg_clear(&d);
				assert_int_equal(decode_rc(MSG_RING, p, 25 + 4 * n - 1), -EBADMSG);
				assert_int_equal(decode_rc(MSG_RING, p, 25 + 4 * n + 4), -EBADMSG);
			} else {
				assert_int_equal(decode_rc(MSG_RING, p, 25 + 4 * n), -EBADMSG);
			}
		}
	}
}

/* XATTRS: names in the namespaces carried, caps on names, values and count. */
static void test_bad_xattrs(void **state)
{
	static const char *const good[] = { "user.a", "security.selinux", "trusted.x",
					    "system.posix_acl_access", "system.posix_acl_default" };
	static const char *const bad[] = {
		"",	   "user.",    "user",	   "system.x", "system.posix_acl_accessx",
		"other.a", "trusted.", "security."
	};
	char *longname = repeat('n', PROTO_MAX_XATTR_NAME + 1);
	uint8_t *big = calloc(1, PROTO_MAX_XATTR_VALUE + 1);
	struct proto_xattr x = { .value = s_xval0, .len = 5 };
	struct msg m = { .type = MSG_XATTRS, .u.xattrs = { .id = 1, .count = 1, .x = &x } };
	struct msg d;
	size_t len;

	(void)state;
	assert_non_null(big);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		x.name = (char *)good[i];
		assert_true(proto_xattr_name_ok(good[i]));
		assert_int_equal(encode_decode_rc(&m), 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		x.name = (char *)bad[i];
		assert_false(proto_xattr_name_ok(bad[i]));
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	}
	/* A name at its cap (user. + 250), one over: the encoder refuses it too. */
	memcpy(longname, "user.", 5);
	longname[PROTO_MAX_XATTR_NAME] = '\0';
	x.name = longname;
	assert_int_equal(encode_decode_rc(&m), 0);
	longname[PROTO_MAX_XATTR_NAME] = 'n';
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	/* A value at its cap, one over (encoder and decoder both refuse). */
	x.name = s_xname0;
	x.value = big;
	x.len = PROTO_MAX_XATTR_VALUE;
	assert_int_equal(encode_decode_rc(&m), 0);
	x.len = PROTO_MAX_XATTR_VALUE + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	{
		uint8_t p[64];
		struct wbuf w;

		wbuf_init(&w, p, sizeof(p));
		wbuf_put_u32(&w, 1);
		wbuf_put_u16(&w, 1);
		wbuf_put_str16(&w, "user.a", 255);
		wbuf_put_u32(&w, PROTO_MAX_XATTR_VALUE + 1);
		assert_int_equal(decode_rc(MSG_XATTRS, p, w.len), -EBADMSG);
		/* A value longer than what follows. */
		wbuf_init(&w, p, sizeof(p));
		wbuf_put_u32(&w, 1);
		wbuf_put_u16(&w, 1);
		wbuf_put_str16(&w, "user.a", 255);
		wbuf_put_u32(&w, 5);
		wbuf_put_bytes(&w, "abcd", 4);
		assert_int_equal(decode_rc(MSG_XATTRS, p, w.len), -EBADMSG);
		/* A count over the cap, and one over what the payload can hold. */
		wbuf_init(&w, p, sizeof(p));
		wbuf_put_u32(&w, 1);
		wbuf_put_u16(&w, PROTO_MAX_XATTRS + 1);
		assert_int_equal(decode_rc(MSG_XATTRS, p, w.len), -EBADMSG);
		wbuf_init(&w, p, sizeof(p));
		wbuf_put_u32(&w, 1);
		wbuf_put_u16(&w, 2);
		wbuf_put_str16(&w, "user.a", 255);
		wbuf_put_u32(&w, 0);
		assert_int_equal(decode_rc(MSG_XATTRS, p, w.len), -EBADMSG);
	}
	/* Too many for the encoder. */
	m.u.xattrs.count = PROTO_MAX_XATTRS + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	/* A good one after which a bad name comes: nothing stays allocated (LSan). */
	{
		struct proto_xattr two[2] = { { .name = s_xname0, .value = s_xval0, .len = 5 },
					      { .name = (char *)"user.", .value = s_xval0 } };

		m.u.xattrs.count = 2;
		m.u.xattrs.x = two;
		len = encode_ok(&m);
		assert_int_equal(decode_copy(MSG_XATTRS, payload(), len, &d), -EBADMSG);
	}
	free(longname);
	free(big);
}

static void test_bad_files(void **state)
{
	char name[] = "x";
	char target[] = "y";
	const struct proto_file reg = {
		.id = 1, .ftype = PROTO_FT_REG, .mode = 0644, .size = 10, .name = name
	};
	const struct proto_file lnk = {
		.id = 2, .ftype = PROTO_FT_SYMLINK, .mode = 0777, .name = name, .link = target
	};
	const struct proto_file dir = {
		.id = 3, .ftype = PROTO_FT_DIR, .mode = 0755, .name = name
	};
	struct proto_file f;

	(void)state;
	assert_int_equal(decode_one_file_raw(&reg), 0);
	assert_int_equal(decode_one_file_raw(&lnk), 0);
	assert_int_equal(decode_one_file_raw(&dir), 0);

	f = reg;
	f.mode = 010000;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f.mode = 0100644; /* S_IFREG bits are not permission bits */
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = reg;
	f.mtime_nsec = 1000000000u;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f.mtime_nsec = UINT32_MAX;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = reg;
	f.size = (uint64_t)INT64_MAX + 1;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f.size = UINT64_MAX;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = reg;
	f.link = target; /* a regular file with a target */
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = dir;
	f.link = target;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = dir;
	f.size = 1;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = lnk;
	f.size = 9;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f = lnk;
	f.link = NULL; /* a symlink without a target */
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	/* Unknown types, with nothing else wrong (no size, no target). */
	f = reg;
	f.size = 0;
	f.ftype = 0;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f.ftype = 5;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	f.ftype = 0xff;
	assert_int_equal(decode_one_file_raw(&f), -EBADMSG);

	/* Hard links (type 4): a valid relative first name, no size. */
	{
		static const char *const good[] = { "y", "a/b", "a/b.c/.d", "...", "a/..b" };
		static const char *const bad[] = { "",	   "/y",   "y/",    "a//b",   ".",  "..",
						   "a/..", "../a", "a/./b", "a/../b", "./a" };
		const struct proto_file hl = { .id = 4,
					       .ftype = PROTO_FT_HARDLINK,
					       .mode = 0644,
					       .name = name,
					       .link = target };

		assert_int_equal(decode_one_file_raw(&hl), 0);
		for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
			f = hl;
			f.link = (char *)good[i];
			assert_int_equal(decode_one_file_raw(&f), 0);
		}
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			f = hl;
			f.link = (char *)bad[i];
			assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
		}
		f = hl;
		f.link = NULL;
		assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
		f = hl;
		f.size = 1;
		assert_int_equal(decode_one_file_raw(&f), -EBADMSG);
	}

	/* A bad entry after good ones: the good ones' strings are freed (LSan). */
	{
		uint8_t buf[256];
		struct wbuf w;

		f = reg;
		f.ftype = 5;
		wbuf_init(&w, buf, sizeof(buf));
		wbuf_put_u16(&w, 4);
		put_file_raw(&w, &reg);
		put_file_raw(&w, &lnk);
		put_file_raw(&w, &dir);
		put_file_raw(&w, &f);
		assert_false(w.overflow);
		assert_int_equal(decode_rc(MSG_FILES, buf, w.len), -EBADMSG);
	}
}

/* rsync -i's strings for what differed. */
static void test_itemize(void **state)
{
	char s[12];

	(void)state;
	proto_itemize(s, '<', PROTO_FT_REG, PROTO_ITEM_NEW);
	assert_string_equal(s, "<f+++++++++");
	proto_itemize(s, '>', PROTO_FT_REG,
		      PROTO_ITEM_CONTENT | PROTO_ITEM_SIZE | PROTO_ITEM_TIME | PROTO_ITEM_CHECKSUM);
	assert_string_equal(s, ">fcst......");
	proto_itemize(s, '.', PROTO_FT_DIR, PROTO_ITEM_PERMS | PROTO_ITEM_OWNER);
	assert_string_equal(s, ".d...po....");
	proto_itemize(s, 'c', PROTO_FT_SYMLINK, PROTO_ITEM_CONTENT);
	assert_string_equal(s, "cLc........");
	proto_itemize(s, '.', PROTO_FT_SYMLINK, PROTO_ITEM_TIME | PROTO_ITEM_GROUP);
	assert_string_equal(s, ".L..t..g...");
}

static void test_bad_status(void **state)
{
	struct msg m;

	(void)state;
	sample(MSG_FILES_ACK, &m);
	assert_int_equal(encode_decode_rc(&m), 0);
	{
		struct proto_status st[2] = { s_st[0], s_st[1] };

		st[1].status = PERR_MAX + 1;
		m.u.files_ack.st = st;
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
		st[1].status = UINT32_MAX;
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
		/* Items (PROTO_CAP_ITEMIZE) ride in the upper half: unknown ones are refused. */
		st[1].status = PERR_SKIPPED | (0x100u << 16);
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
		st[1].status = PERR_SKIPPED;
		st[1].items = PROTO_ITEMS_META;
		assert_int_equal(encode_decode_rc(&m), 0);
	}
	sample(MSG_FILE_DONE, &m);
	m.u.file_done.status = PERR_MAX + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample(MSG_FILE_RESULT, &m);
	m.u.file_result.status = PERR_MAX + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	/* ENTRY_FAILED says what failed: OK is no status for it. */
	sample(MSG_ENTRY_FAILED, &m);
	m.u.entry_failed.status = PERR_MAX + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.entry_failed.status = PERR_OK;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	/* Nor SKIPPED or SUM_WANTED: those are the receiver's answers, not failures. */
	m.u.entry_failed.status = PERR_SKIPPED;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.entry_failed.status = PERR_SUM_WANTED;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
}

/* RESUME: at most PROTO_MAX_RESUME_RANGES ranges, ascending, none empty or past 2^64. */
/* RESUME and ZEROS share their layout and the decoder's checks. */
static void bad_ranges(uint16_t type)
{
	struct msg m;
	struct wbuf w;
	size_t len;

	sample(type, &m);
	m.u.resume.count = 0;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.resume.count = PROTO_MAX_RESUME_RANGES;
	for (size_t i = 0; i < PROTO_MAX_RESUME_RANGES; i++) {
		m.u.resume.r[i] = (struct proto_range){ .offset = i * 10, .len = 10 };
	}
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.resume.count = PROTO_MAX_RESUME_RANGES + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	/* Over the cap on the wire: refused before anything is read into the table. */
	wbuf_init(&w, payload(), PROTO_MAX_PAYLOAD);
	wbuf_put_u32(&w, 1);
	wbuf_put_u16(&w, PROTO_MAX_RESUME_RANGES + 1);
	for (size_t i = 0; i <= PROTO_MAX_RESUME_RANGES; i++) {
		wbuf_put_u64(&w, i * 10);
		wbuf_put_u64(&w, 10);
	}
	len = w.len;
	assert_int_equal(decode_rc(type, payload(), len), -EBADMSG);
	sample(type, &m);
	m.u.resume.r[1].len = 0; /* empty */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample(type, &m);
	m.u.resume.r[1].offset = 1; /* overlaps the first */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample(type, &m);
	m.u.resume.r[0].offset = 9u << 20; /* not ascending */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample(type, &m);
	m.u.resume.r[1].offset = UINT64_MAX - 10; /* past 2^64 */
	m.u.resume.r[1].len = 11;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.resume.r[1].len = 10; /* ends exactly at 2^64 - 1 */
	assert_int_equal(encode_decode_rc(&m), 0);
}

static void test_bad_resume(void **state)
{
	(void)state;
	bad_ranges(MSG_RESUME);
}

/* ZEROS: empty, overlapping, unordered or overflowing ranges refused by the decoder. */
static void test_bad_zeros(void **state)
{
	(void)state;
	bad_ranges(MSG_ZEROS);
}

/* A DELTA SAME: two ranges, as ZEROS' sample. */
static void sample_delta_same(struct msg *m)
{
	*m = (struct msg){ .type = MSG_DELTA };
	m->u.delta.id = 12;
	m->u.delta.kind = PROTO_DELTA_SAME;
	m->u.delta.count = 2;
	m->u.delta.r[0] = (struct proto_range){ .offset = 1u << 20, .len = 4u << 20 };
	m->u.delta.r[1] = (struct proto_range){ .offset = 8u << 20, .len = 777 };
}

/* DELTA: both kinds round-trip; a bad kind, count, flag or range is refused. */
static void test_delta(void **state)
{
	static const uint8_t zero16[PROTO_HASH_LEN];
	struct msg m, *d;
	struct wbuf w;
	uint8_t *p;
	size_t len;

	(void)state;
	sample_delta_same(&m);
	d = calloc(1, sizeof(*d));
	assert_non_null(d);
	len = encode_ok(&m);
	assert_int_equal(msg_decode(MSG_DELTA, payload(), len, d), 0);
	assert_int_equal(d->u.delta.kind, PROTO_DELTA_SAME);
	assert_int_equal(d->u.delta.count, 2);
	assert_true(d->u.delta.r[1].offset == 8u << 20 && d->u.delta.r[1].len == 777);
	msg_clear(d);
	free(d);
	/* SAME ranges: the checks RESUME's have. */
	sample_delta_same(&m);
	m.u.delta.r[1].len = 0;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_delta_same(&m);
	m.u.delta.r[1].offset = 1; /* overlaps */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_delta_same(&m);
	m.u.delta.r[1].offset = UINT64_MAX - 10;
	m.u.delta.r[1].len = 11;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_delta_same(&m);
	m.u.delta.count = PROTO_MAX_RESUME_RANGES + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	/* No count, no kind, an unknown kind: the encoder refuses them... */
	sample(MSG_DELTA, &m);
	m.u.delta.count = 0;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	sample(MSG_DELTA, &m);
	m.u.delta.count = PROTO_MAX_DELTA_SUMS + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	sample(MSG_DELTA, &m);
	m.u.delta.kind = 3;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	sample(MSG_DELTA, &m);
	m.u.delta.flags = 2;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	/* TREE: in SUMS, round trip; never in SAME. */
	sample(MSG_DELTA, &m);
	m.u.delta.flags = PROTO_DELTA_TREE;
	d = calloc(1, sizeof(*d));
	assert_non_null(d);
	len = encode_ok(&m);
	assert_int_equal(msg_decode(MSG_DELTA, payload(), len, d), 0);
	assert_int_equal(d->u.delta.flags, PROTO_DELTA_TREE);
	free(d);
	sample_delta_same(&m);
	m.u.delta.flags = PROTO_DELTA_TREE;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	len = encode_ok(&(struct msg){ .type = MSG_DELTA,
				       .u.delta = { .id = 1,
						    .kind = PROTO_DELTA_SAME,
						    .count = 1,
						    .r = { { .offset = 0, .len = 1 } } } });
	payload()[5] = PROTO_DELTA_TREE;
	assert_int_equal(decode_rc(MSG_DELTA, payload(), len), -EBADMSG);
	/* ... and the decoder too, written by hand. */
	sample(MSG_DELTA, &m);
	len = encode_ok(&m);
	p = payload();
	p[4] = 3; /* kind */
	assert_int_equal(decode_rc(MSG_DELTA, p, len), -EBADMSG);
	p[4] = 0;
	assert_int_equal(decode_rc(MSG_DELTA, p, len), -EBADMSG);
	p[4] = PROTO_DELTA_SUMS;
	p[5] = 2; /* flags: an unknown one */
	assert_int_equal(decode_rc(MSG_DELTA, p, len), -EBADMSG);
	p[5] = PROTO_DELTA_TREE;
	assert_int_equal(decode_rc(MSG_DELTA, p, len), 0);
	p[5] = 0;
	assert_int_equal(decode_rc(MSG_DELTA, p, len), 0);
	assert_int_equal(decode_rc(MSG_DELTA, p, len - 1), -EBADMSG); /* a digest cut short */
	/* SUMS: count over the cap, or chunk indexes past PROTO_MAX_DELTA_CHUNKS. */
	wbuf_init(&w, payload(), PROTO_MAX_PAYLOAD);
	wbuf_put_u32(&w, 1);
	wbuf_put_u8(&w, PROTO_DELTA_SUMS);
	wbuf_put_u8(&w, 0);
	wbuf_put_u16(&w, PROTO_MAX_DELTA_SUMS + 1);
	wbuf_put_u64(&w, 0);
	for (size_t i = 0; i <= PROTO_MAX_DELTA_SUMS; i++) {
		wbuf_put_bytes(&w, zero16, PROTO_HASH_LEN);
	}
	assert_int_equal(decode_rc(MSG_DELTA, payload(), w.len), -EBADMSG);
	sample(MSG_DELTA, &m);
	m.u.delta.first = PROTO_MAX_DELTA_CHUNKS - 3;
	assert_int_equal(encode_decode_rc(&m), 0);
	m.u.delta.first = PROTO_MAX_DELTA_CHUNKS - 2;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.delta.first = UINT64_MAX;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
}

/* ---- encoder refusals --------------------------------------------------- */

/* LIST: only the defined flags; the path under its cap (issue 15). */
/*
 * ASSEMBLE: parts that do not add up (a gap, an overlap, an empty one, a
 * sum other than size, an offset that wraps), names that could leave the
 * staging directory or the destination, counts past the cap (the encoder
 * refuses them, and so does the decoder, written by hand, before it
 * allocates), unknown flags, a mode beyond 07777, nanoseconds of a second.
 */
/* LANE_DOWN: its exact bytes; a lane past PROTO_MAX_LANES or a reserved byte set is refused. */
static void test_lane_down(void **state)
{
	static const uint8_t expect[12] = { 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x02 };
	uint8_t bad[12];
	struct msg m = { .type = MSG_LANE_DOWN }, d;

	(void)state;
	m.u.lane_down.lane = PROTO_MAX_LANES - 1;
	m.u.lane_down.count = 0x102;
	assert_int_equal(encode_ok(&m), sizeof(expect));
	assert_memory_equal(payload(), expect, sizeof(expect));
	round_trip(&m);
	assert_string_equal(proto_type_name(MSG_LANE_DOWN), "LANE_DOWN");
	m.u.lane_down.lane = PROTO_MAX_LANES;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	for (size_t at = 0; at < 4; at++) {
		memcpy(bad, expect, sizeof(bad));
		bad[at] = at == 0 ? PROTO_MAX_LANES : 1;
		assert_int_equal(decode_rc(MSG_LANE_DOWN, bad, sizeof(bad)), -EBADMSG);
	}
	assert_int_equal(decode_rc(MSG_LANE_DOWN, expect, sizeof(expect) - 1), -EBADMSG);
	assert_int_equal(decode_copy(MSG_LANE_DOWN, expect, sizeof(expect), &d), 0);
	assert_int_equal(d.u.lane_down.lane, PROTO_MAX_LANES - 1);
	assert_true(d.u.lane_down.count == 0x102);
	assert_true((PROTO_CAPS_KNOWN & PROTO_CAP_RAILS) != 0);
}

static void test_assemble(void **state)
{
	struct msg m;
	struct wbuf w;
	uint8_t *p;
	size_t len;

	(void)state;
	sample_assemble(&m);
	assert_int_equal(encode_decode_rc(&m), 0);
	s_parts[1].offset++; /* a gap */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	s_parts[1].offset -= 2; /* an overlap */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	s_parts[1].offset++;
	m.u.assemble.size++; /* the parts fall short of it */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	m.u.assemble.size -= 2; /* past it */
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_assemble(&m);
	s_parts[2].len = 0;
	m.u.assemble.size = 8u << 20;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	s_parts[2].len = UINT64_MAX - (8u << 20) + 1; /* wraps to 0 */
	m.u.assemble.size = 0;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	s_parts[2].len = 17;
	static const char *const bad_part[] = { "", ".", "..", "a/b", "../x" };
	for (size_t i = 0; i < (sizeof(bad_part) / sizeof(bad_part[0])); i++) {
		sample_assemble(&m);
		strcpy(s_parts[1].name, bad_part[i]);
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	}
	strcpy(s_parts[1].name, "5.1");
	static const char *const bad_rel[] = { "", "/etc/passwd", "../up", "a/../../b", "a//b" };
	for (size_t i = 0; i < (sizeof(bad_rel) / sizeof(bad_rel[0])); i++) {
		sample_assemble(&m);
		m.u.assemble.name = (char *)bad_rel[i];
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
		sample_assemble(&m);
		m.u.assemble.staging = (char *)bad_rel[i];
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	}
	sample_assemble(&m);
	m.u.assemble.flags = 0x2;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_assemble(&m);
	m.u.assemble.mode = 010000;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_assemble(&m);
	m.u.assemble.mtime_nsec = 1000000000;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	sample_assemble(&m);
	m.u.assemble.count = 0;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m.u.assemble.count = PROTO_MAX_PARTS + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	/* By hand: a count of 0, one past the cap, 65535 with no parts behind it. */
	static const uint16_t bad_count[] = { 0, PROTO_MAX_PARTS + 1, UINT16_MAX, 4 };
	sample_assemble(&m);
	len = encode_ok(&m);
	p = payload();
	{
		/* The count: after flags, three strings and 36 bytes of fixed fields. */
		size_t at = 4 + 3 * 2 + strlen(s_asm_path) + strlen(s_asm_name) +
			    strlen(s_asm_staging) + 4 + 8 + 4 + 4 + 4 + 8;

		assert_int_equal((p[at] << 8) | p[at + 1], 3);
		for (size_t i = 0; i < (sizeof(bad_count) / sizeof(bad_count[0])); i++) {
			p[at] = (uint8_t)(bad_count[i] >> 8);
			p[at + 1] = (uint8_t)bad_count[i];
			assert_int_equal(decode_rc(MSG_ASSEMBLE, p, len), -EBADMSG);
		}
		p[at] = 0;
		p[at + 1] = 3;
		assert_int_equal(decode_rc(MSG_ASSEMBLE, p, len), 0);
	}
	/* A name of 256 bytes (over PROTO_MAX_PART_NAME), written by hand. */
	wbuf_init(&w, payload(), PROTO_MAX_PAYLOAD);
	wbuf_put_u32(&w, 0);
	wbuf_put_str16(&w, "m", PROTO_MAX_PATH);
	wbuf_put_str16(&w, "f", PROTO_MAX_PATH);
	wbuf_put_str16(&w, "s", PROTO_MAX_PATH);
	wbuf_put_u32(&w, 0644);
	wbuf_put_u64(&w, 0);
	wbuf_put_u32(&w, 0);
	wbuf_put_u32(&w, 0);
	wbuf_put_u32(&w, 0);
	wbuf_put_u64(&w, 1);
	wbuf_put_u16(&w, 1);
	{
		char *longname = repeat('n', PROTO_MAX_PART_NAME + 1);

		wbuf_put_str16(&w, longname, UINT16_MAX);
		free(longname);
	}
	wbuf_put_u64(&w, 0);
	wbuf_put_u64(&w, 1);
	wbuf_put_bytes(&w, (uint8_t[PROTO_HASH_LEN]){ 0 }, PROTO_HASH_LEN);
	assert_false(w.overflow);
	assert_int_equal(decode_rc(MSG_ASSEMBLE, payload(), w.len), -EBADMSG);
	/* A peer without the capability hears INTEGRITY, not a code it does not know. */
	assert_int_equal(proto_err_for_peer(PERR_ASSEMBLY, PROTO_CAP_TCP), PERR_INTEGRITY);
	assert_int_equal(proto_err_for_peer(PERR_ASSEMBLY, PROTO_CAP_ASSEMBLE), PERR_ASSEMBLY);
}

static void test_bad_list(void **state)
{
	struct msg m;
	size_t len;
	char *longest = repeat('p', PROTO_MAX_PATH);

	(void)state;
	sample(MSG_LIST, &m);
	len = encode_ok(&m);
	assert_int_equal(decode_rc(MSG_LIST, payload(), len), 0);
	for (unsigned bit = 5; bit < 32; bit++) {
		m.u.list.flags = 1u << bit;
		len = encode_ok(&m);
		assert_int_equal(decode_rc(MSG_LIST, payload(), len), -EBADMSG);
	}
	m.u.list.flags = 0;
	strcpy(m.u.list.path, longest);
	len = encode_ok(&m);
	assert_int_equal(decode_rc(MSG_LIST, payload(), len), 0);
	assert_int_equal(decode_last_string_grown(MSG_LIST, payload(), len, PROTO_MAX_PATH),
			 -EBADMSG);
	free(longest);
}

/* Encode n SUMS entries as a hostile daemon might (id, status, hash byte 15). */
static int decode_sums_raw(uint16_t count, size_t n, uint32_t id, uint32_t status, uint8_t last)
{
	struct wbuf w;
	uint8_t *buf = payload(), hash[PROTO_HASH_LEN] = { [15] = last };

	wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
	wbuf_put_u16(&w, count);
	for (size_t i = 0; i < n; i++) {
		wbuf_put_u32(&w, id);
		wbuf_put_u32(&w, status);
		wbuf_put_bytes(&w, hash, sizeof(hash));
	}
	assert_false(w.overflow);
	return decode_rc(MSG_SUMS, buf, w.len);
}

/* SUMS: a capped count that matches the payload exactly, ids, statuses, zero hashes on failure. */
static void test_bad_sums(void **state)
{
	struct proto_sum *sums = calloc(PROTO_MAX_BATCH + 1, sizeof(*sums));
	struct msg m;

	(void)state;
	assert_non_null(sums);
	assert_int_equal(decode_sums_raw(1, 1, 1, PERR_OK, 7), 0);
	assert_int_equal(decode_sums_raw(0, 0, 1, PERR_OK, 0), 0);
	assert_int_equal(decode_sums_raw(1, 1, 0, PERR_OK, 7), -EBADMSG);      /* id 0 */
	assert_int_equal(decode_sums_raw(1, 1, 1, PERR_MAX + 1, 0), -EBADMSG); /* status */
	assert_int_equal(decode_sums_raw(1, 1, 1, PERR_SKIPPED, 0), -EBADMSG);
	assert_int_equal(decode_sums_raw(1, 1, 1, PERR_SUM_WANTED, 0), -EBADMSG);
	assert_int_equal(decode_sums_raw(1, 1, 1, PERR_IO, 0), 0);
	assert_int_equal(decode_sums_raw(1, 1, 1, PERR_IO, 7), -EBADMSG); /* hash with a failure */
	assert_int_equal(decode_sums_raw(2, 1, 1, PERR_OK, 7), -EBADMSG); /* count over payload */
	assert_int_equal(decode_sums_raw(1, 2, 1, PERR_OK, 7), -EBADMSG); /* trailing entry */
	assert_int_equal(decode_sums_raw(0xffff, 0, 1, PERR_OK, 7), -EBADMSG);
	assert_int_equal(decode_sums_raw(PROTO_MAX_BATCH + 1, PROTO_MAX_BATCH + 1, 1, PERR_OK, 7),
			 -EBADMSG);
	for (size_t i = 0; i <= PROTO_MAX_BATCH; i++) {
		sums[i] = (struct proto_sum){ .id = (uint32_t)i + 1, .status = PERR_OK };
	}
	m = (struct msg){ .type = MSG_SUMS, .u.sums = { .count = PROTO_MAX_BATCH, .sums = sums } };
	round_trip(&m);
	m.u.sums.count = PROTO_MAX_BATCH + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m = (struct msg){ .type = MSG_SUMS };
	round_trip(&m);
	free(sums);
}

/* A LIST_ATTRS of n records of fields, each (id, status, digests ending in last, group). */
static int decode_lattrs_raw(uint8_t fields, uint8_t reserved, uint16_t count, size_t n,
			     uint32_t id, uint32_t status, uint8_t last)
{
	struct wbuf w;
	uint8_t *buf = payload(), hash[PROTO_HASH_LEN] = { [15] = last };

	wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
	wbuf_put_u8(&w, fields);
	wbuf_put_u8(&w, reserved);
	wbuf_put_u16(&w, count);
	for (size_t i = 0; i < n; i++) {
		wbuf_put_u32(&w, id);
		wbuf_put_u32(&w, status);
		for (unsigned k = 0; k < PROTO_LATTR_DIGESTS; k++) {
			if (fields & (1u << k)) {
				wbuf_put_bytes(&w, hash, sizeof(hash));
			}
		}
		if (fields & PROTO_LATTR_LINKS) {
			wbuf_put_u64(&w, 42);
		}
	}
	assert_false(w.overflow);
	return decode_rc(MSG_LIST_ATTRS, buf, w.len);
}

/* LIST_ATTRS: known fields, PRIVILEGED only with XATTRS, records as fields says, statuses. */
static void test_bad_list_attrs(void **state)
{
	const uint8_t x = PROTO_LATTR_XATTRS, l = PROTO_LATTR_LINKS;
	struct msg m;

	(void)state;
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 1, 1, PERR_OK, 7), 0);
	assert_int_equal(decode_lattrs_raw(l, 0, 2, 2, 1, PERR_OK, 0), 0);
	assert_int_equal(decode_lattrs_raw(PROTO_LATTR_KNOWN, 0, 0, 0, 1, PERR_OK, 0), 0);
	assert_int_equal(decode_lattrs_raw(0, 0, 0, 0, 1, PERR_OK, 0), -EBADMSG); /* no fields */
	assert_int_equal(decode_lattrs_raw(0x10 | x, 0, 1, 1, 1, PERR_OK, 0), -EBADMSG);
	assert_int_equal(decode_lattrs_raw(PROTO_LATTR_PRIVILEGED, 0, 1, 1, 1, PERR_OK, 0),
			 -EBADMSG);
	assert_int_equal(decode_lattrs_raw(x, 1, 1, 1, 1, PERR_OK, 0), -EBADMSG); /* reserved */
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 1, 0, PERR_OK, 0), -EBADMSG); /* id 0 */
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 1, 1, PERR_MAX + 1, 0), -EBADMSG);
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 1, 1, PERR_SKIPPED, 0), -EBADMSG);
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 1, 1, PERR_IO, 0), 0);
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 1, 1, PERR_IO, 7), -EBADMSG);
	assert_int_equal(decode_lattrs_raw(x | l, 0, 2, 1, 1, PERR_OK, 7), -EBADMSG); /* short */
	assert_int_equal(decode_lattrs_raw(x, 0, 1, 2, 1, PERR_OK, 7), -EBADMSG);     /* trailing */
	assert_int_equal(
	    decode_lattrs_raw(l, 0, PROTO_MAX_BATCH + 1, PROTO_MAX_BATCH + 1, 1, PERR_OK, 0),
	    -EBADMSG);
	/* The encoder keeps the same rules. */
	m = (struct msg){ .type = MSG_LIST_ATTRS, .u.list_attrs = { .fields = 0 } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m.u.list_attrs.fields = PROTO_LATTR_PRIVILEGED;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	m.u.list_attrs.fields = PROTO_LATTR_LINKS;
	round_trip(&m);
}

/* Encode one module the way a hostile daemon might, past what our encoder allows. */
static int decode_one_module_raw(uint8_t flags, const char *name, const char *comment)
{
	struct wbuf w;
	uint8_t *buf = payload();

	wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
	wbuf_put_u16(&w, 1);
	wbuf_put_u8(&w, flags);
	wbuf_put_str16(&w, name, 0xffff);
	wbuf_put_str16(&w, comment, 0xffff);
	assert_false(w.overflow);
	return decode_rc(MSG_MODULES, buf, w.len);
}

/* MODULES: every field checked, every count capped before allocation (issue 15). */
static void test_bad_modules(void **state)
{
	char *name = repeat('n', PROTO_MAX_MODNAME + 1);
	char *text = repeat('t', PROTO_MAX_TEXT + 1);
	struct proto_module *mods = calloc(PROTO_MAX_BATCH, sizeof(*mods));
	struct msg m;

	(void)state;
	assert_non_null(mods);
	assert_int_equal(decode_one_module_raw(PROTO_MOD_READ_ONLY, "ok", "fine"), 0);
	/* Unknown flags, read only and write only together. */
	for (unsigned bit = 2; bit < 8; bit++) {
		assert_int_equal(decode_one_module_raw((uint8_t)(1u << bit), "ok", ""), -EBADMSG);
	}
	assert_int_equal(
	    decode_one_module_raw(PROTO_MOD_READ_ONLY | PROTO_MOD_WRITE_ONLY, "ok", ""), -EBADMSG);
	/* A name: not empty, no '/', at most PROTO_MAX_MODNAME bytes. */
	assert_int_equal(decode_one_module_raw(0, "", ""), -EBADMSG);
	assert_int_equal(decode_one_module_raw(0, "a/b", ""), -EBADMSG);
	assert_int_equal(decode_one_module_raw(0, name + 1, ""), 0);
	assert_int_equal(decode_one_module_raw(0, name, ""), -EBADMSG);
	/* A comment: at most PROTO_MAX_TEXT bytes. */
	assert_int_equal(decode_one_module_raw(0, "ok", text + 1), 0);
	assert_int_equal(decode_one_module_raw(0, "ok", text), -EBADMSG);
	/* A full batch round-trips; one more is refused both ways. */
	for (size_t i = 0; i < PROTO_MAX_BATCH; i++) {
		mods[i] = s_mods[i % 3];
	}
	m = (struct msg){ .type = MSG_MODULES,
			  .u.modules = { .count = PROTO_MAX_BATCH, .mods = mods } };
	round_trip(&m);
	m.u.modules.count = PROTO_MAX_BATCH + 1;
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	{
		struct wbuf w;
		uint8_t *buf = payload();

		wbuf_init(&w, buf, PROTO_MAX_PAYLOAD);
		wbuf_put_u16(&w, PROTO_MAX_BATCH + 1);
		for (size_t i = 0; i <= PROTO_MAX_BATCH; i++) {
			wbuf_put_u8(&w, 0);
			wbuf_put_str16(&w, "m", PROTO_MAX_MODNAME);
			wbuf_put_str16(&w, "", PROTO_MAX_TEXT);
		}
		assert_false(w.overflow);
		assert_int_equal(decode_rc(MSG_MODULES, buf, w.len), -EBADMSG);
	}
	/* A huge count in a short payload: refused before allocating. */
	{
		const uint8_t p[6] = { 0xff, 0xff, 0, 0, 0, 0 };
		const uint8_t q[6] = { 0, 2, 0, 0, 0, 0 };

		assert_int_equal(decode_rc(MSG_MODULES, p, sizeof(p)), -EBADMSG);
		assert_int_equal(decode_rc(MSG_MODULES, q, sizeof(q)), -EBADMSG);
	}
	free(mods);
	free(name);
	free(text);
}

static void test_bad_deleted(void **state)
{
	struct proto_deleted d;
	struct msg m;
	size_t len;

	(void)state;
#define BAD_DELETED(field, value)                                                                 \
	do {                                                                                      \
		d = (struct proto_deleted){ .what = PROTO_DEL_DELETED,                            \
					    .name = s_del0,                                       \
					    .text = s_empty };                                    \
		d.field = (value);                                                                \
		m = (struct msg){ .type = MSG_DELETED, .u.deleted = { .count = 1, .ents = &d } }; \
		assert_int_equal(encode_decode_rc(&m), -EBADMSG);                                 \
	} while (0)
	BAD_DELETED(what, 0);
	BAD_DELETED(what, PROTO_DEL_FAILED + 1);
	BAD_DELETED(name, s_empty);
	BAD_DELETED(code, PERR_IO);	       /* a code on a deletion */
	BAD_DELETED(text, s_deltext);	       /* a text on a deletion */
	BAD_DELETED(what, PROTO_DEL_FAILED);   /* a failure without a code */
	BAD_DELETED(ftype, PROTO_FT_HARDLINK); /* a type no destination entry has */
#undef BAD_DELETED
	d = (struct proto_deleted){
		.what = PROTO_DEL_FAILED, .code = PERR_SKIPPED, .name = s_del0, .text = s_empty
	};
	m = (struct msg){ .type = MSG_DELETED, .u.deleted = { .count = 1, .ents = &d } };
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	d.code = PERR_MAX + 1;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	d.code = PERR_IO;
	assert_int_equal(encode_decode_rc(&m), 0);
	/* SUPPRESSED says nothing was looked at: no entries with it. */
	m.u.deleted.flags = PROTO_DELETED_SUPPRESSED;
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	/* Unknown flags. */
	m = (struct msg){ .type = MSG_DELETED, .u.deleted.flags = 0x2 };
	assert_int_equal(encode_decode_rc(&m), -EBADMSG);
	/* A count over the batch cap, and one the payload cannot hold. */
	m = (struct msg){ .type = MSG_DELETED };
	len = encode_ok(&m);
	payload()[1] = (uint8_t)((PROTO_MAX_BATCH + 1) >> 8);
	payload()[2] = (uint8_t)(PROTO_MAX_BATCH + 1);
	assert_int_equal(decode_rc(MSG_DELETED, payload(), len), -EBADMSG);
	payload()[1] = 0;
	payload()[2] = 1;
	assert_int_equal(decode_rc(MSG_DELETED, payload(), len), -EBADMSG);
	m = (struct msg){ .type = MSG_DELETED, .u.deleted = { .count = PROTO_MAX_BATCH + 1 } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
}

static void test_encode_refuses(void **state)
{
	struct msg m;
	int n;
	uint8_t small[PROTO_HDR_LEN + 512];
	char *over_path = repeat('p', PROTO_MAX_PATH + 1);
	char *over_text = repeat('t', PROTO_MAX_TEXT + 1);

	(void)state;
	/* Strings over their cap. */
	{
		struct proto_file f = s_files[0];

		f.name = over_path;
		m = (struct msg){ .type = MSG_FILES, .u.files = { .count = 1, .files = &f } };
		assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
		f = s_files[2];
		f.link = over_path;
		assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	}
	{
		struct proto_status st = { .id = 1, .text = over_text };

		m = (struct msg){ .type = MSG_FILES_ACK, .u.files_ack = { .count = 1, .st = &st } };
		assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);
	}
	m = (struct msg){ .type = MSG_GET, .u.get = { .count = 1, .paths = &over_path } };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EMSGSIZE);

	/* Buffer too small: below a header, one byte short, exact. */
	for (uint16_t t = 1; t <= N_TYPES; t++) {
		if (!type_defined(t)) {
			continue;
		}
		sample(t, &m);
		n = msg_encode(&m, small, sizeof(small));
		assert_true(n >= PROTO_HDR_LEN);
		assert_int_equal(msg_encode(&m, small, (size_t)n - 1), -EMSGSIZE);
		assert_int_equal(msg_encode(&m, small, (size_t)n), n);
		assert_int_equal(msg_encode(&m, small, PROTO_HDR_LEN - 1), -EMSGSIZE);
		assert_int_equal(msg_encode(&m, small, 0), -EMSGSIZE);
	}
	/* Unknown type. */
	m = (struct msg){ .type = 0 };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EINVAL);
	m = (struct msg){ .type = MSG_TYPE_MAX + 1 };
	assert_int_equal(msg_encode(&m, frame, sizeof(frame)), -EINVAL);
	free(over_path);
	free(over_text);
}

/* ---- slot descriptors --------------------------------------------------- */

static void test_desc(void **state)
{
	const struct proto_desc d = { .file_id = 0x01020304,
				      .len = 0x05060708,
				      .offset = 0x1112131415161718ull,
				      .seq = UINT64_MAX };
	const uint8_t expect[PROTO_DESC_LEN] = { 1,    2,    3,	   4,	 5,    6,    7,	   8,
						 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
						 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t b[PROTO_DESC_LEN];
	struct proto_desc out;

	(void)state;
	memset(b, 0xee, sizeof(b));
	proto_desc_encode(&d, b);
	assert_memory_equal(b, expect, sizeof(b)); /* and the tail is zeroed */
	assert_int_equal(proto_desc_decode(b, &out), 0);
	assert_int_equal(out.file_id, d.file_id);
	assert_int_equal(out.len, d.len);
	assert_true(out.offset == d.offset);
	assert_true(out.seq == d.seq);

	for (size_t i = 24; i < PROTO_DESC_LEN; i++) {
		proto_desc_encode(&d, b);
		b[i] = 0x80;
		memset(&out, 0x5a, sizeof(out));
		assert_int_equal(proto_desc_decode(b, &out), -EBADMSG);
		assert_int_equal(out.file_id, 0x5a5a5a5a); /* untouched on failure */
	}
	assert_int_equal(proto_imm(PROTO_IMM_CREDIT, 0x1234567), 0x02234567u);
}

/* A packed slot's descriptor: file id 0, offset 0, a piece count that fits its length. */
static void test_desc_packed(void **state)
{
	struct proto_desc d = { .len = 9 * 3, .seq = 7, .pieces = 3 }, out;
	uint8_t b[PROTO_DESC_LEN];

	(void)state;
	proto_desc_encode(&d, b);
	assert_int_equal(b[27], 3); /* pieces, big-endian u32 at 24 */
	assert_int_equal(proto_desc_decode(b, &out), 0);
	assert_int_equal(out.file_id, 0);
	assert_int_equal(out.pieces, 3);
	assert_int_equal(out.len, 27);

	/* Each piece needs its byte and its table entry. */
	d.len = 9 * 3 - 1;
	proto_desc_encode(&d, b);
	assert_int_equal(proto_desc_decode(b, &out), -EBADMSG);
	/* No pieces, too many, an offset: refused. */
	d = (struct proto_desc){ .len = 1u << 20, .pieces = 0 };
	proto_desc_encode(&d, b);
	assert_int_equal(proto_desc_decode(b, &out), -EBADMSG);
	d.pieces = PROTO_MAX_PIECES + 1;
	proto_desc_encode(&d, b);
	assert_int_equal(proto_desc_decode(b, &out), -EBADMSG);
	d.pieces = PROTO_MAX_PIECES;
	proto_desc_encode(&d, b);
	assert_int_equal(proto_desc_decode(b, &out), 0);
	d.offset = 4096;
	proto_desc_encode(&d, b);
	assert_int_equal(proto_desc_decode(b, &out), -EBADMSG);
	/* A file's chunk carries no piece count (the encoder writes none; a peer might). */
	d = (struct proto_desc){ .file_id = 1, .len = 10, .pieces = 2 };
	proto_desc_encode(&d, b);
	assert_int_equal(b[27], 0);
	b[27] = 2;
	assert_int_equal(proto_desc_decode(b, &out), -EBADMSG);
}

/* A packed slot's table: pieces back to back, accounting for every byte before the table. */
static void test_pieces(void **state)
{
	uint8_t slot[64] = { 0 };
	struct proto_piece out[4];
	struct proto_desc d = { .pieces = 2 };
	const struct proto_piece in[] = { { .id = 5, .len = 10 }, { .id = 9, .len = 6 } };

	(void)state;
	/* 16 bytes of data, then the table */
	proto_piece_encode(&in[0], slot + 16);
	proto_piece_encode(&in[1], slot + 24);
	d.len = 32;
	assert_int_equal(proto_pieces_decode(slot, &d, out), 0);
	assert_int_equal(out[0].id, 5);
	assert_int_equal(out[0].len, 10);
	assert_int_equal(out[0].at, 0);
	assert_int_equal(out[1].id, 9);
	assert_int_equal(out[1].at, 10);

	/* A byte more or less before the table than the pieces account for. */
	d.len = 33;
	memmove(slot + 17, slot + 16, 16);
	assert_int_equal(proto_pieces_decode(slot, &d, out), -EBADMSG);
	memmove(slot + 16, slot + 17, 16);
	d.len = 32;
	/* A piece of no bytes, id 0, a piece running into the table. */
	struct proto_piece bad = { .id = 5, .len = 0 };
	proto_piece_encode(&bad, slot + 16);
	assert_int_equal(proto_pieces_decode(slot, &d, out), -EBADMSG);
	bad = (struct proto_piece){ .id = 0, .len = 10 };
	proto_piece_encode(&bad, slot + 16);
	assert_int_equal(proto_pieces_decode(slot, &d, out), -EBADMSG);
	bad = (struct proto_piece){ .id = 5, .len = 17 };
	proto_piece_encode(&bad, slot + 16);
	assert_int_equal(proto_pieces_decode(slot, &d, out), -EBADMSG);
	bad = (struct proto_piece){ .id = 5, .len = UINT32_MAX };
	proto_piece_encode(&bad, slot + 16);
	assert_int_equal(proto_pieces_decode(slot, &d, out), -EBADMSG);
	/* Not a packed descriptor at all. */
	proto_piece_encode(&in[0], slot + 16);
	d.file_id = 1;
	assert_int_equal(proto_pieces_decode(slot, &d, out), -EBADMSG);
}

/* ---- wire reader and writer --------------------------------------------- */

static void test_rbuf_latches(void **state)
{
	const uint8_t in[] = { 0x12, 0x34, 0x56, 0x78, 0x9a };
	struct rbuf r;
	uint8_t bytes[4] = { 1, 2, 3, 4 };

	(void)state;
	rbuf_init(&r, in, sizeof(in));
	assert_int_equal(rbuf_get_u16(&r), 0x1234);
	assert_false(r.error);
	assert_int_equal(rbuf_get_u32(&r), 0); /* 3 bytes left: refused, not partial */
	assert_true(r.error);
	assert_int_equal(rbuf_left(&r), 3);
	assert_int_equal(rbuf_get_u8(&r), 0); /* latched: even a byte that exists is refused */
	assert_true(r.error);
	rbuf_get_bytes(&r, bytes, sizeof(bytes));
	assert_memory_equal(bytes, "\0\0\0\0", 4);

	rbuf_init(&r, in, sizeof(in));
	assert_true(rbuf_get_u64(&r) == 0);
	assert_true(r.error);

	rbuf_init(&r, in, 0);
	assert_int_equal(rbuf_get_u8(&r), 0);
	assert_true(r.error);

	rbuf_init(&r, in, sizeof(in));
	assert_int_equal(rbuf_get_u32(&r), 0x12345678);
	assert_int_equal(rbuf_get_u8(&r), 0x9a);
	assert_false(r.error);
	assert_int_equal(rbuf_left(&r), 0);
}

static void test_rbuf_str16(void **state)
{
	const uint8_t ok[] = { 0, 3, 'a', 'b', 'c' };
	const uint8_t nul[] = { 0, 3, 'a', 0, 'c' };
	const uint8_t longer[] = { 0, 6, 'a', 'b', 'c' };
	char out[8];
	struct rbuf r;

	(void)state;
	rbuf_init(&r, ok, sizeof(ok));
	rbuf_get_str16(&r, out, sizeof(out), 7);
	assert_false(r.error);
	assert_string_equal(out, "abc");

	rbuf_init(&r, ok, sizeof(ok));
	rbuf_get_str16(&r, out, sizeof(out), 2); /* over max */
	assert_true(r.error);
	assert_string_equal(out, "");

	rbuf_init(&r, ok, sizeof(ok));
	rbuf_get_str16(&r, out, 3, 100); /* no room for the NUL */
	assert_true(r.error);

	rbuf_init(&r, nul, sizeof(nul));
	rbuf_get_str16(&r, out, sizeof(out), 7);
	assert_true(r.error);

	rbuf_init(&r, longer, sizeof(longer));
	rbuf_get_str16(&r, out, sizeof(out), 7);
	assert_true(r.error);
}

static void test_wbuf_latches(void **state)
{
	uint8_t buf[8];
	struct wbuf w;

	(void)state;
	memset(buf, 0xee, sizeof(buf));
	wbuf_init(&w, buf, 5);
	wbuf_put_u32(&w, 0x01020304);
	assert_false(w.overflow);
	wbuf_put_u16(&w, 0xffff); /* 1 byte of room: refused whole */
	assert_true(w.overflow);
	assert_int_equal(w.len, 4);
	wbuf_put_u8(&w, 0xff); /* latched: even a byte that fits is refused */
	assert_int_equal(w.len, 4);
	assert_memory_equal(buf, "\x01\x02\x03\x04\xee\xee\xee\xee", 8);

	wbuf_init(&w, buf, sizeof(buf));
	wbuf_put_u64(&w, 1);
	assert_false(w.overflow);
	wbuf_put_bytes(&w, "", 0);
	assert_false(w.overflow);
	wbuf_put_u8(&w, 0);
	assert_true(w.overflow);

	/* str16 over its max latches without writing the length. */
	wbuf_init(&w, buf, sizeof(buf));
	wbuf_put_str16(&w, "abc", 2);
	assert_true(w.overflow);
	assert_int_equal(w.len, 0);
	wbuf_init(&w, buf, sizeof(buf));
	wbuf_put_str16(&w, "abc", 3);
	assert_false(w.overflow);
	assert_int_equal(w.len, 5);
	assert_memory_equal(buf, "\0\3abc", 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hdr_round_trip),
		cmocka_unit_test(test_hdr_bad_fields),
		cmocka_unit_test(test_device_codes),
		cmocka_unit_test(test_hdr_length_and_type),
		cmocka_unit_test(test_round_trip_every_type),
		cmocka_unit_test(test_round_trip_edges),
		cmocka_unit_test(test_string_caps),
		cmocka_unit_test(test_string_longer_than_payload),
		cmocka_unit_test(test_embedded_nul),
		cmocka_unit_test(test_truncated_every_byte),
		cmocka_unit_test(test_decode_refuses_oversize_and_unknown),
		cmocka_unit_test(test_lists_at_batch_cap),
		cmocka_unit_test(test_lists_huge_count),
		cmocka_unit_test(test_encode_payload_cap),
		cmocka_unit_test(test_bad_hello),
		cmocka_unit_test(test_bad_open),
		cmocka_unit_test(test_bad_open_ok),
		cmocka_unit_test(test_open_ok_rails),
		cmocka_unit_test(test_bench),
		cmocka_unit_test(test_bad_ring),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_bad_xattrs),
		cmocka_unit_test(test_bad_status),
		cmocka_unit_test(test_itemize),
		cmocka_unit_test(test_bad_resume),
		cmocka_unit_test(test_bad_zeros),
		cmocka_unit_test(test_delta),
		cmocka_unit_test(test_assemble),
		cmocka_unit_test(test_lane_down),
		cmocka_unit_test(test_bad_list),
		cmocka_unit_test(test_bad_modules),
		cmocka_unit_test(test_bad_sums),
		cmocka_unit_test(test_bad_list_attrs),
		cmocka_unit_test(test_bad_deleted),
		cmocka_unit_test(test_encode_refuses),
		cmocka_unit_test(test_filter_checks),
		cmocka_unit_test(test_desc),
		cmocka_unit_test(test_desc_packed),
		cmocka_unit_test(test_pieces),
		cmocka_unit_test(test_rbuf_latches),
		cmocka_unit_test(test_rbuf_str16),
		cmocka_unit_test(test_wbuf_latches),
	};

	return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
