/* SPDX-License-Identifier: MIT */
/*
 * One valid instance of every control message type (see proto_testlib.h):
 * a fill function per type in samples[], and the data they point at. The
 * samples set every field, and the limits they touch (PERR_MAX, 07777,
 * unknown capability bits) travel unchanged.
 */
#include <string.h>

#include "proto_testlib.h"

static char s_name_reg[] = "dir/file.bin";
static char s_name_dir[] = "dir";
static char s_name_lnk[] = "dir/link";
static char s_link[] = "../target";
struct proto_file s_files[3] = {
	{ .id = 7,
	  .ftype = PROTO_FT_REG,
	  .mode = 0644,
	  .size = 123456789012ull,
	  .mtime_sec = -5,
	  .mtime_nsec = 999999999,
	  .uid = 1000,
	  .gid = 100,
	  .name = s_name_reg,
	  .linked = true },
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
struct proto_status s_st[2] = {
	{ .id = 7, .status = PERR_OK, .items = PROTO_ITEM_NEW, .text = s_text_empty },
	{ .id = 8, .status = PERR_MAX, .text = s_text_nospace },
};
static char s_get0[] = "mod/a";
char s_get1[] = "mod/b/c";
static char *s_paths[2] = { s_get0, s_get1 };
static char s_pat0[] = "*/", s_pat1[] = "/src/**.c", s_pat2[] = "*";
struct proto_filter_rule s_rules[3] = {
	{ .action = PROTO_FILTER_INCLUDE, .pattern = s_pat0 },
	{ .action = PROTO_FILTER_INCLUDE, .pattern = s_pat1 },
	{ .action = PROTO_FILTER_EXCLUDE, .pattern = s_pat2 },
};
static char s_mod0[] = "data", s_mod1[] = "backups", s_mod2[] = "inbox";
static char s_comment0[] = "main data", s_comment1[] = "";
struct proto_module s_mods[3] = {
	{ .flags = 0, .name = s_mod0, .comment = s_comment0 },
	{ .flags = PROTO_MOD_READ_ONLY, .name = s_mod1, .comment = s_comment1 },
	{ .flags = PROTO_MOD_WRITE_ONLY, .name = s_mod2, .comment = s_comment0 },
};

char s_xname0[] = "user.comment";
static char s_xname1[] = "system.posix_acl_access";
uint8_t s_xval0[] = "hello";
static uint8_t s_xval1[] = { 2, 0, 0, 0, 1, 0, 6, 0 };
static struct proto_xattr s_xattrs[3] = {
	{ .name = s_xname0, .value = s_xval0, .len = 5 },
	{ .name = s_xname1, .value = s_xval1, .len = sizeof(s_xval1) },
	{ .name = s_xname0, .value = s_xval0, .len = 0 },
};

char s_del0[] = "tree/extra";
static char s_del1[] = "tree/old/dir", s_del2[] = "tree/busy";
char s_deltext[] = "Permission denied", s_empty[] = "";
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
char s_asm_path[] = "mod/dst", s_asm_name[] = "tree/big.img",
     s_asm_staging[] = ".rdmacp-split.0123456789abcdef";
struct proto_part s_parts[3] = {
	{ .name = "5.0", .offset = 0, .len = 4u << 20, .hash = { 1, 2, 3 } },
	{ .name = "5.1", .offset = 4u << 20, .len = 4u << 20, .hash = { [15] = 9 } },
	{ .name = "5.2", .offset = 8u << 20, .len = 17, .hash = { 7 } },
};

void sample_assemble(struct msg *m)
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

/* ---- one fill function per type ------------------------------------------ */

static void sample_hello(struct msg *m)
{
	m->u.hello.min_version = 1;
	m->u.hello.max_version = 3;
	/* Unknown capability bits travel unchanged. */
	m->u.hello.caps = PROTO_CAP_TCP | PROTO_CAP_TREES | (1ull << 63);
	strcpy(m->u.hello.software, "rdmacp 0.1");
}

static void sample_error(struct msg *m)
{
	m->u.error.code = PERR_NO_MODULE;
	strcpy(m->u.error.text, "no such module");
}

static void sample_open(struct msg *m)
{
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
}

static void sample_open_ok(struct msg *m)
{
	m->u.open_ok.transport = 2;
	m->u.open_ok.lanes = 3;
	m->u.open_ok.data_port = 40001;
	m->u.open_ok.chunk_size = 1u << 16;
	m->u.open_ok.slots = 128;
	for (size_t i = 0; i < PROTO_TOKEN_LEN; i++) {
		m->u.open_ok.token[i] = (uint8_t)(0xa0 + i);
	}
	m->u.open_ok.lanes_sealed = PROTO_LANES_SEALED;
}

static void sample_ring(struct msg *m)
{
	m->u.ring.addr = 0x7f0000001000ull;
	m->u.ring.desc_addr = 0x7f0000100000ull;
	m->u.ring.slots = 16;
	m->u.ring.slot_size = 1u << 20;
	m->u.ring.nkeys = 2;
	m->u.ring.rkey[0] = 0xdeadbeef;
	m->u.ring.rkey[1] = 0x01020304;
}

static void sample_files(struct msg *m)
{
	m->u.files.count = 3;
	m->u.files.files = s_files;
}

static void sample_files_ack(struct msg *m)
{
	m->u.files_ack.count = 2;
	m->u.files_ack.st = s_st;
}

static void sample_file_done(struct msg *m)
{
	m->u.file_done.id = 7;
	m->u.file_done.status = PERR_OK;
	m->u.file_done.bytes = 123456789012ull;
	for (size_t i = 0; i < PROTO_HASH_LEN; i++) {
		m->u.file_done.hash[i] = (uint8_t)(i * 17);
	}
	strcpy(m->u.file_done.text, "done");
}

static void sample_file_result(struct msg *m)
{
	m->u.file_result.id = 7;
	m->u.file_result.status = PERR_INTEGRITY;
	strcpy(m->u.file_result.text, "checksum mismatch");
}

static void sample_get(struct msg *m)
{
	m->u.get.count = 2;
	m->u.get.paths = s_paths;
}

static void sample_end(struct msg *m)
{
	m->u.end.files = 3;
	m->u.end.bytes = UINT64_MAX;
}

/* PING, PONG */
static void sample_ping(struct msg *m)
{
	m->u.ping.nonce = 0x0102030405060708ull;
}

static void sample_entry_failed(struct msg *m)
{
	m->u.entry_failed.status = PERR_PERMISSION;
	strcpy(m->u.entry_failed.name, "tree/a\nb");
	strcpy(m->u.entry_failed.text, "open: Permission denied");
}

static void sample_resume(struct msg *m)
{
	m->u.resume.id = 7;
	m->u.resume.count = 2;
	m->u.resume.r[0] = (struct proto_range){ .offset = 0, .len = 3u << 20 };
	m->u.resume.r[1] = (struct proto_range){ .offset = 5u << 20, .len = 12345 };
}

static void sample_list(struct msg *m)
{
	m->u.list.flags = PROTO_LIST_FLAGS_KNOWN;
	strcpy(m->u.list.path, "mod/dir/");
}

static void sample_modules(struct msg *m)
{
	m->u.modules.count = 3;
	m->u.modules.mods = s_mods;
}

static void sample_xattrs(struct msg *m)
{
	m->u.xattrs.id = 0x01020304;
	m->u.xattrs.count = 3;
	m->u.xattrs.x = s_xattrs;
}

static void sample_filter(struct msg *m)
{
	m->u.filter.count = 3;
	m->u.filter.rules = s_rules;
}

static void sample_deleted(struct msg *m)
{
	m->u.deleted.count = 3;
	m->u.deleted.ents = s_deleted;
}

static void sample_sums(struct msg *m)
{
	m->u.sums.count = 3;
	m->u.sums.sums = s_sums;
}

static void sample_list_attrs(struct msg *m)
{
	m->u.list_attrs.fields = PROTO_LATTR_KNOWN;
	m->u.list_attrs.count = 3;
	m->u.list_attrs.ents = s_lattrs;
}

static void sample_bench(struct msg *m)
{
	m->u.bench.transport = 1;
	m->u.bench.lanes = 4;
	m->u.bench.chunk_size = 1u << 20;
	m->u.bench.slots = 64;
	m->u.bench.bytes = 10ull << 30;
	m->u.bench.seed = 0x0102030405060708ull;
}

static void sample_zeros(struct msg *m)
{
	m->u.zeros.id = 9;
	m->u.zeros.count = 2;
	m->u.zeros.r[0] = (struct proto_range){ .offset = 1u << 20, .len = 4u << 20 };
	m->u.zeros.r[1] = (struct proto_range){ .offset = 8u << 20, .len = 777 };
}

static void sample_assembled(struct msg *m)
{
	m->u.assembled.size = (8u << 20) + 17;
}

static void sample_lane_down(struct msg *m)
{
	m->u.lane_down.lane = 3;
	m->u.lane_down.count = 0x0102030405060708ull;
}

static char s_rhost0[] = "node2.example", s_rhost1[] = "10.0.0.3";
static char s_rpath0[] = "data/in/set", s_rpath1[] = "scratch";
uint8_t s_self_ticket[] = { 'R', 'D', 'M', 'A', 'C', 'P', 'T', '1', 0, 1, 2 };
static uint8_t s_ticket0[] = { 1, 2, 3, 4, 5 }, s_ticket1[] = { 0xff };
struct proto_relay_hop s_hops[2] = {
	{ .host = s_rhost0, .port = 7777, .path = s_rpath0, .ticket = s_ticket0, .ticket_len = 5 },
	{ .host = s_rhost1, .port = 65535, .path = s_rpath1, .ticket = s_ticket1, .ticket_len = 1 },
};

static void sample_relay(struct msg *m)
{
	m->u.relay.self_ticket = s_self_ticket;
	m->u.relay.self_ticket_len = sizeof(s_self_ticket);
	m->u.relay.count = 2;
	m->u.relay.hops = s_hops;
}

static char s_rtext[] = "upstream node2.example failed";

static void sample_relay_result(struct msg *m)
{
	m->u.relay_result.index = 2;
	m->u.relay_result.status = PROTO_RELAY_FAILED;
	m->u.relay_result.exit_code = 255;
	m->u.relay_result.files_ok = 0x0102030405060708ull;
	m->u.relay_result.files_failed = 3;
	m->u.relay_result.bytes = UINT64_MAX;
	m->u.relay_result.host = s_rhost1;
	m->u.relay_result.text = s_rtext;
}

static void sample_delta(struct msg *m)
{
	m->u.delta.id = 11;
	m->u.delta.kind = PROTO_DELTA_SUMS;
	m->u.delta.first = 256;
	m->u.delta.count = 3;
	for (size_t i = 0; i < 3; i++) {
		memset(m->u.delta.sums[i], (int)(0xa0 + i), PROTO_HASH_LEN);
	}
}

/* BYE has no fields. */
static void sample_nothing(struct msg *m)
{
}

static void (*const samples[MSG_TYPE_MAX + 1])(struct msg *m) = {
	[MSG_HELLO] = sample_hello,
	[MSG_ERROR] = sample_error,
	[MSG_OPEN] = sample_open,
	[MSG_OPEN_OK] = sample_open_ok,
	[MSG_RING] = sample_ring,
	[MSG_FILES] = sample_files,
	[MSG_FILES_ACK] = sample_files_ack,
	[MSG_FILE_DONE] = sample_file_done,
	[MSG_FILE_RESULT] = sample_file_result,
	[MSG_GET] = sample_get,
	[MSG_END] = sample_end,
	[MSG_PING] = sample_ping,
	[MSG_PONG] = sample_ping,
	[MSG_ENTRY_FAILED] = sample_entry_failed,
	[MSG_RESUME] = sample_resume,
	[MSG_LIST] = sample_list,
	[MSG_MODULES] = sample_modules,
	[MSG_XATTRS] = sample_xattrs,
	[MSG_FILTER] = sample_filter,
	[MSG_DELETED] = sample_deleted,
	[MSG_SUMS] = sample_sums,
	[MSG_LIST_ATTRS] = sample_list_attrs,
	[MSG_BENCH] = sample_bench,
	[MSG_ZEROS] = sample_zeros,
	[MSG_ASSEMBLE] = sample_assemble,
	[MSG_ASSEMBLED] = sample_assembled,
	[MSG_LANE_DOWN] = sample_lane_down,
	[MSG_DELTA] = sample_delta,
	[MSG_RELAY] = sample_relay,
	[MSG_RELAY_RESULT] = sample_relay_result,
	[MSG_BYE] = sample_nothing,
};

void sample(uint16_t type, struct msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	if (type < sizeof(samples) / sizeof(samples[0]) && samples[type]) {
		samples[type](m);
	} else {
		fail();
	}
}

void sample_open_delete(struct msg *m)
{
	sample(MSG_OPEN, m);
	m->u.open.flags = PROTO_OPEN_RECURSIVE | PROTO_OPEN_PRESERVE | PROTO_OPEN_DELETE;
	m->u.open.max_delete = 0x0102030405060708ull;
}
